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


def _visible_entry(cuda_index):
    """What CUDA device `cuda_index` is on NVML's side under CUDA_VISIBLE_DEVICES: an NVML index or
    a UUID, or None when it hides that device. NVML itself ignores the variable."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return cuda_index
    entries = [entry.strip() for entry in visible.split(",")]
    if cuda_index >= len(entries):
        return None
    entry = entries[cuda_index]
    if entry.isdigit():
        return int(entry)
    return entry if entry.startswith(("GPU-", "MIG-")) else None


def nvml_handle(pynvml, cuda_index):
    """NVML's handle of CUDA device `cuda_index`; NVMLError (not found) when CUDA_VISIBLE_DEVICES hides it."""
    entry = _visible_entry(cuda_index)
    if entry is None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
    if isinstance(entry, int):
        return pynvml.nvmlDeviceGetHandleByIndex(entry)
    return pynvml.nvmlDeviceGetHandleByUUID(entry)


def _nvml(query, cuda_index=0):
    """query(pynvml, handle) for CUDA device `cuda_index`, or None when NVML, its driver library or
    the GPU is missing. NVMLError covers a missing libnvidia-ml, an unloaded driver, a missing device."""
    try:
        import pynvml
    except ImportError:
        return None
    entry = _visible_entry(cuda_index)
    if entry is None:
        return None
    try:
        pynvml.nvmlInit()
    except (pynvml.NVMLError, OSError):
        return None
    try:
        value = query(pynvml, nvml_handle(pynvml, cuda_index))
    except pynvml.NVMLError:
        return None
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()
    if isinstance(value, bytes):  # older bindings return bytes
        value = value.decode("utf-8", "replace")
    return value.strip() or None


def nvml_gpu_name(index=0):
    """NVML's name of CUDA device `index` (as CUDA_VISIBLE_DEVICES numbers them), or None without one."""
    return _nvml(lambda pynvml, handle: pynvml.nvmlDeviceGetName(handle), index)


def nvml_gpu_uuid(index=0):
    """The UUID of CUDA device `index` ("GPU-..."): the same physical GPU in every process and container."""
    return _nvml(lambda pynvml, handle: pynvml.nvmlDeviceGetUUID(handle), index)


def visible_gpu_count():
    """How many CUDA devices this process sees (0 without NVML or a GPU)."""
    count = 0
    while nvml_gpu_uuid(count) is not None:
        count += 1
    return count


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
