"""Rendering the Speed stats comment and its verdict, byte for byte."""

import re
from pathlib import Path

import pytest

from speedstats import results as results_model
from speedstats.errors import UserError
from speedstats.render import render_automerge_removed, render_docs_preview, render_speed_stats
from speedstats.results import CaseResult, FrameworkResult, Results
from speedstats.suite import load_suite
from speedstats.verdict import FAIL_MARK, PASS_MARK, judge

DATA = Path(__file__).parent / "data"
THREADS = ["pr-cu12-release", "pr-revert"]
GPU = "NVIDIA GeForce RTX 3080 Ti"
BODY_HEAD = "<details>\n <summary>Speed stats:</summary>\n\n ``` \n"
BODY_TAIL = "\n ``` \n\n</details>"
TIME_LINE = re.compile(r"time: ([\d.]+)(ms|s) \(= ([\d.]+)(?:ms|s) / (\d+)")


def read(name):
    return (DATA / name).read_text(encoding="utf-8")


def thread_results(thread):
    """Results built from a thread's time lines, case by case in the default suite's order."""
    text = read(f"{thread}-thread.txt")
    gpu_name = re.search(r"^GPU Name: (.*) $", text, re.MULTILINE).group(1)
    figures = TIME_LINE.findall(text)
    specs = load_suite(profile="default").cases
    assert len(figures) == 2 * len(specs)
    cases = []
    for i, spec in enumerate(specs):
        frameworks = {}
        for name, (per, unit, total, times) in zip(("oneflow", "pytorch"), figures[2 * i: 2 * i + 2]):
            scale = 1000 if unit == "ms" else 1
            frameworks[name] = FrameworkResult(
                total_s=float(total) / scale, per_iter_s=float(per) / scale, times=int(times)
            )
        cases.append(CaseResult(
            id=spec.id, kind=spec.kind, batch_size=spec.batch_size, times=spec.times,
            input_shape=spec.input_shape if spec.kind == "resnet50" else None,
            num_workers=spec.num_workers if spec.kind == "swin_dataloader" else None,
            ddp=spec.ddp, world_size=spec.world_size, frameworks=frameworks,
        ))
    return Results(suite="default", device="cuda", gpu_name=gpu_name, cases=cases)


def judged(results, suite, **options):
    """The verdict of results against suite, and the comment body rendered with it."""
    verdict = judge(results, suite)
    return verdict, render_speed_stats(results, suite, verdict, **options)


def body_of(results, suite, **options):
    return judged(results, suite, **options)[1]


def stats_of(body):
    assert body.startswith(BODY_HEAD) and body.endswith(BODY_TAIL)
    return body[len(BODY_HEAD): -len(BODY_TAIL)]


def resnet_case(case_id, of_ms, pt_ms, batch_size=16, times=100, ddp=False):
    return CaseResult(
        id=case_id, kind="resnet50", batch_size=batch_size, times=times,
        input_shape=[batch_size, 3, 224, 224], ddp=ddp, world_size=2 if ddp else 1,
        frameworks={
            "oneflow": FrameworkResult(total_s=of_ms * times / 1000, per_iter_s=of_ms / 1000, times=times),
            "pytorch": FrameworkResult(total_s=pt_ms * times / 1000, per_iter_s=pt_ms / 1000, times=times),
        },
    )


def results_of(*cases, gpu_name=GPU, error=None):
    return Results(suite="default", device="cuda", gpu_name=gpu_name, cases=list(cases), error=error)


@pytest.fixture(scope="module")
def default_suite():
    return load_suite(profile="default")


@pytest.mark.parametrize("thread", THREADS)
def test_reference_blocks_render_byte_for_byte(thread, default_suite):
    verdict, body = judged(thread_results(thread), default_suite)
    assert body == read(f"{thread}-body.md")
    assert (verdict.score, verdict.passed, verdict.reasons) == (0, True, [])
    marks = {c.id: c.marks for c in verdict.cases}
    assert marks["resnet50-bs16"] == {"oneflow": PASS_MARK, "pytorch": "", "relative": PASS_MARK}
    assert marks["resnet50-ddp-bs16"] == {"oneflow": PASS_MARK, "pytorch": "", "relative": PASS_MARK}
    assert marks["resnet50-bs8"] == {"oneflow": "", "pytorch": "", "relative": PASS_MARK}
    assert marks["swin-dataloader-w4"] == {"oneflow": "", "pytorch": "", "relative": ""}


@pytest.mark.parametrize("thread", THREADS)
def test_expected_body_differs_from_the_thread_only_by_the_text_comparison_defect(thread):
    shown = read(f"{thread}-thread.txt")
    shown_lines = shown[shown.index("GPU Name:"):].split("\n")
    body_lines = stats_of(read(f"{thread}-body.md")).split("\n")
    assert body_lines[2].startswith(" ")  # GitHub hides the space before the first case
    body_lines[2] = body_lines[2][1:]
    assert len(body_lines) == len(shown_lines)
    differing = [(s, b) for s, b in zip(shown_lines, body_lines) if s != b]
    assert len(differing) == 2
    for shown_line, body_line in differing:
        ms = float(re.match(FAIL_MARK + r"OneFlow resnet50 time: ([\d.]+)ms", shown_line).group(1))
        assert ms < 129.0  # a number below the threshold, marked ❌ by comparing "43.4" > "129.0"
        assert body_line == PASS_MARK + shown_line[len(FAIL_MARK):]


def test_relative_speed_is_the_ratio_of_unrounded_times(default_suite):
    body = body_of(thread_results("pr-cu12-release"), default_suite)
    # 25.932 / 40.020 = 0.648; the printed 0.130 / 0.200 would give 0.650
    assert "Relative speed: 0.648 (= 0.130s / 0.200s)" in body.split("\n")


def test_threshold_met_exactly_passes_and_a_relative_miss_scores_one(default_suite):
    verdict, body = judged(results_of(
        resnet_case("resnet50-bs2", 20.0, 19.8, batch_size=2, times=200),  # 0.99 against 0.99
        resnet_case("resnet50-bs1", 20.0, 18.8, batch_size=1, times=200),  # 0.94 against 0.95
    ), default_suite)
    assert stats_of(body).split("\n")[2:] == [
        " OneFlow resnet50 time: 20.0ms (= 4000.0ms / 200, input_shape=[2, 3, 224, 224])",
        "PyTorch resnet50 time: 19.8ms (= 3960.0ms / 200, input_shape=[2, 3, 224, 224])",
        "✔️ Relative speed: 0.99 (= 19.8ms / 20.0ms)",
        "",
        "OneFlow resnet50 time: 20.0ms (= 4000.0ms / 200, input_shape=[1, 3, 224, 224])",
        "PyTorch resnet50 time: 18.8ms (= 3760.0ms / 200, input_shape=[1, 3, 224, 224])",
        "❌ Relative speed: 0.94 (= 18.8ms / 20.0ms)",
    ]
    assert [c.score for c in verdict.cases] == [0, 1]
    assert (verdict.score, verdict.passed) == (1, True)  # one relative miss alone does not fail the job
    assert verdict.reasons == ["resnet50-bs1: relative speed 0.94 is below 0.95"]


def test_two_relative_misses_fail_the_job(default_suite):
    verdict = judge(results_of(
        resnet_case("resnet50-bs2", 20.0, 19.0, batch_size=2, times=200),
        resnet_case("resnet50-bs1", 20.0, 18.8, batch_size=1, times=200),
    ), default_suite)
    assert (verdict.score, verdict.passed) == (2, False)


def test_millisecond_threshold_compares_numbers_and_scores_two(default_suite):
    at_limit, at_limit_body = judged(results_of(resnet_case("resnet50-bs16", 129.0, 200.0)), default_suite)
    assert stats_of(at_limit_body).split("\n")[2].startswith(f" {PASS_MARK}OneFlow resnet50 time: 129.0ms")
    assert (at_limit.score, at_limit.passed) == (0, True)
    over, over_body = judged(results_of(resnet_case("resnet50-bs16", 129.1, 200.0)), default_suite)
    lines = stats_of(over_body).split("\n")
    assert lines[2] == " ❌ OneFlow resnet50 time: 129.1ms (= 12910.0ms / 100, input_shape=[16, 3, 224, 224])"
    assert lines[4] == "✔️ Relative speed: 1.55 (= 200.0ms / 129.1ms)"
    assert (over.score, over.passed) == (2, False)
    assert over.reasons == [f"resnet50-bs16: OneFlow 129.1ms is above 129.0ms on {GPU}"]


def test_millisecond_thresholds_are_keyed_by_gpu_name(tmp_path):
    suite_file = tmp_path / "suite.yml"
    suite_file.write_text(
        "extends: default\ncases:\n  - id: resnet50-bs16\n    max_oneflow_ms:\n      NVIDIA GeForce RTX 3080 "
        "Ti: 40.0\n"
    )
    suite = load_suite(suite_file)
    case = resnet_case("resnet50-bs16", 43.4, 57.2)
    on_3080 = judge(results_of(case, gpu_name=GPU), suite)
    on_other = judge(results_of(case, gpu_name="Tesla T4"), suite)
    assert on_3080.cases[0].marks["oneflow"] == FAIL_MARK and not on_3080.passed
    assert on_other.cases[0].marks["oneflow"] == PASS_MARK and on_other.passed  # the default 129.0


def test_a_failed_case_is_one_line_with_its_error_and_fails_the_job(default_suite):
    oom = resnet_case("resnet50-ddp-bs16", 47.8, 64.5, ddp=True)
    oom.frameworks["oneflow"] = FrameworkResult(error="CUDA out of memory.\n  Tried to allocate 2.00 GiB")
    timeout = CaseResult(id="swin-dataloader-w4", kind="swin_dataloader", batch_size=32, times=200,
                         num_workers=4, error="timed out after 1800 s " + "x" * 400)
    verdict, body = judged(results_of(resnet_case("resnet50-bs8", 26.2, 37.9, 8), timeout, oom),
                           default_suite)
    lines = stats_of(body).split("\n")
    assert lines[6] == "❌ swin dataloader batch 32, num_workers=4: timed out after 1800 s " + "x" * 276 + "…"
    assert len(lines[6]) == len("❌ swin dataloader batch 32, num_workers=4: ") + 300
    assert lines[7:] == [
        "", "❌ resnet50 batch 16, ddp, world size=2: oneflow: CUDA out of memory. Tried to allocate 2.00 GiB"
    ]
    assert [c.score for c in verdict.cases] == [0, 2, 2]
    assert verdict.cases[2].failure == "oneflow: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert (verdict.score, verdict.passed) == (4, False)


def test_a_run_level_error_renders_the_wrapper_with_what_failed(default_suite):
    verdict, body = judged(results_of(error="oneflow import failed:\nlibcuda.so.1 not found"),
                           default_suite)
    assert body == (
        BODY_HEAD + f"GPU Name: {GPU} \n\n ❌ speed job failed: oneflow import failed: libcuda.so.1 not found"
        + BODY_TAIL
    )
    assert not verdict.passed


def test_no_cases_render_the_wrapper_with_what_failed(default_suite):
    verdict, body = judged(results_of(), default_suite)
    assert body == BODY_HEAD + f"GPU Name: {GPU} \n\n ❌ speed job produced no results" + BODY_TAIL
    assert (verdict.passed, verdict.reasons) == (False, ["the speed job produced no results"])


def test_a_run_error_after_some_cases_follows_them(default_suite):
    verdict, body = judged(results_of(resnet_case("resnet50-bs8", 26.2, 37.9, 8), error="killed"),
                           default_suite)
    assert stats_of(body).split("\n")[-2:] == ["", "❌ speed job failed: killed"]
    assert not verdict.passed


def test_cases_the_suite_does_not_know_get_no_marks(default_suite):
    verdict, body = judged(results_of(resnet_case("resnet50-bs32", 90.0, 20.0, 32)), default_suite)
    assert stats_of(body).split("\n")[4] == "Relative speed: 0.22 (= 20.0ms / 90.0ms)"
    assert (verdict.score, verdict.passed) == (0, True)
    assert judge(results_of(resnet_case("resnet50-bs16", 900.0, 20.0)), None).passed


def test_dataloader_cases_take_no_thresholds(tmp_path):
    suite_file = tmp_path / "suite.yml"
    suite_file.write_text("extends: default\ncases:\n  - id: swin-dataloader-w1\n    min_relative_speed: "
                          "1.0\n")
    results = thread_results("pr-cu12-release")
    with pytest.raises(UserError, match="'swin-dataloader-w1': swin_dataloader cases take no thresholds"):
        judged(results, load_suite(suite_file))


def test_docs_preview_comment():
    assert render_docs_preview("https://oneflow-staging.oss-cn-beijing.aliyuncs.com/", "Oneflow-Inc",
                               "oneflow",
                               10348) == (
        "View latest API docs preview at: "
        "https://oneflow-staging.oss-cn-beijing.aliyuncs.com/docs/Oneflow-Inc/oneflow/pr/10348/"
    )
    assert render_docs_preview("https://staging.oneflow.info", "o", "r", 7) == (
        "View latest API docs preview at: https://staging.oneflow.info/docs/o/r/pr/7/"
    )


def test_automerge_removed_comment():
    assert render_automerge_removed("cuda-module") == (
        "CI failed when running job: cuda-module. PR label automerge has been removed"
    )
    assert render_automerge_removed("Build cu116", label="auto-merge") == (
        "CI failed when running job: Build cu116. PR label auto-merge has been removed"
    )


def test_a_user_template_folder_replaces_only_the_templates_it_holds(tmp_path, default_suite):
    (tmp_path / "docs_preview.md.j2").write_text("Docs for #{{ number }}: {{ base_url }}/{{ owner }}/{{ repo "
                                                 "}}\n")
    (tmp_path / "speed_stats_macros.md.j2").write_text(
        read_builtin("speed_stats_macros.md.j2").replace("GPU Name: {{ gpu_name }}", "GPU: {{ gpu_name }}")
    )
    assert render_docs_preview("https://x", "o", "r", 3, templates_dir=tmp_path) == "Docs for #3: https://x/o/r\n"
    assert render_automerge_removed("cuda-module",
                                    templates_dir=tmp_path).startswith("CI failed when running job")
    body = body_of(thread_results("pr-revert"), default_suite, templates_dir=tmp_path)
    assert body == read("pr-revert-body.md").replace("GPU Name: ", "GPU: ")


def builtin_path(name):
    return Path(__file__).parents[1] / "templates" / name


def read_builtin(name):
    return builtin_path(name).read_text(encoding="utf-8")


@pytest.mark.parametrize("template, line, message", [
    ("{# a note #}\n{{ gpu_nmae }}\n", 2, "UndefinedError: 'gpu_nmae' is undefined"),
    ("ok\n\n{% if %}\n", 3, "Expected an expression, got 'end of statement block'"),
    ("{% include 'missing.md.j2' %}", 1, "template 'missing.md.j2' not found in"),
])
def test_template_errors_name_the_template_file_and_line(tmp_path, default_suite, template, line, message):
    (tmp_path / "speed_stats.md.j2").write_text(template)
    with pytest.raises(UserError) as caught:
        judged(thread_results("pr-revert"), default_suite, templates_dir=tmp_path)
    text = str(caught.value)
    assert text.startswith(f"{tmp_path / 'speed_stats.md.j2'}:{line}: ") and message in text
    assert "\n" not in text


def test_an_error_in_a_user_macro_names_the_macro_file_and_its_caller(tmp_path, default_suite):
    macros = read_builtin("speed_stats_macros.md.j2")
    (tmp_path / "speed_stats_macros.md.j2").write_text(macros.replace("s(of.total_s)", "s(of.total_sec)"))
    macros_file, wrapper = tmp_path / "speed_stats_macros.md.j2", builtin_path("speed_stats.md.j2")
    used_at = line_of(macros, "{% macro s(value) %}")
    passed_at = line_of(macros, "s(of.total_s)")
    called_at = line_of(wrapper.read_text(encoding="utf-8"), "kinds[case.macro](case)")
    with pytest.raises(UserError) as caught:
        judged(thread_results("pr-revert"), default_suite, templates_dir=tmp_path)
    assert str(caught.value) == (
        f"{macros_file}:{used_at}: UndefinedError: 'speedstats.render.FrameworkView object' has no attribute "
        f"'total_sec' (called from {macros_file}:{passed_at}, {wrapper}:{called_at})"
    )


def line_of(text, fragment):
    return 1 + next(i for i, line in enumerate(text.split("\n")) if fragment in line)


def test_a_missing_template_folder_is_a_user_error(tmp_path, default_suite):
    with pytest.raises(UserError, match="nowhere: template folder not found"):
        judged(thread_results("pr-revert"), default_suite, templates_dir=tmp_path / "nowhere")


def test_a_cancelled_run_says_so_after_the_cases_it_measured(default_suite):
    measured = results_of(resnet_case("resnet50-bs8", 26.2, 37.9, 8))
    measured.cancelled = True
    reloaded = results_model.loads(measured.to_json())  # the mark survives results.json
    assert reloaded.cancelled is True
    verdict, body = judged(reloaded, default_suite)
    assert stats_of(body).split("\n")[-3:] == [
        "✔️ Relative speed: 1.45 (= 37.9ms / 26.2ms)", "",
        "❌ speed job cancelled before it finished: only the cases above were measured"]
    assert not verdict.passed
    assert verdict.reasons == ["the speed job was cancelled before its last case"]

    nothing = body_of(results_of(), default_suite)
    nothing_cancelled = results_of()
    nothing_cancelled.cancelled = True
    assert body_of(nothing_cancelled, default_suite) == nothing.replace(
        "speed job produced no results", "speed job cancelled before it measured any case")


def test_cancelled_must_be_a_boolean():
    data = results_of().to_dict()
    assert "cancelled" in data and results_model.results_from_dict(data).cancelled is False
    data["cancelled"] = "yes"
    with pytest.raises(UserError, match=r"^results: field 'cancelled' must be true or false, got 'yes'$"):
        results_model.results_from_dict(data)


HOSTILE = ("x\n ``` \n\n</details>\n\n@maintainer ![img](https://e.test/i.png) \x1b[31mred\x1b[0m "
           "\x1b]8;;https://e.test\x07link\x1b]8;;\x07 ~~~")


def test_text_from_a_results_file_cannot_leave_the_code_fence(default_suite):
    import json

    from speedstats import results as results_model

    data = results_of(resnet_case("resnet50-bs16", 48.0, 60.0)).to_dict()
    data["gpu_name"] = "GPU " + HOSTILE
    failed = dict(data["cases"][0], id="resnet50-bs16" + HOSTILE, error="oneflow: " + HOSTILE, frameworks={})
    data["cases"].append(failed)
    body = body_of(results_model.loads(json.dumps(data)), default_suite)
    assert body.count("```") == 2 and body.count("~~~") == 0
    assert body.count("</details>") == 1 and body.count("<details>") == 1
    assert "\x1b" not in body and "\x07" not in body
    stats = stats_of(body).split("\n")
    safe = "x ˋˋˋ ‹/details> @maintainer ![img](https://e.test/i.png) red link ˜˜˜"
    assert stats[0] == f"GPU Name: GPU {safe} "
    assert stats[-1] == f"❌ resnet50 batch 16 (case resnet50-bs16{safe}): oneflow: {safe}"
    assert len(stats) == 7  # GPU line, blank, three figure lines, blank, the failed case's one line


def test_two_failed_cases_of_the_same_batch_size_read_differently(default_suite):
    usual = CaseResult(id="resnet50-bs16", kind="resnet50", batch_size=16, times=100,
                       input_shape=[16, 3, 224, 224], error="crashed")
    other = CaseResult(id="resnet50-bs16-channels-last", kind="resnet50", batch_size=16, times=100,
                       input_shape=[16, 3, 224, 224], error="crashed")
    lines = stats_of(body_of(results_of(usual, other), None)).split("\n")
    assert lines[2:] == [" ❌ resnet50 batch 16: crashed", "",
                         "❌ resnet50 batch 16 (case resnet50-bs16-channels-last): crashed"]
    from speedstats.parse import parse_speed_stats

    parsed = parse_speed_stats(body_of(results_of(usual, other), None))
    assert [(c.id, c.error) for c in parsed.cases] == [("resnet50-bs16", "crashed"),
                                                       ("resnet50-bs16-channels-last", "crashed")]


FORK_TEXT = ("x ``` </details> @octocat ![p](https://evil.example/p.png) [l](https://evil.example) "
             "&#64;octocat")


def test_a_user_template_cannot_print_a_string_of_the_data_unescaped(tmp_path):
    # The environment escapes every string it is given or reaches through an object (the raw results,
    # a case view), whatever the template does with it: a user's template has no way to print it live.
    (tmp_path / "speed_stats.md.j2").write_text(
        "{{ results.gpu_name }}|{{ results.cases[0].id|upper }}|{{ 'id: ' ~ results.cases[0].id }}|"
        "{{ cases[0].kind }}|{{ results.failed_cases|length }}")
    (tmp_path / "speed_stats_notes.md.j2").write_text("")
    (tmp_path / "machine_notes.md.j2").write_text("")
    results = results_of(resnet_case(FORK_TEXT, 40.0, 50.0), gpu_name=FORK_TEXT)
    body = render_speed_stats(results, None, judge(results, None), templates_dir=tmp_path)
    gpu, upper, joined, kind, failed = body.split("|")
    assert gpu == ("x \u02cb\u02cb\u02cb \u2039/details> @\u2060octocat "
                   "!\\[p\\](https:/\u2060/evil.example/p.png) "
                   "\\[l\\](https:/\u2060/evil.example) \\&#64;octocat")
    assert upper == gpu.upper() and joined == f"id: {gpu}" and (kind, failed) == ("resnet50", "0")


def test_the_projects_own_words_and_safe_text_print_as_they_are():
    from speedstats.render import render_template
    from speedstats.text import fence_safe, trusted

    assert render_template("automerge_removed.md.j2", {"job": "[x](y)", "label": trusted("auto|merge")}) == (
        "CI failed when running job: \\[x\\](y). PR label auto|merge has been removed")
    assert render_template("automerge_removed.md.j2", {"job": fence_safe("[x](y)", 20), "label": "a"}) == (
        "CI failed when running job: [x](y). PR label a has been removed")
