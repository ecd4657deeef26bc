"""Noise-aware statistics over benchmark rounds, in pure Python (no numpy: runs in the light environment).

A case measured in R rounds gives R per-iteration times per framework. Times are compared on the log
scale, where a slowdown is a shift: the figure is the ratio head/base of the 10% trimmed means of the
log times (a few disturbed rounds move it little), with Yuen's t interval of that difference (the
trimmed-mean analogue of Welch's interval). Four outcomes, from where the interval lies against the
band 1 +- min_effect: regression (wholly above 1 + min_effect), improvement (wholly below
1 - min_effect), no change (wholly inside the band: an equivalence shown) and inconclusive (neither).
The same words serve the paired head-vs-base rule of `analysis.paired`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Sequence

REGRESSION = "regression"
IMPROVEMENT = "improvement"
NO_CHANGE = "no change"
INCONCLUSIVE = "inconclusive"
NOT_COMPARABLE = "not comparable"
VERDICTS = (REGRESSION, IMPROVEMENT, NO_CHANGE, INCONCLUSIVE, NOT_COMPARABLE)
DEFAULT_TRIM = 0.1  # share of the rounds cut from each end before the mean

DEFAULT_MIN_EFFECT = 0.04
# Without a noise estimate a single pair of figures can only be judged against a plain percentage,
# wider than min_effect because one round on a shared machine easily scatters by several percent.
DEFAULT_SINGLE_ROUND_THRESHOLD = 0.10
DEFAULT_CONFIDENCE = 0.95
DEFAULT_SEED = 0
# Below this many rounds on either side a trimmed mean's standard error says little about the noise.
MIN_ROUNDS_FOR_INTERVAL = 3


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        raise ValueError("median of no values")
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def quantile(ordered: Sequence[float], q: float) -> float:
    """The q-quantile of already sorted values, interpolated linearly (numpy's default method)."""
    if not ordered:
        raise ValueError("quantile of no values")
    position = q * (len(ordered) - 1)
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def _incomplete_beta(a, b, x):
    """The regularized incomplete beta function I_x(a, b), by its continued fraction (modified Lentz)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    if x > (a + 1) / (a + b + 2):  # the fraction converges fast on this side only
        return 1.0 - _incomplete_beta(b, a, 1 - x)
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    fraction = d
    for m in range(1, 500):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            fraction *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return math.exp(log_front) * fraction / a


def t_cdf(t, df):
    """P(T <= t) for Student's t with df degrees of freedom (df may be fractional, as Welch's is)."""
    tail = 0.5 * _incomplete_beta(df / 2, 0.5, df / (df + t * t))
    return 1 - tail if t > 0 else tail


def t_quantile(p, df):
    """The p-quantile of Student's t with df degrees of freedom, by bisection on t_cdf."""
    if not 0 < p < 1 or df <= 0:
        raise ValueError(f"t_quantile needs 0 < p < 1 and df > 0, got p={p}, df={df}")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    high = 1.0
    while t_cdf(high, df) < p:
        high *= 2
    return _inverse(lambda t: t_cdf(t, df), p, 0.0, high)


def chi2_cdf(x, df):
    """P(X <= x) for X chi-square with df degrees of freedom: the regularized lower incomplete gamma
    function P(df / 2, x / 2) by its series."""
    if x <= 0:
        return 0.0
    a, half = df / 2, x / 2
    term = total = 1 / a
    n = 0
    while term > total * 1e-15:
        n += 1
        term *= half / (a + n)
        total += term
    return min(1.0, math.exp(a * math.log(half) - half - math.lgamma(a)) * total)


def chi2_quantile(p, df):
    """The p-quantile of the chi-square law with df degrees of freedom, by bisection on chi2_cdf."""
    if df <= 0 or not 0 < p < 1:
        raise ValueError("chi2_quantile: df must be positive and p between 0 and 1")
    return _inverse(lambda x: chi2_cdf(x, df), p, 0.0, df + 10 * math.sqrt(2 * df) + 20)


def _inverse(cdf, p, low, high):
    """Where the increasing cdf reaches p between low and high, by bisection (to 1e-12 of it, or of 1)."""
    for _ in range(200):
        mid = (low + high) / 2
        if cdf(mid) < p:
            low = mid
        else:
            high = mid
        if high - low < 1e-12 * max(1.0, high):
            break
    return (low + high) / 2


@dataclass
class TrimmedMean:
    """A trimmed mean with Yuen's standard error: mean of what is left after cutting `cut` values from
    each end, se from the winsorized variance, and the t distribution's degrees of freedom."""

    n: int
    cut: int
    mean: float
    se: float
    df: float

    def interval(self, confidence):
        """(low, high) of a two-sided t interval at this confidence."""
        if self.se == 0:
            return self.mean, self.mean
        half = t_quantile(1 - (1 - confidence) / 2, self.df) * self.se
        return self.mean - half, self.mean + half


def trimmed_mean(values: Sequence[float], trim: float = DEFAULT_TRIM) -> TrimmedMean:
    """The trim-trimmed mean of values (trim=0: the plain mean and its t standard error); needs 2 values."""
    ordered = sorted(values)
    n = len(ordered)
    if n < 2:
        raise ValueError("a trimmed mean's standard error needs at least 2 values")
    if not 0 <= trim < 0.5:
        raise ValueError(f"trim must be in [0, 0.5), got {trim}")
    cut = math.floor(trim * n)
    kept = n - 2 * cut
    if kept < 2:
        cut, kept = (n - 2) // 2, n - 2 * ((n - 2) // 2)
    inner = ordered[cut:n - cut]
    winsorized = [ordered[cut]] * cut + inner + [ordered[n - cut - 1]] * cut
    w_mean = sum(winsorized) / n
    w_var = sum((x - w_mean) ** 2 for x in winsorized) / (n - 1)
    se = math.sqrt(max(0.0, (n - 1) * w_var / (kept * (kept - 1))))
    return TrimmedMean(n=n, cut=cut, mean=sum(inner) / kept, se=se, df=kept - 1)


def _welch(a: TrimmedMean, b: TrimmedMean):
    """The se of a.mean - b.mean (or of their sum) and Welch's df."""
    var_a, var_b = a.se ** 2, b.se ** 2
    denominator = (var_a ** 2 / a.df if var_a else 0.0) + (var_b ** 2 / b.df if var_b else 0.0)
    df = (var_a + var_b) ** 2 / denominator if denominator else float(a.df + b.df)
    return math.sqrt(var_a + var_b), df


def trimmed_difference(first: Sequence[float], second: Sequence[float],
                       trim: float = DEFAULT_TRIM) -> TrimmedMean:
    """Yuen's two-sample comparison: trimmed mean of second minus that of first, se and Welch's df."""
    a, b = trimmed_mean(first, trim), trimmed_mean(second, trim)
    se, df = _welch(a, b)
    return TrimmedMean(n=a.n + b.n, cut=a.cut + b.cut, mean=b.mean - a.mean, se=se, df=df)


def midpoint(a: TrimmedMean, b: TrimmedMean) -> TrimmedMean:
    """The mean of two samples' trimmed means, weighing the two alike whatever their sizes (an effect
    of +d in one and -d in the other cancels), with its se and Welch's df."""
    se, df = _welch(a, b)
    return TrimmedMean(n=a.n + b.n, cut=a.cut + b.cut, mean=(a.mean + b.mean) / 2, se=se / 2, df=df)


def pooled_variance(parts: Sequence[tuple[float, float]]) -> float:
    """Variances pooled by their degrees of freedom: parts are (df, variance); 0 when no df at all (a
    prior's variance pooled with what was measured is one of its uses)."""
    total_df = sum(df for df, _ in parts)
    return sum(df * variance for df, variance in parts) / total_df if total_df else 0.0


def pairs_mean(groups: Sequence[Sequence[float]], prior_sd: float, prior_df: float = 2.0,
               trim: float = DEFAULT_TRIM, strata: Sequence[int] | None = None) -> TrimmedMean:
    """The mean of groups of values measured in different processes, with a standard error that counts
    how the groups' true means spread as well as how each group's values scatter (a random effect for
    the group). Each group is weighed by the inverse of its mean's variance, its values' (their
    scatter pooled over the groups) plus the spread's: a group with more values counts more, but never
    as if its process were the only one. The spread, what the groups' means scatter beyond what their
    values explain, is pooled with prior_sd over prior_df degrees of freedom: with two groups it is all
    but unknown. strata: a label per group (the pairs' start orders); the mean is then the average of
    each stratum's, weighing the strata alike (an effect of +d in one and -d in the other cancels),
    and the spread is measured within strata. Degrees of freedom: Welch-Satterthwaite's. Needs 2
    groups of at least 2 values each."""
    means = [trimmed_mean(group, trim) for group in groups]
    k = len(means)
    if k < 2:
        raise ValueError("pairs_mean needs at least 2 groups")
    labels = list(strata) if strata is not None else [0] * k
    if len(labels) != k:
        raise ValueError("pairs_mean: one stratum per group")
    # Yuen's se squared is (n - 1) * winsorized variance / (kept * (kept - 1)): pool the variance.
    factors = [(m.n - 1) / ((m.n - 2 * m.cut) * (m.n - 2 * m.cut - 1)) for m in means]
    pooled = sum(m.se ** 2 / f * (m.n - 1) for m, f in zip(means, factors)) / sum(m.n - 1 for m in means)
    within = [pooled * f for f in factors]
    kinds = sorted(set(labels))
    members = {kind: [i for i in range(k) if labels[i] == kind] for kind in kinds}
    centres = {kind: sum(means[i].mean for i in ids) / len(ids) for kind, ids in members.items()}
    spread_df = k - len(kinds)
    spread = 0.0
    if spread_df > 0:
        squares = sum((means[i].mean - centres[labels[i]]) ** 2 for i in range(k))
        spread = max(0.0, squares / spread_df - sum(within) / k)
    between_df = prior_df + spread_df
    between = pooled_variance([(prior_df, prior_sd ** 2), (spread_df, spread)])
    mean = var_within = var_between = 0.0
    for ids in members.values():
        weights = {i: 1 / (within[i] + between) if within[i] + between > 0 else 1.0 for i in ids}
        total_weight = sum(weights.values())
        share = 1 / len(kinds)  # of the estimate: each stratum's weighted mean counts alike
        mean += share * sum(w * means[i].mean for i, w in weights.items()) / total_weight
        var_within += share ** 2 * sum(w * w * within[i] for i, w in weights.items()) / total_weight ** 2
        var_between += share ** 2 * sum(w * w for w in weights.values()) * between / total_weight ** 2
    total = var_within + var_between
    denominator = var_within ** 2 / sum(m.df for m in means) + (
        var_between ** 2 / between_df if between_df else 0.0)
    df = total ** 2 / denominator if denominator else float(sum(m.df for m in means))
    return TrimmedMean(n=sum(m.n for m in means), cut=sum(m.cut for m in means), mean=mean,
                       se=math.sqrt(total), df=df)


def band_outcome(low: float, high: float, min_effect: float) -> str:
    """Where an interval of a ratio lies against the band 1 +- min_effect: one of the four outcomes."""
    if low > 1 + min_effect:
        return REGRESSION
    if high < 1 - min_effect:
        return IMPROVEMENT
    if low >= 1 - min_effect and high <= 1 + min_effect:
        return NO_CHANGE
    return INCONCLUSIVE


def leaning(ratio: float, min_effect: float) -> str | None:
    """For an inconclusive interval: "likely slower" / "likely faster" when the estimate lies beyond the
    band, None when it lies inside it."""
    if ratio > 1 + min_effect:
        return "likely slower"
    if ratio < 1 - min_effect:
        return "likely faster"
    return None


@dataclass
class Spread:
    """How much the rounds of one framework scatter around their median."""

    n: int
    median: float
    min: float
    max: float
    q1: float
    q3: float
    iqr: float  # q3 - q1
    mad: float  # median absolute deviation from the median

    @property
    def relative_mad(self):
        return self.mad / self.median if self.median else None

    def to_dict(self):
        return asdict(self)


def spread(values: Sequence[float]) -> Spread:
    ordered = sorted(values)
    if not ordered:
        raise ValueError("spread of no values")
    mid = median(ordered)
    q1, q3 = quantile(ordered, 0.25), quantile(ordered, 0.75)
    return Spread(
        n=len(ordered),
        median=mid,
        min=ordered[0],
        max=ordered[-1],
        q1=q1,
        q3=q3,
        iqr=q3 - q1,
        mad=median([abs(x - mid) for x in ordered]),
    )


@dataclass
class Comparison:
    """The verdict on one framework of one case: head against base, as two unpaired samples of rounds."""

    verdict: str
    base_s: float | None = None  # median per-iteration seconds of the base
    head_s: float | None = None  # the base's times the ratio (the head's median without an interval)
    ratio: float | None = None  # head / base: above 1 is slower
    low: float | None = None  # interval of the ratio; None without a noise estimate
    high: float | None = None
    base_rounds: int = 0
    head_rounds: int = 0
    reason: str | None = None  # why not comparable, or why there is no noise estimate
    leaning: str | None = None  # inconclusive only: "likely slower", "likely faster" or None

    @property
    def change(self):
        """Relative change of the time, head against base (+0.15 is 15% slower)."""
        return None if self.ratio is None else self.ratio - 1

    @property
    def noise_estimate(self):
        return self.low is not None

    @property
    def text(self):
        if self.verdict == NOT_COMPARABLE:
            return f"{NOT_COMPARABLE}: {self.reason}" if self.reason else NOT_COMPARABLE
        if not self.noise_estimate:
            return f"{self.verdict} (no noise estimate)"
        if self.verdict == INCONCLUSIVE:
            return f"{self.leaning}, not confirmed" if self.leaning else INCONCLUSIVE
        return self.verdict

    def to_dict(self):
        data = asdict(self)
        data.update(change=self.change, noise_estimate=self.noise_estimate, text=self.text)
        return data


def compare_rounds(
    base: Sequence[float],
    head: Sequence[float],
    min_effect: float = DEFAULT_MIN_EFFECT,
    single_round_threshold: float = DEFAULT_SINGLE_ROUND_THRESHOLD,
    confidence: float = DEFAULT_CONFIDENCE,
    trim: float = DEFAULT_TRIM,
) -> Comparison:
    """Judge head against base from their per-iteration times of each round, as two unpaired samples.

    With at least MIN_ROUNDS_FOR_INTERVAL rounds on both sides: the ratio is exp of the difference of
    the trimmed means of the log times, its interval Yuen's, and the outcome `band_outcome`'s. With
    fewer, the plain ratio of medians is held against single_round_threshold and the verdict says
    there is no noise estimate (regression, improvement or no change: there is no interval to be
    inconclusive about).
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    base, head = [float(x) for x in base], [float(x) for x in head]
    if not base or not head:
        missing = "base" if not base else "head"
        return Comparison(NOT_COMPARABLE, reason=f"no {missing} figure")
    bad = [x for x in base + head if not math.isfinite(x) or x <= 0]
    if bad:
        return Comparison(NOT_COMPARABLE, reason=f"time {bad[0]!r} is not a positive number")
    base_s, head_s = median(base), median(head)
    result = Comparison(NO_CHANGE, base_s=base_s, head_s=head_s, ratio=head_s / base_s,
                        base_rounds=len(base), head_rounds=len(head))
    if min(len(base), len(head)) < MIN_ROUNDS_FOR_INTERVAL:
        result.reason = f"fewer than {MIN_ROUNDS_FOR_INTERVAL} rounds"
        if result.ratio > 1 + single_round_threshold:
            result.verdict = REGRESSION
        elif result.ratio < 1 - single_round_threshold:
            result.verdict = IMPROVEMENT
        return result
    difference = trimmed_difference([math.log(x) for x in base], [math.log(x) for x in head], trim)
    low, high = difference.interval(confidence)
    result.ratio, result.low, result.high = math.exp(difference.mean), math.exp(low), math.exp(high)
    # The columns agree with the change: the head shown is the base times the ratio.
    result.head_s = base_s * result.ratio
    result.verdict = band_outcome(result.low, result.high, min_effect)
    result.leaning = leaning(result.ratio, min_effect) if result.verdict == INCONCLUSIVE else None
    return result
