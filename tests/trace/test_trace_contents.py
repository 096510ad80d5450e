"""A trace file's contents are checked at load: arrays of the wrong shape, kind or cross-field size, a head
count or group that does not fit the states, a lens of the wrong kind, an over-long model kind are each one
TraceError naming the file and the member; whatever loads can be drawn (every verb the views use returns)."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from geomlab.trace import predictions, scoring
from geomlab.trace.base import TraceError
from geomlab.trace.files import load_trace, trace_bytes
from helpers.models import MODELS, get_trace


def _arrays(name: str) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(trace_bytes(get_trace(name))), allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def _write(path, arrays) -> None:
    np.savez_compressed(path, **arrays)


def _meta(arrays) -> dict:
    return json.loads(str(arrays["__meta__"]))


def _use(tr) -> None:
    """Every verb a view calls on a trace: a loaded trace must answer each (or raise TraceError)."""
    tr.log_probs()
    predictions.top_k(tr, predictions.default_cursor(tr))
    predictions.next_token_bits(tr)
    scoring.score_predictions(tr)
    for layer in range(tr.n_layers if tr.has_attention else 0):
        tr.attention_rows(layer, [0, tr.n_positions - 1])
    if tr.family == "osm":
        np.asarray(tr.states)
        if tr.has_similarity:
            tr.similarity_rows(0, [0])
        if tr.has_tangents:
            tr.tangent_norms()
            tr.tangent_at(0, 0, 0)
    if tr.family == "cem":
        tr.energy_mean(), tr.energy_change()
    if tr.family == "grassmann":
        for layer in range(tr.n_layers):
            for slot in range(tr.n_slots):
                tr.plucker_block(layer, slot)
    if tr.lens is not None:
        tr.lens.check(tr.n_positions)
        [tr.lens.name(i) for i in tr.lens.top_ids[:, :1, :1].reshape(-1)]


# (model, change, the member or field the message names): each loaded before, each a TraceError now
CASES = [
    ("cem", lambda a, m: a.update(energies=a["energies"][..., :-1]), "energies.npy"),
    ("cem", lambda a, m: a.update(displacement=a["displacement"][:1]), "displacement.npy"),
    ("transformer", lambda a, m: a.update(attention_k=a["attention_k"][..., :-1]), "attention_k.npy"),
    ("transformer", lambda a, m: a.update(attention_slopes=a["attention_slopes"][:, :1]), "attention_slopes.npy"),
    ("transformer", lambda a, m: a.update(attention_q=a["attention_q"][0]), "attention_q.npy"),
    ("cem", lambda a, m: a.update(attention_q_shared=a["attention_q_shared"][:, 1:]), "attention_q_shared.npy"),
    ("osm-rnn-SO3", lambda a, m: a.update(state_data=a["state_data"][:, :-2]), "state_data.npy"),
    ("osm-rnn-SO3", lambda a, m: a.update(input_data=a["input_data"][..., :2]), "input_data.npy"),
    ("osm-rnn-SO3", lambda a, m: a.update(tangent_coords=a["tangent_coords"][..., :2]), "tangent_coords"),
    ("osm-rnn-SO3", lambda a, m: a.update(tangent_stats=a["tangent_stats"][:, :, :, :3]), "tangent_stats.npy"),
    ("osm-rnn-SO3", lambda a, m: a.update(tangent_coords=a["tangent_coords"][:1]), "tangent_coords.npy"),
    ("osm-rnn-SO3", lambda a, m: a.update(tangent_stats=a["tangent_stats"][:2]), "tangent_stats.npy"),
    ("osm-rnn-SO3", lambda a, m: a.update(state_data=a["state_data"][..., :2],
                                          input_data=a["input_data"][..., :2]), "state_data.npy"),
    ("osm-rnn-SO3", lambda a, m: m["group"].update(options={"block": 2}), "group"),
    ("osm-rnn-SO3", lambda a, m: m["group"].update(name=["SO"]), "group"),
    ("osm-rnn-SO3", lambda a, m: m["group"].update(d=10**9), "group"),
    ("osm-rnn-SO3", lambda a, m: (a.pop("tangent_coords"), a.pop("tangent_stats"), m["group"].update(name="Q")),
     "group"),
    ("grassmann-r3", lambda a, m: m["config"].update(eps="tiny"), "eps"),
    ("grassmann-r3", lambda a, m: m["config"].update(normalize=["smooth"]), "normalize"),
    ("osmformer-identity", lambda a, m: m["config"].update(heads=-1), "heads"),
    ("osmformer-identity", lambda a, m: m["config"].update(heads="two"), "heads"),
    ("osmformer-identity", lambda a, m: m["config"].update(heads=10**6), "heads"),
    ("osmformer-U3", lambda a, m: a.update(attention_scale=a["attention_scale"][:1]), "attention_scale.npy"),
    ("grassmann-r3", lambda a, m: a.update(offsets=a["offsets"][:, :1]), "offsets.npy"),
    ("grassmann-r3", lambda a, m: a.update(plucker_mask=a["plucker_mask"][:, :, :5]), "plucker_mask.npy"),
    ("grassmann-r3", lambda a, m: a.update(gates=a["gates"][:, :, :3]), "gates.npy"),
    ("lstm", lambda a, m: a.update({"lens.top_ids": a["lens.top_ids"].astype(np.float32)}), "lens.top_ids.npy"),
    ("lstm", lambda a, m: a.update({"lens.next_prob": a["lens.next_prob"].astype("U4")}), "lens.next_prob.npy"),
    ("lstm", lambda a, m: m.update(kind="x" * 5000), "model kind"),
    ("lstm", lambda a, m: m.update(labels=[{"a": 1}] * len(m["labels"])), "labels"),
]


@pytest.mark.parametrize("model,change,named", CASES, ids=[f"{c[0]}-{c[2]}-{i}" for i, c in enumerate(CASES)])
def test_garbage_contents_are_one_trace_error_naming_file_and_member(tmp_path, model, change, named):
    arrays = _arrays(model)
    _write(tmp_path / "good.npz", arrays)
    _use(load_trace(tmp_path / "good.npz"))  # the untouched file loads and draws
    meta = _meta(arrays)
    change(arrays, meta)
    arrays["__meta__"] = np.array(json.dumps(meta))
    _write(tmp_path / "bad.npz", arrays)
    with pytest.raises(TraceError) as info:
        load_trace(tmp_path / "bad.npz")
    msg = str(info.value)
    assert msg.startswith("bad.npz: ") and named in msg, msg
    assert "\n" not in msg and len(msg) <= 300, msg


@pytest.mark.parametrize("model", ["cem", "osmformer-U3", "grassmann-r3"])
def test_non_finite_values_load_and_draw(tmp_path, model):
    """A diverged model's trace (NaN and inf in its logits and states) stays loadable: the views leave those
    entries blank (design choice, kept)."""
    arrays = _arrays(model)
    logits = arrays["logits"].copy()
    logits[0, :] = np.nan
    logits[1, 0] = np.inf
    logits[2, 0] = -np.inf
    arrays["logits"] = logits
    for name in ("energies", "state_data", "reduced"):
        if name in arrays:
            arrays[name] = np.full_like(arrays[name], np.nan)
    _write(tmp_path / "nan.npz", arrays)
    tr = load_trace(tmp_path / "nan.npz")
    assert np.isnan(tr.logits[0]).all() and np.isposinf(tr.logits[1, 0])
    with np.errstate(all="ignore"):
        _use(tr)


def _mutations():
    """(field index, which mutation, axis) of one stored array."""
    return st.tuples(st.integers(0, 20), st.sampled_from(["shorter", "longer", "drop", "add", "dtype"]),
                     st.integers(0, 5), st.sampled_from(["U3", "c8", "i4", "f2", "b1", "u1"]))


def _mutate(arr: np.ndarray, how: str, axis: int, dtype: str) -> np.ndarray:
    if how == "dtype":
        try:
            with np.errstate(all="ignore"):  # NaN to an integer: whatever numpy makes of it
                return arr.astype(dtype)
        except ValueError:  # text that is not a number stays text
            return arr
    if how == "drop" and arr.ndim > 1:
        return arr[(slice(None),) * (axis % arr.ndim) + (0,)]
    if how == "add":
        return arr[None]
    if arr.ndim == 0:
        return arr
    ax = axis % arr.ndim
    if how == "shorter":
        return arr.take(range(max(arr.shape[ax] - 1, 0)), axis=ax)
    return np.concatenate([arr, arr.take([0], axis=ax)], axis=ax) if arr.shape[ax] else arr



def _refused_or_drawable(arrays: dict) -> None:
    """Save ``arrays`` as a trace file and load it: refused with a one-line TraceError of at most 300
    characters, or a trace that answers every verb the views use (a TraceError there is a refusal too)."""
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    try:
        tr = load_trace(buf.getvalue())
    except TraceError as exc:
        assert "\n" not in str(exc) and len(str(exc)) <= 300, str(exc)
        return
    try:
        with np.errstate(all="ignore"):
            _use(tr)
    except TraceError:
        pass

@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(MODELS)), st.lists(_mutations(), min_size=1, max_size=3))
def test_a_loaded_trace_can_always_be_drawn(model, changes):
    """Random shape and kind changes to a real trace's arrays: the file is refused with a TraceError, or the
    trace it gives answers every verb the views use."""
    arrays = _arrays(model)
    names = sorted(k for k in arrays if k != "__meta__")
    for index, how, axis, dtype in changes:
        name = names[index % len(names)]
        arrays[name] = _mutate(arrays[name], how, axis, dtype)
    _refused_or_drawable(arrays)


def test_a_long_path_or_member_name_keeps_the_message_to_one_short_line(tmp_path):
    """A folder given as a trace at a long path named the whole path in the message."""
    folder = tmp_path / ("d" * 200) / ("e" * 200) / "t.npz"
    folder.mkdir(parents=True)
    with pytest.raises(TraceError) as info:
        load_trace(folder)
    msg = str(info.value)
    assert msg.startswith("t.npz: not a readable trace file") and len(msg) <= 300 and "\n" not in msg, msg


_json_leaf = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6)
_json = st.recursive(_json_leaf, lambda inner: st.lists(inner, max_size=3) |
                     st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=10)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(MODELS)), st.sampled_from(["config", "group"]),
       st.sampled_from(["heads", "eps", "normalize", "name", "d", "options", "kind", "block"]), _json)
def test_random_config_and_group_values_give_a_drawable_trace_or_a_trace_error(model, where, key, value):
    """One key of the metadata's config or group set to a random JSON value (the keys the trace classes read
    among them): the file is refused with a TraceError, or the trace answers every verb the views use."""
    arrays = _arrays(model)
    meta = _meta(arrays)
    if not isinstance(meta.get(where), dict):
        meta[where] = {}
    meta[where][key] = value
    arrays["__meta__"] = np.array(json.dumps(meta))
    _refused_or_drawable(arrays)
