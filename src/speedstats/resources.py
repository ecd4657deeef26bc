"""Where the built-in suites and templates live: package data, found through importlib.resources,
so a wheel installed anywhere has them."""

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


def templates_dir():
    return _package_dir("templates")
