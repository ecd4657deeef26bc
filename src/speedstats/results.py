"""The results model: plain data, no framework imports.

results.json holds one run of a suite: where it ran, with which versions, and one record per case.
All times are seconds. A framework record keeps its total over the timed loop and the time per
iteration; with several rounds, `per_iter_s` is the median round and `total_s` is that median times
`times`, so the printed `per-iteration (= total / times)` stays true.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from speedstats.errors import UserError

SCHEMA = "speedstats/results/v1"
FRAMEWORKS = ("oneflow", "pytorch")  # the two of the Speed stats block: the head OneFlow and PyTorch
BASE = "oneflow_base"  # the OneFlow build the head is judged against, when a baseline is given
CONTENDERS = ("oneflow", BASE, "pytorch")
CASE_KINDS = ("resnet50", "swin_dataloader")


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
    # With a baseline: head/base per round, and the verdict on them (see analysis.paired).
    paired: dict | None = None
    # A flagged case measured again in fresh processes: {"flags": [...], "status": "confirmed" | "cleared",
    # "rounds": total rounds judged}.
    confirmation: dict | None = None

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
        raise UserError(f"{where}: field '{key}' must be {types[0].__name__}, got {value!r}")
    return value


_NUM = (float, int)


def _spread(data, where):
    spread = _field(data, "spread_s", (dict,), where, required=False)
    if spread is None:
        return None
    for key, value in spread.items():
        if isinstance(value, bool) or not isinstance(value, _NUM):
            raise UserError(f"{where}: field 'spread_s.{key}' must be a number, got {value!r}")
    return dict(spread)


def framework_from_dict(data, where):
    if not isinstance(data, dict):
        raise UserError(f"{where}: must be an object")
    fw = FrameworkResult(
        total_s=_field(data, "total_s", _NUM, where, required=False),
        per_iter_s=_field(data, "per_iter_s", _NUM, where, required=False),
        times=_field(data, "times", (int,), where, required=False),
        rounds_s=[float(x) for x in _field(data, "rounds_s", (list,), where, required=False, default=[])],
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
        if fw.times <= 0:
            raise UserError(f"{where}: field 'times' must be positive, got {fw.times}")
    return fw


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
        frameworks[name] = framework_from_dict(fw, f"{where}.frameworks.{name}")
    shape = _field(data, "input_shape", (list,), where, required=False)
    if shape is not None and not all(isinstance(x, int) and not isinstance(x, bool) for x in shape):
        raise UserError(f"{where}: field 'input_shape' must be a list of integers, got {shape!r}")
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
        paired=_field(data, "paired", (dict,), where, required=False),
        confirmation=_field(data, "confirmation", (dict,), where, required=False),
    )
    if kind == "resnet50" and shape is None:
        raise UserError(f"{where}: missing field 'input_shape'")
    return case


def results_from_dict(data, where="results"):
    if not isinstance(data, dict):
        raise UserError(f"{where}: must be a JSON object")
    schema = data.get("schema", SCHEMA)
    if schema != SCHEMA:
        raise UserError(f"{where}: field 'schema' must be {SCHEMA!r}, got {schema!r}")
    cases = _field(data, "cases", (list,), where)
    versions = _field(data, "versions", (dict,), where, required=False, default={})
    return Results(
        suite=_field(data, "suite", (str,), where),
        device=_field(data, "device", (str,), where),
        gpu_name=_field(data, "gpu_name", (str,), where),
        cases=[case_from_dict(c, f"{where}: cases[{i}]") for i, c in enumerate(cases)],
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
    return results_from_dict(data, where)


def load(path):
    from speedstats.fsutil import read_text

    return loads(read_text(path, "results file"), where=str(path))
