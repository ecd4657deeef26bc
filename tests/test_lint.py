"""The Python code passes `ruff check` as pyproject.toml configures it (line length 110)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.lint


def ruff(*args, stdin=None):
    found = shutil.which("ruff", path=os.pathsep.join([str(Path(sys.executable).parent),
                                                       os.environ.get("PATH", "")]))
    assert found, "ruff is not installed (requirements/test.txt)"
    return subprocess.run([found, "check", "--no-cache", "--output-format", "concise", *args], cwd=ROOT,
                          input=stdin, capture_output=True, text=True, check=False, timeout=120)


def test_the_configured_line_length_is_enforced():
    fits = "x = '" + "a" * 104 + "'\n"
    assert len(fits.rstrip("\n")) == 110
    assert ruff("--stdin-filename", "src/speedstats/example.py", "-", stdin=fits).returncode == 0
    over = ruff("--stdin-filename", "src/speedstats/example.py", "-", stdin=fits.replace("a", "aa", 1))
    assert over.returncode == 1
    assert over.stdout.startswith("src/speedstats/example.py:1:111: E501 Line too long (111 > 110)")


def test_ruff_check_passes():
    proc = ruff()
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "All checks passed!\n", "")

