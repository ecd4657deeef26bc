"""`speedstats reproduce` before it measures, and after: CI's builds found and checked against their
recorded sha256 (a wheel that is not the one recorded stops it with exit 2, naming the build), the suite
rebuilt from what results.json recorded, a results.json from a run's artifact on the loopback GitHub,
and the report of each verdict here against CI's, on another device and on the same one. The real run
in between is tests/test_bisect_end_to_end.py's (heavy)."""

import copy
import hashlib
import io
import json
import zipfile
from pathlib import Path

from fakegithub import actions_env, run_speedstats
from helpers import stand_in_oneflow
from speedstats import reproduce_cli
from speedstats import results as results_model
from speedstats.suite import suite_from_dict

ROOT = Path(__file__).resolve().parents[1]
CI = json.loads((ROOT / "tests" / "data" / "head-vs-base-results.json").read_text())
REPO = "o/r"
TOKEN = "ghs_ReproduceT0kenNeverToBePrinted0000006"


def ci_results(tmp_path, wheel, sha256=None):
    """CI's results.json (tests/data/head-vs-base-results.json) with its head build the given wheel."""
    data = copy.deepcopy(CI)
    head = data["builds"]["oneflow"]["packages"]["oneflow"]
    head["wheel"] = wheel.name
    head["sha256"] = sha256 or hashlib.sha256(wheel.read_bytes()).hexdigest()
    path = tmp_path / "ci" / "results.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def reproduce(tmp_path, *argv, env=None):
    return run_speedstats(["reproduce", *map(str, argv), "--out", tmp_path / "out", "--device", "cpu"],
                          env or {})


def one_error(result):
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("speedstats: error: "), result.err
    return lines[0][len("speedstats: error: "):]


def test_a_wheel_that_is_not_the_one_recorded_stops_it_before_measuring(tmp_path):
    wheel = stand_in_oneflow(tmp_path / "wheels", "0.9.0+slow")
    results = ci_results(tmp_path, wheel, sha256="ab" * 32)
    result = reproduce(tmp_path, results, "--wheels", tmp_path / "wheels")
    assert result.rc == 2
    found = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert one_error(result) == (f"oneflow: {wheel}: sha256 {found[:16]}... is not the recorded "
                                 "abababababababab...: not the build CI measured")
    assert not (tmp_path / "out" / "results.json").exists()


def test_a_wheel_not_found_names_the_build_and_where_it_looked(tmp_path):
    wheel = stand_in_oneflow(tmp_path / "wheels", "0.9.0+slow")
    results = ci_results(tmp_path, wheel)
    result = reproduce(tmp_path, results)
    assert result.rc == 2
    assert one_error(result) == (f"oneflow: wheel {wheel.name} not found in {tmp_path / 'ci'}, . (give the "
                                 "folder holding it with --wheels)")


def test_results_without_a_base_build_are_refused(tmp_path):
    path = tmp_path / "results.json"
    path.write_text((ROOT / "tests" / "data" / "smoke-results.json").read_text())
    result = reproduce(tmp_path, path)
    assert result.rc == 2
    assert one_error(result) == (f"{path}: no case was judged head against base (no base build recorded); "
                                 "reproduce measures a head-vs-base verdict again")
    result = reproduce(tmp_path)
    assert result.rc == 2 and one_error(result).startswith("RESULTS: give a results.json, or --run-id ID")


def artifact_zip(text):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr("speedstats-out/results.json", text)
    return buf.getvalue()


def test_the_results_of_a_runs_artifact_are_checked_as_a_files_are(tmp_path, fake_github):
    gh = fake_github(TOKEN)
    wheel = stand_in_oneflow(tmp_path / "wheels", "0.9.0+slow")
    gh.add_workflow_run(REPO, 4242, "e" * 40)
    gh.add_artifact(REPO, 4242, "speedstats-results",
                    artifact_zip(ci_results(tmp_path, wheel, sha256="cd" * 32).read_text()))
    env = actions_env(gh, TOKEN, REPO, tmp_path)
    result = reproduce(tmp_path, "--run-id", 4242, "--wheels", tmp_path / "wheels", env=env)
    assert result.rc == 2
    assert one_error(result).startswith(f"oneflow: {wheel}: sha256 ")  # read from the artifact, then checked
    result = reproduce(tmp_path, "--run-id", 4242, "--artifact-name", "wheelhouse", env=env)
    assert result.rc == 2
    assert one_error(result) == (f"--artifact-name: run 4242 of {REPO} has no artifact named 'wheelhouse' "
                                 "(its artifacts: speedstats-results)")


def test_the_suite_is_ci_s_cases_as_recorded_with_ci_s_rule(tmp_path):
    data = copy.deepcopy(CI)
    case = data["cases"][0]
    case.update(times=8, mode="clean", model="library", env={"OMP_NUM_THREADS": "1"})
    case["paired"]["rule"].update(max_rounds=30, min_effect=0.05, some_newer_field=1)
    results = results_model.results_from_dict(data)
    cases = reproduce_cli.head_vs_base_cases(results, "results")
    mapping = reproduce_cli.suite_mapping(results, cases)
    suite = suite_from_dict(mapping, "the suite")
    (spec,) = suite.cases
    assert (spec.id, spec.times, spec.image_size, spec.batch_size, spec.mode, spec.model, spec.env) == (
        "resnet50-bs2", 8, 64, 2, "clean", "library", {"OMP_NUM_THREADS": "1"})
    assert spec.warmup == 2 and spec.min_relative_speed == 0.25  # the rest from the smoke profile
    assert (suite.head_vs_base.max_rounds, suite.head_vs_base.min_effect) == (30, 0.05)
    data["suite"] = "tiny"  # not a built-in profile: the cases as recorded, the rest the defaults
    results = results_model.results_from_dict(data)
    suite = suite_from_dict(reproduce_cli.suite_mapping(results, cases), "s")
    assert (suite.name, [c.id for c in suite.cases], suite.cases[0].warmup) == ("tiny", ["resnet50-bs2"], 5)


def here_results(gpu_name, ratio, low, high, verdict):
    data = copy.deepcopy(CI)
    data["gpu_name"] = gpu_name
    data["machine"] = {"preflight": {"quiet": True, "waited_s": 0.0, "reasons": []}}
    data["cases"][0]["paired"].update(ratio=ratio, low=low, high=high, verdict=verdict)
    return results_model.results_from_dict(data)


def test_the_report_says_whether_each_verdict_holds_and_how_far_the_figures_are():
    ci = results_model.results_from_dict(copy.deepcopy(CI))
    cases = reproduce_cli.head_vs_base_cases(ci, "results.json")
    specs = reproduce_cli.Specs(lines=["head oneflow 0.9.0+slow (oneflow-0.9.0+slow.whl, sha256 as recorded)",
                                       "base oneflow 0.9.0 (installed here)"])
    here = here_results("CPU: AMD EPYC 7B13 (2 cores)", 1.31, 1.25, 1.37, "regression")
    rows = reproduce_cli.compare_cases(cases, here, same_device=False)
    assert reproduce_cli.report_text("results.json", ci, here, specs, rows) == """\
speedstats reproduce: results.json, suite 'smoke': measured in CI on cpu (CPU: Intel(R) Xeon(R) Processor (2 \
cores)); here on cpu (CPU: AMD EPYC 7B13 (2 cores)): another device, so only the changes compare, not the \
times.
Builds: head oneflow 0.9.0+slow (oneflow-0.9.0+slow.whl, sha256 as recorded); base oneflow 0.9.0 \
(installed here).

case          CI                                    here                                  holds
resnet50-bs2  regression +20.5% (+18.8% to +22.2%)  regression +31.0% (+25.0% to +37.0%)  yes

resnet50-bs2: +10.5 points from CI's change, CI's estimate outside this interval.
1 of 1 verdicts hold here.
"""
    same = here_results(ci.gpu_name, 1.02, 0.99, 1.05, "inconclusive")
    (row,) = reproduce_cli.compare_cases(cases, same, same_device=True)
    assert row[3] is False
    assert row[4] == ("-18.5 points from CI's change, CI's estimate outside this interval; head 327.1 ms "
                      "here, 327.1 ms in CI (+0.0%); base 272.6 ms here, 272.6 ms in CI (+0.0%)")
