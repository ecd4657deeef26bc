"""Head against base in one run: per-round ratios, their interval, the control, the round plan."""

import pytest

from speedstats.analysis import paired, stats
from speedstats.bench.runner import BASELINE_ROUNDS, RoundPlan, round_order
from speedstats.suite import load_suite


def test_the_same_build_twice_is_no_change():
    rounds = [0.30, 0.33, 0.29, 0.31, 0.35]
    verdict = paired.judge_paired(rounds, list(rounds))
    assert verdict["ratios"] == [1.0] * 5 and verdict["ratio"] == 1.0
    assert verdict["verdict"] == stats.NO_CHANGE and verdict["low"] == verdict["high"] == 1.0


def test_drift_during_the_run_cancels_in_the_ratios():
    # The machine slows down 40% over the run; the head is 20% slower than the base in every round.
    base = [0.25 * (1 + 0.1 * k) for k in range(5)]
    head = [b * 1.2 for b in base]
    verdict = paired.judge_paired(head, base)
    assert verdict["verdict"] == stats.REGRESSION
    assert verdict["low"] == pytest.approx(1.2) and verdict["high"] == pytest.approx(1.2)
    # Compared as two unpaired samples, the same figures say nothing.
    assert stats.compare_rounds(base, head).verdict == stats.NO_CHANGE


def test_a_small_slowdown_within_min_effect_is_no_change():
    base = [0.25, 0.26, 0.25, 0.27, 0.25]
    head = [b * 1.03 for b in base]
    assert paired.judge_paired(head, base)["verdict"] == stats.NO_CHANGE


def test_noise_that_straddles_the_threshold_is_not_a_regression():
    base = [1.0] * 6
    head = [1.20, 0.98, 1.15, 1.01, 1.25, 0.99]
    verdict = paired.judge_paired(head, base)
    assert verdict["low"] < 1 + stats.DEFAULT_MIN_EFFECT < verdict["high"]
    assert verdict["verdict"] == stats.NO_CHANGE


def test_fewer_than_three_rounds_uses_the_single_round_threshold():
    slower = paired.judge_paired([1.2, 1.2], [1.0, 1.0])
    assert slower["verdict"] == stats.REGRESSION and slower["low"] is None
    assert slower["reason"] == "fewer than 3 rounds"
    assert paired.judge_paired([1.05], [1.0])["verdict"] == stats.NO_CHANGE


def test_impossible_times_are_not_comparable():
    verdict = paired.judge_paired([0.3, 0.0, 0.3], [0.3, 0.3, 0.3])
    assert verdict["verdict"] == stats.NOT_COMPARABLE and "0.0" in verdict["reason"]
    assert paired.judge_paired([], [])["verdict"] == stats.NOT_COMPARABLE


def test_the_interval_is_seeded():
    head, base = [1.1, 1.3, 1.2, 1.0, 1.25, 1.15], [1.0] * 6
    assert paired.judge_paired(head, base) == paired.judge_paired(head, base)


def test_control_drift_says_when_the_machine_moved():
    steady = paired.control_drift([0.18, 0.181, 0.179, 0.18, 0.182, 0.18])
    assert steady["moved"] is False and steady["first"] == 0.18
    moved = paired.control_drift([0.18, 0.18, 0.18, 0.25, 0.25, 0.25])
    assert moved["moved"] is True and moved["change"] == pytest.approx(0.25 / 0.18 - 1)
    few = paired.control_drift([0.18, 0.19, 0.2, 0.21])
    assert few["moved"] is None and few["change"] is not None


def test_a_baseline_splits_the_timed_iterations_into_rounds_instead_of_multiplying_them():
    smoke = load_suite(None, "smoke").case("resnet50-bs2")
    assert RoundPlan.for_case(smoke, with_baseline=False) == RoundPlan(smoke.rounds, smoke.times)
    plan = RoundPlan.for_case(smoke, with_baseline=True)
    assert plan.rounds == BASELINE_ROUNDS and plan.rounds * plan.iterations == smoke.times
    default = load_suite(None, "default").case("resnet50-bs16")
    assert RoundPlan.for_case(default, with_baseline=True) == RoundPlan(5, 20)
    dataloader = load_suite(None, "smoke").case("swin-dataloader-w2")
    assert dataloader.times == 16 and RoundPlan.for_case(dataloader, with_baseline=True) == RoundPlan(8, 2)
    smoke.times = 3
    assert RoundPlan.for_case(smoke, with_baseline=True) == RoundPlan(3, 1)
    smoke.times = 23
    assert RoundPlan.for_case(smoke, with_baseline=True) == RoundPlan(5, 5)
    smoke.rounds = 7
    assert RoundPlan.for_case(smoke, with_baseline=True) == RoundPlan(7, smoke.times)


def test_every_contender_takes_every_place_in_turn():
    contenders = ["oneflow", "oneflow_base", "pytorch"]
    orders = [round_order(contenders, k) for k in range(3)]
    assert orders[0] == contenders
    for place in range(3):
        assert sorted(order[place] for order in orders) == sorted(contenders)


def test_a_head_beyond_min_effect_with_an_unclear_interval_is_measured_again_but_not_failed():
    from speedstats.bench.runner import case_flags
    from speedstats.results import CaseResult, FrameworkResult

    record = CaseResult(id="resnet50-bs2", kind="resnet50", batch_size=2, times=10, input_shape=[2, 3, 64, 64])
    record.frameworks = {name: FrameworkResult(total_s=1.0, per_iter_s=0.1, times=10)
                         for name in ("oneflow", "oneflow_base", "pytorch")}
    # One noisy round of five holds the interval's low end down to the smallest ratio.
    record.paired = paired.judge_paired([1.49, 1.60, 1.27, 1.55, 1.01], [1.0] * 5)
    assert record.paired["verdict"] == stats.NO_CHANGE and record.paired["low"] < 1.04 < record.paired["ratio"]
    assert case_flags(record, None, "CPU") == []
    assert case_flags(record, None, "CPU", suspects=True) == [
        "resnet50-bs2: OneFlow +49.0% against the base build, its interval not yet clear of +4%"]
    record.paired = paired.judge_paired([1.49, 1.60, 1.27, 1.55, 1.01] * 2, [1.0] * 10)
    assert record.paired["verdict"] == stats.REGRESSION  # ten rounds: the one noisy round no longer decides
    assert case_flags(record, None, "CPU") == ["resnet50-bs2: OneFlow +49.0% against the base build"]
