"""What a fresh user meets on the command line: a --size that is not a number names the intervention's range;
positions say they count from 0, never a bound like 2**31 - 1; an index out of range names its option and the
checkpoint's range; output piped into a reader that closes early ends quietly; a usage error is two lines (a
short usage pointing to --help, and the error), while --help keeps argparse's full text."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from geomlab.commands.cli import main

ROOT = Path(__file__).resolve().parents[2]
TEXT = "To be, or not to be"
CEM, GRASSMANN, S3 = "cem-t2-tinyshakespeare", "grassmann-tinyshakespeare", "osm-rnn-o-s3"


def _err(capsys, *argv) -> str:
    """Standard error of ``geomlab ARGV`` (exit status 2, nothing on standard output)."""
    assert main([*argv, "--threads", "1"]) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err.count("\n") == 1, cap.err
    return cap.err


@pytest.mark.parametrize("argv, want", [
    ([CEM, "--intervention", "ablate_head", "--size", "abc"],
     "--size 'abc' is not a number; ablate_head takes whole numbers 0..1 (head ablated)"),
    ([CEM, "--size", "abc"],  # the checkpoint's first intervention, energy_steps
     "--size 'abc' is not a number; energy_steps takes whole numbers 0..16 (recursion steps T of the chosen layer)"),
    ([CEM, "--size", "2.5"], "--size 2.5 is not a whole number; energy_steps takes whole numbers 0..16"),
    ([S3, "--size", "inf"], "--size 'inf' is not a finite number; steer takes -5..5 (step ε along the layer's own "
                            "update)"),
])
def test_a_size_that_is_not_a_number_names_the_interventions_range(capsys, argv, want):
    text = "012 102 012" if argv[0] == S3 else TEXT
    err = _err(capsys, "whatif", argv[0], "--text", text, "--pos", "1", *argv[1:])
    assert err.startswith(f"error: {want}"), err
    assert "1e+06" not in err


@pytest.mark.parametrize("bound, what", [("abc", "a number"), ("inf", "a finite number")])
def test_a_search_bound_that_is_not_a_number_names_the_item_and_the_form(capsys, tmp_path, bound, what):
    """--search's bounds and whatif's --size are read by one function: the same sentence, then what is expected."""
    item = f"lr=log:{bound}:1"
    err = _err(capsys, "sweep", "--model", "lstm", "--data", "x", "--search", item, "--out", str(tmp_path / "s"))
    assert err.startswith(f"error: --search {item!r}: {bound!r} is not {what}; expected KEY=log:LOW:HIGH, "), err
    assert list(tmp_path.iterdir()) == []


def test_finite_float_cuts_the_text_and_raises_the_callers_error():
    from geomlab.core.argv import finite_float

    class Refused(ValueError):
        pass

    assert finite_float(" 1e-3 ", "--x") == 0.001
    with pytest.raises(Refused) as exc:
        finite_float("9" * 400, "--x", "0..1", error=Refused)
    assert str(exc.value) == f"--x {'9' * 40!r} is not a finite number; 0..1"
    with pytest.raises(ValueError, match=r"^--x 'nan' is not a finite number$"):
        finite_float("nan", "--x")


@pytest.mark.parametrize("argv, option", [
    (["whatif", CEM, "--text", TEXT, "--pos", "-1"], "--pos/--cursor"),
    (["whatif", CEM, "--text", TEXT, "--pos", "first"], "--pos/--cursor"),
    (["whatif", CEM, "--text", TEXT, "--pos", "3", "--patch", "e", "--target", "-2"], "--target"),
    (["trace", CEM, "--text", TEXT, "--cursor", "-1", "--out", "t.npz"], "--cursor"),
])
def test_a_negative_position_says_positions_count_from_0(capsys, tmp_path, monkeypatch, argv, option):
    monkeypatch.chdir(tmp_path)
    err = _err(capsys, *argv)
    assert err.startswith(f"error: {option}: must be a token position, counted from 0 (the first token), got "), err
    assert "2**" not in err
    assert list(tmp_path.iterdir()) == []


def test_a_position_past_the_text_gives_the_texts_range(capsys, tmp_path):
    n = len(TEXT)
    assert _err(capsys, "whatif", CEM, "--text", TEXT, "--pos", str(2**40)) == \
        f"error: --pos {2**40} is outside the text (positions 0 to {n - 1})\n"
    assert _err(capsys, "trace", CEM, "--text", TEXT, "--cursor", str(n), "--out", str(tmp_path / "t.npz")) == \
        f"error: --cursor {n} is outside the traced text (positions 0 to {n - 1})\n"


@pytest.mark.parametrize("ckpt, argv, want", [
    (CEM, ["--intervention", "ablate_head", "--head", "9"],
     "--head 9 is outside 0..3 for this checkpoint (4 heads in each layer)"),
    (CEM, ["--intervention", "ablate_head", "--layer", "4"],
     "--layer 4 is outside 0..3 for this checkpoint (4 layers)"),
    (CEM, ["--intervention", "energy_steps", "--layer", "9"],
     "--layer 9 is outside 0..3 for this checkpoint (4 layers)"),
    (GRASSMANN, ["--slot", "9"], "--slot 9 is outside 0..0 for this checkpoint (layer 0's offsets: [1])"),
    (GRASSMANN, ["--layer", "6"], "--layer 6 is outside 0..5 for this checkpoint (6 layers)"),
    (S3, ["--layer", "1"], "--layer 1 is outside 0..0 for this checkpoint (1 layer)"),
])
def test_an_index_out_of_range_names_its_option(capsys, ckpt, argv, want):
    text = "012 102 012" if ckpt == S3 else TEXT
    assert _err(capsys, "whatif", ckpt, "--text", text, "--pos", "2", *argv) == f"error: {want}\n"


def test_a_negative_index_names_its_option_without_a_huge_bound(capsys):
    err = _err(capsys, "whatif", CEM, "--text", TEXT, "--pos", "2", "--intervention", "ablate_head", "--head", "-1")
    assert err == "error: --head: must be an integer >= 0, got -1\n"


# ---------------------------------------------------------------------------------------- a reader that leaves
@pytest.mark.parametrize("argv", [["--help"], ["zoo"], ["trace", S3, "--text", "012 102", "--out", "t.npz"],
                                  ["whatif", S3, "--text", "012 102 012", "--pos", "1"]],
                         ids=["help", "zoo", "trace", "whatif"])
def test_output_into_a_closed_pipe_ends_quietly(argv, tmp_path):
    """``geomlab zoo | head -2`` printed "error: [Errno 32] Broken pipe" (exit status 1). The reader here closes
    its end before geomlab writes anything (python takes a second to start), so every run meets the closed pipe."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-m", "geomlab", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         cwd=tmp_path, env=env)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) in (0, 141), err
    assert err == ""


def test_a_closed_pipe_in_the_middle_of_a_command_is_status_141(capsys, monkeypatch):
    """In the same process: a write to standard output that meets a closed pipe ends the command with 141 (128 +
    SIGPIPE) and no message, not the one line of an error of the machine ("[Errno 32] Broken pipe")."""
    import io

    class ClosedPipe(io.StringIO):
        def write(self, s):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    assert main(["zoo"]) == 141
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------------------------------------- usage errors
@pytest.mark.parametrize("argv, usage, error", [
    (["whatif", CEM, "--text", TEXT, "--pos", "1", "--bogus"], "usage: geomlab whatif [options] checkpoint",
     "geomlab whatif: error: unrecognized arguments: --bogus"),
    (["trace", CEM, "--text", TEXT, "--pos", "1"], "usage: geomlab trace [options] checkpoint",
     "geomlab trace: error: unrecognized arguments: --pos 1 (did you mean --cursor?)"),
    (["trace"], "usage: geomlab trace [options] checkpoint",
     "geomlab trace: error: the following arguments are required: checkpoint"),
    (["--bogus"], "usage: geomlab [options] COMMAND ...", "geomlab: error: unrecognized arguments: --bogus"),
    (["bench", "--bogus"], "usage: geomlab bench [options] [NAME] [ARGS ...]",
     "geomlab bench: error: unrecognized arguments: --bogus"),
])
def test_a_usage_error_is_two_lines_pointing_to_help(capsys, argv, usage, error):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    cap = capsys.readouterr()
    command = " ".join(["python -m geomlab", *argv[:1]]) if not argv[0].startswith("-") else "python -m geomlab"
    assert cap.err.splitlines() == [f"{usage} (all options: `{command} --help`)", error], cap.err
    assert cap.out == ""


def test_help_keeps_argparses_full_usage(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["whatif", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: geomlab whatif [-h] (--text TEXT | --text-file TEXT_FILE) --pos POS")
    assert "--size SIZE" in out and "[options]" not in out


# ------------------------------------------------------------------------------------- what is named first
def test_an_unknown_model_kind_is_named_before_a_missing_data(capsys):
    err = _err(capsys, "train", "--model", "nope", "--steps", "1")  # said "--data is required"
    assert err.startswith("error: --model: unknown model kind 'nope'; known kinds: cem, "), err
    assert "lstm" in err
    err = _err(capsys, "sweep", "--model", "transfomer", "--data", "x")
    assert err.startswith("error: --model: unknown model kind 'transfomer' (did you mean transformer?); "), err


@pytest.mark.parametrize("text, what", [("", "The text is empty"), (" \n ", "The text holds only spaces")],
                         ids=["empty", "spaces"])
def test_an_empty_text_is_named_before_a_missing_output(capsys, text, what):
    assert _err(capsys, "trace", S3, "--text", text).startswith(f"error: --text: {what}")  # "nothing to write"


@pytest.mark.parametrize("argv", [["train", "--model", "lstm", "--data", "nothing.txt"], ["eval", S3],
                                  ["sample", S3], ["sweep", "--model", "lstm", "--data", "nothing.txt"]],
                         ids=lambda a: a[0])
def test_a_mistyped_device_is_one_line_before_any_work(capsys, tmp_path, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    assert _err(capsys, *argv, "--device", "cdua") == (
        "error: --device: unknown device 'cdua' (did you mean cuda?); choose from auto, cpu, cuda, cuda:N, mps\n")
    assert list(tmp_path.iterdir()) == []


def test_the_device_option_takes_the_devices_torch_knows():
    from geomlab.core.argv import device_option

    assert [device_option(d) for d in ("auto", "cpu", "cuda", "cuda:1", "mps")] == \
        ["auto", "cpu", "cuda", "cuda:1", "mps"]
    for bad in ("cuda:", "cuda:x", "CPU ", "meta", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="choose from auto, cpu, cuda, cuda:N, mps"):
            device_option(bad)


# ------------------------------------------------------------------------------------------------ eval's line
def test_a_word_problem_score_reads_in_words_with_its_units(capsys):
    assert main(["eval", S3, "--threads", "1"]) == 0  # scores in words with their units, not raw keys
    line = capsys.readouterr().out.splitlines()[0]
    assert re.fullmatch(r"test accuracy: 1\.0000 of positions, final accuracy: 1\.0000 of whole words, loss: "
                        r"0\.\d{4} nats per position  \(\d+ sequences of length \d+ from the test split\)", line), line


def test_a_language_model_score_names_the_split_and_the_unit(capsys, tmp_path):
    text = tmp_path / "play.txt"
    text.write_text("ROMEO: But soft, what light through yonder window breaks?\n" * 400, encoding="utf-8")
    assert main(["eval", "lstm-tinyshakespeare", "--data", str(text), "--max-tokens", "200", "--threads", "1"]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    assert re.fullmatch(r"test bpc: \d\.\d{4} bits per character  \(200 characters of the test split; window "
                        r"128, stride 128\)", line), line


def test_eval_help_says_the_default_split(capsys):
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    assert "(default test: the held-out number" in " ".join(capsys.readouterr().out.split())


# ------------------------------------------------------------------------------------------- abbreviations
@pytest.mark.parametrize("argv, error", [
    (["train", "--mod", "lstm", "--data", "x"],
     "geomlab train: error: unrecognized arguments: --mod lstm (did you mean --model?)"),
    (["eval", S3, "--spl", "valid"], "geomlab eval: error: unrecognized arguments: --spl valid (did you mean --split?)"),
    (["bench", "groups", "--quick", "--dim", "2"],
     "geomlab bench groups: error: unrecognized arguments: --dim 2 (did you mean --dims?)"),
], ids=["train", "eval", "bench"])
def test_an_abbreviated_option_is_not_taken_for_the_whole_name(capsys, argv, error):
    with pytest.raises(SystemExit) as exc:  # argparse took --mod for --model, --dim for --dims
        main(argv)
    assert exc.value.code == 2
    cap = capsys.readouterr()
    assert cap.err.splitlines()[1] == error and cap.out == ""


def test_a_misspelt_command_or_choice_names_the_nearest():
    """argparse lists the choices of a command or a choice option; the nearest is named, as for an option."""
    for argv, want in ((["evl", "x"], "(did you mean eval?)"), (["bench", "groups", "--method", "eigg"],
                                                               "(did you mean eigh?)")):
        out = subprocess.run([sys.executable, "-m", "geomlab", *argv], capture_output=True, text=True)
        assert out.returncode == 2 and out.stderr.strip().splitlines()[-1].endswith(want), out.stderr
    out = subprocess.run([sys.executable, "-m", "geomlab", "zzz"], capture_output=True, text=True)
    assert out.returncode == 2 and "did you mean" not in out.stderr  # nothing near: no guess
