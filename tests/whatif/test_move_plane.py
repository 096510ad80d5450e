"""Move a plane (geomlab.whatif.planes) on a small random Grassmann model: angle 0 and a self-swap change no
bit, the moved plane is a unit decomposable Plücker vector at the asked principal angle, causality, and the
writable hook_plucker against a mean computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from geomlab.geometry.planes import geodesic_distance, plucker_relations
from geomlab.models.hooks import run_with_cache, run_with_hooks
from geomlab.whatif.planes import pair_frame, rotate_plane, swap_plane
from tests.helpers.models import small_model

V, T = 20, 16


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return small_model("grassmann", vocab_size=V, rank=5, offsets=[1, 3]).eval()


def _text(seed: int) -> torch.Tensor:
    return torch.randint(0, V, (T,), generator=torch.Generator().manual_seed(seed))


pairs = st.tuples(st.integers(0, 1), st.integers(0, 1), st.integers(3, T - 1))  # layer, slot, position


@settings(max_examples=15, deadline=None)
@given(where=pairs, seed=st.integers(0, 1000), text=st.integers(0, 1000))
def test_angle_zero_and_a_self_swap_leave_every_logit_bit_identical(model, where, seed, text):
    layer, slot, position = where
    o = rotate_plane(model, _text(text), layer, position, slot, 0.0, seed=seed)
    assert np.array_equal(o.before, o.after)
    s = swap_plane(model, _text(text), layer, position, slot, position)
    assert np.array_equal(s.before, s.after)
    assert np.array_equal(s.before, model(_text(text)[None])[0].detach().numpy())


@settings(max_examples=15, deadline=None)
@given(where=pairs, seed=st.integers(0, 1000), angle=st.floats(0.0, math.pi / 2), sign=st.sampled_from([1, -1]))
def test_a_moved_plane_is_a_unit_plane_at_the_asked_principal_angle(model, where, seed, angle, sign):
    layer, slot, position = where
    o = rotate_plane(model, _text(seed), layer, position, slot, sign * angle, seed=seed)
    p = torch.as_tensor(o.geometry["plucker_after"])
    assert float(plucker_relations(p).abs().max()) < 1e-6
    assert float(p.norm()) == pytest.approx(1.0, abs=1e-6)
    theta = o.geometry["principal_angles"]
    assert theta[0] == pytest.approx(0.0, abs=1e-5) and theta[1] == pytest.approx(angle, abs=1e-5)
    # the moved frame's Plücker vector, computed independently from its columns
    Y = o.geometry["frame_after"]
    q = np.array([Y[i, 0] * Y[j, 1] - Y[j, 0] * Y[i, 1] for i in range(5) for j in range(i + 1, 5)])
    assert np.allclose(q, o.geometry["plucker_after"], atol=1e-12)
    # plucker_before is the model's plane of the pair, with its sign
    with torch.no_grad():
        z = run_with_cache(model, _text(seed)[None], [f"blocks.{layer}.mixer.hook_reduced"])[1]
    z = z[f"blocks.{layer}.mixer.hook_reduced"][0].double()
    D = model.blocks[layer].mixer.offsets[slot]
    F0 = pair_frame(z[position], z[position - D]).numpy()
    p0 = np.array([F0[i, 0] * F0[j, 1] - F0[j, 0] * F0[i, 1] for i in range(5) for j in range(i + 1, 5)])
    assert np.allclose(o.geometry["plucker_before"], p0, atol=1e-5)


@settings(max_examples=10, deadline=None)
@given(where=pairs, seed=st.integers(0, 1000))
def test_earlier_positions_keep_their_logits_and_later_ones_change(model, where, seed):
    layer, slot, position = where
    o = rotate_plane(model, _text(seed), layer, position, slot, 0.7, seed=seed)
    assert np.array_equal(o.before[:position], o.after[:position])
    assert not np.allclose(o.before[position:], o.after[position:], atol=1e-6)
    s = swap_plane(model, _text(seed), layer, position, slot, 3 if position != 3 else 4)
    assert np.array_equal(s.before[:position], s.after[:position])


def test_fused_and_explicit_mixers_carry_a_moved_plane_alike(model):
    x = _text(7)
    outs = []
    for impl in ("fused", "explicit"):
        for b in model.blocks:
            b.mixer.impl = impl
        outs.append(rotate_plane(model, x, 0, 9, 1, 0.6, seed=2).after)
    for b in model.blocks:
        b.mixer.impl = "fused"
    assert np.allclose(outs[0], outs[1], atol=1e-5)


def test_toward_a_plane_reaches_it_at_its_distance(model):
    x = _text(1)
    target = torch.linalg.qr(torch.randn(5, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64))[0]
    o = rotate_plane(model, x, 1, 8, 0, 0.0, toward=target)
    d = float(np.linalg.norm(o.geometry["principal_angles"]))
    assert d == pytest.approx(0.0, abs=1e-12)
    F0 = torch.as_tensor(o.geometry["frame_before"])
    dist = float(geodesic_distance(F0, target))
    o = rotate_plane(model, x, 1, 8, 0, dist, toward=target)
    Y = o.geometry["frame_after"]
    assert np.allclose(Y @ Y.T, target.numpy() @ target.numpy().T, atol=1e-8)


def test_bad_arguments_are_refused(model):
    x = _text(0)
    with pytest.raises(ValueError, match="no pair"):
        rotate_plane(model, x, 0, 2, 1, 0.1)  # offset 3 at position 2
    with pytest.raises(ValueError, match="slot"):
        rotate_plane(model, x, 0, 5, 2, 0.1)
    with pytest.raises(ValueError, match="layer"):
        swap_plane(model, x, 5, 5, 0, 4)
    with pytest.raises(ValueError, match="source_position"):
        swap_plane(model, x, 0, 5, 1, 1)
    with pytest.raises(ValueError, match="toward"):
        rotate_plane(model, x, 0, 5, 0, 0.1, toward=np.zeros((3, 2)))
    with pytest.raises(ValueError, match="Grassmann mixer"):
        rotate_plane(small_model("grassmann-attn", vocab_size=V).eval(), x, 0, 5, 0, 0.1)


@pytest.mark.parametrize("impl", ["fused", "explicit"])
def test_a_replaced_plucker_vector_enters_the_offset_mean(impl):
    """The mean a layer feeds to W_plu, after a replacement at hook_plucker, equals the mean over the valid
    slots of the replaced vectors computed by hand (to rounding); entries where t < D are ignored."""
    torch.manual_seed(1)
    m = small_model("grassmann", vocab_size=V, rank=4, offsets=[1, 3, 5], impl=impl).eval()
    x = _text(3)[None]
    g = torch.Generator().manual_seed(0)
    new = {}

    def replace(value, hook):
        out = torch.randn(value.shape, generator=g)
        new["v"] = out
        return out

    seen = {}
    with torch.no_grad():
        run_with_hooks(m, x, [("blocks.0.mixer.hook_plucker", replace),
                              ("blocks.0.mixer.hook_plucker_mean", lambda v, h: seen.setdefault("mean", v))])
    v = new["v"][0]
    offs = torch.tensor([1, 3, 5])
    valid = (torch.arange(T).view(1, T) >= offs.view(3, 1)).float()  # (m, T)
    want = (v * valid[..., None]).sum(0) / valid.sum(0).clamp_min(1)[:, None]
    torch.testing.assert_close(seen["mean"][0, 1:], want[1:], rtol=1e-5, atol=1e-5)
