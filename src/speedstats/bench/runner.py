"""Runs a suite: every case, both frameworks, each in a process of its own.

A case starts one worker per framework (a launcher with its ranks for DDP). With `interleave`
(the default) both workers are set up and warmed up first, then timed rounds alternate
OneFlow, PyTorch, OneFlow, PyTorch, so that drift on the machine hits both alike; without it each
framework runs all its rounds alone, which needs only one framework's memory at a time.

A worker that crashes, hangs past the case's timeout or runs out of memory is recorded with its
error and the run goes on. results.json is rewritten (atomically) after every case, so a run that
is killed keeps what it measured.
"""

import dataclasses
import datetime
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from speedstats.analysis.stats import spread
from speedstats.bench.environment import package_versions, subprocess_env
from speedstats.fsutil import write_atomic
from speedstats.results import FRAMEWORKS, CaseResult, FrameworkResult, Results

POLL_S = 0.005
LABELS = {"oneflow": "OneFlow", "pytorch": "PyTorch"}


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


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


class Worker:
    """One framework's process (or launcher) for one case, steered through its control folder."""

    def __init__(self, framework, case, device, control_dir, dataset_dir, deadline):
        self.framework = framework
        self.case = case
        self.control = Path(control_dir)
        self.deadline = deadline
        self.proc = None
        if self.control.exists():
            shutil.rmtree(self.control)
        self.control.mkdir(parents=True)
        self.log_path = self.control / "worker.log"
        spec = {
            "framework": framework, "kind": case.kind, "device": device, "ddp": case.ddp,
            "batch_size": case.batch_size, "image_size": case.image_size, "times": case.times,
            "warmup": case.warmup, "rounds": case.rounds, "num_workers": case.num_workers,
            "input_size": case.input_size, "dataset_dir": str(dataset_dir) if dataset_dir else None,
            "mode": case.mode, "model": case.model, "env": case.env,
            "timeout_s": max(1.0, deadline - time.monotonic()),
        }
        (self.control / "spec.json").write_text(json.dumps(spec), encoding="utf-8")

    def command(self):
        worker = ["-m", "speedstats.bench.worker", "--control", str(self.control)]
        if not self.case.ddp:
            return [sys.executable] + worker
        port = str(_free_port())
        n = str(self.case.world_size)
        if self.framework == "pytorch":
            launcher = ["-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", n,
                        "--master_addr", "127.0.0.1", "--master_port", port]
        else:
            launcher = ["-m", "oneflow.distributed.launch", "--nproc_per_node", n,
                        "--master_addr", "127.0.0.1", "--master_port", port]
        return [sys.executable] + launcher + worker

    def start(self):
        with open(self.log_path, "wb") as log:
            # A session of its own, so a timeout kills the launcher and every rank together.
            self.proc = subprocess.Popen(
                self.command(), cwd=self.control, env=subprocess_env(self.framework, extra=self.case.env),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )

    def _error_file(self):
        errors = sorted(self.control.glob("error-*.json"))
        if not errors:
            return None
        try:
            return json.loads(errors[0].read_text(encoding="utf-8"))["error"]
        except (OSError, ValueError, KeyError):
            return "worker failed (unreadable error report)"

    def await_file(self, name):
        path = self.control / name
        while True:
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
            time.sleep(POLL_S)

    def run_round(self, k):
        (self.control / f"go-{k}").write_text("", encoding="utf-8")
        return float(self.await_file(f"round-{k}.json")["total_s"])

    def finish(self):
        done = self.await_file("done.json")
        try:
            self.proc.wait(timeout=max(1.0, min(60.0, self.deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            self.kill()  # figures are in; a launcher slow to tear down must not hold the run
        return done

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()


class CaseRun:
    """The state of one framework within a case."""

    def __init__(self, worker):
        self.worker = worker
        self.rounds = []
        self.error = None
        self.memory = {}

    def fail(self, message):
        self.error = message
        self.worker.kill()


def _framework_result(state, case):
    result = FrameworkResult(times=case.times, error=state.error)
    if state.rounds and state.error is None:
        per_iter = [total / case.times for total in state.rounds]
        rounds = spread(per_iter)
        result.rounds_s = per_iter
        result.spread_s = dataclasses.asdict(rounds)
        result.per_iter_s = rounds.median
        result.total_s = result.per_iter_s * case.times
        result.peak_memory_bytes = state.memory.get("peak_memory_bytes")
        result.memory_kind = state.memory.get("memory_kind")
    return result


def case_record(case):
    """An empty CaseResult describing a suite case, for its figures to be filled in."""
    return CaseResult(
        id=case.id, kind=case.kind, batch_size=case.batch_size, times=case.times,
        input_shape=case.input_shape if case.kind == "resnet50" else None,
        num_workers=case.num_workers if case.kind == "swin_dataloader" else None,
        ddp=case.ddp, world_size=case.world_size,
    )


def case_label(case):
    if case.kind == "swin_dataloader":
        return f"{case.id} (swin dataloader, batch {case.batch_size}, num_workers={case.num_workers})"
    extra = f", ddp, world size={case.world_size}" if case.ddp else ""
    return f"{case.id} (resnet50, input_shape={case.input_shape}{extra})"


class SuiteRunner:
    def __init__(self, suite, device, out_dir, dataset_dir=None, progress=None, gpu_name="unknown"):
        self.suite = suite
        self.device = device
        # Workers run in their control folders: every path they are given must be absolute.
        self.out_dir = Path(out_dir).resolve()
        self.dataset_dir = Path(dataset_dir).resolve() if dataset_dir else None
        self.progress = progress or (lambda message: print(message, file=sys.stderr, flush=True))
        self.gpu_name = gpu_name

    def run(self):
        results = Results(suite=self.suite.name, device=self.device, gpu_name=self.gpu_name,
                          versions=package_versions(), started_at=now_iso())
        results_path = self.out_dir / "results.json"
        total = len(self.suite.cases)
        for index, case in enumerate(self.suite.cases, 1):
            self.progress(f"[{index}/{total}] {case_label(case)}")
            results.cases.append(self.run_case(case, f"[{index}/{total}]"))
            results.finished_at = now_iso()
            write_atomic(results_path, results.to_json())
        return results

    def run_case(self, case, prefix):
        record = case_record(case)
        record.started_at = now_iso()
        deadline = time.monotonic() + case.timeout_s
        work = self.out_dir / "workers" / case.id
        states = {fw: CaseRun(Worker(fw, case, self.device, work / fw, self.dataset_dir, deadline))
                  for fw in FRAMEWORKS}
        try:
            if self.suite.interleave:
                for fw in FRAMEWORKS:
                    self._start(states[fw], prefix)
                for k in range(case.rounds):
                    for fw in FRAMEWORKS:
                        self._round(states[fw], k, case, prefix)
                for fw in FRAMEWORKS:
                    self._finish(states[fw], prefix)
            else:
                for fw in FRAMEWORKS:
                    self._start(states[fw], prefix)
                    for k in range(case.rounds):
                        self._round(states[fw], k, case, prefix)
                    self._finish(states[fw], prefix)
        finally:
            for state in states.values():
                state.worker.kill()
        record.frameworks = {fw: _framework_result(states[fw], case) for fw in FRAMEWORKS}
        record.finished_at = now_iso()
        return record

    def _start(self, state, prefix):
        label = LABELS[state.worker.framework]
        self.progress(f"{prefix}   {label}: starting and warming up ({state.worker.case.warmup} iterations)")
        try:
            state.worker.start()
            ready = state.worker.await_file("ready.json")
            self.progress(f"{prefix}   {label}: ready after {ready['setup_s']:.1f}s")
        except (WorkerFailed, OSError) as exc:
            state.fail(str(exc))
            self.progress(f"{prefix}   {label}: FAILED: {exc}")

    def _round(self, state, k, case, prefix):
        if state.error:
            return
        label = LABELS[state.worker.framework]
        try:
            total = state.worker.run_round(k)
        except WorkerFailed as exc:
            state.fail(str(exc))
            self.progress(f"{prefix}   {label}: round {k + 1}/{case.rounds} FAILED: {exc}")
            return
        state.rounds.append(total)
        unit, scale = ("s", 1.0) if case.kind == "swin_dataloader" else ("ms", 1000.0)
        self.progress(f"{prefix}   {label}: round {k + 1}/{case.rounds}: {total / case.times * scale:.3f}{unit}"
                      f" per iteration ({case.times} iterations in {total:.2f}s)")

    def _finish(self, state, prefix):
        if state.error:
            return
        try:
            state.memory = state.worker.finish()
        except WorkerFailed as exc:
            state.fail(str(exc))
            self.progress(f"{prefix}   {LABELS[state.worker.framework]}: FAILED at the end: {exc}")
