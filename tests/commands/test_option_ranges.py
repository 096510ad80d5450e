"""Numbers out of range on the command line, and the sweep's storage and output paths: every numeric option is
checked when it is read (one line naming the option, exit status 2, nothing computed), and a sweep refuses a
storage or output it cannot use before the first trial trains."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from geomlab.commands.cli import main

CKPT = "lstm-tinyshakespeare"  # bundled: the checkpoint is never loaded when an option is refused
HUGE = str(2**80)

#: (command line, the option its refused value belongs to)
BAD = [
    (["train", "--threads", "100000"], "--threads"),
    (["train", "--threads", "0"], "--threads"),
    (["train", "--seed", HUGE], "--seed"),
    (["train", "--seed", "-1"], "--seed"),
    (["train", "--steps", "0"], "--steps"),
    (["train", "--steps", "1" * 5000], "--steps"),
    (["train", "--batch-size", HUGE], "--batch-size"),
    (["train", "--seq-len", "-3"], "--seq-len"),
    (["train", "--lr", "nan"], "--lr"),
    (["train", "--lr", "inf"], "--lr"),
    (["train", "--lr", "1e400"], "--lr"),
    (["train", "--weight-decay", "-1"], "--weight-decay"),
    (["train", "--warmup", "-0.5"], "--warmup"),
    (["train", "--grad-clip", "inf"], "--grad-clip"),
    (["train", "--eval-every", "-1"], "--eval-every"),
    (["train", "--eval-tokens", HUGE], "--eval-tokens"),
    (["train", "--eval-stride", "0"], "--eval-stride"),
    (["train", "--log-every", "0"], "--log-every"),
    (["train", "--params", "99999999999999"], "--params"),
    (["train", "--params", "lots"], "--params"),
    (["eval", CKPT, "--seq-len", HUGE], "--seq-len"),
    (["eval", CKPT, "--max-tokens", "0"], "--max-tokens"),
    (["eval", CKPT, "--threads", "100000"], "--threads"),
    (["sample", CKPT, "--seed", HUGE], "--seed"),
    (["sample", CKPT, "--length", "-1"], "--length"),
    (["sample", CKPT, "--temperature=-inf"], "--temperature"),
    (["sample", CKPT, "--top-k", "0"], "--top-k"),
    (["sample", CKPT, "--context", HUGE], "--context"),
    (["trace", CKPT, "--steps", "1000"], "--steps"),
    (["trace", CKPT, "--cursor", "-1"], "--cursor"),
    (["trace", CKPT, "--threads", "-2"], "--threads"),
    (["sweep", "--model", "lstm", "--data", "x", "--seeds", "0"], "--seeds"),
    (["sweep", "--model", "lstm", "--data", "x", "--n-trials", "-5"], "--n-trials"),
    (["sweep", "--model", "lstm", "--data", "x", "--timeout", "nan"], "--timeout"),
    (["sweep", "--model", "lstm", "--data", "x", "--sampler-seed", HUGE], "--sampler-seed"),
    (["sweep", "--model", "lstm", "--data", "x", "--lr", "0"], "--lr"),
    (["sweep", "--model", "lstm", "--data", "x", "--params", "1e9"], "--params"),
    (["report", "--quick", "--steps", "0"], "--steps"),
    (["report", "--quick", "--seeds", "0"], "--seeds"),
    (["report", "--quick", "--eval-chars", "-5"], "--eval-chars"),
    (["report", "--quick", "--lr-grid", "1e-3,nan"], "--lr-grid"),
    (["report", "--quick", "--wp-steps", "-1"], "--wp-steps"),
    (["report", "--converged", "--max-jobs", "0"], "--max-jobs"),
    (["zoo", "--rebuild", "--steps-scale", "0"], "--steps-scale"),
    (["zoo", "--rebuild", "--steps-scale", "inf"], "--steps-scale"),
]


@pytest.mark.parametrize("argv,option", BAD, ids=[" ".join(a)[:60] for a, _ in BAD])
def test_a_number_out_of_range_is_one_line_naming_the_option(argv, option, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing may be written anywhere
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"error: {option}: ") and captured.err.count("\n") == 1, captured.err
    assert "Traceback" not in captured.err and len(captured.err) < 300 and not captured.out
    assert list(tmp_path.iterdir()) == []


def test_threads_and_seed_beyond_what_torch_takes_exit_2_in_a_fresh_process(tmp_path):
    """``--threads 100000`` crashed the process (segmentation fault) and ``--seed 2**80`` said only "Overflow
    when unpacking long long": both are refused when the options are read."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    for flag, value in (("--threads", "100000"), ("--seed", HUGE)):
        p = subprocess.run([sys.executable, "-m", "geomlab", "train", "--model", "lstm", "--data", "word-problem:Z5",
                            "--steps", "2", "--quiet", "--out", str(tmp_path / "runs"), flag, value],
                           capture_output=True, text=True, timeout=120, env=env)
        assert p.returncode == 2, (flag, p.returncode, p.stderr[-500:])
        assert p.stderr.startswith(f"error: {flag}: must be an integer from ") and p.stderr.count("\n") == 1
    assert not (tmp_path / "runs").exists()


def test_good_values_at_the_edges_are_taken():
    from geomlab.commands import max_threads
    from geomlab.commands.cli import build_parser

    args = build_parser().parse_args(["train", "--seed", str(2**63 - 1), "--threads", str(max_threads()),
                                      "--lr", "1e6", "--warmup", "0", "--eval-tokens", "0", "--params", "1.5M"])
    assert (args.seed, args.threads, args.lr, args.warmup, args.eval_tokens, args.params) == \
        (2**63 - 1, max_threads(), 1e6, 0.0, 0, 1_500_000)


# ------------------------------------------------------------------------------------------------------ sweeps
def _sweep(text_file, out, *extra):
    return main(["sweep", "--model", "lstm", "--params", "5k", "--data", str(text_file), "--steps", "4",
                 "--batch-size", "4", "--seq-len", "16", "--eval-every", "2", "--eval-tokens", "256", "--n-trials", "1",
                 "--sampler-seed", "0", "--out", str(out), *extra])


@pytest.fixture
def no_training(monkeypatch):
    """Any trial that starts training fails the test: every refusal must come before it."""
    from geomlab.training import sweep

    monkeypatch.setattr(sweep, "train_trial", lambda *a, **k: pytest.fail("a trial trained"))


def test_a_fifo_as_the_study_storage_is_refused_at_once(text_file, tmp_path, capsys, no_training):
    """Opening a FIFO waits for a writer forever: the sweep hung with no output."""
    fifo = tmp_path / "study.journal"
    os.mkfifo(fifo)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    p = subprocess.run([sys.executable, "-m", "geomlab", "sweep", "--model", "lstm", "--params", "5k", "--data",
                        str(text_file), "--steps", "2", "--n-trials", "1", "--out", str(tmp_path / "out"),
                        "--storage", str(fifo)], capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 2, p.stderr[-500:]
    assert p.stderr.strip().splitlines()[-1] == (f"error: --storage {fifo}: not a regular file (a FIFO or a device); "
                                                 "give a file name")
    assert "Traceback" not in p.stderr
    from geomlab.training.sweep import SweepError, open_storage

    with pytest.raises(SweepError, match=f"the storage {fifo} is not a regular file"):  # the Python API too
        open_storage(fifo)
    folder = tmp_path / "folder.journal"
    folder.mkdir()
    assert _sweep(text_file, tmp_path / "out", "--storage", str(folder)) == 2
    assert str(folder) in capsys.readouterr().err


@pytest.mark.parametrize("content", [b"garbage{{{\n", b"\xff\xfe\x00\n", b'{"op_code": 0}\n', b"[1, 2]\n",
                                     b"[" * 100_000 + b"\n"])
def test_a_garbage_journal_is_one_line_naming_the_file(content, text_file, tmp_path, capsys, no_training):
    journal = tmp_path / "study.journal"
    journal.write_bytes(content)
    assert _sweep(text_file, tmp_path / "out", "--storage", str(journal)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and f"{journal} is not an Optuna journal" in err and err.count("\n") == 1, err
    # nothing lost (Optuna reads a damaged last line as a write in progress, so its study record may follow it)
    assert journal.read_bytes().startswith(content)


def test_summary_and_out_are_checked_before_the_first_trial(text_file, tmp_path, capsys, no_training):
    folder = tmp_path / "a-folder"
    folder.mkdir()
    afile = tmp_path / "a-file"
    afile.write_text("x")
    for extra, want in ((["--summary", str(folder)], f"error: --summary {folder}: that is a folder; give a file name"),
                        (["--summary", str(afile / "s.json")], f"error: --summary {afile / 's.json'}: {afile} is a "
                                                                "file, so no folder can be made there")):
        assert _sweep(text_file, tmp_path / "out", *extra) == 2, extra
        err = capsys.readouterr().err
        assert err.startswith(want) and err.count("\n") == 1, err
    pipe = tmp_path / "summary.fifo"
    os.mkfifo(pipe)
    assert _sweep(text_file, tmp_path / "out", "--summary", str(pipe)) == 2
    assert capsys.readouterr().err == f"error: --summary {pipe}: not a regular file (a FIFO or a device); give a " \
                                      "file name\n"
    assert _sweep(text_file, afile / "sub") == 2  # --out under a file: neither storage nor summary can be made
    err = capsys.readouterr().err
    assert err.startswith(f"error: --out {afile / 'sub'}") and "is a file" in err and err.count("\n") == 1, err
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        assert _sweep(text_file, tmp_path / "out", "--summary", str(ro / "s.json")) == 2
        assert "cannot write in" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_folders_a_sweep_makes_are_named_once(text_file, tmp_path, capsys):
    out, summary, storage = tmp_path / "out" / "sweeps", tmp_path / "s" / "sum.json", tmp_path / "j" / "x.journal"
    assert _sweep(text_file, out, "--summary", str(summary), "--storage", str(storage), "--no-tensorboard") == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note: made the folder")]
    assert sorted(notes) == sorted(f"note: made the folder {p}{os.sep} for {o} (it did not exist)"
                                   for p, o in ((out.parent, "--out"), (summary.parent, "--summary"),
                                                (storage.parent, "--storage")))
    assert summary.is_file() and storage.is_file() and (out / f"{json.loads(summary.read_text())['study_name']}"
                                                               "-trials").is_dir()
    again = tmp_path / "again"
    assert _sweep(text_file, again / "sub", "--no-tensorboard") == 0  # summary, journal and trials under --out
    assert [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")] == [
        f"note: made the folder {again}{os.sep} for --out (it did not exist)"]
    assert _sweep(tmp_path / "no-such.txt", tmp_path / "bad" / "sub") == 2  # bad input: no folder made
    assert not (tmp_path / "bad").exists()


def test_a_missing_folder_above_train_out_is_named(tmp_path, capsys):
    out = tmp_path / "new" / "runs"
    argv = ["train", "--model", "lstm", "--config", "hidden=8", "--data", "word-problem:Z5", "--steps", "2",
            "--quiet", "--threads", "1", "--no-tensorboard", "--out", str(out)]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert f"note: made the folder {out.parent}{os.sep} for --out (it did not exist)\n" in err, err
    assert main(argv) == 0  # the folder is there now
    assert "note: made" not in capsys.readouterr().err
    bad = [*argv[:-1], str(tmp_path / "bad" / "runs"), "--data", str(tmp_path / "no-such.txt")]
    assert main(bad) == 2  # refused before the run makes its folder
    assert not (tmp_path / "bad").exists()
