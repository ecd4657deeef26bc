"""What a ResNet50 step and a dataloader round measure, with real OneFlow and PyTorch on the CPU.

Each framework runs in a subprocess of its own (as the workers do): the shared ResNet50 under
both, the old-bot and clean inputs, and the dataloader's timed epochs.
"""

import json
import subprocess
import sys
import textwrap

import pytest

from speedstats.bench.environment import subprocess_env

pytestmark = pytest.mark.heavy

FRAMEWORK_MODULES = {"pytorch": "torch", "oneflow": "oneflow"}


def run_script(framework, script, *args):
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script), *map(str, args)],
                          capture_output=True,
                          text=True, env=subprocess_env(framework), timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


SHARED_MODEL = """
    import json, sys
    import numpy as np
    framework, weights, image_size = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if framework == "torch":
        import torch as fw
    else:
        import oneflow as fw
    from speedstats.bench.models import resnet50

    model = resnet50(fw.nn, image_size=image_size)
    if framework == "torch":  # PyTorch's initial weights, handed to OneFlow through numpy
        np.savez(weights, **{k: v.detach().numpy() for k, v in model.state_dict().items()})
    else:
        saved = np.load(weights)
        model.load_state_dict({k: fw.tensor(saved[k]) for k in saved.files})
    x = np.random.RandomState(0).standard_normal((2, 3, image_size, image_size)).astype(np.float32)
    y = model(fw.tensor(x)).detach().numpy()
    np.save(weights + "." + framework + ".npy", y)
    print(json.dumps({"parameters": sum(p.numel() for p in model.parameters()),
                      "keys": sorted(model.state_dict()), "shape": list(y.shape),
                      "pool": [np.ravel(model.avgpool.kernel_size)[0].item(),
                               np.ravel(model.avgpool.stride)[0].item()]}))
"""


@pytest.mark.parametrize("image_size", [64, 224])
def test_the_shared_resnet50_is_the_old_model_under_both_frameworks(tmp_path, image_size):
    import numpy as np  # here, not at the top: the fast tier collects this file without numpy

    weights = str(tmp_path / "weights.npz")
    pt = run_script("pytorch", SHARED_MODEL, "torch", weights, image_size)
    of = run_script("oneflow", SHARED_MODEL, "oneflow", weights, image_size)
    assert pt["parameters"] == of["parameters"] == 25_557_032
    assert pt["keys"] == of["keys"] and pt["shape"] == of["shape"] == [2, 1000]
    # a stride-1 pool over the final map: the old AvgPool2d(7) at 224x224
    assert pt["pool"] == of["pool"] == [{64: 2, 224: 7}[image_size], 1]
    pt_out, of_out = np.load(weights + ".torch.npy"), np.load(weights + ".oneflow.npy")
    scale = float(np.abs(pt_out).max())
    assert scale > 0
    # float32 through 53 layers, batch norm in training mode over batches of 2: agree to 1e-3 of the scale
    np.testing.assert_allclose(of_out, pt_out, rtol=1e-3, atol=1e-3 * scale)


MODE_STEP = """
    import json, sys
    from speedstats.bench.worker import FRAMEWORK_CLASSES, ResNet50Step
    from speedstats.bench.workerspec import WorkerSpec

    framework, mode = sys.argv[1], sys.argv[2]
    spec = WorkerSpec(framework=framework, ddp=False, device="cpu", mode=mode, model="shared",
                      batch_size=2, image_size=64)
    fw = FRAMEWORK_CLASSES[framework](spec)
    step = ResNet50Step(fw, spec)
    grads = []
    for _ in range(2):
        step.run(1)
        leaf = step.input_leaf
        grads.append(None if leaf is None or leaf.grad is None else float(leaf.grad.abs().sum().numpy()))
    print(json.dumps({
        "input_requires_grad": bool(step.input.requires_grad),
        "leaf": None if step.input_leaf is None else {
            "is_leaf": bool(step.input_leaf.is_leaf), "device": str(step.input_leaf.device),
            "shape": list(step.input_leaf.shape)},
        "grad_sums": grads,
    }))
"""


def test_old_bot_pytorch_steps_accumulate_the_input_gradient_on_the_cpu_leaf():
    result = run_script("pytorch", MODE_STEP, "pytorch", "old-bot")
    assert result["input_requires_grad"] is True
    assert result["leaf"] == {"is_leaf": True, "device": "cpu", "shape": [2, 3, 64, 64]}
    first, second = result["grad_sums"]
    # The old order (zero_grad, then step) leaves the weights as they were: each step adds the
    # same input gradient to the leaf.
    assert first > 0 and second == pytest.approx(2 * first, rel=1e-5)


def test_clean_pytorch_steps_compute_no_input_gradient():
    result = run_script("pytorch", MODE_STEP, "pytorch", "clean")
    assert result["input_requires_grad"] is False and result["leaf"] is None
    assert result["grad_sums"] == [None, None]


@pytest.mark.parametrize("mode", ["old-bot", "clean"])
def test_oneflow_input_never_requires_grad(mode):
    result = run_script("oneflow", MODE_STEP, "oneflow", mode)
    assert result["input_requires_grad"] is False and result["leaf"] is None


QUEUED_AFTER_STEP = """
    import json, statistics, sys, time
    from speedstats.bench.worker import FRAMEWORK_CLASSES, ResNet50Step
    from speedstats.bench.workerspec import WorkerSpec

    spec = WorkerSpec(framework="oneflow", ddp=False, device="cpu", mode=sys.argv[1], model="shared",
                      batch_size=2, image_size=64)
    fw = FRAMEWORK_CLASSES["oneflow"](spec)
    step = ResNet50Step(fw, spec)
    step.warm_up(2)
    fw.sync()


    def old_loop_iteration():
        # The old script's iteration: its clock stopped right after loss.numpy()
        loss = step.model(step.input).sum()
        loss.backward()
        step.optimizer.zero_grad(set_to_none=False)
        step.optimizer.step()
        loss.numpy()


    figures = {"run": [], "old_loop": []}
    for _ in range(3):
        for name, work in (("run", lambda: step.run(1)), ("old_loop", old_loop_iteration)):
            start = time.perf_counter()
            work()
            returned = time.perf_counter()
            fw.sync()  # what was still queued when it returned
            figures[name].append([returned - start, time.perf_counter() - returned])
    print(json.dumps({name: [statistics.median(f[i] for f in rows) for i in (0, 1)]
                      for name, rows in figures.items()}))
"""


@pytest.mark.parametrize("mode", ["old-bot", "clean"])
def test_a_oneflow_step_has_finished_its_backward_and_update_when_run_returns(mode):
    result = run_script("oneflow", QUEUED_AFTER_STEP, mode)
    (run_s, run_left_s), (old_s, old_left_s) = result["run"], result["old_loop"]
    # loss.numpy() waits for the forward only: the backward and the update are still queued then
    # (about two thirds of a step), so a clock read there misses them. run() leaves nothing queued.
    assert old_left_s > 0.2 * (old_s + old_left_s)
    assert run_left_s < 0.05 * run_s


DATALOADER_TIMING = """
    import json, os, sys, time
    import numpy as np
    from speedstats.bench.worker import FRAMEWORK_CLASSES, EpochBatches
    from speedstats.bench.workerspec import WorkerSpec

    framework, log_dir, num_workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
    BATCH, WARMUP, ROUNDS, TIMES = 2, 2, 2, 3


    class RecordingDataset:
        # Each item appends the time its production started to a file of the process making it.
        def __len__(self):
            return 50

        def __getitem__(self, index):
            with open(os.path.join(log_dir, f"starts-{os.getpid()}"), "a") as f:
                f.write(f"{time.time()!r}\\n")
            time.sleep(0.01)
            return np.full((3, 4, 4), index, dtype=np.float32), index


    fw = FRAMEWORK_CLASSES[framework](WorkerSpec(framework=framework, ddp=False, device="cpu"))
    batches = EpochBatches(fw, RecordingDataset(), BATCH, num_workers, seed=0)
    batches.warm_up(WARMUP)
    rounds = []
    for _ in range(ROUNDS):
        time.sleep(1.0)  # the runner's wait between warm-up (or a round) and the next round
        started = time.time()
        batches.run(TIMES)
        rounds.append([started, time.time()])
    starts = []
    for name in os.listdir(log_dir):
        with open(os.path.join(log_dir, name)) as f:
            starts += [float(line) for line in f if line.strip()]
    print(json.dumps({"rounds": rounds, "starts": sorted(starts), "batch": BATCH, "warmup": WARMUP,
                      "times": TIMES}))
"""


@pytest.mark.parametrize("framework", ["pytorch", "oneflow"])
@pytest.mark.parametrize("num_workers", [1, 2])
def test_timed_dataloader_batches_are_all_made_after_the_clock_started(tmp_path, framework, num_workers):
    result = run_script(framework, DATALOADER_TIMING, framework, tmp_path, num_workers)
    starts, batch = result["starts"], result["batch"]
    (first_start, first_end), (second_start, second_end) = result["rounds"]
    # Nothing is made ahead: the warm-up's items, then each round's items inside that round.
    assert len(starts) == (result["warmup"] + 2 * result["times"]) * batch
    before = [t for t in starts if t < first_start]
    first = [t for t in starts if first_start <= t <= first_end]
    second = [t for t in starts if second_start <= t <= second_end]
    assert len(before) == result["warmup"] * batch
    assert len(first) == len(second) == result["times"] * batch
