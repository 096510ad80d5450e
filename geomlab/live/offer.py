"""What the app's Train page offers for a live run: the synthetic tasks, the parameter budgets, the registered
corpora on this machine and the CPU threads a run gets (:mod:`geomlab.live.runner` names them for the app).
Source: design choice."""

from __future__ import annotations

import os

#: Synthetic tasks offered by the app (no download needed): word problems of these groups.
SYNTHETIC_TASKS = {
    "S3": "word problem in S3 (6 elements, non-abelian)",
    "S5": "word problem in S5 (120 elements, non-abelian)",
    "A5": "word problem in A5 (60 elements, non-abelian, simple)",
    "Z5": "word problem in Z5 (5 elements, abelian)",
    "parity": "parity (Z2, abelian)",
}
#: Parameter budgets offered by the app (effective parameters).
BUDGETS = (5_000, 10_000, 20_000, 50_000, 100_000, 200_000)


def corpus_availability() -> dict[str, str | None]:
    """Registered corpora -> ``None`` when all its files are on this machine (``GEOMLAB_DATA_DIR`` or the
    cache), else a one-line reason. Never downloads."""
    from geomlab.data import corpora

    out: dict[str, str | None] = {}
    for name, spec in corpora.CORPORA.items():
        reason = None
        for rel in spec.files.values():
            try:
                corpora.locate(rel, download=False)
            except ValueError as exc:
                reason = str(exc)
                break
            except OSError as exc:
                reason = f"{rel}: {exc}"
                break
        out[name] = reason
    return out


def default_threads() -> int:
    """About half the CPU cores (at least 1): what the app gives a live run."""
    return max(1, (os.cpu_count() or 2) // 2)
