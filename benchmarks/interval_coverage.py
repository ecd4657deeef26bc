"""How often the head-vs-base interval covers the true change when pairs of processes differ, and what a
rule that counts their spread (its `process_sd`) costs in power and wall time: simulated runs of
benchmarks/simulate_head_vs_base.py (the runner's own steps), rule by rule.

    python benchmarks/interval_coverage.py [--trials 400] [--seed 1] [--process-sd 0,0.028,0.045]
        [--changes 0,0.115,0.158] [--rules "process_sd=0;;process_sd=0.045"]
        [--rounds-from FILE ... [--noise-scale 1.0]]

Each rule is a `--rule` of the simulation (fields of head_vs_base, comma-separated; empty: the
default), the rules separated by semicolons. With --rounds-from, each run's noise is drawn from a
recorded run's rounds (simulate_head_vs_base.recorded_noise) instead of the normal model. Prints, per
rule, model process sd and true change, the share of runs whose final interval covers the true change
(of all, of those that stopped at the first look, and of those that went on), the share called a
regression, the wall time against a head-only run (median and largest, in the simulation's model of
the CPU's times) and the rounds (median and largest).
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


def measure(rule, change, process_sd, trials, seed, band=0.04, recorded=None):
    """Over `trials` runs: the share whose interval covers the change, [covered, runs] of those that
    stopped at the first look and of those that went on, the share called a regression, the median and
    largest wall time against head-only, and the median and largest rounds."""
    rng = random.Random(seed)
    called = 0
    first, later = [0, 0], [0, 0]
    walls, counts = [], []
    for _ in range(trials):
        verdict, rounds, wall, _ = simulation.simulate(change, rule, rng, sigma=0.075, sigma_iterations=2,
                                                       process_sd=process_sd, outliers=0.05,
                                                       start_order=0.013, recorded=recorded)
        walls.append(wall)
        counts.append(rounds)
        tally = first if rounds <= rule.first_rounds else later
        tally[1] += 1
        if verdict.low is not None:
            tally[0] += verdict.low <= 1 + change <= verdict.high
            called += verdict.low > 1 + band
    return ((first[0] + later[0]) / trials, first, later, called / trials,
            (statistics.median(walls), max(walls)), (statistics.median(counts), max(counts)))


def floats(text):
    return [float(x) for x in text.split(",") if x]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--process-sd", type=floats, default=[0.0, 0.028, 0.045])
    parser.add_argument("--changes", type=floats, default=[0.0, 0.115, 0.158])
    parser.add_argument("--rules", default=DEFAULT_RULES)
    simulation.add_recorded_arguments(parser)
    args = parser.parse_args(argv)
    recorded = simulation.recorded_noise(args.rounds_from, args.noise_scale) if args.rounds_from else None
    noise = (f"the rounds of {len(recorded)} recorded runs times {args.noise_scale:g}" if recorded
             else "normal rounds of sd 7.5% at two iterations, 5% outliers")
    print(f"{args.trials} simulated runs a row, seed {args.seed}, {noise}")
    print("| rule | process sd | true change | covers the change | at the first look | after it "
          "| regression | wall vs head-only median (max) | rounds median (max) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for text in args.rules.split(";"):
        rule = simulation.parse_rule(text)
        for process_sd in args.process_sd:
            for change in args.changes:
                covered, first, later, called, wall, rounds = measure(rule, change, process_sd, args.trials,
                                                                      args.seed, recorded=recorded)
                print(f"| {text or 'default'} | {process_sd:.1%} | {change:+.1%} | {covered:.1%} "
                      f"| {first[0]}/{first[1]} | {later[0]}/{later[1]} | {called:.1%} "
                      f"| {wall[0]:.2f}x ({wall[1]:.2f}x) | {rounds[0]:g} ({rounds[1]}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
