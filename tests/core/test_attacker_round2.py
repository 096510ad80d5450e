"""The second attacker round on the bounded-input fixes, one test per find: the report command's input files
and ``train --config`` values went around the bounded JSON reader (RecursionError tracebacks, TypeError on a
file of another shape), and a sweep journal of millions of small garbage lines took minutes before its
one-line refusal."""

from __future__ import annotations

import json
import time

import pytest

from geomlab.commands.cli import main

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("argv,content,want", [
    (["report", "--from-json"], DEEP, "results file in.json: cannot read it (in.json nests arrays/objects 100,000"),
    (["report", "--from-json"], "[1, 2, 3]", "in.json: not a `geomlab report` results file (TypeError"),
    (["report", "--from-json"], '{"a": 1}', "in.json: not a `geomlab report` results file (KeyError"),
    (["report", "--converged", "--collect", "--restore"], DEEP, "--restore in.json: cannot read it"),
    (["report", "--converged", "--collect", "--restore"], '{"kind": "converged", "comparisons": 5}',
     "--restore in.json: not a converged report's results.json (TypeError"),
    (["report", "--converged", "--collect", "--speed"], DEEP, "--speed in.json: cannot read it"),
    (["report", "--converged", "--collect", "--speed"], "[1]", "--speed in.json: not a `geomlab bench train"),
], ids=lambda v: v[1] if isinstance(v, list) else str(v)[:30])
def test_report_inputs_are_one_line(tmp_path, monkeypatch, capsys, argv, content, want):
    """Each gave a traceback (RecursionError, TypeError, KeyError) with exit status 1."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.json").write_text(content)
    (tmp_path / "store").mkdir()
    code = main([*argv, "in.json", "--out", str(tmp_path / "out" / "r.md"), "--no-png", "--store",
                 str(tmp_path / "store")][: None if "--converged" in argv else -2])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"error: {want}") and err.count("\n") == 1 and len(err) < 400, err[:500]
    assert list((tmp_path / "store").iterdir()) == [] and not (tmp_path / "out" / "r.md").exists()


def test_a_train_config_value_nested_past_the_limit_is_one_line(capsys):
    """``--config x=[[[...`` (5,000 levels) raised RecursionError in the middle of reading the options."""
    from geomlab.commands.train import parse_config

    with pytest.raises(ValueError, match=r"--config x: the value nests 5,000 levels"):
        parse_config(["x=" + "[" * 5000 + "]" * 5000])
    assert parse_config(["x=" + "[" * 100 + "]" * 100, "tied=true", "group=SO"]) == \
        {"x": json.loads("[" * 100 + "]" * 100), "tied": True, "group": "SO"}


def test_a_journal_of_millions_of_garbage_lines_is_refused_at_once(tmp_path):
    """8 MiB of ``{}`` lines took 151 s (each line through the bracket scan) and 687 MiB before Optuna's
    KeyError was turned into one line; the first line that is not a record now stops the check."""
    from geomlab.training.sweep_space import SweepError
    from geomlab.training.sweep_study import check_journal, open_storage

    journal = tmp_path / "study.log"
    journal.write_bytes(b"{}\n" * (8 * 2**20 // 3))
    start = time.perf_counter()
    with pytest.raises(SweepError, match=r"study\.log is not an Optuna journal: line 1 is not a record"):
        open_storage(journal)
    assert time.perf_counter() - start < 5
    good = b'{"op_code":0,"worker_id":"w","study_name":"x","directions":[1]}\n'
    journal.write_bytes(good * 200_000)  # 13 MB of real records: checked line by line, quickly
    start = time.perf_counter()
    check_journal(journal)
    assert time.perf_counter() - start < 10
    journal.write_bytes(good + b'{"op_code": true}\n')
    with pytest.raises(SweepError, match="line 2 is not a record"):
        check_journal(journal)
    journal.write_bytes(good + b"[" * 200 + b"]" * 200 + b"\n")
    with pytest.raises(SweepError, match="200 levels deep"):
        check_journal(journal)


@pytest.mark.parametrize("kind", ["folder", "device", "dangling link"])
def test_a_description_that_is_not_a_regular_file_is_named_so(tmp_path, capsys, kind):
    """A folder named geomlab.json, or a link to /dev/zero, was reported as "geomlab.json is missing"."""
    import os
    import shutil

    import torch

    from geomlab.checkpoints import io as ckpt
    from geomlab.data import Vocab
    from geomlab.models import build_model

    torch.manual_seed(0)
    vocab = Vocab.from_text("hello world")
    folder = ckpt.save(tmp_path / "run", build_model({"kind": "lstm", "vocab_size": vocab.size, "hidden": 8}),
                       vocab, {"corpus": "t"}, layout="folder")
    meta = folder / "geomlab.json"
    meta.unlink()
    if kind == "folder":
        meta.mkdir()
    else:
        os.symlink("/dev/zero" if kind == "device" else str(tmp_path / "nothing"), meta)
    assert main(["eval", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "run/geomlab.json is not a regular file" in err and err.count("\n") == 1, err
    shutil.rmtree(folder)
