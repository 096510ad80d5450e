"""Input text normalisation, resume with another vocabulary, texts shorter than the context.

Every way a text enters geomlab (a command-line file, a registered corpus, an uploaded or pasted text in the
app) goes through one backend function, :func:`geomlab.data.vocab.normalize_text`: no byte-order mark, ``\\n``
line ends. Resuming on a text with another vocabulary is refused before any step with the checkpoint
untouched; a training split shorter than the context is refused with the split and the length needed.
"""

from __future__ import annotations

import hashlib

import pytest
import torch
from hypothesis import given, strategies as st

from geomlab.checkpoints import io as ckpt
from geomlab.live import runner as live
from geomlab.commands.cli import main
from geomlab.data import LMTask, corpora, corpus_from_file, corpus_from_text
from geomlab.data.errors import DataError
from geomlab.data.vocab import decode_text, normalize_text, vocab_mismatch
from geomlab.models import build_model
from geomlab.training.trainer import TrainConfig, Trainer

BOM = "\ufeff"
# printable text with line ends; no "\r" of its own (the test adds the Windows/old-Mac line ends)
lines = st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters=BOM),
                         max_size=30), min_size=1, max_size=12)


def _unix(ls: list[str]) -> str:
    return "\n".join(ls) + "\n"


@given(lines, st.sampled_from(["\n", "\r\n", "\r"]), st.booleans())
def test_normalize_text_is_the_universal_newline_form(ls, eol, bom):
    raw = (BOM if bom else "") + eol.join(ls) + eol
    got = normalize_text(raw)
    assert got == _unix(ls) and "\r" not in got and not got.startswith(BOM)
    assert normalize_text(got) == got  # idempotent
    assert decode_text(raw.encode("utf-8")) == got
    # a byte-order mark is only dropped at the start; inside the text it is a character like any other
    assert normalize_text("a" + BOM + "b") == "a" + BOM + "b"


@given(lines, st.sampled_from(["\r\n", "\r"]))
def test_file_upload_and_paste_give_one_vocabulary(tmp_path_factory, ls, eol):
    ls = ls + ["a line long enough that every generated text makes a corpus of at least 100 characters" * 2]
    unix = _unix(ls)
    windows = BOM + eol.join(ls) + eol
    path = tmp_path_factory.mktemp("t") / "win.txt"
    path.write_bytes(windows.encode("utf-8"))
    from_file = corpus_from_file(path)
    pasted = corpus_from_text(windows)               # the app's text box / upload (decoded with "utf-8")
    clean = corpus_from_text(unix)
    for c in (from_file, pasted):
        assert (c.train, c.valid, c.test) == (clean.train, clean.valid, clean.test)
        v = c.build_vocab()
        assert BOM not in v and "\r" not in v and v == clean.build_vocab()


def test_app_text_and_cli_file_build_the_same_task(tmp_path, tiny_text):
    windows = BOM + tiny_text.replace("\n", "\r\n")
    path = tmp_path / "bom.txt"
    path.write_bytes(windows.encode("utf-8"))
    app_task = live.build_task(live.RunSpec(data="text", text=windows))
    cli_task = LMTask(corpora.resolve_corpus(str(path)))
    assert app_task.vocab == cli_task.vocab == LMTask(corpus_from_text(tiny_text)).vocab
    assert "\r" not in app_task.vocab and BOM not in app_task.vocab
    assert torch.equal(app_task.tokens("train"), cli_task.tokens("train"))


def test_registered_corpus_file_with_bom_and_crlf(tmp_path, monkeypatch):
    text = "First Citizen:\nBefore we proceed any further, hear me speak.\n" * 20
    raw = (BOM + text.replace("\n", "\r\n")).encode("utf-8")
    rel = "tinyshakespeare/input.txt"
    (tmp_path / "data" / "tinyshakespeare").mkdir(parents=True)
    (tmp_path / "data" / rel).write_bytes(raw)
    monkeypatch.setitem(corpora.FILES, rel, corpora.RemoteFile("https://example.invalid/x",
                                                               hashlib.sha256(raw).hexdigest()))
    monkeypatch.setenv("GEOMLAB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("GEOMLAB_CACHE_DIR", str(tmp_path / "cache"))
    corpora._CACHE.clear()
    try:
        c = corpora.load_corpus("tinyshakespeare", download=False)
        assert c.train + c.valid + c.test == text
        assert BOM not in c.build_vocab() and "\r" not in c.build_vocab()
    finally:
        corpora._CACHE.clear()


# ------------------------------------------------------------------------------------- resume, vocabulary
def _cli_train(data, out, *extra):
    return main(["train", "--model", "lstm", "--config", "hidden=8", "--data", str(data), "--steps", "4",
                 "--batch-size", "2", "--seq-len", "8", "--eval-every", "2", "--eval-tokens", "50", "--out",
                 str(out), "--name", "run", "--quiet", *extra])


def _files(stem):
    return {p.name: p.read_bytes() for p in stem.parent.glob(stem.name + ".*")}


def test_resume_on_a_text_with_another_vocabulary_is_refused_and_leaves_the_checkpoint(tmp_path, tiny_text, capsys):
    a = tmp_path / "a.txt"
    a.write_text(tiny_text, encoding="utf-8")
    b = tmp_path / "b.txt"
    b.write_text("~ {}" * 10 + tiny_text, encoding="utf-8")
    out = tmp_path / "runs"
    assert _cli_train(a, out) == 0
    capsys.readouterr()
    before = _files(out / "run")
    code = main(["train", "--resume", str(out / "run"), "--data", str(b), "--steps", "8", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1
    assert "vocabulary" in err and "'~'" in err and "nothing was trained or written" in err
    assert _files(out / "run") == before  # checkpoint untouched
    # the same text, as a Windows file with a byte-order mark, is the same vocabulary: resuming works
    a_win = tmp_path / "a-win.txt"
    a_win.write_bytes((BOM + tiny_text.replace("\n", "\r\n")).encode("utf-8"))
    assert main(["train", "--resume", str(out / "run"), "--data", str(a_win), "--steps", "6", "--quiet"]) == 0
    assert ckpt.load(out / "run").card["steps"] == 6


def test_from_checkpoint_refuses_another_vocabulary(tmp_path, tiny_text):
    task = LMTask(corpus_from_text(tiny_text))
    torch.manual_seed(0)
    model = build_model({"kind": "lstm", "vocab_size": task.vocab_size, "hidden": 8})
    res = Trainer(model, task, TrainConfig(steps=2, batch_size=2, seq_len=8, eval_every=0, device="cpu",
                                           final_eval=False), out=tmp_path / "r").run()
    c = ckpt.load(res.checkpoint)
    other = LMTask(corpus_from_text("§" * 50 + tiny_text), vocab=c.vocab)  # encodes '§' as unknown
    with pytest.raises(ckpt.CheckpointError, match="vocabulary differs.*'§'"):
        Trainer.from_checkpoint(res.checkpoint, other)
    assert vocab_mismatch(c.vocab, c.vocab) == ""
    assert "another id order" in vocab_mismatch(c.vocab, type(c.vocab)(list(reversed(c.vocab.tokens))))


# ------------------------------------------------------------------------------------- short texts
def test_text_shorter_than_the_context_is_refused_with_the_length_needed(tmp_path, tiny_text, capsys):
    text = tiny_text[:150]  # train split: 135 characters
    task = LMTask(corpus_from_text(text))
    torch.manual_seed(0)
    model = build_model({"kind": "lstm", "vocab_size": task.vocab_size, "hidden": 8})
    with pytest.raises(DataError, match=r"training split .* has 135 characters.*seq_len=200 needs at least 201"
                                        r".*224 characters.*at most 134"):
        Trainer(model, task, TrainConfig(steps=2, batch_size=2, seq_len=200, device="cpu"), out=tmp_path / "x")
    assert not list(tmp_path.glob("x*"))
    with pytest.raises(DataError, match="needs at least 201"):
        task.sample_batch(2, 200, torch.Generator())
    # the command line: one line, exit 2, nothing written
    path = tmp_path / "short.txt"
    path.write_text(text, encoding="utf-8")
    out = tmp_path / "runs"
    code = main(["train", "--model", "lstm", "--config", "hidden=8", "--data", str(path), "--steps", "2",
                 "--seq-len", "200", "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "needs at least 201" in err and err.count("\n") == 1
    assert not list(out.glob("*")) if out.exists() else True
    # the app: refused when the run is created
    with pytest.raises(ValueError, match="needs at least 201"):
        live.LiveRun(live.RunSpec(data="text", text=text, seq_len=200, threads=1), work_dir=tmp_path / "w")


@given(n=st.integers(100, 260), seq_len=st.integers(2, 260))
def test_card_records_the_window_actually_trained(tmp_path_factory, n, seq_len):
    """Either refused, or every batch has the requested length and the card's tokens_seen is what was drawn."""
    text = ("ROMEO: But soft, what light through yonder window breaks?\n" * 6)[:n]
    task = LMTask(corpus_from_text(text))
    drawn = []
    original = task.sample_batch

    def counting(batch_size, length, generator):
        x, y = original(batch_size, length, generator)
        drawn.append(y.numel())
        assert x.shape[1] == length
        return x, y

    task.sample_batch = counting
    torch.manual_seed(0)
    model = build_model({"kind": "lstm", "vocab_size": task.vocab_size, "hidden": 4})
    cfg = TrainConfig(steps=2, batch_size=2, seq_len=seq_len, eval_every=0, device="cpu", final_eval=False)
    if len(task.tokens("train")) < seq_len + 1:
        with pytest.raises(DataError, match=f"needs at least {seq_len + 1}"):
            Trainer(model, task, cfg)
        return
    out = tmp_path_factory.mktemp("card") / "run"
    res = Trainer(model, task, cfg, out=out).run()
    card = ckpt.load(res.checkpoint).card
    assert card["seq_len"] == seq_len and card["tokens_seen"] == sum(drawn) == 2 * 2 * seq_len
