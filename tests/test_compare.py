"""`speedstats compare`: verdicts per case and framework, the markdown table byte for byte, JSON,
exit codes."""

import json
import statistics
from pathlib import Path

import pytest

from speedstats import cli
from speedstats import results as results_model
from speedstats.analysis import stats
from speedstats.analysis.compare import compare_results
from speedstats.render import baseline_table_context, render_baseline_table
from speedstats.results import CaseResult, FrameworkResult, Results


def framework(rounds, times=100):
    per_iter = statistics.median(rounds)
    return FrameworkResult(total_s=per_iter * times, per_iter_s=per_iter, times=times, rounds_s=list(rounds))


def resnet(case_id, oneflow_rounds, pytorch_rounds, batch_size=16):
    return CaseResult(
        id=case_id, kind="resnet50", batch_size=batch_size, times=100, input_shape=[batch_size, 3, 224, 224],
        frameworks={"oneflow": framework(oneflow_rounds), "pytorch": framework(pytorch_rounds)},
    )


def dataloader(case_id, oneflow_rounds, pytorch_rounds, num_workers=1):
    return CaseResult(
        id=case_id, kind="swin_dataloader", batch_size=32, times=200, num_workers=num_workers,
        frameworks={"oneflow": framework(oneflow_rounds, 200), "pytorch": framework(pytorch_rounds, 200)},
    )


def run(cases, gpu_name="NVIDIA GeForce RTX 3080 Ti", device="cuda"):
    return Results(suite="default", device=device, gpu_name=gpu_name, cases=cases)


# Rounds that are all equal make the interval collapse onto the ratio: exact bytes.
BASE = run([
    resnet("resnet50-bs16", [0.040] * 5, [0.057] * 5),
    resnet("resnet50-bs8", [0.026] * 5, [0.038] * 5, batch_size=8),
    dataloader("swin-dataloader-w1", [0.200], [0.130]),
    resnet("resnet50-bs1", [0.019] * 5, [0.028] * 5, batch_size=1),
])
HEAD = run([
    resnet("resnet50-bs16", [0.046] * 5, [0.057] * 5),
    resnet("resnet50-bs8", [0.0234] * 5, [0.038] * 5, batch_size=8),
    dataloader("swin-dataloader-w1", [0.205], [0.130]),
    resnet("resnet50-bs2", [0.018] * 5, [0.031] * 5, batch_size=2),
])

EXPECTED_TABLE = (
    "Against the base run, the two runs' rounds compared as unpaired samples. Base: its median time per "
    "iteration; Head: the base times the change. The change is the ratio of the 10% trimmed means of the "
    "rounds' log times, with Yuen's 95% interval. Regression or improvement: the whole interval beyond the "
    "band of \u00b14%; no change: the whole interval inside it; otherwise inconclusive.\n"
    "\n"
    "| Case | Base | Head (base \u00d7 change) | Change (95% interval) | Verdict |\n"
    "| --- | ---: | ---: | --- | --- |\n"
    "| resnet50-bs16 OneFlow | 40.0ms | 46.0ms | +15.0% (+15.0% to +15.0%) | ❌ regression |\n"
    "| resnet50-bs16 PyTorch | 57.0ms | 57.0ms | +0.0% (+0.0% to +0.0%) | no change |\n"
    "| resnet50-bs8 OneFlow | 26.0ms | 23.4ms | -10.0% (-10.0% to -10.0%) | improvement |\n"
    "| resnet50-bs8 PyTorch | 38.0ms | 38.0ms | +0.0% (+0.0% to +0.0%) | no change |\n"
    "| swin-dataloader-w1 OneFlow | 0.200s | 0.205s | +2.5% | no change (no noise estimate) |\n"
    "| swin-dataloader-w1 PyTorch | 0.130s | 0.130s | +0.0% | no change (no noise estimate) |\n"
    "| resnet50-bs2 OneFlow |  |  |  | not comparable: not in base |\n"
    "| resnet50-bs2 PyTorch |  |  |  | not comparable: not in base |\n"
    "| resnet50-bs1 OneFlow |  |  |  | not comparable: not in head |\n"
    "| resnet50-bs1 PyTorch |  |  |  | not comparable: not in head |"
)


def test_markdown_table_byte_for_byte():
    assert render_baseline_table(compare_results(BASE, HEAD)) == EXPECTED_TABLE


def test_verdicts_per_case_and_framework():
    report = compare_results(BASE, HEAD)
    verdicts = [(r.case_id, r.framework, r.comparison.verdict) for r in report.rows]
    assert verdicts == [
        ("resnet50-bs16", "oneflow", stats.REGRESSION),
        ("resnet50-bs16", "pytorch", stats.NO_CHANGE),
        ("resnet50-bs8", "oneflow", stats.IMPROVEMENT),
        ("resnet50-bs8", "pytorch", stats.NO_CHANGE),
        ("swin-dataloader-w1", "oneflow", stats.NO_CHANGE),
        ("swin-dataloader-w1", "pytorch", stats.NO_CHANGE),
        ("resnet50-bs2", "oneflow", stats.NOT_COMPARABLE),
        ("resnet50-bs2", "pytorch", stats.NOT_COMPARABLE),
        ("resnet50-bs1", "oneflow", stats.NOT_COMPARABLE),
        ("resnet50-bs1", "pytorch", stats.NOT_COMPARABLE),
    ]
    assert [r.case_id for r in report.regressions] == ["resnet50-bs16"]


def test_noisy_rounds_give_an_interval_around_the_change():
    base = run([resnet("resnet50-bs16", [0.100, 0.103, 0.098, 0.101, 0.099], [0.130] * 5)])
    head = run([resnet("resnet50-bs16", [0.121, 0.118, 0.120, 0.123, 0.119], [0.130] * 5)])
    row = compare_results(base, head).rows[0]
    c = row.comparison
    assert c.verdict == stats.REGRESSION
    assert c.ratio == pytest.approx(0.120 / 0.100, rel=1e-3)
    assert 1.04 < c.low < c.ratio < c.high < 1.26
    assert compare_results(base, head).rows[0].comparison == c  # seeded: the same verdict every time


def test_a_results_file_without_rounds_counts_as_one_round():
    base = run([resnet("resnet50-bs16", [0.040], [0.057])])
    head = run([resnet("resnet50-bs16", [0.046], [0.057])])
    for case in base.cases + head.cases:
        for fw in case.frameworks.values():
            fw.rounds_s = []
    row = compare_results(base, head).rows[0]
    assert row.comparison.text == "regression (no noise estimate)"
    assert row.comparison.base_rounds == 1


def test_failed_or_different_workloads_and_other_machines_are_not_comparable():
    base = run([
        resnet("resnet50-bs16", [0.040] * 5, [0.057] * 5),
        dataloader("swin-dataloader-w1", [0.2] * 3, [0.13] * 3, num_workers=1),
    ])
    head = run([
        resnet("resnet50-bs16", [0.040] * 5, [0.057] * 5),
        dataloader("swin-dataloader-w1", [0.2] * 3, [0.13] * 3, num_workers=4),
    ])
    head.cases[0].frameworks["pytorch"] = FrameworkResult(error="CUDA out of memory")
    texts = [r.comparison.text for r in compare_results(base, head).rows]
    assert texts == [
        "no change",
        "not comparable: head failed: CUDA out of memory",
        "not comparable: num_workers differs (1 in base, 4 in head)",
        "not comparable: num_workers differs (1 in base, 4 in head)",
    ]
    other_gpu = run(head.cases, gpu_name="NVIDIA GeForce GTX 1080")
    rows = compare_results(base, other_gpu).rows
    assert {r.comparison.reason for r in rows} == {
        "base ran on NVIDIA GeForce RTX 3080 Ti, head on NVIDIA GeForce GTX 1080"
    }
    # A base parsed back from an old comment without a GPU line is still comparable.
    unknown = run(base.cases, gpu_name="unknown")
    assert compare_results(unknown, base).rows[0].comparison.verdict == stats.NO_CHANGE


def test_a_failure_text_stays_inside_its_table_cell():
    base = run([resnet("resnet50-bs16", [0.040] * 5, [0.057] * 5)])
    head = run([resnet("resnet50-bs16", [0.040] * 5, [0.057] * 5)])
    head.cases[0].error = "worker exited | see log\nTraceback ..."
    table = render_baseline_table(compare_results(base, head))
    assert table.splitlines()[-1] == (
        "| resnet50-bs16 PyTorch |  |  |  | not comparable: head failed: worker exited \\| see log Traceback "
        "... |"
    )


def write(tmp_path, name, results):
    path = tmp_path / name
    path.write_text(results.to_json(), encoding="utf-8")
    return str(path)


def test_cli_writes_the_table_and_exits_1_on_a_regression(tmp_path, capsys):
    base, head = write(tmp_path, "base.json", BASE), write(tmp_path, "head.json", HEAD)
    out = tmp_path / "table.md"
    assert cli.main(["compare", base, head, "--out", str(out)]) == 1
    assert out.read_text(encoding="utf-8") == EXPECTED_TABLE
    assert capsys.readouterr().err == "speedstats: regression: resnet50-bs16 OneFlow: +15.0% (regression)\n"
    assert cli.main(["compare", base, base]) == 0
    printed = capsys.readouterr()
    assert "| resnet50-bs16 OneFlow | 40.0ms | 40.0ms | +0.0% (+0.0% to +0.0%) | no change |" in printed.out
    assert printed.err == ""


def test_cli_json_format(tmp_path, capsys):
    base, head = write(tmp_path, "base.json", BASE), write(tmp_path, "head.json", HEAD)
    assert cli.main(["compare", base, head, "--format", "json", "--min-effect", "20"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == "speedstats/compare/v1"
    assert data["min_effect"] == 0.2 and data["regressions"] == 0
    first = data["rows"][0]
    assert first["case"] == "resnet50-bs16" and first["framework"] == "oneflow"
    assert first["verdict"] == "no change"
    assert first["base_s"] == 0.040 and first["head_s"] == pytest.approx(0.046)
    assert first["change"] == pytest.approx(0.15) and first["low"] == pytest.approx(1.15)
    assert (first["base_rounds"], first["head_rounds"], first["noise_estimate"]) == (5, 5, True)
    assert data["head"]["gpu_name"] == "NVIDIA GeForce RTX 3080 Ti"


def test_the_four_words_between_two_stored_runs():
    def row(base_rounds, head_rounds):
        base = run([resnet("resnet50-bs16", base_rounds, [0.057] * 5)])
        head = run([resnet("resnet50-bs16", head_rounds, [0.057] * 5)])
        return baseline_table_context(compare_results(base, head))["rows"][0]

    noisy = [0.040, 0.046, 0.037, 0.044, 0.041]
    likely = row(noisy, [x * 1.08 for x in reversed(noisy)])
    assert (likely["verdict"], likely["text"]) == ("inconclusive", "likely slower, not confirmed")
    assert likely["low"] < 4 < likely["change"] < likely["high"]
    unclear = row(noisy, list(reversed(noisy)))
    assert (unclear["verdict"], unclear["text"]) == ("inconclusive", "inconclusive")
    same = row([0.040, 0.0401, 0.0399, 0.040, 0.0402], [0.0402, 0.040, 0.0401, 0.0399, 0.040])
    assert (same["verdict"], same["text"]) == ("no change", "no change")
    assert -4 < same["low"] < same["high"] < 4
    # The head shown is the base times the change, so the columns agree with the change beside them.
    assert likely["head"] == f"{0.041 * (1 + likely['change'] / 100) * 1000:.1f}ms"


def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    head = write(tmp_path, "head.json", HEAD)
    missing = str(tmp_path / "nope.json")
    assert cli.main(["compare", missing, head]) == 2
    assert capsys.readouterr().err == f"speedstats: error: {missing}: results file not found\n"
    broken = tmp_path / "broken.json"
    broken.write_text('{"suite": "default", "device": "cpu", "gpu_name": "x"}', encoding="utf-8")
    assert cli.main(["compare", str(broken), head]) == 2
    assert capsys.readouterr().err == f"speedstats: error: {broken}: missing field 'cases'\n"
    with pytest.raises(SystemExit) as exited:
        cli.main(["compare", head, head, "--min-effect", "lots"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "speedstats compare: error: argument --min-effect: must be a percentage, got 'lots'")


def test_render_with_a_baseline_keeps_the_block_first_then_the_table(tmp_path, capsys):
    base, head = write(tmp_path, "base.json", BASE), write(tmp_path, "head.json", HEAD)
    plain, with_table = tmp_path / "plain.md", tmp_path / "with-table.md"
    plain_code = cli.main(["render", head, "--out", str(plain)])
    capsys.readouterr()
    assert cli.main(["render", head, "--baseline", base, "--out", str(with_table)]) == 1
    body = plain.read_text(encoding="utf-8")
    assert body.startswith("<details>\n <summary>Speed stats:</summary>") and body.endswith("</details>")
    assert with_table.read_text(encoding="utf-8") == body + "\n\n" + EXPECTED_TABLE
    assert capsys.readouterr().err.endswith(
        "speedstats: regression: resnet50-bs16 OneFlow: +15.0% (regression)\n"
    )
    # Without a regression against the baseline the exit code is the thresholds' verdict alone.
    assert cli.main(["render", head, "--baseline", head, "--out", str(with_table)]) == plain_code



HOSTILE_ID = "@octocat ![x](https://evil.example/p.png)"
# The rule of the run's head-vs-base table: brackets and pipes escaped, a word joiner after @ and
# between the slashes of a URL (no mention, no image, no link).
SAFE_ID = "@\u2060octocat !\\[x\\](https:/\u2060/evil.example/p.png)"


@pytest.mark.parametrize("command", ["compare", "render"])
def test_markdown_in_a_case_id_stays_text_in_the_table(tmp_path, capsys, command):
    base = run([resnet(HOSTILE_ID, [0.040] * 5, [0.057] * 5)])
    head = run([resnet(HOSTILE_ID, [0.046] * 5, [0.057] * 5)])
    base_path, head_path = write(tmp_path, "base.json", base), write(tmp_path, "head.json", head)
    out = tmp_path / "out.md"
    argv = (["compare", base_path, head_path] if command == "compare"
            else ["render", head_path, "--baseline", base_path])
    assert cli.main(argv + ["--out", str(out)]) == 1
    table = out.read_text(encoding="utf-8").split("\n\n")[-1]
    assert table.splitlines()[-2:] == [
        f"| {SAFE_ID} OneFlow | 40.0ms | 46.0ms | +15.0% (+15.0% to +15.0%) | ❌ regression |",
        f"| {SAFE_ID} PyTorch | 57.0ms | 57.0ms | +0.0% (+0.0% to +0.0%) | no change |",
    ]
    for active in ("@octocat", "![", "https://"):
        assert active not in table
    assert "](" not in table.replace("\\](", "")  # only the escaped bracket


# Two real runs of the smoke suite (5 rounds, CPU), one after the other on the same machine.
DATA = Path(__file__).parent / "data"
SMOKE_BASE, SMOKE_HEAD = DATA / "smoke-results.json", DATA / "smoke-results-head.json"


def test_compare_on_real_smoke_suite_results():
    base, head = results_model.load(SMOKE_BASE), results_model.load(SMOKE_HEAD)
    report = compare_results(base, head)
    assert [(r.case_id, r.framework) for r in report.rows] == [
        (c.id, name) for c in head.cases for name in ("oneflow", "pytorch")
    ]
    for row in report.rows:
        c = row.comparison
        base_fw = next(x for x in base.cases if x.id == row.case_id).frameworks[row.framework]
        head_fw = next(x for x in head.cases if x.id == row.case_id).frameworks[row.framework]
        assert c.base_s == base_fw.per_iter_s  # the printed median; the head is the base times the change
        assert c.head_s == pytest.approx(c.base_s * c.ratio) and head_fw.per_iter_s
        assert (c.base_rounds, c.head_rounds) == (5, 5) and c.noise_estimate
        assert c.low <= c.ratio <= c.high
        expected = (stats.REGRESSION if c.low > 1.04 else stats.IMPROVEMENT if c.high < 0.96
                    else stats.NO_CHANGE if 0.96 <= c.low and c.high <= 1.04 else stats.INCONCLUSIVE)
        assert c.verdict == expected
    # The head run happened to be faster; the other way round the same cases are regressions.
    assert report.regressions == []
    backwards = compare_results(head, base)
    assert {r.case_id for r in backwards.regressions} == {
        r.case_id for r in report.rows if r.comparison.verdict == stats.IMPROVEMENT
    } != set()
    # Against itself a run never changes, however noisy its rounds.
    itself = compare_results(base, base)
    assert {r.comparison.verdict for r in itself.rows} <= {stats.NO_CHANGE, stats.INCONCLUSIVE}
    assert all(r.comparison.ratio == pytest.approx(1.0) for r in itself.rows)
    assert all(r.comparison.low <= 1.0 <= r.comparison.high for r in itself.rows)


def test_cli_compare_and_render_baseline_on_real_smoke_suite_results(tmp_path, capsys):
    table = tmp_path / "table.md"
    assert cli.main(["compare", str(SMOKE_HEAD), str(SMOKE_BASE), "--out", str(table)]) == 1
    regressions = capsys.readouterr().err.splitlines()
    text = table.read_text(encoding="utf-8")
    lines = text.split("\n")
    assert lines[2:4] == ["| Case | Base | Head (base \u00d7 change) | Change (95% interval) | Verdict |",
                          "| --- | ---: | ---: | --- | --- |"]
    assert len(lines) == 4 + 10 and not text.endswith("\n")
    flagged = [line for line in lines if line.endswith("| ❌ regression |")]
    assert len(flagged) == len(regressions) > 0
    assert all(line.startswith("speedstats: regression: ") for line in regressions)

    body = tmp_path / "body.md"
    assert cli.main(["render", str(SMOKE_BASE), "--baseline", str(SMOKE_HEAD), "--out", str(body)]) == 1
    plain = tmp_path / "plain.md"
    assert cli.main(["render", str(SMOKE_BASE), "--out", str(plain)]) == 0
    assert body.read_text(encoding="utf-8") == plain.read_text(encoding="utf-8") + "\n\n" + text
