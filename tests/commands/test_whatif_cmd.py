"""`geomlab whatif`: the numbers of the app's What-if panel and patching sweep, from the command line, equal
those of the Python API they are computed with (geomlab.whatif.catalog.apply + Outcome.scored_on, and
geomlab.whatif.patching.patching_sweep over the app's window); the JSON file; one-line errors."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from geomlab.commands import load_checkpoint
from geomlab.commands.cli import main
from geomlab.trace import encode_text, visible
from geomlab.whatif import catalog
from geomlab.whatif.patching import patching_sweep

TEXT = "ROMEO: But soft, what light through yonder window breaks? It is the east."
OSM, CEM, S5 = "bundled/osm-rnn-o-tinyshakespeare", "bundled/cem-t2-tinyshakespeare", "bundled/osm-rnn-o-s5"
TRANSFORMER = "bundled/transformer-alibi-tinyshakespeare"


def _cli(capsys, *argv) -> tuple[int, str, str]:
    rc = main(["whatif", *argv, "--threads", "1"])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _api(ref: str, text: str, name: str, pos: int, size: float, **controls):
    """The app's computation (app_pages/_whatif.py): apply, then score on the card's task."""
    ck = load_checkpoint(ref)
    tokens = encode_text(ck.vocab, text).reshape(-1)
    return ck, catalog.apply(name, ck.model, tokens, pos, size, **controls).scored_on(ck.card.get("task"))


def _nan_as_none(a) -> list:
    return [None if not np.isfinite(v) else float(v) for v in np.asarray(a, dtype=np.float64).ravel()]


@pytest.mark.parametrize("ref, text, argv, name, pos, size, controls", [
    (OSM, TEXT, ["--intervention", "steer", "--size", "1.5"], "steer", 12, 1.5, {"layer": 0}),
    (CEM, TEXT, ["--intervention", "energy_steps", "--layer", "3", "--size", "5"], "energy_steps", 30, 5.0,
     {"layer": 3}),
    (S5, "12340 10234 12340 12340 10234 21034 01234", ["--size", "-3"], "steer", 5, -3.0, {"layer": 0}),
])
def test_the_cli_prints_and_saves_the_python_apis_numbers(capsys, tmp_path, ref, text, argv, name, pos, size,
                                                          controls):
    ck, want = _api(ref, text, name, pos, size, **controls)
    out_file = tmp_path / "sub" / "whatif.json"
    rc, out, err = _cli(capsys, ref, "--text", text, "--pos", str(pos), *argv, "--json", str(out_file))
    assert rc == 0, err
    assert err == f"note: made the folder {out_file.parent}{os.sep} for --json (it did not exist)\n"
    lines = out.splitlines()
    assert lines[0] == want.summary(pos)  # the panel's line, word problems scored on the running product
    before, after = want.top_k(pos, 5)
    for rank, (row, (i, p), (j, q)) in enumerate(zip(lines[2:7], before, after), 1):
        assert row.split() == [str(rank), repr(visible(ck.vocab.tokens[i])), f"{p:.1%}",
                               repr(visible(ck.vocab.tokens[j])), f"{q:.1%}"]
    doc = json.loads(out_file.read_text(encoding="utf-8"))
    assert doc["kl_bits"] == _nan_as_none(want.kl_bits())
    assert doc["surprisal_change_bits"] == _nan_as_none(want.surprisal_change_bits())
    assert doc["summary"] == want.summary(pos) and doc["predicts"] == want.predicts
    assert (doc["intervention"], doc["size"], doc["controls"], doc["position"]) == (name, size, controls, pos)
    assert doc["tokens"] == want.tokens.tolist()
    assert [g["id"] for g in doc["top_k"]["after"]] == [i for i, _ in after]
    assert [g["p"] for g in doc["top_k"]["before"]] == [p for _, p in before]


def test_word_problem_scoring_and_the_default_size(capsys):
    """Without --intervention and --size, the app's opening knob: the first that applies, its default size
    (CEM: the trained steps + 2)."""
    ck, want = _api(CEM, TEXT, "energy_steps", 30, catalog.neutral_size("energy_steps", load_checkpoint(CEM).model)
                    + 2, layer=0)
    rc, out, _ = _cli(capsys, CEM, "--text", TEXT, "--pos", "30")
    assert rc == 0 and out.splitlines()[0] == want.summary(30)
    rc, out, _ = _cli(capsys, S5, "--text", "12340 10234 12340", "--pos", "1")
    assert rc == 0 and "surprisal of the correct running product" in out and "running product at position 1" in out


def test_json_to_standard_output_holds_the_json_alone(capsys):
    _, want = _api(OSM, TEXT, "steer", 20, 0.5, layer=0)
    rc, out, _ = _cli(capsys, OSM, "--text", TEXT, "--pos", "20", "--json", "-")
    assert rc == 0
    doc = json.loads(out)
    assert doc["summary"] == want.summary(20) and doc["kl_bits"] == _nan_as_none(want.kl_bits())


def test_without_target_the_sweep_reads_where_the_swap_moves_the_prediction(capsys):
    """No --target: the position choose_target picks (the bundled Grassmann, cursor 37, 'e': not 40, 3 on,
    where the swap barely changes the prediction), said on the first line; --target 40 still wins."""
    from geomlab.checkpoints.catalog import DEMO_TEXT
    from geomlab.whatif.patching import choose_target

    grassmann = "bundled/grassmann-tinyshakespeare"
    ck = load_checkpoint(grassmann)
    tokens = encode_text(ck.vocab, DEMO_TEXT).reshape(-1)
    want = choose_target(ck.model, tokens, 37, ck.vocab.tokens.index("e"))
    argv = [grassmann, "--text", DEMO_TEXT, "--pos", "37", "--patch", "e"]
    rc, out, err = _cli(capsys, *argv, "--json", "-")
    doc = json.loads(out)
    assert rc == 0 and doc["target"] == want.position != 40 and doc["target_chosen"] is True, err
    assert doc["target_candidates"] == want.candidates.tolist()
    assert np.allclose(doc["target_changes"], want.changes)
    rc, out, err = _cli(capsys, *argv)
    first = out.splitlines()[0]
    assert first.endswith(f"; {want.describe()}.") and "Warning" not in first, first
    assert f"positions 37..{want.position} " in out.splitlines()[1]
    rc, out, err = _cli(capsys, *argv, "--target", "40", "--json", "-")
    doc = json.loads(out)
    assert (doc["target"], doc["target_chosen"]) == (40, False)
    assert abs(doc["clean"] - doc["corrupt"]) == pytest.approx(0.184, abs=0.002)  # the sweep that barely changes


def test_the_patching_sweep_is_the_apps(capsys, tmp_path):
    """--patch: the token at --pos replaced, the app's window of positions up to the target (here it starts
    after position 0), the sweep's raw values and share restored in the JSON, the printed table."""
    from geomlab.whatif.patching import SWEEP_SPAN

    text = TEXT * 2
    pos, target = 140, 143
    ck = load_checkpoint(TRANSFORMER)
    clean = encode_text(ck.vocab, text).reshape(-1)
    corrupt = clean.clone()
    corrupt[pos] = encode_text(ck.vocab, "e")[0, 0]
    start = target - SWEEP_SPAN + 1
    want = patching_sweep(ck.model, corrupt[start:target + 1], clean[start:target + 1], target_position=target - start,
                          first=pos - start)
    rc, out, err = _cli(capsys, TRANSFORMER, "--text", text, "--pos", str(pos), "--patch", "e", "--target",
                        str(target), "--json", str(tmp_path / "sweep.json"))
    assert rc == 0, err
    doc = json.loads((tmp_path / "sweep.json").read_text(encoding="utf-8"))
    assert doc["target"] == target and doc["positions"] == list(range(start, target + 1))
    assert doc["target_chosen"] is False and doc["target_changes"] is None
    assert np.array_equal(np.array(doc["values"]), want.values)
    assert doc["recovered"] == [_nan_as_none(r) for r in want.recovered()]
    assert (doc["clean"], doc["corrupt"], doc["target_token"]) == (want.clean, want.corrupt, want.target_token)
    assert doc["target_token_name"] == ck.vocab.tokens[want.target_token]
    from geomlab.trace import visible

    names = [visible(t) for t in ck.vocab.tokens]  # a newline shows as ↵
    assert (doc["alt_token"], doc["alt_token_name"]) == (want.alt_token, names[want.alt_token])
    from dataclasses import replace

    in_text = replace(want, target_position=target)  # the window's target is the text's position `target`
    assert f"e': {in_text.describe(names)}; {want.runs} patched runs in " in out.splitlines()[0]
    assert "chosen" not in out.splitlines()[0]
    assert doc["layers"] == want.layers == ["block 0", "block 1", "block 2"]
    shown = want.values if doc["shown"] == "values" else want.recovered()
    rows = out.splitlines()[3:-1]  # the last line: "wrote the sweep as JSON -> ..."
    assert len(rows) == len(want.layers)
    for row, label, values in zip(rows, want.layers, shown):
        assert row.split()[2:] == [f"{v:.3f}" for v in values[pos - start:]]
    assert f"clean {want.clean:.3f}, corrupted {want.corrupt:.3f}" in out


@pytest.mark.parametrize("ref, argv, message", [
    (CEM, ["--pos", "30", "--intervention", "steer"], "--intervention steer does not apply to a cem"),
    (CEM, ["--pos", "30", "--intervention", "bogus"], "--intervention 'bogus' is unknown; this checkpoint offers "
                                                      "energy_steps, ablate_head"),
    ("bundled/lstm-tinyshakespeare", ["--pos", "3"], "no intervention applies to a lstm"),
    (CEM, ["--pos", "73"], "--pos 73 is outside the text (positions 0 to 72)"),
    (CEM, ["--pos", "-1"], "--pos/--cursor: must be a token position, counted from 0 (the first token), got -1"),
    (CEM, ["--pos", "30", "--intervention", "energy_steps", "--size", "20"], "--size 20 is outside 0..16"),
    (OSM, ["--pos", "30", "--size", "5.5"], "--size 5.5 is outside -5..5"),
    (CEM, ["--pos", "30", "--intervention", "energy_steps", "--layer", "4"], "--layer 4 is outside 0..3"),
    (CEM, ["--pos", "30", "--intervention", "ablate_head", "--head", "9"], "--head 9 is outside 0..3 for this "
                                                                          "checkpoint (4 heads in each layer)"),
    (OSM, ["--pos", "30", "--head", "1"], "--head does not apply to steer"),
    (OSM, ["--pos", "30", "--target", "33"], "--target applies to --patch only"),
    (CEM, ["--pos", "30", "--patch", "xy"], "--patch 'xy' is 2 tokens"),
    (CEM, ["--pos", "30", "--patch", "r"], "is the token at --pos 30 already"),
    (CEM, ["--pos", "30", "--patch", "é"], "--patch: Unknown symbols for this checkpoint: 'é' (U+00E9). It reads "
                                          "characters from: ↵ ␣ ! $ & ' , - . 3 : ; … (or type \ufffd, the unknown"),
    (CEM, ["--pos", "72", "--patch", "e"], "--pos 72 is the last position"),
    (CEM, ["--pos", "30", "--patch", "e", "--target", "30"], "--target 30 is outside 31..72"),
    (CEM, ["--pos", "30", "--patch", "e", "--layer", "1"], "--layer does not apply to --patch"),
])
def test_bad_input_is_one_line_and_exit_status_2(capsys, tmp_path, ref, argv, message):
    rc, out, err = _cli(capsys, ref, "--text", TEXT, *argv, "--json", str(tmp_path / "x.json"))
    assert rc == 2 and out == ""
    assert err.startswith("error: ") and message in err and err.count("\n") == 1, err
    assert not (tmp_path / "x.json").exists()


def test_characters_outside_the_vocabulary_read_as_the_unknown_token_as_in_the_app(capsys):
    """The app's rule (its view pages): a character a vocabulary with an unknown token lacks reads as that
    token, with one note naming it; the numbers are the app's for the same text."""
    text = "To be 🙂 or not"
    _, want = _api(CEM, text, "energy_steps", 6, 3.0, layer=0)
    rc, out, err = _cli(capsys, CEM, "--text", text, "--pos", "6", "--size", "3", "--json", "-")
    assert rc == 0
    assert err == ("note: 1 character not in this checkpoint's vocabulary ('🙂' (U+1F642)) read as the unknown token "
                   "\N{REPLACEMENT CHARACTER}\n"), err
    doc = json.loads(out)
    assert doc["tokens"] == want.tokens.tolist() and doc["tokens"][6] == load_checkpoint(CEM).vocab.unk_id
    assert doc["kl_bits"] == _nan_as_none(want.kl_bits()) and doc["summary"] == want.summary(6)


def test_unknown_word_problem_symbols_are_refused_as_in_the_app(capsys):
    """A word problem's vocabulary has no unknown token: the app refuses the symbol
    (geomlab.data.vocab.check_text), and so does the CLI, with the app's message."""
    from geomlab.data.vocab import check_text
    from geomlab.trace import MAX_TEXT_CHARS

    text = "12340 10234 9"
    with pytest.raises(ValueError) as app:
        check_text(load_checkpoint(S5).vocab, text, MAX_TEXT_CHARS)
    rc, out, err = _cli(capsys, S5, "--text", text, "--pos", "1")
    assert rc == 2 and out == "" and err == f"error: --text: {app.value}\n", err


def test_the_unknown_token_typed_as_shown_stands_in(capsys):
    """The refusal above says how to type the unknown token: typed, it is the stand-in."""
    rc, out, err = _cli(capsys, CEM, "--text", TEXT, "--pos", "30", "--patch", "\ufffd", "--json", "-")
    assert rc == 0 and err == "", err
    doc = json.loads(out)
    assert doc["patch"] == "\ufffd" and doc["shown"] in ("recovered", "values"), doc["shown"]
