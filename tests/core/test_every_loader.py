"""Random byte strings and random JSON fed to every loader of outside input: each returns a value or raises
the module's own error (one line of at most 300 characters where a person reads it), never another
exception, and never allocates more than its budget (tracemalloc peak).

Loaders: the JSON reader; a checkpoint folder and a flat pair (``read_meta``, ``load``); an upload (a zip and
loose files); a trace ``.npz``; the catalog listing (which never raises: a broken checkpoint is listed with
its reason); a sweep journal; the report store's run records; the report command's results, ``--restore``
and ``--speed`` files; ``train --config`` values."""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from geomlab.checkpoints import catalog, uploads
from geomlab.checkpoints import io as ckpt
from geomlab.checkpoints.catalog import CatalogError
from geomlab.checkpoints.io import CheckpointError
from geomlab.core.jsonread import JSONInputError, parse_json
from geomlab.data import Vocab
from geomlab.models import build_model
from geomlab.trace.base import TraceError
from geomlab.trace.files import load_trace
from helpers.memory import peak as _peak

#: Peak Python-traced memory one hostile input may cost any loader (bytes).
BUDGET = 16 * 2**20
SETTINGS = settings(max_examples=int(os.environ.get('EVERY_LOADER_EXAMPLES', 25)), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

_leaf = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
_values = st.recursive(_leaf, lambda inner: st.lists(inner, max_size=3) |
                       st.dictionaries(st.text(max_size=4) | st.sampled_from(["kind", "comparisons", "protocol",
                                                                              "rows", "tensors", "model_config"]),
                                       inner, max_size=4), max_leaves=20)
#: JSON text nested around a random value (0 to 200 levels, just under and over the limit of 128, past
#: Python's recursion limit), or random bytes.
INPUTS = (st.builds(lambda v, d: ("[" * d + json.dumps(v) + "]" * d).encode(), _values,
                    st.integers(0, 200) | st.sampled_from([127, 128, 129, 5000, 100_000]))
          | st.binary(max_size=2048))


def _check(fn, errors):
    """Run ``fn`` within the budget; its exception, if any, is one of ``errors``; returns its value/error."""
    err, top = _peak(fn)
    assert err is None or isinstance(err, errors), repr(err)[:500]
    assert top < BUDGET, f"{top / 2**20:.1f} MiB"
    return err


def _short(err) -> None:
    if err is not None:
        assert "\n" not in str(err) and len(str(err)) <= 300, str(err)[:500]


_GOOD: dict[str, dict[str, bytes]] = {}


@pytest.fixture(scope="module", autouse=True)
def _warm(tmp_path_factory):
    """A small real checkpoint (folder and flat pair) kept in :data:`_GOOD`, and one good pass through each
    loader, so that what a first call imports once is not counted against a hostile input's budget."""
    tmp = tmp_path_factory.mktemp("good")
    torch.manual_seed(0)
    vocab = Vocab.from_text("the quick brown fox")
    model = build_model({"kind": "lstm", "vocab_size": vocab.size, "hidden": 8, "embedding_dim": 4})
    folder = Path(ckpt.save(tmp / "run", model, vocab, {"corpus": "tiny"}, layout="folder"))
    pair = Path(ckpt.save(tmp / "pair", model, vocab, {"corpus": "tiny"}, layout="flat"))
    _GOOD["folder"] = {p.name: p.read_bytes() for p in folder.iterdir()}
    _GOOD["pair"] = {s: pair.with_suffix(s).read_bytes() for s in (".json", ".safetensors")}
    ckpt.load(folder)
    uploads.validate_upload({f"run/{k}": v for k, v in _GOOD["folder"].items()})
    from geomlab.commands.cli import main  # noqa: F401 - imported once
    from geomlab.training.sweep_study import open_storage

    open_storage(tmp / "warm.log")
    with pytest.raises(TraceError):
        load_trace(b"PK")
    yield


@SETTINGS
@given(INPUTS)
def test_json_reader(data):
    _check(lambda: parse_json(data, "x"), JSONInputError)


@SETTINGS
@given(st.sampled_from(["geomlab.json", "config.json", "model.safetensors", "README.md"]), INPUTS)
def test_checkpoint_folder_and_upload(tmp_path_factory, which, data):
    files = dict(_GOOD["folder"], **{which: data})
    folder = tmp_path_factory.mktemp("f") / "run"
    folder.mkdir()
    for name, raw in files.items():
        (folder / name).write_bytes(raw)
    _check(lambda: ckpt.read_meta(folder), CheckpointError)
    _check(lambda: ckpt.load(folder), CheckpointError)
    _short(_check(lambda: uploads.validate_upload({f"run/{k}": v for k, v in files.items()}), CatalogError))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, raw in files.items():
            zf.writestr(f"run/{name}", raw)
    _short(_check(lambda: uploads.validate_upload({"run.zip": buf.getvalue()}), CatalogError))


@SETTINGS
@given(st.sampled_from([".json", ".safetensors"]), INPUTS)
def test_checkpoint_pair_and_upload(tmp_path_factory, which, data):
    files = dict(_GOOD["pair"], **{which: data})
    stem = tmp_path_factory.mktemp("p") / "pair"
    for suffix, raw in files.items():
        stem.with_suffix(suffix).write_bytes(raw)
    _check(lambda: ckpt.load(stem.with_suffix(".json")), CheckpointError)
    _short(_check(lambda: uploads.validate_upload({f"pair{k}": v for k, v in files.items()}), CatalogError))


@SETTINGS
@given(INPUTS)
def test_upload_zip_of_random_bytes(data):
    _short(_check(lambda: uploads.validate_upload({"x.zip": data}), CatalogError))


@SETTINGS
@given(INPUTS)
def test_trace_file(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("t") / "t.npz"
    path.write_bytes(data)
    _short(_check(lambda: load_trace(path), TraceError))


@SETTINGS
@given(st.sampled_from(["run/geomlab.json", "run/config.json", "run/model.safetensors", "pair.json",
                        "deep/a/b/pair.json"]), INPUTS)
def test_catalog_listing_never_raises(tmp_path_factory, monkeypatch, where, data):
    good = _GOOD
    tmp = tmp_path_factory.mktemp("c")
    runs = tmp / "runs"
    (runs / "ok").mkdir(parents=True)
    for name, raw in good["folder"].items():
        (runs / "ok" / name).write_bytes(raw)
    target = runs / where
    target.parent.mkdir(parents=True, exist_ok=True)
    if where.startswith("run/"):
        for name, raw in good["folder"].items():
            (runs / "run" / name).write_bytes(raw)
    elif where.endswith("pair.json"):
        target.with_suffix(".safetensors").write_bytes(good["pair"][".safetensors"])
    target.write_bytes(data)
    monkeypatch.setenv("GEOMLAB_RUNS_DIR", str(runs))
    monkeypatch.setenv("GEOMLAB_BUNDLED_DIR", str(tmp / "none"))
    out: list = []
    _check(lambda: out.append(catalog.scan()), ())
    listed, broken = out[0]
    assert "ok" in {e.name for e in listed}  # the good one is always listed
    for b in broken:
        _short(CatalogError(b.reason))


@SETTINGS
@given(INPUTS)
def test_sweep_journal(tmp_path_factory, data):
    from geomlab.training.sweep_space import SweepError
    from geomlab.training.sweep_study import open_storage

    journal = tmp_path_factory.mktemp("s") / "study.log"
    journal.write_bytes(data + b"\n")
    _short(_check(lambda: open_storage(journal), SweepError))


@SETTINGS
@given(st.sampled_from(["outcome.json", "cpu.json"]), INPUTS)
def test_report_store_run_records(tmp_path_factory, name, data):
    from geomlab.report.store import RunStore

    root = tmp_path_factory.mktemp("r")
    (root / "j").mkdir()
    (root / "j" / name).write_bytes(data)

    class Job:
        key = "j"

    store = RunStore(root)
    out: list = []
    _check(lambda: out.append(store.outcome(Job())), ())
    assert out[0] is None or isinstance(out[0], dict), out  # its callers read it with .get
    _check(lambda: out.append(store.cpu_so_far(Job())), ())
    assert isinstance(out[1], float)


@SETTINGS
@given(st.sampled_from([["report", "--from-json"], ["report", "--converged", "--collect", "--restore"],
                        ["report", "--converged", "--collect", "--speed"]]), INPUTS)
def test_report_command_inputs(tmp_path_factory, monkeypatch, capsys, argv, data):
    from geomlab.commands.cli import main

    tmp = tmp_path_factory.mktemp("rc")
    monkeypatch.chdir(tmp)
    (tmp / "in.json").write_bytes(data)
    codes: list[int] = []
    _check(lambda: codes.append(main([*argv, "in.json", "--out", str(tmp / "out" / "r.md"), "--no-png",
                                      *(["--store", str(tmp / "store")] if "--converged" in argv else [])])), ())
    err = capsys.readouterr().err
    if codes[0] != 0:
        assert codes[0] == 2 and err.startswith("error: ") and err.count("\n") == 1 and len(err) <= 400, err[:500]


@SETTINGS
@given(INPUTS)
def test_train_config_values(data):
    from geomlab.commands.train import parse_config

    text = data.decode("utf-8", "replace")
    _check(lambda: parse_config([f"x={text}"]), ValueError)
