"""`speedstats bisect` over eight real OneFlow builds: is the slower build found, in how many comparisons
and how much wall time, against measuring every build against the one before it.

    python benchmarks/bisect_builds.py [--scenarios one,halves] [--no-neighbours] [--json out.json]

The builds are a made-up history made from the pinned wheel (tests/oneflow_builds.py, made once,
minutes each): 0.9.0, 0.9.0+a, then 0.9.0+cNsP, commit N's build slowed by a nominal P% (each Conv2d
computes a share P/20 of its convolution again; see PERCENT_PER_EXTRA_FORWARD). Scenarios:

- one: the fifth build is 0.9.0+c5s200 and every later one carries the same slowdown (c6s200 to
  c8s200); the search should name #5;
- halves: the fourth build adds half of that (c4s100, c5s100), the sixth the other half (c6s200 to
  c8s200); the search should name #4 and #6.

Each comparison measures the smoke profile's resnet50-bs2 case on the CPU, head against base with the
default rule, OneFlow only, in a `disturbance:` that lets other processes use the CPU (a shared
machine would otherwise turn runs into exit 7; the figures then carry its noise). --no-neighbours
skips the 7 runs of every build against the one before it.
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("oneflow_builds", ROOT / "tests" / "oneflow_builds.py")
oneflow_builds = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(oneflow_builds)

SUITE = """\
extends: smoke
cases:
  - {id: resnet50-bs1, skip: true}
  - {id: swin-dataloader-w0, skip: true}
  - {id: swin-dataloader-w2, skip: true}
  - {id: resnet50-ddp-bs2, skip: true}
disturbance:
  max_other_cores: 1000000
"""
SCENARIOS = {  # the nominal slowdown of each build after the first two (0.9.0 and 0.9.0+a)
    "one": ([0, 0, 200, 200, 200, 200], [5]),
    "halves": ([0, 100, 100, 200, 200, 200], [4, 6]),
}


def builds(scenario):
    percents, _ = SCENARIOS[scenario]
    wheels = [oneflow_builds.pinned_oneflow_wheel(), oneflow_builds.repacked_oneflow_wheel(local="a")]
    wheels += [oneflow_builds.history_oneflow_wheel(commit, percent)
               for commit, percent in enumerate(percents, 3)]
    return wheels


def speedstats(folder, *args):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), SPEEDSTATS_LOCK_DIR=str(folder / "locks"))
    for name in ("GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GITHUB_ACTIONS"):
        env.pop(name, None)
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "speedstats", *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=folder, check=False)
    return proc, time.monotonic() - start


def bisect(folder, wheels):
    (folder / "between.txt").write_text("".join(f"{w}\n" for w in wheels[1:-1]))
    proc, wall_s = speedstats(folder, "bisect", "--good", wheels[0], "--bad", wheels[-1], "--between",
                              "between.txt", "--suite", folder / "suite.yml", "--device", "cpu",
                              "--cache-dir", oneflow_builds.BUILD_CACHE, "--out", folder / "bisect")
    state = json.loads((folder / "bisect" / "bisect.json").read_text())
    return {"status": proc.returncode, "wall_s": round(wall_s, 1), "outcome": state["outcome"],
            "found": [c + 1 for c in state["culprits"]], "comparisons": len(state["steps"]),
            "measured_s": round(sum(s["wall_s"] for s in state["steps"]), 1),
            "steps": [{"head": s["head"] + 1, "base": s["base"] + 1, "wall_s": s["wall_s"],
                       **{k: s["cases"]["resnet50-bs2"][k] for k in ("verdict", "ratio", "low", "high")}}
                      for s in state["steps"]],
            "report": proc.stdout}


def neighbours(folder, wheels):
    """Every build against the one before it, a `speedstats run` each."""
    rows = []
    for i in range(1, len(wheels)):
        out = folder / f"neighbour-{i + 1}"
        proc, wall_s = speedstats(folder, "run", "--suite", folder / "suite.yml", "--device", "cpu", "--only",
                                  "oneflow", "--oneflow", wheels[i], "--baseline-oneflow", wheels[i - 1],
                                  "--cache-dir", oneflow_builds.BUILD_CACHE, "--out", out, "--quiet")
        case = json.loads((out / "results.json").read_text())["cases"][0]["paired"]
        rows.append({"head": i + 1, "base": i, "status": proc.returncode, "wall_s": round(wall_s, 1),
                     **{k: case[k] for k in ("verdict", "ratio", "low", "high")}})
        print(f"  #{i + 1} against #{i}: {case['verdict']} {case['ratio']:.3f} ({wall_s:.0f}s)", flush=True)
    return {"comparisons": len(rows), "wall_s": round(sum(r["wall_s"] for r in rows), 1),
            "regressions": [r["head"] for r in rows if r["verdict"] == "regression"], "steps": rows}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", default="one,halves", help="comma separated: one, halves")
    parser.add_argument("--no-neighbours", action="store_true",
                        help="skip measuring every build against the one before it")
    parser.add_argument("--json", metavar="FILE", help="also write every figure here")
    args = parser.parse_args(argv)
    figures = {}
    for scenario in args.scenarios.split(","):
        wheels = builds(scenario)
        with tempfile.TemporaryDirectory(prefix=f"bisect-{scenario}-") as tmp:
            folder = Path(tmp)
            (folder / "suite.yml").write_text(SUITE)
            print(f"{scenario}: bisect over {len(wheels)} builds, expecting {SCENARIOS[scenario][1]}",
                  flush=True)
            result = {"expected": SCENARIOS[scenario][1], "bisect": bisect(folder, wheels)}
            found = result["bisect"]
            print(f"  found {found['found']} ({found['outcome']}, exit {found['status']}) in "
                  f"{found['comparisons']} comparisons, {found['wall_s']:.0f}s wall, "
                  f"{found['measured_s']:.0f}s measuring", flush=True)
            print("  " + found["report"].replace("\n", "\n  "), flush=True)
            if not args.no_neighbours:
                every = result["neighbours"] = neighbours(folder, wheels)
                print(f"  every neighbour: {every['comparisons']} comparisons, {every['wall_s']:.0f}s, "
                      f"regressions at {every['regressions']}", flush=True)
            figures[scenario] = result
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
