"""The logs every run folder gets (geomlab.training.run_logs): metrics.csv, TensorBoard event files with an
hparams summary, W&B when asked for; also for a sweep's trials. Everything read back is compared with the
metrics history saved in the checkpoint (or the sweep's summary), not with the writer's own numbers."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from geomlab.checkpoints import io as ckpt
from geomlab.commands.cli import main
from geomlab.training import run_logs
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2
from tests.training.test_tensorboard import history_scalars, read_scalars


def _train(text_file, out, *extra, steps: int = 6) -> int:
    return main(["train", "--model", "lstm", "--config", "hidden=12", "--data", str(text_file), "--steps", str(steps),
                 "--batch-size", "4", "--seq-len", "16", "--eval-every", "3", "--eval-tokens", "200",
                 "--log-every", "2", "--device", "cpu", "--out", str(out), "--name", "run", "--quiet", *extra])


def _csv_rows(path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _assert_csv_is_history(rows, history) -> None:
    """Each CSV row is the history record at the same index: same step, same numbers (printed in full)."""
    assert len(rows) == len(history)
    for row, rec in zip(rows, history):
        assert int(row["step"]) == rec["step"]
        for key, value in rec.items():
            if key != "step" and not isinstance(value, bool):
                assert float(row[key]) == pytest.approx(value, rel=1e-12), (rec["step"], key)
        assert row["elapsed_s"] != ""  # every row has the training seconds, evaluations included


def _hparams(folder) -> dict[str, plugin_data_pb2.HParamsPluginData]:
    acc = event_accumulator.EventAccumulator(str(folder))
    acc.Reload()
    return {tag: plugin_data_pb2.HParamsPluginData.FromString(content)
            for tag, content in acc.PluginTagToContent("hparams").items()}


def test_run_folder_has_csv_tensorboard_and_hparams(text_file, tmp_path):
    out = tmp_path / "runs"
    assert _train(text_file, out, "--lr", "0.004") == 0
    folder = out / "run"
    history = ckpt.load(folder).metrics
    _assert_csv_is_history(_csv_rows(folder / run_logs.CSV_NAME), history)
    assert {"loss", "lr", "valid_bpc", "test_bpc"} <= set(_csv_rows(folder / "metrics.csv")[0])
    got, want = read_scalars(folder), history_scalars(history)
    assert got.keys() == want.keys() and all(np.allclose(got[t], want[t]) for t in want)
    hp = _hparams(folder)
    start = hp["_hparams_/session_start_info"].session_start_info.hparams
    assert start["train.lr"].number_value == pytest.approx(0.004)
    assert start["model.hidden"].number_value == 12 and start["kind"].string_value == "lstm"
    metrics = {m.name.tag for m in hp["_hparams_/experiment"].experiment.metric_infos}
    assert {"valid/bpc", "test/bpc"} <= metrics
    assert hp["_hparams_/session_end_info"].session_end_info.status == api_pb2.Status.Value("STATUS_SUCCESS")


def test_resumed_run_rewrites_the_csv_from_its_history(text_file, tmp_path):
    out = tmp_path / "runs"
    assert _train(text_file, out) == 0
    assert _train(text_file, out, "--resume", steps=10) == 0
    history = ckpt.load(out / "run").metrics
    assert history[-1]["step"] == 10
    _assert_csv_is_history(_csv_rows(out / "run" / "metrics.csv"), history)


def test_no_tensorboard_keeps_the_csv(text_file, tmp_path):
    out = tmp_path / "runs"
    assert _train(text_file, out, "--no-tensorboard") == 0
    assert not list((out / "run").glob("events.out.tfevents.*"))
    _assert_csv_is_history(_csv_rows(out / "run" / "metrics.csv"), ckpt.load(out / "run").metrics)


def test_missing_tensorboard_is_one_info_line(text_file, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(run_logs, "tensorboard_available", lambda: False)
    monkeypatch.setattr(run_logs, "_TOLD", set())
    out = tmp_path / "runs"
    assert _train(text_file, out) == 0
    err = capsys.readouterr().err
    assert [ln for ln in err.splitlines() if "tensorboard" in ln.lower()] == [
        "info: tensorboard is not installed: no TensorBoard logs (pip install 'geomlab[logging]'); "
        "metrics.csv is written"]
    assert not list((out / "run").glob("events.out.tfevents.*")) and (out / "run" / "metrics.csv").is_file()


def test_wandb_missing_is_one_line(text_file, tmp_path, capsys):
    if run_logs._installed("wandb"):
        pytest.skip("wandb is installed: the offline test below covers it")
    out = tmp_path / "runs"
    assert _train(text_file, out, "--wandb", "offline") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --wandb needs the wandb package: pip install 'geomlab[wandb]' (nothing was trained)"]
    assert not (out / "run").exists()


def test_wandb_offline_run(text_file, tmp_path, monkeypatch):
    pytest.importorskip("wandb", reason="wandb is not installed (not a geomlab dependency: pip install wandb)")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "runs"
    assert _train(text_file, out, "--wandb") == 0
    runs = list((out / "run" / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and list(runs[0].glob("*.wandb"))


def test_sweep_trials_log_to_their_folders(text_file, tmp_path):
    out = tmp_path / "sweeps"
    assert main(["sweep", "--model", "lstm", "--config", "hidden=12", "--data", str(text_file), "--n-trials", "2",
                 "--steps", "4", "--batch-size", "4", "--seq-len", "16", "--eval-every", "2",
                 "--eval-tokens", "200", "--search", "lr=log:1e-3:1e-2", "--study-name", "s", "--device", "cpu",
                 "--out", str(out)]) == 0
    summary = json.loads((out / "s.json").read_text())
    assert len(summary["trials"]) == 2
    for trial in summary["trials"]:
        folder = out / "s-trials" / f"trial-{trial['number']}"
        rows = _csv_rows(folder / "metrics.csv")
        assert float(rows[-1]["valid_bpc"]) == pytest.approx(trial["value"], rel=1e-12)
        assert min(float(r["lr"]) for r in rows if r["lr"]) <= trial["params"]["lr"]
        start = _hparams(folder)["_hparams_/session_start_info"].session_start_info.hparams
        assert start["train.lr"].number_value == pytest.approx(trial["params"]["lr"])
