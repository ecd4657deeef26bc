"""What the runner's memory sampler costs the timed figures: rounds of a real worker with the sampler
running around them against rounds without it, alternating in the same process, for each framework.

    python benchmarks/sampling_cost.py [--pairs 20] [--iterations 2] [--profile smoke] [--case resnet50-bs2]

For each framework (the installed OneFlow and PyTorch): one worker of the profile's case, started and
warmed up as `speedstats run` starts it, then --pairs pairs of rounds of --iterations iterations, one
round of each pair with bench.memory.PeakSampler sampling the worker's process tree (as it samples
every timed round of `speedstats run`, on the CPU: resident memory) and one without, the order turning
from pair to pair. Prints each framework's trimmed mean of the per-pair ratios sampled/unsampled with
its 95% interval (the head-vs-base rule's trim and statistics): an interval that takes in 1.0 is a cost
this many pairs cannot resolve, and its upper end bounds the cost. Needs the full environment and a
quiet machine.
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from speedstats.analysis import stats
from speedstats.analysis.rule import DEFAULT_RULE
from speedstats.bench.memory import PeakSampler
from speedstats.bench.protocol import READY_FILE
from speedstats.bench.workers import Worker
from speedstats.contenders import HEAD, PYTORCH
from speedstats.suite import load_suite


def measure(role, case, args, folder):
    """[(sampled seconds, unsampled seconds), ...] of one worker's pairs of rounds, and the samples taken."""
    deadline = time.monotonic() + 1800
    worker = Worker(role, case, args.device, folder / role, None, deadline, rounds=2 * args.pairs,
                    round_iterations=args.iterations)
    pairs, samples = [], []
    try:
        worker.start()
        worker.await_file(READY_FILE)
        for k in range(args.pairs):
            seconds = {}
            for sampled in ((True, False) if k % 2 == 0 else (False, True)):
                sampler = PeakSampler(worker.processes()).start() if sampled else None
                try:
                    seconds[sampled] = float(worker.run_round()["total_s"])
                finally:
                    if sampler is not None:
                        samples.append(sampler.stop()["samples"])
            pairs.append((seconds[True], seconds[False]))
        worker.finish()
    finally:
        worker.kill()
    return pairs, samples


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--iterations", type=int, default=2, help="iterations per round")
    parser.add_argument("--profile", default="smoke")
    parser.add_argument("--case", default="resnet50-bs2")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    case = next(c for c in load_suite(profile=args.profile).cases if c.id == args.case)
    print(f"$ python benchmarks/sampling_cost.py --pairs {args.pairs} --iterations {args.iterations} "
          f"--profile {args.profile} --case {args.case} --device {args.device}")
    with tempfile.TemporaryDirectory(prefix="speedstats-sampling-") as tmp:
        for role, label in ((HEAD, "OneFlow"), (PYTORCH, "PyTorch")):
            began = time.monotonic()
            pairs, samples = measure(role, case, args, Path(tmp))
            ratios = [on / off for on, off in pairs]
            estimate = stats.trimmed_mean(ratios, DEFAULT_RULE.trim)
            low, high = estimate.interval(0.95)
            unsampled = statistics.median(off for _, off in pairs) / args.iterations
            print(f"{label}: {len(pairs)} pairs, {unsampled * 1000:.1f} ms per iteration unsampled, "
                  f"sampled/unsampled {estimate.mean:.4f} (95% {low:.4f} to {high:.4f}), "
                  f"{statistics.median(samples):.0f} samples a sampled round, "
                  f"{time.monotonic() - began:.0f}s")


if __name__ == "__main__":
    main()
