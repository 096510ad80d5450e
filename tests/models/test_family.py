"""Model families declared once: every registered kind points to one of the declared families, and the trace
it records is the one its family record names."""

from __future__ import annotations

import pytest

from geomlab.models import kinds, kinds_of, model_class
from geomlab.models.family import FAMILIES, family_named
from geomlab.trace import encode_text, trace
from helpers.models import VOCAB, small_model


def test_every_kind_is_in_exactly_one_declared_family():
    found = sorted(k for fam in FAMILIES for k in kinds_of(fam))
    assert found == kinds()
    assert {model_class(k).family for k in kinds()} <= set(FAMILIES)


def test_family_named_finds_each_and_refuses_others():
    assert [family_named(f.name) for f in FAMILIES] == list(FAMILIES)
    with pytest.raises(ValueError, match="unknown model family 'gpt'"):
        family_named("gpt")


@pytest.mark.parametrize("kind", kinds())
def test_trace_family_is_what_the_kind_records(kind):
    """The trace of a small random model of each kind is of the family its class declares, and has attention
    exactly when the class says so."""
    model = small_model(kind)
    tr = trace(model, encode_text(VOCAB, "ROMEO: soft"), vocab=VOCAB)
    cls = model_class(kind)
    assert tr.family == cls.trace_family()
    assert (int(getattr(tr, "n_heads", 0) or 0) > 0) == cls.attention


def test_is_osm_names_the_kinds_that_take_a_matrix_group():
    from geomlab.training.runs import is_osm

    assert [k for k in kinds() if is_osm(k)] == ["osm-rnn", "osmformer"]
    assert not is_osm("no-such-kind")


def _run(code: str) -> str:
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_a_familys_kinds_keep_their_order_whichever_module_is_imported_first():
    """llama and the OSMFormer imported before the registry loads: the order is still that of _FAMILIES and of
    each package's registrations (the views list their kinds, and choose stand-ins, in this order)."""
    code = ("import geomlab.models.llama, geomlab.models.grassmann, geomlab.models.osm.former\n"
            "from geomlab.models import kinds_of\n"
            "from geomlab.models.family import FAMILIES\n"
            "print([kinds_of(f) for f in FAMILIES])")
    import importlib.util

    hf = ["hf-gpt2"] if importlib.util.find_spec("transformers") else []  # registered with the hf extra only
    assert _run(code) == str([["osm-rnn", "osmformer"], ["cem"], ["grassmann", "grassmann-attn"],
                              ["transformer", "llama", *hf], ["lstm"]])


def test_the_family_records_and_the_view_list_load_no_torch():
    """The app lists its pages (and Home draws its cards) before the warm-up has imported torch."""
    code = ("import sys, geomlab.models.family, geomlab.teach.views, geomlab.teach.tours, geomlab.teach.lessons\n"
            "print('torch' in sys.modules)")
    assert _run(code) == "False"
