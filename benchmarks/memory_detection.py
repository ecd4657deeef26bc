"""How well head against base catches a build that holds more memory, and what sampling costs.

    python benchmarks/memory_detection.py [--runs 3] [--mib 128] [--out DIR]

On the CPU, the smoke profile's resnet50-bs2 case alone, 3 rounds (memory needs no long run), head
against base with `speedstats run`. Each of the --runs iterations makes three runs, in this order:

- held: head 0.9.0+memMIB (holds MIB MiB more from import on) against the repacked 0.9.0+a: flagged
  when the run exits 1 with the case in the verdict's memory regressions (target: every run);
- A/A: 0.9.0+a against itself, sampling on: the memory change (target: within 0.5% or 8 MiB);
- A/A with the suite's memory_sampling off: its per-iteration times against the A/A's with sampling
  on, the sampling's cost in wall time (target: none measurable).

The suite's `disturbance:` does not judge other processes' CPU load (a busy machine must not end a run
with exit status 7; memory is what is measured). Makes the test builds first if they are missing.
Prints one line per run and a summary.
"""

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from speedstats import results as results_model

_spec = importlib.util.spec_from_file_location("oneflow_builds", ROOT / "tests" / "oneflow_builds.py")
oneflow_builds = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(oneflow_builds)

MIB = 2**20
SUITE = """\
extends: smoke
memory_sampling: {sampling}
disturbance: {{max_other_cores: 1000}}
head_vs_base: {{first_rounds: 3, step_rounds: 1, max_rounds: 3}}
cases:
  - {{id: resnet50-bs1, skip: true}}
  - {{id: swin-dataloader-w0, skip: true}}
  - {{id: swin-dataloader-w2, skip: true}}
  - {{id: resnet50-ddp-bs2, skip: true}}
"""


def run(work, head, base, sampling=True):
    work.mkdir(parents=True)
    suite = work / "suite.yml"
    suite.write_text(SUITE.format(sampling="true" if sampling else "false"))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), SPEEDSTATS_LOCK_DIR=str(work / "locks"))
    env.pop("GITHUB_OUTPUT", None)
    began = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "speedstats", "run", "--suite", str(suite), "--device", "cpu",
         "--out", str(work / "out"), "--cache-dir", str(oneflow_builds.BUILD_CACHE), "--quiet",
         "--oneflow", str(head), "--baseline-oneflow", str(base)],
        capture_output=True, text=True, env=env, cwd=work, check=False)
    wall = time.monotonic() - began
    path = work / "out" / "results.json"
    if not path.exists():
        raise SystemExit(f"run in {work} wrote no results (exit {proc.returncode}): {proc.stderr[-2000:]}")
    case = results_model.load(path).cases[0]
    head_fw, base_fw, pytorch = (case.frameworks[r] for r in ("oneflow", "oneflow_base", "pytorch"))
    change = None
    if head_fw.sampled_peak_bytes and base_fw.sampled_peak_bytes:
        change = head_fw.sampled_peak_bytes - base_fw.sampled_peak_bytes
    return {
        "exit": proc.returncode, "wall_s": wall, "memory_regression": "more memory than the base build"
        in proc.stderr, "head_bytes": head_fw.sampled_peak_bytes, "base_bytes": base_fw.sampled_peak_bytes,
        "change_bytes": change, "per_iter_s": {"oneflow": head_fw.rounds_s, "oneflow_base": base_fw.rounds_s,
                                               "pytorch": pytorch.rounds_s},
    }


def mib(value):
    return "n/a" if value is None else f"{value / MIB:+.1f} MiB"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--mib", type=int, default=128)
    parser.add_argument("--out", type=Path, default=None, help="folder for the runs and summary.json")
    args = parser.parse_args()
    plain = oneflow_builds.repacked_oneflow_wheel(local="a")
    held = oneflow_builds.memory_oneflow_wheel(args.mib)
    out = args.out or Path(tempfile.mkdtemp(prefix="memory-detection-"))
    runs = {"held": [], "aa": [], "aa_off": []}
    for i in range(args.runs):
        for name, head, sampling in (("held", held, True), ("aa", plain, True), ("aa_off", plain, False)):
            record = run(out / f"{name}-{i}", head, plain, sampling)
            runs[name].append(record)
            print(f"{name} {i + 1}/{args.runs}: exit {record['exit']}, memory change "
                  f"{mib(record['change_bytes'])} (head {mib(record['head_bytes']).lstrip('+')}), "
                  f"memory regression {record['memory_regression']}, {record['wall_s']:.0f}s", flush=True)
    flagged = sum(r["memory_regression"] and r["exit"] == 1 for r in runs["held"])
    aa_changes = [r["change_bytes"] / MIB for r in runs["aa"] if r["change_bytes"] is not None]
    aa_pct = [r["change_bytes"] / r["base_bytes"] * 100 for r in runs["aa"] if r["change_bytes"] is not None]

    def median_step(name, role):
        return statistics.median(t for r in runs[name] for t in r["per_iter_s"][role])

    cost = {role: median_step("aa", role) / median_step("aa_off", role) - 1
            for role in ("oneflow", "oneflow_base", "pytorch")}
    summary = {
        "runs": args.runs, "mib": args.mib, "flagged": flagged,
        "held_changes_mib": [r["change_bytes"] / MIB for r in runs["held"] if r["change_bytes"] is not None],
        "aa_changes_mib": aa_changes, "aa_changes_pct": aa_pct,
        "aa_false_memory_regressions": sum(r["memory_regression"] for r in runs["aa"]),
        "sampling_cost": cost,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"held {args.mib} MiB flagged in {flagged} of {args.runs} runs; changes "
          f"{', '.join(f'{c:+.1f}' for c in summary['held_changes_mib'])} MiB")
    print(f"A/A changes: {', '.join(f'{c:+.1f} MiB ({p:+.2f}%)' for c, p in zip(aa_changes, aa_pct))}; "
          f"false memory regressions {summary['aa_false_memory_regressions']}")
    print("sampling on against off, median step time: "
          + ", ".join(f"{role} {value * 100:+.1f}%" for role, value in cost.items()))
    print(f"runs and summary.json in {out}")


if __name__ == "__main__":
    main()
