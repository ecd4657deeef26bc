"""Bisecting an ordered range of builds for the one that made a case slower: which comparison comes
next, when the search is done, and what it found. Pure: no framework, no file, no process.

The builds are numbered 0 (good) to n - 1 (bad), in the order of their commits. A comparison measures
one build (the head) against an earlier one (the base) with the head-vs-base rule, and is a regression
when a case it follows is one. The search:

1. bad against good first: no regression there, and there is nothing to look for (NOT_SLOWER). The
   cases that regressed are the ones every later comparison measures and judges.
2. With the range (lo, hi), lo not slower and hi slower than lo: the build m halfway is measured
   against lo. A regression moves hi to m (the change lies in lo..m), anything else moves lo to m.
3. When hi follows lo, hi against lo is the change of one build from its predecessor: a regression
   names hi (FOUND); otherwise no single build's change was shown to be a regression, and the change
   is spread over several builds, or a step could not tell (SPREAD).
4. A build found before the last one may not explain the whole change: unless the estimate of the
   change searched for (bad against good, or against the build found before) lies within its interval
   for every case, bad is measured against it, and a regression there starts a new search in the
   builds after it. So two builds that each add half of the change are both found.

`bisect(count, compare, ...)` runs that search over a compare(head, base) function: the CLI's measures
with `speedstats run`, the tests' is a stand-in with the outcomes they choose. The state of a search is
its list of steps; each is kept (speedstats.settings declares them, as results.json's records) so that
a search stopped by its time budget or a signal goes on without measuring any comparison again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from speedstats.analysis import stats
from speedstats.settings import setting

SCHEMA = "speedstats/bisect/v1"
MAX_BUILDS = 4096
MAX_RATIO = 1e6
MAX_STEP_S = 1e7

FOUND = "found"
SPREAD = "spread"
NOT_SLOWER = "not slower"
OUTCOMES = (FOUND, SPREAD, NOT_SLOWER)


@dataclass
class CaseChange:
    """One case of a comparison: the head-vs-base verdict, the change head/base and its interval."""

    OPEN_RECORD = True
    verdict: str = setting(choices=stats.VERDICTS)
    ratio: float | None = setting(None, above=0, maximum=MAX_RATIO)
    low: float | None = setting(None, above=0, maximum=MAX_RATIO)
    high: float | None = setting(None, above=0, maximum=MAX_RATIO)
    text: str = setting("")  # the verdict in words: "regression after 10 rounds"


@dataclass
class Step:
    """One comparison of the search: build `head` measured against build `base`, and each case's change."""

    OPEN_RECORD = True
    head: int = setting(minimum=1, maximum=MAX_BUILDS - 1)
    base: int = setting(minimum=0, maximum=MAX_BUILDS - 2)
    cases: dict[str, CaseChange] = setting(factory=dict, record=CaseChange)
    wall_s: float = setting(0.0, minimum=0, maximum=MAX_STEP_S)  # the comparison's wall time
    results: str | None = setting(None)  # its results.json, relative to the state file's folder
    finished_at: str | None = setting(None)

    def check(self, where):
        if self.base >= self.head:
            raise ValueError(f"field 'base' ({self.base}) must come before 'head' ({self.head})")
        if not self.cases:
            raise ValueError("field 'cases' must name at least one case")

    @property
    def regression(self):
        return any(change.verdict == stats.REGRESSION for change in self.cases.values())


@dataclass
class State:
    """A search in progress or done: what it bisects (the builds, and what measures them) and its steps."""

    schema: str = setting(SCHEMA, choices=(SCHEMA,))
    builds: list[str] = setting(required=True, factory=list, max_items=MAX_BUILDS)
    # What each comparison measured with, which a search going on must share: the suite (a digest of
    # its mapping), the device, the pip arguments.
    measure: dict[str, str] = setting(factory=dict)
    steps: list[Step] = setting(factory=list, record=Step, max_items=4 * MAX_BUILDS)
    # Written for the reader of the file (where the search ended: its outcome and the builds found),
    # not read: the steps say it again.
    DERIVED_FIELDS = ("outcome", "culprits")

    def check(self, where):
        if len(self.builds) < 2:
            raise ValueError("field 'builds' must hold the good and the bad build at least")
        for i, step in enumerate(self.steps):
            if step.head >= len(self.builds):
                raise ValueError(f"steps[{i}]: build {step.head} is not one of the {len(self.builds)} builds")

    @property
    def measured_s(self):
        return sum(step.wall_s for step in self.steps)


@dataclass(frozen=True)
class Comparison:
    """The next comparison to measure: build `head` against build `base`."""

    head: int
    base: int


@dataclass
class Conclusion:
    """Where a search ended. culprits: the builds whose change from their predecessor is a regression,
    in order; spread: (lo, hi) when the change from lo to hi is in no single build; FOUND with a spread
    range: a build found, and the rest of the change after it spread."""

    outcome: str
    culprits: list[int] = field(default_factory=list)
    spread: tuple[int, int] | None = None  # (a, b): b is slower than a, and no build between alone


def _outcomes(steps):
    """{(head, base): whether it was a regression}, the latest step for a pair measured twice."""
    return {(step.head, step.base): step.regression for step in steps}


def _by_pair(steps):
    return {(step.head, step.base): step for step in steps}


def explains(culprit, whole):
    """Whether the culprit's change (a Step) accounts for the whole change (bad against good, a Step):
    for every case of the whole, its estimate lies within the culprit's interval."""
    for case_id, change in whole.cases.items():
        mine = culprit.cases.get(case_id)
        if mine is None or None in (mine.low, mine.high, change.ratio):
            return False
        if not mine.low <= change.ratio <= mine.high:
            return False
    return True


def next_action(count, steps):
    """The next Comparison to measure, or the Conclusion, given the steps measured so far (any order)."""
    if count < 2:
        raise ValueError(f"a bisection needs at least 2 builds, got {count}")
    outcomes, by_pair = _outcomes(steps), _by_pair(steps)
    bad, good = count - 1, 0
    if (bad, good) not in outcomes:
        return Comparison(bad, good)
    if not outcomes[(bad, good)]:
        return Conclusion(NOT_SLOWER)
    # hi is slower than `slower_than` (a step showed it), and lo not slower than it (nor than good).
    lo, hi, slower_than, culprits = good, bad, good, []
    while True:
        if hi - lo == 1:
            if (hi, lo) not in outcomes:
                return Comparison(hi, lo)
            if not outcomes[(hi, lo)]:  # no build of slower_than..hi alone shown to be a regression
                return Conclusion(FOUND if culprits else SPREAD, culprits, (slower_than, hi))
            culprits.append(hi)
            # The change this search was after: bad against good, or against the build found before.
            searched = by_pair[(bad, culprits[-2] if len(culprits) > 1 else good)]
            if hi == bad or explains(by_pair[(hi, lo)], searched):
                return Conclusion(FOUND, culprits)
            if (bad, hi) not in outcomes:
                return Comparison(bad, hi)
            if not outcomes[(bad, hi)]:
                return Conclusion(FOUND, culprits)
            lo, hi, slower_than = hi, bad, hi
            continue
        middle = (lo + hi) // 2
        if (middle, lo) not in outcomes:
            return Comparison(middle, lo)
        if outcomes[(middle, lo)]:
            hi, slower_than = middle, lo
        else:
            lo = middle


class Stopped(Exception):
    """The search stopped before its conclusion (its time budget): `comparison` would have been next."""

    def __init__(self, comparison):
        super().__init__(comparison)
        self.comparison = comparison


def bisect(count, compare, steps=(), may_start=None, on_step=None):
    """Run the search: (Conclusion, steps). compare(head, base) measures a comparison and returns its
    Step; may_start(comparison, steps) says whether there is time for it (else Stopped is raised);
    on_step(steps) is called after each step (the CLI writes its state file there). The steps given
    are not measured again."""
    steps = list(steps)
    while True:
        action = next_action(count, steps)
        if isinstance(action, Conclusion):
            return action, steps
        if may_start is not None and not may_start(action, steps):
            raise Stopped(action)
        step = compare(action.head, action.base)
        if (step.head, step.base) != (action.head, action.base):
            raise ValueError(f"compare({action.head}, {action.base}) measured {step.head} against "
                             f"{step.base}")
        steps.append(step)
        if on_step is not None:
            on_step(steps)


def within_budget(elapsed_s, budget_s, past_steps_s):
    """Whether one more comparison fits in the budget: the longest comparison so far added to the time
    already spent. With none measured yet there is nothing to judge by, and the first one starts."""
    if budget_s is None or not past_steps_s:
        return True
    return elapsed_s + max(past_steps_s) <= budget_s


def comparisons_of_neighbours(count):
    """How many comparisons measuring every build against its predecessor takes: what a search saves."""
    return count - 1


def change_text(change):
    """A case's change as the report prints it: +12.3% (+10.1% to +14.6%)."""
    if change.ratio is None:
        return "no figure"
    text = f"{(change.ratio - 1) * 100:+.1f}%"
    if change.low is not None and change.high is not None:
        text += f" ({(change.low - 1) * 100:+.1f}% to {(change.high - 1) * 100:+.1f}%)"
    return text


def step_changes(step):
    """Each case's change of a step on one line: "resnet50-bs2 +12.3% (+10.1% to +14.6%)"."""
    return "; ".join(f"{case_id} {change_text(change)}" for case_id, change in step.cases.items())


# -- the report ------------------------------------------------------------------------------------------


@dataclass
class Report:
    """What a search found so far, for the printed report and the comment: the builds (their specs, in
    order), the steps, and the conclusion, or the comparison that would have been next when it stopped."""

    builds: list[str]
    steps: list[Step]
    conclusion: Conclusion | None = None
    stopped: Comparison | None = None
    budget_s: float | None = None
    failed: str | None = None  # why a comparison ended without a verdict, when one did

    @property
    def count(self):
        return len(self.builds)

    @property
    def whole(self):
        """Bad against good, the first step, once measured."""
        return next((s for s in self.steps if (s.head, s.base) == (self.count - 1, 0)), None)

    def step_of(self, head, base):
        return next((s for s in self.steps if (s.head, s.base) == (head, base)), None)

    @property
    def named_builds(self):
        """The builds the report names: good, bad, and each build a step measured, in order."""
        named = {0, self.count - 1} | {s.head for s in self.steps} | {s.base for s in self.steps}
        return sorted(named)


def number(index):
    """A build as the report names it: #1 is good."""
    return f"#{index + 1}"


def role(index, count):
    return "good" if index == 0 else "bad" if index == count - 1 else ""


def duration_text(seconds):
    """1h02m, 3m05s, 42s."""
    seconds = round(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def count_text(n, word):
    return f"{n} {word}" + ("" if n == 1 else "s")


def _and(items):
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def verdict_words(step):
    """A step's cases' verdicts: "resnet50-bs2 no change +0.3% (-1.2% to +1.9%)"."""
    return "; ".join(f"{case_id} {change.verdict} {change_text(change)}"
                     for case_id, change in step.cases.items())


def conclusion_lines(report):
    """The report's first sentences, plain text: what the search found, or why it stopped."""
    count, conclusion, lines = report.count, report.conclusion, []
    if conclusion is not None and conclusion.outcome == NOT_SLOWER:
        unsure = any(c.verdict == stats.INCONCLUSIVE for c in report.whole.cases.values())
        lines.append(f"Bad ({number(count - 1)}) is not shown slower than good (#1): "
                     f"{verdict_words(report.whole)}. Nothing to bisect"
                     + ("; more rounds (the suite's head_vs_base: max_rounds) or a quieter machine may tell."
                        if unsure else "."))
    elif conclusion is not None:
        culprits = conclusion.culprits
        if len(culprits) == 1:
            step = report.step_of(culprits[0], culprits[0] - 1)
            lines.append(f"{number(culprits[0])} is the first build slower than the one before it "
                         f"({number(culprits[0] - 1)}): {step_changes(step)}.")
        elif culprits:
            parts = [f"{number(c)} {step_changes(report.step_of(c, c - 1))}" for c in culprits]
            lines.append(f"{_and(number(c) for c in culprits)} each made it slower than the build before: "
                         + "; ".join(parts) + ".")
        if conclusion.spread is not None:
            start, end = conclusion.spread
            what = ("The rest of the change" if culprits
                    else "No single build is slower than the one before it: the change")
            lines.append(f"{what}, from {number(start)} to {number(end)}, is spread over several builds "
                         "between them, or a comparison could not tell; each step's change is below.")
        if report.whole is not None:
            lines.append(f"Bad against good: {step_changes(report.whole)}.")
    elif report.failed is not None:
        lines.append(f"Not finished: {report.failed}.")
    elif report.stopped is not None:
        budget = f" ({duration_text(report.budget_s)})" if report.budget_s is not None else ""
        lines.append(f"Not finished: the time budget{budget} ran out after "
                     f"{count_text(len(report.steps), 'comparison')}; next would be "
                     f"{number(report.stopped.head)} against {number(report.stopped.base)}. The same command "
                     "goes on from where it stopped.")
    measured = sum(s.wall_s for s in report.steps)
    lines.append(f"{count_text(len(report.steps), 'comparison')} of {count} builds, "
                 f"{duration_text(measured)} of measuring; each build against the one before it would be "
                 f"{comparisons_of_neighbours(count)}.")
    return lines


def report_rows(report):
    """One row per case of each step: (step, head, base, case, change, verdict text)."""
    return [(i + 1, number(step.head), number(step.base), case_id, change_text(change),
             change.text or change.verdict)
            for i, step in enumerate(report.steps) for case_id, change in step.cases.items()]


def report_text(report):
    """The report as `speedstats bisect` prints it."""
    lines = conclusion_lines(report)
    rows = [("step", "build", "against", "case", "change (95% interval)", "verdict")]
    rows += [tuple(str(cell) for cell in row) for row in report_rows(report)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    table = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1]
             for row in rows]
    builds = [f"{number(i)}{' (' + role(i, report.count) + ')' if role(i, report.count) else ''}: "
              f"{report.builds[i]}" for i in report.named_builds]
    return "\n".join(lines + ([""] + table if report.steps else []) + ["", "Builds:"] + builds) + "\n"
