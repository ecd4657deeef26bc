"""A runner's calibration: what `speedstats calibrate` found of its noise, kept in the build cache.

One JSON file per GPU (or CPU) name, `<cache>/calibration/<name>.json`, schema
speedstats/calibration/v1: for each case of the suite it was measured on, the round-to-round and
process-to-process sds of log(head/base) in an A/A run, how many pairs and rounds they rest on, what a
round and a pair's start cost, the smallest slowdown the suite's rule resolves there and the cheapest
rule found for the target (analysis.calibration). The cache lives on the runner, so the file is that
runner's; it records the runner's name ($RUNNER_NAME) too, and a runner of another name sharing the
cache does not use it.

`speedstats run` reads it (`for_run`): a case it holds gets its process_sd as the rule's prior, unless
the suite names one (at any value) or --no-calibration is given; results.json's `calibration` says
which file was used and which cases took what.
"""

from __future__ import annotations

import datetime
import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from speedstats.analysis.rule import MAX_PROCESS_PAIRS, runner_process_sd
from speedstats.errors import UserError
from speedstats.results import CalibrationUsed
from speedstats.settings import read_record, setting

SCHEMA = "speedstats/calibration/v1"
FOLDER = "calibration"
MAX_FILE_BYTES = 1 << 20
SD = {"minimum": 0, "maximum": 10}  # an sd of log ratios; 10 would be a factor of e^10 between rounds
SECONDS = {"minimum": 0, "maximum": 1e7}


@dataclass
class CaseCalibration:
    """One case's noise on this runner, and what the rule can tell in it."""

    OPEN_RECORD = True
    id: str = setting()
    pairs: int = setting(0, minimum=0, maximum=MAX_PROCESS_PAIRS)
    rounds: int = setting(0, minimum=0)
    round_sd: float | None = setting(None, **SD)
    round_sd_low: float | None = setting(None, **SD)
    round_sd_high: float | None = setting(None, **SD)
    process_sd: float | None = setting(None, **SD)
    process_sd_low: float | None = setting(None, **SD)
    process_sd_high: float | None = setting(None, **SD)
    round_s: float | None = setting(None, **SECONDS)  # a round of the head and the base together
    pair_start_s: float | None = setting(None, **SECONDS)  # a fresh pair of processes' start
    # The smallest slowdown the suite's rule (with process_sd as its prior) calls a regression in `power`
    # of the simulated runs, and their wall time; None: not even a head twice as slow.
    resolves: float | None = setting(None, minimum=0)
    resolves_wall_s: float | None = setting(None, **SECONDS)
    no_change_wall_s: float | None = setting(None, **SECONDS)
    # The cheapest rule found that resolves the target: its fields, `share` and `wall_s`; None: none.
    target_rule: dict | None = setting(None)
    error: str | None = setting(None)  # the case gave no figures: why
    measured_at: str | None = setting(None)  # when (a file's cases may come from several calibrations)

    @property
    def prior(self):
        """The process sd `run` uses as the rule's prior, None without one: the measured one pooled with
        the default by the pairs it rests on (analysis.rule.runner_process_sd)."""
        return None if self.process_sd is None else runner_process_sd(self.process_sd, self.pairs)


@dataclass
class Calibration:
    """A runner's calibration (the module's docstring)."""

    OPEN_RECORD = True
    device: str = setting()
    gpu_name: str = setting()
    measured_at: str = setting()
    suite: str = setting()
    runner: str | None = setting(None)
    build: str | None = setting(None)  # the OneFlow version measured against itself
    pairs: int = setting(6, minimum=2, maximum=MAX_PROCESS_PAIRS)  # asked for, per case
    pair_rounds: int = setting(5, minimum=1)
    target: float = setting(0.05, minimum=0, maximum=1)
    power: float = setting(0.95, minimum=0, maximum=1)
    trials: int = setting(200, minimum=1)
    rule: dict = setting(factory=dict)  # the suite's rule, SequentialRule.to_dict()
    cases: list[CaseCalibration] = setting(factory=list, record=CaseCalibration)
    schema: str = setting(SCHEMA, choices=(SCHEMA,))

    def case(self, case_id):
        return next((c for c in self.cases if c.id == case_id), None)

    def to_json(self):
        return json.dumps(asdict(self), indent=2, ensure_ascii=False) + "\n"

    def age_s(self, now=None):
        """Seconds since it was measured (None when measured_at is not a time)."""
        try:
            at = datetime.datetime.fromisoformat(self.measured_at.replace("Z", "+00:00"))
        except ValueError:
            return None
        if at.tzinfo is None:
            at = at.replace(tzinfo=datetime.timezone.utc)
        now = now or datetime.datetime.now(datetime.timezone.utc)
        return max(0.0, (now - at).total_seconds())


def runner_name():
    """This runner's name as GitHub Actions gives it, None outside a job."""
    return os.environ.get("RUNNER_NAME") or None


def file_name(gpu_name):
    """The calibration file of a GPU (or CPU) name: letters, digits, '.', '_' and '-' kept."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", str(gpu_name)).strip("._-")[:100] or "unknown"
    return f"{slug}.json"


def calibration_path(cache, gpu_name):
    return Path(cache) / FOLDER / file_name(gpu_name)


def read_calibration(path):
    """The Calibration in path; None when there is none; UserError naming the file and the field when
    it cannot be read."""
    from speedstats.fsutil import read_text

    path = Path(path)
    if not path.exists():
        return None
    text = read_text(path, "calibration file", limit=MAX_FILE_BYTES)
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UserError(f"{path}: not JSON: {exc}") from None
    return read_record(Calibration, data, str(path))


def write_calibration(path, calibration):
    from speedstats.fsutil import ensure_dir, write_atomic

    ensure_dir(Path(path).parent, "calibration folder")
    write_atomic(path, calibration.to_json(), "calibration file")


def merged(calibration, earlier, here=None):
    """The calibration with the cases of an earlier one (of this runner) that it did not measure, or
    measured without figures: `calibrate --case` adds to the file rather than replacing it."""
    if earlier is None or (earlier.runner or None) != (here or None):
        return calibration
    fresh = {case.id for case in calibration.cases if not case.error}
    kept = [case for case in earlier.cases if case.id not in fresh and not case.error]
    ids = {case.id for case in kept}
    calibration.cases = [c for c in calibration.cases if c.id not in ids] + kept
    return calibration


def age_text(seconds):
    """3 days, 5 hours, 12 minutes."""
    if seconds is None:
        return "of unknown age"
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''} old"
    return "less than a minute old"


def for_run(cache, gpu_name, suite):
    """The calibration `run` uses for its rule: ({case id: process_sd}, CalibrationUsed, note), or
    ({}, None, note) when none applies; note says why (None when there is simply no file). A suite that
    names head_vs_base.process_sd keeps it, whatever its value. A file that cannot be read is a
    note, not an error: the run goes on without it."""
    path = calibration_path(cache, gpu_name)
    if suite.sets_process_sd:
        return {}, None, None
    try:
        calibration = read_calibration(path)
    except UserError as exc:
        return {}, None, f"calibration not used: {exc}"
    if calibration is None:
        return {}, None, None
    here = runner_name()
    if calibration.runner and here and calibration.runner != here:
        return {}, None, (f"calibration not used: {path.name} is runner {calibration.runner!r}'s, this is "
                          f"{here!r}")
    found = [calibration.case(case.id) for case in suite.cases]
    priors = {case.id: case.prior for case in found if case is not None and case.prior is not None}
    if not priors:
        return {}, None, f"calibration not used: {path.name} holds none of the suite's cases"
    used = asdict(CalibrationUsed(file=path.name, measured_at=calibration.measured_at,
                                  runner=calibration.runner, process_sd=priors))
    age = age_text(calibration.age_s())
    note = (f"calibration {path.name} ({age}): the rule's process_sd of "
            + ", ".join(f"{case} {sd:.1%}" for case, sd in priors.items()))
    return priors, used, note
