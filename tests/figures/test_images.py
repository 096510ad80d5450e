"""PNG export through kaleido and the machine's Chrome/Chromium (geomlab.figures.images, `geomlab trace --png`)."""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import plotly.graph_objects as go
import pytest

from geomlab.commands.cli import main
from geomlab.figures.images import ImageExportError, write_pngs

ROOT = Path(__file__).resolve().parents[2]
HAS_BROWSER = any(shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"))
needs_browser = pytest.mark.skipif(not HAS_BROWSER and not os.environ.get("CI"),
                                   reason="no Chrome/Chromium on PATH (CI installs Debian's chromium)")


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk; fails on anything that is not a PNG."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


def test_missing_browser_is_one_clear_error(tmp_path, monkeypatch):
    """BROWSER_PATH names no file and no Chrome was ever downloaded for kaleido (choreographer would look in its
    download folder first): ImageExportError, no image, nothing downloaded."""
    chromium = pytest.importorskip("choreographer.browsers.chromium")
    for name in ("get_chrome_download_path", "get_old_chrome_download_path"):
        monkeypatch.setattr(chromium, name, lambda *a, **k: None)
    monkeypatch.setenv("BROWSER_PATH", str(tmp_path / "no-such-chrome"))
    with pytest.raises(ImageExportError, match="needs Chrome or Chromium"):
        write_pngs({"a": go.Figure(go.Scatter(y=[1, 2]))}, tmp_path / "png")
    assert not list((tmp_path / "png").glob("*.png"))


@pytest.mark.slow
@needs_browser
def test_write_pngs_sizes_follow_the_layout_and_scale(tmp_path):
    figs = {"sized": go.Figure(go.Heatmap(z=[[0, 1], [1, 0]]), layout={"width": 320, "height": 200}),
            "default": go.Figure(go.Scatter(y=[3, 1, 2]))}
    paths = write_pngs(figs, tmp_path / "out", scale=2)
    assert list(paths) == ["sized", "default"]
    assert png_size(paths["sized"]) == (640, 400)
    assert png_size(paths["default"]) == (2000, 1200)  # DEFAULT_WIDTH x DEFAULT_HEIGHT, scale 2


@pytest.mark.slow
@needs_browser
def test_trace_png_writes_every_view_figure(tmp_path, capsys):
    from geomlab.checkpoints import io as checkpoint
    from geomlab.teach import views
    from geomlab.trace import encode_text, trace

    ckpt = ROOT / "assets" / "checkpoints" / "osm-rnn-o-tinyshakespeare.json"
    rc = main(["trace", str(ckpt), "--text", "To be, or not", "--out", str(tmp_path / "t.npz"),
               "--png", str(tmp_path / "png")])
    assert rc == 0, capsys.readouterr().err
    c = checkpoint.load(ckpt)
    tr = trace(c.model, encode_text(c.vocab, "To be, or not"), vocab=c.vocab, text="To be, or not")
    expected = {name for v in views.views_of_trace(tr) for name in views.build_view(tr, v.slug)}
    assert expected and {p.stem for p in (tmp_path / "png").glob("*.png")} == expected
    for p in (tmp_path / "png").glob("*.png"):
        w, h = png_size(p)
        assert w >= 300 and h >= 200
