"""How much slower the slow OneFlow test build is: a ResNet50 training step (forward, sum, backward,
zero_grad, step) at the smoke shapes, the repacked 0.9.0+a build against 0.9.0+slow, in interleaved
rounds of two long-lived processes.

    python benchmarks/slow_build_slowdown.py [--rounds 6] [--steps 5] [--device cpu] [--clock cpu]

Makes the test builds first if they are missing (minutes, once), installs them into the build cache
under .cache/test-builds/installed, and prints the ratio slow/repacked of each round, their median,
and the ratio of the fastest tenth of the steps. On a 2-core machine shared with other jobs: wall
clock, 16 rounds of 8 steps, median round ratio 1.24 and fastest-tenth ratio 1.31 (174 vs 228 ms);
--clock cpu with OMP_NUM_THREADS=1, 1.32 and 1.31.
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
    times = []
    for _ in range(n):
        start = time.perf_counter() if sys.argv[2] == "wall" else time.process_time()
        model(data).sum().backward()
        optimizer.zero_grad(set_to_none=False)
        optimizer.step()
        flow._oneflow_internal.eager.Sync()
        times.append((time.perf_counter() if sys.argv[2] == "wall" else time.process_time()) - start)
    return times
steps(2)
print("ready", flow.__version__, flush=True)
for line in sys.stdin:
    print(*steps(int(line)), flush=True)
"""


def start(build, device, clock):
    process = subprocess.Popen([sys.executable, "-c", STEPPER, device, clock], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True,
                               env=build.worker_env(subprocess_env("oneflow")))
    ready = process.stdout.readline().split()
    assert ready[:1] == ["ready"], ready
    return process, ready[1]


def timed(process, steps):
    process.stdin.write(f"{steps}\n")
    process.stdin.flush()
    return [float(t) for t in process.stdout.readline().split()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="cpu: the process's CPU time, steadier on a busy machine")
    args = parser.parse_args()
    cache = oneflow_builds.DEFAULT_CACHE
    wheels = {"repacked": oneflow_builds.repacked_oneflow_wheel(cache),
              "slow": oneflow_builds.slow_oneflow_wheel(cache)}
    builds = {name: prepare_build(parse_build_spec(name, "oneflow", str(wheel)), oneflow_builds.BUILD_CACHE)
              for name, wheel in wheels.items()}
    began = time.monotonic()
    processes = {}
    for name, build in builds.items():
        processes[name], version = start(build, args.device, args.clock)
        print(f"{name}: oneflow {version}", file=sys.stderr)
    times = {name: [] for name in processes}
    ratios = []
    for k in range(args.rounds):
        order = list(processes) if k % 2 == 0 else list(reversed(processes))
        seconds = {name: timed(processes[name], args.steps) for name in order}
        for name, values in seconds.items():
            times[name].extend(values)
        ratios.append(sum(seconds["slow"]) / sum(seconds["repacked"]))
        print(f"round {k + 1}: repacked {statistics.mean(seconds['repacked']) * 1000:.0f} ms/step, "
              f"slow {statistics.mean(seconds['slow']) * 1000:.0f} ms/step, ratio {ratios[-1]:.3f}")
    for process in processes.values():
        process.stdin.close()
        process.wait()
    print(f"median of the rounds' ratios slow/repacked: {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f})")
    # On a busy machine most steps wait for a CPU; the fastest steps are the least disturbed.
    fastest = {name: sorted(values)[: max(1, len(values) // 10)] for name, values in times.items()}
    print("fastest tenth of the steps, slow/repacked: "
          f"{statistics.mean(fastest['slow']) / statistics.mean(fastest['repacked']):.3f} "
          f"({statistics.mean(fastest['repacked']) * 1000:.0f} "
          f"vs {statistics.mean(fastest['slow']) * 1000:.0f} ms)")
    print(f"{time.monotonic() - began:.0f}s")


if __name__ == "__main__":
    main()
