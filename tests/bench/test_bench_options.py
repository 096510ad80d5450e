"""Every ``geomlab bench NAME`` reads its options with the parser of the other commands: a bad option is a short
usage line pointing to --help and the error (exit status 2), not argparse's whole usage block; --help keeps it.
Every numeric option has a range, checked when it is read (one line naming the option, before any work), and a
file a benchmark writes (``--json``, ``load --log``) has its place checked before the benchmark runs and its
missing folder made and named, as the commands do."""

from __future__ import annotations

import importlib
import json
import os

import pytest
import torch

from geomlab.bench import available
from geomlab.commands.cli import main
from geomlab.core.argv import Parser
from helpers.bench import undefined


def _usage_error(capsys, argv: list[str]) -> list[str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    return cap.err.splitlines()


def test_every_benchmark_is_checked():
    assert len(available()) >= 12 and "load" in available()


@pytest.mark.parametrize("name", available())
def test_an_unknown_option_is_two_lines(capsys, name):
    assert _usage_error(capsys, ["bench", name, "--bogus"]) == [
        f"usage: geomlab bench {name} [options] (all options: `python -m geomlab bench {name} --help`)",
        f"geomlab bench {name}: error: unrecognized arguments: --bogus"]


def test_a_misspelt_option_gets_a_hint(capsys):
    assert _usage_error(capsys, ["bench", "groups", "--dimz", "4"])[1] == (
        "geomlab bench groups: error: unrecognized arguments: --dimz 4 (did you mean --dims?)")
    assert _usage_error(capsys, ["bench", "train", "--jsn", "x.json"])[1].endswith("(did you mean --json?)")


def test_a_choice_argparse_refuses_is_two_lines(capsys):
    assert _usage_error(capsys, ["bench", "grassmann", "--mode", "x"]) == [
        "usage: geomlab bench grassmann [options] (all options: `python -m geomlab bench grassmann --help`)",
        "geomlab bench grassmann: error: argument --mode: invalid choice: 'x' (choose from 'forward', 'train', "
        "'both')"]


def test_bench_help_keeps_the_full_usage(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["bench", "views", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: geomlab bench views [-h]") and "--repeats REPEATS" in out


class _Parsed(Exception):
    """Raised in place of parsing, to stop a benchmark once its parser is built."""


@pytest.mark.parametrize("name", available())
def test_no_numeric_option_is_left_unchecked(monkeypatch, name):
    """A plain ``type=int`` or ``float`` takes -1 or 0 and the benchmark runs with it (or crashes in it)."""
    seen = []

    def grab(self, args=None, namespace=None):
        seen.extend(self._actions)
        raise _Parsed

    monkeypatch.setattr(Parser, "parse_args", grab)
    with pytest.raises(_Parsed):
        importlib.import_module(f"geomlab.bench.{name}").main([])
    assert seen
    plain = [a.option_strings[0] for a in seen if a.type in (int, float)]
    assert not plain, f"{name}: {plain} take any number"


#: (benchmark command line, the option its refused value belongs to, what the message must also show)
BAD = [
    (["groups", "--batch", "-1"], "--batch", "from 1 to"),
    (["groups", "--repeats", "0"], "--repeats", "from 1 to"),
    (["groups", "--products", "-5"], "--products", "from 1 to"),
    (["groups", "--quick", "--products", "-5"], "--products", "from 1 to"),  # --quick would override it
    (["groups", "--quick", "--drift-batch", "0"], "--drift-batch", "from 1 to"),
    (["groups", "--dims", "x"], "--dims", "'x'"),
    (["groups", "--dims", "4,x,8"], "--dims", "got 'x' in '4,x,8'"),
    (["groups", "--dims", ","], "--dims", "comma-separated"),
    (["groups", "--groups", "O,Q"], "--groups", "unknown group 'Q' in 'O,Q'; choose from O, SO, U, SU, T, O-block"),
    (["groups", "--step", "nan"], "--step", "finite"),
    (["groups", "--threads", "0"], "--threads", "from 1 to"),
    (["device", "--dims", "2,0"], "--dims", "got '0'"),
    (["device", "--rounds", "0"], "--rounds", "from 1 to"),
    (["figures", "--threads", "0"], "--threads", "from 1 to"),
    (["figures", "--chars", "5000"], "--chars", "to 2,048"),
    (["figures", "--kinds", "lstm,nope"], "--kinds", "unknown kind 'nope'"),
    (["gp", "--T", "1", "0"], "--T", "from 1 to"),
    (["gp", "--test-T", "x"], "--test-T", "'x'"),
    (["gp", "--lr", "0"], "--lr", "above 0"),
    (["gp", "--seed", "-1"], "--seed", "from 0 to 2**63 - 1"),
    (["gp", "--points", "1"], "--points", "from 2 to"),
    (["gp", "--threads", "100000"], "--threads", "from 1 to"),
    (["grassmann", "--lengths", "a,b"], "--lengths", "got 'a'"),
    (["grassmann", "--offsets", "0"], "--offsets", "got '0'"),
    (["grassmann", "--rank", "1"], "--rank", "from 2 to"),
    (["grassmann", "--threads", "-2"], "--threads", "from 1 to"),
    (["osm", "--vocab", "0"], "--vocab", "from 1 to"),
    (["osm", "--threads", "0"], "--threads", "from 1 to"),
    (["train", "--rounds", "0"], "--rounds", "from 1 to"),
    (["train", "--warmup", "-1"], "--warmup", "from 0 to"),
    (["train", "--threads", "0"], "--threads", "from 1 to"),
    (["views", "--chars", "256,0"], "--chars", "got '0'"),
    (["views", "--repeats", "x"], "--repeats", "'x'"),
    (["whatif", "--chars", "1"], "--chars", "from 2 to"),
    (["whatif", "--kinds", "foo"], "--kinds", "unknown kind 'foo'"),
    (["whatif", "--threads", "0"], "--threads", "from 1 to"),
    (["browser", "--moves", "0"], "--moves", "from 1 to"),
    (["browser", "--rounds", "0"], "--rounds", "from 1 to"),
    (["load", "--port", "70000"], "--port", "from 0 to 65,535"),
    (["load", "--replicas", "3"], "--replicas", "from 1 to 2"),
    (["load", "--timeout", "0"], "--timeout", "above 0"),
    (["load", "--sessions", "0"], "--sessions", "from 1 to"),
    # a name: a device (a traceback), a model or checkpoint of --only (an empty table, or a KeyError after work)
    (["groups", "--device", "foo"], "--device", "unknown device 'foo'; choose from auto, cpu, cuda, cuda:N, mps"),
    (["train", "--device", "cpux"], "--device", "unknown device 'cpux' (did you mean cpu?)"),
    (["device", "--device", "foo"], "--device", "unknown device 'foo'"),
    (["device", "--device", "cpu", "--quick", "--only", "nope"], "--only", "unknown model 'nope'; choose from "),
    (["train", "--quick", "--only", "lstm", "lstn"], "--only", "unknown model 'lstn' (did you mean lstm?)"),
    (["train", "--quick", "--only", "lstm,nope"], "--only", "unknown model 'nope' in 'lstm,nope'"),
    (["osm", "--reps", "1", "--only", "nope"], "--only", "unknown model 'nope'"),
    (["views", "--only", "nope"], "--only", "unknown character-level checkpoint 'nope'; choose from "),
    (["views", "--only", "osm-rnn-o-s3"], "--only", "unknown character-level checkpoint 'osm-rnn-o-s3'"),
    (["defaults", "--only", "lstm-tinyshakespeare,nope"], "--only", "unknown bundled checkpoint 'nope'"),
    (["grassmann", "--d-model", "10", "--heads", "4"], "--d-model",
     "must be a multiple of --heads (4: each attention head takes d-model / heads dimensions), got 10"),
]


@pytest.mark.parametrize("argv,option,shown", BAD, ids=[" ".join(a)[:40] for a, _, _ in BAD])
def test_a_bad_value_is_one_line_naming_the_option(argv, option, shown, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing may be written anywhere
    assert main(["bench", *argv]) == 2
    cap = capsys.readouterr()
    assert cap.err.startswith(f"error: {option}: ") and cap.err.count("\n") == 1, cap.err
    assert shown in cap.err and "Traceback" not in cap.err and len(cap.err) < 500  # --only lists the names
    assert not cap.out  # nothing ran: every benchmark prints a header first
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [["groups", "--quick", "--dims", "2"], ["gp", "--T", "1", "--steps", "1"],
                                  ["train", "--quick"]], ids=lambda a: a[0])
def test_json_is_checked_before_the_benchmark_runs(argv, capsys, tmp_path):
    afile = tmp_path / "a-file"
    afile.write_text("x")
    for place, want in ((afile / "x.json", f"{afile} is a file, so no folder can be made there"),
                        (tmp_path, "that is a folder; give a file name")):
        assert main(["bench", *argv, "--json", str(place)]) == 2
        cap = capsys.readouterr()
        assert cap.err == f"error: --json {place}: {want}\n" and not cap.out  # before the first line of figures
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        assert main(["bench", *argv, "--json", str(ro / "x.json")]) == 2
        assert "cannot write in" in capsys.readouterr().err


def test_json_in_a_missing_folder_is_made_and_named(capsys, tmp_path):
    out = tmp_path / "new" / "sub" / "rows.json"
    assert main(["bench", "groups", "--quick", "--groups", "O", "--dims", "2", "--json", str(out)]) == 0
    cap = capsys.readouterr()
    wrote = f"wrote the figures as JSON -> {out}\n"  # as geomlab trace names its file
    assert cap.err == f"note: made the folder {out.parent}{os.sep} for --json (it did not exist)\n" + wrote
    got = json.loads(out.read_text())
    assert [(r["name"], r["d"]) for r in got["rows"]] == [("O", 2)] and got["args"]["dims"] == [2]
    assert main(["bench", "groups", "--quick", "--groups", "O", "--dims", "2", "--json", str(out)]) == 0
    assert capsys.readouterr().err == wrote  # the folder is there now: no note


@pytest.mark.parametrize("name", available())
def test_an_empty_json_value_says_so(name, capsys, tmp_path, monkeypatch):
    """Not ``--json .: that is a folder`` (an empty path reads as the current folder)."""
    monkeypatch.chdir(tmp_path)
    assert main(["bench", name, "--json", ""]) == 2
    cap = capsys.readouterr()
    assert cap.err == "error: --json: the value is empty; give a file name\n" and not cap.out
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", available())
def test_help_is_plain_text_with_every_option_explained(name, capsys):
    """The description is the docstring's first paragraph without its reStructuredText markup, a sentence; no
    option is left without a help text."""
    with pytest.raises(SystemExit):
        main(["bench", name, "--help"])
    out = capsys.readouterr().out
    description = " ".join(out.split("\n\n")[1].split())
    assert "``" not in out and ":func:" not in out and ":mod:" not in out and "**" not in description
    assert description.startswith(f"geomlab bench {name}") or name == "osm", description
    assert description.endswith("."), description
    parser = {}

    def grab(self, args=None, namespace=None):
        parser["actions"] = self._actions
        raise _Parsed

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Parser, "parse_args", grab)
        with pytest.raises(_Parsed):
            importlib.import_module(f"geomlab.bench.{name}").main([])
    bare = [a.option_strings[0] for a in parser["actions"] if not a.help]
    assert not bare, f"{name}: {bare} have no help"


def test_load_log_is_checked_before_the_server_starts(capsys, tmp_path):
    afile = tmp_path / "a-file"
    afile.write_text("x")
    assert main(["bench", "load", "--log", str(afile / "s.log")]) == 2
    cap = capsys.readouterr()
    assert cap.err == f"error: --log {afile / 's.log'}: {afile} is a file, so no folder can be made there\n"
    assert not cap.out


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
@pytest.mark.parametrize("name", ["groups", "train"])
def test_a_device_this_machine_lacks_is_one_line(name, capsys):
    assert main(["bench", name, "--quick", "--device", "cuda"]) == 2  # a traceback from torch
    cap = capsys.readouterr()
    assert cap.err == "error: device 'cuda' requested but CUDA is not available\n" and not cap.out


@pytest.mark.parametrize("argv", [["groups", "--quick", "--groups", "O", "--dims", "2"],
                                  ["train", "--quick", "--rounds", "1", "--only", "osm-rnn"],
                                  ["osm", "--batch", "2", "--seq", "8", "--reps", "1", "--only", "osm-rnn"]],
                         ids=lambda a: a[0])
def test_json_dash_is_standard_output_alone(argv, capsys, tmp_path, monkeypatch):
    """As ``trace --json -``: the JSON on standard output, the table on standard error (a file named - was
    written)."""
    monkeypatch.chdir(tmp_path)
    assert main(["bench", *argv, "--json", "-"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["rows"] and "ratio" in cap.err and "wrote" not in cap.err
    assert not undefined(json.loads(cap.out))
    assert list(tmp_path.iterdir()) == []
