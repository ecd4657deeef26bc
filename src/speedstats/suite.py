"""The suite: which cases to run, how long, and the thresholds their verdicts use.

Built-in profiles live in the project's `suites/` folder (`default.yml`, `smoke.yml`). A user file
may start from one of them with `extends: NAME` and override any field; cases are matched by `id`
(fields of a known id are overridden, a new id is appended, `skip: true` drops a case).

A suite comes from the pull request's checkout, so reading one is bounded: YAML anchors and aliases
may repeat a value, but a file that expands to more than MAX_YAML_NODES values (aliases counted each
time they are used, as in a "billion laughs" file) is refused before anything is built from it, and
an error message quotes at most a few dozen characters of a value.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import yaml

from speedstats.analysis.paired import DEFAULT_RULE, SequentialRule
from speedstats.casekinds import DEFAULT_DDP_WORLD_SIZE, KIND_NAMES, case_kind
from speedstats.errors import UserError
from speedstats.fsutil import read_text
from speedstats.machine import DisturbanceSpec, disturbance_from_dict
from speedstats.resources import suites_dir
from speedstats.text import one_line, shown

DEFAULT_GPU_KEY = "default"
DEFAULT_PROFILE = "default"
# What a ResNet50 step measures (see speedstats.bench.worker.ResNet50Step and docs/methodology.md).
MODES = ("old-bot", "clean")
MODELS = ("shared", "library")
DEFAULT_MODE = "old-bot"


@dataclass
class DatasetSpec:
    images: int = 320
    classes: int = 4
    min_side: int = 300
    max_side: int = 500
    seed: int = 0
    cache_dir: str | None = None  # default: <out>/../.cache/speedstats/dataset-...


@dataclass
class CaseSpec:
    id: str
    kind: str
    batch_size: int
    times: int
    warmup: int
    timeout_s: float
    rounds: int = 1
    image_size: int = 224  # resnet50 input side
    ddp: bool = False
    world_size: int = 1
    num_workers: int | None = None  # dataloader
    input_size: int = 224  # dataloader transform output side
    min_relative_speed: float | None = None
    max_oneflow_ms: dict[str, float] = field(default_factory=dict)  # GPU name -> ms, "default" key
    mode: str = DEFAULT_MODE
    model: str = "shared"  # library: torchvision's / flowvision's ResNet50 (clean mode only)
    env: dict[str, str] = field(default_factory=dict)  # the suite's env: with the case's on top

    @property
    def input_shape(self):
        return [self.batch_size, 3, self.image_size, self.image_size]

    def ms_threshold(self, gpu_name):
        """The OneFlow milliseconds threshold for this GPU, or None when the case has none."""
        if gpu_name in self.max_oneflow_ms:
            return self.max_oneflow_ms[gpu_name]
        return self.max_oneflow_ms.get(DEFAULT_GPU_KEY)


BUILD_FIELDS = ("oneflow", "baseline_oneflow", "pytorch", "flowvision", "pip_args")


@dataclass
class BuildsSpec:
    """What each contender runs: "installed" (the environment's own), a wheel, folder, glob or requirement."""

    oneflow: str = "installed"  # the build under test (the head)
    baseline_oneflow: str | None = None  # the base build to judge the head against; none: no baseline
    pytorch: str = "installed"  # torch and torchvision (and timm for the dataloader)
    flowvision: str = "installed"  # installed into both OneFlow builds when not "installed"
    pip_args: str = ""  # extra pip arguments for requirements, e.g. "--extra-index-url URL"


@dataclass
class Suite:
    name: str
    cases: list[CaseSpec]
    dataset: DatasetSpec = field(default_factory=DatasetSpec)
    warmup: int = 5
    rounds: int = 1
    timeout_s: float = 1800.0
    interleave: bool = True
    lock_timeout_s: float = 3600.0
    show_memory: bool = False  # the comment adds each case's peak memory lines
    builds: BuildsSpec = field(default_factory=BuildsSpec)
    confirm: bool = True  # measure a flagged case again in fresh processes before alerting
    pause_idle: bool = True  # stop (SIGSTOP) the contenders not being timed during another's round
    # The head-vs-base rule: when a baseline build is measured, how many rounds, and what they must show.
    head_vs_base: SequentialRule = DEFAULT_RULE
    mode: str = DEFAULT_MODE
    model: str = "shared"
    env: dict[str, str] = field(default_factory=dict)
    # When a round counts as disturbed, how often it is measured again, when rounds are unstable.
    disturbance: DisturbanceSpec = field(default_factory=DisturbanceSpec)

    def case(self, case_id):
        for case in self.cases:
            if case.id == case_id:
                return case
        return None


def builtin_profiles():
    return sorted(p.stem for p in suites_dir().glob("*.yml"))


MAX_YAML_NODES = 10_000  # the default suite has about 250


def _expanded_size_exceeds(node, limit):
    """True when the YAML node graph, each alias expanded where it is used, holds more than limit nodes."""
    count, stack = 0, [node]
    while stack:
        count += 1
        if count > limit:
            return True
        current = stack.pop()
        if isinstance(current, yaml.SequenceNode):
            stack.extend(current.value)
        elif isinstance(current, yaml.MappingNode):
            for key, value in current.value:
                stack.extend((key, value))
    return False


def _safe_load_bounded(text, path):
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size_exceeds(node, MAX_YAML_NODES):
            raise UserError(f"{path}: not a suite: it expands to more than {MAX_YAML_NODES} YAML values "
                            "(aliases counted where they are used)")
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _read_yaml(path):
    text = read_text(path, "suite file")
    try:
        data = _safe_load_bounded(text, path)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        problem = one_line(getattr(exc, "problem", exc), 200)
        raise UserError(f"{path}: not valid YAML{at}: {problem}") from None
    except RecursionError:
        raise UserError(f"{path}: not a suite: YAML nested too deeply") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise UserError(f"{path}: not a suite: a value cannot be read ({one_line(exc, 120)})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: a suite must be a YAML mapping")
    return data


def _profile_path(name):
    path = suites_dir() / f"{name}.yml"
    if not path.is_file():
        raise UserError(f"unknown profile {shown(name)} (built-in: {', '.join(builtin_profiles())})")
    return path


def merge(base, override, where):
    """Deep-merge override into a copy of base; the 'cases' list merges by id."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if key == "cases":
            out["cases"] = _merge_cases(out.get("cases") or [], value, where)
        elif isinstance(value, dict) and isinstance(out.get(key), dict) and key != "max_oneflow_ms":
            out[key] = merge(out[key], value, where)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _merge_cases(base_cases, override_cases, where):
    if not isinstance(override_cases, list):
        raise UserError(f"{where}: field 'cases' must be a list")
    merged = [copy.deepcopy(c) for c in base_cases]
    index = {c.get("id"): i for i, c in enumerate(merged) if isinstance(c, dict)}
    for i, case in enumerate(override_cases):
        if not isinstance(case, dict) or "id" not in case:
            raise UserError(f"{where}: cases[{i}] must be a mapping with an 'id'")
        _skip(case, f"{where}: cases[{i}]")
        if case["id"] in index:
            target = merged[index[case["id"]]]
            for key, value in case.items():
                if key in ("max_oneflow_ms", "env") and isinstance(value,
                                                                   dict) and isinstance(target.get(key),
                                                                                        dict):
                    target[key] = {**target[key], **value}
                else:
                    target[key] = copy.deepcopy(value)
        else:
            index[case["id"]] = len(merged)
            merged.append(copy.deepcopy(case))
    return merged  # skipped cases are dropped by suite_from_dict


def _skip(case, where):
    """A case's `skip`: true or false only (a string such as "false" would read as true)."""
    value = case.get("skip", False)
    if not isinstance(value, bool):
        raise UserError(f"{where}: field 'skip' must be true or false, got {shown(value)}")
    return value


MAX_INTEGER = 2**31 - 1


def _number(data, key, where, default=None, integer=False, minimum=None, required=False):
    if key not in data or data[key] is None:
        if required:
            raise UserError(f"{where}: missing field '{key}'")
        return default
    value = data[key]
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        raise UserError(f"{where}: field '{key}' must be {kind}, got {shown(value)}")
    try:
        finite = math.isfinite(float(value))
    except OverflowError:
        finite = False
    if not finite or (integer and abs(value) > MAX_INTEGER):
        raise UserError(f"{where}: field '{key}' must be a finite number of sensible size, "
                        f"got {shown(value)}")
    if minimum is not None and value < minimum:
        raise UserError(f"{where}: field '{key}' must be at least {minimum}, got {shown(value)}")
    return value


_CASE_FIELDS = {
    "id", "kind", "batch_size", "times", "warmup", "timeout_s", "rounds", "image_size", "ddp",
    "world_size", "num_workers", "input_size", "min_relative_speed", "max_oneflow_ms", "skip",
    "mode", "model", "env",
}
_SUITE_FIELDS = {
    "name", "extends", "cases", "dataset", "warmup", "rounds", "timeout_s", "interleave", "lock_timeout_s",
    "show_memory", "builds", "confirm", "pause_idle", "mode", "model", "env", "disturbance", "head_vs_base",
}


def _choice(data, key, where, choices, default):
    value = data.get(key, default)
    if value not in choices:
        raise UserError(f"{where}: field '{key}' must be one of {', '.join(choices)}, got {shown(value)}")
    return value


def _env(data, where, base=None):
    """The `env:` mapping: variable names to strings or numbers, on top of base."""
    env = dict(base or {})
    value = data.get("env")
    if value is None:
        return env
    if not isinstance(value, dict):
        raise UserError(f"{where}: field 'env' must map variable names to values")
    for name, item in value.items():
        if not isinstance(name, str) or not name or "=" in name or "\0" in name:
            raise UserError(f"{where}: field 'env' has a bad variable name {shown(name)}")
        if isinstance(item, bool) or not isinstance(item, (str, int, float)):
            raise UserError(f"{where}: field 'env.{name}' must be a string or a number, got {shown(item)}")
        if isinstance(item, str) and "\0" in item:
            raise UserError(f"{where}: field 'env.{name}' must not contain a NUL character")
        env[name] = str(item)
    return env


def _mode_and_model(data, where, default_mode, default_model):
    mode = _choice(data, "mode", where, MODES, default_mode)
    # A case that switches to old-bot without naming a model runs the shared one.
    model = _choice(data, "model", where, MODELS, "shared" if mode == "old-bot" else default_model)
    if mode == "old-bot" and model == "library":
        raise UserError(f"{where}: field 'model': library needs 'mode: clean' (old-bot runs the shared "
                        "model)")
    return mode, model


def _case(data, i, suite_defaults, where):
    where = f"{where}: cases[{i}]"
    if not isinstance(data, dict):
        raise UserError(f"{where}: must be a mapping")
    case_id = data.get("id")
    if not isinstance(case_id, str) or not case_id:
        raise UserError(f"{where}: field 'id' must be a non-empty string")
    where = f"{where} ({one_line(case_id, 60)})"
    unknown = sorted(set(data) - _CASE_FIELDS, key=str)
    if unknown:
        raise UserError(f"{where}: unknown field '{one_line(unknown[0], 60)}'")
    kind = data.get("kind")
    if kind not in KIND_NAMES:
        raise UserError(f"{where}: field 'kind' must be one of {', '.join(KIND_NAMES)}, got {shown(kind)}")
    ddp = data.get("ddp", False)
    if not isinstance(ddp, bool):
        raise UserError(f"{where}: field 'ddp' must be true or false, got {shown(ddp)}")
    ms = data.get("max_oneflow_ms") or {}
    if isinstance(ms, (int, float)) and not isinstance(ms, bool):
        ms = {DEFAULT_GPU_KEY: ms}
    if not isinstance(ms, dict):
        raise UserError(f"{where}: field 'max_oneflow_ms' must map GPU names to milliseconds")
    for gpu in ms:
        if isinstance(ms[gpu], bool) or not isinstance(ms[gpu], (int, float)):
            raise UserError(f"{where}: field 'max_oneflow_ms.{gpu}' must be a number, got {shown(ms[gpu])}")
        _number({f"max_oneflow_ms.{gpu}": ms[gpu]}, f"max_oneflow_ms.{gpu}", where, minimum=0)
    case = CaseSpec(
        id=case_id,
        kind=kind,
        batch_size=_number(data, "batch_size", where, integer=True, minimum=1, required=True),
        times=_number(data, "times", where, integer=True, minimum=1, required=True),
        warmup=_number(data, "warmup", where, default=suite_defaults["warmup"], integer=True, minimum=0),
        timeout_s=_number(data, "timeout_s", where, default=suite_defaults["timeout_s"], minimum=1),
        rounds=_number(data, "rounds", where, default=suite_defaults["rounds"], integer=True, minimum=1),
        image_size=_number(data, "image_size", where, default=224, integer=True, minimum=1),
        ddp=ddp,
        world_size=_number(data, "world_size", where, default=DEFAULT_DDP_WORLD_SIZE if ddp else 1,
                              integer=True, minimum=1),
        num_workers=_number(data, "num_workers", where, default=case_kind(kind).default_num_workers,
                            integer=True, minimum=0),
        input_size=_number(data, "input_size", where, default=224, integer=True, minimum=1),
        min_relative_speed=_number(data, "min_relative_speed", where, minimum=0),
        max_oneflow_ms={str(k): float(v) for k, v in ms.items()},
    )
    case.mode, case.model = _mode_and_model(data, where, suite_defaults["mode"], suite_defaults["model"])
    case.env = _env(data, where, suite_defaults["env"])
    if case.ddp and not case_kind(case.kind).ddp:
        raise UserError(f"{where}: a {case.kind} case cannot be ddp")
    if not case.ddp and case.world_size != 1:
        raise UserError(f"{where}: field 'world_size' needs 'ddp: true'")
    return case


def suite_from_dict(data, where):
    unknown = sorted(set(data) - _SUITE_FIELDS, key=str)
    if unknown:
        raise UserError(f"{where}: unknown field '{one_line(unknown[0], 60)}'")
    name = data.get("name", "custom")
    if not isinstance(name, str):
        raise UserError(f"{where}: field 'name' must be a string")
    defaults = {
        "warmup": _number(data, "warmup", where, default=5, integer=True, minimum=0),
        "timeout_s": _number(data, "timeout_s", where, default=1800.0, minimum=1),
        "rounds": _number(data, "rounds", where, default=1, integer=True, minimum=1),
        "env": _env(data, where),
    }
    defaults["mode"], defaults["model"] = _mode_and_model(data, where, DEFAULT_MODE, "shared")
    cases_data = data.get("cases")
    if not isinstance(cases_data, list) or not cases_data:
        raise UserError(f"{where}: field 'cases' must be a non-empty list")
    kept = [(i, c) for i, c in enumerate(cases_data)
            if not (isinstance(c, dict) and _skip(c, f"{where}: cases[{i}]"))]
    if not kept:
        raise UserError(f"{where}: every case has 'skip: true'; nothing to run")
    cases = [_case(c, i, defaults, where) for i, c in kept]
    seen = set()
    for case in cases:
        if case.id in seen:
            raise UserError(f"{where}: case id {shown(case.id)} appears twice")
        seen.add(case.id)
    ds = data.get("dataset") or {}
    if not isinstance(ds, dict):
        raise UserError(f"{where}: field 'dataset' must be a mapping")
    unknown = sorted(set(ds) - set(DatasetSpec.__dataclass_fields__), key=str)
    if unknown:
        raise UserError(f"{where}: unknown field 'dataset.{one_line(unknown[0], 60)}'")
    dw = f"{where}: dataset"
    dataset = DatasetSpec(
        images=_number(ds, "images", dw, default=320, integer=True, minimum=1),
        classes=_number(ds, "classes", dw, default=4, integer=True, minimum=1),
        min_side=_number(ds, "min_side", dw, default=300, integer=True, minimum=8),
        max_side=_number(ds, "max_side", dw, default=500, integer=True, minimum=8),
        seed=_number(ds, "seed", dw, default=0, integer=True),
        cache_dir=ds.get("cache_dir"),
    )
    if dataset.cache_dir is not None and (not isinstance(dataset.cache_dir, str) or not dataset.cache_dir):
        raise UserError(f"{dw}: field 'cache_dir' must be a folder path, got {shown(dataset.cache_dir)}")
    if dataset.max_side < dataset.min_side:
        raise UserError(f"{dw}: field 'max_side' must be at least 'min_side'")
    interleave = data.get("interleave", True)
    if not isinstance(interleave, bool):
        raise UserError(f"{where}: field 'interleave' must be true or false")
    show_memory = data.get("show_memory", False)
    if not isinstance(show_memory, bool):
        raise UserError(f"{where}: field 'show_memory' must be true or false")
    confirm, pause_idle = data.get("confirm", True), data.get("pause_idle", True)
    for key, value in (("confirm", confirm), ("pause_idle", pause_idle)):
        if not isinstance(value, bool):
            raise UserError(f"{where}: field '{key}' must be true or false")
    return Suite(
        name=name,
        cases=cases,
        builds=_builds(data.get("builds"), where),
        confirm=confirm,
        pause_idle=pause_idle,
        head_vs_base=_head_vs_base(data.get("head_vs_base"), where),
        dataset=dataset,
        warmup=defaults["warmup"],
        rounds=defaults["rounds"],
        timeout_s=defaults["timeout_s"],
        interleave=interleave,
        lock_timeout_s=_number(data, "lock_timeout_s", where, default=3600.0, minimum=0),
        show_memory=show_memory,
        mode=defaults["mode"],
        model=defaults["model"],
        env=defaults["env"],
        disturbance=disturbance_from_dict(data.get("disturbance"), where),
    )


def _head_vs_base(data, where):
    if data is None:
        return DEFAULT_RULE
    try:
        return SequentialRule.from_dict(data, f"{where}: head_vs_base")
    except ValueError as exc:
        raise UserError(str(exc)) from None


def _builds(data, where):
    if data is None:
        return BuildsSpec()
    if not isinstance(data, dict):
        raise UserError(f"{where}: field 'builds' must be a mapping")
    unknown = sorted(set(data) - set(BUILD_FIELDS), key=str)
    if unknown:
        raise UserError(f"{where}: unknown field 'builds.{one_line(unknown[0], 60)}' "
                        f"(known: {', '.join(BUILD_FIELDS)})")
    values = {}
    for key, value in data.items():
        if value is None:
            continue
        if not isinstance(value, str) or (key != "pip_args" and not value.strip()):
            raise UserError(f"{where}: field 'builds.{key}' must be a non-empty string, got {shown(value)}")
        values[key] = value.strip()
    return BuildsSpec(**values)


def judging_suite_source(recorded, suite_path=None, profile=None):
    """Which suite judges a results file, as (path, profile) for load_suite: the suite file or profile
    given (a file extending the profile when both are), else the built-in profile the results were
    measured with (their `suite`), else the default profile. The one rule of render,
    post-from-artifact and report."""
    if suite_path or profile:
        return suite_path or None, profile or None
    return None, recorded if recorded in builtin_profiles() else DEFAULT_PROFILE


# The help of --suite and --profile of each command that judges a results file.
JUDGING_SUITE_HELP = "suite file whose thresholds judge the results (may extend a profile with 'extends:')"
JUDGING_PROFILE_HELP = ("built-in suite that judges the results (default: the results' suite when it is a "
                        "built-in profile, else 'default'); with --suite, the profile the file extends")


def judging_suite(results, suite_path=None, profile=None):
    """The suite that judges results (see judging_suite_source)."""
    return load_suite(*judging_suite_source(results.suite, suite_path, profile))


def load_suite(path=None, profile=None):
    """The suite to run: a user file (optionally extending a profile) or a built-in profile."""
    if path is None:
        name = profile or DEFAULT_PROFILE
        return suite_from_dict(_read_yaml(_profile_path(name)), f"{name}.yml")
    data = _read_yaml(path)
    base_name = data.pop("extends", None) or profile
    if base_name is not None:
        if not isinstance(base_name, str):
            raise UserError(f"{path}: field 'extends' must be a profile name")
        base = _read_yaml(_profile_path(base_name))
        data = merge(base, data, str(path))
        data.setdefault("name", base_name)
    return suite_from_dict(data, str(path))
