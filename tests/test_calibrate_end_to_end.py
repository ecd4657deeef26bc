"""`speedstats calibrate` for real: the installed OneFlow against itself on one tiny case (CPU), then a
`run` that takes the calibration's process sd into its rule. Structure and sanity, not figures: whatever
else the machine is doing, the scatter is what it is."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from busy_machine import tolerant
from speedstats import calibration as store
from speedstats import results as results_model
from speedstats.analysis.rule import MAX_PROCESS_SD, runner_process_sd

pytestmark = pytest.mark.heavy

ROOT = Path(__file__).resolve().parents[1]

TINY = """\
name: tiny
warmup: 1
cases:
  - {id: resnet50-bs2, kind: resnet50, batch_size: 2, image_size: 32, times: 2}
"""


def speedstats(tmp, *args):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), SPEEDSTATS_LOCK_DIR=str(tmp / "locks"))
    for name in ("GITHUB_OUTPUT", "RUNNER_NAME"):
        env.pop(name, None)
    return subprocess.run([sys.executable, "-m", "speedstats", *args], capture_output=True, text=True,
                          env=env, cwd=tmp, timeout=900, check=False)


def test_calibrate_measures_the_build_against_itself_and_run_takes_it_into_its_rule(tmp_path):
    suite = tmp_path / "suite.yml"
    suite.write_text(tolerant(TINY))
    cache = tmp_path / "cache"  # the installed OneFlow: no build in it but the calibration
    proc = speedstats(tmp_path, "calibrate", "--suite", str(suite), "--device", "cpu", "--cache-dir",
                      str(cache), "--out", str(tmp_path / "aa"), "--pairs", "2", "--rounds", "3",
                      "--trials", "20")
    assert proc.returncode == 0, proc.stderr
    (path,) = (cache / "calibration").iterdir()
    assert f"speedstats calibrate: wrote {path};" in proc.stderr
    calibration = store.read_calibration(path)
    assert (calibration.suite, calibration.device) == ("tiny", "cpu")
    assert (calibration.pairs, calibration.pair_rounds) == (2, 3)
    assert calibration.build == "0.9.0" and calibration.gpu_name.startswith("CPU: ")
    (case,) = calibration.cases
    assert (case.id, case.pairs, case.rounds, case.error) == ("resnet50-bs2", 2, 6, None)
    assert 0 < case.round_sd_low <= case.round_sd <= case.round_sd_high
    assert 0 <= case.process_sd_low <= case.process_sd <= case.process_sd_high
    assert case.round_s > 0 and case.pair_start_s > 0 and case.no_change_wall_s > 0
    assert case.resolves is None or (0.04 < case.resolves <= 1 and case.resolves_wall_s > 0)
    header, row = proc.stdout.splitlines()
    assert header.startswith("CASE") and row.startswith("resnet50-bs2  2/6")

    # The A/A run itself: one build as head and base, in two pairs of three rounds, nothing else.
    aa = results_model.load(tmp_path / "aa" / "results.json")
    (measured,) = aa.cases
    assert set(measured.frameworks) == {"oneflow", "oneflow_base"}
    assert measured.paired.stages == [3, 3] and len(measured.paired.ratios) == 6
    assert aa.builds["oneflow"]["packages"] == aa.builds["oneflow_base"]["packages"]

    # `run` with a baseline on this runner takes the case's process sd, pooled with the default by its
    # two pairs, as its rule's prior.
    out = tmp_path / "out"
    proc = speedstats(tmp_path, "run", "--suite", str(suite), "--device", "cpu", "--cache-dir", str(cache),
                      "--out", str(out), "--quiet", "--only", "oneflow", "--baseline-oneflow", "installed",
                      "--attribute", "never")
    assert proc.returncode in (0, 1), proc.stderr
    assert f"speedstats: calibration {path.name} (" in proc.stderr
    raw = json.loads((out / "results.json").read_text())
    prior = runner_process_sd(case.process_sd, case.pairs)
    assert prior == case.prior and prior <= MAX_PROCESS_SD
    assert raw["calibration"] == {"file": path.name, "measured_at": calibration.measured_at, "runner": None,
                                  "process_sd": {"resnet50-bs2": prior}}
    assert raw["cases"][0]["paired"]["rule"]["process_sd"] == prior
