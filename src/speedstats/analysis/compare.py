"""Head against base between two stored runs: per case and per framework, the change and its verdict.

Cases are matched by id. Each framework of a matched case is judged by `stats.compare_rounds` from
its rounds, as two unpaired samples (trimmed means of the log times, Yuen's interval, the same four
words as the head-vs-base notes of one run: regression, improvement, no change, inconclusive); a
results file without rounds counts as one round, judged without a noise estimate. A
case whose workload differs between the two files (shape, workers, DDP), or that failed on one side,
is "not comparable", as is everything when the two runs were on different devices.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from speedstats.analysis import stats
from speedstats.casekinds import size_field_names
from speedstats.contenders import LABELS, SPEED_STATS_ROLES

COMPARE_SCHEMA = "speedstats/compare/v1"
UNKNOWN_GPU = "unknown"  # the GPU name `speedstats parse` gives a block without a GPU line


@dataclass
class Row:
    case_id: str
    kind: str | None
    framework: str
    comparison: stats.Comparison

    @property
    def label(self):
        return LABELS.get(self.framework, self.framework)

    def to_dict(self):
        return {"case": self.case_id, "kind": self.kind, "framework": self.framework,
                **self.comparison.to_dict()}


@dataclass
class Report:
    rows: list[Row]
    min_effect: float
    confidence: float
    single_round_threshold: float
    trim: float = stats.DEFAULT_TRIM
    base: dict = field(default_factory=dict)  # suite, device, gpu_name, versions of each run
    head: dict = field(default_factory=dict)

    @property
    def regressions(self):
        return [r for r in self.rows if r.comparison.verdict == stats.REGRESSION]

    def to_dict(self):
        return {
            "schema": COMPARE_SCHEMA,
            "base": self.base,
            "head": self.head,
            "min_effect": self.min_effect,
            "confidence": self.confidence,
            "single_round_threshold": self.single_round_threshold,
            "trim": self.trim,
            "regressions": len(self.regressions),
            "rows": [r.to_dict() for r in self.rows],
        }

    def to_json(self):
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"


def rounds_of(fw):
    """Per-iteration seconds of each round; a record without rounds is one round of per_iter_s."""
    if fw is None or not fw.ok:
        return []
    return list(fw.rounds_s) if fw.rounds_s else [fw.per_iter_s]


def _run_summary(results):
    return {
        "suite": results.suite,
        "device": results.device,
        "gpu_name": results.gpu_name,
        "versions": dict(results.versions),
        "started_at": results.started_at,
    }


def _machine_mismatch(base, head):
    if base.device != head.device:
        return f"base ran on {base.device}, head on {head.device}"
    if UNKNOWN_GPU not in (base.gpu_name, head.gpu_name) and base.gpu_name != head.gpu_name:
        return f"base ran on {base.gpu_name}, head on {head.gpu_name}"
    return None


def _workload_fields():
    """The fields of a case that say what it measured: its kind, its batch, what sizes it, DDP's ranks."""
    return ("kind", "batch_size", *size_field_names(), "ddp", "world_size")


def _case_mismatch(base_case, head_case):
    for name in _workload_fields():
        if getattr(base_case, name) != getattr(head_case, name):
            return (f"{name} differs ({getattr(base_case, name)!r} in base, {getattr(head_case, name)!r} in "
                    "head)")
    return None


def _framework_failure(case, name, side):
    if case.error:
        return f"{side} failed: {case.error}"
    fw = case.frameworks.get(name)
    if fw is None or not fw.ok:
        return f"{side} failed: {fw.error}" if fw is not None and fw.error else f"no {side} figure"
    return None


def compare_results(
    base,
    head,
    min_effect=stats.DEFAULT_MIN_EFFECT,
    single_round_threshold=stats.DEFAULT_SINGLE_ROUND_THRESHOLD,
    confidence=stats.DEFAULT_CONFIDENCE,
    trim=stats.DEFAULT_TRIM,
):
    """A Report over the head's cases in order, then the cases only the base has."""
    machine = _machine_mismatch(base, head)
    base_cases = {c.id: c for c in base.cases}
    head_ids = {c.id for c in head.cases}
    rows = []

    def not_comparable(case, name, reason):
        rows.append(Row(case.id, case.kind, name, stats.Comparison(stats.NOT_COMPARABLE, reason=reason)))

    for head_case in head.cases:
        base_case = base_cases.get(head_case.id)
        for name in SPEED_STATS_ROLES:
            if base_case is None:
                not_comparable(head_case, name, "not in base")
                continue
            reason = (
                machine
                or _case_mismatch(base_case, head_case)
                or _framework_failure(base_case, name, "base")
                or _framework_failure(head_case, name, "head")
            )
            if reason:
                not_comparable(head_case, name, reason)
                continue
            comparison = stats.compare_rounds(
                rounds_of(base_case.frameworks[name]),
                rounds_of(head_case.frameworks[name]),
                min_effect=min_effect,
                single_round_threshold=single_round_threshold,
                confidence=confidence,
                trim=trim,
            )
            rows.append(Row(head_case.id, head_case.kind, name, comparison))
    for base_case in base.cases:
        if base_case.id not in head_ids:
            for name in SPEED_STATS_ROLES:
                not_comparable(base_case, name, "not in head")
    return Report(
        rows=rows,
        min_effect=min_effect,
        confidence=confidence,
        single_round_threshold=single_round_threshold,
        trim=trim,
        base=_run_summary(base),
        head=_run_summary(head),
    )
