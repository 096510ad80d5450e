"""TensorBoard logs of training runs (geomlab.training.log): `train --log-dir`, resumed runs, live runs, bad folders.

The event files are read back with TensorBoard's own reader (EventAccumulator) and every scalar is compared
with the metrics history saved in the checkpoint's JSON: same steps, same values (as float32, the type of a
TensorBoard scalar)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from geomlab.checkpoints import io as ckpt
from geomlab.live import runner as live
from geomlab.commands.cli import main
from geomlab.training.log import ScalarLog, scalar_tag
from tensorboard.backend.event_processing import event_accumulator

EXPECTED_TAGS = {"train/loss", "train/lr", "train/grad_norm", "train/tokens_per_s", "train/elapsed_s",
                 "valid/bpc", "test/bpc"}


def _train(text_file, out, *extra) -> int:
    return main(["train", "--model", "lstm", "--config", "hidden=12", "--data", str(text_file), "--steps", "6",
                 "--batch-size", "4", "--seq-len", "16", "--eval-every", "3", "--eval-tokens", "200",
                 "--log-every", "2", "--device", "cpu", "--out", str(out), "--name", "tb", "--quiet", *extra])


def read_scalars(log_dir) -> dict[str, list[tuple[int, float]]]:
    """Every scalar in the event files under ``log_dir``: tag -> [(step, value)] in step order, as
    TensorBoard shows them (events purged by a resumed writer are dropped)."""
    acc = event_accumulator.EventAccumulator(str(log_dir), size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def history_scalars(history) -> dict[str, list[tuple[int, float]]]:
    """The same form built from a metrics history (values rounded to float32)."""
    out: dict[str, list[tuple[int, float]]] = {}
    for rec in history:
        for key, value in rec.items():
            tag = scalar_tag(key)
            if tag is not None and not isinstance(value, bool):
                out.setdefault(tag, []).append((int(rec["step"]), float(np.float32(value))))
    return out


def test_scalar_tags():
    assert scalar_tag("loss") == "train/loss" and scalar_tag("grad_norm") == "train/grad_norm"
    assert scalar_tag("valid_bpc") == "valid/bpc" and scalar_tag("test_accuracy") == "test/accuracy"
    assert scalar_tag("step") is None and scalar_tag("final") is None


def test_train_log_dir_scalars_equal_the_json_history(text_file, tmp_path, capsys):
    out, logs = tmp_path / "runs", tmp_path / "tb" / "run1"
    assert _train(text_file, out, "--log-dir", str(logs)) == 0
    history = ckpt.load(out / "tb").metrics
    got = read_scalars(logs)
    assert EXPECTED_TAGS <= set(got)
    assert got == history_scalars(history)
    assert [s for s, _ in got["train/loss"]] == [2, 4, 6]  # --log-every 2
    assert [s for s, _ in got["valid/bpc"]] == [3, 6]  # the periodic validation, then the final one
    assert all(v > 0 for _, v in got["train/grad_norm"] + got["train/tokens_per_s"])


def test_resumed_run_appends_to_the_log(text_file, tmp_path, capsys):
    out, logs = tmp_path / "runs", tmp_path / "tb"
    assert _train(text_file, out, "--log-dir", str(logs)) == 0
    assert main(["train", "--resume", str(out / "tb"), "--data", str(text_file), "--steps", "10", "--quiet",
                 "--log-dir", str(logs)]) == 0
    history = ckpt.load(out / "tb").metrics
    got = read_scalars(logs)
    assert got == history_scalars(history)
    assert [s for s, _ in got["train/loss"]] == [2, 4, 6, 8, 10]
    assert len(list(logs.glob("events.out.tfevents.*"))) == 2  # one file per writer


def test_purge_step_drops_events_a_restart_repeats(tmp_path):
    first = ScalarLog(tmp_path)
    for step in (1, 2, 3, 4):
        first.write({"step": step, "loss": float(step)})
    first.close()
    second = ScalarLog(tmp_path, purge_step=3)  # resumed from a checkpoint at step 2
    for step in (3, 4):
        second.write({"step": step, "loss": 10.0 * step})
    second.close()
    assert read_scalars(tmp_path)["train/loss"] == [(1, 1.0), (2, 2.0), (3, 30.0), (4, 40.0)]


def test_restart_from_an_earlier_checkpoint_replaces_the_later_steps(tiny_text, tmp_path):
    """A run resumed from a checkpoint behind the log (the live page's NaN restart) shows the new values."""
    from geomlab.data import LMTask, corpus_from_text
    from geomlab.models import build_model
    from geomlab.core.rng import seeded
    from geomlab.training.trainer import Trainer

    task = LMTask(corpus_from_text(tiny_text * 3))
    with seeded(0):
        model = build_model({"kind": "lstm", "vocab_size": task.vocab_size, "hidden": 12})
    cfg = dict(steps=3, batch_size=4, seq_len=16, eval_every=0, log_every=1, device="cpu", eval_tokens=200,
               final_eval=False)
    logs = tmp_path / "tb"
    Trainer(model, task, cfg, out=tmp_path / "a", log_dir=logs).run()
    Trainer.from_checkpoint(tmp_path / "a", task, out=tmp_path / "b", overrides={"steps": 6}, log_dir=logs).run()
    Trainer.from_checkpoint(tmp_path / "a", task, out=tmp_path / "c", overrides={"steps": 6, "lr": 1e-4},
                            log_dir=logs).run()
    got = read_scalars(logs)
    assert got == history_scalars(ckpt.load(tmp_path / "c").metrics)
    assert got != history_scalars(ckpt.load(tmp_path / "b").metrics)  # the lr differs: so do the values
    assert [s for s, _ in got["train/loss"]] == [1, 2, 3, 4, 5, 6]


def test_bad_log_dir_is_one_line_before_training(text_file, tmp_path, capsys):
    out = tmp_path / "runs"
    a_file = tmp_path / "notes.txt"
    a_file.write_text("keep me")
    for bad, why in [(a_file, "it is a file, not a folder"), (a_file / "sub", "Not a directory")]:
        assert _train(text_file, out, "--log-dir", str(bad)) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"error: cannot write TensorBoard logs to {bad}: ") and why in err
        assert "\n" not in err and "nothing was trained" in err
        assert not (out / "tb.json").exists()  # nothing trained or written
    assert a_file.read_text() == "keep me"


def test_read_only_log_dir_is_one_line_before_training(text_file, tmp_path, capsys, monkeypatch):
    """What a read-only file system answers (the suite runs as root, where chmod does not stop writes)."""
    import errno
    import tempfile

    logs, real = tmp_path / "ro", tempfile.TemporaryFile

    def read_only(*a, dir=None, **kw):
        if dir is not None and Path(dir) == logs:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(logs))
        return real(*a, dir=dir, **kw)

    monkeypatch.setattr(tempfile, "TemporaryFile", read_only)  # the write probe
    assert _train(text_file, tmp_path / "runs", "--log-dir", str(logs)) == 2
    err = capsys.readouterr().err
    assert err == f"error: cannot write TensorBoard logs to {logs}: Read-only file system (choose another log " \
                  "folder; nothing was trained)\n"
    assert not (tmp_path / "runs" / "tb.json").exists()


def test_live_run_logs_its_history(tmp_path, monkeypatch):
    monkeypatch.setenv("GEOMLAB_RUNS_DIR", str(tmp_path / "runs"))
    logs = tmp_path / "live-tb"
    spec = live.RunSpec.preset("app", kind="lstm", params=2_000, data="word-problem:S3", batch_size=4, seq_len=8, steps=8, threads=1,
                        device="cpu")
    run = live.LiveRun(spec, log_dir=logs).start()
    assert run.join(120)
    snap = run.snapshot()
    assert snap.state == "finished", snap.message
    got = read_scalars(logs)
    assert {"train/loss", "train/grad_norm", "valid/accuracy", "test/accuracy"} <= set(got)
    assert got == history_scalars(ckpt.load(snap.checkpoint).metrics)
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(live.LiveError, match="cannot write TensorBoard logs"):
        live.LiveRun(spec, log_dir=tmp_path / "notes.txt")


def test_train_page_checkbox_writes_the_live_runs_log(tmp_path, monkeypatch):
    """The Train page's "TensorBoard logs" box: the started run logs under <runs>/tensorboard/<start>-<kind>-..."""
    from conftest import run_page

    runs = tmp_path / "runs"
    monkeypatch.setenv("GEOMLAB_RUNS_DIR", str(runs))
    monkeypatch.setenv("GEOMLAB_BUNDLED_DIR", str(tmp_path / "none"))
    at = run_page("train")
    at.selectbox(key="w_train_kind").set_value("lstm")
    at.number_input(key="w_train_steps").set_value(4)
    at.number_input(key="w_train_batch").set_value(2)
    at.number_input(key="w_train_seq").set_value(8)
    at.checkbox(key="w_train_tensorboard").check()
    at.run()
    at.button(key="w_train_start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    run = live.REGISTRY.get(at.session_state["gl_live_run"])
    try:
        snap = live.wait_for(run, lambda s: not s.active, timeout=120)
    finally:
        run.stop(wait=120, by=at.session_state["_gl_owner"])
    assert snap.state == "finished", snap.message
    (folder,) = (runs / "tensorboard").iterdir()
    assert folder.name.endswith(f"-lstm-{folder.name[-4:]}") and run.log_dir == folder
    assert read_scalars(folder) == history_scalars(ckpt.load(snap.checkpoint).metrics)
    live.REGISTRY.forget(run.run_id, by=at.session_state["_gl_owner"])
