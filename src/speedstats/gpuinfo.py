"""The name printed after "GPU Name:" in the comment.

On a GPU it is what NVML reports for the device (e.g. "NVIDIA GeForce RTX 3080 Ti"), read with
`pynvml` from the nvidia-ml-py package: no torch, no CUDA context. Without NVML or without a GPU it
names the CPU instead, e.g. "CPU: AMD EPYC 7B13 (2 cores)", so thresholds keyed by this name never
mistake a CPU run for a GPU one.
"""

import contextlib
import os
import platform
from pathlib import Path


def nvml_gpu_name(index=0):
    """NVML's name of GPU `index`, or None when NVML, its driver library or the GPU is missing."""
    try:
        import pynvml
    except ImportError:
        return None
    # NVMLError covers a missing libnvidia-ml, an unloaded driver and a missing device.
    try:
        pynvml.nvmlInit()
    except (pynvml.NVMLError, OSError):
        return None
    try:
        name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(index))
    except pynvml.NVMLError:
        return None
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()
    if isinstance(name, bytes):  # older bindings return bytes
        name = name.decode("utf-8", "replace")
    return name.strip() or None


def cpu_count():
    """CPUs this process may run on (the container's or affinity's limit, not the host's)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cpu_model(cpuinfo_path="/proc/cpuinfo"):
    """The CPU model: /proc/cpuinfo's 'model name' (x86) or 'Model'/'Hardware' (ARM), else platform."""
    try:
        text = Path(cpuinfo_path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and value.strip():
            fields.setdefault(key.strip().lower(), " ".join(value.split()))
    for key in ("model name", "model", "hardware", "cpu model", "processor"):
        value = fields.get(key)
        if value and not value.isdigit():  # x86's 'processor' field is only an index
            return value
    return platform.processor() or platform.machine() or "unknown"


def cpu_name():
    cores = cpu_count()
    return f"CPU: {cpu_model()} ({cores} core{'' if cores == 1 else 's'})"


def _cuda_index(device):
    name = str(device).strip().lower()
    if name in ("cuda", "gpu", "auto"):
        return 0
    if name.startswith("cuda:"):
        try:
            return int(name[len("cuda:"):])
        except ValueError:
            return 0
    return None


def device_name(device="cuda"):
    """The name for the comment: the GPU's for a CUDA device, the CPU's for 'cpu' or without a GPU."""
    index = _cuda_index(device)
    if index is not None:
        name = nvml_gpu_name(index)
        if name:
            return name
    return cpu_name()


def gpu_name():
    """NVML's name of device 0, or the CPU's name when there is no GPU."""
    return device_name("cuda:0")
