"""End-to-end tests of `python -m geomlab train | eval | sample` on a small text."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
import subprocess
import sys

import pytest
import torch

from geomlab.checkpoints import io as ckpt
from geomlab.commands.cli import main
from geomlab.commands.train import parse_config, parse_count

ROOT = Path(__file__).resolve().parents[2]


def _train(text_file, out, *extra):
    return main(["train", "--model", "lstm", "--params", "5k", "--data", str(text_file), "--steps", "20",
                 "--batch-size", "4", "--seq-len", "16", "--eval-every", "10", "--out", str(out), "--quiet",
                 *extra])


def test_train_eval_sample_end_to_end(text_file, tmp_path, capsys, monkeypatch):
    out = tmp_path / "runs"
    assert _train(text_file, out, "--name", "tiny", "--config", "embedding_dim=8", "--lr", "0.01") == 0
    printed = capsys.readouterr().out
    assert re.search(r"done at step 20; valid_bpc \d+\.\d+; test_bpc \d+\.\d+", printed)
    c = ckpt.load(out / "tiny")
    assert c.model_config["embedding_dim"] == 8
    assert abs(c.card["params_effective"] - 5000) / 5000 < 0.05
    assert c.train_config["lr"] == 0.01 and c.train_config["steps"] == 20
    test_bpc = c.card["test_bpc"]

    names = sorted(f.name for f in (out / "tiny").iterdir())
    events = [n for n in names if n.startswith("events.out.tfevents.")]
    assert len(events) == 1  # the run's TensorBoard log, beside its CSV log
    assert [n for n in names if n not in events] == [
        "README.md", "config.json", "geomlab.json", "metrics.csv", "model.safetensors", "training_state.json",
        "training_state.safetensors", "vocab.json"]  # a Hugging Face checkpoint folder, resumable
    # every command takes the folder or a file in it
    assert main(["eval", str(out / "tiny" / "geomlab.json"), "--data", str(text_file), "--split", "test"]) == 0
    first = capsys.readouterr()
    printed = first.out
    got = float(re.search(r"test bpc: (\d+\.\d+)", printed).group(1))
    assert got == pytest.approx(test_bpc, abs=1e-4)
    assert f"{c.card['params_effective']:,} effective" in printed
    assert "longer than" not in first.err  # the trained window: no note
    # a window past the trained 16 says why its BPC may be higher (100,000 read 4.82 against 1.93 unexplained)
    assert main(["eval", str(out / "tiny"), "--data", str(text_file), "--seq-len", "40"]) == 0
    cap = capsys.readouterr()
    assert "window 40" in cap.out and cap.err == (
        "note: windows of 40 tokens are longer than the 16 this model was trained on: the BPC measures how it "
        "carries over to a longer context (better for a recurrent state, often worse for attention's "
        "positions), not the trained protocol\n")

    assert main(["sample", str(out / "tiny"), "--prompt", "ROMEO:", "--length", "30", "--seed", "1"]) == 0
    sample = capsys.readouterr().out
    assert sample.startswith("ROMEO:") and len(sample.rstrip("\n")) >= 6 + 25
    threads = []
    monkeypatch.setattr(torch, "set_num_threads", threads.append)
    assert main(["sample", str(out / "tiny" / "model.safetensors"), "--prompt", "ROMEO:", "--length", "30",
                 "--seed", "1", "--threads", "1"]) == 0
    assert capsys.readouterr().out == sample and threads == [1]  # seeded; --threads applied
    assert main(["trace", str(out / "tiny"), "--text", "ROMEO: hi", "--out", str(tmp_path / "tr")]) == 0
    assert "traced 9 positions" in capsys.readouterr().out and (tmp_path / "tr.npz").is_file()


def test_the_default_threads_leave_the_busy_cores_alone(monkeypatch):
    """Without --threads, torch's one thread per core is lowered to the cores the load average leaves free
    (at least 1); an idle machine keeps torch's choice; where no load average exists, nothing changes."""
    from geomlab import commands

    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    for load, want in ((0.2, 8), (2.6, 5), (7.5, 1), (30.0, 1)):
        monkeypatch.setattr(os, "getloadavg", lambda load=load: (load, load, load))
        assert commands.free_cores(8) == want, load
    assert commands.free_cores(4) == 1 and commands.free_cores(1) == 1  # never above torch's own choice

    def no_load():
        raise OSError("no load average here")

    monkeypatch.setattr(os, "getloadavg", no_load)
    assert commands.free_cores(8) == 8
    monkeypatch.setattr(os, "getloadavg", lambda: (7.0, 7.0, 7.0))
    calls = []
    monkeypatch.setattr(torch, "get_num_threads", lambda: 8)
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    commands.set_threads(None)
    commands.set_threads(3)
    assert calls == [1, 3]  # the default lowered; a given --threads taken as it is


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


def test_resume_refuses_fewer_steps_than_done_and_leaves_the_checkpoint(text_file, tmp_path, capsys):
    out = tmp_path / "runs"
    assert _train(text_file, out, "--name", "run") == 0
    capsys.readouterr()
    meta = out / "run" / "geomlab.json"
    before = meta.read_bytes()
    assert main(["train", "--resume", str(out / "run"), "--data", str(text_file), "--steps", "10", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "already at step 20" in err and "left unchanged" in err
    assert meta.read_bytes() == before and ckpt.load(out / "run").card["total_steps"] == 20
    # the same number of steps is allowed (a finished run is evaluated again, its total kept)
    assert main(["train", "--resume", str(out / "run"), "--data", str(text_file), "--quiet"]) == 0
    assert "resuming" in capsys.readouterr().out and ckpt.load(out / "run").card["total_steps"] == 20


@pytest.mark.parametrize("step", [-5, 2.5, "7", None])
def test_resume_refuses_a_checkpoint_whose_step_is_not_a_count(text_file, tmp_path, capsys, step):
    import hashlib
    import json

    out = tmp_path / "runs"
    assert _train(text_file, out, "--name", "run", "--steps", "10") == 0
    capsys.readouterr()
    state, meta = out / "run" / "training_state.json", out / "run" / "geomlab.json"
    text = json.dumps({**json.loads(state.read_text()), "step": step})  # a hand-edited (or damaged) checkpoint
    state.write_text(text)
    data = json.loads(meta.read_text())
    data["files"]["training_state.json"]["sha256"] = hashlib.sha256(text.encode()).hexdigest()  # edited consistently
    meta.write_text(json.dumps(data))
    before = state.read_bytes()
    assert main(["train", "--resume", str(out / "run"), "--data", str(text_file), "--steps", "20", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: run is corrupt: its training state says step") and err.count("\n") == 1
    assert state.read_bytes() == before


def test_word_problem_via_cli(tmp_path, capsys):
    out = tmp_path / "runs"
    code = main(["train", "--model", "lstm", "--config", "hidden=8", "--data", "word-problem:S3:8",
                 "--steps", "5", "--batch-size", "4", "--seq-len", "8", "--out", str(out), "--quiet"])
    assert code == 0
    assert "valid_accuracy" in capsys.readouterr().out
    (path,) = out.iterdir()
    assert main(["eval", str(path), "--split", "valid"]) == 0  # task rebuilt from the card
    assert "accuracy" in capsys.readouterr().out


def test_word_problem_trains_on_the_length_in_data(tmp_path, capsys):
    """word-problem:G:LEN without --seq-len trains on LEN (not the text default 128); word-problem:G trains on
    the default length 32; a different --seq-len trains on it with a note; the card says what was evaluated."""
    out = tmp_path / "runs"
    base = ["train", "--model", "lstm", "--config", "hidden=8", "--steps", "2", "--batch-size", "2",
            "--out", str(out), "--quiet"]
    assert main([*base, "--data", "word-problem:S3:6", "--name", "given"]) == 0
    assert capsys.readouterr().err == ""
    c = ckpt.load(out / "given")
    assert c.train_config["seq_len"] == 6 and c.card["seq_len"] == 6 and c.card["task"]["length"] == 6
    assert c.card["eval_protocol"] == {"length": 6, "n_eval": c.card["task"]["n_eval"], "splits": "full"}
    assert c.card["tokens_seen"] == 2 * 2 * 6
    assert main([*base, "--data", "word-problem:S3", "--name", "default"]) == 0
    c = ckpt.load(out / "default")
    assert c.train_config["seq_len"] == 32 and c.card["eval_protocol"]["length"] == 32
    assert main([*base, "--data", "word-problem:S3:6", "--seq-len", "4", "--name", "shorter"]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "training on sequences of length 4 (--seq-len) and evaluating on length 6" in err
    c = ckpt.load(out / "shorter")
    assert c.train_config["seq_len"] == 4 and c.card["eval_protocol"]["length"] == 6


def test_length_curriculum_via_cli(tmp_path, capsys):
    from geomlab.checkpoints import io as ckpt
    from geomlab.commands.train import parse_curriculum

    assert parse_curriculum("2:3, 4:2") == ((2, 3), (4, 2)) and parse_curriculum("") == ()
    with pytest.raises(ValueError, match="LEN:STEPS"):
        parse_curriculum("2-3")
    out = tmp_path / "runs"
    code = main(["train", "--model", "lstm", "--config", "hidden=8", "--data", "word-problem:S3:8", "--steps", "5",
                 "--batch-size", "4", "--seq-len", "8", "--length-curriculum", "2:3", "--out", str(out), "--quiet"])
    assert code == 0
    (path,) = out.iterdir()
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
    assert main(["train", "--model", "lstm", "--data", str(tmp_path)]) == 2  # a folder, not a file in it
    assert f"error: {str(tmp_path)!r} is a folder: give a text file in it" in capsys.readouterr().err
    assert main(["eval", str(tmp_path / "nothing")]) == 2
    assert f"no checkpoint {tmp_path / 'nothing'}: no folder nothing/" in capsys.readouterr().err
    assert main(["train", "--model", "lstm", "--data", str(text_file), "--params", "lots"]) == 2
    assert "parameter count" in capsys.readouterr().err
    assert main(["train", "--model", "cem", "--data", "gp", "--steps", "1", "--out", str(tmp_path)]) == 2
    assert "geomlab bench gp" in capsys.readouterr().err


def test_models_too_large_for_memory_and_bad_threads_are_one_line(text_file, tmp_path, capsys, monkeypatch):
    """A config too large for the machine is refused before anything is allocated (the parameter count named
    when it can be counted); --threads below 1 is refused before torch sees it; both exit 2, nothing written."""
    out = tmp_path / "runs"
    base = ["train", "--data", str(text_file), "--steps", "1", "--batch-size", "2", "--seq-len", "8", "--out",
            str(out), "--quiet"]
    for extra, want in ((["--model", "osmformer", "--config", "d=100000"], "osmformer with this config is too large "
                         "for this machine's memory (its tensors have more elements than can be counted)"),
                        (["--model", "lstm", "--config", "hidden=100000000"], "lstm with this config has "
                         "40,000,0"),
                        (["--model", "lstm", "--threads", "-2"], "--threads: must be an integer from 1 to"),
                        (["--model", "lstm", "--threads", "0"], "--threads: must be an integer from 1 to")):
        assert main([*base, *extra]) == 2, extra
        err = capsys.readouterr().err
        assert err.startswith("error: ") and want in err and err.count("\n") == 1, err
    for cmd in (["eval"], ["sample"], ["trace", "--text", "ab", "--json", str(tmp_path / "t.json")]):
        # every command that computes takes --threads, refused the same way before the checkpoint is read
        assert main([cmd[0], str(tmp_path / "none"), *cmd[1:], "--threads", "0"]) == 2, cmd
        assert capsys.readouterr().err.startswith("error: --threads: must be an integer from 1 to"), cmd
    assert not out.exists()
    # the check compares about 16 bytes per parameter (weights, gradients, AdamW moments) with the memory
    from geomlab.training import runs

    monkeypatch.setattr(runs, "machine_memory", lambda: 1000)
    assert main([*base, "--model", "lstm", "--config", "hidden=8"]) == 2
    err = capsys.readouterr().err
    assert re.match(r"error: lstm with this config has [\d,]+ parameters and is too large for this machine's "
                    r"memory: training needs about", err) and err.count("\n") == 1
    assert not out.exists()


def test_out_of_memory_while_training_is_one_line(text_file, tmp_path, capsys, monkeypatch):
    from geomlab.data.tasks import LMTask

    def huge(self, batch_size, seq_len, generator):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate "
                           "memory: you tried to allocate 8000000000000 bytes.")

    monkeypatch.setattr(LMTask, "sample_batch", huge)
    assert _train(text_file, tmp_path / "runs") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: out of memory (") and "smaller model, batch or sequence length" in err
    assert err.count("\n") == 1


def test_impossible_values_are_refused_in_one_line(text_file, tmp_path, capsys):
    """eval: --max-tokens, --seq-len and --stride below 1 (a negative count once sliced from the end, 0 fell back
    to the default or blamed the data); train: an empty --name, a warm-up longer than the run, lr <= 0."""
    out = tmp_path / "runs"
    assert _train(text_file, out, "--name", "tiny") == 0
    capsys.readouterr()
    for extra, want in ((["--max-tokens", "-4"], "--max-tokens: must be an integer from 1 to 2**50, got -4"),
                        (["--max-tokens", "0"], "--max-tokens: must be an integer from 1 to 2**50, got 0"),
                        (["--seq-len", "0"], "--seq-len: must be an integer from 1 to 1,048,576, got 0"),
                        (["--stride", "0"], "--stride: must be an integer from 1 to 1,048,576, got 0")):
        assert main(["eval", str(out / "tiny"), "--data", str(text_file), *extra]) == 2, extra
        err = capsys.readouterr().err
        assert err.startswith(f"error: {want}") and err.count("\n") == 1, err
    for extra, want in ((["--name", ""], "--name must be a plain file name (not empty"),
                        (["--name", "x", "--warmup", "10", "--steps", "4"], "warmup of 10 steps is longer than "
                         "the run (4 steps)"),
                        (["--name", "x", "--warmup", "nan"], "--warmup: must be a finite number from 0"),
                        (["--name", "x", "--lr", "0"], "--lr: must be a finite number above 0"),
                        (["--name", "x", "--lr=-1e-3"], "--lr: must be a finite number above 0"),
                        (["--name", "x", "--lr", "-1e-3"], "--lr: must be a finite number above 0"),
                        (["--name", "x", "--params", "-3k"], "--params: not a parameter count: '-3k'"),
                        (["--name", "x", "--warmup", "-.5"], "--warmup: must be a finite number from 0")):
        assert _train(text_file, out, *extra) == 2, extra
        err = capsys.readouterr().err
        assert err.startswith("error: ") and want in err and err.count("\n") == 1, err
    assert sorted(p.name for p in out.iterdir()) == ["tiny"]
    from geomlab.data.registry import make_task

    with pytest.raises(ValueError, match="max_tokens must be >= 1"):
        make_task(str(text_file)).evaluate(ckpt.load(out / "tiny").model, "test", seq_len=16, max_tokens=-4)


def test_a_run_that_did_not_train_says_so(text_file, tmp_path, capsys):
    """A huge learning rate is the user's to try, but a final valid BPC far above the unigram is a warning."""
    assert _train(text_file, tmp_path / "runs", "--lr", "1e6") == 0
    err = capsys.readouterr().err
    assert "warning: the final valid BPC" in err and "far above the unigram" in err and "1e+06" in err
    assert _train(text_file, tmp_path / "runs", "--lr", "1e-2") == 0
    assert "warning" not in capsys.readouterr().err


def test_eval_of_weights_that_give_no_finite_score_fails(text_file, tmp_path, capsys):
    """Weights that still read, finite but huge (saved so, their sum recorded), give no finite score: eval
    prints its line and then fails with a one-line error, where it printed 'bpc: inf' and exited 0."""
    import hashlib
    import json

    from safetensors import safe_open
    from safetensors.torch import save_file

    assert _train(text_file, tmp_path / "runs", "--name", "w") == 0
    weights = tmp_path / "runs" / "w" / "model.safetensors"
    with safe_open(str(weights), framework="pt") as f:
        meta, tensors = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}
    tensors = {k: v.fill_(3e38) if v.is_floating_point() else v for k, v in tensors.items()}  # finite, huge
    save_file(tensors, str(weights), metadata=meta)
    manifest = weights.parent / "geomlab.json"  # the sum of these weights, as a save of them records it
    m = json.loads(manifest.read_text())
    m["files"]["model.safetensors"]["sha256"] = hashlib.sha256(weights.read_bytes()).hexdigest()
    manifest.write_text(json.dumps(m))
    capsys.readouterr()
    assert main(["eval", str(weights.parent), "--data", str(text_file)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: nll and bpc are not finite: this checkpoint's model gives NaN or infinite")


def test_a_text_that_repeats_itself_gets_a_note(text_file, tmp_path, capsys):
    """The fixture text is one passage three times, so its validation split repeats its training split."""
    assert _train(text_file, tmp_path / "runs") == 0
    err = capsys.readouterr().err
    assert "note: 100% of the validation text's 32-character stretches also occur in the training text" in err


def test_list_models(capsys):
    assert main(["train", "--list-models"]) == 0
    assert "lstm" in capsys.readouterr().out.split()
    assert main(["train", "--list-models", "--model", "lstm"]) == 0  # a kind's config keys and defaults
    assert "dropout = 0.0" in capsys.readouterr().out.splitlines()
    assert main(["train", "--list-models", "--model", "nope"]) == 2


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


def test_report_and_bench_are_two_commands(capsys):
    """`geomlab --help` lists `report` (the reproduction report) and `bench` (micro-benchmarks); `geomlab bench`
    alone lists the benchmarks (status 2), an unknown name is one line."""
    from geomlab.bench import available

    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert re.search(r"^\s+report\s+train and evaluate every model", out, re.M)
    assert re.search(r"^\s+bench\s+run a micro-benchmark", out, re.M)
    assert main(["bench"]) == 2
    out = capsys.readouterr().out
    assert ", ".join(available()) in out and "geomlab report" in out
    assert {"browser", "device", "figures", "gp", "grassmann", "groups", "load", "osm", "train", "views"} <= set(
        available())
    assert main(["bench", "no-such-bench"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown benchmark 'no-such-bench'") and err.count("\n") == 1


def test_train_never_overwrites_an_earlier_checkpoint(tmp_path, capsys):
    """The default name includes the group, a repeated default name gets -2, -3 ..., and an explicit
    --name that exists is refused (use --resume)."""
    out = tmp_path / "runs"
    base = ["train", "--model", "osm-rnn", "--config", "d=3", "--data", "word-problem:S3:4", "--steps", "1",
            "--batch-size", "2", "--seq-len", "4", "--out", str(out), "--quiet"]
    assert main(base + ["--group", "O"]) == 0
    assert main(base + ["--group", "T"]) == 0
    assert main(base + ["--group", "O"]) == 0
    names = sorted(p.parent.name for p in out.glob("*/geomlab.json"))
    assert len(names) == 3 and any("-O-" in n for n in names) and any("-T-" in n for n in names)
    assert any(n.endswith("-2") for n in names)
    capsys.readouterr()
    taken = names[0]
    assert main(base + ["--group", "O", "--name", taken]) == 2
    assert "already exists" in capsys.readouterr().err
    assert len(list(out.iterdir())) == 3
    assert main(base + ["--name", "../escaped"]) == 2
    assert "plain file name" in capsys.readouterr().err and not (tmp_path / "escaped").exists()
    # a folder a diverged run left with its logs only: no --resume offered, it says what to do
    (out / "early").mkdir()
    (out / "early" / "metrics.csv").write_text("step,loss\n")
    assert main(base + ["--name", "early"]) == 2
    err = capsys.readouterr().err
    assert "holds no checkpoint" in err and "delete that folder" in err and "--resume" not in err, err


def test_trace_and_sample_errors(tmp_path, capsys, monkeypatch):
    """trace refuses a cursor outside the text; sample refuses a word-problem model (it predicts running
    products, not next inputs)."""
    s5 = "assets/checkpoints/osm-rnn-o-s5"
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("GEOMLAB_BUNDLED_DIR", raising=False)  # the shipped checkpoints (app tests repoint it)
    assert main(["trace", s5, "--text", "01234 10234", "--cursor", "5", "--out", str(tmp_path / "t"),
                 "--html", str(tmp_path / "views")]) == 2
    assert "outside the traced text (positions 0 to 1)" in capsys.readouterr().err
    assert not (tmp_path / "views").exists() and not (tmp_path / "t.npz").exists()
    assert main(["sample", s5, "--prompt", "01234", "--length", "3"]) == 2
    assert "is a word-problem model (group S5)" in capsys.readouterr().err
    for length in ("-1", "10000000"):  # a typo's ten million steps ran for hours without a word
        assert main(["sample", "assets/checkpoints/lstm-tinyshakespeare", "--length", length]) == 2
        assert "--length: must be an integer from 0 to 10,000" in capsys.readouterr().err
    # each of these once ended in a traceback (nan, inf, 1e308, -2, a huge seed) or was dropped silently (0)
    for flag, value, want in (("--temperature", "nan", "--temperature: must be a finite number >= 0"),
                              ("--temperature", "inf", "--temperature: must be a finite number >= 0"),
                              ("--temperature", "-1", "--temperature: must be a finite number >= 0"),
                              ("--top-k", "-2", "--top-k: must be an integer >= 1, got -2"),
                              ("--top-k", "0", "--top-k: must be"),
                              ("--context", "0", "--context: must be an integer from 1"),
                              ("--seed", str(2 ** 70), "--seed: must be an integer from 0 to 2**63 - 1")):
        assert main(["sample", "lstm-tinyshakespeare", flag, value, "--length", "3"]) == 2, (flag, value)
        err = capsys.readouterr().err
        assert err.startswith(f"error: {want}") and err.count("\n") == 1, err
    assert main(["sample", "lstm-tinyshakespeare", "--temperature", "1e308", "--top-k", "3", "--length", "5"]) == 0
    assert len(capsys.readouterr().out) == len("\n") + 5 + 1  # a huge temperature samples (uniformly)
    # a k past the vocabulary keeps every token (no "2**31 - 1" bound to read)
    assert main(["sample", "lstm-tinyshakespeare", "--top-k", str(2 ** 40), "--length", "5"]) == 0
    assert len(capsys.readouterr().out) == len("\n") + 5 + 1
    # a prompt character outside the vocabulary is noted on stderr (stdout holds only the sample, for pipes)
    assert main(["sample", "lstm-tinyshakespeare", "--prompt", "a\u00a7", "--length", "4", "--top-k", "1"]) == 0
    out, err = capsys.readouterr()
    assert err == ("note: 1 character not in this checkpoint's vocabulary ('\u00a7' (U+00A7)) read as the unknown "
                   "token \ufffd\n"), err  # trace's note, word for word
    assert "note" not in out and len(out) == 2 + 4 + 1, out


def test_bundled_checkpoint_by_name_from_any_folder(tmp_path, capsys, monkeypatch):
    """NAME and bundled/NAME (the app's spelling) name a bundled checkpoint in eval, sample and trace from a
    folder that has none; a local file or folder of that name wins."""
    monkeypatch.delenv("GEOMLAB_BUNDLED_DIR", raising=False)  # the shipped checkpoints (app tests repoint it)
    monkeypatch.chdir(tmp_path)
    outs = []
    for ref in ("osm-rnn-o-s5", "bundled/osm-rnn-o-s5", "bundled/osm-rnn-o-s5.json"):
        assert main(["eval", ref]) == 0
        outs.append(capsys.readouterr().out)
    assert "accuracy" in outs[0] and outs[0] == outs[1] == outs[2]
    assert main(["trace", "osmformer-o-linear-tinyshakespeare", "--text", "To be", "--out", "t.npz"]) == 0
    assert "traced 5 positions of 'osmformer'" in capsys.readouterr().out and (tmp_path / "t.npz").is_file()
    assert main(["sample", "bundled/lstm-tinyshakespeare", "--prompt", "ROMEO:", "--length", "5"]) == 0
    assert capsys.readouterr().out.startswith("ROMEO:")
    (tmp_path / "osm-rnn-o-s5").mkdir()  # a local folder of that name (not a checkpoint) wins
    assert main(["eval", "osm-rnn-o-s5"]) == 2
    assert "is a folder but not a checkpoint" in capsys.readouterr().err
    assert main(["eval", "elsewhere/osm-rnn-o-s5"]) == 2  # only a bare name or bundled/NAME is looked up
    assert "no checkpoint elsewhere/osm-rnn-o-s5" in capsys.readouterr().err
    # resuming a bundled checkpoint is refused: it has no training state and lives in the package
    shutil.rmtree(tmp_path / "osm-rnn-o-s5")
    assert main(["train", "--resume", "bundled/osm-rnn-o-s5"]) == 2
    assert "osm-rnn-o-s5 is a bundled checkpoint, which is not accepted here" in capsys.readouterr().err
    assert main(["train", "--resume", "osm-rnn-o-s5-nope"]) == 2
    err = capsys.readouterr().err
    assert "no checkpoint osm-rnn-o-s5-nope" in err and "bundled" not in err
    # the installed command, started from another folder (a fresh process, as a user runs it)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-m", "geomlab", "sample", "lstm-tinyshakespeare", "--prompt", "To",
                          "--length", "3"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.startswith("To"), res.stderr


def test_non_checkpoints_say_what_was_expected(tmp_path, capsys, monkeypatch):
    """A text file, a zip or a name that is nothing: one line saying what a checkpoint argument may be."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_text.txt").write_text("hello", encoding="utf-8")
    (tmp_path / "x.zip").write_bytes(b"PK\x05\x06" + bytes(18))
    cases = {"my_text.txt": "my_text.txt is not a checkpoint: expected a checkpoint folder",
             "x.zip": "x.zip is a zip file: the command line takes the unpacked checkpoint",
             "y.zip": "no file y.zip; and a zip would not do: the command line takes the unpacked",
             "nothing": "no checkpoint nothing: no folder nothing/ and no nothing.json in this folder, and no "
                        "bundled checkpoint of that name; expected"}
    for arg, want in cases.items():
        for command in (["trace", arg, "--text", "hi", "--out", "t.npz"], ["eval", arg], ["sample", arg]):
            assert main(command) == 2
            err = capsys.readouterr().err
            assert err.startswith("error: ") and want in err and err.count("\n") == 1, (command, err)
    assert not (tmp_path / "t.npz").exists()


def test_config_value_of_the_wrong_type_names_the_key(text_file, tmp_path, capsys):
    """A --config value of the wrong type is one line naming the kind, the key, the type and the value (the
    typed model config's check), also with --params, where the budget search would otherwise replace the
    value or report a budget miss."""
    from geomlab.models import model_class

    out = tmp_path / "runs"
    for item, want in (("hidden=abc", "lstm: hidden must be an integer, got 'abc'"),
                       ("hidden=1.5", "lstm: hidden must be an integer, got 1.5"),
                       ("dropout=high", "lstm: dropout must be a number, got 'high'")):
        for params in ([], ["--params", "5k"]):
            assert main(["train", "--model", "lstm", "--config", item, "--data", str(text_file), "--steps", "1",
                         "--out", str(out), *params]) == 2
            assert capsys.readouterr().err == f"error: {want}\n"
    assert not out.exists()
    model_class("osm-rnn").config_class.check_types(
        {"tau": 5, "step": 0, "token_init_std": 1, "rnn_input": "pull+token", "d": 5, "kind": "osm-rnn"})
    model_class("osmformer").config_class.check_types({"learn_alibi": False, "block": 2, "no_such_key": 1})
    with pytest.raises(ValueError, match="osmformer: learn_alibi must be true or false, got 'maybe'"):
        model_class("osmformer").config_class.check_types({"learn_alibi": "maybe"})


def test_eval_finds_the_runs_text_file_in_the_working_folder(text_file, tmp_path, capsys, monkeypatch):
    """A run trained on a text file evaluates without --data where that file is (saying which file); elsewhere
    it asks for --data."""
    assert _train(text_file, tmp_path / "runs", "--name", "r") == 0
    want = ckpt.load(tmp_path / "runs" / "r").card["test_bpc"]
    capsys.readouterr()
    monkeypatch.chdir(tmp_path)
    assert main(["eval", "runs/r"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("evaluating on small.txt (the run's text file")
    assert float(re.search(r"test bpc: (\d+\.\d+)", printed).group(1)) == pytest.approx(want, abs=1e-4)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert main(["eval", "../runs/r"]) == 2
    assert "not a registered corpus; pass the text file with --data" in capsys.readouterr().err


def test_eval_counts_the_unknown_tokens_of_what_it_scores(text_file, tmp_path, capsys):
    """Characters the vocabulary lacks are counted over the whole split, or with --max-tokens over the tokens
    scored (a split whose unknown characters all come after them has none to report)."""
    assert _train(text_file, tmp_path / "runs", "--name", "r") == 0
    text = text_file.read_text(encoding="utf-8")
    n = len(text)
    other = tmp_path / "other.txt"  # its test split (the last 5%) ends in 20 characters the model never saw
    other.write_text(text[:n - 20] + "é" * 20, encoding="utf-8")
    capsys.readouterr()
    assert main(["eval", str(tmp_path / "runs" / "r"), "--data", str(other)]) == 0
    assert ("note: 1 character not in this checkpoint's vocabulary ('\u00e9' (U+00E9)) scored as the unknown "
            "token \ufffd (20 tokens of the test split)\n") in capsys.readouterr().err  # trace's note's shape
    assert main(["eval", str(tmp_path / "runs" / "r"), "--data", str(other), "--max-tokens", "16"]) == 0
    assert "not in the checkpoint's vocabulary" not in capsys.readouterr().err


def test_trace_views_for_a_kind_without_views(tmp_path, capsys, monkeypatch):
    """--html/--png on a baseline without views: one line naming the kinds that have views, exit 2, nothing
    written; on a kind with views the printed folder has no doubled slash."""
    monkeypatch.delenv("GEOMLAB_BUNDLED_DIR", raising=False)  # the shipped checkpoints (app tests repoint it)
    monkeypatch.chdir(tmp_path)
    assert main(["trace", "lstm-tinyshakespeare", "--text", "To be", "--out", "t.npz", "--html", "views/",
                 "--png", "views/"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: lstm has no geometric views") and "osm-rnn" in err and "osmformer" in err
    assert err.count("\n") == 1 and list(tmp_path.iterdir()) == []
    assert main(["trace", "osm-rnn-o-s5", "--text", "01234 10234", "--out", "t.npz", "--html", "views/"]) == 0
    printed = capsys.readouterr().out
    assert f"and index.html to views{os.sep} (" in printed and "//" not in printed
    assert (tmp_path / "views" / "index.html").is_file()
    # --out is needed only for the trace file itself: --html alone writes the figures and no .npz
    assert main(["trace", "osm-rnn-o-s5", "--text", "01234 10234", "--html", "only-views/"]) == 0
    assert (tmp_path / "only-views" / "index.html").is_file() and not list(tmp_path.glob("*.npz"))[1:]
    assert sorted(p.name for p in tmp_path.glob("*.npz")) == ["t.npz"]
    capsys.readouterr()
    assert main(["trace", "osm-rnn-o-s5", "--text", "01234 10234"]) == 2  # no output at all: one line
    err = capsys.readouterr().err
    assert err.startswith("error: nothing to write: give --out FILE.npz") and err.count("\n") == 1
    # a mistyped checkpoint is named first (it used to be "nothing to write", then the name on the next try)
    assert main(["trace", "osm-rnn-o-s55", "--text", "01234 10234"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no checkpoint osm-rnn-o-s55:") and err.count("\n") == 1
    (tmp_path / "not-a-checkpoint").mkdir()  # a folder that is no checkpoint: said first too
    assert main(["trace", "not-a-checkpoint", "--text", "01234 10234"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: not-a-checkpoint is a folder but not a checkpoint") and err.count("\n") == 1
    (tmp_path / "not-a-checkpoint").rmdir()
    # --out t.json wrote "t.json.npz"; JSON is --json's, and nothing is written
    for name in ("t.json", "T.JSON"):
        assert main(["trace", "osm-rnn-o-s5", "--text", "01234 10234", "--out", name]) == 2
        err = capsys.readouterr().err
        assert err == f"error: --out {name}: --out writes the .npz trace; for strict JSON give --json {name} " \
                      "(nothing was written)\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["t.npz"]


def test_trace_figures_share_the_apps_opening_cursor(tmp_path, capsys, monkeypatch):
    """Without --cursor every --html/--png figure highlights one position, the one the app opens on
    (geomlab.trace.predictions.default_cursor), not each figure's own default (first or last); --cursor wins."""
    from geomlab.trace import predictions
    from geomlab.teach import views

    monkeypatch.delenv("GEOMLAB_BUNDLED_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    seen, traces = [], []
    build = views.build_view

    def spy(tr, slug, controls=None, cursor=None, **kw):
        seen.append(cursor)
        traces.append(tr)
        return build(tr, slug, controls, cursor, **kw)

    monkeypatch.setattr(views, "build_view", spy)
    text = "01234 10234 21034 30124 40123 01243"
    assert main(["trace", "osm-rnn-o-s5", "--text", text, "--html", "v/"]) == 0
    want = predictions.default_cursor(traces[0])
    assert seen and set(seen) == {want} and 0 < want < traces[0].n_positions - 1
    seen.clear()
    assert main(["trace", "osm-rnn-o-s5", "--text", text, "--html", "w/", "--cursor", "1"]) == 0
    assert set(seen) == {1}


def test_trace_of_unknown_symbols_lists_what_the_checkpoint_reads(tmp_path, capsys, monkeypatch):
    """The CLI names every unknown symbol and the symbols a word-problem checkpoint reads, as the app does."""
    monkeypatch.delenv("GEOMLAB_BUNDLED_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["trace", "osm-rnn-o-s5", "--text", "01234 hello 99999", "--out", "t.npz"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --text: Unknown symbols for this checkpoint: '99999', 'hello'. It reads "
                          "space-separated symbols from: ") and "01234" in err and err.count("\n") == 1, err
    assert not list(tmp_path.iterdir())
    assert main(["zoo", "--list"]) == 0
    assert "corpus word-problem S5, split: generated (seeded)" in capsys.readouterr().out


def test_zoo_list_says_how_to_refer_to_each(capsys, monkeypatch):
    monkeypatch.delenv("GEOMLAB_BUNDLED_DIR", raising=False)  # the shipped checkpoints (app tests repoint it)
    assert main(["zoo", "--list"]) == 0
    printed = capsys.readouterr().out
    names = re.findall(r"^(\S+): ", printed, flags=re.M)
    assert "lstm-tinyshakespeare" in names
    for name in names:
        assert f"refer to it as {name} (or bundled/{name}, as in the app) from any folder" in printed
    # --only lists only those entries (it was ignored: every entry listed, an unknown name accepted)
    assert main(["zoo", "--list", "--only", "lstm-tinyshakespeare,osm-rnn-o-s5"]) == 0
    assert re.findall(r"^(\S+): ", capsys.readouterr().out, flags=re.M) == ["lstm-tinyshakespeare", "osm-rnn-o-s5"]
    assert main(["zoo", "--list", "--only", "bogus"]) == 2
    err = capsys.readouterr().err  # names as typed, not a Python list ("['bogus']")
    assert err.startswith("error: unknown zoo entry bogus; known: ") and "lstm-tinyshakespeare, " in err, err


def test_zoo_convert_turns_flat_pairs_into_folders_with_equal_logits(tmp_path, capsys):
    from geomlab.data import Vocab
    from geomlab.models import build_model

    vocab = Vocab.from_text("abcdefgh ")
    torch.manual_seed(0)
    model = build_model({"kind": "transformer", "vocab_size": vocab.size, "d_model": 8, "n_layers": 1,
                         "n_heads": 2}).eval()
    ckpt.save(tmp_path / "zoo" / "t", model, vocab, {"corpus": "tiny", "test_bpc": 3.0}, layout="flat")
    assert main(["zoo", "--convert", "--dir", str(tmp_path / "zoo")]) == 0
    assert capsys.readouterr().out.endswith("converted 1 checkpoint(s) in " + str(tmp_path / "zoo") + "\n")
    assert [p.name for p in (tmp_path / "zoo").iterdir()] == ["t"]  # the pair removed
    c = ckpt.load(tmp_path / "zoo" / "t")
    x = torch.randint(0, vocab.size, (2, 7))
    assert c.layout == "folder" and c.meta["format_version"] == 3 and torch.equal(c.model(x), model(x))
    assert main(["zoo", "--convert", "--dir", str(tmp_path / "zoo")]) == 0  # nothing left: a no-op
    assert "converted 0 checkpoint(s)" in capsys.readouterr().out


def test_eval_refuses_another_task(capsys, monkeypatch, text_file):
    """A word-problem model scored on another group or on text, or a language model on a word problem, is
    refused (the ids would be reused and the number would mean nothing); its own group keeps the card's
    evaluation sequences."""
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
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
    for extra in (["--seq-len", "8"], ["--stride", "2"], ["--max-tokens", "10"]):  # LM options, not ignored silently
        assert main(["eval", s5, *extra]) == 2, extra
        assert f"{extra[0]} applies to language models" in capsys.readouterr().err


def test_trace_writes_the_json_window_around_the_cursor(tmp_path, monkeypatch):
    """trace --json writes the strict JSON download of the app: at most 256 positions around --cursor."""
    import json as _json

    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    text = "ROMEO: But soft, what light through yonder window breaks? " * 6
    out = tmp_path / "t.json"
    assert main(["trace", "assets/checkpoints/transformer-alibi-tinyshakespeare", "--text", text,
                 "--cursor", "300", "--out", str(tmp_path / "t"), "--json", str(out)]) == 0
    doc = _json.loads(out.read_text(encoding="utf-8"))
    assert doc["window"] == [len(text) - 256, len(text)] and len(doc["labels"]) == 256
    assert len(doc["arrays"]["attention"][0]) == 256


def test_other_task_prefixes_are_an_ordinary_data_error(tmp_path, capsys):
    """--data takes the task syntax only: ``wp:S3`` is no word problem but a file that is not there, refused
    in one line (exit status 2) before anything is trained."""
    out = tmp_path / "runs"
    base = ["--model", "lstm", "--config", "hidden=8", "--steps", "2", "--batch-size", "2", "--seq-len", "4",
            "--out", str(out), "--quiet"]
    assert main(["train", "--data", "wp:S3", "--name", "old", *base]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error: 'wp:S3' is neither a known corpus" in err and "text file" in err
    assert not (out / "old").exists()


def test_a_value_starting_with_a_dash_and_digit_is_joined_to_its_option():
    from geomlab.commands.cli import attach_dash_values

    assert attach_dash_values(["train", "--params", "-3k", "--lr", "-.5", "-x", "-3"]) == [
        "train", "--params=-3k", "--lr=-.5", "-x", "-3"]  # a short option's value is argparse's as before
    assert attach_dash_values(["--a=1", "-2", "--", "--b", "-3k"]) == ["--a=1", "-2", "--", "--b", "-3k"]
    assert attach_dash_values(["--name", "-model"]) == ["--name", "-model"]  # not a number: left to argparse


def test_an_unknown_option_names_the_one_meant(capsys):
    """``--kind`` (the cards' "model kind") points to ``--model``; a misspelt option to the nearest; an option
    like no other gets argparse's message alone."""
    for argv, hint in ((["train", "--kind", "lstm"], " (did you mean --model?)"),
                       (["train", "--stpes", "3"], " (did you mean --steps?)"),
                       (["train", "--bogus", "1"], "")):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert last.endswith(f"unrecognized arguments: {' '.join(argv[1:])}{hint}"), last
