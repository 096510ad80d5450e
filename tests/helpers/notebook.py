"""Execute examples/quickstart.ipynb in a real kernel (nbclient), and store it with its outputs.

``python -m tests.helpers.notebook`` (from the repository root) runs every cell and writes the notebook back with
its outputs: the committed copy shows its text and figures on GitHub and in ``jupyter nbconvert --to html``
(each plotly figure carries a PNG beside its interactive JSON; the notebook's renderer cell sets that up).
Runs go to a temporary folder; the real bundled checkpoints are used; stderr streams are not stored
(:func:`without_stderr`)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "examples" / "quickstart.ipynb"


def execute(path: Path = NOTEBOOK, runs_dir: Path | None = None):
    """The notebook at ``path`` executed top to bottom in a fresh python3 kernel started in the repository
    root (``import geomlab`` works installed or not), with ``GEOMLAB_RUNS_DIR`` at ``runs_dir`` (a temporary
    folder when ``None``) and ``GEOMLAB_BUNDLED_DIR`` unset. Returns the ``nbformat`` notebook with outputs;
    raises ``nbclient.exceptions.CellExecutionError`` on the first failing cell."""
    import nbclient
    import nbformat

    saved = {k: os.environ.get(k) for k in ("GEOMLAB_BUNDLED_DIR", "GEOMLAB_RUNS_DIR")}
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.pop("GEOMLAB_BUNDLED_DIR", None)
        os.environ["GEOMLAB_RUNS_DIR"] = str(runs_dir or Path(tmp) / "runs")
        try:
            nb = nbformat.read(path, as_version=4)
            nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", record_timing=False,
                                    resources={"metadata": {"path": str(ROOT)}}).execute()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return nb


def without_stderr(nb):
    """``nb`` without its stderr streams (the kernel's environment warnings, naming machine paths): what
    is stored. Errors are ``error`` outputs, not streams, and stay."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if not (o.output_type == "stream" and o.name == "stderr")]
    return nb


def main() -> int:
    import nbformat

    nb = without_stderr(execute())
    nbformat.write(nb, NOTEBOOK)
    print(f"{NOTEBOOK.relative_to(ROOT)}: {NOTEBOOK.stat().st_size / 1e6:.2f} MB with outputs", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
