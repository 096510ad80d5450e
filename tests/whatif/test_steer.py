"""Steering an OSM state along its group, against direct computations (matrix_exp, the group's conditions)."""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from geomlab.whatif.steer import steer_directions, steer_state
from tests.helpers.models import get_model, small_model

GROUPS = {"O": {"d": 3}, "SO": {"d": 3}, "U": {"d": 3}, "SU": {"d": 3}, "T": {"d": 4},
          "O-block": {"d": 4, "block": 2}, "U-real": {"d": 2, "complex_mode": "real"}}
KINDS = ("osm-rnn", "osmformer")
T = 10
_MODELS: dict = {}


def model_for(kind: str, group: str):
    if (kind, group) not in _MODELS:
        over = dict(GROUPS[group], group=group.split("-real")[0])
        if kind == "osmformer":
            over["n_layers"] = 2
        _MODELS[kind, group] = small_model(kind, **over)
    return _MODELS[kind, group]


def tokens(seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 30, (T,), generator=torch.Generator().manual_seed(seed))


def group_error(H: np.ndarray, group: str) -> float:
    """How far ``H`` is from the group: ``||H^* H - I||_max``, plus ``|det - 1|`` for SO/SU, plus the
    off-diagonal entries on the torus."""
    H = torch.as_tensor(H, dtype=torch.complex128)
    err = float((H.mH @ H - torch.eye(H.shape[-1], dtype=H.dtype)).abs().max())
    if group in ("SO", "SU"):
        err = max(err, float((torch.linalg.det(H) - 1).abs()))
    if group == "T":
        err = max(err, float((H - torch.diag_embed(torch.diagonal(H))).abs().max()),
                  float((torch.diagonal(H).abs() - 1).abs().max()))
    return err


kinds, groups = st.sampled_from(KINDS), st.sampled_from(sorted(GROUPS))
directions = st.one_of(st.just("tangent"), st.just("random"), st.integers(0, 100).map(lambda k: ("generator", k)))


def _direction(model, d):
    return ("generator", d[1] % model.group.dim) if isinstance(d, tuple) else d


def _position(kind, direction, position):
    """An osmformer's first position has no update in layer 0 (its state is its input): no tangent there."""
    return max(position, 1) if kind == "osmformer" and direction == "tangent" else position


@given(kinds, groups, st.integers(0, T - 1), directions, st.integers(0, 3))
def test_eps_zero_leaves_every_logit_bit_identical(kind, group, position, direction, seed):
    model = model_for(kind, group)
    position = _position(kind, direction, position)
    o = steer_state(model, tokens(seed), 0, position, _direction(model, direction), 0.0)
    assert torch.equal(torch.from_numpy(o.before), torch.from_numpy(o.after))
    assert np.array_equal(o.geometry["state_before"], o.geometry["state_after"])


@given(kinds, groups, st.integers(0, T - 1), directions, st.floats(-3, 3).filter(lambda e: abs(e) > 0.05))
def test_the_steered_state_stays_on_the_group_and_earlier_positions_are_unchanged(kind, group, position,
                                                                                  direction, eps):
    model = model_for(kind, group)
    position = _position(kind, direction, position)
    o = steer_state(model, tokens(), 0, position, _direction(model, direction), eps)
    before, after = o.geometry["state_before"], o.geometry["state_after"]
    assert group_error(after, group.split("-")[0]) <= group_error(before, group.split("-")[0]) + 1e-6
    assert group_error(after, group.split("-")[0]) < 1e-5
    if kind == "osm-rnn":  # causality: bit for bit in the recurrence
        assert np.array_equal(o.before[:position], o.after[:position])
    else:  # osmformer's fused attention kernel may round an earlier row differently (one float32 ulp)
        np.testing.assert_allclose(o.after[:position], o.before[:position], rtol=1e-6, atol=1e-6)
    assert not np.allclose(after, before, atol=1e-3)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("group", sorted(GROUPS))
def test_a_nonzero_step_changes_the_logits_from_the_position_on(kind, group):
    model = model_for(kind, group)
    position = 3
    o = steer_state(model, tokens(), 0, position, "random", 1.0)
    kl = o.kl_bits()
    assert kl[:position].max() < 1e-9
    assert kl[position] > 0 and kl[position + 1:].max() > 0  # later tokens read the steered state


@given(kinds, groups, st.integers(0, T - 1), st.integers(0, 100), st.floats(-2, 2))
def test_a_generator_step_is_H_times_matrix_exp_of_eps_G(kind, group, position, k, eps):
    model = model_for(kind, group)
    g = model.group
    k = k % g.dim
    o = steer_state(model, tokens(1), 0, position, ("generator", k), eps)
    G = g.from_coords(torch.eye(g.dim, dtype=torch.float64)[k])
    H = torch.as_tensor(o.geometry["state_before"]).to(G.dtype)
    expected = H @ torch.linalg.matrix_exp(eps * G)
    np.testing.assert_allclose(o.geometry["state_after"], expected.numpy(), atol=1e-6)
    np.testing.assert_allclose(o.geometry["direction"], G.numpy(), atol=1e-15)


def test_the_tangent_direction_is_the_layers_own_update_normalised():
    from geomlab.models.hooks import run_with_cache

    model = model_for("osm-rnn", "SO").eval()
    o = steer_state(model, tokens(), 0, 4, "tangent", 0.5)
    with torch.no_grad():
        _, cache = run_with_cache(model, tokens()[None], ["hook_tangent"])
    phi = cache["hook_tangent"][0, 4].double()
    np.testing.assert_allclose(o.geometry["direction"], (phi / phi.norm()).numpy(), atol=1e-6)


def test_osmformer_steers_the_layer_asked_and_later_layers_read_it():
    model = model_for("osmformer", "U")
    o0 = steer_state(model, tokens(), 0, 2, ("generator", 0), 1.0)
    o1 = steer_state(model, tokens(), 1, 2, ("generator", 0), 1.0)
    assert not np.array_equal(o0.geometry["state_before"], o1.geometry["state_before"])
    assert o0.kl_bits()[3:].max() > 0  # layer 1's attention reads layer 0's steered state at later positions
    assert o1.kl_bits()[3:].max() == 0  # nothing reads the last layer's state at other positions


def test_directions_name_every_basis_element():
    for group in GROUPS:
        model = model_for("osm-rnn", group)
        names = steer_directions(model)
        assert len(names) == model.group.dim == len(set(names))
    assert steer_directions(model_for("osm-rnn", "SO"))[0] == "rotation (1,2)"
    assert steer_directions(model_for("osm-rnn", "T"))[2] == "phase 3"


def test_bad_arguments_raise_value_error_and_the_mode_is_restored():
    model = model_for("osmformer", "SO").train()
    for args in [(0, T, "random", 0.1), (2, 0, "random", 0.1), (0, 0, ("generator", 99), 0.1),
                 (0, 0, "north", 0.1), (0, 0, "random", float("nan")), (0, 0, "tangent", 0.1)]:
        with pytest.raises(ValueError):
            steer_state(model, tokens(), *args)
    steer_state(model, tokens(), 0, 0, "random", 0.1)
    assert model.training
    with pytest.raises(ValueError, match="OSM"):
        steer_state(get_model("transformer"), tokens(), 0, 0, "random", 0.1)
