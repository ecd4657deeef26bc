"""One framework's measurement of one case, in a process of its own.

    python -m speedstats.bench.worker --control DIR

The runner writes DIR/spec.json (a bench.workerspec.WorkerSpec) and steers the worker through files in DIR,
so that a DDP group started by a launcher (which owns the ranks' stdin and stdout) is steered the same way:

    worker (rank 0) writes ready.json      after setup and warm-up
    runner writes      go-K                to start timed round K (every rank waits for it)
    runner writes      profile-K           instead of go-K: round K with rank 0's Python stack sampled
                                           (bench.sampler) and, on CUDA, its ops profiled by the
                                           framework's profiler (bench.opprofile); its round-K.json
                                           also carries `profile`
    runner writes      stop                instead of go-K: no more rounds (spec.rounds is a maximum, room
                                           for sequential rounds and disturbed rounds measured again)
    worker (rank 0) writes round-K.json    {"total_s": ..., "started_unix": ..., "ended_unix": ...}
    worker (rank 0) writes done.json       after the last round: peak memory
    any rank writes    error-RANK.json     on failure, then exits non-zero
    every rank writes  pid-RANK            its process id, first thing
    every rank writes  env-RANK.json       at start: the values it sees of the suite's env: names

Each rank is SIGKILLed by the kernel when its parent (the runner or the DDP launcher) exits.
The spec's `mode` says what a ResNet50 step does (see ResNet50Step): `old-bot` measures the old
bot's work, `clean` the fair comparison.

Only this module (and bench.opprofile, which it calls) imports torch or oneflow, and only the one
framework its spec names.
"""

import argparse
import functools
import json
import os
import random
import resource
import sys
import time
import traceback
from pathlib import Path

from speedstats.bench import processes
from speedstats.bench.opprofile import OpProfileUnavailable, op_profiler
from speedstats.bench.sampler import StackSampler
from speedstats.bench.workerspec import SPEC_FILE, WorkerSpec
from speedstats.casekinds import CASE_KINDS
from speedstats.contenders import framework_packages, of_family
from speedstats.fsutil import write_atomic
from speedstats.text import one_line

POLL_S = 0.005


def _write_json(path, data):
    write_atomic(path, json.dumps(data), "worker's report")


GO, PROFILE = "go", "profile"


def _wait_for_round(control, k, deadline):
    """GO or PROFILE once round k may start (go-K, profile-K), None when the runner asks for no more
    rounds (stop)."""
    go, profile, stop = control / f"go-{k}", control / f"profile-{k}", control / "stop"
    while True:
        if go.exists():
            return GO
        if profile.exists():
            return PROFILE
        if stop.exists():
            return None
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {go.name} from the runner before the case timeout")
        time.sleep(POLL_S)


class Framework:
    """What a measurement needs from a framework: device, sync, barrier, memory figure."""

    def __init__(self, spec):
        self.ddp = spec.ddp
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.cuda = spec.device == "cuda"
        self.device_name = spec.device

    def op_profiler(self):
        """This framework's bench.opprofile profiler on the spec's device (OpProfileUnavailable)."""
        return op_profiler(self.name, self.module, self.device_name)


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


def _start_op_profiler(fw, spec):
    """The framework's op profiler, started, for a profiled round where it is wanted (spec.op_profile;
    by default on CUDA); (None, why not) where it cannot run."""
    wanted = spec.op_profile if spec.op_profile is not None else spec.device.startswith("cuda")
    if not wanted:
        return None, None
    try:
        return fw.op_profiler().start(), None
    except OpProfileUnavailable as exc:
        return None, str(exc)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="speedstats.bench.worker")
    parser.add_argument("--control", required=True, type=Path)
    args, _ = parser.parse_known_args(argv)
    processes.die_with_parent()
    control = args.control
    rank = int(os.environ.get("RANK", "0"))
    write_atomic(control / f"pid-{rank}", str(os.getpid()), "worker's pid file")
    spec = WorkerSpec.from_json((control / SPEC_FILE).read_text(encoding="utf-8"))
    deadline = time.monotonic() + float(spec.timeout_s)
    fw = None
    try:
        _write_json(control / f"env-{rank}.json", {name: os.environ.get(name) for name in spec.env or {}})
        setup_start = time.perf_counter()
        fw = FRAMEWORK_CLASSES[spec.framework](spec)
        measurement = MEASUREMENTS[spec.kind](fw, spec)
        measurement.warm_up(spec.warmup)
        fw.sync()
        fw.barrier()
        if rank == 0:
            _write_json(control / "ready.json", {"setup_s": time.perf_counter() - setup_start,
                                                 "pid": os.getpid(),
                                                 "imported": imported_framework(spec.framework)})
        for k in range(spec.rounds):  # at most: the runner may end the rounds early (a stop file)
            kind = _wait_for_round(control, k, deadline)
            if kind is None:
                break
            fw.barrier()
            # A profiled round is measured as a timed one, with the profilers running around it; the
            # timed rounds never have them running.
            profiled = kind == PROFILE and rank == 0
            ops, ops_reason = _start_op_profiler(fw, spec) if profiled else (None, None)
            sampler = StackSampler().start() if profiled else None
            started_unix = time.time()
            start, start_cpu = time.perf_counter(), time.thread_time()
            measurement.run(spec.times)
            total, thread_cpu = time.perf_counter() - start, time.thread_time() - start_cpu
            if rank == 0:
                report = {"total_s": total, "started_unix": started_unix, "ended_unix": time.time(),
                          "thread_cpu_s": thread_cpu}
                if sampler is not None:
                    report["profile"] = {**sampler.stop().report(), "steps": spec.times}
                    if ops is not None:
                        op_self, op_total = ops.stop()
                        report["profile"].update(op_self_s=op_self, op_total_s=op_total,
                                                 op_device=ops.device_name)
                    elif ops_reason:
                        report["profile"]["op_reason"] = ops_reason
                _write_json(control / f"round-{k}.json", report)
        fw.barrier()
        if rank == 0:
            peak, kind = fw.peak_memory()
            _write_json(control / "done.json", {"peak_memory_bytes": peak, "memory_kind": kind})
        fw.close()
    except BaseException as exc:  # noqa: BLE001 - every failure must reach the runner as data
        _write_json(control / f"error-{rank}.json",
                    {"error": error_line(exc), "traceback": traceback.format_exc()[-4000:]})
        sys.stderr.write(traceback.format_exc())
        sys.stderr.flush()
        os._exit(1)  # skip framework teardown, which can hang after a failure
    return 0


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Without the interpreter's teardown: the figures are written, and unloading the framework (0.6 s
    # for PyTorch on a CPU) would only make the run wait for the worker's exit.
    os._exit(status)
