"""`speedstats fetch-baseline`: the wheel(s) the base branch's build workflow last made.

A speed job on a pull request benchmarks the head build against the base build. The base build is
the artifact (a folder of wheels) that the newest successful run of the build workflow on the base
branch uploaded. Found through the Actions REST API, downloaded through the same redirect-safe path
as post-from-artifact (the token never reaches the storage host), and only its `.whl` members are
extracted, flat, under their own names: nothing else in the archive touches the disk.

With --optional, a base branch without a base build is not a failure: no successful run there yet
(the very pull request that adds the workflow), or its artifact expired. The step output
baseline-path is then empty, baseline-missing says why, a warning says so in the log, and the
run that follows measures without a baseline, its comment saying why in one line.
"""
from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import zipfile
import zlib
from pathlib import Path

from speedstats import actions_io
from speedstats.errors import UserError
from speedstats.fsutil import ensure_dir
from speedstats.github import context
from speedstats.github.client import Gone
from speedstats.github.options import add_common_options
from speedstats.github.session import find_artifact, guarded, make_client

DEFAULT_ARTIFACT = "wheelhouse"
DEFAULT_DEST = "speedstats-baseline"
DEFAULT_EVENT = "push"
MAX_ARCHIVE_BYTES = 8 << 30  # a CUDA OneFlow wheel is about 1-2 GB
MAX_EXTRACTED_BYTES = 16 << 30
MAX_WHEELS = 64
DOWNLOAD_DEADLINE_S = 1800.0
_WHEEL_NAME = re.compile(r"^[A-Za-z0-9_.+-]+\.whl$")
TEMP_PREFIX = ".baseline-"  # the download and the wheels being extracted, inside --dest


def register(subparsers):
    p = subparsers.add_parser(
        "fetch-baseline", help="download the wheel(s) of the base branch's latest successful build",
        description="Find the newest successful run of a workflow on a branch (default: the pull request's "
                    "base branch), download its wheel artifact and extract the .whl files into --dest. "
                    "Prints, and sets the step output baseline-path to, the one wheel or the folder of "
                    "wheels.")
    p.add_argument("--workflow", required=True, metavar="FILE_OR_ID",
                   help="the build workflow: its file name (build.yml) or numeric id")
    p.add_argument("--artifact", default=DEFAULT_ARTIFACT, metavar="NAME",
                   help=f"name of the artifact holding the wheel(s) (default: {DEFAULT_ARTIFACT})")
    p.add_argument("--branch", metavar="NAME",
                   help="branch whose build to take (default: the pull request's base branch)")
    p.add_argument("--event", default=DEFAULT_EVENT, metavar="EVENT",
                   help=f"only runs triggered by this event (default: {DEFAULT_EVENT}; 'any' for all)")
    p.add_argument("--optional", action="store_true",
                   help="no successful run on the branch, or an expired artifact, is not a failure: warn, "
                        "set baseline-path empty and baseline-missing to why, and exit 0")
    p.add_argument("--dest", default=DEFAULT_DEST, metavar="DIR",
                   help=f"folder for the wheel(s) (default: {DEFAULT_DEST}); emptied of earlier wheels first")
    add_common_options(p, pull_request=False, dry_run=False, author=False,
                       deadline_note=f"; the download of the wheels has its own {DOWNLOAD_DEADLINE_S / 60:g} "
                                     "minutes")
    p.set_defaults(func=fetch_baseline_command)


def extract_wheels(archive_path, dest, where):
    """Extract the archive's .whl members into dest (flat, by their own names); the list of paths."""
    try:
        archive = zipfile.ZipFile(archive_path)
    except zipfile.BadZipFile:
        raise UserError(f"{where}: not a zip archive") from None
    with archive:
        wheels = [info for info in archive.infolist()
                  if not info.is_dir() and info.filename.rsplit("/", 1)[-1].endswith(".whl")]
        if not wheels:
            names = ", ".join(sorted(i.filename for i in archive.infolist())[:5]) or "nothing"
            raise UserError(f"{where}: holds no .whl file (it has: {names})")
        if len(wheels) > MAX_WHEELS:
            raise UserError(f"{where}: {len(wheels)} wheels, more than {MAX_WHEELS}")
        total = sum(info.file_size for info in wheels)
        if total > MAX_EXTRACTED_BYTES:
            raise UserError(f"{where}: the wheels unpack to {total} bytes, more than {MAX_EXTRACTED_BYTES}")
        names = [info.filename.rsplit("/", 1)[-1] for info in wheels]
        bad = [n for n in names if not _WHEEL_NAME.match(n)]
        if bad:
            raise UserError(f"{where}: refusing a wheel named {bad[0]!r}")
        if len(set(names)) != len(names):
            raise UserError(f"{where}: two wheels share a file name")
        # Extracted whole into a folder of its own first: the old wheels are replaced only by a
        # complete set, and a wheel that fails leaves nothing behind.
        staging = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=dest))
        try:
            for info, name in zip(wheels, names):
                with archive.open(info) as src, open(staging / name, "wb") as out:
                    # never more than the header says: a lying header cannot fill the disk
                    copied = _copy_bounded(src, out, info.file_size)
                if copied != info.file_size:
                    raise UserError(f"{where}: {name} is not the size its header says")
        except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
            shutil.rmtree(staging, ignore_errors=True)
            raise UserError(f"{where}: a corrupt archive: {exc}") from None
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    try:
        for stale in dest.glob("*.whl"):
            stale.unlink()
        paths = []
        for name in names:
            os.replace(staging / name, dest / name)
            paths.append(dest / name)
    except OSError as exc:
        raise UserError(f"{dest}: cannot put the wheels in place: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return paths


def clear_leftovers(dest):
    """Remove what an earlier fetch that was killed left in dest (its download, its extracted wheels)."""
    for path in dest.glob(f"{TEMP_PREFIX}*"):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _copy_bounded(src, out, limit):
    copied = 0
    while True:
        chunk = src.read(min(1 << 20, limit + 1 - copied))
        if not chunk:
            return copied
        copied += len(chunk)
        if copied > limit:
            return copied
        out.write(chunk)


def no_baseline(reason):
    """--optional without a base build: say why, in the log and the outputs; exit 0."""
    print(actions_io.workflow_command("warning", f"speedstats: no base build, measuring without a baseline: "
                                                 f"{reason}"), flush=True)
    actions_io.set_output("baseline-path", "")
    actions_io.set_output("baseline-missing", reason)
    return 0


def fetch_baseline_command(args):
    repo = context.resolve_repo(args.repo)
    workflow = args.workflow.strip()
    if not workflow:
        raise UserError("--workflow: must not be empty")
    branch = args.branch or actions_io.base_branch()
    if not branch:
        raise UserError("--branch: no branch (give --branch NAME, or run from a pull_request event)")
    event = None if args.event in ("", "any") else args.event
    dest = Path(args.dest)
    client = make_client(args)

    def run():
        found = client.latest_successful_run(repo, workflow, branch, event)
        on = f"workflow {workflow!r} on branch {branch!r} of {repo}" + (f" ({event} events)" if event else "")
        if found is None:
            if args.optional:
                return no_baseline(f"no successful run of {on} yet")
            raise UserError(f"--workflow: no successful run of {on}")
        try:
            artifact, where = find_artifact(client, repo, found.id, args.artifact, MAX_ARCHIVE_BYTES,
                                            option="--artifact", run_text=f"run {found.id} ({on})",
                                            limit_text=str(MAX_ARCHIVE_BYTES),
                                            expired_hint=f" (rerun the build on {branch!r})")
            ensure_dir(dest, "--dest folder")
            clear_leftovers(dest)
            try:
                download = tempfile.NamedTemporaryFile(prefix=TEMP_PREFIX, suffix=".zip", dir=dest)  # noqa: SIM115
            except OSError as exc:
                raise UserError(f"{dest}: cannot write in the --dest folder: {exc.strerror or exc}") from None
            with download as archive:
                client.download(artifact.download_url, f"download {where}", MAX_ARCHIVE_BYTES, sink=archive,
                                deadline_s=DOWNLOAD_DEADLINE_S, own_deadline=True)
                archive.flush()
                wheels = extract_wheels(archive.name, dest, where)
        except Gone:
            if not args.optional:
                raise
            return no_baseline(f"the artifact {args.artifact!r} of the newest successful run of {on} "
                               f"(run {found.id}) has expired")
        path = wheels[0] if len(wheels) == 1 else dest
        names = ", ".join(w.name for w in wheels)
        print(f"speedstats: baseline from run {found.id} (commit {found.head_sha[:12]}) of {on}: {names}",
              file=sys.stderr)
        actions_io.set_output("baseline-path", str(path))
        print(path)
        return 0

    try:
        return guarded(run, client)
    except UserError:
        if dest.is_dir() and not any(dest.iterdir()):
            shutil.rmtree(dest, ignore_errors=True)
        raise
