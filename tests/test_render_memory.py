"""The optional memory lines of the Speed stats comment (render --memory, suite field show_memory)."""

import pytest

from speedstats import cli
from speedstats.errors import UserError
from speedstats.parse import parse_speed_stats
from speedstats.render import render_speed_stats
from speedstats.results import CaseResult, FrameworkResult, Results
from speedstats.suite import load_suite
from speedstats.verdict import judge

MIB = 2**20


def results():
    resnet = CaseResult(
        id="resnet50-bs16", kind="resnet50", batch_size=16, times=100, input_shape=[16, 3, 224, 224],
        frameworks={
            "oneflow": FrameworkResult(total_s=4.3405, per_iter_s=0.043405, times=100,
                                       peak_memory_bytes=2461 * MIB, memory_kind="nvml-process"),
            "pytorch": FrameworkResult(total_s=5.7241, per_iter_s=0.057241, times=100,
                                       peak_memory_bytes=int(1834.6 * MIB), memory_kind="cuda-allocator"),
        },
    )
    dataloader = CaseResult(
        id="swin-dataloader-w1", kind="swin_dataloader", batch_size=32, times=200, num_workers=1,
        frameworks={
            "oneflow": FrameworkResult(total_s=40.02, per_iter_s=0.2001, times=200,
                                       peak_memory_bytes=300 * MIB + 1, memory_kind="rss"),
            "pytorch": FrameworkResult(total_s=25.932, per_iter_s=0.12966, times=200),  # no figure: no line
        },
    )
    return Results(suite="default", device="cuda", gpu_name="NVIDIA GeForce RTX 3080 Ti",
                   cases=[resnet, dataloader])


PLAIN_CASES = (
    " ✔️ OneFlow resnet50 time: 43.4ms (= 4340.5ms / 100, input_shape=[16, 3, 224, 224])\n"
    "PyTorch resnet50 time: 57.2ms (= 5724.1ms / 100, input_shape=[16, 3, 224, 224])\n"
    "✔️ Relative speed: 1.32 (= 57.2ms / 43.4ms)\n"
)
EXPECTED_WITH_MEMORY = (
    "<details>\n <summary>Speed stats:</summary>\n\n ``` \nGPU Name: NVIDIA GeForce RTX 3080 Ti \n\n"
    + PLAIN_CASES
    + "OneFlow GPU used (rank 0): 2461 MiB\n"
    "PyTorch GPU used (rank 0, allocator peak): 1835 MiB\n"
    "\n"
    "OneFlow swin dataloader time: 0.200s (= 40.020s / 200, num_workers=1)\n"
    "PyTorch swin dataloader time: 0.130s (= 25.932s / 200, num_workers=1)\n"
    "Relative speed: 0.648 (= 0.130s / 0.200s)\n"
    "OneFlow RAM used (rank 0, peak RSS): 300 MiB\n"
    " ``` \n\n</details>"
)


def test_memory_lines_follow_each_case_byte_for_byte():
    suite = load_suite(profile="default")
    body = render_speed_stats(results(), suite, judge(results(), suite), show_memory=True)
    assert body == EXPECTED_WITH_MEMORY


def test_without_the_option_the_block_is_unchanged():
    suite = load_suite(profile="default")
    plain = render_speed_stats(results(), suite, judge(results(), suite))
    assert "used (rank 0" not in plain
    assert plain == render_speed_stats(results(), suite, judge(results(), suite), show_memory=False)
    without_lines = "\n".join(line for line in EXPECTED_WITH_MEMORY.split("\n") if "used (rank 0" not in line)
    assert plain == without_lines


def test_memory_lines_do_not_disturb_parsing_the_comment_back():
    parsed = parse_speed_stats(EXPECTED_WITH_MEMORY)
    assert [c.id for c in parsed.cases] == ["resnet50-bs16", "swin-dataloader-w1"]
    assert parsed.cases[0].frameworks["oneflow"].total_s == pytest.approx(4.3405)


def test_render_memory_flag_and_suite_field(tmp_path, capsys):
    path = tmp_path / "results.json"
    path.write_text(results().to_json(), encoding="utf-8")
    out = tmp_path / "body.md"
    assert cli.main(["render", str(path), "--memory", "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == EXPECTED_WITH_MEMORY

    suite = tmp_path / "suite.yml"
    suite.write_text("extends: default\nshow_memory: true\n", encoding="utf-8")
    assert load_suite(str(suite)).show_memory is True
    assert load_suite(profile="default").show_memory is False
    assert cli.main(["render", str(path), "--suite", str(suite), "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == EXPECTED_WITH_MEMORY

    suite.write_text("extends: default\nshow_memory: sometimes\n", encoding="utf-8")
    with pytest.raises(UserError, match="field 'show_memory' must be true or false"):
        load_suite(str(suite))
