"""`geomlab eval | trace | sample` read a checkpoint folder copied without its training state (the five files
the README lists); `train --resume` refuses it in one line saying that training cannot resume from it."""

from __future__ import annotations

import shutil

from geomlab.commands.cli import main

SHARED = ("config.json", "model.safetensors", "vocab.json", "geomlab.json", "README.md")


def test_a_weights_only_folder_reads_and_refuses_to_resume(text_file, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "runs"
    assert main(["train", "--model", "lstm", "--params", "5k", "--data", str(text_file), "--steps", "4",
                 "--batch-size", "4", "--seq-len", "16", "--out", str(out), "--name", "tiny", "--quiet",
                 "--threads", "1"]) == 0
    (tmp_path / "nostate").mkdir()
    for name in SHARED:
        shutil.copy(out / "tiny" / name, tmp_path / "nostate" / name)
    capsys.readouterr()
    assert main(["eval", "nostate", "--data", str(text_file), "--threads", "1"]) == 0
    assert "test bpc:" in capsys.readouterr().out
    assert main(["trace", "nostate", "--text", "The quick", "--out", "t.npz", "--threads", "1"]) == 0
    assert "traced 9 positions" in capsys.readouterr().out and (tmp_path / "t.npz").is_file()
    assert main(["sample", "nostate", "--prompt", "The", "--length", "4", "--threads", "1"]) == 0
    assert capsys.readouterr().out.startswith("The")
    before = sorted(p.name for p in (tmp_path / "nostate").iterdir())
    assert main(["train", "--resume", "nostate", "--data", str(text_file), "--quiet"]) == 2
    cap = capsys.readouterr()
    assert cap.err == ("error: nostate has no training state (no training_state.safetensors and "
                       "training_state.json: a weights-only copy, or saved without them), so training cannot "
                       "resume from it; start a new run instead (eval, trace, sample and the app read it as it "
                       "is)\n"), cap.err
    assert sorted(p.name for p in (tmp_path / "nostate").iterdir()) == before  # nothing written
