"""The plotly.js bundles the live charts load: the full one the ``plotly`` package ships, and the cartesian one.

A first view spends most of its main-thread time in the browser evaluating plotly.js: the full bundle
(4.8 MB) takes 0.84 s in chromium on the project's 2-core machine, the cartesian bundle of the same plotly.js
version (1.5 MB: bar, box, contour, heatmap, histogram, image, pie, scatter, violin...) 0.40 s. Every figure
of a view's default set is 2-D, so a view page loads the cartesian bundle and a 3-D figure (a scene: the
3-D PCA path, the SO(3) frame, the plane on the sphere) loads the full one when it is drawn.

The cartesian bundle is not in the repository or in a Python package: it is the npm package
``plotly.js-cartesian-dist-min`` of the version the installed ``plotly`` ships, fetched once into the user
cache (``$GEOMLAB_CACHE_DIR/plotlyjs`` or the platform's user cache, as for the corpora) and checked against
the sha256 pinned in :data:`SHA256`. Until it is there (offline, another plotly version, a checksum that
does not match) every chart uses the full bundle. ``GEOMLAB_PLOTLYJS_FETCH=0`` never fetches it. Design
choice; no streamlit here.
"""

from __future__ import annotations

import functools
import hashlib
import io
import logging
import os
import re
import tarfile
import threading
import urllib.request
from pathlib import Path

log = logging.getLogger("geomlab.app")

PACKAGE = "plotly.js-cartesian-dist-min"
MEMBER = "package/plotly-cartesian.min.js"
SHA256 = {
    "4.1.1": "79542150855a52c567260e3137095dbe2b744e6d702a5cabe67da246942fba7a",
}
"""sha256 of ``plotly-cartesian.min.js`` by plotly.js version (of the npm package's file, unchanged)."""
CARTESIAN_TRACES = frozenset({"bar", "box", "contour", "heatmap", "histogram", "histogram2d",
                              "histogram2dcontour", "image", "pie", "scatter", "scatterternary", "violin"})
"""Trace types the cartesian bundle draws (its README)."""
MAX_BYTES = 20 * 2**20
"""The most a download or the bundle in it may be (a larger answer is refused, not read)."""

_LOCK = threading.Lock()
_FOUND: dict[str, Path | None] = {}


def full_dir() -> Path:
    """The ``plotly`` package's folder holding ``plotly.min.js`` (the full bundle)."""
    import plotly

    return Path(plotly.__file__).parent / "package_data"


@functools.cache
def version() -> str | None:
    """The plotly.js version of the full bundle (from its licence header, ``plotly.js v4.1.1``), or None."""
    try:
        with open(full_dir() / "plotly.min.js", encoding="utf-8", errors="replace") as f:
            head = f.read(400)
    except OSError:
        return None
    m = re.search(r"plotly\.js v(\d+\.\d+\.\d+)", head)
    return m.group(1) if m else None


def cache_dir() -> Path:
    """Where the cartesian bundle is kept: ``$GEOMLAB_CACHE_DIR/plotlyjs`` or the platform user cache's."""
    value = os.environ.get("GEOMLAB_CACHE_DIR")
    if value:
        return Path(value).expanduser() / "plotlyjs"
    import platformdirs

    return Path(platformdirs.user_cache_dir("geomlab")) / "plotlyjs"


def file_name(ver: str) -> str:
    """The cached bundle's file name; the version is in it, so a browser never reuses another version's."""
    return f"plotly-cartesian-{ver}.min.js"


def cartesian() -> Path | None:
    """The cached cartesian bundle of the installed plotly.js version when it is there and its sha256 is the
    pinned one, else None (checked once per process and remembered; :func:`fetch` checks again)."""
    ver = version()
    if ver is None or ver not in SHA256:
        return None
    with _LOCK:
        if ver in _FOUND:
            return _FOUND[ver]
        path = cache_dir() / file_name(ver)
        try:
            ok = path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == SHA256[ver]
        except OSError:
            ok = False
        _FOUND[ver] = path if ok else None
        return _FOUND[ver]


def tarball_url(ver: str) -> str:
    """The npm registry's address of the package's tarball for plotly.js ``ver``."""
    return f"https://registry.npmjs.org/{PACKAGE}/-/{PACKAGE}-{ver}.tgz"


def fetch(url: str | None = None, timeout: float = 30.0) -> Path | None:
    """Make sure the cartesian bundle is cached: download the npm tarball (``url``, default
    :func:`tarball_url`), take the one bundle file out of it in memory, check its sha256 and write it
    atomically. Returns its path, or None when it cannot be had (the reason is logged once; nothing raised:
    the charts keep the full bundle). Never runs with ``GEOMLAB_PLOTLYJS_FETCH=0``. Meant for a background
    thread (the app's warm-up), never a page's script run."""
    found = cartesian()
    if found is not None:
        return found
    ver = version()
    if ver is None or ver not in SHA256 or os.environ.get("GEOMLAB_PLOTLYJS_FETCH", "1") == "0":
        return None
    try:
        with urllib.request.urlopen(url or tarball_url(ver), timeout=timeout) as resp:
            blob = resp.read(MAX_BYTES + 1)
        if len(blob) > MAX_BYTES:
            raise ValueError(f"more than {MAX_BYTES} bytes")
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
            member = tar.getmember(MEMBER)
            if not member.isfile() or member.size > MAX_BYTES:
                raise ValueError(f"{MEMBER} is not a file of at most {MAX_BYTES} bytes")
            data = tar.extractfile(member).read()
        got = hashlib.sha256(data).hexdigest()
        if got != SHA256[ver]:
            raise ValueError(f"sha256 {got} is not the pinned {SHA256[ver]}")
        folder = cache_dir()
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{file_name(ver)}.{os.getpid()}.part"
        tmp.write_bytes(data)
        os.replace(tmp, folder / file_name(ver))
    except Exception as exc:  # noqa: BLE001 - offline, refused, corrupt: the full bundle stays in use
        log.info("plotly.js cartesian bundle not fetched (%s: %s); charts use the full bundle",
                 type(exc).__name__, str(exc)[:200])
        return None
    with _LOCK:
        _FOUND.pop(ver, None)
    return cartesian()


def needs_full(figure: dict) -> bool:
    """Whether a figure (its plotly JSON as a dict) needs the full bundle: a trace type the cartesian bundle
    lacks (``scatter3d``, ``mesh3d``...; a trace without a type is a scatter) or a 3-D scene, map or polar
    subplot in its layout."""
    if any((t.get("type") or "scatter") not in CARTESIAN_TRACES for t in figure.get("data") or []):
        return True
    return any(re.match(r"(scene|geo|polar|mapbox|map|smith)\d*$", k) for k in (figure.get("layout") or {}))
