"""Inputs an attacker tried after the bounded readers were in: each is refused in one line of the module's own
error, quickly and without a large allocation (each case hung, took minutes or raised a raw exception before)."""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest

from geomlab.core.jsonread import MAX_JSON_VALUES, JSONInputError, json_shape, parse_json


@pytest.mark.timeout(60)
@pytest.mark.parametrize("data", [b'"' + b'\\"' * 200_000, b'{"a": "' + b'\\"' * 200_000 + b"]", b'"abc\\'],
                         ids=["escaped quotes", "escaped quotes in an object", "trailing backslash"])
def test_an_unterminated_string_is_refused_in_linear_time(data):
    """A string of escaped quotes that never ends made the string pattern retry at every quote (quadratic:
    minutes for 100 KB); it is one JSONInputError now."""
    with pytest.raises(JSONInputError):
        parse_json(data, "x.json")


def test_strings_hide_their_brackets_and_commas_from_the_shape():
    assert json_shape(b'{"a": "]]],,,{{{", "b": ["\\"[", 1]}') == (2, 4)
    assert json_shape(b'["a\\\\", [1, 2]]') == (2, 4)  # an escaped backslash ends before the quote


def test_millions_of_empty_containers_are_refused_before_parsing():
    """15 MB of ``{},`` parsed to 361 MiB; the count of arrays, objects and values is capped first."""
    data = b"[" + b"{}," * (8 * MAX_JSON_VALUES) + b"{}]"  # 6 MB; json.loads of it allocates over 200 MiB
    tracemalloc.start()
    try:
        with pytest.raises(JSONInputError, match="arrays, objects and values"):
            parse_json(data, "big.json")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 48 * 2**20  # the scan's copies of the text and one chunk of brackets, nothing per value


@pytest.mark.parametrize("bad", ["1e400", '"abc"', "5"])
def test_a_checkpoint_field_of_the_wrong_kind_is_one_checkpoint_error(tmp_path, bad):
    from geomlab.checkpoints import io
    from geomlab.checkpoints.layout import CheckpointError
    from tests.helpers.models import VOCAB, small_model

    io.save(tmp_path / "c", small_model("lstm"), VOCAB)
    meta_file = tmp_path / "c.json"
    meta = json.loads(meta_file.read_text())
    meta["card"] = "PLACEHOLDER"
    meta_file.write_text(json.dumps(meta).replace('"PLACEHOLDER"', bad))
    with pytest.raises(CheckpointError) as err:
        io.load(tmp_path / "c")
    assert "\n" not in str(err.value) and "c.json" in str(err.value)


@pytest.mark.parametrize("family", [["osm"], {"a": 1}, 3])
def test_a_trace_family_that_is_not_a_name_is_a_trace_error(tmp_path, family):
    from geomlab.trace import TraceError, load_trace, save_trace
    from tests.helpers.models import get_trace

    path = tmp_path / "t.npz"
    save_trace(get_trace("cem"), path)
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays["__meta__"]))
    meta["family"] = family
    arrays["__meta__"] = np.array(json.dumps(meta))
    np.savez_compressed(path, **arrays)
    with pytest.raises(TraceError, match="family"):
        load_trace(path)


@pytest.mark.parametrize("line", ['{"op_code": 99, "worker_id": "w"}', '{"op_code": "0", "worker_id": "w"}'])
def test_a_journal_record_optuna_does_not_know_is_one_sweep_error(tmp_path, line):
    from geomlab.training.sweep_space import SweepError
    from geomlab.training.sweep_study import open_storage, open_study

    journal = tmp_path / "j.log"
    journal.write_text(line + "\n")
    with pytest.raises(SweepError) as err:
        open_study(open_storage(str(journal)), "s", "minimize")
    assert str(journal) in str(err.value) and "\n" not in str(err.value)


def test_a_parameter_budget_of_hundreds_of_digits_is_one_line():
    out = subprocess.run([sys.executable, "-m", "geomlab", "train", "--params", "1" * 400], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2 and "--params" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("change", ["string logits", "complex logits", "float tokens", "negative tokens",
                                    "list labels", "dict text"])
def test_a_trace_with_garbage_contents_is_a_trace_error(tmp_path, change):
    """Arrays of the wrong kind (text or complex logits, float or negative tokens) and metadata of the wrong
    type loaded silently; each is a TraceError now. NaN logits still load (a diverged model is worth a look)."""
    from geomlab.trace import TraceError, load_trace, save_trace
    from tests.helpers.models import get_trace

    path = tmp_path / "t.npz"
    save_trace(get_trace("cem"), path)
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays["__meta__"]))
    if change == "string logits":
        arrays["logits"] = arrays["logits"].astype("U3")
    elif change == "complex logits":
        arrays["logits"] = arrays["logits"].astype(np.complex64)
    elif change == "float tokens":
        arrays["tokens"] = arrays["tokens"].astype(np.float32)
    elif change == "negative tokens":
        arrays["tokens"] = arrays["tokens"] - 100
    elif change == "list labels":
        meta["labels"] = [[x] for x in meta["labels"]]
    else:
        meta["text"] = {"a": 1}
    arrays["__meta__"] = np.array(json.dumps(meta))
    np.savez_compressed(path, **arrays)
    with pytest.raises(TraceError):
        load_trace(path)
    arrays = {k: v for k, v in arrays.items()}
    good = tmp_path / "nan.npz"
    save_trace(get_trace("cem"), good)
    with np.load(good) as z:
        ok = {k: z[k] for k in z.files}
    ok["logits"] = np.full_like(ok["logits"], np.nan)
    np.savez_compressed(good, **ok)
    assert np.isnan(load_trace(good).logits).all()
