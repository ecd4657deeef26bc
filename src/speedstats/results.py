"""The results model: plain data, no framework imports.

results.json holds one run of a suite: where it ran, with which versions, and one record per case.
All times are seconds. A framework record keeps its total over the timed loop and the time per
iteration; with several rounds, `per_iter_s` is the median round and `total_s` is that median times
`times`, so the printed `per-iteration (= total / times)` stays true.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field

from speedstats.analysis.attribution import Attribution, PlaceChange
from speedstats.analysis.paired import MAX_PROCESS_PAIRS, PairedVerdict
from speedstats.analysis.stats import VERDICTS as PAIRED_VERDICTS
from speedstats.casekinds import KIND_NAMES, case_kind
from speedstats.contenders import HEAD, PYTORCH, ROLES, SPEED_STATS_ROLES
from speedstats.errors import UserError
from speedstats.text import one_line, shown

SCHEMA = "speedstats/results/v1"
MAX_COUNT = 2**31 - 1  # no batch, iteration count or shape is larger
# No time is shorter than a nanosecond or longer than about four months: within these, every figure
# the comment prints (milliseconds, relative speeds, changes in percent) is a finite number.
MIN_SECONDS, MAX_SECONDS = 1e-9, 1e7
MAX_RATIO = 1e6  # head/base ratios and their interval (a million times slower is not a benchmark)
MAX_INTEGER_DIGITS = 300  # a JSON integer with more digits is refused before Python converts it
MAX_STARTS = MAX_PROCESS_PAIRS + 1  # a build's worker starts in one case: a pair's each, a confirmation's


@dataclass
class FrameworkResult:
    total_s: float | None = None
    per_iter_s: float | None = None
    times: int | None = None
    rounds_s: list[float] = field(default_factory=list)  # per-iteration time of each round
    round_iterations: int | None = None  # timed iterations in each round (times when one round)
    spread_s: dict[str, float] | None = None  # of rounds_s: n, median, min, max, q1, q3, iqr, mad
    peak_memory_bytes: int | None = None
    memory_kind: str | None = None  # "cuda-allocator" or "rss"
    # The peak memory of the worker's process tree sampled by the runner during the timed rounds (see
    # bench.memory): on CUDA NVML's used memory ("nvml-tree"), on the CPU resident memory ("rss-tree");
    # the figure head and base are judged by. rss_peak_bytes: the tree's resident memory, on CUDA too.
    sampled_peak_bytes: int | None = None
    sampled_memory_kind: str | None = None
    rss_peak_bytes: int | None = None
    # From the worker's start to its first timed round (import, model, warm-up): the median of its starts.
    setup_s: float | None = None
    # Each start's, in the order started: the head and the base one per pair of processes (and one per
    # confirmation), so that the pairs' changes can be compared; empty in results of older runs.
    setup_starts_s: list[float] = field(default_factory=list)
    images_per_s: float | None = None  # images per second at the median time per iteration
    # The median over rounds of at least a second of the GPUs' energy counter's increase per iteration
    # (NVML, Volta and newer; null on the CPU and older GPUs).
    energy_per_step_j: float | None = None
    imported: dict | None = None  # the framework module its worker imported: version, file
    error: str | None = None
    # The machine's state around each round of rounds_s (see bench.machine_state), and the disturbed
    # rounds that were measured again: {"per_iter_s", "state"}.
    round_states: list[dict] = field(default_factory=list)
    remeasured: list[dict] = field(default_factory=list)

    @property
    def ok(self):
        return self.error is None and self.total_s is not None and self.per_iter_s is not None


@dataclass
class CaseResult:
    id: str
    kind: str
    batch_size: int
    times: int
    input_shape: list[int] | None = None  # resnet50 cases
    num_workers: int | None = None  # dataloader cases
    ddp: bool = False
    world_size: int = 1
    started_at: str | None = None
    finished_at: str | None = None
    error: str | None = None
    frameworks: dict[str, FrameworkResult] = field(default_factory=dict)
    # With a baseline: head/base per round, the rule, its looks, and the verdict (see analysis.paired).
    paired: PairedVerdict | None = None
    # A flagged case measured again in fresh processes: {"flags": [...], "status": "confirmed" | "cleared",
    # "rounds": total rounds judged}.
    confirmation: dict | None = None
    # How it was measured (the suite's mode, model and env: of this case); None in older results.
    mode: str | None = None
    model: str | None = None
    env: dict[str, str] | None = None
    # Measured on a disturbed machine (see speedstats.machine.case_disturbance): {"contenders": {role:
    # [texts]}, "text"}; its figures are not comparable.
    disturbance: dict | None = None
    # The head slower than its base (or `attribute: always`): where, from profiled rounds of both (see
    # analysis.attribution): every place compared, in order of change.
    attribution: Attribution | None = None

    @property
    def measured(self):
        """The frameworks of the Speed stats block this case ran (both, unless a subset was asked for)."""
        return [name for name in SPEED_STATS_ROLES if name in self.frameworks] or list(SPEED_STATS_ROLES)

    @property
    def failure(self):
        """The first error of this case, or None when every framework it ran produced a figure."""
        if self.error:
            return self.error
        for name in self.measured:
            fw = self.frameworks.get(name)
            if fw is None:
                return f"{name}: no result"
            if fw.error:
                return f"{name}: {fw.error}"
            if not fw.ok:
                return f"{name}: no result"
        return None

    @property
    def relative_speed(self):
        """PyTorch time over OneFlow time per iteration, from unrounded figures."""
        if self.failure or len(self.measured) < len(SPEED_STATS_ROLES):
            return None
        of, pt = self.frameworks[HEAD], self.frameworks[PYTORCH]
        return (pt.total_s / pt.times) / (of.total_s / of.times)


@dataclass
class Results:
    suite: str
    device: str
    gpu_name: str
    cases: list[CaseResult] = field(default_factory=list)
    versions: dict[str, str | None] = field(default_factory=dict)
    started_at: str | None = None
    finished_at: str | None = None
    error: str | None = None  # the whole run failed before any case (e.g. environment broken)
    # What each contender measured: version, git commit, wheel and sha256 or requirement (see bench.builds).
    builds: dict[str, dict] = field(default_factory=dict)
    cancelled: bool = False  # stopped (SIGTERM, SIGINT) before its last case: the cases are incomplete
    # Why no base build was measured (fetch-baseline --optional found none): a line after the block.
    baseline_missing: str | None = None
    # The machine once per run (see bench.machine_state): CPU, driver, each GPU, the quiet check.
    machine: dict | None = None
    schema: str = SCHEMA

    @property
    def failed_cases(self):
        return [c for c in self.cases if c.failure]

    def to_dict(self):
        data = asdict(self)
        for case, record in zip(self.cases, data["cases"]):
            if case.paired is not None:  # the smallest change its rounds could show, not read back
                record["paired"]["resolvable"] = case.paired.resolvable
        return data

    def to_json(self):
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"


def _field(data, key, types, where, required=True, default=None):
    if key not in data or data[key] is None:
        if required:
            raise UserError(f"{where}: missing field '{key}'")
        return default
    value = data[key]
    if isinstance(value, bool) and bool not in types:
        raise UserError(f"{where}: field '{key}' must be {types[0].__name__}, got {value!r}")
    if not isinstance(value, types):
        raise UserError(f"{where}: field '{key}' must be {types[0].__name__}, got {_short(value)}")
    return value


_NUM = (float, int)


def _short(value, limit=60):
    return shown(value, limit)


def check_seconds(value, key, where):
    """A time in seconds: a number, finite and above zero."""
    if isinstance(value, bool) or not isinstance(value, _NUM):
        raise UserError(f"{where}: field '{key}' must be a number of seconds, got {_short(value)}")
    try:
        finite = math.isfinite(float(value))
    except OverflowError:
        finite = False
    if not finite:
        raise UserError(f"{where}: field '{key}' must be a finite number of seconds, got {_short(value)}")
    if value <= 0:
        raise UserError(f"{where}: field '{key}' must be above zero, got {_short(value)}")
    if not MIN_SECONDS <= value <= MAX_SECONDS:
        raise UserError(f"{where}: field '{key}' must be between {MIN_SECONDS:g} and {MAX_SECONDS:g} "
                        f"seconds, got {_short(value)}")
    return float(value)


def check_count(value, key, where, minimum=1):
    """An integer between minimum and MAX_COUNT (sizes, iteration counts, ranks)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"{where}: field '{key}' must be an integer, got {_short(value)}")
    if not minimum <= value <= MAX_COUNT:
        raise UserError(f"{where}: field '{key}' must be between {minimum} and {MAX_COUNT}, "
                        f"got {_short(value)}")
    return value


def check_framework(fw, kind, where):
    """A framework's figures make sense: positive finite times, per_iter_s = total_s / times within
    the rounding of the printed figures, every round's time positive and finite."""
    for i, value in enumerate(fw.rounds_s):
        check_seconds(value, f"rounds_s[{i}]", where)
    if fw.times is not None:
        check_count(fw.times, "times", where)
    for key in ("total_s", "per_iter_s"):
        if getattr(fw, key) is not None:
            setattr(fw, key, check_seconds(getattr(fw, key), key, where))
    for key in ("peak_memory_bytes", "sampled_peak_bytes", "rss_peak_bytes"):
        if getattr(fw, key) is not None and getattr(fw, key) < 0:
            raise UserError(f"{where}: field '{key}' must not be negative, got {getattr(fw, key)}")
    if fw.setup_s is not None:
        fw.setup_s = check_seconds(fw.setup_s, "setup_s", where)
    if len(fw.setup_starts_s) > MAX_STARTS:
        raise UserError(f"{where}: field 'setup_starts_s' must hold at most {MAX_STARTS} starts, "
                        f"got {len(fw.setup_starts_s)}")
    fw.setup_starts_s = [check_seconds(value, f"setup_starts_s[{i}]", where)
                         for i, value in enumerate(fw.setup_starts_s)]
    for key in ("images_per_s", "energy_per_step_j"):
        value = getattr(fw, key)
        if value is not None and not (math.isfinite(float(value)) and 0 <= value <= MAX_RATIO):
            raise UserError(f"{where}: field '{key}' must be a number from 0 to {MAX_RATIO:g}, "
                            f"got {_short(value)}")
    if None not in (fw.total_s, fw.per_iter_s, fw.times):
        expected = fw.total_s / fw.times
        # per_iter_s may differ from total_s / times by half the last printed digit (parse reads them back)
        known = case_kind(kind)
        tolerance = (known.half_printed_unit_s if known else 0.0) * 1.001 + expected * 1e-9
        if abs(fw.per_iter_s - expected) > tolerance:
            raise UserError(f"{where}: field 'per_iter_s' ({fw.per_iter_s:g}) disagrees with total_s / times "
                            f"({fw.total_s:g} / {fw.times} = {expected:g})")
    return fw


def check_input_shape(shape, batch_size, where):
    """A ResNet50 input shape: four sizes (batch, channels, height, width), the batch the case's."""
    if not isinstance(shape, list) or len(shape) != 4:
        raise UserError(f"{where}: field 'input_shape' must be four sizes [batch, channels, height, width], "
                        f"got {_short(shape)}")
    for i, size in enumerate(shape):
        check_count(size, f"input_shape[{i}]", where)
    if shape[0] != batch_size:
        raise UserError(f"{where}: field 'input_shape' starts with {shape[0]}, "
                        f"not the batch size {batch_size}")
    return shape


def _ratio(data, key, where):
    """A ratio field: a number above 0 and at most MAX_RATIO, or absent."""
    value = data.get(key)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, _NUM) or not 0 < value <= MAX_RATIO:
        raise UserError(f"{where}: field '{key}' must be a number above 0 and at most {MAX_RATIO:g}, "
                        f"got {_short(value)}")


def _check_paired(paired, where):
    """The head-vs-base verdict of a case, as the comment reads it: a known verdict, and ratios that
    print as finite percentages (a verdict other than "not comparable" has its ratio)."""
    where = f"{where}.paired"
    verdict = _field(paired, "verdict", (str,), where, required=False)
    if verdict is not None and verdict not in PAIRED_VERDICTS:
        raise UserError(f"{where}: field 'verdict' must be one of {', '.join(PAIRED_VERDICTS)}, "
                        f"got {_short(verdict)}")
    _field(paired, "reason", (str,), where, required=False)
    _field(paired, "disagree", (bool,), where, required=False)
    _field(paired, "confirmed", (bool,), where, required=False)
    if paired.get("rule") is not None:
        _check_rule(paired["rule"], where)
    _check_ratios(paired, where, ratio_required=verdict not in (None, "not comparable"), verdict=verdict)
    pairs = _field(paired, "pairs", (list,), where, required=False) or []
    if len(pairs) > MAX_PROCESS_PAIRS + 1:  # a confirmation's pair after the rule's
        raise UserError(f"{where}: field 'pairs' has {len(pairs)} entries, at most {MAX_PROCESS_PAIRS + 1}")
    _ratio(paired, "start_order", where)
    extra = _field(paired, "hidden_work", (dict,), where, required=False)
    for key in ("share", "low", "high") if extra is not None else ():
        value = extra.get(key)
        if isinstance(value, bool) or not isinstance(value, _NUM) or not -MAX_RATIO <= value <= MAX_RATIO:
            raise UserError(f"{where}.hidden_work: field '{key}' must be a number from {-MAX_RATIO:g} to "
                            f"{MAX_RATIO:g}, got {_short(value)}")
    for index, pair in enumerate(pairs):
        if not isinstance(pair, dict):
            raise UserError(f"{where}.pairs[{index}]: must be a mapping, got {_short(pair)}")
        _check_ratios(pair, f"{where}.pairs[{index}]", ratio_required=True)


def _check_ratios(record, where, ratio_required, verdict=None):
    """A record's ratio and interval: numbers above 0 and at most MAX_RATIO, or absent."""
    if record.get("ratio") is None and ratio_required:
        needed = f" (required with the verdict {verdict!r})" if verdict else ""
        raise UserError(f"{where}: missing field 'ratio'{needed}")
    for key in ("ratio", "low", "high"):
        _ratio(record, key, where)


# The rule's fields the comment prints, each with its type and the range that prints sensibly; the rest
# of a recorded rule (looks, budgets) is kept as written and read by nothing.
RULE_FIELDS = {
    "min_effect": (_NUM, 0, 1), "confidence": (_NUM, 0, 1), "trim": (_NUM, 0, 0.5),
    "max_rounds": ((int,), 1, MAX_COUNT),
}


def _check_rule(rule, where):
    """A case's recorded head-vs-base rule: a mapping holding the fields the comment prints."""
    if not isinstance(rule, dict):
        raise UserError(f"{where}: field 'rule' must be a mapping, got {_short(rule)}")
    if not rule:  # results of older runs: the default rule is printed
        return
    for key, (types, low, high) in RULE_FIELDS.items():
        if key not in rule:
            raise UserError(f"{where}.rule: missing field '{key}'")
        value = rule[key]
        if isinstance(value, bool) or not isinstance(value, types) or not low <= value <= high:
            kind = "an integer" if types == (int,) else "a number"
            raise UserError(f"{where}.rule: field '{key}' must be {kind} between {low} and {high}, "
                            f"got {_short(value)}")
    pairs = rule.get("pairs", 1)  # absent from results of runs before two pairs of processes
    if isinstance(pairs, bool) or not isinstance(pairs, int) or not 1 <= pairs <= MAX_PROCESS_PAIRS:
        raise UserError(f"{where}.rule: field 'pairs' must be an integer between 1 and {MAX_PROCESS_PAIRS}, "
                        f"got {_short(pairs)}")


def _check_machine(machine, where):
    """The run's machine record, as far as the comment reads it: the preflight check's outcome and the
    driver's notes."""
    where = f"{where}: machine"
    preflight = _field(machine, "preflight", (dict,), where, required=False)
    if preflight is not None:
        at = f"{where}.preflight"
        _field(preflight, "quiet", (bool,), at, required=False)
        waited = _field(preflight, "waited_s", _NUM, at, required=False)
        if waited is not None and not 0 <= waited <= MAX_SECONDS:
            raise UserError(f"{at}: field 'waited_s' must be between 0 and {MAX_SECONDS:g} seconds, "
                            f"got {_short(waited)}")
        _strings(preflight, "reasons", at)
    driver = _field(machine, "driver", (dict,), where, required=False)
    if driver is not None:
        _strings(driver, "notes", f"{where}.driver")
    return machine


def _strings(data, key, where):
    values = _field(data, key, (list,), where, required=False)
    for i, value in enumerate(values or []):
        if not isinstance(value, str):
            raise UserError(f"{where}: field '{key}[{i}]' must be text, got {_short(value)}")


def _confirmation(data, where):
    """A flagged case measured again: its status, and the flags the comment lists."""
    confirmation = _field(data, "confirmation", (dict,), where, required=False)
    if confirmation is None:
        return None
    where = f"{where}.confirmation"
    status = confirmation.get("status")
    if status not in (None, "confirmed", "cleared"):
        raise UserError(f"{where}: field 'status' must be confirmed or cleared, got {_short(status)}")
    flags = _field(confirmation, "flags", (list,), where, required=status is not None, default=[])
    for i, flag in enumerate(flags):
        if not isinstance(flag, str):
            raise UserError(f"{where}: field 'flags[{i}]' must be str, got {_short(flag)}")
    return confirmation


def _spread(data, where):
    spread = _field(data, "spread_s", (dict,), where, required=False)
    if spread is None:
        return None
    for key, value in spread.items():
        if isinstance(value, bool) or not isinstance(value, _NUM):
            raise UserError(f"{where}: field 'spread_s.{key}' must be a number, got {_short(value)}")
        try:
            finite = math.isfinite(float(value))
        except OverflowError:
            finite = False
        if not finite or value < 0:
            raise UserError(f"{where}: field 'spread_s.{key}' must be a finite number, not negative, "
                            f"got {_short(value)}")
    return dict(spread)


def framework_from_dict(data, where, kind=None):
    if not isinstance(data, dict):
        raise UserError(f"{where}: must be an object")
    rounds = _field(data, "rounds_s", (list,), where, required=False, default=[])
    for i, value in enumerate(rounds):
        check_seconds(value, f"rounds_s[{i}]", where)
    fw = FrameworkResult(
        total_s=_field(data, "total_s", _NUM, where, required=False),
        per_iter_s=_field(data, "per_iter_s", _NUM, where, required=False),
        times=_field(data, "times", (int,), where, required=False),
        rounds_s=[float(x) for x in rounds],
        round_iterations=_field(data, "round_iterations", (int,), where, required=False),
        spread_s=_spread(data, where),
        peak_memory_bytes=_field(data, "peak_memory_bytes", (int,), where, required=False),
        memory_kind=_field(data, "memory_kind", (str,), where, required=False),
        sampled_peak_bytes=_field(data, "sampled_peak_bytes", (int,), where, required=False),
        sampled_memory_kind=_field(data, "sampled_memory_kind", (str,), where, required=False),
        rss_peak_bytes=_field(data, "rss_peak_bytes", (int,), where, required=False),
        setup_s=_field(data, "setup_s", _NUM, where, required=False),
        setup_starts_s=_field(data, "setup_starts_s", (list,), where, required=False, default=[]),
        images_per_s=_field(data, "images_per_s", _NUM, where, required=False),
        energy_per_step_j=_field(data, "energy_per_step_j", _NUM, where, required=False),
        imported=_field(data, "imported", (dict,), where, required=False),
        error=_field(data, "error", (str,), where, required=False),
        round_states=_field(data, "round_states", (list,), where, required=False, default=[]),
        remeasured=_field(data, "remeasured", (list,), where, required=False, default=[]),
    )
    if fw.error is None:
        for key in ("total_s", "per_iter_s", "times"):
            if getattr(fw, key) is None:
                raise UserError(f"{where}: missing field '{key}' (required when there is no 'error')")
    return check_framework(fw, kind, where)


def case_from_dict(data, where):
    if not isinstance(data, dict):
        raise UserError(f"{where}: must be an object")
    case_id = _field(data, "id", (str,), where)
    where = f"{where} ({case_id})"
    kind = _field(data, "kind", (str,), where)
    if kind not in KIND_NAMES:
        raise UserError(f"{where}: field 'kind' must be one of {', '.join(KIND_NAMES)}, got {kind!r}")
    frameworks_data = _field(data, "frameworks", (dict,), where, required=False, default={})
    frameworks = {}
    for name, fw in frameworks_data.items():
        if name not in ROLES:
            raise UserError(f"{where}: unknown framework {name!r} in 'frameworks'")
        frameworks[name] = framework_from_dict(fw, f"{where}.frameworks.{name}", kind)
    shape = _field(data, "input_shape", (list,), where, required=False)
    if shape is not None and not all(isinstance(x, int) and not isinstance(x, bool) for x in shape):
        raise UserError(f"{where}: field 'input_shape' must be a list of integers, got {_short(shape)}")
    case = CaseResult(
        id=case_id,
        kind=kind,
        batch_size=_field(data, "batch_size", (int,), where),
        times=_field(data, "times", (int,), where),
        input_shape=shape,
        num_workers=_field(data, "num_workers", (int,), where,
                           required=case_kind(kind).sized_by == "num_workers"),
        ddp=_field(data, "ddp", (bool,), where, required=False, default=False),
        world_size=_field(data, "world_size", (int,), where, required=False, default=1),
        started_at=_field(data, "started_at", (str,), where, required=False),
        finished_at=_field(data, "finished_at", (str,), where, required=False),
        error=_field(data, "error", (str,), where, required=False),
        frameworks=frameworks,
        paired=_paired(data, where),
        confirmation=_confirmation(data, where),
        mode=_field(data, "mode", (str,), where, required=False),
        model=_field(data, "model", (str,), where, required=False),
        env=_field(data, "env", (dict,), where, required=False),
        disturbance=_disturbance(data, where),
        attribution=_attribution(data, where),
    )
    if case_kind(kind).sized_by == "input_shape" and shape is None:
        raise UserError(f"{where}: missing field 'input_shape'")
    check_count(case.batch_size, "batch_size", where)
    if shape is not None:
        check_input_shape(shape, case.batch_size, where)
    check_count(case.times, "times", where, minimum=0 if case.error else 1)  # 0: unknown, for a failed case
    check_count(case.world_size, "world_size", where)
    if case.num_workers is not None:
        check_count(case.num_workers, "num_workers", where, minimum=0)
    return case


def _paired(data, where):
    paired = _field(data, "paired", (dict,), where, required=False)
    if paired is None:
        return None
    _check_paired(paired, where)
    try:
        return PairedVerdict.from_dict(paired)
    except (TypeError, ValueError) as exc:
        raise UserError(f"{where}: field 'paired': {one_line_error(exc)}") from None


def one_line_error(exc):
    return " ".join(str(exc).split())[:200]


def results_from_dict(data, where="results"):
    if not isinstance(data, dict):
        raise UserError(f"{where}: must be a JSON object")
    check_numbers(data, where)
    schema = data.get("schema", SCHEMA)
    if schema != SCHEMA:
        raise UserError(f"{where}: field 'schema' must be {SCHEMA!r}, got {schema!r}")
    cases = _field(data, "cases", (list,), where)
    versions = _field(data, "versions", (dict,), where, required=False, default={})
    cases = [case_from_dict(c, f"{where}: cases[{i}]") for i, c in enumerate(cases)]
    seen = {}
    for i, case in enumerate(cases):
        if case.id in seen:
            raise UserError(f"{where}: cases[{i}]: case id {_short(case.id)} is also the id of "
                            f"cases[{seen[case.id]}]")
        seen[case.id] = i
    return Results(
        suite=_field(data, "suite", (str,), where),
        device=_field(data, "device", (str,), where),
        gpu_name=_field(data, "gpu_name", (str,), where),
        cases=cases,
        versions={str(k): (None if v is None else str(v)) for k, v in versions.items()},
        started_at=_field(data, "started_at", (str,), where, required=False),
        finished_at=_field(data, "finished_at", (str,), where, required=False),
        error=_field(data, "error", (str,), where, required=False),
        builds=_builds(data, where),
        cancelled=_field(data, "cancelled", (bool,), where, required=False, default=False),
        baseline_missing=_field(data, "baseline_missing", (str,), where, required=False),
        machine=_machine(data, where),
    )


def _machine(data, where):
    machine = _field(data, "machine", (dict,), where, required=False)
    return None if machine is None else _check_machine(machine, where)


def _disturbance(data, where):
    disturbance = _field(data, "disturbance", (dict,), where, required=False)
    if disturbance is not None and (not isinstance(disturbance.get("text"), str)
                                    or not isinstance(disturbance.get("contenders"), dict)):
        raise UserError(f"{where}: field 'disturbance' must hold a 'text' and its 'contenders'")
    return disturbance


_PLACE_NUMBERS = ("base_ms", "head_ms", "change_ms", "low_ms", "high_ms", "base_total_ms", "head_total_ms")


def _attribution(data, where):
    """A case's `attribution`: its places checked one by one (a place, finite milliseconds, a flag)."""
    value = _field(data, "attribution", (dict,), where, required=False)
    if value is None:
        return None
    where = f"{where}: field 'attribution'"
    lists = {}
    for key in ("places", "ops"):
        places = value.get(key) or []
        if not isinstance(places, list):
            raise UserError(f"{where}: '{key}' must be a list")
        for i, place in enumerate(places):
            at = f"{where}: {key}[{i}]"
            if not isinstance(place, dict) or not isinstance(place.get("place"), str):
                raise UserError(f"{at} must be an object with a 'place' string")
            for number_key in _PLACE_NUMBERS:
                number = place.get(number_key)
                if (isinstance(number, bool) or not isinstance(number, (int, float))
                        or not math.isfinite(number)):
                    raise UserError(
                        f"{at}: field '{number_key}' must be a finite number, got {shown(number)}")
            if not isinstance(place.get("significant"), bool):
                raise UserError(f"{at}: field 'significant' must be true or false")
        lists[key] = [{k: v for k, v in p.items() if k in PlaceChange.__dataclass_fields__} for p in places]
    known = set(Attribution.__dataclass_fields__)
    unknown = sorted(set(value) - known)
    if unknown:
        raise UserError(f"{where}: unknown field '{one_line(unknown[0], 60)}'")
    try:
        return Attribution.from_dict({**value, **lists})
    except (TypeError, ValueError) as exc:
        raise UserError(f"{where}: {one_line(str(exc), 200)}") from None


def _builds(data, where):
    builds = _field(data, "builds", (dict,), where, required=False, default={})
    for role, build in builds.items():
        if role not in ROLES or not isinstance(build, dict):
            raise UserError(f"{where}: field 'builds.{role}' must be one of {', '.join(ROLES)} "
                            "mapped to an object")
    return dict(builds)


class _LongInteger:
    """A JSON integer of more than MAX_INTEGER_DIGITS digits, kept unconverted until it is refused."""

    def __init__(self, text):
        self.digits = len(text.lstrip("-"))

    def __repr__(self):
        return f"an integer of {self.digits} digits"


def _integer(text):
    return _LongInteger(text) if len(text) > MAX_INTEGER_DIGITS else int(text)


def check_numbers(data, where):
    """Refuse a number no field can hold, wherever it is: NaN, an infinity (1e400 reads as one), or an
    integer beyond what a float can hold. Names its field, as the checks of each field do."""
    stack = [((), data)]
    while stack:
        parts, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((parts + (str(key),), item) for key, item in value.items())
        elif isinstance(value, list):
            head, last = parts[:-1], parts[-1] if parts else ""
            for i, item in enumerate(value):
                case_id = item.get("id") if isinstance(item, dict) else None
                named = f" ({one_line(case_id, 60)})" if isinstance(case_id, str) else ""
                stack.append((head + (f"{last}[{i}]{named}",), item))
        elif isinstance(value, (_LongInteger, float, int)) and not isinstance(value, bool):
            try:
                finite = not isinstance(value, _LongInteger) and math.isfinite(float(value))
            except OverflowError:
                finite = False
            if not finite:
                place = f"{where}: {'.'.join(parts[:-1])}: " if len(parts) > 1 else f"{where}: "
                raise UserError(f"{place}field '{parts[-1] if parts else ''}' must be a finite number of "
                                f"sensible size, got {_short(value)}")


def parse_json(text):
    """json.loads, with an integer too long to convert kept for check_numbers to refuse."""
    return json.loads(text, parse_int=_integer)


def loads(text, where="results"):
    try:
        data = parse_json(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{where}: not valid JSON: {exc.msg} at line {exc.lineno} "
                        f"column {exc.colno}") from None
    except RecursionError:
        raise UserError(f"{where}: not valid results: JSON nested too deeply") from None
    return results_from_dict(data, where)


def load(path):
    from speedstats.fsutil import read_text

    return loads(read_text(path, "results file"), where=str(path))
