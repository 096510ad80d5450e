"""Data flows one way: no package of geomlab imports a package later in ``ORDER``, and no module imports
itself back through others (no import circle anywhere, app pages included).

Every module under ``geomlab/`` and ``app_pages/`` plus ``app.py`` and ``serve.py`` is parsed with :mod:`ast`;
every import counts, at the top of a module or inside a function (a lazy import is still a dependency).
A module's unit is its package directly under ``geomlab`` (``geomlab.models.osm.former`` -> ``models``,
``geomlab/__init__.py`` -> ``geomlab``, ``geomlab/__main__.py`` -> ``__main__``); every ``app_pages`` module
is in the unit ``app_pages``; ``app.py``, ``serve.py`` -> ``app``. Imports within a unit are free of the
order, not of the circle check; ``from geomlab import X`` counts as an import of ``geomlab.X``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The layers, foundations first; docs/architecture.md describes each.
ORDER = [
    "geomlab", "core", "data", "geometry", "models", "checkpoints", "training", "trace", "whatif", "figures", "teach",
    "live", "rooms", "report", "bench", "commands", "__main__", "app_pages", "app",
]
RANK = {unit: i for i, unit in enumerate(ORDER)}


def _module_files() -> list[tuple[str, Path]]:
    """(dotted module name, file) for every module the layering covers."""
    out = []
    for folder in ("geomlab", "app_pages"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out.append((".".join(parts), path))
    for name in ("app", "serve"):
        out.append((name, ROOT / f"{name}.py"))
    return out


def unit_of(module: str) -> str | None:
    """The unit of a dotted module name; None for a module outside geomlab, app_pages and the app scripts."""
    parts = module.split(".")
    if parts[0] == "geomlab":
        return "geomlab" if len(parts) == 1 else parts[1]
    if parts[0] == "app_pages":
        return "app_pages"
    if module in ("app", "serve"):
        return "app"
    return None


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _is_module(dotted: str, root: Path = ROOT) -> bool:
    """Whether a dotted name is a module file or package under root."""
    path = root.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imported_modules(module: str, path: Path, root: Path = ROOT) -> list[tuple[str, int]]:
    """(absolute dotted module, line) for every import in the file, top-level or inside a function.

    ``from P import X`` yields ``P.X`` when that is a module (``from geomlab import views`` is
    ``geomlab.views``), else ``P`` (``from geomlab import __version__`` is ``geomlab``).
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if _is_package(path) else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.append((sub if alias.name != "*" and _is_module(sub, root) else base, node.lineno))
    return found


def violations() -> tuple[list[str], set[str]]:
    """("A -> B (file:line)" for each import of a later unit, the units found that ORDER does not place)."""
    bad, unplaced = [], set()
    for module, path in _module_files():
        unit = unit_of(module)
        if unit not in RANK:
            unplaced.add(f"{unit} ({path.relative_to(ROOT)})")
            continue
        for target, line in imported_modules(module, path):
            target_unit = unit_of(target)
            if target_unit is None or target_unit == unit:
                continue
            if target_unit not in RANK:
                unplaced.add(f"{target_unit} (imported at {path.relative_to(ROOT)}:{line})")
                continue
            if RANK[target_unit] > RANK[unit]:
                bad.append(f"{unit} -> {target_unit} ({path.relative_to(ROOT)}:{line})")
    return sorted(bad), unplaced


def test_unit_of_examples():
    assert unit_of("geomlab.models.osm.former") == "models"
    assert unit_of("geomlab") == "geomlab"
    assert unit_of("geomlab.__main__") == "__main__"
    assert unit_of("geomlab.training.runs") == "training"
    assert unit_of("app_pages._state") == "app_pages"
    assert unit_of("serve") == "app"
    assert unit_of("torch.nn") is None


def test_imports_resolve_relative_and_lazy(tmp_path):
    """The parser sees lazy (function-level) and relative imports and spells `from geomlab import X` as geomlab.X."""
    pkg = tmp_path / "geomlab" / "figures"
    pkg.mkdir(parents=True)
    src = pkg / "__init__.py"
    for name in ("_common.py", "../views.py", "../live.py", "../zoo.py", "../__init__.py"):
        (pkg / name).touch()
    src.write_text("from . import _common\nfrom geomlab import views, __version__\n"
                   "def f():\n    from ..live import LiveRun\n    import geomlab.zoo as z\n")
    assert imported_modules("geomlab.figures", src, root=tmp_path) == [
        ("geomlab.figures._common", 1), ("geomlab.views", 2), ("geomlab", 2), ("geomlab.live", 4),
        ("geomlab.zoo", 5)]


def test_every_unit_is_placed():
    _, unplaced = violations()
    assert not unplaced, "units not in ORDER (place each new module):\n" + "\n".join(sorted(unplaced))


def test_no_unit_imports_a_later_unit():
    bad, _ = violations()
    if bad:
        print("\n".join(bad))
    assert not bad, "imports against the layering ORDER:\n" + "\n".join(bad)


def test_order_units_exist():
    """Every unit in ORDER is a module that exists (a deleted module leaves ORDER too)."""
    modules = {unit_of(m) for m, _ in _module_files()}
    assert [unit for unit in ORDER if unit not in modules] == []


def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (an imported attribute counts as its module)."""
    modules = dict(_module_files())
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for target, _ in imported_modules(module, path):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != module:
                graph[module].add(target)
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_circle_finder_sees_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_circles(graph) == [["a", "b", "c"]]
    assert import_circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles():
    """No module reaches itself through its imports, app pages included (each checked one by one)."""
    circles = import_circles(import_graph())
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_test_files_have_unique_names():
    """Test modules are imported by their file name (pytest's default import mode), so two folders must not
    hold test files of the same name."""
    names = [p.name for p in (ROOT / "tests").rglob("test_*.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []
