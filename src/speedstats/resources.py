"""Where the built-in suites and templates live (top-level folders of the project)."""

import os
from pathlib import Path


def project_root():
    override = os.environ.get("SPEEDSTATS_HOME")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[2]


def suites_dir():
    return project_root() / "suites"


def templates_dir():
    return project_root() / "templates"
