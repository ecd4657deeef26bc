"""Can a build run on a GPU? One tiny op on each GPU, in a throwaway process of the build's own.

A build that does not say which architectures its kernels were compiled for (a OneFlow build: see
bench.driver_check) is asked the only way left: a process with the build's environment (as a worker
gets it: bench.builds.Build.worker_env) imports the framework, adds two small tensors on each GPU and
reads the sum back, which waits for the kernel. A build without kernels for a GPU fails there ("no
kernel image is available for execution on the device"), in seconds and outside the device lock,
instead of at the first kernel of a measured case. The process exits, so nothing of it stays on the GPU.
Nothing here imports torch or oneflow.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass

from speedstats.bench.driver_check import build_archs
from speedstats.bench.environment import subprocess_env
from speedstats.contenders import LABELS, of_family
from speedstats.errors import UserError
from speedstats.text import one_line

PROBE_TIMEOUT_S = 120.0
CPU = -1  # the index that stands for the CPU (the probe's own test, where there is no GPU)
_OK = "SPEEDSTATS-GPU-OK"
_CAUSE_LIMIT = 240

# python -c PROBE <package> <indices, comma separated>: one op per device, a line after each.
PROBE = r"""
import importlib, sys
framework = importlib.import_module(sys.argv[1])
for index in [int(i) for i in sys.argv[2].split(",")]:
    device = "cpu" if index < 0 else "cuda:%d" % index
    value = float((framework.ones(64, device=device) * 2).sum().item())
    if value != 128.0:
        raise SystemExit("%s: 2 * ones(64) summed to %r, not 128" % (device, value))
    print("SPEEDSTATS-GPU-OK %d" % index, flush=True)
"""


@dataclass
class ProbeResult:
    """How one device took the op: ran (True), failed (False, with its cause) or not known (None: the
    process ran past its timeout, or stopped at an earlier device)."""

    index: int
    ran: bool | None
    cause: str = ""


# OneFlow's log lines start "F20240101 12:00:00.123 4242 file.cpp:137] ".
_GLOG_PREFIX = re.compile(r"^[FEWI]\d{8} [\d:.]+ +\d+ [^\]]+\] ")


def _cause(stderr, returncode):
    """The line of stderr that says what went wrong (a Python error, CUDA's message), or the exit."""
    lines = [_GLOG_PREFIX.sub("", line.strip()) for line in (stderr or "").splitlines() if line.strip()]
    for line in reversed(lines):
        if re.match(r"^[A-Za-z_.]*(Error|Exception)\b", line) or "CUDA" in line or "error" in line.lower():
            return one_line(line, _CAUSE_LIMIT)
    if lines:
        return one_line(lines[-1], _CAUSE_LIMIT)
    if returncode < 0:
        return f"killed by signal {-returncode}"
    return f"exit status {returncode}"


def probe_build(build, indices, python=sys.executable, timeout_s=PROBE_TIMEOUT_S):
    """[ProbeResult] of each device in `indices` (CUDA indices; CPU for the CPU) for a bench.builds.Build.
    After a device fails, the ones after it are tried in a fresh process."""
    package = of_family(build.family).package
    env = build.worker_env(subprocess_env(build.family))
    left, found = list(indices), []
    while left:
        try:
            proc = subprocess.run([python, "-c", PROBE, package, ",".join(map(str, left))], env=env,
                                  capture_output=True, text=True, timeout=timeout_s, check=False)
            ran = {int(line.split()[1]) for line in proc.stdout.splitlines()
                   if line.startswith(_OK + " ") and line.split()[1].lstrip("-").isdigit()}
        except subprocess.TimeoutExpired:
            found += [ProbeResult(i, None, f"the op did not finish within {timeout_s:.0f}s") for i in left]
            break
        done = [i for i in left if i in ran]
        found += [ProbeResult(i, True) for i in done]
        left = [i for i in left if i not in ran]
        if not left:
            break
        if proc.returncode == 0:  # finished without a word about these: nothing to tell
            found += [ProbeResult(i, None, "the probe said nothing about it") for i in left]
            break
        found.append(ProbeResult(left[0], False, _cause(proc.stderr, proc.returncode)))
        left = left[1:]
    return found


def build_name(role, provenance):
    """"OneFlow build oneflow 0.9.1+cu118", as bench.driver_check names a build."""
    package, version, _ = build_archs(provenance)
    return f"{LABELS.get(role, role)} build {package} {version}".rstrip()


def gpu_text(gpu):
    """"GPU 0 NVIDIA H100 80GB HBM3 (compute capability 9.0)" of a machine_state.Gpus.run_info() record."""
    capability = gpu.get("compute_capability")
    return (f"GPU {gpu.get('index', 0)} {gpu.get('name') or 'unnamed'}"
            + (f" (compute capability {capability})" if capability else ""))


def untold_builds(builds):
    """{role: build} of the builds whose architectures bench.driver_check cannot tell: the probe's to ask."""
    return {role: build for role, build in builds.items()
            if build_archs(getattr(build, "provenance", build))[2] is None}


def check_builds_run(builds, gpus, progress, probe=None):
    """Before the lock, on CUDA: each build whose architectures are not told runs the op on each GPU of
    the run (gpus: machine_state.Gpus.run_info() records); UserError naming the build and the GPU where
    it fails. A probe that cannot tell (it timed out) is a line through progress, not a failure."""
    probe = probe or probe_build
    by_index = {gpu.get("index", 0): gpu for gpu in gpus}
    if not by_index:
        return
    for role, build in untold_builds(builds).items():
        name = build_name(role, build.provenance)
        progress(f"speedstats: {name} does not tell its GPU architectures: running one op on "
                 f"{len(by_index)} GPU{'s' if len(by_index) != 1 else ''}")
        for result in probe(build, list(by_index)):
            where = gpu_text(by_index.get(result.index, {"index": result.index}))
            if result.ran is False:
                raise UserError(f"{name} cannot run on {where}: an op on it failed: {result.cause} (use a "
                                "build compiled for this GPU's compute capability)")
            if result.ran is None:
                progress(f"speedstats: {name} on {where}: not known whether it runs ({result.cause})")
