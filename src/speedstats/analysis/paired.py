"""Head against base within one run: the verdict on the ratio head/base of each round.

When a baseline build is measured in the same job, every round times the head and the base back to
back (in an order that changes from round to round), so whatever the machine does during the job
moves both figures of a round alike and cancels in their ratio. The figure is the 10% trimmed mean
of the log ratios (exp of it is the ratio shown); Yuen's t interval gives its uncertainty.

The rule is analysis.rule, a look at the ratios analysis.look, the pairs of processes
analysis.pairs, the sequence of rounds that asks for each next step analysis.sequence, and PyTorch's
control analysis.control.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Sequence

from speedstats.analysis import stats
from speedstats.analysis.look import DISAGREE, FIXED, HIDDEN_WORK, SHOWN, TOO_FEW, Look, hidden_work, look
from speedstats.analysis.rule import DEFAULT_RULE, MAX_PROCESS_PAIRS, MAX_RATIO, RuleRecord, SequentialRule
from speedstats.settings import setting


@dataclass
class PairRecord:
    """One pair of processes' own estimate of the change: {rounds, ratio, low, high}."""

    OPEN_RECORD = AS_MAPPING = True
    ratio: float = setting(above=0, maximum=MAX_RATIO)
    rounds: int | None = setting(None, minimum=0)
    low: float | None = setting(None, above=0, maximum=MAX_RATIO)
    high: float | None = setting(None, above=0, maximum=MAX_RATIO)


@dataclass
class HiddenWorkRecord:
    """The head's extra main-thread work that held a "no change" back, as shares of a step."""

    AS_MAPPING = True
    share: float = setting(minimum=-MAX_RATIO, maximum=MAX_RATIO)
    low: float = setting(minimum=-MAX_RATIO, maximum=MAX_RATIO)
    high: float = setting(minimum=-MAX_RATIO, maximum=MAX_RATIO)



@dataclass
class PairedVerdict:
    """The verdict on head against base (results.json's `paired` of a case)."""

    OPEN_RECORD = True  # results of older runs hold fields no longer read
    DERIVED_FIELDS = ("resolvable",)

    verdict: str = setting(choices=stats.VERDICTS)  # REGRESSION, IMPROVEMENT, NO_CHANGE, ...
    # exp of the trimmed mean of the log ratios: above 1 is slower
    ratio: float | None = setting(None, above=0, maximum=MAX_RATIO)
    # its interval at `confidence` (the per-look confidence of the rule)
    low: float | None = setting(None, above=0, maximum=MAX_RATIO)
    high: float | None = setting(None, above=0, maximum=MAX_RATIO)
    # head/base of each round, in order
    ratios: list[float] = setting(factory=list, above=0, maximum=MAX_RATIO)
    rounds: int = setting(0, minimum=0)
    # rounds per pair of processes, in order (a confirmation's pair after the rule's)
    stages: list[int] = setting(factory=list, minimum=0, max_items=MAX_PROCESS_PAIRS + 1)
    looks: list[dict] = setting(factory=list)  # Look.to_dict() of every look, in order
    # each pair's {rounds, ratio, low, high} (2 or more)
    pairs: list[dict] = setting(factory=list, record=PairRecord, max_items=MAX_PROCESS_PAIRS + 1)
    disagree: bool = setting(False)  # the pairs measured different changes: inconclusive, stopped DISAGREE
    # Inside the band, but on fewer pairs of processes than a "no change" needs (rule's settling_pairs):
    # inconclusive, the budget spent before the next pair was measured.
    short_of_pairs: bool = setting(False)
    # Each round's share of a step that the head's main thread worked more than the base's (its CPU
    # time; empty in results of old runs), and, when a look inside the band was held back by it, its
    # estimate {share, low, high} (see hidden_work): inconclusive, stopped HIDDEN_WORK.
    work: list[float | None] = setting(factory=list, minimum=-MAX_RATIO, maximum=MAX_RATIO)
    hidden_work: dict | None = setting(None, record=HiddenWorkRecord)
    # The head's extra main-thread work per round, {share, low, high} as above, whenever its whole
    # interval lies beyond the band, whatever the verdict: a cost that would show where nothing hides
    # it (a GPU's short kernels). None when within the band, not measured, or in results of old runs.
    main_thread: dict | None = setting(None, record=HiddenWorkRecord)
    # With more than two pairs: how much slower the build started first measured (a ratio); the
    # estimate weighs both start orders alike. None with one or two pairs.
    start_order: float | None = setting(None, above=0, maximum=MAX_RATIO)
    # A regression measured again in a fresh pair of processes (confirm_rounds) and shown again; None in
    # results of old runs, where a second stage meant just that.
    confirmed: bool | None = setting(None)
    stopped: str | None = setting(None)  # why the rounds stopped: one of STOP_REASONS
    # inconclusive: "likely slower", "likely faster" or None
    leaning: str | None = setting(None, choices=("likely slower", "likely faster"))
    min_effect: float = setting(stats.DEFAULT_MIN_EFFECT, minimum=0, maximum=1)
    confidence: float | None = setting(None, above=0, maximum=1)
    rule: dict = setting(factory=dict, record=RuleRecord)  # SequentialRule.to_dict()
    reason: str | None = setting(None)  # not comparable: why; fewer than 3 rounds: that

    def check(self, where):
        """A verdict other than "not comparable" has its ratio."""
        if self.ratio is None and self.verdict != stats.NOT_COMPARABLE:
            raise ValueError(f"missing field 'ratio' (required with the verdict {self.verdict!r})")

    @property
    def change(self):
        return None if self.ratio is None else self.ratio - 1

    @property
    def noise_estimate(self):
        return self.low is not None

    @property
    def resolvable(self):
        """The smallest change these rounds could have shown (as a fraction, 0.09): a head that much
        slower, with the interval as wide as this one, has its whole interval beyond the band. None
        without an interval."""
        if self.low is None or self.high is None or self.low <= 0:
            return None
        return (1 + self.min_effect) * math.sqrt(self.high / self.low) - 1

    def to_dict(self):
        return dict(asdict(self), resolvable=self.resolvable)  # resolvable: written for the reader, not read

    @classmethod
    def from_dict(cls, data, where="paired"):
        """From results.json, read as its declaration says (speedstats.settings); results of older runs
        (median of the ratios, bootstrap interval, three outcomes) read as they were recorded, without
        looks or a rule. A UserError names the field that is wrong."""
        from speedstats.settings import read_record

        return read_record(cls, data, where)


def judge_paired(head: Sequence[float], base: Sequence[float], rule: SequentialRule = DEFAULT_RULE,
                 looks: Sequence[Look] = (), stopped: str | None = None,
                 stages: Sequence[int] | None = None, confirmed: bool = False,
                 work: Sequence[float | None] = ()) -> PairedVerdict:
    """The verdict on head against base from their per-iteration times, round by round.

    looks: the looks the runner took while measuring (the last one decides); without them the rounds
    are judged once, as a fixed sample (stopped FIXED). stages: rounds per pair of processes. work:
    each round's extra main-thread work of the head, as a share of a step (hidden_work).
    """
    pairs = [(float(h), float(b)) for h, b in zip(head, base)]
    out = PairedVerdict(stats.NOT_COMPARABLE, rounds=len(pairs), min_effect=rule.min_effect,
                        rule=rule.to_dict(), stages=list(stages) if stages else [len(pairs)],
                        confirmed=confirmed)
    if not pairs:
        out.reason = "no round with both head and base"
        return out
    bad = [x for pair in pairs for x in pair if not math.isfinite(x) or x <= 0]
    if bad:
        out.reason = f"time {bad[0]!r} is not a positive number"
        return out
    out.ratios = [h / b for h, b in pairs]
    measured_work = len(work) == len(pairs) and any(x is not None for x in work)
    out.work = list(work) if measured_work else []
    if len(pairs) < stats.MIN_ROUNDS_FOR_INTERVAL:
        out.ratio = stats.median(out.ratios)
        out.reason, out.stopped = f"fewer than {stats.MIN_ROUNDS_FOR_INTERVAL} rounds", TOO_FEW
        out.verdict = stats.NO_CHANGE
        if out.ratio > 1 + rule.single_round_threshold:
            out.verdict = stats.REGRESSION
        elif out.ratio < 1 - rule.single_round_threshold:
            out.verdict = stats.IMPROVEMENT
        return out
    looks = list(looks)
    if not looks or looks[-1].rounds != len(pairs):
        looks.append(look(out.ratios, rule, final=True, budget_reason=stopped or FIXED, stages=out.stages,
                          work=out.work))
    last = looks[-1]
    out.looks = [x.to_dict() for x in looks]
    out.ratio, out.low, out.high, out.verdict = last.ratio, last.low, last.high, last.verdict
    out.pairs, out.disagree, out.start_order = last.pairs, last.disagree, last.start_order
    out.short_of_pairs, out.hidden_work = last.short_of_pairs, last.hidden_work
    extra = hidden_work(out.work, rule) if out.work else None
    if extra is not None and extra["low"] > rule.min_effect:
        out.main_thread = extra
    out.confidence = rule.look_confidence
    decided = (SHOWN, DISAGREE, HIDDEN_WORK)
    out.stopped = last.stopped if last.stopped in decided else (stopped or last.stopped or FIXED)
    if out.verdict == stats.INCONCLUSIVE:
        out.leaning = stats.leaning(out.ratio, rule.min_effect)
    return out

