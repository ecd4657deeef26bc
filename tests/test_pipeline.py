"""The steps of `speedstats run` (speedstats.pipeline) that need no framework."""

import pytest

from speedstats import pipeline
from speedstats.analysis.paired import judge_paired
from speedstats.errors import EXIT_CASE_FAILED, EXIT_VERDICT_FAILED
from speedstats.render import render_speed_stats
from speedstats.results import CaseResult, FrameworkResult, Results
from speedstats.suite import load_suite
from speedstats.verdict import judge


def resnet_case(case_id, head_ms, pytorch_ms, base=None, batch_size=2, times=10):
    def figures(ms):
        return FrameworkResult(total_s=ms * times / 1000, per_iter_s=ms / 1000, times=times)

    case = CaseResult(id=case_id, kind="resnet50", batch_size=batch_size, times=times,
                      input_shape=[batch_size, 3, 64, 64],
                      frameworks={"oneflow": figures(head_ms), "pytorch": figures(pytorch_ms)})
    if base is not None:
        head_rounds, base_rounds = [head_ms / 1000] * 5, [base / 1000] * 5
        case.frameworks["oneflow_base"] = figures(base)
        case.paired = judge_paired(head_rounds, base_rounds)
    return case


def smoke_results(*cases):
    return Results(suite="smoke", device="cpu", gpu_name="CPU", cases=list(cases))


@pytest.mark.parametrize("flags, roles", [
    ({}, ["oneflow", "pytorch"]),
    ({"baseline_oneflow": "installed"}, ["oneflow", "oneflow_base", "pytorch"]),
    ({"baseline_oneflow": "installed", "only": "oneflow"}, ["oneflow", "oneflow_base"]),
    ({"baseline_oneflow": "installed", "only": "pytorch"}, ["pytorch"]),
    ({"only": "oneflow"}, ["oneflow"]),
])
def test_the_flags_choose_the_contenders_and_their_builds(flags, roles):
    requests, contenders = pipeline.build_requests(load_suite(None, "smoke"), pipeline.RunOptions(**flags))
    assert contenders == roles
    assert [(r.role, r.family, r.installed) for r in requests] == [
        (role, "pytorch" if role == "pytorch" else "oneflow", True) for role in roles]


def test_the_exit_status_comes_from_the_verdict():
    suite = load_suite(None, "smoke")
    passed = smoke_results(resnet_case("resnet50-bs2", 300.0, 180.0))
    assert judge(passed, suite).passed and pipeline.exit_status(passed, judge(passed, suite)) == 0
    slower = smoke_results(resnet_case("resnet50-bs2", 300.0, 180.0, base=250.0))
    verdict = judge(slower, suite)
    assert verdict.regressions == ["resnet50-bs2"] and not verdict.passed
    assert pipeline.exit_status(slower, verdict) == EXIT_VERDICT_FAILED
    failed = smoke_results(resnet_case("resnet50-bs2", 300.0, 180.0),
                           CaseResult(id="resnet50-bs1", kind="resnet50", batch_size=1, times=10,
                                      input_shape=[1, 3, 64, 64], error="crashed"))
    assert pipeline.exit_status(failed, judge(failed, suite)) == EXIT_CASE_FAILED


def test_the_comment_and_outputs_after_a_run_carry_one_verdict(tmp_path, monkeypatch, capsys):
    suite = load_suite(None, "smoke")
    results = smoke_results(resnet_case("resnet50-bs2", 300.0, 180.0, base=250.0))
    verdict = judge(results, suite)
    body = render_speed_stats(results, suite, verdict)
    outputs = tmp_path / "github-output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(outputs))
    comment_path = pipeline.write_comment(tmp_path, body, quiet=False, progress=print)
    pipeline.set_outputs(verdict, tmp_path / "results.json", comment_path)
    pipeline.report(results, verdict, tmp_path / "results.json", comment_path, progress=print)
    assert comment_path.read_text(encoding="utf-8") == body
    assert outputs.read_text(encoding="utf-8") == (
        f"verdict=fail\nscore=0\nregressions=1\nlikely-regressions=0\nresults={tmp_path / 'results.json'}\n"
        f"comment-file={comment_path}\n")
    assert capsys.readouterr().out == body + "\n" + (
        f"speedstats: wrote {tmp_path / 'results.json'} and {comment_path}; score 0, verdict fail; "
        "slower than the base build: resnet50-bs2\n")


def test_the_job_summary_is_the_verdict_line_and_the_comment_wherever_github_step_summary_is_set(
        tmp_path, monkeypatch):
    suite = load_suite(None, "smoke")
    results = smoke_results(resnet_case("resnet50-bs2", 300.0, 180.0, base=250.0))
    verdict = judge(results, suite)
    body = render_speed_stats(results, suite, verdict)
    comment_path = pipeline.write_comment(tmp_path, body, quiet=True, progress=print)
    monkeypatch.delenv("GITHUB_OUTPUT", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    pipeline.set_outputs(verdict, tmp_path / "results.json", comment_path)  # outside a job: no file
    summary = tmp_path / "step-summary"
    summary.write_text("an earlier step's\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    pipeline.set_outputs(verdict, tmp_path / "results.json", comment_path)
    assert summary.read_text(encoding="utf-8") == (
        f"an earlier step's\nVerdict: **fail** (score 0).\n\n{body}\n")


def test_in_github_actions_each_failed_check_and_slower_case_is_an_annotation(monkeypatch):
    suite = load_suite(None, "smoke")
    threshold = resnet_case("resnet50-bs2", 300.0, 18.0)  # relative speed 0.06, below the smoke's 0.25
    slower = resnet_case("resnet50-bs1", 300.0, 180.0, base=250.0, batch_size=1)
    disturbed = resnet_case("resnet50-ddp-bs2", 300.0, 180.0)
    disturbed.disturbance = {"text": "other processes used 1.0 of 2 cores"}
    crashed = CaseResult(id="swin-dataloader-w0", kind="swin_dataloader", batch_size=8, times=8,
                         error="worker crashed:\nout of memory")
    verdict = judge(smoke_results(threshold, slower, disturbed, crashed), suite)
    lines = []
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    pipeline.annotate(verdict, lines.append)
    assert lines == []  # a terminal gets the summary line, not workflow commands
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    pipeline.annotate(verdict, lines.append)
    assert lines == [
        "::error title=speedstats resnet50-bs2::resnet50-bs2: relative speed 0.06 is below 0.25",
        ("::error title=speedstats resnet50-bs1::resnet50-bs1: OneFlow +20.0%25 against the base build: "
         f"{verdict.head_vs_base[1].text}"),
        ("::warning title=speedstats resnet50-ddp-bs2::resnet50-ddp-bs2: measured on a disturbed machine: "
         "other processes used 1.0 of 2 cores"),
        ("::error title=speedstats swin-dataloader-w0::swin-dataloader-w0: failed: worker crashed: "
         "out of memory"),
    ]


def test_in_github_actions_each_case_is_a_log_group_with_the_time_elapsed_and_left():
    ticks = iter([0.0, 100.0, 100.0, 400.0, 400.0, 4000.0])
    lines = []
    groups = pipeline.CaseGroups(lines.append, clock=lambda: next(ticks))
    suite = load_suite(None, "smoke")
    for index, case in enumerate(suite.cases[:3], 1):
        with groups(index, 5, case):
            lines.append(f"case {index}")
    assert lines == [
        "::group::[1/5] resnet50-bs2 (resnet50, input_shape=[2, 3, 64, 64]): 0s elapsed, time left unknown",
        "case 1", "::endgroup::",
        ("::group::[2/5] resnet50-bs1 (resnet50, input_shape=[1, 3, 64, 64]): 1m40s elapsed, "
         "about 6m40s left"),
        "case 2", "::endgroup::",
        ("::group::[3/5] swin-dataloader-w0 (swin dataloader, batch 8, num_workers=0): 6m40s elapsed, "
         "about 10m00s left"),
        "case 3", "::endgroup::",
    ]
    assert pipeline.clock_text(3725) == "1h02m"

