"""The suite: which cases to run, how long, and the thresholds their verdicts use.

Built-in profiles live in the project's `suites/` folder (`default.yml`, `smoke.yml`). A user file
may start from one of them with `extends: NAME` and override any field; cases are matched by `id`
(fields of a known id are overridden, a new id with its `kind` is appended, `skip: true` drops a case;
an id the profile does not have, without a `kind`, is refused with the closest id it does have). The
fields and their defaults are the dataclasses' below, read by speedstats.settings; `speedstats suite`
prints them.

A suite comes from the pull request's checkout, so reading one is bounded: YAML anchors and aliases
may repeat a value, but a file that expands to more than MAX_YAML_NODES values (aliases counted each
time they are used, as in a "billion laughs" file) is refused before anything is built from it, and
an error message quotes at most a few dozen characters of a value.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import yaml

from speedstats.analysis.rule import DEFAULT_RULE, SequentialRule
from speedstats.casekinds import DEFAULT_DDP_WORLD_SIZE, KIND_NAMES, case_kind
from speedstats.errors import UserError
from speedstats.fsutil import read_text
from speedstats.machine import DisturbanceSpec
from speedstats.resources import suites_dir
from speedstats.settings import check_known, number, read_settings, read_value, setting
from speedstats.text import close_match, did_you_mean, one_line, shown

DEFAULT_GPU_KEY = "default"
DEFAULT_PROFILE = "default"
# What a ResNet50 step measures (see speedstats.bench.worker.ResNet50Step and docs/methodology.md).
MODES = ("old-bot", "clean")
MODELS = ("shared", "library")
DEFAULT_MODE = "old-bot"
OLD_BOT_MODEL = "shared"  # the only model old-bot mode runs


def _env(value, where, name):
    """The `env:` mapping: variable names to strings or numbers (as strings)."""
    if not isinstance(value, dict):
        raise UserError(f"{where}: field '{name}' must map variable names to values")
    env = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key or "=" in key or "\0" in key:
            raise UserError(f"{where}: field '{name}' has a bad variable name {shown(key)}")
        if isinstance(item, bool) or not isinstance(item, (str, int, float)):
            raise UserError(f"{where}: field '{name}.{key}' must be a string or a number, got {shown(item)}")
        if isinstance(item, str) and "\0" in item:
            raise UserError(f"{where}: field '{name}.{key}' must not contain a NUL character")
        env[key] = str(item)
    return env


def _gpu_ms(value, where, name):
    """`max_oneflow_ms:` GPU names to milliseconds; a bare number is the "default" GPU's."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = {DEFAULT_GPU_KEY: value}
    if not isinstance(value, dict):
        raise UserError(f"{where}: field '{name}' must map GPU names to milliseconds")
    for gpu, ms in value.items():
        if isinstance(ms, bool) or not isinstance(ms, (int, float)):
            raise UserError(f"{where}: field '{name}.{gpu}' must be a number, got {shown(ms)}")
        number(ms, f"{name}.{gpu}", where, minimum=0)
    return {str(gpu): float(ms) for gpu, ms in value.items()}


def _folder(value, where, name):
    if not isinstance(value, str) or not value:
        raise UserError(f"{where}: field '{name}' must be a folder path, got {shown(value)}")
    return value


def _build(value, where, name):
    """A build: "installed", a wheel, folder, glob or requirement."""
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"{where}: field '{name}' must be a non-empty string, got {shown(value)}")
    return value.strip()


def _pip_args(value, where, name):
    if not isinstance(value, str):
        raise UserError(f"{where}: field '{name}' must be a non-empty string, got {shown(value)}")
    return value.strip()


@dataclass
class DatasetSpec:
    images: int = setting(320, minimum=1)
    classes: int = setting(4, minimum=1)
    min_side: int = setting(300, minimum=8)
    max_side: int = setting(500, minimum=8)
    seed: int = 0
    cache_dir: str | None = setting(None, read=_folder)  # default: <out>/../.cache/speedstats/dataset-...

    def check(self, where):
        if self.max_side < self.min_side:
            raise ValueError(f"{where}: field 'max_side' must be at least 'min_side'")


def _budget_share(value, where, name):
    """A share of the wall time, from 0 up to (not including) 1."""
    value = number(value, name, where, minimum=0)
    if value >= 1:
        raise UserError(f"{where}: field '{name}' must be below 1 (a share of the wall time), "
                        f"got {shown(value)}")
    return float(value)


ATTRIBUTE_SLOWER, ATTRIBUTE_ALWAYS, ATTRIBUTE_NEVER = "slower", "always", "never"
ATTRIBUTE_CHOICES = (ATTRIBUTE_SLOWER, ATTRIBUTE_ALWAYS, ATTRIBUTE_NEVER)
TOO_FEW_GPUS_SKIP, TOO_FEW_GPUS_FAIL = "skip", "fail"


# A case's fields that default to the suite's own (its `warmup:`, `env:` ...; a case's env goes on top).
SUITE_WIDE = ("warmup", "timeout_s", "rounds", "mode", "model", "env")


@dataclass
class CaseSpec:
    id: str
    kind: str = setting(choices=KIND_NAMES)
    batch_size: int = setting(minimum=1)
    times: int = setting(minimum=1)
    warmup: int = setting(minimum=0)
    timeout_s: float = setting(minimum=1)
    rounds: int = setting(minimum=1)
    mode: str = setting(choices=MODES)
    model: str = setting(choices=MODELS)  # library: torchvision's / flowvision's ResNet50 (clean mode only)
    env: dict[str, str] = setting(read=_env)  # the suite's env: with the case's on top
    image_size: int = setting(224, minimum=1)  # resnet50 input side
    ddp: bool = False
    world_size: int = setting(1, minimum=1)  # with ddp: DEFAULT_DDP_WORLD_SIZE
    num_workers: int | None = setting(None, minimum=0)  # dataloader; default: its kind's
    input_size: int = setting(224, minimum=1)  # dataloader transform output side
    min_relative_speed: float | None = setting(None, minimum=0)
    max_oneflow_ms: dict[str, float] = setting(factory=dict, read=_gpu_ms)  # GPU name -> ms, "default" key

    @property
    def input_shape(self):
        return [self.batch_size, 3, self.image_size, self.image_size]

    def ms_threshold(self, gpu_name):
        """The OneFlow milliseconds threshold for this GPU, or None when the case has none."""
        if gpu_name in self.max_oneflow_ms:
            return self.max_oneflow_ms[gpu_name]
        return self.max_oneflow_ms.get(DEFAULT_GPU_KEY)


@dataclass
class BuildsSpec:
    """What each contender runs: "installed" (the environment's own), a wheel, folder, glob or requirement."""

    oneflow: str = setting("installed", read=_build)  # the build under test (the head)
    # The base build to judge the head against; none: no baseline.
    baseline_oneflow: str | None = setting(None, read=_build)
    pytorch: str = setting("installed", read=_build)  # torch and torchvision (and timm for the dataloader)
    flowvision: str = setting("installed", read=_build)  # into both OneFlow builds when not "installed"
    pip_args: str = setting("", read=_pip_args)  # extra pip arguments: "--extra-index-url URL"


BUILD_FIELDS = tuple(BuildsSpec.__dataclass_fields__)


@dataclass
class Suite:
    name: str = "custom"
    cases: list[CaseSpec] = field(default_factory=list)
    dataset: DatasetSpec = setting(factory=DatasetSpec, section=True)
    warmup: int = setting(5, minimum=0)
    rounds: int = setting(1, minimum=1)
    timeout_s: float = setting(1800.0, minimum=1)
    interleave: bool = True
    lock_timeout_s: float = setting(3600.0, minimum=0)
    # A case that needs more GPUs than the runner has (a DDP case's world_size): skipped, with a line after
    # the block, or the run exits 2 before the device lock, naming it.
    too_few_gpus: str = setting(TOO_FEW_GPUS_SKIP, choices=(TOO_FEW_GPUS_SKIP, TOO_FEW_GPUS_FAIL))
    show_memory: bool = False  # the comment adds each case's peak memory lines
    memory_sampling: bool = True  # the runner samples each worker's memory during its rounds (bench.memory)
    builds: BuildsSpec = field(default_factory=BuildsSpec)
    confirm: bool = True  # measure a flagged case again in fresh processes before alerting
    pause_idle: bool = True  # stop (SIGSTOP) the contenders not being timed during another's round
    # The head-vs-base rule: when a baseline build is measured, how many rounds, and what they must show.
    head_vs_base: SequentialRule = DEFAULT_RULE
    # The suite (or the profile it extends) names head_vs_base.process_sd, even at the default: a runner's
    # calibration does not replace it (speedstats.calibration.for_run).
    sets_process_sd: bool = field(default=False, init=False, compare=False)
    mode: str = setting(DEFAULT_MODE, choices=MODES)
    model: str = setting(OLD_BOT_MODEL, choices=MODELS)
    env: dict[str, str] = setting(factory=dict, read=_env)
    # When a round counts as disturbed, how often it is measured again, when rounds are unstable.
    disturbance: DisturbanceSpec = field(default_factory=DisturbanceSpec)
    # Profiled rounds of head and base after the timed ones (bench.sampler): for a case whose head is
    # slower than its base ("slower"), every case with a baseline ("always"), or none ("never").
    attribute: str = setting(ATTRIBUTE_SLOWER, choices=ATTRIBUTE_CHOICES)
    attribute_rounds: int = setting(10, minimum=3)  # profiled rounds of each build, at most
    # The profiled rounds' share of the case's wall time, at most (they stop before it would be passed).
    attribute_budget: float = setting(0.25, read=_budget_share)

    def case(self, case_id):
        for case in self.cases:
            if case.id == case_id:
                return case
        return None

    def needing_more_gpus(self, gpus):
        """[(case, why)] of the cases a runner with `gpus` GPUs cannot run: a DDP case's ranks take a GPU
        each."""
        return [(case, f"needs {case.world_size} GPUs, this runner has {gpus}")
                for case in self.cases if case.ddp and case.world_size > gpus]


def gpu_shortfall(lacking, gpus):
    """One text for the cases of Suite.needing_more_gpus: "a, b need 2 GPUs, this runner has 1"."""
    by_size = {}
    for case, _ in lacking:
        by_size.setdefault(case.world_size, []).append(case.id)
    parts = [f"{', '.join(ids)} need{'s' if len(ids) == 1 else ''} {size} GPUs"
             for size, ids in sorted(by_size.items())]
    return f"{'; '.join(parts)}, this runner has {gpus}"


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


def _profile_path(name, where):
    """The file of built-in profile `name`; a UserError naming `where` (the flag, or the file whose
    'extends' names it) for any other name, whose path is never looked at (it may be too long for one)."""
    profiles = builtin_profiles()
    if name not in profiles:
        close = close_match(name, profiles)
        hint = f"; did you mean {close}?" if close else ""
        raise UserError(f"{where}: unknown profile {shown(name)} (built-in: {', '.join(profiles)}{hint})")
    return suites_dir() / f"{name}.yml"


def merge(base, override, where, profile):
    """Deep-merge override into a copy of base (the profile named); the 'cases' list merges by id."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if key == "cases":
            out["cases"] = _merge_cases(out.get("cases") or [], value, where, profile)
        elif isinstance(value, dict) and isinstance(out.get(key), dict) and key != "max_oneflow_ms":
            out[key] = merge(out[key], value, where, profile)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _merge_cases(base_cases, override_cases, where, profile):
    if not isinstance(override_cases, list):
        raise UserError(f"{where}: field 'cases' must be a list")
    merged = [copy.deepcopy(c) for c in base_cases]
    index = {c.get("id"): i for i, c in enumerate(merged) if isinstance(c, dict)}
    for i, case in enumerate(override_cases):
        if not isinstance(case, dict) or not isinstance(case.get("id"), str):
            raise UserError(f"{where}: cases[{i}] must be a mapping with an 'id' string")
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
        elif "kind" not in case:  # neither a case of the profile nor a new one: a misspelt id
            hint = did_you_mean(case["id"], list(index)) or "; a new case needs its 'kind'"
            raise UserError(f"{where}: cases[{i}]: case {shown(case['id'])} is not in profile "
                            f"{shown(profile)}{hint}")
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


def _model(data, where, mode, default_model):
    """The model of a mapping whose mode is read: old-bot runs the shared one (and a mapping that switches
    to old-bot without naming a model gets it)."""
    model = read_value(data.get("model"), Suite.__dataclass_fields__["model"], where, "",
                       OLD_BOT_MODEL if mode == "old-bot" else default_model)
    if mode == "old-bot" and model != OLD_BOT_MODEL:
        raise UserError(f"{where}: field 'model': {model} needs 'mode: clean' (old-bot runs the shared "
                        "model)")
    return model


def _case(data, i, suite, where):
    """A case of the suite; the suite-wide settings are its defaults."""
    where = f"{where}: cases[{i}]"
    if not isinstance(data, dict):
        raise UserError(f"{where}: must be a mapping")
    case_id = data.get("id")
    if not isinstance(case_id, str) or not case_id:
        raise UserError(f"{where}: field 'id' must be a non-empty string")
    where = f"{where} ({one_line(case_id, 60)})"
    check_known(data, [*CaseSpec.__dataclass_fields__, "skip"], where)
    kind = data.get("kind")
    if kind not in KIND_NAMES:
        hint = did_you_mean(kind, KIND_NAMES) if isinstance(kind, str) else ""
        raise UserError(f"{where}: field 'kind' must be one of {', '.join(KIND_NAMES)}, got {shown(kind)}"
                        + hint)
    ddp = data.get("ddp", False)
    if not isinstance(ddp, bool):
        raise UserError(f"{where}: field 'ddp' must be true or false, got {shown(ddp)}")
    defaults = {name: getattr(suite, name) for name in SUITE_WIDE}
    defaults["world_size"] = DEFAULT_DDP_WORLD_SIZE if ddp else 1
    defaults.update(case_kind(kind).suite_defaults)
    values = read_settings(CaseSpec, data, where, defaults=defaults, skip=("model", "env"), ignore=("skip",))
    values["model"] = _model(data, where, values["mode"], suite.model)
    values["env"] = {**suite.env, **(_env(data["env"], where, "env") if data.get("env") is not None else {})}
    case = CaseSpec(**values)
    if case.ddp and not case_kind(case.kind).ddp:
        raise UserError(f"{where}: a {case.kind} case cannot be ddp")
    if not case.ddp and case.world_size != 1:
        raise UserError(f"{where}: field 'world_size' needs 'ddp: true'")
    return case


def suite_from_dict(data, where):
    """The Suite of a mapping (a profile, or a user file merged onto the profile it extends)."""
    suite = Suite(**read_settings(Suite, data, where, skip=("cases", "model"), ignore=("extends",)))
    suite.model = _model(data, where, suite.mode, Suite.model)
    rule_data = data.get("head_vs_base")
    suite.sets_process_sd = isinstance(rule_data, dict) and "process_sd" in rule_data
    cases_data = data.get("cases")
    if not isinstance(cases_data, list) or not cases_data:
        raise UserError(f"{where}: field 'cases' must be a non-empty list")
    kept = [(i, c) for i, c in enumerate(cases_data)
            if not (isinstance(c, dict) and _skip(c, f"{where}: cases[{i}]"))]
    if not kept:
        raise UserError(f"{where}: every case has 'skip: true'; nothing to run")
    suite.cases = [_case(c, i, suite, where) for i, c in kept]
    seen = set()
    for case in suite.cases:
        if case.id in seen:
            raise UserError(f"{where}: case id {shown(case.id)} appears twice")
        seen.add(case.id)
    return suite


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
    return suite_from_dict(*suite_data(path, profile))


def suite_data(path=None, profile=None):
    """(the mapping the suite is read from, where it comes from for error messages): a built-in profile,
    or a user file merged onto the profile it extends."""
    if path is None:
        name = profile or DEFAULT_PROFILE
        return _read_yaml(_profile_path(name, "--profile")), f"{name}.yml"
    data = _read_yaml(path)
    extends = data.pop("extends", None)
    base_name = extends or profile
    if base_name is not None:
        if not isinstance(base_name, str):
            raise UserError(f"{path}: field 'extends' must be a profile name")
        base = _read_yaml(_profile_path(base_name, path if extends else "--profile"))
        data = merge(base, data, str(path), base_name)
        data.setdefault("name", base_name)
    return data, str(path)
