import random

import pytest

from speedstats.analysis import stats
from speedstats.analysis.stats import (
    IMPROVEMENT,
    INCONCLUSIVE,
    NO_CHANGE,
    NOT_COMPARABLE,
    REGRESSION,
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
def test_pure_noise_of_5_percent_is_never_a_regression_or_an_improvement(rounds):
    verdicts = run_trials(1.0, rounds)
    assert set(verdicts) <= {NO_CHANGE, INCONCLUSIVE}


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
    assert set(verdicts) <= {NO_CHANGE, INCONCLUSIVE}


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


def test_yuen_interval_brackets_the_ratio_and_narrows_with_confidence():
    base = [0.100, 0.102, 0.098, 0.101, 0.099]
    head = [0.110, 0.113, 0.108, 0.111, 0.109]
    wide = compare_rounds(base, head)
    assert wide.low < wide.ratio < wide.high and 1.05 < wide.low < wide.high < 1.16
    assert wide.ratio == pytest.approx(0.110 / 0.100, rel=2e-3)
    narrow = compare_rounds(base, head, confidence=0.5)
    assert wide.low < narrow.low < narrow.high < wide.high
    assert wide.head_s == pytest.approx(wide.base_s * wide.ratio)  # the columns agree with the change


def test_trimmed_mean_cuts_each_end_and_falls_back_to_the_mean():
    plain = stats.trimmed_mean([1.0, 2.0, 3.0, 4.0, 5.0], trim=0.0)
    assert (plain.mean, plain.df) == (3.0, 4) and plain.se == pytest.approx((2.5 / 5) ** 0.5)
    cut = stats.trimmed_mean([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 100.0], trim=0.1)
    assert cut.cut == 1 and cut.mean == pytest.approx(5.5) and cut.df == 7


def test_interval_verdicts_and_texts():
    base = [0.100, 0.102, 0.098, 0.101, 0.099]
    slower = compare_rounds(base, [x * 1.2 for x in base])
    assert slower.verdict == REGRESSION and slower.text == "regression"
    assert slower.change == pytest.approx(0.2)
    assert slower.low > 1.03 and slower.noise_estimate
    same = compare_rounds(base, list(reversed(base)))
    assert same.verdict == NO_CHANGE and same.ratio == pytest.approx(1.0) and same.low <= 1.0 <= same.high
    # A 1% change is smaller than min_effect and the interval lies inside the band: equivalence shown.
    small = compare_rounds(base, [x * 1.01 for x in base])
    assert small.verdict == NO_CHANGE and small.high < 1.04
    assert small.to_dict()["text"] == "no change"
    # Rounds that scatter too much for the band: neither, and the words say which way it leans.
    noisy = compare_rounds([0.10, 0.13, 0.09, 0.12, 0.10], [0.12, 0.14, 0.10, 0.13, 0.12])
    assert noisy.verdict == INCONCLUSIVE and noisy.low < 1.04 < noisy.ratio
    assert noisy.text == "likely slower, not confirmed"
    flat = compare_rounds([0.10, 0.13, 0.09, 0.12, 0.10], [0.10, 0.13, 0.09, 0.12, 0.10][::-1])
    assert flat.verdict == INCONCLUSIVE and flat.text == "inconclusive"


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


def test_the_mean_of_pairs_counts_their_spread_pooled_with_the_prior():
    same = [[0.0, 0.01, -0.01, 0.005, -0.005]] * 2
    apart = [[0.10, 0.11, 0.09, 0.105, 0.095], [0.0, 0.01, -0.01, 0.005, -0.005]]
    plain = stats.trimmed_mean(same[0] * 2)
    alike = stats.pairs_mean(same, prior_sd=0.0)
    # Pairs that agree, no prior: the rounds' scatter alone (each pair's mean weighed alike).
    assert alike.mean == pytest.approx(0.0, abs=1e-12) and alike.se == pytest.approx(plain.se, rel=0.25)
    # A prior adds its share: sd 0.045 on 2 degrees of freedom, pooled with the 1 of two pairs that
    # agree, over 2 pairs.
    assert stats.pairs_mean(same, prior_sd=0.045).se >= 0.045 * (2 / 3) ** 0.5 / 2 ** 0.5
    # Pairs 10% apart: their spread counts, far beyond the rounds' scatter.
    spread = stats.pairs_mean(apart, prior_sd=0.0)
    assert spread.mean == pytest.approx(0.05) and spread.se > 5 * alike.se
    with pytest.raises(ValueError, match="at least 2 groups"):
        stats.pairs_mean(same[:1], prior_sd=0.01)


def test_the_mean_of_pairs_in_two_start_orders_weighs_the_orders_alike():
    # The build started first 10% slower: pairs 0 and 2 (+10%), 1 and 3 (-10%), one of them longer.
    steady = [0.0, 0.01, -0.01, 0.005, -0.005]
    groups = [[x + 0.1 for x in steady], [x - 0.1 for x in steady], [x + 0.1 for x in steady * 3],
              [x - 0.1 for x in steady]]
    order = [True, False, True, False]
    by_order = stats.pairs_mean(groups, prior_sd=0.02, prior_df=10, strata=order)
    # The orders cancel; within each order the pairs agree, so the spread is the prior's alone.
    assert by_order.mean == pytest.approx(0.0, abs=1e-12)
    assert by_order.se == pytest.approx(stats.pairs_mean([steady] * 2 + [steady * 3, steady], prior_sd=0.02,
                                                         prior_df=10, strata=order).se, rel=1e-9)
    # Without the orders, their difference is spread between pairs: so wide that the pairs weigh all but
    # alike, and a far wider interval.
    mixed = stats.pairs_mean(groups, prior_sd=0.02, prior_df=10)
    assert abs(mixed.mean) < 0.001 and mixed.se > 3 * by_order.se
    with pytest.raises(ValueError, match="one stratum per group"):
        stats.pairs_mean(groups, prior_sd=0.02, strata=order[:3])


def test_the_chi_square_quantiles_are_scipys():
    # scipy.stats.chi2.ppf: (0.025, 1) 0.000982, (0.025, 2) 0.0506, (0.025, 3) 0.2158, (0.025, 9) 2.700,
    # (0.975, 9) 19.023, (0.975, 70) 95.023
    assert stats.chi2_quantile(0.025, 1) == pytest.approx(0.000982, rel=0.001)
    assert stats.chi2_quantile(0.025, 2) == pytest.approx(0.0506, rel=0.001)
    assert stats.chi2_quantile(0.025, 3) == pytest.approx(0.2158, rel=0.001)
    assert stats.chi2_quantile(0.025, 9) == pytest.approx(2.700, rel=0.001)
    assert stats.chi2_quantile(0.975, 9) == pytest.approx(19.023, rel=0.001)
    assert stats.chi2_quantile(0.975, 70) == pytest.approx(95.023, rel=0.001)
