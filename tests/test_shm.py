"""Shared memory for dataloader workers: a too small /dev/shm fails the case at once, with the fix."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from speedstats.bench import shm
from speedstats.suite import load_suite

ROOT = Path(__file__).resolve().parents[1]


def suite_case(tmp_path, **fields):
    case = {"id": "dl", "kind": "swin_dataloader", "batch_size": 32, "num_workers": 8, "input_size": 224,
            "times": 1, **fields}
    path = tmp_path / "suite.yml"
    path.write_text(json.dumps({"name": "t", "cases": [case]}), encoding="utf-8")
    return load_suite(str(path)).cases[0]


def test_what_the_workers_hold_is_workers_x_prefetch_x_batch_for_two_frameworks(tmp_path):
    batch = 32 * 3 * 224 * 224 * 4  # 19.3 MB, as the old job's default case
    assert shm.needed_bytes(suite_case(tmp_path)) == int(8 * 2 * batch * 2 * 1.5)
    assert shm.needed_bytes(suite_case(tmp_path, num_workers=0)) == 0
    assert shm.needed_bytes(suite_case(tmp_path, kind="resnet50", num_workers=None)) == 0
    # Docker's default 64 MB is too small for even one worker of the default batch
    assert shm.needed_bytes(suite_case(tmp_path, num_workers=1)) > 64 << 20


def test_a_case_that_fits_passes_and_one_that_does_not_says_how_to_fix_it(tmp_path):
    free = shm.free_bytes(str(tmp_path))
    assert free > 0
    assert shm.shm_error(suite_case(tmp_path, num_workers=1, batch_size=1, input_size=8),
                         str(tmp_path)) is None
    huge = suite_case(tmp_path, num_workers=64, batch_size=1 << 14, input_size=1 << 10)
    message = shm.shm_error(huge, str(tmp_path))
    # The free space moves while other processes write to the same disk: a number, not this one.
    assert re.match(rf"{re.escape(str(tmp_path))} has \d+ MiB free, the 64 dataloader workers per framework "
                    r"need about \d+ MiB", message), message
    assert message.endswith('not run: set "default-shm-size": "8G" beside "default-runtime": "nvidia" in the '
                            "runner host's /etc/docker/daemon.json, then restart Docker")
    assert "\n" not in message
    assert shm.shm_error(huge, str(tmp_path / "absent")) is None  # no /dev/shm (not Linux): nothing to check


def _can_unshare():
    if os.geteuid() != 0:
        return "needs root: a private mount namespace with a small tmpfs over /dev/shm"
    if shutil.which("unshare") is None:
        return "needs unshare(1) (util-linux)"
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /dev/shm"],
                           capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return f"unshare -m with a tmpfs mount is not allowed here: {probe.stderr.strip()}"
    return None


TINY_SUITE = """\
name: tiny-shm
warmup: 1
timeout_s: 300
dataset: {images: 24, classes: 2, min_side: 64, max_side: 96}
cases:
  - {id: swin-dataloader-w2, kind: swin_dataloader, batch_size: 8, num_workers: 2, input_size: 224, times: 2}
  - {id: resnet50-bs2, kind: resnet50, batch_size: 2, image_size: 32, times: 1, min_relative_speed: 0.01}
"""


@pytest.mark.heavy
def test_under_an_8m_dev_shm_the_dataloader_case_fails_at_once_and_the_next_case_runs(tmp_path):
    why = _can_unshare()
    if why:
        pytest.skip(why)
    (tmp_path / "suite.yml").write_text(TINY_SUITE, encoding="utf-8")
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_"))}
    env.update(PYTHONPATH=str(ROOT / "src"), SPEEDSTATS_LOCK_DIR=str(tmp_path / "locks"))
    run = (f"mount -t tmpfs -o size=8m tmpfs /dev/shm && exec {sys.executable} -m speedstats run "
           f"--suite {tmp_path / 'suite.yml'} --device cpu --out {out} --cache-dir {tmp_path / 'cache'}")
    proc = subprocess.run(["unshare", "-m", "sh", "-c", run], capture_output=True, text=True, env=env,
                          timeout=900, check=False)

    assert proc.returncode == 3, proc.stderr  # a case without figures
    results = json.loads((out / "results.json").read_text())
    dataloader, resnet = results["cases"]
    errors = {fw: dataloader["frameworks"][fw]["error"] for fw in ("oneflow", "pytorch")}
    assert errors["oneflow"] == errors["pytorch"]
    assert errors["oneflow"].startswith("/dev/shm has 8 MiB free, the 2 dataloader workers per framework "
                                        "need "
                                        "about 55 MiB")
    assert '"default-shm-size": "8G" beside "default-runtime": "nvidia"' in errors["oneflow"]
    failed = [line for line in proc.stderr.splitlines() if "FAILED" in line]
    assert failed == [f"[1/2]   FAILED: {errors['oneflow']}"]
    assert dataloader["started_at"] == dataloader["finished_at"]  # nothing started
    for fw in ("oneflow", "pytorch"):
        assert resnet["frameworks"][fw]["error"] is None and resnet["frameworks"][fw]["per_iter_s"] > 0
