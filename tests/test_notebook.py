"""examples/quickstart.ipynb: kept without outputs in git, and every cell runs (nbclient, a real kernel)."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "examples" / "quickstart.ipynb"


def test_notebook_is_stored_without_outputs():
    """Outputs (plotly figures are megabytes) and execution counts stay out of git."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, "the notebook has no code cells"
    dirty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
    assert not dirty, f"cells {dirty} carry outputs: clear them before committing (Jupyter: Clear All Outputs)"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_notebook_runs_every_cell_without_error(monkeypatch, tmp_path):
    """Executes the notebook top to bottom in a fresh python3 kernel started in the repository root (so
    ``import geomlab`` works installed or not); nbclient raises CellExecutionError on the first failing cell.
    The kernel sees a user's environment: the real bundled checkpoints (other tests point
    ``GEOMLAB_BUNDLED_DIR`` elsewhere for the whole session), runs in a temporary folder."""
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.delenv("GEOMLAB_BUNDLED_DIR", raising=False)
    monkeypatch.setenv("GEOMLAB_RUNS_DIR", str(tmp_path / "runs"))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(ROOT)}})
    client.execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code)
    outputs = [o for c in code for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    figures = [o for o in outputs if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert len(figures) >= 3, f"expected at least three plotly figures, got {len(figures)}"
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "osmformer-o-linear-tinyshakespeare" in printed and "done after" in printed
