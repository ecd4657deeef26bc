"""Two real `speedstats run` on the same device: the second one waits for the first to finish."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from actions_runner import TINY_SUITE, clean_environ
from speedstats.lock import device_lock

ROOT = Path(__file__).resolve().parents[1]


def start_run(tmp_path, name):
    env = clean_environ()
    env["SPEEDSTATS_LOCK_DIR"] = str(tmp_path / "locks")
    return subprocess.Popen(
        [sys.executable, "-m", "speedstats", "run", "--suite", "speed.yml", "--device", "cpu", "--out", name,
         "--quiet"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def read_until(stream, prefix):
    """Lines of a process's stderr up to the first that starts with prefix (EOF fails the test)."""
    seen = []
    for line in stream:
        seen.append(line)
        if line.startswith(prefix):
            return seen
    pytest.fail(f"never printed {prefix!r}; printed:\n{''.join(seen)}")


@pytest.mark.heavy
def test_two_runs_on_one_device_take_turns(tmp_path):
    (tmp_path / "speed.yml").write_text(TINY_SUITE.format(max_oneflow_ms=1e9))
    # This test holds the CPU first so that both runs are surely waiting before either starts.
    with device_lock("cpu", timeout_s=0, lock_dir=tmp_path / "locks"):
        runs = {name: start_run(tmp_path, name) for name in ("a", "b")}
        for proc in runs.values():
            read_until(proc.stderr, f"waiting for cpu (held by pid {os.getpid()} since ")
    finished = {name: proc.communicate(timeout=600) for name, proc in runs.items()}
    for name, proc in runs.items():
        assert proc.returncode == 0, finished[name][1]

    # The one that lost the race said which run it waited for, and started only after that one ended.
    waited_for = {name: [other for other in runs if other != name
                         and f"waiting for cpu (held by pid {runs[other].pid} since " in finished[name][1]]
                  for name in runs}
    (second,) = [name for name, others in waited_for.items() if others]
    (first,) = waited_for[second]
    assert waited_for[first] == []
    results = {name: json.loads((tmp_path / name / "results.json").read_text()) for name in runs}
    assert results[first]["finished_at"] <= results[second]["started_at"]
    for name in runs:
        assert results[name]["cases"][0]["frameworks"]["oneflow"]["error"] is None
