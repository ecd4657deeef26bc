"""What a OneFlow ResNet50 round times, by where its clock starts and stops, in one process.

    .venv/bin/python benchmarks/oneflow_timing_window.py [--device cpu|cuda] [--batch 2] [--size 224]
        [--times 10] [--warmup 5] [--repeats 5]

OneFlow's `loss.numpy()` waits for the forward only; the backward and the SGD step it queued run on.
Three clocks over the same old-bot iterations (shared model, sync by `loss.numpy()`), taken in
turn, `--repeats` times:

- old script: started right after the previous iteration's `loss.numpy()` (its backward and step
  still running), stopped after the last `loss.numpy()`, as compare_speed_with_pytorch.py did;
- drained start: everything finished before the clock starts, stopped after the last `loss.numpy()`
  (speedstats' old-bot rounds before they waited for the queue);
- drained start, drained stop: what speedstats' old-bot rounds time now.

Prints each clock's median per-iteration time and its median paired difference from the old script's,
for wall time and for the process's CPU time (all its threads: the work inside the clock, which other
load on a shared machine disturbs less than the wall time).
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--times", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    import oneflow as flow

    from speedstats.bench.worker import FRAMEWORK_CLASSES, ResNet50Step
    from speedstats.bench.workerspec import WorkerSpec

    spec = WorkerSpec(framework="oneflow", ddp=False, device=args.device, mode="old-bot", model="shared",
                      batch_size=args.batch, image_size=args.size)
    fw = FRAMEWORK_CLASSES["oneflow"](spec)
    step = ResNet50Step(fw, spec)
    model, optimizer, data = step.model, step.optimizer, step.input
    drain = flow._oneflow_internal.eager.Sync

    def iterations(n):
        for _ in range(n):
            loss = model(data).sum()
            loss.backward()
            optimizer.zero_grad(set_to_none=False)
            optimizer.step()
            loss.numpy()

    def clock(before, after):
        before()
        start, cpu = time.perf_counter(), time.process_time()
        iterations(args.times)
        after()
        return time.perf_counter() - start, time.process_time() - cpu

    def old_script():
        # the iteration before the clock is left running, as the old warm-up's last one was
        return clock(lambda: iterations(1), lambda: None)

    def drained_start():
        return clock(drain, lambda: None)

    def drained_both():
        return clock(drain, drain)

    clocks = {
        "old script": old_script,
        "drained start": drained_start,
        "drained start and stop": drained_both,
    }
    iterations(args.warmup)
    drain()
    figures = {name: [] for name in clocks}
    for k in range(args.repeats):
        names = list(clocks)[k % 3 :] + list(clocks)[: k % 3]  # each clock takes each place in turn
        for name in names:
            figures[name].append([t / args.times * 1000 for t in clocks[name]()])
        print(
            f"# repeat {k + 1}: "
            + ", ".join(f"{n} {figures[n][-1][0]:.1f} ms ({figures[n][-1][1]:.1f} ms CPU)" for n in clocks)
            + f", load average {os.getloadavg()[0]:.2f}",
            file=sys.stderr,
            flush=True,
        )
    old = figures["old script"]
    print("| clock | wall ms per iteration | change | CPU ms per iteration | change |")
    print("|---|---|---|---|---|")
    for name, values in figures.items():
        cells = []
        for i in (0, 1):
            change = statistics.median(v[i] / o[i] - 1 for v, o in zip(values, old))
            cells.append(f"{statistics.median(v[i] for v in values):.1f} | {change * 100:+.1f}%")
        print(f"| {name} | {' | '.join(cells)} |")
    print(f"\nmedians of {args.repeats} repeats; change: median paired (clock / old script - 1)")


if __name__ == "__main__":
    main()
