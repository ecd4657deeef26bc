"""Pairs of processes: the rounds of one case are measured in pairs of freshly started head and base
processes, and each pair's own estimate is held against the others'.

The rounds are measured in `process_pairs` pairs of head and base processes, each pair started afresh
(the first look's rounds split evenly between them; later rounds in the last pair): how much of a
change shows can depend on the process (its threads' placement, its allocator's layout), and one pair
alone would put such an effect of any size straight into the verdict. When the pairs disagree, beyond
what their rounds' scatter explains and by more than half the band, and their estimates lie on
different sides of an edge of the band, `disagreement_pairs` more pairs share as many rounds again.
The start order turns from pair to pair, so pairs started in the same order can then be compared:
when they agree, the difference was the start order's (the build started first runs slower on some
machines), and the estimate weighs both orders alike, which cancels it; when they disagree too, the
verdict is inconclusive (stopped "pairs disagree"), never "no change" nor a regression.
"""

from __future__ import annotations

import math
from typing import Sequence

from speedstats.analysis import stats
from speedstats.analysis.rule import DEFAULT_RULE, SequentialRule


def head_starts_first(pair: int) -> bool:
    """Whether the head's process of pair `pair` (counted from 0, a confirmation's pair included) is
    started before the base's: the order turns from pair to pair, so that neither build always starts
    first and a start-order effect cancels in the estimate of pairs in both orders."""
    return pair % 2 == 0


def log_ratios_per_pair(ratios: Sequence[float], stages: Sequence[int]):
    """The log ratios of each pair of processes that measured any (stages: rounds per pair, in order)."""
    groups, start = [], 0
    for count in stages:
        logs = [math.log(r) for r in ratios[start:start + count]]
        if logs:
            groups.append(logs)
        start += count
    return groups


def within_pairs_variance(groups: Sequence[Sequence[float]]):
    """(variance, degrees of freedom) of values around their own group's mean, pooled over the groups (the
    analysis of variance's within mean square): the rounds' scatter with each pair's offset taken out.
    Groups of one value add nothing; None when no group has two."""
    df = sum(len(g) - 1 for g in groups if g)
    if df <= 0:
        return None
    squares = 0.0
    for group in filter(None, groups):
        mean = sum(group) / len(group)
        squares += sum((y - mean) ** 2 for y in group)
    return squares / df, df


def pair_estimates(ratios: Sequence[float], stages: Sequence[int], rule: SequentialRule = DEFAULT_RULE):
    """Each pair of processes' own estimate, {rounds, ratio, low, high} (low and high None below
    MIN_ROUNDS_FOR_INTERVAL rounds), for the rounds each measured (stages: rounds per pair, in order)."""
    out = []
    for logs in log_ratios_per_pair(ratios, stages):
        entry = {"rounds": len(logs), "ratio": math.exp(stats.median(logs)), "low": None, "high": None}
        if len(logs) >= stats.MIN_ROUNDS_FOR_INTERVAL:
            estimate = stats.trimmed_mean(logs, rule.trim)
            low, high = estimate.interval(rule.look_confidence)
            entry.update(ratio=math.exp(estimate.mean), low=math.exp(low), high=math.exp(high))
        out.append(entry)
    return out


def pairs_disagree(ratios: Sequence[float], stages: Sequence[int], rule: SequentialRule = DEFAULT_RULE,
                   same_start_order=False):
    """Whether two of the pairs of processes tell different stories: their changes differ beyond what
    their rounds' scatter explains (Yuen's interval of the difference, at the rule's
    agreement_confidence shared among the comparisons, excludes zero) and by more than half the band,
    and their estimates lie on different sides of an edge of the band (slower, inside, faster). Two
    pairs that both show a slowdown beyond the band, of different sizes, agree that it is one.
    same_start_order: compare only pairs whose builds were started in the same order."""
    groups = [(pair, logs) for pair, logs in enumerate(log_ratios_per_pair(ratios, stages))
              if len(logs) >= stats.MIN_ROUNDS_FOR_INTERVAL]
    compared = [(a, b) for i, (pair_a, a) in enumerate(groups) for pair_b, b in groups[i + 1:]
                if not same_start_order or head_starts_first(pair_a) == head_starts_first(pair_b)]
    if not compared:
        return False
    confidence = 1 - (1 - rule.agreement_confidence) / len(compared)
    margin = math.log(1 + rule.min_effect / 2)
    for first, second in compared:
        sides = {stats.leaning(math.exp(stats.trimmed_mean(group, rule.trim).mean), rule.min_effect)
                 for group in (first, second)}
        if len(sides) == 1:
            continue
        difference = stats.trimmed_difference(first, second, rule.trim)
        low, high = difference.interval(confidence)
        if (low > 0 or high < 0) and abs(difference.mean) > margin:
            return True
    return False


def measured_pairs(stages: Sequence[int]) -> int:
    """The pairs of processes that measured enough rounds for an interval (stages: rounds per pair)."""
    return sum(count >= stats.MIN_ROUNDS_FOR_INTERVAL for count in stages)


def by_start_order(logs: Sequence[float], stages: Sequence[int]):
    """The log ratios of the pairs started head first, and of those started base first."""
    head_first, base_first, start = [], [], 0
    for pair, count in enumerate(stages):
        (head_first if head_starts_first(pair) else base_first).extend(logs[start:start + count])
        start += count
    return head_first, base_first

