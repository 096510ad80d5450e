"""the command line and the system. A read-only or full output folder is refused before
training; an OSError later is one line and a non-zero exit with no partial checkpoint; Ctrl-C stops cleanly and
`--resume` continues bit-identically (real SIGINTs, to this process at step boundaries and to a subprocess)."""

from __future__ import annotations

import errno
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from geomlab.checkpoints import io as ckpt
from geomlab.commands.cli import main


TINY = ["train", "--model", "lstm", "--config", "hidden=8", "layers=2", "dropout=0.3", "--steps", "30",
        "--batch-size", "4", "--seq-len", "16", "--eval-every", "10", "--eval-tokens", "100", "--seed", "5",
        "--quiet"]


def _tiny(text_file, out, name, *extra):
    return main([*TINY, "--data", str(text_file), "--out", str(out), "--name", name, *extra])


def _same_weights(a, b):
    sa, sb = ckpt.load(a).model.state_dict(), ckpt.load(b).model.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_unwritable_out_is_refused_before_training(text_file, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    assert _tiny(text_file, blocker / "runs", "x") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot write checkpoints to") and err.count("\n") == 1
    assert "nothing was trained" in err


def test_read_only_out_is_refused_before_training(text_file, tmp_path, capsys, monkeypatch):
    import tempfile

    out = tmp_path / "ro"
    real = tempfile.TemporaryFile

    def read_only(*a, dir=None, **kw):  # what a read-only file system answers (tests run as root: no chmod)
        if dir is not None and Path(dir) == out:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(out))
        return real(*a, dir=dir, **kw)

    monkeypatch.setattr(tempfile, "TemporaryFile", read_only)  # the write probe
    trained = []
    from geomlab.training import trainer as train

    monkeypatch.setattr(train.Trainer, "run", lambda self, *a, **k: trained.append(1))
    assert _tiny(text_file, out, "x") == 2
    err = capsys.readouterr().err
    assert "cannot write checkpoints to" in err and "Read-only file system" in err and err.count("\n") == 1
    assert not trained and list(out.iterdir()) == []


def test_too_little_free_space_is_refused_before_training(text_file, tmp_path, capsys, monkeypatch):
    import shutil

    monkeypatch.setattr(shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**9, 10**9 - 1000, 1000))
    assert _tiny(text_file, tmp_path / "runs", "x") == 2
    err = capsys.readouterr().err
    assert "bytes free" in err and err.count("\n") == 1
    assert list((tmp_path / "runs").glob("x*")) == []


def test_disk_full_during_training_is_one_line_and_keeps_the_last_good_checkpoint(text_file, tmp_path, capsys,
                                                                                  monkeypatch):
    import safetensors.torch

    real, calls = safetensors.torch.save_file, []

    def fills_up(tensors, filename, metadata=None):
        calls.append(filename)
        if len(calls) >= 2:  # the first checkpoint (step 10) fits, the next one does not
            with open(filename, "wb") as f:
                f.write(b"partial")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), filename)
        return real(tensors, filename, metadata=metadata)

    monkeypatch.setattr(safetensors.torch, "save_file", fills_up)
    out = tmp_path / "runs"
    assert _tiny(text_file, out, "full") == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: step 20: could not write the checkpoint")
    assert "No space left on device" in err and "last good checkpoint" in err
    assert [p.name for p in out.iterdir()] == ["full"]
    names = sorted(p.name for p in (out / "full").iterdir() if not p.name.startswith("events.out.tfevents."))
    assert names == [
        "README.md", "config.json", "geomlab.json", "metrics.csv", "model.safetensors", "training_state.json",
        "training_state.safetensors", "vocab.json"]  # no partial file (beside the run's logs)
    assert ckpt.load(out / "full").card["steps"] == 10


def test_oserror_anywhere_in_a_command_is_one_line(text_file, tmp_path, capsys, monkeypatch):
    from geomlab.data import registry as tasks

    def broken(*a, **k):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(text_file))

    monkeypatch.setattr(tasks, "make_task", broken)
    assert _tiny(text_file, tmp_path / "runs", "x") == 1
    err = capsys.readouterr().err
    assert err == f"error: {text_file}: Permission denied\n"


def test_ctrl_c_before_training_is_one_line(text_file, tmp_path, capsys, monkeypatch):
    from geomlab.data import registry as tasks

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(tasks, "make_task", interrupted)
    assert _tiny(text_file, tmp_path / "runs", "x") == 130
    assert capsys.readouterr().err.strip() == "interrupted"


def _sigint_at(monkeypatch, steps: tuple[int, ...]):
    """Deliver a real SIGINT to this process when the trainer reports each of ``steps`` (a step boundary)."""
    from geomlab.training import trainer as train

    original = train.Trainer.run

    def run(self, *a, **k):
        def hook(p):
            if p.event == "step" and p.step in steps:
                os.kill(os.getpid(), signal.SIGINT)

        self.add_callback(hook)
        return original(self, *a, **k)

    monkeypatch.setattr(train.Trainer, "run", run)


def test_sigint_then_resume_is_bit_identical_to_an_uninterrupted_run(text_file, tmp_path, capsys, monkeypatch):
    out = tmp_path / "runs"
    assert _tiny(text_file, out, "whole", "--eval-every", "7") == 0
    with monkeypatch.context() as m:
        _sigint_at(m, (20,))  # progress is reported every 10 steps; checkpoints every 7
        assert _tiny(text_file, out, "cut", "--eval-every", "7") == 130  # saved, but not finished
    printed = capsys.readouterr()
    assert "stopped at step 20" in printed.out and "Traceback" not in printed.err
    assert f"(resume with: python -m geomlab train --resume {out / 'cut'})" in printed.out  # sys.argv[0]: pytest
    assert ckpt.load(out / "cut").card["steps"] == 20
    assert main(["train", "--resume", str(out / "cut"), "--data", str(text_file), "--quiet"]) == 0
    assert "done at step 30" in capsys.readouterr().out
    assert _same_weights(out / "whole", out / "cut")


def test_resume_hint_names_the_program_the_user_ran(text_file, tmp_path, capsys, monkeypatch):
    """The installed `geomlab` script is named as such in the hint; `python -m geomlab` (argv[0] is the
    package's __main__.py) keeps the -m spelling."""
    out = tmp_path / "runs"
    for argv0, want in ((str(Path("bin") / "geomlab"), "resume with: geomlab train --resume"),
                        (str(Path("geomlab") / "__main__.py"), "resume with: python -m geomlab train --resume")):
        monkeypatch.setattr(sys, "argv", [argv0])
        with monkeypatch.context() as m:
            _sigint_at(m, (10,))
            assert _tiny(text_file, out, f"cut-{len(want)}") == 130
        assert want in capsys.readouterr().out


def test_second_sigint_aborts_in_one_line(text_file, tmp_path, capsys, monkeypatch):
    out = tmp_path / "runs"
    _sigint_at(monkeypatch, (10,))
    from geomlab.training import trainer as train

    original_stop = train.Trainer.stop
    monkeypatch.setattr(train.Trainer, "stop", lambda self: (original_stop(self), os.kill(os.getpid(),
                                                                                         signal.SIGINT)))
    assert _tiny(text_file, out, "abort", "--eval-every", "7") == 130
    err = capsys.readouterr().err
    assert "aborted at step 10; the last checkpoint" in err and "Traceback" not in err
    assert ckpt.load(out / "abort").card["steps"] == 7


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_second_sigint_aborts_even_when_python_drops_its_keyboard_interrupt(text_file, tmp_path, capsys,
                                                                            monkeypatch):
    """The second SIGINT arrives while a finalizer (``__del__``) runs: Python prints the KeyboardInterrupt its
    handler raises there and drops it. The run still aborts at the next step boundary, writing nothing more."""
    out = tmp_path / "runs"
    _sigint_at(monkeypatch, (10,))
    from geomlab.training import trainer as train

    class Dropped:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGINT)
            sum(range(1000))  # the handler runs here, inside the finalizer

    original_stop = train.Trainer.stop
    monkeypatch.setattr(train.Trainer, "stop", lambda self: (original_stop(self), Dropped()))
    assert _tiny(text_file, out, "abort", "--eval-every", "7") == 130
    err = capsys.readouterr().err
    assert "aborted at step 10; the last checkpoint" in err
    assert ckpt.load(out / "abort").card["steps"] == 7


@pytest.mark.slow
def test_sigint_to_a_training_process_then_resume_is_bit_identical(text_file, tmp_path, capsys):
    """A real Ctrl-C (SIGINT to a `python -m geomlab train` process), then --resume: same weights as one
    uninterrupted run of the same seed."""
    import time

    out = tmp_path / "runs"
    args = ["train", "--model", "lstm", "--config", "hidden=32", "layers=2", "dropout=0.2", "--steps", "400",
            "--batch-size", "8", "--seq-len", "32", "--eval-every", "20", "--eval-tokens", "100", "--seed", "3",
            "--quiet", "--data", str(text_file), "--out", str(out)]
    proc = subprocess.Popen([sys.executable, "-m", "geomlab", *args, "--name", "cut"], cwd=Path(__file__).parents[2],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 180
    while not (out / "cut" / "geomlab.json").exists() and proc.poll() is None and time.monotonic() < end:
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 130 and "Traceback" not in stderr, stderr  # stopped and saved, not finished
    m = re.search(r"stopped at step (\d+) \(resume with: python -m geomlab train --resume", stdout)
    assert m, f"the run was not stopped by the signal: {stdout}"
    assert 20 <= int(m.group(1)) < 400 and ckpt.load(out / "cut").card["steps"] == int(m.group(1))
    assert main(["train", "--resume", str(out / "cut"), "--data", str(text_file), "--quiet"]) == 0
    assert main([*args, "--name", "whole"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("done at step 400") == 2
    assert _same_weights(out / "whole", out / "cut")


def test_trace_checks_every_output_before_writing_any(tmp_path, capsys, monkeypatch):
    """--out/--html/--png/--json: a place that cannot be written is one line naming the option and the path,
    and nothing is written (not even the outputs that could be); missing folders are made, each with a note."""
    monkeypatch.delenv("GEOMLAB_BUNDLED_DIR", raising=False)  # the shipped checkpoints (app tests repoint it)
    monkeypatch.chdir(tmp_path)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    base = ["trace", "osm-rnn-o-s5", "--text", "01234 10234"]
    for extra, want in ((["--out", "a-file/t.npz"], "--out a-file/t.npz: a-file is a file"),
                        (["--out", "t.npz", "--html", "a-file/views"], "--html a-file/views: a-file is a file"),
                        (["--out", "t.npz", "--png", "a-file"], "--png a-file: a file is there, not a folder"),
                        (["--out", "t.npz", "--json", "a-file/x/t.json"], "--json a-file/x/t.json: a-file is a"),
                        (["--out", "t.npz", "--json", "."], "--json .: that is a folder")):
        assert main(base + extra) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {want}") and err.count("\n") == 1, err
        assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]
    if Path("/proc/self").is_dir():  # Linux: a folder nobody can create files in, even root
        assert main(base + ["--out", "/proc/x.npz"]) == 2
        assert capsys.readouterr().err.startswith("error: --out /proc/x.npz: cannot write in /proc (")
    assert main(base + ["--out", "new/deeper/t", "--json", "other/t.json", "--html", "views"]) == 0
    assert (tmp_path / "new" / "deeper" / "t.npz").is_file() and (tmp_path / "other" / "t.json").is_file()
    err = capsys.readouterr().err  # the folder --html names itself is made without a note
    assert err.splitlines() == [f"note: made the folder {Path('new', 'deeper')}{os.sep} for --out (it did not exist)",
                                f"note: made the folder other{os.sep} for --json (it did not exist)"], err


def test_report_records_and_out_follow_the_same_rule(tmp_path, capsys, monkeypatch):
    """report --records and --out, like trace's and whatif's outputs: a missing folder is made, with a note."""
    if os.environ.get("GEOMLAB_DATA_DIR"):  # a relative data folder (CI's ../shared/data) from the test's folder
        monkeypatch.setenv("GEOMLAB_DATA_DIR", os.path.abspath(os.environ["GEOMLAB_DATA_DIR"]))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "store").mkdir()
    assert main(["report", "--campaign", "fair", "--collect", "--store", "store", "--records", "new/r.jsonl",
                 "--out", "rep/r.md", "--no-png"]) == 0
    assert (tmp_path / "new" / "r.jsonl").is_file() and (tmp_path / "rep" / "r.md").is_file()
    assert [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")] == [
        f"note: made the folder new{os.sep} for --records (it did not exist)",
        f"note: made the folder rep{os.sep} for --out (it did not exist)"]


def test_missing_input_file_is_one_line_naming_it(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["trace", "osm-rnn-o-s5", "--text-file", "gone.txt", "--out", "t.npz"]) == 2
    assert capsys.readouterr().err == "error: gone.txt: No such file or directory\n"


def test_text_file_is_read_only_as_far_as_a_trace_can_reach(tmp_path, capsys, monkeypatch):
    """An endless --text-file (/dev/zero) once read until memory ran out; a folder was exit status 1."""
    monkeypatch.chdir(tmp_path)
    from geomlab.commands.trace import read_text_file

    big = tmp_path / "big.txt"
    big.write_text("é" * 5000, encoding="utf-8")  # 10,000 bytes: over 2,048 characters' worth
    base = ["trace", "osm-rnn-o-s5", "--out", "t.npz"]
    assert main(base + ["--text-file", str(big)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --text-file {big} is longer than a trace can be (2,048 characters") and \
        err.count("\n") == 1, err
    assert main(base + ["--text-file", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"error: --text-file {tmp_path} is a folder; give a text file\n"
    if Path("/dev/zero").exists():
        assert main(base + ["--text-file", "/dev/zero"]) == 2
        assert "is longer than a trace can be" in capsys.readouterr().err
    # 2,048 four-byte characters and a byte-order mark are exactly the most that is read
    edge = tmp_path / "edge.txt"
    edge.write_bytes(b"\xef\xbb\xbf" + "𝔸".encode() * 2048)
    assert len(read_text_file(str(edge))) == 3 + 4 * 2048
    assert not list(tmp_path.glob("*.npz"))


def test_empty_names_and_two_zoo_actions_are_refused_in_one_line(tmp_path, capsys, monkeypatch):
    """`eval ""` and `trace --out .` printed "PosixPath('.') has an empty name"; `zoo --list --rebuild` started a
    rebuild."""
    monkeypatch.chdir(tmp_path)
    for argv in (["eval", ""], ["sample", " "], ["trace", "", "--text", "ab", "--out", "t.npz"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: no checkpoint named (an empty argument): expected a checkpoint folder") \
            and "PosixPath" not in err and err.count("\n") == 1, err
    (tmp_path / "sub").mkdir()
    for out in (".", "..", "sub", "sub/", "new/", str(tmp_path)):  # a folder wrote "sub.npz" beside it, outside
        assert main(["trace", "osm-rnn-o-s5", "--text", "01234", "--out", out]) == 2, out
        err = capsys.readouterr().err
        assert err.startswith(f"error: --out {out}: names a folder; give a file name (e.g. ") \
            and err.endswith("trace.npz)\n"), err
    assert not list(tmp_path.parent.glob(tmp_path.name + ".npz"))
    (tmp_path / "sub").rmdir()
    import geomlab.training.zoo as zoo

    monkeypatch.setattr(zoo, "rebuild", lambda *a, **k: pytest.fail("a rebuild started"))
    for other in ("--list", "--recipes"):
        with pytest.raises(SystemExit) as exc:
            main(["zoo", other, "--rebuild", "--dir", str(tmp_path)])
        assert exc.value.code == 2
        assert f"argument --rebuild: not allowed with argument {other}" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
