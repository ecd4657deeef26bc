"""What is measured around a round besides its time: one interface, for the worker's side and the
runner's.

A round is measured with a list of instruments around it (as pyperf's hooks). In the worker
(bench.worker): the main thread's CPU time, and in a profiled round the framework's op profiler
(bench.opprofile) and the Python stack sampler (bench.sampler). In the runner (bench.schedule): the
machine's state (bench.machine_state), the worker tree's memory (bench.memory) and the GPUs' energy.

An instrument is called from the thread that runs the rounds:

    start()               once, before the first round it watches
    before_round(round)   right before each round, in the list's order
    after_round(round)    right after it, in the reverse order (the first begun ends last); also when
                          the round failed
    add_to(record)        what it measured of a round that finished, into that round's record (a dict),
                          in the reverse order too: an outer instrument may add to what an inner one added
    stop()                after the last round, in the reverse order

Each does nothing unless an instrument says otherwise.
"""

from __future__ import annotations

import contextlib
import dataclasses


@dataclasses.dataclass(frozen=True)
class Round:
    """The round about to run: its number (from 0, in the order the worker was asked for its rounds) and
    whether it is a profiled one."""

    number: int
    profiled: bool = False


class Instrument:
    """Something measured around each round (the module's docstring says when each method is called)."""

    def start(self):
        pass

    def before_round(self, round):
        pass

    def after_round(self, round):
        pass

    def add_to(self, record):
        pass

    def stop(self):
        pass


def _end(instruments, end, quietly):
    """Call end(instrument) for each, last first; quietly: while a failure is on its way, which an
    instrument that fails to end must not hide."""
    for instrument in reversed(instruments):
        if not quietly:
            end(instrument)
            continue
        with contextlib.suppress(Exception):  # the round's own failure is the one to report
            end(instrument)


def measure_round(instruments, round, run_round):
    """run_round() between the instruments' before_round and after_round: the record it returns (a
    dict), with what each instrument adds. A round that raises is raised again once every instrument
    begun has ended."""
    begun = []
    try:
        for instrument in instruments:
            instrument.before_round(round)
            begun.append(instrument)
        record = run_round()
    except BaseException:
        _end(begun, lambda instrument: instrument.after_round(round), quietly=True)
        raise
    _end(begun, lambda instrument: instrument.after_round(round), quietly=False)
    _end(instruments, lambda instrument: instrument.add_to(record), quietly=False)
    return record


@contextlib.contextmanager
def started(instruments):
    """The instruments started for the rounds of a with block, and stopped when it ends."""
    begun = []
    try:
        for instrument in instruments:
            instrument.start()
            begun.append(instrument)
        yield instruments
    except BaseException:
        _end(begun, lambda instrument: instrument.stop(), quietly=True)
        raise
    _end(begun, lambda instrument: instrument.stop(), quietly=False)
