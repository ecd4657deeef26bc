"""A worker that speaks bench.worker's control-file protocol but measures nothing: its round times come
from a plan. The runner starts it as it starts a real worker (SuiteRunner's worker_program), so the
scheduler's processes, files, pauses and kills are the real ones; only the framework's work is replaced.

    python tests/fakeworker.py --plan PLAN.json --control DIR

PLAN.json: {"contenders": {ROLE: [LAUNCH, ...]}}, one LAUNCH for each time a worker of that contender
is started (the last one again for later starts), each with any of:

    rounds        [seconds, ...]: the total_s of round K (the last one again for later rounds)
    thread_cpu    [seconds, ...]: its main thread's CPU seconds in round K (thread_cpu_s; the last one
                  again for later rounds); none reported without it
    die_at        K: SIGKILL itself when told to start round K (no report: a crash)
    hang_at       K: never answer round K (the case's timeout)
    throttle_at   [K, ...]: during round K, make the file `throttled` beside the plan (tests read it as
                  a throttled GPU through the stand-in NVML)
    child         true: start a child process that sleeps, which the runner must kill with the worker
    peak_memory   bytes, for done.json
    setup_s       seconds to sleep before ready.json (its start-up and warm-up), then the event
                  "ROLE LAUNCH ready others STATES"
    profile       {"self_s": {PLACE: seconds}, "total_s": {PLACE: seconds}}: what a profiled round
                  (profile-K) reports as its sampler's figures
    imported_file the framework module's file its ready.json reports (this file's path by default)

Every start and round is a line of `events.log` beside the plan: "ROLE LAUNCH start", "ROLE LAUNCH
round K others STATES" ("profiled round K" for a profile-K; the process states of the other
contenders' live workers: T while they are stopped; "-" when there is none), "ROLE LAUNCH stop".
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from speedstats.bench import processes
from speedstats.bench.workerspec import SPEC_FILE, WorkerSpec
from speedstats.fsutil import write_atomic

POLL_S = 0.002


def launch_number(folder, role):
    """How many workers of this contender the plan's folder saw start before this one."""
    n = 0
    while True:
        try:
            os.close(os.open(folder / f"launch-{role}-{n}", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return n
        except FileExistsError:
            n += 1


def event(folder, line):
    with open(folder / "events.log", "a", encoding="utf-8") as log:
        log.write(line + "\n")


def wait_for_round(control, k, deadline):
    """"go" or "profile" once round k may start (go-K, profile-K), None when the runner asks for no more
    rounds (stop)."""
    while True:
        for kind in ("go", "profile"):
            if (control / f"{kind}-{k}").exists():
                return kind
        if (control / "stop").exists():
            return None
        if time.monotonic() > deadline:
            raise TimeoutError(f"no go-{k} from the runner before the case timeout")
        time.sleep(POLL_S)


def process_state(pid):
    """The state letter of a process (S, R, T: stopped, Z...), or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return stat[stat.rindex(b")") + 2:].split()[0].decode()


def others_state(control, wait_s=5.0):
    """The states of the other contenders' workers of this measurement that are alive, "-" for none.
    A SIGSTOP sent just before this round began may take a moment to land: each gets wait_s to stop."""
    found = []
    for pid_file in sorted(control.parent.glob("*/pid-0")):
        if pid_file.parent == control:
            continue
        pid, deadline = int(pid_file.read_text()), time.monotonic() + wait_s
        state = process_state(pid)
        while state not in (None, "Z", "T") and time.monotonic() < deadline:
            time.sleep(POLL_S)
            state = process_state(pid)
        if state not in (None, "Z"):
            found.append(state)
    return " ".join(found) or "-"


def write_json(path, data):
    write_atomic(path, json.dumps(data), "fake worker's report")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--plan", required=True, type=Path)
    parser.add_argument("--control", required=True, type=Path)
    args = parser.parse_args()
    processes.die_with_parent()
    control, folder = args.control, args.plan.parent
    write_atomic(control / "pid-0", str(os.getpid()), "fake worker's pid file")
    spec = WorkerSpec.from_json((control / SPEC_FILE).read_text(encoding="utf-8"))
    deadline = time.monotonic() + spec.timeout_s
    launches = json.loads(args.plan.read_text(encoding="utf-8"))["contenders"][spec.role]
    number = launch_number(folder, spec.role)
    plan = launches[min(number, len(launches) - 1)]
    name = f"{spec.role} {number}"
    if plan.get("child"):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        write_atomic(control / "child-pid", str(child.pid), "fake worker's child pid file")
    event(folder, f"{name} start")
    imported = {"version": "0.0.0+fake", "file": plan.get("imported_file", __file__), "others": []}
    if "setup_s" in plan:
        time.sleep(plan["setup_s"])
        event(folder, f"{name} ready others {others_state(control, wait_s=0.0)}")
    write_json(control / "ready.json", {"setup_s": 0.0, "pid": os.getpid(), "imported": imported})
    times = plan.get("rounds") or [0.01]
    for k in range(spec.rounds):  # at most, as a real worker: the runner may stop the rounds early
        kind = wait_for_round(control, k, deadline)
        if kind is None:
            break
        event(folder, f"{name} {'round' if kind == 'go' else 'profiled round'} {k} others "
                      f"{others_state(control)}")
        if plan.get("die_at") == k:
            os.kill(os.getpid(), signal.SIGKILL)
        while plan.get("hang_at") == k:
            time.sleep(1)
        if k in plan.get("throttle_at", ()):
            (folder / "throttled").touch()
        now = time.time()
        report = {"total_s": times[min(k, len(times) - 1)], "started_unix": now, "ended_unix": now}
        if plan.get("thread_cpu"):
            report["thread_cpu_s"] = plan["thread_cpu"][min(k, len(plan["thread_cpu"]) - 1)]
        if kind == "profile":
            profile = plan.get("profile") or {"self_s": {}, "total_s": {}}
            report["profile"] = {**profile, "steps": spec.times, "samples": 0, "elapsed_s": 0.0,
                                 "interval_s": 0.001}
        write_json(control / f"round-{k}.json", report)
    event(folder, f"{name} stop")
    write_json(control / "done.json", {"peak_memory_bytes": plan.get("peak_memory", 1000),
                                       "memory_kind": "rss"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
