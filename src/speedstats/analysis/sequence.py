"""The sequence of one case's head-vs-base rounds, and the one question its driver asks: what next?

`Rounds` holds the ratios and takes the rule's looks as they come (more rounds, a fresh pair of
processes, a confirmation, done). `Steps` wraps it with the case's clock: the time budget after the
first look, the case's cap, the room kept for profiled rounds and the profiled rounds themselves live
behind `Steps.next_step()`, which answers with a typed step. The scheduler (bench.schedule) executes
the steps on real workers; benchmarks/simulate_head_vs_base.py executes the same steps on simulated
rounds with a simulated clock, so the published power figures describe the loop that runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from speedstats.analysis import stats
from speedstats.analysis.attribution import MIN_ROUNDS as MIN_PROFILED_ROUNDS
from speedstats.analysis.look import DISAGREE, ROUNDS_BUDGET, TIME_BUDGET, Look, look
from speedstats.analysis.paired import PairedVerdict, judge_paired
from speedstats.analysis.pairs import head_starts_first, log_ratios_per_pair, within_pairs_variance
from speedstats.analysis.rule import DEFAULT_RULE, MAX_PROCESS_PAIRS, SequentialRule

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
        # What starting a fresh pair of processes costs, in rounds' time (Steps measures it); None: not
        # known, and the rounds after a look stay in the processes there are.
        self.pair_start_rounds: float | None = None

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
            if self._next is not None and not self.confirming:
                fresh = self._fresh_pairs_pay(len(self.ratios), self._next)
                if fresh:
                    self._fresh_pairs(len(self.ratios), self._next, fresh)
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

    def _fresh_pairs_pay(self, rounds, following):
        """How many fresh pairs to measure the rounds up to the next look in (0: they stay in the last
        pair): the fewest, of those that buy the estimate the least variance for the same time, each
        fresh pair paying its start out of the rounds (the rounds' scatter pooled within pairs, the
        rule's process_sd between them). More rounds in one process cannot shrink the spread between
        processes; a fresh pair can, at the price of its start."""
        rule, more = self.rule, following - rounds
        if rule.process_sd <= 0 or self.pair_start_rounds is None:
            return 0
        groups = [g for g in log_ratios_per_pair(self.ratios, self.stages) if len(g) >= 2]
        if not groups:
            return 0
        round_var, _ = within_pairs_variance(groups)
        between = rule.process_sd ** 2

        def variance(sizes):
            return 1 / sum(1 / (round_var / n + between) for n in sizes)

        sizes = [len(g) for g in groups]
        best, least = 0, variance(sizes[:-1] + [sizes[-1] + more])
        start = max(0.0, self.pair_start_rounds)
        for fresh in range(1, MAX_PROCESS_PAIRS - len(self.stages) + 1):
            each = (more - fresh * start) / fresh
            if each < rule.pair_rounds:
                break
            tried = variance(sizes + [each] * fresh)
            if tried < least:
                best, least = fresh, tried
        return best

    def _fresh_pairs(self, rounds, following, fresh):
        """The rounds up to the next look measured in `fresh` fresh pairs, sharing them evenly."""
        self.pair_starts += [rounds + (following - rounds) * i // fresh for i in range(1, fresh)]
        self.stages.append(0)
        self.action = NEW_PAIR

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


# What `Steps.next_step()` answers. Each step carries the lines the driver says before executing it.
@dataclass(frozen=True)
class MeasureRound:
    """One timed round of the head and the base (counted from 1), back to back in that round's order;
    with_control: the other contenders (PyTorch) are timed in it too (the planned rounds)."""

    number: int
    with_control: bool
    notes: tuple = ()


@dataclass(frozen=True)
class StartPair:
    """Fresh head and base processes take over (the rule's next pair, or a confirmation's), the
    head's started first or second; pair: counted from 0, the first pair being the one started
    before any step."""

    pair: int
    head_first: bool
    confirming: bool
    notes: tuple = ()


@dataclass(frozen=True)
class EndControl:
    """The first look is taken: the other contenders' processes end (PyTorch is done)."""

    notes: tuple = ()


@dataclass(frozen=True)
class ProfileRound:
    """One profiled round of the head and the base (counted from 0), in the timed rounds' orders."""

    number: int
    notes: tuple = ()


@dataclass(frozen=True)
class Stop:
    """No more rounds: `Steps.sequence.verdict()` is the verdict, `Steps.profiling` what the profiled
    rounds took."""

    reason: str | None
    notes: tuple = ()


Step = MeasureRound | StartPair | EndControl | ProfileRound | Stop
ATTRIBUTE_CHOICES = ("never", "slower", "always")


class Steps:
    """One case's head-vs-base rounds as a sequence of steps: call next_step(), execute it, report what
    it measured (measured(), or failed()), until a Stop.

    planned_rounds: the rounds every contender is timed in (the first look is taken after them).
    attribute, attribute_budget, attribute_rounds: the suite's profiled rounds ("never", "slower" or
    "always"; their share of the case's wall time; the most of them). clock: seconds, monotonic.
    """

    def __init__(self, rule: SequentialRule = DEFAULT_RULE, confirm: bool = True, planned_rounds=None,
                 attribute="never", attribute_budget=0.0, attribute_rounds=0,
                 clock: Callable[[], float] = time.monotonic):
        if attribute not in ATTRIBUTE_CHOICES:
            raise ValueError(f"attribute: must be one of {', '.join(ATTRIBUTE_CHOICES)}, got {attribute!r}")
        self.rule, self.clock = rule, clock
        self.sequence = Rounds(rule, confirm=confirm)
        self.planned_rounds = rule.first_rounds if planned_rounds is None else planned_rounds
        self.attribute, self.attribute_budget = attribute, attribute_budget
        self.attribute_rounds = attribute_rounds
        # After the rounds: the profiled rounds' wall time, the case's before them, and why there were
        # no more ({} when none were asked for).
        self.profiling: dict = {}
        self.began = clock()
        self.pair = 0  # which pair of head and base processes is measuring
        self.first_look_s = None  # the first look's wall time, and its estimate: the time budget after it
        self._first_look_at = self._first_ratio = None
        self._control_ended = False
        self._pair_started = False  # a fresh pair was started and has measured no round yet
        self._last_pair_s = 0.0  # the head's and the base's last timed rounds together
        self._rounds_s = 0.0  # every timed round's head and base seconds together
        self._pair_started_at = None  # when the last fresh pair was asked for (its start is timed)
        self._failed = False
        self._profile = None  # once the rounds stopped: the profiled rounds' plan (done at once: none)

    def measured(self, ratio, work=None, seconds=0.0):
        """The round just executed: head/base, the head's extra main-thread work as a share of the base's
        round (None: not measured), and the head's and the base's seconds together."""
        self._pair_started = False
        self._last_pair_s = seconds
        self._rounds_s += seconds
        if self._pair_started_at is not None and seconds > 0:
            # The pair's start: from the step that asked for it to its first round's end, less the round
            # (in the first look, the control's share of that round counts as start: dearer, never cheaper).
            start_s = self.clock() - self._pair_started_at - seconds
            self.sequence.pair_start_rounds = start_s / (self._rounds_s / (len(self.sequence.ratios) + 1))
            self._pair_started_at = None
        self.sequence.add(ratio, work=work)
        if self._first_look_at is None and len(self.sequence.ratios) >= self.planned_rounds:
            self._first_look_at = self.clock()
            self.first_look_s = self._first_look_at - self.began
            self._first_ratio = self.sequence.looks[-1].ratio if self.sequence.looks else 1.0

    def failed(self, reason=None):
        """The head or the base failed: no more rounds, no profiled ones. During the profiled rounds,
        reason says why they ended (the timed figures stand)."""
        self._failed = True
        if self._profile:
            self.profiling["reason"] = reason
            self.profiling["profiled_s"] = self.clock() - self._profile["began"]
            self._profile["done"] = True

    def next_step(self) -> Step:
        sequence = self.sequence
        if self._first_look_at is not None and not self._control_ended:
            self._control_ended = True
            return EndControl()
        if self._profile is not None:
            return self._next_profiled()
        if not self._failed and sequence.action != DONE:
            if not self._pair_started and self._time_spent():
                sequence.stop_now()
            else:
                return self._next_round()
        if sequence.action != DONE:
            sequence.stop_now()
        return self._stop_rounds(f"head vs base: {len(sequence.ratios)} rounds, stopped ({sequence.stopped})")

    def _next_round(self):
        sequence, rule = self.sequence, self.rule
        done = len(sequence.ratios)
        if sequence.action in (NEW_PAIR, CONFIRM) and not self._pair_started:
            confirming = sequence.action == CONFIRM
            if confirming:
                note = f"head vs base: a regression after {done} rounds: measuring again in fresh processes"
            elif sequence.settling:
                note = (f"head vs base: no change after {done} rounds in {self.pair + 1} pairs of processes, "
                        f"{rule.settling_pairs} needed: one more pair")
            else:
                note = f"head vs base: {done} rounds measured; the next ones in a fresh pair of processes"
            self.pair += 1
            self._pair_started = True
            self._pair_started_at = self.clock()
            return StartPair(self.pair, head_starts_first(self.pair), confirming, (note,))
        with_control = done < self.planned_rounds and not sequence.confirming
        return MeasureRound(done + 1, with_control)

    def _time_spent(self):
        """Whether the time budget after the first look is spent (checked before a fresh pair is started
        too: no pair for no rounds). Pairs started after pairs that disagreed measure all their rounds."""
        if self._first_look_at is None or self.sequence.retelling:
            return False
        return self.clock() - self._first_look_at > self._extra_budget_s()

    def _extra_budget_s(self):
        """The seconds of rounds after the first look (SequentialRule.extra_budget_s), less the room kept
        for profiled rounds: the suite's attribute_budget share of what the cap leaves after the first
        look, and at least the fewest profiled rounds' time. A pair a "no change" needs keeps no room
        unless every case is profiled: with `attribute: slower` a case whose look said no change is
        profiled only if that pair turns its verdict, and then the cap says how few profiled rounds it
        left."""
        settling = self.sequence.settling
        keep = self.attribute == "always" or (self.attribute != "never" and not settling)
        reserve, reserve_s = (self.attribute_budget, self._least_profile_s()) if keep else (0.0, 0.0)
        return self.rule.extra_budget_s(self.first_look_s, self._first_ratio, reserve=reserve,
                                        reserve_s=reserve_s, settling=settling)

    def _least_profile_s(self):
        """What the fewest profiled rounds that compare anything take, with one pair more for the last
        timed round's overrun: from the last pair of timed rounds."""
        return (MIN_PROFILED_ROUNDS + 1) * self._last_pair_s

    def _wants_profile(self):
        """Profiled rounds for this case: `attribute: always`, or with `attribute: slower` a head slower
        than its base (a regression, or likely slower) or one whose main thread works more (hidden
        work: the profile names where)."""
        if self.attribute == "never" or self._failed:
            return False
        return self.attribute == "always" or self._leans_slower()

    def _leans_slower(self):
        """A regression, a head likely slower, or one whose main thread works more beyond the band
        (whatever its step's time showed)."""
        verdict = self.sequence.verdict()
        return (verdict.verdict == stats.REGRESSION or verdict.leaning == "likely slower"
                or verdict.hidden_work is not None or verdict.main_thread is not None)

    def _stop_rounds(self, note):
        """The rounds stopped: up to attribute_rounds profiled rounds of the head and the base follow,
        within attribute_budget of the case's wall time (profiled rounds included) and within the case's
        cap: a pair of rounds is started only while the time spent and one more pair stay within both."""
        if not self._wants_profile():
            self._profile = {"done": True}
            return Stop(self.sequence.stopped, (note,))
        case_s = self.clock() - self.began
        cap_s = None if self.first_look_s is None else self.rule.case_cap_s(self.first_look_s)
        if cap_s is not None and self.sequence.retold:
            # The pairs after a disagreement may have measured past the cap: a slower head is still
            # said where, in the fewest profiled rounds that compare anything.
            cap_s = max(cap_s, case_s + self._least_profile_s())
        share = self.attribute_budget
        budget_s = share / (1 - share) * case_s
        limit = f"the budget of {share:.0%} of the case's wall time ({budget_s:.1f}s)"
        if cap_s is not None and cap_s - case_s < budget_s:
            budget_s = max(0.0, cap_s - case_s)
            limit = f"the case's cap ({cap_s:.1f}s in all) left {budget_s:.1f}s, which"
        self.profiling = {"case_s": case_s, "profiled_s": 0.0, "reason": None}
        # A head that leans slower is always said where: the fewest profiled rounds that compare anything,
        # whatever the cap and the budget leave.
        least = MIN_PROFILED_ROUNDS if self._leans_slower() else 0
        self._profile = {"budget_s": budget_s, "limit": limit, "began": self.clock(), "rounds": 0,
                         "done": False, "pair_s": self._last_pair_s, "least": least}
        return self._next_profiled(notes=(note,))

    def _next_profiled(self, notes=()):
        plan = self._profile
        if plan["done"]:
            return Stop(self.sequence.stopped, notes)
        k = plan["rounds"]
        spent = self.clock() - plan["began"]
        over = spent + (spent / k if k else plan["pair_s"]) > plan["budget_s"]
        if over and plan.get("allowed") is None:
            plan["allowed"] = k
        if k >= self.attribute_rounds or (over and k >= plan["least"]):
            if k < self.attribute_rounds:
                reason = f"{plan['limit']} allowed {plan['allowed']} profiled rounds"
                if plan["allowed"] < k:
                    reason += f"; a head that leans slower gets the fewest that compare anything, {k}"
                self.profiling["reason"] = reason
            self.profiling["profiled_s"] = self.clock() - plan["began"]
            plan["done"] = True
            note = f"head vs base: {k} profiled rounds of each in {self.profiling['profiled_s']:.1f}s"
            return Stop(self.sequence.stopped, notes + (note,))
        plan["rounds"] += 1
        return ProfileRound(k, notes)
