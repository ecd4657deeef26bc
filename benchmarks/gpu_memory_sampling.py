"""On a GPU machine: the runner's memory sampler and energy counter against a real CUDA process.

    python benchmarks/gpu_memory_sampling.py [--mib 1024]

A child process initialises CUDA with PyTorch and is taken for a worker (its GPU pids learnt in the
start window, as the runner learns them); then, while the sampler runs, it allocates --mib MiB more,
holds them half a second and frees them. Prints the PIDs NVML reported against the child's own (they
differ inside a container with a PID namespace of its own), the sampled peak against the child's own
view (torch.cuda.mem_get_info's used memory is the whole GPU's, so the allocator's reserved bytes are
printed too), the sampler's number of samples, and the energy counter's increase over two seconds of
matrix products (null on a GPU without one).
"""

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from speedstats.bench import machine_state, memory

CHILD = """
import sys, time, torch
torch.cuda.init()
x = torch.ones(64 << 20, device="cuda")  # 256 MiB
torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.readline()
y = torch.ones(int(sys.argv[1]) << 18, device="cuda")
torch.cuda.synchronize()
print("reserved", torch.cuda.memory_reserved(), flush=True)
time.sleep(0.5)
del y
torch.cuda.empty_cache()
print("freed", flush=True)
sys.stdin.readline()
a = torch.randn(4096, 4096, device="cuda")
end = time.monotonic() + 2
while time.monotonic() < end:
    a @ a
torch.cuda.synchronize()
print("busy", flush=True)
sys.stdin.readline()
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024)
    args = parser.parse_args()
    watch = machine_state.MachineWatch("cuda")
    if watch.gpus.nvml is None:
        raise SystemExit(f"no NVML: {watch.gpus.reason}")
    watch.starting()
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(args.mib)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        ours = watch.started()
        print(f"child pid {child.pid}; NVML pids that appeared while it started: {sorted(ours)}; "
              f"all compute pids: {watch.gpus.compute_pids()}")
        sampler = memory.PeakSampler([child.pid], gpu_pids=watch.gpus.compute_pids, host_pids=ours).start()
        time.sleep(0.3)
        child.stdin.write("go\n")
        child.stdin.flush()
        reserved = int(child.stdout.readline().split()[1])
        assert child.stdout.readline().strip() == "freed"
        time.sleep(0.3)
        peaks = sampler.stop()
        print(f"sampled: GPU peak {peaks['gpu_bytes'] / 2**20:.0f} MiB, "
              f"RSS peak {peaks['rss_bytes'] / 2**20:.0f} MiB, {peaks['samples']} samples, "
              f"error {sampler.error}; the child's allocator reserved "
              f"{reserved / 2**20:.0f} MiB at its peak")
        before = watch.gpus.energy_mj()
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "busy"
        after = watch.gpus.energy_mj()
        print(f"energy counter: {before} -> {after} mJ"
              + (f", {(after - before) / 1000:.1f} J over about 2 s" if None not in (before, after) else ""))
    finally:
        child.kill()
        child.wait()
        watch.close()


if __name__ == "__main__":
    main()
