"""`speedstats run`: run the suite, write results.json and comment.md, print the comment."""

import os
import signal
import sys
from pathlib import Path

from speedstats.errors import EXIT_CASE_FAILED, EXIT_VERDICT_FAILED, UserError

BENCHMARK_PACKAGES = ("oneflow", "torch", "torchvision", "flowvision", "timm")


def register(subparsers):
    p = subparsers.add_parser(
        "run",
        help="run the benchmark suite with OneFlow and PyTorch",
        description="Run every case of the suite with both frameworks, write OUT/results.json and "
        "OUT/comment.md, and print the comment. Exit 0 when the verdict passes, 1 when it fails, "
        "2 on bad input, 3 when a case produced no figures, 4 when the device stayed busy, 6 on an "
        "internal error.",
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
    builds = p.add_argument_group(
        "builds", "What each contender runs (default: the suite's 'builds:', else what this environment has). "
        "BUILD is 'installed', a wheel file, a folder of wheels, a glob such as 'wheelhouse/oneflow-*.whl', "
        "or pip requirements such as 'oneflow==0.9.1.dev20240101+cu118'.")
    builds.add_argument("--oneflow", metavar="BUILD", help="the OneFlow build under test (the head)")
    builds.add_argument("--baseline-oneflow", metavar="BUILD",
                        help="a OneFlow build to judge the head against, measured in the same run")
    builds.add_argument("--pytorch", metavar="BUILD", help="torch and torchvision, the reference")
    builds.add_argument("--flowvision", metavar="BUILD", help="flowvision for both OneFlow builds")
    builds.add_argument("--pip-args", metavar="ARGS",
                        help="extra pip arguments for requirements, e.g. '--extra-index-url URL'")
    builds.add_argument("--only", choices=("oneflow", "pytorch"),
                        help="measure one framework only, as the old --only-oneflow/--only-pytorch "
                        "(with a baseline, 'oneflow' runs the head and the base)")
    builds.add_argument("--only-oneflow", dest="only", action="store_const", const="oneflow",
                        help="the same as --only oneflow, the old script's spelling")
    builds.add_argument("--only-pytorch", dest="only", action="store_const", const="pytorch",
                        help="the same as --only pytorch, the old script's spelling")
    builds.add_argument("--no-confirm", action="store_true",
                        help="do not measure flagged cases again before judging them")
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
    from speedstats.analysis.paired import judge_paired
    from speedstats.bench.runner import case_record
    from speedstats.render import render_speed_stats
    from speedstats.results import CONTENDERS, FrameworkResult, Results

    cases = []
    for spec in suite.cases + suite.cases[:1]:
        record = case_record(spec)
        rounds = [1.0 / spec.times] * 6
        record.frameworks = {fw: FrameworkResult(total_s=1.0, per_iter_s=1.0 / spec.times, times=spec.times,
                                                 rounds_s=rounds) for fw in CONTENDERS}
        record.paired = judge_paired(rounds, rounds)
        cases.append(record)
    cases[0].confirmation = {"flags": [f"{cases[0].id}: a made-up flag"], "status": "confirmed"}
    cases[-1].error = "a made-up failure"
    made_up = {"family": "oneflow", "source": "wheel",
               "packages": {"oneflow": {"version": "0.0.0", "wheel": "oneflow-0.0.0-py3-none-any.whl",
                                        "sha256": "0" * 64, "git_commit": "0" * 40}}}
    builds = {role: dict(made_up, family="pytorch" if role == "pytorch" else "oneflow") for role in CONTENDERS}
    render_speed_stats(Results(suite=suite.name, device="cpu", gpu_name="template check", cases=cases,
                               builds=builds), suite, templates_dir=templates_dir)


def check_frameworks_installed(families=("oneflow", "pytorch")):
    import importlib.util

    from speedstats.bench.builds import FAMILIES

    wanted = [name for family in families for name in FAMILIES[family]]
    missing = [name for name in wanted if importlib.util.find_spec(name) is None]
    if missing:
        raise UserError(f"run needs {', '.join(missing)} installed: run ./scripts/bootstrap.sh "
                        "(or post results made elsewhere with 'speedstats render' and 'speedstats comment')")


def run_command(args):
    from speedstats.bench.dataset import ensure_imagefolder
    from speedstats.bench.runner import RunCancelled, SuiteRunner
    from speedstats.gpuinfo import device_name
    from speedstats.lock import device_lock
    from speedstats.suite import load_suite

    suite = load_suite(args.suite, args.profile)
    check_templates(suite, args.templates)
    requests, contenders = build_requests(suite, args)
    installed = {r.family for r in requests if r.installed}
    check_frameworks_installed(sorted(installed))
    if args.rounds is not None:
        if args.rounds < 1:
            raise UserError(f"--rounds: must be at least 1, got {args.rounds}")
        for case in suite.cases:
            case.rounds = args.rounds
    device = resolve_device(args.device)
    bundle_identity = bundle_identity_or_fail(args.bundle)
    if args.history:
        from speedstats.analysis.history import check_history_file

        check_history_file(args.history)
    label_lookup = label_lookup_or_fail(args.required_label)
    out = check_outputs(args)
    cache = Path(args.cache_dir or os.environ.get("SPEEDSTATS_CACHE") or ".cache/speedstats")
    progress = _progress
    lock_timeout = suite.lock_timeout_s if args.lock_timeout is None else args.lock_timeout
    if not 0 <= lock_timeout < float("inf"):  # NaN fails this too
        raise UserError(f"--lock-timeout: must be a finite number of seconds, not negative, got {lock_timeout}")
    progress(f"speedstats: suite {suite.name!r}, {len(suite.cases)} cases, device {device}, output {out}")
    from speedstats.bench.builds import prepare_builds

    # Before the lock: installing and probing a build needs no GPU, and a bad one fails in seconds.
    builds = prepare_builds(requests, cache, progress=progress)
    # A cancelled job gets SIGINT, then SIGTERM: unwind like Ctrl-C, so the runner kills its workers
    # (in sessions of their own, the signal does not reach them) and marks its results cancelled.
    previous = {signum: signal.signal(signum, _terminate) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        with device_lock(device, lock_timeout):
            dataset_dir = None
            if any(c.kind == "swin_dataloader" for c in suite.cases):
                cache = Path(suite.dataset.cache_dir or cache)
                progress(f"speedstats: preparing the dataset ({suite.dataset.images} JPEGs) in {cache}")
                dataset_dir = ensure_imagefolder(cache, suite.dataset, progress)
            runner = SuiteRunner(suite, device, out, dataset_dir=dataset_dir, progress=progress,
                                 gpu_name=device_name(device), builds=builds, contenders=contenders,
                                 confirm=suite.confirm and not args.no_confirm)
            try:
                results = runner.run()
            except RunCancelled as exc:
                write_cancelled_comment(exc.results, suite, out, args)
                raise
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
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


def write_cancelled_comment(results, suite, out, args):
    """comment.md of a cancelled run: the cases it finished and a line saying it was cancelled."""
    from speedstats.fsutil import write_atomic
    from speedstats.render import render_speed_stats

    comment_path = out / "comment.md"
    write_atomic(comment_path, render_speed_stats(results, suite, templates_dir=args.templates).body)
    _progress(f"speedstats: cancelled after {len(results.cases)} of {len(suite.cases)} cases; "
              f"wrote {out / 'results.json'} and {comment_path}")


def build_requests(suite, args):
    """The builds to prepare, and the contenders to measure, from the suite's 'builds:' and the flags."""
    from speedstats.bench.builds import parse_build_spec
    from speedstats.results import BASE

    spec = suite.builds
    oneflow = args.oneflow or spec.oneflow
    base = args.baseline_oneflow or spec.baseline_oneflow
    pytorch = args.pytorch or spec.pytorch
    flowvision = args.flowvision or spec.flowvision
    pip_args = args.pip_args if args.pip_args is not None else spec.pip_args
    contenders = ["oneflow"] + ([BASE] if base else []) + ["pytorch"]
    if args.only == "oneflow":
        contenders.remove("pytorch")
    elif args.only == "pytorch":
        contenders = ["pytorch"]
    wanted = {
        "oneflow": ("oneflow", oneflow, [flowvision]),
        BASE: ("oneflow", base, [flowvision]),
        "pytorch": ("pytorch", pytorch, []),
    }
    requests = []
    for role in contenders:
        family, text, companions = wanted[role]
        requests.append(parse_build_spec(role, family, text, companion_specs=companions, pip_args=pip_args))
    return requests, contenders


def check_outputs(args):
    """The output folder, made now, and its files checked, so a bad --out fails before measuring."""
    from speedstats.fsutil import check_output_file, ensure_dir

    out = ensure_dir(Path(args.out), "--out folder")
    if not os.access(out, os.W_OK | os.X_OK):
        raise UserError(f"{out}: cannot write into the --out folder: permission denied")
    for name in ("results.json", "comment.md"):
        check_output_file(out / name, name)
    if args.bundle:
        ensure_dir(Path(args.bundle), "--bundle folder")
    return out


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
    regressions = len(rendered.regressions)
    comment_path = out / "comment.md"
    write_atomic(comment_path, rendered.body)
    if not args.quiet:
        from speedstats.fsutil import write_stdout

        try:
            write_stdout(rendered.body + "\n")
        except (UserError, BrokenPipeError):  # the comment is in comment.md; the verdict still counts
            _progress("speedstats: stdout is closed; the comment is only in " + str(comment_path))
    results_path = out / "results.json"
    set_output("verdict", "pass" if rendered.passed else "fail")
    set_output("score", str(rendered.score))
    set_output("regressions", str(regressions))
    set_output("likely-regressions", str(len(rendered.likely_regressions)))
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
              + (f"; slower than the base build: {', '.join(rendered.regressions)}" if regressions else "")
              + (f"; likely slower, not confirmed (the step does not fail on it): "
                 f"{', '.join(rendered.likely_regressions)}" if rendered.likely_regressions else "")
              + (f"; cases without figures: {', '.join(failed)}" if failed else ""))
    if failed:
        return EXIT_CASE_FAILED
    return 0 if rendered.passed else EXIT_VERDICT_FAILED


def _terminate(signum, frame):
    # Once: a second signal must not cut short the killing of the workers and the cancel marking.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt(f"signal {signum}")


def _progress(message):
    print(message, file=sys.stderr, flush=True)
