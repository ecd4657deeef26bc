"""One framework's measurement of one case, in a process of its own.

    python -m speedstats.bench.worker --control DIR

The runner writes DIR/spec.json (a bench.workerspec.WorkerSpec) and steers the worker through files in DIR
(bench.protocol: ready.json, go-K or profile-K, round-K.json, stop, done.json, error-RANK.json), so that a
DDP group started by a launcher (which owns the ranks' stdin and stdout) is steered the same way. serve()
is the worker's side of that protocol; it runs in-process as well, with a step, instruments and clocks of
a test's own (tests/test_worker_loop.py).

Each rank is SIGKILLed by the kernel when its parent (the runner or the DDP launcher) exits.
The spec's `mode` says what a ResNet50 step does (see ResNet50Step): `old-bot` measures the old
bot's work, `clean` the fair comparison.

Only this module (and bench.opprofile, which it calls) imports torch or oneflow, and only the one
framework its spec names.
"""

import argparse
import dataclasses
import functools
import json
import os
import random
import resource
import sys
import time
import traceback
from pathlib import Path

from speedstats.bench import processes, protocol
from speedstats.bench.instruments import Instrument, Round, measure_round, started
from speedstats.bench.opcount import DispatchCount, framework_ops
from speedstats.bench.opprofile import OpProfile, op_profiler
from speedstats.bench.protocol import GO, PROFILE
from speedstats.bench.sampler import StackProfile
from speedstats.bench.workerspec import WorkerSpec
from speedstats.casekinds import CASE_KINDS
from speedstats.contenders import framework_packages, of_family
from speedstats.fsutil import write_atomic
from speedstats.text import one_line

POLL_S = 0.005


def _write_json(path, data):
    write_atomic(path, json.dumps(data), "worker's report")


@dataclasses.dataclass(frozen=True)
class Clock:
    """Where the worker's loop reads the time and waits: the real clocks, or a test's own."""

    perf_counter: object = time.perf_counter  # the seconds of a round, and of the setup
    thread_time: object = time.thread_time  # the main thread's CPU seconds (MainThreadCpu)
    monotonic: object = time.monotonic  # the case's deadline
    sleep: object = time.sleep  # between two looks for the runner's file
    unix_time: object = time.time  # when a round started and ended


REAL_CLOCK = Clock()


def wait_for_round(control, k, deadline, clock=REAL_CLOCK):
    """GO or PROFILE once round k may start (go-K, profile-K), None when the runner asks for no more
    rounds (stop)."""
    go = control / protocol.round_start_file(k, GO)
    profile = control / protocol.round_start_file(k, PROFILE)
    stop = control / protocol.STOP_FILE
    while True:
        if go.exists():
            return GO
        if profile.exists():
            return PROFILE
        if stop.exists():
            return None
        if clock.monotonic() > deadline:
            raise TimeoutError(f"no {go.name} from the runner before the case timeout")
        clock.sleep(POLL_S)


class Framework:
    """What a measurement needs from a framework: device, sync, barrier, memory figure, which build it is."""

    def __init__(self, spec):
        self.ddp = spec.ddp
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.cuda = spec.device == "cuda"
        self.device_name = spec.device

    def op_profiler(self):
        """This framework's bench.opprofile profiler on the spec's device (OpProfileUnavailable)."""
        return op_profiler(self.name, self.module, self.device_name)

    def dispatched_ops(self):
        """This framework's ops as the dispatch counter knows them (bench.opcount.framework_ops)."""
        return framework_ops(self.name)

    def imported(self):
        return imported_framework(self.name)


class TorchFramework(Framework):
    name = "pytorch"

    def __init__(self, spec):
        super().__init__(spec)
        import torch

        self.torch = self.module = torch
        self.nn = torch.nn
        if self.cuda:
            if torch.cuda.device_count() <= self.local_rank:
                raise RuntimeError(f"rank {self.local_rank} needs GPU {self.local_rank}, "
                                   f"PyTorch sees {torch.cuda.device_count()}")
            torch.cuda.set_device(self.local_rank)
            self.device = torch.device("cuda", self.local_rank)
        else:
            self.device = torch.device("cpu")
        if self.ddp:
            import torch.distributed as dist

            dist.init_process_group("nccl" if self.cuda else "gloo")
            self.dist = dist

    def library_resnet50(self):
        import torchvision

        return torchvision.models.resnet50()

    def wrap_ddp(self, model):
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(
            model, device_ids=[self.local_rank] if self.cuda else None, broadcast_buffers=True
        )

    def ones(self, shape):
        return self.torch.ones(shape, device=self.device)

    def old_bot_input(self, shape):
        """The old script's input: a CPU leaf that requires grad, moved to the device. Returns
        (input, leaf); every backward also computes the input gradient and adds it to leaf.grad."""
        import numpy as np

        leaf = self.torch.tensor(np.ones(shape).astype(np.float32), requires_grad=True)
        return leaf.to(self.device), leaf

    def host_sync(self, loss):
        loss.cpu()

    def sgd(self, params):
        return self.torch.optim.SGD(params, lr=0.01, momentum=0.9)

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def barrier(self):
        if self.ddp:
            self.dist.barrier()

    def imagefolder(self, root, input_size):
        import torchvision
        from timm.data import create_transform

        return torchvision.datasets.ImageFolder(root, transform=swin_transform(create_transform, input_size))

    def dataloader(self, dataset, batch_size, num_workers, sampler):
        return self.torch.utils.data.DataLoader(dataset, batch_size=batch_size, sampler=sampler,
                                                num_workers=num_workers, drop_last=True,
                                                persistent_workers=num_workers > 0,
                                                worker_init_fn=loader_worker_init())

    def peak_memory(self):
        if self.cuda:
            return self.torch.cuda.max_memory_allocated(self.device), "cuda-allocator"
        return peak_rss(), "rss"

    def close(self):
        if self.ddp:
            self.dist.destroy_process_group()


class OneFlowFramework(Framework):
    name = "oneflow"

    def __init__(self, spec):
        super().__init__(spec)
        import oneflow as flow

        self.flow = self.module = flow
        self.nn = flow.nn
        if self.cuda:
            if not flow.cuda.is_available() or flow.cuda.device_count() <= self.local_rank:
                raise RuntimeError(f"rank {self.local_rank} needs GPU {self.local_rank}, "
                                   f"OneFlow sees {flow.cuda.device_count()}")
            self.device = flow.device("cuda", self.local_rank)
        else:
            self.device = flow.device("cpu")

    def library_resnet50(self):
        import flowvision

        return flowvision.models.resnet50()

    def wrap_ddp(self, model):
        from oneflow.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model, broadcast_buffers=True)

    def ones(self, shape):
        return self.flow.ones(*shape, device=self.device)

    def old_bot_input(self, shape):
        """The old script's OneFlow input: from numpy, without grad ("due to a bug"); no leaf to keep."""
        import numpy as np

        return self.flow.tensor(np.ones(shape).astype(np.float32), requires_grad=False).to(self.device), None

    def host_sync(self, loss):
        loss.numpy()

    def sgd(self, params):
        return self.flow.optim.SGD(params, lr=0.01, momentum=0.9)

    def sync(self):
        # OneFlow's eager ops are queued on its virtual machine, on the CPU too: wait for them.
        self.flow._oneflow_internal.eager.Sync()

    def barrier(self):
        if self.ddp:
            self.flow.comm.barrier()

    def imagefolder(self, root, input_size):
        import flowvision
        from flowvision.data import create_transform

        return flowvision.datasets.ImageFolder(root, transform=swin_transform(create_transform, input_size))

    def dataloader(self, dataset, batch_size, num_workers, sampler):
        return self.flow.utils.data.DataLoader(dataset, batch_size=batch_size, sampler=sampler,
                                               num_workers=num_workers, drop_last=True,
                                               persistent_workers=num_workers > 0,
                                               worker_init_fn=loader_worker_init())

    def peak_memory(self):
        if self.cuda:
            used = nvml_process_memory(self.local_rank)
            return used, "nvml-process" if used is not None else None
        return peak_rss(), "rss"

    def close(self):
        pass


FRAMEWORK_CLASSES = {"pytorch": TorchFramework, "oneflow": OneFlowFramework}


def _die_with(parent, worker_id):
    processes.die_with_parent(parent)


def loader_worker_init():
    """A DataLoader worker_init_fn: each loader process is SIGKILLed when this process exits."""
    return functools.partial(_die_with, os.getpid())


def swin_transform(create_transform, input_size):
    """The Swin-Transformer ImageNet training transform (its data/build.py defaults)."""
    return create_transform(
        input_size=input_size,
        is_training=True,
        color_jitter=0.4,
        auto_augment="rand-m9-mstd0.5-inc1",
        re_prob=0.25,
        re_mode="pixel",
        re_count=1,
        interpolation="bicubic",
    )


def peak_rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def nvml_process_memory(gpu_index):
    """GPU memory this process holds, from NVML (OneFlow 0.9 exposes no allocator statistics)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(gpu_index)
        for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
            if proc.pid == os.getpid():
                return int(proc.usedGpuMemory)
    except Exception:  # noqa: BLE001 - no NVML, no driver, no permission: the figure is optional
        return None
    return None


class ResNet50Step:
    """Forward, sum, backward, zero_grad, step, sync: one training step, in the spec's mode.

    old-bot: the shared ResNet50 (speedstats.bench.models), PyTorch's input built as the old script
    built it (a CPU leaf that requires grad), and the old per-iteration sync, `loss.cpu()` (PyTorch)
    and `loss.numpy()` (OneFlow), then a full sync after the last iteration. clean: no input
    gradient and a full device sync (OneFlow's eager.Sync(), torch.cuda.synchronize()); the model is
    the shared one or, with `model: library`, torchvision's and flowvision's ResNet50.
    """

    def __init__(self, fw, spec):
        from speedstats.bench.models import resnet50
        from speedstats.suite import DEFAULT_MODE, MODES

        self.fw = fw
        self.mode = spec.mode or DEFAULT_MODE
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r}")
        if spec.model == "library":
            model = fw.library_resnet50()
        else:
            model = resnet50(fw.nn, image_size=spec.image_size)
        model = model.to(fw.device)
        if fw.ddp:
            model = fw.wrap_ddp(model)
        self.model = model
        self.optimizer = fw.sgd(model.parameters())
        shape = [spec.batch_size, 3, spec.image_size, spec.image_size]
        if self.mode == "old-bot":
            self.input, self.input_leaf = fw.old_bot_input(shape)
        else:
            self.input, self.input_leaf = fw.ones(shape), None

    def run(self, iterations):
        model, optimizer, data = self.model, self.optimizer, self.input
        old_bot, host_sync, sync = self.mode == "old-bot", self.fw.host_sync, self.fw.sync
        for _ in range(iterations):
            loss = model(data).sum()
            loss.backward()
            # set_to_none=False: PyTorch's default (None) would make step() skip every parameter,
            # while OneFlow's default zeroes them; both then do the same optimizer work (as torch
            # 1.10's default did in the old job).
            optimizer.zero_grad(set_to_none=False)
            optimizer.step()
            if old_bot:
                host_sync(loss)
            else:
                sync()
        if old_bot:
            # OneFlow's loss.numpy() waits for the forward only; backward and step run on after it.
            # The old script's clock ran on over the steps its loop queued: it started with the
            # warm-up's last backward and step still running and stopped with the last iteration's
            # still queued, so it timed `times` whole steps. Wait for them, as a round starts drained.
            sync()

    warm_up = run


class PhaseSampler:
    """Random image indices (with replacement, from a seed) for one epoch of `batches` batches.

    Plain Python, so both frameworks draw the same images. The loader is re-iterated for every
    phase (warm-up, each round), so an epoch is exactly the batches that phase takes.
    """

    def __init__(self, dataset_size, batch_size, seed):
        self.dataset_size = dataset_size
        self.batch_size = batch_size
        self.random = random.Random(seed)
        self.batches = 0

    def __len__(self):
        return self.batches * self.batch_size

    def __iter__(self):
        return iter([self.random.randrange(self.dataset_size) for _ in range(len(self))])


class EpochBatches:
    """Batches of a DataLoader whose workers persist (not timed to start) while every phase is
    an epoch of its own: the timed round begins with iter(), so no batch it takes was prefetched
    before the clock started. (Drawing a round from the warm-up's iterator would hand it the
    prefetch_factor x num_workers batches the workers made while the runner waited.) iter() costs
    a message to each worker and its answer; that is timed.
    """

    def __init__(self, fw, dataset, batch_size, num_workers, seed):
        self.sampler = PhaseSampler(len(dataset), batch_size, seed)
        self.dataset = dataset
        self.loader_args = (fw, batch_size, num_workers)
        self.loader = None

    def warm_up(self, iterations):
        # At least one batch: the loader (and OneFlow's persistent iterator) is made here, with
        # the warm-up as its first epoch, and must be taken to its end before a round starts.
        fw, batch_size, num_workers = self.loader_args
        self.sampler.batches = max(1, iterations)
        self.loader = fw.dataloader(self.dataset, batch_size, num_workers, self.sampler)
        self._take(self.sampler.batches)

    def run(self, iterations):
        self.sampler.batches = iterations
        self._take(iterations)

    def _take(self, batches):
        iterator = iter(self.loader)
        for _ in range(batches):
            next(iterator)


class DataLoaderBatches(EpochBatches):
    """The Swin dataloader case: the ImageFolder of the generated dataset with the Swin transform."""

    def __init__(self, fw, spec):
        dataset = fw.imagefolder(spec.dataset_dir, spec.input_size)
        super().__init__(fw, dataset, spec.batch_size, spec.num_workers, spec.seed)


MEASUREMENTS = {kind.name: globals()[kind.step] for kind in CASE_KINDS}  # the step of each case kind


def imported_framework(framework):
    """Which build this process measures: the framework module's version and file, as imported."""
    module = sys.modules[of_family(framework).package]
    return {"version": getattr(module, "__version__", None), "file": getattr(module, "__file__", None),
            "others": sorted(name for name in framework_packages() if name in sys.modules
                             and sys.modules[name] is not module)}


def error_line(exc):
    return one_line(f"{type(exc).__name__}: {exc}", limit=500)


class MainThreadCpu(Instrument):
    """The CPU seconds of the thread that runs the rounds (the worker's main thread), around every round:
    the round's thread_cpu_s."""

    def __init__(self, clock=REAL_CLOCK):
        self.clock = clock
        self.started = self.seconds = None

    def before_round(self, round):
        self.started = self.clock.thread_time()

    def after_round(self, round):
        self.seconds = self.clock.thread_time() - self.started

    def add_to(self, record):
        record["thread_cpu_s"] = self.seconds


def round_instruments(fw, spec, clock=REAL_CLOCK):
    """The worker's instruments (bench.instruments), outermost first: in a profiled round the framework's
    op profiler where it is wanted (spec.op_profile; by default on CUDA), the count of the ops each
    Python place dispatches, then the Python stack sampler; in every round the main thread's CPU time.
    A timed round never has a profiler running."""
    wanted = spec.op_profile if spec.op_profile is not None else spec.device.startswith("cuda")
    profilers = [OpProfile(fw.op_profiler)] if wanted else []
    return [*profilers, DispatchCount(fw.dispatched_ops, spec.times), StackProfile(spec.times),
            MainThreadCpu(clock)]


@dataclasses.dataclass
class Measurement:
    """What a worker measures: the framework it runs in (sync, barrier, peak_memory, imported, close; a
    Framework), the step whose iterations are timed (warm_up(n), run(n)) and the instruments around each
    round."""

    framework: object
    step: object
    instruments: list


def framework_measurement(spec, clock=REAL_CLOCK):
    """The spec's framework, the step of its case kind (MEASUREMENTS) and round_instruments."""
    fw = FRAMEWORK_CLASSES[spec.framework](spec)
    return Measurement(fw, MEASUREMENTS[spec.kind](fw, spec), round_instruments(fw, spec, clock))


def timed_round(step, iterations, clock=REAL_CLOCK):
    """`iterations` of the step on the clock: the round's record."""
    started_unix = clock.unix_time()
    start = clock.perf_counter()
    step.run(iterations)
    total = clock.perf_counter() - start
    return {"total_s": total, "started_unix": started_unix, "ended_unix": clock.unix_time()}


def serve(control, spec, rank=0, set_up=framework_measurement, clock=REAL_CLOCK):
    """The worker's side of the protocol (bench.protocol) for rank `rank`, in this process: set_up(spec,
    clock) makes the Measurement, its warm-up follows (both timed as the setup), then ready.json; each
    round the runner starts (go-K, profile-K), after every rank met at the framework's barrier, is timed
    with the instruments around it, until the runner says stop or spec.rounds are done; then done.json.
    Rank 0 writes the reports. Returns 0, or 1 once error-RANK.json says why it failed (the case's
    timeout included)."""
    deadline = clock.monotonic() + float(spec.timeout_s)
    try:
        seen = {name: os.environ.get(name) for name in spec.env or {}}
        _write_json(control / protocol.env_file(rank), seen)
        setup_start = clock.perf_counter()
        measurement = set_up(spec, clock)
        fw, step = measurement.framework, measurement.step
        step.warm_up(spec.warmup)
        fw.sync()
        fw.barrier()
        if rank == 0:
            _write_json(control / protocol.READY_FILE, {"setup_s": clock.perf_counter() - setup_start,
                                                        "pid": os.getpid(), "imported": fw.imported()})
        with started(measurement.instruments):
            for k in range(spec.rounds):  # at most: the runner may end the rounds early (a stop file)
                kind = wait_for_round(control, k, deadline, clock)
                if kind is None:
                    break
                fw.barrier()
                # A profiled round is measured as a timed one, with the profilers running around it.
                this_round = Round(k, profiled=kind == PROFILE and rank == 0)
                record = measure_round(measurement.instruments, this_round,
                                       functools.partial(timed_round, step, spec.times, clock))
                if rank == 0:
                    _write_json(control / protocol.round_file(k), record)
        fw.barrier()
        if rank == 0:
            peak, kind = fw.peak_memory()
            _write_json(control / protocol.DONE_FILE, {"peak_memory_bytes": peak, "memory_kind": kind})
        fw.close()
    except BaseException as exc:  # noqa: BLE001 - every failure must reach the runner as data
        _write_json(control / protocol.error_file(rank),
                    {"error": error_line(exc), "traceback": traceback.format_exc()[-4000:]})
        sys.stderr.write(traceback.format_exc())
        sys.stderr.flush()
        return 1
    return 0


def main(argv=None, set_up=framework_measurement, clock=REAL_CLOCK):
    """The worker's process: its pid file first, then serve() with the spec of its control folder. A
    failed worker ends at once, without the framework's teardown (which can hang after a failure)."""
    parser = argparse.ArgumentParser(prog="speedstats.bench.worker")
    parser.add_argument("--control", required=True, type=Path)
    args, _ = parser.parse_known_args(argv)
    processes.die_with_parent()
    control = args.control
    rank = int(os.environ.get("RANK", "0"))
    write_atomic(control / protocol.pid_file(rank), str(os.getpid()), "worker's pid file")
    spec = WorkerSpec.from_json((control / protocol.SPEC_FILE).read_text(encoding="utf-8"))
    if serve(control, spec, rank, set_up, clock):
        os._exit(1)
    return 0


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Without the interpreter's teardown: the figures are written, and unloading the framework (0.6 s
    # for PyTorch on a CPU) would only make the run wait for the worker's exit.
    os._exit(status)
