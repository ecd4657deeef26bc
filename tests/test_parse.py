"""Reading Speed stats back: the comment body, the text GitHub shows, the old bot's raw log."""

from pathlib import Path

import pytest

from speedstats import results as results_model
from speedstats.casekinds import case_id_for
from speedstats.errors import UserError
from speedstats.parse import parse_blocks, parse_speed_stats
from speedstats.render import render_speed_stats
from speedstats.results import CaseResult, FrameworkResult, Results
from speedstats.suite import load_suite
from speedstats.verdict import judge

DATA = Path(__file__).parent / "data"
THREADS = ["pr-cu12-release", "pr-revert"]
FORMS = ["body.md", "thread.txt", "raw.log"]
GPU = "NVIDIA GeForce RTX 3080 Ti"


def read(name):
    return (DATA / name).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def default_suite():
    return load_suite(profile="default")


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("thread", THREADS)
def test_parse_then_render_gives_back_the_reference_block(thread, form, default_suite):
    results = parse_speed_stats(read(f"{thread}-{form}"), where=form)
    verdict = judge(results, default_suite)
    assert render_speed_stats(results, default_suite, verdict) == read(f"{thread}-body.md")
    assert verdict.passed


def test_parsed_results_carry_the_printed_figures_exactly(default_suite):
    results = parse_speed_stats(read("pr-cu12-release-thread.txt"))
    assert (results.suite, results.device, results.gpu_name, results.error) == ("default", "cuda", GPU, None)
    assert [c.id for c in results.cases] == [spec.id for spec in default_suite.cases]
    first = results.cases[0]
    assert (first.kind, first.batch_size, first.times, first.input_shape, first.ddp, first.world_size) == (
        "resnet50", 16, 100, [16, 3, 224, 224], False, 1
    )
    assert first.frameworks["oneflow"] == FrameworkResult(total_s=4.3405, per_iter_s=0.0434, times=100)
    assert first.frameworks["pytorch"] == FrameworkResult(total_s=5.7241, per_iter_s=0.0572, times=100)
    swin = results.cases[5]
    assert (swin.kind, swin.batch_size, swin.num_workers, swin.times) == ("swin_dataloader", 32, 1, 200)
    assert swin.frameworks["oneflow"] == FrameworkResult(total_s=40.02, per_iter_s=0.2, times=200)
    ddp = results.cases[-1]
    assert (ddp.id, ddp.ddp, ddp.world_size, ddp.batch_size, ddp.times) == ("resnet50-ddp-bs1", True, 2, 1,
                                                                            200)
    assert ddp.frameworks["pytorch"] == FrameworkResult(total_s=6.9388, per_iter_s=0.0347, times=200)


def test_parsed_results_survive_the_json_file():
    results = parse_speed_stats(read("pr-revert-raw.log"))
    assert results_model.loads(results.to_json()) == results


def test_the_three_forms_give_the_same_results():
    for thread in THREADS:
        parsed = [parse_speed_stats(read(f"{thread}-{form}")) for form in FORMS]
        assert parsed[0] == parsed[1] == parsed[2]


def test_marks_in_the_input_are_ignored(default_suite):
    unmarked = read("pr-cu12-release-thread.txt").replace("✔️ ", "").replace("❌ ", "")
    all_failed = "\n".join("❌ " + line if line.strip() else line for line in unmarked.split("\n"))
    assert parse_speed_stats(all_failed) == parse_speed_stats(unmarked) == parse_speed_stats(
        read("pr-cu12-release-thread.txt")
    )


def test_failure_lines_of_our_own_comments_parse_back(default_suite):
    results = parse_speed_stats(read("pr-revert-body.md"))
    results.cases[0].frameworks["oneflow"] = FrameworkResult(error="CUDA out of memory")
    results.cases[6] = CaseResult(id="swin-dataloader-w4", kind="swin_dataloader", batch_size=32, times=200,
                                  num_workers=4, error="timed out after 1800 s")
    results.cases[8].frameworks["pytorch"] = FrameworkResult(error="NCCL error: unhandled system error")
    body = render_speed_stats(results, default_suite, judge(results, default_suite))
    reparsed = parse_speed_stats(body)
    assert [c.failure for c in reparsed.cases] == [c.failure for c in results.cases]
    assert [c.id for c in reparsed.cases] == [c.id for c in results.cases]
    assert reparsed.cases[8].times == 100  # not printed: the default suite's
    assert render_speed_stats(reparsed, default_suite, judge(reparsed, default_suite)) == body


@pytest.mark.parametrize("results", [
    Results(suite="default", device="cuda", gpu_name=GPU, error="oneflow import failed"),
    Results(suite="default", device="cuda", gpu_name=GPU),
])
def test_run_level_failure_lines_parse_back(results, default_suite):
    body = render_speed_stats(results, default_suite, judge(results, default_suite))
    reparsed = parse_speed_stats(body)
    assert (reparsed.gpu_name, reparsed.cases, reparsed.error) == (GPU, [], results.error)
    assert render_speed_stats(reparsed, default_suite, judge(reparsed, default_suite)) == body


def test_the_old_bots_empty_comment_parses_to_no_results():
    results = parse_speed_stats("[github-actions]\n\nSpeed stats:\n")
    assert (results.gpu_name, results.cases, results.error) == ("unknown", [], None)


def test_a_raw_log_without_a_gpu_line_takes_the_given_gpu_name():
    raw = "\n".join(line for line in read("pr-revert-raw.log").split("\n") if "GPU Name" not in line)
    assert parse_speed_stats(raw).gpu_name == "unknown"
    assert parse_speed_stats(raw, gpu_name="Tesla T4").gpu_name == "Tesla T4"
    assert parse_speed_stats(raw,
                             gpu_name="Tesla T4").cases == parse_speed_stats(read("pr-revert-raw.log")).cases


def test_several_blocks_need_a_choice():
    text = read("pr-cu12-release-thread.txt") + "\n\n[github-actions]\n\n" + read("pr-revert-thread.txt")
    assert [len(b.cases) for b in parse_blocks(text)] == [13, 13]
    with pytest.raises(UserError, match="^two.txt: 2 Speed stats blocks found; choose one with --block N$"):
        parse_speed_stats(text, where="two.txt")
    assert parse_speed_stats(text, block=2) == parse_speed_stats(read("pr-revert-thread.txt"))
    with pytest.raises(UserError, match="--block 3: there are 2 Speed stats block"):
        parse_speed_stats(text, block=3)


def test_text_without_speed_stats_is_an_error():
    with pytest.raises(UserError, match="^notes.txt: no Speed stats found$"):
        parse_speed_stats("View latest API docs preview at: https://x/docs/o/r/pr/1/\n", where="notes.txt")


def cut(text, line_start, keep):
    """text with the line starting with line_start cut to its first `keep` characters."""
    lines = text.split("\n")
    index = next(i for i, line in enumerate(lines) if line.startswith(line_start))
    lines[index] = lines[index][:keep]
    return "\n".join(lines), index + 1


@pytest.mark.parametrize("line_start, keep", [
    ("PyTorch resnet50 time: 37.9ms", 60),
    ("OneFlow swin dataloader time: 0.055s", 50),
    ("✔️ Relative speed: 1.86", 25),
    ("OneFlow resnet50 time: 23.9ms", 19),
    ("GPU Name", 6),
    ("PyTorch swin dataloader time: 0.017s", 7),
])
def test_a_truncated_stats_line_is_an_error_naming_its_line(line_start, keep):
    text, number = cut(read("pr-cu12-release-thread.txt"), line_start, keep)
    shown = text.split("\n")[number - 1].strip().lstrip("✔️❌ ")
    with pytest.raises(UserError) as caught:
        parse_speed_stats(text, where="thread.txt")
    assert str(caught.value) == f"thread.txt: line {number}: truncated or malformed stats line: {shown!r}"


def test_a_case_cut_off_at_the_end_is_an_error_naming_its_first_line():
    lines = read("pr-cu12-release-thread.txt").split("\n")
    with pytest.raises(UserError,
                       match=f"^t: line {len(lines) - 2}: the case is cut off: no PyTorch line follows$"):
        parse_speed_stats("\n".join(lines[:-2]), where="t")
    with pytest.raises(UserError,
                       match=f"^t: line {len(lines) - 2}: the case is cut off: no Relative speed line"):
        parse_speed_stats("\n".join(lines[:-1]), where="t")


def test_a_case_interrupted_by_another_is_an_error():
    text = read("pr-cu12-release-thread.txt").replace(
        "PyTorch resnet50 time: 37.9ms (= 3785.4ms / 100, input_shape=[8, 3, 224, 224])\n", ""
    )
    number = text.split("\n").index("✔️ Relative speed: 1.45 (= 37.9ms / 26.2ms)") + 1
    with pytest.raises(UserError,
                       match=f"^t: line {number}: a Relative speed line must follow a PyTorch line"):
        parse_speed_stats(text, where="t")


def test_a_relative_line_that_disagrees_with_its_case_is_an_error():
    text = read("pr-revert-thread.txt").replace("(= 57.7ms / 43.7ms)", "(= 57.7ms / 43.8ms)")
    with pytest.raises(UserError, match=r"line 19: the Relative speed line's times do not match the case's "
                                        r"\(57\.7ms / 43\.7ms\)"):
        parse_speed_stats(text)


def test_mismatched_framework_lines_are_an_error():
    text = read("pr-revert-thread.txt").replace(
        "PyTorch resnet50 time: 57.7ms (= 5771.2ms / 100, input_shape=[16, 3, 224, 224])",
        "PyTorch resnet50 time: 57.7ms (= 5771.2ms / 100, input_shape=[8, 3, 224, 224])",
    )
    with pytest.raises(UserError,
                       match="line 18: the PyTorch line does not match the OneFlow line at line 17"):
        parse_speed_stats(text)


def test_case_ids_follow_the_default_suite(default_suite):
    ids = [spec.id for spec in default_suite.cases]
    made = [
        case_id_for(s.kind, s.batch_size, ddp=s.ddp, num_workers=s.num_workers, world_size=s.world_size)
        for s in default_suite.cases
    ]
    assert made == ids
    assert case_id_for("resnet50", 16, ddp=True, world_size=4) == "resnet50-ddp4-bs16"
