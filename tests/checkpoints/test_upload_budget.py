"""An uploaded zip is judged by its directory before anything is inflated: at most four files, all together
within a budget tied to the zip's own size (real checkpoints barely compress), and every message one line of
at most 300 characters with long lists cut ("and N more")."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from geomlab.checkpoints import uploads
from geomlab.checkpoints.catalog import CatalogError
from helpers.memory import peak as _peak

ASSETS = Path(__file__).resolve().parents[2] / "assets" / "checkpoints"


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, raw in members.items():
            zf.writestr(name, raw)
    return buf.getvalue()


def _one_line(err: BaseException | None) -> str:
    assert isinstance(err, CatalogError), repr(err)
    msg = str(err)
    assert "\n" not in msg and len(msg) <= uploads.MAX_MESSAGE, f"{len(msg)} characters: {msg[:400]}"
    return msg


@pytest.mark.parametrize("names", [
    [f"run/f{i}.json" for i in range(990)],
    [f"run/f.x{i}" for i in range(990)],
    ["run/geomlab.json"] + [f"run/f{i}.bin" for i in range(989)],
])
def test_many_small_zero_members_are_refused_before_inflating(names):
    """990 members of 200 KB of zeros (a 300 KB zip): 190 MiB inflated before the refusal, and lists of 7,000
    to 9,800 characters in the message; now refused from the directory, the list cut."""
    data = _zip({n: bytes(200_000) for n in names})
    assert len(data) < 400_000
    err, peak = _peak(lambda: uploads.validate_upload({"run.zip": data}))
    msg = _one_line(err)
    assert "990 files" in msg and "and 987 more" in msg, msg
    assert peak < 2 * 2**20, f"{peak / 2**20:.1f} MiB"


def test_declared_sizes_over_the_budget_are_refused_before_inflating():
    """Three 150 MiB members of zeros (a 450 KB zip): two were inflated (467 MiB peak) before the total was
    refused; now nothing is: each file is judged against its own limit, then the total against the budget."""
    data = _zip({f"run/{n}": bytes(150 * 2**20) for n in ("config.json", "geomlab.json", "README.md")})
    assert len(data) < 2**20
    err, peak = _peak(lambda: uploads.validate_upload({"run.zip": data}))
    msg = _one_line(err)
    assert "run/config.json unpacks to 150.0 MiB; the limit for it is 16 MiB" in msg, msg
    assert peak < 2 * 2**20, f"{peak / 2**20:.1f} MiB"
    data = _zip({"run/model.safetensors": bytes(190 * 2**20), "run/geomlab.json": b"{}", "run/config.json": b"{}"})
    err, peak = _peak(lambda: uploads.validate_upload({"run.zip": data}))
    msg = _one_line(err)
    assert "unpacks to 190.0 MiB" in msg and f"{uploads.inflate_budget(len(data)) / 2**20:,.1f} MiB" in msg, msg
    assert peak < 2 * 2**20, f"{peak / 2**20:.1f} MiB"


@pytest.mark.parametrize("zipped", [False, True])
def test_a_model_card_over_its_limit_is_refused(tmp_path, zipped):
    """A 5 MiB README.md (incompressible) was stored with the checkpoint; the card has its own limit."""
    import os

    weights = (ASSETS / "lstm-tinyshakespeare" / "model.safetensors").read_bytes()
    card = os.urandom(5 * 2**20)
    upload = {"run/README.md": card, "run/model.safetensors": weights,
              "run/geomlab.json": b"{}", "run/config.json": b"{}"}
    if zipped:
        upload = {"run.zip": _zip(upload)}
    msg = _one_line(_peak(lambda: uploads.validate_upload(upload))[0])
    assert "README.md" in msg and "5.0 MiB; the limit for it is 1 MiB" in msg, msg


def test_every_bundled_checkpoint_zips_well_inside_the_budget():
    folders = sorted(p.parent for p in ASSETS.glob("*/model.safetensors"))
    assert len(folders) >= 5
    for folder in folders:
        members = {f"{folder.name}/{p.name}": p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}
        data = _zip(members)
        inflated = sum(len(b) for b in members.values())
        assert inflated <= uploads.inflate_budget(len(data)) / 2, folder.name
        # the ratio alone (no floor) would still admit it: real weights barely compress
        assert inflated <= uploads.MAX_RATIO * len(data) / 2, folder.name
        name, _ = uploads.validate_upload({f"{folder.name}.zip": data})
        assert name == folder.name


def test_budget_is_the_floor_plus_the_ratio_capped_at_the_upload_limit():
    assert uploads.inflate_budget(0) == uploads.MIN_INFLATE
    assert uploads.inflate_budget(2**20) == uploads.MIN_INFLATE + uploads.MAX_RATIO * 2**20
    assert uploads.inflate_budget(10**12) == uploads.MAX_UPLOAD_BYTES


def test_loose_files_with_many_types_give_a_short_message():
    files = {f"x{i}.bin{i}": b"1" for i in range(990)}
    msg = _one_line(_peak(lambda: uploads.validate_upload(files))[0])
    assert "and 987 more" in msg, msg


def test_a_long_member_name_is_cut():
    data = _zip({"run/" + "a" * 5000 + ".json": b"{}", "run/" + "b" * 5000: b"{}"})
    msg = _one_line(_peak(lambda: uploads.validate_upload({"run.zip": data}))[0])
    assert "run/bbbb" in msg and "5,004 characters" in msg, msg
