"""Nothing a case starts outlives it: real torchrun and oneflow.distributed.launch DDP workers on the
CPU, checked by process id after a case timeout, a SIGTERM and a SIGKILL of `speedstats run`."""

import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from procfs import running
from speedstats import results as results_model
from speedstats.bench import protocol

pytestmark = pytest.mark.heavy

ROOT = Path(__file__).resolve().parents[1]
# times: 100000 never ends: a case stops only by its timeout or by the run being stopped.
DDP_CASE = ("{{id: {id}, kind: resnet50, ddp: true, world_size: 2, batch_size: 2, image_size: 32, times: "
            "100000{extra}}}")
PID_FILES = (protocol.LAUNCHER_PID_FILE, protocol.pid_file(0), protocol.pid_file(1))


@pytest.fixture
def runs():
    """Started runs; one still there when the test ends (it failed) is killed with its workers."""
    started = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def start_run(tmp_path, cases, runs):
    suite = tmp_path / "suite.yml"
    suite.write_text("name: orphans\nwarmup: 0\ncases:\n" + "".join(f"  - {c}\n" for c in cases))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), SPEEDSTATS_LOCK_DIR=str(tmp_path / "locks"))
    env.pop("GITHUB_OUTPUT", None)
    proc = subprocess.Popen([sys.executable, "-m", "speedstats", "run", "--suite", str(suite), "--device",
                             "cpu",
                             "--out", str(tmp_path / "out"), "--quiet"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(600, proc.kill)  # a hung run fails the test instead of hanging it
    watchdog.daemon = True
    watchdog.start()
    runs.append(proc)
    return proc


def read_until(proc, text, seen):
    for line in proc.stderr:
        seen.append(line)
        if text in line:
            return
    pytest.fail(f"never printed {text!r}:\n{''.join(seen)}")


def case_pids(out, case_id):
    """Process ids of both frameworks' launchers and ranks, as each recorded itself."""
    pids = {}
    for fw in ("oneflow", "pytorch"):
        for name in PID_FILES:
            path = out / "workers" / case_id / fw / name
            assert path.exists(), f"{path} missing: the case did not start all its processes"
            pids[f"{fw}/{name}"] = int(path.read_text())
    return pids


def survivors(pids):
    return {name: pid for name, pid in pids.items() if running(pid)}


def test_a_timed_out_ddp_case_and_a_terminated_run_leave_nothing_running(tmp_path, runs):
    out = tmp_path / "out"
    proc = start_run(tmp_path, [DDP_CASE.format(id="ddp-timeout", extra=", timeout_s: 90"),
                                DDP_CASE.format(id="ddp-cancel", extra="")], runs)
    seen = []
    read_until(proc, "[1/2]   PyTorch: ready after", seen)
    timed_out = case_pids(out, "ddp-timeout")
    assert survivors(timed_out) == timed_out  # all six are running, OneFlow's ranks in their first round
    # The timeout kills the case; when the next case starts, nothing of it is left.
    read_until(proc, "[2/2] ddp-cancel", seen)
    assert survivors(timed_out) == {}
    assert "timed out after 90s" in "".join(seen)

    read_until(proc, "[2/2]   PyTorch: ready after", seen)
    cancelled = case_pids(out, "ddp-cancel")
    assert survivors(cancelled) == cancelled
    proc.send_signal(signal.SIGTERM)
    rest = proc.stderr.read()
    assert proc.wait(timeout=60) == 130, rest
    assert survivors(cancelled) == {}
    # The device is free, and what the run wrote says it was cancelled after its first case.
    with open(tmp_path / "locks" / "cpu.lock", "rb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    results = results_model.load(out / "results.json")
    assert results.cancelled is True and [c.id for c in results.cases] == ["ddp-timeout"]
    comment = (out / "comment.md").read_text(encoding="utf-8")
    assert ("\n❌ speed job cancelled before it finished: only the cases above were measured\n ``` \n"
            in comment)
    assert "speedstats: cancelled after 1 of 2 cases" in rest


def test_a_killed_run_takes_its_ddp_workers_along_and_the_lock_waits_for_them(tmp_path, runs):
    out = tmp_path / "out"
    proc = start_run(tmp_path, [DDP_CASE.format(id="ddp-kill", extra="")], runs)
    read_until(proc, "[1/1]   PyTorch: ready after", [])
    pids = case_pids(out, "ddp-kill")
    assert survivors(pids) == pids
    lock_file = os.open(tmp_path / "locks" / "cpu.lock", os.O_RDONLY)
    try:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        killed_at = time.monotonic()
        # The moment the device is free again, no process of the run is running any more.
        while True:
            try:
                fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                assert time.monotonic() - killed_at < 30, f"device still locked; running: {survivors(pids)}"
                time.sleep(0.001)
        assert survivors(pids) == {}
    finally:
        os.close(lock_file)
