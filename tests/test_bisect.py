"""The bisection of a range of builds (speedstats.analysis.bisect) and `speedstats bisect` without a
framework: which comparison comes next, when the search ends and what it says, the state file, the time
budget, the builds from --between, the report and the comment.

The one stand-in is at the comparison: `history(levels)` measures build head against build base as the
ratio of their made-up step times, with an interval of +-2% judged by the rule's own band
(stats.band_outcome), where `speedstats bisect` runs `speedstats run` (real comparisons of real OneFlow
builds: tests/test_bisect_end_to_end.py). The CLI's runs here resume a state file whose comparisons are
all measured, or stop before measuring one, so they measure nothing.
"""

import argparse
import json
import math

import pytest
from markdown_it import MarkdownIt

from fakegithub import actions_env, run_speedstats
from helpers import stand_in_oneflow
from speedstats import bisect_cli
from speedstats.analysis import bisect as search
from speedstats.analysis import stats
from speedstats.render import render_bisect_report

CASE = "resnet50-bs2"


def step(head, base, ratio, wall_s=30.0, spread=0.02):
    low, high = ratio * (1 - spread), ratio * (1 + spread)
    verdict = stats.band_outcome(low, high, stats.DEFAULT_MIN_EFFECT)
    return search.Step(head=head, base=base, wall_s=wall_s,
                       cases={CASE: search.CaseChange(verdict=verdict, ratio=ratio, low=low, high=high,
                                                      text=f"{verdict} after 10 rounds")})


def history(levels):
    """compare(head, base) over builds whose step takes levels[i] (the stand-in), and the calls made."""
    calls = []

    def compare(head, base):
        calls.append((head, base))
        return step(head, base, levels[head] / levels[base])

    return compare, calls


def test_one_slower_build_of_eight_is_found_in_four_comparisons():
    compare, calls = history([1, 1, 1, 1, 3, 3, 3, 3])
    conclusion, steps = search.bisect(8, compare)
    assert (conclusion.outcome, conclusion.culprits, conclusion.spread) == (search.FOUND, [4], None)
    # bad against good; the 4th against good, the 6th against the 4th, the 5th against the 4th: its
    # change explains bad against good's, so bad is not measured against it.
    assert calls == [(7, 0), (3, 0), (5, 3), (4, 3)]
    assert [(s.head, s.base) for s in steps] == calls


@pytest.mark.parametrize("slower", range(1, 8))
def test_the_slower_build_is_found_wherever_it_is_in_few_comparisons(slower):
    compare, calls = history([1] * slower + [2] * (8 - slower))
    conclusion, _ = search.bisect(8, compare)
    assert (conclusion.outcome, conclusion.culprits) == (search.FOUND, [slower])
    # Bad against good, a halving of the 7 steps each, and at most one more: the found build against the
    # one before it, when the last halving measured it against an earlier one.
    assert len(calls) <= 2 + math.ceil(math.log2(7)) < search.comparisons_of_neighbours(8)


def test_two_builds_that_each_add_half_of_the_slowdown_are_both_found():
    compare, calls = history([1, 1, 1, 1.5, 1.5, 2.25, 2.25, 2.25])
    conclusion, _ = search.bisect(8, compare)
    assert (conclusion.outcome, conclusion.culprits, conclusion.spread) == (search.FOUND, [3, 5], None)
    # The 4th does not explain bad against good (+125% outside its +47% to +53%): bad is measured against
    # it, is slower, and the builds after it are searched again.
    assert calls == [(7, 0), (3, 0), (1, 0), (2, 1), (3, 2), (7, 3), (5, 3), (4, 3), (5, 4)]


def test_a_change_spread_over_every_build_names_none():
    compare, calls = history([1.03 ** i for i in range(8)])
    conclusion, steps = search.bisect(8, compare)
    assert (conclusion.outcome, conclusion.culprits, conclusion.spread) == (search.SPREAD, [], (0, 3))
    assert calls == [(7, 0), (3, 0), (1, 0), (2, 1), (3, 2)]
    assert [s.cases[CASE].verdict for s in steps] == ["regression", "regression"] + ["inconclusive"] * 3


def test_bad_not_slower_than_good_ends_after_one_comparison():
    compare, calls = history([1, 1, 1, 1, 1.02, 1, 1, 1.01])
    conclusion, _ = search.bisect(8, compare)
    assert (conclusion.outcome, calls) == (search.NOT_SLOWER, [(7, 0)])


def test_two_builds_are_one_comparison():
    compare, calls = history([1, 3])
    assert search.bisect(2, compare)[0].culprits == [1] and calls == [(1, 0)]


def test_the_steps_measured_are_not_measured_again_and_their_order_does_not_matter():
    levels = [1, 1, 1.5, 1.5, 1.5, 2.25, 2.25, 2.25, 2.25, 2.25]
    compare, calls = history(levels)
    whole, steps = search.bisect(len(levels), compare)
    for cut in range(len(steps)):
        again, again_calls = history(levels)
        conclusion, resumed = search.bisect(len(levels), again, steps=list(reversed(steps[:cut])))
        assert conclusion == whole and again_calls == calls[cut:]
        assert len(resumed) == len(steps)


def test_the_time_budget_stops_before_a_comparison_and_the_search_goes_on_from_its_steps():
    compare, calls = history([1, 1, 1, 1, 3, 3, 3, 3])
    kept = []
    with pytest.raises(search.Stopped) as stopped:
        search.bisect(8, compare, may_start=lambda comparison, steps: len(steps) < 2, on_step=kept.append)
    assert stopped.value.comparison == search.Comparison(5, 3) and len(kept[-1]) == 2
    conclusion, _ = search.bisect(8, compare, steps=kept[-1])
    assert conclusion.culprits == [4] and calls == [(7, 0), (3, 0), (5, 3), (4, 3)]


def test_the_build_cache_keeps_every_build_of_a_search_within_what_run_allows():
    assert [bisect_cli.keep_builds(n) for n in (2, 8, 100, 4096)] == [8, 9, 101, 1000]


def test_the_budget_is_judged_by_the_longest_comparison_so_far():
    assert search.within_budget(0.0, 10.0, []) and search.within_budget(20.0, 10.0, [])  # nothing to judge by
    assert search.within_budget(50.0, 100.0, [20.0, 50.0]) and not search.within_budget(51.0, 100.0, [50.0])
    assert search.within_budget(1e9, None, [1.0])


# -- the report ------------------------------------------------------------------------------------------


BUILDS = [f"wheelhouse/oneflow-0.9.1.dev2024010{i}-cp310-cp310-linux_x86_64.whl" for i in range(1, 9)]


def report_of(levels, **extra):
    conclusion, steps = search.bisect(len(levels), history(levels)[0])
    return search.Report(builds=BUILDS[:len(levels)], steps=steps, conclusion=conclusion, **extra)


def test_the_printed_report_names_the_build_and_gives_each_step_its_change_and_interval():
    assert search.report_text(report_of([1, 1, 1, 1, 3, 3, 3, 3])) == """\
#5 is the first build slower than the one before it (#4): resnet50-bs2 +200.0% (+194.0% to +206.0%).
Bad against good: resnet50-bs2 +200.0% (+194.0% to +206.0%).
4 comparisons of 8 builds, 2m00s of measuring; each build against the one before it would be 7.

step  build  against  case          change (95% interval)         verdict
1     #8     #1       resnet50-bs2  +200.0% (+194.0% to +206.0%)  regression after 10 rounds
2     #4     #1       resnet50-bs2  +0.0% (-2.0% to +2.0%)        no change after 10 rounds
3     #6     #4       resnet50-bs2  +200.0% (+194.0% to +206.0%)  regression after 10 rounds
4     #5     #4       resnet50-bs2  +200.0% (+194.0% to +206.0%)  regression after 10 rounds

Builds:
#1 (good): wheelhouse/oneflow-0.9.1.dev20240101-cp310-cp310-linux_x86_64.whl
#4: wheelhouse/oneflow-0.9.1.dev20240104-cp310-cp310-linux_x86_64.whl
#5: wheelhouse/oneflow-0.9.1.dev20240105-cp310-cp310-linux_x86_64.whl
#6: wheelhouse/oneflow-0.9.1.dev20240106-cp310-cp310-linux_x86_64.whl
#8 (bad): wheelhouse/oneflow-0.9.1.dev20240108-cp310-cp310-linux_x86_64.whl
"""


def conclusion_of(levels):
    return search.conclusion_lines(report_of(levels))


def test_the_report_says_each_ending_in_words():
    assert conclusion_of([1, 1, 1.5, 1.5, 2.25, 2.25])[0] == (
        "#3 and #5 each made it slower than the build before: #3 resnet50-bs2 +50.0% (+47.0% to +53.0%); "
        "#5 resnet50-bs2 +50.0% (+47.0% to +53.0%).")
    assert conclusion_of([1.03 ** i for i in range(8)])[:2] == [
        ("No single build is slower than the one before it: the change, from #1 to #4, is spread over "
         "several builds between them, or a comparison could not tell; each step's change is below."),
        "Bad against good: resnet50-bs2 +23.0% (+20.5% to +25.4%)."]
    assert conclusion_of([1, 1, 1, 1.01])[0] == (
        "Bad (#4) is not shown slower than good (#1): resnet50-bs2 no change +1.0% (-1.0% to +3.0%). "
        "Nothing to bisect.")
    assert conclusion_of([1, 1, 1, 1.035])[0] == (
        "Bad (#4) is not shown slower than good (#1): resnet50-bs2 inconclusive +3.5% (+1.4% to +5.6%). "
        "Nothing to bisect; more rounds (the suite's head_vs_base: max_rounds) or a quieter machine may "
        "tell.")
    # #2 and #4 found, and bad still slower than #4 by less than either, in steps too small to tell.
    assert conclusion_of([1, 2, 2, 2.5, 2.6, 2.7])[1] == (
        "The rest of the change, from #4 to #6, is spread over several builds between them, or a comparison "
        "could not tell; each step's change is below.")
    compare, _ = history([1, 1, 3, 3])
    steps = [compare(3, 0)]
    stopped = search.Report(builds=BUILDS[:4], steps=steps, stopped=search.Comparison(1, 0), budget_s=600)
    assert search.conclusion_lines(stopped) == [
        ("Not finished: the time budget (10m00s) ran out after 1 comparison; next would be #2 against #1. "
         "The same command goes on from where it stopped."),
        "1 comparison of 4 builds, 30s of measuring; each build against the one before it would be 3."]


PARSER = MarkdownIt("commonmark").enable("table")


def live_markup(body):
    """Links, images, raw HTML and mentions GitHub would make of a body."""
    found = []

    def walk(tokens):
        for token in tokens:
            if token.type in ("link_open", "image", "html_block", "html_inline"):
                found.append(token.type)
            if token.type == "text" and "@" in token.content and "@\u2060" not in token.content:
                found.append(token.content)
            walk(token.children or [])

    walk(PARSER.parse(body))
    return found


def test_the_comment_escapes_the_builds_and_is_one_table():
    hostile = BUILDS[:3] + ["oneflow==9 @maintainer [x](https://e.vil) <img src=x> `code` | cell"]
    report = report_of([1, 1, 1, 3])
    report.builds = hostile
    body = render_bisect_report(report)
    assert body == (
        "**Speed bisect** of 4 builds, from good (#1) to bad (#4).\n\n"
        "#4 is the first build slower than the one before it (#3): resnet50-bs2 +200.0% (+194.0% to "
        "+206.0%).\n\n"
        "Bad against good: resnet50-bs2 +200.0% (+194.0% to +206.0%).\n\n"
        "4 comparisons of 4 builds, 2m00s of measuring; each build against the one before it would be 3.\n\n"
        "| Step | Build | Against | Case | Change (95% interval) | Verdict |\n"
        "| ---: | ---: | ---: | --- | --- | --- |\n"
        "| 1 | #4 | #1 | resnet50-bs2 | +200.0% (+194.0% to +206.0%) | \u274c regression after 10 rounds |\n"
        "| 2 | #2 | #1 | resnet50-bs2 | +0.0% (-2.0% to +2.0%) | no change after 10 rounds |\n"
        "| 3 | #3 | #2 | resnet50-bs2 | +0.0% (-2.0% to +2.0%) | no change after 10 rounds |\n"
        "| 4 | #4 | #3 | resnet50-bs2 | +200.0% (+194.0% to +206.0%) | \u274c regression after 10 rounds |\n"
        "\nBuilds:\n\n"
        "- #1 (good): wheelhouse/oneflow-0.9.1.dev20240101-cp310-cp310-linux_x86_64.whl\n"
        "- #2: wheelhouse/oneflow-0.9.1.dev20240102-cp310-cp310-linux_x86_64.whl\n"
        "- #3: wheelhouse/oneflow-0.9.1.dev20240103-cp310-cp310-linux_x86_64.whl\n"
        "- #4 (bad): oneflow==9 @\u2060maintainer \\[x\\](https:/\u2060/e.vil) \u2039img src=x> \\`code\\` "
        "\\| cell")
    assert live_markup(body) == []
    tables = [t for t in PARSER.parse(body) if t.type == "table_open"]
    assert len(tables) == 1


# -- the state file --------------------------------------------------------------------------------------


def written(tmp_path, state, conclusion=None):
    path = tmp_path / "bisect.json"
    path.write_text(bisect_cli.state_json(state, conclusion))
    return path


def test_the_state_file_reads_back_as_it_was_written(tmp_path):
    conclusion, steps = search.bisect(8, history([1, 1, 1, 1, 3, 3, 3, 3])[0])
    state = search.State(builds=BUILDS, measure={"suite": "ab12", "device": "cpu"}, steps=steps)
    path = written(tmp_path, state, conclusion)
    data = json.loads(path.read_text())
    assert (data["schema"], data["outcome"], data["culprits"]) == ("speedstats/bisect/v1", "found", [4])
    again = bisect_cli.read_state(path)
    assert again.builds == BUILDS and again.measure == state.measure
    assert [(s.head, s.base, s.cases[CASE].verdict, s.cases[CASE].ratio) for s in again.steps] == \
        [(s.head, s.base, s.cases[CASE].verdict, s.cases[CASE].ratio) for s in steps]


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(schema="speedstats/bisect/v0"), "field 'schema' must be one of speedstats/bisect/v1"),
    (lambda d: d["steps"][0].update(base=7), "steps[0]: field 'base' (7) must come before 'head' (7)"),
    (lambda d: d["steps"][0].update(head=9), "steps[0]: build 9 is not one of the 8 builds"),
    (lambda d: d["steps"][0]["cases"][CASE].update(verdict="slower"), "field 'verdict' must be one of"),
    (lambda d: d["steps"][0]["cases"][CASE].update(ratio=-1), "field 'ratio' must be above 0"),
    (lambda d: d.update(builds=["one"]), "must hold the good and the bad build at least"),
    (lambda d: d.update(colour="red"), "unknown field 'colour'"),
])
def test_a_state_file_that_is_not_one_is_refused_on_one_line(tmp_path, change, message):
    _, steps = search.bisect(8, history([1, 1, 1, 1, 3, 3, 3, 3])[0])
    data = json.loads(bisect_cli.state_json(search.State(builds=BUILDS, steps=steps), None))
    change(data)
    path = tmp_path / "bisect.json"
    path.write_text(json.dumps(data))
    with pytest.raises(bisect_cli.UserError) as refused:
        bisect_cli.read_state(path)
    assert message in str(refused.value) and str(path) in str(refused.value)
    assert "\n" not in str(refused.value)


# -- `speedstats bisect` ---------------------------------------------------------------------------------

REPO = "o/r"
TOKEN = "ghs_BisectT0kenNeverToBePrinted000000005"
SUITE = "extends: smoke\ncases:\n  - {id: resnet50-bs1, skip: true}\n"


@pytest.fixture
def project(tmp_path):
    """Eight stand-in OneFlow wheels (named as builds of a history: found by their files, never installed),
    a --between file listing the six in the middle, and a suite file."""
    wheels = [stand_in_oneflow(tmp_path / "wheelhouse", f"0.0.1+c{i}") for i in range(1, 9)]
    (tmp_path / "between.txt").write_text(
        "# commits 2 to 7, oldest first\n\n" + "".join(f"wheelhouse/{w.name}\n" for w in wheels[1:-1]))
    (tmp_path / "suite.yml").write_text(SUITE)
    return tmp_path, wheels


def flags(tmp_path, wheels, *extra):
    return ["bisect", "--good", str(wheels[0]), "--bad", str(wheels[-1]), "--between",
            str(tmp_path / "between.txt"), "--suite", str(tmp_path / "suite.yml"), "--device", "cpu",
            "--out", str(tmp_path / "out"), *extra]


def state_for(tmp_path, wheels, steps):
    """The state file a search of the project's builds leaves after `steps`."""
    args = argparse.Namespace(good=str(wheels[0]), bad=str(wheels[-1]), between=str(tmp_path / "between.txt"),
                              suite=str(tmp_path / "suite.yml"), profile=None, device="cpu", pip_args=None,
                              flowvision=None)
    given, _ = bisect_cli.all_builds(args)
    state = search.State(builds=given, steps=steps,
                         measure=bisect_cli.measure_identity(args, bisect_cli.suite_mapping(args)))
    (tmp_path / "out").mkdir(exist_ok=True)
    return written(tmp_path / "out", state)


def speedstats(tmp_path, argv, gh=None, **env):
    environ = actions_env(gh, TOKEN, REPO, tmp_path, **env) if gh is not None else {}
    return run_speedstats(argv, environ)


def one_error(result):
    errors = [line for line in result.err.splitlines() if line.startswith("speedstats: error:")]
    assert len(errors) == 1 and result.err.strip().endswith(errors[0]), result.err
    return errors[0]


def test_a_finished_search_goes_on_without_measuring_and_posts_its_report(project, fake_github):
    tmp_path, wheels = project
    _, steps = search.bisect(8, history([1, 1, 1, 1, 3, 3, 3, 3])[0])
    state_path = state_for(tmp_path, wheels, steps)
    gh = fake_github(TOKEN)
    gh.add_issue(REPO, 12)
    summary = tmp_path / "summary.md"
    result = speedstats(tmp_path, flags(tmp_path, wheels, "--pr", "12"), gh, GITHUB_STEP_SUMMARY=summary,
                        GITHUB_RUN_ID=777)
    assert result.rc == 0, result.err
    assert "going on from" in result.err and "$ speedstats run" not in result.err
    assert result.out.startswith("#5 is the first build slower than the one before it (#4): resnet50-bs2 "
                                 "+200.0% (+194.0% to +206.0%).\n")
    assert f"#5: {tmp_path}/wheelhouse/oneflow-0.0.1+c5-py3-none-any.whl" not in result.out
    assert "#5: wheelhouse/oneflow-0.0.1+c5-py3-none-any.whl\n" in result.out  # as the file lists it
    body = (tmp_path / "out" / "report.md").read_text()
    assert summary.read_text() == body
    (comment,) = gh.comments(REPO, 12)
    assert comment["body"] == body.rstrip("\n") + "\n\n<!-- speedstats:speed-bisect run=777 -->"
    assert json.loads(state_path.read_text())["outcome"] == "found"
    # The same search again: the comment is updated, not posted twice.
    result = speedstats(tmp_path, flags(tmp_path, wheels, "--pr", "12"), gh, GITHUB_RUN_ID=778)
    assert result.rc == 0, result.err
    (comment,) = gh.comments(REPO, 12)
    assert comment["body"].endswith("<!-- speedstats:speed-bisect run=778 -->")


def test_bad_not_slower_than_good_exits_8(project):
    tmp_path, wheels = project
    state_for(tmp_path, wheels, [step(7, 0, 1.01)])
    result = speedstats(tmp_path, flags(tmp_path, wheels))
    assert result.rc == 8, result.err
    assert result.out.startswith("Bad (#8) is not shown slower than good (#1): resnet50-bs2 no change")


def test_a_search_out_of_time_exits_9_before_measuring_and_says_what_is_next(project):
    tmp_path, wheels = project
    state_for(tmp_path, wheels, [step(7, 0, 3.0, wall_s=40.0)])
    result = speedstats(tmp_path, flags(tmp_path, wheels, "--budget-s", "30"))
    assert result.rc == 9, result.err
    assert result.out.startswith("Not finished: the time budget (30s) ran out after 1 comparison; next would "
                                 "be #4 against #1.")
    assert "$ speedstats run" not in result.err
    assert json.loads((tmp_path / "out" / "bisect.json").read_text())["outcome"] is None


def test_a_comparison_whose_run_fails_stops_the_search_and_is_measured_again_next_time(project):
    tmp_path, wheels = project
    state_for(tmp_path, wheels, [step(7, 0, 3.0)])
    wheels[3].write_bytes(b"not a zip")  # build #4, the first halfway, does not install
    # A process of its own, whose stderr holds its comparison's run's too.
    result = run_speedstats(flags(tmp_path, wheels, "--cache-dir", tmp_path / "cache"), {}, subprocess_=True)
    assert result.rc == 2
    errors = [line for line in result.err.splitlines() if line.startswith("speedstats: error:")]
    name = wheels[3].name
    assert errors == [
        f"speedstats: error: oneflow (wheel {name}): {name} is not a valid wheel: File is not a zip file",
        ("speedstats: error: comparison 2 (#4 against #1): its run exited 2 (its lines above say why); "
         "nothing is recorded for it, the same command measures it again")]
    assert result.out.startswith("Not finished: comparison 2 (#4 against #1) ended without a verdict (its "
                                 "run exited 2: bad input); the same command measures it again.\n")
    assert len(json.loads((tmp_path / "out" / "bisect.json").read_text())["steps"]) == 1


def test_a_state_file_of_another_search_is_refused(project):
    tmp_path, wheels = project
    state_for(tmp_path, wheels, [step(7, 0, 3.0)])
    (tmp_path / "between.txt").write_text(f"wheelhouse/{wheels[1].name}\n")
    result = speedstats(tmp_path, flags(tmp_path, wheels))
    assert result.rc == 2
    assert one_error(result) == (f"speedstats: error: {tmp_path}/out/bisect.json: a search of other builds "
                                 "(build 3 differs): give another --out, or delete the file to start again")
    state_for(tmp_path, wheels, [step(2, 0, 3.0)])
    result = speedstats(tmp_path, flags(tmp_path, wheels, "--pip-args=--no-index"))
    assert result.rc == 2 and "a search measured with another pip-args" in one_error(result)


@pytest.mark.parametrize("line, message", [
    ("!!!", "--between {list}:3: !!!: !!! is neither a wheel path nor a pip requirement"),
    ("-e .", "--between {list}:3: -e .: -e is a pip option; give it in the pip arguments"),
    ("wheelhouse/missing.whl",
     "--between {list}:3: {folder}/wheelhouse/missing.whl: no such wheel, folder or file"),
    ("installed",
     "--between {list}:3: must be a wheel, a folder or glob of wheels, or pip requirements, got 'installed'"),
])
def test_a_line_of_the_builds_file_that_is_not_a_build_is_named(project, line, message):
    tmp_path, wheels = project
    listed = tmp_path / "between.txt"
    listed.write_text(f"# builds\nwheelhouse/{wheels[1].name}\n{line}\n")
    result = speedstats(tmp_path, flags(tmp_path, wheels))
    assert result.rc == 2
    assert one_error(result) == "speedstats: error: " + message.format(list=listed, folder=tmp_path)


def test_a_missing_builds_file_or_build_is_named(project):
    tmp_path, wheels = project
    argv = flags(tmp_path, wheels)
    argv[argv.index("--between") + 1] = str(tmp_path / "nowhere.txt")
    result = speedstats(tmp_path, argv)
    assert result.rc == 2
    assert one_error(result) == f"speedstats: error: {tmp_path}/nowhere.txt: --between file not found"
    argv = flags(tmp_path, wheels)
    argv[argv.index("--good") + 1] = str(tmp_path / "gone.whl")
    result = speedstats(tmp_path, argv)
    assert result.rc == 2
    assert one_error(result) == (f"speedstats: error: --good: {tmp_path}/gone.whl: no such wheel, folder or "
                                 "file")
    result = speedstats(tmp_path, flags(tmp_path, wheels, "--budget-s", "-1"))
    assert result.rc == 2
    assert one_error(result) == ("speedstats: error: --budget-s: must be a positive number of seconds, "
                                 "got -1.0")


# -- a requirement template over an index ----------------------------------------------------------------


NIGHTLIES = ["0.9.1.dev20240101+cu118", "0.9.1.dev20240102+cu118", "0.9.1.dev20240102+cpu",
             "0.9.1.dev20240103+cu118", "0.9.1.dev20240105+cu118", "0.9.1.dev20240106+cu118"]


@pytest.fixture
def index(tmp_path):
    """A folder of stand-in nightly builds that pip reads as an index (--find-links)."""
    for version in NIGHTLIES:
        stand_in_oneflow(tmp_path / "index", version)
    return f"--no-index --find-links {tmp_path / 'index'}"


def test_a_template_takes_every_version_the_index_has_between_good_and_bad_of_goods_variant(index):
    builds = bisect_cli.template_builds("oneflow=={version}", "oneflow==0.9.1.dev20240101+cu118",
                                        "oneflow==0.9.1.dev20240106+cu118", index)
    assert [given for given, _ in builds] == [
        "oneflow==0.9.1.dev20240102+cu118", "oneflow==0.9.1.dev20240103+cu118",
        "oneflow==0.9.1.dev20240105+cu118"]


@pytest.mark.parametrize("good, bad, message", [
    ("wheelhouse/", "oneflow==0.9.1.dev20240106+cu118",
     "--good: a template in --between needs --good pinned, as NAME==VERSION or a wheel file"),
    ("oneflow==0.9.1.dev20240104+cu118", "oneflow==0.9.1.dev20240106+cu118",
     ("--between: --good's version '0.9.1.dev20240104+cu118' is not on the index (its newest: "
      "0.9.1.dev20240106+cu118, 0.9.1.dev20240105+cu118, 0.9.1.dev20240103+cu118, 0.9.1.dev20240102+cu118, "
      "0.9.1.dev20240102+cpu, ...)")),
    ("oneflow==0.9.1.dev20240106+cu118", "oneflow==0.9.1.dev20240101+cu118",
     ("--between: --bad's version '0.9.1.dev20240101+cu118' is not newer than --good's "
      "'0.9.1.dev20240106+cu118'")),
])
def test_a_template_without_a_range_on_the_index_is_refused(index, good, bad, message):
    with pytest.raises(bisect_cli.UserError) as refused:
        bisect_cli.template_builds("oneflow=={version}", good, bad, index)
    assert str(refused.value).startswith(message)


def test_a_template_of_a_package_the_index_lacks_says_what_pip_said(index):
    with pytest.raises(bisect_cli.UserError) as refused:
        bisect_cli.template_builds("oneflaw=={version}", "oneflaw==1", "oneflaw==2", index)
    assert str(refused.value).startswith("--between: the package index lists no versions of oneflaw: ")
    assert "\n" not in str(refused.value)
