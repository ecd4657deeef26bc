"""Head against base within one run: the ratio head/base of each round, and the verdict on them.

When a baseline build is measured in the same job, every round times the head and the base back to
back (in an order that changes from round to round), so whatever the machine does during the job
moves both figures of a round alike and cancels in their ratio. The figure is the median of the
per-round ratios; a seeded bootstrap of that median gives its interval, and the verdict follows the
rule of `stats.compare_rounds`: a regression only when the whole interval lies above 1 + min_effect.

PyTorch's rounds are the control: the same build all along, so a change between the first and the
second half of its rounds says that the machine moved during the job (the paired ratios still hold).
"""

from __future__ import annotations

import math
import random
from typing import Sequence

from speedstats.analysis import stats

MACHINE_MOVED = "machine moved"
STEADY = "steady"


def bootstrap_median_interval(values, confidence=stats.DEFAULT_CONFIDENCE, resamples=stats.DEFAULT_RESAMPLES,
                              seed=stats.DEFAULT_SEED):
    """Percentile bootstrap interval (low, high) of the median of values; same seed, same answer."""
    rng = random.Random(seed)
    values = list(values)
    medians = sorted(stats.median(rng.choices(values, k=len(values))) for _ in range(resamples))
    tail = (1 - confidence) / 2
    return stats.quantile(medians, tail), stats.quantile(medians, 1 - tail)


def judge_paired(
    head: Sequence[float],
    base: Sequence[float],
    min_effect: float = stats.DEFAULT_MIN_EFFECT,
    single_round_threshold: float = stats.DEFAULT_SINGLE_ROUND_THRESHOLD,
    confidence: float = stats.DEFAULT_CONFIDENCE,
    seed: int = stats.DEFAULT_SEED,
) -> dict:
    """The verdict on head against base from their per-iteration times, round by round.

    Returns plain data for results.json: ratios (head/base of each round), ratio (their median),
    low/high (its interval, None with fewer than MIN_ROUNDS_FOR_INTERVAL rounds), verdict, and the
    rule's parameters.
    """
    pairs = [(float(h), float(b)) for h, b in zip(head, base)]
    out = {"ratios": [], "ratio": None, "low": None, "high": None, "rounds": len(pairs),
           "min_effect": min_effect, "confidence": confidence, "verdict": stats.NOT_COMPARABLE, "reason": None}
    if not pairs:
        out["reason"] = "no round with both head and base"
        return out
    bad = [x for pair in pairs for x in pair if not math.isfinite(x) or x <= 0]
    if bad:
        out["reason"] = f"time {bad[0]!r} is not a positive number"
        return out
    ratios = [h / b for h, b in pairs]
    out["ratios"] = ratios
    out["ratio"] = ratio = stats.median(ratios)
    out["verdict"] = stats.NO_CHANGE
    if len(ratios) < stats.MIN_ROUNDS_FOR_INTERVAL:
        out["reason"] = f"fewer than {stats.MIN_ROUNDS_FOR_INTERVAL} rounds"
        if ratio > 1 + single_round_threshold:
            out["verdict"] = stats.REGRESSION
        elif ratio < 1 - single_round_threshold:
            out["verdict"] = stats.IMPROVEMENT
        return out
    out["low"], out["high"] = bootstrap_median_interval(ratios, confidence, seed=seed)
    if out["low"] > 1 + min_effect:
        out["verdict"] = stats.REGRESSION
    elif out["high"] < 1 - min_effect:
        out["verdict"] = stats.IMPROVEMENT
    return out


def control_drift(rounds: Sequence[float], min_effect: float = stats.DEFAULT_MIN_EFFECT,
                  confidence: float = stats.DEFAULT_CONFIDENCE, seed: int = stats.DEFAULT_SEED) -> dict:
    """How PyTorch's time moved from the first half of its rounds to the second.

    first/last: the medians of the first and the last half of the rounds (the middle one of an odd
    count is in neither); `moved` is True when the change's interval lies wholly beyond min_effect
    either way, None when there are too few rounds to tell (fewer than MIN_ROUNDS_FOR_INTERVAL in a half).
    """
    rounds = [float(x) for x in rounds]
    half = len(rounds) // 2
    first, second = rounds[:half], rounds[len(rounds) - half:]
    out = {"median": stats.median(rounds) if rounds else None, "first": None, "last": None,
           "change": None, "low": None, "high": None, "moved": None}
    if half == 0:
        return out
    comparison = stats.compare_rounds(first, second, min_effect=min_effect, confidence=confidence, seed=seed)
    out.update(first=comparison.base_s, last=comparison.head_s, change=comparison.change)
    if half >= stats.MIN_ROUNDS_FOR_INTERVAL:
        out.update(low=comparison.low, high=comparison.high,
                   moved=comparison.verdict in (stats.REGRESSION, stats.IMPROVEMENT))
    return out
