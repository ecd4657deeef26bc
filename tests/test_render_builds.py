"""The comment of a run that measured builds: the block, the head-vs-base table, confirmations, builds."""

import json

import pytest

from speedstats import results as results_model
from speedstats.analysis.paired import judge_paired
from speedstats.errors import UserError
from speedstats.render import build_text, render_speed_stats
from speedstats.results import CaseResult, FrameworkResult, Results
from speedstats.suite import load_suite, suite_from_dict
from speedstats.verdict import judge

HEAD = [0.30, 0.31, 0.33, 0.32, 0.30]
BASE = [0.25, 0.26, 0.25, 0.27, 0.25]
PYTORCH = [0.18, 0.181, 0.179, 0.18, 0.182, 0.19]
WHEEL = "oneflow-0.9.0+slow-cp310-cp310-manylinux2014_x86_64.whl"
BUILDS = {
    "oneflow": {"role": "oneflow", "family": "oneflow", "source": "wheel",
                "packages": {"oneflow": {"version": "0.9.0+slow", "git_commit": "381b12c", "wheel": WHEEL,
                                         "sha256": "ab" * 32},
                             "flowvision": {"version": "0.2.1"}}},
    "oneflow_base": {"role": "oneflow_base", "family": "oneflow", "source": "installed",
                     "packages": {"oneflow": {"version": "0.9.0", "git_commit": "381b12c"}}},
    "pytorch": {"role": "pytorch", "family": "pytorch", "source": "requirement",
                "packages": {"torch": {"version": "2.14.1", "git_commit": "deadbeefcafe1234",
                                       "requirement": "torch==2.14.1"},
                             "torchvision": {"version": "0.29.1"}}},
}


def fw(rounds, times=10):
    per_iter = sorted(rounds)[len(rounds) // 2]
    return FrameworkResult(total_s=per_iter * times, per_iter_s=per_iter, times=times, rounds_s=list(rounds),
                           round_iterations=2)


def case(case_id, batch):
    record = CaseResult(id=case_id, kind="resnet50", batch_size=batch, times=10, input_shape=[batch, 3, 64, 64])
    record.frameworks = {"oneflow": fw(HEAD), "oneflow_base": fw(BASE), "pytorch": fw(PYTORCH)}
    record.paired = judge_paired(HEAD, BASE)
    return record


@pytest.fixture
def run():
    cases = [case("resnet50-bs2", 2), case("resnet50-bs1", 1)]
    cases[0].confirmation = {"flags": ["resnet50-bs2: OneFlow +24.0% against the base build"],
                             "status": "confirmed"}
    cases[1].paired = judge_paired(BASE, BASE)
    cases[1].confirmation = {"flags": ["resnet50-bs1: relative speed 0.20 is below 0.25"], "status": "cleared"}
    return Results(suite="smoke", device="cpu", gpu_name="CPU", cases=cases, builds=BUILDS)


EXPECTED_NOTES = """\
Against the base build, measured in the same run: median time per iteration; the change is the median \
of the per-round ratios head/base. A regression is a slowdown whose whole 95% interval lies above +4%. \
PyTorch is the control: its first rounds against its last, a change there says the machine moved during the run.

| Case | Base | Head | Change (95% interval) | Verdict |
| --- | ---: | ---: | --- | --- |
| resnet50-bs2 OneFlow | 250.0ms | 310.0ms | +20.0% (+18.5% to +32.0%) | \u274c regression, confirmed |
| resnet50-bs2 PyTorch (control) | 180.0ms | 182.0ms | +1.1% (-0.6% to +6.1%) | steady |
| resnet50-bs1 OneFlow | 250.0ms | 310.0ms | +0.0% (+0.0% to +0.0%) | no change |
| resnet50-bs1 PyTorch (control) | 180.0ms | 182.0ms | +1.1% (-0.6% to +6.1%) | steady |

\u274c Confirmed in fresh processes: resnet50-bs2 (OneFlow +24.0% against the base build)
Cleared in fresh processes: resnet50-bs1 (flagged: relative speed 0.20 is below 0.25)

Builds: head OneFlow 0.9.0+slow (git 381b12c, """ + WHEEL + """ sha256 abababababab) with flowvision 0.2.1; \
base OneFlow 0.9.0 (git 381b12c, installed); PyTorch 2.14.1 (git deadbeefcafe, torch==2.14.1) with torchvision 0.29.1"""


def test_the_block_stays_exact_and_the_notes_follow_it(run):
    suite = load_suite(None, "smoke")
    verdict = judge(run, suite)
    block, notes = render_speed_stats(run, suite, verdict).split("\n\n</details>\n\n")
    assert block.endswith(" ``` ") and "OneFlow resnet50 time: 310.0ms (= 3100.0ms / 10" in block
    assert notes == EXPECTED_NOTES
    assert not verdict.passed and verdict.regressions == ["resnet50-bs2"]
    assert "resnet50-bs2: OneFlow +20.0% against the base build" in verdict.reasons


def test_results_with_builds_round_trip_through_json(run):
    again = results_model.loads(run.to_json())
    assert again == run
    body = render_speed_stats(run, None, judge(run, None))
    assert render_speed_stats(again, None, judge(again, None)) == body


def test_without_a_baseline_only_the_builds_line_follows():
    record = case("resnet50-bs2", 2)
    del record.frameworks["oneflow_base"]
    record.paired = None
    builds = {k: v for k, v in BUILDS.items() if k != "oneflow_base"}
    results = Results(suite="smoke", device="cpu", gpu_name="CPU", cases=[record], builds=builds)
    body = render_speed_stats(results, None, judge(results, None))
    assert body.endswith("</details>\n\nBuilds: OneFlow 0.9.0+slow (git 381b12c, " + WHEEL + " sha256 "
                         "abababababab) with flowvision 0.2.1; PyTorch 2.14.1 (git deadbeefcafe, torch==2.14.1) "
                         "with torchvision 0.29.1")


@pytest.mark.parametrize("only, line", [
    ("oneflow", "OneFlow resnet50 time: 310.0ms (= 3100.0ms / 10, input_shape=[2, 3, 64, 64])"),
    ("pytorch", "PyTorch resnet50 time: 181.0ms (= 1810.0ms / 10, input_shape=[2, 3, 64, 64])"),
])
def test_a_subset_of_the_frameworks_prints_only_their_lines(only, line):
    record = case("resnet50-bs2", 2)
    record.frameworks = {only: record.frameworks[only]}
    record.paired = None
    results = Results(suite="smoke", device="cpu", gpu_name="CPU", cases=[record])
    suite = load_suite(None, "smoke")
    verdict = judge(results, suite)
    assert render_speed_stats(results, suite, verdict) == (
        f"<details>\n <summary>Speed stats:</summary>\n\n ``` \nGPU Name: CPU \n\n {line}\n ``` \n\n</details>")
    assert verdict.passed and record.failure is None and record.relative_speed is None


def test_build_text_names_a_requirement_and_an_unknown_version():
    assert build_text({"family": "oneflow", "source": "requirement",
                       "packages": {"oneflow": {"version": "0.9.1.dev1", "requirement": "oneflow==0.9.1.dev1"}}}) \
        == "OneFlow 0.9.1.dev1 (oneflow==0.9.1.dev1)"
    assert build_text({"family": "pytorch", "source": "installed", "packages": {}}) \
        == "PyTorch unknown version (installed)"


def test_suite_builds_fields():
    base = {"cases": [{"id": "a", "kind": "resnet50", "batch_size": 1, "times": 1}]}
    suite = suite_from_dict(dict(base, builds={"oneflow": "wheelhouse/oneflow-*.whl", "baseline_oneflow":
                                               "oneflow==0.9.0", "pip_args": "--extra-index-url http://x"},
                                 confirm=False), "s.yml")
    assert suite.builds.oneflow == "wheelhouse/oneflow-*.whl" and suite.builds.pytorch == "installed"
    assert suite.builds.baseline_oneflow == "oneflow==0.9.0" and suite.confirm is False
    assert load_suite(None, "smoke").builds.baseline_oneflow is None
    for bad, message in (({"onefow": "x"}, "unknown field 'builds.onefow'"),
                         ({"oneflow": 3}, "field 'builds.oneflow' must be a non-empty string"),
                         ("x", "field 'builds' must be a mapping")):
        with pytest.raises(UserError, match=message):
            suite_from_dict(dict(base, builds=bad), "s.yml")
    with pytest.raises(UserError, match="field 'confirm' must be true or false"):
        suite_from_dict(dict(base, confirm="yes"), "s.yml")
    assert suite_from_dict(base, "s.yml").pause_idle is True
    assert suite_from_dict(dict(base, pause_idle=False), "s.yml").pause_idle is False
    with pytest.raises(UserError, match="field 'pause_idle' must be true or false"):
        suite_from_dict(dict(base, pause_idle="no"), "s.yml")


def test_unknown_build_roles_in_results_are_refused(run):
    data = json.loads(run.to_json())
    data["builds"]["tensorflow"] = {}
    with pytest.raises(UserError, match="builds.tensorflow"):
        results_model.results_from_dict(data)


def test_text_from_a_forks_results_stays_plain_after_the_block(run):
    hostile = "x\n</details> @maintainer [click](https://e.test) ![i](https://e.test/i.png) | `code`"
    run.builds["oneflow"]["packages"]["oneflow"]["version"] = hostile
    run.cases[0].id = "resnet50-bs2" + hostile
    notes = render_speed_stats(run, None, judge(run, None)).split("\n\n</details>\n\n", 1)[1]
    assert "</details>" not in notes and "@maintainer" not in notes and "@\u2060maintainer" in notes
    assert "[click]" not in notes and "\\[click\\](https:/\u2060/e.test)" in notes and "![" not in notes
    assert "https://" not in notes  # no bare URL for GitHub to link either
    assert "\\`code\\`" in notes
    rows = [line for line in notes.split("\n") if line.startswith("| resnet50-bs2x")]
    assert rows and all(line.count(" | ") == 4 for line in rows)  # no extra cell
