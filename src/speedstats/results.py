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

from speedstats.analysis.paired import PairedVerdict
from speedstats.errors import UserError

SCHEMA = "speedstats/results/v1"
FRAMEWORKS = ("oneflow", "pytorch")  # the two of the Speed stats block: the head OneFlow and PyTorch
BASE = "oneflow_base"  # the OneFlow build the head is judged against, when a baseline is given
CONTENDERS = ("oneflow", BASE, "pytorch")
CASE_KINDS = ("resnet50", "swin_dataloader")
MAX_COUNT = 2**31 - 1  # no batch, iteration count or shape is larger
# per_iter_s may differ from total_s / times by half the last printed digit: the comment prints
# resnet50 times in ms with one decimal and dataloader times in s with three (parse reads them back).
PRINTED_HALF_UNIT_S = {"resnet50": 0.05e-3, "swin_dataloader": 0.5e-3}


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
    imported: dict | None = None  # the framework module its worker imported: version, file
    error: str | None = None

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

    @property
    def measured(self):
        """The frameworks of the Speed stats block this case ran (both, unless a subset was asked for)."""
        return [name for name in FRAMEWORKS if name in self.frameworks] or list(FRAMEWORKS)

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
        if self.failure or len(self.measured) < len(FRAMEWORKS):
            return None
        of, pt = self.frameworks["oneflow"], self.frameworks["pytorch"]
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
    schema: str = SCHEMA

    @property
    def failed_cases(self):
        return [c for c in self.cases if c.failure]

    def to_dict(self):
        return asdict(self)

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
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


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
    return float(value)


def check_count(value, key, where, minimum=1):
    """An integer between minimum and MAX_COUNT (sizes, iteration counts, ranks)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"{where}: field '{key}' must be an integer, got {_short(value)}")
    if not minimum <= value <= MAX_COUNT:
        raise UserError(f"{where}: field '{key}' must be between {minimum} and {MAX_COUNT}, got {_short(value)}")
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
    if fw.peak_memory_bytes is not None and fw.peak_memory_bytes < 0:
        raise UserError(f"{where}: field 'peak_memory_bytes' must not be negative, got {fw.peak_memory_bytes}")
    if None not in (fw.total_s, fw.per_iter_s, fw.times):
        expected = fw.total_s / fw.times
        tolerance = PRINTED_HALF_UNIT_S.get(kind, 0.0) * 1.001 + expected * 1e-9
        if abs(fw.per_iter_s - expected) > tolerance:
            raise UserError(f"{where}: field 'per_iter_s' ({fw.per_iter_s:g}) disagrees with total_s / times "
                            f"({fw.total_s:g} / {fw.times} = {expected:g})")
    return fw


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
        imported=_field(data, "imported", (dict,), where, required=False),
        error=_field(data, "error", (str,), where, required=False),
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
    if kind not in CASE_KINDS:
        raise UserError(f"{where}: field 'kind' must be one of {', '.join(CASE_KINDS)}, got {kind!r}")
    frameworks_data = _field(data, "frameworks", (dict,), where, required=False, default={})
    frameworks = {}
    for name, fw in frameworks_data.items():
        if name not in CONTENDERS:
            raise UserError(f"{where}: unknown framework {name!r} in 'frameworks'")
        frameworks[name] = framework_from_dict(fw, f"{where}.frameworks.{name}", kind)
    shape = _field(data, "input_shape", (list,), where, required=False)
    if shape is not None and not all(isinstance(x, int) and not isinstance(x, bool) for x in shape):
        raise UserError(f"{where}: field 'input_shape' must be a list of integers, got {_short(shape)}")
    for i, size in enumerate(shape or []):
        check_count(size, f"input_shape[{i}]", where)
    case = CaseResult(
        id=case_id,
        kind=kind,
        batch_size=_field(data, "batch_size", (int,), where),
        times=_field(data, "times", (int,), where),
        input_shape=shape,
        num_workers=_field(data, "num_workers", (int,), where, required=kind == "swin_dataloader"),
        ddp=_field(data, "ddp", (bool,), where, required=False, default=False),
        world_size=_field(data, "world_size", (int,), where, required=False, default=1),
        started_at=_field(data, "started_at", (str,), where, required=False),
        finished_at=_field(data, "finished_at", (str,), where, required=False),
        error=_field(data, "error", (str,), where, required=False),
        frameworks=frameworks,
        paired=_paired(data, where),
        confirmation=_field(data, "confirmation", (dict,), where, required=False),
        mode=_field(data, "mode", (str,), where, required=False),
        model=_field(data, "model", (str,), where, required=False),
        env=_field(data, "env", (dict,), where, required=False),
    )
    if kind == "resnet50" and shape is None:
        raise UserError(f"{where}: missing field 'input_shape'")
    check_count(case.batch_size, "batch_size", where)
    check_count(case.times, "times", where, minimum=0 if case.error else 1)  # 0: unknown, for a failed case
    check_count(case.world_size, "world_size", where)
    if case.num_workers is not None:
        check_count(case.num_workers, "num_workers", where, minimum=0)
    return case


def _paired(data, where):
    paired = _field(data, "paired", (dict,), where, required=False)
    if paired is None:
        return None
    try:
        return PairedVerdict.from_dict(paired)
    except (TypeError, ValueError) as exc:
        raise UserError(f"{where}: field 'paired': {one_line_error(exc)}") from None


def one_line_error(exc):
    return " ".join(str(exc).split())[:200]


def results_from_dict(data, where="results"):
    if not isinstance(data, dict):
        raise UserError(f"{where}: must be a JSON object")
    schema = data.get("schema", SCHEMA)
    if schema != SCHEMA:
        raise UserError(f"{where}: field 'schema' must be {SCHEMA!r}, got {schema!r}")
    cases = _field(data, "cases", (list,), where)
    versions = _field(data, "versions", (dict,), where, required=False, default={})
    cases = [case_from_dict(c, f"{where}: cases[{i}]") for i, c in enumerate(cases)]
    seen = {}
    for i, case in enumerate(cases):
        if case.id in seen:
            raise UserError(f"{where}: cases[{i}]: case id {_short(case.id)} is also the id of cases[{seen[case.id]}]")
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
    )


def _builds(data, where):
    builds = _field(data, "builds", (dict,), where, required=False, default={})
    for role, build in builds.items():
        if role not in CONTENDERS or not isinstance(build, dict):
            raise UserError(f"{where}: field 'builds.{role}' must be one of {', '.join(CONTENDERS)} "
                            "mapped to an object")
    return dict(builds)


def loads(text, where="results"):
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{where}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise UserError(f"{where}: not valid results: JSON nested too deeply") from None
    return results_from_dict(data, where)


def load(path):
    from speedstats.fsutil import read_text

    return loads(read_text(path, "results file"), where=str(path))
