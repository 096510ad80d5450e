"""The tree is the map: every layer package is described in docs/architecture.md, every module says in its
docstring what it holds, and the page names no module that is gone.

The layering itself (no import goes up, no import circle) is checked by tests/test_layers.py."""

import ast
import re
from pathlib import Path

from test_layers import ORDER

ROOT = Path(__file__).resolve().parents[1]


def _modules() -> list[Path]:
    found = list((ROOT / "geomlab").rglob("*.py")) + list((ROOT / "app_pages").glob("*.py"))
    found += [ROOT / "app.py", ROOT / "serve.py"]
    return sorted(p for p in found if "_app" not in p.parts)


def test_every_layer_is_on_the_map():
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = [unit for unit in ORDER if unit not in ("geomlab", "__main__", "app")
               and f"`{unit}/`" not in doc and f"`{unit}`" not in doc]
    assert not missing, "layers missing from docs/architecture.md: " + ", ".join(missing)


def test_every_module_says_what_it_holds():
    bare = [p.relative_to(ROOT).as_posix() for p in _modules()
            if not ast.get_docstring(ast.parse(p.read_text(encoding="utf-8")))]
    assert not bare, "modules without a docstring: " + ", ".join(bare)


def test_the_map_names_no_module_that_is_gone():
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:geomlab|app_pages)/[\w/]+\.py)`", doc))
    gone = sorted(m for m in named if not (ROOT / m).is_file())
    assert not gone, "docs/architecture.md names modules that do not exist: " + ", ".join(gone)
