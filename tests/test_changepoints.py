"""Change points in a series of runs (analysis/changepoints.py): where a shift is and how large, none where
there is none, a shift and its undoing both found, a shift smaller than the runs resolve or one run off left
alone, and the series of a history (failed and disturbed runs left out)."""

import math
import random

import pytest

from histories import CASE, commit_of, history_runs
from speedstats.analysis.changepoints import (
    DEFAULT_MIN_CHANGE,
    case_series,
    find_change_points,
    noise_scale,
    run_interval,
)
from speedstats.errors import UserError
from speedstats.results import CaseResult


class Entry:
    def __init__(self, results):
        self.results = results


def series(count, seed=3, scatter=0.01, shifts=()):
    """count times around 40 ms, off by N(0, scatter) on the log scale, times 1 + s from each (run, s)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        level = sum(math.log1p(s) for at, s in shifts if i >= at)
        out.append(0.040 * math.exp(level + rng.gauss(0, scatter)))
    return out


def test_a_ten_percent_shift_is_found_where_it_is_with_its_size():
    (point,) = find_change_points(series(40, shifts=[(22, 0.10)]))
    assert point.index == 22 and point.slower
    assert (point.before.start, point.before.end, point.after.start, point.after.end) == (0, 22, 22, 40)
    assert point.low < 1.10 < point.high and point.high - point.low < 0.03
    assert point.before.median_s == pytest.approx(0.040, rel=0.01)
    assert point.after.median_s == pytest.approx(0.044, rel=0.01)
    assert point.confidence == 0.95 and point.change == pytest.approx(point.ratio - 1)


@pytest.mark.parametrize("seed", range(5))
def test_no_shift_no_change_point(seed):
    assert find_change_points(series(100, seed=seed, scatter=0.03)) == []


def test_a_shift_and_the_one_that_undoes_it_are_both_found():
    slower, back = find_change_points(series(45, shifts=[(15, 0.08), (30, -0.08 / 1.08)]))
    assert (slower.index, slower.slower, back.index, back.slower) == (15, True, 30, False)
    assert back.before == slower.after  # the segment between them is shared
    assert back.ratio == pytest.approx(1 / 1.08, abs=0.015)


def test_a_shift_below_the_smallest_change_reported_is_left_alone():
    quiet = series(40, scatter=0.001, shifts=[(20, 0.015)])
    assert find_change_points(quiet) == []
    (point,) = find_change_points(quiet, min_change=0.01)
    assert point.index == 20 and DEFAULT_MIN_CHANGE == 0.02


def test_one_run_off_is_not_a_shift():
    values = series(40, scatter=0.005)
    values[25] *= 1.4
    assert find_change_points(values) == []


def test_runs_whose_own_rounds_are_noisy_set_the_scale():
    """Runs that agree closely with each other by chance, but whose rounds say each resolves only a few
    percent, do not make a 3% shift a change point; the same runs with tight intervals do."""
    values = series(40, scatter=0.002, shifts=[(20, 0.03)])
    wide = [(v * 0.94, v * 1.06) for v in values]
    tight = [(v * 0.998, v * 1.002) for v in values]
    assert find_change_points(values, wide) == []
    assert [p.index for p in find_change_points(values, tight)] == [20]
    scale = noise_scale([math.log(v) for v in values], wide)
    assert scale == pytest.approx(math.log(1.06) / 1.959964, rel=0.05)


def test_too_few_runs_give_none_and_bad_times_are_refused():
    assert find_change_points([0.04, 0.04, 0.05, 0.05, 0.05]) == []
    with pytest.raises(UserError, match="every time must be a positive number"):
        find_change_points([0.04] * 5 + [0.0] + [0.05] * 5)


def test_a_runs_interval_comes_from_its_rounds():
    low, high = run_interval([0.040, 0.041, 0.039, 0.040, 0.042])
    assert low < 0.0404 < high and high - low < 0.003
    assert run_interval([0.04, 0.05]) is None


def test_the_series_of_a_history_leaves_out_failed_and_disturbed_runs():
    runs = history_runs(12, shift_at=6, shift=0.10)
    entries = [Entry(results) for _, results in runs]
    failed = entries[2].results.cases[0]
    entries[2].results.cases[0] = CaseResult(id=CASE, kind="resnet50", batch_size=16, times=0,
                                             input_shape=[16, 3, 224, 224], error="out of memory")
    entries[4].results.cases[0].disturbance = {"text": "other processes", "contenders": {"oneflow": ["x"]}}
    head = case_series(entries, CASE, "oneflow")
    assert head.positions == [0, 1, 3, 5, 6, 7, 8, 9, 10, 11] and head.kind == "resnet50"
    assert head.values[0] == runs[0][1].cases[0].frameworks["oneflow"].per_iter_s
    assert all(low < value < high for value, (low, high) in zip(head.values, head.intervals))
    (point,) = head.change_points()
    assert head.positions[point.index] == 6 and commit_of(6) == runs[6][0]
    assert case_series(entries, CASE, "pytorch").change_points() == []
    assert case_series(entries, "no-such-case", "oneflow").values == []
    assert failed.id == CASE


def test_of_two_candidates_around_a_short_stretch_the_larger_shift_stays():
    """Three runs a little low just before a 10% shift: the segmentation proposes a change point on each
    side of them, both weak against so short a segment; the one of the larger p-value goes (the 4% dip),
    the shift stays where it is."""
    values = [0.0408] * 9 + [0.0390, 0.0398, 0.0386] + [0.0439] * 28
    values = [v * (1 + 0.01 * math.sin(i)) for i, v in enumerate(values)]
    (point,) = find_change_points(values)
    assert point.index == 12 and point.ratio == pytest.approx(1.09, abs=0.02)
