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
