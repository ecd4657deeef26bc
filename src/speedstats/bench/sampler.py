"""Where a thread's Python stack spends its time: a sampling profiler that runs inside the process.

A daemon thread wakes every `interval_s` (1 ms), reads the watched thread's innermost frame with
sys._current_frames() and walks its stack: no ptrace and no other binary, so it works in a container
without extra capabilities. A place is `module:function` (the module from the frame's globals).

Each sample is weighted by the time since the previous one, not counted as 1: the sampler can only read
the stack once it holds the GIL, and a C++ call that holds it (an op, a sync) delays the sample until
it returns to the Python frame that made it, which then gets the time it took. So a place's time is
wall time, and the places of a round add up to the round's time.

- self: the place of the innermost frame (its own Python, and the C calls it makes directly);
- total: every place on the stack, counted once per sample however often it recurs.

The watched thread's frames are all kept, the worker's own included: its outer frames have total time
but no self time, and the step loop's self time is what the step's direct calls into C take.
"""

from __future__ import annotations

import sys
import threading
import time

from speedstats.bench.instruments import Instrument

DEFAULT_INTERVAL_S = 0.001
# Instruments whose frames run inside the watched thread's calls (bench.opcount's dispatch counter): a
# sample passes over them, so their time goes to the place that called into them.
PASSED_OVER = frozenset({"speedstats.bench.opcount"})


def place_of(frame):
    """`module:function` of a frame; a module run as a program (`python -m`) by its own name."""
    module = frame.f_globals.get("__name__") or "?"
    if module == "__main__":
        spec = frame.f_globals.get("__spec__")
        module = getattr(spec, "name", None) or module
    return f"{module}:{frame.f_code.co_name}"


class StackSampler:
    """Samples `thread_id`'s stack (default: the thread that makes the sampler) while started."""

    def __init__(self, interval_s=DEFAULT_INTERVAL_S, thread_id=None):
        self.interval_s = interval_s
        self.thread_id = thread_id if thread_id is not None else threading.get_ident()
        self.self_s: dict[str, float] = {}
        self.total_s: dict[str, float] = {}
        self.samples = 0
        self.elapsed_s = 0.0
        self._stop = threading.Event()
        self._thread = None
        self._started = None

    def start(self):
        self._stop.clear()
        self._started = time.perf_counter()
        self._thread = threading.Thread(target=self._run, name="speedstats-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        """Stop sampling; the figures are then those of the whole time it ran."""
        self._stop.set()
        self._thread.join()
        self.elapsed_s = time.perf_counter() - self._started
        return self

    def _run(self):
        last = self._started
        while not self._stop.wait(self.interval_s):
            last = self._sample(last)

    def _sample(self, last):
        """One sample, weighted by the time since `last`; returns its time. The watched thread's frames
        are held only while this runs: a frame kept alive holds its locals, and OneFlow's `no_grad()`
        restores the grad mode only when its object is freed, so a frame of its __enter__ kept past the
        `with` block would leave gradients off for the ops after it."""
        frame = sys._current_frames().get(self.thread_id)
        now = time.perf_counter()
        if frame is not None:
            self._add(frame, now - last)
        return now

    def _add(self, frame, weight):
        while frame is not None and frame.f_globals.get("__name__") in PASSED_OVER:
            frame = frame.f_back
        if frame is None:
            return
        self.samples += 1
        innermost = place_of(frame)
        self.self_s[innermost] = self.self_s.get(innermost, 0.0) + weight
        seen = set()
        while frame is not None:
            place = place_of(frame)
            if place not in seen and frame.f_globals.get("__name__") not in PASSED_OVER:
                seen.add(place)
                self.total_s[place] = self.total_s.get(place, 0.0) + weight
            frame = frame.f_back

    def report(self):
        """What a profiled round's file carries: seconds per place (self and total), samples, time."""
        return {"self_s": dict(self.self_s), "total_s": dict(self.total_s), "samples": self.samples,
                "elapsed_s": self.elapsed_s, "interval_s": self.interval_s}


class StackProfile(Instrument):
    """The stack sampler around each profiled round (bench.instruments), of the thread that runs it: the
    round's `profile` is the sampler's report and the steps the round took."""

    def __init__(self, steps, interval_s=DEFAULT_INTERVAL_S):
        self.steps = steps
        self.interval_s = interval_s
        self.sampler = None

    def before_round(self, round):
        self.sampler = StackSampler(self.interval_s).start() if round.profiled else None

    def after_round(self, round):
        if self.sampler is not None:
            self.sampler.stop()

    def add_to(self, record):
        if self.sampler is not None:
            record["profile"] = {**self.sampler.report(), "steps": self.steps}
