"""`speedstats reproduce`: does a head-vs-base verdict of CI hold on this machine?

From a results.json (or a workflow run's artifact holding one): the same builds, from the specs it
recorded (a wheel found by its file name and checked against the recorded sha256; a requirement pinned
to the recorded version; what was installed, this environment's), the same suite, cases and
head-vs-base rule, measured here by a `speedstats run` of its own (speedstats.child_run). Then, per
case, CI's verdict and change beside this machine's, whether the verdict holds, and how far the figures
are: the changes always, the times per iteration only on the same device (another is said as such).

Exit statuses: 0 every verdict holds here, 1 one does not, 2 bad input (a wheel not found, or one whose
sha256 is not the recorded one, naming the build), 3 / 4 / 7 as the run exited (a case without figures,
the device busy, a disturbed machine), 5 GitHub unreachable fetching the artifact.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
from pathlib import Path

from speedstats.contenders import BASE, HEAD, PYTORCH, contender
from speedstats.errors import (
    EXIT_CASE_FAILED,
    EXIT_DISTURBED,
    EXIT_OK,
    EXIT_VERDICT_FAILED,
    SpeedstatsError,
    UserError,
)
from speedstats.fsutil import ensure_dir, write_atomic, write_stdout
from speedstats.text import shown

DEFAULT_OUT = "speedstats-reproduce"
DEFAULT_ARTIFACT = "speedstats-results"
SUITE_FILE = "suite.yml"
INSTALLED = "installed"


def register(subparsers):
    p = subparsers.add_parser(
        "reproduce", help="measure a results.json's builds, suite and rule here: do its verdicts hold?",
        description="Measure the builds a results.json recorded (a wheel found by its file name in --wheels "
        "and checked against the recorded sha256, a requirement at the recorded version, what was "
        "installed from this environment) with the same suite, cases and head-vs-base rule on this "
        "machine, then print each case's verdict and change in CI and here, whether the verdict holds, "
        "and how far the figures are (the times only on the same device). Writes OUT/results.json. Exit 0 "
        "when every verdict holds here, 1 when one does not, 2 on bad input (a wheel missing or not the "
        "one recorded), 3, 4 or 7 as the run exited, 5 when GitHub was unreachable.")
    p.add_argument("results", nargs="?", metavar="RESULTS", help="the results.json to reproduce")
    p.add_argument("--run-id", type=int, metavar="ID",
                   help="instead of RESULTS: the workflow run whose artifact holds it (needs a token)")
    p.add_argument("--artifact-name", default=DEFAULT_ARTIFACT, metavar="NAME",
                   help=f"with --run-id: the artifact holding results.json (default: {DEFAULT_ARTIFACT})")
    p.add_argument("--wheels", action="append", metavar="DIR",
                   help="a folder holding the wheels the results name, found by file name (default: "
                        "RESULTS's folder and the current one); may be given several times")
    p.add_argument("--suite", metavar="FILE",
                   help="the suite file CI ran, for what results.json does not record (warm-up, dataset); "
                        "default: the built-in profile of that name, else the cases as recorded")
    p.add_argument("--profile", metavar="NAME", help="the built-in suite CI ran (default: the results' own)")
    p.add_argument("--device", choices=("cpu", "cuda", "auto"), default="auto",
                   help="where to run; auto picks cuda when NVML sees a GPU (default: auto)")
    p.add_argument("--cache-dir", metavar="DIR", help="the build cache, as for `run`")
    p.add_argument("--pip-args", metavar="ARGS",
                   help="extra pip arguments for the builds given as requirements, e.g. "
                        "'--extra-index-url URL'")
    p.add_argument("--lock-timeout", type=float, metavar="SECONDS",
                   help="how long to wait for another run on the same device")
    p.add_argument("--out", metavar="DIR", default=DEFAULT_OUT,
                   help="folder of this machine's run: results.json, comment.md, the suite (default: "
                        "%(default)s)")
    from speedstats.github.options import add_common_options

    add_common_options(p, pull_request=False, dry_run=False, author=False)
    p.set_defaults(func=reproduce_command)


# -- CI's results ----------------------------------------------------------------------------------------


def ci_results(args):
    """(results, where they came from, the folder beside them or None)."""
    from speedstats import results as results_model

    if (args.results is None) == (args.run_id is None):
        raise UserError("RESULTS: give a results.json, or --run-id ID of the run whose artifact holds one")
    if args.results is not None:
        return results_model.load(args.results), args.results, Path(args.results).parent
    from speedstats.github import context
    from speedstats.github.artifact import fetch_results
    from speedstats.github.session import guarded, make_client

    if args.run_id <= 0:
        raise UserError(f"--run-id: must be a positive number, got {args.run_id}")
    repo = context.resolve_repo(args.repo)
    client = make_client(args)
    results = guarded(lambda: fetch_results(client, repo, args.run_id, args.artifact_name), client)
    return results, f"artifact {args.artifact_name!r} of run {args.run_id}", None


def head_vs_base_cases(results, where):
    """The cases CI judged head against base; a UserError when it measured no base build."""
    judged = [case for case in results.cases if case.paired is not None and not case.failure]
    if BASE not in results.builds or not judged:
        raise UserError(f"{where}: no case was judged head against base (no base build recorded); reproduce "
                        "measures a head-vs-base verdict again")
    return judged


# -- the builds ------------------------------------------------------------------------------------------


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def find_wheel(role, name, recorded_sha, folders):
    """The path of wheel `name` in the first of the folders holding it, its sha256 the recorded one."""
    if not name or "/" in name or name in (".", ".."):
        raise UserError(f"{role}: the results record the wheel {shown(name)}, not a file name")
    for folder in folders:
        path = Path(folder) / name
        if path.is_file():
            if recorded_sha is None:
                raise UserError(f"{role}: {name}: the results record no sha256 for it; cannot check that it "
                                "is the build CI measured")
            found = sha256_of(path)
            if found != recorded_sha.lower():
                raise UserError(f"{role}: {path}: sha256 {found[:16]}... is not the recorded "
                                f"{recorded_sha[:16]}...: not the build CI measured")
            return str(path.absolute())
    where = ", ".join(str(folder) for folder in folders)
    raise UserError(f"{role}: wheel {name} not found in {where} (give the folder holding it with --wheels)")


def package_spec(role, name, package, folders):
    """What `run` takes for one recorded package: its wheel's path, a pinned requirement, or None for the
    environment's own."""
    if package.get("wheel"):
        return find_wheel(role, package["wheel"], package.get("sha256"), folders)
    requirement, version = package.get("requirement"), package.get("version")
    if requirement:
        pinned = "==" in requirement or "://" in requirement or not version
        return requirement if pinned else f"{name}=={version}"
    return None


@dataclasses.dataclass
class Specs:
    """The build flags of `run` for CI's builds, and a line for each saying what it is."""

    oneflow: str = INSTALLED
    baseline_oneflow: str = INSTALLED
    pytorch: str | None = None  # None: CI measured no PyTorch
    flowvision: str = INSTALLED
    lines: list = dataclasses.field(default_factory=list)


def build_specs(results, folders):
    specs = Specs()
    companions = {}
    for role in (HEAD, BASE, PYTORCH):
        record = results.builds.get(role)
        if record is None:
            continue
        known = contender(role)
        packages = record.get("packages") or {}
        sources = {}
        for name, package in packages.items():
            spec = package_spec(role, name, package or {}, folders)
            if spec is not None:
                sources[name] = spec
        framework = sources.get(known.package)
        if framework is None and record.get("source") not in (None, INSTALLED):
            raise UserError(f"{role}: the results record neither a wheel nor a requirement for "
                            f"{known.package} (a {record.get('source')} build); cannot install it again")
        if "flowvision" not in known.companions:  # PyTorch: one spec of all its packages, as `run` takes it
            given = [sources[name] for name in known.packages if name in sources]
            specs.pytorch = " ".join(given) or INSTALLED
        else:
            setattr(specs, "oneflow" if role == HEAD else "baseline_oneflow", framework or INSTALLED)
            for name in known.companions:
                if name in sources:
                    if companions.get(name, sources[name]) != sources[name]:
                        raise UserError(f"{role}: {name} differs between the head and the base build; "
                                        "reproduce installs one for both")
                    companions[name] = sources[name]
        version = (packages.get(known.package) or {}).get("version")
        source = sources.get(known.package, "installed here")
        checked = ", sha256 as recorded" if (packages.get(known.package) or {}).get("wheel") else ""
        specs.lines.append(f"{known.role_word} {known.package} {version or '(no version recorded)'} "
                           f"({Path(source).name if os.path.isabs(source) else source}{checked})")
    specs.flowvision = companions.get("flowvision", INSTALLED)
    return specs


# -- the suite -------------------------------------------------------------------------------------------


def rule_fields():
    from speedstats.suite import Suite

    return {f.name for f in dataclasses.fields(type(Suite().head_vs_base))}


def suite_mapping(results, cases, suite_path=None, profile=None):
    """The suite mapping to measure with: CI's suite (given, or its built-in profile; else the cases as
    recorded), its cases those CI judged, each with the sizes, iterations, mode, model and env recorded,
    and the head-vs-base rule CI's cases were judged by."""
    from speedstats.suite import builtin_profiles, suite_data

    if suite_path or profile:
        data, _ = suite_data(suite_path, profile)
    elif results.suite in builtin_profiles():
        data, _ = suite_data(None, results.suite)
    else:
        data = {"name": results.suite}
    data = json.loads(json.dumps(data, default=str))
    listed = {c.get("id"): c for c in data.get("cases") or [] if isinstance(c, dict)}
    recorded_env = all(case.env is not None for case in cases)
    if recorded_env:
        data["env"] = {}  # each case's env as recorded is all of it
    suite_cases = []
    for case in cases:
        entry = {key: value for key, value in (listed.get(case.id) or {}).items() if key != "skip"}
        entry.update(id=case.id, kind=case.kind, batch_size=case.batch_size, times=case.times, ddp=case.ddp)
        entry["world_size"] = case.world_size if case.ddp else 1
        if case.input_shape:  # [batch, channels, side, side]: the suite's image_size
            if case.input_shape[2] != case.input_shape[3]:
                raise UserError(f"results: case {shown(case.id)}: input_shape {case.input_shape} is not "
                                "square, as a suite's image_size makes it")
            entry["image_size"] = case.input_shape[2]
        if case.num_workers is not None:
            entry["num_workers"] = case.num_workers
        for key in ("mode", "model", "env"):
            if getattr(case, key) is not None:
                entry[key] = getattr(case, key)
        suite_cases.append(entry)
    data["cases"] = suite_cases
    rule = next((case.paired.rule for case in cases if case.paired.rule), None)
    if rule:
        known = rule_fields()
        data["head_vs_base"] = {key: value for key, value in rule.items() if key in known}
    return data


# -- comparing -------------------------------------------------------------------------------------------


def _change(row):
    from speedstats.analysis.bisect import CaseChange, change_text

    return change_text(CaseChange(verdict=row.verdict, ratio=row.ratio, low=row.low, high=row.high))


def _ms(seconds):
    return f"{seconds * 1000:.1f} ms"


def compare_cases(ci_cases, here, same_device):
    """[(case id, CI's words, here's words, holds or None, how far)] and the count of verdicts that hold."""
    from speedstats.verdict import head_vs_base

    here_cases = {case.id: case for case in here.cases}
    skipped = {case.id: case.reason for case in here.skipped}
    rows = []
    for case in ci_cases:
        ci = head_vs_base(case)
        ci_words = f"{ci.verdict} {_change(ci)}"
        mine = here_cases.get(case.id)
        if mine is None:
            rows.append((case.id, ci_words, f"not measured: {skipped.get(case.id, 'no figures')}", None, ""))
            continue
        row = head_vs_base(mine)
        words = f"{row.verdict} {_change(row)}"
        if mine.failure or row.ratio is None or ci.ratio is None:
            rows.append((case.id, ci_words, words, None, ""))
            continue
        far = f"{(row.ratio - ci.ratio) * 100:+.1f} points from CI's change"
        if row.low is not None and row.high is not None:
            far += ", CI's estimate " + ("inside" if row.low <= ci.ratio <= row.high else "outside") + \
                " this interval"
        if same_device:
            for label, role in (("head", HEAD), ("base", BASE)):
                a, b = mine.frameworks.get(role), case.frameworks.get(role)
                if a is not None and b is not None and a.ok and b.ok:
                    far += f"; {label} {_ms(a.per_iter_s)} here, {_ms(b.per_iter_s)} in CI " \
                           f"({(a.per_iter_s / b.per_iter_s - 1) * 100:+.1f}%)"
        rows.append((case.id, ci_words, words, row.verdict == ci.verdict, far))
    return rows


def device_text(results):
    return f"{results.device} ({results.gpu_name})"


def report_text(where, ci, here, specs, rows):
    same = (ci.device, ci.gpu_name) == (here.device, here.gpu_name)
    device = ("the same device, so the times compare too" if same
              else "another device, so only the changes compare, not the times")
    first = (f"speedstats reproduce: {where}, suite {ci.suite!r}: measured in CI on {device_text(ci)}; "
             f"here on {device_text(here)}: {device}.")
    lines = [first, "Builds: " + "; ".join(specs.lines) + ".", ""]
    table = [("case", "CI", "here", "holds")]
    for case_id, ci_words, words, holds, _ in rows:
        table.append((case_id, ci_words, words, "n/a" if holds is None else "yes" if holds else "no"))
    widths = [max(len(r[i]) for r in table) for i in range(3)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[3] for r in table]
    lines.append("")
    lines += [f"{case_id}: {far}." for case_id, _, _, holds, far in rows if far]
    judged = [holds for *_, holds, _ in rows if holds is not None]
    lines.append(f"{sum(judged)} of {len(judged)} verdicts hold here.")
    return "\n".join(lines) + "\n"


# -- the command -----------------------------------------------------------------------------------------


class RunFailed(SpeedstatsError):
    def __init__(self, message, status):
        super().__init__(message)
        self.exit_code = status


def _progress(message):
    print(message, file=sys.stderr, flush=True)


def reproduce_command(args):
    import yaml

    from speedstats.suite import suite_from_dict

    results, where, beside = ci_results(args)
    cases = head_vs_base_cases(results, where)
    folders = args.wheels or [str(p) for p in dict.fromkeys([beside, Path(".")]) if p is not None]
    specs = build_specs(results, folders)
    out = ensure_dir(Path(args.out), "--out folder")
    data = suite_mapping(results, cases, args.suite, args.profile)
    suite_from_dict(json.loads(json.dumps(data)), f"the suite of {where}")  # refused here, before measuring
    suite_path = out / SUITE_FILE
    write_atomic(suite_path, yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    argv = ["run", "--suite", str(suite_path), "--device", args.device, "--out", str(out), "--quiet",
            "--oneflow", specs.oneflow, "--baseline-oneflow", specs.baseline_oneflow,
            "--flowvision", specs.flowvision]
    argv += ["--pytorch", specs.pytorch] if specs.pytorch is not None else ["--only", "oneflow"]
    for flag, value in (("--cache-dir", args.cache_dir), ("--lock-timeout", args.lock_timeout)):
        if value is not None:
            argv += [flag, str(value)]
    if args.pip_args:
        argv.append(f"--pip-args={args.pip_args}")
    from speedstats.child_run import read_results, run_child

    status = run_child(argv, _progress)
    if status not in (EXIT_OK, EXIT_VERDICT_FAILED, EXIT_CASE_FAILED, EXIT_DISTURBED):
        raise RunFailed(f"the run on this machine exited {status} (its lines above say why)", status)
    here = read_results(out / "results.json")
    same = (results.device, results.gpu_name) == (here.device, here.gpu_name)
    rows = compare_cases(cases, here, same)
    write_stdout(report_text(where, results, here, specs, rows))
    if status in (EXIT_CASE_FAILED, EXIT_DISTURBED):
        return status
    return EXIT_OK if all(holds for *_, holds, _ in rows if holds is not None) else EXIT_VERDICT_FAILED
