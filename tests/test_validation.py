"""Impossible figures and malformed files end in one line naming the field, exit 2."""

import json

import pytest

from fakegithub import run_speedstats
from speedstats import results as results_model
from speedstats.analysis.rule import DEFAULT_RULE
from speedstats.errors import UserError
from speedstats.parse import parse_speed_stats


def good():
    return {
        "schema": "speedstats/results/v1", "suite": "smoke", "device": "cpu", "gpu_name": "Some CPU",
        "cases": [{"id": "resnet50-bs2", "kind": "resnet50", "batch_size": 2, "times": 5,
                   "input_shape": [2, 3, 64, 64],
                   "frameworks": {"oneflow": {"total_s": 0.5, "per_iter_s": 0.1, "times": 5,
                                              "rounds_s": [0.1]},
                                  "pytorch": {"total_s": 0.25, "per_iter_s": 0.05, "times": 5}}}],
    }


def with_oneflow(**fields):
    data = good()
    data["cases"][0]["frameworks"]["oneflow"].update(fields)
    return data


def with_case(**fields):
    data = good()
    data["cases"][0].update(fields)
    return data


OF = "results: cases[0] (resnet50-bs2).frameworks.oneflow: "
CASE = "results: cases[0] (resnet50-bs2): "


@pytest.mark.parametrize(("text", "message"), [
    (json.dumps(with_oneflow(total_s=-0.5, per_iter_s=-0.1)), OF
     + "field 'total_s' must be between 1e-09 and 1e+07, got -0.5"),
    (json.dumps(with_oneflow(total_s=0, per_iter_s=0)),
     OF + "field 'total_s' must be between 1e-09 and 1e+07, got 0"),
    (json.dumps(with_oneflow(total_s=float("nan"))),
     OF + "field 'total_s' must be a finite number of sensible size, got nan"),
    (json.dumps(with_oneflow(per_iter_s=float("inf"))),
     OF + "field 'per_iter_s' must be a finite number of sensible size, got inf"),
    (json.dumps(with_oneflow()).replace('"total_s": 0.5', '"total_s": 1' + "0" * 400),
     OF + "field 'total_s' must be a finite number of sensible size, got an integer of 401 digits"),
    (json.dumps(with_oneflow()).replace('"total_s": 0.5', '"total_s": 1e400'),
     OF + "field 'total_s' must be a finite number of sensible size, got inf"),
    (json.dumps(with_oneflow(per_iter_s=0.05)),
     OF + "field 'per_iter_s' (0.05) disagrees with total_s / times (0.5 / 5 = 0.1)"),
    (json.dumps(with_oneflow(rounds_s=["fast"])), OF
     + "field 'rounds_s[0]' must be a number, got 'fast'"),
    (json.dumps(with_oneflow(rounds_s=[-1])),
     OF + "field 'rounds_s[0]' must be between 1e-09 and 1e+07, got -1"),
    (json.dumps(with_oneflow(times=0)), OF + "field 'times' must be between 1 and 2147483647, got 0"),
    (json.dumps(with_case(batch_size=-16)), CASE
     + "field 'batch_size' must be between 1 and 2147483647, got -16"),
    (json.dumps(with_case(input_shape=[2, 3, 0, 64])),
     CASE + "field 'input_shape[2]' must be between 1 and 2147483647, got 0"),
    (json.dumps(with_case(world_size=0)), CASE
     + "field 'world_size' must be between 1 and 2147483647, got 0"),
    (json.dumps({**good(), "cases": good()["cases"] * 2}),
     "results: cases[1]: case id 'resnet50-bs2' is also the id of cases[0]"),
    ("[" * 100000 + "]" * 100000, "results: not valid results: JSON nested too deeply"),
    # figures whose printed form (ms, a relative speed, a change in percent) would not be finite
    (json.dumps(with_oneflow(total_s=1e308, per_iter_s=2e307)),
     OF + "field 'total_s' must be between 1e-09 and 1e+07, got 1e+308"),
    (json.dumps(with_oneflow(total_s=5e-324, per_iter_s=1e-324)),
     OF + "field 'total_s' must be between 1e-09 and 1e+07, got 5e-324"),
    (json.dumps(with_oneflow(rounds_s=[1e300])),
     OF + "field 'rounds_s[0]' must be between 1e-09 and 1e+07"),
    (json.dumps(with_case(paired={"verdict": "regression", "ratio": 1e307})),
     CASE[:-2] + ".paired: field 'ratio' must be above 0 and at most 1e+06, got 1e+307"),
    (json.dumps(with_case(paired={"verdict": "regression"})),
     CASE[:-2] + ".paired: missing field 'ratio' (required with the verdict 'regression')"),
    (json.dumps(with_case(paired={"verdict": "faster", "ratio": 1.0})),
     CASE[:-2] + ".paired: field 'verdict' must be one of regression, improvement, no change, inconclusive, "
                 "not comparable"),
    # each pair of processes' own estimate, and whether they disagreed or a regression was confirmed
    (json.dumps(with_case(paired={"verdict": "no change", "ratio": 1.0, "disagree": "yes"})),
     CASE[:-2] + ".paired: field 'disagree' must be true or false, got 'yes'"),
    (json.dumps(with_case(paired={"verdict": "no change", "ratio": 1.0, "confirmed": 1})),
     CASE[:-2] + ".paired: field 'confirmed' must be true or false, got 1"),
    (json.dumps(with_case(paired={"verdict": "no change", "ratio": 1.0, "pairs": {"ratio": 1.0}})),
     CASE[:-2] + ".paired: field 'pairs' must be a list, got {'ratio': 1.0}"),
    (json.dumps(with_case(paired={"verdict": "no change", "ratio": 1.0, "pairs": [{"ratio": 1.0}] * 12})),
     CASE[:-2] + ".paired: field 'pairs' has 12 entries, at most 11"),
    (json.dumps(with_case(paired={"verdict": "no change", "ratio": 1.0, "start_order": "1.2"})),
     CASE[:-2] + ".paired: field 'start_order' must be a number, got '1.2'"),
    (json.dumps(with_case(paired={"verdict": "no change", "ratio": 1.0, "start_order": 0})),
     CASE[:-2] + ".paired: field 'start_order' must be above 0 and at most 1e+06, got 0"),
    # the head's extra main-thread work that held back a "no change", printed as percentages
    (json.dumps(with_case(paired={"verdict": "no change", "ratio": 1.0, "hidden_work": 0.2})),
     CASE[:-2] + ".paired: field 'hidden_work' must be a mapping, got 0.2"),
    (json.dumps(with_case(paired={"verdict": "no change", "ratio": 1.0,
                                  "hidden_work": {"share": float("nan"), "low": 0, "high": 1}})),
     CASE[:-2] + ".paired.hidden_work: field 'share' must be a finite number of sensible size, got nan"),
    (json.dumps(with_case(paired={"verdict": "no change", "ratio": 1.0,
                                  "hidden_work": {"share": 0.2, "low": 0.1}})),
     CASE[:-2] + ".paired.hidden_work: missing field 'high'"),
    (json.dumps(with_case(paired={"verdict": "no change", "ratio": 1.0, "pairs": [{"ratio": 1.0}, 5]})),
     CASE[:-2] + ".paired.pairs[1]: must be a mapping, got 5"),
    (json.dumps(with_case(paired={"verdict": "no change", "ratio": 1.0, "pairs": [{"rounds": 5}]})),
     CASE[:-2] + ".paired.pairs[0]: missing field 'ratio'"),
    (json.dumps(with_case(paired={"verdict": "no change", "ratio": 1.0,
                                  "pairs": [{"ratio": 1.0, "low": -1}]})),
     CASE[:-2] + ".paired.pairs[0]: field 'low' must be above 0 and at most 1e+06, got -1"),
    (json.dumps(with_case(paired={"verdict": "no change", "ratio": 1.0,
                                  "rule": {**DEFAULT_RULE.to_dict(), "pairs": "2"}})),
     CASE[:-2] + ".paired.rule: field 'pairs' must be an integer, got '2'"),
    (json.dumps(with_case(confirmation={"status": "confirmed"})),
     CASE[:-2] + ".confirmation: missing field 'flags'"),
    # numbers no field can hold, wherever they are
    (json.dumps(with_oneflow()).replace('"times": 5, "rounds_s"', '"times": ' + "7" * 5000 + ', "rounds_s"'),
     OF + "field 'times' must be a finite number of sensible size, got an integer of 5000 digits"),
    (json.dumps(with_case(paired={"verdict": "no change", "ratio": 1.0, "ratios": [1.0, float("inf")]})),
     CASE[:-2] + ".paired: field 'ratios[1]' must be a finite number of sensible size, got inf"),
    ('{"suite": ' + "9" * 309 + "}",
     "results: field 'suite' must be a finite number of sensible size, got an integer of 309 digits"),
    # impossible shapes
    (json.dumps(with_case(input_shape=[])),
     CASE + "field 'input_shape' must be four sizes [batch, channels, height, width], got []"),
    (json.dumps(with_case(input_shape=[2, 3, 64])),
     CASE + "field 'input_shape' must be four sizes [batch, channels, height, width], got [2, 3, 64]"),
    (json.dumps(with_case(input_shape=[4, 3, 64, 64])),
     CASE + "field 'input_shape' starts with 4, not the batch size 2"),
])
def test_impossible_results_are_refused_naming_the_field(text, message):
    with pytest.raises(UserError) as caught:
        results_model.loads(text)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_a_dataloader_case_may_have_no_workers_but_not_fewer():
    data = good()
    data["cases"][0].update(kind="swin_dataloader", num_workers=0, input_shape=None)
    (case,) = results_model.loads(json.dumps(data)).cases
    assert (case.kind, case.num_workers, case.input_shape) == ("swin_dataloader", 0, None)
    data["cases"][0]["num_workers"] = -1
    with pytest.raises(UserError, match=r"field 'num_workers' must be between 0 and"):
        results_model.loads(json.dumps(data))


def test_per_iter_s_may_differ_by_the_rounding_of_the_printed_figure():
    # 4340.5ms / 100 is 43.405ms, printed (and parsed back) as 43.4ms
    data = with_oneflow(total_s=4.3405, per_iter_s=0.0434, times=100, rounds_s=[])
    data["cases"][0]["times"] = 100
    oneflow = results_model.loads(json.dumps(data)).cases[0].frameworks["oneflow"]
    assert (oneflow.total_s, oneflow.per_iter_s, oneflow.times, oneflow.rounds_s) == (4.3405, 0.0434, 100, [])


@pytest.mark.parametrize(("line", "message"), [
    ("OneFlow resnet50 time: 0.0ms (= 0.0ms / 100, input_shape=[16, 3, 224, 224])",
     "line 3 (oneflow): field 'total_s' must be above zero, got 0.0"),
    ("OneFlow resnet50 time: 10.0ms (= 4340.5ms / 100, input_shape=[16, 3, 224, 224])",
     "line 3 (oneflow): field 'per_iter_s' (0.01) disagrees with total_s / times (4.3405 / 100 = 0.043405)"),
    ("OneFlow resnet50 time: 43.4ms (= 4340.5ms / 0, input_shape=[16, 3, 224, 224])",
     "line 3 (oneflow): field 'times' must be between 1 and 2147483647, got 0"),
])
def test_parsed_figures_are_checked_too(line, message):
    pytorch = line.replace("OneFlow", "PyTorch")
    per = line.split("time: ")[1].split(" ")[0]
    text = f"GPU Name: X \n\n{line}\n{pytorch}\nRelative speed: 1.00 (= {per} / {per})\n"
    with pytest.raises(UserError) as caught:
        parse_speed_stats(text)
    assert str(caught.value) == "input: " + message


@pytest.mark.parametrize("data", [
    with_oneflow(total_s=-0.5, per_iter_s=-0.1),
    with_oneflow(rounds_s=["x"]),
])
def test_render_exits_2_with_one_line(tmp_path, data):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    result = run_speedstats(["render", str(path)], {})
    assert result.rc == 2
    assert len(result.err.splitlines()) == 1 and result.err.startswith(f"speedstats: error: {path}: cases[0]")
    assert result.out == ""


def test_deeply_nested_results_exit_2_with_one_line(tmp_path):
    path = tmp_path / "results.json"
    path.write_text("[" * 100000 + "]" * 100000)
    result = run_speedstats(["render", str(path)], {}, subprocess_=True)
    assert (result.rc, result.err) == (2,
                                       (f"speedstats: error: {path}: not valid results: JSON nested too "
                                        "deeply\n"))


@pytest.mark.parametrize(("field", "value", "message"), [
    ("total_s", "1e308", "field 'total_s' must be between 1e-09 and 1e+07, got 1e+308"),
    ("total_s", "1" * 5000,
     "field 'total_s' must be a finite number of sensible size, got an integer of 5000 digits"),
    ("input_shape", "[]", "field 'input_shape' must be four sizes [batch, channels, height, width], got []"),
])
def test_render_refuses_figures_it_could_not_print(tmp_path, field, value, message):
    text = json.dumps(good()).replace('"total_s": 0.5', '"total_s": TOTAL').replace('[2, 3, 64, 64]', 'SHAPE')
    text = text.replace("TOTAL", value if field == "total_s" else "0.5")
    text = text.replace("SHAPE", value if field == "input_shape" else "[2, 3, 64, 64]")
    path = tmp_path / "results.json"
    path.write_text(text)
    result = run_speedstats(["render", str(path)], {})
    where = "cases[0] (resnet50-bs2).frameworks.oneflow" if field == "total_s" else "cases[0] (resnet50-bs2)"
    assert (result.rc, result.out) == (2, "")
    assert result.err == f"speedstats: error: {path}: {where}: {message}\n"
