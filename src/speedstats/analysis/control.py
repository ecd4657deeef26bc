"""PyTorch's rounds as the control: the same build all along, so a change between the first and the
second half of its rounds, within each pair of head and base processes' stretch, says that the
machine moved during the job (the paired ratios still hold).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Sequence

from speedstats.analysis import stats

STEADY = "steady"
UNSTEADY = "unsteady"


@dataclass
class Control:
    """PyTorch's first half of rounds against its last half: did the machine move during the run?"""

    first: float | None = None  # median per-iteration seconds of the first half
    last: float | None = None  # the first half's times the ratio
    ratio: float | None = None  # exp of Yuen's difference of the halves' trimmed log means
    low: float | None = None
    high: float | None = None
    # False when the machine's speed moved beyond what the rounds' scatter explains (the interval at
    # CONTROL_CONFIDENCE excludes no change) and by more than half the band; None: too few rounds.
    steady: bool | None = None
    confidence: float = stats.DEFAULT_CONFIDENCE

    @property
    def text(self):
        if self.steady is None:
            return "too few rounds to tell"
        return STEADY if self.steady else UNSTEADY

    def to_dict(self):
        return dict(asdict(self), text=self.text)


# The confidence at which the control's halves must differ before its row says "unsteady". Higher
# than a look's: the row is a warning judged in every case of every comment (a default comment has
# five), and a quiet CPU's speed wanders in stretches that rounds in a row share, so that its rounds'
# scatter understates how far the halves' means move (docs/measurements.md).
CONTROL_CONFIDENCE = 0.99


def _halves_within_stretches(logs, stages):
    """The first and the last half of each stretch of rounds that one pair of head and base processes
    shared (stages: rounds per pair, in order; the control's rounds are the first ones of them), each
    less its stretch's mean, pooled: the move within the stretches, without the steps between them."""
    first, last, start = [], [], 0
    for count in stages:
        stretch = logs[start:start + count]
        start += count
        half = len(stretch) // 2
        if half:
            mean = sum(stretch) / len(stretch)
            first += [x - mean for x in stretch[:half]]
            last += [x - mean for x in stretch[len(stretch) - half:]]
    return first, last


def control_drift(rounds: Sequence[float], min_effect: float = stats.DEFAULT_MIN_EFFECT,
                  confidence: float = stats.DEFAULT_CONFIDENCE, trim: float = stats.DEFAULT_TRIM,
                  judge_confidence: float = CONTROL_CONFIDENCE, stages: Sequence[int] = ()) -> Control:
    """How PyTorch's time moved from the first half of its rounds to the second (the middle round of an
    odd count is in neither), with its interval at `confidence` (as the comment shows it): unsteady
    when the interval at judge_confidence excludes no change and the change is more than half the band,
    steady otherwise. A handful of rounds scattering as a CPU's do cannot fit an interval inside the
    band, so asking for that would make "steady" a word never said.

    stages: the head's and the base's rounds per pair of processes. With more than one pair among the
    control's rounds, the move is measured within each pair's stretch of rounds and pooled: PyTorch's
    speed can step where one pair of OneFlow processes gives way to the next (on the CPU by -47% to
    +39%), a change the run itself makes and that the paired ratios, each within one pair,
    never see (docs/measurements.md)."""
    rounds = [float(x) for x in rounds]
    half = len(rounds) // 2
    out = Control(confidence=confidence)
    if half == 0:
        return out
    first, second = rounds[:half], rounds[len(rounds) - half:]
    out.first = stats.median(first)
    logs = [math.log(x) for x in rounds]
    stretches = [count for count in _stretches(stages, len(rounds)) if count]
    if len(stretches) > 1:
        first_logs, last_logs = _halves_within_stretches(logs, stretches)
    else:
        first_logs, last_logs = logs[:half], logs[len(logs) - half:]
    if min(len(first_logs), len(last_logs)) < stats.MIN_ROUNDS_FOR_INTERVAL:
        out.ratio = stats.median(second) / out.first
        out.last = out.first * out.ratio
        return out
    difference = stats.trimmed_difference(first_logs, last_logs, trim)
    low, high = difference.interval(confidence)
    out.ratio, out.low, out.high = math.exp(difference.mean), math.exp(low), math.exp(high)
    out.last = out.first * out.ratio
    judged_low, judged_high = (math.exp(x) for x in difference.interval(max(confidence, judge_confidence)))
    moved = (judged_low > 1 or judged_high < 1) and abs(out.ratio - 1) > min_effect / 2
    out.steady = not moved
    return out


def _stretches(stages, total):
    """The stages cut to the first `total` rounds."""
    out, left = [], total
    for count in stages or ():
        out.append(min(count, left))
        left -= out[-1]
    return out

