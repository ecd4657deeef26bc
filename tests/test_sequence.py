"""The steps of one case's head-vs-base rounds (analysis.sequence.Steps), on a clock the test moves: the
one loop the scheduler and the simulation both execute."""

import importlib.util
import math
import random
from dataclasses import replace
from pathlib import Path

import pytest

from speedstats.analysis import sequence
from speedstats.analysis.look import SHOWN, TIME_BUDGET
from speedstats.analysis.rule import SequentialRule
from speedstats.analysis.sequence import EndControl, MeasureRound, ProfileRound, StartPair, Steps, Stop

ROOT = Path(__file__).resolve().parents[1]


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def execute(steps, clock, ratio_of, round_s=1.0, start_s=3.0, profile_s=1.0, fail_at=None):
    """Execute every step as a driver would, each taking the clock forward: the steps seen, in order."""
    seen = []
    while True:
        step = steps.next_step()
        seen.append(step)
        if isinstance(step, Stop):
            return seen
        if isinstance(step, StartPair):
            clock.now += start_s
        elif isinstance(step, MeasureRound):
            clock.now += round_s
            if fail_at == step.number:
                steps.failed()
            else:
                steps.measured(ratio_of(step.number), seconds=round_s)
        elif isinstance(step, ProfileRound):
            clock.now += profile_s


def kinds(seen):
    return [type(step).__name__ for step in seen]


def test_a_large_slowdown_stops_at_the_first_look_after_two_pairs_and_the_control():
    clock = Clock()
    steps = Steps(SequentialRule(), clock=clock)
    seen = execute(steps, clock, lambda k: 1.5 + 0.01 * (k % 3))
    # Five rounds with the control, a fresh pair (the base's process started first), five more, then the
    # first look: PyTorch ends, and the rule has shown the regression.
    assert kinds(seen) == ["MeasureRound"] * 5 + ["StartPair"] + ["MeasureRound"] * 5 + ["EndControl", "Stop"]
    assert all(step.with_control for step in seen if isinstance(step, MeasureRound))
    assert seen[5] == StartPair(pair=1, head_first=False, confirming=False, notes=seen[5].notes)
    assert seen[5].notes == ("head vs base: 5 rounds measured; the next ones in a fresh pair of processes",)
    assert seen[-1].reason == SHOWN and seen[-1].notes == ("head vs base: 10 rounds, stopped (shown)",)
    assert steps.first_look_s == pytest.approx(5 + 3 + 5) and steps.profiling == {}
    assert steps.sequence.verdict().verdict == "regression"


def test_the_rounds_after_a_look_go_to_fresh_pairs_only_where_their_start_buys_more_precision():
    # Rounds that scatter 3% around +5%, on a runner whose pairs of processes spread 5% (process_sd): the
    # first look straddles the band. A start that costs half a round: the next ten rounds in a fresh
    # pair (two would leave each fewer than a pair's five), since more rounds in the same processes
    # could not shrink the spread between them.
    rule = SequentialRule(process_sd=0.05, futility_z=10.0, max_rounds=400, extra_factor=2.0,
                          leaning_extra_factor=2.0,
                          case_cap_factor=4.0)
    rng = random.Random(5)
    ratios = [math.exp(math.log(1.05) + rng.gauss(0, 0.03)) for _ in range(40)]
    cheap = Steps(rule, clock=Clock())
    seen = execute(cheap, cheap.clock, lambda k: ratios[(k - 1) % 40], round_s=1.0, start_s=0.5)
    assert kinds(seen)[:13] == ["MeasureRound"] * 5 + ["StartPair"] + ["MeasureRound"] * 5 + [
        "EndControl", "StartPair"]
    assert cheap.sequence.pair_start_rounds == pytest.approx(0.5)
    assert cheap.sequence.verdict().stages[:3] == [5, 5, 10]
    assert seen[12].notes == ("head vs base: 10 rounds measured; the next ones in a fresh pair of processes",)
    # A start that costs 30 rounds buys none: the rounds go on in the second pair.
    dear = Steps(rule, clock=Clock())
    seen = execute(dear, dear.clock, lambda k: ratios[(k - 1) % 40], round_s=1.0, start_s=30.0)
    assert dear.sequence.pair_start_rounds == pytest.approx(30.0)
    assert kinds(seen).count("StartPair") == 1 and len(dear.sequence.verdict().stages) == 2
    # Processes taken not to differ, or rounds driven without a clock: never.
    plain = Steps(replace(rule, process_sd=0.0), clock=Clock())
    seen = execute(plain, plain.clock, lambda k: ratios[(k - 1) % 40], round_s=1.0, start_s=0.5)
    assert kinds(seen).count("StartPair") == 1


def test_the_rounds_after_the_first_look_time_only_the_head_and_the_base_within_the_time_budget():
    clock = Clock()
    rng = random.Random(3)
    # Processes taken not to differ (process_sd 0): the rounds stay in the second pair's processes. A
    # budget of a few seconds, so that the time, not a later look, ends the rounds.
    rule = SequentialRule(max_rounds=400, futility_z=0.0, process_sd=0.0, leaning_extra_factor=0.7,
                          case_cap_factor=1.5)
    steps = Steps(rule, clock=clock)
    seen = execute(steps, clock, lambda k: math.exp(math.log(1.04) + rng.gauss(0, 0.08)))
    rounds = [step for step in seen if isinstance(step, MeasureRound)]
    assert [step.with_control for step in rounds[:11]] == [True] * 10 + [False]
    assert seen[11] == EndControl()  # after five rounds, a fresh pair and five more
    # The budget after the first look (13 s in), checked before each round of a second: the rounds stop
    # at the first check past it.
    budget_s = rule.extra_budget_s(13.0, steps.sequence.looks[0].ratio)
    assert seen[-1].reason == TIME_BUDGET and len(rounds) - 10 == math.floor(budget_s) + 1


def test_a_slower_head_gets_its_profiled_rounds_within_the_case_cap_and_says_how_many():
    clock = Clock()
    steps = Steps(SequentialRule(), clock=clock, attribute="slower", attribute_budget=0.25,
                  attribute_rounds=10)
    seen = execute(steps, clock, lambda k: 1.5, profile_s=1.0)
    profiled = [step for step in seen if isinstance(step, ProfileRound)]
    # The case took 13 s to its first look; its cap is 19.5 s, which leaves 6.5 s at 13 s: the budget's
    # 25% share (13 / 3 = 4.3 s) is smaller, and allows 4 pairs of 1 s.
    assert [step.number for step in profiled] == [0, 1, 2, 3]
    assert profiled[0].notes == ("head vs base: 10 rounds, stopped (shown)",)
    assert seen[-1].notes == ("head vs base: 4 profiled rounds of each in 4.0s",)
    reason = "the budget of 25% of the case's wall time (4.3s) allowed 4 profiled rounds"
    assert steps.profiling == {"case_s": 13.0, "profiled_s": 4.0, "reason": reason}


def test_a_slower_head_gets_the_fewest_profiled_rounds_that_compare_anything_whatever_the_cap():
    # A cap of one first look leaves no time at all after it; a head likely slower still gets 3.
    clock = Clock()
    rule = SequentialRule(case_cap_factor=1.0)
    steps = Steps(rule, clock=clock, attribute="slower", attribute_budget=0.25, attribute_rounds=10)
    seen = execute(steps, clock, lambda k: 1.06 * (1 + 0.06 * (-1) ** k), profile_s=5.0)
    assert steps.sequence.verdict().leaning == "likely slower"
    assert [step.number for step in seen if isinstance(step, ProfileRound)] == [0, 1, 2]
    assert steps.profiling["reason"] == (
        "the case's cap (13.0s in all) left 0.0s, which allowed 0 profiled rounds; a head that leans slower "
        "gets the fewest that compare anything, 3")
    # As fast: with `attribute: always` the cap has the last word.
    clock = Clock()
    steps = Steps(rule, clock=clock, attribute="always", attribute_budget=0.25, attribute_rounds=10)
    seen = execute(steps, clock, lambda k: 1.0 + 0.001 * (-1) ** k, profile_s=5.0)
    assert not any(isinstance(step, ProfileRound) for step in seen)
    assert steps.profiling["reason"].endswith("allowed 0 profiled rounds")


def test_a_head_as_fast_as_its_base_is_not_profiled_with_attribute_slower():
    clock = Clock()
    steps = Steps(SequentialRule(), clock=clock, attribute="slower", attribute_budget=0.25,
                  attribute_rounds=10)
    seen = execute(steps, clock, lambda k: 1.0 + 0.001 * (-1) ** k)
    assert not any(isinstance(step, ProfileRound) for step in seen)
    assert seen[-1].reason == SHOWN and steps.profiling == {}
    assert steps.sequence.verdict().verdict == "no change"


def test_a_failed_round_stops_the_rounds_without_profiled_ones():
    clock = Clock()
    steps = Steps(SequentialRule(), clock=clock, attribute="always", attribute_budget=0.25,
                  attribute_rounds=10)
    seen = execute(steps, clock, lambda k: 1.5, fail_at=7)
    # The rule takes its last look on the six rounds there are.
    assert kinds(seen)[-2:] == ["MeasureRound", "Stop"] and seen[-1].reason == SHOWN
    assert seen[-1].notes == ("head vs base: 6 rounds, stopped (shown)",)
    assert steps.profiling == {}


def test_a_failed_profiled_round_ends_them_with_its_reason_and_no_count():
    clock = Clock()
    steps = Steps(SequentialRule(), clock=clock, attribute="always", attribute_budget=0.5,
                  attribute_rounds=10)
    while not isinstance(step := steps.next_step(), (ProfileRound, Stop)):
        if isinstance(step, MeasureRound):
            steps.measured(1.5, seconds=1.0)
        clock.now += 1.0
    assert isinstance(step, ProfileRound)
    clock.now += 0.5
    steps.failed("OneFlow failed in a profiled round: it died")
    last = steps.next_step()
    assert isinstance(last, Stop) and last.notes == ()
    assert steps.profiling["reason"] == "OneFlow failed in a profiled round: it died"
    assert steps.profiling["profiled_s"] == pytest.approx(0.5)


def test_no_time_check_between_a_fresh_pair_and_its_first_round():
    # A pair start that passes the budget still measures its round: no pair is started for no rounds.
    clock = Clock()
    rule = SequentialRule(no_change_pairs=3, max_rounds=20)
    steps = Steps(rule, clock=clock)
    seen = execute(steps, clock, lambda k: 1.0 + 0.001 * (k % 2), start_s=100.0)
    starts = [k for k, step in enumerate(seen) if isinstance(step, StartPair)]
    assert len(starts) == 2 and isinstance(seen[starts[1] + 1], MeasureRound)


def test_the_steps_refuse_an_unknown_attribute():
    with pytest.raises(ValueError, match="attribute: must be one of never, slower, always, got 'often'"):
        Steps(attribute="often")


def published_simulation():
    path = ROOT / "benchmarks" / "simulate_head_vs_base.py"
    spec = importlib.util.spec_from_file_location("simulate", path)
    simulate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(simulate)
    return simulate


def test_the_published_simulation_executes_these_steps():
    simulate = published_simulation()
    assert simulate.sequence is sequence  # the same module: no loop of its own
    verdict, rounds, wall, _ = simulate.simulate(0.25, SequentialRule(), random.Random(1), sigma=0.075,
                                                 sigma_iterations=2, process_sd=0.015, outliers=0.0)
    assert verdict.verdict == "regression" and rounds == 10 and wall > 1


def test_the_simulation_draws_a_runs_noise_from_one_recorded_runs_rounds_centred_and_mirrored(tmp_path):
    simulate = published_simulation()
    recorded = tmp_path / "runs.json"
    recorded.write_text('{"runs": {"aa": [{"ratios": [1.1, 1.0, 1.3], "stages": [3]}, {"ratios": [0.9]}],'
                        ' "slow7": [{"ratios": [1.2, 1.2]}]}}')
    pools = simulate.recorded_noise([recorded], scale=0.5)
    mean = (math.log(1.1) + math.log(1.3)) / 3
    first = [0.5 * (math.log(r) - mean) for r in (1.1, 1.0, 1.3)]
    assert pools == [pytest.approx(first + [-x for x in first]), [0.0] * 4]  # a single round is no noise
    # A run of the recorded noise's rounds: every ratio the true change times one pool's draw.
    draws = {x for pool in pools for x in pool}
    rule = SequentialRule(process_sd=0.0, process_pairs=1, max_rounds=10)
    verdict, rounds, _, _ = simulate.simulate(0.05, rule, random.Random(3), sigma=None, sigma_iterations=None,
                                              process_sd=0.0, outliers=None, recorded=pools)
    assert rounds == 10 and all(any(math.log(r) - math.log1p(0.05) == pytest.approx(x) for x in draws)
                                for r in verdict.ratios)
    recorded.write_text('{"runs": {"aa": [{"ratios": [1.0]}]}}')
    with pytest.raises(ValueError, match="no recorded run with 2 rounds or more in .*runs.json"):
        simulate.recorded_noise([recorded])
