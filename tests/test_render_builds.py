"""The comment of a run that measured builds: the block, the head-vs-base table, confirmations, builds."""

import json
import random

import pytest

from helpers import FASTER, PYTORCH, SAME, UNCLEAR, base_rounds, case, fw, profiled
from speedstats import results as results_model
from speedstats.analysis.attribution import attribute
from speedstats.analysis.rule import DEFAULT_RULE, SequentialRule
from speedstats.analysis.sequence import DONE, Rounds
from speedstats.errors import UserError
from speedstats.render import build_text, render_speed_stats
from speedstats.results import CaseResult, Results
from speedstats.suite import load_suite, suite_from_dict
from speedstats.verdict import judge

# PyTorch's rounds scattering ~16% about one speed (steady: the machine did not move), and rounds that
# moved 11% from the first half to the second of each pair of processes' stretch (unsteady).
PYTORCH_SCATTERED = [0.18, 0.14, 0.22, 0.17, 0.21, 0.15, 0.19, 0.16, 0.23, 0.18]
PYTORCH_DRIFTING = [0.180, 0.181, 0.179, 0.200, 0.201, 0.180, 0.181, 0.179, 0.200, 0.201]
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


@pytest.fixture
def run():
    cases = [case("resnet50-bs2", 2), case("resnet50-bs1", 1, SAME, PYTORCH_DRIFTING)]
    cases[0].confirmation = {"flags": ["resnet50-bs2: relative speed 0.20 is below 0.25"],
                             "status": "confirmed"}
    cases[1].confirmation = {"flags": ["resnet50-bs1: relative speed 0.20 is below 0.25"],
                             "status": "cleared"}
    return Results(suite="smoke", device="cpu", gpu_name="CPU", cases=cases, builds=BUILDS)


def test_a_head_as_fast_whose_main_thread_works_more_says_where_and_is_not_no_change():
    # Both pairs hid the head's Python-side cost (+1%), and its main thread ran 22% of a step longer
    # on the CPU in every round.
    ratios = [1.01, 1.00, 1.02, 1.01, 1.00, 1.01, 1.02, 1.00, 1.01, 1.01]
    base = base_rounds(10)
    head = [b * r for b, r in zip(base, ratios)]
    record = CaseResult(id="resnet50-bs2", kind="resnet50", batch_size=2, times=10,
                        input_shape=[2, 3, 64, 64])
    record.frameworks = {"oneflow": fw(head), "oneflow_base": fw(base), "pytorch": fw(PYTORCH)}
    rounds = Rounds(DEFAULT_RULE)
    for k, ratio in enumerate(ratios):
        rounds.add(ratio, work=0.22 + 0.01 * (-1) ** k)
    assert rounds.action == DONE
    record.paired = rounds.verdict(head, base)
    results = Results(suite="smoke", device="cpu", gpu_name="CPU", cases=[record], builds=BUILDS)
    verdict = judge(results, None)
    notes = render_speed_stats(results, None, verdict).split("\n\n</details>\n\n", 1)[1]
    method = METHOD.replace("no change: the whole interval inside it;",
                            "no change: the whole interval inside it, and the interval of the head's main "
                            "thread's extra CPU time per step inside it too;")
    assert notes == HEADER + """\
| resnet50-bs2 OneFlow | 260.0ms | 262.3ms | +0.9% (-2.1% to +4.0%) | inconclusive after 10 rounds: as fast \
here, but the head's main thread works 22% of a step more |
""" + method + """\
The smallest slowdown these rounds would have called a regression, where they showed no change or \
were inconclusive: resnet50-bs2 OneFlow 7%.

\u26a0\ufe0f Hidden work on resnet50-bs2 OneFlow: as fast as the base here, but the head's main thread ran \
57.2ms longer on the CPU per iteration (22.0% of a step, 95% interval 21.0% to 23.0%). OneFlow's queued \
work hid that here; where it does not (another device, another size), the step is that much slower, so the \
verdict is not no change.

""" + BUILDS_LINE
    # Not a regression: the step passes; the results read back say the same.
    assert verdict.passed and verdict.regressions == [] and verdict.likely_regressions == []
    again = results_model.loads(results.to_json()).cases[0].paired
    assert again.hidden_work == record.paired.hidden_work and again.work == record.paired.work


def test_extra_main_thread_work_beyond_the_band_is_said_whatever_the_verdict_and_where_it_went():
    # The Python-side build: its step leaned slower (+4%, the time budget spent) while its main thread
    # ran 22% of a step longer in every round; the profile put most of it in one place.
    ratios = [1.10, 0.99, 1.08, 1.01, 1.09, 1.00, 1.07, 1.02, 1.10, 0.99]
    base = base_rounds(10)
    head = [b * r for b, r in zip(base, ratios)]
    record = CaseResult(id="resnet50-bs2", kind="resnet50", batch_size=2, times=10,
                        input_shape=[2, 3, 64, 64])
    record.frameworks = {"oneflow": fw(head), "oneflow_base": fw(base), "pytorch": fw(PYTORCH)}
    rounds = Rounds(DEFAULT_RULE)
    for k, ratio in enumerate(ratios):
        rounds.add(ratio, work=0.22 + 0.01 * (-1) ** k)
    rounds.stop_now()
    record.paired = rounds.verdict(head, base)
    assert (record.paired.leaning, record.paired.hidden_work) == ("likely slower", None)
    rng = random.Random(4)
    record.attribution = attribute([profiled(rng, extra_s=0.05) for _ in range(6)],
                                   [profiled(rng) for _ in range(6)])
    results = Results(suite="smoke", device="cpu", gpu_name="CPU", cases=[record], builds=BUILDS)
    notes = render_speed_stats(results, None, judge(results, None)).split("\n\n</details>\n\n", 1)[1]
    line = ("\u26a0\ufe0f The head's main thread works more on resnet50-bs2 OneFlow: 57.2ms longer on the "
            "CPU per iteration (22.0% of a step, 95% interval 21.0% to 23.0%), beyond the band whatever the "
            "step's time showed here; where queued work does not hide it (a GPU's short kernels, another "
            "size), the step is that much slower. The profile puts most of it in "
            f"oneflow.nn.optimizer.sgd:step ({record.attribution.significant[0].change_ms:+.1f}ms per step).")
    assert line in notes.split("\n\n")
    # Within the band (an unchanged build's ±0.5% of a step): no such line, and none in old results.
    for work in (0.005, None):
        rounds = Rounds(DEFAULT_RULE)
        for ratio in ratios:
            rounds.add(ratio, work=work)
        rounds.stop_now()
        record.paired = rounds.verdict(head, base)
        assert record.paired.main_thread is None
        assert "main thread works more" not in render_speed_stats(results, None, judge(results, None))
    again = results_model.loads(results.to_json()).cases[0].paired
    assert again.main_thread is None and again == record.paired


HEADER = """\
| Case | Base | Head (base \u00d7 change) | Change (95% interval) | Verdict |
| --- | ---: | ---: | --- | --- |
"""
METHOD = """
<details><summary>How these verdicts are made</summary>

Against the base build, measured in the same run, in alternating rounds, in 2 pairs of freshly started \
processes. Base: its median time per iteration; Head: the base times the change. The change is the mean \
of each pair of processes' 10% trimmed mean of its per-round ratios head/base, each pair weighed by its \
variance, with its 95% interval, which counts how pairs spread as well as how rounds scatter; rounds were \
added while that interval straddled the band of \u00b14% (at most 40 rounds). Regression or improvement: \
the whole interval beyond the band; no change: the whole interval inside it; otherwise inconclusive, and \
inconclusive too when the pairs of processes measured changes on different sides of an edge of the band, \
apart beyond their scatter, unless 2 more pairs, started in the same turned orders, each agree with the \
pair of their order: the difference is then the start order's, and the change weighs both orders alike. \
PyTorch is the control, \
its first rounds against its last within each pair's stretch of rounds; its row is shown only when it \
is unsteady: the machine's speed moved during the run beyond what its rounds' scatter explains (at 99%), by \
more than half the band.

</details>

"""
BUILDS_LINE = """\
Builds: head OneFlow 0.9.0+slow (git 381b12c, """ + WHEEL + """ sha256 abababababab) with flowvision 0.2.1; \
base OneFlow 0.9.0 (git 381b12c, installed); PyTorch 2.14.1 (git deadbeefcafe, torch==2.14.1) with \
torchvision 0.29.1"""

EXPECTED_NOTES = HEADER + """\
| resnet50-bs2 OneFlow | 260.0ms | 313.3ms | +20.5% (+16.8% to +24.3%) | \u274c regression after 10 rounds |
| resnet50-bs1 OneFlow | 260.0ms | 260.2ms | +0.1% (-2.9% to +3.2%) | no change after 10 rounds |
| resnet50-bs1 PyTorch (control) | 181.0ms | 201.1ms | +11.1% (+10.5% to +11.7%) | unsteady |
""" + METHOD + """\
The smallest slowdown these rounds would have called a regression, where they showed no change or \
were inconclusive: resnet50-bs1 OneFlow 7%.

\u274c Confirmed in fresh processes: resnet50-bs2 (relative speed 0.20 is below 0.25)

Cleared in fresh processes: resnet50-bs1 (flagged: relative speed 0.20 is below 0.25)

""" + BUILDS_LINE


def test_the_block_stays_exact_and_the_notes_follow_it(run):
    suite = load_suite(None, "smoke")
    verdict = judge(run, suite)
    block, notes = render_speed_stats(run, suite, verdict).split("\n\n</details>\n\n", 1)
    assert block.endswith(" ``` ") and "OneFlow resnet50 time: 310.0ms (= 3100.0ms / 10" in block
    # resnet50-bs2's control is steady and not shown; resnet50-bs1's moved 11% from its first rounds to
    # its last (unsteady), though each half is steady enough for no unstable-figures note on the CPU.
    assert notes == EXPECTED_NOTES
    assert not verdict.passed and verdict.regressions == ["resnet50-bs2"]
    assert verdict.likely_regressions == []
    assert "resnet50-bs2: OneFlow +20.5% against the base build" in verdict.reasons


def test_an_improvement_and_a_likely_slowdown_that_the_rounds_could_not_confirm():
    cases = [case("resnet50-bs2", 2, FASTER),
             case("resnet50-bs1", 1, UNCLEAR, rule=SequentialRule(max_rounds=10))]
    # On a GPU, where rounds scatter far less than on a CPU, 10.6% is unusual: the figures are unstable.
    results = Results(suite="smoke", device="cuda", gpu_name="NVIDIA GeForce GTX 1080", cases=cases,
                      builds=BUILDS)
    verdict = judge(results, None)
    notes = render_speed_stats(results, None, verdict).split("\n\n</details>\n\n", 1)[1]
    assert notes == ("\u26a0\ufe0f Unstable figures, their rounds scatter with a coefficient of variation "
                     "above "
                     "10%: resnet50-bs1 OneFlow 10.6%\n\n") + HEADER + """\
| resnet50-bs2 OneFlow | 260.0ms | 221.2ms | -14.9% (-17.5% to -12.3%) | improvement after 10 rounds |
| resnet50-bs1 OneFlow | 260.0ms | 288.2ms | +10.9% (+1.6% to +21.0%) | \u26a0\ufe0f likely slower, \
not confirmed after 10 rounds |
""" + METHOD + """\
The smallest slowdown these rounds would have called a regression, where they showed no change or \
were inconclusive: resnet50-bs1 OneFlow 13%.

\u26a0\ufe0f Not confirmed: resnet50-bs1 OneFlow is likely slower, +10.9% (+1.6% to +21.0%), not confirmed \
after 10 rounds. The step does not fail on it; this run's machine was not quiet (its rounds scattered or it \
moved): measure again on a quieter one to settle it.

""" + BUILDS_LINE
    # Likely slower is not a confirmed regression: the step passes, and says so in its own output.
    assert verdict.passed and verdict.regressions == [] and verdict.likely_regressions == ["resnet50-bs1"]
    assert cases[1].paired.stopped == "rounds budget" and cases[1].paired.verdict == "inconclusive"


def test_a_start_order_effect_told_apart_by_more_pairs_is_said_and_cancelled():
    # The build started first 20% slower: +32% with the head first, -8% with the base first. The first two
    # pairs disagree; two more in the same orders agree with theirs: a +10% regression, and one line.
    ratios = [1.32, 1.33, 1.31, 1.32, 1.32, 0.917, 0.918, 0.916, 0.917, 0.917,
              1.32, 1.31, 1.33, 1.32, 1.32, 0.917, 0.916, 0.918, 0.917, 0.917]
    base = [0.25, 0.26] * 10
    head = [b * r for b, r in zip(base, ratios)]
    record = CaseResult(id="resnet50-bs2", kind="resnet50", batch_size=2, times=20,
                        input_shape=[2, 3, 64, 64])
    record.frameworks = {"oneflow": fw(head, 20), "oneflow_base": fw(base, 20),
                         "pytorch": fw(PYTORCH * 2, 20)}
    rounds = Rounds(DEFAULT_RULE)
    for ratio in ratios:
        rounds.add(ratio)
    assert rounds.action == DONE
    record.paired = rounds.verdict(head, base)
    results = Results(suite="smoke", device="cpu", gpu_name="CPU", cases=[record], builds=BUILDS)
    verdict = judge(results, None)
    notes = render_speed_stats(results, None, verdict).split("\n\n</details>\n\n", 1)[1]
    assert notes == HEADER + """\
| resnet50-bs2 OneFlow | 260.0ms | 286.1ms | +10.0% (+7.8% to +12.2%) | \u274c regression after 20 rounds |
""" + METHOD + """\
The build started first measured 20.0% slower on resnet50-bs2 OneFlow: +32.0% (+31.1% to +32.9%) with the \
head started first, then -8.3% (-8.4% to -8.2%) with the base started first, then +32.0% (+31.1% to +32.9%) \
with the head started first, then -8.3% (-8.4% to -8.2%) with the base started first. The change shown \
weighs both start orders alike, which cancels that.

""" + BUILDS_LINE
    assert verdict.regressions == ["resnet50-bs2"]
    again = results_model.loads(results.to_json()).cases[0].paired
    assert again.start_order == pytest.approx(1.2, abs=0.001) and again.stages == [5, 5, 5, 5]


def test_pairs_of_processes_that_disagree_are_said_in_one_line_with_each_pairs_change():
    # The first pair of processes shows no change, the second +12%: neither is the verdict.
    ratios = [1.00, 1.01, 0.99, 1.00, 1.01, 1.12, 1.13, 1.11, 1.12, 1.13]
    record = case("resnet50-bs2", 2, ratios, PYTORCH_SCATTERED)
    results = Results(suite="smoke", device="cpu", gpu_name="CPU", cases=[record], builds=BUILDS)
    verdict = judge(results, None)
    notes = render_speed_stats(results, None, verdict).split("\n\n</details>\n\n", 1)[1]
    assert notes == HEADER + """\
| resnet50-bs2 OneFlow | 260.0ms | 275.7ms | +6.0% (+1.1% to +11.2%) | \u26a0\ufe0f likely slower, the pairs \
of processes disagree after 10 rounds |
""" + METHOD + """\
The smallest slowdown these rounds would have called a regression, where they showed no change or \
were inconclusive: resnet50-bs2 OneFlow 9%.

\u26a0\ufe0f The pairs of processes disagree on resnet50-bs2 OneFlow: +0.2% (-0.8% to +1.2%) with the head \
started first, then +12.2% (+11.2% to +13.2%) with the base started first. How much of the change shows \
depends on the process (the order they were started in, or a cost that asynchronous execution hides in some \
processes), so the verdict is neither a regression nor no change.

""" + BUILDS_LINE
    assert record.paired.stopped == "pairs disagree" and record.paired.disagree
    assert verdict.passed and verdict.regressions == []
    again = results_model.loads(results.to_json()).cases[0].paired
    assert again.pairs == record.paired.pairs and again.disagree is True


@pytest.mark.parametrize("device, rounds, note", [
    # PyTorch's rounds scattering 16%: usual on a CPU, unusual on a GPU.
    ("cpu", PYTORCH_SCATTERED, ""),
    ("cuda", PYTORCH_SCATTERED, "above 10%: resnet50-bs2 PyTorch 16.3%"),
    # ... and 40%: unusual on a CPU too.
    ("cpu", [0.18, 0.08, 0.28, 0.17, 0.25, 0.1, 0.19, 0.12, 0.3, 0.18],
     "above 30%: resnet50-bs2 PyTorch 40.0%"),
])
def test_figures_are_unstable_against_a_threshold_for_the_device(device, rounds, note):
    results = Results(suite="smoke", device=device, gpu_name="CPU",
                      cases=[case("resnet50-bs2", 2, SAME, rounds)], builds=BUILDS)
    notes = render_speed_stats(results, None, judge(results, None)).split("\n\n</details>\n\n", 1)[1]
    line = ""
    if note:
        line = f"\u26a0\ufe0f Unstable figures, their rounds scatter with a coefficient of variation {note}"
        line += "\n\n"
    assert notes.startswith(line + HEADER)


def test_an_unclear_head_as_fast_as_its_base_is_inconclusive_never_no_change():
    record = case("resnet50-bs2", 2, [1.06, 0.95, 1.04, 0.96, 1.07, 0.94, 1.05, 0.97, 1.03, 0.95])
    results = Results(suite="smoke", device="cpu", gpu_name="CPU", cases=[record], builds=BUILDS)
    notes = render_speed_stats(results, None, judge(results, None)).split("\n\n</details>\n\n", 1)[1]
    row = notes.split("\n")[2]
    assert row == ("| resnet50-bs2 OneFlow | 260.0ms | 260.2ms | +0.1% (-4.4% to +4.7%) | inconclusive after "
                   "10 rounds |"), row
    assert record.paired.stopped == "futile"


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
                         "abababababab) with flowvision 0.2.1; PyTorch 2.14.1 (git deadbeefcafe, "
                         "torch==2.14.1) "
                         "with torchvision 0.29.1")


def test_without_a_base_build_one_line_says_why_there_is_no_head_against_base_table(run):
    record = case("resnet50-bs2", 2)
    del record.frameworks["oneflow_base"]
    record.paired = None
    builds = {k: v for k, v in BUILDS.items() if k != "oneflow_base"}
    reason = "no successful run of workflow 'build.yml' on branch 'master' of o/r (push events) yet"
    results = Results(suite="smoke", device="cpu", gpu_name="CPU", cases=[record], builds=builds,
                      baseline_missing=reason)
    results = results_model.results_from_dict(json.loads(results.to_json()))  # as results.json keeps it
    assert results.baseline_missing == reason
    body = render_speed_stats(results, None, judge(results, None))
    block, notes = body.split("\n\n</details>\n\n", 1)
    assert block == render_speed_stats(Results(suite="smoke", device="cpu", gpu_name="CPU", cases=[record]),
                                       None, judge(results, None)).split("\n\n</details>")[0]
    assert notes.split("\n\n")[0] == f"No head-against-base table, there is no base build: {reason}."
    assert notes.split("\n\n")[1].startswith("Builds: OneFlow 0.9.0+slow")
    # With a base build measured after all, its table stands and the reason is not said.
    run.baseline_missing = reason
    assert "No head-against-base table" not in render_speed_stats(run, None, judge(run, None))


@pytest.mark.parametrize("only, line", [
    ("oneflow", "OneFlow resnet50 time: 310.0ms (= 3100.0ms / 10, input_shape=[2, 3, 64, 64])"),
    ("pytorch", "PyTorch resnet50 time: 180.0ms (= 1800.0ms / 10, input_shape=[2, 3, 64, 64])"),
])
def test_a_subset_of_the_frameworks_prints_only_their_lines(only, line):
    record = case("resnet50-bs2", 2)
    record.frameworks = {only: record.frameworks[only]}
    record.paired = None
    results = Results(suite="smoke", device="cpu", gpu_name="CPU", cases=[record])
    suite = load_suite(None, "smoke")
    verdict = judge(results, suite)
    assert render_speed_stats(results, suite, verdict) == (
        f"<details>\n <summary>Speed stats:</summary>\n\n ``` \nGPU Name: CPU \n\n {line}\n ``` "
        "\n\n</details>")
    assert verdict.passed and record.failure is None and record.relative_speed is None


def test_build_text_names_a_requirement_and_an_unknown_version():
    assert build_text({"family": "oneflow", "source": "requirement",
                       "packages": {"oneflow": {"version": "0.9.1.dev1",
                                                "requirement": "oneflow==0.9.1.dev1"}}}) \
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
    with pytest.raises(UserError, match="field 'builds' has an unknown key 'tensorflow'"):
        results_model.results_from_dict(data)


def test_text_from_a_forks_results_stays_plain_after_the_block(run):
    hostile = "x\n</details> @maintainer [click](https://e.test) ![i](https://e.test/i.png) | `code`"
    run.builds["oneflow"]["packages"]["oneflow"]["version"] = hostile
    run.cases[0].id = "resnet50-bs2" + hostile
    notes = render_speed_stats(run, None, judge(run, None)).split("\n\n</details>\n\n", 1)[1]
    # The one "</details>" left closes the method's collapsed block: the fork's text closes nothing.
    assert notes.count("</details>") == 1 and "\n\n</details>\n\n" in notes
    assert "@maintainer" not in notes and "@\u2060maintainer" in notes
    assert "[click]" not in notes and "\\[click\\](https:/\u2060/e.test)" in notes and "![" not in notes
    assert "https://" not in notes  # no bare URL for GitHub to link either
    assert "\\`code\\`" in notes
    rows = [line for line in notes.split("\n") if line.startswith("| resnet50-bs2x")]
    assert rows and all(line.count(" | ") == 4 for line in rows)  # no extra cell
