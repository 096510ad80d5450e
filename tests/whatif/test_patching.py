"""Activation patching on a small random model of every kind: a self-patch is the identity, a patch of the
last layer restores the source's logits at that position, earlier positions are untouched, and the batched
sweep equals single patches."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from geomlab.whatif.patching import PatchPoint, patch, patch_points, patching_sweep
from helpers.models import MODELS, TEXT, VOCAB, get_model

CLEAN = VOCAB.encode(TEXT[:16]).numpy()
CORRUPT = VOCAB.encode("JULIET: hard, ay").numpy()
NAMES = list(MODELS)


def test_patch_points_per_kind():
    assert [p.hooks for p in patch_points(get_model("transformer"))] == [
        ("blocks.0.hook_resid_post",), ("blocks.1.hook_resid_post",)]
    assert [p.hooks for p in patch_points(get_model("lstm"))] == [("layers.0.hook_c", "layers.0.hook_h")]
    assert patch_points(get_model("osm-rnn-SO3")) == [PatchPoint("state", ("hook_state",), "steps")]
    assert patch_points(get_model("osmformer-T4"))[1].hooks == ("diag.layers.1.hook_state",)
    assert patch_points(get_model("osmformer-U3"))[1].hooks == ("layers.1.hook_state",)
    assert patch_points(get_model("cem"))[1].hooks == ("stack.layers.1.1.hook_iterate",)


@pytest.mark.parametrize("name", NAMES)
def test_self_patch_is_identity(name):
    model = get_model(name)
    for point in patch_points(model):
        out = patch(model, CLEAN, CLEAN, point, 5)
        assert np.array_equal(out.before, out.after), point
        for key in out.geometry:
            if key.endswith("_before"):
                assert np.array_equal(out.geometry[key], out.geometry[key[:-7] + "_after"])


@pytest.mark.parametrize("name", NAMES)
def test_last_layer_patch_gives_source_logits(name):
    """Every kind reads its logits at t from its last state at t alone (residual stream through the final
    norm and head; OSM prototype readout; the LSTM head on h; CEM's final norm and tied head), so patching
    that state at t gives the source run's logits at t; earlier positions keep the text's own logits."""
    model = get_model(name)
    last = patch_points(model)[-1]
    t = 7
    out = patch(model, CORRUPT, CLEAN, last, t)
    src = patch(model, CLEAN, CLEAN, last, t)  # the clean run, with the same hook points read
    np.testing.assert_allclose(out.after[t], src.before[t], rtol=0, atol=1e-5)
    assert np.array_equal(out.after[:t], out.before[:t])
    assert not np.allclose(out.after[t], out.before[t])


@pytest.mark.parametrize("name", NAMES)
def test_sweep_equals_single_patches(name):
    model = get_model(name)
    sweep = patching_sweep(model, CORRUPT, CLEAN, metric="target_prob", target_position=6, batch=4)
    L, T = sweep.values.shape
    assert (L, T) == (len(patch_points(model)), len(CORRUPT))
    y, p = sweep.target_token, sweep.target_position
    for l, t in [(l, t) for l in range(L) for t in range(7)] + [(L - 1, T - 1)]:
        out = patch(model, CORRUPT, CLEAN, patch_points(model)[l], t)
        z = out.after[p].astype(np.float64)
        prob = np.exp(z[y] - z.max()) / np.exp(z - z.max()).sum()
        assert sweep.values[l, t] == pytest.approx(prob, abs=2e-5)
    # the clean value patched into the last layer at the target gives the clean prediction back
    assert sweep.values[-1, p] == pytest.approx(sweep.clean, abs=2e-5)


def test_sweep_metrics_and_errors():
    model = get_model("transformer")
    kl = patching_sweep(model, CORRUPT, CLEAN, metric="kl", target_position=9)
    assert kl.clean == 0.0 and kl.corrupt > 0
    assert np.all(kl.values[:, 10:] == kl.corrupt)  # after the target: nothing to change
    assert kl.values[-1, 9] == pytest.approx(0.0, abs=1e-5)
    ld = patching_sweep(model, CORRUPT, CLEAN)
    assert ld.clean > 0 > ld.corrupt or ld.clean > ld.corrupt
    with pytest.raises(ValueError):
        patching_sweep(model, CORRUPT, CLEAN[:-1])
    with pytest.raises(ValueError):
        patching_sweep(model, CORRUPT, CLEAN, metric="nope")
    with pytest.raises(ValueError):
        patch(model, CORRUPT, CLEAN[:4], "block 0", 4)
    with pytest.raises(ValueError):
        patch(model, CORRUPT, CLEAN, "block 9", 0)


def test_patch_texts_of_different_lengths():
    model = get_model("transformer")
    out = patch(model, CORRUPT, CLEAN[:6], "block 0", 5)
    assert out.after.shape == out.before.shape == (len(CORRUPT), len(VOCAB))
    assert np.array_equal(out.geometry["resid_post_after"],
                          patch(model, CLEAN[:6], CLEAN[:6], "block 0", 5).geometry["resid_post_before"])


def test_training_mode_restored():
    model = get_model("osm-rnn-SO3")
    model.train()
    try:
        patch(model, CORRUPT, CLEAN, "state", 3)
        assert model.training
    finally:
        model.eval()
    assert torch.is_grad_enabled()


def test_a_token_swap_sweep_reads_the_window_before_its_target_in_the_texts_positions():
    """token_swap_sweep equals patching_sweep on the last `span` positions of the swapped text, its positions
    and target those of the whole text; a target not after the swap, out of reach, or a stand-in equal to
    the token it replaces is refused."""
    from geomlab.whatif.patching import token_swap_sweep

    model = get_model("transformer").eval()
    tok = torch.as_tensor(VOCAB.encode(TEXT), dtype=torch.long)
    pos, target, span = 20, 24, 8
    other = (int(tok[pos]) + 1) % len(VOCAB)
    got = token_swap_sweep(model, tok, pos, other, target, span=span)
    corrupt = tok.clone()
    corrupt[pos] = other
    start = target - span + 1
    want = patching_sweep(model, corrupt[start:target + 1], tok[start:target + 1], target_position=target - start)
    np.testing.assert_array_equal(got.values[:, pos - start:], want.values[:, pos - start:])
    # before the swapped token the texts agree: no run, the corrupted value (a full sweep computes about it)
    assert (got.values[:, :pos - start] == got.corrupt).all()
    np.testing.assert_allclose(want.values[:, :pos - start], got.corrupt, atol=1e-4)
    assert got.runs == want.runs - len(want.layers) * (pos - start)
    assert list(got.positions) == list(range(target - span + 1, target + 1)) and got.target_position == target
    for bad in (dict(target=pos), dict(target=pos + span), dict(target=len(tok))):
        with pytest.raises(ValueError, match="target"):
            token_swap_sweep(model, tok, pos, other, span=span, **bad)
    with pytest.raises(ValueError, match="already"):
        token_swap_sweep(model, tok, pos, int(tok[pos]), target)


def test_a_sweep_names_the_two_tokens_its_logit_difference_weighs():
    """y is the clean run's top guess at the target and y′ the corrupted run's top guess other than y; the
    summary line names both, so a reader does not take y for the text's next token or for the stand-in."""
    model = get_model("transformer").eval()
    got = patching_sweep(model, CORRUPT, CLEAN, target_position=10)
    with torch.no_grad():
        clean = model(torch.as_tensor(CLEAN)[None])[0, 10].numpy()
        corrupt = model(torch.as_tensor(CORRUPT)[None])[0, 10].numpy()
    assert got.target_token == int(np.argmax(clean))
    order = [int(i) for i in np.argsort(-corrupt, kind="stable") if i != got.target_token]
    assert got.alt_token == order[0] != got.target_token
    np.testing.assert_allclose(got.clean, clean[got.target_token] - clean[got.alt_token], rtol=1e-4, atol=1e-5)
    names = [f"tok{i}" for i in range(len(VOCAB))]
    line = got.describe(names)
    y, y_alt = f"'tok{got.target_token}'", f"'tok{got.alt_token}'"
    # y′ is not the corrupted run's top guess when that is still y: the line says "other than y"
    assert f"{y} (the clean run's top guess): logit difference z[{y}] − z[{y_alt}] ({y_alt}: the corrupted " \
           f"run's likeliest token other than {y})" in line
    assert line.startswith("the prediction at position 10 ") and f"clean {got.clean:.3f}" in line


def _sweep(clean: float, corrupt: float, metric: str = "logit_diff"):
    from geomlab.whatif.patching import Sweep

    values = np.array([[corrupt, clean, corrupt], [corrupt, corrupt, clean]])
    return Sweep(values, ["a", "b"], np.arange(3), metric, clean=clean, corrupt=corrupt, target_position=2,
                 target_token=1, alt_token=0)


def test_a_swap_that_barely_changes_the_prediction_says_so_in_the_summary_line():
    """Under half a nat between the clean and the corrupted logit difference (BARELY), a patch that restores
    all of it still moves the prediction little: the line says so, with the gap; from half a nat on it does
    not. The grassmann case: clean 3.735, corrupted 3.551 nats."""
    from geomlab.whatif.patching import BARELY

    names = ["x", "y", "z"]
    weak, tiny, clear = _sweep(3.735, 3.551), _sweep(1.606, 1.607), _sweep(3.735, 3.735 - BARELY["logit_diff"])
    assert weak.barely_changes and tiny.barely_changes and not clear.barely_changes
    line = weak.describe(names)
    assert line.startswith(clear.describe(names)[:40])
    assert "Warning: the swap barely changes this prediction (0.184 nats apart, under 0.5)" in line
    assert "a large share restored is not a strong result" in line
    assert "each cell is the metric itself" in tiny.describe(names)  # too small to divide by: raw values
    assert "Warning" not in clear.describe(names)
    assert _sweep(0.6, 0.5, "target_prob").barely_changes is False and _sweep(0.6, 0.57, "target_prob").barely_changes


def test_the_heatmap_of_a_swap_that_barely_changes_the_prediction_is_muted():
    """The same share restored, drawn paler: every colour of the scale moves toward its grey middle, and the
    caption says why; a clear swap keeps the full scale."""
    from geomlab.figures.whatif import PATCH_SCALE, patching_heatmap

    def drawn(sweep) -> tuple[float, str]:
        """How far the scale's ends are from its grey middle (0..255), and the caption."""
        chart = patching_heatmap(sweep, list("xyz"))
        scale, grey = chart.figure.data[0].colorscale, np.array(PATCH_SCALE[2][1])
        ends = [np.array([int(v) for v in c[4:-1].split(",")]) for _, c in (scale[0], scale[-1])]
        return max(float(np.abs(e - grey).max()) for e in ends), chart.caption

    full, calm = drawn(_sweep(3.735, 1.0)), drawn(_sweep(3.735, 3.551))
    assert full[0] > 150 and calm[0] < 0.4 * full[0]
    assert "colours are muted" in calm[1] and "muted" not in full[1]


def test_the_bundled_grassmann_swap_of_o_for_e_barely_changes_its_prediction(capsys):
    """The case a user met: default text, cursor 37 ('o' of 'yonder'), stand-in 'e', target 40; the app's
    sweep and `geomlab whatif --patch` both warn."""
    from geomlab.checkpoints.catalog import DEMO_TEXT
    from geomlab.commands.cli import main
    from geomlab.commands import load_checkpoint
    from geomlab.trace import encode_text
    from geomlab.whatif.patching import token_swap_sweep

    ck = load_checkpoint("bundled/grassmann-tinyshakespeare")
    tokens = encode_text(ck.vocab, DEMO_TEXT).reshape(-1)
    sweep = token_swap_sweep(ck.model, tokens, 37, ck.vocab.tokens.index("e"), 40)
    assert abs(sweep.clean - sweep.corrupt) == pytest.approx(0.184, abs=0.002) and sweep.barely_changes
    rc = main(["whatif", "bundled/grassmann-tinyshakespeare", "--text", DEMO_TEXT, "--pos", "37", "--patch", "e",
               "--target", "40", "--threads", "1"])
    first = capsys.readouterr().out.splitlines()[0]
    assert rc == 0 and "Warning: the swap barely changes this prediction (0.184 nats apart" in first, first


def test_the_default_target_is_where_the_bundled_grassmann_swap_moves_the_prediction():
    """The case above: 3 on (40) the swap barely changes the prediction; choose_target reads the sweep's own
    logit difference at 38..45 and picks a position from 39 on whose change reaches BARELY (the largest),
    and the sweep there does not warn."""
    from geomlab.checkpoints.catalog import DEMO_TEXT
    from geomlab.commands import load_checkpoint
    from geomlab.trace import encode_text
    from geomlab.whatif.patching import AHEAD, BARELY, choose_target, token_swap_sweep

    ck = load_checkpoint("bundled/grassmann-tinyshakespeare")
    tokens = encode_text(ck.vocab, DEMO_TEXT).reshape(-1)
    e = ck.vocab.tokens.index("e")
    got = choose_target(ck.model, tokens, 37, e)
    assert list(got.candidates) == list(range(38, 38 + AHEAD)) and got.later
    assert got.position != 40 and got.position >= 39 and got.change >= BARELY["logit_diff"]
    assert got.change == got.changes[1:].max()
    sweep = token_swap_sweep(ck.model, tokens, 37, e, got.position)
    assert not sweep.barely_changes
    assert got.change == pytest.approx(abs(sweep.clean - sweep.corrupt), abs=1e-4)
    assert got.describe() == f"target {got.position} chosen: the largest change among positions 39–45 " \
                             f"({got.change:.3g} nats)"


def test_the_default_target_reads_each_candidate_as_its_sweep_does_and_falls_back_to_the_next():
    """A text longer than the sweep's window (each candidate's window starts elsewhere): every change is the
    sweep's own |clean - corrupted|; with no change from pos + 2 on reaching BARELY the largest overall wins,
    here pos + 1. Bad input is refused."""
    from geomlab.whatif.patching import BARELY, choose_target, token_swap_sweep

    model = get_model("transformer").eval()
    tok = torch.as_tensor(VOCAB.encode(TEXT), dtype=torch.long)
    pos, span = 20, 8
    other = (int(tok[pos]) + 1) % len(VOCAB)
    got = choose_target(model, tok, pos, other, span=span, ahead=4)
    assert list(got.candidates) == [21, 22, 23, 24]
    for t, change in zip(got.candidates, got.changes):
        sweep = token_swap_sweep(model, tok, pos, other, int(t), span=span)
        assert change == pytest.approx(abs(sweep.clean - sweep.corrupt), abs=1e-4), t
    late = got.changes[1:].max() >= BARELY["logit_diff"]
    want = got.candidates[1 + np.argmax(got.changes[1:])] if late else got.candidates[np.argmax(got.changes)]
    assert (got.position, got.later) == (want, late)
    one = choose_target(model, tok, len(tok) - 2, other)  # one position follows: the only candidate
    assert one.position == len(tok) - 1 and one.describe().endswith("the only position the sweep can read")
    with pytest.raises(ValueError, match="already"):
        choose_target(model, tok, pos, int(tok[pos]))
    with pytest.raises(ValueError, match="outside"):
        choose_target(model, tok, len(tok) - 1, other)
    with pytest.raises(ValueError, match="ahead"):
        choose_target(model, tok, pos, other, ahead=0)


def test_the_default_target_falls_back_to_the_next_position_when_nothing_later_moves():
    """The bundled CEM, a long text, cursor 200: only the next position's change reaches BARELY, so it is
    chosen and the line says no later one does."""
    from geomlab.checkpoints.catalog import DEMO_TEXT
    from geomlab.commands import load_checkpoint
    from geomlab.trace import encode_text
    from geomlab.whatif.patching import BARELY, choose_target

    ck = load_checkpoint("bundled/cem-t2-tinyshakespeare")
    tokens = encode_text(ck.vocab, DEMO_TEXT * 3).reshape(-1)
    got = choose_target(ck.model, tokens, 200, ck.vocab.tokens.index("e"))
    assert got.changes[1:].max() < BARELY["logit_diff"] <= got.changes[0]
    assert got.position == 201 and not got.later
    assert got.describe().endswith("among positions 201–208 (0.715 nats; none from 202 on reaches 0.5)")


def test_the_default_stand_in_is_a_common_token_that_differs():
    from geomlab.whatif.patching import default_stand_in

    assert default_stand_in(["a", "e", " "], "x") == "e"
    assert default_stand_in(["a", "e", " "], "e") == " "
    assert default_stand_in(["1", "2"], "1") == "2" and default_stand_in(["1"], "1") == "1"
