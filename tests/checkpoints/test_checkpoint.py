"""Tests for geomlab.checkpoints.io: round trip and every CheckpointError case."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from geomlab.checkpoints import files as ckpt_files
from geomlab.checkpoints import io as ckpt
from geomlab.checkpoints.io import CheckpointError
from geomlab.data import Vocab
from geomlab.models import build_model


@pytest.fixture
def saved(tmp_path, tiny_text):
    vocab = Vocab.from_text(tiny_text)
    torch.manual_seed(0)
    model = build_model({"kind": "lstm", "vocab_size": vocab.size, "hidden": 12, "embedding_dim": 4})
    card = {"corpus": "tiny", "split": "90/5/5", "steps": 3, "seed": 0, "valid_bpc": 3.5, "test_bpc": 3.6,
            "train_time_s": 1.0, "device": "cpu"}
    state = {"tensors": {"rng.batch": torch.Generator().manual_seed(1).get_state(),
                         "optim.0.step": torch.tensor(3.0)},
             "json": {"step": 3}}
    path = ckpt.save(tmp_path / "sub" / "run", model, vocab, card, train_config={"steps": 3},
                     metrics=[{"step": 1, "loss": 4.0}, {"step": 2, "loss": float("nan")}], train_state=state)
    return path, model, vocab


def test_round_trip(saved):
    path, model, vocab = saved
    assert path.name == "run.json" and path.with_suffix(".safetensors").is_file()
    for p in (path, path.with_suffix(".safetensors"), path.with_suffix("")):
        c = ckpt.load(p)
        assert c.vocab == vocab
        assert c.model_config == model.config
        sd = c.model.state_dict()
        for k, v in model.state_dict().items():
            assert torch.equal(sd[k], v)
        x = torch.randint(0, vocab.size, (2, 9))
        assert torch.equal(c.model(x), model.eval()(x))
    meta = json.loads(path.read_text())
    assert meta["format_version"] == ckpt.FLAT_FORMAT_VERSION  # the flat layout is unchanged
    assert c.card["params_effective"] == c.card["params_stored"] == sum(p.numel() for p in model.parameters())
    assert c.card["geomlab_version"] and c.card["valid_bpc"] == 3.5
    assert c.train_config == {"steps": 3}
    assert c.metrics[1]["loss"] is None  # NaN is not valid JSON; stored as null
    assert c.train_state["json"] == {"step": 3} and "rng.batch" in c.train_state["tensors"]


def test_no_pickle_anywhere(saved):
    path, _, _ = saved
    raw = path.with_suffix(".safetensors").read_bytes()
    assert b"\x80\x04" not in raw[:16] and raw[8:9] == b"{"  # safetensors header, not a pickle stream
    json.loads(path.read_text())  # plain JSON


def test_missing_files(saved):
    path, _, _ = saved
    st_path = path.with_suffix(".safetensors")
    st_bytes = st_path.read_bytes()
    st_path.unlink()
    with pytest.raises(CheckpointError, match="missing"):
        ckpt.load(path)
    st_path.write_bytes(st_bytes)
    path.unlink()
    with pytest.raises(CheckpointError, match="missing"):
        ckpt.load(st_path)


def test_truncated_files(saved):
    path, _, _ = saved
    st_path = path.with_suffix(".safetensors")
    good_json, good_st = path.read_text(), st_path.read_bytes()
    st_path.write_bytes(good_st[: len(good_st) // 2])
    with pytest.raises(CheckpointError, match="truncated"):
        ckpt.load(path)
    st_path.write_bytes(bytes(range(256)) * 20)  # random bytes: our words, not the reader's ("header too large")
    with pytest.raises(CheckpointError, match="not a safetensors file") as err:
        ckpt.load(path)
    assert "header too" not in str(err.value) and "\n" not in str(err.value)
    st_path.write_bytes(good_st)
    path.write_text(good_json[: len(good_json) // 2])
    with pytest.raises(CheckpointError, match="not valid JSON"):
        ckpt.load(path)


def _rewrite(path, fn_meta=None, fn_tensors=None):
    st_path = path.with_suffix(".safetensors")
    if fn_tensors:
        tensors = load_file(str(st_path))
        fn_tensors(tensors)
        save_file(tensors, str(st_path))
    if fn_meta:
        meta = json.loads(path.read_text())
        fn_meta(meta)
        path.write_text(json.dumps(meta))


def test_json_tensor_mismatch_names(saved):
    path, _, _ = saved
    _rewrite(path, fn_tensors=lambda t: t.pop("model.head.bias"))
    with pytest.raises(CheckpointError, match="model.head.bias"):
        ckpt.load(path)


def test_json_tensor_mismatch_shape(saved):
    path, _, _ = saved

    def widen(t):
        t["model.head.bias"] = torch.zeros(t["model.head.bias"].numel() + 1)

    _rewrite(path, fn_tensors=widen)
    with pytest.raises(CheckpointError, match="shape"):
        ckpt.load(path)


def test_json_tensor_mismatch_dtype(saved):
    path, _, _ = saved

    def to_double(t):
        t["model.head.bias"] = t["model.head.bias"].double()

    _rewrite(path, fn_tensors=to_double)
    with pytest.raises(CheckpointError, match="dtype"):
        ckpt.load(path)


def test_consistent_files_that_do_not_fit_the_config(saved):
    path, _, _ = saved

    def bigger(meta):
        meta["model_config"]["hidden"] = 13

    _rewrite(path, fn_meta=bigger)
    with pytest.raises(CheckpointError, match="shape"):
        ckpt.load(path)


def test_unknown_kind(saved):
    path, _, _ = saved
    _rewrite(path, fn_meta=lambda m: m["model_config"].update(kind="no-such-kind"))
    with pytest.raises(CheckpointError, match="no-such-kind"):
        ckpt.load(path)


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_non_finite_weights(saved, value):
    path, _, _ = saved

    def poison(t):
        t["model.lstm.weight_hh_l0"][0, 0] = value

    _rewrite(path, fn_tensors=poison)
    with pytest.raises(CheckpointError, match="weight_hh_l0.*non-finite"):
        ckpt.load(path)


def test_newer_format_version(saved):
    path, _, _ = saved
    _rewrite(path, fn_meta=lambda m: m.update(format_version=ckpt.FORMAT_VERSION + 1))
    with pytest.raises(CheckpointError, match="newer"):
        ckpt.load(path)


def test_vocab_size_mismatch(saved):
    path, _, _ = saved
    _rewrite(path, fn_meta=lambda m: m["vocab"]["tokens"].pop(0))
    with pytest.raises(CheckpointError, match="vocabulary"):
        ckpt.load(path)


def test_save_refuses_non_finite(tmp_path):
    model = build_model({"kind": "lstm", "vocab_size": 5, "hidden": 3})
    with torch.no_grad():
        model.head.weight[0, 0] = float("nan")
    with pytest.raises(CheckpointError, match="head.weight"):
        ckpt.save(tmp_path / "bad", model, None)
    assert not (tmp_path / "bad.json").exists()


def test_errors_are_value_errors():
    assert issubclass(CheckpointError, ValueError)


def _all_kinds():
    from geomlab.models import kinds

    return kinds()


@pytest.mark.parametrize("kind", _all_kinds())
def test_every_registered_kind_round_trips(kind, tmp_path):
    torch.manual_seed(0)
    try:
        model = build_model({"kind": kind, "vocab_size": 20}).eval()
    except Exception as exc:  # another family's module is not ready: not a checkpoint problem
        pytest.skip(f"{kind} does not build with its defaults: {exc}")
    c = ckpt.load(ckpt.save(tmp_path / kind, model, None, {}))
    x = torch.randint(0, 20, (1, 12))
    with torch.no_grad():
        assert torch.equal(model(x), c.model(x))
    assert c.card["params_effective"] > 0


def test_saved_files_follow_the_umask(saved):
    """mkstemp creates 0600 files; a saved checkpoint gets the usual mode (0666 minus the umask)."""
    import os
    import stat

    from geomlab.checkpoints import io as ckpt

    for path in ckpt.paths(saved[0]):
        mode = stat.S_IMODE(os.stat(path).st_mode)
        assert mode == 0o666 & ~ckpt_files.UMASK, oct(mode)


def test_load_takes_a_bundled_name_and_a_local_path_wins(saved, tmp_path, monkeypatch):
    """``load("bundled/NAME")`` loads the bundled checkpoint NAME (geomlab.core.locate.bundled_checkpoint, the app's
    and the command line's spelling) from any folder, a folder or a flat pair; a local checkpoint of that
    path wins; an unknown name is the usual one-line CheckpointError."""
    from geomlab.core.locate import bundled_checkpoint

    _, model, vocab = saved
    bundled = tmp_path / "bundled-here"
    ckpt.save(bundled / "folder-run", model, vocab, {"corpus": "tiny"}, layout="folder")
    flat = ckpt.save(bundled / "flat-run", model, vocab, {"corpus": "tiny"}, layout="flat")
    monkeypatch.setenv("GEOMLAB_BUNDLED_DIR", str(bundled))
    monkeypatch.chdir(tmp_path)
    assert bundled_checkpoint("bundled/folder-run") == bundled / "folder-run"
    assert bundled_checkpoint("bundled/flat-run.json") == bundled_checkpoint("bundled/flat-run") == flat
    assert bundled_checkpoint("flat-run") is None and bundled_checkpoint("flat-run", bare=True) == flat
    assert bundled_checkpoint("elsewhere/flat-run", bare=True) is None and bundled_checkpoint("bundled/nope") is None
    assert bundled_checkpoint("bundled/.hidden") is None
    for ref in ("bundled/folder-run", "bundled/flat-run", "bundled/flat-run.json"):
        c = ckpt.load(ref)
        for k, v in model.state_dict().items():
            assert torch.equal(c.model.state_dict()[k], v), (ref, k)
    assert ckpt.load("bundled/folder-run").path == bundled / "folder-run"
    with pytest.raises(CheckpointError, match="no bundled checkpoint .nope.; the bundled ones: flat-run, folder-run"):
        ckpt.load("bundled/nope")
    with pytest.raises(CheckpointError):
        ckpt.load("folder-run")  # a bare name is a local path for the library
    # the command line's near-miss hint names the bundled checkpoints of this folder, not the shipped ones
    with pytest.raises(CheckpointError, match=r"did you mean flat-run\?"):
        ckpt.find("flat-ru")
    with pytest.raises(CheckpointError) as err:
        ckpt.find("lstm-tinyshakespear")
    assert "did you mean" not in str(err.value)
    # a local checkpoint at ./bundled/flat-run wins over the bundled one
    torch.manual_seed(5)
    other = build_model(dict(model.config))
    ckpt.save(tmp_path / "bundled" / "flat-run", other, vocab, {"corpus": "local"})
    assert ckpt.load("bundled/flat-run").card["corpus"] == "local"


def test_the_shipped_bundled_checkpoints_load_by_name(monkeypatch, tmp_path):
    monkeypatch.delenv("GEOMLAB_BUNDLED_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    c = ckpt.load("bundled/osm-rnn-o-s5")
    assert c.model.config["kind"] == "osm-rnn" and c.path.name == "osm-rnn-o-s5" and c.layout == "folder"
    # an unknown bundled name says so and lists the bundled ones (not "file bundled/nosuch.json is missing")
    with pytest.raises(ckpt.CheckpointError, match=r"^no bundled checkpoint 'nosuch'; the bundled ones: .*osm-rnn-o-s5"):
        ckpt.load("bundled/nosuch")
    # the command line's bare name is a local path for the library: the error gives the library's spelling
    with pytest.raises(ckpt.CheckpointError, match=r"missing; a bundled checkpoint has that name: load it as "
                                                   r"'bundled/osm-rnn-o-s5'$"):
        ckpt.load("osm-rnn-o-s5")


def test_a_name_close_to_a_bundled_one_is_suggested(tmp_path, monkeypatch):
    # a shortened or misspelt bundled name gets the names it probably meant; a name far from all gets none
    monkeypatch.delenv("GEOMLAB_BUNDLED_DIR", raising=False)  # the shipped checkpoints (app tests repoint it)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CheckpointError, match=r"\(did you mean grassmann-tinyshakespeare\?\); expected"):
        ckpt.find("grassmann")
    with pytest.raises(CheckpointError, match=r"did you mean lstm-tinyshakespeare"):
        ckpt.find("lstm-tinyshakespere")
    with pytest.raises(CheckpointError) as err:
        ckpt.find("zzz")
    assert "did you mean" not in str(err.value)
