"""Hugging Face folders in and out (:mod:`geomlab.checkpoints.hub`): save_pretrained / from_pretrained round
trips for every kind, weights that load strictly (by torch and by ``huggingface_hub``'s mixin), training state
and vocabulary in their own files, the model card, older layouts, conversion, and the Hub calls (mocked: no
network)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import torch
from helpers.models import VOCAB, small_model
from safetensors.torch import load_file, save_file

from geomlab.checkpoints import hub
from geomlab.checkpoints import io as ckpt
from geomlab.checkpoints.io import CheckpointError
from geomlab.data import Vocab
from geomlab.models import build_model, kinds, model_class

CARD = {"corpus": "tiny", "steps": 5, "valid_bpc": 3.25, "test_bpc": 3.5}
BUNDLED = Path(__file__).resolve().parents[2] / "assets" / "checkpoints"


def _logits(model, vocab_size: int = VOCAB.size) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randint(0, vocab_size, (2, 9), generator=torch.Generator().manual_seed(3))
    return x, _run(model, x)


def _run(model, x: torch.Tensor) -> torch.Tensor:
    """``model``'s logits on ``x`` in eval mode without autograd: every side of a comparison takes the same
    kernels (the CPU LSTM's inference and autograd paths round differently on some processors)."""
    with torch.no_grad():
        return model.eval()(x)


def _state(model) -> dict:
    """A training state as the trainer keeps it: optimiser moments per weight, an RNG state, the step."""
    moments = {f"optim.exp_avg.{k}": torch.randn_like(v) for k, v in model.state_dict().items()
               if v.is_floating_point()}
    return {"tensors": {**moments, "rng.cpu": torch.get_rng_state()}, "json": {"step": 5, "lr": 0.01}}


@pytest.mark.parametrize("kind", sorted(kinds()))
def test_every_kind_round_trips_with_equal_logits_and_strict_weights(tmp_path, kind):
    model = small_model(kind)
    folder = hub.save_pretrained(model, tmp_path / kind, VOCAB, dict(CARD))
    assert folder == tmp_path / kind
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "config.json", "geomlab.json",
                                                         "model.safetensors", "vocab.json"]
    x, want = _logits(model)
    got = hub.from_pretrained(folder)
    assert torch.equal(_run(got.model, x), want) and got.vocab == VOCAB and got.card["test_bpc"] == 3.5
    # the weights are the state_dict itself, no prefix, and load strictly into the class config.json builds
    state = load_file(folder / "model.safetensors")
    assert set(state) == set(model.state_dict()) and not any(k.startswith(("model.", "train.")) for k in state)
    fresh = build_model(json.loads((folder / "config.json").read_text()))
    fresh.load_state_dict(state, strict=True)
    assert torch.equal(_run(fresh, x), want)


@pytest.mark.parametrize("kind", ["lstm", "osmformer", "cem", "grassmann"])
def test_huggingface_hub_mixin_loads_the_folder_strictly(tmp_path, kind):
    from huggingface_hub import PyTorchModelHubMixin

    model = small_model(kind)
    folder = hub.save_pretrained(model, tmp_path / "m", VOCAB, dict(CARD), train_state=_state(model))
    mixed = type("Hubbed", (model_class(kind), PyTorchModelHubMixin), {})
    loaded = mixed.from_pretrained(folder, strict=True)  # config.json is the class's constructor argument
    x, want = _logits(model)
    assert torch.equal(_run(loaded, x), want)


def test_training_state_lives_in_its_own_files(tmp_path):
    model = small_model("lstm")
    state = _state(model)
    folder = hub.save_pretrained(model, tmp_path / "run", VOCAB, dict(CARD), train_state=state,
                                 train_config={"steps": 5}, metrics=[{"step": 5, "loss": 2.0}])
    assert set(load_file(folder / "model.safetensors")) == set(model.state_dict())
    stored = load_file(folder / "training_state.safetensors")
    assert set(stored) == set(state["tensors"])
    assert all(torch.equal(stored[k], v) for k, v in state["tensors"].items())
    assert json.loads((folder / "training_state.json").read_text()) == {"step": 5, "lr": 0.01}
    meta = json.loads((folder / "geomlab.json").read_text())
    assert "train_state" not in meta and "vocab" not in meta and "model_config" not in meta
    for name in ("config.json", "vocab.json", "training_state.safetensors", "training_state.json"):
        assert meta["files"][name]["sha256"] == hashlib.sha256((folder / name).read_bytes()).hexdigest()
    c = ckpt.load(folder)
    assert c.train_state["json"] == {"step": 5, "lr": 0.01} and c.train_config == {"steps": 5}
    assert all(torch.equal(c.train_state["tensors"][k], v) for k, v in state["tensors"].items())
    assert c.metrics == [{"step": 5, "loss": 2.0}]


@pytest.mark.parametrize("name", ["vocab.json", "training_state.safetensors", "training_state.json"])
def test_a_companion_from_another_save_is_refused(tmp_path, name):
    model = small_model("lstm")
    a = hub.save_pretrained(model, tmp_path / "a", VOCAB, dict(CARD), train_state=_state(model))
    other = Vocab.from_text("abcdefghijklmnopqrstuvwxyz" * 2 + "ROMEOJULIET:,?\n!.")
    b = hub.save_pretrained(small_model("lstm", vocab_size=other.size), tmp_path / "b", other, dict(CARD),
                            train_state={"tensors": {"x": torch.zeros(2)}, "json": {"step": 9}})
    shutil.copy(b / name, a / name)
    with pytest.raises(CheckpointError, match=f"a/{name} does not belong with a/geomlab.json"):
        ckpt.load(a)


def test_vocab_file_is_the_vocabulary(tmp_path):
    folder = hub.save_pretrained(small_model("transformer"), tmp_path / "t", VOCAB, dict(CARD))
    raw = json.loads((folder / "vocab.json").read_text())
    assert raw == json.loads(json.dumps(VOCAB.to_json())) and Vocab.from_json(raw) == VOCAB
    no_vocab = hub.save_pretrained(small_model("transformer"), tmp_path / "n", None, dict(CARD))
    assert not (no_vocab / "vocab.json").exists() and ckpt.load(no_vocab).vocab is None


def test_model_card_parses_with_license_tags_pipeline_and_eval_results(tmp_path):
    from huggingface_hub import ModelCard

    folder = hub.save_pretrained(small_model("osmformer"), tmp_path / "card", VOCAB, dict(CARD))
    data = ModelCard.load(folder / "README.md").data
    assert data.license == "mit" and data.library_name == "geomlab" and data.pipeline_tag == "text-generation"
    assert {"geomlab", "osm", "osmformer"} <= set(data.tags)
    results = {(r.dataset_split, r.metric_type): r.metric_value for r in data.eval_results}
    assert results == {("test", "bpc"): 3.5, ("validation", "bpc"): 3.25}
    word = hub.save_pretrained(small_model("osm-rnn"), tmp_path / "word", VOCAB,
                               {"task": {"task": "word-problem", "name": "S3"}, "test_accuracy": 0.75})
    data = ModelCard.load(word / "README.md").data
    assert data.pipeline_tag == "token-classification" and data.eval_results[0].metric_value == 0.75


def _as_format2(folder: Path) -> None:
    """Rewrite a format-3 folder as the previous folder layout: one model.safetensors with ``model.`` and
    ``train.`` tensors, the vocabulary and training state inside geomlab.json (built here by hand)."""
    meta = json.loads((folder / "geomlab.json").read_text())
    tensors = {f"model.{k}": v for k, v in load_file(folder / "model.safetensors").items()}
    if (folder / "training_state.safetensors").exists():
        tensors.update({f"train.{k}": v for k, v in load_file(folder / "training_state.safetensors").items()})
        meta["train_state"] = json.loads((folder / "training_state.json").read_text())
    for name in ("training_state.safetensors", "training_state.json", "vocab.json"):
        if (folder / name).exists():
            if name == "vocab.json":
                meta["vocab"] = json.loads((folder / name).read_text())
            (folder / name).unlink()
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    meta.update(format_version=2, tensors={k: {"shape": list(v.shape), "dtype": str(v.dtype)[6:]}
                                           for k, v in tensors.items()},
                files={"config.json": meta["files"]["config.json"]})
    for key in ("save_id", "train_tensors"):
        meta.pop(key, None)
    (folder / "geomlab.json").write_text(json.dumps(meta))


def test_older_layouts_still_load_and_convert_to_equal_logits(tmp_path):
    model = small_model("cem")
    x, want = _logits(model)
    old = hub.save_pretrained(model, tmp_path / "old" / "folder2", VOCAB, dict(CARD), train_state=_state(model))
    _as_format2(old)
    assert any(k.startswith("model.") for k in load_file(old / "model.safetensors"))
    flat = ckpt.save(tmp_path / "old" / "pair", model, VOCAB, dict(CARD), train_state=_state(model),
                     layout="flat")
    for path in (old, flat, tmp_path / "old" / "pair"):
        c = hub.from_pretrained(path)
        assert torch.equal(_run(c.model, x), want) and c.vocab == VOCAB and c.train_state["json"]["step"] == 5
    new = hub.convert(flat, tmp_path / "new")
    assert ckpt.load(new).meta["format_version"] == 3 and torch.equal(_run(ckpt.load(new).model, x), want)
    done, skipped = hub.convert_folder(tmp_path / "old", log=lambda s: None)
    assert not skipped
    assert sorted(p.name for p in done) == ["folder2", "pair"]
    assert sorted(p.name for p in (tmp_path / "old").iterdir()) == ["folder2", "pair"]  # old files gone
    for path in done:
        c = ckpt.load(path)
        assert c.meta["format_version"] == 3 and c.meta["name"] == path.name and torch.equal(_run(c.model, x), want)
        assert c.train_state["json"]["step"] == 5
    assert ckpt.load(tmp_path / "old" / "pair.json").path == tmp_path / "old" / "pair"  # the old name still opens it
    assert hub.convert_folder(tmp_path / "old", log=lambda s: None) == ([], [])  # nothing left to convert


def test_from_pretrained_downloads_a_hub_id_with_huggingface_hub(tmp_path, monkeypatch):
    model = small_model("llama")
    folder = hub.save_pretrained(model, tmp_path / "snapshot", VOCAB, dict(CARD))
    calls = []

    def fake_download(repo_id, **kw):
        calls.append((repo_id, kw))
        return str(folder)

    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_download)
    monkeypatch.chdir(tmp_path)
    c = hub.from_pretrained("someone/tiny-llama", revision="v1")
    x, want = _logits(model)
    assert torch.equal(_run(c.model, x), want)
    (repo_id, kw), = calls
    assert repo_id == "someone/tiny-llama" and kw["revision"] == "v1"
    assert set(kw["allow_patterns"]) >= {"config.json", "model.safetensors", "vocab.json", "geomlab.json"}
    hub.from_pretrained(folder)  # a local folder never asks the Hub
    with pytest.raises(CheckpointError, match="is missing"):
        hub.from_pretrained(Path("someone/tiny-llama"))  # nor does a Path, which is always local
    assert len(calls) == 1

    def offline(repo_id, **kw):
        raise OSError("We couldn't connect to the Hub\nmore")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    with pytest.raises(CheckpointError, match=r"^no local checkpoint someone/x and the Hugging Face Hub gave none "
                                              r"under that id \(OSError: We couldn't connect to the Hub\)$"):
        hub.from_pretrained("someone/x")


class _FakeApi:
    """Records the calls ``push_to_hub`` makes on ``huggingface_hub.HfApi``, with the files uploaded."""

    calls: list = []

    def __init__(self, token=None):
        self.token = token

    def create_repo(self, repo_id, **kw):
        self.calls.append(("create_repo", repo_id, kw))

    def upload_folder(self, *, repo_id, folder_path, **kw):
        files = sorted(p.name for p in Path(folder_path).iterdir())
        self.calls.append(("upload_folder", repo_id, Path(folder_path), files, kw))
        return type("Info", (), {"commit_url": f"https://huggingface.co/{repo_id}/commit/abc"})()


def test_push_to_hub_uploads_the_folder(tmp_path, monkeypatch):
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "HfApi", _FakeApi)
    _FakeApi.calls = []
    model = small_model("grassmann")
    folder = hub.save_pretrained(model, tmp_path / "g", VOCAB, dict(CARD))
    url = hub.push_to_hub(folder, "me/g", private=True)
    assert url == "https://huggingface.co/me/g/commit/abc"
    (c1, repo, kw1), (c2, repo2, path, files, kw2) = _FakeApi.calls
    assert (c1, repo, kw1["private"], kw1["exist_ok"]) == ("create_repo", "me/g", True, True)
    assert (c2, repo2, path) == ("upload_folder", "me/g", folder)
    assert "geomlab.json" in kw2["allow_patterns"] and not any(p.startswith(".") for p in kw2["allow_patterns"])
    assert not any(p.startswith("training_state") for p in kw2["allow_patterns"])  # weights-only by default
    _FakeApi.calls = []
    hub.push_to_hub(folder, "me/g", training_state=True)  # a run to resume elsewhere
    assert {"training_state.json", "training_state.safetensors"} <= set(_FakeApi.calls[1][4]["allow_patterns"])
    # an older layout is converted first: what goes up is a current folder
    _FakeApi.calls = []
    flat = ckpt.save(tmp_path / "pair", model, VOCAB, dict(CARD), layout="flat")
    hub.push_to_hub(flat, "me/pair")
    _, _, path, files, _ = _FakeApi.calls[1]
    assert path != flat and path.name == "pair" and "vocab.json" in files and "README.md" in files
    with pytest.raises(CheckpointError, match="not a Hub model id"):
        hub.push_to_hub(folder, "no-owner")


@pytest.mark.parametrize("folder", sorted(p for p in BUNDLED.iterdir() if p.is_dir()), ids=lambda p: p.name)
def test_bundled_checkpoints_are_hugging_face_folders(folder):
    from huggingface_hub import ModelCard

    assert not list(BUNDLED.glob("*.safetensors"))  # no flat pairs left beside the folders
    c = ckpt.load(f"bundled/{folder.name}")
    assert c.layout == "folder" and c.meta["format_version"] == 3
    assert set(load_file(folder / "model.safetensors")) == set(c.model.state_dict())
    data = ModelCard.load(folder / "README.md").data
    assert data.license == "mit" and "geomlab" in data.tags and data.pipeline_tag
    assert data.eval_results and data.model_name == folder.name
    split = {r.dataset_split for r in data.eval_results}
    assert split == {"test", "validation"}
    if data.pipeline_tag == "text-generation":
        bpc = {r.dataset_split: r.metric_value for r in data.eval_results if r.metric_type == "bpc"}
        assert bpc == {"test": c.card["test_bpc"], "validation": c.card["valid_bpc"]}
