"""End-to-end tests of `python -m geomlab train | eval | sample` on a small text."""

from __future__ import annotations

import re
from pathlib import Path
import subprocess
import sys

import pytest

from geomlab import checkpoint as ckpt
from geomlab.cli import main
from geomlab.commands.train import parse_config, parse_count


@pytest.fixture
def text_file(tmp_path, tiny_text):
    p = tmp_path / "small.txt"
    p.write_text(tiny_text * 3, encoding="utf-8")
    return p


def _train(text_file, out, *extra):
    return main(["train", "--model", "lstm", "--params", "5k", "--data", str(text_file), "--steps", "20",
                 "--batch-size", "4", "--seq-len", "16", "--eval-every", "10", "--out", str(out), "--quiet",
                 *extra])


def test_train_eval_sample_end_to_end(text_file, tmp_path, capsys):
    out = tmp_path / "runs"
    assert _train(text_file, out, "--name", "tiny", "--config", "embedding_dim=8", "--lr", "0.01") == 0
    printed = capsys.readouterr().out
    assert re.search(r"done at step 20; valid_bpc \d+\.\d+; test_bpc \d+\.\d+", printed)
    c = ckpt.load(out / "tiny")
    assert c.model_config["embedding_dim"] == 8
    assert abs(c.card["params_effective"] - 5000) / 5000 < 0.05
    assert c.train_config["lr"] == 0.01 and c.train_config["steps"] == 20
    test_bpc = c.card["test_bpc"]

    assert main(["eval", str(out / "tiny.json"), "--data", str(text_file), "--split", "test"]) == 0
    printed = capsys.readouterr().out
    got = float(re.search(r"test bpc: (\d+\.\d+)", printed).group(1))
    assert got == pytest.approx(test_bpc, abs=1e-4)
    assert f"{c.card['params_effective']:,} effective" in printed

    assert main(["sample", str(out / "tiny"), "--prompt", "ROMEO:", "--length", "30", "--seed", "1"]) == 0
    sample = capsys.readouterr().out
    assert sample.startswith("ROMEO:") and len(sample.rstrip("\n")) >= 6 + 25
    assert main(["sample", str(out / "tiny"), "--prompt", "ROMEO:", "--length", "30", "--seed", "1"]) == 0
    assert capsys.readouterr().out == sample  # seeded


def test_resume_via_cli(text_file, tmp_path, capsys):
    out = tmp_path / "runs"
    assert _train(text_file, out, "--name", "full") == 0
    full = ckpt.load(out / "full")
    # stop/resume equivalence is tested through the API in test_train; here a finished 20-step run is
    # extended to 30 steps. A user text file is not stored in the card, so --data is needed again.
    assert main(["train", "--resume", str(out / "full"), "--steps", "30", "--quiet"]) == 2
    assert "pass the text file with --data" in capsys.readouterr().err
    assert main(["train", "--resume", str(out / "full"), "--data", str(text_file), "--steps", "30",
                 "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "resuming" in printed and "at step 20 of 30" in printed
    longer = ckpt.load(out / "full")
    assert longer.card["steps"] == 30 and full.card["steps"] == 20


def test_word_problem_via_cli(tmp_path, capsys):
    out = tmp_path / "runs"
    code = main(["train", "--model", "lstm", "--config", "hidden=8", "--data", "word-problem:S3:8",
                 "--steps", "5", "--batch-size", "4", "--seq-len", "8", "--out", str(out), "--quiet"])
    assert code == 0
    assert "valid_accuracy" in capsys.readouterr().out
    (path,) = out.glob("*.json")
    assert main(["eval", str(path), "--split", "valid"]) == 0  # task rebuilt from the card
    assert "accuracy" in capsys.readouterr().out


def test_length_curriculum_via_cli(tmp_path, capsys):
    from geomlab import checkpoint as ckpt
    from geomlab.commands.train import parse_curriculum

    assert parse_curriculum("2:3, 4:2") == ((2, 3), (4, 2)) and parse_curriculum("") == ()
    with pytest.raises(ValueError, match="LEN:STEPS"):
        parse_curriculum("2-3")
    out = tmp_path / "runs"
    code = main(["train", "--model", "lstm", "--config", "hidden=8", "--data", "word-problem:S3:8", "--steps", "5",
                 "--batch-size", "4", "--seq-len", "8", "--length-curriculum", "2:3", "--out", str(out), "--quiet"])
    assert code == 0
    (path,) = out.glob("*.json")
    c = ckpt.load(path)
    assert c.train_config["length_curriculum"] == [[2, 3]] and c.card["tokens_seen"] == 4 * (2 * 3 + 8 * 2)
    assert main(["train", "--model", "lstm", "--data", "word-problem:S3:8", "--steps", "2",
                 "--length-curriculum", "2:5", "--out", str(out)]) == 2
    assert "more than steps" in capsys.readouterr().err


def test_bad_input_is_one_line(text_file, tmp_path, capsys):
    assert main(["train", "--model", "no-such-kind", "--data", str(text_file), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "known kinds" in err and err.count("\n") == 1
    assert main(["train", "--model", "lstm", "--data", str(tmp_path / "missing.txt")]) == 2
    assert "neither a known corpus" in capsys.readouterr().err
    assert main(["eval", str(tmp_path / "nothing")]) == 2
    assert "missing" in capsys.readouterr().err
    assert main(["train", "--model", "lstm", "--data", str(text_file), "--params", "lots"]) == 2
    assert "parameter count" in capsys.readouterr().err
    assert main(["train", "--model", "cem", "--data", "gp", "--steps", "1", "--out", str(tmp_path)]) == 2
    assert "geomlab.bench gp" in capsys.readouterr().err


def test_list_models(capsys):
    assert main(["train", "--list-models"]) == 0
    assert "lstm" in capsys.readouterr().out.split()


def test_parsers():
    assert parse_count("100k") == 100_000 and parse_count("1.5M") == 1_500_000 and parse_count("50000") == 50_000
    with pytest.raises(ValueError):
        parse_count("12q")
    assert parse_config(["a=1", "b=true", "c=SO", "d=[1, 2]", "e=0.5"]) == {
        "a": 1, "b": True, "c": "SO", "d": [1, 2], "e": 0.5}
    with pytest.raises(ValueError):
        parse_config(["novalue"])


def test_help_explains_options():
    res = subprocess.run([sys.executable, "-m", "geomlab", "train", "--help"], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0
    for flag in ("--model", "--params", "--data", "--steps", "--out", "--resume", "--seq-len", "--device"):
        assert flag in res.stdout


def test_train_never_overwrites_an_earlier_checkpoint(tmp_path, capsys):
    """The default name includes the group, a repeated default name gets -2, -3 ..., and an explicit
    --name that exists is refused (use --resume)."""
    out = tmp_path / "runs"
    base = ["train", "--model", "osm-rnn", "--config", "d=3", "--data", "word-problem:S3:4", "--steps", "1",
            "--batch-size", "2", "--seq-len", "4", "--out", str(out), "--quiet"]
    assert main(base + ["--group", "O"]) == 0
    assert main(base + ["--group", "T"]) == 0
    assert main(base + ["--group", "O"]) == 0
    names = sorted(p.stem for p in out.glob("*.json"))
    assert len(names) == 3 and any("-O-" in n for n in names) and any("-T-" in n for n in names)
    assert any(n.endswith("-2") for n in names)
    capsys.readouterr()
    taken = names[0]
    assert main(base + ["--group", "O", "--name", taken]) == 2
    assert "already exists" in capsys.readouterr().err
    assert len(list(out.glob("*.json"))) == 3
    assert main(base + ["--name", "../escaped"]) == 2
    assert "plain file name" in capsys.readouterr().err and not (tmp_path / "escaped.json").exists()


def test_trace_sample_and_bundled_name_errors(tmp_path, capsys, monkeypatch):
    """trace refuses a cursor outside the text; sample refuses a word-problem model (it predicts running
    products, not next inputs); a bare bundled name that is not a path says where the bundled file is."""
    s5 = "assets/checkpoints/osm-rnn-o-s5"
    monkeypatch.chdir(Path(__file__).resolve().parent.parent)
    assert main(["trace", s5, "--text", "01234 10234", "--cursor", "5", "--out", str(tmp_path / "t"),
                 "--html", str(tmp_path / "views")]) == 2
    assert "outside the traced text (positions 0 to 1)" in capsys.readouterr().err
    assert not (tmp_path / "views").exists()
    assert main(["sample", s5, "--prompt", "01234", "--length", "3"]) == 2
    assert "word-problem model" in capsys.readouterr().err
    monkeypatch.chdir(tmp_path)
    for ref in ("osm-rnn-o-s5", "bundled/osm-rnn-o-s5"):  # a bare name, and the app's URL form
        assert main(["eval", ref]) == 2
        hint = capsys.readouterr().err.split("a bundled checkpoint of that name is ")[1].strip()
        assert Path(hint).resolve() == (Path(__file__).resolve().parent.parent / "assets" / "checkpoints"
                                        / "osm-rnn-o-s5.json")  # a path that works from where the user is


def test_eval_refuses_another_task(capsys, monkeypatch, text_file):
    """A word-problem model scored on another group or on text, or a language model on a word problem, is
    refused (the ids would be reused and the number would mean nothing); its own group keeps the card's
    evaluation sequences."""
    monkeypatch.chdir(Path(__file__).resolve().parent.parent)
    s5, lm = "assets/checkpoints/osm-rnn-o-s5", "assets/checkpoints/lstm-tinyshakespeare"
    assert main(["eval", s5, "--data", "word-problem:S3"]) == 2
    assert "trained on the S5 word problem" in capsys.readouterr().err
    assert main(["eval", s5, "--data", str(text_file)]) == 2
    assert "different kind of task" in capsys.readouterr().err
    assert main(["eval", lm, "--data", "word-problem:S3"]) == 2
    assert "trained on text" in capsys.readouterr().err
    assert main(["eval", s5]) == 0
    own = capsys.readouterr().out
    assert main(["eval", s5, "--data", "word-problem:S5:32"]) == 0
    assert capsys.readouterr().out == own  # same card evaluation set as without --data


# ---------------------------------------------------------------- issue 15, class 7: OSError and Ctrl-C
import errno
import os
import signal

import torch

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
    real = tempfile.mkstemp

    def read_only(*a, dir=None, **kw):  # what a read-only file system answers (tests run as root: no chmod)
        if dir is not None and Path(dir) == out:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(out))
        return real(*a, dir=dir, **kw)

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    trained = []
    from geomlab import train

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
    assert sorted(p.name for p in out.iterdir()) == ["full.json", "full.safetensors"]  # no partial file
    assert ckpt.load(out / "full").card["steps"] == 10


def test_oserror_anywhere_in_a_command_is_one_line(text_file, tmp_path, capsys, monkeypatch):
    from geomlab.data import tasks

    def broken(*a, **k):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(text_file))

    monkeypatch.setattr(tasks, "make_task", broken)
    assert _tiny(text_file, tmp_path / "runs", "x") == 1
    err = capsys.readouterr().err
    assert err == f"error: {text_file}: Permission denied\n"


def test_ctrl_c_before_training_is_one_line(text_file, tmp_path, capsys, monkeypatch):
    from geomlab.data import tasks

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(tasks, "make_task", interrupted)
    assert _tiny(text_file, tmp_path / "runs", "x") == 130
    assert capsys.readouterr().err.strip() == "interrupted"


def _sigint_at(monkeypatch, steps: tuple[int, ...]):
    """Deliver a real SIGINT to this process when the trainer reports each of ``steps`` (a step boundary)."""
    from geomlab import train

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
        assert _tiny(text_file, out, "cut", "--eval-every", "7") == 0
    printed = capsys.readouterr()
    assert "stopped at step 20" in printed.out and "--resume" in printed.out and "Traceback" not in printed.err
    assert ckpt.load(out / "cut").card["steps"] == 20
    assert main(["train", "--resume", str(out / "cut"), "--data", str(text_file), "--quiet"]) == 0
    assert "done at step 30" in capsys.readouterr().out
    assert _same_weights(out / "whole", out / "cut")


def test_second_sigint_aborts_in_one_line(text_file, tmp_path, capsys, monkeypatch):
    out = tmp_path / "runs"
    _sigint_at(monkeypatch, (10,))
    from geomlab import train

    original_stop = train.Trainer.stop
    monkeypatch.setattr(train.Trainer, "stop", lambda self: (original_stop(self), os.kill(os.getpid(),
                                                                                         signal.SIGINT)))
    assert _tiny(text_file, out, "abort", "--eval-every", "7") == 130
    err = capsys.readouterr().err
    assert "aborted at step 10; the last checkpoint" in err and "Traceback" not in err
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
    proc = subprocess.Popen([sys.executable, "-m", "geomlab", *args, "--name", "cut"], cwd=Path(__file__).parents[1],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 180
    while not (out / "cut.json").exists() and proc.poll() is None and time.monotonic() < end:
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 0 and "Traceback" not in stderr, stderr
    m = re.search(r"stopped at step (\d+) \(resume with", stdout)
    assert m, f"the run was not stopped by the signal: {stdout}"
    assert 20 <= int(m.group(1)) < 400 and ckpt.load(out / "cut").card["steps"] == int(m.group(1))
    assert main(["train", "--resume", str(out / "cut"), "--data", str(text_file), "--quiet"]) == 0
    assert main([*args, "--name", "whole"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("done at step 400") == 2
    assert _same_weights(out / "whole", out / "cut")
