"""`speedstats doctor`'s checks of the machine: what a runner needs for a suite and its builds, each a row
(check, ok / warning / fails, what it found and what to do). Read-only: nothing is measured, no lock is
taken, nothing is written but the builds' cache (prepared as `run` prepares them, by the command).

The same facts and rules as `run` where `run` has them: the GPUs through NVML (machine_state.Gpus), a
case's GPUs (Suite.needing_more_gpus), each build's architectures and CUDA against each GPU and the
driver (driver_check), the one-op probe (gpu_probe), /dev/shm (shm), the device lock (speedstats.lock),
what disturbs a round (speedstats.machine). Nothing here imports torch or oneflow.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections import namedtuple
from pathlib import Path

from speedstats import lock, machine
from speedstats import suite as suites
from speedstats.bench import driver_check, gpu_probe, machine_state, shm
from speedstats.errors import UserError

OK, WARNING, FAILS = "ok", "warning", "fails"
STATUSES = (OK, WARNING, FAILS)
Row = namedtuple("Row", "check status text")

GIB = 1 << 30
MIB = 1 << 20
# What one build takes in the cache: OneFlow 0.9.0 installed is 2.4 GiB (its liboneflow alone 1.7), torch
# 2.7 with torchvision 1.6 GiB; pip unpacks a wheel in the temporary folder first.
BUILD_BYTES = 3 * GIB
DATASET_BYTES = 256 * MIB  # the generated ImageFolder, with room to spare
QUIET_SECONDS = 10.0


def worst(rows):
    """The worst status among rows."""
    return max((row.status for row in rows), key=STATUSES.index, default=OK)


# -- the GPUs ---------------------------------------------------------------------------------------


def gpu_rows(gpus, facts, suite, device):
    """The GPUs NVML sees, and the cases they are too few for. gpus: a machine_state.Gpus over every
    visible GPU; facts: its run_info()."""
    if device == "cpu":
        return [Row("GPUs", OK, "not looked for (--device cpu): the run measures on the CPU")]
    if not facts:
        why = gpus.reason or "NVML sees no GPU"
        if device == "cuda":
            return [Row("GPUs", FAILS, f"{why}: a run with --device cuda exits 2 (install the NVIDIA driver "
                                       "and nvidia-ml-py, or give the container the GPUs: --gpus all)")]
        return [Row("GPUs", WARNING, f"{why}: the run measures on the CPU (--device auto)")]
    names = "; ".join(gpu_probe.gpu_text(fact) for fact in facts)
    rows = [Row("GPUs", OK, f"{len(facts)} seen through NVML: {names}")]
    lacking = suite.needing_more_gpus(len(facts))
    if not lacking:
        wanted = max((case.world_size for case in suite.cases if case.ddp), default=1)
        rows.append(Row("GPUs for the cases", OK, f"every case fits: the most GPUs a case needs is {wanted}"))
    elif suite.too_few_gpus == suites.TOO_FEW_GPUS_FAIL:
        rows.append(Row("GPUs for the cases", FAILS,
                        f"{suites.gpu_shortfall(lacking, len(facts))}: the run exits 2 before the lock (the "
                        "suite's too_few_gpus: fail; 'skip' leaves them out), or give the runner more GPUs"))
    elif len(lacking) == len(suite.cases):
        rows.append(Row("GPUs for the cases", FAILS,
                        f"{suites.gpu_shortfall(lacking, len(facts))}: no case of the suite runs here"))
    else:
        rows.append(Row("GPUs for the cases", WARNING,
                        f"{suites.gpu_shortfall(lacking, len(facts))}: the run skips them, with a line each "
                        "in the comment (the suite's too_few_gpus: skip), or give the runner more GPUs"))
    return rows


def architecture_rows(builds, facts, probe=None):
    """Each build against each GPU: its architecture list where it has one (a failing list is the row),
    then one op on each GPU (probe: gpu_probe.probe_build). builds: {role: bench.builds.Build}."""
    probe = probe or gpu_probe.probe_build
    if not facts:
        return [Row("GPU architectures", OK, "no GPU to check")]
    rows = []
    for role, build in builds.items():
        name = gpu_probe.build_name(role, build.provenance)
        _, _, archs = driver_check.build_archs(build.provenance)
        tried = []
        for fact in facts:
            try:
                driver_check.check_architectures({role: build}, [fact])
            except UserError as exc:
                rows.append(Row(f"{name} on GPU {fact.get('index', 0)}", FAILS, str(exc)))
                continue
            tried.append(fact)
        if not tried:
            continue
        by_index = {fact.get("index", 0): fact for fact in tried}
        listed = f"its kernels ({' '.join(archs)}) fit, and " if archs else ""
        for result in probe(build, list(by_index)):
            check = f"{name} on GPU {result.index}"
            where = gpu_probe.gpu_text(by_index[result.index])
            if result.ran:
                rows.append(Row(check, OK, f"{listed}an op ran on {where}"))
            elif result.ran is None:
                rows.append(Row(check, WARNING, f"not known whether it runs on {where}: {result.cause}"))
            else:
                rows.append(Row(check, FAILS, f"an op failed on {where}: {result.cause} (use a build "
                                              "compiled for this GPU's compute capability)"))
    return rows


def driver_rows(builds, driver):
    """The driver against each build's CUDA version (driver_check.check_driver)."""
    if not driver or not driver.get("cuda"):
        return [Row("driver", OK, "no NVIDIA driver to check")]
    rows = []
    for role, build in builds.items():
        name = gpu_probe.build_name(role, build.provenance)
        need = driver_check.build_cuda(build.provenance)[2]
        try:
            notes = driver_check.check_driver({role: build}, driver)
        except UserError as exc:
            rows.append(Row(f"driver for {name}", FAILS, str(exc)))
            continue
        if notes:
            rows.append(Row(f"driver for {name}", OK, notes[0]))
        elif need is None:
            rows.append(Row(f"driver for {name}", OK, "a build without CUDA, or one that does not say"))
        else:
            rows.append(Row(f"driver for {name}", OK,
                            f"driver {driver.get('version')} supports CUDA {driver['cuda']}, the build is "
                            f"for {need[0]}.{need[1]}"))
    return rows


def clock_rows(gpus, facts, suite):
    """Persistence mode and application clocks, and what they mean for the band and the thresholds."""
    rows = []
    band = suite.head_vs_base.min_effect * 100
    for fact in facts:
        index = fact.get("index", 0)
        handle = gpus.handles.get(index)
        parts, status = [], OK
        if fact.get("persistence_mode") == 0:
            status = WARNING
            parts.append("persistence mode is off: the driver may unload between jobs, so each worker's "
                         "first CUDA call is slower and clock settings reset (sudo nvidia-smi -pm 1)")
        elif fact.get("persistence_mode") == 1:
            parts.append("persistence mode is on")
        current = default = None
        if handle is not None:
            current, _ = gpus.query(gpus.nvml.nvmlDeviceGetApplicationsClock, handle, gpus.nvml.NVML_CLOCK_SM)
            default, _ = gpus.query(gpus.nvml.nvmlDeviceGetDefaultApplicationsClock, handle,
                                    gpus.nvml.NVML_CLOCK_SM)
        if current is not None and default is not None and current != default:
            parts.append(f"application clocks set to {current} MHz (default {default}): steadier from run to "
                         "run; a max_oneflow_ms threshold set at other clocks may not fit")
        else:
            parts.append(f"clocks are not locked: the GPU boosts by temperature and power, so times move a "
                         f"few percent between runs; head and base, measured in alternating rounds of one "
                         f"run, keep the ±{band:g}% band, a max_oneflow_ms threshold across runs less so")
        rows.append(Row(f"clocks of GPU {index}", status, "; ".join(parts)))
    return rows


def in_container():
    return Path("/.dockerenv").exists() or Path("/run/.containerenv").exists()


def container_rows(gpus):
    """NVML reports PIDs of the host's namespace: inside a container of its own PID namespace the run tells
    its GPU processes by when they appear (machine_state.MachineWatch)."""
    if not gpus.handles:
        return []
    pids = sorted({pid for procs in gpus.compute_pids().values() for pid in procs})
    unseen = [pid for pid in pids if not os.path.exists(f"/proc/{pid}")]
    if unseen:
        shown = ", ".join(map(str, unseen[:5]))
        return [Row("GPU processes", WARNING,
                    f"NVML reports PIDs this machine's /proc does not have ({shown}): "
                    "host PIDs in a container. A GPU process counts as the run's when it appears while a "
                    "worker starts, so another job's process starting in that window is taken for the run's "
                    "(one job per GPU at a time: the device lock, SPEEDSTATS_LOCK_DIR shared by all jobs)")]
    if in_container():
        return [Row("GPU processes", OK, "in a container, no GPU process to compare now: where NVML "
                                         "reports host PIDs, a GPU process counts as the run's when it "
                                         "appears while a worker starts")]
    return [Row("GPU processes", OK, "NVML's PIDs are this machine's: GPU processes are told apart by PID")]


# -- the machine ------------------------------------------------------------------------------------


def _free(path):
    """(free bytes, the existing folder they were read from) of path's file system, or (None, None)."""
    for folder in (Path(path), *Path(path).absolute().parents):
        if folder.is_dir():
            try:
                return shutil.disk_usage(folder).free, folder
            except OSError:
                return None, folder
    return None, None


def disk_rows(cache, builds, keep_builds):
    """Free disk for the builds' cache (and pip's temporary folder) and the dataset. builds: the roles'
    bench.builds.Build (a build with a folder of its own lives in the cache)."""
    cached = sum(1 for build in builds.values() if build.site_dir is not None)
    rows = []
    free, folder = _free(cache)
    if free is None:
        return [Row("disk", FAILS, f"{cache}: no folder to read free space from")]
    if not os.access(folder, os.W_OK | os.X_OK):
        rows.append(Row("disk", FAILS, f"{folder}: not writable, the cache {cache} cannot be made there"))
        return rows
    # Each pull request may bring a new head and base build; the cache keeps keep_builds of them.
    need = DATASET_BYTES + (2 * BUILD_BYTES if cached else 0)
    most = DATASET_BYTES + (keep_builds * BUILD_BYTES if cached else 0)
    text = f"{free / GIB:.1f} GiB free for the cache {cache}"
    if free < need:
        rows.append(Row("disk", FAILS, f"{text}; a new head and base build need about {need / GIB:.0f} GiB: "
                                       "free space, or point --cache-dir (SPEEDSTATS_CACHE) elsewhere"))
    elif free < most:
        rows.append(Row("disk", WARNING, f"{text}; the cache keeps up to {keep_builds} builds, about "
                                         f"{most / GIB:.0f} GiB: lower --keep-builds or free space"))
    else:
        rows.append(Row("disk", OK, text + (f" (up to {keep_builds} builds, about {most / GIB:.0f} GiB)"
                                            if cached else "; the builds are the installed ones")))
    if cached:
        temp = tempfile.gettempdir()
        tmp_free, _ = _free(temp)
        if tmp_free is not None and tmp_free < BUILD_BYTES:
            rows.append(Row("temporary folder", FAILS,
                            f"{temp} has {tmp_free / GIB:.1f} GiB free; pip unpacks a build there first, "
                            f"about {BUILD_BYTES / GIB:.0f} GiB: set TMPDIR to a folder with room"))
    return rows


def shm_rows(suite, contenders, path=shm.SHM_PATH):
    """/dev/shm against the DataLoader workers of the suite's cases (shm.needed_bytes)."""
    needs = [(case, shm.needed_bytes(case, contenders)) for case in suite.cases]
    needs = [(case, need) for case, need in needs if need]
    if not needs:
        return [Row("/dev/shm", OK, "no case uses DataLoader workers")]
    free = shm.free_bytes(path)
    if free is None:
        return [Row("/dev/shm", WARNING, f"no {path}: DataLoader workers may fail to share their batches")]
    short = [(case, need) for case, need in needs if need > free]
    top = max(need for _, need in needs)
    if not short:
        return [Row("/dev/shm", OK, f"{free / MIB:.0f} MiB free; the DataLoader workers need at most "
                                    f"{top / MIB:.0f} MiB")]
    cases = ", ".join(f"{case.id} ({case.num_workers} workers, {need / MIB:.0f} MiB)" for case, need in short)
    docker = ""
    if free <= 64 * MIB:
        docker = " (Docker's default is 64 MB, and a Docker action cannot pass --shm-size)"
    return [Row("/dev/shm", FAILS, f"{free / MIB:.0f} MiB free{docker}, too small for {cases}: those cases "
                                   f"fail; {shm.FIX}")]


def lock_rows(device, lock_dir=None, timeout_s=None):
    """The device lock's folder, and who holds each of the run's locks now (speedstats.lock)."""
    try:
        states = lock.lock_states(device, lock_dir)
    except UserError as exc:
        return [Row("device lock", FAILS, str(exc))]
    status, parts = OK, []
    for name, path, holder, problem in states:
        if problem and not path.exists():
            status = FAILS
            parts.append(f"{name}: {problem} (set SPEEDSTATS_LOCK_DIR to a folder every job can write)")
        elif problem:
            status = status if status == FAILS else WARNING
            parts.append(f"{name}: {problem}")
        elif holder:
            status = status if status == FAILS else WARNING
            wait = f" up to {timeout_s:.0f}s" if timeout_s is not None else ""
            parts.append(f"{name} is held by {holder}: a run waits for it{wait}")
        else:
            parts.append(f"{name} is free")
    folder = states[0][1].parent if states else lock_dir
    return [Row("device lock", status, f"{folder}: " + "; ".join(parts))]


def quiet_rows(device, spec, seconds, sleep=time.sleep, watch=None):
    """A short look at the machine: other processes' CPU time, throttled GPUs, other compute processes on
    the GPUs, judged as a timed round is (machine.round_disturbance)."""
    if seconds <= 0:
        return [Row("quiet machine", WARNING, "not checked (--quiet-seconds 0)")]
    watch = watch or machine_state.MachineWatch(device)
    try:
        begin = watch.begin([])
        sleep(seconds)
        state = watch.end(begin, [])
    finally:
        watch.close()
    for gpu in state["gpus"]:
        gpu["sm_clock_mhz"] = None  # an idle GPU runs at low clocks: only a round judges them
    found = machine.round_disturbance(state, spec)
    if found:
        texts = "; ".join(item["text"] for item in found)
        return [Row("quiet machine", WARNING, f"over {seconds:g}s: {texts}: a round measured so is marked "
                                              "disturbed and measured again "
                                              "(the suite's disturbance:)")]
    cpu = state["cpu"]
    other = cpu.get("other_cores")
    seen = f"other processes used {other:.2f} of {cpu.get('cores')} cores" if other is not None else "quiet"
    return [Row("quiet machine", OK, f"over {seconds:g}s: {seen}" + (", no other GPU process, no throttling"
                                                                       if state["gpus"] else ""))]
