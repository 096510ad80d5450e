"""Tests for geomlab.data: vocabularies, corpora (fixtures + the real folder), tasks, evaluation windows."""

from __future__ import annotations

import hashlib
import itertools
import math
import urllib.error

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from geomlab.data import (
    CORPORA, DataError, LMTask, Vocab, corpus_from_file, corpus_from_text, eval_windows, load_corpus,
    make_task, sequence_nll, split_text,
)
from geomlab.data import corpora
from geomlab.data.vocab import CHAR_UNK, EOS, tokenize
from geomlab.data.word_problem import WordProblemTask, get_group


# ----------------------------------------------------------------------------------------------- vocab
def test_vocab_round_trip_and_order(tiny_text):
    v = Vocab.from_text(tiny_text)
    assert v.tokens[:-1] == sorted(set(tiny_text))
    assert v.tokens[-1] == CHAR_UNK and v.unk_id == v.size - 1
    ids = v.encode(tiny_text)
    assert ids.dtype == torch.long and ids.shape == (len(tiny_text),)
    assert v.decode(ids) == tiny_text
    assert Vocab.from_json(v.to_json()) == v


@given(st.text(min_size=1, max_size=200), st.text(max_size=50))
def test_vocab_unknown_characters_map_to_unk(train, other):
    v = Vocab.from_text(train)
    ids = v.encode(other)
    assert ids.numel() == len(other)  # never a silent drop
    decoded = v.decode(ids)
    expected = "".join(c if c in set(train) else CHAR_UNK for c in other)
    assert decoded == expected
    assert v.count_unknown(other) == sum(c not in set(train) and c != CHAR_UNK for c in other)


def test_vocab_errors():
    with pytest.raises(DataError):
        Vocab.from_text("")
    with pytest.raises(DataError):
        Vocab(["a", "a", CHAR_UNK])
    with pytest.raises(DataError):
        Vocab(["ab", CHAR_UNK])
    with pytest.raises(DataError):
        Vocab(["a"], unk="b")
    closed = Vocab.from_symbols(["x", "y"])
    assert closed.unk_id is None
    with pytest.raises(DataError, match="'z'"):
        closed.ids(["x", "z"])
    with pytest.raises(DataError):
        Vocab.from_text("abc").decode([99])
    with pytest.raises(DataError):
        Vocab.from_json({"nope": 1})


def test_word_vocab():
    text = " the cat sat \n the dog \n"
    assert tokenize(text, "word") == ["the", "cat", "sat", EOS, "the", "dog", EOS]
    v = Vocab.from_text(text, level="word")
    assert v.unk == "<unk>"
    ids = v.encode(" the bird sat \n")
    assert v.decode(ids) == "the <unk> sat\n"


# ----------------------------------------------------------------------------------------------- splits
@given(st.integers(0, 5000))
def test_split_text_is_contiguous_90_5_5(n):
    text = "".join(chr(97 + i % 26) for i in range(n))
    a, b, c = split_text(text)
    assert a + b + c == text
    assert len(a) == int(0.9 * n) and len(a) + len(b) == int(0.95 * n)


def test_tinyshakespeare_split_sizes_match_tfds():
    # the TFDS counts quoted in SOURCES.md for the 1,115,394-character file
    a, b, c = split_text("x" * 1_115_394)
    assert (len(a), len(b), len(c)) == (1_003_854, 55_770, 55_770)


def test_user_text_too_short_or_empty():
    with pytest.raises(DataError, match="empty"):
        corpus_from_text("   \n")
    with pytest.raises(DataError, match="only 5 characters"):
        corpus_from_text("hello")
    with pytest.raises(DataError):
        split_text("abc", (0.5, 0.6, -0.1))


def test_corpus_from_file(tmp_path, tiny_text):
    p = tmp_path / "my text.txt"
    p.write_text(tiny_text, encoding="utf-8")
    c = corpus_from_file(p)
    assert c.train + c.valid + c.test == tiny_text
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xff\xfe" * 100)
    with pytest.raises(DataError, match="UTF-8"):
        corpus_from_file(bad)
    with pytest.raises(DataError, match="does not exist"):
        corpus_from_file(tmp_path / "missing.txt")


# ----------------------------------------------------------------------------------------------- corpora
PTB_CHAR = " a e r _ b a n k n o t e \n t h e _ c a t \n "


@pytest.fixture
def fake_data(tmp_path, monkeypatch):
    """A data folder laid out like shared/data with small files, checksums patched to match, an empty cache
    and no network."""
    root = tmp_path / "data"
    files = {
        "tinyshakespeare/input.txt": "First Citizen:\nBefore we proceed any further, hear me speak.\n" * 20,
        "ptb/char/ptb.char.train.txt": PTB_CHAR * 5,
        "ptb/char/ptb.char.valid.txt": PTB_CHAR,
        "ptb/char/ptb.char.test.txt": PTB_CHAR,
        "ptb/ptb.train.txt": " aer banknote \n the cat \n" * 5,
        "ptb/ptb.valid.txt": " the <unk> \n",
        "ptb/ptb.test.txt": " the dog \n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
        monkeypatch.setitem(corpora.FILES, rel, corpora.RemoteFile(
            f"https://example.invalid/{rel}", hashlib.sha256(text.encode()).hexdigest()))
    monkeypatch.setenv("GEOMLAB_DATA_DIR", str(root))
    monkeypatch.setenv("GEOMLAB_CACHE_DIR", str(tmp_path / "cache"))

    def no_network(url, timeout=60.0):
        raise urllib.error.URLError("offline (test)")

    monkeypatch.setattr(corpora, "_fetch", no_network)
    corpora._CACHE.clear()
    return root, files


def test_load_tinyshakespeare_fixture(fake_data):
    root, files = fake_data
    c = load_corpus("tinyshakespeare")
    text = files["tinyshakespeare/input.txt"]
    assert (c.train, c.valid, c.test) == split_text(text)
    assert c.source["corpus"] == "tinyshakespeare"


def test_ptb_char_is_decoded(fake_data):
    c = load_corpus("ptb-char")
    assert c.valid == "aer banknote\nthe cat\n"
    assert c.train == c.valid * 5
    v = c.build_vocab()
    assert "_" not in v and " " in v


def test_ptb_word_level(fake_data):
    c = load_corpus("ptb")
    task = LMTask(c)
    assert task.vocab.level == "word" and task.metric == "ppl"
    assert task.tokens("valid").tolist() == task.vocab.ids(["the", "<unk>", EOS])


def test_checksum_mismatch_is_refused(fake_data):
    root, _ = fake_data
    (root / "tinyshakespeare/input.txt").write_text("tampered " * 50, encoding="utf-8")
    with pytest.raises(DataError, match="sha256"):
        load_corpus("tinyshakespeare")


def test_missing_file_offline_says_where_to_put_it(fake_data, tmp_path):
    root, _ = fake_data
    (root / "ptb/char/ptb.char.test.txt").unlink()
    with pytest.raises(DataError) as err:
        load_corpus("ptb-char")
    msg = str(err.value)
    assert "ptb/char/ptb.char.test.txt" in msg and "GEOMLAB_DATA_DIR" in msg and "example.invalid" in msg


def test_download_goes_to_cache_and_is_verified(fake_data, monkeypatch, tmp_path):
    root, files = fake_data
    rel = "tinyshakespeare/input.txt"
    (root / rel).unlink()
    payload = files[rel].encode()
    calls = []
    monkeypatch.setattr(corpora, "_fetch", lambda url, timeout=60.0: calls.append(url) or payload)
    c = load_corpus("tinyshakespeare")
    assert calls == [f"https://example.invalid/{rel}"]
    cached = tmp_path / "cache" / "data" / rel
    assert cached.read_bytes() == payload
    assert c.train + c.valid + c.test == files[rel]
    # a second load uses the cache, not the network
    corpora._CACHE.clear()
    load_corpus("tinyshakespeare")
    assert len(calls) == 1
    # a corrupted download is not saved
    cached.unlink()
    monkeypatch.setattr(corpora, "_fetch", lambda url, timeout=60.0: b"corrupt")
    with pytest.raises(DataError, match="not saved"):
        load_corpus("tinyshakespeare")
    assert not cached.exists()


def test_unknown_corpus_lists_known():
    with pytest.raises(DataError, match="tinyshakespeare"):
        load_corpus("nope")
    with pytest.raises(DataError):
        make_task("definitely-not-a-corpus-or-file")


@pytest.mark.data
def test_real_corpora_checksums_and_sizes():
    expected = {"tinyshakespeare": (1_003_854, 55_770, 55_770),
                "ptb-char": (5_017_482, 393_042, 442_423)}  # SOURCES.md: symbols + line ends
    for name, sizes in expected.items():
        c = load_corpus(name, download=False)
        assert (len(c.train), len(c.valid), len(c.test)) == sizes
    v = load_corpus("tinyshakespeare", download=False).build_vocab()
    assert v.size == 65 + 1
    ptb = load_corpus("ptb-char", download=False)
    assert len(ptb.build_vocab()) == 50 + 1  # 48 symbols besides '_', space, newline; + unknown
    for rel in corpora.FILES:
        path = corpora.locate(rel, download=False)
        assert corpora.sha256_file(path) == corpora.FILES[rel].sha256


# ----------------------------------------------------------------------------------------------- windows
@given(st.integers(0, 300), st.integers(1, 40), st.data())
def test_eval_windows_score_every_target_once(n, seq_len, data):
    stride = data.draw(st.integers(1, seq_len))
    windows = eval_windows(n, seq_len, stride)
    scored = []
    for begin, end, first in windows:
        assert 0 <= begin <= first < end <= max(n - 1, 0)
        assert end - begin <= seq_len
        if first > 0:  # after the first window the context is at least seq_len - stride
            assert first - begin >= min(seq_len - stride, first)
        scored.extend(range(first, end))
    assert scored == list(range(max(n - 1, 0)))


def test_eval_windows_errors():
    with pytest.raises(DataError):
        eval_windows(10, 0)
    with pytest.raises(DataError):
        eval_windows(10, 4, stride=5)


class _CountingBigram(torch.nn.Module):
    """A causal toy model: logits depend on the current token and the position in the window."""

    config = {"vocab_size": 5}

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.table = torch.nn.Parameter(torch.randn(5, 5))

    def forward(self, tokens):
        t = tokens.shape[1]
        return self.table[tokens] + 0.1 * torch.arange(t).float()[None, :, None]


@pytest.mark.parametrize("stride", [None, 3, 1])
def test_sequence_nll_matches_brute_force(stride):
    model = _CountingBigram()
    tokens = torch.randint(0, 5, (37,), generator=torch.Generator().manual_seed(1))
    seq_len = 8
    total, count = sequence_nll(model, tokens, seq_len, stride=stride, batch_size=2)
    brute = 0.0
    torch.set_grad_enabled(False)
    for begin, end, first in eval_windows(37, seq_len, stride):
        logits = model(tokens[None, begin:end])[0]
        logp = torch.log_softmax(logits, -1)
        for pos in range(first, end):
            brute -= float(logp[pos - begin, tokens[pos + 1]])
    torch.set_grad_enabled(True)
    assert count == 36
    assert total == pytest.approx(brute, rel=1e-6)


# ----------------------------------------------------------------------------------------------- word problem
def _compose(a, b):
    """(a b)(i) = a(b(i)) on one-line tuples, written independently of the library."""
    return tuple(a[b[i]] for i in range(len(a)))


def _is_even(p):
    seen, cycles = set(), 0
    for i in range(len(p)):
        if i not in seen:
            cycles += 1
            j = i
            while j not in seen:
                seen.add(j)
                j = p[j]
    return (len(p) - cycles) % 2 == 0


@pytest.mark.parametrize("name,n,even", [("S3", 3, False), ("S5", 5, False), ("A5", 5, True)])
def test_permutation_word_problem_labels(name, n, even):
    g = get_group(name)
    elems = [p for p in itertools.permutations(range(n)) if not even or _is_even(p)]
    assert g.order == len(elems) == {("S3"): 6, "S5": 120, "A5": 60}[name]
    assert g.names[g.identity] == "".join(map(str, range(n)))
    assert not g.abelian
    task = WordProblemTask(name, length=12)
    x, y = task.sample_batch(16, 12, torch.Generator().manual_seed(0))
    for row_x, row_y in zip(x.tolist(), y.tolist()):
        state = tuple(range(n))
        for gid, label in zip(row_x, row_y):
            state = _compose(state, elems[gid])
            assert elems[label] == state


@pytest.mark.parametrize("name,n", [("Z5", 5), ("parity", 2), ("Z7", 7)])
def test_cyclic_word_problem_labels(name, n):
    g = get_group(name)
    assert g.order == n and g.abelian
    x, y = WordProblemTask(name).sample_batch(8, 20, torch.Generator().manual_seed(3))
    expected = torch.tensor([list(itertools.accumulate(r, lambda a, b: (a + b) % n)) for r in x.tolist()])
    assert torch.equal(y, expected)


def test_word_problem_eval_and_per_length():
    task = WordProblemTask("parity", length=6, n_eval=64)

    class Oracle(torch.nn.Module):  # predicts the running parity exactly
        def forward(self, tokens):
            return torch.nn.functional.one_hot(tokens.cumsum(1) % 2, 2).float() * 10

    m = task.evaluate(Oracle(), "valid")
    assert m["accuracy"] == 1.0 and m["final_accuracy"] == 1.0
    acc = task.per_length_accuracy(Oracle(), "test", length=9)
    assert acc.shape == (9,) and torch.all(acc == 1)

    class Last(torch.nn.Module):  # predicts only the last element: right at position 0 only
        def forward(self, tokens):
            return torch.nn.functional.one_hot(tokens, 2).float() * 10

    acc = task.per_length_accuracy(Last(), "valid")
    assert acc[0] == 1.0 and acc[1:].mean() < 0.8
    assert make_task("word-problem:S3:10").length == 10
    assert make_task(task.spec()).group.name == "parity"
    with pytest.raises(DataError):
        get_group("Q8")


def test_registered_corpora_names():
    assert {"tinyshakespeare", "ptb-char", "ptb", "wikitext-2"} <= set(CORPORA)
    assert all(rel in corpora.FILES for spec in CORPORA.values() for rel in spec.files.values())
    assert math.isclose(sum(corpora.DEFAULT_FRACTIONS), 1.0)


# ----------------------------------------------------------------------------------------------- task syntax
def test_task_strings_parse_to_one_canonical_spelling():
    from geomlab.data.registry import TaskRef, parse_task

    assert str(parse_task("corpus:ptb-char")) == "corpus:ptb-char"
    assert (parse_task("word-problem:S5:16").form, parse_task("word-problem:S5:16").arg,
            parse_task("word-problem:S5:16").length) == ("word-problem", "S5", 16)
    assert parse_task("word-problem:Z5").length is None
    assert str(parse_task("word-problem:Z5").with_length(8)) == "word-problem:Z5:8"
    assert str(parse_task("word-problem:Z5:4").with_length(8)) == "word-problem:Z5:4"  # the string's wins
    assert str(parse_task("gp")) == "gp" and str(parse_task("text")) == "text"
    assert parse_task("my text.txt").form == "file" and str(parse_task("my text.txt")) == "my text.txt"
    # other prefixes are file names, refused where files are (a request of the app's)
    for other in ("task:S3", "wp:A5:12", "gp-regression"):
        assert parse_task(other) == TaskRef("file", other)
        with pytest.raises(DataError, match="data must be"):
            parse_task(other, paths=False)


def test_task_strings_refuse_bad_forms_readably():
    from geomlab.data.registry import parse_task

    with pytest.raises(DataError, match="unknown corpus 'nope'; registered: tinyshakespeare"):
        parse_task("corpus:nope")
    with pytest.raises(DataError, match="length must be an integer"):
        parse_task("word-problem:S3:x")
    with pytest.raises(DataError, match="length must be >= 1"):
        parse_task("word-problem:S3:0")
    with pytest.raises(DataError, match="data must be"):
        parse_task("some/file.txt", paths=False)  # a request that may not read the machine's files
    with pytest.raises(DataError, match="data must be"):
        parse_task("")
    for no_group in ("word-problem", "word-problem:", "word-problem::8"):  # not "no such file word-problem"
        with pytest.raises(DataError, match=r"names no group: word-problem:GROUP\[:LENGTH\]"):
            parse_task(no_group)
    from geomlab.data.registry import make_task

    with pytest.raises(DataError, match="^'text' is a text given with the request"):  # no text came with it
        make_task("text")


def test_make_task_takes_the_callers_length_and_evaluation_size(tiny_text):
    from geomlab.data.gp import GPRegressionTask
    from geomlab.data.registry import task_string

    wp = make_task("word-problem:S3", length=8, n_eval=16)
    assert isinstance(wp, WordProblemTask) and wp.length == 8 and wp.n_eval == 16
    assert make_task("word-problem:S3").length == 32 and make_task("word-problem:S3").n_eval == 512
    with pytest.raises(DataError, match="'task:S3' is neither a known corpus .* nor an existing text file"):
        make_task("task:S3")  # not a spelling of the word problem: an unknown file
    assert make_task("word-problem:S3:4", length=8).length == 4
    gp = make_task("gp", n_eval=24)
    assert isinstance(gp, GPRegressionTask) and gp.n_eval == 24
    text = make_task("text", text=tiny_text * 3)
    assert isinstance(text, LMTask) and text.name.startswith("pasted text · ")
    with pytest.raises(DataError):
        make_task("text", text="")
    assert task_string(wp) == "word-problem:S3:8" and task_string(gp) == "gp"
    assert make_task(task_string(wp)).length == 8


def test_the_task_interface_imports_no_task_module():
    """data.tasks defines the interface; word_problem and gp implement it; only the
    registry imports them, so the data modules' imports form no cycle."""
    import ast
    import importlib.util

    def imports(module: str) -> set[str]:
        tree = ast.parse(open(importlib.util.find_spec(module).origin).read())
        out = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                out.add(node.module)
            elif isinstance(node, ast.Import):
                out.update(a.name for a in node.names)
        return {m for m in out if m.startswith("geomlab.data")}

    graph = {m: imports(m) for m in ("geomlab.data.tasks", "geomlab.data.gp", "geomlab.data.word_problem",
                                     "geomlab.data.registry", "geomlab.data.corpora", "geomlab.data.vocab")}
    assert graph["geomlab.data.tasks"] <= {"geomlab.data.errors", "geomlab.data.vocab"}
    assert "geomlab.data.registry" not in graph["geomlab.data.gp"] | graph["geomlab.data.word_problem"]
    assert {"geomlab.data.gp", "geomlab.data.word_problem", "geomlab.data.tasks"} <= graph["geomlab.data.registry"]

    def reaches(start: str, goal: str, seen=()) -> bool:
        return any(n == goal or (n in graph and n not in seen and reaches(n, goal, seen + (n,)))
                   for n in graph.get(start, ()))

    assert not any(reaches(m, m) for m in graph)  # no module reaches itself


def test_a_users_text_is_named_on_its_card_by_file_name_and_sha256(tiny_text, tmp_path):
    import hashlib

    body = tiny_text * 3
    pasted = make_task("text", text=body)
    digest = hashlib.sha256(body.encode("utf-8")).hexdigest()
    assert pasted.name == f"pasted text · {digest[:8]}"
    assert pasted.spec()["sha256"] == digest and pasted.spec()["chars"] == len(body)
    # Windows line ends and a byte-order mark are the same text; another text is another name
    assert make_task("text", text="\ufeff" + body.replace("\n", "\r\n")).name == pasted.name
    assert make_task("text", text=body + "x").name != pasted.name
    # an uploaded file is named by its last path part, printable characters only
    up = make_task("text", text=body, text_name="..\\dir/../notes\x00.txt")
    assert up.name == f"notes.txt · {digest[:8]}"
    assert make_task("text", text=body, text_name="  ").name == pasted.name
    # the same file read from disk has the same digest on its card
    f = tmp_path / "notes.txt"
    f.write_text(body, encoding="utf-8")
    assert make_task(str(f)).spec()["sha256"] == digest
