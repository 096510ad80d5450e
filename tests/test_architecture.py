"""docs/architecture.md is the map of the code (issue 18): every module is on it.

The layering itself (no import goes up) is checked by tests/test_layers.py."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _modules() -> list[str]:
    found = [p for p in (ROOT / "geomlab").rglob("*.py")] + list((ROOT / "app_pages").glob("*.py"))
    found += [ROOT / "app.py", ROOT / "serve.py"]
    return sorted(p.relative_to(ROOT).as_posix() for p in found if "_app" not in p.parts)


def test_every_module_is_on_the_map():
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = [m for m in _modules() if f"`{m}`" not in doc]
    assert not missing, "modules missing from docs/architecture.md: " + ", ".join(missing)


def test_the_map_names_no_module_that_is_gone():
    import re

    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:geomlab|app_pages)/[\w/]+\.py)`", doc))
    gone = sorted(m for m in named if not (ROOT / m).is_file())
    assert not gone, "docs/architecture.md names modules that do not exist: " + ", ".join(gone)
