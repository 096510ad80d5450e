"""The interventions' catalog: each knob applies to the kinds it names, its neutral size is the plain run
(bit-identical logits), another size changes the prediction after the position, and bad requests are refused
with a message."""

import numpy as np
import pytest
import torch

from geomlab.whatif import catalog
from tests.helpers.models import small_model

CASES = [("steer", "osm-rnn", {"layer": 0}), ("steer", "osmformer", {"layer": 1}),
         ("rotate_plane", "grassmann", {"layer": 1, "slot": 1}), ("energy_steps", "cem", {"layer": 1}),
         ("ablate_head", "transformer", {"layer": 1, "head": 1}), ("ablate_head", "cem", {"layer": 0, "head": 1})]


@pytest.mark.parametrize("name,kind,controls", CASES, ids=[f"{n}-{k}" for n, k, _ in CASES])
def test_the_neutral_size_is_the_plain_run_and_another_size_changes_what_follows(name, kind, controls):
    torch.manual_seed(0)
    model = small_model(kind).eval()
    tokens = torch.randint(0, 10, (14,))
    assert name in [i.name for i in catalog.available(model)]
    neutral = catalog.neutral_size(name, model)
    plain = catalog.apply(name, model, tokens, 6, neutral, **controls)
    np.testing.assert_array_equal(plain.before, plain.after)
    spec = catalog.INTERVENTIONS[name]
    size = spec.hi if name != "energy_steps" else neutral + 3
    moved = catalog.apply(name, model, tokens, 6, size, **controls)
    np.testing.assert_array_equal(moved.before, plain.before)
    assert not np.allclose(moved.before[6:], moved.after[6:])
    if name not in ("energy_steps", "ablate_head"):  # applied at the position: nothing before it changes
        np.testing.assert_allclose(moved.before[:6], moved.after[:6], atol=1e-6)


def test_a_knob_is_refused_where_it_does_not_apply_or_out_of_range():
    lstm = small_model("lstm").eval()
    assert catalog.available(lstm) == []
    with pytest.raises(ValueError, match="does not apply"):
        catalog.apply("steer", lstm, torch.zeros(5, dtype=torch.long), 2, 0.5)
    osm = small_model("osm-rnn").eval()
    with pytest.raises(ValueError, match="outside"):
        catalog.apply("steer", osm, torch.zeros(5, dtype=torch.long), 2, 9.0)
    with pytest.raises(KeyError):
        catalog.apply("no-such-knob", osm, torch.zeros(5, dtype=torch.long), 2, 0.5)
    cem = small_model("cem").eval()
    for layer in (-1, 2):  # two layers: a negative one would wrap to the last
        with pytest.raises(ValueError, match=f"layer {layer} outside 0..1"):
            catalog.apply("energy_steps", cem, torch.zeros(5, dtype=torch.long), 2, 3, layer=layer)


def test_a_whole_number_knob_refuses_a_fraction_and_the_message_reads_right():
    tr = small_model("transformer").eval()
    with pytest.raises(ValueError, match="0.5 is not a whole number"):
        catalog.apply("ablate_head", tr, torch.zeros(5, dtype=torch.long), 2, 0.5)
    with pytest.raises(ValueError, match="does not apply to an osm-rnn"):
        catalog.apply("ablate_head", small_model("osm-rnn").eval(), torch.zeros(5, dtype=torch.long), 2, 1)
