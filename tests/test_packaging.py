"""What the wheel carries: every package under src/, the suites, and the top-level templates/ folder as
speedstats/templates (pyproject.toml: package-dir). tests/test_installed_wheel.py builds and installs it."""
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

from speedstats import resources

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"


def setuptools_config():
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["setuptools"]


def test_every_package_under_src_is_listed_with_the_suites_and_the_templates():
    found = [".".join(p.parent.relative_to(SRC).parts) for p in SRC.rglob("__init__.py")]
    listed = setuptools_config()["packages"]
    assert sorted(listed) == sorted([*found, "speedstats.suites", "speedstats.templates"])


def test_the_templates_are_the_top_level_folder_shipped_inside_the_package():
    config = setuptools_config()
    assert config["package-dir"] == {"": "src", "speedstats.templates": "templates"}
    assert config["package-data"] == {"speedstats.suites": ["*.yml"], "speedstats.templates": ["*.j2"]}
    shipped = sorted(p.name for p in (ROOT / "templates").iterdir())
    # nothing there that the wheel would leave out
    assert shipped and all(name.endswith(".j2") for name in shipped)
    assert "speed_stats.md.j2" in shipped
    assert not (SRC / "speedstats" / "templates").exists()


def test_a_checkout_reads_the_top_level_templates(monkeypatch):
    monkeypatch.delenv("SPEEDSTATS_HOME", raising=False)
    assert resources.templates_dir() == ROOT / "templates"
    assert resources.suites_dir() == SRC / "speedstats" / "suites"
