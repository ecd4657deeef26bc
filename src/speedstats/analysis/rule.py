"""The head-vs-base rule's parameters (the suite's `head_vs_base:` mapping): when the rule looks at the
ratios, how many pairs of processes it asks for, and its budget of rounds and of seconds.

The rule (`SequentialRule`) looks at the ratios after `first_rounds` rounds, then every `step_rounds`
more, up to `max_rounds`. At each look the interval (at `confidence`, 95%) is held against the band
1 +- min_effect (`stats.band_outcome`, analysis.look). docs/methodology.md ("Head against base") says
why this holds its false-alarm rate.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from speedstats.analysis import stats
from speedstats.settings import setting

ESTIMATOR = "trimmed mean of log(head/base) per round, Yuen t interval"

# What a rule may ask for: every look judges all the ratios so far, so the rounds bound the work of
# judging (a thousand rounds a build is hours of measuring and well under a second of judging), and the
# time after the first look is at most a day.
MAX_ROUNDS = 1000
MAX_FUTILITY_Z = 10
MAX_EXTRA_FACTOR = 100
MAX_EXTRA_S = 86400
MAX_PROCESS_PAIRS = 10
MAX_PROCESS_SD = 0.5  # a spread between processes of 50% (log) would leave nothing to measure
# The spread between pairs of processes a runner that has not calibrated is taken to have (sd of a pair's
# true log ratio: on the CPU here the pairs of 40 A/A runs fit 0% to 3%), and the pairs' worth of
# evidence it weighs as against a run's own pairs (docs/measurements.md, "Does the interval cover the
# change?"). A calibration's figure is pooled with it (speedstats.calibration).
DEFAULT_PROCESS_SD = 0.02
PROCESS_SD_DF = 10.0
MAX_RATIO = 1e6  # head/base ratios and their interval (a million times slower is not a benchmark)


def runner_process_sd(measured: float, pairs: int) -> float:
    """The process_sd prior for a runner whose A/A pairs (`pairs` of them) spread by `measured`: pooled
    with the default, which weighs as PROCESS_SD_DF pairs, so that a few pairs that happened to agree
    do not make processes that never differ (at most MAX_PROCESS_SD)."""
    pooled = stats.pooled_variance([(PROCESS_SD_DF, DEFAULT_PROCESS_SD ** 2),
                                    (max(0, pairs - 1), measured ** 2)])
    return min(pooled ** 0.5, MAX_PROCESS_SD)


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
    # The spread between pairs of processes (sd of their log ratios' true means) the interval counts
    # besides the rounds' scatter, as a prior pooled with the pairs' own spread (PROCESS_SD_DF pairs'
    # worth): each pair weighed by the inverse of its variance, so rounds piled into one process never
    # count as if it were the only one. 0: the rounds' scatter alone, as if processes never differed.
    process_sd: float = DEFAULT_PROCESS_SD
    # Rounds after the first look: at most this share of the first look's wall time when its estimate
    # lies inside the band, leaning_extra_factor when it lies beyond (a case that leans slower or faster
    # is the one worth more rounds: on the CPU, at 0.7 a kernel-side +14% was a regression in 6 to 9
    # runs of 10, at 3 in 9 of 10 and in every A/A run the interval covered no change, because the
    # rounds after a look that leaned by chance wash it out; docs/measurements.md), and at most
    # max_extra_s seconds either way.
    extra_factor: float = 0.3
    leaning_extra_factor: float = 3.0
    max_extra_s: float = 600.0
    # The whole case (its workers' starts, its rounds, more pairs, profiled rounds) takes at most this
    # many times its first look's wall time: the extra rounds and the profiled rounds share what is
    # left. Pairs started after pairs that disagreed measure all their rounds, past it if they must.
    case_cap_factor: float = 4.0
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
            ("process_sd", 0 <= self.process_sd <= MAX_PROCESS_SD, f"between 0 and {MAX_PROCESS_SD}"),
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
