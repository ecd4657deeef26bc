"""The layers of src/speedstats, as a table: which layer each module is on and which layers it may import
from, besides its own, and the libraries that belong to one layer. tests/test_layers.py holds the package
to it; CONTRIBUTING.md ("Layout and layers") shows the same table, and tests/test_contributing.py holds
the two together."""

from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


# Each layer: its name, its modules, and the layers it may import from besides its own (all listed before
# it). An entry is a module ("speedstats.results") or a package with all its modules ("speedstats.bench.*");
# a module named on its own is on that layer even inside a package named with *.
LAYERS = (
    ("helpers", ("speedstats", "speedstats.contenders", "speedstats.errors", "speedstats.text",
                 "speedstats.fsutil", "speedstats.resources", "speedstats.actions_io", "speedstats.gpuinfo",
                 "speedstats.lock", "speedstats.casekinds", "speedstats.settings"), ()),
    ("statistics", ("speedstats.analysis.*",), ("helpers",)),
    ("results", ("speedstats.results", "speedstats.suite", "speedstats.machine"), ("helpers", "statistics")),
    ("verdict", ("speedstats.verdict",), ("helpers", "statistics", "results")),
    ("bench", ("speedstats.bench.*",), ("helpers", "statistics", "results", "verdict")),
    ("render", ("speedstats.render",), ("helpers", "statistics", "results", "verdict")),
    ("files", ("speedstats.bundle", "speedstats.history", "speedstats.parse", "speedstats.calibration"),
     ("helpers", "statistics", "results")),
    ("github", ("speedstats.github.*",), ("helpers", "statistics", "results", "verdict", "render", "files")),
    ("commands", ("speedstats.cli", "speedstats.__main__", "speedstats.pipeline", "speedstats.run_cli",
                  "speedstats.render_cli", "speedstats.compare_cli", "speedstats.suite_cli",
                  "speedstats.doctor_cli", "speedstats.bisect_cli", "speedstats.reproduce_cli",
                  "speedstats.calibrate_cli",
                  "speedstats.child_run", "speedstats.github.cli"),
     ("helpers", "statistics", "results", "verdict", "bench", "render", "files", "github")),
)


# The libraries only one layer imports (numpy two: "bench, statistics"): the renderer and the GitHub commands
# run without the frameworks (requirements/light.txt), only render fills templates, and only github/ talks
# to GitHub.
LIBRARY_LAYERS = {
    "torch": "bench", "torchvision": "bench", "oneflow": "bench", "flowvision": "bench", "timm": "bench",
    "PIL": "bench",
    "numpy": "bench, statistics",  # the change points hand ruptures their series as arrays
    "matplotlib": "statistics", "ruptures": "statistics",
    "jinja2": "render",
    "github": "github", "requests": "github",
}


def module_files(src):
    """{dotted module name: file} of every module under src (a package is named by its __init__.py)."""
    modules = {}
    for path in sorted(src.rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules
