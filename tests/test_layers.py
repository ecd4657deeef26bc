"""The layers of src/speedstats: one table (tests/layer_table.py) says which layer each module is on and
which layers it may import from, besides its own. The libraries that belong to one layer (the frameworks
to bench/, jinja2 to render, PyGithub to github/) are imported nowhere else, and no modules import each
other in a circle.

Imports are read with `ast`, so an import inside a function counts as much as one at the top: hiding an
upward import or a circle inside a function does not make it go away. CONTRIBUTING.md ("Layout and
layers") shows the same table; tests/test_contributing.py holds the two together.
"""

import ast

from layer_table import LAYERS, LIBRARY_LAYERS, SRC, module_files
from speedstats.cli import COMMAND_MODULES


def imported_names(tree, package):
    """(line, dotted name) of each name an import statement anywhere in the tree may load (relative
    ones resolved)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            yield node.lineno, base
            # `from pkg import module` loads the module
            yield from ((node.lineno, f"{base}.{alias.name}") for alias in node.names)


def package_imports(src):
    """{module: [(line, imported module or outside library)]}: a name inside src counts as its module
    (a function imported from a module counts as that module), one outside as its top-level package."""
    modules = module_files(src)
    inside = {m.partition(".")[0] for m in modules}
    found = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = []
        for line, target in imported_names(ast.parse(path.read_text(encoding="utf-8"), str(path)), package):
            if target.partition(".")[0] not in inside:
                targets.append((line, target.partition(".")[0]))
                continue
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                targets.append((line, target))
        found[name] = sorted(set(targets))
    return found


def import_graph(src):
    """{module: the modules of src it imports}."""
    modules = module_files(src)
    return {name: {t for _, t in targets if t in modules} for name, targets in package_imports(src).items()}


def layer_of(module, layers):
    """The name of module's layer, or None when no entry names it."""
    packages = []
    for name, entries, _ in layers:
        for entry in entries:
            if entry == module:
                return name
            if entry.endswith(".*") and (module == entry[:-2] or module.startswith(entry[:-1])):
                packages.append((len(entry), name))
    return max(packages)[1] if packages else None


def layer_breaks(src, layers, library_layers):
    """One line per module on no layer, per import of a module on a layer its own may not import from,
    and per import of a library outside its layer; empty when the package keeps its layers."""
    modules = module_files(src)
    allowed = {name: {name, *below} for name, _, below in layers}
    problems = [f"{modules[name].relative_to(src)}: {name} is on no layer (add it to the table)"
                for name in modules if layer_of(name, layers) is None]
    for name, targets in package_imports(src).items():
        own = layer_of(name, layers)
        if own is None:
            continue
        where = modules[name].relative_to(src)
        for line, target in targets:
            if target in modules:
                theirs = layer_of(target, layers)
                if theirs is not None and theirs not in allowed[own]:
                    problems.append(f"{where}:{line}: {name} ({own}) imports {target} ({theirs}), which "
                                    f"the {own} layer may not import from")
            elif target in library_layers and own not in library_layers[target].split(", "):
                problems.append(f"{where}:{line}: {name} ({own}) imports {target}, which only "
                                f"the {library_layers[target]} layer may import")
    return problems


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


def test_an_upward_import_inside_a_function_a_stray_library_and_a_module_on_no_layer_are_named(tmp_path):
    src = write_package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/low.py": "import json\n\n\ndef helper():\n    from pkg.top import command\n",
        "pkg/top.py": "import jinja2\nfrom pkg.low import helper\nfrom pkg.sub.cli import register\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/cli.py": "from .. import top\n",  # on the top layer though its package is lower
        "pkg/sub/helpers.py": "import jinja2\n",
        "pkg/side.py": "from pkg.sub import helpers\n",  # beside pkg.sub, not above it
        "pkg/stray.py": "",
    })
    layers = (("bottom", ("pkg", "pkg.low"), ()), ("middle", ("pkg.sub.*",), ("bottom",)),
              ("side", ("pkg.side",), ("bottom",)), ("top", ("pkg.top", "pkg.sub.cli"), ("bottom", "middle")))
    assert layer_breaks(src, layers, {"jinja2": "middle"}) == [
        "pkg/stray.py: pkg.stray is on no layer (add it to the table)",
        "pkg/low.py:5: pkg.low (bottom) imports pkg.top (top), which the bottom layer may not import from",
        "pkg/side.py:1: pkg.side (side) imports pkg.sub (middle), which the side layer may not import from",
        ("pkg/side.py:1: pkg.side (side) imports pkg.sub.helpers (middle), which the side layer may not "
         "import from"),
        "pkg/top.py:1: pkg.top (top) imports jinja2, which only the middle layer may import",
    ]
    layers = (("bottom", ("pkg", "pkg.low", "pkg.stray"), ()), ("middle", ("pkg.sub.*",), ("bottom",)),
              ("side", ("pkg.side",), ("bottom", "middle")),
              ("top", ("pkg.top", "pkg.sub.cli"), ("bottom", "middle")))
    src.joinpath("pkg/low.py").write_text("import json\n", encoding="utf-8")
    assert layer_breaks(src, layers, {"jinja2": "top"}) == [
        "pkg/sub/helpers.py:1: pkg.sub.helpers (middle) imports jinja2, which only the top layer may import",
    ]


def test_the_table_names_modules_that_exist_and_each_layer_imports_only_from_layers_before_it():
    modules = module_files(SRC)
    assert "speedstats.github.cli" in modules and "speedstats.bench.worker" in modules  # the real package
    stale = [entry for _, entries, _ in LAYERS for entry in entries
             if not (entry[:-2] in modules if entry.endswith(".*") else entry in modules)]
    assert stale == []
    names = [name for name, _, _ in LAYERS]
    assert [(name, b) for i, (name, _, below) in enumerate(LAYERS) for b in below if b not in names[:i]] == []
    assert {layer for layers in LIBRARY_LAYERS.values() for layer in layers.split(", ")} <= set(names)


def test_every_module_imports_only_from_the_layers_it_may_and_libraries_stay_in_theirs():
    problems = layer_breaks(SRC, LAYERS, LIBRARY_LAYERS)
    assert problems == [], "the layers of src/speedstats are broken:\n" + "\n".join(problems)


def test_the_commands_are_on_the_top_layer():
    # speedstats.cli loads them by name; no module below imports a command (github/cli.py included)
    assert [m for m in COMMAND_MODULES if layer_of(m, LAYERS) != "commands"] == []


def test_the_package_has_no_import_circle():
    found = circles(import_graph(SRC))
    assert found == [], "import circles in src/speedstats: " + " | ".join(", ".join(c) for c in found)
