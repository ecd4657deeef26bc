"""The old job's own script against `speedstats run` in old-bot mode, side by side on this machine.

    .venv/bin/python benchmarks/parity_with_old_script.py --models-checkout DIR [--pairs N]
        [--device cpu|cuda] [--shape BS,H,W ...] [--times N] [--torch110-zero-grad]
        [--ddp | --ddp-only] [--shared-model-too] [--bare-too] [--out FILE]

DIR is a checkout of Oneflow-Inc/models; nothing of it is copied into this project. Its
scripts/compare_speed_with_pytorch.py runs from a patched copy in a temporary folder (the checkout
is not touched), with the model file Vision/classification/image/resnet50/models/resnet50.py as it
is. The copy's edits, each checked to match exactly once:

- the device: every `.to("cuda")` becomes `.to(DEVICE)`; on the CPU a DDP run also takes gloo for
  nccl, no device_ids and no torch.cuda.set_device;
- printing: OneFlow 0.9.0 sets RANK=-1 in a process that no launcher started, and the script's
  print_rank_0 then prints nothing; a rank of -1 counts as rank 0 (a DDP run prints on rank 0);
- with --torch110-zero-grad, `optimizer.zero_grad(set_to_none=False)`: torch 1.10's default, which
  the old job ran. Since torch 2.0 the default sets gradients to None and step() then updates nothing;
- every rank prints its getrusage (user and system CPU seconds, minor page faults) of the timed loop,
  read outside the clock.

Per case shape, N pairs: the old script once (OneFlow then PyTorch in one process, 5 warm-up
iterations, --times timed, --no-show-memory as the old job passed it) and `speedstats run` once with a
one-case old-bot suite of the same shape, iterations and warm-up; the order turns every pair. Both
get the default profile's `env:` (the old test container's variables; the DDP cases'
OMP_NUM_THREADS=1 too). Prints a table of the median of the per-pair differences
(speedstats / old script - 1) of each framework's time and of the relative speed, and the command.

--shared-model-too adds a third side to every pair: the old script with a model file that builds
speedstats' own ResNet50 (speedstats.bench.models) instead of the old one. It tells the model apart
from the harness: the table then also compares it with the old script and with speedstats.

--bare-too adds another side: benchmarks/bare_loop.py, speedstats' old-bot step in a plain loop, one
process per framework under the launcher speedstats uses, without runner, control files or pauses. It
tells speedstats' harness apart from the old script's process (both frameworks in one).

A second table gives each side's user and system CPU seconds and minor page faults per timed
iteration, summed over the ranks (speedstats' from the round's state in results.json).
"""

import argparse
import json
import os
import re
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from speedstats.bench.environment import package_versions, subprocess_env
from speedstats.suite import load_suite

OLD_SCRIPT = "scripts/compare_speed_with_pytorch.py"
OLD_MODEL = "Vision/classification/image/resnet50/models/resnet50.py"
OLD_WARMUP = 5  # fixed in the old script
TIME_LINE = re.compile(
    r"^(OneFlow|PyTorch) resnet50 time: [0-9.]+ms \(= ([0-9.]+)ms / ([0-9]+), ", re.MULTILINE
)


USAGE_START = "            _usage = __import__('resource').getrusage(0)\n            start = time.time()\n"
# Printed by every rank of the patched old script after its timed loop (outside the clock).
USAGE_LINE = (
    "    _after = __import__('resource').getrusage(0)\n"
    "    print('# usage ' + ('oneflow' if test_oneflow else 'pytorch'), _after.ru_utime - _usage.ru_utime,"
    " _after.ru_stime - _usage.ru_stime, _after.ru_minflt - _usage.ru_minflt, flush=True)\n"
)
USAGE = re.compile(r"^# usage (oneflow|pytorch) ([0-9.e-]+) ([0-9.e-]+) ([0-9]+)$", re.MULTILINE)
USAGE_FIELDS = ("user_s", "system_s", "minor_faults")


def usage_totals(records):
    """{framework: {user_s, system_s, minor_faults}} summed over ranks, from (framework, *values)."""
    totals = {}
    for framework, *values in records:
        into = totals.setdefault(framework, dict.fromkeys(USAGE_FIELDS, 0))
        for name, value in zip(USAGE_FIELDS, values):
            into[name] += float(value)
    return totals


class Failed(Exception):
    pass


def patch_old_script(text, device, torch110_zero_grad):
    """The old script's text with this run's edits; each edit must match as often as expected."""
    edits = [
        ('.to("cuda")', f".to({device!r})", 2),
        ('rank = int(os.getenv("RANK", "0"))', 'rank = max(0, int(os.getenv("RANK", "0")))', 1),
    ]
    if device == "cpu":
        edits += [
            ("torch.cuda.set_device(rank)", "None  # on the CPU", 1),
            ('backend="nccl"', 'backend="gloo"', 1),
            ("device_ids=[rank]", "device_ids=None", 1),
        ]
    if torch110_zero_grad:
        edits.append(("optimizer.zero_grad()", "optimizer.zero_grad(set_to_none=False)", 1))
    edits += [
        ("            start = time.time()\n", USAGE_START, 1),
        ("    end = time.time()\n", "    end = time.time()\n" + USAGE_LINE, 1),
    ]
    for old, new, count in edits:
        found = text.count(old)
        if found != count:
            raise Failed(f"{OLD_SCRIPT}: expected {count} of {old!r}, found {found} (another version?)")
        text = text.replace(old, new)
    return text


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_old_script(script, model, shape, times, ddp, env):
    shape_arg = "x".join(map(str, shape))
    args = [str(script), str(model), "resnet50", shape_arg, "--times", str(times), "--no-show-memory"]
    if ddp:
        args = [
            "-m",
            "oneflow.distributed.launch",
            "--nproc_per_node",
            "2",
            "--master_port",
            str(_free_port()),
            *args,
            "--ddp",
        ]
    proc = subprocess.run(
        [sys.executable, *args],
        check=False,
        cwd=script.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    found = {name: float(total) / int(n) for name, total, n in TIME_LINE.findall(proc.stdout)}
    if proc.returncode != 0 or set(found) != {"OneFlow", "PyTorch"}:
        tail = " | ".join(proc.stdout.strip().splitlines()[-5:])
        raise Failed(f"old script exited {proc.returncode} without both time lines: {tail}")
    return found["OneFlow"], found["PyTorch"], usage_totals(USAGE.findall(proc.stdout))


def suite_text(shape, times, ddp, env):
    batch, size = shape[0], shape[2]
    lines = ["name: parity", f"warmup: {OLD_WARMUP}", "rounds: 1", "mode: old-bot", "confirm: false", "env:"]
    lines += [f"  {name}: {json.dumps(value)}" for name, value in sorted(env.items())]
    lines += [
        "cases:",
        "  - id: parity",
        "    kind: resnet50",
        f"    batch_size: {batch}",
        f"    image_size: {size}",
        f"    times: {times}",
    ]
    if ddp:
        lines += ["    ddp: true", "    world_size: 2"]
    return "\n".join(lines) + "\n"


def run_speedstats(tmp, shape, times, ddp, env, device):
    suite = tmp / "suite.yml"
    suite.write_text(suite_text(shape, times, ddp, env), encoding="utf-8")
    out = tmp / "speedstats-out"
    cmd = [
        sys.executable,
        "-m",
        "speedstats",
        "run",
        "--suite",
        str(suite),
        "--device",
        device,
        "--out",
        str(out),
        "--quiet",
        "--no-confirm",
        "--lock-timeout",
        "3600",
    ]
    proc = subprocess.run(
        cmd,
        check=False,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "SPEEDSTATS_LOCK_DIR": str(tmp / "locks")},
    )
    try:
        case = json.loads((out / "results.json").read_text(encoding="utf-8"))["cases"][0]
    except (OSError, ValueError, IndexError):
        raise Failed(
            f"speedstats run exited {proc.returncode} without results: {proc.stderr[-600:]}"
        ) from None
    of, pt = case["frameworks"]["oneflow"], case["frameworks"]["pytorch"]
    if of["per_iter_s"] is None or pt["per_iter_s"] is None:
        raise Failed(f"speedstats run: {of['error'] or pt['error']}")
    usage = {}
    for name, framework in (("oneflow", of), ("pytorch", pt)):
        cpu = framework["round_states"][0]["cpu"]  # one round; the worker's processes, ranks summed
        usage[name] = dict(zip(USAGE_FIELDS, (cpu[f"worker_{field}"] for field in USAGE_FIELDS)))
    return of["per_iter_s"] * 1000, pt["per_iter_s"] * 1000, usage


def run_bare_loop(framework, shape, times, ddp, env, device):
    """benchmarks/bare_loop.py for one framework, under the launcher speedstats' worker runs under."""
    args = [str(Path(__file__).with_name("bare_loop.py")), "--framework", framework, "--device", device,
            "--batch-size", str(shape[0]), "--image-size", str(shape[2]), "--times", str(times),
            "--warmup", str(OLD_WARMUP)]
    if ddp:
        launcher = "torch.distributed.run" if framework == "pytorch" else "oneflow.distributed.launch"
        args = ["-m", launcher, "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
                "--master_port", str(_free_port()), *args, "--ddp"]
    proc = subprocess.run([sys.executable, *args], check=False, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith('{"rank"')]
    if proc.returncode != 0 or len(lines) != (2 if ddp else 1):
        tail = " | ".join(proc.stdout.strip().splitlines()[-5:])
        raise Failed(f"bare loop ({framework}) exited {proc.returncode} without its figures: {tail}")
    per_iter = next(line["per_iter_s"] for line in lines if line["rank"] == 0)
    return per_iter * 1000, usage_totals([(framework, *(line[f] for f in USAGE_FIELDS)) for line in lines])


def run_bare_loops(shape, times, ddp, suite_env, device):
    """OneFlow's bare loop, then PyTorch's, each in the environment speedstats gives its worker."""
    figures, usage = {}, {}
    for framework in ("oneflow", "pytorch"):
        env = subprocess_env(framework, extra=suite_env)
        figures[framework], used = run_bare_loop(framework, shape, times, ddp, env, device)
        usage.update(used)
    return figures["oneflow"], figures["pytorch"], usage


def parse_shape(text):
    try:
        parts = [int(p) for p in text.split(",")]
    except ValueError:
        parts = []
    if len(parts) != 3 or min(parts) < 1:
        raise argparse.ArgumentTypeError(f"--shape {text!r}: expected BS,H,W such as 2,224,224")
    if parts[1] != parts[2]:
        raise argparse.ArgumentTypeError(f"--shape {text!r}: speedstats measures square images (H = W)")
    if parts[1] < 193:
        # The old model's AvgPool2d(7) needs a final feature map of at least 7x7 (ceil(H / 32) >= 7).
        raise argparse.ArgumentTypeError(f"--shape {text!r}: the old model needs H and W of at least 193")
    return [parts[0], 3, parts[1], parts[2]]


# What the table compares, side against against, where both sides ran.
COMPARISONS = (
    ("speedstats", "old"),
    ("old-shared-model", "old"),
    ("speedstats", "old-shared-model"),
    ("bare", "old"),
    ("speedstats", "bare"),
)


def median_changes(pairs, side, against):
    """Per framework and for the relative speed: the median over pairs of side / against - 1."""
    return {
        name: statistics.median(p[side][i] / p[against][i] - 1 for p in pairs)
        for i, name in enumerate(("oneflow", "pytorch", "relative"))
    }


def measure_case(args, script, model, shape, ddp, shared_model=None):
    suite_env = dict(load_suite(profile="default").env)
    if ddp:
        suite_env["OMP_NUM_THREADS"] = "1"  # as the old job exported before its DDP runs
    old_env = subprocess_env("oneflow", extra=suite_env)
    pairs, usages = [], []
    label = f"{shape}{' ddp' if ddp else ''}"
    sides = ["old", "speedstats"] + (["old-shared-model"] if shared_model else [])
    sides += ["bare"] if args.bare_too else []
    old_models = {"old": model, "old-shared-model": shared_model}  # the sides the old script runs
    for k in range(args.pairs):
        figures, usage = {}, {}
        order = sides[k % len(sides) :] + sides[: k % len(sides)]  # each side takes each place in turn
        for side in order:
            if side in old_models:
                old_model = old_models[side]
                of, pt, usage[side] = run_old_script(script, old_model, shape, args.times, ddp, old_env)
            elif side == "bare":
                of, pt, usage[side] = run_bare_loops(shape, args.times, ddp, suite_env, args.device)
            else:
                with tempfile.TemporaryDirectory() as tmp:
                    tmp = Path(tmp)
                    of, pt, usage[side] = run_speedstats(tmp, shape, args.times, ddp, suite_env, args.device)
            figures[side] = (of, pt, pt / of)
        pairs.append(figures)
        usages.append(usage)
        text = ", ".join(
            f"{side}: OneFlow {f[0]:.1f} ms, PyTorch {f[1]:.1f} ms, relative {f[2]:.3f}"
            for side, f in figures.items()
        )
        print(
            f"# {label} pair {k + 1}/{args.pairs} (order {', '.join(order)}): {text}; "
            f"load average {os.getloadavg()[0]:.2f}",
            file=sys.stderr,
            flush=True,
        )
    return {
        "shape": shape,
        "ddp": ddp,
        "pairs": [{side: list(f) for side, f in figures.items()} for figures in pairs],
        "usage": usages,
        "median_changes": {
            f"{side} against {against}": median_changes(pairs, side, against)
            for side, against in COMPARISONS
            if side in sides and against in sides
        },
        "medians": {side: [statistics.median(p[side][i] for p in pairs) for i in range(3)] for side in sides},
        "median_usage": {
            side: {
                framework: {
                    name: statistics.median(u[side][framework][name] for u in usages) / args.times
                    for name in USAGE_FIELDS
                }
                for framework in ("oneflow", "pytorch")
            }
            for side in sides
        },
    }


def table(cases):
    header = (
        "| case | pairs | side against | OneFlow ms: against, side, change | "
        "PyTorch ms: against, side, change | relative speed: against, side, change |"
    )
    rows = [header, "|---|---|---|---|---|---|"]
    for case in cases:
        for comparison, change in case["median_changes"].items():
            side, against = comparison.split(" against ")
            a, b = case["medians"][against], case["medians"][side]
            cells = [
                f"{a[i]:.1f}, {b[i]:.1f}, {change[name] * 100:+.1f}%"
                for i, name in enumerate(("oneflow", "pytorch"))
            ]
            cells.append(f"{a[2]:.3f}, {b[2]:.3f}, {change['relative'] * 100:+.1f}%")
            rows.append(
                f"| {case['shape']}{', ddp' if case['ddp'] else ''} | {len(case['pairs'])} | "
                f"{comparison} | " + " | ".join(cells) + " |"
            )
    return "\n".join(rows)


def usage_table(cases):
    """Where the CPU went: per side, each framework's user and system CPU seconds and minor page
    faults per timed iteration, summed over the ranks, medians over the pairs."""
    rows = [
        "| case | side | OneFlow user s, system s, minor faults | PyTorch user s, system s, minor faults |",
        "|---|---|---|---|",
    ]
    for case in cases:
        for side, usage in case["median_usage"].items():
            cells = [
                f"{u['user_s']:.3f}, {u['system_s']:.3f}, {u['minor_faults']:,.0f}"
                for u in (usage["oneflow"], usage["pytorch"])
            ]
            label = f"{case['shape']}{', ddp' if case['ddp'] else ''}"
            rows.append(f"| {label} | {side} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


SHARED_MODEL_FILE = """\
import oneflow as flow
from speedstats.bench.models import resnet50 as shared_resnet50


def resnet50():
    return shared_resnet50(flow.nn, image_size={image_size})
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models-checkout", required=True, type=Path, metavar="DIR", help="a checkout of Oneflow-Inc/models"
    )
    parser.add_argument("--pairs", type=int, default=5, help="pairs per case shape (default: %(default)s)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument(
        "--shape",
        type=parse_shape,
        action="append",
        metavar="BS,H,W",
        help="a case shape, repeatable (default: 2,224,224)",
    )
    parser.add_argument("--times", type=int, default=10, help="timed iterations (default: %(default)s)")
    parser.add_argument(
        "--torch110-zero-grad",
        action="store_true",
        help="the old script with torch 1.10's zero_grad (set_to_none=False)",
    )
    ddp = parser.add_mutually_exclusive_group()
    ddp.add_argument("--ddp", action="store_true", help="also each shape with DDP, 2 ranks")
    ddp.add_argument("--ddp-only", action="store_true", help="each shape with DDP, 2 ranks, only")
    parser.add_argument(
        "--shared-model-too",
        action="store_true",
        help="a third side: the old script running speedstats' ResNet50 instead of the old model file",
    )
    parser.add_argument(
        "--bare-too",
        action="store_true",
        help="another side: speedstats' step in a bare loop (benchmarks/bare_loop.py), one process per "
        "framework under the launchers speedstats uses, to tell the harness from the old script's process",
    )
    parser.add_argument("--out", type=Path, help="write every pair's figures here as JSON")
    args = parser.parse_args()
    if args.pairs < 1 or args.times < 1:
        parser.error("--pairs and --times must be at least 1")
    script_path, model = args.models_checkout / OLD_SCRIPT, (args.models_checkout / OLD_MODEL).resolve()
    for path in (script_path, model):
        if not path.is_file():
            parser.error(
                f"--models-checkout {args.models_checkout}: no {path.relative_to(args.models_checkout)}"
            )
    versions = package_versions()
    print(
        f"# torch {versions['torch']}, oneflow {versions['oneflow']}, device {args.device}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}",
        file=sys.stderr,
        flush=True,
    )
    cases = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            script = Path(tmp) / "compare_speed_with_pytorch.py"
            script.write_text(
                patch_old_script(
                    script_path.read_text(encoding="utf-8"), args.device, args.torch110_zero_grad
                ),
                encoding="utf-8",
            )
            ddp_variants = (True,) if args.ddp_only else (False, True) if args.ddp else (False,)
            for shape in args.shape or [[2, 3, 224, 224]]:
                shared_model = None
                if args.shared_model_too:
                    # The old script rewrites a model file's imports for PyTorch (torch as flow), so
                    # this file builds speedstats' ResNet50 under either framework.
                    shared_model = Path(tmp) / f"shared_resnet50_{shape[2]}.py"
                    shared_model.write_text(SHARED_MODEL_FILE.format(image_size=shape[2]), encoding="utf-8")
                for ddp in ddp_variants:
                    cases.append(measure_case(args, script, model, shape, ddp, shared_model))
    except Failed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    command = " ".join(
        ["benchmarks/parity_with_old_script.py", "--models-checkout", "DIR"]
        + [
            shlex.quote(a)
            for a in sys.argv[1:]
            if a != str(args.models_checkout)
            and a != "--models-checkout"
            and not a.startswith("--models-checkout=")
        ]
    )
    print(table(cases))
    print()
    print(usage_table(cases))
    print(
        f"\ntorch {versions['torch']}, oneflow {versions['oneflow']}, {args.times} timed iterations after "
        f"{OLD_WARMUP} warm-up; change = median over pairs of (side / against - 1); CPU and faults per "
        f"timed iteration, all ranks\n"
        f"command: {command}"
    )
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "command": command,
                    "versions": versions,
                    "device": args.device,
                    "times": args.times,
                    "cases": cases,
                },
                indent=1,
            ),
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
