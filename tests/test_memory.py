"""Peak memory: the runner's sampler against real processes, NVML's processes through the stand-in
(tests/fakenvml.py: there is no GPU here), the head-against-base memory rule at its thresholds, the
memory lines after the Speed stats block byte for byte, and results.json keeping the figures."""

import os
import subprocess
import sys
import time

import pytest

from fakebench import Bench, suite
from fakenvml import fake_nvml, gpu
from speedstats.analysis.rule import SequentialRule
from speedstats.bench import machine_state, memory
from speedstats.contenders import HEAD, PYTORCH
from speedstats.render import render_speed_stats
from speedstats.results import CaseResult, FrameworkResult, Results, results_from_dict
from speedstats.suite import Suite, load_suite
from speedstats.verdict import MIB, judge

# A process that starts a child and then, once told, writes 64 MiB page by page in that child and holds
# it until told again; it prints the child's pid.
HOLDER = """
import mmap, subprocess, sys
CHILD = '''
import mmap, sys
sys.stdin.readline()
memory = mmap.mmap(-1, 64 << 20)
memory.madvise(mmap.MADV_NOHUGEPAGE)
for i in range(0, len(memory), mmap.PAGESIZE):
    memory[i] = 1
print("holding", flush=True)
sys.stdin.readline()
'''
child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
print(child.pid, flush=True)
sys.stdin.readline()
child.stdin.write("go\\n"); child.stdin.flush()
print(child.stdout.readline().strip(), flush=True)
sys.stdin.readline()
child.stdin.write("end\\n"); child.stdin.flush()
child.wait()
"""


def tell(process, line="go"):
    process.stdin.write(line + "\n")
    process.stdin.flush()


def test_the_sampler_sees_a_child_of_the_worker_take_64_mib_and_keeps_the_peak():
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        child_pid = int(holder.stdout.readline())
        time.sleep(0.2)
        # The sampler is given the worker's pid only: the child is found as its descendant.
        sampler = memory.PeakSampler([holder.pid], interval_s=0.01).start()
        time.sleep(0.3)
        before = sampler.peaks()["rss_bytes"]
        tell(holder)
        assert holder.stdout.readline() == "holding\n"
        time.sleep(0.3)
        held = memory.processes.resident_bytes(child_pid)
        tell(holder, "end")
        holder.wait(timeout=30)
        peaks = sampler.stop()
    finally:
        holder.kill()
        holder.wait()
    assert held >= 64 * MIB
    assert peaks["gpu_bytes"] is None and peaks["samples"] >= 20
    assert 64 * MIB <= peaks["rss_bytes"] - before < 80 * MIB
    assert sampler.error is None


def test_resident_bytes_of_a_process_that_is_gone_is_zero():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    assert memory.processes.resident_bytes(process.pid) == 0
    assert memory.processes.descendants([process.pid]) == set()


def test_the_sampler_sleeps_between_samples():
    """It must not keep a core busy beside the framework it measures."""
    sampler = memory.PeakSampler([os.getpid()], interval_s=0.02).start()
    cpu_before = time.process_time()  # the whole process's, the sampler thread's included
    time.sleep(1.0)
    cpu_used = time.process_time() - cpu_before
    sampler.stop()
    assert cpu_used < 0.5
    assert 15 <= sampler.samples <= 60


@pytest.fixture
def nvml(monkeypatch):
    def install(gpus):
        module = fake_nvml(gpus)
        monkeypatch.setitem(sys.modules, "pynvml", module)
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        return module

    return install


CONTAINER_PIDS = (4_194_304 + 101, 4_194_304 + 102, 4_194_304 + 103)  # host pids, not visible here


def test_workers_start_alone_on_a_watched_gpu_until_one_showed_its_own_pids(nvml):
    """On the CPU start windows are never needed; on a GPU NVML watches, until a worker started alone
    showed its GPU processes under pids of its own tree: not when another process appeared with it."""
    assert not machine_state.MachineWatch("cpu").start_windows_needed()
    own, foreign = 4242, CONTAINER_PIDS[0]
    for appeared, needed in (({own, foreign}, True), (set(), True), ({own}, False)):
        card = gpu()
        nvml([card])
        watch = machine_state.MachineWatch("cuda", machine_state.Gpus([0]))
        assert watch.start_windows_needed()
        watch.starting()
        card["processes"] = [(pid, 100 * MIB) for pid in sorted(appeared)]
        watch.started(tree=[own])
        assert watch.start_windows_needed() is needed


def test_in_a_container_the_workers_gpu_processes_are_those_that_appeared_while_it_started(nvml):
    """NVML reports host pids: a worker of two DDP ranks whose pids this /proc does not know is matched
    by the start window; another job's process, there before, is not counted."""
    foreign, rank0, rank1 = CONTAINER_PIDS
    card = gpu(processes=[(foreign, 4000 * MIB)])
    nvml([card])
    watch = machine_state.MachineWatch("cuda", machine_state.Gpus([0]))
    watch.starting()
    card["processes"] = [(foreign, 4000 * MIB), (rank0, 900 * MIB), (rank1, 700 * MIB)]
    ours = watch.started()
    assert ours == {rank0, rank1}
    sampler = memory.PeakSampler([], gpu_pids=watch.gpus.compute_pids, host_pids=ours)
    sampler.start()
    time.sleep(0.1)
    card["processes"] = [(foreign, 4000 * MIB), (rank0, 1200 * MIB), (rank1, 700 * MIB)]
    time.sleep(0.1)
    card["processes"] = [(foreign, 4000 * MIB), (rank0, 1000 * MIB), (rank1, 650 * MIB)]
    peaks = sampler.stop()
    assert peaks["gpu_bytes"] == 1900 * MIB


def test_the_worker_tree_in_the_same_namespace_is_matched_by_its_own_pids(nvml):
    """Outside a container NVML's pids are the tree's: the runner's own child (a rank) counts, a
    process NVML reports with no known pid and no start window does not."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        nvml([gpu(processes=[(child.pid, 300 * MIB), (CONTAINER_PIDS[0], 900 * MIB)]),
              gpu(processes=[(child.pid, 100 * MIB)])])
        gpus = machine_state.Gpus([0, 1])
        sampler = memory.PeakSampler([child.pid], gpu_pids=gpus.compute_pids)
        sampler.start()
        time.sleep(0.1)
        peaks = sampler.stop()
    finally:
        child.kill()
        child.wait()
    assert peaks["gpu_bytes"] == 400 * MIB  # both GPUs, the child's only
    assert peaks["rss_bytes"] > 0


def framework(seconds, peak, kind="rss-tree"):
    return FrameworkResult(total_s=seconds * 5, per_iter_s=seconds, times=5, rounds_s=[seconds] * 5,
                           sampled_peak_bytes=peak, sampled_memory_kind=kind, rss_peak_bytes=peak,
                           setup_s=12.5, images_per_s=2 / seconds)


def with_base(head_mib, base_mib, pytorch_mib=700):
    case = CaseResult(
        id="resnet50-bs2", kind="resnet50", batch_size=2, times=5, input_shape=[2, 3, 64, 64],
        frameworks={"oneflow": framework(0.2, int(head_mib * MIB)),
                    "oneflow_base": framework(0.2, int(base_mib * MIB)),
                    "pytorch": framework(0.15, int(pytorch_mib * MIB))})
    return Results(suite="smoke", device="cpu", gpu_name="CPU: Test (2 cores)", cases=[case],
                   builds={"oneflow": {}, "oneflow_base": {}})


def rule_suite(**rule):
    """A suite without cases, so without thresholds, but its head-vs-base rule."""
    return Suite(name="test", head_vs_base=SequentialRule(**rule))


@pytest.mark.parametrize("base_mib, head_mib, regression", [
    (1000, 1064, False),  # exactly 64 MiB more: not more than the threshold
    (1000, 1064 + 1 / MIB, True),  # a byte more
    (1000, 900, False),
    (4000, 4080, False),  # above 3200 MiB, 2% is more than 64 MiB: 80 MiB
    (4000, 4080 + 1 / MIB, True),
])
def test_a_head_holding_more_than_the_threshold_is_a_memory_regression_and_fails(base_mib, head_mib,
                                                                                regression):
    results = with_base(head_mib, base_mib)
    verdict = judge(results, rule_suite())
    assert verdict.memory_regressions == (["resnet50-bs2"] if regression else [])
    assert verdict.passed is not regression
    assert verdict.memory[0].threshold_bytes == max(64 * MIB, base_mib * MIB * 0.02)


def test_the_suite_switch_makes_a_memory_regression_a_note():
    verdict = judge(with_base(1200, 1000), rule_suite(memory="report"))
    assert verdict.memory_regressions == ["resnet50-bs2"] and verdict.passed
    verdict = judge(with_base(1200, 1000), rule_suite(memory_threshold_mib=256))
    assert verdict.memory_regressions == [] and verdict.passed


def test_peaks_of_different_kinds_are_not_compared():
    results = with_base(1200, 1000)
    results.cases[0].frameworks["oneflow_base"].sampled_memory_kind = "nvml-tree"
    verdict = judge(results, rule_suite())
    assert verdict.memory == [] and verdict.passed


def notes(body):
    return body.split("</details>", 1)[1]


WARM_UP = ("Warm-up, from the worker's start to its first timed round (reported, not judged): "
           "resnet50-bs2 12.5s, base 12.5s (+0.0%, one start each)")


def memory_part(results, suite):
    """The part of the notes with the memory and warm-up lines, each a paragraph of its own: between the
    table and the builds line."""
    return "\n".join(notes(render_speed_stats(results, suite, judge(results, suite))).split("\n\n")[-3:-1])


def test_the_memory_line_after_the_block_gives_the_signed_change_byte_for_byte():
    assert memory_part(with_base(1228, 1100), rule_suite()) == (
        "\u274c resnet50-bs2 memory: OneFlow 1228 MiB, base 1100 MiB, +128 MiB (+11.6%) regression\n"
        + WARM_UP)
    assert memory_part(with_base(1101, 1100), rule_suite()) == (
        "resnet50-bs2 memory: OneFlow 1101 MiB, base 1100 MiB, +1 MiB (+0.1%) within 64 MiB\n" + WARM_UP)
    assert memory_part(with_base(1228, 1100), rule_suite(memory="report")) == (
        "\u26a0\ufe0f resnet50-bs2 memory: OneFlow 1228 MiB, base 1100 MiB, +128 MiB (+11.6%) "
        "regression (reported, not judged)\n" + WARM_UP)
    assert memory_part(with_base(1100 - 0.3, 1100), rule_suite()).startswith(
        "resnet50-bs2 memory: OneFlow 1100 MiB, base 1100 MiB, +0 MiB (+0.0%) within 64 MiB\n")
    results = with_base(1228, 1100)
    results.cases[0].frameworks["oneflow"].setup_s = 15.0
    assert memory_part(results, rule_suite()).endswith(
        "resnet50-bs2 15.0s, base 12.5s (+20.0%, one start each)")


def test_the_warm_up_line_gives_each_pair_of_processes_change_byte_for_byte():
    results = with_base(1101, 1100)
    head, base = results.cases[0].frameworks["oneflow"], results.cases[0].frameworks["oneflow_base"]
    head.setup_starts_s, head.setup_s = [3.3, 2.9], 3.1
    base.setup_starts_s, base.setup_s = [3.0, 3.0], 3.0
    assert memory_part(results, rule_suite()).split("\n")[1] == (
        "Warm-up, from the worker's start to its first timed round (reported, not judged): "
        "resnet50-bs2 3.1s, base 3.0s (+3.3%, the median of 2 starts each; pair by pair +10.0%, -3.3%)")
    base.setup_starts_s = [3.0]
    assert memory_part(results, rule_suite()).endswith("(+3.3%, the median of 2 and 1 starts)")


def test_the_block_itself_is_unchanged_by_the_memory_lines():
    results = with_base(1228, 1100)
    for case in results.cases:
        for fw in case.frameworks.values():
            fw.sampled_peak_bytes = fw.sampled_memory_kind = fw.rss_peak_bytes = None
    plain = render_speed_stats(results, rule_suite(), judge(results, rule_suite()))
    results = with_base(1228, 1100)
    body = render_speed_stats(results, rule_suite(), judge(results, rule_suite()))
    assert body.split("</details>")[0] == plain.split("</details>")[0]
    assert "memory:" not in plain


def test_without_a_baseline_show_memory_gives_both_frameworks_measured_the_same_way():
    results = with_base(1228, 1100, pytorch_mib=812.4)
    del results.cases[0].frameworks["oneflow_base"]
    results.builds = {}
    suite = load_suite(profile="smoke")
    body = render_speed_stats(results, suite, judge(results, suite), show_memory=True)
    assert notes(body).endswith(
        "\n\nresnet50-bs2 peak resident memory of the process tree: OneFlow 1228 MiB, PyTorch 812 MiB")
    assert "peak resident" not in render_speed_stats(results, suite, judge(results, suite))


def test_results_json_keeps_the_memory_warm_up_and_throughput_figures():
    results = with_base(1228, 1100)
    again = results_from_dict(results.to_dict())
    head = again.cases[0].frameworks["oneflow"]
    assert (head.sampled_peak_bytes, head.sampled_memory_kind, head.rss_peak_bytes) == (
        1228 * MIB, "rss-tree", 1228 * MIB)
    assert head.setup_s == 12.5 and head.images_per_s == pytest.approx(10.0)
    results.cases[0].frameworks["oneflow"].setup_starts_s = [12.0, 13.0]
    assert results_from_dict(results.to_dict()).cases[0].frameworks["oneflow"].setup_starts_s == [12.0, 13.0]
    # An older reader's results (no such fields) read as before.
    data = results.to_dict()
    for fw in data["cases"][0]["frameworks"].values():
        for key in ("sampled_peak_bytes", "sampled_memory_kind", "rss_peak_bytes", "setup_s", "images_per_s"):
            del fw[key]
    assert results_from_dict(data).cases[0].frameworks["oneflow"].sampled_peak_bytes is None


@pytest.mark.parametrize("key, value, message", [
    ("sampled_peak_bytes", -1, "field 'sampled_peak_bytes' must be between 0 and 9007199254740992"),
    ("setup_s", 0, "field 'setup_s' must be between 1e-09 and 1e"),
    ("setup_starts_s", [3.0, -1], r"field 'setup_starts_s\[1\]' must be between 1e-09 and 1e"),
    ("setup_starts_s", [3.0] * 12, "field 'setup_starts_s' has 12 entries, at most 11"),
    ("setup_starts_s", "x", "field 'setup_starts_s'"),
    ("images_per_s", -3.0, "field 'images_per_s' must be between 0 and 1e"),
])
def test_a_bad_memory_or_warm_up_figure_is_named(key, value, message):
    from speedstats.errors import UserError

    data = with_base(1228, 1100).to_dict()
    data["cases"][0]["frameworks"]["oneflow"][key] = value
    with pytest.raises(UserError, match=message):
        results_from_dict(data)



def test_the_history_carries_the_peaks_and_trend_draws_them_below_the_times(tmp_path):
    pytest.importorskip("matplotlib")
    from speedstats.analysis.trend import draw_trends
    from speedstats.history import append_history, read_history

    path = tmp_path / "history.jsonl"
    older = with_base(1100, 1100)
    for fw in older.cases[0].frameworks.values():
        fw.sampled_peak_bytes = fw.sampled_memory_kind = None  # a run before memory was sampled
    append_history(path, older, commit="a" * 40)
    append_history(path, with_base(1100, 1100, pytorch_mib=700), commit="b" * 40)
    append_history(path, with_base(1228, 1100, pytorch_mib=705), commit="c" * 40)
    entries, problems = read_history(path)
    assert problems == []
    assert entries[2].results.cases[0].frameworks["oneflow"].sampled_peak_bytes == 1228 * MIB
    (plot,), _ = draw_trends(entries, tmp_path / "trend")
    times, peaks = plot.figure.axes
    assert times.get_ylabel() == "time per iteration (ms)" and peaks.get_ylabel() == "peak memory (MiB)"
    oneflow, pytorch = (line.get_ydata() for line in peaks.get_lines())
    assert oneflow[0] != oneflow[0] and list(oneflow[1:]) == [1100, 1228]
    assert list(pytorch[1:]) == [700, 705]


def test_results_json_says_what_a_case_could_resolve_and_older_readers_ignore_it():
    from speedstats.analysis.paired import judge_paired

    results = with_base(1100, 1100)
    base = [0.2] * 10
    head = [0.2 * r for r in (1.01, 0.99, 1.02, 0.98, 1.0, 1.01, 0.99, 1.0, 1.02, 0.98)]
    results.cases[0].paired = judge_paired(head, base)
    paired = results.cases[0].paired
    expected = 1.04 * (paired.high / paired.low) ** 0.5 - 1
    assert results.to_dict()["cases"][0]["paired"]["resolvable"] == pytest.approx(expected)
    assert 0.04 < expected < 0.08
    assert results_from_dict(results.to_dict()).cases[0].paired.resolvable == pytest.approx(expected)


class CountingGpu(dict):
    """A stand-in NVML GPU whose energy counter goes up 5000 mJ at each read, or has none (before Volta)."""

    def __init__(self, counter=True):
        super().__init__(gpu(energy_mj=0 if counter else "NOT_SUPPORTED"))

    def __getitem__(self, key):
        value = super().__getitem__(key)
        if key == "energy_mj" and value != "NOT_SUPPORTED":
            self["energy_mj"] = value + 5000
        return value


def test_energy_per_step_from_the_counter_and_null_without_one(tmp_path, nvml):

    plan = {HEAD: [{"rounds": [1.0]}], PYTORCH: [{"rounds": [1.0]}]}
    for name in ("with", "without"):
        (tmp_path / name).mkdir()
    nvml([CountingGpu(), CountingGpu()])
    record = Bench(tmp_path / "with").run(suite(rounds=3, times=2), plan, device="cuda:0", quiet_wait_s=0)
    # Two iterations a round (times), 5 J a round: one GPU of the run (cuda:0), read before and after it.
    assert record.frameworks[HEAD].energy_per_step_j == 2.5
    assert record.frameworks[PYTORCH].energy_per_step_j == 2.5
    nvml([CountingGpu(counter=False)])
    record = Bench(tmp_path / "without").run(suite(rounds=3, times=2), plan, device="cuda:0", quiet_wait_s=0)
    assert record.frameworks[HEAD].energy_per_step_j is None
    # The worker's own processes hold no GPU memory here: the GPU figure is 0, so none is recorded.
    assert record.frameworks[HEAD].sampled_memory_kind == "rss-tree"
    assert record.frameworks[HEAD].rss_peak_bytes > 0 and record.frameworks[HEAD].setup_s > 0
