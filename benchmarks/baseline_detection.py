"""How often a run with a baseline build raises a false alarm, finds a real slowdown, and what it costs.

    python benchmarks/baseline_detection.py [--runs 20] [--head-only-runs 5] [--json FILE]

Runs `speedstats run` on the CPU over the smoke profile's ResNet50 case (batch 2, 3x64x64) with real
OneFlow builds made from the pinned wheel (tests/oneflow_builds.py):

- A/A: the repacked build 0.9.0+a as head and as base, --runs times. A run that exits 1 (a confirmed
  regression) is a false alarm.
- slow vs base: the build 0.9.0+slow (every convolution computed twice) as head, 0.9.0+a as base,
  --runs times. A run that exits 1 with the case confirmed as a regression is a detection.
- head only: 0.9.0+a with no baseline, --head-only-runs times, for the wall time a baseline adds.

Prints a summary (and writes the raw figures as JSON with --json). Needs the full environment
(./scripts/bootstrap.sh) and a quiet machine: anything else running shows in the figures.
"""

import argparse
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITE = """\
extends: smoke
cases:
  - {id: resnet50-bs1, skip: true}
  - {id: swin-dataloader-w0, skip: true}
  - {id: swin-dataloader-w2, skip: true}
  - {id: resnet50-ddp-bs2, skip: true}
"""


def load_test_builds():
    spec = importlib.util.spec_from_file_location("oneflow_builds", ROOT / "tests" / "oneflow_builds.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def one_run(work, cache, head, base=None):
    out = Path(tempfile.mkdtemp(dir=work))
    args = [sys.executable, "-m", "speedstats", "run", "--suite", str(work / "suite.yml"), "--device", "cpu",
            "--out", str(out), "--cache-dir", str(cache), "--quiet", "--oneflow", str(head)]
    if base is not None:
        args += ["--baseline-oneflow", str(base)]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), SPEEDSTATS_LOCK_DIR=str(work / "locks"))
    start = time.monotonic()
    proc = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
    wall = time.monotonic() - start
    if proc.returncode not in (0, 1):
        sys.exit(f"speedstats run exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    case = json.loads((out / "results.json").read_text())["cases"][0]
    paired = case.get("paired") or {}
    confirmation = case.get("confirmation") or {}
    return {
        "exit": proc.returncode, "wall_s": wall, "ratio": paired.get("ratio"), "low": paired.get("low"),
        "high": paired.get("high"), "verdict": paired.get("verdict"), "confirmation": confirmation.get("status"),
        "first_ratios": paired.get("ratios", [])[:5],
    }


def summary(name, runs, positive):
    hits = sum(1 for r in runs if positive(r))
    flagged = sum(1 for r in runs if r["confirmation"])
    first_ratios = [x for r in runs for x in r["first_ratios"]]
    median_ratio = statistics.median(r["ratio"] for r in runs if r["ratio"] is not None)
    walls = [r["wall_s"] for r in runs]
    print(f"{name}: {hits}/{len(runs)} (flagged before confirmation: {flagged}/{len(runs)}); "
          f"median head/base {median_ratio:.3f}; per-round ratios {min(first_ratios):.3f}-{max(first_ratios):.3f}; "
          f"wall median {statistics.median(walls):.1f}s")
    return hits


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--head-only-runs", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    builds = load_test_builds()
    repacked, slow = builds.repacked_oneflow_wheel(local="a"), builds.slow_oneflow_wheel()
    with tempfile.TemporaryDirectory(prefix="speedstats-detection-") as tmp:
        work = Path(tmp)
        (work / "suite.yml").write_text(SUITE)
        cache = work / "cache"
        one_run(work, cache, repacked, repacked)  # installs both builds once, outside the figures
        one_run(work, cache, slow, repacked)
        cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        head_only, same, slower = [], [], []
        for k in range(args.runs):
            if k < args.head_only_runs:
                head_only.append(one_run(work, cache, repacked))
            same.append(one_run(work, cache, repacked, repacked))
            slower.append(one_run(work, cache, slow, repacked))
            print(f"run {k + 1}/{args.runs}: A/A exit {same[-1]['exit']} ratio {same[-1]['ratio']:.3f}; "
                  f"slow exit {slower[-1]['exit']} ratio {slower[-1]['ratio']:.3f}", file=sys.stderr, flush=True)
        wall = time.monotonic() - started
        cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    false_alarms = summary("A/A false alarms", same, lambda r: r["exit"] == 1)
    detections = summary("slow vs base detections", slower,
                         lambda r: r["exit"] == 1 and r["confirmation"] == "confirmed")
    base_wall = statistics.median(r["wall_s"] for r in head_only)
    with_base_wall = statistics.median(r["wall_s"] for r in same)
    print(f"wall time: head only {base_wall:.1f}s (median of {len(head_only)}), with a baseline "
          f"{with_base_wall:.1f}s (median of {len(same)} A/A runs): {with_base_wall / base_wall:.2f}x")
    print(f"the benchmark took {wall / 60:.1f} min wall and {cpu / 60:.1f} min of CPU time; "
          f"load average at the end {os.getloadavg()[0]:.2f} (1 min), {os.getloadavg()[2]:.2f} (15 min)")
    if args.json:
        args.json.write_text(json.dumps({"aa": same, "slow": slower, "head_only": head_only, "wall_s": wall,
                                         "cpu_s": cpu, "false_alarms": false_alarms, "detections": detections},
                                        indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
