"""Is /dev/shm big enough for a dataloader case's workers?

PyTorch's and OneFlow's dataloader workers hand their batches to the main process through shared
memory: each worker keeps `prefetch_factor` (2) batches in flight. A Docker container gets a 64 MB
/dev/shm unless the daemon says otherwise, and a Docker action cannot pass --shm-size, so a case
with 4 or 8 workers of 32x3x224x224 float32 batches (19 MB each) dies with a bus error minutes
into the run. Checked before the case starts instead, so it fails at once with the fix.
"""
from __future__ import annotations

import os

from speedstats.casekinds import case_kind

SHM_PATH = "/dev/shm"
PREFETCH_FACTOR = 2  # the default of both frameworks' DataLoader
FLOAT32_BYTES = 4
CONTENDERS = 2  # frameworks whose workers may be alive at the same time
MARGIN = 1.5  # labels, pinned copies, the allocator's rounding
FIX = ('set "default-shm-size": "8G" beside "default-runtime": "nvidia" in the runner host\'s '
       '/etc/docker/daemon.json, then restart Docker')


def needed_bytes(case, contenders=CONTENDERS):
    """Shared memory the case's dataloader workers may hold at once; 0 when it has none."""
    if not case_kind(case.kind).uses_dataset or not case.num_workers:
        return 0
    batch = case.batch_size * 3 * case.input_size ** 2 * FLOAT32_BYTES
    return int(case.num_workers * PREFETCH_FACTOR * batch * contenders * MARGIN)


def free_bytes(path=SHM_PATH):
    """Free bytes on path's file system; None when there is no such folder (not Linux)."""
    try:
        stat = os.statvfs(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return stat.f_bavail * stat.f_frsize


def shm_error(case, path=SHM_PATH, contenders=CONTENDERS):
    """One line saying how to fix a too small shared memory for this case, or None when it fits."""
    need = needed_bytes(case, contenders)
    if need == 0:
        return None
    free = free_bytes(path)
    if free is None or free >= need:
        return None
    mib = 1 << 20
    return (f"{path} has {free / mib:.0f} MiB free, the {case.num_workers} dataloader workers per framework "
            f"need about {need / mib:.0f} MiB (batches "
            f"of {case.batch_size}x3x{case.input_size}x{case.input_size} "
            f"float32, {PREFETCH_FACTOR} in flight per worker); not run: {FIX}")
