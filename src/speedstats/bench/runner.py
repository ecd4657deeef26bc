"""Runs a suite: every case, every contender, each in a process of its own.

The contenders of a case are the OneFlow build under test ("oneflow", the head), optionally a base
OneFlow build to judge it against ("oneflow_base"), and PyTorch ("pytorch"), each from its own build
(see bench.builds). A case starts one worker per contender (a launcher with its ranks for DDP). With
`interleave` (the default) every worker is set up and warmed up first, then the timed rounds run one
contender at a time in an order that changes from round to round, while the others are stopped
(SIGSTOP), so that neither drift on the machine nor an idle framework's background threads favour one
of them. Without it each contender runs all its rounds alone, which needs only one framework's memory
at a time.

With a baseline build (and `interleave`), the head and the base go on alternating rounds after the
case's planned ones while the head-vs-base rule (analysis.paired.SequentialRule, the suite's
`head_vs_base:`) asks for more, within its budget of rounds and seconds; PyTorch takes part in the
planned rounds only. A case that missed a threshold is measured again in fresh processes and judged
on all of its rounds: confirmed or cleared.

Around every timed round the runner records the machine's state (bench.machine_state: CPU used by
other processes, GPU clocks and throttling, foreign GPU processes); a round that the suite's
`disturbance:` settings call disturbed is measured again, a bounded number of times, and a case
whose figures still come from a disturbed round is marked (CaseResult.disturbance).

A worker that crashes, hangs past the case's timeout or runs out of memory is recorded with its
error and the run goes on. results.json is rewritten (atomically) after every case, so a run that
is killed keeps what it measured.
"""

import contextlib
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
import uuid
from pathlib import Path

from speedstats import machine
from speedstats import verdict as verdicts
from speedstats.analysis import paired as paired_analysis
from speedstats.analysis.stats import spread
from speedstats.bench import machine_state, processes, shm
from speedstats.bench.environment import package_versions, subprocess_env
from speedstats.bench.workerspec import SPEC_FILE, WorkerSpec
from speedstats.contenders import BASE, LABELS, ROLES, contender
from speedstats.fsutil import ensure_dir, write_atomic
from speedstats.lock import held_lock_fds
from speedstats.results import CaseResult, FrameworkResult, Results

PAIR = ("oneflow", BASE)  # the head and the base: the contenders of the sequential rounds

POLL_S = 0.005
# While a worker is timed the runner only waits for its file: the longer it has waited, the less often
# it looks (a twentieth of the time so far, at most MAX_POLL_S), so that it rarely wakes a core beside
# the framework on the clock. The worker takes the round's time itself; this only delays the next round.
MAX_POLL_S = 0.05
_started_workers = set()  # started and not yet killed, for SuiteRunner.run to sweep up


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


class WorkerFailed(Exception):
    pass


class RunCancelled(KeyboardInterrupt):
    """The run was stopped by a signal; `results` holds the cases it finished, marked cancelled."""

    def __init__(self, results):
        super().__init__("cancelled")
        self.results = results


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

    def __init__(self, framework, case, device, control_dir, dataset_dir, deadline, build=None,
                 rounds=None, round_iterations=None):
        self.role = framework
        self.framework = contender(framework).family
        self.build = build
        self.case = case
        self.control = Path(control_dir)
        self.deadline = deadline
        self.proc = None
        self.tag = uuid.uuid4().hex  # in the environment of each of its processes, see kill()
        self.next_round = 0
        if self.control.exists():
            shutil.rmtree(self.control)
        ensure_dir(self.control, "worker's control folder")
        self.log_path = self.control / "worker.log"
        spec = WorkerSpec(
            framework=self.framework, role=self.role, kind=case.kind, device=device,
            ddp=case.ddp, batch_size=case.batch_size, image_size=case.image_size,
            times=round_iterations or case.times, warmup=case.warmup, rounds=rounds or case.rounds,
            num_workers=case.num_workers,
            input_size=case.input_size, dataset_dir=str(dataset_dir) if dataset_dir else None,
            mode=case.mode, model=case.model, env=case.env,
            timeout_s=max(1.0, deadline - time.monotonic()),
        )
        write_atomic(self.control / SPEC_FILE, spec.to_json(), "worker's spec")

    def command(self):
        worker = ["-m", "speedstats.bench.worker", "--control", str(self.control)]
        if not self.case.ddp:
            return [sys.executable] + worker
        port = str(_free_port())
        n = str(self.case.world_size)
        # Through our wrapper, so that the launcher dies with the runner and passes on the device lock.
        wrapper = ["-m", "speedstats.bench.launch", str(self.control)]
        if self.framework == "pytorch":
            launcher = ["torch.distributed.run", "--nnodes", "1", "--nproc_per_node", n,
                        "--master_addr", "127.0.0.1", "--master_port", port]
        else:
            launcher = ["oneflow.distributed.launch", "--nproc_per_node", n,
                        "--master_addr", "127.0.0.1", "--master_port", port]
        return [sys.executable] + wrapper + launcher + worker

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

    def _processes(self):
        if self.proc is None or self.proc.poll() is not None:
            return []
        return sorted(processes.members(self.proc.pid, self.tag))

    def pause(self):
        """Stop every process of this worker (SIGSTOP) while another contender's round is timed."""
        for pid in self._processes():
            _signal(pid, signal.SIGSTOP)

    def resume(self):
        for pid in self._processes():
            _signal(pid, signal.SIGCONT)

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
        start = time.monotonic()
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
            time.sleep(min(MAX_POLL_S, max(POLL_S, (time.monotonic() - start) / 20)))

    def run_round(self, k=None):
        """Time one round; the worker numbers them itself, so a disturbed round can be measured again."""
        k, self.next_round = self.next_round, self.next_round + 1
        write_atomic(self.control / f"go-{k}", "", "worker's control file")
        return float(self.await_file(f"round-{k}.json")["total_s"])

    def processes(self):
        return self._processes()

    def finish(self):
        # No more rounds: the worker's spec.rounds is a maximum (sequential rounds, re-measures).
        write_atomic(self.control / "stop", "", "worker's control file")
        done = self.await_file("done.json")
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


def _signal(pid, signum):
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


class CaseRun:
    """The state of one contender within a case."""

    def __init__(self, worker):
        self.worker = worker
        self.rounds = []  # total seconds of each timed round
        self.error = None
        self.memory = {}
        self.imported = {}  # the framework module the worker imported: version, file
        self.states = []  # the machine's state around each of self.rounds
        self.remeasured = []  # disturbed rounds measured again: {"per_iter_s", "state"}

    def fail(self, message):
        self.error = message
        self.worker.kill()


@dataclasses.dataclass
class RoundPlan:
    """How a case's timed iterations are cut into rounds: `rounds` of `iterations` each."""

    rounds: int
    iterations: int

    @classmethod
    def for_case(cls, case, with_baseline, rule=paired_analysis.DEFAULT_RULE):
        """With a baseline, the case's timed iterations are split (not multiplied) into the rule's
        first_rounds rounds, unless the suite asks for that many or more."""
        first = rule.first_rounds
        if not with_baseline or case.rounds >= first:
            return cls(case.rounds, case.times)
        if case.times <= first:
            return cls(case.times, 1)
        # The fewest rounds, from first up to twice that, that divide the iterations evenly.
        for rounds in range(first, 2 * first + 1):
            if case.times % rounds == 0:
                return cls(rounds, case.times // rounds)
        return cls(first, round(case.times / first))


def _framework_result(rounds, error, case, plan, memory=None, imported=None):
    memory = memory or {}
    result = FrameworkResult(times=case.times, error=error, round_iterations=plan.iterations,
                             imported=imported or None)
    if rounds and error is None:
        per_iter = [total / plan.iterations for total in rounds]
        summary = spread(per_iter)
        result.rounds_s = per_iter
        result.spread_s = dataclasses.asdict(summary)
        result.per_iter_s = summary.median
        result.total_s = result.per_iter_s * case.times
        result.peak_memory_bytes = memory.get("peak_memory_bytes")
        result.memory_kind = memory.get("memory_kind")
    return result


def case_record(case):
    """An empty CaseResult describing a suite case, for its figures to be filled in."""
    return CaseResult(
        id=case.id, kind=case.kind, batch_size=case.batch_size, times=case.times,
        input_shape=case.input_shape if case.kind == "resnet50" else None,
        num_workers=case.num_workers if case.kind == "swin_dataloader" else None,
        ddp=case.ddp, world_size=case.world_size, mode=case.mode, model=case.model, env=dict(case.env),
    )


def case_label(case):
    if case.kind == "swin_dataloader":
        return f"{case.id} (swin dataloader, batch {case.batch_size}, num_workers={case.num_workers})"
    extra = f", ddp, world size={case.world_size}" if case.ddp else ""
    return f"{case.id} (resnet50, input_shape={case.input_shape}{extra})"


def round_order(contenders, k):
    """The contenders' order in round k: rotated by one each round, so each takes each place in turn."""
    shift = k % len(contenders)
    return list(contenders[shift:]) + list(contenders[:shift])


def case_flags(record, spec, gpu_name, suite_name="suite"):
    """The thresholds this case missed (a regression against the base is the sequential rule's to
    decide, while the rounds are measured: see analysis.paired.Rounds)."""
    if record.failure:
        return []
    return verdicts.judge_case(record, spec, gpu_name, suite_name).reasons


class SuiteRunner:
    """Runs every case of a suite for the contenders; `builds` maps contender to its bench.builds.Build."""

    def __init__(self, suite, device, out_dir, dataset_dir=None, progress=None, gpu_name="unknown",
                 builds=None, contenders=None, confirm=True, rule=None, quiet_wait_s=None, watch=None,
                 case_scope=None):
        self.suite = suite
        self.device = device
        # Workers run in their control folders: every path they are given must be absolute.
        self.out_dir = Path(out_dir).resolve()
        self.dataset_dir = Path(dataset_dir).resolve() if dataset_dir else None
        self.progress = progress or (lambda message: print(message, file=sys.stderr, flush=True))
        self.gpu_name = gpu_name
        self.builds = builds or {}
        default = [c for c in ROLES if c != BASE or BASE in self.builds]
        self.contenders = [c for c in ROLES if c in (contenders or default)]
        self.confirm = confirm
        self.rule = rule or getattr(suite, "head_vs_base", None) or paired_analysis.DEFAULT_RULE
        self.quiet_wait_s = quiet_wait_s  # on CUDA, before the first case (None: the suite's)
        self.watch = watch  # a bench.machine_state.MachineWatch; made by run() when None
        # case_scope(index, total, case): a context manager around each case's log (e.g. a log group)
        self.case_scope = case_scope or (lambda index, total, case: contextlib.nullcontext())

    @property
    def with_baseline(self):
        return "oneflow" in self.contenders and BASE in self.contenders

    def run(self):
        results = Results(suite=self.suite.name, device=self.device, gpu_name=self.gpu_name,
                          versions=package_versions(), started_at=now_iso(),
                          builds={role: dict(self.builds[role].provenance)
                                  for role in self.contenders if role in self.builds})
        results_path = self.out_dir / "results.json"
        total = len(self.suite.cases)
        if self.watch is None:
            self.watch = machine_state.MachineWatch(self.device)
        try:
            results.machine = self._machine_before_run()
            for index, case in enumerate(self.suite.cases, 1):
                with self.case_scope(index, total, case):
                    self.progress(f"[{index}/{total}] {case_label(case)}")
                    try:
                        results.cases.append(self.run_case(case, f"[{index}/{total}]"))
                    finally:
                        kill_started_workers()  # nothing of a case outlives it
                results.finished_at = now_iso()
                write_atomic(results_path, results.to_json())
        except KeyboardInterrupt:  # SIGINT, or SIGTERM (see speedstats.pipeline)
            kill_started_workers()  # again: the signal may have cut the sweep above short
            results.cancelled = True
            results.finished_at = now_iso()
            write_atomic(results_path, results.to_json())
            raise RunCancelled(results) from None
        finally:
            self.watch.close()
        return results

    def _machine_before_run(self):
        """The machine once per run; on CUDA, first wait (within quiet_wait_s) for the GPUs to be quiet."""
        from speedstats.bench.driver_check import check_driver

        info = self.watch.run_info()
        if info.get("driver"):
            builds = {role: self.builds[role] for role in self.contenders if role in self.builds}
            info["driver"]["notes"] = check_driver(builds, info["driver"])
        spec = self.suite.disturbance
        if self.watch.gpus.handles:
            wait = spec.quiet_wait_s if self.quiet_wait_s is None else min(spec.quiet_wait_s,
                                                                           self.quiet_wait_s)
            info["preflight"] = self.watch.wait_quiet(spec, wait, self.progress)
        return info

    def run_case(self, case, prefix):
        record = case_record(case)
        record.started_at = now_iso()
        too_small = shm.shm_error(case, contenders=len(self.contenders))
        if too_small:  # the workers would die of a bus error minutes in: fail now, with the fix
            record.frameworks = {role: FrameworkResult(times=case.times, error=too_small)
                                 for role in self.contenders}
            record.finished_at = now_iso()
            self.progress(f"{prefix}   FAILED: {too_small}")
            return record
        plan = RoundPlan.for_case(case, self.with_baseline, self.rule)
        work = self.out_dir / "workers" / case.id
        if self.with_baseline and self.suite.interleave:
            states, sequence = self._measure_sequential(case, plan, work, prefix)
        else:
            states, sequence = self._measure(case, plan, work, prefix), None
        self._fill(record, case, plan, {role: (s.rounds, s.error, s.memory, s.imported)
                                        for role, s in states.items()})
        self._judge_paired(record, sequence)
        flags = case_flags(record, case, self.gpu_name, self.suite.name)
        if flags and self.confirm:
            self.progress(f"{prefix}   flagged ({'; '.join(flags)}): measuring again in fresh processes")
            again = self._measure(case, plan, work / "confirm", prefix)
            merged = {}
            for role, first in states.items():
                second = again[role]
                # A contender that failed the second time keeps its first figures; the case is then
                # judged on those alone, and says so.
                rounds = first.rounds + (second.rounds if second.error is None else [])
                merged[role] = (rounds, first.error, second.memory or first.memory, first.imported)
            paired = record.paired  # the head-vs-base verdict stays the rule's, on its own rounds
            self._fill(record, case, plan, merged)
            record.paired = paired
            remaining = case_flags(record, case, self.gpu_name, self.suite.name)
            errors = [f"{LABELS[r]}: {s.error}" for r, s in again.items() if s.error]
            record.confirmation = {
                "flags": flags,
                "status": "confirmed" if remaining else "cleared",
                "remaining": remaining,
                "rounds": max(len(m[0]) for m in merged.values()),
                "error": "; ".join(errors) or None,
            }
            self.progress(f"{prefix}   {record.confirmation['status']} on {record.confirmation['rounds']} "
                          "rounds")
            kept = {role: first.states + (again[role].states if again[role].error is None else [])
                    for role, first in states.items()}
            self._attach_states(record, {role: (kept[role], first.remeasured + again[role].remeasured)
                                         for role, first in states.items()})
        else:
            self._attach_states(record, {role: (s.states, s.remeasured) for role, s in states.items()})
        record.disturbance = machine.case_disturbance(
            {role: fw.round_states for role, fw in record.frameworks.items() if fw.ok}, LABELS)
        if record.disturbance:
            self.progress(f"{prefix}   disturbed: {record.disturbance['text']}")
        record.finished_at = now_iso()
        return record

    @staticmethod
    def _attach_states(record, measured):
        for role, (states, remeasured) in measured.items():
            fw = record.frameworks[role]
            fw.round_states = list(states) if fw.ok else []
            fw.remeasured = list(remeasured)

    def _fill(self, record, case, plan, measured):
        record.frameworks = {role: _framework_result(rounds, error, case, plan, memory, imported)
                             for role, (rounds, error, memory, imported) in measured.items()}

    def _judge_paired(self, record, sequence):
        record.paired = None
        if not self.with_baseline:
            return
        head, base = record.frameworks["oneflow"], record.frameworks[BASE]
        if not (head.ok and base.ok):
            return
        if sequence is None:  # rounds not interleaved: one look at a fixed number of rounds
            record.paired = paired_analysis.judge_paired(head.rounds_s, base.rounds_s, self.rule)
        else:
            record.paired = sequence.verdict(head.rounds_s, base.rounds_s)

    def _workers(self, case, plan, work, roles, max_rounds=None):
        deadline = time.monotonic() + case.timeout_s
        return {role: CaseRun(Worker(role, case, self.device, work / role, self.dataset_dir, deadline,
                                     build=self.builds.get(role),
                                     # the worker takes up to remeasure_rounds more go-K (disturbed rounds)
                                     rounds=(max_rounds if max_rounds and role in PAIR else plan.rounds)
                                     + self.suite.disturbance.remeasure_rounds,
                                     round_iterations=plan.iterations))
                for role in roles}

    def _measure(self, case, plan, work, prefix):
        """One measurement of a case: a fresh worker per contender, `plan.rounds` rounds each."""
        states = self._workers(case, plan, work, self.contenders)
        try:
            if self.suite.interleave:
                self._start_all(states, prefix)
                for k in range(plan.rounds):
                    self._interleaved_round(states, self.contenders, k, plan, case, prefix)
                for role in self.contenders:
                    states[role].worker.resume()
                    self._finish(states[role], prefix)
            else:
                for role in self.contenders:
                    self._start(states[role], prefix)
                    for k in range(plan.rounds):
                        self._round(states[role], k, plan, case, prefix)
                    self._finish(states[role], prefix)
        finally:
            for state in states.values():
                state.worker.resume()
                state.worker.kill()
        return states

    def _start_all(self, states, prefix):
        for state in states.values():
            self._start(state, prefix)
            if self.suite.pause_idle:
                state.worker.pause()

    def _interleaved_round(self, states, roles, k, plan, case, prefix, label_k=None):
        for role in round_order(list(roles), k):
            state = states[role]
            state.worker.resume()
            self._round(state, k, plan, case, prefix, label_k)
            if self.suite.pause_idle:
                state.worker.pause()

    def _measure_sequential(self, case, plan, work, prefix):
        """Head and base against each other, in rounds the rule asks for: every contender in the
        planned rounds, then the head and the base alone (PyTorch done) until the rule stops, within
        its budget of rounds and of seconds (extra_factor times the planned rounds' wall time, at
        most max_extra_s). Returns the states (the rounds of every pair of processes, in order) and
        the analysis.paired.Rounds that decided."""
        rule = self.rule
        sequence = paired_analysis.Rounds(rule, confirm=self.confirm)
        began = time.monotonic()
        states = self._workers(case, plan, work, self.contenders, max_rounds=rule.max_rounds)
        # What each build measured before a confirmation's fresh processes replaced it.
        earlier = {role: [] for role in PAIR}
        budget_s = None
        first_look_at = None
        try:
            self._start_all(states, prefix)
            k = 0  # the round within the current pair of processes
            while sequence.action != paired_analysis.DONE:
                if any(states[role].error for role in PAIR):
                    break
                if sequence.action == paired_analysis.CONFIRM:
                    self.progress(f"{prefix}   head vs base: a regression after {len(sequence.ratios)} "
                                  "rounds:"
                                  " "
                                  "measuring again in fresh processes")
                    for role in PAIR:
                        earlier[role].extend(states[role].rounds)
                        states[role].worker.resume()
                        states[role].worker.kill()
                    fresh = self._workers(case, plan, work / "confirm", PAIR, max_rounds=rule.max_rounds)
                    states.update(fresh)
                    self._start_all(fresh, prefix)
                    k = 0
                elif budget_s is not None and time.monotonic() - first_look_at > budget_s:
                    sequence.stop_now()
                    break
                roles = self.contenders if k < plan.rounds and not sequence.confirming else PAIR
                self._interleaved_round(states, roles, k, plan, case, prefix, label_k=len(sequence.ratios))
                if any(states[role].error for role in PAIR):
                    break
                sequence.add(states["oneflow"].rounds[-1] / states[BASE].rounds[-1])
                k += 1
                if budget_s is None and len(sequence.ratios) >= plan.rounds:
                    first_look_at = time.monotonic()
                    budget_s = min(rule.max_extra_s, rule.extra_factor * (first_look_at - began))
                    for role in self.contenders:
                        if role not in PAIR:  # PyTorch is done: its process goes
                            states[role].worker.resume()
                            self._finish(states[role], prefix)
            if sequence.action != paired_analysis.DONE:
                sequence.stop_now()
            self.progress(f"{prefix}   head vs base: {len(sequence.ratios)} rounds, "
                          f"stopped ({sequence.stopped})")
            for role in self.contenders:
                state = states[role]
                if state.memory or state.error:
                    continue
                state.worker.resume()
                self._finish(state, prefix)
        finally:
            for state in states.values():
                state.worker.resume()
                state.worker.kill()
        for role in PAIR:
            states[role].rounds = earlier[role] + states[role].rounds
        return states, sequence

    def _start(self, state, prefix):
        label = LABELS[state.worker.role]
        self.progress(f"{prefix}   {label}: starting and warming up ({state.worker.case.warmup} iterations)")
        try:
            self.watch.starting()
            state.worker.start()
            ready = state.worker.await_file("ready.json")
            self.watch.started()  # GPU processes that appeared meanwhile are this worker's
            state.imported = ready.get("imported") or {}
            self.progress(f"{prefix}   {label}: ready after {ready['setup_s']:.1f}s")
        except (WorkerFailed, OSError) as exc:
            state.fail(str(exc))
            self.progress(f"{prefix}   {label}: FAILED: {exc}")

    def _round(self, state, k, plan, case, prefix, label_k=None):
        if state.error:
            return
        label = LABELS[state.worker.role]
        number = (label_k if label_k is not None else k) + 1
        of = f"/{plan.rounds}" if number <= plan.rounds else ""
        spec = self.suite.disturbance
        while True:
            pids = state.worker.processes()
            before = self.watch.begin(pids)
            try:
                total = state.worker.run_round()
            except WorkerFailed as exc:
                state.fail(str(exc))
                self.progress(f"{prefix}   {label}: round {number}{of} FAILED: {exc}")
                return
            round_state = self.watch.end(before, pids)
            round_state["disturbed"] = machine.round_disturbance(round_state, spec)
            if not round_state["disturbed"] or len(state.remeasured) >= spec.remeasure_rounds:
                break
            state.remeasured.append({"per_iter_s": total / plan.iterations, "state": round_state})
            why = "; ".join(item["text"] for item in round_state["disturbed"])
            self.progress(f"{prefix}   {label}: round {number}{of} disturbed ({why}): measuring it again")
            time.sleep(spec.retry_wait_s)
        state.rounds.append(total)
        state.states.append(round_state)
        unit, scale = ("s", 1.0) if case.kind == "swin_dataloader" else ("ms", 1000.0)
        self.progress(f"{prefix}   {label}: round {number}{of}: {total / plan.iterations * scale:.3f}{unit}"
                      f" per iteration ({plan.iterations} iterations in {total:.2f}s)")

    def _finish(self, state, prefix):
        if state.error:
            return
        try:
            state.memory = state.worker.finish()
        except WorkerFailed as exc:
            state.fail(str(exc))
            self.progress(f"{prefix}   {LABELS[state.worker.role]}: FAILED at the end: {exc}")
