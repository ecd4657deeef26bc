"""How well change points are found in main's history: the libraries compared on series with known shifts.

Each trial is a seeded history of RUNS runs of one case, its time per iteration shifting by +5% or +10% at
run SHIFT_AT (or not at all), in one of three models of the noise between runs (see NOISE below and
docs/measurements.md, "Change points in main's history"). For each method and model it prints:

- found: the share of the series with a shift where a change point lies within 2 runs of it;
- false per 100 runs: change points further than 2 runs from any shift, per 100 runs (the series without
  a shift, and those with one);
- with --online, false issues per 100 runs: the series without a shift analysed after each run from the
  12th on, as `speedstats record` does, counting the distinct change points that were ever reported
  (one within 2 runs of an earlier one is the same): what opens a tracking issue for nothing;
- with --delay, for the project's method only: after how many runs past a shift at the end of the
  series it is found (median, 90th percentile, and the share never found within 20 runs).

The methods: `speedstats` (analysis.changepoints: ruptures' penalised kernel detection and Yuen's test
at 99.9%, what the project ships), `ruptures-bic` (the same segmentation without the test, the penalty
only), `e-divisive` (MongoDB's signal-processing-algorithms, E-divisive means with its permutation test,
p < 0.05, 100 permutations) and `otava` (Apache Otava's compute_change_points: E-divisive with a t-test,
window 50, p < 0.001). A method whose library is not installed is skipped with a line saying so. Otava
0.8.0 needs numpy 2.2 and signal-processing-algorithms setuptools<71, neither of which the project's
environment can take (OneFlow 0.9.0 needs numpy 1), so each runs in a venv of its own:

    .venv/bin/python benchmarks/change_points.py --trials 500 --online --delay
    /tmp/otava-venv/bin/python benchmarks/change_points.py --trials 500 --methods otava
    /tmp/spa-venv/bin/python benchmarks/change_points.py --trials 500 --methods e-divisive

The histories are drawn with Python's own generator from --seed, so every venv analyses the same series.
"""
from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

RUNS = 100
SHIFT_AT = 50
NEAR = 2  # a change point within this many runs of the shift finds it
SHIFTS = (0.05, 0.10)
ROUNDS = 10
ONLINE_FROM = 12
DELAY_RUNS = 60  # runs before a shift placed at the end, for --delay
DELAY_MAX = 20


# Per-run noise, log scale. `cpu`: this project's 2-core CPU, from its A/A figures (docs/measurements.md):
# rounds of one build scatter 7.5% / sqrt(2) = 5.3% (the paired ratio's 7.5% is two builds'), 5% of the
# rounds disturbed by a further |N(0, 20%)|, a process offset of sd 1.5%, and, since main's runs are not
# paired with a base in the same job, the machine's own speed from run to run, sd 1% (an assumption);
# a run's figure is the median of its 10 rounds: about 2.9% between runs. `gpu`: a dedicated GPU with its
# clocks held, an assumption said as such: rounds scatter 2%, process and machine 0.5% each, about 1%
# between runs (NVIDIA's nvbench stops a kernel's timing at 0.5% relative standard deviation; a training
# step adds the host's side). `gpu-pool`: that GPU model served by a pool of 4 cards that differ by up to
# 8% (Sinha et al., "Not All GPUs Are Created Equal", SC22: 8% average variation among GPUs of one
# model), each run on one of them at random.
POOL = (-0.04, -0.04 / 3, 0.04 / 3, 0.04)


def _cpu_run(rng, level):
    offset = rng.gauss(0, 0.015) + rng.gauss(0, 0.01)
    rounds = []
    for _ in range(ROUNDS):
        extra = abs(rng.gauss(0, 0.2)) if rng.random() < 0.05 else 0.0
        rounds.append(math.exp(level + offset + rng.gauss(0, 0.053) + extra))
    return rounds


def _gpu_run(rng, level):
    offset = rng.gauss(0, 0.005) + rng.gauss(0, 0.005)
    return [math.exp(level + offset + rng.gauss(0, 0.02)) for _ in range(ROUNDS)]


def _pool_run(rng, level):
    return _gpu_run(rng, level + rng.choice(POOL))


NOISE = {"cpu": _cpu_run, "gpu": _gpu_run, "gpu-pool": _pool_run}


def history(noise, seed, runs=RUNS, shift_at=SHIFT_AT, shift=0.0):
    """(figures, rounds) of one seeded history: each run's median round, and its rounds."""
    rng = random.Random(seed)
    base = math.log(0.1)
    all_rounds = [NOISE[noise](rng, base + (math.log1p(shift) if i >= shift_at else 0.0))
                  for i in range(runs)]
    return [statistics.median(r) for r in all_rounds], all_rounds


# -- the methods: each (figures, rounds) -> the positions of the first run after each change point ----------


def speedstats_method(figures, rounds):
    from speedstats.analysis.changepoints import find_change_points, run_interval

    return [cp.index for cp in find_change_points(figures, [run_interval(r) for r in rounds])]


def ruptures_bic(figures, rounds):
    from speedstats.analysis import changepoints

    logs = [math.log(v) for v in figures]
    return changepoints._candidates(logs, changepoints.noise_scale(logs), changepoints.PENALTY)


def e_divisive(figures, rounds):
    from signal_processing_algorithms.energy_statistics.energy_statistics import e_divisive as search

    return sorted(int(i) for i in search([math.log(v) for v in figures], pvalue=0.05, permutations=100))


def otava(figures, rounds):
    from otava.analysis import compute_change_points

    points, _ = compute_change_points([math.log(v) for v in figures], window_len=50, max_pvalue=0.001)
    return sorted(int(p.index) for p in points)


METHODS = {"speedstats": (speedstats_method, "ruptures"), "ruptures-bic": (ruptures_bic, "ruptures"),
           "e-divisive": (e_divisive, "signal_processing_algorithms"), "otava": (otava, "otava")}


def available(module):
    import importlib.util

    return importlib.util.find_spec(module) is not None


def seed_of(args, noise, shift, trial):
    return args.seed * 1_000_003 + zlib.crc32(f"{noise} {shift:.3f}".encode()) % 10_007 * 1000 + trial


def offline(method, noise, args):
    found, false, seconds = {}, {}, time.perf_counter()
    for shift in (0.0, *SHIFTS):
        hits = wrong = 0
        for trial in range(args.trials):
            figures, rounds = history(noise, seed_of(args, noise, shift, trial), shift=shift)
            points = method(figures, rounds)
            near = [p for p in points if shift and abs(p - SHIFT_AT) <= NEAR]
            hits += bool(near)
            wrong += len(points) - len(near)
        found[shift] = hits / args.trials
        false[shift] = 100 * wrong / (args.trials * RUNS)
    return found, false, time.perf_counter() - seconds


def online(method, noise, args):
    """False issues per 100 runs: a series without a shift analysed after each run."""
    issues = 0
    trials = max(args.trials // 5, 20)
    for trial in range(trials):
        figures, rounds = history(noise, seed_of(args, noise, 0.0, trial))
        reported = []
        for end in range(ONLINE_FROM, RUNS + 1):
            for p in method(figures[:end], rounds[:end]):
                if all(abs(p - q) > NEAR for q in reported):
                    reported.append(p)
        issues += len(reported)
    return 100 * issues / (trials * RUNS)


def delay(method, noise, shift, args):
    """Runs after a shift at the end of the series until a change point within NEAR of it is reported."""
    waits = []
    trials = max(args.trials // 5, 20)
    for trial in range(trials):
        figures, rounds = history(noise, seed_of(args, noise, shift, trial) + 7,
                                  runs=DELAY_RUNS + DELAY_MAX, shift_at=DELAY_RUNS, shift=shift)
        wait = None
        for after in range(1, DELAY_MAX + 1):
            end = DELAY_RUNS + after
            if any(abs(p - DELAY_RUNS) <= NEAR for p in method(figures[:end], rounds[:end])):
                wait = after
                break
        waits.append(wait)
    seen = sorted(w for w in waits if w is not None)
    if not seen:
        return None, None, 1.0
    return statistics.median(seen), seen[min(len(seen) - 1, int(0.9 * len(seen)))], waits.count(None) / trials


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=500, help="histories per shift and noise model")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--methods", default="speedstats,ruptures-bic,e-divisive,otava")
    parser.add_argument("--noise", default="cpu,gpu,gpu-pool")
    parser.add_argument("--online", action="store_true",
                        help="also the false issues of analysing after each run")
    parser.add_argument("--delay", action="store_true", help="also how many runs after a shift it is found")
    args = parser.parse_args(argv)
    print(f"{RUNS} runs, shift at run {SHIFT_AT}, found within {NEAR} runs; {args.trials} histories per "
          f"cell, seed {args.seed}")
    print()
    print("| method | noise | found, +5% | found, +10% | false per 100 runs, no shift | with a +5% shift | "
          + ("false issues per 100 runs, after each run | " if args.online else "") + "seconds |")
    print("| --- | --- | ---: | ---: | ---: | ---: | " + ("---: | " if args.online else "") + "---: |")
    for name in args.methods.split(","):
        method, module = METHODS[name]
        if not available(module):
            print(f"| {name} | (not installed: {module}) |")
            continue
        for noise in args.noise.split(","):
            found, false, seconds = offline(method, noise, args)
            cells = [f"{found[0.05]:.1%}", f"{found[0.10]:.1%}", f"{false[0.0]:.2f}", f"{false[0.05]:.2f}"]
            if args.online:
                cells.append(f"{online(method, noise, args):.2f}")
            print(f"| {name} | {noise} | " + " | ".join(cells) + f" | {seconds:.0f} |", flush=True)
    if args.delay and available("ruptures"):
        print()
        print(f"| noise | shift | runs after it until found: median | 90th percentile | not found in "
              f"{DELAY_MAX} runs |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for noise in args.noise.split(","):
            for shift in SHIFTS:
                mid, p90, missed = delay(speedstats_method, noise, shift, args)
                print(f"| {noise} | +{shift:.0%} | {'-' if mid is None else f'{mid:g}'} | "
                      f"{'-' if p90 is None else f'{p90:g}'} | {missed:.1%} |", flush=True)


if __name__ == "__main__":
    main()
