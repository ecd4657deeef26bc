"""Relative speed (PyTorch time / OneFlow time) of the `old-bot` mode against `clean`, on this machine.

    .venv/bin/python benchmarks/old_bot_vs_clean.py [--device cpu] [--shapes smoke,default] [--out FILE]

Runs real `speedstats run` once per mode and shape set: the smoke profile's ResNet50 cases (64x64,
batch 2 and 1, DDP batch 2) and the default profile's shapes at batch 16 and 1 (224x224) with fewer
iterations. Each run interleaves the frameworks' rounds. Modes: `old-bot` (the default profiles'),
`clean` (shared model, no input gradient, full sync) and `clean-library` (clean with torchvision's and
flowvision's ResNet50, speedstats' earlier behaviour). Prints a markdown table; --out keeps the figures
as JSON.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

MODES = {
    "old-bot": "mode: old-bot\n",
    "clean": "mode: clean\nmodel: shared\n",
    "clean-library": "mode: clean\nmodel: library\n",
}

# Per shape set: the profile it extends, the cases kept (id -> times), warm-up, rounds and the modes.
SHAPES = {
    "smoke": ("smoke", {"resnet50-bs2": 10, "resnet50-bs1": 10, "resnet50-ddp-bs2": 10}, 2, 3,
              ("old-bot", "clean", "clean-library")),
    "default": ("default", {"resnet50-bs16": 3, "resnet50-bs1": 5}, 1, 2, ("old-bot", "clean")),
}


def suite_text(profile, keep, warmup, rounds, mode, all_ids):
    lines = [f"extends: {profile}", f"name: {profile}-{mode}", f"warmup: {warmup}", f"rounds: {rounds}",
             MODES[mode].rstrip("\n"), "cases:"]
    for case_id in all_ids:
        if case_id in keep:
            lines.append(f"  - {{id: {case_id}, times: {keep[case_id]}, rounds: {rounds}}}")
        else:
            lines.append(f"  - {{id: {case_id}, skip: true}}")
    return "\n".join(lines) + "\n"


def profile_case_ids(profile):
    sys.path.insert(0, str(ROOT / "src"))
    from speedstats.suite import load_suite

    return [c.id for c in load_suite(profile=profile).cases]


def run_suite(text, device, tmp):
    suite = tmp / "suite.yml"
    suite.write_text(text, encoding="utf-8")
    out = tmp / "out"
    cmd = [sys.executable, "-m", "speedstats", "run", "--suite", str(suite), "--device", device,
           "--out", str(out), "--quiet", "--lock-timeout", "3600"]
    start = time.perf_counter()
    proc = subprocess.run(cmd, check=False, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src"),
                               "SPEEDSTATS_LOCK_DIR": str(tmp / "locks")})
    wall = time.perf_counter() - start
    if not (out / "results.json").is_file():
        raise SystemExit(f"speedstats run wrote no results (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return json.loads((out / "results.json").read_text(encoding="utf-8")), wall


def figures(results):
    rows = {}
    for case in results["cases"]:
        of, pt = case["frameworks"]["oneflow"], case["frameworks"]["pytorch"]
        if of["per_iter_s"] is None or pt["per_iter_s"] is None:
            rows[case["id"]] = {"error": of["error"] or pt["error"] or case.get("error")}
            continue
        rows[case["id"]] = {
            "input_shape": case["input_shape"], "ddp": case["ddp"],
            "oneflow_ms": of["per_iter_s"] * 1000, "pytorch_ms": pt["per_iter_s"] * 1000,
            "relative": pt["per_iter_s"] / of["per_iter_s"],
            "oneflow_rounds_ms": [r * 1000 for r in of["rounds_s"]],
            "pytorch_rounds_ms": [r * 1000 for r in pt["rounds_s"]],
        }
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--shapes", default="smoke,default", help="comma-separated: smoke, default")
    parser.add_argument("--cases", help="comma-separated case ids to keep (default: all of each shape set)")
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args()
    only = set(args.cases.split(",")) if args.cases else None
    report = {"machine": platform.processor() or platform.machine(), "device": args.device, "runs": []}
    for shape_set in args.shapes.split(","):
        profile, keep, warmup, rounds, modes = SHAPES[shape_set]
        keep = {k: v for k, v in keep.items() if only is None or k in only}
        all_ids = profile_case_ids(profile)
        for mode in modes:
            with tempfile.TemporaryDirectory() as tmp:
                results, wall = run_suite(suite_text(profile, keep, warmup, rounds, mode, all_ids),
                                          args.device,
                                          Path(tmp))
            run = {"shapes": shape_set, "mode": mode, "wall_s": wall, "versions": results["versions"],
                   "load_average_1min_after": os.getloadavg()[0], "cases": figures(results)}
            report["runs"].append(run)
            print(f"# {shape_set} {mode}: {wall:.0f}s, load average {os.getloadavg()[0]:.1f} "
                  f"on {os.cpu_count()} CPUs", file=sys.stderr, flush=True)
    print("| shapes | case | mode | OneFlow ms | PyTorch ms | relative speed | vs clean |")
    print("|---|---|---|---|---|---|---|")
    for run in report["runs"]:
        clean = next((r for r in report["runs"] if r["shapes"] == run["shapes"] and r["mode"] == "clean"),
                     None)
        for case_id, row in run["cases"].items():
            if "error" in row:
                print(f"| {run['shapes']} | {case_id} | {run['mode']} | error: {row['error']} | | | |")
                continue
            base = clean["cases"].get(case_id, {}) if clean else {}
            versus = f"{row['relative'] / base['relative']:.2f}x" if base.get("relative") else ""
            print(f"| {run['shapes']} | {case_id} {row['input_shape']}{' ddp' if row['ddp'] else ''} | "
                  f"{run['mode']} | {row['oneflow_ms']:.1f} | {row['pytorch_ms']:.1f} "
                  f"| {row['relative']:.2f} | "
                  f"{versus} |")
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
