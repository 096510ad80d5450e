"""How much a curve varies along the text, said in a caption: the coefficient of variation of each row
(layer) of a layer x position array, so that a caption promises no spikes a flat curve does not have.
Design choice, documented in docs/views.md ("Defaults")."""

from __future__ import annotations

import numpy as np


def variation(values) -> np.ndarray:
    """The coefficient of variation ``std / |mean|`` of each row of ``values`` (shape ``(rows, positions)``
    or ``(positions,)``; NaN and inf ignored): how much a row varies along the text relative to its level
    (0 = flat). Shape ``(rows,)``; NaN for a row with fewer than 2 finite values, inf for a row with mean 0
    that varies. Source: design choice."""
    a = np.atleast_2d(np.asarray(values, dtype=np.float64))
    out = np.full(a.shape[0], np.nan)
    for i, row in enumerate(a):
        x = row[np.isfinite(row)]
        if len(x) < 2:
            continue
        mean, sd = abs(float(x.mean())), float(x.std())
        out[i] = sd / mean if mean > 0 else (np.inf if sd > 0 else 0.0)
    return out


def spread_note(values, what: str = "curve") -> str:
    """A caption sentence (leading space) saying how much each row of ``values`` (``(rows, positions)``)
    varies along the text, e.g. ``" Along the text each curve varies by 4%–9% of its mean (coefficient of
    variation)."``; ``""`` when no row has 2 finite values. Source: design choice."""
    cv = variation(values)
    cv = cv[np.isfinite(cv)]
    if not len(cv):
        return ""
    lo, hi = float(cv.min()), float(cv.max())
    amount = f"{lo:.0%}" if len(cv) == 1 or round(lo, 2) == round(hi, 2) else f"{lo:.0%}–{hi:.0%}"
    who = f"each {what}" if len(cv) > 1 else f"the {what}"
    return f" Along the text {who} varies by {amount} of its mean (coefficient of variation)."
