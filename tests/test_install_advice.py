"""When the frameworks are missing, `speedstats run` says in one line which pip commands install them,
with the pins of requirements/bench.txt; tests/test_pip_install.py runs those commands in a fresh venv.

Which packages are installed is set here through importlib.util.find_spec, the one call through which
the check looks at the environment: the named ones are missing, the other frameworks and NVML's
bindings are there."""

import importlib.machinery
import importlib.util
import re
from pathlib import Path

import pytest

from speedstats.cli import MESSAGE_LIMIT
from speedstats.errors import UserError
from speedstats.pipeline import check_frameworks_installed

ROOT = Path(__file__).resolve().parents[1]
FRAMEWORKS = ("oneflow", "flowvision", "torch", "torchvision", "timm")


@pytest.fixture
def missing(monkeypatch):
    def hide(*names):
        real = importlib.util.find_spec

        def find_spec(name, *args):
            if name in names:
                return None
            if name in (*FRAMEWORKS, "pynvml"):
                return importlib.machinery.ModuleSpec(name, None)
            return real(name, *args)

        monkeypatch.setattr(importlib.util, "find_spec", find_spec)

    return hide


def advice(families=("oneflow", "pytorch")):
    with pytest.raises(UserError) as error:
        check_frameworks_installed(families)
    text = str(error.value)
    assert "\n" not in text and "scripts/" not in text and "bootstrap" not in text
    return text


def test_everything_missing_names_both_commands_with_the_pins_of_the_bench_requirements(missing):
    missing(*FRAMEWORKS, "pynvml")
    assert advice() == (
        "run needs oneflow, flowvision, torch, torchvision, timm installed on CPython 3.10: pip install "
        "oneflow==0.9.0 nvidia-cudnn-cu11==8.9.6.50 "
        'nvidia-cublas-cu11==11.11.3.6 "numpy<2" torch==2.7.1 torchvision==0.22.1 timm==1.0.31 nvidia-ml-py '
        '"setuptools<70" wheel, then pip install --no-build-isolation flowvision==0.2.1 (or post results '
        "made elsewhere with 'speedstats render' and 'comment')")
    assert len(advice()) <= MESSAGE_LIMIT  # the CLI cuts a longer line
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", (ROOT / "requirements" / "bench.txt").read_text(),
                           re.MULTILINE))
    for name in ("oneflow", "nvidia-cudnn-cu11", "nvidia-cublas-cu11", "torch", "torchvision", "timm"):
        assert f" {name}=={pins[name]} " in advice(), name
    assert pins["numpy"].startswith("1.")  # "numpy<2" in the advice


def test_only_flowvision_missing_names_its_build_only(missing):
    missing("flowvision")
    assert advice() == (
        'run needs flowvision installed: pip install "setuptools<70" wheel, then pip install '
        "--no-build-isolation flowvision==0.2.1 (or post results made elsewhere with 'speedstats render' and "
        "'comment')")


def test_a_pytorch_only_run_names_the_pytorch_packages_only(missing):
    missing("timm", "oneflow", "flowvision")
    assert advice(("pytorch",)).startswith("run needs timm installed: pip install timm==1.0.31 (or post")


def test_nothing_missing_passes(missing):
    missing("pynvml")  # NVML's bindings alone are not needed for a run: a CPU run does without them
    check_frameworks_installed()
