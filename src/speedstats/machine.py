"""When the machine counts as disturbed: plain data, no /proc, no NVML.

speedstats.bench.machine_state records the state of the machine around every timed round (see its
docstring for the fields); this module judges a round's state against the suite's `disturbance:`
settings, sums up what stayed disturbed in a case, and finds contenders whose rounds scatter too much.
What the comment says about it is rendered by speedstats.render (machine_notes_context).

Defaults, each one a field of the suite's `disturbance:` mapping:

    max_other_cores: 0.25        processes outside the run used more than a quarter of a core
    min_sm_clock_ratio: 0.75     a GPU's SM clock, at the end of the round, under 75% of its maximum
    allowed_clock_events: [gpu_idle, applications_clocks]
                                 any other clocks-event (throttle) reason of NVML disturbs
    foreign_gpu_processes: true  a compute process on a GPU of the run that is not the run's own
    remeasure_rounds: 2          a disturbed round is measured again, at most this many extra rounds
                                 per contender and measurement
    retry_wait_s: 1              pause before measuring a disturbed round again
    quiet_wait_s: 600            on CUDA, wait this long at most (and never past the lock timeout)
                                 before the first case for the GPUs to be quiet
    max_cv: 0.10                 on a GPU, a contender whose rounds have a larger coefficient of
                                 variation is said to be unstable (as pyperf warns)
    max_cv_cpu: 0.30             the same on the CPU, where rounds of one case scatter 10-25% on a
                                 quiet machine: a mark that is always on warns of nothing
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from speedstats.settings import setting

# NVML's clocks-event reason bits (nvmlClocksEventReason*), by the names the suite and results use.
CLOCK_EVENTS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
    0x100: "display_clocks",
}
CLOCK_EVENT_TEXT = {
    "gpu_idle": "idle",
    "applications_clocks": "applications clocks setting",
    "sw_power_cap": "software power cap",
    "hw_slowdown": "hardware slowdown",
    "sync_boost": "sync boost",
    "sw_thermal": "software thermal slowdown",
    "hw_thermal": "hardware thermal slowdown",
    "hw_power_brake": "power brake",
    "display_clocks": "display clock setting",
}


@dataclass
class DisturbanceSpec:
    """The suite's `disturbance:` mapping (see the module's docstring)."""

    max_other_cores: float = setting(0.25, minimum=0)
    min_sm_clock_ratio: float = setting(0.75, minimum=0)
    allowed_clock_events: list[str] = setting(factory=lambda: ["gpu_idle", "applications_clocks"],
                                              choices=tuple(CLOCK_EVENTS.values()))
    foreign_gpu_processes: bool = True
    remeasure_rounds: int = setting(2, minimum=0)
    retry_wait_s: float = setting(1.0, minimum=0)
    quiet_wait_s: float = setting(600.0, minimum=0)
    max_cv: float = setting(0.10, minimum=0)
    max_cv_cpu: float = setting(0.30, minimum=0)

    def cv_limit(self, device):
        """The coefficient of variation above which a contender's figures are unstable on this device."""
        return self.max_cv_cpu if str(device).split(":")[0] == "cpu" else self.max_cv


def clock_event_names(mask):
    """The names of the reason bits set in an NVML clocks-event mask, in bit order."""
    return [name for bit, name in CLOCK_EVENTS.items() if mask & bit]


def round_disturbance(state, spec):
    """What disturbed one round, from its recorded state: a list of {"kind", "text", ...}; empty: quiet."""
    found = []
    cpu = state.get("cpu") or {}
    other = cpu.get("other_cores")
    if other is not None and other > spec.max_other_cores:
        found.append(
            {
                "kind": "cpu",
                "other_cores": other,
                "cores": cpu.get("cores"),
                "text": f"other processes used {other:.1f} of {cpu.get('cores')} cores",
            }
        )
    for gpu in state.get("gpus") or []:
        name = f"GPU {gpu.get('index')}"
        events = [e for e in gpu.get("clock_events") or [] if e not in spec.allowed_clock_events]
        if events:
            found.append(
                {
                    "kind": "clocks",
                    "text": f"{name} throttled ("
                    + ", ".join(CLOCK_EVENT_TEXT.get(e, e) for e in events)
                    + ")",
                }
            )
        clock, top = gpu.get("sm_clock_mhz"), gpu.get("sm_clock_max_mhz")
        if clock is not None and top and clock < spec.min_sm_clock_ratio * top:
            found.append({"kind": "sm_clock", "text": f"{name} SM clock at {clock} of {top} MHz"})
        foreign = gpu.get("foreign_processes") or []
        if spec.foreign_gpu_processes and foreign:
            pids = ", ".join(str(p.get("pid")) for p in foreign)
            found.append({"kind": "gpu_process", "text": f"another compute process on {name} (pid {pids})"})
    return found


def case_disturbance(round_states, labels):
    """What stayed disturbed in a case: {"contenders": {role: [texts]}, "text": one sentence}, or None.

    round_states maps a contender to the recorded states of the rounds its figures are made of, each
    with its "disturbed" list (see round_disturbance); labels maps a contender to its name in the text.
    The CPU figure named is the largest of the contender's disturbed rounds.
    """
    contenders = {}
    for role, states in round_states.items():
        cpu, texts = None, []
        for state in states:
            for item in (state or {}).get("disturbed") or []:
                if item["kind"] == "cpu":
                    if cpu is None or item["other_cores"] > cpu["other_cores"]:
                        cpu = item
                elif item["text"] not in texts:
                    texts.append(item["text"])
        if cpu is not None:
            texts.insert(0, cpu["text"])
        if texts:
            contenders[role] = texts
    if not contenders:
        return None
    parts = [
        f"{' and '.join(texts)} during {labels.get(role, role)}'s rounds"
        for role, texts in contenders.items()
    ]
    return {"contenders": contenders, "text": ", ".join(parts)}


def coefficient_of_variation(values):
    """Sample standard deviation over mean, or None for fewer than two values."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if mean > 0 else None


def unstable_contenders(frameworks, max_cv):
    """[(role, cv)] of the contenders whose rounds scatter beyond max_cv, in the frameworks' order."""
    found = []
    for role, fw in frameworks.items():
        if fw.error is None:
            cv = coefficient_of_variation(fw.rounds_s)
            if cv is not None and cv > max_cv:
                found.append((role, cv))
    return found
