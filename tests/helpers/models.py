"""Small random models of every kind and their traces on one short text, shared by the trace, figure and
explanation tests."""

from __future__ import annotations

import pytest
import torch

from geomlab.data import Vocab
from geomlab.models import build_model, kinds
from geomlab.trace import encode_text, trace

TEXT = "ROMEO: soft, what light?\nJULIET: ay me"
VOCAB = Vocab.from_text("ROMEOJULIET: soft,whaligy?\nm abcdefhnpqruvwxz.!")

CONFIGS = {
    "osm-rnn": {"group": "SO", "d": 3},
    "osmformer": {"group": "U", "d": 3, "n_layers": 2},
    "cem": {"d_model": 16, "n_layers": 2, "n_heads": 2, "d_ff": 24, "recursion_steps": 2},
    "grassmann": {"d_model": 16, "n_layers": 2, "rank": 4, "offsets": [1, 3], "d_ff": 24, "max_len": 64},
    "grassmann-attn": {"d_model": 16, "n_layers": 2, "n_heads": 2, "d_ff": 24, "max_len": 64},
    "transformer": {"d_model": 16, "n_layers": 2, "n_heads": 2},
    "llama": {"d_model": 16, "n_layers": 2, "n_heads": 2},
    "hf-gpt2": {"d_model": 16, "n_layers": 2, "n_heads": 2},
    "lstm": {},
}

def small_model(kind: str, vocab_size: int = len(VOCAB), **over):
    """A small random model of ``kind``; config keys the kind does not know are dropped."""
    if kind not in kinds():
        pytest.skip(f"model kind {kind!r} is not registered yet")
    from geomlab.models import model_class

    known = set(model_class(kind).default_config())
    cfg = {k: v for k, v in {**CONFIGS.get(kind, {}), **over}.items() if k in known}
    torch.manual_seed(0)
    return build_model({"kind": kind, "vocab_size": vocab_size, **cfg})


T = 14
SUB = TEXT[:T]

MODELS = {
    "osm-rnn-SO3": ("osm-rnn", {"group": "SO", "d": 3}),
    "osmformer-U3": ("osmformer", {"group": "U", "d": 3, "n_layers": 2}),
    "osmformer-T4": ("osmformer", {"group": "T", "d": 4, "n_layers": 2}),
    "osmformer-identity": ("osmformer", {"group": "O", "d": 4, "n_layers": 1, "mixing": "identity", "heads": 2}),
    "cem": ("cem", {}),
    "grassmann-r3": ("grassmann", {"rank": 3, "offsets": [1, 2]}),
    "grassmann-r5": ("grassmann", {"rank": 5, "offsets": [1, 3]}),
    "transformer": ("transformer", {}),
    "llama": ("llama", {}),
    "grassmann-attn": ("grassmann-attn", {}),
    "lstm": ("lstm", {}),
}
_CACHE: dict = {}


def get_trace(name: str):
    if name not in _CACHE:
        kind, over = MODELS[name]
        model = small_model(kind, **over)
        _CACHE[name] = (model, trace(model, encode_text(VOCAB, SUB), vocab=VOCAB, text=SUB))
    return _CACHE[name][1]


def get_model(name: str):
    get_trace(name)
    return _CACHE[name][0]
