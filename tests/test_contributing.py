"""CONTRIBUTING.md tells the truth about the code: its table of layers and its table of libraries are the
ones tests/test_layers.py holds the package to (tests/layer_table.py), and its table of which tests cover
which module has a row for every module and names only test files that exist, every one of them."""

import ast
import re
from pathlib import Path

from layer_table import LAYERS, LIBRARY_LAYERS, SRC, module_files

ROOT = Path(__file__).resolve().parents[1]
CONTRIBUTING = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
PACKAGE = SRC / "speedstats"


def section(title):
    """The text under `## title`, up to the next heading of that level."""
    (body,) = re.findall(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", CONTRIBUTING, re.MULTILINE | re.DOTALL)
    return body


def table(text, header):
    """The rows (lists of cells) of the markdown table in text whose header row is `header`."""
    rows, current = [], None
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if current is None:
                current = [] if cells == header else False
            elif current is not False and not set("".join(cells)) <= set("-: "):
                current.append(cells)
        elif current is not None:
            if current is not False:
                rows.append(current)
            current = None
    assert len(rows) == 1, f"CONTRIBUTING.md: no single table headed {header}"
    return rows[0]


def code(cell):
    return re.findall(r"`([^`]+)`", cell)


def dotted(path):
    """A path under src/speedstats/ as a layer entry: `bench/` -> speedstats.bench.*, `__init__.py` ->
    speedstats, `github/cli.py` -> speedstats.github.cli."""
    if path.endswith("/"):
        return "speedstats." + path.rstrip("/").replace("/", ".") + ".*"
    parts = ["speedstats", *Path(path).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_names(cell):
    if cell == "nothing else":
        return set()
    return {name.strip() for name in cell.split(",")}


def test_the_layer_table_is_the_one_the_layer_test_holds():
    rows = table(section("Layout and layers"), ["layer", "modules", "may import from"])
    written = {name: ({dotted(path) for path in code(modules)}, layer_names(below))
               for name, modules, below in rows}
    assert written == {name: (set(entries), set(below)) for name, entries, below in LAYERS}
    assert [name for name, _, _ in rows] == [name for name, _, _ in LAYERS]  # bottom first


def test_the_library_table_is_the_one_the_layer_test_holds():
    rows = table(section("Layout and layers"), ["library", "only on"])
    assert {library: layer for names, layer in rows for library in code(names)} == LIBRARY_LAYERS


def package_marker(path):
    """A subpackage's __init__.py that holds nothing but its docstring: it needs no row."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    return (path.name == "__init__.py" and path.parent != PACKAGE
            and len(body) <= 1 and all(isinstance(node, ast.Expr) for node in body))


def test_every_module_has_its_tests_and_every_test_file_is_named():
    text = section("Which tests cover which module")
    rows = table(text, ["module", "tests"])
    named = [path for modules, _ in rows for path in code(modules)]
    modules = sorted(str(path.relative_to(PACKAGE)) for path in module_files(SRC).values()
                     if not package_marker(path))
    assert len(modules) > 50 and "compare_cli.py" in modules and "github/cli.py" in modules
    assert sorted(named) == modules  # each module once, none that is not there
    test_files = {name for name in code(text) if name.endswith(".py") and name not in modules}
    assert all(tests and code(tests) for _, tests in rows)
    assert {name for name in test_files if not (ROOT / "tests" / name).is_file()} == set()
    assert {path.name for path in (ROOT / "tests").glob("test_*.py")} <= test_files
