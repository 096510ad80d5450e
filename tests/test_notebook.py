"""examples/quickstart.ipynb: stored with its outputs (a PNG beside each figure), and every cell runs (nbclient, a
real kernel)."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "examples" / "quickstart.ipynb"


def test_notebook_is_stored_with_small_outputs_and_a_png_beside_each_figure():
    """The committed notebook carries its outputs (``python -m tests.helpers.notebook`` writes them): every
    code cell ran, no error, every plotly figure has a PNG in the same output (what GitHub and
    ``nbconvert --to html`` show), and the whole file stays small."""
    import base64
    import struct

    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.execution_count for c in code), "run python -m tests.helpers.notebook before committing"
    outputs = [o for c in code for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert not [o for o in outputs if o.output_type == "stream" and o.name == "stderr"]
    figures = [o for o in outputs if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert len(figures) >= 4
    for fig in figures:
        png = base64.b64decode(fig["data"].get("image/png", ""))
        assert png[:8] == b"\x89PNG\r\n\x1a\n", "a figure without its PNG"
        width, height = struct.unpack(">II", png[16:24])
        assert (width, height) == (760, 460) and len(png) < 250_000
    assert NOTEBOOK.stat().st_size < 1_500_000


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_notebook_runs_every_cell_without_error(tmp_path):
    """Executes the notebook top to bottom in a fresh python3 kernel started in the repository root (so
    ``import geomlab`` works installed or not); nbclient raises CellExecutionError on the first failing cell.
    The kernel sees a user's environment (:func:`tests.helpers.notebook.execute`): the real bundled
    checkpoints (other tests point ``GEOMLAB_BUNDLED_DIR`` elsewhere for the whole session), runs in a
    temporary folder."""
    pytest.importorskip("nbclient")
    from tests.helpers.notebook import execute

    nb = execute(NOTEBOOK, runs_dir=tmp_path / "runs")
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code)
    outputs = [o for c in code for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    figures = [o for o in outputs if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert len(figures) >= 3, f"expected at least three plotly figures, got {len(figures)}"
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "osmformer-o-linear-tinyshakespeare" in printed and "done after" in printed
