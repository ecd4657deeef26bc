"""Noise-aware statistics over benchmark rounds, in pure Python (no numpy: runs in the light environment).

A case measured in R rounds gives R per-iteration times per framework. Comparing a head run with a
base run, the figure of interest is the ratio of medians head/base; a seeded bootstrap (resample each
side's rounds with replacement, take the ratio of the resampled medians, repeat) gives an interval of
that ratio. A case is a regression only when the whole interval lies above 1 + min_effect: slower
beyond what the rounds' own scatter explains, and by more than a change worth reporting.
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass
from typing import Sequence

REGRESSION = "regression"
IMPROVEMENT = "improvement"
NO_CHANGE = "no change"
NOT_COMPARABLE = "not comparable"
VERDICTS = (REGRESSION, IMPROVEMENT, NO_CHANGE, NOT_COMPARABLE)

DEFAULT_MIN_EFFECT = 0.04
# Without a noise estimate a single pair of figures can only be judged against a plain percentage,
# wider than min_effect because one round on a shared machine easily scatters by several percent.
DEFAULT_SINGLE_ROUND_THRESHOLD = 0.10
DEFAULT_CONFIDENCE = 0.95
DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 0
# Below this many rounds on either side the bootstrap says more about the resampling than the noise.
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


def bootstrap_ratio_interval(
    base: Sequence[float],
    head: Sequence[float],
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
):
    """Percentile bootstrap interval (low, high) of median(head) / median(base); same seed, same answer."""
    if not base or not head:
        raise ValueError("bootstrap needs rounds on both sides")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    rng = random.Random(seed)
    base, head = list(base), list(head)
    n_base, n_head = len(base), len(head)
    ratios = []
    for _ in range(resamples):
        base_median = median(rng.choices(base, k=n_base))
        head_median = median(rng.choices(head, k=n_head))
        ratios.append(head_median / base_median)
    ratios.sort()
    tail = (1 - confidence) / 2
    return quantile(ratios, tail), quantile(ratios, 1 - tail)


@dataclass
class Comparison:
    """The verdict on one framework of one case: head against base."""

    verdict: str
    base_s: float | None = None  # median per-iteration seconds
    head_s: float | None = None
    ratio: float | None = None  # head / base: above 1 is slower
    low: float | None = None  # interval of the ratio; None without a noise estimate
    high: float | None = None
    base_rounds: int = 0
    head_rounds: int = 0
    reason: str | None = None  # why not comparable, or why there is no noise estimate

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
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> Comparison:
    """Judge head against base from their per-iteration times of each round.

    With at least MIN_ROUNDS_FOR_INTERVAL rounds on both sides: regression when the interval's lower
    bound exceeds 1 + min_effect, improvement when its upper bound is below 1 - min_effect, else no
    change. With fewer, the plain ratio is held against single_round_threshold and the verdict says
    there is no noise estimate.
    """
    base, head = [float(x) for x in base], [float(x) for x in head]
    if not base or not head:
        missing = "base" if not base else "head"
        return Comparison(NOT_COMPARABLE, reason=f"no {missing} figure")
    bad = [x for x in base + head if not math.isfinite(x) or x <= 0]
    if bad:
        return Comparison(NOT_COMPARABLE, reason=f"time {bad[0]!r} is not a positive number")
    base_s, head_s = median(base), median(head)
    result = Comparison(
        NO_CHANGE, base_s=base_s, head_s=head_s, ratio=head_s / base_s,
        base_rounds=len(base), head_rounds=len(head),
    )
    if min(len(base), len(head)) < MIN_ROUNDS_FOR_INTERVAL:
        result.reason = f"fewer than {MIN_ROUNDS_FOR_INTERVAL} rounds"
        if result.ratio > 1 + single_round_threshold:
            result.verdict = REGRESSION
        elif result.ratio < 1 - single_round_threshold:
            result.verdict = IMPROVEMENT
        return result
    result.low, result.high = bootstrap_ratio_interval(base, head, confidence, resamples, seed)
    if result.low > 1 + min_effect:
        result.verdict = REGRESSION
    elif result.high < 1 - min_effect:
        result.verdict = IMPROVEMENT
    return result
