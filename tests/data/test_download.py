"""Corpus downloads through pooch against a local HTTP server (127.0.0.1, no outside network): a failed first
answer is retried, the file lands in the cache folder with the right bytes, a wrong checksum is never saved."""

from __future__ import annotations

import hashlib
import http.server
import threading

import pytest

from geomlab.data import DataError, corpora

REL = "tinyshakespeare/input.txt"
TEXT = ("First Citizen:\nBefore we proceed any further, hear me speak.\n" * 20).encode()


class _Server(http.server.ThreadingHTTPServer):
    """Serves ``body`` at every path after answering the first ``failures`` requests with HTTP 503."""

    def __init__(self, body: bytes, failures: int):
        self.body, self.failures, self.requests = body, failures, 0
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        srv = self.server
        srv.requests += 1
        if srv.requests <= srv.failures:
            self.send_error(503, "busy (test)")
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(srv.body)))
        self.end_headers()
        self.wfile.write(srv.body)

    def log_message(self, *args):
        pass


@pytest.fixture
def serve(monkeypatch, tmp_path):
    """``serve(body, failures, sha)``: a local server for REL, registered with that sha256; no data folder,
    an empty cache, no waiting between tries. Returns the server."""
    servers = []
    monkeypatch.delenv("GEOMLAB_DATA_DIR", raising=False)
    monkeypatch.delenv("GEOMLAB_OFFLINE", raising=False)
    monkeypatch.setenv("GEOMLAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("pooch.core.time.sleep", lambda s: None)
    for var in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")

    def start(body: bytes, failures: int = 0, sha: str | None = None) -> _Server:
        srv = _Server(body, failures)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        url = f"http://127.0.0.1:{srv.server_address[1]}/{REL}"
        monkeypatch.setitem(corpora.FILES, REL, corpora.RemoteFile(url, sha or hashlib.sha256(body).hexdigest()))
        return srv

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def test_a_failed_answer_is_retried_and_the_file_lands_in_the_cache(serve, tmp_path):
    srv = serve(TEXT, failures=corpora.DOWNLOAD_RETRIES)  # every try but the last fails
    path = corpora.locate(REL)
    assert path == tmp_path / "cache" / "data" / REL and path.read_bytes() == TEXT
    assert srv.requests == 1 + corpora.DOWNLOAD_RETRIES
    assert [p.name for p in path.parent.iterdir()] == ["input.txt"]  # no temporary file left behind
    assert corpora.locate(REL) == path and srv.requests == 1 + corpora.DOWNLOAD_RETRIES  # from the cache now


def test_a_server_that_keeps_failing_is_one_data_error(serve, tmp_path):
    srv = serve(TEXT, failures=99)
    with pytest.raises(DataError, match=r"download from http://127\.0\.0\.1:\d+/tinyshakespeare/input\.txt failed"):
        corpora.locate(REL)
    assert srv.requests == 1 + corpora.DOWNLOAD_RETRIES
    assert not (tmp_path / "cache" / "data" / REL).exists()


def test_a_download_with_the_wrong_checksum_is_tried_again_and_never_saved(serve, tmp_path):
    srv = serve(TEXT, sha="0" * 64)
    with pytest.raises(DataError, match="not saved"):
        corpora.locate(REL)
    assert srv.requests == 1 + corpora.DOWNLOAD_RETRIES
    folder = tmp_path / "cache" / "data" / "tinyshakespeare"
    assert not folder.exists() or list(folder.iterdir()) == []
