"""`speedstats bisect`: which build of an ordered range made a case slower.

The search itself is speedstats.analysis.bisect (pure). Here: the builds from the flags (--good, --bad,
and --between: a file of builds, one a line, or a requirement template over a package index), each
comparison measured by a `speedstats run` of its own (speedstats.child_run: head against base with the
suite's head-vs-base rule and pairs of processes, OneFlow only, into OUT/steps/), the state file that
lets a stopped search go on (OUT/bisect.json, read by the same declared-field reader as results.json),
the time budget, the report (stdout, OUT/report.md, the job summary) and, with --pr, the comment.

Exit statuses: 0 the search ended (a build found, or the change spread over several: the report and
the state file's `outcome` say which), 8 bad is not shown slower than good, 9 the time budget ran out
(the same command goes on), 2 bad input, 3 / 4 / 7 a comparison's run ended so (a case without
figures, the device busy, a disturbed machine: nothing is recorded for it, and the same command
measures it again), 5 GitHub unreachable while posting.
"""

import datetime
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from speedstats import actions_io
from speedstats.analysis import bisect as search
from speedstats.analysis import stats
from speedstats.errors import (
    EXIT_BAD_INPUT,
    EXIT_BUDGET_SPENT,
    EXIT_CASE_FAILED,
    EXIT_DEVICE_BUSY,
    EXIT_DISTURBED,
    EXIT_NOT_SLOWER,
    EXIT_OK,
    EXIT_VERDICT_FAILED,
    SpeedstatsError,
    UserError,
)
from speedstats.fsutil import ensure_dir, read_text, write_atomic, write_stdout
from speedstats.settings import read_record
from speedstats.text import one_line, shown

STATE_FILE = "bisect.json"
REPORT_FILE = "report.md"
STEPS_DIR = "steps"
TRACKED_SUITE = "suite-tracked.yml"
DEFAULT_OUT = "speedstats-bisect"
LIST_LIMIT = 1 << 20  # bytes of a --between file
VERSION = "{version}"
INDEX_TIMEOUT_S = 300
MIN_KEEP_BUILDS = 8  # the cache keeps at least every build of a search, and this many
EXIT_MEANINGS = {EXIT_BAD_INPUT: "bad input", EXIT_CASE_FAILED: "a case without figures",
                 EXIT_DEVICE_BUSY: "the device stayed busy",
                 EXIT_DISTURBED: "measured on a disturbed machine"}


def register(subparsers):
    p = subparsers.add_parser(
        "bisect", help="find the build of an ordered range that made a case slower",
        description="Measure builds head against base, as `run` does with --baseline-oneflow, to find the "
        "first build slower than the one before it: bad against good first, then the build halfway each "
        "time. Each comparison is a run of its own in OUT/steps/; OUT/bisect.json keeps them, so the same "
        "command stopped (--budget-s, a signal) goes on without measuring one again. Prints the report and "
        "writes OUT/report.md; with --pr, posts it there. Exit 0 when it ended (a build found, or the change "
        "spread over several builds; the report says which), 8 when bad is not shown slower than good, 9 "
        "when the time budget ran out, 2 on bad input, 3, 4 or 7 when a comparison's run exited so (it is "
        "measured again next time), 5 when GitHub was unreachable.")
    p.add_argument("--good", required=True, metavar="BUILD",
                   help="the last build known not to be slower: a wheel, a folder or glob of wheels, or pip "
                        "requirements (as `run --oneflow` takes)")
    p.add_argument("--bad", required=True, metavar="BUILD", help="the first build known to be slower")
    p.add_argument("--between", required=True, metavar="SPEC",
                   help="the builds between them, oldest first: a file with one build a line (a wheel, "
                        "folder or glob, relative to the file's folder, or pip requirements; blank lines "
                        "and lines starting with '#' are skipped), or a requirement template such as "
                        "'oneflow=={version}': every version the package index (see --pip-args) lists "
                        "between --good's and --bad's pinned versions, with the same local label (+cu118)")
    p.add_argument("--suite", metavar="FILE", help="suite YAML (may extend a profile with 'extends:')")
    p.add_argument("--profile", metavar="NAME", help="built-in suite: default (GPU) or smoke (CPU, minutes)")
    p.add_argument("--device", choices=("cpu", "cuda", "auto"), default="auto",
                   help="where to run; auto picks cuda when NVML sees a GPU (default: auto)")
    p.add_argument("--cache-dir", metavar="DIR", help="the build cache, as for `run`")
    p.add_argument("--flowvision", metavar="BUILD", help="flowvision for every OneFlow build")
    p.add_argument("--pip-args", metavar="ARGS",
                   help="extra pip arguments, e.g. '--extra-index-url URL' (also where a template's "
                        "versions are listed from)")
    p.add_argument("--lock-timeout", type=float, metavar="SECONDS",
                   help="how long each comparison waits for another run on the same device")
    p.add_argument("--out", metavar="DIR", default=DEFAULT_OUT,
                   help="folder of the state file, the report and each comparison's run (default: "
                        "%(default)s); the same folder again goes on from its state")
    p.add_argument("--budget-s", type=float, metavar="SECONDS",
                   help="stop (exit 9) before a comparison that would end past this many seconds from the "
                        "start, judged by the longest comparison so far")
    posting = p.add_argument_group("posting the report", "With --pr, the report is posted on that issue or "
                                   "pull request when the search ends or stops, and a later run of the same "
                                   "search updates it.")
    posting.add_argument("--pr", type=int, metavar="N",
                         help="the issue or pull request to post the report on")
    from speedstats.github.options import add_common_options, add_mode_option

    add_mode_option(posting)
    add_common_options(posting, pull_request=False, dry_run=False)
    p.set_defaults(func=bisect_command)


# -- the builds ------------------------------------------------------------------------------------------


def _path_like(token):
    return "/" in token or token.endswith(".whl") or any(c in token for c in "*?[")


def _relative_to(folder, line):
    """A line of a --between file with each relative wheel path, folder or glob made relative to the
    file's folder (requirements and absolute paths as they are)."""
    tokens = line.split()
    if len(tokens) == 1 and (folder / line).exists():
        return str(folder / line)
    return " ".join(str(folder / t) if _path_like(t) and "://" not in t and not os.path.isabs(t) else t
                    for t in tokens)


def _check_build(where, text, pip_args):
    """A UserError naming `where` unless text is a build `run --oneflow` takes (not 'installed')."""
    from speedstats.bench.builds import parse_build_spec

    if not text.strip() or text.strip() == "installed":
        raise UserError(f"{where}: must be a wheel, a folder or glob of wheels, or pip requirements, "
                        f"got {shown(text)}")
    parse_build_spec(where, "oneflow", text, pip_args=pip_args or ())


def list_builds(path, pip_args):
    """[(text as written, text to run)] of a --between file."""
    text = read_text(path, "--between file", LIST_LIMIT)
    folder = Path(path).parent
    builds = []
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        resolved = _relative_to(folder, line)
        _check_build(f"--between {path}:{lineno}", resolved, pip_args)
        builds.append((line, resolved))
    return builds


_REQUIREMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _pinned_version(flag, text):
    """The version a build names: NAME==VERSION, or a wheel's file name; a UserError otherwise."""
    text = text.strip()
    match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*===?\s*(\S+)", text)
    if match:
        return match.group(2)
    if text.endswith(".whl") and len(Path(text).name.split("-")) >= 5:
        return Path(text).name.split("-")[1]
    raise UserError(f"{flag}: a template in --between needs {flag} pinned, as NAME==VERSION or a wheel "
                    f"file, to know where the range starts or ends; got {shown(text)}")


def _local(version):
    return version.split("+", 1)[1].lower() if "+" in version else ""


def index_versions(package, pip_args):
    """The versions of `package` on the index pip sees with pip_args, newest first (pip's order)."""
    import shlex

    try:
        extra = shlex.split(pip_args or "")
    except ValueError as exc:
        raise UserError(f"--pip-args: {exc}") from None
    command = [sys.executable, "-m", "pip", "index", "versions", package, "--pre",
               "--disable-pip-version-check", "--no-input", *extra]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=INDEX_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise UserError(f"--between: listing the versions of {package} took over "
                        f"{INDEX_TIMEOUT_S}s") from None
    listed = next((line.split(":", 1)[1] for line in proc.stdout.splitlines()
                   if line.startswith("Available versions:")), None)
    if proc.returncode != 0 or listed is None:
        lines = [line for line in (proc.stderr + proc.stdout).splitlines() if line.strip()
                 and "experimental command" not in line]
        cause = one_line(lines[-1], 200) if lines else f"pip exited {proc.returncode}"
        raise UserError(f"--between: the package index lists no versions of {package}: {cause}")
    return [v.strip() for v in listed.split(",") if v.strip()]


def template_builds(template, good, bad, pip_args):
    """[(text, text)] of a requirement template: each version the index lists strictly between good's and
    bad's, with good's local label, oldest first."""
    name = _REQUIREMENT_NAME.match(template.strip())
    if not name or template.count(VERSION) != 1:
        raise UserError(f"--between: a template must be a requirement with one {VERSION}, such as "
                        f"'oneflow=={VERSION}'; got {shown(template)}")
    first, last = _pinned_version("--good", good), _pinned_version("--bad", bad)
    versions = index_versions(name.group(0), pip_args)
    where = {v.lower(): i for i, v in enumerate(versions)}
    for flag, version in (("--good", first), ("--bad", last)):
        if version.lower() not in where:
            listed = ", ".join(versions[:5]) + (", ..." if len(versions) > 5 else "")
            raise UserError(f"--between: {flag}'s version {shown(version)} is not on the index (its newest: "
                            f"{listed or 'none'})")
    newest, oldest = where[last.lower()], where[first.lower()]
    if newest >= oldest:
        raise UserError(f"--between: --bad's version {shown(last)} is not newer than --good's {shown(first)}")
    between = [v for v in reversed(versions[newest + 1:oldest]) if _local(v) == _local(first)]
    builds = []
    for version in between:
        text = template.strip().replace(VERSION, version)
        _check_build(f"--between (version {version})", text, pip_args)
        builds.append((text, text))
    return builds


def _resolve_flag_build(flag, text, pip_args):
    _check_build(flag, text, pip_args)
    tokens = text.split()
    if len(tokens) == 1 and os.path.exists(text):
        return os.path.abspath(text)
    return " ".join(os.path.abspath(t) if _path_like(t) and "://" not in t else t for t in tokens)


def all_builds(args):
    """(texts as given, texts to run): good, the builds between, bad."""
    good = (args.good, _resolve_flag_build("--good", args.good, args.pip_args))
    bad = (args.bad, _resolve_flag_build("--bad", args.bad, args.pip_args))
    if VERSION in args.between:
        between = template_builds(args.between, args.good, args.bad, args.pip_args)
    else:
        between = list_builds(args.between, args.pip_args)
    builds = [good, *between, bad]
    if len(builds) > search.MAX_BUILDS:
        raise UserError(f"--between: {len(builds)} builds; a search takes at most {search.MAX_BUILDS}")
    return [given for given, _ in builds], [resolved for _, resolved in builds]


# -- the suite and the state -----------------------------------------------------------------------------


def suite_mapping(args):
    """The suite's mapping (its profile merged in), checked as `run` reads it."""
    from speedstats.suite import suite_data, suite_from_dict

    data, where = suite_data(args.suite, args.profile)
    suite_from_dict(json.loads(json.dumps(data)), where)
    return data


def measure_identity(args, suite_data):
    """What every comparison of one search is measured with: a later run of it must agree."""
    digest = hashlib.sha256(json.dumps(suite_data, sort_keys=True, default=str).encode()).hexdigest()
    return {"suite": digest[:16], "device": args.device, "pip_args": args.pip_args or "",
            "flowvision": args.flowvision or ""}


def read_state(path):
    """The State of a state file; a UserError naming the file and field when it is not one."""
    from speedstats.results import parse_json

    text = read_text(path, "bisect state file")
    try:
        data = parse_json(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise UserError(f"{path}: not a bisect state file: {one_line(exc, 120)}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: not a bisect state file: must be a JSON object")
    return read_record(search.State, data, str(path))


def start_or_resume(path, builds, measure, progress):
    if not path.exists():
        return search.State(builds=builds, measure=measure)
    state = read_state(path)
    if state.builds != builds:
        first = next(i for i, (a, b) in enumerate(zip(state.builds + [None] * len(builds),
                                                        builds + [None] * len(state.builds))) if a != b)
        raise UserError(f"{path}: a search of other builds (build {first + 1} differs): give another --out, "
                        "or delete the file to start again")
    for key, value in measure.items():
        if state.measure.get(key) != value:
            raise UserError(f"{path}: a search measured with another {key.replace('_', '-')}: give another "
                            "--out, or delete the file to start again")
    progress(f"speedstats bisect: going on from {path}: {search.count_text(len(state.steps), 'comparison')} "
             "measured before, not measured again")
    return state


def state_json(state, conclusion):
    data = {"schema": state.schema, "builds": state.builds, "measure": state.measure,
            "outcome": conclusion.outcome if conclusion is not None else None,
            "culprits": conclusion.culprits if conclusion is not None else [],
            "steps": [{"head": s.head, "base": s.base, "wall_s": round(s.wall_s, 3), "results": s.results,
                       "finished_at": s.finished_at,
                       "cases": {case_id: {"verdict": c.verdict, "ratio": c.ratio, "low": c.low,
                                           "high": c.high, "text": c.text} for case_id, c in s.cases.items()}}
                      for s in state.steps]}
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def tracked_suite(out, suite_data, case_ids):
    """OUT/suite-tracked.yml: the suite with only the cases bad against good showed slower."""
    import yaml

    data = json.loads(json.dumps(suite_data, default=str))
    data["cases"] = [case for case in data.get("cases") or []
                     if isinstance(case, dict) and case.get("id") in case_ids and not case.get("skip")]
    path = out / TRACKED_SUITE
    write_atomic(path, yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return path


# -- measuring a comparison ------------------------------------------------------------------------------


class StepFailed(SpeedstatsError):
    """A comparison's run ended without a verdict to go by; the search stops with its status."""

    def __init__(self, message, status, reason):
        super().__init__(message)
        self.exit_code, self.reason = status, reason


def keep_builds(count):
    """How many builds the cache keeps during a search: all of them where `run` allows it, so that no build
    is installed twice."""
    from speedstats.pipeline import MAX_KEEP_BUILDS

    return min(MAX_KEEP_BUILDS, max(MIN_KEEP_BUILDS, count + 1))


class Comparer:
    """compare(head, base) for the search: a `speedstats run` of build head against build base."""

    def __init__(self, args, out, builds, suite_data, state, progress):
        self.args, self.out, self.builds, self.suite_data = args, out, builds, suite_data
        self.state, self.progress = state, progress
        self.measured = 0

    def tracked(self):
        whole = next((s for s in self.state.steps if (s.head, s.base) == (len(self.builds) - 1, 0)), None)
        if whole is None:
            return None
        return [case_id for case_id, change in whole.cases.items() if change.verdict == stats.REGRESSION]

    def argv(self, head, base, folder):
        tracked = self.tracked()
        args = self.args
        argv = ["run", "--device", args.device, "--out", str(folder), "--quiet", "--only", "oneflow",
                "--oneflow", self.builds[head], "--baseline-oneflow", self.builds[base],
                "--keep-builds", str(keep_builds(len(self.builds)))]
        if tracked is not None:
            argv += ["--suite", str(tracked_suite(self.out, self.suite_data, tracked))]
        else:
            argv += (["--suite", args.suite] if args.suite else []) + (["--profile", args.profile]
                                                                        if args.profile else [])
        for flag, value in (("--cache-dir", args.cache_dir), ("--flowvision", args.flowvision),
                            ("--lock-timeout", args.lock_timeout)):
            if value is not None:
                argv += [flag, str(value)]
        if args.pip_args:
            argv.append(f"--pip-args={args.pip_args}")  # one argument: pip's own options start with '-'
        return argv

    def __call__(self, head, base):
        from speedstats.child_run import read_results, run_child
        from speedstats.verdict import head_vs_base

        number = len(self.state.steps) + 1
        name = f"{number:02d}-{search.number(head)[1:]}-vs-{search.number(base)[1:]}"
        folder = self.out / STEPS_DIR / name
        self.progress(f"speedstats bisect: comparison {number}: {search.number(head)} against "
                      f"{search.number(base)}")
        start = time.monotonic()
        status = run_child(self.argv(head, base, folder), self.progress)
        wall_s = time.monotonic() - start
        against = f"comparison {number} ({search.number(head)} against {search.number(base)})"
        if status not in (EXIT_OK, EXIT_VERDICT_FAILED):
            raise StepFailed(f"{against}: its run exited {status} (its lines above say why); nothing is "
                             "recorded for it, the same command measures it again", status,
                             f"{against} ended without a verdict (its run exited {status}: "
                             f"{EXIT_MEANINGS.get(status, 'see its log')}); the same command measures it "
                             "again")
        results_path = folder / "results.json"
        results = read_results(results_path)
        cases = {}
        for case in results.cases:
            row = head_vs_base(case)
            cases[case.id] = search.CaseChange(verdict=row.verdict, ratio=row.ratio, low=row.low,
                                               high=row.high, text=row.text)
        if not cases:
            raise StepFailed(f"{against}: its run measured no case", EXIT_BAD_INPUT,
                             f"{against} measured no case")
        self.measured += 1
        step = search.Step(head=head, base=base, cases=cases, wall_s=wall_s,
                           results=str(results_path.relative_to(self.out)),
                           finished_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
        self.progress(f"speedstats bisect: comparison {number}: {search.number(head)} against "
                      f"{search.number(base)}: {search.verdict_words(step)} ({search.duration_text(wall_s)})")
        return step


# -- the command -----------------------------------------------------------------------------------------


def _progress(message):
    print(message, file=sys.stderr, flush=True)


def posting_target(args):
    """The issue or pull request to post on (--pr), checked before anything is measured; None without."""
    if args.pr is None:
        return None, None
    from speedstats.github import context
    from speedstats.github.session import make_client

    if args.pr <= 0:
        raise UserError(f"--pr: must be a positive number, got {args.pr}")
    repo = context.resolve_repo(args.repo)
    client = make_client(args)
    return context.Target(repo=repo, pr_number=args.pr, run_id=actions_io.run_id()), client


def post_report(args, target, client, body):
    from speedstats.github.markers import BISECT
    from speedstats.github.session import guarded, post_kind

    return guarded(lambda: post_kind(args, target, client, BISECT, body), client)


def bisect_command(args):
    started = time.monotonic()
    if args.budget_s is not None and not 0 < args.budget_s < float("inf"):
        raise UserError(f"--budget-s: must be a positive number of seconds, got {args.budget_s}")
    given, builds = all_builds(args)
    suite_data = suite_mapping(args)
    out = ensure_dir(Path(args.out), "--out folder")
    target, client = posting_target(args)
    state_path = out / STATE_FILE
    state = start_or_resume(state_path, given, measure_identity(args, suite_data), _progress)
    comparer = Comparer(args, out, builds, suite_data, state, _progress)

    def save(steps):
        state.steps = list(steps)
        write_atomic(state_path, state_json(state, None), "bisect state file")

    def may_start(comparison, steps):
        # The first comparison measures the whole suite, the later ones only the cases it showed slower.
        past = [s.wall_s for s in steps[1:]] or [s.wall_s for s in steps]
        return search.within_budget(time.monotonic() - started, args.budget_s, past)

    conclusion, stopped, failed, status = None, None, None, EXIT_OK
    try:
        conclusion, steps = search.bisect(len(builds), comparer, state.steps, may_start, save)
        state.steps = steps
        status = EXIT_NOT_SLOWER if conclusion.outcome == search.NOT_SLOWER else EXIT_OK
    except search.Stopped as exc:
        stopped, status = exc.comparison, EXIT_BUDGET_SPENT
    except StepFailed as exc:
        _progress(f"speedstats: error: {one_line(exc, 400)}")
        failed, status = exc.reason, exc.exit_code
    write_atomic(state_path, state_json(state, conclusion), "bisect state file")
    report = search.Report(builds=given, steps=state.steps, conclusion=conclusion, stopped=stopped,
                           budget_s=args.budget_s, failed=failed)
    from speedstats.render import render_bisect_report

    body = render_bisect_report(report)
    write_atomic(out / REPORT_FILE, body + "\n")
    actions_io.append_summary(body + "\n")
    write_stdout(search.report_text(report))
    if target is not None and (state.steps or conclusion is not None):
        posted = post_report(args, target, client, body)
        status = status or posted
    return status
