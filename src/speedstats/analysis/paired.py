"""Head against base within one run: the ratio head/base of each round, the sequential rule that says
when enough rounds were measured, and the verdict on them.

When a baseline build is measured in the same job, every round times the head and the base back to
back (in an order that changes from round to round), so whatever the machine does during the job
moves both figures of a round alike and cancels in their ratio. The figure is the 10% trimmed mean
of the log ratios (exp of it is the ratio shown); Yuen's t interval gives its uncertainty.

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

The rule (`SequentialRule`) looks at the ratios after `first_rounds` rounds, then every `step_rounds`
more, up to `max_rounds`. At each look the interval (at `confidence`, 95%) is held against the band
1 +- min_effect (`stats.band_outcome`): regression, improvement or no change stop the rounds (no
change only on `no_change_pairs` pairs of processes, 2 by default: on fewer, one more pair measures
first); an
interval that straddles an edge asks for more rounds, unless neither a regression nor an improvement
can plausibly be shown within the budget (futility), or the budget of rounds or seconds is spent:
then the verdict is inconclusive. A "no change" also needs the head's main thread to work no more
than the band of a step more than the base's (hidden_work: a Python-side cost that queued work hid).
docs/methodology.md ("Head against base") says why this holds its false-alarm rate.

PyTorch's rounds are the control: the same build all along, so a change between the first and the
second half of its rounds, within each pair of head and base processes' stretch, says that the
machine moved during the job (the paired ratios still hold).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Sequence

from speedstats.analysis import stats
from speedstats.settings import setting

ESTIMATOR = "trimmed mean of log(head/base) per round, Yuen t interval"
STEADY = "steady"
UNSTEADY = "unsteady"
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


# What a rule may ask for: every look judges all the ratios so far, so the rounds bound the work of
# judging (a thousand rounds a build is hours of measuring and well under a second of judging), and the
# time after the first look is at most a day.
MAX_ROUNDS = 1000
MAX_FUTILITY_Z = 10
MAX_EXTRA_FACTOR = 100
MAX_EXTRA_S = 86400
MAX_PROCESS_PAIRS = 10
MAX_RATIO = 1e6  # head/base ratios and their interval (a million times slower is not a benchmark)


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
class RuleRecord:
    """The rule recorded with a verdict (SequentialRule.to_dict()): the fields the comment prints are
    checked, the rest is kept as written. Fields absent from older runs are filled in by
    speedstats.results.upgrade."""

    OPEN_RECORD = AS_MAPPING = True
    min_effect: float = setting(minimum=0, maximum=1)
    confidence: float = setting(minimum=0, maximum=1)
    trim: float = setting(minimum=0, maximum=0.5)
    max_rounds: int = setting(minimum=1)
    pairs: int = setting(1, minimum=1, maximum=MAX_PROCESS_PAIRS)
    disagreement_pairs: int = setting(0, minimum=0, maximum=MAX_PROCESS_PAIRS)
    settling_pairs: int | None = setting(None, minimum=1, maximum=MAX_PROCESS_PAIRS)


@dataclass(frozen=True)
class SequentialRule:
    """The head-vs-base rule's parameters (the suite's `head_vs_base:` mapping; defaults documented in
    docs/methodology.md ("Head against base"))."""

    min_effect: float = stats.DEFAULT_MIN_EFFECT  # the band: changes within +-4% are no change
    confidence: float = stats.DEFAULT_CONFIDENCE  # of each look's interval (see edge_error)
    trim: float = stats.DEFAULT_TRIM  # share of the ratios cut from each end
    first_rounds: int = 10  # the first look; the case's `times` iterations are cut into these
    step_rounds: int = 10  # rounds added between two looks
    max_rounds: int = 40  # budget of rounds per build, both measurements together
    # Rounds in fresh processes before a regression is judged again; 0: no restart (the default: on the
    # CPU a restart costs as much as 11 rounds, see docs/methodology.md ("Head against base")).
    confirm_rounds: int = 0
    # Pairs of freshly started head and base processes that share the first look's rounds; a verdict
    # needs them to agree: at agreement_confidence, their changes differ by no more than half the band.
    process_pairs: int = 2
    agreement_confidence: float = 0.99
    # When the first look's pairs disagree, this many more pairs (their start orders turning on), which
    # share as many rounds as the first look had: pairs started in the same order then tell a start-order
    # effect (they agree, and the estimate weighs both orders alike) from processes that differ at
    # random (they disagree too). 0: the first disagreement stands.
    disagreement_pairs: int = 2
    # Pairs of processes a "no change" needs. When a look says no change on fewer, one more pair (its
    # start order turning on) measures one pair's share of the first look, and the look on all the
    # rounds must say it again: a cost that some processes hide is hidden from every pair less often.
    # Two by default, the first look's: a Python-side cost behind OneFlow's queued work, the one such
    # cost measured, shows in the main thread's work in every process (hidden_work), and a third pair
    # cost an unchanged build 0.4 of a head-only run on the CPU. Fewer when the budget of rounds
    # cannot hold the pairs (`settling_pairs`).
    no_change_pairs: int = 2
    futility_z: float = 1.0  # how sure the rule must be that more rounds cannot decide, before stopping
    # Rounds after the first look: at most this share of the first look's wall time when its estimate
    # lies inside the band, leaning_extra_factor when it lies beyond (a case that leans slower or faster
    # is the one worth more rounds), and at most max_extra_s seconds either way.
    extra_factor: float = 0.3
    leaning_extra_factor: float = 0.7
    max_extra_s: float = 600.0
    # The whole case (its workers' starts, its rounds, more pairs, profiled rounds) takes at most this
    # many times its first look's wall time: the extra rounds and the profiled rounds share what is
    # left. Pairs started after pairs that disagreed measure all their rounds, past it if they must.
    case_cap_factor: float = 1.5
    # The plain percentage below 3 rounds (results of old runs).
    single_round_threshold: float = stats.DEFAULT_SINGLE_ROUND_THRESHOLD
    # A head holding more than max(memory_threshold_pct %, memory_threshold_mib MiB) over its base's peak
    # memory is a memory regression: it fails the job ("judge") or is only said ("report").
    memory: str = field(default="judge", metadata={"choices": ("judge", "report")})
    memory_threshold_pct: float = 2.0
    memory_threshold_mib: float = 64.0

    @property
    def looks(self):
        """The numbers of rounds at which the rule may look, in order (the last is max_rounds)."""
        counts = list(range(self.first_rounds, self.max_rounds + 1, self.step_rounds))
        return counts if counts[-1] == self.max_rounds else counts + [self.max_rounds]

    @property
    def look_confidence(self):
        return self.confidence

    @property
    def edge_error(self):
        """Bonferroni's bound on the chance that some look calls a head exactly min_effect slower (the
        band's edge) a regression: each look's one-sided error, times the number of looks (the planned
        ones, and one after each pair started for a "no change")."""
        return (len(self.looks) + self.settling_pairs - self.pairs) * (1 - self.confidence) / 2

    @property
    def pairs(self):
        """The pairs of processes the first look is shared by: process_pairs, fewer when first_rounds
        gives them fewer than MIN_ROUNDS_FOR_INTERVAL rounds each (a short suite keeps working)."""
        return max(1, min(self.process_pairs, self.first_rounds // stats.MIN_ROUNDS_FOR_INTERVAL))

    @property
    def pair_rounds(self):
        """One pair's share of the first look: the rounds of a pair started for a "no change"."""
        return max(stats.MIN_ROUNDS_FOR_INTERVAL, self.first_rounds // self.pairs)

    @property
    def settling_pairs(self):
        """The pairs of processes a "no change" needs: no_change_pairs, fewer when max_rounds cannot
        hold their rounds after the first look, never fewer than the first look's."""
        room = (self.max_rounds - self.first_rounds) // self.pair_rounds
        return max(self.pairs, min(self.no_change_pairs, self.pairs + room))

    @property
    def pair_starts(self):
        """The round counts after which a fresh pair of processes takes over (empty for one pair)."""
        return [self.first_rounds * i // self.pairs for i in range(1, self.pairs)]

    def case_cap_s(self, first_look_s):
        """The most seconds the whole case may take, given its first look's wall time."""
        return self.case_cap_factor * first_look_s

    def extra_budget_s(self, first_look_s, ratio, reserve=0.0, reserve_s=0.0, settling=False):
        """Seconds of rounds after the first look, given its wall time and its estimate, within what
        case_cap_s leaves after the first look less what is kept for profiled rounds: `reserve` of
        it, and at least reserve_s seconds. settling: a pair a "no change" needs is measuring; it may
        use all the room, for without it the verdict cannot be said. Pairs started after pairs that
        disagreed are not held to it (Rounds.retelling): cut short, they could not tell a start
        order from chance; the rounds after them only have what is left."""
        leaning = stats.leaning(ratio, self.min_effect) is not None
        factor = self.leaning_extra_factor if leaning else self.extra_factor
        left = self.case_cap_s(first_look_s) - first_look_s
        room = max(0.0, left - max(reserve * left, reserve_s))
        return min(self.max_extra_s, room if settling else min(factor * first_look_s, room))

    def next_look(self, rounds, at_least=0):
        """The first planned look at or after max(rounds, at_least), or None past the budget."""
        for count in self.looks:
            if count >= max(rounds, at_least):
                return count
        return None

    def to_dict(self):
        return dict(asdict(self), estimator=ESTIMATOR, looks=self.looks, edge_error=self.edge_error,
                    pairs=self.pairs, settling_pairs=self.settling_pairs)

    # Written for the reader of results.json, not read.
    DERIVED_FIELDS = ("estimator", "looks", "edge_error", "pairs", "settling_pairs")

    @classmethod
    def from_dict(cls, data, where="head_vs_base"):
        """A rule from a mapping of some of its fields, read as every mapping of a suite is
        (speedstats.settings, which reads the suite's `head_vs_base:`); a ValueError names the field
        that is wrong."""
        from speedstats.errors import UserError
        from speedstats.settings import read_settings

        try:
            rule = cls(**read_settings(cls, data, where, ignore=cls.DERIVED_FIELDS))
        except UserError as exc:
            raise ValueError(str(exc)) from None
        rule.check(where)
        return rule

    def check(self, where="head_vs_base"):
        problems = [
            ("min_effect", 0 < self.min_effect < 1, "between 0 and 1"),
            ("confidence", 0.5 <= self.confidence < 1, "at least 0.5 and below 1"),
            ("trim", 0 <= self.trim <= 0.25, "between 0 and 0.25"),
            ("first_rounds", stats.MIN_ROUNDS_FOR_INTERVAL <= self.first_rounds <= MAX_ROUNDS,
             f"between {stats.MIN_ROUNDS_FOR_INTERVAL} and {MAX_ROUNDS}"),
            ("step_rounds", 1 <= self.step_rounds <= MAX_ROUNDS, f"between 1 and {MAX_ROUNDS}"),
            ("max_rounds", self.max_rounds >= self.first_rounds, "at least first_rounds"),
            ("max_rounds", self.max_rounds <= MAX_ROUNDS, f"at most {MAX_ROUNDS}"),
            ("confirm_rounds", 0 <= self.confirm_rounds <= MAX_ROUNDS, f"between 0 and {MAX_ROUNDS}"),
            ("agreement_confidence", 0.5 <= self.agreement_confidence < 1, "at least 0.5 and below 1"),
            ("process_pairs", 1 <= self.process_pairs <= MAX_PROCESS_PAIRS,
             f"between 1 and {MAX_PROCESS_PAIRS}"),
            ("disagreement_pairs", 0 <= self.disagreement_pairs <= MAX_PROCESS_PAIRS - self.process_pairs,
             f"between 0 and {MAX_PROCESS_PAIRS} less process_pairs"),
            ("no_change_pairs", 1 <= self.no_change_pairs <= MAX_PROCESS_PAIRS,
             f"between 1 and {MAX_PROCESS_PAIRS}"),
            ("futility_z", 0 <= self.futility_z <= MAX_FUTILITY_Z, f"between 0 and {MAX_FUTILITY_Z}"),
            ("extra_factor", 0 <= self.extra_factor <= MAX_EXTRA_FACTOR, f"between 0 and {MAX_EXTRA_FACTOR}"),
            ("leaning_extra_factor", 0 <= self.leaning_extra_factor <= MAX_EXTRA_FACTOR,
             f"between 0 and {MAX_EXTRA_FACTOR}"),
            ("max_extra_s", 0 <= self.max_extra_s <= MAX_EXTRA_S, f"between 0 and {MAX_EXTRA_S}"),
            ("case_cap_factor", 1 <= self.case_cap_factor <= MAX_EXTRA_FACTOR + 1,
             f"between 1 and {MAX_EXTRA_FACTOR + 1}"),
            ("single_round_threshold", 0 < self.single_round_threshold < 1, "between 0 and 1"),
            ("memory_threshold_pct", self.memory_threshold_pct >= 0, "not negative"),
            ("memory_threshold_mib", self.memory_threshold_mib >= 0, "not negative"),
        ]
        for name, ok, expected in problems:
            if not ok:
                raise ValueError(f"{where}.{name}: must be {expected}, got {getattr(self, name)!r}")
        return self


DEFAULT_RULE = SequentialRule()


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


def head_starts_first(pair: int) -> bool:
    """Whether the head's process of pair `pair` (counted from 0, a confirmation's pair included) is
    started before the base's: the order turns from pair to pair, so that neither build always starts
    first and a start-order effect cancels in the estimate of pairs in both orders."""
    return pair % 2 == 0


def _log_ratios_per_pair(ratios: Sequence[float], stages: Sequence[int]):
    """The log ratios of each pair of processes that measured any (stages: rounds per pair, in order)."""
    groups, start = [], 0
    for count in stages:
        logs = [math.log(r) for r in ratios[start:start + count]]
        if logs:
            groups.append(logs)
        start += count
    return groups


def pair_estimates(ratios: Sequence[float], stages: Sequence[int], rule: SequentialRule = DEFAULT_RULE):
    """Each pair of processes' own estimate, {rounds, ratio, low, high} (low and high None below
    MIN_ROUNDS_FOR_INTERVAL rounds), for the rounds each measured (stages: rounds per pair, in order)."""
    out = []
    for logs in _log_ratios_per_pair(ratios, stages):
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
    groups = [(pair, logs) for pair, logs in enumerate(_log_ratios_per_pair(ratios, stages))
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


def _by_start_order(logs: Sequence[float], stages: Sequence[int]):
    """The log ratios of the pairs started head first, and of those started base first."""
    head_first, base_first, start = [], [], 0
    for pair, count in enumerate(stages):
        (head_first if head_starts_first(pair) else base_first).extend(logs[start:start + count])
        start += count
    return head_first, base_first


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
    orders = _by_start_order(logs, stages) if len(stages) > 2 else ()
    by_order = bool(orders) and min(map(len, orders)) >= 2
    if by_order:
        head_first, base_first = (stats.trimmed_mean(order, rule.trim) for order in orders)
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
    out.confidence = rule.look_confidence
    decided = (SHOWN, DISAGREE, HIDDEN_WORK)
    out.stopped = last.stopped if last.stopped in decided else (stopped or last.stopped or FIXED)
    if out.verdict == stats.INCONCLUSIVE:
        out.leaning = stats.leaning(out.ratio, rule.min_effect)
    return out


@dataclass
class Control:
    """PyTorch's first half of rounds against its last half: did the machine move during the run?"""

    first: float | None = None  # median per-iteration seconds of the first half
    last: float | None = None  # the first half's times the ratio
    ratio: float | None = None  # exp of Yuen's difference of the halves' trimmed log means
    low: float | None = None
    high: float | None = None
    # False when the machine's speed moved beyond what the rounds' scatter explains (the interval at
    # CONTROL_CONFIDENCE excludes no change) and by more than half the band; None: too few rounds.
    steady: bool | None = None
    confidence: float = stats.DEFAULT_CONFIDENCE

    @property
    def text(self):
        if self.steady is None:
            return "too few rounds to tell"
        return STEADY if self.steady else UNSTEADY

    def to_dict(self):
        return dict(asdict(self), text=self.text)


# The confidence at which the control's halves must differ before its row says "unsteady". Higher
# than a look's: the row is a warning judged in every case of every comment (a default comment has
# five), and a quiet CPU's speed wanders in stretches that rounds in a row share, so that its rounds'
# scatter understates how far the halves' means move (docs/measurements.md).
CONTROL_CONFIDENCE = 0.99


def _halves_within_stretches(logs, stages):
    """The first and the last half of each stretch of rounds that one pair of head and base processes
    shared (stages: rounds per pair, in order; the control's rounds are the first ones of them), each
    less its stretch's mean, pooled: the move within the stretches, without the steps between them."""
    first, last, start = [], [], 0
    for count in stages:
        stretch = logs[start:start + count]
        start += count
        half = len(stretch) // 2
        if half:
            mean = sum(stretch) / len(stretch)
            first += [x - mean for x in stretch[:half]]
            last += [x - mean for x in stretch[len(stretch) - half:]]
    return first, last


def control_drift(rounds: Sequence[float], min_effect: float = stats.DEFAULT_MIN_EFFECT,
                  confidence: float = stats.DEFAULT_CONFIDENCE, trim: float = stats.DEFAULT_TRIM,
                  judge_confidence: float = CONTROL_CONFIDENCE, stages: Sequence[int] = ()) -> Control:
    """How PyTorch's time moved from the first half of its rounds to the second (the middle round of an
    odd count is in neither), with its interval at `confidence` (as the comment shows it): unsteady
    when the interval at judge_confidence excludes no change and the change is more than half the band,
    steady otherwise. A handful of rounds scattering as a CPU's do cannot fit an interval inside the
    band, so asking for that would make "steady" a word never said.

    stages: the head's and the base's rounds per pair of processes. With more than one pair among the
    control's rounds, the move is measured within each pair's stretch of rounds and pooled: PyTorch's
    speed can step where one pair of OneFlow processes gives way to the next (on the CPU by -47% to
    +39%), a change the run itself makes and that the paired ratios, each within one pair,
    never see (docs/measurements.md)."""
    rounds = [float(x) for x in rounds]
    half = len(rounds) // 2
    out = Control(confidence=confidence)
    if half == 0:
        return out
    first, second = rounds[:half], rounds[len(rounds) - half:]
    out.first = stats.median(first)
    logs = [math.log(x) for x in rounds]
    stretches = [count for count in _stretches(stages, len(rounds)) if count]
    if len(stretches) > 1:
        first_logs, last_logs = _halves_within_stretches(logs, stretches)
    else:
        first_logs, last_logs = logs[:half], logs[len(logs) - half:]
    if min(len(first_logs), len(last_logs)) < stats.MIN_ROUNDS_FOR_INTERVAL:
        out.ratio = stats.median(second) / out.first
        out.last = out.first * out.ratio
        return out
    difference = stats.trimmed_difference(first_logs, last_logs, trim)
    low, high = difference.interval(confidence)
    out.ratio, out.low, out.high = math.exp(difference.mean), math.exp(low), math.exp(high)
    out.last = out.first * out.ratio
    judged_low, judged_high = (math.exp(x) for x in difference.interval(max(confidence, judge_confidence)))
    moved = (judged_low > 1 or judged_high < 1) and abs(out.ratio - 1) > min_effect / 2
    out.steady = not moved
    return out


def _stretches(stages, total):
    """The stages cut to the first `total` rounds."""
    out, left = [], total
    for count in stages or ():
        out.append(min(count, left))
        left -= out[-1]
    return out


MORE, NEW_PAIR, CONFIRM, DONE = "more", "new pair", "confirm", "done"


class Rounds:
    """Drives the paired rounds of one case: call add() after each round, read `action`:

    - MORE: measure one more round (in the same processes);
    - NEW_PAIR: the rule's next pair of processes takes over: start a fresh head and base and go on;
    - CONFIRM: the rule shows a regression: measure again in fresh processes (a head and a base started
      anew) and go on adding rounds to the same ratios; the regression stands only if the looks on all
      the rounds show it again;
    - DONE: `verdict()` is the verdict.

    Without `confirm` the processes may use the whole budget. stop_now() ends the rounds at the
    next call (the time budget is spent): the rule takes its last look on what there is.
    """

    def __init__(self, rule: SequentialRule = DEFAULT_RULE, confirm: bool = True):
        self.rule, self.confirm = rule, confirm and rule.confirm_rounds > 0
        self.ratios: list[float] = []
        self.work: list[float | None] = []  # each round's extra main-thread work of the head (hidden_work)
        self.pair_starts = list(rule.pair_starts)
        self.retold = False  # more pairs were started after pairs that disagreed (disagreement_pairs)
        self.retelling = False  # those pairs are measuring: the look after them is not yet taken
        self.looks: list[Look] = []
        self.stages = [0]
        self.action = MORE
        self.stopped = None
        self.confirming = False
        self._cap = rule.max_rounds - rule.confirm_rounds if self.confirm else rule.max_rounds
        if self._cap < rule.first_rounds:
            self._cap = rule.max_rounds  # no room to confirm within the budget: the first processes decide
            self.confirm = False
        self._next = rule.first_rounds

    def add(self, ratio: float, work: float | None = None):
        """One round's ratio head/base, and its share of a step that the head's main thread worked more
        than the base's (None: not measured)."""
        if self.action == DONE:
            raise RuntimeError("no more rounds: the rule is done")
        self.ratios.append(float(ratio))
        self.work.append(work)
        self.stages[-1] += 1
        self.action = MORE
        if len(self.ratios) >= self._next:
            self._look(final=self._next_after(len(self.ratios)) is None)
        elif len(self.ratios) in self.pair_starts:
            self.stages.append(0)
            self.action = NEW_PAIR

    @property
    def settling(self):
        """A pair started because the last look said no change on fewer pairs than that needs is
        measuring (its look not yet taken)."""
        return bool(self.looks) and self.looks[-1].short_of_pairs and not self.looks[-1].stop

    @property
    def _rounds_cap(self):
        """The most rounds the processes may measure now: a confirmation may use the whole budget."""
        return self.rule.max_rounds if self.confirming else self._cap

    def _next_after(self, rounds):
        following = self.rule.next_look(rounds + 1)
        return following if following is not None and following <= self._rounds_cap else None

    def _look(self, final, reason=ROUNDS_BUDGET):
        self.retelling = False
        result = look(self.ratios, self.rule, final=final, budget_reason=reason, stages=self.stages,
                      no_change_pairs=self.rule.settling_pairs, work=self.work)
        self.looks.append(result)
        if result.stopped == DISAGREE and self._retell():
            return
        if result.short_of_pairs and not result.stop:
            self._settle()
            return
        if not result.stop:
            self._next = self._next_after(len(self.ratios))
            return
        confirm = self.confirm and not self.confirming and reason != TIME_BUDGET
        if result.verdict == stats.REGRESSION and confirm:
            self.stages.append(0)
            self.confirming = True
            rounds = len(self.ratios)
            self._next = self.rule.next_look(rounds, at_least=rounds + self.rule.confirm_rounds)
            self.action = CONFIRM
            return
        self.action, self.stopped = DONE, result.stopped

    def _retell(self):
        """After pairs that disagree: start rule.disagreement_pairs more, sharing as many rounds as the
        first look had, when the budget of rounds holds them (once; not while confirming)."""
        rule, rounds = self.rule, len(self.ratios)
        if self.retold or self.confirming or not rule.disagreement_pairs:
            return False
        following = rule.next_look(rounds + rule.first_rounds)
        if following is None or following > self._cap:
            return False
        more = rule.disagreement_pairs
        self.pair_starts += [rounds + rule.first_rounds * i // more for i in range(1, more)]
        self.stages.append(0)
        self.retold = self.retelling = True
        self.action, self._next = NEW_PAIR, following
        return True

    def _settle(self):
        """A look inside the band on fewer pairs than a "no change" needs: one more pair of processes
        measures one pair's share of the first look, then the rule looks again; with no room for it in
        the budget of rounds, the verdict stays inconclusive."""
        rounds = len(self.ratios)
        following = rounds + self.rule.pair_rounds
        if following > self._rounds_cap:
            self.action, self.stopped = DONE, ROUNDS_BUDGET
            self.looks[-1].stop, self.looks[-1].stopped = True, ROUNDS_BUDGET
            return
        self.stages.append(0)
        self.action, self._next = NEW_PAIR, following

    def stop_now(self):
        """The time budget is spent: the last look, on the rounds there are."""
        if self.action == DONE:
            return
        if len(self.ratios) < stats.MIN_ROUNDS_FOR_INTERVAL:
            self.action, self.stopped = DONE, TIME_BUDGET
            return
        self._look(final=True, reason=TIME_BUDGET)
        self.action, self.stopped = DONE, self.looks[-1].stopped

    def verdict(self, head=None, base=None) -> PairedVerdict:
        """The verdict on the rounds so far; head and base (per-iteration times) give the ratios when
        known, else the ratios added are used as head times against a base of 1."""
        if head is None or base is None:
            head, base = self.ratios, [1.0] * len(self.ratios)
        stages = [s for s in self.stages if s] or [0]
        return judge_paired(head, base, self.rule, looks=self.looks, stopped=self.stopped, stages=stages,
                            confirmed=self.confirming, work=self.work)
