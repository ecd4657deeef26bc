"""The runner's rounds, with workers that measure nothing (tests/fakeworker.py): real processes, started,
steered, paused and killed as real workers are, reporting the round times their plan gives. What is
checked: the order of the rounds, the head-vs-base rule's looks and stops, a disturbed round measured
again, a flagged case confirmed or cleared in fresh processes, a worker that dies.

The GPU of the disturbed-round and start tests is the stand-in NVML of tests/fakenvml.py (there is no
GPU here); the fake worker says when it throttles, and its pid file where it runs."""

import json
import os
import sys
from pathlib import Path

import pytest

from fakebench import FAKE_WORKER, Bench, suite
from fakenvml import fake_nvml, gpu
from procfs import running
from speedstats.analysis.rule import SequentialRule
from speedstats.bench import protocol
from speedstats.bench.builds import Build
from speedstats.contenders import BASE, HEAD, PYTORCH
from speedstats.verdict import paired_text

SW_POWER_CAP, GPU_IDLE = 0x4, 0x1
MIB = 2**20


@pytest.fixture
def bench(tmp_path):
    return Bench(tmp_path)


def start_groups(bench):
    """The workers' starts as the runner said them, in order: a list of labels for each group started
    together, a list of one for a worker started alone."""
    groups, left = [], 0
    for line in bench.lines:
        text = line.split("   ", 1)[-1]
        if text.startswith("starting together: "):
            groups.append(text.removeprefix("starting together: ").split(", "))
            left = len(groups[-1])
        elif ": starting and warming up (" in text:
            if left:
                left -= 1
            else:
                groups.append([text.split(":")[0]])
    return groups


def launches(bench):
    """Each fake worker's start ("ROLE LAUNCH"), sorted: workers started together log theirs in any order."""
    return sorted(line.removesuffix(" start") for line in bench.events if line.endswith(" start"))


def rounds_ms(record, role):
    return [round(s * 1000, 6) for s in record.frameworks[role].rounds_s]


def test_rounds_take_turns_and_the_contender_not_timed_is_stopped(bench):
    record = bench.run(suite(rounds=3, times=2), {HEAD: [{"rounds": [0.02, 0.04, 0.06]}],
                                                  PYTORCH: [{"rounds": [0.01, 0.03, 0.05]}]})
    # Both started together (each logs its start in its own time); each round names the state of the
    # other worker's process while it ran: T, stopped.
    assert start_groups(bench) == [["OneFlow", "PyTorch"]]
    assert sorted(bench.events[:2]) == ["oneflow 0 start", "pytorch 0 start"]
    assert bench.events[2:] == [
        "oneflow 0 round 0 others T", "pytorch 0 round 0 others T",
        "pytorch 0 round 1 others T", "oneflow 0 round 1 others T",
        "oneflow 0 round 2 others T", "pytorch 0 round 2 others T",
        "oneflow 0 stop", "pytorch 0 stop",
    ]
    assert rounds_ms(record, HEAD) == [10.0, 20.0, 30.0]  # per iteration: two iterations a round
    assert rounds_ms(record, PYTORCH) == [5.0, 15.0, 25.0]
    head = record.frameworks[HEAD]
    assert (head.per_iter_s, head.total_s, head.peak_memory_bytes) == (0.02, 0.04, 1000)
    assert head.imported["version"] == "0.0.0+fake" and len(head.round_states) == 3
    assert "[1/1]   PyTorch: round 2/3: 15.000ms per iteration (2 iterations in 0.03s)" in bench.lines
    assert record.paired is None and record.confirmation is None and record.disturbance is None


def test_without_interleave_each_contender_runs_all_its_rounds_alone(bench):
    bench.run(suite(rounds=2, interleave=False), {HEAD: [{}], PYTORCH: [{}]})
    assert bench.events == [
        "oneflow 0 start", "oneflow 0 round 0 others -", "oneflow 0 round 1 others -", "oneflow 0 stop",
        "pytorch 0 start", "pytorch 0 round 0 others -", "pytorch 0 round 1 others -", "pytorch 0 stop",
    ]


def rule(**fields):
    """The head-vs-base rule with looks at 3, 5, 7 and 9 rounds, one pair of head and base processes
    (unless a test asks for more), and a time budget that a slow machine does not spend (extra rounds
    may take up to 100 times the planned rounds' time, at most 600 s, and the case 101 times its first
    look's), on processes taken not to differ (process_sd 0): these tests are about the steps, and their
    pairs of three rounds could never say "no change" against the default spread between pairs."""
    return SequentialRule(**{"first_rounds": 3, "step_rounds": 2, "max_rounds": 9, "extra_factor": 100.0,
                             "leaning_extra_factor": 100.0, "process_pairs": 1, "case_cap_factor": 101.0,
                             "process_sd": 0.0, **fields})


def paired_plan(ratios, base_s=0.01, pytorch_s=0.02):
    return {HEAD: [{"rounds": [base_s * r for r in ratios]}], BASE: [{"rounds": [base_s] * len(ratios)}],
            PYTORCH: [{"rounds": [pytorch_s]}]}


def said_in_order(bench, *texts):
    """The index in the runner's lines of the first line holding each text."""
    return [next(i for i, line in enumerate(bench.lines) if text in line) for text in texts]


def test_the_workers_of_a_measurement_start_together_and_each_stops_once_ready(bench):
    # PyTorch warms up longer: the head, ready first, is stopped while PyTorch still warms up.
    record = bench.run(suite(rounds=1, times=1), {HEAD: [{"setup_s": 0.1}], PYTORCH: [{"setup_s": 1.5}]})
    assert start_groups(bench) == [["OneFlow", "PyTorch"]]
    started, _, ready = said_in_order(bench, "PyTorch: starting", "OneFlow: ready after",
                                      "PyTorch: ready after")
    assert started < min(_, ready)
    assert "pytorch 0 ready others T" in bench.events
    assert record.frameworks[PYTORCH].setup_s >= 1.5


class WorkersOnGpu(dict):
    """A stand-in NVML GPU whose compute processes are the fake workers alive under `folder`, 100 MiB
    each: under their own pids, or (offset) under other numbers, as NVML reports host pids to a
    container with a PID namespace of its own."""

    def __init__(self, folder, offset=0):
        super().__init__(gpu())
        self.folder, self.offset = folder, offset

    def __getitem__(self, key):
        if key != "processes":
            return super().__getitem__(key)
        pids = (int(path.read_text()) for path in self.folder.rglob(protocol.pid_file(0)))
        return [(pid + self.offset, 100 * MIB) for pid in pids if running(pid)]


@pytest.mark.parametrize("in_container", [False, True])
def test_on_a_gpu_workers_start_alone_until_nvml_shows_their_own_pids(bench, monkeypatch, in_container):
    card = WorkersOnGpu(bench.folder, offset=4_194_304 if in_container else 0)
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([card]))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    plan = {HEAD: [{"rounds": [0.015]}], BASE: [{"rounds": [0.01]}], PYTORCH: [{"rounds": [0.02]}]}
    record = bench.run(suite(rounds=1, times=6), plan, device="cuda:0", quiet_wait_s=0,
                       rule=rule(first_rounds=6, max_rounds=6, process_pairs=2))
    # The first start shows whether NVML reports the workers' own pids: then the second pair starts
    # together; in a container only the moment a GPU process appeared tells whose it is, so each
    # worker starts alone, and each is measured by its own processes' memory alone.
    second_pair = [["OneFlow base"], ["OneFlow"]] if in_container else [["OneFlow base", "OneFlow"]]
    assert start_groups(bench) == [["OneFlow"], ["OneFlow base"], ["PyTorch"], *second_pair]
    for role in (HEAD, BASE, PYTORCH):
        assert record.frameworks[role].sampled_peak_bytes == 100 * MIB


def test_head_and_base_go_on_alone_until_the_rule_shows_a_change(bench):
    ratios = [1.10, 1.02, 1.18, 1.12, 1.08, 1.11, 1.09, 1.10, 1.10]
    record = bench.run(suite(rounds=1, times=3), paired_plan(ratios), rule=rule())
    rounds = [line for line in bench.events if " round " in line]
    assert [line.split(" others")[0] for line in rounds] == [
        # The head and the base back to back, swapping places; PyTorch after them.
        "oneflow 0 round 0", "oneflow_base 0 round 0", "pytorch 0 round 0",
        "oneflow_base 0 round 1", "oneflow 0 round 1", "pytorch 0 round 1",
        "oneflow 0 round 2", "oneflow_base 0 round 2", "pytorch 0 round 2",
        # PyTorch is done after the planned rounds; the pair goes on, in turns
        "oneflow_base 0 round 3", "oneflow 0 round 3",
        "oneflow 0 round 4", "oneflow_base 0 round 4",
        "oneflow_base 0 round 5", "oneflow 0 round 5",
        "oneflow 0 round 6", "oneflow_base 0 round 6",
    ]
    assert bench.events.index("pytorch 0 stop") < bench.events.index(rounds[9])
    assert rounds[9] == "oneflow_base 0 round 3 others T"  # PyTorch's process is gone, the head's stopped
    paired = record.paired
    assert [look["rounds"] for look in paired.looks] == [3, 5, 7]
    assert [look["verdict"] for look in paired.looks] == ["inconclusive", "inconclusive", "regression"]
    assert (paired.verdict, paired.stopped, paired.rounds, paired.stages) == ("regression", "shown", 7, [7])
    assert paired.ratios == pytest.approx(ratios[:7])
    assert len(record.frameworks[HEAD].rounds_s) == 7 and len(record.frameworks[PYTORCH].rounds_s) == 3
    assert "[1/1]   head vs base: 7 rounds, stopped (shown)" in bench.lines
    assert "[1/1]   OneFlow: round 4: 11.200ms per iteration (1 iterations in 0.01s)" in bench.lines


def test_the_time_budget_stops_the_rounds_at_the_first_look(bench):
    no_time = rule(extra_factor=0.0, leaning_extra_factor=0.0)
    record = bench.run(suite(rounds=1, times=3), paired_plan([1.10, 1.02, 1.18, 1.12]), rule=no_time)
    assert (record.paired.verdict, record.paired.stopped, record.paired.rounds) == (
        "inconclusive", "time budget", 3)
    assert not any(line.startswith("oneflow 0 round 3") for line in bench.events)
    assert "[1/1]   head vs base: 3 rounds, stopped (time budget)" in bench.lines


def test_a_worker_that_imported_another_build_than_its_own_has_no_figures(bench, tmp_path):
    site = tmp_path / "builds" / "oneflow-1" / "site"
    (site / "oneflow").mkdir(parents=True)
    build = Build(role=HEAD, family="oneflow", site_dir=site, provenance={})
    plan = {HEAD: [{"imported_file": str(site / "oneflow" / "__init__.py")}], BASE: [{}],
            PYTORCH: [{"rounds": [0.02]}]}
    # The head imports its build, the base (whose build has a folder too) the environment's package.
    base_build = Build(role=BASE, family="oneflow", site_dir=tmp_path / "builds" / "oneflow-2" / "site",
                       provenance={})
    record = bench.run(suite(rounds=1, times=3), plan, rule=rule(), builds={HEAD: build, BASE: base_build})
    assert record.frameworks[HEAD].error is None
    error = record.frameworks[BASE].error
    assert error == (f"the worker imported {FAKE_WORKER}, not the build from "
                     f"{os.path.realpath(base_build.site_dir)}")
    assert f"[1/1]   OneFlow base: FAILED: {error}" in bench.lines
    assert record.paired is None or record.paired.verdict == "not comparable"


def test_a_build_folder_given_relative_reaches_the_worker_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    build = Build(role=HEAD, family="oneflow", site_dir=Path("cache/builds/oneflow-1/site"), provenance={})
    path = build.worker_env({"PYTHONPATH": "/elsewhere"})["PYTHONPATH"]
    assert path == os.pathsep.join([str(tmp_path / "cache" / "builds" / "oneflow-1" / "site"), "/elsewhere"])


def test_the_case_cap_stops_a_leaning_case_at_the_first_look(bench):
    # Extra rounds would be allowed 100 times the first look's time, but the case may take only as long
    # as its first look: a case leaning slower gets no more rounds.
    capped = rule(case_cap_factor=1.0)
    record = bench.run(suite(rounds=1, times=3), paired_plan([1.10, 1.02, 1.18, 1.12]), rule=capped)
    assert (record.paired.verdict, record.paired.stopped, record.paired.rounds) == (
        "inconclusive", "time budget", 3)
    assert record.paired.leaning == "likely slower"
    assert not any(line.startswith("oneflow 0 round 3") for line in bench.events)


def test_a_regression_the_rule_shows_is_measured_again_in_fresh_processes(bench):
    record = bench.run(suite(rounds=1, times=3), paired_plan([1.5] * 9), rule=rule(confirm_rounds=2))
    # The fresh pair starts in the other order (the base first).
    assert start_groups(bench) == [["OneFlow", "OneFlow base", "PyTorch"], ["OneFlow base", "OneFlow"]]
    assert launches(bench) == ["oneflow 0", "oneflow 1", "oneflow_base 0", "oneflow_base 1", "pytorch 0"]
    assert bench.control("confirm", HEAD, protocol.round_file(1)).exists()
    assert not bench.control("confirm", HEAD, protocol.round_file(2)).exists()
    assert (record.paired.verdict, record.paired.stages, record.paired.rounds) == ("regression", [3, 2], 5)
    assert len(record.frameworks[HEAD].rounds_s) == len(record.frameworks[BASE].rounds_s) == 5
    assert "[1/1]   head vs base: a regression after 3 rounds: measuring again in fresh processes" \
        in bench.lines


def test_two_pairs_of_processes_share_the_first_look_started_in_turned_order(bench):
    plan = {HEAD: [{"rounds": [0.0150, 0.0152, 0.0148], "setup_s": 0.4},
                   {"rounds": [0.0151, 0.0149, 0.0150], "setup_s": 0.2}],
            BASE: [{"rounds": [0.01]}], PYTORCH: [{"rounds": [0.02]}]}
    record = bench.run(suite(rounds=1, times=6), plan, rule=rule(first_rounds=6, max_rounds=10,
                                                                  process_pairs=2))
    # The second pair starts after round 3, the base first this time; PyTorch keeps its one process.
    assert start_groups(bench) == [["OneFlow", "OneFlow base", "PyTorch"], ["OneFlow base", "OneFlow"]]
    assert launches(bench) == ["oneflow 0", "oneflow 1", "oneflow_base 0", "oneflow_base 1", "pytorch 0"]
    assert bench.events.index("oneflow 1 start") < bench.events.index("oneflow 1 round 0 others T")
    assert bench.control("pair2", HEAD, protocol.round_file(0)).exists()
    paired = record.paired
    assert (paired.verdict, paired.stages, paired.rounds) == ("regression", [3, 3], 6)
    assert not paired.disagree
    assert [pair["ratio"] for pair in paired.pairs] == pytest.approx([1.5, 1.5], abs=0.01)
    assert len(record.frameworks[PYTORCH].rounds_s) == 6 and len(record.frameworks[HEAD].rounds_s) == 6
    fresh_pair = "[1/1]   head vs base: 3 rounds measured; the next ones in a fresh pair of processes"
    assert fresh_pair in bench.lines
    # Each build's warm-up from both its starts, in the order started; its figure their median.
    head, base = record.frameworks[HEAD], record.frameworks[BASE]
    assert len(head.setup_starts_s) == len(base.setup_starts_s) == 2
    assert head.setup_starts_s[0] >= 0.4 and head.setup_starts_s[1] >= 0.2
    assert head.setup_s == pytest.approx(sum(head.setup_starts_s) / 2)
    assert len(record.frameworks[PYTORCH].setup_starts_s) == 1


def test_pairs_of_processes_that_disagree_leave_the_case_inconclusive(bench):
    # The first pair's head is as fast as its base, the second's 12% slower.
    plan = {HEAD: [{"rounds": [0.0100, 0.0101, 0.0099]}, {"rounds": [0.0112, 0.0113, 0.0111]}],
            BASE: [{"rounds": [0.01]}], PYTORCH: [{"rounds": [0.02]}]}
    record = bench.run(suite(rounds=1, times=6), plan, rule=rule(first_rounds=6, max_rounds=10,
                                                                  process_pairs=2))
    paired = record.paired
    assert (paired.verdict, paired.stopped, paired.rounds, paired.leaning) == (
        "inconclusive", "pairs disagree", 6, "likely slower")
    assert [pair["ratio"] for pair in paired.pairs] == pytest.approx([1.0, 1.12], abs=0.005)
    assert "[1/1]   head vs base: 6 rounds, stopped (pairs disagree)" in bench.lines


def test_pairs_that_disagree_are_followed_by_two_more_that_tell_the_start_order_apart(bench):
    # The build started first is slower: the head measures +32% when it starts first, -8% when the base
    # does (a true +10%). The first two pairs disagree; two more, in the same turned orders, agree with
    # the pair of their order, and the estimate weighs both orders alike.
    head_first, base_first = {"rounds": [0.0132, 0.0133, 0.0131]}, {"rounds": [0.00917, 0.00918, 0.00916]}
    plan = {HEAD: [head_first, base_first, head_first, base_first], BASE: [{"rounds": [0.01]}],
            PYTORCH: [{"rounds": [0.02]}]}
    record = bench.run(suite(rounds=1, times=6), plan, rule=rule(
        first_rounds=6, step_rounds=6, max_rounds=12, process_pairs=2, extra_factor=50.0,
        leaning_extra_factor=50.0))
    assert start_groups(bench) == [["OneFlow", "OneFlow base", "PyTorch"], ["OneFlow base", "OneFlow"],
                                   ["OneFlow", "OneFlow base"], ["OneFlow base", "OneFlow"]]
    paired = record.paired
    assert (paired.verdict, paired.stopped, paired.stages, paired.disagree) == (
        "regression", "shown", [3, 3, 3, 3], False)
    assert paired.ratio == pytest.approx(1.10, abs=0.005)
    assert paired.start_order == pytest.approx(1.2, abs=0.01)
    assert len(record.frameworks[HEAD].rounds_s) == len(record.frameworks[BASE].rounds_s) == 12
    assert "[1/1]   head vs base: 12 rounds, stopped (shown)" in bench.lines


def test_no_change_in_two_pairs_of_processes_is_measured_in_a_third_where_three_are_asked_for(bench):
    # Each pair's head measures +1% (its cost hidden, as a Python-side cost behind OneFlow's queue can
    # be): after two pairs the interval lies inside the band, and where the suite asks for three pairs
    # a third pair, the head started first again, must say it too.
    hidden = {"rounds": [0.0101, 0.0102, 0.0100]}
    plan = {HEAD: [hidden, hidden, hidden], BASE: [{"rounds": [0.01]}], PYTORCH: [{"rounds": [0.02]}]}
    record = bench.run(suite(rounds=1, times=6), plan, rule=rule(first_rounds=6, max_rounds=12,
                                                                  process_pairs=2, no_change_pairs=3))
    assert start_groups(bench) == [["OneFlow", "OneFlow base", "PyTorch"], ["OneFlow base", "OneFlow"],
                                   ["OneFlow", "OneFlow base"]]
    assert bench.control("pair3", HEAD, protocol.round_file(0)).exists()
    paired = record.paired
    assert (paired.verdict, paired.stopped, paired.stages, paired.rounds) == (
        "no change", "shown", [3, 3, 3], 9)
    assert [look["rounds"] for look in paired.looks] == [6, 9]
    assert len(record.frameworks[HEAD].rounds_s) == len(record.frameworks[BASE].rounds_s) == 9
    assert "[1/1]   head vs base: no change after 6 rounds in 2 pairs of processes, 3 needed: one more pair" \
        in bench.lines
    # The third pair's processes show the cost (+12%): not "no change".
    shown = {"rounds": [0.0112, 0.0113, 0.0111]}
    plan[HEAD] = [hidden, hidden, shown]
    (bench.folder / "shown").mkdir()
    record = Bench(bench.folder / "shown").run(suite(rounds=1, times=6), plan, rule=rule(
        first_rounds=6, max_rounds=12, process_pairs=2, no_change_pairs=3))
    assert record.paired.verdict != "no change" and record.paired.stages[:3] == [3, 3, 3]


def test_no_change_short_of_its_pairs_when_the_case_cap_is_reached_is_inconclusive(bench):
    hidden = {"rounds": [0.0101, 0.0102, 0.0100]}
    plan = {HEAD: [hidden, hidden, hidden], BASE: [{"rounds": [0.01]}], PYTORCH: [{"rounds": [0.02]}]}
    # The case may take only as long as its first look: no time for the third pair's rounds.
    record = bench.run(suite(rounds=1, times=6), plan, rule=rule(first_rounds=6, max_rounds=12,
                                                                  process_pairs=2, no_change_pairs=3,
                                                                  case_cap_factor=1.0))
    paired = record.paired
    assert (paired.verdict, paired.stopped, paired.rounds, paired.short_of_pairs) == (
        "inconclusive", "time budget", 6, True)
    assert paired_text(paired) == "inconclusive after 6 rounds: no change in 2 pairs of processes, 3 needed"
    assert launches(bench) == ["oneflow 0", "oneflow 1", "oneflow_base 0", "oneflow_base 1", "pytorch 0"]


def test_a_head_whose_main_thread_works_more_is_held_back_from_no_change(bench):
    # The workers report their main thread's CPU time in each round: the head's 2.2 ms of a 10 ms round
    # more than the base's, while its rounds take as long (+1%).
    hidden = {"rounds": [0.0101, 0.0102, 0.0100], "thread_cpu": [0.0030]}
    plan = {HEAD: [hidden], BASE: [{"rounds": [0.01], "thread_cpu": [0.0008]}], PYTORCH: [{"rounds": [0.02]}]}
    record = bench.run(suite(rounds=1, times=6), plan, rule=rule(first_rounds=6, max_rounds=12,
                                                                  process_pairs=2))
    paired = record.paired
    assert (paired.verdict, paired.stopped, paired.stages) == ("inconclusive", "hidden work", [3, 3])
    assert paired.work == pytest.approx([0.22] * 6)
    assert paired.hidden_work["share"] == pytest.approx(0.22)
    # No third pair: the first look decided.
    assert launches(bench) == ["oneflow 0", "oneflow 1", "oneflow_base 0", "oneflow_base 1", "pytorch 0"]
    written = json.loads((bench.folder / "out" / "results.json").read_text())["cases"][0]["paired"]
    assert written["hidden_work"]["share"] == pytest.approx(0.22) and len(written["work"]) == 6


def test_the_third_pair_may_use_the_room_kept_for_profiled_rounds_unless_every_case_is_profiled(bench):
    # Rounds reported as 1000 s each: the fewest profiled rounds would take far more than the cap
    # leaves, so a case that keeps their room has none for more rounds.
    hidden = {"rounds": [1010.0, 1020.0, 1000.0]}
    plan = {HEAD: [hidden, hidden, hidden], BASE: [{"rounds": [1000.0]}], PYTORCH: [{"rounds": [2000.0]}]}
    the_rule = rule(first_rounds=6, max_rounds=12, process_pairs=2, no_change_pairs=3)
    # `attribute: slower` profiles a case whose look said no change only if the third pair turns it:
    # the pair takes the room.
    record = bench.run(suite(rounds=1, times=6, attribute="slower"), plan, rule=the_rule)
    assert (record.paired.verdict, record.paired.stages) == ("no change", [3, 3, 3])
    # `attribute: always` profiles every case: the room stays kept, and the case is inconclusive.
    (bench.folder / "always").mkdir()
    always = Bench(bench.folder / "always")
    record = always.run(suite(rounds=1, times=6, attribute="always"), plan, rule=the_rule)
    assert (record.paired.verdict, record.paired.stopped, record.paired.short_of_pairs) == (
        "inconclusive", "time budget", True)
    assert launches(always) == ["oneflow 0", "oneflow 1", "oneflow_base 0", "oneflow_base 1", "pytorch 0"]


class ThrottledGpu(dict):
    """A stand-in NVML GPU that reports a software power cap once for each time the fake worker made
    the file `throttled` (during a round its plan names), and idle clocks otherwise."""

    def __init__(self, flag):
        super().__init__(gpu())
        self.flag = flag

    def __getitem__(self, key):
        if key == "clock_events":
            if self.flag.exists():
                self.flag.unlink()
                return SW_POWER_CAP
            return GPU_IDLE
        return super().__getitem__(key)


@pytest.fixture
def throttling_gpu(bench, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([ThrottledGpu(bench.folder / "throttled")]))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_a_disturbed_round_is_measured_again(bench, throttling_gpu):
    plan = {HEAD: [{"rounds": [0.01]}], PYTORCH: [{"rounds": [0.01, 0.5, 0.02, 0.03], "throttle_at": [1]}]}
    record = bench.run(suite(times=1), plan, device="cuda:0", quiet_wait_s=0)
    pytorch = record.frameworks[PYTORCH]
    assert rounds_ms(record, PYTORCH) == [10.0, 20.0, 30.0]  # the throttled round, 500 ms, measured again
    assert [r["per_iter_s"] for r in pytorch.remeasured] == [0.5]
    assert [d["text"] for d in pytorch.remeasured[0]["state"]["disturbed"]] == [
        "GPU 0 throttled (software power cap)"]
    assert [s["disturbed"] for s in pytorch.round_states] == [[], [], []]
    assert record.disturbance is None
    assert "[1/1]   PyTorch: round 2/3 disturbed (GPU 0 throttled (software power cap)): measuring it again" \
        in bench.lines


def test_a_round_disturbed_past_the_remeasures_marks_the_case(bench, throttling_gpu):
    plan = {HEAD: [{"rounds": [0.01]}], PYTORCH: [{"rounds": [0.01], "throttle_at": [1, 2, 3]}]}
    record = bench.run(suite(times=1), plan, device="cuda:0", quiet_wait_s=0)
    assert len(record.frameworks[PYTORCH].remeasured) == 2  # the suite's remeasure_rounds
    assert record.disturbance["text"] == "GPU 0 throttled (software power cap) during PyTorch's rounds"
    assert "[1/1]   disturbed: GPU 0 throttled (software power cap) during PyTorch's rounds" in bench.lines


@pytest.mark.parametrize(("again_s", "status"), [(0.05, "confirmed"), (0.02, "cleared")])
def test_a_missed_threshold_is_measured_again_in_fresh_processes(bench, again_s, status):
    # Relative speed 0.01 / 0.05 = 0.2, below the case's 0.25; the second measurement either repeats it
    # or, 0.02 s, brings the median of all six rounds to 0.035 s: 0.29.
    plan = {HEAD: [{"rounds": [0.05]}, {"rounds": [again_s]}], PYTORCH: [{"rounds": [0.01]}]}
    record = bench.run(suite(rounds=3, times=1), plan)
    flag = "resnet50-bs2: relative speed 0.20 is below 0.25"
    remaining = [flag] if status == "confirmed" else []
    assert record.confirmation == {"flags": [flag], "status": status, "remaining": remaining, "rounds": 6,
                                   "error": None}
    assert rounds_ms(record, HEAD) == [50.0] * 3 + [again_s * 1000] * 3
    assert len(record.frameworks[HEAD].round_states) == 6
    assert start_groups(bench) == [["OneFlow", "PyTorch"], ["OneFlow", "PyTorch"]]
    assert launches(bench) == ["oneflow 0", "oneflow 1", "pytorch 0", "pytorch 1"]
    assert bench.control("confirm", HEAD, protocol.DONE_FILE).exists()
    assert f"[1/1]   flagged ({flag}): measuring again in fresh processes" in bench.lines
    assert f"[1/1]   {status} on 6 rounds" in bench.lines


def test_a_contender_that_fails_its_confirmation_keeps_its_first_rounds_and_the_case_says_so(bench):
    plan = {HEAD: [{"rounds": [0.05]}, {"rounds": [0.05], "die_at": 1}], PYTORCH: [{"rounds": [0.01]}]}
    record = bench.run(suite(rounds=3, times=1), plan)
    flag = "resnet50-bs2: relative speed 0.20 is below 0.25"
    assert record.confirmation == {"flags": [flag], "status": "confirmed", "remaining": [flag], "rounds": 6,
                                   "error": "OneFlow: killed by SIGKILL (out of memory?)"}
    assert record.frameworks[HEAD].error is None and rounds_ms(record, HEAD) == [50.0] * 3
    assert len(record.frameworks[PYTORCH].rounds_s) == 6


def test_a_worker_that_dies_mid_round_fails_its_contender_alone_and_leaves_nothing_running(bench):
    plan = {HEAD: [{"rounds": [0.02], "child": True}],
            PYTORCH: [{"rounds": [0.01], "child": True, "die_at": 1}]}
    record = bench.run(suite(rounds=3, times=1), plan)
    assert record.frameworks[PYTORCH].error == "killed by SIGKILL (out of memory?)"
    assert record.frameworks[PYTORCH].rounds_s == [] and record.frameworks[PYTORCH].round_states == []
    assert rounds_ms(record, HEAD) == [20.0, 20.0, 20.0]
    assert "[1/1]   PyTorch: round 2/3 FAILED: killed by SIGKILL (out of memory?)" in bench.lines
    assert bench.events[-1] == "oneflow 0 stop"
    for role in (HEAD, PYTORCH):
        for name in (protocol.pid_file(0), "child-pid"):
            pid = int(bench.control(role, name).read_text())
            assert not running(pid), f"{role}'s {name} {pid} still runs"
