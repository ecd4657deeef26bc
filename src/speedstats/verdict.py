"""The Speed stats verdict: marks per line and the job's score, from the suite's thresholds.

A case is matched to the suite by id; a case the suite does not know gets no marks. A ResNet50
case is judged on its relative speed (PyTorch time over OneFlow time, must be at least
`min_relative_speed`; a miss scores 1) and, where the suite has a millisecond threshold for the GPU,
on OneFlow's time per iteration (must be at most the threshold; a miss scores 2). Both are compared
as numbers, at the precision the comment prints them, so the mark agrees with the figure a reader
sees (0.99 printed against 0.99 passes). A case that produced no figure scores 2. The job fails at a
total score of 2 or more, and when the run failed, was cancelled or produced no case. Dataloader cases
and the PyTorch line are never marked. With a baseline build measured in the same run, a case whose
head is a regression against the base (see analysis.paired) fails the job too, whatever the score;
one whose head is likely slower but not confirmed (inconclusive, its estimate beyond the band) does
not fail it, and is listed in `likely_regressions` for the notes and the Action's output to say so.
The head-vs-base rows of the notes (`HeadVsBase`) are computed here, once, for the renderer to print.
Memory is judged too: a head whose sampled peak memory (bench.memory) is more than max(the rule's
memory_threshold_pct, memory_threshold_mib) above its base's is a memory regression, which fails the
job like a time regression (the rule's `memory: report`: it is only said, in `memory_regressions`).
A case measured on a disturbed machine (its `disturbance`, see speedstats.machine) never passes: the
verdict names it and fails, and `speedstats run` exits with EXIT_DISTURBED.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from speedstats.analysis import stats
from speedstats.analysis.control import Control, control_drift
from speedstats.analysis.pairs import measured_pairs
from speedstats.analysis.rule import DEFAULT_RULE
from speedstats.casekinds import case_kind
from speedstats.contenders import BASE, HEAD, PYTORCH
from speedstats.errors import UserError
from speedstats.text import one_line as text_one_line

PASS_MARK = "\u2714\ufe0f "  # heavy check mark, emoji presentation, space
FAIL_MARK = "\u274c "  # cross mark, space
WARN_MARK = "\u26a0\ufe0f "  # warning sign, emoji presentation, space: a likely regression not confirmed
RELATIVE_SPEED_SCORE = 1
MS_THRESHOLD_SCORE = 2
FAILED_CASE_SCORE = 2
FAILING_SCORE = 2  # the job fails when the scores add up to this or more
RELATIVE_SPEED_DIGITS = 2  # as the comment prints a ResNet50 relative speed
MS_DIGITS = 1  # as the comment prints milliseconds
ERROR_TEXT_LIMIT = 300
REGRESSION = stats.REGRESSION  # the paired verdict of a case slower than its base
LIKELY_SLOWER = "likely slower"
MEMORY_RULE_FIELDS = ("memory", "memory_threshold_pct", "memory_threshold_mib")


@dataclass
class CaseVerdict:
    id: str
    marks: dict[str, str] = field(default_factory=lambda: {HEAD: "", PYTORCH: "", "relative": ""})
    score: int = 0
    failure: str | None = None  # the case's error on one line, shortened
    reasons: list[str] = field(default_factory=list)  # one per failed check
    disturbed: str | None = None  # what disturbed the machine while the case was measured


@dataclass
class Verdict:
    score: int
    passed: bool
    cases: list[CaseVerdict]
    error: str | None = None  # the run-level error on one line, shortened
    reasons: list[str] = field(default_factory=list)
    regressions: list[str] = field(default_factory=list)  # ids of cases slower than the base build
    disturbed: list[str] = field(default_factory=list)  # ids of cases measured on a disturbed machine
    likely_regressions: list[str] = field(default_factory=list)  # ids likely slower, not confirmed
    head_vs_base: list[HeadVsBase] = field(default_factory=list)  # with a baseline: one per case
    memory: list[MemoryChange] = field(default_factory=list)  # with a baseline: each case with both peaks
    memory_regressions: list[str] = field(default_factory=list)  # ids holding more memory than the base
    rule: dict = field(default_factory=dict)  # the head-vs-base rule's parameters the cases were judged by


@dataclass
class HeadVsBase:
    """One case's head against its base, as the notes print it: the columns agree with the change
    (the head is the base's median times the ratio), the words say what the interval shows."""

    case_id: str
    kind: str
    base_s: float | None  # the base's median time per iteration
    head_s: float | None  # base_s times ratio
    ratio: float | None
    low: float | None
    high: float | None
    verdict: str  # stats.REGRESSION, IMPROVEMENT, NO_CHANGE, INCONCLUSIVE or NOT_COMPARABLE
    text: str  # the Verdict cell's words
    rounds: int = 0
    leaning: str | None = None
    control: Control | None = None  # PyTorch's first rounds against its last
    confidence: float | None = None


MIB = 2**20
MEMORY_REGRESSION = "regression"
MEMORY_WITHIN = "within"  # not more than the threshold above the base


@dataclass
class MemoryChange:
    """One case's head against its base in peak memory (FrameworkResult.sampled_peak_bytes, the same
    kind for both)."""

    case_id: str
    kind: str  # bench.memory's RSS_KIND or GPU_KIND
    base_bytes: int
    head_bytes: int
    threshold_bytes: float  # max(pct of the base, MiB)
    verdict: str  # MEMORY_REGRESSION or MEMORY_WITHIN
    judged: bool  # a regression fails the job (the rule's memory: judge)

    @property
    def change_bytes(self):
        return self.head_bytes - self.base_bytes

    @property
    def change_pct(self):
        return self.change_bytes / self.base_bytes * 100 if self.base_bytes else None


def memory_change(case, rule):
    """The MemoryChange of a case (rule: the head-vs-base rule's dict), or None without both peaks."""
    head, base = case.frameworks.get(HEAD), case.frameworks.get(BASE)
    if head is None or base is None or not head.sampled_peak_bytes or not base.sampled_peak_bytes:
        return None
    if head.sampled_memory_kind != base.sampled_memory_kind:
        return None
    default = DEFAULT_RULE
    pct = rule.get("memory_threshold_pct", default.memory_threshold_pct)
    mib = rule.get("memory_threshold_mib", default.memory_threshold_mib)
    threshold = max(base.sampled_peak_bytes * pct / 100, mib * MIB)
    over = head.sampled_peak_bytes - base.sampled_peak_bytes > threshold
    return MemoryChange(
        case_id=case.id, kind=head.sampled_memory_kind, base_bytes=base.sampled_peak_bytes,
        head_bytes=head.sampled_peak_bytes, threshold_bytes=threshold,
        verdict=MEMORY_REGRESSION if over else MEMORY_WITHIN,
        judged=rule.get("memory", default.memory) == "judge",
    )


def paired_text(paired, failure=None):
    """The words for a head-vs-base verdict: never "no change" when the interval reaches past the band."""
    if paired is None or paired.verdict == stats.NOT_COMPARABLE:
        reason = (paired.reason if paired is not None else None) or failure or "no figures from both builds"
        return f"{stats.NOT_COMPARABLE}: {reason}"
    if not paired.noise_estimate:
        return f"{paired.verdict} (no noise estimate)"
    after = f"after {paired.rounds} rounds" if paired.looks else f"on {paired.rounds} rounds"
    if paired.disagree:
        return f"{paired.leaning or 'inconclusive'}, the pairs of processes disagree {after}"
    if paired.verdict == stats.INCONCLUSIVE and paired.short_of_pairs:
        needed = paired.rule.get("settling_pairs")
        return (f"inconclusive {after}: no change in {measured_pairs(paired.stages)} "
                "pairs of processes"
                + (f", {needed} needed" if needed else ""))
    if paired.verdict == stats.INCONCLUSIVE and paired.hidden_work:
        return (f"inconclusive {after}: as fast here, but the head's main thread works "
                f"{paired.hidden_work['share']:.0%} of a step more")
    if paired.verdict == stats.INCONCLUSIVE:
        return f"{paired.leaning}, not confirmed {after}" if paired.leaning else f"inconclusive {after}"
    text = f"{paired.verdict} {after}"
    # Results of old runs say nothing of confirmation: there, a second pair of processes meant it.
    confirmed = paired.confirmed if paired.confirmed is not None else len(paired.stages) > 1
    if paired.verdict == stats.REGRESSION and confirmed:
        text += ", confirmed in fresh processes"
    return text


def head_vs_base(case, min_effect=stats.DEFAULT_MIN_EFFECT):
    """The HeadVsBase of a case measured with a baseline build."""
    paired = case.paired
    base = case.frameworks.get(BASE)
    base_s = base.per_iter_s if base is not None and base.ok else None
    ratio = paired.ratio if paired is not None else None
    control = None
    pytorch = case.frameworks.get(PYTORCH)
    if pytorch is not None and pytorch.ok and pytorch.rounds_s:
        band = paired.min_effect if paired is not None else min_effect
        control = control_drift(pytorch.rounds_s, min_effect=band,
                                                stages=paired.stages if paired is not None else ())
    return HeadVsBase(
        case_id=case.id, kind=case.kind, base_s=base_s,
        head_s=base_s * ratio if base_s is not None and ratio is not None else None,
        ratio=ratio, low=paired.low if paired else None, high=paired.high if paired else None,
        verdict=paired.verdict if paired is not None else stats.NOT_COMPARABLE,
        text=paired_text(paired, case.failure), rounds=paired.rounds if paired else 0,
        leaning=paired.leaning if paired else None, control=control,
        confidence=paired.confidence if paired else None,
    )


def rule_of(results):
    """The rule recorded with the first case judged by one; the default rule's parameters otherwise."""
    for case in results.cases:
        if case.paired is not None and case.paired.rule:
            return dict(case.paired.rule)
    return DEFAULT_RULE.to_dict()


def with_baseline(results):
    return BASE in results.builds or any(BASE in c.frameworks for c in results.cases)


def one_line(text, limit=ERROR_TEXT_LIMIT):
    """The text on one line, cut to `limit` characters (see speedstats.text.one_line)."""
    return text_one_line(text, limit)


def as_printed(value, digits):
    return float(f"{value:.{digits}f}")


def _check_spec(case, spec, suite_name):
    if spec.kind != case.kind:
        raise UserError(
            f"suite {suite_name!r}: case {case.id!r} is {spec.kind} in the suite but {case.kind} in the "
            "results"
        )
    if not case_kind(spec.kind).judged and (spec.min_relative_speed is not None or spec.max_oneflow_ms):
        raise UserError(f"suite {suite_name!r}: case {case.id!r}: {spec.kind} cases take no thresholds")


def disturbed_reason(case_id, text):
    return f"{case_id}: measured on a disturbed machine: {text}"


def judge_case(case, spec, gpu_name, suite_name="suite"):
    """The marks and score of one case; spec is the suite's CaseSpec for it, or None."""
    verdict = CaseVerdict(id=case.id)
    if case.failure:
        verdict.failure = one_line(case.failure)
        verdict.score = FAILED_CASE_SCORE
        verdict.reasons.append(f"{case.id}: failed: {verdict.failure}")
        return verdict
    if case.disturbance:
        verdict.disturbed = one_line(case.disturbance["text"])
        verdict.reasons.append(disturbed_reason(case.id, verdict.disturbed))
    if spec is None:
        return verdict
    _check_spec(case, spec, suite_name)
    if spec.min_relative_speed is not None and case.relative_speed is not None:
        relative = as_printed(case.relative_speed, RELATIVE_SPEED_DIGITS)
        if relative >= spec.min_relative_speed:
            verdict.marks["relative"] = PASS_MARK
        else:
            verdict.marks["relative"] = FAIL_MARK
            verdict.score += RELATIVE_SPEED_SCORE
            verdict.reasons.append(
                f"{case.id}: relative speed {relative:.{RELATIVE_SPEED_DIGITS}f} is "
                f"below {spec.min_relative_speed}"
            )
    ms_threshold = spec.ms_threshold(gpu_name)
    if ms_threshold is not None and HEAD in case.frameworks:
        oneflow_ms = as_printed(case.frameworks[HEAD].per_iter_s * 1000, MS_DIGITS)
        if oneflow_ms <= ms_threshold:
            verdict.marks[HEAD] = PASS_MARK
        else:
            verdict.marks[HEAD] = FAIL_MARK
            verdict.score += MS_THRESHOLD_SCORE
            verdict.reasons.append(
                f"{case.id}: OneFlow {oneflow_ms:.{MS_DIGITS}f}ms is above {ms_threshold}ms on {gpu_name}"
            )
    return verdict


def judge(results, suite):
    """The verdict of a whole results file against a suite."""
    cases = []
    for case in results.cases:
        spec = suite.case(case.id) if suite is not None else None
        cases.append(judge_case(case, spec, results.gpu_name, suite.name if suite is not None else "suite"))
    score = sum(c.score for c in cases)
    reasons = [r for c in cases for r in c.reasons]
    rows = [head_vs_base(c) for c in results.cases] if with_baseline(results) else []
    judged = [(c, row) for c, row in zip(results.cases, rows) if not c.failure]
    regressions = [c.id for c, row in judged if row.verdict == REGRESSION]
    likely = [c.id for c, row in judged if row.verdict == stats.INCONCLUSIVE and row.leaning == LIKELY_SLOWER]
    for case, row in judged:
        if case.id in regressions:
            reasons.append(f"{case.id}: OneFlow {(row.ratio - 1) * 100:+.1f}% against the base build")
    rule = rule_of(results)
    if suite is not None:
        rule = {**rule, **{key: getattr(suite.head_vs_base, key) for key in MEMORY_RULE_FIELDS}}
    memory = [change for change in (memory_change(c, rule) for c in results.cases if not c.failure)
              if change is not None] if rows else []
    memory_regressions = [m.case_id for m in memory if m.verdict == MEMORY_REGRESSION]
    for m in memory:
        if m.verdict == MEMORY_REGRESSION and m.judged:
            reasons.append(f"{m.case_id}: OneFlow holds {m.change_bytes / MIB:.0f} MiB "
                           f"({m.change_pct:.1f}%) more memory than the base build")
    error = one_line(results.error) if results.error else None
    if error:
        reasons.append(f"the speed job failed: {error}")
    elif not results.cases:
        reasons.append("the speed job produced no results")
    if results.cancelled:
        reasons.append("the speed job was cancelled before its last case")
    if error or not results.cases or results.cancelled:
        score += FAILED_CASE_SCORE
    disturbed = [c.id for c in cases if c.disturbed]
    memory_failed = any(m.verdict == MEMORY_REGRESSION and m.judged for m in memory)
    passed = score < FAILING_SCORE and not regressions and not disturbed and not memory_failed
    return Verdict(score=score, passed=passed, cases=cases, error=error, reasons=reasons,
                   regressions=regressions, disturbed=disturbed, likely_regressions=likely,
                   head_vs_base=rows, rule=rule, memory=memory, memory_regressions=memory_regressions)
