"""Batched runs of texts: padding never changes a text's own positions (every kind, every cached value)."""

import pytest
import torch

from geomlab.data import DataError
from geomlab.whatif import PAD_ID, encode_batch, run_with_cache, run_with_hooks
from tests.helpers.models import MODELS, TEXT, VOCAB, get_model

TEXTS = [TEXT[o:o + n] for o, n in [(0, 9), (3, 14), (5, 2), (1, 11), (10, 6), (0, 1), (7, 13), (2, 4)]]


def test_encode_batch_pads_on_the_right_with_pad_id_and_reports_lengths():
    tokens, lengths = encode_batch(VOCAB, ["ab", "soft", "a"])
    assert tokens.dtype == torch.long and tokens.shape == (3, 4)
    assert lengths.tolist() == [2, 4, 1]
    assert tokens[1].tolist() == VOCAB.encode("soft").tolist()
    assert tokens[0, 2:].tolist() == [PAD_ID, PAD_ID] and tokens[2, 1:].tolist() == [PAD_ID] * 3


@pytest.mark.parametrize("bad", [[], ["", "a"], "just a string"])
def test_encode_batch_refuses_empty_lists_and_empty_texts(bad):
    with pytest.raises(ValueError):
        encode_batch(VOCAB, bad)
    with pytest.raises(DataError):
        encode_batch(VOCAB, bad)


def test_unknown_characters_read_as_the_unknown_token_with_the_apps_note(capsys):
    """By default a character the vocabulary lacks reads as its unknown token, as the CLI reads it (same ids),
    with the app's sentence as a warning naming the text; ``unknown="error"`` refuses, ``"ignore"`` is quiet."""
    import warnings

    from geomlab.commands import text_tokens

    with pytest.warns(UserWarning) as caught:
        tokens, lengths = encode_batch(VOCAB, ["ab", "so\u4e2d"])
    assert [str(w.message) for w in caught] == [
        "text 1: 1 character not in this checkpoint's vocabulary ('\u4e2d' (U+4E2D)) read as the unknown token \ufffd"]
    assert tokens[1, 2] == VOCAB.unk_id and lengths.tolist() == [2, 3]
    assert tokens[1].tolist() == text_tokens(VOCAB, "so\u4e2d").tolist()
    assert "note: 1 character not in this checkpoint's vocabulary" in capsys.readouterr().err
    with pytest.raises(DataError, match="\u4e2d"):
        encode_batch(VOCAB, ["ab", "so\u4e2d"], unknown="error")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert torch.equal(encode_batch(VOCAB, ["ab", "so\u4e2d"], unknown="ignore")[0], tokens)
    with pytest.raises(DataError, match="unknown= must be one of 'warn', 'ignore', 'error'"):
        encode_batch(VOCAB, ["ok"], unknown="unk")


def test_a_vocabulary_without_an_unknown_token_refuses_whatever_unknown_says():
    from geomlab.data.vocab import Vocab

    symbols = Vocab.from_symbols(["a", "b"])
    for unknown in ("warn", "ignore", "error"):
        with pytest.raises(DataError, match="Unknown symbols for this checkpoint: 'c'"):
            encode_batch(symbols, ["a b c"], unknown=unknown)


def test_texts_need_a_vocabulary_and_tensors_must_be_integer():
    model = get_model("lstm")
    with pytest.raises(ValueError, match="vocab"):
        run_with_cache(model, "soft")
    with pytest.raises(ValueError):
        run_with_cache(model, torch.zeros(3))


def _own_positions(batch_value: torch.Tensor, single_value: torch.Tensor) -> torch.Tensor:
    """The batch value cut to the single run's shape: every axis where they differ is a position axis."""
    index = tuple(slice(0, s) for s in single_value.shape)
    return batch_value[index]


CASES = [(name, None) for name in MODELS] + [("osmformer-T4", "diag")]


@pytest.mark.parametrize("name,names", CASES)
def test_a_padded_batch_equals_single_runs_at_each_texts_positions(name, names):
    model = get_model(name).eval()
    select = (lambda n: n.startswith("diag.")) if names == "diag" else None
    with torch.no_grad():
        logits, cache = run_with_cache(model, TEXTS, select, vocab=VOCAB)
        _, lengths = encode_batch(VOCAB, TEXTS)
        assert logits.shape[:2] == (len(TEXTS), int(lengths.max()))
        for b, text in enumerate(TEXTS):
            one_logits, one = run_with_cache(model, text, select, vocab=VOCAB)
            n = int(lengths[b])
            assert one_logits.shape[1] == n
            torch.testing.assert_close(logits[b, :n], one_logits[0], atol=2e-5, rtol=1e-4)
            assert set(one) == set(cache) and cache
            for key, value in one.items():
                torch.testing.assert_close(_own_positions(cache[key][b], value[0]), value[0], atol=2e-5,
                                           rtol=1e-4, equal_nan=True, msg=lambda m: f"{name} {key}: {m}")


def test_per_step_hook_points_are_compared_too():
    model = get_model("osm-rnn-SO3").eval()
    _, cache = run_with_cache(model, TEXTS[:2], ["hook_state"], vocab=VOCAB)
    assert cache["hook_state"].shape[:2] == (2, 14)  # steps on axis 1, one per position


def test_run_with_hooks_takes_a_text_and_a_replacement_carries_on():
    model = get_model("transformer").eval()
    plain = run_with_hooks(model, "soft", [], vocab=VOCAB)
    assert torch.equal(plain, model(VOCAB.encode("soft")[None]))
    name = next(n for n in model.hook_points() if n.endswith("hook_resid_post") or "resid" in n)
    changed = run_with_hooks(model, torch.as_tensor(VOCAB.encode("soft")), [(name, lambda v, h: v * 0)])
    assert changed.shape == plain.shape and not torch.allclose(changed, plain)
