"""One framework's measurement of one case, in a process of its own.

    python -m speedstats.bench.worker --control DIR

The runner writes DIR/spec.json and steers the worker through files in DIR, so that a DDP group
started by a launcher (which owns the ranks' stdin and stdout) is steered the same way:

    worker (rank 0) writes ready.json      after setup and warm-up
    runner writes      go-K                to start timed round K (every rank waits for it)
    worker (rank 0) writes round-K.json    {"total_s": ..., "started_unix": ..., "ended_unix": ...}
    worker (rank 0) writes done.json       after the last round: peak memory
    any rank writes    error-RANK.json     on failure, then exits non-zero
    every rank writes  pid-RANK            its process id, first thing

Each rank is SIGKILLed by the kernel when its parent (the runner or the DDP launcher) exits.

Only this module imports torch or oneflow, and only the one framework its spec names.
"""

import argparse
import functools
import json
import os
import resource
import sys
import time
import traceback
from pathlib import Path

from speedstats.bench import processes
from speedstats.text import one_line

POLL_S = 0.005


def _write_json(path, data):
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, path)


def _wait_for(path, deadline):
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {path.name} from the runner before the case timeout")
        time.sleep(POLL_S)


class Framework:
    """What a measurement needs from a framework: device, sync, barrier, memory figure."""

    def __init__(self, spec):
        self.ddp = spec["ddp"]
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.cuda = spec["device"] == "cuda"


class TorchFramework(Framework):
    name = "pytorch"

    def __init__(self, spec):
        super().__init__(spec)
        import torch

        self.torch = torch
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

    def resnet50(self):
        import torchvision

        return torchvision.models.resnet50().to(self.device)

    def wrap_ddp(self, model):
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(
            model, device_ids=[self.local_rank] if self.cuda else None, broadcast_buffers=True
        )

    def ones(self, shape):
        return self.torch.ones(shape, device=self.device)

    def sgd(self, params):
        return self.torch.optim.SGD(params, lr=0.01, momentum=0.9)

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def barrier(self):
        if self.ddp:
            self.dist.barrier()

    def imagefolder_loader(self, root, batch_size, num_workers, input_size, num_samples, seed):
        import torchvision
        from timm.data import create_transform

        torch = self.torch
        dataset = torchvision.datasets.ImageFolder(root, transform=swin_transform(create_transform, input_size))
        generator = torch.Generator().manual_seed(seed)
        sampler = torch.utils.data.RandomSampler(dataset, replacement=True, num_samples=num_samples,
                                                 generator=generator)
        return torch.utils.data.DataLoader(dataset, batch_size=batch_size, sampler=sampler,
                                           num_workers=num_workers, drop_last=True,
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

        self.flow = flow
        if self.cuda:
            if not flow.cuda.is_available() or flow.cuda.device_count() <= self.local_rank:
                raise RuntimeError(f"rank {self.local_rank} needs GPU {self.local_rank}, "
                                   f"OneFlow sees {flow.cuda.device_count()}")
            self.device = flow.device("cuda", self.local_rank)
        else:
            self.device = flow.device("cpu")

    def resnet50(self):
        import flowvision

        return flowvision.models.resnet50().to(self.device)

    def wrap_ddp(self, model):
        from oneflow.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model, broadcast_buffers=True)

    def ones(self, shape):
        return self.flow.ones(*shape, device=self.device)

    def sgd(self, params):
        return self.flow.optim.SGD(params, lr=0.01, momentum=0.9)

    def sync(self):
        # OneFlow's eager ops are queued on its virtual machine, on the CPU too: wait for them.
        self.flow._oneflow_internal.eager.Sync()

    def barrier(self):
        if self.ddp:
            self.flow.comm.barrier()

    def imagefolder_loader(self, root, batch_size, num_workers, input_size, num_samples, seed):
        import flowvision
        from flowvision.data import create_transform

        flow = self.flow
        dataset = flowvision.datasets.ImageFolder(root, transform=swin_transform(create_transform, input_size))
        generator = flow.Generator()
        generator.manual_seed(seed)
        sampler = flow.utils.data.RandomSampler(dataset, replacement=True, num_samples=num_samples,
                                                generator=generator)
        return flow.utils.data.DataLoader(dataset, batch_size=batch_size, sampler=sampler,
                                          num_workers=num_workers, drop_last=True,
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
    """Forward, sum, backward, zero_grad, step, host sync: one training step as the old bot timed it."""

    def __init__(self, fw, spec):
        self.fw = fw
        model = fw.resnet50()
        if fw.ddp:
            model = fw.wrap_ddp(model)
        self.model = model
        self.optimizer = fw.sgd(model.parameters())
        self.input = fw.ones([spec["batch_size"], 3, spec["image_size"], spec["image_size"]])

    def run(self, iterations):
        model, optimizer, data, sync = self.model, self.optimizer, self.input, self.fw.sync
        for _ in range(iterations):
            loss = model(data).sum()
            loss.backward()
            # set_to_none=False: PyTorch's default (None) would make step() skip every parameter,
            # while OneFlow's default zeroes them; both then do the same optimizer work.
            optimizer.zero_grad(set_to_none=False)
            optimizer.step()
            sync()


class DataLoaderBatches:
    """Batches drawn from one long-lived iterator, so worker start-up is not timed."""

    def __init__(self, fw, spec):
        batches = spec["warmup"] + spec["times"] * spec["rounds"] + 1
        loader = fw.imagefolder_loader(
            spec["dataset_dir"], spec["batch_size"], spec["num_workers"], spec["input_size"],
            num_samples=batches * spec["batch_size"], seed=spec.get("seed", 0),
        )
        self.iterator = iter(loader)

    def run(self, iterations):
        iterator = self.iterator
        for _ in range(iterations):
            next(iterator)


MEASUREMENTS = {"resnet50": ResNet50Step, "swin_dataloader": DataLoaderBatches}


def imported_framework(framework):
    """Which build this process measures: the framework module's version and file, as imported."""
    module = sys.modules["torch" if framework == "pytorch" else "oneflow"]
    return {"version": getattr(module, "__version__", None), "file": getattr(module, "__file__", None),
            "others": sorted(name for name in ("torch", "oneflow") if name in sys.modules
                             and sys.modules[name] is not module)}


def error_line(exc):
    return one_line(f"{type(exc).__name__}: {exc}", limit=500)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="speedstats.bench.worker")
    parser.add_argument("--control", required=True, type=Path)
    args, _ = parser.parse_known_args(argv)
    processes.die_with_parent()
    control = args.control
    rank = int(os.environ.get("RANK", "0"))
    (control / f"pid-{rank}").write_text(str(os.getpid()), encoding="utf-8")
    spec = json.loads((control / "spec.json").read_text(encoding="utf-8"))
    deadline = time.monotonic() + float(spec["timeout_s"])
    fw = None
    try:
        setup_start = time.perf_counter()
        fw = FRAMEWORK_CLASSES[spec["framework"]](spec)
        measurement = MEASUREMENTS[spec["kind"]](fw, spec)
        measurement.run(spec["warmup"])
        fw.sync()
        fw.barrier()
        if rank == 0:
            _write_json(control / "ready.json", {"setup_s": time.perf_counter() - setup_start, "pid": os.getpid(),
                                                 "imported": imported_framework(spec["framework"])})
        for k in range(spec["rounds"]):
            _wait_for(control / f"go-{k}", deadline)
            fw.barrier()
            started_unix = time.time()
            start = time.perf_counter()
            measurement.run(spec["times"])
            total = time.perf_counter() - start
            if rank == 0:
                _write_json(control / f"round-{k}.json",
                            {"total_s": total, "started_unix": started_unix, "ended_unix": time.time()})
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
    sys.exit(main())
