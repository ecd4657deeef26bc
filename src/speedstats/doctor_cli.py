"""`speedstats doctor`: in seconds, one table of what this runner needs for a suite and its builds, before
the first pull request finds out late, inside the device lock.

Each row is a check, ok / warning / fails, and what it found and what to do: the GPUs NVML sees and the
cases they are too few for, each build (prepared as `run` prepares it) against each GPU's architecture
(its kernel list, then one op on each GPU in a throwaway process) and against the driver, the GPUs'
clock policy, GPU processes seen from a container, free disk for the builds' cache, /dev/shm for the
DataLoader workers, the device lock's folder and holder, a short look at how quiet the machine is, and
with a token what it may write (read-only calls), and whether this runner has a calibration (how old).
The checks are speedstats.bench.doctor's and speedstats.github.permissions'; nothing is measured, posted
or locked, unless --calibrate asks for `speedstats calibrate` after the checks (minutes, under the lock).

Exit 0 when no row fails, 2 when one does (or on bad input).
"""

import concurrent.futures
import json
import sys

from speedstats.errors import EXIT_BAD_INPUT, UserError
from speedstats.run_cli import add_suite_and_build_options

QUIET_SECONDS = 10.0


def _progress(message):
    print(f"speedstats: {message}", file=sys.stderr, flush=True)


def prepare_builds(requests, cache):
    """({role: bench.builds.Build}, rows): each build prepared as `run` prepares it, a row each; one that
    cannot be prepared is a failed row, and left out of the checks that need it."""
    from speedstats.bench.builds import prepare_build
    from speedstats.bench.doctor import FAILS, OK, Row
    from speedstats.bench.driver_check import build_cuda
    from speedstats.contenders import LABELS
    from speedstats.pipeline import check_frameworks_installed

    def prepare(request):
        try:
            if request.installed:
                check_frameworks_installed([request.family])
            return prepare_build(request, cache, progress=_progress)
        except UserError as exc:
            return exc

    # The installed builds' import probes side by side, the others one after another (the cache's locks).
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(requests))) as pool:
        probes = {r.role: pool.submit(prepare, r) for r in requests if r.installed}
        outcomes = {r.role: prepare(r) for r in requests if not r.installed}
        outcomes.update({role: probe.result() for role, probe in probes.items()})
    builds, rows = {}, []
    for request in requests:
        check = f"{LABELS.get(request.role, request.role)} build"
        outcome = outcomes[request.role]
        if isinstance(outcome, UserError):
            rows.append(Row(check, FAILS, str(outcome)))
            continue
        builds[request.role] = outcome
        package, version, cuda = build_cuda(outcome.provenance)
        found = f"CUDA {cuda[0]}.{cuda[1]}" if cuda else "no CUDA version told"
        rows.append(Row(check, OK, f"{request.describe()}: {package} {version}, {found}"))
    return builds, rows


def _probe_unless_measuring(device):
    """The one-op probe, or, while a run holds the device, a stand-in that tries nothing: an op on a GPU
    being measured would disturb that run's rounds."""
    from speedstats.bench.gpu_probe import ProbeResult
    from speedstats.lock import lock_states

    try:
        holders = [holder for _, _, holder, _ in lock_states(device) if holder]
    except UserError:
        holders = []
    if not holders:
        return None

    def not_now(build, indices):
        return [ProbeResult(i, None, f"not tried while {holders[0]} holds the device (an op would disturb "
                                     "its measurement); run doctor again when it is free") for i in indices]

    return not_now


def token_rows(args):
    """The token's rows (github.permissions), or one saying there is no token to check."""
    from speedstats.bench.doctor import FAILS, WARNING, Row
    from speedstats.github import context

    token = context.resolve_token(args.token)
    if token is None:
        return [Row("GitHub token", WARNING, "none given (GITHUB_TOKEN or --token): whether it can comment, "
                                             "edit labels and create check runs is not checked")]
    try:
        repo = context.resolve_repo(args.repo)
    except UserError as exc:
        return [Row("GitHub token", FAILS, str(exc))]
    from speedstats.github.client import GitHubClient, RetryPolicy
    from speedstats.github.permissions import token_rows as rows_of

    client = GitHubClient(token, context.resolve_api_url(args.api_url),
                          RetryPolicy.from_env(None, args.github_deadline))
    return [Row(*row) for row in rows_of(client, repo)]


def calibration_rows(cache, device):
    """Whether this runner has a calibration for the device's GPU (or CPU) name, and how old it is."""
    from speedstats.analysis.rule import DEFAULT_PROCESS_SD
    from speedstats.bench.doctor import OK, WARNING, Row
    from speedstats.calibration import age_text, calibration_path, read_calibration
    from speedstats.gpuinfo import device_name

    path = calibration_path(cache, device_name(device))
    try:
        found = read_calibration(path)
    except UserError as exc:
        return [Row("calibration", WARNING, f"{exc}: 'run' goes without it; 'speedstats calibrate' (or "
                                            "doctor --calibrate) measures it again")]
    if found is None:
        text = (f"none for {device_name(device)} in {path.parent}: 'run' takes the suite's rule as it is "
                f"(pairs of processes taken to spread {DEFAULT_PROCESS_SD:.0%}); 'speedstats calibrate' (or "
                "doctor --calibrate) measures this runner's noise, for its rule's process_sd")
        return [Row("calibration", OK, text)]
    measured = [case for case in found.cases if case.process_sd is not None]
    sds = ", ".join(f"{case.id} {case.process_sd:.1%} (the rule's {case.prior:.1%})" for case in measured)
    return [Row("calibration", OK, f"{path}: {age_text(found.age_s())}, suite {found.suite!r}, "
                                   f"{found.pairs} pairs of {found.pair_rounds} rounds a case; process sd "
                                   f"{sds or 'none measured'}")]


def table(rows):
    """The rows as an aligned text table, one line each."""
    width = max([len("CHECK")] + [len(row.check) for row in rows])
    lines = [f"{'CHECK':<{width}}  {'STATUS':<7}  WHAT IT FOUND, WHAT TO DO"]
    lines += [f"{row.check:<{width}}  {row.status:<7}  {row.text}" for row in rows]
    return "\n".join(lines) + "\n"


def run_calibration(args, rows, device):
    """--calibrate: `speedstats calibrate` with doctor's suite and builds, when no row failed; its table
    on stderr with --json (stdout holds the rows), else on stdout. A row when it did not run or failed."""
    from speedstats.bench.doctor import FAILS, WARNING, Row
    from speedstats.calibrate_cli import calibrate
    from speedstats.fsutil import write_stdout

    if any(row.status == FAILS for row in rows):
        return [Row("calibrate", WARNING, "not run: a row above fails")]
    args.out, args.lock_timeout = args.calibrate_out, None
    args.device = device
    status = calibrate(args, (lambda text: _progress(text.rstrip("\n"))) if args.json else write_stdout)
    if status:
        return [Row("calibrate", WARNING, f"exited {status}: a case gave no figures or was disturbed "
                                          f"(see {args.calibrate_out}/results.json)")]
    return []


def doctor_command(args):
    from speedstats.bench import doctor
    from speedstats.bench.machine_state import Gpus
    from speedstats.fsutil import write_stdout
    from speedstats.gpuinfo import visible_gpu_count
    from speedstats.pipeline import build_requests, cache_path, keep_builds_or_fail
    from speedstats.suite import load_suite

    if not 0 <= args.quiet_seconds <= 600:
        raise UserError(f"--quiet-seconds: must be between 0 and 600, got {args.quiet_seconds:g}")
    suite = load_suite(args.suite, args.profile)
    requests, contenders = build_requests(suite, args)
    keep_builds = keep_builds_or_fail(args.keep_builds)
    cache = cache_path(args.cache_dir)
    count = 0 if args.device == "cpu" else visible_gpu_count()
    device = "cuda" if count else "cpu"
    gpus = Gpus(list(range(count)) or ([0] if args.device != "cpu" else []))
    try:
        facts, driver = gpus.run_info(), gpus.driver()
        rows = doctor.gpu_rows(gpus, facts, suite, args.device)
        builds, build_rows = prepare_builds(requests, cache)
        rows += build_rows
        rows += doctor.architecture_rows(builds, facts, probe=_probe_unless_measuring(device))
        rows += doctor.driver_rows(builds, driver)
        rows += doctor.clock_rows(gpus, facts, suite)
        rows += doctor.container_rows(gpus)
    finally:
        gpus.close()
    rows += doctor.disk_rows(cache, builds, keep_builds)
    rows += doctor.shm_rows(suite, len(contenders))
    rows += doctor.lock_rows(device, timeout_s=suite.lock_timeout_s)
    rows += doctor.quiet_rows(device, suite.disturbance, args.quiet_seconds)
    rows += token_rows(args)
    if args.calibrate:
        rows += run_calibration(args, rows, device)
    rows += calibration_rows(cache, device)
    fails = sum(row.status == doctor.FAILS for row in rows)
    warnings = sum(row.status == doctor.WARNING for row in rows)
    status = EXIT_BAD_INPUT if fails else 0
    if args.json:
        report = {"suite": suite.name, "device": device, "status": status,
                  "rows": [row._asdict() for row in rows]}
        write_stdout(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    else:
        heading = f"speedstats doctor: suite {suite.name!r} ({len(suite.cases)} cases), device {device}\n"
        verdict = (f"{fails} failed, {warnings} warning{'s' if warnings != 1 else ''}: a run here would "
                   "fail; fix the failed rows first\n" if fails else
                   f"nothing fails{f', {warnings} warnings' if warnings else ''}\n")
        write_stdout(heading + table(rows) + verdict)
    return status


def register(subparsers):
    from speedstats.calibrate_cli import add_calibrate_options
    from speedstats.github.options import add_common_options

    p = subparsers.add_parser(
        "doctor",
        help="check this runner for a suite and its builds: GPUs, kernels, driver, disk, lock, token",
        description="Print one table of what this runner needs for the suite and its builds, each row ok, "
        "warning or fails, with what to do: the GPUs NVML sees and the cases they are too few for; each "
        "build (prepared as 'run' prepares it) against each GPU's compute capability (its kernel list, "
        "then one op on each GPU in a throwaway process) and against the driver; the GPUs' clocks; GPU "
        "processes seen from a container; free disk for the builds' cache; /dev/shm for DataLoader "
        "workers; the device lock; how quiet the machine is; with a token, whether it can comment, edit "
        "labels and create check runs (read-only calls, nothing posted); whether this runner has a "
        "calibration and how old. Nothing is measured or locked, unless --calibrate runs 'speedstats "
        "calibrate' after the checks. "
        "Exit 0 when no row fails, 2 when one does.",
    )
    add_suite_and_build_options(p)  # as `run` takes them: the doctor checks what that run would need
    p.add_argument("--quiet-seconds", type=float, default=QUIET_SECONDS, metavar="N",
                   help="watch the machine this long for other processes and throttling (default: "
                        "%(default)g; 0: skip)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON instead of the table")
    p.add_argument("--calibrate", action="store_true",
                   help="then run 'speedstats calibrate' (minutes: an A/A run of the suite) when no row "
                        "fails; without it, a row says whether this runner has a calibration and how old")
    p.add_argument("--calibrate-out", metavar="DIR", default="speedstats-calibrate",
                   help="with --calibrate: where the A/A run's results.json goes (default: %(default)s)")
    add_calibrate_options(p)
    add_common_options(p, pull_request=False, dry_run=False, author=False)
    p.set_defaults(func=doctor_command)
