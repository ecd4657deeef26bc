"""`speedstats bisect` and `speedstats reproduce` end to end, on real OneFlow builds made from the pinned
wheel (tests/oneflow_builds.py), on the CPU.

Four builds of a made-up history: 0.9.0 (good), 0.9.0+a, then 0.9.0+c5s200 and 0.9.0+c6s200, whose
Conv2d computes its convolution ten more times (a ResNet50 step about three times as long), so that one
comparison tells them apart on a busy CPU. The search is stopped by its time budget after its first
comparison and started again, and must name the third build without measuring a comparison twice.
Then a results.json "from another machine" (CI's, on a GPU) is reproduced here.
"""

import copy
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import oneflow_builds
from busy_machine import tolerant
from speedstats import results as results_model

pytestmark = pytest.mark.heavy

ROOT = Path(__file__).resolve().parents[1]
# The smoke profile's ResNet50 case at batch 2, alone.
ONE_CASE = """\
extends: smoke
cases:
  - {id: resnet50-bs1, skip: true}
  - {id: swin-dataloader-w0, skip: true}
  - {id: swin-dataloader-w2, skip: true}
  - {id: resnet50-ddp-bs2, skip: true}
"""


@pytest.fixture(scope="module")
def history(pinned_oneflow_wheel, repacked_oneflow_wheel):
    return [pinned_oneflow_wheel, repacked_oneflow_wheel, oneflow_builds.history_oneflow_wheel(5, 200),
            oneflow_builds.history_oneflow_wheel(6, 200)]


def speedstats(tmp, *args, timeout=1800):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), SPEEDSTATS_LOCK_DIR=str(tmp / "locks"))
    for name in ("GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GITHUB_ACTIONS"):
        env.pop(name, None)
    return subprocess.run([sys.executable, "-m", "speedstats", *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=tmp, timeout=timeout, check=False)


def test_bisect_names_the_slower_build_and_goes_on_after_its_budget(tmp_path, history, oneflow_build_cache):
    (tmp_path / "suite.yml").write_text(tolerant(ONE_CASE))
    (tmp_path / "between.txt").write_text(f"{history[1]}\n{history[2]}\n")
    argv = ["bisect", "--good", history[0], "--bad", history[3], "--between", "between.txt", "--suite",
            "suite.yml", "--device", "cpu", "--cache-dir", oneflow_build_cache, "--out", "out"]
    first = speedstats(tmp_path, *argv, "--budget-s", "1")
    assert first.returncode == 9, first.stderr[-3000:]
    state = json.loads((tmp_path / "out" / "bisect.json").read_text())
    assert [(s["head"], s["base"]) for s in state["steps"]] == [(3, 0)]
    assert state["steps"][0]["cases"]["resnet50-bs2"]["verdict"] == "regression"
    assert first.stdout.startswith("Not finished: the time budget (1s) ran out after 1 comparison; next "
                                   "would be #2 against #1.")

    second = speedstats(tmp_path, *argv)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "going on from out/bisect.json: 1 comparison measured before" in second.stderr
    assert second.stdout.startswith("#3 is the first build slower than the one before it (#2): "
                                    "resnet50-bs2 +")
    state = json.loads((tmp_path / "out" / "bisect.json").read_text())
    assert (state["outcome"], state["culprits"]) == ("found", [2])
    pairs = [(s["head"], s["base"]) for s in state["steps"]]
    # #2 against #1 (no slower), #3 against #2 (slower), and #4 against #3 unless #3 explains it all.
    assert pairs[:3] == [(3, 0), (1, 0), (2, 1)] and pairs[3:] in ([], [(3, 2)])
    assert second.stderr.count("$ speedstats run") == len(pairs) - 1  # the first was not measured again
    for step in state["steps"]:
        results = results_model.load(tmp_path / "out" / step["results"])
        versions = [results.builds[role]["packages"]["oneflow"]["version"]
                    for role in ("oneflow", "oneflow_base")]
        assert versions == [["0.9.0", "0.9.0+a", "0.9.0+c5s200", "0.9.0+c6s200"][i]
                            for i in (step["head"], step["base"])]
        assert "pytorch" not in results.builds  # a comparison measures the two OneFlow builds only
    report = (tmp_path / "out" / "report.md").read_text()
    assert report.startswith("**Speed bisect** of 4 builds, from good (#1) to bad (#4).\n\n"
                             "#3 is the first build")


def test_reproduce_says_whether_another_machines_verdict_holds_here(tmp_path, history, oneflow_build_cache):
    """CI's results.json, made on a GPU runner: 0.9.0+c5s200 against the installed 0.9.0 a regression."""
    data = json.loads((ROOT / "tests" / "data" / "head-vs-base-results.json").read_text())
    data.update(device="cuda", gpu_name="NVIDIA A100-SXM4-80GB",
                machine={"preflight": {"quiet": True, "waited_s": 0.0, "reasons": []},
                         "driver": {"version": "550.54.15", "notes": []}})
    (case,) = [copy.deepcopy(c) for c in data["cases"] if c["id"] == "resnet50-bs2"]
    case["times"] = 10
    for framework in case["frameworks"].values():
        framework.update(times=10, total_s=framework["per_iter_s"] * 10)
    del case["frameworks"]["pytorch"]
    data["cases"] = [case]
    wheel = history[2]
    data["builds"] = {
        "oneflow": {"family": "oneflow", "source": "wheel", "packages": {"oneflow": {
            "version": "0.9.0+c5s200", "wheel": wheel.name,
            "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()}}},
        "oneflow_base": {"family": "oneflow", "source": "installed",
                         "packages": {"oneflow": {"version": "0.9.0"}}},
    }
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "results.json").write_text(json.dumps(data))
    (tmp_path / "suite.yml").write_text(tolerant("extends: smoke\n"))
    proc = speedstats(tmp_path, "reproduce", "ci/results.json", "--wheels", wheel.parent, "--suite",
                      "suite.yml", "--device", "cpu", "--cache-dir", oneflow_build_cache, "--out", "here")
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("speedstats reproduce: ci/results.json, suite 'smoke': measured in CI on cuda "
                               "(NVIDIA A100-SXM4-80GB); here on cpu (CPU: ")
    assert lines[0].endswith("another device, so only the changes compare, not the times.")
    assert lines[1] == (f"Builds: head oneflow 0.9.0+c5s200 ({wheel.name}, sha256 as recorded); base oneflow "
                        "0.9.0 (installed here).")
    ci_said = "resnet50-bs2  regression +20.5% (+18.8% to +22.2%)  "
    (row,) = [line for line in lines if line.startswith(ci_said)]
    assert row.split()[-1] == "yes" and "  regression +" in row[20:]
    assert lines[-1] == "1 of 1 verdicts hold here."
    here = results_model.load(tmp_path / "here" / "results.json")
    assert [c.id for c in here.cases] == ["resnet50-bs2"] and here.cases[0].times == 10
    assert here.builds["oneflow"]["packages"]["oneflow"]["sha256"] == data["builds"]["oneflow"]["packages"][
        "oneflow"]["sha256"]
