"""The GPU name: NVML's where there is a GPU (checked against nvidia-smi), the CPU's otherwise."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import nvidia_smi_name
from speedstats import gpuinfo

SRC = str(Path(__file__).resolve().parents[1] / "src")

X86_CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B13
cpu cores\t: 1

processor\t: 1
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B13
"""

ARM_CPUINFO = """processor\t: 0
BogoMIPS\t: 50.00
Features\t: fp asimd evtstrm
CPU implementer\t: 0x41

Hardware\t: Neoverse-N1   board
"""


def test_cpu_model_from_x86_cpuinfo(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(X86_CPUINFO)
    assert gpuinfo.cpu_model(path) == "AMD EPYC 7B13"


def test_cpu_model_from_arm_cpuinfo_skips_the_numeric_processor_field(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(ARM_CPUINFO)
    assert gpuinfo.cpu_model(path) == "Neoverse-N1 board"


def test_cpu_model_without_cpuinfo_falls_back_to_platform(tmp_path):
    import platform

    assert gpuinfo.cpu_model(tmp_path / "missing") == (platform.processor() or platform.machine())


def test_cpu_name_names_the_model_and_the_usable_cores():
    cores = len(os.sched_getaffinity(0))
    expected = f"CPU: {gpuinfo.cpu_model()} ({cores} core{'' if cores == 1 else 's'})"
    assert gpuinfo.cpu_name() == expected
    assert gpuinfo.device_name("cpu") == expected


def test_cpu_name_counts_the_affinity_not_the_host():
    # A process pinned to one CPU (as a container limit would) reports one core.
    code = "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); " \
           "from speedstats.gpuinfo import cpu_name; print(cpu_name())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": SRC}).stdout
    assert out == f"CPU: {gpuinfo.cpu_model()} (1 core)\n"


def test_gpu_name_is_nvml_name_or_cpu_name():
    expected = nvidia_smi_name() or gpuinfo.cpu_name()
    assert gpuinfo.gpu_name() == expected
    assert gpuinfo.device_name("cuda") == expected
    assert gpuinfo.device_name("auto") == expected


@pytest.mark.skipif(nvidia_smi_name() is not None, reason="this machine has a GPU")
def test_without_a_gpu_nvml_reports_nothing_and_cuda_falls_back_to_the_cpu():
    assert gpuinfo.nvml_gpu_name(0) is None
    assert gpuinfo.device_name("cuda:0") == gpuinfo.cpu_name()


@pytest.mark.skipif(nvidia_smi_name() is None, reason="needs a GPU and nvidia-smi")
def test_with_a_gpu_the_name_is_nvmls():
    assert gpuinfo.nvml_gpu_name(0) == nvidia_smi_name()


def test_gpuinfo_imports_neither_framework():
    code = "import sys, speedstats.gpuinfo as g; g.gpu_name(); " \
           "print(sorted(m for m in ('torch', 'oneflow') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": SRC}).stdout
    assert out == "[]\n"
