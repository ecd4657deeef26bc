"""The one reader of a suite's mappings (speedstats.settings): defaults written once, one-line errors
that suggest the close match."""

import dataclasses

import pytest

from speedstats.analysis.rule import DEFAULT_RULE, SequentialRule
from speedstats.errors import UserError
from speedstats.machine import DisturbanceSpec
from speedstats.settings import read_settings
from speedstats.suite import SUITE_WIDE, BuildsSpec, CaseSpec, DatasetSpec, Suite, load_suite, suite_from_dict

ONE_CASE = {"cases": [{"id": "a", "kind": "resnet50", "batch_size": 1, "times": 1}]}


@pytest.mark.parametrize("cls", [DatasetSpec, BuildsSpec, DisturbanceSpec, SequentialRule])
def test_an_empty_mapping_reads_as_the_dataclass_defaults(cls):
    assert cls(**read_settings(cls, {}, "s.yml")) == cls()


def test_an_empty_suite_has_the_suite_defaults_and_its_case_the_suites_settings():
    suite = suite_from_dict(ONE_CASE, "s.yml")
    defaults = Suite()
    for f in dataclasses.fields(Suite):
        if f.name != "cases":
            assert getattr(suite, f.name) == getattr(defaults, f.name), f.name
    assert suite.head_vs_base is DEFAULT_RULE
    (case,) = suite.cases
    assert {name: getattr(case, name) for name in SUITE_WIDE} == {name: getattr(defaults, name)
                                                                  for name in SUITE_WIDE}
    for f in dataclasses.fields(CaseSpec):
        if f.default is not dataclasses.MISSING:
            assert getattr(case, f.name) == f.default, f.name
    assert case.max_oneflow_ms == {}


def test_defaults_that_follow_other_fields():
    ddp = suite_from_dict({"cases": [{"id": "a", "kind": "resnet50", "ddp": True, "batch_size": 1,
                                      "times": 1}]}, "s.yml").cases[0]
    assert ddp.world_size == 2
    loader = suite_from_dict({"cases": [{"id": "w", "kind": "swin_dataloader", "batch_size": 1,
                                         "times": 1}]}, "s.yml").cases[0]
    assert loader.num_workers == 0
    clean = suite_from_dict(dict(ONE_CASE, mode="clean", model="library"), "s.yml")
    assert (clean.cases[0].mode, clean.cases[0].model) == ("clean", "library")


def test_null_is_not_given():
    suite = suite_from_dict(dict(ONE_CASE, warmup=None, builds={"pytorch": None}, dataset=None), "s.yml")
    assert (suite.warmup, suite.builds.pytorch, suite.dataset) == (5, "installed", DatasetSpec())


@pytest.mark.parametrize("text, message", [
    ("extends: default\ncases:\n  - {id: resnet50-bs99, min_relative_speed: 1.0}\n",
     "cases[0]: case 'resnet50-bs99' is not in profile 'default' (did you mean resnet50-bs1?)"),
    ("extends: smoke\ncases:\n  - {id: swin-dataloader-w8, skip: true}\n",
     "cases[0]: case 'swin-dataloader-w8' is not in profile 'smoke' (did you mean swin-dataloader-w0?)"),
    ("extends: default\ncases:\n  - {id: vit-b16, times: 5}\n",
     "cases[0]: case 'vit-b16' is not in profile 'default'; a new case needs its 'kind'"),
    ("extends: default\ncases:\n  - {id: resnet50-bs16, tiems: 5}\n",
     "cases[0] (resnet50-bs16): unknown field 'tiems' (did you mean times?)"),
    ("extends: default\nlock_timeout: 60\n", "unknown field 'lock_timeout' (did you mean lock_timeout_s?)"),
    ("extends: default\ndisturbance: {max_vc: 0.2}\n",
     "unknown field 'disturbance.max_vc' (did you mean max_cv?)"),
    ("extends: default\nhead_vs_base: {max_round: 60}\n",
     "unknown field 'head_vs_base.max_round' (did you mean max_rounds?)"),
    ("extends: default\nhead_vs_base: {first_rounds: 2.5}\n",
     "field 'head_vs_base.first_rounds' must be an integer, got 2.5"),
    ("extends: default\nhead_vs_base: {max_rounds: 5}\n",
     "head_vs_base.max_rounds: must be at least first_rounds, got 5"),
    ("extends: default\nbuilds: {onefow: x.whl}\n", "unknown field 'builds.onefow' (did you mean oneflow?)"),
    ("extends: default\ndataset: {image: 10}\n", "dataset: unknown field 'image' (did you mean images?)"),
    ("extends: default\ndataset: {min_side: 64, max_side: 32}\n",
     "dataset: field 'max_side' must be at least 'min_side'"),
    ("extends: defualt\n", "unknown profile 'defualt' (built-in: default, smoke; did you mean default?)"),
])
def test_a_misspelt_name_gets_the_close_match_in_one_line(tmp_path, text, message):
    path = tmp_path / "suite.yml"
    path.write_text(text)
    with pytest.raises(UserError) as err:
        load_suite(path)
    assert str(err.value) in (f"{path}: {message}", message)


def test_a_new_case_with_its_kind_is_added_and_a_known_one_skipped(tmp_path):
    path = tmp_path / "suite.yml"
    path.write_text("extends: smoke\ncases:\n"
                    "  - {id: resnet50-bs99, kind: resnet50, batch_size: 99, times: 1}\n"
                    "  - {id: resnet50-bs1, skip: true}\n")
    suite = load_suite(path)
    assert [c.id for c in suite.cases] == ["resnet50-bs2", "swin-dataloader-w0", "swin-dataloader-w2",
                                           "resnet50-ddp-bs2", "resnet50-bs99"]
