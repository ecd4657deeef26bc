"""Harness overhead: wall time of a whole `speedstats run` against the timed loops it reports.

    .venv/bin/python benchmarks/harness_overhead.py [--profile smoke | --suite FILE] [--device cpu]

The timed loops are what the comment reports (per-iteration time x iterations x rounds, for every
framework of every case); the rest is process start-up, imports, model building, warm-up, the
dataset and the report. Prints one line per case and the share of the wall time that was measured.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--profile", default=None)
    group.add_argument("--suite")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        cmd = [sys.executable, "-m", "speedstats", "run", "--device", args.device, "--out", str(out),
               "--quiet", "--cache-dir", str(ROOT / ".cache" / "speedstats")]
        cmd += ["--suite", args.suite] if args.suite else ["--profile", args.profile or "smoke"]
        start = time.perf_counter()
        proc = subprocess.run(cmd, check=False, cwd=ROOT, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        results = json.loads((out / "results.json").read_text())
        setups = {}
        for ready in out.glob("workers/*/*/ready.json"):
            setups[(ready.parent.parent.name, ready.parent.name)] = json.loads(ready.read_text())["setup_s"]
    timed_total = 0.0
    print(f"{'case':<24} {'framework':<9} {'timed s':>9} {'setup+warm-up s':>16}")
    for case in results["cases"]:
        for name, fw in case["frameworks"].items():
            timed = sum(fw["rounds_s"]) * fw["times"] if fw["rounds_s"] else 0.0
            timed_total += timed
            setup = setups.get((case["id"], name))
            print(f"{case['id']:<24} {name:<9} {timed:>9.2f} "
                  f"{setup if setup is not None else float('nan'):>16.2f}")
    print(f"wall {wall:.1f}s, timed loops {timed_total:.1f}s: {100 * timed_total / wall:.0f}% of the wall "
          "time"
          f" (exit status {proc.returncode})")


if __name__ == "__main__":
    main()
