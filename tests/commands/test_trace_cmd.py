"""`geomlab trace`: `--json -` writes the JSON to standard output alone, as `geomlab whatif --json -` does,
and a text is read as the app reads it (characters outside the vocabulary as the unknown token, with a note;
a word problem's unknown symbols refused with the app's message)."""

from __future__ import annotations

import json

import pytest

from geomlab.commands import load_checkpoint
from geomlab.commands.cli import main
from geomlab.trace import encode_text, trace, trace_json

S5, CEM = "bundled/osm-rnn-o-s5", "bundled/cem-t2-tinyshakespeare"


def _cli(capsys, *argv) -> tuple[int, str, str]:
    rc = main(["trace", *argv, "--threads", "1"])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_json_dash_is_standard_output_and_holds_the_json_alone(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, out, err = _cli(capsys, S5, "--text", "12340 10234", "--json", "-", "--out", "t.npz")
    assert rc == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.npz"]  # no file named "-"
    rc, _, _ = _cli(capsys, S5, "--text", "12340 10234", "--json", "file.json")
    assert rc == 0
    assert json.loads(out) == json.loads((tmp_path / "file.json").read_text(encoding="utf-8"))
    assert err == "traced 2 positions of 'osm-rnn' (osm trace) -> t.npz\n", err  # the other lines: stderr


def test_json_dash_alone_is_an_output(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, out, err = _cli(capsys, S5, "--text", "12340 10234", "--json", "-")
    assert rc == 0, err
    assert json.loads(out)["n_positions"] == 2 and not list(tmp_path.iterdir())


def test_out_dash_is_refused_in_one_line_and_writes_nothing(capsys, tmp_path, monkeypatch):
    """The .npz trace is binary: `--out -` is refused, and no file named '-' or '-.npz' is written."""
    monkeypatch.chdir(tmp_path)
    rc, out, err = _cli(capsys, S5, "--text", "12340 10234", "--out", "-")
    assert rc == 2 and out == "" and not list(tmp_path.iterdir())
    assert err.startswith("error: --out -: the .npz trace is a binary file") and err.count("\n") == 1, err


def test_help_says_json_dash_is_standard_output(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # argparse's lines as long as they come
    with pytest.raises(SystemExit):
        main(["trace", "--help"])
    shown = capsys.readouterr().out
    assert "'-': standard output, and nothing else is printed there" in shown
    assert "--json - writes the JSON to standard output alone" in shown


def test_characters_outside_the_vocabulary_read_as_the_unknown_token_with_the_apps_note(capsys):
    text = "To be 🙂 or not 🙂é"
    rc, out, err = _cli(capsys, CEM, "--text", text, "--json", "-")
    assert rc == 0
    assert err.splitlines() == ["note: 2 characters not in this checkpoint's vocabulary ('🙂' (U+1F642), 'é' "
                                "(U+00E9)) read as the unknown token \N{REPLACEMENT CHARACTER}",
                                "traced 17 positions of 'cem' (cem trace)"], err
    ck = load_checkpoint(CEM)
    want = trace(ck.model, encode_text(ck.vocab, text), vocab=ck.vocab, text=text)  # the app's trace
    assert json.loads(out) == json.loads(trace_json(want, 0, want.n_positions))


def test_unknown_word_problem_symbols_are_refused_with_the_apps_message(capsys, tmp_path, monkeypatch):
    from geomlab.data.vocab import check_text
    from geomlab.trace import MAX_TEXT_CHARS

    monkeypatch.chdir(tmp_path)
    text = "12340 10234 9"
    with pytest.raises(ValueError) as app:
        check_text(load_checkpoint(S5).vocab, text, MAX_TEXT_CHARS)
    rc, out, err = _cli(capsys, S5, "--text", text, "--json", "-")
    assert rc == 2 and out == "" and err == f"error: --text: {app.value}\n", err
    assert not list(tmp_path.iterdir())
