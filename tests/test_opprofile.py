"""Each op's own time from the framework's profiler, in the profiled rounds: PyTorch's profiler in a real
worker on the CPU (and the ops each place dispatched, counted); a real OneFlow worker on the CPU, where
its profiler must not start (its ops counted all the same); OneFlow's events as its C++ profiler hands
them to Python (that profiler aborts without a GPU driver, so its JSON is the boundary stood in here, read
by OneFlow's own Python classes); the ops judged head against base with the places; results.json's `ops`;
and the lines after the places."""

import json
import random
import subprocess
import sys
import textwrap

import pytest

from fakebench import PROFILE, SLOW_PROFILE, Bench, head_vs_base
from fakebench import suite as fake_suite
from helpers import notes_of, profiled, results_with
from oneflow_builds import SLOWED_PLACE
from speedstats import results as results_model
from speedstats.analysis.attribution import attribute
from speedstats.bench import protocol
from speedstats.bench.environment import subprocess_env
from speedstats.bench.opprofile import ONEFLOW_NEEDS_GPU
from speedstats.bench.workerspec import WorkerSpec
from speedstats.contenders import BASE
from speedstats.errors import UserError


def profiled_worker_round(tmp_path, framework):
    """Round 0 of a real worker on the CPU, profiled with its ops profiled too (spec.op_profile)."""
    control = tmp_path / framework
    control.mkdir()
    spec = WorkerSpec(framework=framework, device="cpu", batch_size=2, image_size=64, times=2, warmup=1,
                      rounds=2, op_profile=True, timeout_s=300)
    (control / protocol.SPEC_FILE).write_text(spec.to_json())
    (control / protocol.round_start_file(0, protocol.PROFILE)).write_text("")
    (control / protocol.STOP_FILE).write_text("")  # read only once round 0 is done: round 1 never runs
    proc = subprocess.run([sys.executable, "-m", "speedstats.bench.worker", "--control", str(control)],
                          env=subprocess_env(framework), capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not (control / protocol.round_file(1)).exists()
    return json.loads((control / protocol.round_file(0)).read_text())


@pytest.mark.heavy
def test_pytorch_ops_are_profiled_in_a_real_worker_on_the_cpu(tmp_path):
    report = profiled_worker_round(tmp_path, "pytorch")
    profile = report["profile"]
    assert profile["op_device"] == "cpu" and profile["self_s"]  # the Python stack sampled as well
    own, total = profile["op_self_s"], profile["op_total_s"]
    assert any(op.startswith("aten::") and "convolution" in op for op in own), sorted(own)[:20]
    assert all(seconds > 0 for seconds in own.values())
    # An op's total takes in its own time; their own times add up to less than the round.
    assert all(total[op] >= seconds for op, seconds in own.items())
    assert 0 < sum(own.values()) <= report["total_s"]
    # The ops each place dispatched, counted in the same round: ResNet50's 53 convolutions a step, 2 steps.
    assert profile["count_steps"] == 2
    assert profile["op_counts"]["torch.nn.modules.conv:_conv_forward"] == {"conv2d": 106}
    assert profile["place_calls"]["torch.nn.modules.conv:_conv_forward"] == 106
    assert profile["op_counts"]["speedstats.bench.models:forward"]["add"] == 32  # `out + identity`


@pytest.mark.heavy
def test_a_oneflow_worker_on_the_cpu_never_starts_its_profiler_and_says_why(tmp_path):
    # OneFlow 0.9.0's profiler would abort this process when it stops, for want of a GPU driver.
    report = profiled_worker_round(tmp_path, "oneflow")
    profile = report["profile"]
    assert profile["op_reason"] == ONEFLOW_NEEDS_GPU
    assert "op_self_s" not in profile and profile["self_s"] and report["total_s"] > 0
    # Its ops are counted all the same: each BatchNorm's one normalization, 53 a step, 2 steps.
    assert profile["op_counts"]["oneflow.nn.modules.batchnorm:forward"] == {"normalization": 106}
    assert profile["place_calls"]["oneflow.nn.modules.batchnorm:forward"] == 106


def kernel_event(name, cpu_us, kernels_us, runtime_us=5.0):
    """One op's event as OneFlow's C++ profiler writes it: its CUDA kernels and a runtime call below."""
    children = [{"type": 0, "name": f"{name}_kernel", "time": us, "custom_type": 1} for us in kernels_us]
    children.append({"type": 0, "name": "cudaLaunchKernel", "time": runtime_us, "custom_type": 2})
    return {"type": 1, "name": name, "time": cpu_us, "memory_size": -1, "input_shapes": "-",
            "children": children}


ONEFLOW_EVENTS = """
    import json, sys
    from oneflow.profiler.events import Events
    from speedstats.bench.opprofile import oneflow_op_times

    own, total = oneflow_op_times(Events(sys.argv[1]).key_averages())
    print(json.dumps({"own": own, "total": total}))
"""


@pytest.mark.heavy
def test_oneflow_ops_are_their_kernels_device_time_from_its_own_event_classes():
    recorded = [
        kernel_event("conv2d", 900.0, [300.0]),
        kernel_event("conv2d", 850.0, [250.0]),
        kernel_event("conv2d", 800.0, [100.0, 50.0]),  # two kernels: a key of its own, the same op
        kernel_event("relu", 40.0, [20.0]),
        {"type": 1, "name": "reshape", "time": 12.0, "memory_size": -1, "input_shapes": "-",
         "children": []},  # no kernel: it ran on the CPU
        {"type": 0, "name": "step", "time": 5000.0, "custom_type": 0},  # a record_function range
    ]
    # In a process of its own: importing OneFlow sets RANK=-1 in the environment, which every worker
    # this test process starts afterwards would inherit.
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(ONEFLOW_EVENTS), json.dumps(recorded)],
                          env=subprocess_env("oneflow"), capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    times = json.loads(proc.stdout.strip().splitlines()[-1])
    assert times["own"] == pytest.approx({"conv2d": 700e-6, "relu": 20e-6}) and times["total"] == times["own"]


def op_round(rng, steps=2, slowed_op_s=0.0, places_rng=None):
    """A profiled round with 30 ops around 4 ms per step on the device, conv2d costing slowed_op_s more."""
    r = profiled(places_rng or rng, places=10, steps=steps)
    r.op_self_s = {f"op{i}": max(0.0, rng.gauss(0.008, 0.0008)) for i in range(30)}
    r.op_self_s["conv2d"] = max(0.0, rng.gauss(0.02, 0.001)) + slowed_op_s
    r.op_total_s = dict(r.op_self_s)
    r.op_device = "cuda"
    r.total_s += slowed_op_s  # the step waits for the device
    return r


def test_a_slowed_op_is_significant_and_ranked_first_and_an_unchanged_one_is_not():
    rng = random.Random(11)
    slowed = attribute([op_round(rng, slowed_op_s=0.006) for _ in range(10)],
                       [op_round(rng) for _ in range(10)])
    assert slowed.ops_compared == 31 and slowed.ops_device == "cuda" and slowed.places_compared == 11
    assert slowed.ops[0].place == "conv2d" and slowed.significant_ops == [slowed.ops[0]]
    assert slowed.ops[0].change_ms == pytest.approx(3.0, abs=0.5)  # 6 ms a round of 2 steps
    unchanged = attribute([op_round(rng) for _ in range(10)], [op_round(rng) for _ in range(10)])
    assert unchanged.significant_ops == [] and not any(p.significant for p in unchanged.ops)


def test_the_correction_counts_the_places_and_the_ops_together():
    def rounds(with_ops):
        rng, places_rng = random.Random(3), random.Random(4)
        made = [op_round(rng, places_rng=places_rng) for _ in range(20)]
        if not with_ops:
            for r in made:
                r.op_self_s, r.op_total_s, r.op_device = {}, {}, None
        return made[:10], made[10:]

    alone, together = attribute(*rounds(False)), attribute(*rounds(True))
    assert alone.ops == [] and alone.ops_compared == 0 and together.ops_compared == 31
    width = {p.place: p.high_ms - p.low_ms for p in alone.places}
    # The same places' figures, each interval wider: 11 places alone, 11 and 31 ops together.
    for p in together.places:
        assert p.change_ms == pytest.approx(next(q.change_ms for q in alone.places if q.place == p.place))
        assert p.high_ms - p.low_ms > width[p.place]


def test_ops_are_compared_only_when_every_round_profiled_them():
    rng = random.Random(5)
    head = [op_round(rng) for _ in range(4)]
    base = [op_round(rng) for _ in range(4)]
    base[2].op_self_s, base[2].op_device, base[2].op_reason = {}, None, ONEFLOW_NEEDS_GPU
    record = attribute(head, base)
    assert record.ops == [] and record.ops_compared == 0 and record.ops_reason == ONEFLOW_NEEDS_GPU
    assert record.places_compared == 11


CUDA_PROFILE = {**PROFILE, "op_self_s": {"conv2d": 0.02, "relu": 0.004},
                "op_total_s": {"conv2d": 0.02, "relu": 0.004}, "op_device": "cuda"}
CUDA_SLOW_PROFILE = {**SLOW_PROFILE, "op_self_s": {"conv2d": 0.03, "relu": 0.004},
                     "op_total_s": {"conv2d": 0.03, "relu": 0.004}, "op_device": "cuda"}


def test_the_rounds_ops_reach_results_json_and_read_back(tmp_path):
    # The fake worker reports what a worker on CUDA would (the ops beside the places): the runner
    # judges them with the places and writes them out.
    bench = Bench(tmp_path)
    plan = head_vs_base(0.12, CUDA_SLOW_PROFILE)
    plan[BASE][0]["profile"] = CUDA_PROFILE
    record = bench.run(fake_suite(rounds=1, times=10, attribute="slower", attribute_rounds=4,
                                  attribute_budget=0.9), plan)
    attribution = record.attribution
    assert attribution.rounds == 4 and attribution.ops_compared == 2 and attribution.places_compared == 2
    assert attribution.ops_profiler.startswith("the framework's own profiler")
    conv = attribution.ops[0]
    assert (conv.place, conv.significant) == ("conv2d", True)
    assert conv.change_ms == pytest.approx(10.0)  # 10 ms more per round of one step
    results = results_with(attribution)
    path = tmp_path / "results.json"
    path.write_text(results.to_json())
    assert results_model.load(path).cases[0].attribution == attribution


def test_a_malformed_op_is_one_line_naming_it(tmp_path):
    data = json.loads(results_with(attribute([op_round(random.Random(1)) for _ in range(3)],
                                             [op_round(random.Random(2)) for _ in range(3)])).to_json())
    data["cases"][0]["attribution"]["ops"][1]["low_ms"] = "n/a"
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    with pytest.raises(UserError) as error:
        results_model.load(path)
    assert str(error.value).endswith(
        ".attribution.ops[1]: field 'low_ms' must be a number, got 'n/a'")


def cuda_attribution(slowed_op_s, slowed_place_s=0.0):
    rng = random.Random(7)
    head = [op_round(rng, slowed_op_s=slowed_op_s) for _ in range(10)]
    for r in head:
        r.self_s[SLOWED_PLACE] += slowed_place_s
        r.place_total_s[SLOWED_PLACE] += slowed_place_s
        r.total_s += slowed_place_s
    return attribute(head, [op_round(rng) for _ in range(10)])


def test_the_ops_follow_the_places_after_the_table():
    notes = notes_of(results_with(cuda_attribution(0.006, slowed_place_s=0.04)))
    parts = notes.split("\n\n")
    assert parts[4].startswith("Where the head spends more time than the base, resnet50-bs2 OneFlow: ")
    assert parts[4].endswith("its interval at 95% for all 11 places and 31 ops together.")
    assert parts[5].endswith("| oneflow.nn.optimizer.sgd:step | 1.0ms | 21.0ms "
                             "| +19.9ms (+19.7ms to +20.2ms) | 1.0ms \u2192 21.0ms |")
    assert parts[7:] == [
        ("Where the head's ops take more CUDA time than the base's, resnet50-bs2 OneFlow: each op's own "
         "device time per step, from the same 10 profiled rounds, the framework's profiler; the change "
         "and its interval as for the places, at 95% for all 11 places and 31 ops together."),
        ("| Op | Base | Head | Change (interval) |\n"
         "| --- | ---: | ---: | --- |\n"
         "| conv2d | 10.0ms | 13.2ms | +3.3ms (+2.3ms to +4.3ms) |"),
        "They add up to +3.3ms per step, 14% of the step's change, +23.1ms.",
    ]


def test_ops_alone_are_shown_when_no_place_is_significant():
    notes = notes_of(results_with(cuda_attribution(0.006)))
    parts = notes.split("\n\n")
    assert parts[4] == (
        "Where the head's ops take more CUDA time than the base's, resnet50-bs2 OneFlow: each op's own "
        "device time per step, from 10 profiled rounds of each build after the timed ones, the "
        "framework's profiler; the change is the trimmed mean of head minus base over pairs of rounds, "
        "its interval at 95% for all 11 places and 31 ops together.")
    assert parts[6] == "They add up to +3.3ms per step, 109% of the step's change, +3.1ms."
    assert "Where the head spends more time than the base" not in notes
    assert notes_of(results_with(cuda_attribution(0.0))) == notes_of(results_with(None))
