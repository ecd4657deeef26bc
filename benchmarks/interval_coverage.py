"""How often the head-vs-base interval covers the true change, when processes differ: the verdict's
interval (per-round ratios, Yuen) against a random-effects interval that adds the spread between pairs
of processes, on the simulated runs of benchmarks/simulate_head_vs_base.py (the runner's own steps).

    python benchmarks/interval_coverage.py [--trials 400] [--seed 1] [--process-sd 0.015,0.045]
        [--changes 0,0.115,0.158] [--prior-sd 0.02,0.03,0.045] [--prior-df 2]

The random-effects interval, computed after the run on its ratios and pairs (the rule's decisions are
the verdict's, unchanged): each pair of processes' trimmed mean m_i with its Yuen se_i; the spread
between pairs tau^2 = max(0, var(m_i) - mean(se_i^2)), pooled with a prior sd (--prior-sd, with
--prior-df degrees of freedom); the estimate is the mean of the m_i, its variance
(mean(se_i^2) + tau^2) / k for k pairs, its degrees of freedom Welch-Satterthwaite's. Prints, per
process sd and true change, the share of runs whose interval covers the true change and the share
called a regression (the whole interval beyond +4%), for the verdict's interval and for each prior.
"""

import argparse
import importlib.util
import math
import random
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from speedstats.analysis import stats
from speedstats.analysis.rule import SequentialRule

_spec = importlib.util.spec_from_file_location("simulate_head_vs_base",
                                               ROOT / "benchmarks" / "simulate_head_vs_base.py")
simulation = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(simulation)


def random_effects_interval(ratios, stages, prior_sd, prior_df, confidence=0.95, trim=0.1):
    """(low, high) of the ratio, the spread between pairs of processes counted (see the module)."""
    logs = [math.log(r) for r in ratios]
    groups, start = [], 0
    for count in stages:
        group = logs[start:start + count]
        start += count
        if len(group) >= stats.MIN_ROUNDS_FOR_INTERVAL:
            groups.append(stats.trimmed_mean(group, trim))
    if len(groups) < 2:
        low, high = stats.trimmed_mean(logs, trim).interval(confidence)
        return math.exp(low), math.exp(high)
    k = len(groups)
    means = [g.mean for g in groups]
    within = statistics.fmean(g.se ** 2 for g in groups)
    spread = max(0.0, statistics.variance(means) - within)
    tau2 = (prior_df * prior_sd ** 2 + (k - 1) * spread) / (prior_df + k - 1)
    var_within, var_between = within / k, tau2 / k
    df = (var_within + var_between) ** 2 / (
        var_within ** 2 / sum(g.df for g in groups) + var_between ** 2 / (prior_df + k - 1))
    half = stats.t_quantile(1 - (1 - confidence) / 2, df) * math.sqrt(var_within + var_between)
    estimate = statistics.fmean(means)
    return math.exp(estimate - half), math.exp(estimate + half)


def measure(change, process_sd, priors, prior_df, trials, seed, band=0.04):
    rng = random.Random(seed)
    rule = SequentialRule()
    counts = {"verdict": [0, 0], **{prior: [0, 0] for prior in priors}}
    true = 1 + change
    for _ in range(trials):
        verdict, _rounds, _wall, _ = simulation.simulate(change, rule, rng, sigma=0.075, sigma_iterations=2,
                                                         process_sd=process_sd, outliers=0.05,
                                                         start_order=0.013)
        intervals = {"verdict": (verdict.low, verdict.high)}
        for prior in priors:
            intervals[prior] = random_effects_interval(verdict.ratios, verdict.stages, prior, prior_df)
        for key, (low, high) in intervals.items():
            if low is None:
                continue
            counts[key][0] += low <= true <= high
            counts[key][1] += low > 1 + band
    return {key: (covered / trials, called / trials) for key, (covered, called) in counts.items()}


def floats(text):
    return [float(x) for x in text.split(",") if x]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--process-sd", type=floats, default=[0.015, 0.045])
    parser.add_argument("--changes", type=floats, default=[0.0, 0.115, 0.158])
    parser.add_argument("--prior-sd", type=floats, default=[0.02, 0.03, 0.045])
    parser.add_argument("--prior-df", type=float, default=2.0)
    args = parser.parse_args(argv)
    heads = ["verdict's interval"] + [f"random effects, prior sd {p:g}" for p in args.prior_sd]
    print(f"{args.trials} simulated runs a row, seed {args.seed}, prior df {args.prior_df:g}; each cell: "
          "covers the true change / called a regression")
    print("| process sd | true change | " + " | ".join(heads) + " |")
    print("| ---: | ---: | " + " | ".join("---:" for _ in heads) + " |")
    for process_sd in args.process_sd:
        for change in args.changes:
            row = measure(change, process_sd, args.prior_sd, args.prior_df, args.trials, args.seed)
            cells = [f"{covered:.1%} / {called:.1%}" for covered, called in row.values()]
            print(f"| {process_sd:.1%} | {change:+.1%} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
