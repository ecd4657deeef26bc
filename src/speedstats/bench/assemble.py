"""A case's record in results.json from what its contenders measured (schedule.ContenderRun)."""

import dataclasses
import statistics

from speedstats.analysis import attribution
from speedstats.analysis.stats import spread
from speedstats.bench.sampler import DEFAULT_INTERVAL_S
from speedstats.casekinds import case_kind
from speedstats.results import CaseResult, FrameworkResult


def case_record(case):
    """An empty CaseResult describing a suite case, for its figures to be filled in."""
    return CaseResult(
        id=case.id, kind=case.kind, batch_size=case.batch_size, times=case.times,
        ddp=case.ddp, world_size=case.world_size, mode=case.mode, model=case.model, env=dict(case.env),
        **case_kind(case.kind).sizes_of(case),
    )


def framework_result(run, case, plan):
    """One contender's figures: per-iteration time of each round, their spread and median, peak memory,
    and the machine's state around each round (a contender without figures keeps no round states)."""
    memory = run.memory or {}
    result = FrameworkResult(times=case.times, error=run.error, round_iterations=plan.iterations,
                             imported=run.imported or None)
    if run.rounds and run.error is None:
        per_iter = [total / plan.iterations for total in run.rounds]
        summary = spread(per_iter)
        result.rounds_s = per_iter
        result.spread_s = dataclasses.asdict(summary)
        result.per_iter_s = summary.median
        result.total_s = result.per_iter_s * case.times
        result.peak_memory_bytes = memory.get("peak_memory_bytes")
        result.memory_kind = memory.get("memory_kind")
        result.sampled_peak_bytes, result.sampled_memory_kind = run.sampled_memory()
        result.rss_peak_bytes = run.memory_peaks.get("rss_bytes") or None
        result.images_per_s = case.batch_size * case.world_size / result.per_iter_s
        result.energy_per_step_j = statistics.median(run.energy_j) if run.energy_j else None
    if run.setup_starts_s:
        result.setup_starts_s = list(run.setup_starts_s)
        result.setup_s = statistics.median(run.setup_starts_s)
    elif run.setup_s:
        result.setup_s = run.setup_s
    result.round_states = list(run.states) if result.ok else []
    result.remeasured = list(run.remeasured)
    return result


def fill(record, case, plan, runs):
    """Set the record's figures from the contenders' runs ({role: ContenderRun})."""
    record.frameworks = {role: framework_result(run, case, plan) for role, run in runs.items()}


PROFILER = f"Python stack sampled every {DEFAULT_INTERVAL_S * 1000:g} ms in the worker (bench.sampler)"
OPS_PROFILER = "the framework's own profiler in the worker, each op's own device time (bench.opprofile)"
DISPATCH_COUNTER = ("the ops each Python place calls, counted in the worker with sys.setprofile's C calls "
                    "and the tensor's operators (bench.opcount)")


def attribution_record(head_run, base_run, profiling, rule):
    """The case's `attribution` from the head's and the base's profiled rounds (schedule.ContenderRun),
    judged at the rule's confidence and trim; None when no profiled round was asked for."""
    if not profiling:
        return None
    head = [attribution.ProfiledRound.from_report(r) for r in head_run.profiles]
    base = [attribution.ProfiledRound.from_report(r) for r in base_run.profiles]
    record = attribution.attribute(head, base, confidence=rule.confidence, trim=rule.trim,
                                   profiler=PROFILER, ops_profiler=OPS_PROFILER,
                                   dispatch_counter=DISPATCH_COUNTER)
    record.reason = profiling.get("reason") or record.reason
    record.profiled_s = profiling.get("profiled_s")
    record.case_s = profiling.get("case_s")
    return record
