"""Every ``geomlab bench NAME`` reads its options with the parser of the other commands: a bad option is a short
usage line pointing to --help and the error (exit status 2), not argparse's whole usage block; --help keeps it."""

from __future__ import annotations

import pytest

from geomlab.bench import available
from geomlab.commands.cli import main


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


def test_a_value_argparse_refuses_is_two_lines(capsys):
    assert _usage_error(capsys, ["bench", "views", "--repeats", "x"]) == [
        "usage: geomlab bench views [options] (all options: `python -m geomlab bench views --help`)",
        "geomlab bench views: error: argument --repeats: invalid int value: 'x'"]


def test_bench_help_keeps_the_full_usage(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["bench", "views", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: geomlab bench views [-h]") and "--repeats REPEATS" in out
