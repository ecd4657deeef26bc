"""How often the head-vs-base interval covers the true change when pairs of processes differ, and what a
rule that counts their spread (its `process_sd`) costs in power and wall time: simulated runs of
benchmarks/simulate_head_vs_base.py (the runner's own steps), rule by rule.

    python benchmarks/interval_coverage.py [--trials 400] [--seed 1] [--process-sd 0,0.028,0.045]
        [--changes 0,0.115,0.158] [--rules "process_sd=0;;process_sd=0.045"]

Each rule is a `--rule` of the simulation (fields of head_vs_base, comma-separated; empty: the
default), the rules separated by semicolons. Prints, per rule, model process sd and true change, the
share of runs whose final interval covers the true change, the share called a regression, and the
median wall time against a head-only run.
"""

import argparse
import importlib.util
import random
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("simulate_head_vs_base",
                                               ROOT / "benchmarks" / "simulate_head_vs_base.py")
simulation = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(simulation)

DEFAULT_RULES = "process_sd=0;;process_sd=0.045"


def measure(rule, change, process_sd, trials, seed, band=0.04):
    """(covered, called a regression, median wall time against head-only) over `trials` runs."""
    rng = random.Random(seed)
    covered = called = 0
    walls = []
    for _ in range(trials):
        verdict, _rounds, wall, _ = simulation.simulate(change, rule, rng, sigma=0.075, sigma_iterations=2,
                                                        process_sd=process_sd, outliers=0.05,
                                                        start_order=0.013)
        walls.append(wall)
        if verdict.low is not None:
            covered += verdict.low <= 1 + change <= verdict.high
            called += verdict.low > 1 + band
    return covered / trials, called / trials, statistics.median(walls)


def floats(text):
    return [float(x) for x in text.split(",") if x]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--process-sd", type=floats, default=[0.0, 0.028, 0.045])
    parser.add_argument("--changes", type=floats, default=[0.0, 0.115, 0.158])
    parser.add_argument("--rules", default=DEFAULT_RULES)
    args = parser.parse_args(argv)
    print(f"{args.trials} simulated runs a row, seed {args.seed}")
    print("| rule | process sd | true change | covers the change | regression | wall vs head-only |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for text in args.rules.split(";"):
        rule = simulation.parse_rule(text)
        for process_sd in args.process_sd:
            for change in args.changes:
                covered, called, wall = measure(rule, change, process_sd, args.trials, args.seed)
                print(f"| {text or 'default'} | {process_sd:.1%} | {change:+.1%} | {covered:.1%} "
                      f"| {called:.1%} | {wall:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
