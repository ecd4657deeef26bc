"""`speedstats suite` (every case and field of a suite, defaults marked) and the one-line errors that
suggest the close match, through the real command line."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from speedstats.suite import load_suite, suite_from_dict

SRC = Path(__file__).resolve().parents[1] / "src"
RESULTS = Path(__file__).resolve().parent / "data" / "smoke-results.json"


def speedstats(*argv, cwd=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_", "SPEEDSTATS_"))}
    env["PYTHONPATH"] = str(SRC)
    return subprocess.run([sys.executable, "-m", "speedstats", *map(str, argv)], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=60, check=False)


def test_the_smoke_profile_with_every_field_reads_back_as_the_same_suite():
    proc = speedstats("suite", "--profile", "smoke")
    assert (proc.returncode, proc.stderr) == (0, "")
    lines = proc.stdout.splitlines()
    assert lines[:3] == [
        "# The suite 'smoke' read from smoke.yml: every field with its value. '# default': the",
        "# suite does not set it; \"# the suite's\": the case takes the suite-wide value.",
        "name: smoke",
    ]
    # Suite-wide fields, nested mappings and a case's fields, each marked by where its value comes from.
    for line in ("warmup: 2", "  seed: 0  # default", "lock_timeout_s: 3600.0  # default",
                 "builds:  # default", "  oneflow: installed  # default", "  max_rounds: 40  # default",
                 "  allowed_clock_events: [gpu_idle, applications_clocks]  # default"):
        assert line in lines, line
    first = lines.index("  - id: resnet50-bs2")
    assert lines[first:first + 9] == [
        "  - id: resnet50-bs2", "    kind: resnet50", "    batch_size: 2", "    times: 10",
        "    warmup: 2  # the suite's", "    timeout_s: 300  # the suite's", "    rounds: 1  # the suite's",
        "    mode: old-bot  # the suite's", "    model: shared  # the suite's",
    ]
    assert "    num_workers: null  # default" in lines[first:] and "    image_size: 64" in lines[first:]
    assert suite_from_dict(yaml.safe_load(proc.stdout), "printed") == load_suite(profile="smoke")


def test_a_user_file_is_shown_merged_onto_its_profile(tmp_path):
    path = tmp_path / "mine.yml"
    path.write_text("extends: default\nrounds: 3\ncases:\n  - {id: resnet50-bs16, times: 50}\n"
                    "  - {id: swin-dataloader-w8, skip: true}\n")
    proc = speedstats("suite", "--suite", path)
    assert proc.returncode == 0, proc.stderr
    printed = yaml.safe_load(proc.stdout)
    assert suite_from_dict(printed, "printed") == load_suite(path)
    assert [c["id"] for c in printed["cases"]][-1] == "resnet50-ddp-bs1"
    assert "rounds: 3" in proc.stdout.splitlines() and "    times: 50" in proc.stdout.splitlines()


@pytest.mark.parametrize("argv, line", [
    (["suite", "--profle", "smoke"], "unrecognized arguments: --profle smoke (did you mean --profile?)"),
    (["render", RESULTS, "--profile", "smok"],
     "--profile: unknown profile 'smok' (built-in: default, smoke; did you mean smoke?)"),
    (["render", RESULTS, "--tempaltes", "x"],
     "unrecognized arguments: --tempaltes x (did you mean --templates?)"),
    (["run", "--devcie", "cpu"], "unrecognized arguments: --devcie cpu (did you mean --device?)"),
    (["suite", "--zzz"], "unrecognized arguments: --zzz (see 'speedstats suite --help')"),
])
def test_a_misspelt_option_or_profile_is_one_line_with_the_close_match(tmp_path, argv, line):
    proc = speedstats(*argv, cwd=tmp_path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", f"speedstats: error: {line}\n")
    assert list(tmp_path.iterdir()) == []


LONG_NAME = "x" * 300  # longer than a file name may be


@pytest.mark.parametrize("argv", [["suite"], ["render", RESULTS], ["suite", "--suite", "SUITE"]])
@pytest.mark.parametrize("name", [LONG_NAME, "../suites/default", "default.yml"])
def test_a_profile_that_is_not_built_in_is_bad_input_naming_the_flag(tmp_path, argv, name):
    suite = tmp_path / "suite.yml"  # a file that extends no profile: --profile names its base
    suite.write_text("cases:\n  - {id: a, kind: resnet50, batch_size: 1, times: 1}\n")
    argv = [suite if arg == "SUITE" else arg for arg in argv]
    proc = speedstats(*argv, "--profile", name, cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("speedstats: error: --profile: unknown profile '")
    assert "(built-in: default, smoke" in line and "too long" not in line
    assert len(line) < 200


def test_extends_naming_no_built_in_profile_names_the_file(tmp_path):
    suite = tmp_path / "suite.yml"
    suite.write_text(f"extends: {LONG_NAME}\n")
    proc = speedstats("suite", "--suite", suite, cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (2, "")
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"speedstats: error: {suite}: unknown profile 'xxx")


def test_a_case_id_not_in_the_profile_is_named_with_the_close_one(tmp_path):
    path = tmp_path / "suite.yml"
    path.write_text("extends: default\ncases:\n  - id: resnet50-bs99\n    min_relative_speed: 1.0\n")
    proc = speedstats("suite", "--suite", path)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (f"speedstats: error: {path}: cases[0]: case 'resnet50-bs99' is not in profile "
                           "'default' (did you mean resnet50-bs1?)\n")
