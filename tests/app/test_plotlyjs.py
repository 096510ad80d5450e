"""app_pages/_plotlyjs.py: which figures need the full plotly.js bundle, and the cartesian bundle fetched into
the user cache only when its sha256 is the pinned one (a local tarball stands in for the npm registry)."""

from __future__ import annotations

import hashlib
import io
import tarfile

import pytest

from app_pages import _plotlyjs


def _tarball(path, files: dict[str, bytes]) -> str:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(buf.getvalue())
    return path.as_uri()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache folder, a pinned checksum for the installed version, nothing remembered."""
    monkeypatch.setenv("GEOMLAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("GEOMLAB_PLOTLYJS_FETCH", raising=False)
    monkeypatch.setattr(_plotlyjs, "_FOUND", {})
    body = b"window.Plotly = {cartesian: true};"
    monkeypatch.setattr(_plotlyjs, "SHA256", {_plotlyjs.version(): hashlib.sha256(body).hexdigest()})
    return body


def test_2d_figures_take_the_cartesian_bundle_and_3d_ones_the_full_one():
    assert not _plotlyjs.needs_full({"data": [{"type": "heatmap"}, {"x": [1]}, {"type": "bar"}], "layout": {}})
    assert _plotlyjs.needs_full({"data": [{"type": "scatter3d"}], "layout": {}})
    assert _plotlyjs.needs_full({"data": [{"type": "mesh3d"}]})
    assert _plotlyjs.needs_full({"data": [{"type": "scatter"}], "layout": {"scene2": {}}})
    assert not _plotlyjs.needs_full({"data": [], "layout": {"xaxis2": {}, "shapes": []}})


def test_the_installed_plotly_has_a_pinned_cartesian_bundle():
    # a plotly upgrade without a new pin would silently give every chart the full bundle again
    assert _plotlyjs.version() in _plotlyjs.SHA256


def test_fetch_keeps_the_bundle_whose_checksum_is_pinned(cache, tmp_path):
    url = _tarball(tmp_path / "ok.tgz", {_plotlyjs.MEMBER: cache, "package/README.md": b"readme"})
    assert _plotlyjs.cartesian() is None
    path = _plotlyjs.fetch(url)
    assert path is not None and path.read_bytes() == cache
    assert path.name == _plotlyjs.file_name(_plotlyjs.version()) and _plotlyjs.cartesian() == path
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no partial file left


def test_fetch_refuses_a_wrong_checksum_a_missing_file_or_a_switch_off(cache, tmp_path, monkeypatch):
    bad = _tarball(tmp_path / "bad.tgz", {_plotlyjs.MEMBER: cache + b"tampered"})
    none = _tarball(tmp_path / "none.tgz", {"package/other.js": cache})
    assert _plotlyjs.fetch(bad) is None and _plotlyjs.fetch(none) is None
    assert _plotlyjs.fetch((tmp_path / "absent.tgz").as_uri()) is None
    assert not (tmp_path / "cache" / "plotlyjs").exists() or not any((tmp_path / "cache" / "plotlyjs").iterdir())
    monkeypatch.setenv("GEOMLAB_PLOTLYJS_FETCH", "0")
    good = _tarball(tmp_path / "ok.tgz", {_plotlyjs.MEMBER: cache})
    assert _plotlyjs.fetch(good) is None


def test_a_cached_file_whose_checksum_changed_is_not_used(cache):
    folder = _plotlyjs.cache_dir()
    folder.mkdir(parents=True)
    (folder / _plotlyjs.file_name(_plotlyjs.version())).write_bytes(b"something else")
    assert _plotlyjs.cartesian() is None
