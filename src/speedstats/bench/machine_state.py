"""The state of the machine around each timed round, and once per run; read from /proc and NVML.

Everything is read at a round's start and at its end, by the runner, between two rounds: no thread
polls while a round is timed, so the sampling itself takes no core from the framework measured.

Per round (results.json, each framework's `round_states`, one per kept round):

- cpu.other_cores: CPU time that processes outside the run used during the round, in cores: the
  user, nice and system ticks of the CPUs this process may run on (the cpuN lines of /proc/stat for
  its affinity) less the utime, stime, cutime and cstime (/proc/PID/stat) of the run's own process
  tree (the runner and all its descendants; the runner is a child subreaper, so none escapes it and
  reaped processes show in their parent's cutime), less one tick per CPU for the counting's
  granularity. Under a CPU quota without a cpuset the affinity is the whole host, and so is "other".
  Null (with `other_null_reason`) for a round shorter than MIN_CPU_WALL_S.
- cpu.steal_cores (the hypervisor's), cpu.own_cores, cpu.cores (the affinity's size).
- cpu.pressure_some_avg10 and cpu.pressure_some_share (of the round's wall time, from the `total`
  microseconds) from /proc/pressure/cpu; null with `pressure_null_reason` without PSI.
- cpu.nonvoluntary_switches: the timed worker's processes' involuntary context switches
  (/proc/PID/status) during the round; cpu.worker_user_s, cpu.worker_system_s and
  cpu.worker_minor_faults: their user and system CPU seconds and minor page faults (/proc/PID/stat),
  summed over the worker's processes (a DDP launcher and its ranks); cpu.loadavg: the 1-minute load
  average at start and end.
- gpus: for each GPU of the run, at the round's end (the GPU has just worked; at the start it may be
  idle between rounds): SM and memory clocks and their maxima, the clocks-event reasons, temperature,
  power draw and the enforced limit; and the compute processes seen at start or end that are not the
  run's own. A query the GPU does not support is null, its reason in `null_reasons`.

Which GPU processes are the run's own: NVML reports PIDs of the host's PID namespace. A PID that is
visible in this /proc counts as ours when it belongs to the run's process tree (same namespace, or a
container sharing the host's). A PID not visible here (a container with a PID namespace of its own)
counts as ours when it appeared on the GPU while one of our workers was starting (between the
snapshot before its start and the one after it is ready), and as foreign otherwise: another job's
process that started in that same window would be taken for ours.

Once per run (results.json `machine`): driver version and the CUDA version it supports, and for
each GPU its name, compute capability ("8.6"), persistence mode, PCIe link generation and width
against their maxima, MIG mode, uncorrected ECC errors (volatile) and the maximum clocks; the CPU model
and count.
"""

import contextlib
import os
import time

from speedstats import gpuinfo
from speedstats.bench import processes
from speedstats.bench.instruments import Instrument

CLK_TCK = os.sysconf("SC_CLK_TCK")
PRESSURE_PATH = "/proc/pressure/cpu"
QUIET_POLL_S = 5.0
# A round shorter than this is too short for tick-counted CPU time (one tick is 10 ms): not judged.
MIN_CPU_WALL_S = 0.25


def cpu_set():
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def cpu_ticks(cpus, stat_path="/proc/stat"):
    """(busy, steal) clock ticks of the given CPUs: user + nice + system, and steal."""
    wanted = {f"cpu{n}" for n in cpus}
    busy = steal = 0
    with open(stat_path, encoding="ascii") as f:
        for line in f:
            fields = line.split()
            if fields and fields[0] in wanted:
                values = [int(v) for v in fields[1:]]
                busy += values[0] + values[1] + values[2]
                steal += values[7] if len(values) > 7 else 0
    return busy, steal


def process_ticks(pid):
    """(start time, utime + stime + cutime + cstime) of a process, or None when it is gone."""
    fields = processes.stat_fields(pid)
    if fields is None:
        return None
    return int(fields[19]), sum(int(v) for v in fields[11:15])


def own_ticks(root=None):
    """{pid: (start time, ticks)} of the run's process tree: `root` (this process) and its descendants."""
    table = {}
    for pid in processes.members(root or os.getpid(), None):
        ticks = process_ticks(pid)
        if ticks is not None:
            table[pid] = ticks
    return table


def nonvoluntary_switches(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
                for line in f:
                    if line.startswith("nonvoluntary_ctxt_switches:"):
                        total += int(line.split()[1])
        except (OSError, ValueError):
            continue
    return total


def worker_counters(pids):
    """(minor page faults, user ticks, system ticks) of the given processes, summed; a process that
    is gone counts nothing."""
    faults = user = system = 0
    for pid in pids:
        fields = processes.stat_fields(pid)
        if fields is not None:
            faults += int(fields[7])
            user += int(fields[11])
            system += int(fields[12])
    return faults, user, system


def cpu_pressure(path=PRESSURE_PATH):
    """({"avg10": percent, "total_us": microseconds}, None) of the 'some' line, or (None, reason)."""
    try:
        with open(path, encoding="ascii") as f:
            for line in f:
                if line.startswith("some "):
                    fields = dict(item.split("=", 1) for item in line.split()[1:])
                    return {"avg10": float(fields["avg10"]), "total_us": int(fields["total"])}, None
    except FileNotFoundError:
        return None, f"no {path} (a kernel without pressure stall information)"
    except (OSError, ValueError, KeyError) as exc:
        return None, f"{path}: {exc}"
    return None, f"{path}: no 'some' line"


def load_1min():
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def cpu_begin(cpus, worker_pids):
    pressure, _ = cpu_pressure()
    return {
        "wall": time.monotonic(),
        "ticks": cpu_ticks(cpus),
        "own": own_ticks(),
        "pressure": pressure,
        "switches": nonvoluntary_switches(worker_pids),
        "counters": worker_counters(worker_pids),
        "load": load_1min(),
    }


def cpu_end(begin, cpus, worker_pids):
    """The CPU part of a round's state, from its begin() snapshot."""
    wall = max(time.monotonic() - begin["wall"], 1e-9)
    busy, steal = cpu_ticks(cpus)
    own = own_ticks()
    own_delta = sum(t for _, t in own.values()) - sum(t for _, t in begin["own"].values())
    other = (busy - begin["ticks"][0]) - own_delta - len(cpus)
    pressure, reason = cpu_pressure()
    counted = zip(worker_counters(worker_pids), begin["counters"])
    faults, user, system = (max(0, end - start) for end, start in counted)
    state = {
        "cores": len(cpus),
        "wall_s": round(wall, 6),
        "other_cores": round(max(0.0, other / CLK_TCK / wall), 3) if wall >= MIN_CPU_WALL_S else None,
        "other_null_reason": None if wall >= MIN_CPU_WALL_S else f"a round shorter than {MIN_CPU_WALL_S}s",
        "own_cores": round(max(0.0, own_delta / CLK_TCK / wall), 3),
        "steal_cores": round(max(0.0, (steal - begin["ticks"][1]) / CLK_TCK / wall), 3),
        "pressure_some_avg10": None,
        "pressure_some_share": None,
        "pressure_null_reason": reason,
        "nonvoluntary_switches": nonvoluntary_switches(worker_pids) - begin["switches"],
        "worker_user_s": round(user / CLK_TCK, 3),
        "worker_system_s": round(system / CLK_TCK, 3),
        "worker_minor_faults": faults,
        "loadavg": [begin["load"], load_1min()],
    }
    if pressure is not None and begin["pressure"] is not None:
        state["pressure_some_avg10"] = pressure["avg10"]
        share = (pressure["total_us"] - begin["pressure"]["total_us"]) / 1e6 / wall
        state["pressure_some_share"] = round(min(1.0, max(0.0, share)), 4)
    return state


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


class Gpus:
    """NVML, initialised once for the run, over the run's GPUs (CUDA indices, as CUDA_VISIBLE_DEVICES
    numbers them). `nvml` is the pynvml module; None when it or the driver is missing (`reason` says)."""

    def __init__(self, indices):
        self.indices = list(indices)
        self.handles = {}
        self.nvml = None
        self.reason = None
        if not self.indices:
            return
        try:
            import pynvml
        except ImportError:
            self.reason = "nvidia-ml-py (pynvml) is not installed"
            return
        try:
            pynvml.nvmlInit()
        except (pynvml.NVMLError, OSError) as exc:
            self.reason = f"NVML: {exc}"
            return
        self.nvml = pynvml
        for index in self.indices:
            handle, reason = self.query(gpuinfo.nvml_handle, pynvml, index)
            if handle is not None:
                self.handles[index] = handle
            else:
                self.reason = f"GPU {index}: {reason}"

    def close(self):
        if self.nvml is not None:
            with contextlib.suppress(self.nvml.NVMLError):
                self.nvml.nvmlShutdown()
            self.nvml = None

    def query(self, function, *args):
        """(value, None), or (None, reason) for an NVML error such as NotSupported."""
        try:
            return _text(function(*args)), None
        except self.nvml.NVMLError as exc:
            return None, str(exc) or type(exc).__name__

    def _fill(self, record, fields):
        for name, function, args in fields:
            value, reason = self.query(function, *args)
            record[name] = value
            if reason is not None:
                record["null_reasons"][name] = reason
        return record

    def driver(self):
        """{"version", "cuda"}: the driver and the CUDA version it supports ("12.4"), or None without NVML."""
        if self.nvml is None:
            return None
        version, _ = self.query(self.nvml.nvmlSystemGetDriverVersion)
        cuda, _ = self.query(self.nvml.nvmlSystemGetCudaDriverVersion)
        return {"version": version, "cuda": None if cuda is None else f"{cuda // 1000}.{cuda % 1000 // 10}"}

    def run_info(self):
        """The once-per-run facts of each GPU."""
        nvml, found = self.nvml, []
        if nvml is None:
            return found
        for index, handle in self.handles.items():
            record = {"index": index, "null_reasons": {}}
            self._fill(
                record,
                [
                    ("name", nvml.nvmlDeviceGetName, (handle,)),
                    ("uuid", nvml.nvmlDeviceGetUUID, (handle,)),
                    ("persistence_mode", nvml.nvmlDeviceGetPersistenceMode, (handle,)),
                    ("pcie_generation", nvml.nvmlDeviceGetCurrPcieLinkGeneration, (handle,)),
                    ("pcie_generation_max", nvml.nvmlDeviceGetMaxPcieLinkGeneration, (handle,)),
                    ("pcie_width", nvml.nvmlDeviceGetCurrPcieLinkWidth, (handle,)),
                    ("pcie_width_max", nvml.nvmlDeviceGetMaxPcieLinkWidth, (handle,)),
                    ("mig_mode", nvml.nvmlDeviceGetMigMode, (handle,)),
                    (
                        "ecc_uncorrected_volatile",
                        nvml.nvmlDeviceGetTotalEccErrors,
                        (handle, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC),
                    ),
                    ("sm_clock_max_mhz", nvml.nvmlDeviceGetMaxClockInfo, (handle, nvml.NVML_CLOCK_SM)),
                    ("mem_clock_max_mhz", nvml.nvmlDeviceGetMaxClockInfo, (handle, nvml.NVML_CLOCK_MEM)),
                    ("power_limit_w", nvml.nvmlDeviceGetEnforcedPowerLimit, (handle,)),
                    ("compute_capability", nvml.nvmlDeviceGetCudaComputeCapability, (handle,)),
                ],
            )
            if isinstance(record["compute_capability"], (list, tuple)):  # (major, minor)
                record["compute_capability"] = "{}.{}".format(*record["compute_capability"])
            if isinstance(record["mig_mode"], (list, tuple)):  # [current, pending]
                record["mig_mode"] = record["mig_mode"][0]
            if record["power_limit_w"] is not None:
                record["power_limit_w"] = record["power_limit_w"] / 1000
            found.append(record)
        return found

    def energy_mj(self):
        """The sum of the run's GPUs' total energy counters (millijoules since the driver loaded), or None
        when a GPU has none (before Volta) or there is no NVML."""
        if self.nvml is None or not self.handles:
            return None
        total = 0
        for handle in self.handles.values():
            value, _ = self.query(self.nvml.nvmlDeviceGetTotalEnergyConsumption, handle)
            if value is None:
                return None
            total += value
        return total

    def compute_pids(self):
        """{index: {pid: used memory bytes or None}} of the compute processes on each GPU now."""
        found = {}
        for index, handle in self.handles.items():
            procs, _ = self.query(self.nvml.nvmlDeviceGetComputeRunningProcesses, handle)
            found[index] = {int(p.pid): getattr(p, "usedGpuMemory", None) for p in procs or []}
        return found

    def sample(self):
        """Each GPU's clocks, clocks-event reasons, temperature and power, now."""
        nvml, found = self.nvml, []
        if nvml is None:
            return found
        from speedstats.machine import clock_event_names

        for index, handle in self.handles.items():
            record = {"index": index, "null_reasons": {}}
            self._fill(
                record,
                [
                    ("sm_clock_mhz", nvml.nvmlDeviceGetClockInfo, (handle, nvml.NVML_CLOCK_SM)),
                    ("sm_clock_max_mhz", nvml.nvmlDeviceGetMaxClockInfo, (handle, nvml.NVML_CLOCK_SM)),
                    ("mem_clock_mhz", nvml.nvmlDeviceGetClockInfo, (handle, nvml.NVML_CLOCK_MEM)),
                    ("mem_clock_max_mhz", nvml.nvmlDeviceGetMaxClockInfo, (handle, nvml.NVML_CLOCK_MEM)),
                    ("clock_events", nvml.nvmlDeviceGetCurrentClocksEventReasons, (handle,)),
                    ("temperature_c", nvml.nvmlDeviceGetTemperature, (handle, nvml.NVML_TEMPERATURE_GPU)),
                    ("power_w", nvml.nvmlDeviceGetPowerUsage, (handle,)),
                    ("power_limit_w", nvml.nvmlDeviceGetEnforcedPowerLimit, (handle,)),
                ],
            )
            if record["clock_events"] is not None:
                record["clock_events"] = clock_event_names(int(record["clock_events"]))
            for key in ("power_w", "power_limit_w"):
                if record[key] is not None:
                    record[key] = record[key] / 1000  # NVML gives milliwatts
            found.append(record)
        return found


def gpu_indices(device):
    """The CUDA indices a run on `device` uses: all visible GPUs for "cuda", one for "cuda:N", none
    on the CPU."""
    name = str(device).strip().lower()
    if name in ("cuda", "gpu"):
        return list(range(gpuinfo.visible_gpu_count())) or [0]
    if name.startswith("cuda:") and name[5:].isdigit():
        return [int(name[5:])]
    return []


class MachineWatch:
    """The runner's view of the machine: begin()/end() around each timed round, starting()/started()
    around each worker's start (to learn which GPU processes are ours), and the once-per-run facts."""

    def __init__(self, device, gpus=None):
        self.cpus = cpu_set()
        self.gpus = gpus if gpus is not None else Gpus(gpu_indices(device))
        self.ours = set()  # GPU pids that appeared while a worker of ours started
        self._before_start = None
        # Whether NVML reported a started worker's GPU processes under the worker's own PIDs: None until
        # a worker started alone showed some (see start_windows_needed).
        self.gpu_pids_are_own = None

    def close(self):
        self.gpus.close()

    def run_info(self):
        info = {
            "cpu": {"model": gpuinfo.cpu_model(), "cores": len(self.cpus)},
            "driver": self.gpus.driver(),
            "gpus": self.gpus.run_info(),
        }
        info["cpu"]["pressure"] = cpu_pressure()[1] or "available"
        if self.gpus.reason:
            info["gpu_null_reason"] = self.gpus.reason
        return info

    def starting(self):
        self._before_start = self._all_gpu_pids()

    def started(self, tree=None):
        """The GPU pids that appeared since starting(): the worker's, as NVML reports them. tree: the
        worker's own pids, when one worker started alone (to learn whether NVML reports those)."""
        new = set()
        if self._before_start is not None:
            new = self._all_gpu_pids() - self._before_start
            self.ours |= new
            if new and tree is not None and self.gpu_pids_are_own is None:
                self.gpu_pids_are_own = new <= set(tree)
        self._before_start = None
        return new

    def start_windows_needed(self):
        """Whether each worker must start alone, so that the GPU processes that appear while it starts
        tell which are its own: on GPUs NVML watches, unless a worker started alone showed its GPU
        processes under its own PIDs. NVML reports PIDs of the host's namespace, which inside a
        container with a PID namespace of its own are none of the worker's."""
        return bool(self.gpus.handles) and not self.gpu_pids_are_own

    def _all_gpu_pids(self):
        return {pid for procs in self.gpus.compute_pids().values() for pid in procs}

    def foreign(self, compute_pids, tree=None):
        """{index: [{"pid", "used_memory_bytes"}]} of the processes that are not the run's own."""
        tree = processes.members(os.getpid(), None) if tree is None else tree
        found = {}
        for index, procs in compute_pids.items():
            found[index] = [
                {"pid": pid, "used_memory_bytes": memory}
                for pid, memory in sorted(procs.items())
                if not self._is_ours(pid, tree)
            ]
        return found

    def _is_ours(self, pid, tree):
        if os.path.exists(f"/proc/{pid}"):
            return pid in tree
        return pid in self.ours

    def begin(self, worker_pids):
        return {
            "cpu": cpu_begin(self.cpus, worker_pids),
            "gpu_pids": self.gpus.compute_pids(),
            "worker_pids": list(worker_pids),
        }

    def end(self, begin, worker_pids=None):
        """The state of the round that began with `begin`: {"cpu": {...}, "gpus": [...]}."""
        pids = list(worker_pids if worker_pids is not None else begin["worker_pids"])
        cpu = cpu_end(begin["cpu"], self.cpus, pids)
        gpus = self.gpus.sample()
        if gpus:
            seen = {index: dict(procs) for index, procs in begin["gpu_pids"].items()}
            for index, procs in self.gpus.compute_pids().items():
                seen.setdefault(index, {}).update(procs)
            foreign = self.foreign(seen)
            for record in gpus:
                record["foreign_processes"] = foreign.get(record["index"], [])
        return {"cpu": cpu, "gpus": gpus}

    def quiet_check(self, spec):
        """Why the GPUs are not quiet now (foreign compute processes, throttled): a list of texts."""
        from speedstats.machine import round_disturbance

        gpus = self.gpus.sample()
        foreign = self.foreign(self.gpus.compute_pids())
        for record in gpus:
            record["foreign_processes"] = foreign.get(record["index"], [])
            record["sm_clock_mhz"] = None  # an idle GPU runs at low clocks: only a round judges clocks
        return [item["text"] for item in round_disturbance({"gpus": gpus}, spec)]

    def wait_quiet(self, spec, timeout_s, progress, sleep=time.sleep):
        """Wait (at most timeout_s) until quiet_check finds nothing; the record of what happened."""
        start = time.monotonic()
        reasons = self.quiet_check(spec)
        announced = False
        while reasons and time.monotonic() - start < timeout_s:
            if not announced:
                progress(
                    f"speedstats: the GPU is not quiet ({'; '.join(reasons)}): waiting up to {timeout_s:.0f}s"
                )
                announced = True
            sleep(min(QUIET_POLL_S, max(0.0, timeout_s - (time.monotonic() - start))))
            reasons = self.quiet_check(spec)
        waited = round(time.monotonic() - start, 1)
        if reasons:
            progress(
                f"speedstats: the GPU is still not quiet after {waited:.0f}s ({'; '.join(reasons)}): "
                "measuring anyway; each round is checked and a disturbed case is marked"
            )
        elif announced:
            progress(f"speedstats: the GPU is quiet after {waited:.0f}s")
        return {"quiet": not reasons, "waited_s": waited, "reasons": reasons}


class RoundState(Instrument):
    """The machine's state around a round (bench.instruments), from MachineWatch.begin before it to
    MachineWatch.end after it, with the worker's processes `pids`: the round's `state`."""

    def __init__(self, watch, pids):
        self.watch = watch
        self.pids = pids
        self.begun = self.state = None

    def before_round(self, round):
        self.begun = self.watch.begin(self.pids)

    def after_round(self, round):
        self.state = self.watch.end(self.begun, self.pids)

    def add_to(self, record):
        record["state"] = self.state


class GpuEnergy(Instrument):
    """The energy the run's GPUs used in a round (bench.instruments), from their counters (Gpus.energy_mj)
    before and after it: the round's `energy_mj`, where every GPU has the counter and the round took
    min_round_s or more (the counter moves in steps of NVML's power samples, tens of ms)."""

    def __init__(self, gpus, min_round_s):
        self.gpus = gpus
        self.min_round_s = min_round_s
        self.before = self.after = None

    def before_round(self, round):
        self.before = self.gpus.energy_mj()

    def after_round(self, round):
        self.after = self.gpus.energy_mj()

    def add_to(self, record):
        if None not in (self.before, self.after) and float(record["total_s"]) >= self.min_round_s:
            record["energy_mj"] = self.after - self.before
