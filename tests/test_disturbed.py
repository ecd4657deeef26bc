"""A case measured on a disturbed machine: the line after the block (exact bytes), the verdict, exit 7;
an unstable figure's note; the suite's `disturbance:` settings."""

import json
import os
from pathlib import Path

import pytest

from helpers import BLOCK, results, speedstats
from speedstats import pipeline
from speedstats import results as results_model
from speedstats.errors import EXIT_DISTURBED, UserError
from speedstats.suite import load_suite, suite_from_dict

ROOT = Path(__file__).resolve().parents[1]

WARNING_LINE = (
    "\u26a0\ufe0f resnet50-bs2: other processes used 1.0 of 2 cores during PyTorch's rounds; "
    "its figures are not comparable"
)


def test_a_disturbed_case_renders_the_warning_after_the_block_and_render_exits_7(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(results().to_json())
    proc = speedstats("render", str(path), "--profile", "smoke")
    assert proc.stdout.encode() == f"{BLOCK}\n\n{WARNING_LINE}".encode()
    assert proc.returncode == EXIT_DISTURBED == 7
    assert (
        "speedstats:   resnet50-bs2: measured on a disturbed machine: other processes used 1.0 of 2 cores "
        "during PyTorch's rounds"
    ) in proc.stderr.splitlines()
    quiet = tmp_path / "quiet.json"
    quiet.write_text(results(disturbed=False).to_json())
    proc = speedstats("render", str(quiet), "--profile", "smoke")
    assert (proc.stdout, proc.returncode) == (BLOCK, 0)  # the old block, byte for byte, and nothing after it


def test_run_reports_a_disturbed_case_with_exit_7_and_the_comment_says_so(tmp_path):
    suite = load_suite(profile="smoke")

    def run_steps(measured):
        verdict = pipeline.judge(measured, suite)
        pipeline.write_comment(tmp_path, pipeline.render_speed_stats(measured, suite, verdict), True, print)
        return pipeline.exit_status(measured, verdict)

    assert run_steps(results()) == EXIT_DISTURBED
    assert (tmp_path / "comment.md").read_bytes() == f"{BLOCK}\n\n{WARNING_LINE}".encode()
    assert run_steps(results(disturbed=False)) == 0


def test_disturbance_survives_results_json():
    raw = json.loads(results().to_json())
    again = results_model.results_from_dict(raw)
    assert again.cases[0].disturbance == results().cases[0].disturbance
    raw["cases"][0]["disturbance"] = {"text": 3}
    with pytest.raises(UserError, match=r"\.disturbance: field 'text' must be a string, got 3"):
        results_model.results_from_dict(raw)


def test_an_unstable_figure_gets_a_note():
    from speedstats.render import render_speed_stats
    from speedstats.verdict import judge

    # On the CPU, whose rounds scatter 10-25% on a quiet machine, figures are unstable above 30%.
    measured, suite = results(disturbed=False, pytorch_rounds=(3600.0, 5134.0,
                                                               7900.0)), load_suite(profile="smoke")
    body = render_speed_stats(measured, suite, judge(measured, suite))
    assert body == (
        f"{BLOCK}\n\n\u26a0\ufe0f Unstable figures, their rounds scatter with a coefficient of variation "
        "above 30%: resnet50-bs2 PyTorch 39.3%"
    )  # sd 2179.2 / mean 5544.7


SUITE = {"name": "t", "cases": [{"id": "a", "kind": "resnet50", "batch_size": 1, "times": 1}]}


def test_the_suite_sets_when_a_round_is_disturbed():
    suite = suite_from_dict(
        dict(
            SUITE,
            disturbance={
                "max_other_cores": 0.5,
                "remeasure_rounds": 0,
                "allowed_clock_events": ["gpu_idle", "sw_power_cap"],
            },
        ),
        "t.yml",
    )
    assert (suite.disturbance.max_other_cores, suite.disturbance.remeasure_rounds) == (0.5, 0)
    assert suite.disturbance.allowed_clock_events == ["gpu_idle", "sw_power_cap"]
    assert suite.disturbance.min_sm_clock_ratio == 0.75 and suite.disturbance.max_cv == 0.10
    assert suite.disturbance.cv_limit("cuda:0") == 0.10 and suite.disturbance.cv_limit("cpu") == 0.30
    cpu = suite_from_dict(dict(SUITE, disturbance={"max_cv_cpu": 0.5}), "t.yml").disturbance
    assert (cpu.cv_limit("cpu"), cpu.cv_limit("cuda")) == (0.5, 0.10)
    with pytest.raises(UserError, match="max_cv_cpu"):
        suite_from_dict(dict(SUITE, disturbance={"max_cv_cpu": -1}), "t.yml")


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("max_other_cores", -1, "field 'disturbance.max_other_cores' must be at least 0, got -1"),
        (
            "remeasure_rounds",
            1.5,
            "field 'disturbance.remeasure_rounds' must be an integer, got 1.5",
        ),
        (
            "allowed_clock_events",
            ["idle"],
            "field 'disturbance.allowed_clock_events' must be a list of gpu_idle, ",
        ),
        (
            "foreign_gpu_processes",
            "no",
            "field 'disturbance.foreign_gpu_processes' must be true or false, got 'no'",
        ),
        ("max_cores", 1, "unknown field 'disturbance.max_cores' (did you mean max_other_cores?)"),
    ],
)
def test_bad_disturbance_settings_name_the_field(field, value, message):
    with pytest.raises(UserError) as error:
        suite_from_dict(dict(SUITE, disturbance={field: value}), "t.yml")
    assert str(error.value).startswith(f"t.yml: {message}")


def test_the_suite_real_runs_in_tests_get_lets_every_core_be_busy(tmp_path):
    """Tests of real runs that are not about the machine (busy_machine.tolerant) pass on a shared one."""
    from busy_machine import tolerant
    from speedstats.machine import DisturbanceSpec, round_disturbance

    path = tmp_path / "suite.yml"
    path.write_text(tolerant("extends: smoke\n"))
    cores = os.cpu_count()
    every_core_busy = {"cpu": {"other_cores": float(cores), "cores": cores}}
    assert round_disturbance(every_core_busy, load_suite(str(path)).disturbance) == []
    assert round_disturbance(every_core_busy, DisturbanceSpec())[0]["kind"] == "cpu"
