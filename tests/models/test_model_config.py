"""Typed model configs (geomlab.models.config): one per kind, validated on construction, converting to and
from the plain dict checkpoints store."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from geomlab.models import build_model, full_config, kinds, model_class, model_config
from geomlab.models.cem import CEMModel, CEMRegressor, CEMStackConfig
from geomlab.models.osm import OSMConfigError

CKPT_DIR = Path(__file__).resolve().parents[2] / "assets" / "checkpoints"


@pytest.mark.parametrize("kind", kinds())
def test_every_kind_has_its_config_class(kind):
    cls = model_class(kind).config_class
    assert cls.kind == kind and dataclasses.is_dataclass(cls)
    cfg = cls.from_dict({"vocab_size": 7})
    d = cfg.to_dict()
    assert list(d)[:2] == ["kind", "vocab_size"] and d["kind"] == kind and d["vocab_size"] == 7
    assert {k: v for k, v in d.items() if k not in ("kind", "vocab_size")} == model_class(kind).default_config()
    assert cls.from_dict(d) == cfg  # the dict reads back to the same config


@pytest.mark.parametrize("path", sorted(p for p in CKPT_DIR.iterdir() if p.is_dir()), ids=lambda p: p.name)
def test_bundled_checkpoint_configs_convert_back_to_the_same_json(path):
    stored = json.loads((path / "config.json").read_text())
    again = model_config(stored).to_dict()
    assert json.dumps(again) == json.dumps(stored)  # same keys, order and values: the same config.json
    assert build_model(stored).config == stored


def test_an_older_config_gets_todays_defaults_for_missing_keys():
    stored = json.loads((CKPT_DIR / "osmformer-u-tinyshakespeare" / "config.json").read_text())
    old = {k: v for k, v in stored.items() if k not in ("expm", "complex_mode", "token_param")}
    d = full_config(old)
    assert (d["expm"], d["complex_mode"], d["token_param"]) == ("auto", "native", "coords")
    assert list(d) == list(stored)


def test_values_are_kept_as_given():
    d = full_config({"kind": "osm-rnn", "vocab_size": 6, "tau": 5, "group": "T", "d": 4})
    assert d["tau"] == 5 and type(d["tau"]) is int  # an int for a float key stays an int, as before


@pytest.mark.parametrize("kind,key,value,says", [
    ("transformer", "d_model", 50, "d_model=50 is not divisible by n_heads=4"),
    ("transformer", "dropout", 1.0, "dropout must be in [0, 1)"),
    ("lstm", "hidden", True, "hidden must be an integer, got True"),
    ("lstm", "embedding_dim", -1, "embedding_dim must be >= 0"),
    ("llama", "d_ff", 0, "d_ff must be a positive integer"),
    ("llama", "n_heads", 3, "heads of even width"),
    ("cem", "diagonal", "full", "diagonal must be one of ('none', 'shared', 'per_head')"),
    ("cem", "inference_recursion_steps", 0, "inference_recursion_steps must be null or a positive integer"),
    ("cem", "recursion_steps", 1.5, "recursion_steps must be an integer"),
    ("osm-rnn", "rnn_input", "token", "rnn_input must be one of ('pull', 'pull+token')"),
    ("osm-rnn", "block", 2, "block is only an option of group 'O-block'"),
    ("osmformer", "heads", 3, "heads=3 must be >= 1 and divide d=16"),
    ("osmformer", "beta", 0.0, "beta must be positive"),
    ("osmformer", "learn_alibi", 1, "learn_alibi must be true or false"),
    ("grassmann", "rank", 1, "rank must be >= 2"),
    ("grassmann", "offsets", [], "offsets must be a non-empty list"),
    ("grassmann", "offset_schedule", "per_layer", "needs one offset per layer"),
    ("grassmann-attn", "d_model", 62, "must be a positive multiple of n_heads"),
])
def test_an_invalid_value_is_one_line_naming_the_key(kind, key, value, says):
    with pytest.raises(ValueError) as info:
        build_model({"kind": kind, "vocab_size": 10, key: value})
    msg = str(info.value)
    assert "\n" not in msg and key.split("_")[0] in msg and says in msg and msg.startswith(f"{kind}: ")


def test_errors_keep_their_family_class_and_unknown_keys_are_named():
    with pytest.raises(OSMConfigError):
        full_config({"kind": "osmformer", "vocab_size": 10, "position": "learned"})
    with pytest.raises(ValueError, match=r"unknown config keys for 'lstm': \['hiden'\]; known: "):
        full_config({"kind": "lstm", "vocab_size": 10, "hiden": 5})
    # a key people expect that the kind lacks by design says why
    with pytest.raises(ValueError, match=r"\['group'\] \(group: only OSM models \(osm-rnn, osmformer\) have"):
        full_config({"kind": "lstm", "vocab_size": 10, "group": "O"})
    with pytest.raises(OSMConfigError, match=r"\['dropout'\] \(dropout: OSM models have no dropout, by design"):
        full_config({"kind": "osm-rnn", "vocab_size": 10, "dropout": 0.1})
    with pytest.raises(ValueError, match="needs a 'vocab_size'"):
        full_config({"kind": "lstm"})
    with pytest.raises(ValueError, match="is not a 'lstm' config"):
        model_class("lstm").config_class.from_dict({"kind": "cem", "vocab_size": 3})


def test_a_model_takes_the_typed_config_or_the_dict():
    cfg = model_config({"kind": "llama", "vocab_size": 11, "d_model": 16, "n_layers": 1, "d_ff": 20})
    torch.manual_seed(0)
    a = model_class("llama")(cfg)
    torch.manual_seed(0)
    b = build_model(cfg.to_dict())
    assert a.cfg == b.cfg and a.config == b.config == cfg.to_dict()
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    with pytest.raises(ValueError, match="cem needs a CEMConfig, got a LlamaConfig"):
        CEMModel(cfg)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.d_model = 8


def test_cem_regressor_config_is_the_stack_config_with_its_own_defaults():
    m = CEMRegressor({"d_model": 16, "n_heads": 2, "d_ff": 12})
    assert m.config == {**CEMStackConfig.defaults(), "d_model": 16, "n_layers": 2, "n_heads": 2, "d_ff": 12,
                        "positional": "none"}
    assert list(m.config) == list(CEMStackConfig.defaults())
    with pytest.raises(ValueError, match="unknown config keys"):
        CEMRegressor({"kind": "cem", "vocab_size": 3})


def test_set_inference_steps_changes_eval_recursion_and_returns_the_previous_value():
    torch.manual_seed(0)
    m = build_model({"kind": "cem", "vocab_size": 9, "d_model": 8, "n_heads": 2, "d_ff": 12, "n_layers": 1}).eval()
    tokens = torch.randint(0, 9, (1, 12))
    one = m(tokens)
    assert m.set_inference_steps(3) is None
    assert m.stack.steps == 3 and m.config["inference_recursion_steps"] == 3 == m.cfg.inference_recursion_steps
    assert m.record(tokens)["energies"].shape[2] == 4  # steps 0..3
    assert not torch.allclose(m(tokens), one)
    assert m.set_inference_steps(None) == 3
    assert torch.equal(m(tokens), one)
    with pytest.raises(ValueError, match="inference_recursion_steps"):
        m.set_inference_steps(0)
