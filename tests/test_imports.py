"""The package imports downward only: no circle among the modules of src/speedstats.

Imports are read with `ast`, so an import inside a function counts as much as one at the top: hiding a
circle inside a function does not make it go away.
"""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def module_files(src):
    """{dotted module name: file} of every module under src (a package is named by its __init__.py)."""
    modules = {}
    for path in sorted(src.rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imported_names(tree, package):
    """The dotted names an import statement anywhere in the tree may load (relative ones resolved)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)  # `from pkg import module`


def import_graph(src):
    """{module: the modules of src it imports}. A name that is not a module (a function imported from a
    module) counts as its module."""
    modules = module_files(src)
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for target in imported_names(ast.parse(path.read_text(encoding="utf-8"), str(path)), package):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                targets.add(target)
        graph[name] = targets
    return graph


def circles(graph):
    """The import circles: each a sorted list of the modules that import each other, round and round
    (strongly connected components of more than one module, or one that imports itself)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):  # Tarjan's algorithm; the package is far too shallow for the recursion limit
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph[node]:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def write_package(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_a_circle_hidden_inside_a_function_is_found_and_named(tmp_path):
    src = write_package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/sub/__init__.py": "",
        "pkg/sub/cli.py": "from pkg.sub.helpers import x\n\ndef register():\n    from . import command\n",
        "pkg/sub/command.py": "def run():\n    from pkg.sub import cli\n",
        "pkg/sub/helpers.py": "import json\nx = 1\n",
        "pkg/leaf.py": "from pkg.sub.helpers import x\n",
    })
    graph = import_graph(src)
    assert graph == {
        "pkg": set(), "pkg.sub": set(), "pkg.leaf": {"pkg.sub.helpers"},
        # `from pkg.sub import cli` loads the package pkg.sub, then its module cli
        "pkg.sub.cli": {"pkg.sub", "pkg.sub.helpers", "pkg.sub.command"},
        "pkg.sub.command": {"pkg.sub", "pkg.sub.cli"},
        "pkg.sub.helpers": set(),
    }
    assert circles(graph) == [["pkg.sub.cli", "pkg.sub.command"]]


def test_a_downward_package_has_no_circle(tmp_path):
    src = write_package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/top.py": "from pkg import middle\n",
        "pkg/middle.py": "def f():\n    from pkg.bottom import g\n",
        "pkg/bottom.py": "import os\n",
    })
    assert circles(import_graph(src)) == []


def test_the_package_imports_downward_only():
    graph = import_graph(SRC)
    assert "speedstats.github.cli" in graph and "speedstats.actions_io" in graph  # it read the real package
    found = circles(graph)
    if found:
        pytest.fail("import circles in src/speedstats: " + " | ".join(", ".join(c) for c in found))


def test_the_actions_runtime_and_the_bundle_do_not_import_the_github_layer():
    graph = import_graph(SRC)
    assert not {m for m in graph["speedstats.bundle"] | graph["speedstats.actions_io"]
                if m.startswith("speedstats.github")}
    # github/cli.py registers the commands; no command module imports it back.
    assert not [m for m, targets in graph.items() if "speedstats.github.cli" in targets]
