"""Where the time went, measured: how often the profiled rounds rank the one slowed place first, how often
an unchanged build shows any significant place, and the wall time the profiled rounds add.

    python benchmarks/attribution_power.py [--runs 5] [--aa-runs 5] [--ms 25] [--out DIR]

Each run is a real `speedstats run` on the CPU, head against base, one ResNet50 case at the smoke
shapes (batch 2, 64x64, 10 iterations), built-in rule:

- slowed: head 0.9.0+sgddrainMS (SGD.step waits for OneFlow's queue, then busy-waits MS ms, once per
  step: tests/oneflow_builds.py) against base 0.9.0+a, with the default `attribute: slower`: profiled
  rounds only when the rule finds the head slower. (A busy wait alone, 0.9.0+sgdwaitMS, hides behind
  the queued backward on the CPU and barely slows the step.) Counts how often the slowed place is
  ranked first and significant, and the profiled rounds' share of the case's wall time.
  `--slowed-attribute always` profiles every slowed run, to measure the ranking alone.
- A/A: head and base both 0.9.0+a, with `--attribute always`, so that every run has profiled rounds:
  counts the runs that show any significant place. A second set of A/A runs with the default
  `slower` says how often an unchanged build gets profiled rounds at all (the wall time added).

The suite's `disturbance:` does not judge other processes' load (max_other_cores 1000), so that a
run on a shared machine is kept rather than refused with exit status 7; say what else ran when you
report its figures. Prints one line per run and a summary; the results files stay under --out.
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_spec = importlib.util.spec_from_file_location("oneflow_builds", ROOT / "tests" / "oneflow_builds.py")
oneflow_builds = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(oneflow_builds)

SUITE = """\
name: {name}
warmup: 2
disturbance: {{max_other_cores: 1000.0}}
cases:
  - {{id: resnet50-bs2, kind: resnet50, batch_size: 2, image_size: 64, times: 10}}
"""


def run_once(out, head, base, attribute, name="attribution-power"):
    """A real `speedstats run` of head against base on the suite above (named `name`), in out:
    (results.json's case, the run's wall seconds, its exit status). benchmarks/dispatch_names.py
    runs it too."""
    out.mkdir(parents=True, exist_ok=True)
    suite = out / "suite.yml"
    suite.write_text(SUITE.format(name=name))
    command = [sys.executable, "-m", "speedstats", "run", "--suite", str(suite), "--device", "cpu",
               "--out", str(out), "--cache-dir", str(oneflow_builds.BUILD_CACHE), "--quiet",
               "--oneflow", str(head), "--baseline-oneflow", str(base)]
    if attribute:
        command += ["--attribute", attribute]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    start = time.monotonic()
    proc = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - start
    results = out / "results.json"
    if not results.exists():
        raise SystemExit(f"{out}: no results (exit {proc.returncode}): {proc.stderr[-800:]}")
    case = json.loads(results.read_text())["cases"][0]
    return case, wall, proc.returncode


def summary_line(label, case, wall):
    paired = case.get("paired") or {}
    attribution = case.get("attribution") or {}
    places = attribution.get("places") or []
    first = places[0] if places else None
    profiled, case_s = attribution.get("profiled_s") or 0.0, attribution.get("case_s")
    share = profiled / (case_s + profiled) if case_s else 0.0
    significant = [p["place"] for p in places if p["significant"]]
    # The sampler's cost: the base's step in its profiled rounds against its timed rounds' median.
    base_timed = (case["frameworks"].get("oneflow_base") or {}).get("per_iter_s")
    overhead = (attribution["base_step_ms"] / (base_timed * 1000)
                if attribution.get("base_step_ms") and base_timed else None)
    first_text = (f"first {first['place']} {first['change_ms']:+.1f}ms "
                  f"({first['low_ms']:+.1f} to {first['high_ms']:+.1f}) sig={first['significant']}"
                  if first else "no places")
    print(f"{label}: {paired.get('verdict')} {(paired.get('ratio') or 1) - 1:+.1%}, "
          f"{attribution.get('rounds', 0)} profiled rounds, {len(places)} places, "
          f"{len(significant)} significant, {first_text}, profiled {profiled:.1f}s = {share:.1%} of "
          f"the case, profiled/timed base step {overhead or 0:.2f}, run {wall:.0f}s", flush=True)
    return {"first": first["place"] if first else None, "first_significant": bool(first and
                                                                                   first["significant"]),
            "significant": significant, "share": share, "profiled": bool(attribution.get("rounds")),
            "verdict": paired.get("verdict"), "ratio": paired.get("ratio"), "overhead": overhead}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs with the slowed build (default 5)")
    parser.add_argument("--aa-runs", type=int, default=5, help="A/A runs of each kind (default 5)")
    parser.add_argument("--ms", type=int, default=25, help="the slowed place's busy wait per step")
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "attribution-power")
    parser.add_argument("--slowed-attribute", choices=("slower", "always"), default="slower",
                        help="the slowed runs' --attribute: slower (the default) profiles only when the "
                             "rule finds the head slower; always measures the ranking on every run")
    parser.add_argument("--summarize", action="store_true",
                        help="read the results already under --out instead of running")
    args = parser.parse_args()
    slowed = oneflow_builds.busy_wait_oneflow_wheel(args.ms, drain=True)
    same = oneflow_builds.repacked_oneflow_wheel(local="a")
    rows = {"slowed": [], "aa-always": [], "aa-slower": []}
    slowed_attribute = None if args.slowed_attribute == "slower" else "always"
    plan = ([("slowed", slowed, slowed_attribute)] * args.runs
            + [("aa-always", same, "always")] * args.aa_runs + [("aa-slower", same, None)] * args.aa_runs)
    for i, (kind, head, attribute) in enumerate(plan):
        if args.summarize:
            case, wall = json.loads((args.out / f"{kind}-{i}" / "results.json").read_text())["cases"][0], 0.0
        else:
            case, wall, _ = run_once(args.out / f"{kind}-{i}", head, same, attribute)
        rows[kind].append(summary_line(f"{kind} {i}", case, wall))
    slowed_rows = rows["slowed"]
    ranked_first = sum(r["first"] == oneflow_builds.SLOWED_PLACE and r["first_significant"]
                       for r in slowed_rows)
    found = [r for r in slowed_rows if r["profiled"]]
    print(f"slowed: {ranked_first} of {len(slowed_rows)} runs rank {oneflow_builds.SLOWED_PLACE} first and "
          f"significant; profiled in {len(found)} runs, their share of the case's wall time "
          f"{', '.join(format(r['share'], '.1%') for r in found) or '-'}")
    overheads = sorted(r["overhead"] for kind in rows.values() for r in kind if r["overhead"])
    if overheads:
        print(f"profiled/timed base step: median {overheads[len(overheads) // 2]:.2f}, "
              f"range {overheads[0]:.2f} to {overheads[-1]:.2f} ({len(overheads)} runs)")
    aa = rows["aa-always"]
    print(f"A/A with attribute always: {sum(bool(r['significant']) for r in aa)} of {len(aa)} runs show a "
          "significant place")
    quiet = rows["aa-slower"]
    print(f"A/A with attribute slower: {sum(r['profiled'] for r in quiet)} of {len(quiet)} runs had profiled "
          "rounds")


if __name__ == "__main__":
    main()
