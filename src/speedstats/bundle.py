"""The results bundle: what a benchmark run leaves behind for a privileged workflow to post.

A pull request from a fork runs with a read-only token, so its benchmark job cannot comment. It
writes a bundle instead and uploads it with actions/upload-artifact; a `workflow_run` workflow,
which has a write token, downloads it (`speedstats post-from-artifact`), checks it against the run
that made it, and posts. The bundle is a folder of three files:

    bundle.json    {"schema": "speedstats/bundle/v1", "repo": "OWNER/NAME", "pr_number": 7,
                    "head_sha": "<40 hex>", "run_id": 123, "results": "results.json",
                    "body": "comment.md" (or null: the poster renders it from results.json)}
    results.json   the run's results (speedstats/results/v1)
    comment.md     the rendered Speed stats body, byte for byte

Everything in a downloaded bundle came from the pull request's own workflow, so reading one is
strict: known names only, size limits, nothing extracted to disk. Light: no framework imports.
"""

from __future__ import annotations

import io
import json
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from speedstats import actions_io
from speedstats import results as results_model
from speedstats.actions_io import check_repo, check_sha
from speedstats.errors import UserError
from speedstats.fsutil import read_bytes, write_atomic
from speedstats.text import one_line

SCHEMA = "speedstats/bundle/v1"
MANIFEST_NAME = "bundle.json"
RESULTS_NAME = "results.json"
BODY_NAME = "comment.md"
MAX_FILE_BYTES = 8 << 20  # per file; a results.json of the full suite is a few tens of kB
MAX_ARCHIVE_BYTES = 32 << 20
_MANIFEST_FIELDS = {"schema", "repo", "pr_number", "head_sha", "run_id", "results", "body"}


@dataclass
class Bundle:
    repo: str
    pr_number: int | None  # None: the run was not for a pull request (a push)
    head_sha: str
    run_id: int
    results_json: str
    body: str | None = None

    @property
    def results(self):
        return results_model.loads(self.results_json, where=f"bundle {RESULTS_NAME}")


class BundleIdentity(NamedTuple):
    pr_number: int | None
    head_sha: str | None
    run_id: int | None
    repo: str | None


def identity_from_env(environ=None):
    """(pr_number, head_sha, run_id, repo) of the running job,
    for write_bundle(dir, text, body, *identity)."""
    event = actions_io.read_event(environ)
    return BundleIdentity(
        pr_number=event.pr_number,
        head_sha=event.head_sha or actions_io.commit_sha(environ),
        run_id=actions_io.run_id(environ),
        repo=actions_io.repository(environ) or event.repo,
    )


def _positive_int(value, where, allow_none=False):
    if value is None and allow_none:
        return None
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise UserError(f"{where}: must be a positive integer, got {value!r}")
    return value


def _identity(pr_number, head_sha, run_id, repo, where):
    return (
        _positive_int(pr_number, f"{where}: pr_number", allow_none=True),
        check_sha(head_sha, f"{where}: head_sha"),
        _positive_int(run_id, f"{where}: run_id"),
        check_repo(repo, f"{where}: repo"),
    )


def write_bundle(directory, results_json_text, body, pr_number, head_sha, run_id, repo):
    """Write a bundle folder; returns the manifest's path. body=None leaves rendering to the poster."""
    where = f"bundle {directory}"
    pr_number, head_sha, run_id, repo = _identity(pr_number, head_sha, run_id, repo, where)
    if not isinstance(results_json_text, str):
        raise UserError(f"{where}: results must be the text of results.json")
    results_model.loads(results_json_text, where=f"{where}: {RESULTS_NAME}")
    if body is not None and (not isinstance(body, str) or not body):
        raise UserError(f"{where}: body must be a non-empty string or None")
    directory = Path(directory)
    manifest = {"schema": SCHEMA, "repo": repo, "pr_number": pr_number, "head_sha": head_sha,
                "run_id": run_id,
                "results": RESULTS_NAME, "body": BODY_NAME if body is not None else None}
    write_atomic(directory / RESULTS_NAME, results_json_text)
    if body is not None:
        write_atomic(directory / BODY_NAME, body)
    elif (directory / BODY_NAME).exists():  # a stale body from an earlier run in a reused folder
        (directory / BODY_NAME).unlink()
    write_atomic(directory / MANIFEST_NAME, json.dumps(manifest, indent=2) + "\n")  # last: marks it complete
    return directory / MANIFEST_NAME


def _text(data, name, where):
    if len(data) > MAX_FILE_BYTES:
        raise UserError(f"{where}: {name} is larger than {MAX_FILE_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{where}: {name} is not UTF-8 text") from None


def bundle_from_files(read, where):
    """A validated Bundle from read(name) -> bytes or None (the folder or archive's files)."""
    raw = read(MANIFEST_NAME)
    if raw is None:
        raise UserError(f"{where}: no {MANIFEST_NAME} (not a speedstats bundle)")
    try:
        manifest = json.loads(_text(raw, MANIFEST_NAME, where))
    except (ValueError, RecursionError) as exc:
        raise UserError(f"{where}: {MANIFEST_NAME} is not valid JSON: {exc}") from None
    if not isinstance(manifest, dict):
        raise UserError(f"{where}: {MANIFEST_NAME} must be a JSON object")
    if manifest.get("schema") != SCHEMA:
        raise UserError(f"{where}: {MANIFEST_NAME}: field 'schema' must be {SCHEMA!r}, "
                        f"got {manifest.get('schema')!r}")
    unknown = sorted(set(manifest) - _MANIFEST_FIELDS)
    if unknown:
        raise UserError(f"{where}: {MANIFEST_NAME}: unknown field {unknown[0]!r}")
    pr_number, head_sha, run_id, repo = _identity(manifest.get("pr_number"), manifest.get("head_sha"),
                                                  manifest.get("run_id"), manifest.get("repo"),
                                                  f"{where}: {MANIFEST_NAME}")
    if manifest.get("results") != RESULTS_NAME or manifest.get("body") not in (BODY_NAME, None):
        raise UserError(f"{where}: {MANIFEST_NAME}: files must be {RESULTS_NAME!r} and {BODY_NAME!r} (or "
                        "null)")
    raw_results = read(RESULTS_NAME)
    if raw_results is None:
        raise UserError(f"{where}: no {RESULTS_NAME}")
    results_json = _text(raw_results, RESULTS_NAME, where)
    results_model.loads(results_json, where=f"{where}: {RESULTS_NAME}")
    body = None
    if manifest.get("body") is not None:
        raw_body = read(BODY_NAME)
        if raw_body is None:
            raise UserError(f"{where}: {MANIFEST_NAME} names {BODY_NAME}, which is missing")
        body = _text(raw_body, BODY_NAME, where)
        if not body.strip():
            raise UserError(f"{where}: {BODY_NAME} is empty")
    return Bundle(repo=repo, pr_number=pr_number, head_sha=head_sha, run_id=run_id, results_json=results_json,
                  body=body)


def read_bundle(directory):
    return read_artifact_dir(directory, "bundle", bundle_from_files)


def read_artifact_dir(directory, kind, from_files):
    """from_files(read, where) over a downloaded artifact's folder, each file within MAX_FILE_BYTES."""
    directory = Path(directory)
    where = f"{kind} {directory}"

    def read(name):
        path = directory / name
        if not path.is_file():
            return None
        if path.stat().st_size > MAX_FILE_BYTES:
            raise UserError(f"{where}: {name} is larger than {MAX_FILE_BYTES} bytes")
        return read_bytes(path, name, MAX_FILE_BYTES)

    return from_files(read, where)


def read_bundle_zip(data, where="artifact"):
    """A Bundle from an artifact's zip: the files at its root, or in its one top-level folder."""
    return read_artifact_zip(data, where, MANIFEST_NAME, bundle_from_files)


def read_artifact_zip(data, where, manifest_name, from_files):
    """from_files(read, where) over an artifact's zip: its files at the root, or in its one top-level
    folder (the one holding manifest_name), each within MAX_FILE_BYTES, the archive within
    MAX_ARCHIVE_BYTES; a damaged archive is a UserError naming `where`."""
    if len(data) > MAX_ARCHIVE_BYTES:
        raise UserError(f"{where}: archive larger than {MAX_ARCHIVE_BYTES} bytes")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise UserError(f"{where}: not a zip archive") from None
    with archive:
        members = {info.filename: info for info in archive.infolist() if not info.is_dir()}
        prefix = ""
        if manifest_name not in members:
            nested = [name for name in members if name.count("/") == 1 and name.endswith("/" + manifest_name)]
            if len(nested) == 1:
                prefix = nested[0][: -len(manifest_name)]

        def read(name):
            info = members.get(prefix + name)
            if info is None:
                return None
            if info.file_size > MAX_FILE_BYTES:
                raise UserError(f"{where}: {name} is larger than {MAX_FILE_BYTES} bytes")
            with archive.open(info) as f:
                return f.read(MAX_FILE_BYTES + 1)

        try:
            return from_files(read, where)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError, zlib.error,
                EOFError, OSError) as exc:  # zlib.error: compressed bytes that do not decompress
            raise UserError(f"{where}: unreadable archive member: {one_line(exc, 200)}") from None
