"""geomlab.live.runner: background training runs (start, progress, stop/resume, save, NaN pause)."""

from __future__ import annotations

import math
import time

import pytest
import torch

from geomlab.checkpoints import catalog
from geomlab.checkpoints import io as checkpoint
from geomlab.live import runner as live
from geomlab.data.word_problem import WordProblemTask
from geomlab.training.runs import available_devices, build_model as build_run_model

TINY = dict(kind="lstm", params=2_000, data="word-problem:S3", batch_size=4, seq_len=8, lr=3e-3, seed=0, threads=1,
            model_overrides={})


def spec(**kw) -> live.RunSpec:
    return live.RunSpec.preset("app", **{**TINY, **kw})


@pytest.fixture(autouse=True)
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("GEOMLAB_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("GEOMLAB_BUNDLED_DIR", str(tmp_path / "none"))
    return tmp_path / "runs"


class NaNAfter(WordProblemTask):
    """The S3 word problem whose loss turns NaN from training step ``bad_step`` on."""

    def __init__(self, bad_step: int):
        super().__init__("S3", length=8, n_eval=16)
        self.bad_step, self.calls = bad_step, 0

    def loss(self, outputs, targets):
        self.calls += 1
        loss = super().loss(outputs, targets)
        return loss * float("nan") if self.calls >= self.bad_step else loss


def test_spec_validation_messages():
    for kw, msg in [({"steps": 0}, "steps"), ({"params": 5}, "budget"), ({"lr": -1.0}, "learning rate"),
                    ({"data": "bogus"}, "data must be"), ({"data": "text", "text": "  "}, "empty")]:
        with pytest.raises(live.LiveError, match=msg):
            spec(**kw).validate()


def test_no_gpu_is_a_readable_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(live.LiveError, match="No GPU"):
        live.check_device("cuda")
    assert live.check_device("auto") == "auto"
    assert available_devices()[-1] == "cpu"


def test_run_to_the_end_reports_progress_and_saves(runs):
    run = live.LiveRun(spec(steps=12))
    assert run.snapshot().state == "created"
    run.start()
    snap = live.wait_for(run, lambda s: not s.active, timeout=120)
    assert snap.state == "finished", snap.message
    assert snap.step == snap.total == 12 and snap.fraction == 1.0
    losses = [h["loss"] for h in snap.history if "loss" in h]
    assert losses and all(math.isfinite(x) for x in losses)
    assert snap.tokens_per_s and snap.tokens_per_s > 0
    assert snap.metric_name == "accuracy" and 0.0 <= snap.metric <= 1.0
    assert snap.checkpoint and checkpoint.load(snap.checkpoint).card["steps"] == 12
    # the working checkpoint is not in the catalog; a saved one is
    assert catalog.list_checkpoints() == []
    path = run.save("my tiny run")
    refs = [e.ref for e in catalog.list_checkpoints()]
    assert refs == ["runs/my-tiny-run"] and path == runs / "my-tiny-run"  # a checkpoint folder
    assert (path / "README.md").is_file() and (path / "config.json").is_file()
    loaded = checkpoint.load(path)
    assert loaded.card["saved_from"] == "geomlab live run" and loaded.card["steps"] == 12
    # the finished run's final evaluation (both splits) is on the card, so the catalog shows its test metric
    final = [h for h in run._trainer.history if h.get("final")][-1]
    entry = catalog.list_checkpoints()[0]
    assert entry.test_accuracy == final["test_accuracy"] and entry.valid_accuracy == final["valid_accuracy"]
    assert loaded.card["eval_protocol"]["splits"] == "full"
    with pytest.raises(live.LiveError):
        run.start()  # a run starts once
    with pytest.raises(live.LiveError, match="only a stopped or paused"):
        run.resume()


def test_stop_and_resume_matches_an_uninterrupted_run(runs):
    steps = 30
    ref = live.LiveRun(spec(steps=steps), work_dir=runs / "ref").start()
    assert live.wait_for(ref, lambda s: not s.active, timeout=120).state == "finished"

    run = live.LiveRun(spec(steps=steps), work_dir=runs / "interrupted")
    # stop from the progress callback at a known step, like a click would between two steps
    original = run._on_progress

    def stop_at_10(p):
        original(p)
        if p.event == "step" and p.step == 10 and run.state == "running":
            run.stop()

    run._on_progress = stop_at_10
    run.start()
    snap = live.wait_for(run, lambda s: not s.active, timeout=120)
    assert snap.state == "stopped" and snap.step < steps and snap.can_resume
    run._on_progress = original
    run.resume()
    snap = live.wait_for(run, lambda s: not s.active, timeout=120)
    assert snap.state == "finished" and snap.step == steps
    a = checkpoint.load(ref.snapshot().checkpoint).model.state_dict()
    b = checkpoint.load(snap.checkpoint).model.state_dict()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0)


def test_nan_pauses_with_message_and_keeps_last_good_checkpoint(runs):
    task = NaNAfter(bad_step=6)
    run = live.LiveRun(spec(steps=40, eval_every=3), task=task)
    run.start()
    snap = live.wait_for(run, lambda s: not s.active, timeout=120)
    assert snap.state == "paused"
    assert "step 6" in snap.message and "loss" in snap.message and "last good checkpoint (step 3)" in snap.message
    assert snap.message.count("checkpoint") == 1, snap.message  # said once
    assert snap.can_resume
    good = checkpoint.load(snap.checkpoint)
    assert good.train_state["json"]["step"] == 3  # the eval at step 3, before the NaN at step 6
    assert all(torch.isfinite(t).all() for t in good.model.state_dict().values())
    # the run is back there: its step, curves, and what Save writes (the weights and the card of step 3)
    assert snap.step == 3 and max(h["step"] for h in snap.history) == 3
    assert f"Resume restarts from it at learning rate {TINY['lr'] * 0.5:.3g} (this try: {TINY['lr']:.3g})" in \
        snap.message, snap.message
    saved = checkpoint.load(run.save("after-nan", dest_dir=runs))
    assert saved.card["steps"] == 3 and saved.card["valid_accuracy"] == good.card["valid_accuracy"] is not None
    assert saved.card["diverged_at"] == {"step": 6, "quantity": "loss"}  # the card says why it stopped early
    for k, v in good.model.state_dict().items():
        torch.testing.assert_close(saved.model.state_dict()[k], v, rtol=0, atol=0)
    # resuming restarts from it with a smaller learning rate
    task.bad_step = 10**9
    run.resume()
    snap = live.wait_for(run, lambda s: not s.active, timeout=120)
    assert snap.state == "finished"
    assert checkpoint.load(snap.checkpoint).train_config["lr"] == pytest.approx(TINY["lr"] * 0.5)
    assert "diverged_at" not in checkpoint.load(run.save("resumed", dest_dir=runs)).card  # trained on past it


def test_nan_at_the_first_step_still_has_a_step0_checkpoint(runs):
    run = live.LiveRun(spec(steps=10), task=NaNAfter(bad_step=1)).start()
    snap = live.wait_for(run, lambda s: not s.active, timeout=60)
    assert snap.state == "paused" and snap.checkpoint
    assert checkpoint.load(snap.checkpoint).train_state["json"]["step"] == 0


def test_save_while_running_happens_between_steps(runs):
    run = live.LiveRun(spec(steps=400)).start()
    live.wait_for(run, lambda s: s.step >= 10, timeout=60)
    path = run.save("mid")
    run.stop(wait=60)
    mid = checkpoint.load(path)
    assert 10 <= mid.card["steps"] < 400
    assert "test_accuracy" not in mid.card  # mid-run: no final evaluation yet
    assert run.snapshot().state == "stopped"


def test_text_corpus_run_reports_bpc(runs, tiny_text):
    run = live.LiveRun(spec(data="text", text=tiny_text, steps=6)).start()
    snap = live.wait_for(run, lambda s: not s.active, timeout=60)
    assert snap.state == "finished" and snap.metric_name == "bpc"
    bpcs = [h["train_bpc"] for h in snap.history if h.get("train_bpc") is not None]
    losses = [h["loss"] for h in snap.history if h.get("train_bpc") is not None]
    assert bpcs and bpcs[0] == pytest.approx(losses[0] / math.log(2))


def test_short_text_and_missing_corpus_are_readable_errors(monkeypatch, tmp_path):
    with pytest.raises(ValueError, match="at least"):
        live.LiveRun(spec(data="text", text="too short"))
    monkeypatch.setenv("GEOMLAB_DATA_DIR", str(tmp_path / "nowhere"))
    monkeypatch.setenv("GEOMLAB_CACHE_DIR", str(tmp_path / "nocache"))
    avail = live.corpus_availability()
    assert avail["tinyshakespeare"] and "not found" in avail["tinyshakespeare"]
    with pytest.raises(ValueError, match="not found"):
        live.LiveRun(spec(data="corpus:tinyshakespeare"))
    with pytest.raises(live.LiveError, match="unknown corpus"):
        live.LiveRun(spec(data="corpus:nope"))


def test_registry_limits_active_runs(runs):
    reg = live.RunRegistry(max_active=1)
    a = reg.create(spec(steps=2000)).start()
    try:
        live.wait_for(a, lambda s: s.step >= 1, timeout=60)
        with pytest.raises(live.LiveError, match="already training"):
            reg.create(spec(steps=5))
        with pytest.raises(live.LiveError):
            reg.forget(a.run_id)
    finally:
        a.stop(wait=60)
    assert reg.get(a.run_id) is a
    b = reg.create(spec(steps=2))
    assert reg.get(b.run_id) is b and reg.get("nope") is None
    reg.forget(a.run_id)
    assert reg.get(a.run_id) is None


def test_resume_keeps_reporting_progress_until_the_end(runs):
    """After Stop -> Resume the snapshot keeps advancing (the page's poll has something new to show)."""
    run = live.LiveRun(spec(steps=40), work_dir=runs / "resumed")
    original = run._on_progress

    def stop_at_5(p):
        original(p)
        if p.event == "step" and p.step == 5 and run.state == "running":
            run.stop()

    run._on_progress = stop_at_5
    run.start()
    stopped = live.wait_for(run, lambda s: not s.active, timeout=120)
    assert stopped.state == "stopped"
    n_hist = len(stopped.history)
    run.resume()
    assert run.snapshot().active  # running again at once, so the page resumes polling
    seen = {run.snapshot().step}
    snap = live.wait_for(run, lambda s: (seen.add(s.step) or not s.active), timeout=120, poll=0.01)
    assert snap.state == "finished" and snap.step == snap.total == 40
    assert max(seen) > stopped.step and len(seen) >= 2  # intermediate progress, not a jump from stop to end
    assert len(snap.history) > n_hist and snap.history[-1]["step"] > stopped.step


def test_a_new_session_can_reattach_to_runs_held_by_the_server(runs):
    reg = live.RunRegistry()
    a = reg.create(spec(steps=3))
    time.sleep(0.01)
    b = reg.create(spec(steps=3)).start()
    live.wait_for(b, lambda s: not s.active, timeout=60)
    # a fresh session only knows the run id (from the URL) or picks from the recent runs
    assert [r.run_id for r in reg.recent()] == [b.run_id, a.run_id]
    assert reg.recent(limit=1) == [b]
    again = reg.get(b.run_id)
    assert again is b and again.snapshot().state == "finished" and again.snapshot().can_save
    path = again.save("after reload")
    assert path.exists() and path.stem == "after-reload"


# ------------------------------------------------------------------ concurrency
def _weights(run):
    return {k: v.detach().clone() for k, v in run.model.state_dict().items()}


DROPOUT_SPECS = (
    # nn.LSTM's dropout between layers is drawn inside torch's C++ (the global-RNG swap path)
    dict(kind="lstm", seed=3, steps=30, model_overrides={"layers": 2, "dropout": 0.3}),
    # nn.Dropout and scaled_dot_product_attention(dropout_p) (the routed and the swap path)
    dict(kind="transformer", params=5_000, seed=4, steps=30, model_overrides={"dropout": 0.2}),
)


def test_two_seeded_runs_side_by_side_are_bit_identical_to_runs_alone(runs):
    alone = []
    for i, kw in enumerate(DROPOUT_SPECS):
        run = live.LiveRun(spec(**kw), work_dir=runs / f"alone{i}").start()
        assert live.wait_for(run, lambda s: not s.active, timeout=300).state == "finished"
        alone.append(_weights(run))
    for attempt in range(2):  # twice: the threads interleave differently each time
        together = [live.LiveRun(spec(**kw), work_dir=runs / f"together{attempt}-{i}")
                    for i, kw in enumerate(DROPOUT_SPECS)]
        for run in together:
            run.start()
        for run, ref in zip(together, alone):
            assert live.wait_for(run, lambda s: not s.active, timeout=300).state == "finished"
            got = _weights(run)
            for k, v in ref.items():
                assert torch.equal(v, got[k]), (run.spec.kind, k)


def test_a_model_built_while_another_thread_draws_matches_a_build_alone():
    """Another thread drawing from torch's global RNG (another run, a checkpoint being loaded) meanwhile
    does not change a live run's seeded initial weights."""
    import threading

    s = spec(kind="transformer", params=5_000, seed=7)
    ref = build_run_model(s, 8)[0].state_dict()
    done = threading.Event()

    def draw():
        while not done.is_set():
            torch.rand(16)

    other = threading.Thread(target=draw)
    other.start()
    try:
        built = [build_run_model(s, 8)[0] for _ in range(3)]
    finally:
        done.set()
        other.join()
    for m in built:
        for k, v in ref.items():
            assert torch.equal(v, m.state_dict()[k]), k


@pytest.mark.parametrize("kind, overrides", [
    ("lstm", {"layers": 2, "dropout": 0.3}), ("transformer", {"dropout": 0.2}), ("grassmann", {"dropout": 0.2}),
    ("grassmann-attn", {}), ("llama", {}), ("cem", {}), ("osm-rnn", {}), ("osmformer", {}),
])
def test_building_and_training_a_run_never_touches_the_global_rng(kind, overrides, tmp_path):
    from geomlab.training.trainer import TrainConfig, Trainer

    s = spec(kind=kind, params=5_000, model_overrides=overrides, group="SO" if live.is_osm(kind) else None)
    task = WordProblemTask("S3", length=8, n_eval=16)
    torch.manual_seed(123)
    before = torch.get_rng_state()
    model, _ = build_run_model(s, task.vocab_size)
    Trainer(model, task, TrainConfig(steps=2, batch_size=2, seq_len=8, eval_every=0, device="cpu",
                                     final_eval=False)).run()
    assert torch.equal(before, torch.get_rng_state()), "the run drew from (or reseeded) torch's global RNG"


def test_run_rng_dropout_is_its_own_and_matches_torchs_cpu_kernel():
    from geomlab.core.rng import RunRNG

    x = torch.randn(64, 32)
    with RunRNG(5).scope():
        a = torch.nn.functional.dropout(x, 0.3, training=True)
    with RunRNG(5).scope():
        b = torch.nn.Dropout(0.3)(x)
    with RunRNG(6).scope():
        c = torch.nn.functional.dropout(x, 0.3, training=True)
    torch.manual_seed(5)
    native = torch.nn.functional.dropout(x, 0.3, training=True)  # torch's own kernel on the seeded global RNG
    assert torch.equal(a, b) and torch.equal(a, native) and not torch.equal(a, c)


def test_registry_limit_is_checked_when_a_run_starts(runs):
    reg = live.RunRegistry(max_active=1)
    a, b = reg.create(spec(steps=5000)), reg.create(spec(steps=5))  # created, not training: both allowed
    a.start()
    try:
        with pytest.raises(live.LiveError, match="already training"):
            b.start()
        assert b.state == "created"
    finally:
        a.stop(wait=60)
    b.start()  # room again
    assert live.wait_for(b, lambda s: not s.active, timeout=60).state == "finished"
    with pytest.raises(live.LiveError, match="already training"):  # a stopped run resuming counts too
        c = reg.create(spec(steps=5000)).start()
        try:
            a.resume()
        finally:
            c.stop(wait=60)


def test_registry_limit_holds_when_sessions_start_runs_at_the_same_instant(runs):
    import threading

    reg = live.RunRegistry(max_active=2)
    created = [reg.create(spec(steps=5000)) for _ in range(6)]
    barrier, started, errors = threading.Barrier(len(created)), [], []

    def go(run):
        barrier.wait()
        try:
            run.start()
            started.append(run)
        except live.LiveError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=go, args=(r,)) for r in created]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert len(started) == 2 and len(errors) == 4
        assert sum(r.state in live.ACTIVE_STATES for r in created) == 2
    finally:
        for r in created:
            r.stop(wait=60)


def test_training_routes_through_the_run_rng_only_when_the_model_draws():
    """The per-thread random mode costs a Python call per torch operation, so training uses it only for a
    model whose training forward draws random numbers (dropout); otherwise nothing draws."""
    from geomlab.models import build_model
    from geomlab.core.rng import draws_in_training

    assert not draws_in_training(build_model({"kind": "osm-rnn", "vocab_size": 5, "d": 3}))
    assert not draws_in_training(build_model({"kind": "transformer", "vocab_size": 5}))
    assert draws_in_training(build_model({"kind": "transformer", "vocab_size": 5, "dropout": 0.1}))
    assert draws_in_training(build_model({"kind": "lstm", "vocab_size": 5, "layers": 2, "dropout": 0.2}))


# ------------------------------------------------------------------ files and sessions
def _finished(**kw) -> live.LiveRun:
    run = live.LiveRun(spec(steps=2, **kw.pop("spec", {})), **kw)
    run.start(**({"by": kw["owner"]} if kw.get("owner") else {}))
    live.wait_for(run, lambda s: not s.active, timeout=60)
    return run


def test_save_never_overwrites_a_checkpoint_it_did_not_make(runs, monkeypatch):
    monkeypatch.delenv("GEOMLAB_SHARED_RUNS", raising=False)
    other = _finished()
    cli = other.save("taken")  # a checkpoint already there (say, from the command line: nobody's)
    getattr(catalog, "forget_owner", lambda p: None)(cli)
    before = {f.name: f.read_bytes() for f in cli.iterdir()}
    run = _finished(spec={"seed": 1})
    path = run.save("taken")
    assert path.name == "taken-2"  # a free name, never a replace
    assert {f.name: f.read_bytes() for f in cli.iterdir()} == before
    assert {e.ref for e in catalog.list_checkpoints()} == {"runs/taken", "runs/taken-2"}


def test_save_overwrites_only_its_own_sessions_checkpoint(runs, monkeypatch):
    monkeypatch.delenv(catalog.SHARED_ENV, raising=False)
    a = _finished(owner="alice")
    first = a.save("mine", by="alice")
    assert a.save("mine", by="alice") == first  # the same session saves over its own checkpoint
    b = _finished(owner="bob", spec={"seed": 1})
    before = (first / "model.safetensors").read_bytes()
    other = b.save("mine", by="bob")  # bob never replaces alice's checkpoint
    assert other.name == "mine-2" and (first / "model.safetensors").read_bytes() == before
    assert catalog.may_change(other, "bob") and not catalog.may_change(other, "alice")


def test_only_the_owner_stops_resumes_saves_or_forgets_a_run(runs, monkeypatch):
    monkeypatch.delenv(catalog.SHARED_ENV, raising=False)
    reg = live.RunRegistry()
    run = reg.create(spec(steps=100_000), owner="alice")
    with pytest.raises(live.LiveError, match="another session"):
        run.start(by="bob")
    run.start(by="alice")
    try:
        live.wait_for(run, lambda s: s.step >= 1, timeout=60)
        assert run.may_change("alice") and not run.may_change("bob") and not run.may_change(None)
        for call in (lambda: run.stop(by="bob"), lambda: run.stop(), lambda: run.save("x", by="bob"),
                     lambda: reg.forget(run.run_id, by="bob")):
            with pytest.raises(live.LiveError, match="another session"):
                call()
        assert run.state == "running" and reg.get(run.run_id) is run
        assert not list(runs.glob("x*"))
        run.stop(wait=60, by="alice")
        assert run.state == "stopped"
        with pytest.raises(live.LiveError, match="another session"):
            run.resume(by="bob")
        # a server started with GEOMLAB_SHARED_RUNS=1 shares every run
        monkeypatch.setenv(catalog.SHARED_ENV, "1")
        assert run.may_change("bob")
        assert run.save("shared", by="bob").exists()
        reg.forget(run.run_id, by="bob")
        assert reg.get(run.run_id) is None
    finally:
        monkeypatch.setenv(catalog.SHARED_ENV, "1")
        run.stop(wait=60)


def _text_nan_after(text: str, bad_step: int):
    """A text task (pasted text) whose training loss turns NaN from the ``bad_step``-th call on."""
    from geomlab.data import LMTask
    from geomlab.data.corpora import corpus_from_text

    class Task(LMTask):
        def __init__(self):
            super().__init__(corpus_from_text(text))
            self.calls = 0

        def loss(self, outputs, targets):
            self.calls += 1
            loss = super().loss(outputs, targets)
            return loss * float("nan") if self.calls >= bad_step else loss

    return Task()


def test_a_pause_says_when_the_last_good_checkpoint_validates_worse_than_the_runs_best(runs):
    """"Good" is finite, not best: a pause whose checkpoint validates more than OVERFIT_BPC above the run's
    lowest validation says so (here the lowest is planted at step 0, below anything the run reaches)."""
    text = "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer. " * 20
    run = live.LiveRun(spec(data="text", text=text, steps=40, eval_every=3, seq_len=16),
                       task=_text_nan_after(text, bad_step=6))
    run._history.append({"step": 0, "valid_bpc": 0.5})
    run.start()
    snap = live.wait_for(run, lambda s: not s.active, timeout=120)
    assert snap.state == "paused"
    assert "(step 3; its valid BPC, " in snap.message and "is above the run's lowest, 0.500 at step 0)" in \
        snap.message, snap.message
