"""Trace files read within bounds: a memory budget enforced while inflating, ``.npy`` headers checked against
their member's size before allocation, metadata through the bounded JSON reader, a model kind that records
another family refused; random bytes and random JSON metadata give a trace or a TraceError within budget."""

from __future__ import annotations

import io
import json
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from geomlab.trace import files as trace_files
from geomlab.trace.base import TraceError
from geomlab.trace.files import load_trace, trace_bytes
from helpers.memory import peak as _peak
from helpers.models import get_trace

#: Peak Python-traced memory one hostile load may cost (bytes; the arrays themselves are tracked by numpy).
BUDGET = 16 * 2**20


def _arrays(data: bytes) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def _npz(arrays: dict[str, np.ndarray], extra: dict[str, bytes] | None = None) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    if extra:
        with zipfile.ZipFile(buf, "a", compression=zipfile.ZIP_DEFLATED) as zf:
            for name, raw in extra.items():
                zf.writestr(name, raw)
    return buf.getvalue()




def _npy_header(descr: str, shape: tuple[int, ...]) -> bytes:
    header = repr({"descr": descr, "fortran_order": False, "shape": shape}).encode("latin1")
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header


def _lying_zip(name: str, real: bytes, declared: int) -> bytes:
    """A zip whose one member ``name`` inflates to ``real`` but declares ``declared`` bytes (both headers)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(name, real)
    data = bytearray(buf.getvalue())
    size = struct.pack("<I", len(real))
    for sig, off in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):  # uncompressed size in each header
        at = data.find(sig)
        assert data[at + off:at + off + 4] == size
        data[at + off:at + off + 4] = struct.pack("<I", declared)
    return bytes(data)


def test_npy_header_declaring_2_40_elements_is_a_trace_error():
    arrays = _arrays(trace_bytes(get_trace("lstm")))
    data = _npz(arrays, {"extra.bomb.npy": _npy_header("<f8", (2**40,)) + b"\0" * 64})
    err, peak = _peak(lambda: load_trace(data))
    assert isinstance(err, TraceError) and "extra.bomb.npy" in str(err), repr(err)
    assert peak < BUDGET
    load_trace(_npz(arrays))  # the same file without it loads


def test_trace_inflating_past_the_budget_stops_early(monkeypatch):
    monkeypatch.setattr(trace_files, "MAX_TRACE_BYTES", 4 * 2**20)
    arrays = _arrays(trace_bytes(get_trace("lstm")))
    arrays["extra.pad"] = np.zeros(64 * 2**20, dtype=np.uint8)  # 64 MiB of zeros: ~64 KB compressed
    data = _npz(arrays)
    assert len(data) < 2**20
    err, peak = _peak(lambda: load_trace(data))
    assert isinstance(err, TraceError) and "budget" in str(err), repr(err)
    assert peak < BUDGET, f"{peak / 2**20:.0f} MiB"


def test_trace_member_lying_about_its_size_is_not_inflated_in_full():
    real = _npy_header("|u1", (64 * 2**20,)) + bytes(64 * 2**20)  # 64 MiB inflated, 200 bytes declared
    lying = _lying_zip("tokens.npy", real, 200)
    assert len(lying) < 2**20
    err, peak = _peak(lambda: load_trace(lying))
    assert isinstance(err, TraceError), repr(err)
    assert peak < BUDGET, f"{peak / 2**20:.0f} MiB"


@pytest.mark.parametrize("depth", [200_000, 5_000])
def test_deeply_nested_metadata_is_a_trace_error(depth):
    arrays = _arrays(trace_bytes(get_trace("lstm")))
    meta = json.loads(str(arrays["__meta__"]))
    meta["config"] = "@"
    arrays["__meta__"] = np.array(json.dumps(meta).replace('"@"', "[" * depth + "]" * depth))
    err, _ = _peak(lambda: load_trace(_npz(arrays)))
    assert isinstance(err, TraceError) and "levels deep" in str(err), repr(err)


def test_metadata_naming_another_model_kind_is_refused():
    arrays = _arrays(trace_bytes(get_trace("lstm")))
    meta = json.loads(str(arrays["__meta__"]))
    assert meta["family"] == "baseline"
    meta["kind"] = "osm-rnn"  # records "osm" traces
    arrays["__meta__"] = np.array(json.dumps(meta))
    with pytest.raises(TraceError, match="osm-rnn"):
        load_trace(_npz(arrays))


def _json_values(max_leaves: int = 20):
    leaf = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
    return st.recursive(leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                           max_size=3),
                        max_leaves=max_leaves)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=4096))
def test_random_bytes_give_a_trace_error_within_budget(data):
    err, peak = _peak(lambda: load_trace(data))
    assert err is None or isinstance(err, TraceError), repr(err)
    assert peak < BUDGET


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_json_values(), st.integers(0, 3000), st.sampled_from(["config", "group", "labels", "kind", "lens_names"]))
def test_random_metadata_gives_a_trace_or_a_trace_error(value, depth, key):
    arrays = _arrays(trace_bytes(get_trace("lstm")))
    meta = json.loads(str(arrays["__meta__"]))
    meta[key] = "@"
    text = json.dumps(meta).replace('"@"', "[" * depth + json.dumps(value) + "]" * depth)
    arrays["__meta__"] = np.array(text)
    data = _npz(arrays)
    err, peak = _peak(lambda: load_trace(data))
    assert err is None or isinstance(err, TraceError), repr(err)
    assert peak < BUDGET


def test_a_small_file_declaring_hundreds_of_mib_is_refused_before_inflating():
    """A 204 KB trace whose arrays declare 200 MiB (zeros) loaded at a 200 MiB peak (within the old 256 MiB
    budget); the budget now follows the file's size, and the declared total is checked before anything is
    inflated."""
    arrays = _arrays(trace_bytes(get_trace("lstm")))
    arrays["extra.pad"] = np.zeros(200 * 2**20, dtype=np.uint8)
    data = _npz(arrays)
    assert len(data) < 300_000
    err, peak = _peak(lambda: load_trace(data))
    assert isinstance(err, TraceError) and "209,721,076 bytes" in str(err) and "budget" in str(err), repr(err)
    assert peak < 2**20, f"{peak / 2**20:.1f} MiB"


def test_real_traces_are_far_inside_the_size_budget(tmp_path):
    """Traces of the bundled checkpoints barely compress: a 600-character trace of the largest models inflates
    to well under half its budget, and loads from a path, a file object and bytes alike."""
    from geomlab.checkpoints import io as ckpt
    from geomlab.core import zipread
    from geomlab.trace.files import MIN_TRACE_BUDGET, save_trace
    from geomlab.trace.tracing import trace_text

    text = ("To be, or not to be, that is the question: Whether 'tis nobler in the mind to suffer "
            "the slings and arrows of outrageous fortune. ") * 5
    for name in ("osmformer-u-tinyshakespeare", "cem-t2-tinyshakespeare"):
        c = ckpt.load(Path(__file__).resolve().parents[2] / "assets" / "checkpoints" / f"{name}.json")
        path = tmp_path / f"{name}.npz"
        save_trace(trace_text(c.model, c.vocab, text), path)
        size = path.stat().st_size
        with zipfile.ZipFile(path) as zf:
            inflated = sum(i.file_size for i in zf.infolist())
        assert inflated * 2 < zipread.MAX_RATIO * size, (name, inflated, size)
        assert inflated < MIN_TRACE_BUDGET + zipread.MAX_RATIO * size
        data = path.read_bytes()
        for source in (path, io.BytesIO(data), data):
            assert load_trace(source).n_positions == len(text)
