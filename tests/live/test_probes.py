"""The figure a live run draws while it trains, pinned for a small model of every kind."""

from __future__ import annotations

import pytest

from geomlab.live.probes import probe_figure
from helpers.models import MODELS, get_trace

#: test model -> (figure, view) drawn while it trains; None: no geometry view (an LSTM).
PROBE = {
    "osm-rnn-SO3": ("phase_circle", "trajectories"), "osmformer-U3": ("phase_circle", "trajectories"),
    "osmformer-T4": ("phase_circle", "trajectories"), "osmformer-identity": ("phase_circle", "trajectories"),
    "cem": ("energy_descent", "energy"),
    "grassmann-r3": ("plane_distances", "planes"), "grassmann-r5": ("plane_distances", "planes"),
    "transformer": ("attention_maps", "attention"), "llama": ("attention_maps", "attention"),
    "grassmann-attn": ("attention_maps", "attention"), "lstm": None,
}


def test_every_test_model_is_pinned():
    assert sorted(PROBE) == sorted(MODELS)


@pytest.mark.parametrize("name", sorted(PROBE))
def test_probe_figure_of_each_kind(name):
    assert probe_figure(get_trace(name)) == PROBE[name]
