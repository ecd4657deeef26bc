"""The peak memory of a worker's process tree while its rounds run, sampled by the runner.

A thread of the runner (never the worker: both frameworks are measured the same way, and the process
measured runs nothing of ours) wakes every `interval_s`, sums the resident memory (VmRSS) of the
worker's processes (a DDP launcher, its ranks, dataloader workers: the descendants of the worker's
processes at the round's start, looked for again every REFRESH_S) and, on CUDA, the GPU memory NVML
reports for them, and keeps the largest sums. It sleeps between samples, so it keeps no core busy.

Which GPU processes are the worker's: NVML reports PIDs of the host's PID namespace. A PID that is one
of the tree's (the same namespace as the runner) counts, and so does one that appeared on the GPU while
this worker was starting (bench.machine_state.MachineWatch.started: inside a container with a PID
namespace of its own, the only way to tell; /proc/PID/status NSpid there lists the container's PID
only). Resident memory shared between processes (forked dataloader workers) counts once per process.
"""

from __future__ import annotations

import threading
import time

from speedstats.bench import processes
from speedstats.bench.instruments import Instrument

INTERVAL_S = 0.02
REFRESH_S = 0.5  # how often the tree is looked for again (new dataloader workers, DDP ranks)
RSS_KIND = "rss-tree"
GPU_KIND = "nvml-tree"


class PeakSampler:
    """Samples one worker's memory from start() to stop(); peaks() gives the largest sums seen.

    roots: the worker's pids at the start; gpu_pids: None on the CPU, else a function returning
    {gpu index: {pid: used bytes or None}} now (bench.machine_state.Gpus.compute_pids), and
    host_pids the worker's pids as NVML reports them when they are not the tree's own."""

    def __init__(self, roots, gpu_pids=None, host_pids=(), interval_s=INTERVAL_S):
        self.roots = list(roots)
        self.gpu_pids = gpu_pids
        self.host_pids = set(host_pids)
        self.interval_s = interval_s
        self.peak_rss = 0
        self.peak_gpu = None if gpu_pids is None else 0
        self.samples = 0
        self.error = None  # the last sample's failure, if any
        self._stop = threading.Event()
        self._thread = None

    def sample(self):
        now = time.monotonic()
        if now >= self._next_refresh:
            self._tree = processes.descendants(self.roots + sorted(self._tree))
            self._next_refresh = now + REFRESH_S
        rss = sum(processes.resident_bytes(pid) for pid in self._tree)
        self.peak_rss = max(self.peak_rss, rss)
        if self.gpu_pids is not None:
            ours = self._tree | self.host_pids
            used = sum(memory or 0 for procs in self.gpu_pids().values()
                       for pid, memory in procs.items() if pid in ours)
            self.peak_gpu = max(self.peak_gpu, used)
        self.samples += 1

    def _safe_sample(self):
        try:
            self.sample()
        except Exception as exc:  # noqa: BLE001 - a failed look must not end the sampling of a round
            self.error = f"{type(exc).__name__}: {exc}"

    def _loop(self):
        while not self._stop.is_set():
            self._safe_sample()
            self._stop.wait(self.interval_s)

    def start(self):
        self._tree = set()
        self._next_refresh = 0.0
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="memory-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        """Stops the thread (after one last sample) and returns peaks()."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self._safe_sample()
        return self.peaks()

    def peaks(self):
        """{"rss_bytes", "gpu_bytes" (None on the CPU), "samples"}."""
        return {"rss_bytes": self.peak_rss, "gpu_bytes": self.peak_gpu, "samples": self.samples}


class TreeMemory(Instrument):
    """The worker tree's memory around a round (bench.instruments), sampled from before it to after it
    by a PeakSampler (its arguments): the round's `memory_peaks`."""

    def __init__(self, roots, gpu_pids=None, host_pids=()):
        self.sampler = PeakSampler(roots, gpu_pids=gpu_pids, host_pids=host_pids)
        self.peaks = None

    def before_round(self, round):
        self.sampler.start()

    def after_round(self, round):
        self.peaks = self.sampler.stop()

    def add_to(self, record):
        record["memory_peaks"] = self.peaks
