"""The one parameter-budget search (geomlab.models.budget): the configs it chooses for the zoo's and the
report's budgets are those the bundled checkpoints were built with and those the report used before the
search was gathered in one module."""

from __future__ import annotations

from pathlib import Path

import pytest

from geomlab import report
from geomlab.models import build_model, config_for_budget, count_params, full_config
from geomlab.models import budget
from geomlab.models.budget import config_near_budget, linear_width_search, search_width
from geomlab.checkpoints.io import read_meta

CKPT_DIR = Path(__file__).resolve().parents[2] / "assets" / "checkpoints"
#: Keys whose default changed after these checkpoints were trained; the search does not vary them.
_CHANGED_DEFAULTS = {"osmformer": {"attn_step", "ground_step", "beta"}}
_BUDGETED = sorted(p.name for p in CKPT_DIR.iterdir()
                   if p.is_dir() and read_meta(p)["card"].get("recipe", {}).get("budget"))


def test_bundled_checkpoints_with_a_budget_exist():
    assert len(_BUDGETED) == 6  # the torus (d = 26) and U(d) (d = 12) OSMFormers give sizes, not budgets


@pytest.mark.parametrize("name", _BUDGETED)
def test_zoo_budgets_choose_the_bundled_configs(name):
    meta = read_meta(CKPT_DIR / name)
    stored, recipe = meta["model_config"], meta["card"]["recipe"]
    budget._CONFIG_CACHE.clear()
    got = budget.resolve_config(recipe["kind"], stored["vocab_size"], recipe["budget"], recipe["config"])
    skip = _CHANGED_DEFAULTS.get(recipe["kind"], set())
    assert {k: v for k, v in got.items() if k not in skip} == {k: v for k, v in stored.items() if k not in skip}
    assert abs(count_params(build_model(got)) - recipe["budget"]) <= 0.05 * recipe["budget"]


#: What the budget search chose for the report's arms when the report was run (keys that differ from the kind's
#: defaults and the arm's fixed keys), computed with that code at the corpora's vocabularies.
_REPORT_SIZES = {
    ("ts-100k", "OSMFormer O(d), linear mixing"): {"d": 15, "n_layers": 3},
    ("ts-100k", "OSMFormer O(d), identity mixing"): {"d": 30},
    ("ts-100k", "Transformer (ALiBi)"): {},
    ("ts-50k", "OSM-RNN O(d)"): {"d": 19, "prototypes": "group"},
    ("ts-50k", "LSTM"): {"hidden": 77},
    ("ptb-100k", "OSMFormer O(d), linear mixing"): {"d": 17},
    ("ptb-100k", "Transformer (ALiBi)"): {},
    ("ts-scaling", "OSMFormer O(d) ~200K"): {"d": 24, "n_layers": 1},
    ("ts-scaling", "Transformer ~200K"): {"d_model": 72},
    ("ts-scaling", "OSMFormer O(d) ~500K"): {"d": 26},
    ("ts-scaling", "Transformer ~500K"): {"d_model": 116},
    ("cem-200k", "Llama (RMSNorm, RoPE, SwiGLU)"): {"d_ff": 169},
    ("cem-200k", "CEM T=1, shared diagonal"): {"d_ff": 318},
    ("cem-200k", "CEM T=2, shared diagonal"): {"d_ff": 318},
    ("cem-200k", "CEM T=2, no diagonal"): {"d_ff": 318},
    ("grassmann-200k", "Grassmann (Gr(2, r), offsets 1..16)"): {"d_ff": 240, "d_model": 60, "rank": 15},
    ("grassmann-200k", "Same block with causal attention"): {"d_ff": 240, "d_model": 60},
    ("grassmann-200k", "Grassmann, one offset per layer (1, 2, 4, 8, 12, 16), 6 layers"): {"d_ff": 200, "d_model": 50,
                                                                                         "rank": 14},
}
_VOCAB = {"tinyshakespeare": 66, "ptb-char": 51, "wikitext-2": 284}
_ARMS = [(c, a) for c in report.COMPARISONS.values() for a in c.arms]


def test_every_report_arm_has_an_expected_size():
    assert {(c.key, a.label) for c, a in _ARMS} == set(_REPORT_SIZES)


@pytest.mark.parametrize("comparison,arm", _ARMS, ids=[f"{c.key}:{a.label}" for c, a in _ARMS])
def test_report_budgets_choose_the_same_configs(comparison, arm):
    V = _VOCAB[comparison.corpus]
    budget._CONFIG_CACHE.clear()
    got = budget.resolve_config(arm.kind, V, arm.budget, arm.config)
    want = full_config({"kind": arm.kind, "vocab_size": V, **arm.config, **_REPORT_SIZES[comparison.key, arm.label]})
    assert got == want
    assert got == config_for_budget(arm.kind, arm.budget, V, **arm.config)


def test_search_width_picks_the_nearest_and_names_the_miss():
    make = lambda h: {"kind": "lstm", "hidden": h}  # noqa: E731
    counts = {h: count_params(build_model({**make(h), "vocab_size": 65})) for h in range(70, 86)}
    target = counts[78] + 3
    assert search_width(make, range(70, 86), target, 65)["hidden"] == 78
    assert search_width(make, range(70, 86), target, 65, monotone=True)["hidden"] == 78
    with pytest.raises(ValueError, match="within 5%"):
        search_width(make, [10], target, 65)


def test_linear_width_search_meets_the_budget():
    cfg = linear_width_search(lambda f: {"kind": "llama", "d_model": 32, "n_layers": 2, "n_heads": 2, "d_ff": f},
                              40_000, 65)
    assert abs(count_params(build_model(cfg)) - 40_000) <= 0.05 * 40_000


def test_config_near_budget_falls_back_to_a_nearby_budget_or_the_defaults():
    cfg, note = config_near_budget("lstm", 20_000, 65)
    assert note == "" and cfg == config_for_budget("lstm", 20_000, 65)
    # 10^8 parameters are beyond any osm-rnn (d <= 64), even at -60%: the default size, and a note why
    cfg, note = config_near_budget("osm-rnn", 10 ** 8, 65, group="O")
    assert cfg == {"kind": "osm-rnn", "vocab_size": 65, "group": "O"} and note.startswith("budget not met")
    with pytest.raises(ValueError, match="unknown model kind"):
        config_near_budget("no-such-kind", 1000, 65)


@pytest.mark.parametrize("kind", ["osm-rnn", "osmformer", "grassmann", "lstm"])
def test_an_unknown_key_is_named_before_any_budget_search(kind):
    """A key the kind does not have is the error itself, not a budget the search could not meet."""
    from geomlab.models import config_for_budget

    with pytest.raises(ValueError, match=r"^unknown config keys for '[a-z-]+': \['dropoutx'\]; known: "):
        config_for_budget(kind, 20_000, 65, dropoutx=0.1)


def test_an_lstm_keeps_a_fixed_hidden_width_or_says_it_misses_the_budget():
    """``hidden`` given with a budget is kept, as every kind keeps its fixed keys (the budget never picks
    another width without a word); a width that misses the budget by more than 5% is refused,
    naming the key."""
    free = config_for_budget("lstm", 20_000, 65)
    kept = config_for_budget("lstm", 20_000, 65, hidden=free["hidden"])
    assert kept["hidden"] == free["hidden"]
    n = count_params(build_model(full_config({**kept, "vocab_size": 65})))
    assert abs(n - 20_000) <= 0.05 * 20_000
    with pytest.raises(ValueError, match=r"lstm: hidden=200 is fixed and .*leave hidden out"):
        config_for_budget("lstm", 20_000, 65, hidden=200)
