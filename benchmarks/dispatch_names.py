"""What the comment names when a build dispatches other ops: real runs, head against base, on test builds.

    python benchmarks/dispatch_names.py [--runs 3] [--aa-runs 3] [--out DIR]
    python benchmarks/dispatch_names.py --cost [--pairs 10]

Each run is a real `speedstats run` on the CPU, one ResNet50 case at the smoke shapes (batch 2, 64x64,
10 iterations), the built-in rule, against base 0.9.0+a (tests/oneflow_builds.py):

- bnmul13: BatchNorm's forward multiplies its input by 1.0 13 times (queued kernels: a kernel-side
  slowdown), with the default `attribute: slower`;
- slow: every Conv2d computes its convolution again and discards it, `attribute: slower`;
- sgdwait40: SGD.step busy-waits 40 ms (Python, no op), `attribute: always` (on the CPU the wait hides
  behind the queued backward, so the rule seldom finds it slower);
- A/A: 0.9.0+a against itself, `attribute: always`: a line about ops dispatched here is a false name.

For each run: the verdict and change, the first significant place, the ops-dispatched lines of the
comment, the profiled step against the timed one (the sampler's and the counter's cost), the wall time.
The suite's `disturbance:` does not judge other processes' load; say what else ran with the figures.

--cost: the counter's own cost, in this process: the worker's ResNet50 step of each framework (batch 2,
64x64, old-bot mode, the CPU), rounds of 5 steps with the counter and without it alternating, --pairs
pairs; the median of counted over plain, and the events a step.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from attribution_power import oneflow_builds  # the test builds, loaded there
from attribution_power import run_once as run_head_vs_base

MARK = "The ops each place dispatches"


def run_once(out, head, base, attribute):
    """(results.json's case, the comment, the wall seconds) of a real head-vs-base run."""
    case, wall, _ = run_head_vs_base(out, head, base, attribute, name="dispatch-names")
    comment = out / "comment.md"
    return case, comment.read_text() if comment.exists() else "", wall


def describe(label, case, comment, wall):
    paired = case.get("paired") or {}
    attribution = case.get("attribution") or {}
    significant = [p for p in attribution.get("places") or [] if p["significant"] and p["change_ms"] > 0]
    first = (f"{significant[0]['place']} {significant[0]['change_ms']:+.1f}ms" if significant
             else "no significant place")
    base_timed = (case["frameworks"].get("oneflow_base") or {}).get("per_iter_s")
    cost = (f"{attribution['base_step_ms'] / (base_timed * 1000):.2f}"
            if attribution.get("base_step_ms") and base_timed else "-")
    ratio = paired.get("ratio")
    change = f"{(ratio - 1) * 100:+.1f}%" if ratio else "-"
    lines = [line[2:] for line in comment.split(MARK, 1)[-1].splitlines()
             if MARK in comment and line.startswith("- ")]
    print(f"{label}: {paired.get('verdict')} {change}, profiled {attribution.get('rounds', 0)} rounds "
          f"(ops counted in {attribution.get('dispatch_rounds', 0)}), first {first}, "
          f"profiled/timed base step {cost}, {wall:.0f}s", flush=True)
    for line in lines or ["(no ops-dispatched line)"]:
        print(f"    {line}", flush=True)
    return {"label": label, "verdict": paired.get("verdict"), "change": change, "first": first,
            "dispatch_lines": lines, "profiled_over_timed": cost, "wall_s": round(wall)}


def counter_cost(framework, pairs, steps=5):
    """Median over `pairs` of a round of `steps` with the counter over one without, and ops per step."""
    from speedstats.bench.opcount import DispatchCounter, framework_ops
    from speedstats.bench.worker import FRAMEWORK_CLASSES, ResNet50Step
    from speedstats.bench.workerspec import WorkerSpec

    spec = WorkerSpec(framework=framework, device="cpu", batch_size=2, image_size=64, times=steps,
                      mode="old-bot")
    fw = FRAMEWORK_CLASSES[framework](spec)
    step = ResNet50Step(fw, spec)
    step.warm_up(3)
    fw.sync()
    ratios, ops = [], 0
    for k in range(pairs):
        times = {}
        for counted in ((False, True) if k % 2 == 0 else (True, False)):
            counter = DispatchCounter(*framework_ops(framework)).start() if counted else None
            start = time.perf_counter()
            step.run(steps)
            times[counted] = time.perf_counter() - start
            if counter is not None:
                counts = counter.stop().report()[0]
                ops = sum(sum(by.values()) for by in counts.values()) / steps
        ratios.append(times[True] / times[False])
    ratios.sort()
    print(f"{framework}: counted/plain median {ratios[len(ratios) // 2]:.3f} (from {ratios[0]:.3f} to "
          f"{ratios[-1]:.3f}, {pairs} pairs of {steps} steps), {ops:.0f} ops counted a step", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each slowed build")
    parser.add_argument("--aa-runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "dispatch-names")
    parser.add_argument("--cost", action="store_true", help="the counter's own cost, in this process")
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--cost-of", choices=("oneflow", "pytorch"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cost_of:
        counter_cost(args.cost_of, args.pairs)
        return
    if args.cost:
        # Each framework in a process of its own, as the worker imports only one.
        for framework in ("oneflow", "pytorch"):
            subprocess.run([sys.executable, __file__, "--cost-of", framework, "--pairs", str(args.pairs)],
                           env=dict(os.environ, PYTHONPATH=str(ROOT / "src")), check=True)
        return
    base = oneflow_builds.repacked_oneflow_wheel(local="a")
    builds = [("bnmul13", oneflow_builds.batchnorm_oneflow_wheel(13), "slower"),
              ("slow", oneflow_builds.slow_oneflow_wheel(), "slower"),
              ("sgdwait40", oneflow_builds.busy_wait_oneflow_wheel(40), "always")]
    summary = []
    for name, head, attribute in builds:
        for k in range(args.runs):
            label = f"{name} #{k + 1} ({attribute})"
            summary.append(describe(label, *run_once(args.out / f"{name}-{k}", head, base, attribute)))
    for k in range(args.aa_runs):
        label = f"A/A #{k + 1} (always)"
        summary.append(describe(label, *run_once(args.out / f"aa-{k}", base, base, "always")))
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
