"""Which kinds each view shows and how kinds are related, pinned for every registered kind (order included:
the first related kind is the stand-in a view picks and Compare's second checkpoint, the view's kinds are
listed in its message, the load benchmark takes its checkpoints in preference order)."""

from __future__ import annotations

import importlib.util

import pytest

from geomlab.bench import load as bench
from geomlab.models import kinds
from geomlab.teach import views as registry

ATT = "also attention-based"

RELATED = {
    "cem": [("cem", "same kind"), ("transformer", ATT), ("llama", ATT), ("osmformer", ATT),
            ("grassmann-attn", ATT)],
    "grassmann": [("grassmann", "same kind"), ("grassmann-attn", "same family")],
    "grassmann-attn": [("grassmann-attn", "same kind"), ("grassmann", "same family"), ("transformer", ATT),
                       ("llama", ATT), ("cem", ATT), ("osmformer", ATT)],
    "llama": [("llama", "same kind"), ("transformer", "same family"), ("cem", ATT), ("osmformer", ATT),
              ("grassmann-attn", ATT)],
    "lstm": [("lstm", "same kind"), ("osm-rnn", "also recurrent")],
    "osm-rnn": [("osm-rnn", "same kind"), ("osmformer", "same family"), ("lstm", "also recurrent")],
    "osmformer": [("osmformer", "same kind"), ("osm-rnn", "same family"), ("transformer", ATT), ("llama", ATT),
                  ("cem", ATT), ("grassmann-attn", ATT)],
    "transformer": [("transformer", "same kind"), ("llama", "same family"), ("cem", ATT), ("osmformer", ATT),
                    ("grassmann-attn", ATT)],
}

VIEW_KINDS = {
    "trajectories": ("osm-rnn", "osmformer"),
    "tangents": ("osm-rnn", "osmformer"),
    "attention": ("osmformer", "transformer", "llama", "cem", "grassmann-attn"),
    "energy": ("cem",),
    "planes": ("grassmann",),
}

#: The load benchmark's kinds per view, in preference order (Tangent updates on an OSMFormer first).
PREFERRED = {
    "trajectories": ["osm-rnn", "osmformer"],
    "tangents": ["osmformer", "osm-rnn"],
    "attention": ["osmformer", "transformer", "llama", "cem", "grassmann-attn"],
    "energy": ["cem"],
    "planes": ["grassmann"],
}


#: With the hf extra, ``hf-gpt2`` (a Transformer baseline registered after llama) follows llama everywhere.
if importlib.util.find_spec("transformers") is not None:
    def _after_llama(pairs):
        i = next(j for j, (k, _) in enumerate(pairs) if k == "llama")
        return [*pairs[:i + 1], ("hf-gpt2", pairs[i][1]), *pairs[i + 1:]]

    RELATED = {k: _after_llama(v) if any(x == "llama" for x, _ in v) else v for k, v in RELATED.items()}
    RELATED["hf-gpt2"] = [("hf-gpt2", "same kind"), ("transformer", "same family"), ("llama", "same family"),
                          ("cem", ATT), ("osmformer", ATT), ("grassmann-attn", ATT)]
    RELATED["llama"] = [("llama", "same kind"), ("transformer", "same family"), ("hf-gpt2", "same family"),
                        ("cem", ATT), ("osmformer", ATT), ("grassmann-attn", ATT)]
    VIEW_KINDS["attention"] = ("osmformer", "transformer", "llama", "hf-gpt2", "cem", "grassmann-attn")
    PREFERRED["attention"] = ["osmformer", "transformer", "llama", "hf-gpt2", "cem", "grassmann-attn"]


def test_every_kind_is_pinned():
    assert sorted(RELATED) == kinds()


@pytest.mark.parametrize("kind", sorted(RELATED))
def test_related_kinds_in_order(kind):
    assert list(registry.related_kinds(kind).items()) == RELATED[kind]


def test_an_unknown_kind_is_related_to_itself_only():
    assert registry.related_kinds("no-such-kind") == {"no-such-kind": "same kind"}


def test_each_view_shows_its_kinds_in_order():
    assert list(registry.VIEWS) == list(VIEW_KINDS)
    assert {slug: tuple(v.kinds) for slug, v in registry.VIEWS.items()} == VIEW_KINDS


def test_the_load_benchmark_takes_each_views_kinds_in_preference_order():
    found = [(f"ck-{k}", k, "char") for k in reversed(kinds())] + [("sym-osmformer", "osmformer", "symbol")]
    got = bench.checkpoints_for(bench.DEFAULT_VIEWS, found)
    assert list(got) == list(PREFERRED)
    assert got == {slug: [f"ck-{k}" for k in ks] for slug, ks in PREFERRED.items()}


@pytest.fixture
def osm_extra():
    """A kind ``osm-extra`` of the OSM family (the OSM-RNN class under another name), registered for one test."""
    from geomlab.models import _REGISTRY, register
    from geomlab.models.osm import OSMRNN

    register(type("OSMExtra", (OSMRNN,), {"kind": "osm-extra"}))
    yield "osm-extra"
    _REGISTRY.pop("osm-extra")


def test_a_new_kind_of_a_known_family_is_on_its_views_and_among_its_relatives(osm_extra):
    from geomlab.training.runs import is_osm

    assert registry.VIEWS["trajectories"].kinds == ("osm-rnn", "osmformer", "osm-extra")
    assert registry.VIEWS["tangents"].preferred_kinds == ("osmformer", "osm-rnn", "osm-extra")
    assert "osm-extra" not in registry.VIEWS["attention"].kinds  # an RNN has no attention
    assert list(registry.related_kinds("osm-extra").items()) == [
        ("osm-extra", "same kind"), ("osm-rnn", "same family"), ("osmformer", "same family"),
        ("lstm", "also recurrent")]
    assert registry.related_kinds("lstm") == {"lstm": "same kind", "osm-rnn": "also recurrent",
                                              "osm-extra": "also recurrent"}
    assert registry.default_view("osm-extra").slug == "trajectories"
    assert is_osm("osm-extra")
