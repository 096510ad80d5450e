"""Static images (PNG) of plotly figures: plotly's own route, kaleido v1 driving a Chrome or Chromium that is
already on the machine (one kaleido downloaded earlier if ``kaleido_get_chrome`` was ever run, else the
executable named by ``BROWSER_PATH``, else ``chromium``/``google-chrome`` on ``PATH``).

Nothing is downloaded: kaleido renders with the plotly.js bundled in the installed plotly package, MathJax is
switched off (it would come from a CDN; geomlab's figures use no LaTeX), and geomlab never calls
``kaleido.get_chrome``. A machine without a browser gets :class:`ImageExportError` naming what to install.
Used by ``geomlab trace --png`` and by the reproduction report (:func:`geomlab.report.write_report`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

#: Size in layout pixels of a figure whose layout sets none (design choice: the app's wide column).
DEFAULT_WIDTH, DEFAULT_HEIGHT = 1000, 600


class ImageExportError(OSError):
    """A figure could not be written as an image (no kaleido, no browser, the browser failed); one line."""


def write_pngs(figures: Mapping[str, "object"], folder: str | Path, scale: float = 1.0) -> dict[str, Path]:
    """Write each plotly figure as ``folder/NAME.png`` in one browser session.

    Args:
        figures: ``{name: plotly.graph_objects.Figure}``; a name is a file stem (no ``/``).
        folder: created when missing.
        scale: device pixels per layout pixel (2 for sharp images on a high-density screen).

    Each image is ``layout.width x layout.height`` layout pixels (:data:`DEFAULT_WIDTH` x
    :data:`DEFAULT_HEIGHT` where the layout sets none), times ``scale``. Returns ``{name: png path}`` in the
    order given. Raises :class:`ImageExportError` when kaleido or a Chrome/Chromium is missing or the browser
    fails twice (one retry: a browser's first start on a loaded machine rarely sends a broken message).
    Source: design choice over kaleido's ``write_fig_from_object``.
    """
    try:
        import kaleido
        from kaleido.errors import ChromeNotFoundError
    except ImportError:
        raise ImageExportError("image export needs kaleido: pip install 'geomlab[export]'") from None
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {name: folder / f"{name}.png" for name in figures}
    specs = [{"fig": fig.to_dict(), "path": paths[name],
              "opts": {"format": "png", "scale": scale, "width": fig.layout.width or DEFAULT_WIDTH,
                       "height": fig.layout.height or DEFAULT_HEIGHT}}
             for name, fig in figures.items()]
    for attempt in (1, 2):
        try:
            kaleido.write_fig_from_object_sync(specs, kopts={"mathjax": False})
            break
        except ChromeNotFoundError:
            raise ImageExportError("image export needs Chrome or Chromium (Debian: apt-get install chromium), "
                                   "on PATH or named by BROWSER_PATH; geomlab downloads none") from None
        except Exception as exc:  # noqa: BLE001 - the browser's errors are many; the message keeps the kind
            if attempt == 2:
                raise ImageExportError(f"the browser failed to draw the figures: {type(exc).__name__}: "
                                       f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
    missing = [str(p) for p in paths.values() if not p.is_file()]
    if missing:
        raise ImageExportError(f"the browser wrote no image for {', '.join(missing)}")
    return paths
