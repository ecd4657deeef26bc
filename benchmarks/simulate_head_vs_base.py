"""The head-vs-base rule against a model of the noise measured on the 2-core CPU: pure Python, seeded,
seconds to run. It executes the runner's own steps (`analysis.sequence.Steps`) on simulated rounds and
a simulated clock: one loop, so these tables describe the rule as the runner applies it.

    python benchmarks/simulate_head_vs_base.py [--trials 2000] [--seed 1] [--json FILE]
        [--sigma 0.075] [--sigma-iterations 2] [--process-sd 0.015] [--start-order 0.013]
        [--outliers 0.05] [--hidden 0.0] [--rule first_rounds=10,max_rounds=30,...]
        [--rounds-from FILE ... [--noise-scale 1.0]]

The model (figures of the smoke case resnet50-bs2 in old-bot mode, see README and issue 18):
- each round's log(head/base) is the true log ratio plus normal noise of sd --sigma at
  --sigma-iterations iterations per round, scaled by sqrt(2 / iterations) for other round sizes;
- a share --outliers of the rounds is disturbed (a neighbour on the machine): one of the two builds
  takes an extra |N(0, 0.2)| in log;
- each pair of processes carries an offset N(0, --process-sd) in log (placement, memory layout),
  drawn again for each fresh pair (the rule's process_pairs, a confirmation, the pairs after pairs
  that disagree), and the build started first is --start-order slower in log (1.3% measured on this
  CPU; 50% or more on one CI machine), which turns with the start order from pair to pair;
- or, with --rounds-from, the rounds a machine measured instead of that normal noise and its outliers:
  each simulated run draws its rounds' noise from one recorded run's (recorded_noise), so runs keep
  the scatter and the tails that their stretch of time on the machine had, quiet or not;
- in a share --hidden of the pairs of processes the change does not show at all (a Python-side cost
  that OneFlow's queued work hides in some processes and not in others), drawn for each fresh pair;
- wall time: a head-only run takes 13.1 s; a baseline adds a worker start (3.0 s) and the base's
  iterations (0.256 s each, the head's scaled by its slowdown), 0.03 s per contender and round, 6.0 s
  for each fresh pair of processes. The runner's time budget is applied as it applies it (with a first
  look's time more once the rule starts more pairs after pairs that disagree).

Prints, per true change, how often each outcome came out, the median and largest rounds and wall-time
ratios against a head-only run, and the rule's parameters.
"""

import argparse
import json
import math
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from speedstats.analysis import sequence, stats
from speedstats.analysis.rule import SequentialRule

HEAD_ONLY_S = 13.1
WORKER_START_S = 3.0
ONEFLOW_STEP_S = 0.256
ROUND_OVERHEAD_S = 0.03
CASE_SHARE_OF_RUN_S = 11.1  # the head-only run's case (2 s of the run is speedstats starting and writing)
CHANGES = (-0.15, 0.0, 0.02, 0.05, 0.08, 0.10, 0.15, 0.25)


class SimulatedClock:
    """The case's wall time as the model says it passes: the simulation advances it."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def recorded_noise(paths, scale=1.0):
    """The noise of recorded runs: for each run in these files (benchmarks/power_curve.py's --json, every
    condition; its rounds of one iteration), its rounds' log ratios less their mean, and the same
    negated, times `scale`. Mirrored because head and base are alike to the noise (an A/A run's log
    ratio is as likely to be +x as -x), so that a pool's chance skew leaves no offset on the runs
    drawn from it."""
    pools = []
    for path in paths:
        for runs in json.loads(Path(path).read_text())["runs"].values():
            for run in runs:
                logs = [math.log(r) for r in run["ratios"]]
                if len(logs) < 2:
                    continue
                mean = statistics.fmean(logs)
                pools.append([scale * (x - mean) for x in logs] + [scale * (mean - x) for x in logs])
    if not pools:
        raise ValueError("no recorded run with 2 rounds or more in " + ", ".join(map(str, paths)))
    return pools


def simulate(change, rule, rng, sigma, sigma_iterations, process_sd, outliers, iterations=1, confirm=True,
             start_order=0.0, hidden=0.0, recorded=None):
    """One run, through the runner's own steps (analysis.sequence.Steps) with simulated rounds on a
    simulated clock: (verdict, rounds, wall-time ratio against head-only, confirmed or not).
    recorded: pools of recorded_noise, one drawn for the run, in place of sigma and outliers."""
    def shown():
        return 0.0 if hidden and rng.random() < hidden else math.log1p(change)

    true = shown()
    pool = rng.choice(recorded) if recorded else None
    sd = None if pool is not None else sigma * math.sqrt(sigma_iterations / iterations)
    clock = SimulatedClock()
    steps = sequence.Steps(rule, confirm=confirm, clock=clock)
    offset = rng.gauss(0, process_sd) + start_order
    head_step = ONEFLOW_STEP_S * (1 + change)
    round_s = iterations * (head_step + ONEFLOW_STEP_S) + 2 * ROUND_OVERHEAD_S
    # The first measurement: the head-only case plus a base worker and its rounds (and the head's
    # iterations at its own speed: the head-only reference is the base build).
    clock.now = CASE_SHARE_OF_RUN_S + WORKER_START_S
    while not isinstance(step := steps.next_step(), sequence.Stop):
        if isinstance(step, sequence.StartPair):
            lean = start_order if step.head_first else -start_order
            offset = rng.gauss(0, process_sd) + lean
            true = shown()
            clock.now += 2 * WORKER_START_S
        elif isinstance(step, sequence.MeasureRound):
            spent = iterations * head_step + ROUND_OVERHEAD_S if step.with_control else round_s
            clock.now += spent
            if pool is not None:
                noise = rng.choice(pool) / math.sqrt(iterations)  # recorded at one iteration a round
            else:
                noise = rng.gauss(0, sd)
                if rng.random() < outliers:
                    noise += rng.choice((-1, 1)) * abs(rng.gauss(0, 0.2))
            steps.measured(math.exp(true + offset + noise), seconds=spent)
    verdict = steps.sequence.verdict()
    wall = (HEAD_ONLY_S - CASE_SHARE_OF_RUN_S + clock.now) / HEAD_ONLY_S
    return verdict, len(steps.sequence.ratios), wall, steps.sequence.confirming


def evaluate(rule, trials, seed, changes=CHANGES, **model):
    rng = random.Random(seed)
    table = []
    for change in changes:
        outcomes, rounds, walls, stops = {}, [], [], {}
        for _ in range(trials):
            verdict, n, wall, _ = simulate(change, rule, rng, **model)
            key = verdict.verdict
            if key == stats.INCONCLUSIVE and verdict.leaning:
                key = verdict.leaning
            outcomes[key] = outcomes.get(key, 0) + 1
            stops[verdict.stopped] = stops.get(verdict.stopped, 0) + 1
            rounds.append(n)
            walls.append(wall)
        table.append({"change": change, "trials": trials, "outcomes": outcomes, "stopped": stops,
                      "rounds_median": statistics.median(rounds), "rounds_max": max(rounds),
                      "wall_median": statistics.median(walls), "wall_max": max(walls)})
    return table


def rule_values(text):
    """{field: number} of `a=1,b=0.5` (head_vs_base fields), not yet checked."""
    values = {}
    for item in filter(None, (text or "").split(",")):
        key, _, value = item.partition("=")
        values[key] = int(value) if value.lstrip("-").isdigit() else float(value)
    return values


def parse_rule(text):
    return SequentialRule.from_dict(rule_values(text), "--rule")


def add_recorded_arguments(parser):
    parser.add_argument("--rounds-from", type=Path, action="append", metavar="FILE",
                        help="draw each run's noise from a recorded run of these files (power_curve.py "
                             "--json; repeatable) instead of --sigma and --outliers")
    parser.add_argument("--noise-scale", type=float, default=1.0,
                        help="the recorded noise times this (0.8: a machine 20%% quieter)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sigma", type=float, default=0.075)
    parser.add_argument("--sigma-iterations", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=1, help="iterations per round")
    parser.add_argument("--process-sd", type=float, default=0.015)
    parser.add_argument("--start-order", type=float, default=0.013,
                        help="how much slower (log) the build started first in a pair runs")
    parser.add_argument("--outliers", type=float, default=0.05)
    parser.add_argument("--hidden", type=float, default=0.0,
                        help="share of the pairs of processes in which the change does not show")
    parser.add_argument("--no-confirm", action="store_true")
    parser.add_argument("--rule", default="", help="rule fields, e.g. max_rounds=40,futility_z=1.28")
    parser.add_argument("--json", type=Path)
    add_recorded_arguments(parser)
    args = parser.parse_args(argv)
    rule = parse_rule(args.rule)
    model = {"sigma": args.sigma, "sigma_iterations": args.sigma_iterations, "process_sd": args.process_sd,
             "outliers": args.outliers, "iterations": args.iterations, "confirm": not args.no_confirm,
             "start_order": args.start_order, "hidden": args.hidden}
    shown_model = dict(model)
    if args.rounds_from:
        model["recorded"] = recorded_noise(args.rounds_from, args.noise_scale)
        del shown_model["sigma"], shown_model["sigma_iterations"], shown_model["outliers"]
        shown_model.update(rounds_from=[str(p) for p in args.rounds_from], noise_scale=args.noise_scale,
                           recorded_runs=len(model["recorded"]))
    table = evaluate(rule, args.trials, args.seed, **model)
    print(f"rule: {json.dumps(rule.to_dict())}")
    print(f"model: {json.dumps(shown_model)}; {args.trials} trials per change, seed {args.seed}")
    print("| true change | regression | likely slower | inconclusive | no change | likely faster "
          "| improvement | rounds median (max) | wall vs head-only median (max) |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in table:
        def share(key, row=row):
            return f"{100 * row['outcomes'].get(key, 0) / row['trials']:.1f}%"
        print(f"| {row['change'] * 100:+.0f}% | {share('regression')} | {share('likely slower')} "
              f"| {share('inconclusive')} | {share('no change')} | {share('likely faster')} "
              f"| {share('improvement')} | {row['rounds_median']:g} ({row['rounds_max']}) "
              f"| {row['wall_median']:.2f}x ({row['wall_max']:.2f}x) |")
    if args.json:
        data = {"rule": rule.to_dict(), "model": shown_model, "table": table}
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
