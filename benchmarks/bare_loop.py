"""speedstats' old-bot ResNet50 step in a bare loop: no runner, no control files, no pauses.

    python benchmarks/bare_loop.py --framework oneflow|pytorch [--device cpu|cuda]
        [--shape BS,H,W] [--times N] [--warmup N] [--ddp]

For DDP, run it under a launcher (what speedstats' workers run under: oneflow.distributed.launch
for OneFlow, torch.distributed.run for PyTorch) with --ddp. The same model (speedstats.bench.models)
and the same step as speedstats' old-bot mode: PyTorch's input a CPU leaf that requires grad,
zero_grad(set_to_none=False) before step(), the old per-iteration sync (loss.cpu(), loss.numpy())
and a full sync at the end. One process, one framework, the loop timed from the warm-up's end.

Every rank prints one JSON line: {"rank", "per_iter_s", "user_s", "system_s", "minor_faults"},
the last three from getrusage around the timed loop. parity_with_old_script.py --bare-too runs it
to tell speedstats' harness apart from the old script's process layout.
"""

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from speedstats.bench.models import resnet50


def build(framework, device, ddp):
    """(module, DDP wrapper, full sync, per-iteration sync): what the loop needs of one framework."""
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if framework == "pytorch":
        import torch

        if device == "cuda":
            torch.cuda.set_device(local_rank)
        if ddp:
            torch.distributed.init_process_group("nccl" if device == "cuda" else "gloo")

        def wrap(model):
            ids = [local_rank] if device == "cuda" else None
            return torch.nn.parallel.DistributedDataParallel(model, device_ids=ids, broadcast_buffers=True)

        def sync():
            if device == "cuda":
                torch.cuda.synchronize()

        return torch, wrap, sync, lambda loss: loss.cpu()
    import oneflow as flow

    def wrap(model):
        return flow.nn.parallel.DistributedDataParallel(model, broadcast_buffers=True)

    return flow, wrap, flow._oneflow_internal.eager.Sync, lambda loss: loss.numpy()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", choices=("oneflow", "pytorch"), required=True)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--shape", default="2,224,224", help="BS,H,W (default: %(default)s)")
    parser.add_argument("--times", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--ddp", action="store_true")
    args = parser.parse_args()
    batch, height, width = (int(p) for p in args.shape.split(","))
    module, wrap, sync, host_sync = build(args.framework, args.device, args.ddp)
    import numpy as np

    device = args.device
    if device == "cuda":
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
    model = resnet50(module.nn, image_size=height).to(device)
    if args.ddp:
        model = wrap(model)
    optimizer = module.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    # As old-bot builds it: from numpy; PyTorch's a CPU leaf that requires grad, OneFlow's without.
    ones = np.ones([batch, 3, height, width]).astype(np.float32)
    data = module.tensor(ones, requires_grad=args.framework == "pytorch").to(device)

    def step():
        loss = model(data).sum()
        loss.backward()
        optimizer.zero_grad(set_to_none=False)
        optimizer.step()
        host_sync(loss)

    for _ in range(args.warmup):
        step()
    sync()
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    for _ in range(args.times):
        step()
    sync()
    total = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    rank = max(0, int(os.environ.get("RANK", "0")))
    print(json.dumps({
        "rank": rank,
        "per_iter_s": total / args.times,
        "user_s": after.ru_utime - before.ru_utime,
        "system_s": after.ru_stime - before.ru_stime,
        "minor_faults": after.ru_minflt - before.ru_minflt,
    }), flush=True)
    if args.ddp and args.framework == "pytorch":
        module.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
