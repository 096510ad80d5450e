"""docs/results.md read as a reviewer reads it: every number once (a gap against another arm is the
verdict's seed-paired gap). The committed page is the one the command writes (test_fair.py), so the page-wide
checks read it directly."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGE = (REPO / "docs/results.md").read_text(encoding="utf-8")


def _section(md: str, heading: str) -> str:
    """The text under ``heading`` up to the next heading of any level."""
    start = md.index(heading) + len(heading)
    nxt = re.search(r"^#+ ", md[start:], flags=re.M)
    return md[start:start + nxt.start()] if nxt else md[start:]


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.split("|")[1:-1]]


def _row(label, seeds, test, valid=None, baseline=False, **kw):
    return {"label": label, "baseline": baseline, "seeds": seeds, "planned_seeds": seeds, "test": test,
            "valid": valid if valid is not None else test, "test_mean": sum(test) / len(test),
            "valid_mean": sum(valid if valid is not None else test) / len(test), "tokens_per_s_mean": None,
            "tokens_per_cpu_s": None, "failed_seeds": [], **kw}


# ------------------------------------------------------------------------------------------ one number each
def test_a_gap_against_another_arm_pairs_the_seeds_both_finished():
    """A model read against another arm (``versus``) that finished fewer seeds: the gap and its interval over
    the seeds both finished, the same numbers as the verdict's :func:`~geomlab.report.page.paired`, not the
    difference of the means over different seeds with "no interval yet"."""
    from geomlab.report.aggregation import compare_to_baseline, compare_to_versus
    from geomlab.report.page import paired
    from geomlab.report.render_parts import versus_phrase

    arm = _row("Grassmann", [0, 1, 2], [1.836, 1.839, 1.835], versus="Twin, 6 layers")
    twin = _row("Twin, 6 layers", [0, 1], [1.904, 1.914])
    base = _row("Twin", [0, 1, 2], [1.850, 1.853, 1.852], baseline=True)
    rows = [arm, base, twin]
    compare_to_baseline(rows)
    compare_to_versus(rows)
    g = paired({r["label"]: r for r in rows}, "Grassmann", "Twin, 6 layers", "test")
    assert g["seeds"] == 2 and g["ci95"] is not None
    assert arm["versus_gap"] == pytest.approx(g["gap"]) and arm["versus_gap_ci95"] == pytest.approx(g["ci95"])
    lo, hi = g["gap"] - g["ci95"], g["gap"] + g["ci95"]
    assert versus_phrase(arm) == (f"{g['gap']:+.3f} test BPC against Twin, 6 layers (95% CI {lo:+.3f} to "
                                  f"{hi:+.3f} over 2 seeds both finished)")
