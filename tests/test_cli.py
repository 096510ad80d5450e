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

    assert sorted(f.name for f in (out / "tiny").iterdir()) == ["README.md", "config.json", "geomlab.json",
                                                               "model.safetensors"]  # a checkpoint folder
    # every command takes the folder or a file in it
    assert main(["eval", str(out / "tiny" / "geomlab.json"), "--data", str(text_file), "--split", "test"]) == 0
    printed = capsys.readouterr().out
    got = float(re.search(r"test bpc: (\d+\.\d+)", printed).group(1))
    assert got == pytest.approx(test_bpc, abs=1e-4)
    assert f"{c.card['params_effective']:,} effective" in printed

    assert main(["sample", str(out / "tiny"), "--prompt", "ROMEO:", "--length", "30", "--seed", "1"]) == 0
    sample = capsys.readouterr().out
    assert sample.startswith("ROMEO:") and len(sample.rstrip("\n")) >= 6 + 25
    assert main(["sample", str(out / "tiny" / "model.safetensors"), "--prompt", "ROMEO:", "--length", "30",
                 "--seed", "1"]) == 0
    assert capsys.readouterr().out == sample  # seeded
    assert main(["trace", str(out / "tiny"), "--text", "ROMEO: hi", "--out", str(tmp_path / "tr")]) == 0
    assert "traced 9 positions" in capsys.readouterr().out and (tmp_path / "tr.npz").is_file()


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
    (path,) = out.iterdir()
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


def test_trace_writes_the_json_window_around_the_cursor(tmp_path, monkeypatch):
    """trace --json writes the strict JSON download of the app: at most 256 positions around --cursor."""
    import json as _json

    monkeypatch.chdir(Path(__file__).resolve().parent.parent)
    text = "ROMEO: But soft, what light through yonder window breaks? " * 6
    out = tmp_path / "t.json"
    assert main(["trace", "assets/checkpoints/transformer-alibi-tinyshakespeare", "--text", text,
                 "--cursor", "300", "--out", str(tmp_path / "t"), "--json", str(out)]) == 0
    doc = _json.loads(out.read_text(encoding="utf-8"))
    assert doc["window"] == [len(text) - 256, len(text)] and len(doc["labels"]) == 256
    assert len(doc["arrays"]["attention"][0]) == 256
