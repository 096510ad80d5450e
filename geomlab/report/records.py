"""The campaign's records: where each run comes from (:func:`provenance`: commit, date, host, torch, data
sha256) and every run's outcome in one compact JSON-lines file (:func:`write_records`, :func:`read_records`),
committed beside the report and loaded back into a run store (:func:`load_records`) so that the report is
regenerated from it (:func:`geomlab.report.page.results_page`)."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import platform
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from geomlab.core.jsonread import read_json
from geomlab.report.store import RunStore

#: The first line of a records file: ``{"kind": RECORDS_KIND, "campaign": ..., "meta": {...}}``.
RECORDS_KIND = "geomlab-campaign-records"


class RecordsError(ValueError):
    """A records file that cannot be read (one line naming the file and the line)."""


def _commit() -> dict[str, Any]:
    """The git commit of the checkout this module runs from and whether its tracked files differ from it
    (``{"commit": None}`` outside a git checkout)."""
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return {"commit": None}
    if head.returncode != 0:
        return {"commit": None}
    return {"commit": head.stdout.strip(), "dirty": bool(dirty.stdout.strip())}


def data_sha256(task) -> str | None:
    """sha256 (hex) of a language-model task's data as the model sees it: the vocabulary's symbols and the
    train, valid and test token streams (int64, in that order), so two machines with the same text agree
    whatever the file layout. ``None`` for a task without those splits (e.g. the word problem)."""
    import torch

    if not hasattr(task, "tokens") or not hasattr(task, "vocab"):
        return None
    h = hashlib.sha256(json.dumps(list(task.vocab.tokens), ensure_ascii=False).encode())
    for split in ("train", "valid", "test"):
        h.update(task.tokens(split).to(torch.int64).contiguous().numpy().tobytes())
    return h.hexdigest()


def provenance(task=None, device: str = "cpu") -> dict[str, Any]:
    """Where a run comes from: ``commit`` (and ``dirty``: tracked files changed since it), ``date`` (UTC, ISO
    8601), ``host``, ``torch``, ``python``, ``device`` and ``data_sha256`` (:func:`data_sha256` of ``task``)."""
    import torch

    return {**_commit(), "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "host": socket.gethostname(), "torch": torch.__version__, "python": platform.python_version(),
            "device": device, "data_sha256": data_sha256(task) if task is not None else None}


def _compact(x: Any) -> Any:
    """``x`` with every float rounded to 9 significant digits (the records' precision: a mean over seeds rounds
    to the same third decimal as from the full floats)."""
    if isinstance(x, float):
        return float(f"{x:.9g}")
    if isinstance(x, dict):
        return {k: _compact(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_compact(v) for v in x]
    return x


def outcomes(store: RunStore) -> list[dict[str, Any]]:
    """Every finished run's outcome in ``store`` (its ``outcome.json``), sorted by run key."""
    out = []
    for f in sorted(store.root.glob("**/outcome.json")):
        try:
            o = read_json(f)
        except (OSError, ValueError):
            continue
        if isinstance(o, dict) and o.get("key"):
            out.append(o)
    return sorted(out, key=lambda o: o["key"])


def write_records(store: RunStore, path: str | Path, campaign: str, meta: dict[str, Any] | None = None) -> int:
    """Write every outcome of ``store`` to ``path``: a header line (``kind`` :data:`RECORDS_KIND`,
    ``campaign``, ``meta``: what the report needs beside the runs, e.g. each corpus's unigram BPC) and one JSON
    object per run, floats at 9 significant digits, sorted by run key (the same store gives the same bytes).
    Returns the number of runs written."""
    runs = outcomes(store)
    lines = [json.dumps({"kind": RECORDS_KIND, "campaign": campaign, "meta": _compact(meta or {})}, sort_keys=True)]
    lines += [json.dumps(_compact(o), sort_keys=True, default=float) for o in runs]
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(runs)


def read_records(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and the runs of a records file (:func:`write_records`). Raises :class:`RecordsError` naming
    the file and line for a file that is missing, not JSON lines, or not a records file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise RecordsError(f"cannot read the records file {path}: {exc.strerror or exc}") from None
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError as exc:
            raise RecordsError(f"{path}, line {n}: not JSON ({exc.msg})") from None
        if not isinstance(rows[-1], dict) or (n > 1 and not rows[-1].get("key")):
            raise RecordsError(f"{path}, line {n}: not a run record (an object with a 'key')")
    if not rows or rows[0].get("kind") != RECORDS_KIND:
        raise RecordsError(f"{path}: not a campaign records file (its first line has no kind {RECORDS_KIND!r})")
    return rows[0], rows[1:]


def load_records(runs: list[dict[str, Any]], store: RunStore) -> int:
    """Write each run record into ``store`` as its ``outcome.json`` (under its key), leaving a run the store
    already finished alone, so that :func:`geomlab.report.results.collect` reads them as the campaign's runs.
    Returns the number written. Raises :class:`RecordsError` for a key that leaves the store's folder."""
    from geomlab.core.writes import write_atomic

    written = 0
    root = store.root.resolve()
    for o in runs:
        folder = (store.root / o["key"]).resolve()
        if root not in folder.parents:
            raise RecordsError(f"run key {o['key']!r} is not a folder inside the store")
        if (folder / "outcome.json").is_file():
            continue
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(folder / "outcome.json", json.dumps(o), "run record")
        written += 1
    return written


def records_from_report(results: dict[str, Any], path: str | Path) -> int:
    """Write the records file of a finished converged report (its ``results.json``, ``results``) to ``path``:
    every run :func:`geomlab.report.results.restore` rebuilds from it (outcomes with ``restored: true``: that
    campaign did not record commit, host or data hash per run), with the report's corpora, CPU hours, machine
    and date in the header. Returns the number of runs. Raises ``ValueError`` for a file that is not a
    converged report."""
    from geomlab.report.campaign import CONVERGED
    from geomlab.report.results import restore

    with tempfile.TemporaryDirectory(prefix="geomlab-restore-") as tmp:
        store = RunStore(tmp)
        restore(CONVERGED, store, results)
        m = results.get("machine") or {}
        meta = {"corpora": {c["key"]: {"split": c.get("split", ""), "unigram_bpc": c.get("unigram_bpc")}
                            for c in results["comparisons"]},
                "cpu_hours": (results.get("progress") or {}).get("cpu_hours"), "finished": results.get("started"),
                "machine": f"{m.get('cpu') or 'cpu'}, torch {m.get('torch', '?')}",
                "provenance": "rebuilt from the converged report's results.json; that campaign's runs carry no "
                              "per-run commit, host or data sha256"}
        return write_records(store, path, CONVERGED.name, meta)
