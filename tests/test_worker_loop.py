"""The worker's loop (bench.worker.serve), run in this process against a control folder: its real
protocol and instruments, with a step, a framework and clocks of the test's own. The clocks move only
when the step works or the loop sleeps; each sleep of the loop waiting for its next round is where the
runner, stood in here by a script, writes its next file. What is checked: what the worker writes (ready,
the rounds' reports, done, its error), in which order it meets its framework, and how it ends: stop,
the rounds spent, the case's timeout, a failing step."""

import json
import os
import threading

from speedstats.bench import protocol, worker
from speedstats.bench.workerspec import WorkerSpec

STEP_S, STEP_CPU_S = 0.25, 0.125  # a step's seconds and its thread's CPU seconds on the test's clocks
EPOCH = 1_800_000_000.0  # the Unix time when the test's clocks start


class Clocks:
    """The loop's clocks: a step moves the round's clock, the thread's and the Unix time; a sleep moves
    only the deadline's, and lets the runner write its next file."""

    def __init__(self, runner=None):
        self.worked = self.cpu = self.waited = 0.0
        self.runner = runner

    def work(self, seconds, cpu_seconds):
        self.worked += seconds
        self.cpu += cpu_seconds

    def sleep(self, seconds):
        self.waited += seconds
        if self.runner is not None:
            self.runner()

    def clock(self):
        return worker.Clock(perf_counter=lambda: self.worked, thread_time=lambda: self.cpu,
                            monotonic=lambda: self.worked + self.waited, sleep=self.sleep,
                            unix_time=lambda: EPOCH + self.worked)


class Runner:
    """The runner's side: its next command each time the worker sleeps waiting for a round ("go",
    "profile" or "stop"); nothing once the script is done."""

    def __init__(self, control, script):
        self.control = control
        self.script = list(script)
        self.rounds = 0

    def __call__(self):
        if not self.script:
            return
        command = self.script.pop(0)
        if command == "stop":
            (self.control / protocol.STOP_FILE).write_text("")
            return
        (self.control / protocol.round_start_file(self.rounds, command)).write_text("")
        self.rounds += 1


class StandInFramework(worker.Framework):
    """A framework that only says what is asked of it; it has no op profiler (bench.opprofile)."""

    name = "stand-in"
    module = None

    def __init__(self, spec, calls):
        super().__init__(spec)
        self.calls = calls

    def sync(self):
        self.calls.append("sync")

    def barrier(self):
        self.calls.append("barrier")

    def peak_memory(self):
        return 4096, "rss"

    def imported(self):
        return {"version": "1.0", "file": "stand_in.py", "others": []}

    def close(self):
        self.calls.append("close")


class StandInStep:
    """Each iteration takes STEP_S on the clocks (STEP_CPU_S of the thread's); round `fails_at` raises."""

    def __init__(self, clocks, calls, fails_at=None):
        self.clocks, self.calls, self.fails_at = clocks, calls, fails_at
        self.rounds = 0

    def warm_up(self, iterations):
        self.calls.append(f"warm_up {iterations}")
        self.clocks.work(iterations * STEP_S, iterations * STEP_CPU_S)

    def run(self, iterations):
        k, self.rounds = self.rounds, self.rounds + 1
        self.calls.append(f"run {iterations}")
        if k == self.fails_at:
            raise RuntimeError(f"the step failed in round {k}")
        self.clocks.work(iterations * STEP_S, iterations * STEP_CPU_S)


def serve(tmp_path, script, rank=0, fails_at=None, **spec_fields):
    """Runs the loop with the runner's script: (its status, the framework's and step's calls, the files
    it wrote by name)."""
    control = tmp_path / "control"
    control.mkdir()
    spec = WorkerSpec(**{"framework": "pytorch", "device": "cpu", "times": 3, "warmup": 2, "rounds": 4,
                         "timeout_s": 60.0, **spec_fields})
    clocks = Clocks(Runner(control, script))
    calls = []

    def set_up(spec, clock):
        framework = StandInFramework(spec, calls)
        return worker.Measurement(framework, StandInStep(clocks, calls, fails_at),
                                  worker.round_instruments(framework, spec, clock))

    status = worker.serve(control, spec, rank, set_up, clocks.clock())
    written = {path.name: path.read_text() for path in control.iterdir()}
    return status, calls, written


def reports(written):
    return {name: json.loads(text) for name, text in written.items() if name.endswith(".json")}


def timed_round(k):
    """Round k's report on the test's clocks, after the warm-up (2 steps) and k rounds of 3 steps."""
    started = (2 + 3 * k) * STEP_S
    return {"total_s": 3 * STEP_S, "started_unix": EPOCH + started,
            "ended_unix": EPOCH + started + 3 * STEP_S, "thread_cpu_s": 3 * STEP_CPU_S}


def test_the_worker_reports_its_rounds_until_the_runner_says_stop(tmp_path):
    status, calls, written = serve(tmp_path, ["go", "go", "stop"])
    assert status == 0
    # Every rank meets the others after its warm-up and before each round, and once more at the end.
    assert calls == ["warm_up 2", "sync", "barrier", "barrier", "run 3", "barrier", "run 3", "barrier",
                     "close"]
    assert reports(written) == {
        protocol.env_file(0): {},
        protocol.READY_FILE: {"setup_s": 2 * STEP_S, "pid": os.getpid(),
                              "imported": {"version": "1.0", "file": "stand_in.py", "others": []}},
        protocol.round_file(0): timed_round(0),
        protocol.round_file(1): timed_round(1),
        protocol.DONE_FILE: {"peak_memory_bytes": 4096, "memory_kind": "rss"},
    }
    # Its keys in the order the runner has always read them.
    assert list(json.loads(written[protocol.round_file(0)])) == ["total_s", "started_unix", "ended_unix",
                                                                "thread_cpu_s"]


def test_the_rounds_of_the_spec_are_a_maximum(tmp_path):
    status, calls, written = serve(tmp_path, ["go", "go", "go"], rounds=2)
    assert status == 0 and calls.count("run 3") == 2
    assert protocol.round_file(2) not in written and protocol.DONE_FILE in written


def test_the_suites_env_is_reported_as_the_worker_sees_it(tmp_path, monkeypatch):
    monkeypatch.setenv("SPEEDSTATS_TEST_LOOP_VAR", "seen")
    monkeypatch.delenv("SPEEDSTATS_TEST_LOOP_UNSET", raising=False)
    _, _, written = serve(tmp_path, ["stop"], env={"SPEEDSTATS_TEST_LOOP_VAR": "seen",
                                                    "SPEEDSTATS_TEST_LOOP_UNSET": "x"})
    assert reports(written)[protocol.env_file(0)] == {"SPEEDSTATS_TEST_LOOP_VAR": "seen",
                                                      "SPEEDSTATS_TEST_LOOP_UNSET": None}


def test_a_profiled_round_carries_the_stack_samplers_figures_and_why_no_op_was_profiled(tmp_path):
    status, _, written = serve(tmp_path, ["go", "profile", "go", "stop"], op_profile=True)
    assert status == 0
    rounds = [reports(written)[protocol.round_file(k)] for k in range(3)]
    assert "profile" not in rounds[0] and "profile" not in rounds[2]
    profile = rounds[1].pop("profile")
    assert rounds[1] == timed_round(1)  # timed as the others
    assert sorted(profile) == ["count_steps", "elapsed_s", "interval_s", "op_counts", "op_reason",
                               "place_callers", "place_calls", "samples", "self_s", "steps", "total_s"]
    # The stand-in framework has no ops: none dispatched, over the round's 3 steps.
    assert (profile["op_counts"], profile["place_calls"], profile["place_callers"],
            profile["count_steps"]) == ({}, {}, {}, 3)
    assert profile["steps"] == 3 and profile["interval_s"] == 0.001
    assert profile["op_reason"] == "no op profiler for stand-in"
    assert not [t for t in threading.enumerate() if t.name == "speedstats-sampler"]


def test_the_op_profiler_runs_only_where_it_is_wanted(tmp_path):
    # op_profile unset: on the CPU no op profiler is asked for, so there is no reason to give either.
    _, _, written = serve(tmp_path, ["profile", "stop"])
    assert "op_reason" not in reports(written)[protocol.round_file(0)]["profile"]


def test_ranks_other_than_the_first_report_nothing_but_their_env(tmp_path):
    status, calls, written = serve(tmp_path, ["go", "profile", "stop"], rank=1)
    assert status == 0 and calls.count("run 3") == 2
    assert sorted(reports(written)) == [protocol.env_file(1)]


def test_no_round_before_the_case_timeout_is_the_workers_error(tmp_path):
    status, calls, written = serve(tmp_path, [], timeout_s=1.0)
    assert status == 1 and "run 3" not in calls
    assert protocol.READY_FILE in written and protocol.DONE_FILE not in written
    error = reports(written)[protocol.error_file(0)]
    assert error["error"] == "TimeoutError: no go-0 from the runner before the case timeout"
    assert error["traceback"].startswith("Traceback") and "TimeoutError" in error["traceback"]


def test_the_timeout_counts_from_the_workers_start_and_the_rounds_before_it_stand(tmp_path):
    # Of the case's 4 s, the warm-up and four rounds take 3.5 s: the fifth round is asked for in time and
    # ends past the deadline, and the sixth is waited for no more.
    status, calls, written = serve(tmp_path, ["go"] * 5, timeout_s=4.0, rounds=8)
    assert status == 1 and calls.count("run 3") == 5
    assert reports(written)[protocol.error_file(0)]["error"] == (
        "TimeoutError: no go-5 from the runner before the case timeout")
    assert [protocol.round_file(k) in written for k in range(6)] == [True] * 5 + [False]


def test_a_failing_step_is_the_workers_error_and_its_profilers_stop(tmp_path):
    status, calls, written = serve(tmp_path, ["go", "profile", "go"], fails_at=1, op_profile=True)
    assert status == 1 and calls[-1] == "run 3" and "close" not in calls
    assert protocol.round_file(0) in written
    assert protocol.round_file(1) not in written and protocol.DONE_FILE not in written
    assert reports(written)[protocol.error_file(0)]["error"] == "RuntimeError: the step failed in round 1"
    assert not [t for t in threading.enumerate() if t.name == "speedstats-sampler"]
