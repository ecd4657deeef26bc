"""A worker that measures nothing: the real worker loop (bench.worker.main and serve) with a step, a
framework and an instrument that follow a plan, so its round times are the plan's. The runner starts it as
it starts a real worker (SuiteRunner's worker_program), so the scheduler's processes, files, pauses and
kills are the real ones, and so is the worker's side of the protocol; only the framework's work and what
the worker measures around a round are replaced.

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
import dataclasses
import functools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from speedstats.bench import protocol, worker
from speedstats.bench.instruments import Instrument
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
    for pid_file in sorted(control.parent.glob(f"*/{protocol.pid_file(0)}")):
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


def planned(values, k):
    """The plan's value for round k: the last one again for later rounds."""
    return values[min(k, len(values) - 1)]


class PlannedTime:
    """The worker's perf_counter: 0 when a round starts (PlannedRounds), the plan's seconds once the
    round's step ran, so that the loop's total_s is exactly the plan's."""

    def __init__(self):
        self.seconds = 0.0

    def __call__(self):
        return self.seconds


@dataclasses.dataclass
class Launch:
    """One start of a planned worker: its plan, its name in events.log and where it writes."""

    plan: dict
    name: str
    control: Path
    folder: Path  # the plan's: events.log, throttled


class PlannedFramework:
    """Nothing to wait for; the plan's peak memory and imported build."""

    def __init__(self, launch):
        self.plan = launch.plan

    def sync(self):
        pass

    def barrier(self):
        pass

    def close(self):
        pass

    def peak_memory(self):
        return self.plan.get("peak_memory", 1000), "rss"

    def imported(self):
        return {"version": "0.0.0+fake", "file": self.plan.get("imported_file", __file__), "others": []}


class PlannedStep:
    """The warm-up sleeps setup_s; round K takes the plan's seconds on the worker's clock, or dies, hangs
    or throttles the GPU, as planned."""

    def __init__(self, launch, clock_time):
        self.launch = launch
        self.clock_time = clock_time
        self.rounds = 0

    def warm_up(self, iterations):
        launch = self.launch
        if "setup_s" in launch.plan:
            time.sleep(launch.plan["setup_s"])
            event(launch.folder, f"{launch.name} ready others {others_state(launch.control, wait_s=0.0)}")

    def run(self, iterations):
        plan, k = self.launch.plan, self.rounds
        self.rounds += 1
        if plan.get("die_at") == k:
            os.kill(os.getpid(), signal.SIGKILL)
        while plan.get("hang_at") == k:
            time.sleep(1)
        if k in plan.get("throttle_at", ()):
            (self.launch.folder / "throttled").touch()
        self.clock_time.seconds = planned(plan.get("rounds") or [0.01], k)


class PlannedRounds(Instrument):
    """What a planned worker measures around its rounds: each round's start in events.log (with the
    states of the other contenders' workers), its planned thread_cpu_s and, in a profiled round, its
    planned profile; the worker's stop."""

    def __init__(self, launch, clock_time, steps):
        self.launch = launch
        self.clock_time = clock_time
        self.steps = steps
        self.round = None

    def before_round(self, round):
        self.round = round
        self.clock_time.seconds = 0.0
        what = "profiled round" if round.profiled else "round"
        event(self.launch.folder,
              f"{self.launch.name} {what} {round.number} others {others_state(self.launch.control)}")

    def add_to(self, record):
        plan = self.launch.plan
        if plan.get("thread_cpu"):
            record["thread_cpu_s"] = planned(plan["thread_cpu"], self.round.number)
        if self.round.profiled:
            profile = plan.get("profile") or {"self_s": {}, "total_s": {}}
            record["profile"] = {**profile, "steps": self.steps, "samples": 0, "elapsed_s": 0.0,
                                 "interval_s": 0.001}

    def stop(self):
        event(self.launch.folder, f"{self.launch.name} stop")


def planned_measurement(plan_path, control, clock_time, spec, clock):
    """The measurement of this start of spec.role's worker: the plan's launch for it (bench.worker's
    set_up)."""
    folder = plan_path.parent
    launches = json.loads(plan_path.read_text(encoding="utf-8"))["contenders"][spec.role]
    number = launch_number(folder, spec.role)
    launch = Launch(plan=planned(launches, number), name=f"{spec.role} {number}", control=control,
                    folder=folder)
    if launch.plan.get("child"):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        write_atomic(control / "child-pid", str(child.pid), "fake worker's child pid file")
    event(folder, f"{launch.name} start")
    return worker.Measurement(PlannedFramework(launch), PlannedStep(launch, clock_time),
                              [PlannedRounds(launch, clock_time, spec.times)])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--plan", required=True, type=Path)
    parser.add_argument("--control", required=True, type=Path)
    args = parser.parse_args()
    clock_time = PlannedTime()
    set_up = functools.partial(planned_measurement, args.plan, args.control, clock_time)
    return worker.main(["--control", str(args.control)], set_up=set_up,
                       clock=dataclasses.replace(worker.REAL_CLOCK, perf_counter=clock_time))


if __name__ == "__main__":
    sys.exit(main())
