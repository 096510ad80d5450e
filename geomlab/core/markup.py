"""Caption markup: the text under a figure is Streamlit markdown with inline LaTeX (``$...$``).

Figure captions (:mod:`geomlab.figures`) and the explanations (:mod:`geomlab.teach.explain`) write their formulas
as inline LaTeX between single dollars, which ``st.caption``/``st.markdown`` render with KaTeX. Two helpers
keep that safe and portable (design choice):

* :func:`md_label` makes user text (a token, a checkpoint name) literal inside such markdown: a ``$`` in a
  token must never open a formula, a ``*`` never start emphasis;
* :func:`to_plain` and :func:`to_html` turn a caption back into readable text for places without KaTeX
  (``python -m geomlab trace --html``, logs, tests): ``$\\lVert \\Phi_t \\rVert$`` reads ``‖Φ_t‖`` and
  ``‖Φ<sub>t</sub>‖``.

No geomlab imports (figures, explain, the CLI and the app all use it). No streamlit.
"""

from __future__ import annotations

import html as _html
import re

#: Characters of user text that markdown, KaTeX (``$``) or Streamlit's ``:colour[...]`` could act on inside a
#: sentence (design choice: ``-``, ``.``, ``:`` and ``#`` only act at the start of a line, and labels sit
#: mid-sentence, so names like ``A: osm-rnn-o-s5`` stay unescaped and readable in the source text).
MD_LABEL_SPECIAL = set("\\`*_$[]<>~|")


def md_label(text: object) -> str:
    """``text`` made literal inside a markdown caption: the characters of :data:`MD_LABEL_SPECIAL` are
    backslash-escaped and newlines become spaces. ``md_label("$x*y$") == "\\\\$x\\\\*y\\\\$"``, which renders
    as ``$x*y$`` (no formula, no emphasis). :func:`to_plain` undoes the escapes."""
    return escape_chars(text, MD_LABEL_SPECIAL)


def escape_chars(text: object, special: str) -> str:
    """``str(text)`` with every character of ``special`` backslash-escaped and newlines made spaces (one
    line). The markdown escapers (:func:`md_label`, the app's ``md_escape``) differ only in ``special``.
    Design choice."""
    out = []
    for ch in str(text):
        if ch in "\r\n":
            out.append(" ")
        elif ch in special:
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


# ------------------------------------------------------------------ finding the formulas
_MATH = re.compile(r"(?<!\\)\$(.+?)(?<!\\)\$", re.S)


def split_math(text: str) -> list[tuple[bool, str]]:
    """``text`` cut into ``[(is_math, piece)]``: the pieces between unescaped single dollars are maths
    (without the dollars), the others markdown text. An unmatched ``$`` stays in the text."""
    out: list[tuple[bool, str]] = []
    last = 0
    for m in _MATH.finditer(text):
        if m.start() > last:
            out.append((False, text[last:m.start()]))
        out.append((True, m.group(1)))
        last = m.end()
    if last < len(text):
        out.append((False, text[last:]))
    return out


def check_latex(text: str) -> list[str]:
    """Problems of the inline LaTeX in ``text`` as sentences (empty when fine): an odd number of unescaped
    ``$``, or a formula with unbalanced ``{}`` or an empty formula. A cheap stand-in for KaTeX's parser."""
    problems = []
    bare = re.sub(r"\\.", "", text)  # escaped characters (\$, \{) do not count
    if bare.count("$") % 2:
        problems.append(f"odd number of $ in {text!r}")
    for is_math, piece in split_math(text):
        if not is_math:
            continue
        depth = 0
        for ch in re.sub(r"\\.", "", piece):
            depth += ch == "{"
            depth -= ch == "}"
            if depth < 0:
                break
        if depth != 0:
            problems.append(f"unbalanced braces in ${piece}$")
        if not piece.strip():
            problems.append("empty formula $$")
    return problems


# ------------------------------------------------------------------ LaTeX -> readable text
_SYMBOLS = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ϵ", "varepsilon": "ε", "eta": "η",
    "theta": "θ", "kappa": "κ", "lambda": "λ", "mu": "μ", "pi": "π", "rho": "ρ", "sigma": "σ", "tau": "τ",
    "phi": "ϕ", "varphi": "φ", "psi": "ψ", "omega": "ω", "Gamma": "Γ", "Delta": "Δ", "Theta": "Θ",
    "Lambda": "Λ", "Pi": "Π", "Sigma": "Σ", "Phi": "Φ", "Psi": "Ψ", "Omega": "Ω",
    "lVert": "‖", "rVert": "‖", "|": "‖", "Vert": "‖", "lvert": "|", "rvert": "|", "langle": "⟨",
    "rangle": "⟩", "lfloor": "⌊", "rfloor": "⌋", "cdot": "·", "cdots": "⋯", "ldots": "…", "dots": "…",
    "times": "×", "to": "→", "mapsto": "↦", "leftarrow": "←", "gets": "←", "rightarrow": "→", "le": "≤",
    "leq": "≤", "ge": "≥", "geq": "≥", "ne": "≠", "approx": "≈", "pm": "±", "in": "∈", "subset": "⊂",
    "subseteq": "⊆", "wedge": "∧", "odot": "⊙", "otimes": "⊗", "top": "ᵀ", "sum": "Σ", "prod": "Π",
    "infty": "∞", "partial": "∂", "nabla": "∇", "sqrt": "√", "log": "log", "exp": "exp", "cos": "cos",
    "sin": "sin", "arccos": "arccos", "det": "det", "max": "max", "min": "min", "ln": "ln", "dim": "dim",
    "mathfrak": "", "mathrm": "", "operatorname": "", "text": "", "mathbb": "", "mathcal": "", "hat": "",
    "tilde": "", "bar": "", "boldsymbol": "", "mathbf": "", "left": "", "right": "", "big": "", "Big": "",
    "quad": " ", "qquad": "  ", ",": " ", ";": " ", ":": " ", "!": "", " ": " ", "{": "{", "}": "}",
    "$": "$", "%": "%", "#": "#", "_": "_", "&": "&", "ell": "ℓ",
}
_OPERATORS = {"log", "exp", "cos", "sin", "arccos", "det", "max", "min", "ln", "dim"}
_BINARY = {"wedge", "to", "mapsto", "leftarrow", "gets", "rightarrow", "le", "leq", "ge", "geq", "ne", "approx",
           "in", "subset", "subseteq", "odot", "otimes", "times", "cdot", "pm"}
_FRAK = {"g": "𝔤", "u": "𝔲", "o": "𝔬"}
_BB = {"R": "ℝ", "C": "ℂ", "Z": "ℤ", "N": "ℕ"}
_ACCENT = {"hat": "\u0302", "tilde": "\u0303", "bar": "\u0304"}


def _group(s: str, i: int) -> tuple[str, int]:
    """The argument at ``s[i]``: a ``{...}`` group (without braces) or one character (or one macro)."""
    while i < len(s) and s[i] == " ":
        i += 1
    if i >= len(s):
        return "", i
    if s[i] == "{":
        depth, j = 0, i
        while j < len(s):
            if s[j] == "\\":
                j += 2
                continue
            depth += s[j] == "{"
            depth -= s[j] == "}"
            if depth == 0:
                return s[i + 1:j], j + 1
            j += 1
        return s[i + 1:], len(s)
    if s[i] == "\\":
        m = re.match(r"\\([A-Za-z]+|.)", s[i:])
        return m.group(0), i + len(m.group(0))
    return s[i], i + 1


def _convert(s: str, sub, sup) -> str:
    """LaTeX maths ``s`` as text; ``sub``/``sup`` wrap subscripts and superscripts."""
    out: list[str] = []
    i = 0
    while i < len(s):
        ch = s[i]
        if ch == "\\":
            m = re.match(r"\\([A-Za-z]+|.)", s[i:])
            name = m.group(1)
            i += len(m.group(0))
            if name.isalpha():
                while i < len(s) and s[i] == " ":  # a control word swallows the spaces after it
                    i += 1
            if name in ("frac", "tfrac", "dfrac"):
                num, i = _group(s, i)
                den, i = _group(s, i)
                n, d = _convert(num, sub, sup), _convert(den, sub, sup)
                wrap = (lambda x: x if len(x) == 1 or x.isalnum() else f"({x})")
                out.append(f"{wrap(n)}/{wrap(d)}")
            elif name == "sqrt":
                arg, i = _group(s, i)
                a = _convert(arg, sub, sup)
                out.append("√" + (a if len(a) == 1 else f"({a})"))
            elif name in ("mathfrak", "mathbb"):
                arg, i = _group(s, i)
                table = _FRAK if name == "mathfrak" else _BB
                out.append("".join(table.get(c, c) for c in arg))
            elif name in _ACCENT:
                arg, i = _group(s, i)
                a = _convert(arg, sub, sup)
                out.append(a + _ACCENT[name] if len(a) == 1 else a)
            elif name in ("mathrm", "operatorname", "text", "mathcal", "mathbf", "boldsymbol"):
                arg, i = _group(s, i)
                out.append(_convert(arg, sub, sup))
            else:
                word = _SYMBOLS.get(name, name)
                if name in _BINARY:
                    word = f" {word} "
                elif name in _OPERATORS:
                    if out and out[-1][-1:].isalnum():
                        word = " " + word
                    if re.match(r"[A-Za-z0-9]|\\[A-Za-z]", s[i:i + 2]):
                        word += " "
                out.append(word)
        elif ch in "_^":
            arg, i = _group(s, i + 1)
            a = _convert(arg, sub, sup)
            if ch == "^" and a in ("ᵀ", "*"):
                out.append("ᵀ" if a == "ᵀ" else "*")
            else:
                out.append((sub if ch == "_" else sup)(a))
        elif ch in "{}":
            i += 1
        elif ch == "-":
            out.append("−")
            i += 1
        elif ch == "~":
            out.append(" ")
            i += 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def latex_to_text(tex: str) -> str:
    """One LaTeX formula (no dollars) as plain Unicode text: ``\\lVert\\Phi_t\\rVert`` -> ``‖Φ_t‖``,
    ``z_{t-\\Delta}`` -> ``z_{t−Δ}``, ``x^t`` -> ``x^t``. Readable, not typeset."""
    return _squash(_convert(tex, lambda a: "_" + (a if len(a) == 1 else "{" + a + "}"),
                    lambda a: "^" + (a if len(a) == 1 else "{" + a + "}")))


def _squash(text: str) -> str:
    return re.sub(r"  +", " ", text).strip()


def _unescape(text: str) -> str:
    return re.sub(r"\\([\\`*_{}\[\]()<>#+\-.!|~:$&^@/])", r"\1", text)


def to_plain(caption: str) -> str:
    """A caption as plain text: formulas through :func:`latex_to_text`, markdown escapes removed
    (``\\$`` -> ``$``). Bold/italic markers are left as they are (captions use none)."""
    return "".join(latex_to_text(p) if m else _unescape(p) for m, p in split_math(caption))


def to_html(caption: str) -> str:
    """A caption as an HTML fragment (escaped): formulas as Unicode with ``<sub>``/``<sup>``, in ``<i>``;
    markdown escapes removed. For pages without KaTeX (``trace --html``)."""
    parts = []
    for is_math, piece in split_math(caption):
        if is_math:
            body = _convert(_html.escape(piece, quote=False), lambda a: f"<sub>{a}</sub>",
                            lambda a: f"<sup>{a}</sup>")
            parts.append(f"<i>{_squash(body)}</i>")
        else:
            parts.append(_html.escape(_unescape(piece)))
    return "".join(parts)
