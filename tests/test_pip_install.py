"""`speedstats run` for a user who installed the wheel with pip, in a fresh CPython 3.10 venv outside the
checkout: it names, in one line, the pip commands that install the frameworks, and after exactly those
commands the smoke suite runs on the CPU.

The package has no `bench` extra: flowvision 0.2.1 ships only as an sdist that builds with setuptools<70
and without build isolation, which no extra can ask pip for. The commands come from the error message
itself, run as a user would type them, without pip's download cache: on a fresh machine it would hold
another 5 GB of wheels beside the 10 GB venv, which is deleted at the end.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INSTALL_TIMEOUT_S = 1800
RUN_TIMEOUT_S = 1800

pytestmark = [pytest.mark.venv, pytest.mark.heavy]


def clean_env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "INPUT_", "RUNNER_", "SPEEDSTATS_", "PYTHON", "VIRTUAL_ENV",
                                "PIP_"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def ok(argv, env=None, **kwargs):
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, check=False,
                          env={**clean_env(), **(env or {})}, **kwargs)
    command = " ".join(map(str, argv))
    assert proc.returncode == 0, f"{command} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture
def base(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pip-install")
    assert ROOT not in folder.parents
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def build_wheel(base):
    source = base / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    for name in ("src", "templates"):
        shutil.copytree(ROOT / name, source / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    ok([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir",
        base / "wheels", source], timeout=INSTALL_TIMEOUT_S)
    (wheel,) = (base / "wheels").glob("speedstats-*.whl")
    return wheel


def test_the_missing_frameworks_error_names_the_pip_commands_and_they_make_a_working_run(base):
    assert sys.version_info[:2] == (3, 10)  # the one CPython with both OneFlow 0.9.0 and the pinned rest
    wheel = build_wheel(base)
    venv = base / "venv"
    ok([sys.executable, "-m", "venv", venv], timeout=INSTALL_TIMEOUT_S)
    python, speedstats = venv / "bin" / "python", venv / "bin" / "speedstats"
    ok([python, "-m", "pip", "install", "--quiet", wheel], timeout=INSTALL_TIMEOUT_S)
    work = base / "work"
    work.mkdir()

    def run():
        return subprocess.run([speedstats, "run", "--profile", "smoke", "--device", "cpu", "--out", "out"],
                              cwd=work, env=clean_env(), capture_output=True, text=True,
                              timeout=RUN_TIMEOUT_S, check=False)

    refused = run()
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    match = re.fullmatch(
        r"speedstats: error: run needs oneflow, flowvision, torch, torchvision, timm installed on CPython "
        r"3\.10: (pip install .+) \(or post results made elsewhere with 'speedstats render' and "
        r"'comment'\)\n", refused.stderr)
    assert match, refused.stderr
    assert "scripts/" not in refused.stderr and "bootstrap" not in refused.stderr
    commands = match.group(1).split(", then ")
    assert len(commands) == 2 and commands[1] == "pip install --no-build-isolation flowvision==0.2.1"
    # flowvision, too, from its sdist as on a user's machine, not from a wheel pip built and cached before.
    for command in commands:
        ok([python, "-m", *shlex.split(command)], cwd=work, timeout=INSTALL_TIMEOUT_S,
           env={"PIP_NO_CACHE_DIR": "1"})

    done = run()
    # 0, or 7 when something else on the machine disturbed the rounds: the figures are there either way.
    assert done.returncode in (0, 7), done.stderr[-3000:]
    results = json.loads((work / "out" / "results.json").read_text(encoding="utf-8"))
    assert len(results["cases"]) == 5
    for case in results["cases"]:
        for role, figures in case["frameworks"].items():
            assert figures["error"] is None and figures["per_iter_s"] > 0, (case["id"], role,
                                                                            figures["error"])
    assert "OneFlow resnet50 time:" in (work / "out" / "comment.md").read_text(encoding="utf-8")
