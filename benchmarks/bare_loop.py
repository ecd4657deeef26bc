"""speedstats' old-bot ResNet50 step in a bare loop: no runner, no control files, no pauses.

    python benchmarks/bare_loop.py --framework oneflow|pytorch [--device cpu|cuda]
        [--batch-size N] [--image-size N] [--times N] [--warmup N] [--ddp]

For DDP, run it under a launcher (what speedstats' workers run under: oneflow.distributed.launch
for OneFlow, torch.distributed.run for PyTorch) with --ddp. The framework set-up and the step are the
worker's own (speedstats.bench.worker: FRAMEWORK_CLASSES and ResNet50Step in old-bot mode); what this
leaves out is everything around them: the control files, the barrier before each round, the pauses.
One process, one framework, the loop timed from the warm-up's end.

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

from speedstats.bench.worker import FRAMEWORK_CLASSES, ResNet50Step
from speedstats.bench.workerspec import WorkerSpec


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", choices=sorted(FRAMEWORK_CLASSES), required=True)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--times", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--ddp", action="store_true")
    args = parser.parse_args()
    spec = WorkerSpec(framework=args.framework, device=args.device, ddp=args.ddp, batch_size=args.batch_size,
                      image_size=args.image_size, times=args.times, warmup=args.warmup, mode="old-bot")
    fw = FRAMEWORK_CLASSES[spec.framework](spec)
    step = ResNet50Step(fw, spec)
    step.warm_up(spec.warmup)
    fw.sync()
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    step.run(spec.times)
    total = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({
        "rank": max(0, int(os.environ.get("RANK", "0"))),
        "per_iter_s": total / spec.times,
        "user_s": after.ru_utime - before.ru_utime,
        "system_s": after.ru_stime - before.ru_stime,
        "minor_faults": after.ru_minflt - before.ru_minflt,
    }), flush=True)
    fw.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
