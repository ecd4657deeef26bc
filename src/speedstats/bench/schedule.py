"""The rounds of one case: which contender is timed when, in which processes, and when to stop.

With `interleave` (the suite's default) every worker is started and warmed up first (together, each
stopped once ready, unless their GPU processes must be told apart by when they appeared), then each
timed round times one contender after the other (round_order: the two compared back to back, their
order swapping from round to round), while
the others are stopped (SIGSTOP, with `pause_idle`), so that neither drift on the machine nor an idle
framework's background threads favour one of them. Without it each contender runs all its rounds
alone, which needs only one framework's memory at a time.

With a baseline build (and `interleave`), measure_sequential executes the steps that
analysis.sequence.Steps answers (a round, a fresh pair of processes, the control's end, a profiled
round, stop): the planned rounds with every contender, then the head and the base alone, within the
rule's budget of rounds and of seconds (the rule: analysis.rule). When rounds stop is decided there,
not here: the simulation of benchmarks/simulate_head_vs_base.py executes the same steps.

Around every timed round the runner's instruments (bench.instruments: the machine's state, the worker
tree's memory, the GPUs' energy) measure what the round did besides its time; a round that the suite's
`disturbance:` settings call disturbed is measured again, a bounded number of times.

A measurement goes: start every worker (_start: the protocol's ready file), the timed rounds (each one
through _timed_round), then each worker ends through _finish (the done file). What a round records
besides its time is an instrument of _timed_round's list (and a field of ContenderRun); rounds of
another kind after the timed ones belong in _finish, before the worker's end.
"""

from __future__ import annotations

import dataclasses
import time

from speedstats import machine
from speedstats.analysis import sequence
from speedstats.analysis.rule import DEFAULT_RULE
from speedstats.bench.instruments import Round, measure_round, started
from speedstats.bench.machine_state import GpuEnergy, RoundState
from speedstats.bench.memory import GPU_KIND, RSS_KIND, TreeMemory
from speedstats.bench.protocol import READY_FILE
from speedstats.bench.workers import Worker, WorkerFailed, poll_wait
from speedstats.casekinds import case_kind
from speedstats.contenders import BASE, HEAD, LABELS

PAIR = (HEAD, BASE)  # the head and the base: the contenders of the sequential rounds
# NVML's energy counter moves in steps of its power samples (tens of ms): a round shorter than this
# gives no energy figure.
MIN_ENERGY_ROUND_S = 1.0


@dataclasses.dataclass
class RoundPlan:
    """How a case's timed iterations are cut into rounds: `rounds` of `iterations` each."""

    rounds: int
    iterations: int

    @classmethod
    def for_case(cls, case, with_baseline, rule=DEFAULT_RULE):
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


def round_order(contenders, k):
    """The contenders' order in round k: the first two (the head and its base, or the head and PyTorch)
    back to back, swapping places every round, and any others after them in their order. So the two
    compared are always timed one right after the other, each goes first in every other round, and
    each follows the other and what ended the round before equally often. (Turning all three by one
    each round would put PyTorch's round between the head's and the base's in a third of the rounds
    and have the head follow PyTorch twice as often as the base.)"""
    first, rest = list(contenders[:2]), list(contenders[2:])
    return (first if k % 2 == 0 else first[::-1]) + rest


@dataclasses.dataclass
class ContenderRun:
    """One contender's measurement of a case, in one worker, and what the worker reported."""

    worker: Worker
    rounds: list[float] = dataclasses.field(default_factory=list)  # total seconds of each kept round
    # The main thread's CPU seconds in each kept round (None where the worker did not say)
    thread_cpu_s: list = dataclasses.field(default_factory=list)
    states: list[dict] = dataclasses.field(default_factory=list)  # the machine's state around each
    remeasured: list[dict] = dataclasses.field(default_factory=list)  # {"per_iter_s", "state"} each
    error: str | None = None  # why it has no figures
    memory: dict = dataclasses.field(default_factory=dict)  # done.json: peak memory and its kind
    imported: dict = dataclasses.field(default_factory=dict)  # ready.json: the framework's version, file
    profiles: list[dict] = dataclasses.field(default_factory=list)  # each profiled round's report

    setup_s: float | None = None  # from the worker's start to ready.json: import, model, warm-up steps
    # setup_s of each process this contender was measured in, in the order started (pairs of processes)
    setup_starts_s: list[float] = dataclasses.field(default_factory=list)
    gpu_pids: set = dataclasses.field(default_factory=set)  # its pids as NVML reported them at its start
    # The largest sampled memory of its process tree over its timed rounds (bench.memory): rss_bytes,
    # gpu_bytes (None on the CPU); empty when not sampled.
    memory_peaks: dict = dataclasses.field(default_factory=dict)
    energy_j: list[float] = dataclasses.field(default_factory=list)  # per iteration, each long enough round

    def add_memory_peaks(self, peaks):
        for key in ("rss_bytes", "gpu_bytes"):
            if peaks.get(key) is not None:
                self.memory_peaks[key] = max(self.memory_peaks.get(key) or 0, peaks[key])

    def sampled_memory(self):
        """(peak bytes, kind) of the figure judged: NVML's on CUDA, resident memory on the CPU (and on a
        GPU where NVML showed none of the worker's processes)."""
        if self.memory_peaks.get("gpu_bytes"):
            return self.memory_peaks["gpu_bytes"], GPU_KIND
        if self.memory_peaks.get("rss_bytes"):
            return self.memory_peaks["rss_bytes"], RSS_KIND
        return None, None

    @property
    def role(self):
        return self.worker.role

    def fail(self, message):
        self.error = message
        self.worker.kill()


class Scheduler:
    """Measures one case: a worker per contender (from `setup`, a workers.WorkerSetup), in the suite's
    order of rounds, with the machine watched around each (`watch`, a machine_state.MachineWatch), every
    line said through `log` (a progress.CaseProgress)."""

    def __init__(self, case, plan, suite, setup, watch, log):
        self.case = case
        self.plan = plan
        self.suite = suite
        self.setup = setup
        self.watch = watch
        self.log = log
        # After measure_sequential: the profiled rounds' wall time, the case's before them, and why there
        # were none ({} when none were asked for).
        self.profiling = {}

    def measure(self, work, roles):
        """A fresh worker per contender (control folders under `work`), `plan.rounds` rounds each:
        {role: ContenderRun}."""
        runs = self._workers(work, roles)
        try:
            if self.suite.interleave:
                self._start_all(runs)
                for k in range(self.plan.rounds):
                    self._interleaved_round(runs, roles, k + 1)
                for role in roles:
                    runs[role].worker.resume()
                    self._finish(runs[role])
            else:
                for role in roles:
                    self._start(runs[role])
                    for k in range(self.plan.rounds):
                        self._round(runs[role], k + 1)
                    self._finish(runs[role])
        finally:
            self._kill(runs.values())
        return runs

    def measure_sequential(self, work, roles, rule, confirm):
        """Head and base against each other, in the steps analysis.sequence.Steps asks for: every
        contender in the planned rounds, then the head and the base alone (the others done) until the
        rule stops, within its budget of rounds and of seconds; fresh pairs of head and base processes
        where the rule says (its process pairs, a confirmation); then profiled rounds, when asked for,
        within what the case's cap leaves. Returns the runs (the head's and the base's rounds those of
        every pair of their processes, in order) and the analysis.sequence.Rounds that decided."""
        suite = self.suite
        steps = sequence.Steps(rule, confirm=confirm, planned_rounds=self.plan.rounds,
                               attribute=suite.attribute, attribute_budget=suite.attribute_budget,
                               attribute_rounds=suite.attribute_rounds)
        runs = self._workers(work, roles, max_rounds=rule.max_rounds)
        earlier = {role: [] for role in PAIR}  # what each build measured in the processes replaced
        execute = {sequence.StartPair: self._start_pair, sequence.EndControl: self._end_control,
                   sequence.MeasureRound: self._paired_round, sequence.ProfileRound: self._profiled_round}
        try:
            self._start_all(runs)
            while True:
                if any(runs[role].error for role in PAIR):
                    steps.failed()
                step = steps.next_step()
                for note in step.notes:
                    self.log(note)
                if isinstance(step, sequence.Stop):
                    break
                execute[type(step)](step, runs, steps, work=work, roles=roles, earlier=earlier)
            self.profiling = steps.profiling
            for run in runs.values():
                if not (run.memory or run.error):
                    run.worker.resume()
                    self._finish(run)
        finally:
            self._kill(runs.values())
        # The replaced processes' rounds count in the figures; their round states and remeasured rounds
        # are not kept (those of the last processes are).
        for role in PAIR:
            runs[role].rounds = earlier[role] + runs[role].rounds
        return runs, steps.sequence

    def _start_pair(self, step, runs, steps, work, earlier, **_):
        """A fresh head and base (StartPair), in the step's start order, in a folder of their own."""
        for role in PAIR:
            earlier[role].extend(runs[role].rounds)
            runs[role].worker.resume()
            runs[role].worker.kill()
        order = PAIR if step.head_first else tuple(reversed(PAIR))
        folder = work / ("confirm" if step.confirming else f"pair{step.pair + 1}")
        fresh = self._workers(folder, order, max_rounds=steps.rule.max_rounds)
        for role in PAIR:
            fresh[role].setup_starts_s = list(runs[role].setup_starts_s)
        runs.update(fresh)
        self._start_all(fresh)

    def _end_control(self, step, runs, steps, roles, **_):
        """The first look is taken: every contender but the head and the base ends (PyTorch is done)."""
        for role in roles:
            if role not in PAIR:
                runs[role].worker.resume()
                self._finish(runs[role])

    def _paired_round(self, step, runs, steps, roles, **_):
        """A timed round of the head and the base (MeasureRound), the others too in the planned rounds;
        its ratio and the head's extra main-thread work go to the steps."""
        timed = roles if step.with_control else PAIR
        self._interleaved_round(runs, timed, step.number, order=step.number - 1)
        if any(runs[role].error for role in PAIR):
            return
        head, base = runs[HEAD], runs[BASE]
        steps.measured(head.rounds[-1] / base.rounds[-1], work=self._extra_work(runs),
                       seconds=head.rounds[-1] + base.rounds[-1])

    @staticmethod
    def _extra_work(runs):
        """How much longer the head's main thread ran on the CPU than the base's in their last round, as
        a share of the base's round (analysis.look.hidden_work); None without both figures."""
        head, base = runs[HEAD].thread_cpu_s[-1], runs[BASE].thread_cpu_s[-1]
        if head is None or base is None or runs[BASE].rounds[-1] <= 0:
            return None
        return (head - base) / runs[BASE].rounds[-1]

    def _profiled_round(self, step, runs, steps, **_):
        """A profiled round of the head and the base (ProfileRound), alternating as the timed rounds do.
        One that fails ends the profiled rounds; the timed figures stand."""
        k = step.number
        for role in round_order(list(PAIR), k):
            run = runs[role]
            run.worker.resume()
            try:
                report = run.worker.run_round(profile=True)
            except WorkerFailed as exc:
                # The worker goes, without its end report (peak memory).
                run.worker.kill()
                run.memory = {"peak_memory_bytes": None, "memory_kind": None}
                self.log(f"{LABELS[role]}: profiled round {k + 1} FAILED: {exc}")
                steps.failed(f"{LABELS[role]} failed in a profiled round: {exc}")
                return
            if self.suite.pause_idle:
                run.worker.pause()
            run.profiles.append(report)

    def _workers(self, work, roles, max_rounds=None):
        deadline = time.monotonic() + self.case.timeout_s
        # A worker takes up to remeasure_rounds more go-K than it has rounds (disturbed rounds), and the
        # head and the base attribute_rounds profiled rounds.
        extra = self.suite.disturbance.remeasure_rounds
        if max_rounds:
            max_rounds += self.suite.attribute_rounds
        return {role: ContenderRun(self.setup.worker(
                    role, self.case, work / role, deadline,
                    rounds=(max_rounds if max_rounds and role in PAIR else self.plan.rounds) + extra,
                    round_iterations=self.plan.iterations))
                for role in roles}

    @staticmethod
    def _kill(runs):
        for run in runs:
            run.worker.resume()
            run.worker.kill()

    def _start_all(self, runs):
        """Start every worker of `runs` ({role: ContenderRun}), each paused once it is ready: all at once,
        unless each one's GPU processes must be told apart by when they appeared (then one after
        another: MachineWatch.start_windows_needed)."""
        runs = list(runs.values())
        if len(runs) > 1 and not self.watch.start_windows_needed():
            self._start_together(runs)
            return
        for run in runs:
            self._start(run)
            if self.suite.pause_idle:
                run.worker.pause()

    def _start_together(self, runs):
        """Start every worker at once, then pause each as soon as it is ready: their starts (imports,
        models, warm-up) overlap, and none of them runs while another contender is timed."""
        self.log(f"starting together: {', '.join(LABELS[run.role] for run in runs)}")
        self.watch.starting()
        began = time.monotonic()
        pending = []
        for run in runs:
            self.log(f"{LABELS[run.role]}: starting and warming up ({self.case.warmup} iterations)")
            try:
                run.worker.start()
                pending.append(run)
            except OSError as exc:
                self._failed_start(run, exc)
        while pending:
            for run in list(pending):
                try:
                    ready = run.worker.look_for(READY_FILE)
                except (WorkerFailed, OSError) as exc:
                    pending.remove(run)
                    self._failed_start(run, exc)
                    continue
                if ready is not None:
                    pending.remove(run)
                    self._ready(run, ready, time.monotonic() - began)
                    if self.suite.pause_idle:
                        run.worker.pause()
            if pending:
                time.sleep(poll_wait(began))
        self.watch.started()

    def _interleaved_round(self, runs, roles, number, order=None):
        """Round `number` (counted from 1) of each of `roles`, in the order of round `order` (its own
        index when None)."""
        for role in round_order(list(roles), number - 1 if order is None else order):
            run = runs[role]
            run.worker.resume()
            self._round(run, number)
            if self.suite.pause_idle:
                run.worker.pause()

    def _start(self, run):
        """Start one worker alone and wait until it is ready."""
        self.log(f"{LABELS[run.role]}: starting and warming up ({self.case.warmup} iterations)")
        try:
            self.watch.starting()
            began = time.monotonic()
            run.worker.start()
            ready = run.worker.await_file(READY_FILE)
            setup_s = time.monotonic() - began
            # The GPU processes that appeared meanwhile: its own.
            run.gpu_pids = self.watch.started(run.worker.processes()) or set()
            self._ready(run, ready, setup_s)
        except (WorkerFailed, OSError) as exc:
            self._failed_start(run, exc)

    def _ready(self, run, ready, setup_s):
        run.setup_s = setup_s
        run.setup_starts_s.append(setup_s)
        run.imported = ready.get("imported") or {}
        build = self.setup.builds.get(run.role)
        elsewhere = build.imported_elsewhere(run.imported) if build is not None else None
        if elsewhere:  # its figures would be another build's
            self._failed_start(run, elsewhere)
            return
        self.log(f"{LABELS[run.role]}: ready after {ready['setup_s']:.1f}s")

    def _failed_start(self, run, exc):
        run.fail(str(exc))
        self.log(f"{LABELS[run.role]}: FAILED: {exc}")

    def _round(self, run, number):
        """Round `number` (counted from 1) of a contender, measured again while it is disturbed (at most
        the suite's remeasure_rounds per contender)."""
        if run.error:
            return
        label = LABELS[run.role]
        of = f"/{self.plan.rounds}" if number <= self.plan.rounds else ""
        spec = self.suite.disturbance
        while True:
            try:
                total, state, thread_cpu = self._timed_round(run)
            except WorkerFailed as exc:
                run.fail(str(exc))
                self.log(f"{label}: round {number}{of} FAILED: {exc}")
                return
            if not state["disturbed"] or len(run.remeasured) >= spec.remeasure_rounds:
                break
            run.remeasured.append({"per_iter_s": total / self.plan.iterations, "state": state})
            why = "; ".join(item["text"] for item in state["disturbed"])
            self.log(f"{label}: round {number}{of} disturbed ({why}): measuring it again")
            time.sleep(spec.retry_wait_s)
        run.rounds.append(total)
        run.thread_cpu_s.append(thread_cpu)
        run.states.append(state)
        kind = case_kind(self.case.kind)
        self.log(f"{label}: round {number}{of}: {total / self.plan.iterations * kind.scale:.3f}{kind.unit}"
                 f" per iteration ({self.plan.iterations} iterations in {total:.2f}s)")

    def _timed_round(self, run):
        """One go of the worker with the runner's instruments around it (bench.instruments): the machine's
        state, the worker tree's memory and the GPUs' energy. Returns (its total seconds, the machine's
        state, judged disturbed or not, its main thread's CPU seconds or None)."""
        pids = run.worker.processes()
        instruments = [RoundState(self.watch, pids), self._memory_sampler(run, pids), self._gpu_energy()]
        instruments = [instrument for instrument in instruments if instrument is not None]
        with started(instruments):
            record = measure_round(instruments, Round(run.worker.next_round), run.worker.run_round)
        run.add_memory_peaks(record.get("memory_peaks") or {})
        if "energy_mj" in record:
            run.energy_j.append(record["energy_mj"] / 1000 / self.plan.iterations)
        state = record["state"]
        state["disturbed"] = machine.round_disturbance(state, self.suite.disturbance)
        thread_cpu = record.get("thread_cpu_s")
        return float(record["total_s"]), state, None if thread_cpu is None else float(thread_cpu)

    def _gpu_energy(self):
        """The GPUs' energy counter around a round (machine_state.GpuEnergy), or None off CUDA."""
        gpus = getattr(self.watch, "gpus", None)
        on_gpu = str(self.setup.device).startswith("cuda") and gpus is not None
        return GpuEnergy(gpus, MIN_ENERGY_ROUND_S) if on_gpu else None

    def _memory_sampler(self, run, pids):
        """The worker tree's memory sampled around a round (bench.memory.TreeMemory), or None (the
        suite's memory_sampling off)."""
        if not self.suite.memory_sampling:
            return None
        gpus = getattr(self.watch, "gpus", None)
        on_gpu = str(self.setup.device).startswith("cuda") and gpus is not None and gpus.nvml is not None
        gpu_pids = gpus.compute_pids if on_gpu else None
        return TreeMemory(pids, gpu_pids=gpu_pids, host_pids=run.gpu_pids)

    def _finish(self, run):
        if run.error:
            return
        try:
            run.memory = run.worker.finish()
        except WorkerFailed as exc:
            run.fail(str(exc))
            self.log(f"{LABELS[run.role]}: FAILED at the end: {exc}")
