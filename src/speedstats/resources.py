"""Where the built-in suites and templates live: package data, found through importlib.resources,
so a wheel installed anywhere has them.

The templates are the repository's top-level templates/ folder, which the wheel carries as
speedstats/templates/ (pyproject.toml: package-dir). Run from a checkout (an editable install or
PYTHONPATH=src), the package has no such folder and the checkout's own is used."""

import os
from importlib import resources
from pathlib import Path


def _package_dir(name):
    override = os.environ.get("SPEEDSTATS_HOME")
    if override:
        return Path(override) / name
    # speedstats is a regular package installed as files (a wheel or an editable checkout), so the
    # traversable is a real folder that Jinja's FileSystemLoader and glob can use.
    return Path(str(resources.files("speedstats") / name))


def suites_dir():
    return _package_dir("suites")


CHECKOUT_TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


def templates_dir():
    packaged = _package_dir("templates")
    if packaged.is_dir() or os.environ.get("SPEEDSTATS_HOME"):
        return packaged
    return CHECKOUT_TEMPLATES
