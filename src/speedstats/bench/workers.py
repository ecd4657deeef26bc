"""Worker processes: one per contender of a case (a launcher with its ranks for DDP), started, steered
through the control-file protocol of bench.worker, paused while another contender is timed, and killed
with everything they started.

The protocol, from the runner's side: write spec.json, start the process, wait for ready.json; for
each timed round write go-K and wait for round-K.json; at the end write stop and wait for done.json.
An error-RANK.json, an exit or the case's deadline ends the wait with WorkerFailed.

Every worker started and not yet killed is in a set that kill_started_workers() sweeps, so that
nothing a case started outlives it (see bench.processes for how a worker's processes are found).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from speedstats.bench import processes, protocol
from speedstats.bench.environment import subprocess_env
from speedstats.bench.workerspec import WorkerSpec
from speedstats.contenders import contender
from speedstats.fsutil import ensure_dir, write_atomic
from speedstats.lock import held_lock_fds

# The program a worker runs, before its `--control DIR`: the interpreter, then its arguments (under a
# DDP launcher, the interpreter runs the launcher and the launcher the arguments).
WORKER_PROGRAM = (sys.executable, "-m", "speedstats.bench.worker")
POLL_S = 0.005
# While a worker is timed the runner only waits for its file: the longer it has waited, the less often
# it looks (a twentieth of the time so far, at most MAX_POLL_S), so that it rarely wakes a core beside
# the framework on the clock. The worker takes the round's time itself; this only delays the next round.
MAX_POLL_S = 0.05
_started_workers = set()  # started and not yet killed, for kill_started_workers to sweep up


def poll_wait(since):
    """How long to sleep before the next look for a worker's file, waiting since `since` (monotonic)."""
    return min(MAX_POLL_S, max(POLL_S, (time.monotonic() - since) / 20))


class WorkerFailed(Exception):
    pass


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path, lines=6):
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    kept = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith(("W20", "I20"))]
    return " | ".join(kept[-lines:])[-600:]


def _describe_exit(code):
    if code < 0:
        sig = signal.Signals(-code).name
        hint = " (out of memory?)" if -code == signal.SIGKILL else ""
        return f"killed by {sig}{hint}"
    return f"exited with status {code}"


def _signal(pid, signum):
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


class Worker:
    """One contender's process (or launcher) for one case, steered through its control folder."""

    def __init__(self, role, case, device, control_dir, dataset_dir, deadline, build=None,
                 rounds=None, round_iterations=None, program=WORKER_PROGRAM):
        self.role = role
        self.framework = contender(role).family
        self.build = build
        self.case = case
        self.control = Path(control_dir)
        self.deadline = deadline
        self.program = tuple(program)
        self.proc = None
        self.tag = uuid.uuid4().hex  # in the environment of each of its processes, see kill()
        self.next_round = 0
        if self.control.exists():
            shutil.rmtree(self.control)
        ensure_dir(self.control, "worker's control folder")
        self.log_path = self.control / protocol.LOG_FILE
        spec = WorkerSpec(
            framework=self.framework, role=self.role, kind=case.kind, device=device,
            ddp=case.ddp, batch_size=case.batch_size, image_size=case.image_size,
            times=round_iterations or case.times, warmup=case.warmup, rounds=rounds or case.rounds,
            num_workers=case.num_workers,
            input_size=case.input_size, dataset_dir=str(dataset_dir) if dataset_dir else None,
            mode=case.mode, model=case.model, env=case.env,
            timeout_s=max(1.0, deadline - time.monotonic()),
        )
        write_atomic(self.control / protocol.SPEC_FILE, spec.to_json(), "worker's spec")

    def command(self):
        interpreter, *worker = self.program
        worker = [*worker, "--control", str(self.control)]
        if not self.case.ddp:
            return [interpreter, *worker]
        port = str(_free_port())
        n = str(self.case.world_size)
        # Through our wrapper, so that the launcher dies with the runner and passes on the device lock.
        wrapper = ["-m", "speedstats.bench.launch", str(self.control)]
        launcher = [*contender(self.role).ddp_launcher, "--nproc_per_node", n,
                    "--master_addr", "127.0.0.1", "--master_port", port]
        return [interpreter, *wrapper, *launcher, *worker]

    def start(self):
        processes.become_subreaper()
        lock_fds = held_lock_fds()
        env = self.env()
        env.update({processes.TAG_VARIABLE: self.tag, processes.PARENT_VARIABLE: str(os.getpid()),
                    processes.LOCK_FDS_VARIABLE: ",".join(map(str, lock_fds))})
        _started_workers.add(self)
        with open(self.log_path, "wb") as log:
            # A session of its own: a Ctrl-C on the terminal reaches only the runner, which kills it.
            self.proc = subprocess.Popen(
                self.command(), cwd=self.control, env=env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True, pass_fds=lock_fds,
            )

    def env(self):
        env = subprocess_env(self.framework, extra=self.case.env)
        return self.build.worker_env(env) if self.build is not None else env

    def processes(self):
        """The pids of this worker's running processes (launcher, ranks, their children), sorted."""
        if self.proc is None or self.proc.poll() is not None:
            return []
        return sorted(processes.members(self.proc.pid, self.tag))

    def pause(self):
        """Stop every process of this worker (SIGSTOP) while another contender's round is timed."""
        for pid in self.processes():
            _signal(pid, signal.SIGSTOP)

    def resume(self):
        for pid in self.processes():
            _signal(pid, signal.SIGCONT)

    def _error_file(self):
        errors = sorted(self.control.glob(protocol.ERROR_FILES))
        if not errors:
            return None
        try:
            return json.loads(errors[0].read_text(encoding="utf-8"))["error"]
        except (OSError, ValueError, KeyError):
            return "worker failed (unreadable error report)"

    def look_for(self, name):
        """One look for the worker's file `name`: its contents, or None while the worker is at work.
        WorkerFailed when the worker reported an error, exited without the file or passed the deadline."""
        path = self.control / name
        if path.exists():
            return json.loads(path.read_text(encoding="utf-8"))
        error = self._error_file()
        if error:
            self.kill()
            raise WorkerFailed(error)
        code = self.proc.poll()
        if code is not None and not path.exists():
            error = self._error_file()
            if error:
                raise WorkerFailed(error)
            tail = _tail(self.log_path)
            raise WorkerFailed(f"{_describe_exit(code)}{': ' + tail if tail else ''}")
        if time.monotonic() > self.deadline:
            self.kill()
            raise WorkerFailed(f"timed out after {self.case.timeout_s:g}s (case timeout)")
        return None

    def await_file(self, name):
        start = time.monotonic()
        while (found := self.look_for(name)) is None:
            time.sleep(poll_wait(start))
        return found

    def run_round(self, profile=False):
        """Time one round: the worker's report (round-K.json, its `total_s` the round's seconds). The
        rounds are numbered here, in the order asked for, so a disturbed round can be measured again.
        profile: a profiled round (profile-K), its report's `profile` the sampler's figures."""
        k, self.next_round = self.next_round, self.next_round + 1
        kind = protocol.PROFILE if profile else protocol.GO
        write_atomic(self.control / protocol.round_start_file(k, kind), "", "worker's control file")
        return self.await_file(protocol.round_file(k))

    def finish(self):
        """No more rounds (the worker's spec.rounds is a maximum: sequential rounds, re-measures): its
        done.json (peak memory), then its processes are gone."""
        write_atomic(self.control / protocol.STOP_FILE, "", "worker's control file")
        done = self.await_file(protocol.DONE_FILE)
        try:
            self.proc.wait(timeout=max(1.0, min(60.0, self.deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            pass  # figures are in; a launcher slow to tear down must not hold the run
        self.kill()
        return done

    def kill(self):
        """SIGKILL every process of this worker (launcher, ranks, their children) and wait until they
        are gone. Safe to call again, and after the worker exited (it sweeps up what it left)."""
        # Also without self.proc: a signal may have cut start() short after the process began.
        if not processes.kill_tree(self.proc, self.tag):
            _started_workers.discard(self)


def kill_started_workers():
    for worker in list(_started_workers):
        worker.kill()


@dataclass
class WorkerSetup:
    """What every worker of a run shares: the device, the dataset, each contender's build
    (bench.builds.Build, none: the installed packages) and the program the worker runs."""

    device: str
    dataset_dir: Path | None = None
    builds: dict = field(default_factory=dict)
    program: tuple = WORKER_PROGRAM

    def worker(self, role, case, control_dir, deadline, rounds, round_iterations):
        return Worker(role, case, self.device, control_dir, self.dataset_dir, deadline,
                      build=self.builds.get(role), rounds=rounds, round_iterations=round_iterations,
                      program=self.program)
