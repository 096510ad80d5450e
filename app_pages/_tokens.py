"""The token panel of the view pages (token-level inspection): the text around the cursor as
clickable tokens (a click moves the page's one cursor, ``gl_pos``) and, for language models, the model's
top-k next-token predictions at the cursor with the surprisal of the token that follows.

Drawn by :func:`app_pages._views.render_view` in the column beside the page's first chart. The clickable text is an
``st.pills`` row (one pill per token; the cursor's pill is the selected one), keyed ``w_tok``: in the browser
its buttons are ``.st-key-w_tok button`` (stable selector for tests), in AppTest ``at.pills(key="w_tok")``.
Everything here reads the stored trace only (softmax of one logits row, well under a millisecond): no cache
entry, no model run.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from app_pages._messages import md_escape
from app_pages._state import K_POS
from geomlab.trace import predictions

K_TOK = "w_tok"                 # the pills widget (clickable text)
K_TOK_START = "_gl_tok_start"   # first position of the clickable window (kept while the cursor stays inside)
WINDOW = 40
"""Tokens of the clickable text (design choice: two to three rows of pills at a laptop's width)."""
MARGIN = 6
"""The window re-centres when the cursor comes within this many tokens of its edge (design choice: a click
does not make the text jump under the mouse, a cursor near the edge still shows context)."""
TOP_K = 5


def clickable_window(n: int, pos: int, start: int | None, window: int = WINDOW, margin: int = MARGIN
                     ) -> tuple[int, int]:
    """``(start, stop)`` of the clickable text: the previous window while ``pos`` stays at least ``margin``
    tokens inside it (or the text's own end is there), else a window centred on ``pos``; always within
    ``0..n`` and ``min(window, n)`` long."""
    size = min(window, n)
    if start is not None and 0 <= start <= n - size:
        lo_ok = pos >= start + margin or start == 0
        hi_ok = pos < start + size - margin or start + size == n
        if start <= pos < start + size and lo_ok and hi_ok:
            return start, start + size
    start = max(0, min(pos - size // 2, n - size))
    return start, start + size


def pill_labels(labels: list[str], start: int, stop: int) -> dict[int, str]:
    """``position -> pill label`` of the window: the token (markdown-escaped), made unique with zero-width
    spaces after its repeats (``st.pills`` tells options apart by their label, so two ``'o'`` pills would
    otherwise select the same position)."""
    seen: dict[str, int] = {}
    out = {}
    for i in range(start, stop):
        lab = md_escape(labels[i])
        out[i] = lab + "\u200b" * seen.get(lab, 0)
        seen[lab] = seen.get(lab, 0) + 1
    return out


def _pick() -> None:
    """``on_change`` of the clickable text: the chosen position becomes the page's cursor."""
    v = st.session_state.get(K_TOK)
    if v is not None:
        st.session_state[K_POS] = int(v)


def is_language_model(entry: Any, tr: Any) -> bool:
    """Whether ``tr``'s outputs are next-token distributions over the checkpoint's vocabulary (not a group
    word problem's running products, not a real-valued task)."""
    if entry is not None and getattr(entry, "is_word_problem", False):
        return False
    return getattr(tr, "logits", None) is not None and tr.logits.ndim == 2 and tr.logits.shape[0] == tr.n_positions


def token_panel(entry: Any, tr: Any, pos: int, where: Any = None) -> None:
    """Draw the clickable text and under it, for a language model, the top-k predictions at ``pos``, in
    ``where`` (a column beside the page's first chart; default: here)."""
    n = int(tr.n_positions)
    labels = list(tr.labels)
    start, stop = clickable_window(n, pos, st.session_state.get(K_TOK_START))
    st.session_state[K_TOK_START] = start
    lm = is_language_model(entry, tr)
    st.session_state[K_TOK] = pos
    shown = pill_labels(labels, start, stop)
    with where or st.container():
        more = f" · positions {start}–{stop - 1} of {n:,}" if stop - start < n else ""
        st.pills(f"Text: click a token{more}", list(range(start, stop)), key=K_TOK,
                 required=True, on_change=_pick, width="content", wrap=True, format_func=shown.__getitem__,
                 help="Each token of the text around the cursor. The selected one is the cursor: every figure "
                      "on the page marks it, and a click on a chart moves it too. ␣ is a space, ↵ a new line; "
                      "the slider above reaches every position.")
        if not lm:
            st.caption("This checkpoint solves a group word problem: its output at each position is the running "
                       "product of the group elements so far, not a guess of the next token, so there is no "
                       "next-token prediction to show here.")
            return
        from app_pages._data import vocab_of

        try:
            pred = predictions.top_k(tr, pos, TOP_K, vocab=vocab_of(entry) if entry is not None else None)
        except ValueError as exc:
            st.caption(f"No prediction at this position: {md_escape(exc)}")
            return
        _prediction_table(pred, labels)


def _q(token: str) -> str:
    """A token in curly quotes for the prediction panel, so an apostrophe token reads as one (design choice)."""
    return f"“{md_escape(token)}”"


def _prediction_table(pred: predictions.Prediction, labels: list[str]) -> None:
    t = pred.cursor
    st.markdown(f"**Next token after position {t} {_q(labels[t])}**",
                help="The model's distribution over the token at the next position, given every token up to "
                     "the cursor (softmax of its output there). Surprisal −log₂ p: the bits the model needs for "
                     "the token that really follows; 0 when it was certain, log₂(vocabulary) when it guessed.")
    # one progress bar per guess (Streamlit's progress element ships with the page; a dataframe would pull in
    # its grid and Arrow bundles, ~0.5 s more before a view's first chart)
    for tok, i, p in zip(pred.tokens, pred.ids, pred.probs):
        mark = "  ✓" if i == pred.next_id else ""
        st.progress(min(max(float(p), 0.0), 1.0), text=f"{_q(tok)}{mark} · {100 * p:.1f}%")
    if pred.next_id is None:
        st.caption(f"The text ends here: nothing follows to score. Entropy {pred.entropy_bits:.2f} bits.")
        return
    rank = "its top guess" if pred.next_rank == 1 else f"its guess no. {pred.next_rank}"
    prob = f"{pred.next_prob:.3f}" if pred.next_prob >= 1e-3 else f"{pred.next_prob:.1e}"  # never "0.000"
    # the next position by its label, as the chips name it ('🙂→�'); the guesses above are vocabulary tokens
    st.caption(f"Actually next: {_q(labels[t + 1])} (position {t + 1}), p = {prob}, "
               f"{rank}: **surprisal {pred.next_bits:.2f} bits** (entropy of the guess {pred.entropy_bits:.2f} "
               "bits).")
