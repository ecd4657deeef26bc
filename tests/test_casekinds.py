"""The table of case kinds (speedstats.casekinds): ids, units, judging, the worker step of each kind."""

import re
from pathlib import Path

import pytest

from speedstats import casekinds
from speedstats.bench import worker
from speedstats.casekinds import CASE_KINDS, KIND_NAMES, case_id_for, case_kind
from speedstats.errors import UserError
from speedstats.results import FrameworkResult, case_from_dict, check_framework
from speedstats.text import time_text

SRC = Path(__file__).resolve().parents[1] / "src" / "speedstats"
TEMPLATES = Path(__file__).resolve().parents[1] / "templates"


def test_the_case_kinds_of_a_run():
    assert KIND_NAMES == ("resnet50", "swin_dataloader")
    assert casekinds.JUDGED_KINDS == ("resnet50",)
    resnet, loader = CASE_KINDS
    assert (resnet.unit, resnet.decimals, resnet.ddp) == ("ms", 1, True)
    assert (loader.unit, loader.decimals, loader.ddp) == ("s", 3, False)
    assert (resnet.uses_dataset, loader.uses_dataset) == (False, True)
    assert case_kind("transformer") is None


@pytest.mark.parametrize("args, expected", [
    (("resnet50", 16), "resnet50-bs16"),
    (("resnet50", 16, True), "resnet50-ddp-bs16"),
    (("resnet50", 16, True, None, 4), "resnet50-ddp4-bs16"),
    (("swin_dataloader", 32, False, 4), "swin-dataloader-w4"),
    (("swin_dataloader", 32, True, 4), "swin-dataloader-w4"),
])
def test_the_usual_id_of_a_case(args, expected):
    assert case_id_for(*args) == expected


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
    assert set(KIND_NAMES) <= set(macros)


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
