"""Tests of geomlab.trace: encoding limits, typed traces of every model kind, the npz + JSON file format,
CEM test-time recursion and the `python -m geomlab trace` command."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import torch

from hypothesis import given, strategies as st

from geomlab.data import Vocab
from geomlab.models import build_model, kinds
from helpers.models import CONFIGS, TEXT, VOCAB, small_model
from geomlab.trace import (
    MAX_TEXT_CHARS, BaselineTrace, CEMTrace, GrassmannTrace, OSMTrace, TraceError, encode_text, from_record,
    load_trace,
    save_trace, trace, trace_bytes, trace_cem_steps, trace_text,
)

FAMILY = {"osm-rnn": OSMTrace, "osmformer": OSMTrace, "cem": CEMTrace, "grassmann": GrassmannTrace}


# ------------------------------------------------------------------------------------------------ encoding

def test_encode_text_shape_and_unknown_characters():
    ids = encode_text(VOCAB, "soft §")
    assert ids.shape == (1, 6) and ids.dtype == torch.long
    assert ids[0, -1].item() == VOCAB.unk_id  # '§' is not in the vocabulary: unknown token, not dropped


@pytest.mark.parametrize("text", ["", "x" * (MAX_TEXT_CHARS + 1)])
def test_encode_text_rejects_empty_and_too_long(text):
    with pytest.raises(TraceError) as err:
        encode_text(VOCAB, text)
    assert isinstance(err.value, ValueError)
    assert ("empty" in str(err.value)) or (f"{MAX_TEXT_CHARS:,}" in str(err.value))


def test_encode_text_accepts_the_limit_and_rejects_non_strings():
    assert encode_text(VOCAB, "a" * MAX_TEXT_CHARS).shape == (1, MAX_TEXT_CHARS)
    with pytest.raises(TraceError):
        encode_text(VOCAB, 123)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------ tracing

@pytest.mark.parametrize("kind", sorted(CONFIGS))
def test_trace_every_kind(kind):
    model = small_model(kind)
    tokens = encode_text(VOCAB, TEXT)
    model.train()
    tr = trace(model, tokens, vocab=VOCAB, text=TEXT)
    assert model.training, "trace must restore the model's mode"
    assert isinstance(tr, FAMILY.get(kind, BaselineTrace))
    assert tr.kind == kind and tr.n_positions == len(TEXT)
    assert tr.labels[6] == "␣" and tr.labels[0] == "R" and tr.labels[24] == "↵"
    model.eval()
    with torch.no_grad():
        expected = model(tokens)[0].numpy()
    np.testing.assert_allclose(tr.logits, expected, rtol=1e-5, atol=1e-5)
    if isinstance(tr, OSMTrace):
        assert tr.states.shape[1:] == (len(TEXT), 3, 3)
        assert tr.group["name"] == model.group.name and tr.group["d"] == 3
        assert tr.get_group() == model.group
    if isinstance(tr, CEMTrace):
        assert tr.energies.shape == (2, 2, 3, len(TEXT)) and tr.recursion_steps == 2
        np.testing.assert_allclose(tr.energy_change()[:, :, 0], 0)
    if isinstance(tr, GrassmannTrace):
        assert tr.plucker_mask.dtype == bool and tr.rank == 4
        assert "plucker_norm" in tr.extras  # extra record keys are kept
    if kind in ("transformer", "llama", "grassmann-attn", "cem"):
        w = tr.attention_weights(0)
        np.testing.assert_allclose(w.sum(-1), 1, atol=1e-5)
        assert np.allclose(np.triu(w, 1), 0)


def test_block_group_options_survive_the_file(tmp_path):
    tr = trace_text(small_model("osmformer", group="O-block", d=4, block=2), VOCAB, "soft what")
    assert tr.group == {"name": "O-block", "d": 4, "options": {"block": 2}}
    back = load_trace(trace_bytes(tr))
    assert back.get_group() == tr.get_group()


def test_trace_text_and_token_shapes():
    model = small_model("osm-rnn")
    tr = trace_text(model, VOCAB, "soft")
    assert tr.text == "soft" and tr.labels == ["s", "o", "f", "t"]
    tr1 = trace(model, encode_text(VOCAB, "soft")[0])  # a [T] vector is accepted, labels fall back to ids
    assert tr1.labels[0].startswith("#")
    with pytest.raises(TraceError):
        trace(model, torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(TraceError):
        trace(model, torch.zeros(1, 0, dtype=torch.long))
    with pytest.raises(TraceError):
        trace_text(model, VOCAB, "ab" * 1100)


def test_trace_refuses_positions_past_a_learned_position_table():
    model = small_model("grassmann", max_len=16)
    with pytest.raises(TraceError, match="at most 16"):
        trace(model, torch.zeros(1, 20, dtype=torch.long))


def test_trace_cem_steps_changes_only_inference_recursion():
    model = small_model("cem")
    tokens = encode_text(VOCAB, TEXT[:12])
    before = dict(model.config)
    base = trace(model, tokens)
    tr4 = trace_cem_steps(model, tokens, 4)
    assert tr4.energies.shape[2] == 5 and tr4.recursion_steps == 4
    assert base.recursion_steps == 2
    assert model.config == before, "the helper must restore the config"
    # the first steps of a longer recursion are the same iterates as the shorter run's
    np.testing.assert_allclose(tr4.energies[0, 0, :3], base.energies[0, 0, :3], rtol=1e-5, atol=1e-5)
    with pytest.raises(TraceError):
        trace_cem_steps(model, tokens, 0)
    with pytest.raises(TraceError):
        trace_cem_steps(small_model("osm-rnn"), tokens, 2)


# ------------------------------------------------------------------------------------------------ file format

def _assert_same(a, b):
    assert type(a) is type(b)
    assert a.kind == b.kind and a.labels == b.labels and a.text == b.text and a.config == b.config
    np.testing.assert_array_equal(a.tokens, b.tokens)
    fa, fb = a.array_fields(), b.array_fields()
    assert fa.keys() == fb.keys()
    for k in fa:
        assert fa[k].dtype == fb[k].dtype, k
        np.testing.assert_array_equal(fa[k], fb[k])
    assert a.extras.keys() == b.extras.keys()
    for k in a.extras:
        np.testing.assert_array_equal(a.extras[k], b.extras[k])
    assert getattr(a, "group", None) == getattr(b, "group", None)


@pytest.mark.parametrize("kind", ["osm-rnn", "osmformer", "cem", "grassmann", "transformer", "lstm"])
def test_save_load_round_trip(kind, tmp_path):
    tr = trace(small_model(kind), encode_text(VOCAB, TEXT), vocab=VOCAB, text=TEXT)
    path = tmp_path / "t.npz"
    save_trace(tr, path)
    back = load_trace(path)
    _assert_same(tr, back)
    if kind == "osmformer":
        assert np.iscomplexobj(back.states)  # U(d) states stay complex
    _assert_same(tr, load_trace(trace_bytes(tr)))  # bytes (download button) round trip
    buf = io.BytesIO()
    save_trace(tr, buf)
    buf.seek(0)
    _assert_same(tr, load_trace(buf))


def test_load_rejects_bad_files(tmp_path):
    tr = trace(small_model("osm-rnn"), encode_text(VOCAB, "soft"))
    # a pickled object array inside the npz is refused, not unpickled
    evil = tmp_path / "evil.npz"
    np.savez(evil, __meta__=np.array("{}"), tokens=np.array([1]), logits=np.array([object()], dtype=object))
    with pytest.raises(TraceError):
        load_trace(evil)
    # newer format version
    data = dict(np.load(io.BytesIO(trace_bytes(tr)), allow_pickle=False))
    meta = json.loads(str(data["__meta__"]))
    meta["format_version"] = 999
    newer = tmp_path / "newer.npz"
    np.savez(newer, **{**data, "__meta__": np.array(json.dumps(meta))})
    with pytest.raises(TraceError, match="newer"):
        load_trace(newer)
    # no metadata, not an npz, missing family arrays
    nometa = tmp_path / "nometa.npz"
    np.savez(nometa, tokens=np.array([1]))
    with pytest.raises(TraceError, match="__meta__"):
        load_trace(nometa)
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip file")
    with pytest.raises(TraceError):
        load_trace(junk)
    lost = tmp_path / "lost.npz"
    np.savez(lost, **{k: v for k, v in data.items() if k != "state_data"})
    with pytest.raises(TraceError):
        load_trace(lost)
    with pytest.raises(FileNotFoundError):
        load_trace(tmp_path / "missing.npz")


@given(T=st.integers(1, 9), d=st.integers(1, 4), L=st.integers(1, 3),
       dtype=st.sampled_from(["float32", "float64", "complex64", "complex128"]), seed=st.integers(0, 99),
       text=st.text(min_size=0, max_size=9))
def test_round_trip_property(T, d, L, dtype, seed, text):
    """Any OSM-shaped record (real or complex states of any size) survives save/load bit for bit."""
    rng = np.random.default_rng(seed)
    states = rng.standard_normal((L, T, d, d))
    if dtype.startswith("complex"):
        states = states + 1j * rng.standard_normal((L, T, d, d))
    rec = {"logits": rng.standard_normal((T, 5)).astype(np.float32), "states": states.astype(dtype),
           "extra_thing": rng.integers(0, 9, (T,))}
    labels = [f"{c}" for c in (text + "x" * T)[:T]]
    tr = from_record(rec, "osm-rnn", np.arange(T), labels=labels, config={"d": d, "nested": {"a": [1, 2]}},
                     text=text, group={"name": "U", "d": d, "options": {}})
    back = load_trace(trace_bytes(tr))
    _assert_same(tr, back)
    # stored compactly: float64 -> float32, complex128 -> complex64
    assert back.states.dtype == {"float64": np.float32, "complex128": np.complex64}.get(dtype, np.dtype(dtype))


def test_save_refuses_object_arrays(tmp_path):
    tr = trace(small_model("lstm"), encode_text(VOCAB, "soft"))
    tr.extras["bad"] = np.array([object()], dtype=object)
    with pytest.raises(TraceError, match="object dtype"):
        save_trace(tr, tmp_path / "x.npz")


# ------------------------------------------------------------------------------------------------ CLI

def test_cli_trace_end_to_end(tmp_path, capsys):
    from geomlab.checkpoints import io as checkpoint
    from geomlab.commands.cli import main

    model = small_model("cem")
    stem = tmp_path / "cem"
    checkpoint.save(stem, model, VOCAB, {"corpus": "test"})
    out = tmp_path / "out" / "trace"
    assert main(["trace", str(stem), "--text", TEXT, "--out", str(out)]) == 0
    tr = load_trace(tmp_path / "out" / "trace.npz")
    assert isinstance(tr, CEMTrace) and tr.text == TEXT and tr.n_positions == len(TEXT)
    ref = trace(checkpoint.load(stem).model, encode_text(VOCAB, TEXT))
    np.testing.assert_allclose(tr.energies, ref.energies, rtol=1e-6, atol=1e-6)
    assert main(["trace", str(stem), "--text", TEXT[:10], "--out", str(tmp_path / "t4.npz"), "--steps", "4",
                 "--html", str(tmp_path / "html")]) == 0
    assert load_trace(tmp_path / "t4.npz").recursion_steps == 4
    assert (tmp_path / "html" / "energy_descent.html").exists()
    src = tmp_path / "speech.txt"
    src.write_text(TEXT[:20], encoding="utf-8")
    assert main(["trace", str(stem), "--text-file", str(src), "--out", str(tmp_path / "f.npz")]) == 0
    assert load_trace(tmp_path / "f.npz").text == TEXT[:20]
    capsys.readouterr()
    assert main(["trace", str(stem), "--text", "", "--out", str(tmp_path / "e.npz")]) == 2
    assert "empty" in capsys.readouterr().err


# ---------------------------------------------------------------- scoring predictions (Compare's surprisal)
from geomlab.data.word_problem import get_group  # noqa: E402
from geomlab.trace import is_word_problem, score_predictions  # noqa: E402


def _trace_of(tokens, logits):
    return BaselineTrace(kind="lstm", tokens=np.asarray(tokens, dtype=np.int64),
                         labels=[str(t) for t in tokens], logits=np.asarray(logits, dtype=np.float32))


def _manual_bits(logits, t, target):
    z = logits[t].astype(np.float64)
    return -(z[target] - z.max() - np.log(np.exp(z - z.max()).sum())) / np.log(2)


@given(st.lists(st.integers(0, 5), min_size=1, max_size=12), st.integers(0, 2**31 - 1))
def test_word_problem_scores_the_running_product_at_every_position(ids, seed):
    task = {"task": "word-problem", "group": "S3", "length": 8}
    logits = np.random.default_rng(seed).normal(size=(len(ids), 6)).astype(np.float32)
    s = score_predictions(_trace_of(ids, logits), task)
    want = get_group("S3").running_product(torch.tensor(ids)).numpy()
    assert s.what == "running product" and np.array_equal(s.target, want)
    assert not np.isnan(s.bits).any()  # position 0 is scored too
    for t, label in enumerate(want):
        assert s.bits[t] == pytest.approx(_manual_bits(logits, t, label), abs=1e-6)
        assert s.correct[t] == float(np.argmax(logits[t]) == label)


def test_a_perfect_word_problem_model_scores_near_zero_bits_and_next_token_scoring_would_not():
    ids = [1, 3, 2, 5, 4, 1, 0, 2]
    labels = get_group("S3").running_product(torch.tensor(ids)).numpy()
    logits = np.full((len(ids), 6), -10.0)
    logits[np.arange(len(ids)), labels] = 10.0
    tr = _trace_of(ids, logits)
    wp = score_predictions(tr, {"task": "word-problem", "group": "S3"})
    assert wp.mean_bits < 1e-6 and wp.accuracy == 1.0
    lm = score_predictions(tr)  # the language-model reading of the same outputs is badly wrong
    assert lm.what == "next token" and lm.mean_bits > 20


def test_language_model_scores_token_t_with_the_output_at_t_minus_1():
    ids = [0, 3, 1, 2, 2]
    logits = np.random.default_rng(0).normal(size=(5, 4))
    s = score_predictions(_trace_of(ids, logits), {"task": "text"})
    assert np.isnan(s.bits[0]) and s.target[0] == -1 and np.isnan(s.correct[0])
    for t in range(1, 5):
        assert s.bits[t] == pytest.approx(_manual_bits(logits, t - 1, ids[t]), abs=1e-6)
    assert s.accuracy == pytest.approx(np.nanmean(s.correct))
    single = score_predictions(_trace_of([2], logits[:1]))
    assert np.isnan(single.mean_bits) and np.isnan(single.accuracy)


def test_word_problem_scoring_rejects_a_model_of_the_wrong_size():
    assert is_word_problem({"task": "word-problem", "group": "S5"})
    assert not is_word_problem({"task": "text"}) and not is_word_problem(None) and not is_word_problem("S5")
    with pytest.raises(TraceError, match="120 outputs"):
        score_predictions(_trace_of([0, 1], np.zeros((2, 6))), {"task": "word-problem", "group": "S5"})


# ---------------------------------------------------------------- trace v2: compact, lazy, version 1 compatible
import pathlib  # noqa: E402

from geomlab.checkpoints import io as _ckpt  # noqa: E402
from geomlab.trace import FORMAT_VERSION, trace_json  # noqa: E402

FIXTURES = pathlib.Path(__file__).parents[1] / "fixtures" / "trace_v1"
ASSETS = pathlib.Path(__file__).parents[2] / "assets" / "checkpoints"
V1_TEXT = "ROMEO: But soft, what light through yon"  # the text the version-1 fixtures were traced on
V1_NAMES = ["osmformer-o-linear", "osmformer-torus", "osmformer-u", "osm-rnn-o", "cem-t2", "grassmann",
            "transformer-alibi", "lstm"]


@pytest.mark.parametrize("name", V1_NAMES)
def test_compact_trace_shows_what_the_version_1_trace_showed(name):
    """The fixtures are version-1 traces (dense T x T maps, full tangents) written by the previous geomlab
    from the bundled checkpoints; the compact trace of the same checkpoint and text draws the same numbers."""
    old = dict(np.load(FIXTURES / f"{name}.npz", allow_pickle=False))
    kept = FIXTURES / "checkpoints" / f"{name}-tinyshakespeare.json"  # the weights the fixture was traced from,
    ck = _ckpt.load(kept if kept.is_file() else ASSETS / f"{name}-tinyshakespeare")  # kept when retrained
    new = trace_text(ck.model, ck.vocab, V1_TEXT)
    np.testing.assert_allclose(new.logits, old["logits"], atol=2e-5)
    if "attention" in old:
        A = old.get("attention_heads", old["attention"])
        A = A[:, None] if A.ndim == 3 else A
        np.testing.assert_allclose(np.asarray(new.attention), A, atol=5e-6)
    if "similarity" in old:
        np.testing.assert_allclose(np.asarray(new.similarity), old["similarity"], atol=5e-5)
    if "states" in old:
        # the same numbers to float32 rounding: the torus OSMFormer is traced on its diagonals
        # (OSMFormer.trace_record), and another CPU's kernels round the matrix products differently
        np.testing.assert_allclose(new.states, old["states"], atol=2e-6, rtol=0)
        np.testing.assert_array_equal(new.inputs, old["inputs"])
        for key, mixed in (("tangents", True), ("tangents_raw", False)):
            exact = np.sqrt((np.abs(old[key]) ** 2).sum(axis=(-2, -1)))
            np.testing.assert_allclose(new.tangent_norms(mixed), exact, rtol=1e-5, atol=1e-6)
            scale = np.abs(old[key]).max()
            assert np.abs(getattr(new, key) - old[key]).max() <= 2e-3 * scale  # float16 coordinates
    if "plucker" in old:
        np.testing.assert_allclose(np.asarray(new.plucker), old["plucker"], atol=1e-6)
        assert new.plucker_data is None  # recomputed, not stored
    if "energies" in old:
        np.testing.assert_allclose(new.energies, old["energies"], rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("name", V1_NAMES)
def test_version_1_files_load_and_round_trip_as_version_2(name):
    old_raw = dict(np.load(FIXTURES / f"{name}.npz", allow_pickle=False))
    assert json.loads(str(old_raw["__meta__"]))["format_version"] == 1
    tr = load_trace(FIXTURES / f"{name}.npz")
    if "attention" in old_raw:
        A = old_raw.get("attention_heads", old_raw["attention"])
        np.testing.assert_array_equal(np.asarray(tr.attention), A[:, None] if A.ndim == 3 else A)
    back = load_trace(trace_bytes(tr))
    meta = json.loads(str(np.load(io.BytesIO(trace_bytes(tr)))["__meta__"]))
    assert meta["format_version"] == FORMAT_VERSION == 2
    np.testing.assert_array_equal(back.logits, tr.logits)
    if tr.has_attention:
        np.testing.assert_array_equal(np.asarray(back.attention), np.asarray(tr.attention))


def test_attention_rows_are_rows_of_the_full_map():
    ck = _ckpt.load(ASSETS / "cem-t2-tinyshakespeare")
    tr = trace_text(ck.model, ck.vocab, V1_TEXT * 3)
    full = np.asarray(tr.attention)
    rows = np.array([0, 5, 40, len(tr.tokens) - 1])
    for head in (None, 2):
        want = full[1].mean(0)[rows] if head is None else full[1, head][rows]
        np.testing.assert_allclose(tr.attention_rows(1, rows, head), want, atol=1e-12)
    np.testing.assert_allclose(tr.attention_rows(1, rows).sum(-1), 1, atol=1e-9)
    with pytest.raises(TraceError):
        tr.attention_rows(9, rows)
    with pytest.raises(TraceError):
        tr.attention_rows(0, [10_000])


def test_torus_states_are_stored_as_their_diagonals():
    ck = _ckpt.load(ASSETS / "osmformer-torus-tinyshakespeare")
    tr = trace_text(ck.model, ck.vocab, V1_TEXT)
    d = ck.model.config["d"]
    assert isinstance(tr, OSMTrace) and tr.diagonal and tr.state_data.shape == (2, len(V1_TEXT), d)
    assert tr.states.shape == (2, len(V1_TEXT), d, d)
    assert not np.any(tr.states * (1 - np.eye(d)))


@pytest.mark.slow
def test_every_bundled_model_traces_the_longest_text_in_at_most_16_mb():
    text = ("ROMEO: But soft, what light through yonder window breaks? It is the east.\n" * 40)[:MAX_TEXT_CHARS]
    for path in sorted(ASSETS.glob("*.json")):
        ck = _ckpt.load(path)
        if ck.vocab is None or (ck.card or {}).get("task", {}) and "word-problem" in str(ck.card.get("task")):
            continue
        tr = trace_text(ck.model, ck.vocab, text)
        assert tr.n_positions == MAX_TEXT_CHARS
        assert tr.nbytes <= 16 * 2**20, (path.name, tr.nbytes)
        assert len(trace_bytes(tr)) <= 16 * 2**20


def test_trace_json_is_strict_and_windowed():
    ck = _ckpt.load(ASSETS / "osmformer-u-tinyshakespeare")
    tr = trace_text(ck.model, ck.vocab, V1_TEXT)
    tr.logits[3, 0] = np.nan  # a non-finite value becomes null, never a bare NaN
    doc = json.loads(trace_json(tr, start=10, stop=30), parse_constant=lambda c: pytest.fail(f"bare {c}"))
    assert doc["window"] == [10, 30] and len(doc["tokens"]) == 20
    assert np.asarray(doc["arrays"]["attention"]).shape == (2, 20, 20)
    assert np.asarray(doc["arrays"]["similarity"]).shape == (2, 20, 20)
    whole = json.loads(trace_json(tr))
    assert whole["arrays"]["logits"][3][0] is None
    assert len(json.loads(trace_json(tr, max_positions=8))["tokens"]) == 8
    with pytest.raises(TraceError):
        trace_json(tr, start=5, stop=5)


def test_traced_text_is_normalised_like_every_other_text():
    """A byte-order mark and Windows line ends give the same trace as the plain text."""
    model = small_model("lstm")
    plain = trace_text(model, VOCAB, "soft\nsun\n")
    windows = trace_text(model, VOCAB, "\ufeffsoft\r\nsun\r")
    np.testing.assert_array_equal(plain.tokens, windows.tokens)
    assert windows.text == "soft\nsun\n" and windows.labels == plain.labels


def test_unprintable_characters_are_labelled_as_python_writes_them():
    """Token labels: whitespace as symbols, other unprintable characters as their Python escapes (a zero-width
    space is ``\\u200b``, not ``\\x200b``, which reads as ``\\x20`` then ``0b``)."""
    from geomlab.trace.tracing import visible

    assert visible(" \n\t") == "␣↵⇥"
    assert visible("a\u200b") == "a\\u200b" and visible("\x7f") == "\\x7f" and visible("\U000e0001") == "\\U000e0001"
    assert visible("é☃") == "é☃"  # printable characters stay as they are
    # a lone combining mark on the dotted circle (quoted or after a separator it would sit on that character)
    assert visible("\u0301") == "\u25cc\u0301" and visible("e\u0301") == "e\u0301"
