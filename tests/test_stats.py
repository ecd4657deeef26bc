import random

import pytest

from speedstats.analysis import stats
from speedstats.analysis.stats import (
    IMPROVEMENT,
    NO_CHANGE,
    NOT_COMPARABLE,
    REGRESSION,
    bootstrap_ratio_interval,
    compare_rounds,
    median,
    quantile,
    spread,
)

TRIALS = 100
TRUE_TIME_S = 0.120


class NoisyTimer:
    """A synthetic timing source: each round reads the true time times (1 + uniform noise of ±amplitude)."""

    def __init__(self, true_s, amplitude, rng, outlier_rate=0.0, outlier_factor=1.0):
        self.true_s = true_s
        self.amplitude = amplitude
        self.rng = rng
        self.outlier_rate = outlier_rate
        self.outlier_factor = outlier_factor

    def rounds(self, count):
        times = []
        for _ in range(count):
            value = self.true_s * (1 + self.rng.uniform(-self.amplitude, self.amplitude))
            if self.rng.random() < self.outlier_rate:  # a neighbour on the shared machine
                value *= self.outlier_factor
            times.append(value)
        return times


def run_trials(slowdown, rounds, **timer_options):
    """Verdicts of TRIALS seeded base/head comparisons where head is `slowdown` times the base."""
    verdicts = []
    for trial in range(TRIALS):
        rng = random.Random(20240 + trial)
        base = NoisyTimer(TRUE_TIME_S, 0.05, rng, **timer_options).rounds(rounds)
        head = NoisyTimer(TRUE_TIME_S * slowdown, 0.05, rng, **timer_options).rounds(rounds)
        verdicts.append(compare_rounds(base, head).verdict)
    return verdicts


@pytest.mark.parametrize("rounds", [5, 7, 10])
def test_pure_noise_of_5_percent_never_flips_the_verdict(rounds):
    verdicts = run_trials(1.0, rounds)
    assert verdicts == [NO_CHANGE] * TRIALS


@pytest.mark.parametrize("rounds", [5, 7, 10])
def test_a_real_15_percent_slowdown_is_flagged_in_at_least_95_of_100(rounds):
    verdicts = run_trials(1.15, rounds)
    assert verdicts.count(REGRESSION) >= 95
    assert IMPROVEMENT not in verdicts


def test_a_real_15_percent_speedup_is_an_improvement():
    verdicts = run_trials(1 / 1.15, 5)
    assert verdicts.count(IMPROVEMENT) >= 95
    assert REGRESSION not in verdicts


def test_occasional_outlier_rounds_do_not_flip_the_verdict():
    verdicts = run_trials(1.0, 7, outlier_rate=0.1, outlier_factor=1.3)
    assert verdicts == [NO_CHANGE] * TRIALS


def test_median_quantile_and_spread():
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert quantile([1.0, 2.0, 3.0, 4.0, 5.0], 0.25) == 2.0
    assert quantile([10.0, 20.0], 0.5) == 15.0
    s = spread([1.0, 2.0, 3.0, 4.0, 10.0])
    assert (s.n, s.median, s.min, s.max, s.q1, s.q3, s.iqr, s.mad) == (5, 3.0, 1.0, 10.0, 2.0, 4.0, 2.0, 1.0)
    assert s.relative_mad == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="^median of no values$"):
        median([])


def test_bootstrap_interval_is_seeded_and_brackets_the_ratio():
    base = [0.100, 0.102, 0.098, 0.101, 0.099]
    head = [0.110, 0.113, 0.108, 0.111, 0.109]
    first = bootstrap_ratio_interval(base, head, seed=7)
    assert bootstrap_ratio_interval(base, head, seed=7) == first
    low, high = first
    assert low <= median(head) / median(base) <= high
    assert 1.05 < low < high < 1.16
    narrow = bootstrap_ratio_interval(base, head, confidence=0.5, seed=7)
    assert low <= narrow[0] <= narrow[1] <= high


def test_interval_verdicts_and_texts():
    base = [0.100, 0.102, 0.098, 0.101, 0.099]
    slower = compare_rounds(base, [x * 1.2 for x in base])
    assert slower.verdict == REGRESSION and slower.text == "regression"
    assert slower.change == pytest.approx(0.2)
    assert slower.low > 1.03 and slower.noise_estimate
    same = compare_rounds(base, list(reversed(base)))
    assert same.verdict == NO_CHANGE and same.ratio == 1.0 and same.low <= 1.0 <= same.high
    # A 2% change is real here but smaller than min_effect: not worth a mark.
    small = compare_rounds(base, [x * 1.02 for x in base])
    assert small.verdict == NO_CHANGE
    assert small.to_dict()["text"] == "no change"


def test_single_round_falls_back_to_a_plain_percentage_rule():
    slower = compare_rounds([0.100], [0.115])
    assert slower.verdict == REGRESSION
    assert slower.text == "regression (no noise estimate)"
    assert slower.low is None and slower.reason == "fewer than 3 rounds"
    assert compare_rounds([0.100], [0.105]).text == "no change (no noise estimate)"
    assert compare_rounds([0.100, 0.101], [0.085, 0.086]).text == "improvement (no noise estimate)"
    assert compare_rounds([0.100], [0.105], single_round_threshold=0.04).verdict == REGRESSION
    assert stats.MIN_ROUNDS_FOR_INTERVAL == 3


def test_missing_or_broken_figures_are_not_comparable():
    missing = compare_rounds([], [0.1])
    assert missing.verdict == NOT_COMPARABLE and missing.text == "not comparable: no base figure"
    assert compare_rounds([0.1], [0.0]).text == "not comparable: time 0.0 is not a positive number"
    assert compare_rounds([0.1], [float("nan")]).verdict == NOT_COMPARABLE
