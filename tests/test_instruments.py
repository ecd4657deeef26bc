"""The instruments around a round (bench.instruments): when each is called, in which order, and what a
failing round or instrument does to the others; the runner's energy counter's record (the GPU through the
stand-in NVML of tests/fakenvml.py: there is none here)."""

import sys

import pytest

from fakenvml import fake_nvml, gpu
from speedstats.bench.instruments import Instrument, Round, measure_round, started
from speedstats.bench.machine_state import GpuEnergy, Gpus


class Recording(Instrument):
    """Says each call in `calls`, and adds its name to the record; the call that `fails_in` begins (a
    method, and the round's number) raises."""

    def __init__(self, name, calls, fails_in=None):
        self.name, self.calls, self.fails_in = name, calls, fails_in

    def _say(self, what):
        self.calls.append(f"{self.name} {what}")
        if self.fails_in and what.startswith(self.fails_in):
            raise RuntimeError(f"{self.name} failed in {self.fails_in}")

    def start(self):
        self._say("start")

    def before_round(self, round):
        self._say(f"before_round {round.number}")

    def after_round(self, round):
        self._say(f"after_round {round.number}")

    def add_to(self, record):
        self._say("add_to")
        record.setdefault("added", []).append(self.name)

    def stop(self):
        self._say("stop")


def rounds(instruments, calls, fail_round=None):
    with started(instruments):
        for k in range(2):
            def run_round(k=k):
                calls.append(f"round {k}")
                if k == fail_round:
                    raise ValueError(f"round {k} failed")
                return {"total_s": 1.0}

            yield measure_round(instruments, Round(k), run_round)


def test_the_first_instrument_begins_first_and_ends_last_and_adds_last():
    calls = []
    instruments = [Recording("outer", calls), Recording("inner", calls)]
    records = list(rounds(instruments, calls))
    assert records == [{"total_s": 1.0, "added": ["inner", "outer"]}] * 2
    assert calls == [
        "outer start", "inner start",
        "outer before_round 0", "inner before_round 0", "round 0",
        "inner after_round 0", "outer after_round 0", "inner add_to", "outer add_to",
        "outer before_round 1", "inner before_round 1", "round 1",
        "inner after_round 1", "outer after_round 1", "inner add_to", "outer add_to",
        "inner stop", "outer stop",
    ]


def test_a_failing_round_is_raised_after_every_instrument_ended_even_one_that_fails_to():
    calls = []
    instruments = [Recording("outer", calls), Recording("inner", calls, fails_in="after_round 1")]
    with pytest.raises(ValueError, match="round 1 failed"):
        list(rounds(instruments, calls, fail_round=1))
    # Nothing is added of the failed round, and every instrument is stopped.
    assert calls[calls.index("round 1"):] == ["round 1", "inner after_round 1", "outer after_round 1",
                                              "inner stop", "outer stop"]


def test_an_instrument_that_cannot_begin_ends_those_begun_before_it_and_the_round_does_not_run():
    calls = []
    instruments = [Recording("outer", calls), Recording("inner", calls, fails_in="before_round"),
                   Recording("never", calls)]
    with pytest.raises(RuntimeError, match="inner failed in before_round"):
        measure_round(instruments, Round(0), lambda: calls.append("round 0"))
    assert calls == ["outer before_round 0", "inner before_round 0", "outer after_round 0"]


def test_an_instrument_that_fails_to_end_a_round_that_finished_is_the_rounds_failure():
    calls = []
    instruments = [Recording("outer", calls), Recording("inner", calls, fails_in="after_round")]
    with pytest.raises(RuntimeError, match="inner failed in after_round"):
        measure_round(instruments, Round(0), lambda: {"total_s": 1.0})


def energy_round(monkeypatch, seconds, counter=True):
    card = gpu(energy_mj=1_000 if counter else "NOT_SUPPORTED")
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([card]))
    gpus = Gpus([0])

    def run_round():
        if counter:
            card["energy_mj"] += 7_500
        return {"total_s": seconds}

    return measure_round([GpuEnergy(gpus, min_round_s=1.0)], Round(0), run_round)


def test_the_energy_of_a_round_long_enough_and_none_of_a_shorter_one_or_without_a_counter(monkeypatch):
    assert energy_round(monkeypatch, 1.0) == {"total_s": 1.0, "energy_mj": 7_500}
    assert energy_round(monkeypatch, 0.99) == {"total_s": 0.99}
    assert energy_round(monkeypatch, 2.0, counter=False) == {"total_s": 2.0}
