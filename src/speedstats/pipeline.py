"""`speedstats run`, from its options to its exit status: the steps of a run, in the order `run` calls them.

    check the inputs       suite, templates, builds, device, bundle, history, label, outputs: all of it
                           before anything is measured, so that bad input fails in seconds
    prepare_builds         install and probe each contender's build (before the lock: no GPU needed)
    measure                under the device lock: the dataset, then bench.runner.SuiteRunner, which
                           writes OUT/results.json after every case
    judge                  the verdict, once (speedstats.verdict)
    annotate               in GitHub Actions: an annotation per failed check, regression, disturbed case
    render                 the comment from the results and that verdict
    write_comment          OUT/comment.md, and stdout
    set_outputs            the Action's outputs
    write_bundle           the results bundle for actions/upload-artifact (--bundle)
    append_history         one line of the history file (--history)
    exit_status            from the verdict: 0 passed, 1 failed, 3 a case without figures, 7 a case
                           measured on a disturbed machine (3 comes before 7, and 7 before 1)

The benchmark layer (speedstats.bench) only measures; judging, rendering, the GitHub outputs and the
files after a run are steps of this module.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from speedstats.actions_io import in_actions
from speedstats.casekinds import case_kind
from speedstats.contenders import BASE, FAMILIES, HEAD, contender
from speedstats.errors import (
    EXIT_CASE_FAILED,
    EXIT_DISTURBED,
    EXIT_VERDICT_FAILED,
    UserError,
    unwinding_on_signals,
)
from speedstats.fsutil import write_atomic
from speedstats.render import render_speed_stats
from speedstats.suite import load_suite
from speedstats.text import one_line
from speedstats.verdict import MEMORY_REGRESSION, MIB, disturbed_reason, judge

RESULTS_FILE = "results.json"
COMMENT_FILE = "comment.md"
DEFAULT_CACHE = ".cache/speedstats"
ANNOTATION_LIMIT = 400  # characters of an annotation's message
BASELINE_MISSING_LIMIT = 300
MAX_KEEP_BUILDS = 1000  # characters of why there is no baseline build


@dataclass
class RunOptions:
    """What `speedstats run` was asked to do; the fields are its flags (see speedstats.run_cli)."""

    suite: str | None = None
    profile: str | None = None
    device: str = "auto"
    out: str = "speedstats-out"
    cache_dir: str | None = None
    keep_builds: int | None = None
    templates: str | None = None
    rounds: int | None = None
    bundle: str | None = None
    history: str | None = None
    lock_timeout: float | None = None
    quiet: bool = False
    oneflow: str | None = None
    baseline_oneflow: str | None = None
    pytorch: str | None = None
    flowvision: str | None = None
    pip_args: str | None = None
    only: str | None = None  # a family: "oneflow" or "pytorch"
    no_confirm: bool = False
    required_label: str | None = None
    baseline_missing: str | None = None  # why there is no baseline build (fetch-baseline's output)
    attribute: str | None = None  # overrides the suite's `attribute` (slower, always, never)
    no_calibration: bool = False  # the runner's calibration gives the rule no process_sd prior


def cache_path(cache_dir):
    """The build cache: --cache-dir, else $SPEEDSTATS_CACHE, else DEFAULT_CACHE; absolute, since the
    workers run in folders of their own, where a relative build folder on their PYTHONPATH would name
    nothing and the environment's packages would be measured in its place."""
    return Path(cache_dir or os.environ.get("SPEEDSTATS_CACHE") or DEFAULT_CACHE).absolute()


def run(options, progress=None):
    """Run the suite and everything after it; the exit status.

    A cancelled job gets SIGINT, then SIGTERM, maybe in its first seconds (builds being inspected):
    from the start, unwind like Ctrl-C, so the runner kills its workers (in sessions of their own, the
    signal does not reach them), marks its results cancelled, and the CLI says "interrupted" (130).
    """
    with unwinding_on_signals():
        return _run_steps(options, progress or _progress)


def _run_steps(options, progress):
    suite = load_suite(options.suite, options.profile)
    check_templates(suite, options.templates)
    requests, contenders = build_requests(suite, options)
    check_frameworks_installed(sorted({r.family for r in requests if r.installed}))
    apply_rounds(suite, options.rounds)
    if options.attribute is not None:
        suite.attribute = options.attribute
    device = resolve_device(options.device)
    skipped = skip_cases_beyond_the_gpus(suite, device, progress)
    bundle_identity = bundle_identity_or_fail(options.bundle)
    if options.history:
        from speedstats.history import check_history_file

        check_history_file(options.history)
    label_lookup = label_lookup_or_fail(options.required_label)
    keep_builds = keep_builds_or_fail(options.keep_builds)
    out = check_outputs(options)
    cache = cache_path(options.cache_dir)
    lock_timeout = lock_timeout_or_fail(suite, options.lock_timeout)
    progress(f"speedstats: suite {suite.name!r}, {len(suite.cases)} cases, device {device}, output {out}")

    builds = prepare_builds(requests, cache, keep_builds, progress)
    if device == "cuda":
        check_driver_or_fail(builds, device, progress)
    case_rules, calibration = calibration_rules(suite, device, cache, contenders, options, progress)
    results = measure(suite, device, out, cache, builds, contenders, options, lock_timeout, progress,
                      skipped, case_rules)
    if calibration is not None:
        results.calibration = calibration
        write_atomic(out / RESULTS_FILE, results.to_json())
    if options.baseline_missing and BASE not in contenders:
        results.baseline_missing = one_line(options.baseline_missing, BASELINE_MISSING_LIMIT)
        write_atomic(out / RESULTS_FILE, results.to_json())
    verdict = judge(results, suite)
    annotate(verdict, progress)
    body = render_speed_stats(results, suite, verdict, templates_dir=options.templates)
    comment_path = write_comment(out, body, options.quiet, progress)
    results_path = out / RESULTS_FILE
    set_outputs(verdict, results_path, comment_path)
    if bundle_identity is not None:
        from speedstats.bundle import write_bundle

        write_bundle(options.bundle, results_path.read_text(encoding="utf-8"), body, *bundle_identity)
    if options.history:
        from speedstats.history import append_history

        append_history(options.history, results, commit=os.environ.get("GITHUB_SHA"))
    report(results, verdict, results_path, comment_path, progress)
    return exit_status(results, verdict, options.required_label, label_lookup)


# -- checking the inputs ------------------------------------------------------------------------------


def check_templates(suite, templates_dir):
    """Render made-up figures for every case of the suite, and a failed case, before measuring:
    a broken template then fails in a second, not after the whole run."""
    from speedstats.analysis.paired import judge_paired
    from speedstats.bench.assemble import case_record
    from speedstats.contenders import ROLES
    from speedstats.results import FrameworkResult, Results

    cases = []
    for spec in suite.cases + suite.cases[:1]:
        record = case_record(spec)
        rounds = [1.0 / spec.times] * 6
        record.frameworks = {role: FrameworkResult(total_s=1.0, per_iter_s=1.0 / spec.times, times=spec.times,
                                                   rounds_s=rounds) for role in ROLES}
        record.paired = judge_paired(rounds, rounds)
        cases.append(record)
    cases[0].confirmation = {"flags": [f"{cases[0].id}: a made-up flag"], "status": "confirmed"}
    cases[-1].error = "a made-up failure"
    made_up = {"family": "oneflow", "source": "wheel",
               "packages": {"oneflow": {"version": "0.0.0", "wheel": "oneflow-0.0.0-py3-none-any.whl",
                                        "sha256": "0" * 64, "git_commit": "0" * 40}}}
    builds = {role: dict(made_up, family=contender(role).family) for role in ROLES}
    results = Results(suite=suite.name, device="cpu", gpu_name="template check", cases=cases, builds=builds)
    render_speed_stats(results, suite, judge(results, suite), templates_dir=templates_dir)


def build_requests(suite, options):
    """The builds to prepare, and the contenders to measure, from the suite's 'builds:' and the flags."""
    from speedstats.bench.builds import parse_build_spec
    from speedstats.contenders import PYTORCH, ROLES

    spec = suite.builds
    flowvision = options.flowvision or spec.flowvision
    pip_args = options.pip_args if options.pip_args is not None else spec.pip_args
    build_text = {
        HEAD: options.oneflow or spec.oneflow,
        BASE: options.baseline_oneflow or spec.baseline_oneflow,
        PYTORCH: options.pytorch or spec.pytorch,
    }
    contenders = [role for role in ROLES if role != BASE or build_text[BASE]]
    if options.only is not None:  # with a baseline, 'oneflow' runs the head and the base
        contenders = [role for role in contenders if contender(role).family == options.only]
    requests = []
    for role in contenders:
        known = contender(role)
        companions = [flowvision] if "flowvision" in known.companions else []  # into every OneFlow build
        requests.append(parse_build_spec(role, known.family, build_text[role],
                                         companion_specs=companions, pip_args=pip_args))
    return requests, contenders


# What pip installs for each package a run lacks: the pins of requirements/bench.txt (OneFlow 0.9.0 loads
# its cuDNN and cuBLAS from the cu11 wheels, and breaks under numpy 2). flowvision 0.2.1 is an sdist
# that builds only with setuptools<70 and without build isolation, so no extra of this package can
# install it: it gets a second command.
PIP_INSTALL = {
    "oneflow": ("oneflow==0.9.0", "nvidia-cudnn-cu11==8.9.6.50", "nvidia-cublas-cu11==11.11.3.6",
                '"numpy<2"'),
    "torch": ("torch==2.7.1",),
    "torchvision": ("torchvision==0.22.1",),
    "timm": ("timm==1.0.31",),
    "pynvml": ("nvidia-ml-py",),  # the GPU's name and state; not needed on the CPU
}
FLOWVISION_INSTALL = ('"setuptools<70"', "wheel", "pip install --no-build-isolation flowvision==0.2.1")


def check_frameworks_installed(families=FAMILIES):
    """UserError naming, in one line, the pip commands that install what a run of these families lacks."""
    import importlib.util

    from speedstats.contenders import family_packages

    wanted = [name for family in families for name in family_packages(family)]
    missing = [name for name in wanted if importlib.util.find_spec(name) is None]
    if not missing:
        return
    lacking = missing + (["pynvml"] if importlib.util.find_spec("pynvml") is None else [])
    packages = [spec for name in lacking for spec in PIP_INSTALL.get(name, ())]
    if "flowvision" in missing:
        packages += FLOWVISION_INSTALL[:2]
    command = "pip install " + " ".join(packages)
    if "flowvision" in missing:
        command += f", then {FLOWVISION_INSTALL[2]}"
    # The pinned OneFlow 0.9.0 has no wheels for a newer CPython.
    where = " on CPython 3.10" if contender(HEAD).package in missing else ""
    # Under the CLI's 400 characters, with every package missing.
    raise UserError(f"run needs {', '.join(missing)} installed{where}: {command} (or post results made "
                    "elsewhere with 'speedstats render' and 'comment')")


def apply_rounds(suite, rounds):
    """--rounds: every case of the suite measures this many timed rounds."""
    if rounds is None:
        return
    if rounds < 1:
        raise UserError(f"--rounds: must be at least 1, got {rounds}")
    for case in suite.cases:
        case.rounds = rounds


def skip_cases_beyond_the_gpus(suite, device, progress):
    """On CUDA, before the lock: the cases that need more GPUs than this runner has (a DDP case's ranks
    take one each) are taken out of the suite; their results.SkippedCase records, for a line each after
    the block. With the suite's `too_few_gpus: fail`, or when no case is left, a UserError naming them."""
    if device != "cuda":
        return []
    from speedstats.gpuinfo import visible_gpu_count
    from speedstats.results import SkippedCase
    from speedstats.suite import TOO_FEW_GPUS_FAIL, gpu_shortfall

    gpus = visible_gpu_count()
    lacking = suite.needing_more_gpus(gpus)
    if not lacking:
        return []
    shortfall = gpu_shortfall(lacking, gpus)
    if suite.too_few_gpus == TOO_FEW_GPUS_FAIL:
        raise UserError(f"{shortfall} (the suite's too_few_gpus: fail; 'skip' leaves them out with a line "
                        "in the comment)")
    if len(lacking) == len(suite.cases):
        raise UserError(f"no case of the suite runs here: {shortfall}")
    left_out = {case.id for case, _ in lacking}
    suite.cases = [case for case in suite.cases if case.id not in left_out]
    progress(f"speedstats: not measured: {shortfall} (the suite's too_few_gpus: skip)")
    return [SkippedCase(id=case.id, reason=why) for case, why in lacking]


def resolve_device(device):
    from speedstats.gpuinfo import nvml_gpu_name

    if device == "cpu":
        return device
    has_gpu = nvml_gpu_name(0) is not None
    if device == "cuda" and not has_gpu:
        raise UserError("--device cuda: NVML sees no GPU on this machine (use --device cpu or auto)")
    return "cuda" if has_gpu else "cpu"


def bundle_identity_or_fail(bundle_dir):
    """The job's PR, head sha, run id and repo for --bundle, checked before anything is measured."""
    if not bundle_dir:
        return None
    from speedstats.bundle import identity_from_env

    identity = identity_from_env()
    needed = (("GITHUB_RUN_ID", identity.run_id), ("GITHUB_REPOSITORY", identity.repo),
              ("GITHUB_SHA or the event's head sha", identity.head_sha))
    missing = [name for name, value in needed if not value]
    if missing:
        raise UserError(f"--bundle: needs {', '.join(missing)} (set inside a GitHub Actions job)")
    return identity


def label_lookup_or_fail(label):
    """For --required-label: the pull request whose labels count, resolved before anything is measured."""
    if label is None:
        return None
    from speedstats.github.labels import check_label, prepare

    check_label(label)
    return prepare()


def check_outputs(options):
    """The output folder, made now, and its files checked, so a bad --out fails before measuring."""
    from speedstats.fsutil import check_output_file, ensure_dir

    out = ensure_dir(Path(options.out), "--out folder")
    if not os.access(out, os.W_OK | os.X_OK):
        raise UserError(f"{out}: cannot write into the --out folder: permission denied")
    for name in (RESULTS_FILE, COMMENT_FILE):
        check_output_file(out / name, name)
    if options.bundle:
        ensure_dir(Path(options.bundle), "--bundle folder")
    return out


def lock_timeout_or_fail(suite, lock_timeout):
    lock_timeout = suite.lock_timeout_s if lock_timeout is None else lock_timeout
    if not 0 <= lock_timeout < float("inf"):  # NaN fails this too
        raise UserError("--lock-timeout: must be a finite number of seconds, not negative, "
                        f"got {lock_timeout}")
    return lock_timeout


# -- measuring ----------------------------------------------------------------------------------------


def check_driver_or_fail(builds, device, progress):
    """On CUDA, before the lock: a build made for a newer CUDA than the driver supports, or without
    kernels for one of the run's GPUs (its architecture list; a build without one runs an op on each
    GPU, bench.gpu_probe), fails now."""
    from speedstats.bench.driver_check import check_architectures, check_driver
    from speedstats.bench.gpu_probe import check_builds_run
    from speedstats.bench.machine_state import Gpus, gpu_indices

    gpus = Gpus(gpu_indices(device))
    try:
        driver, gpu_facts = gpus.driver(), gpus.run_info()
    finally:
        gpus.close()
    for note in check_driver(builds, driver):
        progress(f"speedstats: {note}")
    check_architectures(builds, gpu_facts)
    check_builds_run(builds, gpu_facts, progress)


def keep_builds_or_fail(keep_builds):
    """--keep-builds, else $SPEEDSTATS_KEEP_BUILDS, else the default: how many builds the cache keeps."""
    from speedstats.bench.buildcache import DEFAULT_KEEP_BUILDS

    if keep_builds is None:
        text = os.environ.get("SPEEDSTATS_KEEP_BUILDS", "").strip()
        if not text:
            return DEFAULT_KEEP_BUILDS
        if not text.isdigit():
            raise UserError(f"SPEEDSTATS_KEEP_BUILDS: must be a whole number, got {text[:40]!r}")
        keep_builds, name = int(text), "SPEEDSTATS_KEEP_BUILDS"
    else:
        name = "--keep-builds"
    if not 2 <= keep_builds <= MAX_KEEP_BUILDS:
        raise UserError(f"{name}: must be between 2 (a head and its base) and {MAX_KEEP_BUILDS}, "
                        f"got {keep_builds}")
    return keep_builds


def prepare_builds(requests, cache, keep_builds, progress):
    from speedstats.bench.buildcache import evict_builds
    from speedstats.bench.builds import prepare_builds as prepare

    # Before the lock: installing and probing a build needs no GPU, and a bad one fails in seconds.
    builds = prepare(requests, cache, progress=progress)
    evict_builds(cache, keep=keep_builds, progress=progress)  # this run's builds were just used: kept
    return builds


def calibration_rules(suite, device, cache, contenders, options, progress):
    """With a baseline: ({case id: the suite's rule with the runner's calibrated process_sd}, results.json's
    `calibration`) from this runner's calibration for the device (speedstats.calibration.for_run);
    ({}, None) without one, with --no-calibration, or when the suite names its own process_sd."""
    if BASE not in contenders or options.no_calibration:
        return {}, None
    from dataclasses import replace

    from speedstats.calibration import for_run
    from speedstats.gpuinfo import device_name

    priors, used, note = for_run(cache, device_name(device), suite)
    if note:
        progress(f"speedstats: {note}")
    return {case: replace(suite.head_vs_base, process_sd=sd) for case, sd in priors.items()}, used


def measure(suite, device, out, cache, builds, contenders, options, lock_timeout, progress, skipped=(),
            case_rules=None):
    """Every case of the suite, under the device lock; the Results (with the cases `skipped`). A cancelled
    run (SIGINT, SIGTERM) writes the comment of the cases it finished, then raises
    bench.runner.RunCancelled."""
    from speedstats.bench.dataset import ensure_imagefolder
    from speedstats.bench.runner import RunCancelled, SuiteRunner
    from speedstats.gpuinfo import device_name
    from speedstats.lock import device_lock

    with device_lock(device, lock_timeout):
        dataset_dir = None
        if any(case_kind(c.kind).uses_dataset for c in suite.cases):
            cache = Path(suite.dataset.cache_dir or cache).absolute()
            progress(f"speedstats: preparing the dataset ({suite.dataset.images} JPEGs) in {cache}")
            dataset_dir = ensure_imagefolder(cache, suite.dataset, progress)
        case_scope = CaseGroups(progress) if in_actions() else None
        runner = SuiteRunner(suite, device, out, dataset_dir=dataset_dir, progress=progress,
                             gpu_name=device_name(device), builds=builds, contenders=contenders,
                             confirm=suite.confirm and not options.no_confirm, quiet_wait_s=lock_timeout,
                             case_scope=case_scope, skipped=skipped, case_rules=case_rules)
        try:
            return runner.run()
        except RunCancelled as exc:
            write_cancelled_comment(exc.results, suite, out, options.templates, progress)
            raise


class CaseGroups:
    """In GitHub Actions, each case's log folded in a `::group::` whose title says how long the run has
    measured and, from the cases done so far, about how long it has left."""

    def __init__(self, progress, clock=time.monotonic):
        self.progress = progress
        self.clock = clock
        self.started = None
        self.done_s = []  # how long each finished case took

    @contextlib.contextmanager
    def __call__(self, index, total, case):
        from speedstats.actions_io import workflow_command
        from speedstats.bench.runner import case_label

        now = self.clock()
        if self.started is None:
            self.started = now
        left = "time left unknown"
        if self.done_s:
            left = f"about {clock_text(sum(self.done_s) / len(self.done_s) * (total - index + 1))} left"
        self.progress(workflow_command("group", f"[{index}/{total}] {case_label(case)}: "
                                                f"{clock_text(now - self.started)} elapsed, {left}"))
        try:
            yield
        finally:
            self.done_s.append(self.clock() - now)
            self.progress(workflow_command("endgroup"))


def clock_text(seconds):
    """1h02m, 3m05s, 42s."""
    seconds = round(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def write_cancelled_comment(results, suite, out, templates_dir, progress):
    """comment.md of a cancelled run: the cases it finished and a line saying it was cancelled."""
    comment_path = out / COMMENT_FILE
    body = render_speed_stats(results, suite, judge(results, suite), templates_dir=templates_dir)
    write_atomic(comment_path, body)
    progress(f"speedstats: cancelled after {len(results.cases)} of {len(suite.cases)} cases; "
             f"wrote {out / RESULTS_FILE} and {comment_path}")


# -- after the measurement ----------------------------------------------------------------------------


def write_comment(out, body, quiet, progress):
    """OUT/comment.md, and the comment on stdout unless quiet; the comment's path."""
    comment_path = out / COMMENT_FILE
    write_atomic(comment_path, body)
    if not quiet:
        from speedstats.fsutil import write_stdout

        try:
            write_stdout(body + "\n")
        except (UserError, BrokenPipeError):  # the comment is in comment.md; the verdict still counts
            progress("speedstats: stdout is closed; the comment is only in " + str(comment_path))
    return comment_path


def annotate(verdict, progress):
    """In GitHub Actions: an error annotation for each failed case, failed threshold and regression
    against the base build, a warning for each case measured on a disturbed machine or likely slower
    than the base; one line each, titled `speedstats <case>`."""
    if not in_actions():
        return
    from speedstats.actions_io import annotation

    rows = {row.case_id: row for row in verdict.head_vs_base}
    for case in verdict.cases:
        title = f"speedstats {case.id}"
        disturbed = disturbed_reason(case.id, case.disturbed) if case.disturbed else None
        for reason in case.reasons:  # its failure or failed thresholds, and the disturbance
            level = "warning" if reason == disturbed else "error"
            progress(annotation(level, title, one_line(reason, ANNOTATION_LIMIT)))
        row = rows.get(case.id)
        slower = "error" if case.id in verdict.regressions else (
            "warning" if case.id in verdict.likely_regressions else None)
        if slower and row is not None:
            text = f"{case.id}: OneFlow {(row.ratio - 1) * 100:+.1f}% against the base build: {row.text}"
            progress(annotation(slower, title, one_line(text, ANNOTATION_LIMIT)))
    for change in verdict.memory:
        if change.verdict == MEMORY_REGRESSION:
            text = (f"{change.case_id}: OneFlow holds {change.change_bytes / MIB:.0f} MiB "
                    f"({change.change_pct:.1f}%) more memory than the base build")
            level = "error" if change.judged else "warning"
            progress(annotation(level, f"speedstats {change.case_id}", one_line(text, ANNOTATION_LIMIT)))


def set_outputs(verdict, results_path, comment_path):
    """The Action's outputs (see action.yml), and the job summary wherever $GITHUB_STEP_SUMMARY is set:
    the verdict line and the comment (the action's run-and-comment writes its own, saying where it
    posted it, and runs this without the variable)."""
    from speedstats.actions_io import append_summary, set_output, verdict_summary

    set_output("verdict", "pass" if verdict.passed else "fail")
    set_output("score", str(verdict.score))
    set_output("regressions", str(len(verdict.regressions)))
    set_output("likely-regressions", str(len(verdict.likely_regressions)))
    set_output("results", str(results_path))
    set_output("comment-file", str(comment_path))
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        append_summary(verdict_summary("pass" if verdict.passed else "fail", verdict.score,
                                       Path(comment_path).read_text(encoding="utf-8")))


def report(results, verdict, results_path, comment_path, progress):
    """The run's last progress line: where its files are, the score, the verdict and why."""
    failed = [c.id for c in results.cases if c.failure]
    slower = verdict.regressions
    progress(f"speedstats: wrote {results_path} and {comment_path}; score {verdict.score}, "
             f"verdict {'pass' if verdict.passed else 'fail'}"
             + (f"; slower than the base build: {', '.join(slower)}" if slower else "")
             + (f"; likely slower, not confirmed (the step does not fail on it): "
                f"{', '.join(verdict.likely_regressions)}" if verdict.likely_regressions else "")
             + (f"; more memory than the base build: {', '.join(verdict.memory_regressions)}"
                if verdict.memory_regressions else "")
             + (f"; cases without figures: {', '.join(failed)}" if failed else ""))
    if verdict.disturbed:
        progress(f"speedstats: measured on a disturbed machine, figures not comparable: "
                 f"{', '.join(verdict.disturbed)}")


def exit_status(results, verdict, required_label=None, label_lookup=None):
    """3 when a case produced no figures, else 7 when a case was measured on a disturbed machine, else 0
    when the verdict passed, else 1; with --required-label, a failed verdict exits 1 only when the pull
    request carries the label."""
    if any(c.failure for c in results.cases):
        return EXIT_CASE_FAILED
    if verdict.disturbed:
        return EXIT_DISTURBED
    if verdict.passed:
        return 0
    if label_lookup is not None:
        from speedstats.github.labels import verdict_fails_step

        return EXIT_VERDICT_FAILED if verdict_fails_step(required_label, label_lookup) else 0
    return EXIT_VERDICT_FAILED


def _progress(message):
    print(message, file=sys.stderr, flush=True)
