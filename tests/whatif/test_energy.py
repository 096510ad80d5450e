"""CEM energy steps: other recursion counts per layer and an early stop, against plain runs and hook_energy."""

import numpy as np
import pytest
import torch

from geomlab.models.hooks import run_with_cache
from geomlab.whatif.energy import energy_steps
from tests.helpers.models import get_model, small_model

TRAINED = 2  # tests/helpers/models.py CONFIGS["cem"]["recursion_steps"]


def cem():
    return small_model("cem")


def toks():
    return torch.randint(0, 30, (12,), generator=torch.Generator().manual_seed(0))


def test_the_trained_count_and_a_stop_at_it_are_the_identity_bit_for_bit():
    model = cem()
    for kw in ({"steps": TRAINED}, {"stop_at": TRAINED}, {"steps": [TRAINED, TRAINED]}, {}):
        o = energy_steps(model, toks(), **kw)
        assert np.array_equal(o.before, o.after), kw
        np.testing.assert_array_equal(o.geometry["energy_before"], o.geometry["energy_after"])


def test_other_counts_equal_a_plain_run_with_that_many_steps():
    model = cem().eval()
    for k in (1, 3, 5):
        o = energy_steps(model, toks(), steps=k)
        previous = model.set_inference_steps(k)
        try:
            with torch.no_grad():
                plain = model(toks()[None])[0].numpy()
        finally:
            model.set_inference_steps(previous)
        assert np.array_equal(o.after, plain)
        assert o.geometry["energy_after"].shape == (2, 2, k + 1)


def test_stop_at_k_equals_a_run_of_k_steps():
    model = cem()
    stopped = energy_steps(model, toks(), steps=4, stop_at=1)
    ran = energy_steps(model, toks(), steps=1)
    np.testing.assert_array_equal(stopped.after, ran.after)
    np.testing.assert_allclose(stopped.geometry["energy_after"][:, :, :2], ran.geometry["energy_after"], rtol=1e-12)
    assert np.isnan(stopped.geometry["energy_after"][:, :, 2:]).all()


def test_a_per_layer_list_changes_only_the_layers_asked():
    model = cem()
    o = energy_steps(model, toks(), steps=[TRAINED, TRAINED + 2])
    before, after = o.geometry["energy_before"], o.geometry["energy_after"]
    np.testing.assert_array_equal(after[0, :, : TRAINED + 1], before[0])  # layer 0: as before
    assert np.isnan(after[0, :, TRAINED + 1:]).all()
    np.testing.assert_array_equal(after[1, 0, : TRAINED + 1], before[1, 0])  # layer 1's input is unchanged
    assert np.isfinite(after[1]).all() and after[1, 0, -1] < after[1, 0, TRAINED]  # it descends further
    assert o.kl_bits().max() > 0
    assert o.geometry["steps_after"].tolist() == [TRAINED, TRAINED + 2]


def test_recorded_energies_are_the_token_mean_of_hook_energy():
    model = cem().eval()
    o = energy_steps(model, toks(), steps=3)
    previous = model.set_inference_steps(3)
    try:
        with torch.no_grad():
            _, cache = run_with_cache(model, toks()[None], lambda n: n.endswith("hook_energy"))
    finally:
        model.set_inference_steps(previous)
    for l in range(2):
        for b in range(2):
            e = cache[f"stack.layers.{l}.{b}.hook_energy"][0].double().mean(-1).numpy()
            np.testing.assert_allclose(o.geometry["energy_after"][l, b], e, rtol=1e-12)


def test_the_setting_and_mode_are_restored_also_on_an_error():
    model = cem().train()
    model.set_inference_steps(3)
    energy_steps(model, toks(), steps=5)
    assert model.stack.cfg.inference_recursion_steps == 3 and model.training
    for bad in ({"steps": [1]}, {"steps": -1}, {"steps": 65}, {"stop_at": 9}, {"steps": True}):
        with pytest.raises(ValueError):
            energy_steps(model, toks(), **bad)
        assert model.stack.cfg.inference_recursion_steps == 3 and model.training
    with pytest.raises(ValueError, match="CEM"):
        energy_steps(get_model("transformer"), toks())


def test_a_descent_that_keeps_its_trained_pace_is_not_a_runaway_one_that_accelerates_is():
    """runaway_rates: the fall per step past the trained steps over the pace within them; a steady descent
    stays near 1 however long it runs, an accelerating one passes RUNAWAY_RATE; nothing past the trained
    steps is NaN."""
    from geomlab.whatif.energy import RUNAWAY_RATE, runaway_rates

    steady = -10.0 * np.arange(17)                      # 10 a step, for 16 steps
    faster = -10.0 * np.arange(17) * 1.6 ** np.arange(17)  # each step falls further than the last
    rates = runaway_rates(np.stack([steady, faster])[None], trained=2)[0]
    assert rates[0] == pytest.approx(1.0) and rates[1] > 10 * RUNAWAY_RATE
    assert np.isnan(runaway_rates(np.stack([steady, faster])[None, :, :3], trained=2)).all()  # T = trained
    with pytest.raises(ValueError):
        runaway_rates(steady, trained=2)


def test_the_bundled_cem_overshoots_at_t16_and_not_at_its_trained_t():
    """The energy page's case: cem-t2 at T = 16 (an MLP energy falling to ~-1e5 and more, a mean surprisal
    worse than a uniform guess); at T = 2 nothing runs away."""
    from geomlab.commands import load_checkpoint
    from geomlab.checkpoints.catalog import DEMO_TEXT
    from geomlab.trace import encode_text
    from geomlab.trace.tracing import trace_cem_steps
    from geomlab.whatif.energy import overshoot

    ck = load_checkpoint("bundled/cem-t2-tinyshakespeare")
    tokens = encode_text(ck.vocab, DEMO_TEXT)
    assert overshoot(trace_cem_steps(ck.model, tokens, 2, vocab=ck.vocab, text=DEMO_TEXT)) is None
    o = overshoot(trace_cem_steps(ck.model, tokens, 16, vocab=ck.vocab, text=DEMO_TEXT))
    assert o is not None and (o.trained, o.steps, o.block) == (2, 16, 1)  # an MLP sub-block
    assert (3, 1) in {(o.layer, o.block), *o.others}  # the layer the page opens on
    assert o.lowest < -1e5 and o.moved > 10 * o.trained_moved and o.bits > o.uniform_bits


def test_the_descent_chart_caption_does_not_call_a_runaway_a_plain_fall():
    """The energy view's own caption: at T = 16 the mean energy still falls at every step, and the caption
    says that this fall past the trained T is a runaway; at T = 2 it says nothing of the kind."""
    from geomlab.commands import load_checkpoint
    from geomlab.checkpoints.catalog import DEMO_TEXT
    from geomlab.figures.energy import energy_descent
    from geomlab.trace import encode_text
    from geomlab.trace.tracing import trace_cem_steps

    ck = load_checkpoint("bundled/cem-t2-tinyshakespeare")
    tokens = encode_text(ck.vocab, DEMO_TEXT)
    at16 = energy_descent(trace_cem_steps(ck.model, tokens, 16, vocab=ck.vocab, text=DEMO_TEXT)).caption
    assert "Past the trained T = 2 it runs away" in at16 and "overshoot, not a better fit" in at16
    at2 = energy_descent(trace_cem_steps(ck.model, tokens, 2, vocab=ck.vocab, text=DEMO_TEXT)).caption
    assert "runs away" not in at2


def test_the_energy_steps_chart_says_when_the_descent_runs_away():
    from geomlab.figures.whatif import whatif_geometry
    from geomlab.whatif.outcome import Outcome

    steady = -10.0 * np.arange(7)
    before = np.stack([steady[:3], steady[:3]])[None]
    after = np.stack([steady, -10.0 * np.arange(7) * 3.0 ** np.arange(7)])[None]
    o = Outcome(np.zeros(4, dtype=int), np.zeros((4, 3), np.float32), np.zeros((4, 3), np.float32), None,
                "T = 6 in layer 0", {"energy_before": before, "energy_after": after,
                                     "steps_before": np.array([2]), "steps_after": np.array([6])})
    cap = whatif_geometry(o, layer=0).caption
    assert "the MLP energy falls" in cap and "overshoot" in cap and "attention energy falls" not in cap
    o.geometry["energy_after"] = np.stack([steady, steady])[None]
    assert "overshoot" not in whatif_geometry(o, layer=0).caption


def test_a_page_computes_the_overshoot_once_per_trace(monkeypatch):
    """The energy chart's caption, its "look for" line and the page's facts all ask for the overshoot of
    one trace: it is computed once and kept with the trace (a language model's corpus scores as no task);
    another trace, or another trained T, is computed anew, with the same result for the same run."""
    from geomlab.commands import load_checkpoint
    from geomlab.checkpoints.catalog import DEMO_TEXT
    from geomlab.figures.energy import energy_descent
    from geomlab.teach import explain, facts
    from geomlab.trace import encode_text
    from geomlab.trace.tracing import trace_cem_steps
    from geomlab.whatif import energy

    ck = load_checkpoint("bundled/cem-t2-tinyshakespeare")
    tokens = encode_text(ck.vocab, DEMO_TEXT)
    run = lambda: trace_cem_steps(ck.model, tokens, 16, vocab=ck.vocab, text=DEMO_TEXT)  # noqa: E731
    tr = run()
    counted = []
    compute = energy._overshoot
    monkeypatch.setattr(energy, "_overshoot", lambda *a: counted.append(a) or compute(*a))
    assert "runs away" in energy_descent(tr).caption
    assert "overshoots" in explain.figure_note("energy_descent", tr)
    said = facts.view_facts("energy", tr, config=ck.model_config, task="tinyshakespeare")  # the card's corpus
    assert any("Overshoot past the trained" in f.text for f in said)
    o = energy.overshoot(tr)
    assert len(counted) == 1 and energy.overshoot(tr, None, 2) is o
    assert energy.overshoot(run()) == o and energy.overshoot(tr, trained=1) != o and len(counted) == 3
