"""`speedstats run`: run the suite, write results.json and comment.md, print the comment."""

import os
import signal
import sys
from pathlib import Path

from speedstats.errors import UserError

EXIT_CASE_FAILED = 3
BENCHMARK_PACKAGES = ("oneflow", "torch", "torchvision", "flowvision", "timm")


def register(subparsers):
    p = subparsers.add_parser(
        "run",
        help="run the benchmark suite with OneFlow and PyTorch",
        description="Run every case of the suite with both frameworks, write OUT/results.json and "
        "OUT/comment.md, and print the comment. Exit 0 when the verdict passes, 1 when it fails, "
        "2 on bad input, 3 when a case produced no figures.",
    )
    p.add_argument("--suite", metavar="FILE", help="suite YAML (may extend a profile with 'extends:')")
    p.add_argument("--profile", metavar="NAME", help="built-in suite: default (GPU) or smoke (CPU, minutes)")
    p.add_argument("--device", choices=("cpu", "cuda", "auto"), default="auto",
                   help="where to run; auto picks cuda when NVML sees a GPU (default: auto)")
    p.add_argument("--out", metavar="DIR", default="speedstats-out", help="output folder (default: %(default)s)")
    p.add_argument("--cache-dir", metavar="DIR",
                   help="where the generated dataset is kept (default: .cache/speedstats)")
    p.add_argument("--templates", metavar="DIR", help="template folder overriding the built-in one")
    p.add_argument("--rounds", type=int, metavar="N", help="timed rounds per case (overrides the suite)")
    p.add_argument("--bundle", metavar="DIR", help="also write a results bundle for actions/upload-artifact")
    p.add_argument("--history", metavar="FILE", help="append this run to a JSON Lines history file")
    p.add_argument("--lock-timeout", type=float, metavar="SECONDS",
                   help="how long to wait for another run on the same device (default: the suite's)")
    p.add_argument("--quiet", action="store_true", help="do not print the comment on stdout")
    p.add_argument("--required-label", metavar="LABEL",
                   help="a failed verdict exits 1 only when the pull request carries LABEL (read through "
                        "the API with $GITHUB_TOKEN, else from the event payload); otherwise exit 0. The "
                        "comment and the verdict output still show the failure")
    p.set_defaults(func=run_command)


def resolve_device(device):
    from speedstats.gpuinfo import nvml_gpu_name

    if device == "cpu":
        return device
    has_gpu = nvml_gpu_name(0) is not None
    if device == "cuda" and not has_gpu:
        raise UserError("--device cuda: NVML sees no GPU on this machine (use --device cpu or auto)")
    return "cuda" if has_gpu else "cpu"


def check_templates(suite, templates_dir):
    """Render made-up figures for every case of the suite, and a failed case, before measuring:
    a broken template then fails in a second, not after the whole run."""
    from speedstats.bench.runner import case_record
    from speedstats.render import render_speed_stats
    from speedstats.results import FRAMEWORKS, FrameworkResult, Results

    cases = []
    for spec in suite.cases + suite.cases[:1]:
        record = case_record(spec)
        record.frameworks = {fw: FrameworkResult(total_s=1.0, per_iter_s=1.0 / spec.times, times=spec.times,
                                                 rounds_s=[1.0 / spec.times]) for fw in FRAMEWORKS}
        cases.append(record)
    cases[-1].error = "a made-up failure"
    render_speed_stats(Results(suite=suite.name, device="cpu", gpu_name="template check", cases=cases),
                       suite, templates_dir=templates_dir)


def check_frameworks_installed():
    import importlib.util

    missing = [name for name in BENCHMARK_PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        raise UserError(f"run needs {', '.join(missing)} installed: run ./scripts/bootstrap.sh "
                        "(or post results made elsewhere with 'speedstats render' and 'speedstats comment')")


def run_command(args):
    from speedstats.bench.dataset import ensure_imagefolder
    from speedstats.bench.runner import SuiteRunner
    from speedstats.gpuinfo import device_name
    from speedstats.lock import device_lock
    from speedstats.suite import load_suite

    suite = load_suite(args.suite, args.profile)
    check_templates(suite, args.templates)
    check_frameworks_installed()
    if args.rounds is not None:
        if args.rounds < 1:
            raise UserError(f"--rounds: must be at least 1, got {args.rounds}")
        for case in suite.cases:
            case.rounds = args.rounds
    device = resolve_device(args.device)
    bundle_identity = bundle_identity_or_fail(args.bundle)
    label_lookup = label_lookup_or_fail(args.required_label)
    out = Path(args.out)
    cache = Path(args.cache_dir or os.environ.get("SPEEDSTATS_CACHE") or ".cache/speedstats")
    progress = _progress
    lock_timeout = suite.lock_timeout_s if args.lock_timeout is None else args.lock_timeout
    progress(f"speedstats: suite {suite.name!r}, {len(suite.cases)} cases, device {device}, output {out}")
    # A cancelled job gets SIGTERM: unwind like Ctrl-C, so the runner kills its workers (they run in
    # sessions of their own and would otherwise keep the GPU busy).
    signal.signal(signal.SIGTERM, _terminate)
    with device_lock(device, lock_timeout):
        dataset_dir = None
        if any(c.kind == "swin_dataloader" for c in suite.cases):
            cache = Path(suite.dataset.cache_dir or cache)
            progress(f"speedstats: preparing the dataset ({suite.dataset.images} JPEGs) in {cache}")
            dataset_dir = ensure_imagefolder(cache, suite.dataset, progress)
        runner = SuiteRunner(suite, device, out, dataset_dir=dataset_dir, progress=progress,
                             gpu_name=device_name(device))
        results = runner.run()
    code = report(results, suite, out, args, bundle_identity)
    if code == 1 and label_lookup is not None:
        from speedstats.github.labels import verdict_fails_step

        return 1 if verdict_fails_step(args.required_label, label_lookup) else 0
    return code


def label_lookup_or_fail(label):
    """For --required-label: the pull request whose labels count, resolved before anything is measured."""
    if label is None:
        return None
    from speedstats.github.labels import check_label, prepare

    check_label(label)
    return prepare()


def bundle_identity_or_fail(bundle_dir):
    """The job's PR, head sha, run id and repo for --bundle, checked before anything is measured."""
    if not bundle_dir:
        return None
    from speedstats.bundle import identity_from_env

    identity = identity_from_env()
    missing = [name for name, value in (("GITHUB_RUN_ID", identity.run_id), ("GITHUB_REPOSITORY", identity.repo),
                                        ("GITHUB_SHA or the event's head sha", identity.head_sha)) if not value]
    if missing:
        raise UserError(f"--bundle: needs {', '.join(missing)} (set inside a GitHub Actions job)")
    return identity


def report(results, suite, out, args, bundle_identity=None):
    """Render, write comment.md, set the Action's outputs, bundle and history; the exit status."""
    from speedstats.actions_io import set_output
    from speedstats.fsutil import write_atomic
    from speedstats.render import render_speed_stats

    rendered = render_speed_stats(results, suite, templates_dir=args.templates)
    comment_path = out / "comment.md"
    write_atomic(comment_path, rendered.body)
    if not args.quiet:
        sys.stdout.write(rendered.body + "\n")
        sys.stdout.flush()
    results_path = out / "results.json"
    set_output("verdict", "pass" if rendered.passed else "fail")
    set_output("score", str(rendered.score))
    set_output("results", str(results_path))
    set_output("comment-file", str(comment_path))
    if bundle_identity is not None:
        from speedstats.bundle import write_bundle

        write_bundle(args.bundle, results_path.read_text(encoding="utf-8"), rendered.body, *bundle_identity)
    if args.history:
        from speedstats.analysis.history import append_history

        append_history(args.history, results, commit=os.environ.get("GITHUB_SHA"))
    failed = [c.id for c in results.cases if c.failure]
    _progress(f"speedstats: wrote {results_path} and {comment_path}; score {rendered.score}, "
              f"verdict {'pass' if rendered.passed else 'fail'}"
              + (f"; cases without figures: {', '.join(failed)}" if failed else ""))
    if failed:
        return EXIT_CASE_FAILED
    return 0 if rendered.passed else 1


def _terminate(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _progress(message):
    print(message, file=sys.stderr, flush=True)
