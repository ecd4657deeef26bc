"""The test tiers (markers in pyproject.toml): ./scripts/test.sh --fast leaves out every marked tier and
runs with the light dependencies only, so every test file must load without the heavy ones. What test files
share lives in helper modules (tests/helpers.py and the others not named test_*), never in a test file."""
import ast
import os
import re
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
HEAVY_MODULES = ("torch", "torchvision", "oneflow", "flowvision", "timm", "numpy", "matplotlib", "PIL")

LOAD_ALL = """
import importlib, importlib.abc, sys

heavy = set(sys.argv[1].split(","))

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in heavy:
            raise ImportError(f"{name} is imported when the file loads")

sys.meta_path.insert(0, Refuse())
for name in sys.argv[2:]:
    try:
        importlib.import_module(name)
    except ImportError as exc:
        print(f"tests/{name}.py: {exc}")
"""


def test_every_test_file_loads_without_the_heavy_dependencies():
    names = sorted(p.stem for p in (ROOT / "tests").glob("*.py"))
    assert "conftest" in names and "test_render" in names
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])}
    proc = subprocess.run([sys.executable, "-c", LOAD_ALL, ",".join(HEAVY_MODULES), *names], cwd=ROOT,
                          env=env, capture_output=True, text=True, check=False, timeout=120)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_the_fast_tier_leaves_out_every_registered_tier():
    with open(ROOT / "pyproject.toml", "rb") as f:
        markers = tomllib.load(f)["tool"]["pytest"]["ini_options"]["markers"]
    tiers = {line.split(":", 1)[0] for line in markers}
    assert {"heavy", "frameworks", "venv", "lint", "repeat"} <= tiers
    script = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    (expression,) = re.findall(r'-m "([^"]*)"', script)
    assert re.fullmatch(r"not \w+( and not \w+)*", expression)
    assert set(re.findall(r"not (\w+)", expression)) == tiers


def test_no_test_file_imports_another():
    found = []
    for path in sorted((ROOT / "tests").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.name}:{node.lineno}: {name}" for name in names
                      if name.partition(".")[0].startswith(("test_", "conftest"))]
    assert found == []
