"""Runs a suite: every case, every contender, each in a process of its own.

The contenders of a case are the rows of speedstats.contenders: the OneFlow build under test (the
head), optionally a base OneFlow build to judge it against, and PyTorch, each from its own build (see
bench.builds). A case starts one worker per contender (bench.workers), and bench.schedule runs its
timed rounds: interleaved, with the head-vs-base rule's sequential rounds when there is a baseline, a
disturbed round measured again. bench.assemble turns what they measured into the case's record. A
case that missed a threshold is measured again in fresh processes and judged on all of its rounds:
confirmed or cleared (run_case).

A worker that crashes, hangs past the case's timeout or runs out of memory is recorded with its
error and the run goes on. results.json is rewritten (atomically) after every case, so a run that
is killed keeps what it measured.
"""

import contextlib
import datetime
import sys
from pathlib import Path

from speedstats import machine
from speedstats import verdict as verdicts
from speedstats.analysis.paired import judge_paired
from speedstats.bench import machine_state, shm
from speedstats.bench.assemble import attribution_record, case_record, fill
from speedstats.bench.environment import package_versions
from speedstats.bench.progress import CaseProgress
from speedstats.bench.schedule import ContenderRun, RoundPlan, Scheduler
from speedstats.bench.workers import WORKER_PROGRAM, WorkerSetup, kill_started_workers
from speedstats.casekinds import case_kind
from speedstats.contenders import BASE, HEAD, LABELS, ROLES
from speedstats.fsutil import write_atomic
from speedstats.results import FrameworkResult, Results


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


class RunCancelled(KeyboardInterrupt):
    """The run was stopped by a signal; `results` holds the cases it finished, marked cancelled."""

    def __init__(self, results):
        super().__init__("cancelled")
        self.results = results


def case_label(case):
    return f"{case.id} ({case_kind(case.kind).log_text(case)})"


def case_flags(record, spec, gpu_name, suite_name="suite"):
    """The thresholds this case missed (a regression against the base is the sequential rule's to
    decide, while the rounds are measured: see analysis.sequence)."""
    if record.failure:
        return []
    return verdicts.judge_case(record, spec, gpu_name, suite_name).reasons


def merged_with_confirmation(first, second):
    """A contender's first measurement and its confirmation in fresh processes, as one: the rounds
    (and their states) of both; a contender that failed the second time keeps its first rounds alone."""
    kept = second.error is None
    merged = ContenderRun(
        worker=first.worker,
        rounds=first.rounds + (second.rounds if kept else []),
        states=first.states + (second.states if kept else []),
        remeasured=first.remeasured + second.remeasured,
        error=first.error,
        memory=second.memory or first.memory,
        imported=first.imported,
        setup_s=first.setup_s,
        setup_starts_s=first.setup_starts_s + second.setup_starts_s,
        memory_peaks=dict(first.memory_peaks),
        energy_j=first.energy_j + (second.energy_j if kept else []),
    )
    if kept:
        merged.add_memory_peaks(second.memory_peaks)
    return merged


class SuiteRunner:
    """Runs every case of a suite for the contenders; `builds` maps contender to its bench.builds.Build.
    `worker_program` is what a worker runs (workers.WORKER_PROGRAM), before its `--control DIR`."""

    def __init__(self, suite, device, out_dir, dataset_dir=None, progress=None, gpu_name="unknown",
                 builds=None, contenders=None, confirm=True, rule=None, quiet_wait_s=None, watch=None,
                 worker_program=WORKER_PROGRAM, case_scope=None, skipped=(), case_rules=None):
        self.suite = suite
        self.skipped = list(skipped)  # results.SkippedCase of the suite's cases this run does not measure
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
        self.rule = rule or suite.head_vs_base
        # {case id: SequentialRule} for the cases measured by a rule of their own (a calibration's prior)
        self.case_rules = dict(case_rules or {})
        self.quiet_wait_s = quiet_wait_s  # on CUDA, before the first case (None: the suite's)
        self.watch = watch  # a bench.machine_state.MachineWatch; made by run() when None
        self.workers = WorkerSetup(device, self.dataset_dir, self.builds, tuple(worker_program))
        # case_scope(index, total, case): a context manager around each case's log (e.g. a log group)
        self.case_scope = case_scope or (lambda index, total, case: contextlib.nullcontext())

    @property
    def with_baseline(self):
        return HEAD in self.contenders and BASE in self.contenders

    def run(self):
        results = Results(suite=self.suite.name, device=self.device, gpu_name=self.gpu_name,
                          versions=package_versions(), started_at=now_iso(),
                          builds={role: dict(self.builds[role].provenance)
                                  for role in self.contenders if role in self.builds},
                          skipped=list(self.skipped))
        results_path = self.out_dir / "results.json"
        total = len(self.suite.cases)
        if self.watch is None:
            self.watch = machine_state.MachineWatch(self.device)
        try:
            results.machine = self._machine_before_run()
            for index, case in enumerate(self.suite.cases, 1):
                with self.case_scope(index, total, case):
                    log = CaseProgress(self.progress, index, total)
                    log.heading(case_label(case))
                    try:
                        results.cases.append(self.run_case(case, log))
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

    def run_case(self, case, log):
        """Measure one case (its lines through `log`, a progress.CaseProgress) and judge what it
        measured: a case that missed a threshold is measured again in fresh processes."""
        record = case_record(case)
        record.started_at = now_iso()
        too_small = shm.shm_error(case, contenders=len(self.contenders))
        if too_small:  # the workers would die of a bus error minutes in: fail now, with the fix
            record.frameworks = {role: FrameworkResult(times=case.times, error=too_small)
                                 for role in self.contenders}
            record.finished_at = now_iso()
            log(f"FAILED: {too_small}")
            return record
        rule = self.case_rules.get(case.id, self.rule)
        plan = RoundPlan.for_case(case, self.with_baseline, rule)
        work = self.out_dir / "workers" / case.id
        scheduler = Scheduler(case, plan, self.suite, self.workers, self.watch, log)
        if self.with_baseline and self.suite.interleave:
            runs, sequence = scheduler.measure_sequential(work, self.contenders, rule, self.confirm)
        else:
            runs, sequence = scheduler.measure(work, self.contenders), None
        fill(record, case, plan, runs)
        self._judge_paired(record, sequence, rule)
        if sequence is not None:
            record.attribution = attribution_record(runs[HEAD], runs[BASE], scheduler.profiling, rule)
        flags = case_flags(record, case, self.gpu_name, self.suite.name)
        if flags and self.confirm:
            log(f"flagged ({'; '.join(flags)}): measuring again in fresh processes")
            again = scheduler.measure(work / "confirm", self.contenders)
            merged = {role: merged_with_confirmation(first, again[role]) for role, first in runs.items()}
            paired = record.paired  # the head-vs-base verdict stays the rule's, on its own rounds
            fill(record, case, plan, merged)
            record.paired = paired
            remaining = case_flags(record, case, self.gpu_name, self.suite.name)
            errors = [f"{LABELS[role]}: {run.error}" for role, run in again.items() if run.error]
            record.confirmation = {
                "flags": flags,
                "status": "confirmed" if remaining else "cleared",
                "remaining": remaining,
                "rounds": max(len(run.rounds) for run in merged.values()),
                "error": "; ".join(errors) or None,
            }
            log(f"{record.confirmation['status']} on {record.confirmation['rounds']} rounds")
        record.disturbance = machine.case_disturbance(
            {role: fw.round_states for role, fw in record.frameworks.items() if fw.ok}, LABELS)
        if record.disturbance:
            log(f"disturbed: {record.disturbance['text']}")
        record.finished_at = now_iso()
        return record

    def _judge_paired(self, record, sequence, rule=None):
        record.paired = None
        if not self.with_baseline:
            return
        head, base = record.frameworks[HEAD], record.frameworks[BASE]
        if not (head.ok and base.ok):
            return
        if sequence is None:  # rounds not interleaved: one look at a fixed number of rounds
            record.paired = judge_paired(head.rounds_s, base.rounds_s, rule or self.rule)
        else:
            record.paired = sequence.verdict(head.rounds_s, base.rounds_s)
