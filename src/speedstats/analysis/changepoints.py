"""Change points in main's history: the runs after which a case's time per iteration moved and stayed.

The series is one case's figure for one framework on one GPU, run after run, oldest first (runs where the
case failed or was measured on a disturbed machine left out), each run with its interval where its rounds
give one. Three steps, on the log of the times (a slowdown is a shift there):

1. The noise. The scale the shifts are measured against is the largest of: the scatter between runs,
   1.4826 x the median absolute deviation of the differences of neighbouring runs, over sqrt(2) (a shift
   moves one difference only, so it hardly moves this); the runs' own noise, the median half-width of
   their 95% intervals over 1.96 (no shift is finer than what a run resolves); and 0.1%.
2. The candidates: ruptures' penalised kernel change point detection (PELT, a linear kernel: the
   least-squares cost of a change of the mean) on the log times over that scale, with a penalty of
   PENALTY x log(runs) per change point and at least MIN_RUNS runs between two.
3. The test (the merge step of Hunter, Apache Otava's E-divisive with a t-test): each change point's two
   neighbouring segments are compared by Yuen's test of the difference of their 10% trimmed means
   (analysis.stats); the change point of the largest p-value is taken out when that p-value is not below
   1 - SIGNIFICANCE, else the smallest shift when it is under min_change, and its neighbours are compared
   again, until every one left holds.

Each change point found says where (the first run after it), the segments on either side (their runs and
medians) and the shift: exp of the difference of the trimmed means, with its interval at `confidence`.
Why this library and these settings, measured on series with known shifts: docs/methodology.md
("Main's history") and benchmarks/change_points.py. numpy and ruptures are imported inside the functions
that need them, as the trend plots import matplotlib.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Sequence

from speedstats.analysis.stats import (
    DEFAULT_CONFIDENCE,
    median,
    t_cdf,
    t_quantile,
    trimmed_difference,
    trimmed_mean,
)
from speedstats.errors import UserError

PENALTY = 3.0  # per change point, times log(runs), on the log times over the noise scale
MIN_RUNS = 3  # runs on each side of a change point, at least
SIGNIFICANCE = 0.999  # the interval a change point's shift must keep clear of no change
DEFAULT_MIN_CHANGE = 0.02  # a smaller shift is not reported
NOISE_FLOOR = 0.001  # the noise scale is never taken below 0.1%
MAD_TO_SD = 1.4826
Z95 = 1.959964


@dataclass
class Segment:
    start: int  # the first run of the segment, a position in the series
    end: int  # one past its last run
    median_s: float

    @property
    def runs(self):
        return self.end - self.start


@dataclass
class ChangePoint:
    """A shift of the series: `index` is the position of the first run after it."""

    index: int
    before: Segment
    after: Segment
    ratio: float  # after / before: above 1 is slower
    low: float  # the interval of the ratio at `confidence`
    high: float
    confidence: float

    @property
    def change(self):
        return self.ratio - 1

    @property
    def slower(self):
        return self.ratio > 1


_t_quantile = functools.lru_cache(maxsize=256)(t_quantile)  # a run's df is its rounds': few values


def run_interval(rounds_s, confidence=DEFAULT_CONFIDENCE):
    """(low, high) in seconds of a run's time per iteration from its rounds (the trimmed mean of their
    log times, Yuen's interval), or None with fewer than 3 rounds."""
    if len(rounds_s) < 3 or any(not (r > 0) for r in rounds_s):
        return None
    estimate = trimmed_mean([math.log(r) for r in rounds_s])
    half = _t_quantile(1 - (1 - confidence) / 2, estimate.df) * estimate.se
    return math.exp(estimate.mean - half), math.exp(estimate.mean + half)


def noise_scale(logs, intervals=None):
    """The scale of the noise of a series of log times (see the module's docstring, step 1)."""
    differences = [b - a for a, b in zip(logs, logs[1:])]
    between = 0.0
    if len(differences) >= 2:
        centre = median(differences)
        between = MAD_TO_SD * median([abs(d - centre) for d in differences]) / math.sqrt(2)
    halves = [(math.log(high) - math.log(low)) / 2 for low, high in (intervals or []) if low and high]
    within = median(halves) / Z95 if halves else 0.0
    return max(between, within, NOISE_FLOOR)


def _candidates(logs, scale, penalty):
    try:
        import numpy
        import ruptures
    except ImportError:
        raise UserError("ruptures: not installed; change points need it (pip install ruptures==1.1.10, as "
                        "requirements/light.txt pins it)") from None

    signal = numpy.asarray([(x - logs[0]) / scale for x in logs], dtype=float).reshape(-1, 1)
    detector = ruptures.KernelCPD(kernel="linear", min_size=MIN_RUNS, jump=1).fit(signal)
    return [int(b) for b in detector.predict(pen=penalty * math.log(len(logs)))[:-1]]


def _shift(logs, start, index, end, confidence):
    """(ratio, low, high) of the segment [index, end) against [start, index)."""
    difference = trimmed_difference(logs[start:index], logs[index:end])
    low, high = difference.interval(confidence)
    return math.exp(difference.mean), math.exp(low), math.exp(high)


def _test(logs, start, index, end):
    """(p, size) of the change point at index between its neighbours: the two-sided p-value of Yuen's
    test of the segment [index, end) against [start, index), and the shift's size on the log scale."""
    difference = trimmed_difference(logs[start:index], logs[index:end])
    if difference.se == 0:
        return (0.0 if difference.mean else 1.0), abs(difference.mean)
    t = abs(difference.mean) / difference.se
    return 2 * (1 - t_cdf(t, difference.df)), abs(difference.mean)


def _weakest(tests, min_change):
    """The position of the change point to take out, or None when every one holds: the one of the largest
    p-value when that is not below 1 - SIGNIFICANCE, else the smallest shift when it is under
    min_change (Hunter's merge step)."""
    weakest = max(range(len(tests)), key=lambda i: (tests[i][0], -tests[i][1]))
    if tests[weakest][0] >= 1 - SIGNIFICANCE:
        return weakest
    smallest = min(range(len(tests)), key=lambda i: tests[i][1])
    return smallest if math.expm1(tests[smallest][1]) < min_change else None


def find_change_points(values: Sequence[float], intervals=None, *, min_change=DEFAULT_MIN_CHANGE,
                       penalty=PENALTY, confidence=DEFAULT_CONFIDENCE) -> list[ChangePoint]:
    """The change points of a series of times in seconds (oldest first), with each run's (low, high) in
    `intervals` where it has one (None where not). Needs 2 x MIN_RUNS runs; fewer give none."""
    if any(not (v > 0) or math.isinf(v) for v in values):
        raise UserError("change points: every time must be a positive number")
    if len(values) < 2 * MIN_RUNS:
        return []
    logs = [math.log(v) for v in values]
    known = [i for i in (intervals or []) if i is not None]
    points = _candidates(logs, noise_scale(logs, known), penalty)
    while points:
        edges = [0, *points, len(logs)]
        tests = [_test(logs, edges[i - 1], edges[i], edges[i + 1]) for i in range(1, len(edges) - 1)]
        weakest = _weakest(tests, min_change)
        if weakest is None:
            break
        del points[weakest]
    edges = [0, *points, len(logs)]
    found = []
    for i in range(1, len(edges) - 1):
        start, index, end = edges[i - 1], edges[i], edges[i + 1]
        ratio, low, high = _shift(logs, start, index, end, confidence)
        found.append(ChangePoint(
            index=index, ratio=ratio, low=low, high=high, confidence=confidence,
            before=Segment(start, index, median(values[start:index])),
            after=Segment(index, end, median(values[index:end]))))
    return found


@dataclass
class Series:
    """One case's figures for one framework over a history's runs: for each point, the position of its
    run among the entries, its time per iteration and its interval (None without one)."""

    case_id: str
    role: str
    kind: str | None
    positions: list[int]
    values: list[float]
    intervals: list

    def change_points(self, **options):
        return find_change_points(self.values, self.intervals, **options)


def case_series(entries, case_id, role):
    """The Series of a case and framework over history entries (anything with `.results`, as
    history.HistoryEntry): a run counts when the case ran there without an error and without a
    disturbance, and the framework has a figure."""
    positions, values, intervals, kind = [], [], [], None
    for position, entry in enumerate(entries):
        case = next((c for c in entry.results.cases if c.id == case_id), None)
        if case is None or case.error or case.disturbance:
            continue
        fw = case.frameworks.get(role)
        if fw is None or not fw.ok:
            continue
        kind = kind or case.kind
        positions.append(position)
        values.append(fw.per_iter_s)
        intervals.append(run_interval(fw.rounds_s))
    return Series(case_id, role, kind, positions, values, intervals)


def by_machine(entries):
    """History entries grouped by the device and GPU they ran on ({(device, gpu_name): [entries]}, in the
    order each first appears): a time is only compared with times of the same GPU."""
    groups = {}
    for entry in entries:
        groups.setdefault((entry.results.device, entry.results.gpu_name), []).append(entry)
    return groups


def case_ids(entries):
    """The case ids of entries, as first seen."""
    return list(dict.fromkeys(case.id for entry in entries for case in entry.results.cases))


@dataclass
class Shift:
    """A change point of a history: its case, framework (role) and machine, the change point (positions in
    the case's Series) and the history entries of the last run before it and the first run after it."""

    case_id: str
    role: str
    kind: str | None
    device: str
    gpu_name: str
    point: ChangePoint
    last_before: object  # a history entry
    first_after: object
    series: Series

    @property
    def runs_between(self):
        """The entries from the last run before to the first run after, both included (other cases may
        have failed in between)."""
        return self.series.positions[self.point.index] - self.series.positions[self.point.index - 1]


def history_shifts(entries, roles, cases=None, **options):
    """Every Shift of entries of one machine (see by_machine), case by case in order, each case's roles in
    the order given; options go to find_change_points."""
    shifts = []
    for case_id in case_ids(entries):
        if cases is not None and case_id not in cases:
            continue
        for role in roles:
            series = case_series(entries, case_id, role)
            for point in series.change_points(**options):
                newest = entries[-1].results
                shifts.append(Shift(case_id, role, series.kind, newest.device, newest.gpu_name, point,
                                    entries[series.positions[point.index - 1]],
                                    entries[series.positions[point.index]], series))
    return shifts


def segments_ratio(before, after, confidence=DEFAULT_CONFIDENCE):
    """(ratio, low, high): the times `after` against the times `before` (seconds, 2 or more each), as a
    change point's shift is measured: exp of the difference of the trimmed means of the log times, with
    Yuen's interval."""
    logs = [math.log(v) for v in (*before, *after)]
    return _shift(logs, 0, len(before), len(logs), confidence)
