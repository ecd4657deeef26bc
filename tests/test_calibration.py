"""`speedstats calibrate` without frameworks: the scatter of A/A rounds (analysis.calibration) recovered
from synthetic rounds of known round and process sd, what the rule resolves in simulated noise, the
calibration file, `run` taking its process sd as the rule's prior, and the command's bad input."""

import json
import math
import random
import statistics
from dataclasses import replace

import pytest

from fakegithub import run_speedstats
from speedstats import calibration as store
from speedstats.analysis import calibration, sequence
from speedstats.analysis.rule import MAX_PROCESS_SD, SequentialRule, runner_process_sd
from speedstats.bench.schedule import RoundPlan
from speedstats.calibrate_cli import calibrate_case, calibration_suite, report_table
from speedstats.doctor_cli import calibration_rows
from speedstats.errors import UserError
from speedstats.pipeline import RunOptions, calibration_rules
from speedstats.results import CaseResult, FrameworkResult, results_from_dict
from speedstats.suite import load_suite

CPU = "CPU: Test CPU (2 cores)"


def aa_rounds(rng, pairs, rounds, round_sd, process_sd):
    """head/base of an A/A run: each pair's offset N(0, process_sd), each round's N(0, round_sd), in log."""
    ratios = []
    for _ in range(pairs):
        offset = rng.gauss(0, process_sd)
        ratios += [math.exp(offset + rng.gauss(0, round_sd)) for _ in range(rounds)]
    return ratios, [rounds] * pairs


def test_the_scatter_recovers_known_round_and_process_sds_over_many_seeds():
    rng = random.Random(7)
    found = [calibration.scatter(*aa_rounds(rng, 8, 10, 0.08, 0.04)) for _ in range(300)]
    assert statistics.mean(f.round_sd for f in found) == pytest.approx(0.08, rel=0.03)
    # The method of moments, clipped at 0, is a little low for an sd from 8 pairs; its median near.
    assert statistics.median(f.process_sd for f in found) == pytest.approx(0.04, rel=0.15)
    covered_rounds = sum(f.round_sd_low <= 0.08 <= f.round_sd_high for f in found) / len(found)
    covered_pairs = sum(f.process_sd_low <= 0.04 <= f.process_sd_high for f in found) / len(found)
    assert 0.9 <= covered_rounds <= 0.99 and 0.88 <= covered_pairs <= 0.995
    assert {(f.pairs, f.rounds) for f in found} == {(8, 80)}


def test_pairs_that_differ_no_more_than_their_rounds_explain_are_mostly_no_spread():
    rng = random.Random(3)
    found = [calibration.scatter(*aa_rounds(rng, 6, 5, 0.1, 0.0)) for _ in range(300)]
    assert statistics.median(f.process_sd for f in found) == 0
    assert sum(f.process_sd_low == 0 for f in found) / len(found) > 0.9
    assert all(f.process_sd >= 0 for f in found)


def test_one_pair_tells_the_rounds_only_and_a_pair_needs_two_rounds():
    one = calibration.scatter([1.0, 1.1, 0.9, 1.05], [4])
    assert (one.pairs, one.process_sd, one.process_sd_high) == (1, 0.0, None) and one.round_sd > 0
    with pytest.raises(ValueError, match="at least 2 rounds"):
        calibration.scatter([1.0, 1.1], [1, 1])


def test_the_calibration_rule_measures_its_pairs_of_rounds_and_stops_at_its_first_look():
    rule = calibration.calibration_rule(SequentialRule(), pairs=3, pair_rounds=4)
    steps, rng = sequence.Steps(rule, confirm=False, clock=lambda: 0.0), random.Random(1)
    pairs = 1
    while not isinstance(step := steps.next_step(), sequence.Stop):
        if isinstance(step, sequence.StartPair):
            pairs += 1
        elif isinstance(step, sequence.MeasureRound):
            steps.measured(math.exp(rng.gauss(0, 0.5)))  # however they scatter
    assert (pairs, len(steps.sequence.ratios), [s for s in steps.sequence.stages if s]) == (3, 12, [4, 4, 4])
    with pytest.raises(ValueError, match="pairs"):
        calibration.calibration_rule(SequentialRule(), pairs=1, pair_rounds=4)


def test_the_calibration_suite_keeps_the_rounds_as_long_as_run_times_them():
    suite = load_suite(profile="smoke")
    before = {case.id: RoundPlan.for_case(case, True, suite.head_vs_base).iterations for case in suite.cases}
    calibration_suite(suite, ["resnet50-bs2", "swin-dataloader-w0"], pairs=4, pair_rounds=5)
    assert [case.id for case in suite.cases] == ["resnet50-bs2", "swin-dataloader-w0"]
    for case in suite.cases:
        plan = RoundPlan.for_case(case, True, suite.head_vs_base)
        assert (plan.rounds, plan.iterations) == (20, before[case.id])
    assert (suite.attribute, suite.confirm, suite.head_vs_base.max_rounds) == ("never", False, 20)
    with pytest.raises(UserError, match=r"--case: no case 'resnet50-bs3' in suite 'smoke' \(did you mean "):
        calibration_suite(load_suite(profile="smoke"), ["resnet50-bs3"], 4, 5)


QUIET = calibration.Noise(round_sd=0.01, process_sd=0.0, round_s=0.05, pair_start_s=1.0)
NOISY = calibration.Noise(round_sd=0.10, process_sd=0.08, round_s=0.05, pair_start_s=1.0)


def test_the_simulated_rule_calls_a_large_slowdown_a_regression_and_no_change_nothing():
    rule = SequentialRule()
    assert calibration.power(rule, QUIET, 0.3, trials=20).share == 1
    unchanged = calibration.power(rule, QUIET, 0.0, trials=20)
    # Its two pairs' starts and the first look's 10 rounds: "no change" there.
    assert unchanged.share == 0 and unchanged.wall_s == pytest.approx(2 * 1.0 + 10 * 0.05, abs=1e-6)
    # The pairs' spread, as the rule's prior, costs power at a change the quiet runner resolves.
    noisy = replace(rule, process_sd=NOISY.process_sd)
    assert calibration.power(noisy, NOISY, 0.1, trials=20).share < 0.5


def test_a_quiet_runner_resolves_the_target_with_the_cheapest_rule_and_a_noisy_one_with_none():
    found = calibration.rule_for_target(SequentialRule(process_sd=0.0), QUIET, target=0.05, trials=20)
    assert found is not None and found.found.share >= 0.95
    assert (found.rule.process_pairs, found.rule.pair_rounds) == (2, 5) and found.rule.min_effect < 0.05
    # With the default prior (pairs of processes taken to spread 2%), a third pair: the interval's share
    # of that spread shrinks with the pairs, not with the rounds.
    found = calibration.rule_for_target(SequentialRule(), QUIET, target=0.05, trials=20)
    assert (found.rule.process_pairs, found.rule.pair_rounds) == (3, 5) and found.found.share >= 0.95
    assert set(found.to_dict()) >= {"process_pairs", "pair_rounds", "min_effect", "share", "wall_s"}
    assert calibration.rule_for_target(SequentialRule(), NOISY, target=0.05, trials=20) is None
    assert calibration.approximate_power(replace(SequentialRule(), min_effect=0.02, process_sd=0.08), NOISY,
                                         0.05) < 0.2


def test_the_smallest_change_resolved_grows_with_the_noise():
    rule = SequentialRule()
    quiet = calibration.smallest_resolved(rule, QUIET, trials=20, steps=4)
    loud = calibration.smallest_resolved(rule, replace(QUIET, round_sd=0.1), trials=20, steps=4)
    assert quiet.share >= 0.95 and 0.04 < quiet.change < loud.change < 1
    assert calibration.smallest_resolved(rule, replace(NOISY, process_sd=0.6), trials=10, steps=1) is None


def case_result(ratios, stages, case_id="resnet50-bs2", disturbance=None):
    head = FrameworkResult(total_s=0.2, per_iter_s=0.1, times=2, rounds_s=[0.1] * len(ratios),
                           round_iterations=2, setup_starts_s=[3.0, 4.0, 5.0][:len(stages)], setup_s=4.0)
    base = replace(head, setup_starts_s=[3.5, 3.0, 6.0][:len(stages)])
    from speedstats.analysis.paired import PairedVerdict

    paired = PairedVerdict(verdict="no change", ratio=1.0, ratios=ratios, rounds=len(ratios), stages=stages)
    return CaseResult(id=case_id, kind="resnet50", batch_size=2, times=2,
                      frameworks={"oneflow": head, "oneflow_base": base}, paired=paired,
                      disturbance=disturbance)


def a_calibration(cases, runner=None):
    return store.Calibration(device="cpu", gpu_name=CPU, measured_at="2026-12-07T10:00:00Z", suite="smoke",
                             runner=runner, build="0.9.0", pairs=3, pair_rounds=5, target=0.05, power=0.95,
                             trials=10, rule=SequentialRule().to_dict(), cases=cases)


def test_a_case_calibrated_from_its_aa_results_and_the_table(monkeypatch):
    monkeypatch.setattr(calibration, "DEFAULT_TRIALS", 10)
    ratios, stages = aa_rounds(random.Random(2), 3, 5, 0.02, 0.01)
    case = calibrate_case(case_result(ratios, stages), SequentialRule(), 0.05, 0.95, trials=10)
    assert (case.pairs, case.rounds, case.error) == (3, 15, None)
    # A round of head and base together: two iterations each; a pair starts when its slower one is ready.
    assert (case.round_s, case.pair_start_s) == (pytest.approx(0.4), 4.0)
    assert case.resolves is not None and case.resolves_wall_s > 0 and case.no_change_wall_s > 0
    disturbed = calibrate_case(case_result(ratios, stages, disturbance={"text": "2 cores busy",
                                                                        "contenders": {}}),
                               SequentialRule(), 0.05, 0.95, trials=10)
    assert disturbed.error == "measured on a disturbed machine: 2 cores busy" and disturbed.process_sd is None
    table = report_table(a_calibration([case, disturbed]))
    lines = table.splitlines()
    assert lines[0].split() == ["CASE", "PAIRS/ROUNDS", "ROUND", "SD", "(95%)", "PROCESS", "SD", "(95%)",
                                "RESOLVES", "TAKES", "TO", "RESOLVE", "5%"]
    assert lines[1].startswith("resnet50-bs2  3/15") and "no figures: measured on a disturbed" in lines[2]


def test_the_file_is_kept_per_gpu_name_and_read_back_as_written(tmp_path):
    case = store.CaseCalibration(id="resnet50-bs2", pairs=3, rounds=15, round_sd=0.1, round_sd_low=0.07,
                                 round_sd_high=0.15, process_sd=0.045, process_sd_low=0.0,
                                 process_sd_high=0.2)
    path = store.calibration_path(tmp_path, CPU)
    assert path == tmp_path / "calibration" / "CPU_Test_CPU_2_cores.json"
    store.write_calibration(path, a_calibration([case]))
    back = store.read_calibration(path)
    assert back == a_calibration([case]) and json.loads(path.read_text())["schema"] == store.SCHEMA
    assert store.read_calibration(tmp_path / "none.json") is None
    data = json.loads(path.read_text())
    data["cases"][0]["process_sd"] = -1
    path.write_text(json.dumps(data))
    with pytest.raises(UserError, match=r"cases\[0\].*process_sd"):
        store.read_calibration(path)


def test_run_takes_each_cases_process_sd_as_its_rules_prior(tmp_path, monkeypatch):
    monkeypatch.setattr("speedstats.gpuinfo.device_name", lambda device="cuda": CPU)
    monkeypatch.delenv("RUNNER_NAME", raising=False)
    cases = [store.CaseCalibration(id="resnet50-bs2", process_sd=0.045, pairs=6),
             store.CaseCalibration(id="resnet50-bs1", process_sd=0.9, pairs=6),  # beyond what a rule takes
             store.CaseCalibration(id="swin-dataloader-w0", error="no figures")]
    store.write_calibration(store.calibration_path(tmp_path, CPU), a_calibration(cases, runner="gpu-7"))
    lines = []
    suite = load_suite(profile="smoke")
    rules, used = calibration_rules(suite, "cpu", tmp_path, ["oneflow", "oneflow_base"], RunOptions(),
                                    lines.append)
    # Each measured on six pairs, pooled with the default 2% (weighing as ten pairs): 4.5% gives 3.1%.
    pooled = ((10 * 0.02 ** 2 + 5 * 0.045 ** 2) / 15) ** 0.5
    assert {case: rule.process_sd for case, rule in rules.items()} == {"resnet50-bs2": pooled,
                                                                        "resnet50-bs1": MAX_PROCESS_SD}
    assert rules["resnet50-bs2"] == replace(suite.head_vs_base, process_sd=pooled)
    assert used == {"file": "CPU_Test_CPU_2_cores.json", "measured_at": "2026-12-07T10:00:00Z",
                    "runner": "gpu-7", "process_sd": {"resnet50-bs2": pooled, "resnet50-bs1": MAX_PROCESS_SD}}
    assert lines[0].startswith("speedstats: calibration CPU_Test_CPU_2_cores.json (") and "3.1%" in lines[0]
    # results.json declares it, and reads it back
    data = {"suite": "smoke", "device": "cpu", "gpu_name": CPU, "cases": [], "calibration": used}
    assert results_from_dict(data).calibration == used
    # Without a baseline, with --no-calibration, on another runner, or with the suite's own process_sd: none.
    assert calibration_rules(suite, "cpu", tmp_path, ["oneflow", "pytorch"], RunOptions(), lines.append) == (
        {}, None)
    assert calibration_rules(suite, "cpu", tmp_path, ["oneflow", "oneflow_base"],
                             RunOptions(no_calibration=True), lines.append) == ({}, None)
    monkeypatch.setenv("RUNNER_NAME", "gpu-8")
    assert calibration_rules(suite, "cpu", tmp_path, ["oneflow", "oneflow_base"], RunOptions(),
                             lines.append) == ({}, None)
    assert lines[-1] == ("speedstats: calibration not used: CPU_Test_CPU_2_cores.json is runner 'gpu-7''s, "
                         "this is 'gpu-8'")
    monkeypatch.setenv("RUNNER_NAME", "gpu-7")
    # A suite file that names its process_sd keeps it, the default's 2% as well as any other.
    for value in ("0.03", "0.02"):
        path = tmp_path / f"own-{value}.yml"
        path.write_text(f"extends: smoke\nhead_vs_base:\n  process_sd: {value}\n")
        own = load_suite(path)
        assert own.sets_process_sd and own.head_vs_base.process_sd == float(value)
        assert calibration_rules(own, "cpu", tmp_path, ["oneflow", "oneflow_base"], RunOptions(),
                                 lines.append) == ({}, None)
    path.write_text("extends: smoke\nhead_vs_base:\n  futility_z: 1\n")
    assert not load_suite(path).sets_process_sd
    assert calibration_rules(load_suite(path), "cpu", tmp_path, ["oneflow", "oneflow_base"], RunOptions(),
                             lines.append)[1] == used
    # It is the suite's own bookkeeping, not a setting a file may give.
    path.write_text("extends: smoke\nsets_process_sd: true\n")
    with pytest.raises(UserError, match="sets_process_sd"):
        load_suite(path)


def test_a_runners_prior_pools_its_measured_spread_with_the_default_by_the_pairs_it_rests_on():
    # Six pairs that agreed (0%) leave most of the default's 2%; forty-one pairs of 0% bring it under 1%.
    assert runner_process_sd(0.0, 6) == pytest.approx(0.02 * (10 / 15) ** 0.5)
    assert runner_process_sd(0.0, 41) == pytest.approx(0.02 * (10 / 50) ** 0.5)
    assert runner_process_sd(0.02, 6) == pytest.approx(0.02)
    assert runner_process_sd(0.08, 200) == pytest.approx(0.08, rel=0.03)
    assert runner_process_sd(0.9, 200) == MAX_PROCESS_SD and runner_process_sd(0.3, 0) == pytest.approx(0.02)
    assert store.CaseCalibration(id="c", process_sd=0.0, pairs=6).prior == runner_process_sd(0.0, 6)


def test_an_unreadable_file_is_a_note_for_run_and_a_warning_for_doctor(tmp_path, monkeypatch):
    monkeypatch.setattr("speedstats.gpuinfo.device_name", lambda device="cuda": CPU)
    (row,) = calibration_rows(tmp_path, "cpu")
    assert row.status == "ok" and row.text.startswith(f"none for {CPU} in ")
    assert "'run' takes the suite's rule as it is (pairs of processes taken to spread 2%)" in row.text
    path = store.calibration_path(tmp_path, CPU)
    path.parent.mkdir()
    path.write_text("{")
    lines = []
    assert calibration_rules(load_suite(profile="smoke"), "cpu", tmp_path, ["oneflow", "oneflow_base"],
                             RunOptions(), lines.append) == ({}, None)
    assert lines[0].startswith("speedstats: calibration not used: ") and "not JSON" in lines[0]
    (row,) = calibration_rows(tmp_path, "cpu")
    assert row.status == "warning" and "not JSON" in row.text
    store.write_calibration(path, a_calibration([store.CaseCalibration(id="resnet50-bs2", process_sd=0.045,
                                                                       pairs=6)]))
    (row,) = calibration_rows(tmp_path, "cpu")
    assert row.status == "ok"
    assert row.text.endswith(" old, suite 'smoke', 3 pairs of 5 rounds a case; process sd resnet50-bs2 4.5% "
                             "(the rule's 3.1%)")


def test_age_in_words():
    assert [store.age_text(s) for s in (None, 30, 61, 7200, 3 * 86400)] == [
        "of unknown age", "less than a minute old", "1 minute old", "2 hours old", "3 days old"]


@pytest.mark.parametrize(("argv", "message"), [
    (["--pairs", "1"], "--pairs: must be between 2 and 10, got 1"),
    (["--pairs", "4", "--rounds", "2"], "--rounds: must be between 3 and 250 (with --pairs 4), got 2"),
    (["--target", "0"], "--target: must be above 0 and below 1 (0.05: a 5% slowdown), got 0"),
    (["--power", "1"], "--power: must be at least 0.5 and below 1, got 1"),
    (["--trials", "5"], "--trials: must be between 10 and 10000, got 5"),
    (["--profile", "smoke", "--case", "nope"], "--case: no case 'nope' in suite 'smoke' (the cases: "),
])
def test_bad_input_is_one_line_naming_the_flag_and_exits_2(argv, message, tmp_path):
    result = run_speedstats(["calibrate", "--device", "cpu", "--cache-dir", tmp_path, *argv], {})
    assert result.rc == 2 and result.out == ""
    assert result.err.startswith(f"speedstats: error: {message}") and result.err.count("\n") == 1


def test_a_calibration_of_some_cases_keeps_the_others_of_this_runner():
    old = a_calibration([store.CaseCalibration(id="a", process_sd=0.01, measured_at="2026-12-01T00:00:00Z"),
                         store.CaseCalibration(id="b", process_sd=0.02, measured_at="2026-12-01T00:00:00Z")])
    new = a_calibration([store.CaseCalibration(id="b", process_sd=0.03),
                         store.CaseCalibration(id="c", error="x")])
    both = store.merged(new, old)
    assert [(c.id, c.process_sd, c.error) for c in both.cases] == [("b", 0.03, None), ("c", None, "x"),
                                                                    ("a", 0.01, None)]
    other_runner = a_calibration([store.CaseCalibration(id="a", process_sd=0.01)], runner="gpu-7")
    assert store.merged(a_calibration([]), other_runner).cases == []
