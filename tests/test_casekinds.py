"""The table of case kinds (speedstats.casekinds): ids, units, judging, the worker step of each kind, and
a kind added to the table read, recorded, rendered and parsed back by the modules as they are."""

import re
from pathlib import Path

import pytest

from speedstats import casekinds
from speedstats.bench import worker
from speedstats.bench.assemble import case_record
from speedstats.bench.runner import case_label
from speedstats.casekinds import CASE_KINDS, KIND_NAMES, CaseKind, PrintedLines, case_id_for, case_kind
from speedstats.contenders import HEAD, PYTORCH
from speedstats.errors import UserError
from speedstats.parse import parse_speed_stats
from speedstats.render import render_speed_stats
from speedstats.results import (
    FrameworkResult,
    Results,
    case_from_dict,
    check_framework,
    loads,
    results_from_dict,
    results_schema,
)
from speedstats.suite import load_suite, suite_from_dict
from speedstats.text import time_text
from speedstats.verdict import judge

SRC = Path(__file__).resolve().parents[1] / "src" / "speedstats"
TEMPLATES = Path(__file__).resolve().parents[1] / "templates"


def test_the_case_kinds_of_a_run():
    assert tuple(KIND_NAMES) == ("resnet50", "swin_dataloader")
    assert [kind.name for kind in CASE_KINDS if kind.judged] == ["resnet50"]
    resnet, loader = CASE_KINDS
    assert (resnet.unit, resnet.decimals, resnet.ddp) == ("ms", 1, True)
    assert (loader.unit, loader.decimals, loader.ddp) == ("s", 3, False)
    assert (resnet.uses_dataset, loader.uses_dataset) == (False, True)
    assert case_kind("transformer") is None


@pytest.mark.parametrize("args, sizes, expected", [
    (("resnet50", 16), {}, "resnet50-bs16"),
    (("resnet50", 16, True), {}, "resnet50-ddp-bs16"),
    (("resnet50", 16, True, 4), {}, "resnet50-ddp4-bs16"),
    (("swin_dataloader", 32, False), {"num_workers": 4}, "swin-dataloader-w4"),
    (("swin_dataloader", 32, True), {"num_workers": 4}, "swin-dataloader-w4"),
])
def test_the_usual_id_of_a_case(args, sizes, expected):
    assert case_id_for(*args, **sizes) == expected


def test_a_suite_case_has_the_usual_id_and_log_line_of_its_kind():
    suite = load_suite(profile="default")
    for spec in suite.cases:
        assert case_kind(spec.kind).id_of(spec) == spec.id
    assert [case_label(suite.case(case_id)) for case_id in ("resnet50-bs16", "resnet50-ddp-bs2",
                                                            "swin-dataloader-w4")] == [
        "resnet50-bs16 (resnet50, input_shape=[16, 3, 224, 224])",
        "resnet50-ddp-bs2 (resnet50, input_shape=[2, 3, 224, 224], ddp, world size=2)",
        "swin-dataloader-w4 (swin dataloader, batch 32, num_workers=4)",
    ]
    loader = suite_from_dict({"cases": [{"id": "w", "kind": "swin_dataloader", "batch_size": 2, "times": 1}]},
                             "s.yml").cases[0]
    assert loader.num_workers == 0  # the kind's default


def test_an_unknown_kind_has_no_id():
    with pytest.raises(ValueError, match="unknown case kind 'transformer'"):
        case_id_for("transformer", 1)


def test_times_print_in_the_unit_of_their_kind():
    assert time_text(0.2136, "resnet50") == "213.6ms"
    assert time_text(0.0467, "swin_dataloader") == "0.047s"
    assert [k.half_printed_unit_s for k in CASE_KINDS] == [0.05e-3, 0.5e-3]


def test_per_iteration_may_differ_from_the_total_by_half_a_printed_digit_of_its_kind():
    for kind in CASE_KINDS:
        half = kind.half_printed_unit_s
        check_framework(FrameworkResult(total_s=1.0, per_iter_s=0.1 + half, times=10), kind.name, "r")
        with pytest.raises(UserError, match="disagrees with total_s / times"):
            too_far = FrameworkResult(total_s=1.0, per_iter_s=0.1 + 2.5 * half, times=10)
            check_framework(too_far, kind.name, "r")


def test_a_results_case_needs_the_field_that_sizes_its_kind():
    base = {"id": "x", "batch_size": 2, "times": 1}
    with pytest.raises(UserError, match=r"^r \(x\): missing field 'input_shape'$"):
        case_from_dict(dict(base, kind="resnet50"), "r")
    with pytest.raises(UserError, match=r"^r \(x\): missing field 'num_workers'$"):
        case_from_dict(dict(base, kind="swin_dataloader"), "r")


def test_every_kind_has_its_worker_step_and_its_template_macro():
    assert set(worker.MEASUREMENTS) == set(KIND_NAMES)
    for kind in CASE_KINDS:
        assert worker.MEASUREMENTS[kind.name].__name__ == kind.step
    macros = re.findall(r"\{% macro (\w+)\(", (TEMPLATES / "speed_stats_macros.md.j2").read_text())
    assert {kind.macro for kind in CASE_KINDS} <= set(macros)


def _toy_conv_fields(groups):
    if groups.get("shape") is not None:
        shape = [int(size) for size in groups["shape"].split(", ")]
    else:
        shape = [int(groups["batch"]), 3, 32, 32]
    return {"batch_size": shape[0], "input_shape": shape}


# A made-up kind, sized as ResNet50 is, printed to two decimals: one row added to the table, and its lines
# added to the templates, as CONTRIBUTING's "Adding a case kind" says.
TOY_CONV = CaseKind(
    name="toy_conv", printed="toy conv", size_fields=("input_shape",), suite_defaults={"image_size": 32},
    id_format="toy-conv-bs{batch_size}", ddp_id_format=None, log_format="shape={input_shape}", unit="ms",
    decimals=2, macro="toy_conv",
    lines=PrintedLines(sizes=r"shape=\[(?P<shape>\d+(?:, \d+)*)\]", failed_sizes="", read=_toy_conv_fields),
    judged=False, step="ToyConvStep", uses_dataset=False,
)
TOY_MACROS = """
{% macro ms2(value) %}{{ "%.2f"|format(value) }}ms{% endmacro %}

{% macro toy_time(name, fw, case) -%}
{{ name }} toy conv time: {{ ms2(fw.per_iter_ms) }} (= {{ ms2(fw.total_ms) }} / {{ fw.times }}, shape={{ case.input_shape }})
{%- endmacro %}

{% macro toy_conv(case) -%}
{{ toy_time("OneFlow", case.oneflow, case) }}
{{ toy_time("PyTorch", case.pytorch, case) }}
Relative speed: {{ "%.2f"|format(case.relative_speed) }} (= {{ ms2(case.pytorch.per_iter_ms) }} / {{ ms2(case.oneflow.per_iter_ms) }})
{%- endmacro %}
"""  # noqa: E501 - template lines
TOY_FAILED_LINE = """{%- elif case.kind == "toy_conv" -%}
{{ fail_mark }}toy conv batch {{ case.batch_size }}{{ named }}: {{ case.failure }}
{%- else -%}"""


@pytest.fixture
def toy_conv(monkeypatch, tmp_path):
    """TOY_CONV in the table, and a template folder with its lines: (the kind, the folder)."""
    monkeypatch.setattr(casekinds, "CASE_KINDS", (*CASE_KINDS, TOY_CONV))
    macros = (TEMPLATES / "speed_stats_macros.md.j2").read_text(encoding="utf-8")
    with_toy = macros.replace("{%- else -%}", TOY_FAILED_LINE) + TOY_MACROS  # the `failed` macro's one else
    (tmp_path / "speed_stats_macros.md.j2").write_text(with_toy, encoding="utf-8")
    return TOY_CONV, tmp_path


def toy_suite(**fields):
    case = {"id": "toy-conv-bs4", "kind": "toy_conv", "batch_size": 4, "times": 10, **fields}
    return suite_from_dict({"name": "toy", "cases": [case]}, "toy.yml")


def test_a_kind_added_to_the_table_is_read_recorded_rendered_and_parsed_back(toy_conv):
    kind, templates = toy_conv
    suite = toy_suite()
    spec = suite.cases[0]
    assert (spec.image_size, spec.input_shape) == (32, [4, 3, 32, 32])  # the kind's default image side
    assert kind.id_of(spec) == "toy-conv-bs4"
    assert case_label(spec) == "toy-conv-bs4 (toy conv, shape=[4, 3, 32, 32])"
    record = case_record(spec)
    assert (record.input_shape, record.num_workers) == ([4, 3, 32, 32], None)
    record.frameworks = {HEAD: FrameworkResult(total_s=0.0125, per_iter_s=0.00125, times=10),
                         PYTORCH: FrameworkResult(total_s=0.015, per_iter_s=0.0015, times=10)}
    results = loads(Results(suite="toy", device="cpu", gpu_name="cpu", cases=[record]).to_json())
    assert results.cases == [record]
    assert time_text(0.00125, "toy_conv") == "1.25ms"

    body = render_speed_stats(results, suite, judge(results, suite), templates_dir=templates)
    assert body == (
        "<details>\n <summary>Speed stats:</summary>\n\n ``` \nGPU Name: cpu \n\n "
        "OneFlow toy conv time: 1.25ms (= 12.50ms / 10, shape=[4, 3, 32, 32])\n"
        "PyTorch toy conv time: 1.50ms (= 15.00ms / 10, shape=[4, 3, 32, 32])\n"
        "Relative speed: 1.20 (= 1.50ms / 1.25ms)\n ``` \n\n</details>"
    )
    parsed = parse_speed_stats(body).cases[0]
    assert (parsed.id, parsed.kind, parsed.batch_size, parsed.times, parsed.input_shape) == (
        "toy-conv-bs4", "toy_conv", 4, 10, [4, 3, 32, 32])
    assert parsed.frameworks == record.frameworks

    results.cases[0].error = "boom"
    failed = render_speed_stats(results, suite, judge(results, suite), templates_dir=templates)
    assert failed == ("<details>\n <summary>Speed stats:</summary>\n\n ``` \nGPU Name: cpu \n\n "
                      "\u274c toy conv batch 4: boom\n ``` \n\n</details>")
    parsed = parse_speed_stats(failed).cases[0]
    assert (parsed.id, parsed.kind, parsed.input_shape, parsed.error) == ("toy-conv-bs4", "toy_conv",
                                                                          [4, 3, 32, 32], "boom")


def test_a_kind_added_to_the_table_is_checked_as_the_others_are(toy_conv):
    with pytest.raises(UserError, match=r"field 'kind' must be one of resnet50, swin_dataloader, toy_conv, "
                                        r"got 'toy_con' \(did you mean toy_conv\?\)$"):
        suite_from_dict({"cases": [{"id": "t", "kind": "toy_con", "batch_size": 4, "times": 1}]}, "toy.yml")
    with pytest.raises(UserError, match=r"^toy.yml: cases\[0\] \(toy-conv-bs4\): a toy_conv case cannot be "
                                        r"ddp$"):
        toy_suite(ddp=True)
    case = {"id": "toy-conv-bs4", "kind": "toy_conv", "batch_size": 4, "times": 10}
    with pytest.raises(UserError, match=r"^r \(toy-conv-bs4\): missing field 'input_shape'$"):
        case_from_dict(case, "r")
    figures = {"total_s": 0.0125, "per_iter_s": 0.00125, "times": 10}
    measured = dict(case, input_shape=[4, 3, 32, 32], frameworks={HEAD: figures, PYTORCH: figures})
    results = results_from_dict({"suite": "toy", "device": "cpu", "gpu_name": "cpu", "cases": [measured]})
    with pytest.raises(UserError, match="'toy-conv-bs4': toy_conv cases take no thresholds"):
        judge(results, toy_suite(min_relative_speed=0.9))
    kinds = results_schema()["$defs"]["CaseResult"]["properties"]["kind"]
    assert kinds == {"type": "string", "enum": ["resnet50", "swin_dataloader", "toy_conv"]}


# The runner is being split; its lines are named here until they read the table.
SPELLED_OUT_ALLOWED = {"casekinds.py"}
QUOTED_KIND = re.compile("[\"'](?:" + "|".join(KIND_NAMES) + ")[\"']")


def test_no_module_but_the_table_spells_out_a_case_kind():
    spelled = []
    for path in sorted(SRC.rglob("*.py")):
        name = path.relative_to(SRC).as_posix()
        if name in SPELLED_OUT_ALLOWED:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if re.search(QUOTED_KIND, line):
                spelled.append(f"{name}:{number}")
    assert spelled == []
