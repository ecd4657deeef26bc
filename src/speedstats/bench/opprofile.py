"""Per-op time from the framework's own profiler, for the profiled rounds on a GPU.

Each op's self time on the run's device, summed over a round: on CUDA the device time of the kernels
the op launched itself, on the CPU (PyTorch only) its own CPU time. Ops do not nest in OneFlow's
profiler, so there an op's total time is its self time; PyTorch's ops do, and its total time includes
the ops it called.

- PyTorch: torch.profiler, its key averages, the CPU-side op rows (the kernels' own rows are
  what the ops' device time is made of, so they are not counted again).
- OneFlow 0.9.0: oneflow.profiler, its key averages, the kernel events (named by op type) and the CUDA
  kernels under them. Its profiler aborts the process on a machine without a GPU driver (it
  synchronises the device when it stops), so on the CPU it is not started at all.
"""

from __future__ import annotations

from speedstats.bench.instruments import Instrument
from speedstats.contenders import CONTENDERS

US = 1e-6

ONEFLOW_NEEDS_GPU = ("OneFlow 0.9.0's profiler needs a GPU driver (it aborts the process without one), "
                     "so OneFlow's ops are profiled on CUDA only")


class OpProfileUnavailable(Exception):
    """The framework's profiler cannot run here; the message says why."""


def _add(table, name, seconds):
    if seconds > 0:
        table[name] = table.get(name, 0.0) + seconds


class TorchOps:
    """torch.profiler around a round: per op, self and total time on `device` (CUDA or the CPU)."""

    def __init__(self, torch, device):
        self.torch = torch
        self.on_cuda = str(device).startswith("cuda")
        self.profile = None

    @property
    def device_name(self):
        return "cuda" if self.on_cuda else "cpu"

    def start(self):
        activity = self.torch.profiler.ProfilerActivity
        activities = [activity.CPU] + ([activity.CUDA] if self.on_cuda else [])
        self.profile = self.torch.profiler.profile(activities=activities)
        self.profile.__enter__()
        return self

    def stop(self):
        """{op: self seconds}, {op: total seconds} over the round."""
        self.profile.__exit__(None, None, None)
        averages, self.profile = self.profile.key_averages(), None
        return torch_op_times(averages, self.torch.autograd.DeviceType.CPU, self.on_cuda)


def torch_op_times(averages, cpu, on_cuda):
    """{op: self seconds}, {op: total seconds} from torch.profiler's key averages: the rows of ops run
    from the CPU side (`cpu`, torch.autograd.DeviceType.CPU), their device time on CUDA."""
    self_s, total_s = {}, {}
    for event in averages:
        if getattr(event, "device_type", cpu) != cpu:
            continue  # a kernel's own row: its time is already its op's device time
        if on_cuda:
            own = _first(event, "self_device_time_total", "self_cuda_time_total")
            whole = _first(event, "device_time_total", "cuda_time_total")
        else:
            own, whole = event.self_cpu_time_total, event.cpu_time_total
        _add(self_s, event.key, own * US)
        _add(total_s, event.key, whole * US)
    return self_s, total_s


def _first(event, *names):
    """The first of `names` the event has: torch renamed cuda_* to device_* (2.4)."""
    for name in names:
        value = getattr(event, name, None)
        if value is not None:
            return value
    return 0.0


class OneFlowOps:
    """oneflow.profiler around a round, on CUDA: per op type, the device time of its kernels."""

    device_name = "cuda"

    def __init__(self, flow, device):
        if not str(device).startswith("cuda"):
            raise OpProfileUnavailable(ONEFLOW_NEEDS_GPU)
        self.flow = flow
        self.profile = None

    def start(self):
        from oneflow import profiler

        activity = profiler.ProfilerActivity
        self.profile = profiler.profile(activities=[activity.CPU, activity.CUDA])
        self.profile.__enter__()
        return self

    def stop(self):
        self.profile.__exit__(None, None, None)
        averages, self.profile = self.profile.key_averages(), None
        return oneflow_op_times(averages)


def oneflow_op_times(averages):
    """{op: self seconds}, {op: total seconds} from oneflow.profiler's key averages: each op type's
    kernel event, the device time of the CUDA kernels under it (a kernel event with none ran on the
    CPU and is left out)."""
    from oneflow.profiler.events import KernelEvent

    self_s = {}
    for event in averages:
        if isinstance(event, KernelEvent) and event.cuda_time_total:
            _add(self_s, event.name, event.cuda_time_total * US)
    return self_s, dict(self_s)


PROFILERS = {c.family: globals()[c.op_profiler] for c in CONTENDERS}  # the op profiler of each family


def op_profiler(framework, module, device):
    """The op profiler of `framework` (a family of speedstats.contenders, its imported `module`) on
    `device`; raises OpProfileUnavailable where its profiler cannot run."""
    if framework not in PROFILERS:
        raise OpProfileUnavailable(f"no op profiler for {framework}")
    return PROFILERS[framework](module, device)


class OpProfile(Instrument):
    """The framework's op profiler around each profiled round (bench.instruments): the round's `profile`
    gets each op's self and total seconds (op_self_s, op_total_s) and the device they are of (op_device),
    or why the profiler could not run (op_reason). make(): the profiler, not started (op_profiler);
    it raises OpProfileUnavailable where the framework's profiler cannot run."""

    def __init__(self, make):
        self.make = make
        self.ops = self.reason = self.times = None

    def before_round(self, round):
        self.ops = self.reason = self.times = None
        if not round.profiled:
            return
        try:
            self.ops = self.make().start()
        except OpProfileUnavailable as exc:
            self.reason = str(exc)

    def after_round(self, round):
        if self.ops is not None:
            self.times = self.ops.stop()

    def add_to(self, record):
        if self.times is not None:
            op_self, op_total = self.times
            record.setdefault("profile", {}).update(op_self_s=op_self, op_total_s=op_total,
                                                    op_device=self.ops.device_name)
        elif self.reason:
            record.setdefault("profile", {})["op_reason"] = self.reason
