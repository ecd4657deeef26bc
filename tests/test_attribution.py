"""Where the head spends more time than its base: the stack sampler in a real process, the statistics
per place, the profiled rounds the scheduler asks for (against tests/fakeworker.py), results.json's
`attribution`, the lines after the head-against-base table, and the suite's `attribute` fields."""

import json
import os
import random
import subprocess
import sys
import textwrap
import time
import weakref
from pathlib import Path

import pytest

from fakebench import PROFILE, SLOW_PROFILE, Bench, head_vs_base
from fakebench import suite as fake_suite
from helpers import notes_of, profiled, results_with
from oneflow_builds import BATCHNORM_PLACE, SLOWED_PLACE
from speedstats import results as results_model
from speedstats.analysis.attribution import ProfiledRound, attribute
from speedstats.bench.sampler import StackSampler
from speedstats.contenders import BASE, HEAD, PYTORCH
from speedstats.errors import UserError
from speedstats.render import render_speed_stats
from speedstats.suite import suite_from_dict
from speedstats.verdict import judge

ROOT = Path(__file__).resolve().parents[1]
SLOWED = SLOWED_PLACE


def test_the_sampler_finds_the_function_that_busy_waits_in_a_real_process(tmp_path):
    script = tmp_path / "toy.py"
    script.write_text(textwrap.dedent("""\
        import json, sys, time
        from speedstats.bench.sampler import StackSampler

        def spin(seconds):
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                pass

        def busy():
            spin(0.03)

        def light():
            spin(0.005)

        def main():
            sampler = StackSampler().start()
            for _ in range(40):
                busy()
                light()
            print(json.dumps(sampler.stop().report()))

        main()
    """))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True,
                          env={"PYTHONPATH": str(ROOT / "src")}, timeout=120)
    report = json.loads(proc.stdout)
    self_s, total_s = report["self_s"], report["total_s"]
    # The busy wait's own time is in spin, called by busy and light: spin has the self time, busy and
    # light the total time of their calls, main all of it.
    # Loose bounds (busy is 6 times light): on a busy machine the sampling thread may wait for a core,
    # and the time it waited goes to the frame it sees next (busy only 1.35 times light on a loaded one).
    assert max(self_s, key=self_s.get) == "__main__:spin"
    assert total_s["__main__:busy"] > total_s["__main__:light"]
    assert 0.5 * report["elapsed_s"] < total_s["__main__:main"] <= report["elapsed_s"]
    assert sum(self_s.values()) == pytest.approx(total_s["__main__:main"], rel=1e-6)
    assert report["samples"] > 5


def test_the_sampler_keeps_no_frame_alive_after_its_sample():
    # OneFlow 0.9.0's no_grad() restores the grad mode when its object is freed (its __exit__ does
    # nothing). A sampler that held the frame of __enter__ until its next sample kept the object past the
    # `with` block, and the ops after it ran without gradients.
    class FreedOnExit:
        def __enter__(self):
            end = time.perf_counter() + 0.012  # longer than the GIL's switch interval: a sample lands here
            while time.perf_counter() < end:
                pass
            return self

        def __exit__(self, *exc):
            pass

    sampler = StackSampler().start()
    kept = []
    for _ in range(20):
        with FreedOnExit() as guard:
            freed = weakref.ref(guard)
            del guard
        kept.append(freed() is not None)
    sampler.stop()
    assert sampler.samples >= 20 and kept == [False] * 20


@pytest.mark.heavy
def test_a_profiled_oneflow_step_keeps_its_gradients_through_no_grad_blocks(tmp_path):
    # As the test builds' slowed Conv2d does: a no_grad() block inside forward, many times a step.
    script = tmp_path / "no_grad.py"
    script.write_text(textwrap.dedent("""\
        import oneflow as flow
        from speedstats.bench.sampler import StackSampler

        class Twice(flow.nn.Module):
            def __init__(self):
                super().__init__()
                self.linear = flow.nn.Linear(64, 64)

            def forward(self, x):
                with flow.no_grad():
                    self.linear(x)
                return self.linear(x)

        net, x = Twice(), flow.ones(8, 64)
        sampler = StackSampler().start()
        without_grad = sum(not net(x).sum().requires_grad for _ in range(3000))
        print(without_grad, sampler.stop().samples)
    """))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT / "src")), timeout=300)
    without_grad, samples = map(int, proc.stdout.split())
    assert samples > 0 and without_grad == 0


def test_an_unchanged_build_shows_no_significant_place():
    rng = random.Random(7)
    false_alarms = 0
    for _ in range(20):
        result = attribute([profiled(rng) for _ in range(10)], [profiled(rng) for _ in range(10)])
        assert result.places_compared == 41 and len(result.places) == 41
        false_alarms += any(p.significant for p in result.places)
    assert false_alarms <= 1


def test_a_planted_slowdown_is_significant_and_ranked_first():
    rng = random.Random(3)
    result = attribute([profiled(rng, extra_s=0.04) for _ in range(10)], [profiled(rng) for _ in range(10)])
    first = result.places[0]
    assert first.place == SLOWED and first.significant
    assert first.change_ms == pytest.approx(20.0, abs=1.0) and first.low_ms > 15 and first.high_ms < 25
    assert first.head_total_ms == pytest.approx(first.head_ms)
    assert [p.place for p in result.significant] == [SLOWED]
    assert result.step_change_ms == pytest.approx(20.0, abs=5.0)
    assert result.explained == pytest.approx(first.change_ms / result.step_change_ms)
    changes = [p.change_ms for p in result.places]
    assert changes == sorted(changes, reverse=True)


def test_a_significant_increase_ranks_before_a_larger_scattered_one():
    rng = random.Random(4)
    head = [profiled(rng, extra_s=0.02) for _ in range(10)]
    for k, r in enumerate(head):  # a wait that scatters: +200 ms in one pair of rounds in two
        r.self_s["speedstats.bench.worker:sync"] = 0.4 if k % 2 else 0.0
    base = [profiled(rng) for _ in range(10)]
    for r in base:
        r.self_s["speedstats.bench.worker:sync"] = 0.0
    result = attribute(head, base)
    scattered = {p.place: p for p in result.places}["speedstats.bench.worker:sync"]
    assert scattered.change_ms > result.places[0].change_ms and not scattered.significant
    assert result.places[0].place == SLOWED and result.places[1].place == "speedstats.bench.worker:sync"


def test_the_correction_widens_each_interval_with_the_number_of_places():
    rng = random.Random(11)
    head = [profiled(rng, extra_s=0.0012) for _ in range(10)]
    base = [profiled(rng) for _ in range(10)]
    alone = attribute(head, base, confidence=0.95)
    # The same rounds with 400 unchanged places beside: the interval of SLOWED at 1 - 0.05/401.
    crowd = [ProfiledRound(r.steps, r.total_s, {**r.self_s, **{f"x{i}:f": 0.001 for i in range(400)}},
                           r.place_total_s) for r in head + base]
    many = attribute(crowd[:10], crowd[10:], confidence=0.95)
    place = {p.place: p for p in alone.places}[SLOWED]
    same = {p.place: p for p in many.places}[SLOWED]
    assert same.change_ms == pytest.approx(place.change_ms)
    assert (same.high_ms - same.low_ms) > 1.3 * (place.high_ms - place.low_ms)
    assert many.places_compared == 441


def test_fewer_than_three_profiled_rounds_compare_nothing():
    rng = random.Random(1)
    result = attribute([profiled(rng)] * 2, [profiled(rng)] * 2)
    assert result.places == [] and result.reason == "2 profiled rounds, at least 3 are needed"


def attribution_of(extra_s, seed=5):
    rng = random.Random(seed)
    return attribute([profiled(rng, extra_s=extra_s) for _ in range(10)], [profiled(rng) for _ in range(10)],
                     profiler="Python stack sampled every 1 ms in the worker (bench.sampler)")


def test_results_json_keeps_every_place_and_reads_it_back(tmp_path):
    results = results_with(attribution_of(0.04))
    path = tmp_path / "results.json"
    path.write_text(results.to_json())
    data = json.loads(path.read_text())["cases"][0]["attribution"]
    assert data["places"][0]["place"] == SLOWED and len(data["places"]) == 41
    assert set(data["places"][0]) == {"place", "base_ms", "head_ms", "change_ms", "low_ms", "high_ms",
                                      "significant", "base_total_ms", "head_total_ms"}
    again = results_model.load(path)
    assert again.cases[0].attribution == results.cases[0].attribution


@pytest.mark.parametrize("change, message", [
    ({"places": [{"place": SLOWED}]}, "attribution.places[0]: missing field 'base_ms'"),
    ({"places": "all"}, "field 'places' must be a list, got 'all'"),
    ({"surprise": 1}, "unknown field 'surprise'"),
])
def test_a_malformed_attribution_is_one_line_naming_it(tmp_path, change, message):
    data = json.loads(results_with(attribution_of(0.04)).to_json())
    data["cases"][0]["attribution"].update(change)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    with pytest.raises(UserError) as raised:
        results_model.load(path)
    assert "(resnet50-bs2).attribution" in str(raised.value) and message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_the_places_follow_the_head_against_base_table():
    results = results_with(attribution_of(0.04))
    notes = notes_of(results)
    parts = notes.split("\n\n")
    # The table (the steady control not shown), the method's collapsed block, then the places.
    assert parts[0].endswith("| resnet50-bs2 OneFlow | 260.0ms | 313.3ms | +20.5% (+16.8% to +24.3%) "
                             "| \u274c regression after 10 rounds |")
    assert parts[1] == "<details><summary>How these verdicts are made</summary>" and parts[3] == "</details>"
    assert parts[4:7] == [
        ("Where the head spends more time than the base, resnet50-bs2 OneFlow: self time per step of each "
         "place (module:function), from 10 profiled rounds of each build after the timed ones, the Python "
         "stack sampled; the change is the trimmed mean of head minus base over pairs of rounds, its "
         "interval at 95% for all 41 places together."),
        ("| Place | Base | Head | Change (interval) | Total, base \u2192 head |\n"
         "| --- | ---: | ---: | --- | ---: |\n"
         "| oneflow.nn.optimizer.sgd:step | 1.1ms | 21.0ms | +20.0ms (+19.7ms to +20.3ms) "
         "| 1.1ms \u2192 21.0ms |"),
        "They explain 88% of the step's change, +22.8ms (197.9ms to 221.1ms per step, profiled).",
    ]
    assert len(parts) == 7
    # The block before the notes is the same with or without the attribution.
    plain = results_with(None)
    assert render_speed_stats(plain, None, judge(plain, None)).split("\n\n</details>\n\n", 1)[0] == \
        render_speed_stats(results, None, judge(results, None)).split("\n\n</details>\n\n", 1)[0]


def test_a_wait_for_queued_kernels_is_named_as_such_never_as_speedstats_own_code():
    # A kernel-side slowdown on the CPU: the main thread waits longer in the worker's sync.
    rng = random.Random(6)
    head = [profiled(rng) for _ in range(10)]
    for r in head:
        r.self_s["speedstats.bench.worker:sync"] = 0.034 + rng.gauss(0, 0.001)
    base = [profiled(rng) for _ in range(10)]
    for r in base:
        r.self_s["speedstats.bench.worker:sync"] = 0.0 + abs(rng.gauss(0, 0.001))
    notes = notes_of(results_with(attribute(head, base)))
    row = next(line for line in notes.splitlines() if "queued kernels" in line)
    assert row.startswith("| waiting for queued kernels at the step's end (speedstats.bench.worker:sync) | ")


def test_no_line_when_no_place_is_significant():
    unchanged = attribution_of(0.0)
    assert not unchanged.significant
    assert notes_of(results_with(unchanged)) == notes_of(results_with(None))


def test_at_most_five_places_are_shown():
    rng = random.Random(2)

    def slowed_round(extra):
        r = profiled(rng)
        for i in range(7):
            r.self_s[f"oneflow.module{i}:function"] += extra * (i + 1)
        return r

    record = attribute([slowed_round(0.01) for _ in range(10)], [profiled(rng) for _ in range(10)])
    assert len(record.significant) == 7
    notes = notes_of(results_with(record))
    assert "(5 of 7 places shown)" in notes
    rows = [line for line in notes.splitlines() if line.startswith("| oneflow.module")]
    assert [row.split(" | ")[0] for row in rows] == [f"| oneflow.module{i}:function" for i in (6, 5, 4, 3, 2)]


def test_the_suite_fields_and_their_one_line_errors():
    defaults = suite_from_dict({"cases": [{"id": "resnet50-bs2", "kind": "resnet50", "batch_size": 2,
                                           "times": 2}]}, "suite")
    assert (defaults.attribute, defaults.attribute_rounds, defaults.attribute_budget) == ("slower", 10, 0.25)
    assert fake_suite(attribute="always", attribute_rounds=4, attribute_budget=0.5).attribute_rounds == 4
    wrong_choice = "field 'attribute' must be one of slower, always, never, got 'sometimes'"
    for fields, message in [({"attribute": "sometimes"}, wrong_choice),
                            ({"attribute_rounds": 2}, "field 'attribute_rounds' must be at least 3, got 2"),
                            ({"attribute_budget": 1}, "field 'attribute_budget' must be below 1")]:
        with pytest.raises(UserError, match=message):
            fake_suite(**fields)


def test_a_slower_head_gets_profiled_rounds_alternating_after_the_timed_ones(tmp_path):
    bench = Bench(tmp_path)
    record = bench.run(fake_suite(rounds=1, times=10, attribute="slower", attribute_rounds=4,
                                  attribute_budget=0.9),
                       head_vs_base(0.12, SLOW_PROFILE))
    assert record.paired.verdict == "regression"
    profiled = [e.split(" others")[0] for e in bench.events if "profiled" in e]
    timed = [e for e in bench.events if " round " in e and "profiled" not in e]
    # In the second pair of workers, which timed rounds 0-4 of the 10.
    assert profiled == ["oneflow 1 profiled round 5", "oneflow_base 1 profiled round 5",
                        "oneflow_base 1 profiled round 6", "oneflow 1 profiled round 6",
                        "oneflow 1 profiled round 7", "oneflow_base 1 profiled round 7",
                        "oneflow_base 1 profiled round 8", "oneflow 1 profiled round 8"]
    first_profiled = next(e for e in bench.events if "profiled" in e)
    assert bench.events.index(timed[-1]) < bench.events.index(first_profiled)
    # The other build is stopped while one is profiled, as in the timed rounds.
    assert all(e.endswith("others T") for e in bench.events if "profiled" in e)
    attribution = record.attribution
    assert attribution.rounds == 4 and attribution.places[0].place == SLOWED
    # 40 ms more per round of one step (the plan cut 10 iterations into 10 rounds).
    assert attribution.places[0].change_ms == pytest.approx(40.0) and attribution.places[0].significant
    # The timed rounds are the rule's alone.
    assert len(record.frameworks[HEAD].rounds_s) == record.paired.rounds == 10


def test_a_head_as_fast_whose_main_thread_works_more_gets_profiled_rounds_that_say_where(tmp_path):
    # The head's rounds take as long as the base's, its main thread 22 ms of a 100 ms round longer: the
    # rule says "hidden work", and `attribute: slower` profiles it as it would a slower head.
    plan = head_vs_base(0.1, SLOW_PROFILE)
    plan[HEAD][0]["thread_cpu"], plan[BASE][0]["thread_cpu"] = [0.030], [0.008]
    bench = Bench(tmp_path)
    record = bench.run(fake_suite(rounds=1, times=10, attribute="slower", attribute_rounds=4,
                                  attribute_budget=0.9), plan)
    assert (record.paired.verdict, record.paired.stopped) == ("inconclusive", "hidden work")
    assert len([e for e in bench.events if "profiled" in e]) == 8
    assert record.attribution.places[0].place == SLOWED and record.attribution.places[0].significant


def test_an_unchanged_head_gets_no_profiled_round_unless_asked(tmp_path):
    bench = Bench(tmp_path / "slower")
    (tmp_path / "slower").mkdir()
    record = bench.run(fake_suite(rounds=1, times=10, attribute="slower"), head_vs_base(0.1, PROFILE))
    assert record.paired.verdict == "no change" and record.attribution is None
    assert not [e for e in bench.events if "profiled" in e]
    (tmp_path / "always").mkdir()
    always = Bench(tmp_path / "always")
    record = always.run(fake_suite(rounds=1, times=10, attribute="always", attribute_rounds=3,
                                   attribute_budget=0.9), head_vs_base(0.1, PROFILE))
    assert len([e for e in always.events if "profiled" in e]) == 6
    assert record.attribution.rounds == 3 and not record.attribution.significant


def test_the_case_cap_stops_the_profiled_rounds(tmp_path):
    # The profiled rounds' share would allow all ten, but the case may take only as long as its first
    # look, which the timed rounds took.
    bench = Bench(tmp_path)
    record = bench.run(fake_suite(rounds=1, times=10, attribute="slower", attribute_budget=0.9,
                                  head_vs_base={"case_cap_factor": 1}), head_vs_base(0.12, SLOW_PROFILE))
    assert record.paired.verdict == "regression"
    # A regression is still said where: the fewest profiled rounds that compare anything, past the cap.
    assert record.attribution.rounds == 3 and record.attribution.places[0].place == SLOWED
    reason = record.attribution.reason
    assert reason.startswith("the case's cap (")
    assert reason.endswith("left 0.0s, which allowed 0 profiled rounds; a head that leans slower gets the "
                           "fewest that compare anything, 3")


def test_pairs_after_a_disagreement_measure_past_the_cap_and_the_slower_head_is_still_said_where(tmp_path):
    # The build started first is 20% slower: the first two pairs disagree, and the case's cap (its first
    # look's time) leaves nothing. The two more pairs still measure all their rounds, and the regression
    # they show gets the fewest profiled rounds that compare anything, where the cap alone gives none
    # (test_the_case_cap_stops_the_profiled_rounds).
    head_first = {"rounds": [0.132, 0.133, 0.131], "profile": SLOW_PROFILE}
    base_first = {"rounds": [0.0917, 0.0918, 0.0916], "profile": SLOW_PROFILE}
    plan = {HEAD: [head_first, base_first, head_first, base_first],
            BASE: [{"rounds": [0.1], "profile": PROFILE}], PYTORCH: [{"rounds": [0.05]}]}
    bench = Bench(tmp_path)
    record = bench.run(fake_suite(rounds=1, times=10, attribute="slower", attribute_budget=0.9,
                                  head_vs_base={"case_cap_factor": 1}), plan)
    paired = record.paired
    assert (paired.verdict, paired.stopped, paired.stages) == ("regression", "shown", [5, 5, 5, 5])
    assert paired.start_order == pytest.approx(1.2, abs=0.01)
    assert record.attribution.rounds >= 3 and record.attribution.places[0].place == SLOWED


def test_the_budget_stops_the_profiled_rounds(tmp_path):
    bench = Bench(tmp_path)
    record = bench.run(fake_suite(rounds=1, times=10, attribute="slower", attribute_budget=0.0),
                       head_vs_base(0.12, SLOW_PROFILE))
    assert record.paired.verdict == "regression"
    assert record.attribution.rounds == 3 and record.attribution.reason == (
        "the budget of 0% of the case's wall time (0.0s) allowed 0 profiled rounds; a head that leans "
        "slower gets the fewest that compare anything, 3")
    # As fast as its base, with every case profiled: the budget has the last word.
    (tmp_path / "same").mkdir()
    same = Bench(tmp_path / "same")
    record = same.run(fake_suite(rounds=1, times=10, attribute="always", attribute_budget=0.0),
                      head_vs_base(0.1, PROFILE))
    assert not [e for e in same.events if "profiled" in e]
    assert record.attribution.places == [] and record.attribution.reason.startswith(
        "the budget of 0% of the case's wall time (0.0s) allowed 0 profiled rounds")


HEAVY_SUITE = """\
name: attribution
warmup: 2
attribute: always
# Other processes' load (other tests on a shared machine) is not judged: the rounds are kept.
disturbance: {max_other_cores: 1000.0}
cases:
  - {id: resnet50-bs2, kind: resnet50, batch_size: 2, image_size: 64, times: 10}
"""


def run_heavy_suite(tmp_path, oneflow_build_cache, head, base):
    """A real `speedstats run` of HEAVY_SUITE, head against base: the case's record and the comment."""
    suite = tmp_path / "suite.yml"
    suite.write_text(HEAVY_SUITE)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), SPEEDSTATS_LOCK_DIR=str(tmp_path / "locks"))
    env.pop("GITHUB_OUTPUT", None)
    command = [sys.executable, "-m", "speedstats", "run", "--suite", str(suite), "--device", "cpu",
               "--out", str(tmp_path / "out"), "--cache-dir", str(oneflow_build_cache), "--quiet",
               "--oneflow", str(head), "--baseline-oneflow", str(base)]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=1800,
                          check=False)
    assert proc.returncode in (0, 1), proc.stderr
    record = results_model.load(tmp_path / "out" / "results.json").cases[0]
    return record, (tmp_path / "out" / "comment.md").read_text()


@pytest.mark.heavy
def test_the_one_slowed_place_is_ranked_first_and_named(tmp_path, oneflow_build_cache,
                                                       busy_wait_oneflow_wheel, repacked_oneflow_wheel):
    """Real OneFlow: head 0.9.0+sgdwait40 (SGD.step busy-waits 40 ms per step) against 0.9.0+a.
    `attribute: always`, so a busy machine that hides the slowdown from the rule still profiles."""
    record, comment = run_heavy_suite(tmp_path, oneflow_build_cache, busy_wait_oneflow_wheel,
                                      repacked_oneflow_wheel)
    attribution = record.attribution
    assert attribution.rounds >= 3 and attribution.places_compared >= 3
    first = attribution.places[0]
    top = [(p.place, round(p.change_ms, 1), round(p.low_ms, 1), round(p.high_ms, 1), p.significant)
           for p in attribution.places[:4]]
    assert first.place == SLOWED_PLACE and first.significant, top
    assert 25 < first.change_ms < 60 and first.head_ms > 30
    # The worker measured its main thread's CPU time in every round: the head's busy wait is there,
    # whether or not the step's time showed it.
    paired = record.paired
    base = record.frameworks["oneflow_base"].rounds_s
    assert len(paired.work) == paired.rounds == len(base) and None not in paired.work
    extra_ms = sorted(w * b for w, b in zip(paired.work, base))[len(base) // 2] * 1000
    # The wait is one of wall time: on a busy machine its thread is descheduled for part of it, so its
    # CPU time is less than 40 ms, never more.
    assert 0 < extra_ms < 60, extra_ms
    assert f"| {SLOWED_PLACE} | " in comment
    assert "Where the head spends more time than the base, resnet50-bs2 OneFlow" in comment


@pytest.mark.heavy
def test_a_kernel_side_slowdown_is_named_by_the_ops_its_place_dispatches(tmp_path, oneflow_build_cache,
                                                                       batchnorm_oneflow_wheel,
                                                                       repacked_oneflow_wheel):
    """Real OneFlow: head 0.9.0+bnmul13 (BatchNorm's forward multiplies its input by 1.0 13 times) against
    0.9.0+a. The muls are queued kernels: on the CPU the sampled time shows mostly as waiting for them,
    and the counts name the place, whatever the machine's load (counts, not times, are asserted)."""
    record, comment = run_heavy_suite(tmp_path, oneflow_build_cache, batchnorm_oneflow_wheel,
                                      repacked_oneflow_wheel)
    attribution = record.attribution
    assert attribution.dispatch_rounds >= 1
    changes = [(d.place, d.op, d.change_per_call, d.head_calls) for d in attribution.dispatches]
    # ResNet50's 53 BatchNorms, 13 more `mul` each; nothing else dispatched differs.
    assert changes == [(BATCHNORM_PLACE, "mul", 13.0, 53.0)]
    assert (f"- `{BATCHNORM_PLACE}` dispatches 13 more `mul` per call (0 → 13), called 53 times per step"
            in comment.splitlines())
    assert "speedstats.bench.worker:sync |" not in comment  # the sync is never a place of its own


def test_a_worker_that_dies_in_a_profiled_round_keeps_its_timed_figures(tmp_path):
    bench = Bench(tmp_path)
    plan = head_vs_base(0.12, SLOW_PROFILE)
    # The second pair of workers times rounds 5-9 of the 10, then its first profiled round is its 6th.
    plan[HEAD].append({**plan[HEAD][0], "die_at": 5})
    record = bench.run(fake_suite(rounds=1, times=10, attribute="slower", attribute_budget=0.9), plan)
    assert record.failure is None and record.paired.verdict == "regression"
    assert len(record.frameworks[HEAD].rounds_s) == 10
    assert record.attribution.places == []
    assert record.attribution.reason.startswith("OneFlow failed in a profiled round: ")
