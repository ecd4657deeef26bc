"""One look of the rule at the ratios head/base so far: their interval against the band, and whether the
rounds stop and why.

At each look the interval (at `confidence`, 95%) is held against the band 1 +- min_effect
(`stats.band_outcome`): regression, improvement or no change stop the rounds (no change only on
`no_change_pairs` pairs of processes, 2 by default: on fewer, one more pair measures first); an
interval that straddles an edge asks for more rounds, unless neither a regression nor an improvement
can plausibly be shown within the budget (futility), or the budget of rounds or seconds is spent:
then the verdict is inconclusive. A "no change" also needs the head's main thread to work no more
than the band of a step more than the base's (hidden_work: a Python-side cost that queued work hid).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from speedstats.analysis import stats
from speedstats.analysis.pairs import (
    by_start_order,
    head_starts_first,
    log_ratios_per_pair,
    measured_pairs,
    pair_estimates,
    pairs_disagree,
)
from speedstats.analysis.rule import DEFAULT_RULE, PROCESS_SD_DF, SequentialRule

# Why the rounds stopped (PairedVerdict.stopped).
SHOWN = "shown"  # the interval left the straddle: regression, improvement or no change
FUTILE = "futile"  # neither a regression nor an improvement could be shown within the budget
ROUNDS_BUDGET = "rounds budget"
TIME_BUDGET = "time budget"
FIXED = "fixed"  # judged once on the rounds there were (no sequential rounds: compare, interleave off)
TOO_FEW = "too few rounds"
DISAGREE = "pairs disagree"  # the pairs of processes measured different changes
# As fast, but the head's main thread worked more than the band of a step more: a cost that queued work
# hid here (see hidden_work)
HIDDEN_WORK = "hidden work"
STOP_REASONS = (SHOWN, FUTILE, ROUNDS_BUDGET, TIME_BUDGET, FIXED, TOO_FEW, DISAGREE, HIDDEN_WORK)


@dataclass
class Look:
    """One look at the ratios: the interval at the per-look confidence, its outcome, and whether to stop."""

    rounds: int
    ratio: float
    low: float
    high: float
    verdict: str
    stop: bool
    stopped: str | None = None  # one of STOP_REASONS when stop
    pairs: list = field(default_factory=list)  # each pair of processes' {rounds, ratio, low, high}
    disagree: bool = False
    # With more than two pairs: how much slower the build started first measured (a ratio), which the
    # estimate cancels by weighing both start orders alike.
    start_order: float | None = None
    # The interval lies inside the band, but on fewer pairs of processes than a "no change" needs: the
    # verdict is inconclusive, and a driver with room starts one more pair (Rounds).
    short_of_pairs: bool = False
    # The interval lies inside the band, but the head's main thread may work more than the band of a
    # step more than the base's (hidden_work's {share, low, high}): inconclusive, stopped HIDDEN_WORK.
    hidden_work: dict | None = None

    def to_dict(self):
        return {"rounds": self.rounds, "ratio": self.ratio, "low": self.low, "high": self.high,
                "verdict": self.verdict}



def hidden_work(work: Sequence[float | None], rule: SequentialRule = DEFAULT_RULE):
    """How much more the head's main thread worked than the base's, per round: {share, low, high}, the
    trimmed mean of each round's (head's main-thread CPU seconds - base's) / base's round seconds and its
    interval at the rule's look confidence; None when a round has no figure or there are too few.

    A cost in the framework's Python code runs on the main thread; OneFlow runs ops asynchronously, so
    on a machine where the queued work outlasts it, the step takes no longer, and whether it does can
    differ from process to process (on the CPU here one pair of processes showed a 70 ms busy wait
    as +12% and the next as 0%: docs/measurements.md). The main thread's CPU time shows it in every
    process: it is at most the round's wall time, so work beyond the band of a step is a cost that
    would show wherever nothing hides it."""
    if len(work) < stats.MIN_ROUNDS_FOR_INTERVAL or any(x is None or not math.isfinite(x) for x in work):
        return None
    estimate = stats.trimmed_mean([float(x) for x in work], rule.trim)
    low, high = estimate.interval(rule.look_confidence)
    return {"share": estimate.mean, "low": low, "high": high}


def look(ratios: Sequence[float], rule: SequentialRule = DEFAULT_RULE, final=False,
         budget_reason=ROUNDS_BUDGET, stages: Sequence[int] = (), no_change_pairs=1,
         work: Sequence[float | None] = ()) -> Look:
    """The rule's look at these per-round ratios (at least MIN_ROUNDS_FOR_INTERVAL, all positive).

    final: no more rounds can follow (the budget is spent: budget_reason says which). stages: rounds
    per pair of processes; pairs that disagree make the look inconclusive and stop the rounds.
    no_change_pairs: the pairs, of MIN_ROUNDS_FOR_INTERVAL rounds or more, that a "no change" needs
    (the sequential rounds ask for rule.settling_pairs; rounds judged once, for 1). work: each round's
    share of a step that the head's main thread worked more than the base's (hidden_work); a "no
    change" needs its interval to end within the band, and stops inconclusive (HIDDEN_WORK) otherwise.
    """
    logs = [math.log(r) for r in ratios]
    stages = [count for count in stages if count]
    # With more than two pairs, some started in the same order: differences between pairs of the same
    # order are the processes', and one between the orders is the start order's, which the estimate
    # cancels by weighing both orders alike.
    orders = by_start_order(logs, stages) if len(stages) > 2 else ()
    by_order = bool(orders) and min(map(len, orders)) >= 2
    if by_order:
        head_first, base_first = (stats.trimmed_mean(order, rule.trim) for order in orders)
    # With the rule's process_sd, the interval counts how pairs of processes spread too: a random effect
    # for the pair, its spread pooled with that prior, each start order weighed alike when it counts.
    # Without it (or with one pair), the rounds' scatter alone.
    groups = [(pair, group) for pair, group in enumerate(log_ratios_per_pair(ratios, stages))
              if len(group) >= 2]
    if rule.process_sd > 0 and len(groups) >= 2:
        strata = [head_starts_first(pair) for pair, _ in groups] if by_order else None
        estimate = stats.pairs_mean([group for _, group in groups], rule.process_sd, PROCESS_SD_DF,
                                    rule.trim, strata=strata)
    elif by_order:
        estimate = stats.midpoint(head_first, base_first)
    else:
        estimate = stats.trimmed_mean(logs, rule.trim)
    low, high = estimate.interval(rule.look_confidence)
    result = Look(rounds=len(logs), ratio=math.exp(estimate.mean), low=math.exp(low), high=math.exp(high),
                  verdict=stats.INCONCLUSIVE, stop=False)
    result.verdict = stats.band_outcome(result.low, result.high, rule.min_effect)
    if result.verdict == stats.NO_CHANGE:
        extra = hidden_work(work, rule) if work else None
        if extra is not None and extra["high"] > rule.min_effect:
            result.verdict, result.hidden_work = stats.INCONCLUSIVE, extra
        elif (measured_pairs(stages) or 1) < no_change_pairs:
            result.verdict, result.short_of_pairs = stats.INCONCLUSIVE, True
    if by_order:
        result.start_order = math.exp((head_first.mean - base_first.mean) / 2)
    if len(stages) > 1:
        result.pairs = pair_estimates(ratios, stages, rule)
        result.disagree = pairs_disagree(ratios, stages, rule, same_start_order=by_order)
    if result.disagree:
        result.verdict, result.stop, result.stopped = stats.INCONCLUSIVE, True, DISAGREE
        result.hidden_work = None
    elif result.verdict != stats.INCONCLUSIVE:
        result.stop, result.stopped = True, SHOWN
    elif result.hidden_work is not None:
        result.stop, result.stopped = True, HIDDEN_WORK
    elif final:
        result.stop, result.stopped = True, budget_reason
    elif result.short_of_pairs:
        pass  # not futile: one more pair may say no change
    elif _futile(estimate, rule):
        result.stop, result.stopped = True, FUTILE
    return result


def _futile(estimate, rule):
    """Neither edge of the band can plausibly be cleared by the budget: even the estimate moved
    futility_z standard errors towards an edge lies short of what the last look, on max_rounds
    rounds with the same scatter, would need to clear it."""
    n = estimate.n
    final_se = estimate.se * math.sqrt(n / rule.max_rounds)
    final_df = max(1, rule.max_rounds - 2 * math.floor(rule.trim * rule.max_rounds) - 1)
    reach = stats.t_quantile(1 - (1 - rule.look_confidence) / 2, final_df) * final_se
    up_edge, down_edge = math.log(1 + rule.min_effect) + reach, math.log(1 - rule.min_effect) - reach
    slack = rule.futility_z * estimate.se
    return estimate.mean + slack < up_edge and estimate.mean - slack > down_edge

