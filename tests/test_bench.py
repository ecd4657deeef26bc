"""The benchmark engine with real OneFlow and real PyTorch on tiny inputs (CPU)."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from busy_machine import TOLERATE_OTHER_LOAD
from speedstats import results as results_model
from speedstats.bench import protocol
from speedstats.bench.environment import subprocess_env

pytestmark = pytest.mark.heavy

ROOT = Path(__file__).resolve().parents[1]
HEAD_SHA = "0123456789abcdef0123456789abcdef01234567"

# One case of each kind, a case that cannot finish in its timeout, and a shape PyTorch rejects
# (batch norm over a 1x1 map with batch 1). They run in this order.
TINY_SUITE = """\
name: tiny
warmup: 1
timeout_s: 240
env: {SPEEDSTATS_TEST_SUITE_VAR: from the suite, NVIDIA_TF32_OVERRIDE: 0}
dataset: {images: 24, classes: 2, min_side: 64, max_side: 96}
cases:
  - {id: resnet50-bs2, kind: resnet50, batch_size: 2, image_size: 32, times: 1, rounds: 2,
     min_relative_speed: 0.01}
  - {id: never-ready, kind: resnet50, batch_size: 2, image_size: 32, times: 1, timeout_s: 1}
  - {id: resnet50-ddp-bs2, kind: resnet50, ddp: true, world_size: 2, batch_size: 2, image_size: 32, times: 1,
     env: {OMP_NUM_THREADS: 1, SPEEDSTATS_TEST_CASE_VAR: from the case}}
  - {id: impossible-shape, kind: resnet50, batch_size: 1, image_size: 16, times: 1}
  - {id: swin-dataloader-w1, kind: swin_dataloader, batch_size: 4, num_workers: 1, input_size: 64, times: 3}
""" + TOLERATE_OTHER_LOAD


def speedstats(*args, env=None, cwd=None):
    full_env = dict(os.environ if env is None else env)
    full_env["PYTHONPATH"] = str(ROOT / "src")
    return subprocess.run([sys.executable, "-m", "speedstats", *args], capture_output=True, text=True,
                          env=full_env, cwd=cwd, timeout=900, check=False)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tiny")
    suite = tmp / "tiny.yml"
    suite.write_text(TINY_SUITE)
    out = tmp / "out"
    event = tmp / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7, "head": {"sha": HEAD_SHA}}}))
    env = dict(os.environ, SPEEDSTATS_LOCK_DIR=str(tmp / "locks"), GITHUB_OUTPUT=str(tmp / "outputs"),
               GITHUB_EVENT_PATH=str(event), GITHUB_REPOSITORY="octo/flow", GITHUB_RUN_ID="4242",
               GITHUB_SHA="f" * 40)
    proc = speedstats("run", "--suite", str(suite), "--device", "cpu", "--out", str(out),
                      "--cache-dir", str(tmp / "cache"), "--bundle", str(tmp / "bundle"),
                      "--history", str(tmp / "history.jsonl"), env=env)
    raw = json.loads((out / "results.json").read_text())
    return proc, out, raw, results_model.results_from_dict(raw)


def case(results, case_id):
    return next(c for c in results.cases if c.id == case_id)


def test_every_case_kind_gets_real_figures_from_both_frameworks(tiny_run):
    _, _, _, results = tiny_run
    for case_id in ("resnet50-bs2", "resnet50-ddp-bs2", "swin-dataloader-w1"):
        record = case(results, case_id)
        assert record.failure is None, (case_id, record.failure)
        for name in ("oneflow", "pytorch"):
            fw = record.frameworks[name]
            assert fw.total_s > 0 and fw.per_iter_s == pytest.approx(fw.total_s / fw.times)
            rounds = 2 if case_id == "resnet50-bs2" else 1
            assert fw.times == record.times and len(fw.rounds_s) == fw.spread_s["n"] == rounds
            assert fw.spread_s["median"] == fw.per_iter_s
            assert fw.spread_s["min"] == min(fw.rounds_s) and fw.spread_s["max"] == max(fw.rounds_s)
            assert fw.memory_kind == "rss" and fw.peak_memory_bytes > 50 * 2**20
    ddp = case(results, "resnet50-ddp-bs2")
    assert ddp.ddp is True and ddp.world_size == 2 and ddp.input_shape == [2, 3, 32, 32]
    loader = case(results, "swin-dataloader-w1")
    assert loader.num_workers == 1 and loader.input_shape is None


def test_the_suites_env_reaches_every_worker_and_every_ddp_rank(tiny_run):
    _, out, _, _ = tiny_run
    suite_env = {"SPEEDSTATS_TEST_SUITE_VAR": "from the suite", "NVIDIA_TF32_OVERRIDE": "0"}
    expected = {
        ("resnet50-bs2", 0): suite_env,
        ("swin-dataloader-w1", 0): suite_env,
        **{("resnet50-ddp-bs2", rank): dict(suite_env, OMP_NUM_THREADS="1",
                                            SPEEDSTATS_TEST_CASE_VAR="from the case") for rank in (0, 1)},
    }
    for (case_id, rank), env in expected.items():
        for fw in ("oneflow", "pytorch"):
            seen = json.loads((out / "workers" / case_id / fw / protocol.env_file(rank)).read_text())
            assert seen == env, (case_id, fw, rank)


def test_results_record_how_each_case_was_measured(tiny_run):
    _, _, _, results = tiny_run
    suite_env = {"SPEEDSTATS_TEST_SUITE_VAR": "from the suite", "NVIDIA_TF32_OVERRIDE": "0"}
    bs2, ddp = case(results, "resnet50-bs2"), case(results, "resnet50-ddp-bs2")
    assert (bs2.mode, bs2.model, bs2.env) == ("old-bot", "shared", suite_env)
    assert ddp.env == dict(suite_env, OMP_NUM_THREADS="1", SPEEDSTATS_TEST_CASE_VAR="from the case")


def test_rounds_alternate_between_the_frameworks(tiny_run):
    _, out, _, _ = tiny_run
    from speedstats.bench.schedule import round_order

    work = out / "workers" / "resnet50-bs2"
    frameworks = ["oneflow", "pytorch"]
    rounds = [json.loads((work / fw / protocol.round_file(k)).read_text())
              for k in (0, 1) for fw in round_order(frameworks, k)]
    # OneFlow round 1, PyTorch round 1, then PyTorch round 2, OneFlow round 2: never overlapping
    assert [round_order(frameworks, k) for k in (0, 1)] == [frameworks, frameworks[::-1]]
    for earlier, later in zip(rounds, rounds[1:]):
        assert earlier["ended_unix"] <= later["started_unix"]
    # Each round also says how long the worker's main thread ran on the CPU: some, and never more than
    # the round took (the clocks' ticks aside).
    for report in rounds:
        assert 0 < report["thread_cpu_s"] <= report["total_s"] + 0.02, report


def test_failed_cases_are_recorded_and_the_others_still_measured(tiny_run):
    proc, _, _, results = tiny_run
    assert proc.returncode == 3, proc.stderr
    timed_out = case(results, "never-ready")
    for name in ("oneflow", "pytorch"):
        assert "timed out after 1s" in timed_out.frameworks[name].error
    impossible = case(results, "impossible-shape")
    assert "Expected more than 1 value per channel" in impossible.frameworks["pytorch"].error
    assert ("never-ready" in proc.stderr.splitlines()[-1]
            and "impossible-shape" in proc.stderr.splitlines()[-1])
    # cases after the failures ran normally
    assert case(results, "swin-dataloader-w1").failure is None


def test_results_json_follows_the_schema(tiny_run):
    _, _, raw, results = tiny_run
    assert raw["schema"] == results_model.SCHEMA
    assert raw["device"] == "cpu" and raw["gpu_name"].startswith("CPU: ")
    assert raw["suite"] == "tiny"
    for key in ("oneflow", "torch", "torchvision", "flowvision", "timm"):
        assert raw["versions"][key], key
    assert raw["versions"]["oneflow"] == "0.9.0"
    assert raw["started_at"] <= raw["finished_at"]
    assert [c["id"] for c in raw["cases"]] == [
        "resnet50-bs2", "never-ready", "resnet50-ddp-bs2", "impossible-shape", "swin-dataloader-w1"]
    for record in raw["cases"]:
        assert set(record) >= {"id", "kind", "batch_size", "times", "input_shape", "num_workers", "ddp",
                               "world_size", "started_at", "finished_at", "error", "frameworks"}
        for fw in record["frameworks"].values():
            assert set(fw) >= {"total_s", "per_iter_s", "times", "rounds_s", "spread_s", "peak_memory_bytes",
                               "memory_kind", "error"}
    # what it wrote loads back through the validating loader unchanged
    assert results_model.loads(results.to_json()).to_dict() == results.to_dict()


def test_run_prints_and_writes_the_rendered_comment(tiny_run):
    proc, out, _, _ = tiny_run
    body = (out / "comment.md").read_text(encoding="utf-8")
    assert body.startswith("<details>\n <summary>Speed stats:</summary>\n\n ``` \nGPU Name: CPU: ")
    assert proc.stdout == body + "\n"
    assert "OneFlow resnet50 time: " in body and "input_shape=[2, 3, 32, 32], ddp, world size=2)" in body
    assert "OneFlow swin dataloader time: " in body and "num_workers=1)" in body


def test_bundle_history_and_action_outputs_carry_the_same_run(tiny_run):
    from speedstats.actions_io import read_outputs
    from speedstats.bundle import read_bundle
    from speedstats.history import read_history

    _, out, _, results = tiny_run
    tmp = out.parent
    bundle = read_bundle(tmp / "bundle")
    assert (bundle.repo, bundle.pr_number, bundle.head_sha, bundle.run_id) == ("octo/flow", 7, HEAD_SHA, 4242)
    assert bundle.body == (out / "comment.md").read_text(encoding="utf-8")
    assert bundle.results.to_dict() == results.to_dict()
    outputs = read_outputs(tmp / "outputs")
    assert outputs["verdict"] == "fail" and int(outputs["score"]) >= 4
    assert outputs["results"] == str(out / "results.json")
    entries, problems = read_history(tmp / "history.jsonl")
    assert problems == [] and len(entries) == 1 and entries[0].commit == "f" * 40
    assert entries[0].results.to_dict() == results.to_dict()


def test_progress_names_case_framework_and_round(tiny_run):
    proc, _, _, _ = tiny_run
    assert "[1/5] resnet50-bs2 (resnet50, input_shape=[2, 3, 32, 32])" in proc.stderr
    assert "[3/5]   PyTorch: round 1/1: " in proc.stderr
    assert "[5/5]   OneFlow: ready after " in proc.stderr


def test_an_interrupted_run_leaves_no_worker_behind_and_says_it_was_cancelled(tmp_path):
    """SIGINT (Ctrl-C, and the first signal of a cancelled GitHub job); the DDP and SIGTERM cases are
    in test_orphans.py."""
    suite = tmp_path / "long.yml"
    suite.write_text("name: long\nwarmup: 0\ncases:\n"
                     "  - {id: long, kind: resnet50, batch_size: 2, image_size: 32, times: 100000}\n")
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), SPEEDSTATS_LOCK_DIR=str(tmp_path / "locks"))
    proc = subprocess.Popen([sys.executable, "-m", "speedstats", "run", "--suite", str(suite), "--device",
                             "cpu",
                             "--out", str(out)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    for line in proc.stderr:
        if "PyTorch: ready after" in line:
            break
    pids = [int((out / "workers" / "long" / fw / protocol.pid_file(0)).read_text())
            for fw in ("oneflow", "pytorch")]
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    results = results_model.load(out / "results.json")
    assert results.cancelled is True and results.cases == []
    block, builds = (out / "comment.md").read_text(encoding="utf-8").split("\n\n</details>\n\n", 1)
    assert block.endswith("\n\n ❌ speed job cancelled before it measured any case\n ``` ")
    assert builds.startswith("Builds: OneFlow 0.9.0 (git ")
    assert proc.stdout.read() == ""


def test_a_crashed_worker_is_recorded_and_the_run_goes_on(tmp_path):
    """Each worker is SIGKILLed (as the kernel's OOM killer would) while it measures; with
    interleave: false, PyTorch starts only after OneFlow is done."""
    suite = tmp_path / "crash.yml"
    suite.write_text("name: crash\nwarmup: 0\ninterleave: false\ncases:\n"
                     "  - {id: crash, kind: resnet50, batch_size: 2, image_size: 32, times: 100000}\n"
                     "  - {id: after, kind: resnet50, batch_size: 2, image_size: 32, times: 1}\n")
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), SPEEDSTATS_LOCK_DIR=str(tmp_path / "locks"))
    env.pop("GITHUB_OUTPUT", None)
    proc = subprocess.Popen([sys.executable, "-m", "speedstats", "run", "--suite", str(suite), "--device",
                             "cpu",
                             "--out", str(out)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    seen = []
    for line in proc.stderr:
        seen.append(line)
        for label, fw in (("OneFlow", "oneflow"), ("PyTorch", "pytorch")):
            if f"[1/2]   {label}: ready after" in line:
                ready = json.loads((out / "workers" / "crash" / fw / protocol.READY_FILE).read_text())
                os.kill(ready["pid"], signal.SIGKILL)
    assert proc.wait(timeout=120) == 3
    log = "".join(seen)
    assert log.index("[1/2]   OneFlow: round 1/1 FAILED") < log.index("[1/2]   PyTorch: starting")
    results = results_model.load(out / "results.json")
    for fw in ("oneflow", "pytorch"):
        assert case(results, "crash").frameworks[fw].error.startswith("killed by SIGKILL (out of memory?)")
    assert case(results, "after").failure is None


def test_oneflow_and_torchvision_resnet50_are_the_same_architecture():
    script = (
        "import flowvision, torchvision\n"
        "count = lambda m: sum(p.numel() for p in m.parameters())\n"
        "print(count(flowvision.models.resnet50()), count(torchvision.models.resnet50()))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=subprocess_env("oneflow"), timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    of_params, pt_params = map(int, proc.stdout.split())
    assert of_params == pt_params == 25_557_032


def test_bad_suite_is_one_line_and_runs_nothing(tmp_path):
    suite = tmp_path / "bad.yml"
    suite.write_text("extends: smoke\ncases:\n  - {id: resnet50-bs2, times: lots}\n")
    proc = speedstats("run", "--suite", str(suite), "--device", "cpu", "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert proc.stderr == (f"speedstats: error: {suite}: cases[0] (resnet50-bs2): "
                           "field 'times' must be an integer, got 'lots'\n")
    assert not (tmp_path / "out").exists()
