"""The bounded readers of :mod:`geomlab.core.jsonread` and :mod:`geomlab.core.zipread`, and the JSON inputs
routed through them outside checkpoints and traces (sweep journals, the report store): a depth and size
limit checked before parsing, a memory budget while inflating; random bytes and random nested JSON give a
value or the reader's own error within a memory budget."""

from __future__ import annotations

import io
import json
import os
import struct
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from geomlab.core import zipread
from geomlab.core.jsonread import MAX_JSON_DEPTH, JSONInputError, json_depth, parse_json, read_json
from helpers.memory import peak as _peak

BUDGET = 16 * 2**20




@pytest.mark.parametrize("depth", [200_000, MAX_JSON_DEPTH + 1])
def test_deep_nesting_is_refused_before_parsing(tmp_path, depth):
    f = tmp_path / "deep.json"
    f.write_bytes(b'{"a": ' + b"[" * depth + b"]" * depth + b"}")
    with pytest.raises(JSONInputError, match=rf"deep\.json nests arrays/objects {depth + 1:,} levels deep; the limit"):
        read_json(f)


def test_depth_ignores_brackets_in_strings_and_counts_across_chunks():
    assert json_depth(b'["[[[[", "\\"[[", {"a": [1]}]') == 3
    assert parse_json('"' + "[" * 10_000 + '"', "x") == "[" * 10_000
    assert json_depth(b"[" * 3_000_000 + b"]" * 3_000_000) == 3_000_000
    assert parse_json(b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH, "x") is not None


def test_size_limit_and_other_errors_name_the_input(tmp_path):
    f = tmp_path / "big.json"
    f.write_bytes(b"[" + b"0," * 100 + b"0]")
    with pytest.raises(JSONInputError, match=r"big\.json is larger than the limit of 100 bytes"):
        read_json(f, max_bytes=100)
    with pytest.raises(JSONInputError, match="x is not UTF-8"):
        parse_json(b'"\xff"', "x")
    with pytest.raises(JSONInputError, match="x is not valid JSON"):
        parse_json("1" * 10_000, "x")  # over Python's int digit limit: a ValueError, not a JSONDecodeError


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(OSError):
        read_json(fifo)


def test_reading_a_small_file_does_not_allocate_the_limit(tmp_path):
    f = tmp_path / "small.json"
    f.write_text("{}")
    err, peak = _peak(lambda: read_json(f))
    assert err is None and peak < 2**20


def _lying_zip(real: bytes, declared: int) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("m.npy", real)
    data = bytearray(buf.getvalue())
    for sig, off in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = data.find(sig)
        data[at + off:at + off + 4] = struct.pack("<I", declared)
    return bytes(data)


def test_a_member_is_read_no_further_than_it_declares():
    data = _lying_zip(bytes(64 * 2**20), 100)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        err, peak = _peak(lambda: zipread.read_member(zf, zf.infolist()[0], 2**20))
    assert isinstance(err, zipfile.BadZipFile)  # the CRC of the first 100 bytes is not the member's
    assert peak < BUDGET
    with zipfile.ZipFile(io.BytesIO(_lying_zip(b"x" * 10, 10))) as zf:
        with pytest.raises(zipread.BoundedReadError, match="budget"):
            zipread.read_member(zf, zf.infolist()[0], 5)


def test_npz_arrays_round_trip_and_headers_must_match_their_size():
    arrays = {"a": np.arange(12.0).reshape(3, 4), "f": np.asfortranarray(np.ones((2, 3), np.int16)),
              "s": np.array("meta"), "e": np.zeros((0, 5))}
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    got = zipread.read_npz(io.BytesIO(buf.getvalue()), 2**20)
    for k, v in arrays.items():
        assert got[k].dtype == v.dtype and np.array_equal(got[k], v)
    with pytest.raises(zipread.BoundedReadError, match="budget"):
        zipread.read_npz(io.BytesIO(buf.getvalue()), 64)
    header = repr({"descr": "<f8", "fortran_order": False, "shape": (2**40,)}).encode()
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    bomb = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + bytes(8)
    zbuf = io.BytesIO()
    with zipfile.ZipFile(zbuf, "w") as zf:
        zf.writestr("bomb.npy", bomb)
    err, peak = _peak(lambda: zipread.read_npz(io.BytesIO(zbuf.getvalue()), 2**30))
    assert isinstance(err, zipread.BoundedReadError) and "8,796,093,022,208 bytes" in str(err), repr(err)
    assert peak < BUDGET


def test_a_garbage_sweep_journal_is_named(tmp_path):
    from geomlab.training.sweep_space import SweepError
    from geomlab.training.sweep_study import open_storage

    journal = tmp_path / "study.log"
    journal.write_bytes(b'{"op_code": 0}\nnot json at all\n')
    with pytest.raises(SweepError, match=r"study\.log .*line 2"):
        open_storage(journal)
    journal.write_bytes(b"[" * 100_000 + b"\n")
    with pytest.raises(SweepError, match=r"study\.log .*levels deep"):
        open_storage(journal)
    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)
    with pytest.raises(SweepError, match=r"fifo\.log"):
        open_storage(fifo)


def test_report_store_reads_a_deep_outcome_as_unfinished(tmp_path):
    from geomlab.report.store import RunStore

    store = RunStore(tmp_path)

    class Job:
        key = "j"

    (tmp_path / "j").mkdir()
    (tmp_path / "j" / "outcome.json").write_bytes(b"[" * 200_000 + b"]" * 200_000)
    assert store.outcome(Job()) is None


_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                       max_leaves=15)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=4096) | st.builds(lambda v, d: ("[" * d + json.dumps(v) + "]" * d).encode(), _values,
                                             st.integers(0, 5_000)))
def test_random_input_gives_a_value_or_json_input_error_within_budget(data):
    err, peak = _peak(lambda: parse_json(data, "x"))
    assert err is None or isinstance(err, JSONInputError), repr(err)
    assert peak < BUDGET


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=4096))
def test_random_bytes_as_npz_give_its_errors_within_budget(data):
    err, peak = _peak(lambda: zipread.read_npz(io.BytesIO(data), 2**20))
    errors = (zipread.BoundedReadError, zipfile.BadZipFile, EOFError, OSError)
    assert err is None or isinstance(err, errors), repr(err)
    assert peak < BUDGET


def test_a_zip_listing_too_many_entries_is_refused_before_parsing(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for i in range(20_000):
            zf.writestr(f"r/.{i}", b"")
    buf.seek(0)
    err, peak = _peak(lambda: zipread.open_zip(buf))
    assert isinstance(err, zipread.BoundedReadError) and "20,000 entries" in str(err), repr(err)
    assert peak < 2**20
    fifo = tmp_path / "trace.npz"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        zipread.read_npz(fifo, 2**20)
