"""What a runner's noise lets the head-vs-base rule tell: pure statistics for `speedstats calibrate`.

An A/A run (the same build as head and as base) of a case, measured in `pairs` pairs of freshly started
processes of `rounds` rounds each, gives the log ratios y[j][k] of pair j's round k. They are read as a
one-way random-effects model: y[j][k] = mu + a[j] + e[j][k], a[j] ~ N(0, process_sd), e ~ N(0,
round_sd). `scatter` estimates both by the method of moments (the analysis of variance): round_sd from
the scatter within pairs, process_sd from the pairs' means beyond what their rounds explain, clipped at
0, each with a 95% interval from the chi-square law of its mean square (process_sd's ignores the
uncertainty of round_sd, which rests on many more degrees of freedom).

From such a noise, `resolution` runs the rule's own steps (analysis.sequence.Steps, as the runner and
benchmarks/simulate_head_vs_base.py execute them) on simulated rounds and a simulated clock: the
smallest slowdown the rule calls a regression in `power` of the runs (95%), the wall time it takes, and
the cheapest rule (pairs of processes, rounds per pair, band) that calls a `target` slowdown (5%) a
regression as often. Nothing here reads or writes a file.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, replace
from typing import Sequence

from speedstats.analysis import sequence, stats
from speedstats.analysis.pairs import log_ratios_per_pair, within_pairs_variance
from speedstats.analysis.rule import (
    MAX_PROCESS_PAIRS,
    MAX_PROCESS_SD,
    MAX_ROUNDS,
    PROCESS_SD_DF,
    SequentialRule,
    runner_process_sd,
)

DEFAULT_TARGET = 0.05
DEFAULT_POWER = 0.95
DEFAULT_TRIALS = 200
LARGEST_CHANGE = 1.0  # a case that does not resolve a head twice as slow resolves "more than 100%"
# The rules `resolution` tries for the target: pairs of processes, rounds per pair, and the band as a
# share of the target (a band as wide as the target resolves nothing at the target).
CANDIDATE_PAIRS = (2, 3, 4, 6, 8, 10)
CANDIDATE_PAIR_ROUNDS = (5, 10, 20, 40)
CANDIDATE_BAND_SHARES = (0.8, 0.6, 0.4)
MIN_BAND = 0.005
# Candidates simulated at most, cheapest first, of those whose first look alone comes within
# SCREEN_MARGIN of the power by the normal approximation (the rounds after it add some).
MAX_SIMULATED_RULES = 4
SCREEN_MARGIN = 0.15


@dataclass(frozen=True)
class Scatter:
    """A case's noise on this runner, from an A/A run: sds of log(head/base), with 95% intervals."""

    round_sd: float  # between rounds of one pair of processes
    round_sd_low: float
    round_sd_high: float
    process_sd: float  # between pairs' true means, beyond the rounds' (0 when the rounds explain it all)
    process_sd_low: float
    process_sd_high: float | None  # None: one pair, nothing to bound it
    pairs: int  # the pairs of processes it rests on (process_sd's degrees of freedom: pairs - 1)
    rounds: int  # the rounds it rests on (round_sd's degrees of freedom: rounds - pairs)


def scatter(ratios: Sequence[float], stages: Sequence[int], confidence=0.95) -> Scatter:
    """The round-to-round and process-to-process sds of the log ratios (the module's docstring), from an
    A/A run's head/base per round and its rounds per pair of processes (stages). Needs a pair of at least
    two rounds; pairs of one round count in the pairs' spread only."""
    groups = [g for g in log_ratios_per_pair(ratios, stages) if g]
    if not any(len(g) >= 2 for g in groups):
        raise ValueError("scatter: needs a pair of processes with at least 2 rounds")
    n = sum(len(g) for g in groups)
    k = len(groups)
    means = [sum(g) / len(g) for g in groups]
    msw, within_df = within_pairs_variance(groups)
    tail = (1 - confidence) / 2
    round_sd = math.sqrt(msw)
    round_low = math.sqrt(within_df * msw / stats.chi2_quantile(1 - tail, within_df))
    round_high = math.sqrt(within_df * msw / stats.chi2_quantile(tail, within_df))
    if k < 2:
        return Scatter(round_sd, round_low, round_high, 0.0, 0.0, None, k, n)
    grand = sum(y for g in groups for y in g) / n
    msb = sum(len(g) * (m - grand) ** 2 for g, m in zip(groups, means)) / (k - 1)
    n0 = (n - sum(len(g) ** 2 for g in groups) / n) / (k - 1)  # rounds per pair, for unequal pairs
    process_var = max(0.0, (msb - msw) / n0)

    def bound(q):
        return math.sqrt(max(0.0, ((k - 1) * msb / stats.chi2_quantile(q, k - 1) - msw) / n0))

    return Scatter(round_sd, round_low, round_high, math.sqrt(process_var), bound(1 - tail), bound(tail),
                   k, n)


@dataclass(frozen=True)
class Noise:
    """What the simulation draws a case's rounds from, and what its wall time is made of."""

    round_sd: float  # sd of a round's log(head/base) around its pair's mean
    process_sd: float  # sd of a pair's mean around the true change
    round_s: float  # a round of the head and of the base together
    pair_start_s: float  # a fresh pair of processes starting (both at once), up to its first round


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def simulate(rule: SequentialRule, noise: Noise, change: float, rng: random.Random):
    """One case through the rule's steps, its rounds drawn from `noise` around a head `change` slower
    (0.05: 5%): (the verdict, the case's wall time in seconds). No confirmation, no profiled rounds."""
    clock = _Clock()
    steps = sequence.Steps(rule, confirm=False, clock=clock)
    true = math.log1p(change)
    offset = rng.gauss(0, noise.process_sd)
    clock.now = noise.pair_start_s
    while not isinstance(step := steps.next_step(), sequence.Stop):
        if isinstance(step, sequence.StartPair):
            offset = rng.gauss(0, noise.process_sd)
            clock.now += noise.pair_start_s
        elif isinstance(step, sequence.MeasureRound):
            clock.now += noise.round_s
            steps.measured(math.exp(true + offset + rng.gauss(0, noise.round_sd)), seconds=noise.round_s)
    return steps.sequence.verdict().verdict, clock.now


@dataclass(frozen=True)
class Power:
    """How often the rule called a head `change` slower a regression, and its mean wall time."""

    change: float
    share: float
    wall_s: float
    trials: int


def power(rule: SequentialRule, noise: Noise, change: float, trials=DEFAULT_TRIALS, seed=0) -> Power:
    """The share of `trials` simulated runs (seeded: the same draws for every change and rule) that the
    rule calls a regression, and their mean wall time."""
    rng = random.Random(seed)
    hits, wall = 0, 0.0
    for _ in range(trials):
        verdict, seconds = simulate(rule, noise, change, rng)
        hits += verdict == stats.REGRESSION
        wall += seconds
    return Power(change, hits / trials, wall / trials, trials)


def smallest_resolved(rule: SequentialRule, noise: Noise, power_wanted=DEFAULT_POWER, trials=DEFAULT_TRIALS,
                      seed=0, steps=7) -> Power | None:
    """The smallest slowdown (to within a fifteenth of the interval searched, in log) that the rule calls
    a regression in power_wanted of the runs, by bisection between its band and LARGEST_CHANGE; None when
    even LARGEST_CHANGE is not."""
    found = power(rule, noise, LARGEST_CHANGE, trials, seed)
    if found.share < power_wanted:
        return None
    low, high = math.log1p(rule.min_effect), math.log1p(LARGEST_CHANGE)
    for _ in range(steps):
        middle = (low + high) / 2
        tried = power(rule, noise, math.expm1(middle), trials, seed)
        if tried.share >= power_wanted:
            high, found = middle, tried
        else:
            low = middle
    return found


def candidate_rules(rule: SequentialRule, process_sd: float, target: float):
    """The rules tried for the target: the given one with process_pairs pairs of pair_rounds rounds at the
    first look, as many again at most after it, the band a share of the target, and process_sd as its
    prior (a new pair for every pair_rounds rounds after a straddling look)."""
    bands = sorted({round(target * share, 4) for share in CANDIDATE_BAND_SHARES} | {rule.min_effect})
    for band in (b for b in bands if MIN_BAND <= b < target):
        for pairs in CANDIDATE_PAIRS:
            for pair_rounds in CANDIDATE_PAIR_ROUNDS:
                first = pairs * pair_rounds
                if 2 * first > MAX_ROUNDS:
                    continue
                yield replace(rule, min_effect=band, process_pairs=pairs, first_rounds=first,
                              step_rounds=max(1, first // 2), max_rounds=2 * first, no_change_pairs=pairs,
                              disagreement_pairs=min(rule.disagreement_pairs, MAX_PROCESS_PAIRS - pairs),
                              process_sd=min(process_sd, MAX_PROCESS_SD))


def first_look_s(rule: SequentialRule, noise: Noise):
    """The first look's wall time: its pairs' starts and its rounds."""
    return rule.pairs * noise.pair_start_s + rule.first_rounds * noise.round_s


def approximate_power(rule: SequentialRule, noise: Noise, change: float):
    """The share of runs whose first look calls a head `change` slower a regression, by the normal
    approximation: the estimate scatters as the noise has it, the interval is as wide as the rule's
    prior and the rounds' scatter make it (t quantile at the degrees of freedom the look would have):
    to choose which rules are worth simulating."""
    pairs, rounds = rule.pairs, rule.first_rounds
    scatter = math.sqrt(noise.process_sd ** 2 / pairs + noise.round_sd ** 2 / rounds)
    width = math.sqrt(rule.process_sd ** 2 / pairs + noise.round_sd ** 2 / rounds)
    df = pairs - 1 + PROCESS_SD_DF if rule.process_sd > 0 else rounds - 1
    t = stats.t_quantile(1 - (1 - rule.look_confidence) / 2, df)
    gap = math.log1p(change) - math.log1p(rule.min_effect)
    if scatter == 0:
        return float(gap > t * width)
    return statistics.NormalDist().cdf((gap - t * width) / scatter)


@dataclass(frozen=True)
class TargetRule:
    """The cheapest rule found that calls the target slowdown a regression in `power` of the runs."""

    rule: SequentialRule
    found: Power

    def to_dict(self):
        rule = self.rule
        return {"min_effect": rule.min_effect, "process_pairs": rule.process_pairs,
                "pair_rounds": rule.pair_rounds, "first_rounds": rule.first_rounds,
                "step_rounds": rule.step_rounds, "max_rounds": rule.max_rounds,
                "no_change_pairs": rule.no_change_pairs, "process_sd": rule.process_sd,
                "share": self.found.share, "wall_s": self.found.wall_s}


def rule_for_target(rule: SequentialRule, noise: Noise, target=DEFAULT_TARGET, power_wanted=DEFAULT_POWER,
                    trials=DEFAULT_TRIALS, seed=0) -> TargetRule | None:
    """Of candidate_rules whose first look comes near the power (approximate_power), in the order of
    their first look's wall time, the first that calls a head `target` slower a regression in
    power_wanted of the simulated runs; None when none of those simulated does (at most
    MAX_SIMULATED_RULES are)."""
    screen = power_wanted - SCREEN_MARGIN
    candidates = sorted((c for c in candidate_rules(rule, rule.process_sd, target)
                         if approximate_power(c, noise, target) >= screen),
                        key=lambda c: first_look_s(c, noise))
    for candidate in candidates[:MAX_SIMULATED_RULES]:
        found = power(candidate, noise, target, trials, seed)
        if found.share >= power_wanted:
            return TargetRule(candidate, found)
    return None


@dataclass(frozen=True)
class Resolution:
    """What a case's noise lets the rule tell: the smallest slowdown the given rule resolves (None: not
    even LARGEST_CHANGE) and its wall time, and the cheapest rule found for the target (None: none)."""

    rule: SequentialRule  # the given rule, with the case's process_sd as its prior
    smallest: Power | None
    no_change_wall_s: float  # the rule's mean wall time on an unchanged head
    target: float
    power: float
    target_rule: TargetRule | None


def resolution(rule: SequentialRule, noise: Noise, target=DEFAULT_TARGET, power_wanted=DEFAULT_POWER,
               trials=DEFAULT_TRIALS, seed=0, pairs=MAX_PROCESS_PAIRS) -> Resolution:
    """The smallest change the rule resolves, with noise.process_sd (measured on `pairs` pairs) pooled
    into its prior as `run` takes it (runner_process_sd), its wall time on an unchanged head, and the
    cheapest rule found that resolves `target`."""
    if not 0 < target < 1:
        raise ValueError(f"target: must be between 0 and 1, got {target!r}")
    if not 0.5 <= power_wanted < 1:
        raise ValueError(f"power: must be at least 0.5 and below 1, got {power_wanted!r}")
    rule = replace(rule, process_sd=runner_process_sd(noise.process_sd, pairs))
    smallest = smallest_resolved(rule, noise, power_wanted, trials, seed)
    unchanged = power(rule, noise, 0.0, trials, seed)
    return Resolution(rule, smallest, unchanged.wall_s, target, power_wanted,
                      rule_for_target(rule, noise, target, power_wanted, trials, seed))


def calibration_rule(rule: SequentialRule, pairs: int, pair_rounds: int) -> SequentialRule:
    """The rule an A/A calibration measures a case with: `pairs` pairs of processes of `pair_rounds` rounds
    each, all at the first look, which is the last (no more rounds, no more pairs, no confirmation)."""
    if not 2 <= pairs <= MAX_PROCESS_PAIRS:
        raise ValueError(f"pairs: must be between 2 and {MAX_PROCESS_PAIRS}, got {pairs!r}")
    if not stats.MIN_ROUNDS_FOR_INTERVAL <= pair_rounds <= MAX_ROUNDS // pairs:
        raise ValueError(f"rounds: must be between {stats.MIN_ROUNDS_FOR_INTERVAL} and "
                         f"{MAX_ROUNDS // pairs}, got {pair_rounds!r}")
    first = pairs * pair_rounds
    return replace(rule, process_pairs=pairs, first_rounds=first, step_rounds=first, max_rounds=first,
                   no_change_pairs=pairs, disagreement_pairs=0, confirm_rounds=0, process_sd=0.0)
