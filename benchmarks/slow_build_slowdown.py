"""How much slower the slow OneFlow test build is: a ResNet50 training step (forward, sum, backward,
zero_grad, step) at the smoke shapes, the repacked 0.9.0+a build against 0.9.0+slow, in interleaved
rounds of two long-lived processes.

    python benchmarks/slow_build_slowdown.py [--rounds 6] [--steps 5] [--device cpu]

Makes the test builds first if they are missing (minutes, once), installs them into the build cache
under .cache/test-builds/installed, and prints the ratio slow/repacked of each round and their median.
"""

import argparse
import importlib.util
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from speedstats.bench.builds import parse_build_spec, prepare_build
from speedstats.bench.environment import subprocess_env

_spec = importlib.util.spec_from_file_location("oneflow_builds", ROOT / "tests" / "oneflow_builds.py")
oneflow_builds = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(oneflow_builds)

STEPPER = r"""
import sys, time
import oneflow as flow, flowvision
device = flow.device(sys.argv[1])
model = flowvision.models.resnet50().to(device)
optimizer = flow.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
data = flow.ones(2, 3, 64, 64, device=device)
def steps(n):
    for _ in range(n):
        model(data).sum().backward()
        optimizer.zero_grad(set_to_none=False)
        optimizer.step()
        flow._oneflow_internal.eager.Sync()
steps(2)
print("ready", flow.__version__, flush=True)
for line in sys.stdin:
    start = time.perf_counter()
    steps(int(line))
    print(time.perf_counter() - start, flush=True)
"""


def start(build, device):
    process = subprocess.Popen([sys.executable, "-c", STEPPER, device], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True, env=build.worker_env(subprocess_env("oneflow")))
    ready = process.stdout.readline().split()
    assert ready[:1] == ["ready"], ready
    return process, ready[2]


def timed(process, steps):
    process.stdin.write(f"{steps}\n")
    process.stdin.flush()
    return float(process.stdout.readline())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    cache = oneflow_builds.DEFAULT_CACHE
    wheels = {"repacked": oneflow_builds.repacked_oneflow_wheel(cache), "slow": oneflow_builds.slow_oneflow_wheel(cache)}
    builds = {name: prepare_build(parse_build_spec(name, "oneflow", str(wheel)), cache / "installed")
              for name, wheel in wheels.items()}
    began = time.monotonic()
    processes = {}
    for name, build in builds.items():
        processes[name], version = start(build, args.device)
        print(f"{name}: oneflow {version}", file=sys.stderr)
    ratios = []
    for k in range(args.rounds):
        order = list(processes) if k % 2 == 0 else list(reversed(processes))
        seconds = {name: timed(processes[name], args.steps) for name in order}
        ratios.append(seconds["slow"] / seconds["repacked"])
        print(f"round {k + 1}: repacked {seconds['repacked'] / args.steps * 1000:.0f} ms/step, "
              f"slow {seconds['slow'] / args.steps * 1000:.0f} ms/step, ratio {ratios[-1]:.3f}")
    for process in processes.values():
        process.stdin.close()
        process.wait()
    print(f"median slow/repacked over {args.rounds} rounds of {args.steps} steps: {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f}); {time.monotonic() - began:.0f}s")


if __name__ == "__main__":
    main()
