"""Geometry while training: ``LiveRun.probe`` traces a run's current weights on a fixed
probe sequence without disturbing training; the Train page shows it ("Geometry now") and overlays several
runs' curves (``geomlab.figures.curves.run_overlay``)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from geomlab.live import runner as live
from geomlab.live import probes
from geomlab.live import tap
from geomlab.figures import FigureError
from geomlab.figures.curves import probe_history, run_overlay
from helpers.charts import charts

APP = str(Path(__file__).resolve().parents[2] / "app.py")
TIMEOUT = 120
TEXT = ("ROMEO: But soft, what light through yonder window breaks? It is the east, and Juliet is the sun. "
        "Arise, fair sun, and kill the envious moon.\n") * 3


@pytest.fixture(autouse=True)
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("GEOMLAB_RUNS_DIR", str(tmp_path / "runs"))
    (tmp_path / "bundled").mkdir()
    monkeypatch.setenv("GEOMLAB_BUNDLED_DIR", str(tmp_path / "bundled"))
    return tmp_path / "runs"


def osm_spec(**kw) -> live.RunSpec:
    base = dict(kind="osm-rnn", group="O", params=2_000, data="word-problem:Z5", steps=30, batch_size=4, seq_len=8,
                lr=1e-2, seed=3, threads=1, eval_every=10)
    return live.RunSpec.preset("app", **{**base, **kw})


def figure_arrays(probe: probes.Probe) -> np.ndarray:
    """Every number the probe's figure draws (frames included), as one flat array."""
    spec = json.loads(probe.view.figure.to_json())
    out = []

    def walk(trace):
        for key in ("x", "y", "z"):
            v = trace.get(key)
            if isinstance(v, dict) and "bdata" in v:
                import base64

                out.append(np.frombuffer(base64.b64decode(v["bdata"]), dtype=v["dtype"]).astype(np.float64))
            elif isinstance(v, list) and v and isinstance(v[0], (int, float)):
                out.append(np.asarray(v, dtype=np.float64))

    for t in spec["data"]:
        walk(t)
    for f in spec.get("frames", []):
        for t in f["data"]:
            walk(t)
    return np.concatenate(out)


# ---------------------------------------------------------------- backend
def test_probe_follows_training_and_never_disturbs_it(runs, monkeypatch):
    """The probe of a run changes as it trains; a watched run ends with exactly the weights and losses of an
    unwatched one (same seed), and probing draws nothing from torch's global generator."""
    monkeypatch.setattr(tap, "PROBE_EVERY_S", 0.0)  # copy and trace at every logging step: the most disturbance
    monkeypatch.setattr(tap, "PROBE_BUDGET", 1.0)
    ref = live.LiveRun(osm_spec(), work_dir=runs / "ref").start()
    assert live.wait_for(ref, lambda s: not s.active, timeout=TIMEOUT).state == "finished"

    run = live.LiveRun(osm_spec(), work_dir=runs / "watched")
    rng = torch.get_rng_state()
    first = run.probe()  # the initial weights, before the run starts
    assert torch.equal(rng, torch.get_rng_state())
    assert first is not None and first.step == 0 and first.figure == "phase_circle" and not first.message
    assert "cursor" not in first.view.caption and first.view.caption.startswith("Eigenvalue")  # no cursor here
    seen, stop = [], threading.Event()

    def viewer():
        while not stop.is_set():
            p = run.probe()
            if p is not None:
                seen.append(p.step)
            time.sleep(0.005)

    threads = [threading.Thread(target=viewer, daemon=True) for _ in range(2)]  # two viewers share the cache
    run.start()
    for t in threads:
        t.start()
    snap = live.wait_for(run, lambda s: not s.active, timeout=TIMEOUT)
    stop.set()
    for t in threads:
        t.join(10)
    assert snap.state == "finished"
    last = run.probe()
    assert last.step == 30 and last.figure == "phase_circle"
    assert len(set(seen)) >= 2, seen  # the viewers saw the weights at several steps while it trained
    # weights changed -> the figure's data and the probe quantity changed
    assert not np.allclose(figure_arrays(first), figure_arrays(last))
    assert not np.allclose(first.curve.y, last.curve.y)
    # the history keeps the first probe and the newest, oldest first
    steps = [s for s, _ in last.history]
    assert steps[0] == 0 and steps[-1] == 30 and steps == sorted(steps) and len(steps) <= tap.PROBE_HISTORY
    # the same probe object for every viewer of the same weights (one trace)
    assert run.probe() is last
    # same loss curve and bit-identical weights with and without viewers
    a, b = ref.snapshot().history, snap.history
    assert [h.get("loss") for h in a] == [h.get("loss") for h in b]
    for (k, x), (k2, y) in zip(ref.model.state_dict().items(), run.model.state_dict().items()):
        assert k == k2
        torch.testing.assert_close(x, y, rtol=0, atol=0)


def test_probes_take_at_most_their_budget_of_the_training_thread(runs, monkeypatch):
    """A slow probe (here 50 ms) is made less often instead of slowing training beyond PROBE_BUDGET."""
    monkeypatch.setattr(tap, "PROBE_EVERY_S", 0.0)
    run = live.LiveRun(osm_spec(steps=200, eval_every=20), work_dir=runs / "budget")
    served, serve = [], run._tap.serve

    def slow_serve():
        time.sleep(0.05)
        served.append(time.monotonic())
        serve()

    run._tap.serve = slow_serve
    stop = threading.Event()

    def viewer():
        while not stop.is_set():
            run.probe()
            time.sleep(0.02)

    t = threading.Thread(target=viewer, daemon=True)
    t.start()
    run.start()
    snap = live.wait_for(run, lambda s: not s.active, timeout=TIMEOUT)
    stop.set()
    t.join(10)
    assert snap.state == "finished" and len(served) >= 2  # at least the start and the end
    # without the budget: one probe per logging step (50 here); with it, 50 ms each <= 4% of the time + 2
    assert len(served) <= 2 + snap.elapsed_s * tap.PROBE_BUDGET / 0.05 + 1, (len(served), snap.elapsed_s)


def test_an_unwatched_run_copies_nothing(runs):
    run = live.LiveRun(osm_spec(steps=10), work_dir=runs / "quiet").start()
    live.wait_for(run, lambda s: not s.active, timeout=TIMEOUT)
    assert run._tap.weights is None and run._tap.model is None


@pytest.mark.parametrize("kind, extra, figure", [
    ("osm-rnn", {"group": "O"}, "phase_circle"),
    ("osmformer", {"group": "SO", "model_overrides": {"d": 3, "n_layers": 2}}, "phase_circle"),
    ("cem", {"params": 5_000}, "energy_descent"),
    ("grassmann", {"params": 5_000}, "plane_distances"),
    ("transformer", {}, "attention_maps"),
    ("llama", {}, "attention_maps"),
    ("lstm", {}, None),
])
@pytest.mark.parametrize("data", ["word-problem:S3", "text"])
def test_the_figure_fits_the_kind(kind, extra, figure, data):
    spec = live.RunSpec.preset("app", **{"kind": kind, "params": 2_000, "data": data, "text": TEXT if data == "text" else None,
                            "steps": 5, "seq_len": 8, "threads": 1, **extra})
    probe = live.LiveRun(spec).probe()
    assert probe is not None and probe.step == 0
    assert probe.figure == figure
    if figure is None:
        assert probe.view is None and "no geometry view" in probe.message and probe.curve is None
        return
    assert probe.view is not None and not probe.message, probe.message
    assert probe.view.figure.layout.meta["view"] == figure
    assert probe.curve is not None and len(probe.curve.x) == len(probe.curve.y) > 0
    assert probe.trace.n_positions <= probes.PROBE_POSITIONS
    assert probe.trace_ms > 0


def test_probe_tokens_are_fixed_and_sized():
    task = live.build_task(live.RunSpec(data="word-problem:S3", seq_len=8))
    a = probes.probe_tokens(task, live.RunSpec(data="word-problem:S3", seq_len=8))
    b = probes.probe_tokens(task, live.RunSpec(data="word-problem:S3", seq_len=8))
    assert a.shape == (1, 32) and torch.equal(a, b)  # at least 32 positions, the same every time
    long = probes.probe_tokens(task, live.RunSpec(data="word-problem:S3", seq_len=500))
    assert long.shape == (1, probes.PROBE_POSITIONS)
    text = live.build_task(live.RunSpec(data="text", text=TEXT * 4))
    t = probes.probe_tokens(text, live.RunSpec(data="text", text=TEXT * 4))
    assert torch.equal(t[0], text.tokens("valid")[:t.shape[1]])


def test_thin_history_spreads_the_kept_probes():
    hist = [(s, None) for s in range(0, 100, 5)]
    kept = [s for s, _ in probes._thin_history(hist, 5)]
    assert len(kept) == 5 and kept[0] == 0 and kept[-1] == 95
    gaps = np.diff(kept)
    assert gaps.max() <= 3 * gaps.min(), kept  # spread over the run, not bunched at one end


# ---------------------------------------------------------------- figures
def _hist(offset: float, valid: bool = True) -> list[dict]:
    rows = [{"step": s, "loss": 2.0 - 0.1 * s + offset} for s in range(1, 11)]
    if valid:
        rows += [{"step": 5, "valid_nll": 1.7 + offset, "valid_accuracy": 0.4},
                 {"step": 10, "valid_nll": 1.2 + offset, "valid_accuracy": 0.6}]
    return rows


def test_overlay_has_one_training_trace_per_run_each_in_its_own_colour():
    runs = {"this run": _hist(0.0), "lstm · abc": _hist(0.3), "cem · def": _hist(0.6, valid=False)}
    fig, caption = run_overlay(runs, metric="loss", unit="symbol")
    train = [t for t in fig.data if t.name.endswith(": training")]
    valid = [t for t in fig.data if t.name.endswith(": validation")]
    assert [t.name.split(":")[0] for t in train] == list(runs)
    assert len(valid) == 2 and {t.line.dash for t in valid} == {"dash"}
    assert len({t.line.color for t in train}) == 3
    for t in valid:  # a run's validation curve has its training curve's colour
        assert t.line.color == next(u.line.color for u in train if u.legendgroup == t.legendgroup)
    assert fig.layout.yaxis.title.text == "loss (nats per symbol)" and "3 runs" in caption
    expected = [r["loss"] for r in runs["lstm · abc"] if "loss" in r]
    np.testing.assert_allclose(np.asarray(train[1].y, dtype=float), expected, rtol=1e-6)
    bits, _ = run_overlay({"a": _hist(0.0)}, metric="bpc", unit="character")
    np.testing.assert_allclose(np.asarray(bits.data[0].y, dtype=float),
                               [r["loss"] / np.log(2) for r in _hist(0.0) if "loss" in r], rtol=1e-6)
    assert "dashed: validation" in caption
    _, alone = run_overlay({"cem": _hist(0.0, valid=False)})  # nothing dashed drawn: the caption says so
    assert "dashed: validation" not in alone and "no validation yet" in alone
    with pytest.raises(FigureError):
        run_overlay({})
    with pytest.raises(FigureError, match="no run"):
        run_overlay({"a": [{"step": 1, "valid_accuracy": 0.5}]})


def test_probe_history_draws_one_line_per_probe_dark_to_light():
    curves = [(s, probes.ProbeCurve(np.arange(4.0), np.arange(4.0) * s, "position t", "d (rad)", "distance"))
              for s in (0, 10, 20)]
    fig, caption = probe_history(curves)
    assert [t.name for t in fig.data] == ["step 0", "step 10", "step 20"]
    assert len({t.line.color for t in fig.data}) == 3 and fig.data[-1].line.width > fig.data[0].line.width
    assert "3 moments" in caption and fig.layout.yaxis.title.text == "d (rad)"
    with pytest.raises(FigureError):
        probe_history([])


# ---------------------------------------------------------------- the page
def _charts(at: AppTest) -> dict[str, dict]:
    out = {}
    for c in charts(at):
        spec = json.loads(c.spec)
        out[str(spec["layout"].get("meta", {}).get("view") or json.dumps(spec["layout"].get("title", "")))] = spec
    return out


def _page(run_id: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    at.session_state["gl_live_run"] = run_id
    at.switch_page("app_pages/train.py")
    return at.run()


def test_train_page_shows_geometry_now_while_training_and_overlays_runs():
    other = live.REGISTRY.create(live.RunSpec.preset("app", kind="lstm", params=2_000, steps=3, batch_size=2, seq_len=8,
                                              threads=1))
    other.start()
    live.wait_for(other, lambda s: not s.active, timeout=TIMEOUT)
    run = live.REGISTRY.create(osm_spec(steps=100_000, batch_size=2))
    try:
        run.start()
        live.wait_for(run, lambda s: s.step >= 2, timeout=TIMEOUT)
        at = _page(run.run_id)
        assert not at.exception and "Geometry now" in [h.value for h in at.subheader]
        # the first visit asks for the weights; the training thread copies them at its next logging step and
        # traces the copy there (wait for the probe itself: under load the trace takes a while after the copy)
        deadline = time.monotonic() + TIMEOUT
        while run._tap.last is None and time.monotonic() < deadline:
            time.sleep(0.05)
        at.run()
        assert not at.exception
        shown = [m.value for m in at.markdown if "Weights at step" in m.value]
        assert shown and "refreshed every" in shown[0]
        charts = _charts(at)
        assert "phase_circle" in charts and "run_overlay" in charts
        assert not charts["phase_circle"]["layout"].get("sliders")  # one cursor: no Play slider of its own
        # overlay the finished LSTM run: one training curve per run
        at.multiselect(key="w_train_overlay").set_value([other.run_id]).run()
        overlay = _charts(at)["run_overlay"]
        names = [t["name"] for t in overlay["data"] if t["name"].endswith(": training")]
        assert names == ["this run: training", f"lstm · {other.run_id[:6]}: training"]
    finally:
        run.stop(wait=TIMEOUT)
        live.REGISTRY.forget(run.run_id)
        live.REGISTRY.forget(other.run_id)


def test_train_page_says_when_a_kind_has_no_geometry_view():
    run = live.REGISTRY.create(live.RunSpec.preset("app", kind="lstm", params=2_000, steps=3, batch_size=2, seq_len=8,
                                            threads=1))
    try:
        run.start()
        live.wait_for(run, lambda s: not s.active, timeout=TIMEOUT)
        at = _page(run.run_id)
        assert not at.exception
        assert any("no geometry view" in i.value for i in at.info), [i.value for i in at.info]
    finally:
        live.REGISTRY.forget(run.run_id)
