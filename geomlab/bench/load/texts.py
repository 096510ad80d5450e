"""The load benchmark's inputs: the view pages it opens with the model kinds each suits, a text per session,
and the bundled checkpoints that suit each view. Source: design choice."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable

from geomlab.core.locate import bundled_dir
from geomlab.teach.views import VIEWS

#: Every view page's URL path, in page order (the view registry, :data:`geomlab.teach.views.VIEWS`).
DEFAULT_VIEWS = tuple(VIEWS)

#: Text used when Tiny Shakespeare is not in GEOMLAB_DATA_DIR (public domain: Sonnet 18 and Hamlet III.1).
BUILTIN_TEXT = (
    "Shall I compare thee to a summer's day?\nThou art more lovely and more temperate:\n"
    "Rough winds do shake the darling buds of May,\nAnd summer's lease hath all too short a date;\n"
    "Sometime too hot the eye of heaven shines,\nAnd often is his gold complexion dimm'd;\n"
    "And every fair from fair sometime declines,\nBy chance or nature's changing course untrimm'd;\n"
    "But thy eternal summer shall not fade,\nNor lose possession of that fair thou ow'st;\n"
    "Nor shall Death brag thou wander'st in his shade,\nWhen in eternal lines to time thou grow'st:\n"
    "So long as men can breathe or eyes can see,\nSo long lives this, and this gives life to thee.\n\n"
    "HAMLET:\nTo be, or not to be, that is the question:\nWhether 'tis nobler in the mind to suffer\n"
    "The slings and arrows of outrageous fortune,\nOr to take arms against a sea of troubles\n"
    "And by opposing end them. To die: to sleep;\nNo more; and by a sleep to say we end\n"
    "The heart-ache and the thousand natural shocks\nThat flesh is heir to, 'tis a consummation\n"
    "Devoutly to be wish'd. To die, to sleep;\nTo sleep: perchance to dream: ay, there's the rub;\n"
    "For in that sleep of death what dreams may come\nWhen we have shuffled off this mortal coil,\n"
    "Must give us pause: there's the respect\nThat makes calamity of so long life;\n"
)


def corpus_text() -> str:
    """Tiny Shakespeare from ``$GEOMLAB_DATA_DIR/tinyshakespeare/input.txt`` when it is there, else
    :data:`BUILTIN_TEXT` (never downloads)."""
    base = os.environ.get("GEOMLAB_DATA_DIR")
    if base:
        path = Path(base) / "tinyshakespeare" / "input.txt"
        if path.is_file():
            return path.read_text(encoding="utf-8")
    return BUILTIN_TEXT


def session_texts(n: int, chars: int, source: str | None = None) -> list[str]:
    """``n`` texts of ``chars`` characters each, pairwise different: slices of ``source`` (default
    :func:`corpus_text`) at offsets spread over it; a source shorter than ``chars + n`` is repeated.

    Raises ``ValueError`` for ``n < 0`` or ``chars < 1``."""
    if n < 0 or chars < 1:
        raise ValueError(f"need n >= 0 and chars >= 1, got n={n}, chars={chars}")
    src = source if source is not None else corpus_text()
    if not src:
        raise ValueError("empty source text")
    while len(src) < chars + n:
        src = src + src
    span = len(src) - chars
    out: list[str] = []
    for i in range(n):
        start = (i * span) // max(n, 1)
        text = src[start:start + chars]
        shift = 0
        while text in out and shift < span:  # tiny sources: nudge until the text differs
            shift += 1
            s = (start + shift) % (span + 1)
            text = src[s:s + chars]
        out.append(text)
    return out


def bundled_checkpoints(folder: Path | None = None) -> list[tuple[str, str, str]]:
    """``[(name, kind, vocab level)]`` of the bundled checkpoints (``assets/checkpoints``, or
    ``GEOMLAB_BUNDLED_DIR``): folders ``NAME/`` and flat pairs ``NAME.json``, sorted by name; one without its
    weights is left out. Reads only the small JSON files."""
    folder = folder or bundled_dir()
    out = []
    for path in sorted(Path(folder).iterdir()):
        if path.is_dir():  # config.json, and vocab.json (an older folder: the vocabulary in geomlab.json)
            files = [path / "config.json", path / "vocab.json", path / "geomlab.json"]
            weights = path / "model.safetensors"
        elif path.suffix == ".json":
            files, weights = [path], path.with_suffix(".safetensors")
        else:
            continue
        try:
            meta = [json.loads(f.read_text(encoding="utf-8")) if f.is_file() else {} for f in files]
        except (OSError, ValueError):
            continue
        config = meta[0] if path.is_dir() else meta[0].get("model_config") or {}
        vocab = (meta[1] or meta[2].get("vocab") or {}) if path.is_dir() else meta[0].get("vocab") or {}
        if config.get("kind") and weights.is_file():
            out.append((path.stem if path.suffix == ".json" else path.name, str(config["kind"]),
                        str(vocab.get("level", "char"))))
    return out


def checkpoints_for(views: Iterable[str], found: list[tuple[str, str, str]]) -> dict[str, list[str]]:
    """view slug -> bundled checkpoint names that read characters and suit the view (kinds in the order
    the view prefers, :attr:`geomlab.teach.views.ViewSpec.preferred_kinds`, e.g. Tangent updates on an
    OSMFormer; names sorted within a kind); an empty list means the app picks one itself."""
    out: dict[str, list[str]] = {}
    for slug in views:
        names: list[str] = []
        for kind in (VIEWS[slug].preferred_kinds if slug in VIEWS else ()):
            names += [n for n, k, level in found if k == kind and level == "char"]
        out[slug] = names
    return out

