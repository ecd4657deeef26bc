"""The results model: plain data, no framework imports.

results.json holds one run of a suite: where it ran, with which versions, and one record per case.
All times are seconds. A framework record keeps its total over the timed loop and the time per
iteration; with several rounds, `per_iter_s` is the median round and `total_s` is that median times
`times`, so the printed `per-iteration (= total / times)` stays true.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass

from speedstats.analysis.attribution import Attribution
from speedstats.analysis.paired import PairedVerdict
from speedstats.analysis.rule import MAX_PROCESS_PAIRS, MAX_PROCESS_SD, MAX_RATIO
from speedstats.casekinds import KIND_NAMES, case_kind
from speedstats.contenders import HEAD, PYTORCH, ROLES, SPEED_STATS_ROLES
from speedstats.errors import UserError
from speedstats.settings import json_schema, read_record, setting
from speedstats.text import one_line, shown

SCHEMA = "speedstats/results/v1"
MAX_COUNT = 2**31 - 1  # no batch, iteration count or shape is larger
# No time is shorter than a nanosecond or longer than about four months: within these, every figure
# the comment prints (milliseconds, relative speeds, changes in percent) is a finite number.
MIN_SECONDS, MAX_SECONDS = 1e-9, 1e7
MAX_INTEGER_DIGITS = 300  # a JSON integer with more digits is refused before Python converts it
MAX_STARTS = MAX_PROCESS_PAIRS + 1  # a build's worker starts in one case: a pair's each, a confirmation's


SECONDS = {"minimum": MIN_SECONDS, "maximum": MAX_SECONDS}
BYTES = {"minimum": 0, "maximum": 2**53}  # peak memory: more than 8 PiB is not a measurement


@dataclass
class FrameworkResult:
    """One framework's figures in a case: the time per iteration, its rounds, memory and warm-up."""

    OPEN_RECORD = True

    total_s: float | None = setting(None, **SECONDS)
    per_iter_s: float | None = setting(None, **SECONDS)
    times: int | None = setting(None, minimum=1, maximum=MAX_COUNT)
    # per-iteration time of each round
    rounds_s: list[float] = setting(factory=list, **SECONDS)
    # timed iterations in each round (times when one round)
    round_iterations: int | None = setting(None, minimum=1, maximum=MAX_COUNT)
    # of rounds_s: n, median, min, max, q1, q3, iqr, mad
    spread_s: dict[str, float] | None = setting(None, minimum=0, maximum=MAX_SECONDS)
    peak_memory_bytes: int | None = setting(None, **BYTES)
    memory_kind: str | None = setting(None)  # "cuda-allocator", "nvml-process" or "rss"
    # The peak memory of the worker's process tree sampled by the runner during the timed rounds (see
    # bench.memory): on CUDA NVML's used memory ("nvml-tree"), on the CPU resident memory ("rss-tree");
    # the figure head and base are judged by. rss_peak_bytes: the tree's resident memory, on CUDA too.
    sampled_peak_bytes: int | None = setting(None, **BYTES)
    sampled_memory_kind: str | None = setting(None)
    rss_peak_bytes: int | None = setting(None, **BYTES)
    # From the worker's start to its first timed round (import, model, warm-up): the median of its starts.
    setup_s: float | None = setting(None, **SECONDS)
    # Each start's, in the order started: the head and the base one per pair of processes (and one per
    # confirmation), so that the pairs' changes can be compared; empty in results of older runs.
    setup_starts_s: list[float] = setting(factory=list, max_items=MAX_STARTS, **SECONDS)
    # images per second at the median time per iteration
    images_per_s: float | None = setting(None, minimum=0, maximum=MAX_RATIO)
    # The median over rounds of at least a second of the GPUs' energy counter's increase per iteration
    # (NVML, Volta and newer; null on the CPU and older GPUs).
    energy_per_step_j: float | None = setting(None, minimum=0, maximum=MAX_RATIO)
    imported: dict | None = setting(None)  # the framework module its worker imported: version, file
    error: str | None = setting(None)
    # The machine's state around each round of rounds_s (see bench.machine_state), and the disturbed
    # rounds that were measured again: {"per_iter_s", "state"}.
    round_states: list[dict] = setting(factory=list)
    remeasured: list[dict] = setting(factory=list)

    def check(self, where):
        """A figure when there is no error (checked with its case's kind by check_framework)."""
        if self.error is None:
            for key in ("total_s", "per_iter_s", "times"):
                if getattr(self, key) is None:
                    raise UserError(f"{where}: missing field '{key}' (required when there is no 'error')")

    @property
    def ok(self):
        return self.error is None and self.total_s is not None and self.per_iter_s is not None


@dataclass
class Confirmation:
    """A flagged case measured again in fresh processes: its status, and the flags the comment lists."""

    OPEN_RECORD = AS_MAPPING = True
    status: str | None = setting(None, choices=("confirmed", "cleared"))
    flags: list[str] = setting(factory=list)
    rounds: int | None = setting(None, minimum=0, maximum=MAX_COUNT)  # total rounds judged

    def check(self, where):
        if self.status is not None and not self.flags:
            raise UserError(f"{where}: missing field 'flags'")


@dataclass
class Disturbance:
    """A case measured on a disturbed machine (see speedstats.machine.case_disturbance)."""

    AS_MAPPING = True
    text: str = setting()
    contenders: dict[str, list[str]] = setting(required=True, factory=dict, keys=ROLES)


@dataclass
class CaseResult:
    """One case of the suite: its sizes, each framework's figures, and the head-vs-base verdict."""

    OPEN_RECORD = True

    id: str = setting()
    kind: str = setting(choices=KIND_NAMES)
    batch_size: int = setting(minimum=1, maximum=MAX_COUNT)
    times: int = setting(minimum=0, maximum=MAX_COUNT)  # 0: unknown, for a failed case
    input_shape: list[int] | None = setting(None, minimum=1, maximum=MAX_COUNT)  # resnet50 cases
    num_workers: int | None = setting(None, minimum=0, maximum=MAX_COUNT)  # dataloader cases
    ddp: bool = setting(False)
    world_size: int = setting(1, minimum=1, maximum=MAX_COUNT)
    started_at: str | None = setting(None)
    finished_at: str | None = setting(None)
    error: str | None = setting(None)
    frameworks: dict[str, FrameworkResult] = setting(factory=dict, record=FrameworkResult, keys=ROLES)
    # With a baseline: head/base per round, the rule, its looks, and the verdict (see analysis.paired).
    paired: PairedVerdict | None = setting(None, record=PairedVerdict)
    # A flagged case measured again in fresh processes: {"flags": [...], "status": "confirmed" | "cleared",
    # "rounds": total rounds judged}.
    confirmation: dict | None = setting(None, record=Confirmation)
    # How it was measured (the suite's mode, model and env: of this case); None in older results.
    mode: str | None = setting(None)
    model: str | None = setting(None)
    env: dict[str, str] | None = setting(None)
    # Measured on a disturbed machine (see speedstats.machine.case_disturbance): {"contenders": {role:
    # [texts]}, "text"}; its figures are not comparable.
    disturbance: dict | None = setting(None, record=Disturbance)
    # The head slower than its base (or `attribute: always`): where, from profiled rounds of both (see
    # analysis.attribution): every place compared, in order of change.
    attribution: Attribution | None = setting(None, record=Attribution)

    def check(self, where):
        """What one field cannot say alone: the sizes its kind needs, a count of iterations unless it
        failed, and each framework's figures against each other."""
        check_sizes(self, where)
        check_count(self.times, "times", where, minimum=0 if self.error else 1)
        for name, fw in self.frameworks.items():
            check_framework(fw, self.kind, f"{where}.frameworks.{name}")

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
class Package:
    """One package of a build, as the builds line names it."""

    OPEN_RECORD = AS_MAPPING = True
    version: str | None = setting(None)
    git_commit: str | None = setting(None)
    wheel: str | None = setting(None)
    sha256: str | None = setting(None)
    requirement: str | None = setting(None)


@dataclass
class Build:
    """What one contender measured (see bench.builds): its family, where it came from, its packages."""

    OPEN_RECORD = AS_MAPPING = True
    family: str | None = setting(None)
    source: str | None = setting(None)
    packages: dict[str, dict] | None = setting(None, record=Package)


@dataclass
class Preflight:
    """The quiet check before the first case."""

    OPEN_RECORD = AS_MAPPING = True
    quiet: bool | None = setting(None)
    waited_s: float | None = setting(None, minimum=0, maximum=MAX_SECONDS)
    reasons: list[str] = setting(factory=list)


@dataclass
class Driver:
    """The GPU driver, and the notes the comment prints about it."""

    OPEN_RECORD = AS_MAPPING = True
    notes: list[str] = setting(factory=list)


@dataclass
class Machine:
    """The machine once per run (see bench.machine_state), as far as the comment reads it."""

    OPEN_RECORD = AS_MAPPING = True
    preflight: dict | None = setting(None, record=Preflight)
    driver: dict | None = setting(None, record=Driver)


@dataclass
class SkippedCase:
    """A case of the suite that the run did not measure, and why (a DDP case needing more GPUs than the
    runner has: see the suite's `too_few_gpus`)."""

    OPEN_RECORD = True
    id: str = setting()
    reason: str = setting()


@dataclass
class CalibrationUsed:
    """The runner's calibration a run took its rule's process_sd from (speedstats.calibration)."""

    OPEN_RECORD = AS_MAPPING = True
    file: str = setting()  # its name in the cache's calibration folder
    measured_at: str | None = setting(None)
    runner: str | None = setting(None)
    # each case that took a prior: its process_sd
    process_sd: dict[str, float] = setting(factory=dict, minimum=0, maximum=MAX_PROCESS_SD)


@dataclass
class Results:
    """One run of a suite: where it ran, with which versions, and one record per case."""

    OPEN_RECORD = True

    suite: str = setting()
    device: str = setting()
    gpu_name: str = setting()
    cases: list[CaseResult] = setting(factory=list, record=CaseResult, required=True)
    versions: dict[str, str | None] = setting(factory=dict)
    started_at: str | None = setting(None)
    finished_at: str | None = setting(None)
    # the whole run failed before any case (e.g. environment broken)
    error: str | None = setting(None)
    # What each contender measured: version, git commit, wheel and sha256 or requirement (see bench.builds).
    builds: dict[str, dict] = setting(factory=dict, record=Build, keys=ROLES)
    # stopped (SIGTERM, SIGINT) before its last case: the cases are incomplete
    cancelled: bool = setting(False)
    # Why no base build was measured (fetch-baseline --optional found none): a line after the block.
    baseline_missing: str | None = setting(None)
    # The machine once per run (see bench.machine_state): CPU, driver, each GPU, the quiet check.
    machine: dict | None = setting(None, record=Machine)
    # The suite's cases this run did not measure: a line each after the block.
    skipped: list[SkippedCase] = setting(factory=list, record=SkippedCase)
    # The runner's calibration (`speedstats calibrate`) that gave cases their rule's process_sd; None: none.
    calibration: dict | None = setting(None, record=CalibrationUsed)
    schema: str = setting(SCHEMA, choices=(SCHEMA,))

    def check(self, where):
        seen = {}
        for i, case in enumerate(self.cases):
            if case.id in seen:
                raise UserError(f"{where}: cases[{i}]: case id {_short(case.id)} is also the id of "
                                f"cases[{seen[case.id]}]")
            seen[case.id] = i

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


def check_sizes(case, where):
    """The fields that size a case: each one its kind needs (casekinds) given, an input shape that fits."""
    for name in case_kind(case.kind).size_fields:
        if getattr(case, name) is None:
            raise UserError(f"{where}: missing field '{name}'")
    if case.input_shape is not None:
        check_input_shape(case.input_shape, case.batch_size, where)


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


def upgrade(data):
    """A results mapping of an older run in the shape of today's (SCHEMA), before it is read: the one
    place where what older runs left out is filled in. Results recorded before two pairs of processes
    have a rule without `pairs` (one), `disagreement_pairs` (none) and `settling_pairs` (as many as the
    first look's); results recorded before a rule was kept have an empty one (the default is printed)."""
    for case in data.get("cases") if isinstance(data.get("cases"), list) else ():
        paired = case.get("paired") if isinstance(case, dict) else None
        rule = paired.get("rule") if isinstance(paired, dict) else None
        if isinstance(rule, dict) and rule:
            rule.setdefault("pairs", 1)
            rule.setdefault("disagreement_pairs", 0)
            if rule.get("settling_pairs") is None:
                rule["settling_pairs"] = rule["pairs"]
        elif isinstance(rule, dict):
            del paired["rule"]
    return data


def case_from_dict(data, where):
    """One case record, read as CaseResult declares it; errors name it by its id."""
    case_id = data.get("id") if isinstance(data, dict) else None
    named = f" ({one_line(case_id, 60)})" if isinstance(case_id, str) else ""
    return read_record(CaseResult, data, f"{where}{named}", nest=".")


def results_from_dict(data, where="results"):
    """A results mapping (results.json), read as Results declares it: a UserError names the first field
    that is wrong, with the record it is in."""
    if not isinstance(data, dict):
        raise UserError(f"{where}: must be a JSON object")
    check_numbers(data, where)
    schema = data.get("schema", SCHEMA)
    if schema != SCHEMA:
        raise UserError(f"{where}: field 'schema' must be {SCHEMA!r}, got {_short(schema)}")
    return read_record(Results, upgrade(data), where)


def results_schema():
    """The JSON Schema of results.json, made from the declarations above (`speedstats schema results`)."""
    schema = json_schema(Results, title="speedstats results")
    schema["$id"] = SCHEMA
    return schema


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
