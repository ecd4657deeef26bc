"""Where the head spends more time than its base: the places of the profiled rounds, judged per place.

Each profiled round of a build gives, per place (`module:function`), its self time and its total time
per step (bench.sampler: sampled wall time, divided by the round's steps). Head round k and base round k
were measured back to back, as the timed rounds are, so per place the statistic is the head minus the
base of each pair of rounds: its trimmed mean, with Yuen's t interval as the verdict's. There are many
places, so each interval is at 1 - (1 - confidence) / m for m places compared (Bonferroni): the chance
that an unchanged build shows any significant place is at most 1 - confidence. A place is significant
when its interval excludes zero. Places are ranked by the change of their self time, largest increase
first, the significant increases before all the others; their total time is kept beside. The share
explained is the sum of the significant places' self-time changes over the change of the whole step.

On CUDA the same rounds also give each op's own device time per step (bench.opprofile, the
framework's profiler), judged the same way as a second list, `ops`: the correction counts the places
and the ops together, so the bound holds for both lists at once.

On any device the same rounds also count the ops each place dispatches (bench.opcount): a count is the
same in every step of a build, so it is compared as it is, with no interval, per step and per call of
the place (`dispatches`): the place whose ops changed, where the sampled time shows only more waiting for
the framework's queue.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field
from typing import Sequence

from speedstats.analysis import stats
from speedstats.settings import setting

MIN_ROUNDS = 3
# The worker's own places where the main thread only waits for the framework's queued work (OneFlow runs
# eager ops asynchronously, on the CPU too): a kernel that got slower shows here, not in speedstats' code.
QUEUE_WAITS = {"speedstats.bench.worker:sync": "waiting for queued kernels at the step's end",
               "speedstats.bench.worker:host_sync": "waiting for queued kernels to copy the loss to the host"}
OP_DEVICES = ("cuda", "cpu")  # where an op profiler measures the ops' own time


@dataclass
class ProfiledRound:
    """One profiled round of one build: seconds per place over `steps` steps, and the round's time."""

    steps: int
    total_s: float  # the round's wall time, as a timed round's
    self_s: dict[str, float] = field(default_factory=dict)
    place_total_s: dict[str, float] = field(default_factory=dict)
    op_self_s: dict[str, float] = field(default_factory=dict)  # per op, its own device time
    op_total_s: dict[str, float] = field(default_factory=dict)
    op_device: str | None = None  # where the ops' time was measured; None: ops not profiled
    op_reason: str | None = None  # why the ops were not profiled, where they were wanted
    op_counts: dict[str, dict[str, int]] = field(default_factory=dict)  # per place, its ops dispatched
    place_calls: dict[str, int] = field(default_factory=dict)  # per place that dispatched an op, its calls
    place_callers: dict[str, dict[str, int]] = field(default_factory=dict)  # and its calls by caller
    count_steps: int = 0  # the steps the dispatched ops were counted over; 0: not counted

    @classmethod
    def from_report(cls, report):
        """From a worker's round report (round-K.json with its `profile`)."""
        profile = report["profile"]
        return cls(steps=int(profile["steps"]), total_s=float(report["total_s"]),
                   self_s=dict(profile["self_s"]), place_total_s=dict(profile["total_s"]),
                   op_self_s=dict(profile.get("op_self_s") or {}),
                   op_total_s=dict(profile.get("op_total_s") or {}),
                   op_device=profile.get("op_device"), op_reason=profile.get("op_reason"),
                   op_counts={place: dict(ops) for place, ops in (profile.get("op_counts") or {}).items()},
                   place_calls=dict(profile.get("place_calls") or {}),
                   place_callers={place: dict(by)
                                  for place, by in (profile.get("place_callers") or {}).items()},
                   count_steps=int(profile.get("count_steps") or 0))

    def self_ms(self, place):
        return self.self_s.get(place, 0.0) * 1000 / self.steps

    def total_ms(self, place):
        return self.place_total_s.get(place, 0.0) * 1000 / self.steps

    def op_self_ms(self, op):
        return self.op_self_s.get(op, 0.0) * 1000 / self.steps

    def op_total_ms(self, op):
        return self.op_total_s.get(op, 0.0) * 1000 / self.steps

    @property
    def step_ms(self):
        return self.total_s * 1000 / self.steps


MAX_MS = 1e10  # milliseconds per step: a place or a step slower than about four months is not measured


def _ms(default=dataclasses.MISSING, minimum=-MAX_MS):
    return setting(default, minimum=minimum, maximum=MAX_MS)


@dataclass
class PlaceChange:
    """One place, head against base: self milliseconds per step, their change and its interval."""

    OPEN_RECORD = True
    place: str = setting()
    base_ms: float = _ms()
    head_ms: float = _ms()
    change_ms: float = _ms()
    low_ms: float = _ms()
    high_ms: float = _ms()
    significant: bool = setting()
    base_total_ms: float = _ms()
    head_total_ms: float = _ms()


MAX_COUNT = 1e12  # ops or calls per step


def _count(default=dataclasses.MISSING, minimum=-MAX_COUNT):
    return setting(default, minimum=minimum, maximum=MAX_COUNT)


@dataclass
class DispatchChange:
    """One op of one place, head against base: how many the place dispatches per step and per call."""

    OPEN_RECORD = True
    place: str = setting()
    op: str = setting()
    base_per_step: float = _count(minimum=0)
    head_per_step: float = _count(minimum=0)
    change_per_step: float = _count()
    base_calls: float = _count(minimum=0)  # the place's calls per step
    head_calls: float = _count(minimum=0)
    # per call of the place, where it is called in both builds as often; None where its calls changed
    change_per_call: float | None = _count(None)
    # where its calls changed: the place whose calls of it changed the most that way, and by how many a step
    caller: str | None = setting(None)
    caller_change: float | None = _count(None)


@dataclass
class Attribution:
    """results.json's `attribution` of a case."""

    rounds: int = setting(0, minimum=0)  # profiled rounds of each build
    places_compared: int = setting(0, minimum=0)
    # of all the places' intervals together
    confidence: float = setting(stats.DEFAULT_CONFIDENCE, above=0, maximum=1, required=True)
    base_step_ms: float | None = _ms(None)
    head_step_ms: float | None = _ms(None)
    step_change_ms: float | None = _ms(None)
    explained: float | None = setting(None, minimum=-MAX_MS, maximum=MAX_MS)  # the significant places' share
    # every place compared, by change
    places: list[PlaceChange] = setting(factory=list, record=PlaceChange)
    profiler: str = setting("")
    reason: str | None = setting(None)  # why there is no comparison
    profiled_s: float | None = setting(None, minimum=0, maximum=1e7)  # the profiled rounds' wall time
    case_s: float | None = setting(None, minimum=0, maximum=1e7)  # the case's wall time before them
    # On CUDA: each op's own device time per step, head against base (`place` is the op), by change.
    ops: list[PlaceChange] = setting(factory=list, record=PlaceChange)
    ops_compared: int = setting(0, minimum=0)
    ops_device: str | None = setting(None, choices=OP_DEVICES)
    ops_profiler: str = setting("")
    ops_reason: str | None = setting(None)  # why there is no comparison of ops, where one was wanted
    # On any device: the ops each place dispatches per step, head against base, where they differ, by change.
    dispatches: list[DispatchChange] = setting(factory=list, record=DispatchChange)
    dispatch_rounds: int = setting(0, minimum=0)  # profiled rounds of each build whose ops were counted
    dispatch_counter: str = setting("")

    def check(self, where):
        """A comparison (places or ops) comes with the step it is a share of."""
        if self.places or self.ops:
            for key in ("base_step_ms", "head_step_ms", "step_change_ms"):
                if getattr(self, key) is None:
                    raise ValueError(f"missing field '{key}' (required with places or ops)")

    @property
    def significant(self):
        """The significant places where the head spends more time, largest change first."""
        return [p for p in self.places if p.significant and p.change_ms > 0]

    @property
    def significant_ops(self):
        """The significant ops where the head's device spends more time, largest change first."""
        return [p for p in self.ops if p.significant and p.change_ms > 0]

    def to_dict(self):
        return asdict(self)

    @classmethod
    def from_dict(cls, data, where="attribution"):
        """From results.json, read as its declaration says (speedstats.settings): a UserError names the
        field that is wrong."""
        from speedstats.settings import read_record

        return read_record(cls, data, where)


def _paired(head, base, trim):
    return stats.trimmed_mean([h - b for h, b in zip(head, base)], trim)


def _center(values, trim):
    return stats.trimmed_mean(values, trim).mean if len(values) >= 2 else values[0]


def _compare(names, head, base, self_ms, total_ms, per_place, trim):
    """Per name, head minus base over pairs of rounds, ranked: significant increases first (a place
    whose time scatters widely, such as a wait at a sync on a busy machine, can have a larger mean
    change than the one that really slowed, with an interval that takes in zero), then by change."""
    changes = []
    for name in names:
        head_ms, base_ms = [self_ms(r, name) for r in head], [self_ms(r, name) for r in base]
        change = _paired(head_ms, base_ms, trim)
        low, high = change.interval(per_place)
        changes.append(PlaceChange(
            place=name, base_ms=_center(base_ms, trim), head_ms=_center(head_ms, trim),
            change_ms=change.mean, low_ms=low, high_ms=high, significant=low > 0 or high < 0,
            base_total_ms=_center([total_ms(r, name) for r in base], trim),
            head_total_ms=_center([total_ms(r, name) for r in head], trim)))
    changes.sort(key=lambda p: (not (p.significant and p.change_ms > 0), -p.change_ms, p.place))
    return changes


MIN_DISPATCH_CHANGE = 0.5  # ops per step: a change of fewer (one every other step) is not said


def _per_step(rounds):
    """{(place, op): dispatches per step}, {place: calls per step} and {(place, caller): calls per step}
    over the rounds that counted."""
    steps = sum(r.count_steps for r in rounds)
    counts, calls, callers = {}, {}, {}
    for r in rounds:
        for place, ops in r.op_counts.items():
            for op, n in ops.items():
                counts[place, op] = counts.get((place, op), 0) + n
        for place, n in r.place_calls.items():
            calls[place] = calls.get(place, 0) + n
        for place, by in r.place_callers.items():
            for caller, n in by.items():
                callers[place, caller] = callers.get((place, caller), 0) + n
    return tuple({key: n / steps for key, n in table.items()} for table in (counts, calls, callers))


def _caller(place, more, head_callers, base_callers):
    """(the caller whose calls of `place` per step changed the most in the direction `more` (> 0: more),
    that change), or (None, None)."""
    changes = [(head_callers.get((p, c), 0.0) - base_callers.get((p, c), 0.0), c)
               for p, c in set(head_callers) | set(base_callers) if p == place]
    changes = [(change, caller) for change, caller in changes if change * more > 0]
    if not changes:
        return None, None
    change, caller = max(changes, key=lambda item: (abs(item[0]), item[1]))
    return caller, change


def compare_dispatches(head: Sequence[ProfiledRound], base: Sequence[ProfiledRound]):
    """The ops whose count per step differs between the builds by MIN_DISPATCH_CHANGE or more, the
    largest change (either way) first, over the rounds of each build that counted them; [] where a
    build's rounds counted none."""
    head, base = [r for r in head if r.count_steps], [r for r in base if r.count_steps]
    if not head or not base:
        return []
    head_ops, head_calls, head_callers = _per_step(head)
    base_ops, base_calls, base_callers = _per_step(base)
    changes = []
    for place, op in sorted(set(head_ops) | set(base_ops)):
        h, b = head_ops.get((place, op), 0.0), base_ops.get((place, op), 0.0)
        if abs(h - b) < MIN_DISPATCH_CHANGE:
            continue
        hc, bc = head_calls.get(place, 0.0), base_calls.get(place, 0.0)
        same_calls = hc > 0 and abs(hc - bc) < 1e-9
        caller, caller_change = (None, None) if same_calls else _caller(place, hc - bc, head_callers,
                                                                         base_callers)
        changes.append(DispatchChange(place=place, op=op, base_per_step=b, head_per_step=h,
                                      change_per_step=h - b, base_calls=bc, head_calls=hc,
                                      change_per_call=(h - b) / hc if same_calls else None,
                                      caller=caller, caller_change=caller_change))
    changes.sort(key=lambda c: (-abs(c.change_per_step), -c.change_per_step, c.place, c.op))
    return changes


def attribute(head: Sequence[ProfiledRound], base: Sequence[ProfiledRound],
              confidence: float = stats.DEFAULT_CONFIDENCE, trim: float = stats.DEFAULT_TRIM,
              profiler: str = "", ops_profiler: str = "", dispatch_counter: str = "") -> Attribution:
    """Head against base, place by place (and op by op where both were profiled), over pairs of
    profiled rounds (head[k] with base[k])."""
    n = min(len(head), len(base))
    head, base = list(head)[:n], list(base)[:n]
    out = Attribution(rounds=n, confidence=confidence, profiler=profiler)
    counted = min(sum(1 for r in head if r.count_steps), sum(1 for r in base if r.count_steps))
    if counted:
        out.dispatch_rounds, out.dispatch_counter = counted, dispatch_counter
        out.dispatches = compare_dispatches(head, base)
    if n < MIN_ROUNDS:
        out.reason = f"{n} profiled rounds, at least {MIN_ROUNDS} are needed"
        return out
    places = sorted({p for r in head + base for p, s in r.self_s.items() if s > 0})
    with_ops = all(r.op_device for r in head + base)
    ops = sorted({o for r in head + base for o, s in r.op_self_s.items() if s > 0}) if with_ops else []
    if with_ops:
        out.ops_device, out.ops_profiler = head[0].op_device, ops_profiler
    else:
        out.ops_reason = next((r.op_reason for r in head + base if r.op_reason), None)
    out.places_compared = len(places)
    out.ops_compared = len(ops)
    per_place = 1 - (1 - confidence) / max(1, len(places) + len(ops))
    step = _paired([r.step_ms for r in head], [r.step_ms for r in base], trim)
    out.base_step_ms = _center([r.step_ms for r in base], trim)
    out.head_step_ms = _center([r.step_ms for r in head], trim)
    out.step_change_ms = step.mean
    out.places = _compare(places, head, base, ProfiledRound.self_ms, ProfiledRound.total_ms, per_place,
                          trim)
    out.ops = _compare(ops, head, base, ProfiledRound.op_self_ms, ProfiledRound.op_total_ms, per_place,
                       trim)
    if out.step_change_ms and out.step_change_ms > 0:
        out.explained = sum(p.change_ms for p in out.places if p.significant) / out.step_change_ms
    return out
