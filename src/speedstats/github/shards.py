"""Shards: one matrix job's results, packed for the report job (`speedstats shard`), and read back.

A matrix job benchmarks on one GPU model and leaves a shard folder, uploaded as an artifact named
`speedstats-shard-<gpu>-<run attempt>` (upload-artifact v4 names are immutable, so a re-run writes a
new one). The folder holds:

    shard.json     {"schema": "speedstats/shard/v1", "gpu": "a100", "repo": "OWNER/NAME",
                    "pr_number": 7 (or null), "head_sha": "<40 hex>", "run_id": 123, "run_attempt": 1,
                    "status": "success" | "failure" | "cancelled", "error": null or one line,
                    "results": "results.json" or null, "body": "comment.md" or null}
    results.json   the job's results, when the benchmark wrote any
    comment.md     the Speed stats block the job rendered, byte for byte

The report reads every shard of the run (a folder per artifact, or the run's artifacts through the
API for a fork), each as strictly as a results bundle (known names, size limits, nothing extracted),
and keeps, for each GPU, only the shard of that GPU's latest attempt. GPU keys are runner labels:
letters, digits, '.', '_' and '-'.
"""
from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from speedstats import actions_io
from speedstats import results as results_model
from speedstats.actions_io import check_repo, check_sha
from speedstats.bundle import MAX_ARCHIVE_BYTES, _text, read_artifact_dir, read_artifact_zip
from speedstats.errors import UserError
from speedstats.fsutil import ensure_dir, read_bytes, write_atomic
from speedstats.text import one_line

SCHEMA = "speedstats/shard/v1"
MANIFEST_NAME = "shard.json"
RESULTS_NAME = "results.json"
BODY_NAME = "comment.md"
ARTIFACT_PREFIX = "speedstats-shard-"
STATUSES = ("success", "failure", "cancelled")
DEFAULT_JOB_NAME = "speed-stats ({gpu})"
MAX_GPUS = 64
_FIELDS = {"schema", "gpu", "repo", "pr_number", "head_sha", "run_id", "run_attempt", "status", "error",
           "results", "body"}
_GPU_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


@dataclass
class Shard:
    gpu: str
    repo: str
    pr_number: int | None
    head_sha: str
    run_id: int
    run_attempt: int
    status: str
    error: str | None
    results_json: str | None
    body: str | None
    where: str

    @property
    def results(self):
        if self.results_json is None:
            return None
        return results_model.loads(self.results_json, where=f"{self.where}: {RESULTS_NAME}")


def check_gpu(key, where="--gpu"):
    if not isinstance(key, str) or not _GPU_RE.match(key):
        raise UserError(f"{where}: a GPU key is a runner label (letters, digits, '.', '_', '-'), got {key!r}")
    return key


def parse_gpus(text, where="--gpus"):
    """The GPU keys of the matrix: a JSON list of keys, of objects with a "gpu" key, or {"gpu": [...]}."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise UserError(f"{where}: not valid JSON: {one_line(exc, 120)}") from None
    if isinstance(data, dict):
        data = data.get("gpu")
    if not isinstance(data, list) or not data:
        raise UserError(f"{where}: must be a non-empty JSON list of GPU keys (or {{\"gpu\": [...]}})")
    keys = [item.get("gpu") if isinstance(item, dict) else item for item in data]
    keys = [check_gpu(key, where) for key in keys]
    if len(set(keys)) != len(keys):
        raise UserError(f"{where}: GPU {next(k for k in keys if keys.count(k) > 1)!r} is listed twice")
    if len(keys) > MAX_GPUS:
        raise UserError(f"{where}: {len(keys)} GPUs, more than {MAX_GPUS}")
    return keys


def artifact_name(gpu, attempt):
    return f"{ARTIFACT_PREFIX}{gpu}-{attempt}"


def _positive(value, where):
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise UserError(f"{where}: must be a positive integer, got {value!r}")
    return value


# -- writing: `speedstats shard` in the matrix job ----------------------------------------------------------


def _remove(path):
    try:
        path.unlink()
    except OSError as exc:
        raise UserError(f"{path}: cannot remove the stale shard file: {exc.strerror or exc}") from None


def write_shard(directory, gpu, status, out_dir, identity, run_attempt):
    """Pack out_dir's results.json and comment.md (either may be missing) as a shard folder."""
    check_gpu(gpu)
    if status not in STATUSES:
        raise UserError(f"--status: must be one of {', '.join(STATUSES)}, got {status!r}")
    pr_number, head_sha, run_id, repo = identity
    missing = [name for name, value in (("GITHUB_RUN_ID", run_id), ("GITHUB_REPOSITORY", repo),
                                        ("GITHUB_SHA or the event's head sha", head_sha)) if not value]
    if missing:
        raise UserError(f"shard: needs {', '.join(missing)} (set inside a GitHub Actions job)")
    check_sha(head_sha, "shard: head sha")
    check_repo(repo, "GITHUB_REPOSITORY")
    directory, out_dir = Path(directory), Path(out_dir)
    results_text = body = error = None
    results_path, body_path = out_dir / RESULTS_NAME, out_dir / BODY_NAME
    if results_path.is_file():
        try:
            results_text = _text(read_bytes(results_path, "results file"), RESULTS_NAME, str(out_dir))
            results_model.loads(results_text, where=str(results_path))
        except UserError as exc:
            results_text, error = None, one_line(f"unreadable results: {exc}", 300)
    else:
        error = f"no {RESULTS_NAME}: the benchmark stopped before writing results"
    if results_text is not None and body_path.is_file():
        body = _text(read_bytes(body_path, "comment body"), BODY_NAME, str(out_dir)) or None
    ensure_dir(directory, "shard folder (--dir)")
    for name, text in ((RESULTS_NAME, results_text), (BODY_NAME, body)):
        if text is not None:
            write_atomic(directory / name, text)
        elif (directory / name).exists():  # a reused self-hosted workspace: no stale file may pass
            _remove(directory / name)
    manifest = {"schema": SCHEMA, "gpu": gpu, "repo": repo, "pr_number": pr_number, "head_sha": head_sha,
                "run_id": run_id, "run_attempt": run_attempt, "status": status, "error": error,
                "results": RESULTS_NAME if results_text is not None else None,
                "body": BODY_NAME if body is not None else None}
    write_atomic(directory / MANIFEST_NAME, json.dumps(manifest, indent=2) + "\n")
    return directory / MANIFEST_NAME


def register(subparsers):
    p = subparsers.add_parser(
        "shard", help="pack a matrix job's results for the report job",
        description="Write the shard folder of this matrix job (shard.json, and results.json and comment.md "
                    "from --out when the benchmark wrote them) for actions/upload-artifact, named "
                    f"{ARTIFACT_PREFIX}<gpu>-<run attempt>. Run it after the benchmark, also when it failed.")
    p.add_argument("--gpu", required=True, metavar="KEY", help="this job's GPU key, as the matrix names it")
    p.add_argument("--out", default="speedstats-out", metavar="DIR",
                   help="the folder `speedstats run` wrote into (default: speedstats-out)")
    p.add_argument("--dir", default="speedstats-shard", metavar="DIR",
                   help="the shard folder to write (default: speedstats-shard)")
    p.add_argument("--status", default="success", metavar="STATUS",
                   help=f"the job's status so far, e.g. ${{{{ job.status }}}}: {', '.join(STATUSES)} "
                        "(default: success)")
    p.set_defaults(func=shard_command)


def shard_command(args):
    from speedstats.bundle import identity_from_env

    attempt = actions_io.run_attempt() or 1
    identity = identity_from_env()
    path = write_shard(args.dir, args.gpu, args.status, args.out,
                       (identity.pr_number, identity.head_sha, identity.run_id, identity.repo), attempt)
    name = artifact_name(args.gpu, attempt)
    actions_io.set_output("artifact-name", name)
    print(f"speedstats: wrote {path}; upload {args.dir} as artifact {name}", file=sys.stderr)
    return 0


# -- reading ------------------------------------------------------------------------------------------------


def shard_from_files(read, where):
    """A validated Shard from read(name) -> bytes or None."""
    raw = read(MANIFEST_NAME)
    if raw is None:
        raise UserError(f"{where}: no {MANIFEST_NAME} (not a speedstats shard)")
    try:
        manifest = json.loads(_text(raw, MANIFEST_NAME, where))
    except (ValueError, RecursionError) as exc:
        raise UserError(f"{where}: {MANIFEST_NAME} is not valid JSON: {one_line(exc, 120)}") from None
    if not isinstance(manifest, dict) or manifest.get("schema") != SCHEMA:
        raise UserError(f"{where}: {MANIFEST_NAME}: field 'schema' must be {SCHEMA!r}")
    unknown = sorted(set(manifest) - _FIELDS)
    if unknown:
        raise UserError(f"{where}: {MANIFEST_NAME}: unknown field {unknown[0]!r}")
    at = f"{where}: {MANIFEST_NAME}"
    gpu = check_gpu(manifest.get("gpu"), f"{at}: gpu")
    pr_number = manifest.get("pr_number")
    if pr_number is not None:
        _positive(pr_number, f"{at}: pr_number")
    status = manifest.get("status")
    if status not in STATUSES:
        raise UserError(f"{at}: status must be one of {', '.join(STATUSES)}, got {status!r}")
    error = manifest.get("error")
    if error is not None and not isinstance(error, str):
        raise UserError(f"{at}: error must be text or null")
    if manifest.get("results") not in (RESULTS_NAME, None) or manifest.get("body") not in (BODY_NAME, None):
        raise UserError(f"{at}: files must be {RESULTS_NAME!r} and {BODY_NAME!r} (or null)")
    results_json = body = None
    if manifest.get("results"):
        raw_results = read(RESULTS_NAME)
        if raw_results is None:
            raise UserError(f"{where}: {MANIFEST_NAME} names {RESULTS_NAME}, which is missing")
        results_json = _text(raw_results, RESULTS_NAME, where)
        results_model.loads(results_json, where=f"{where}: {RESULTS_NAME}")
    if manifest.get("body"):
        raw_body = read(BODY_NAME)
        if raw_body is None:
            raise UserError(f"{where}: {MANIFEST_NAME} names {BODY_NAME}, which is missing")
        body = _text(raw_body, BODY_NAME, where)
    return Shard(gpu=gpu, repo=check_repo(manifest.get("repo"), f"{at}: repo"), pr_number=pr_number,
                 head_sha=check_sha(manifest.get("head_sha"), f"{at}: head_sha"),
                 run_id=_positive(manifest.get("run_id"), f"{at}: run_id"),
                 run_attempt=_positive(manifest.get("run_attempt"), f"{at}: run_attempt"),
                 status=status, error=one_line(error, 300) if error else None, results_json=results_json,
                 body=body, where=where)


def read_shard_dir(directory):
    return read_artifact_dir(directory, "shard", shard_from_files)


def read_shard_zip(data, where):
    """A Shard from an artifact's zip: the files at its root, or in its one top-level folder."""
    return read_artifact_zip(data, where, MANIFEST_NAME, shard_from_files)


def collect_folders(root):
    """The shards under root: one per folder holding a shard.json (download-artifact's layout, a
    folder per artifact, without merge-multiple). The folder name, the artifact's, must match."""
    root = Path(root)
    if not root.is_dir():  # download-artifact found none: every GPU is missing (or failed, by its job)
        print(f"speedstats: {root}: no such folder; no shard was downloaded", file=sys.stderr)
        return []
    shards = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        if not (folder / MANIFEST_NAME).is_file():
            continue
        shard = read_shard_dir(folder)
        if folder.name != artifact_name(shard.gpu, shard.run_attempt):
            raise UserError(f"shard {folder}: it says GPU {shard.gpu!r} attempt {shard.run_attempt}, so its "
                            f"artifact must be named {artifact_name(shard.gpu, shard.run_attempt)!r}")
        shards.append(shard)
    return shards


def collect_artifacts(client, repo, run_id, max_attempt):
    """The shards a run uploaded, downloaded through the API: each artifact named as a shard is
    checked for expiry and size, read strictly, and must agree with its name."""
    shards = []
    for artifact in client.artifacts(repo, run_id):
        if not artifact.name.startswith(ARTIFACT_PREFIX):
            continue
        where = f"artifact {artifact.name!r} of run {run_id}"
        if artifact.expired:
            raise UserError(f"{where}: expired; GitHub no longer has it")
        if artifact.size > MAX_ARCHIVE_BYTES:
            raise UserError(f"{where}: {artifact.size} bytes, more than the {MAX_ARCHIVE_BYTES} "
                            "a shard may have")
        data = client.download(artifact.download_url, f"download {where}", MAX_ARCHIVE_BYTES)
        shard = read_shard_zip(data, where)
        if artifact.name != artifact_name(shard.gpu, shard.run_attempt) or shard.run_attempt > max_attempt:
            raise UserError(f"{where}: refusing it: it says GPU {shard.gpu!r} attempt {shard.run_attempt} "
                            f"(the run is at attempt {max_attempt})")
        shards.append(shard)
    return shards


def check_same_run(shards, repo, run_id, head_sha, where_run):
    """Every shard must be of this repository, run and commit, and name one pull request."""
    for shard in shards:
        refuse = f"{shard.where}: refusing it:"
        if shard.repo != repo:
            raise UserError(f"{refuse} it is for {shard.repo}, this is {repo}")
        if shard.run_id != run_id:
            raise UserError(f"{refuse} it says run {shard.run_id}, this is {where_run}")
        if head_sha is not None and shard.head_sha != head_sha:
            raise UserError(f"{refuse} it says commit {shard.head_sha[:12]}, {where_run} ran {head_sha[:12]}")
    numbers = {s.pr_number for s in shards}
    if len(numbers) > 1:
        raise UserError(f"{where_run}: its shards name different pull requests "
                        f"({', '.join(sorted(f'#{n}' for n in numbers if n))})")


def latest_per_gpu(shards, jobs_by_gpu, max_attempt):
    """{gpu: shard} keeping, for each GPU, the shard of its job's latest attempt: the job's attempt
    when the jobs are known (an earlier attempt's shard never stands in for a re-run that uploaded
    nothing), else the highest attempt, never one above max_attempt."""
    by_gpu = {}
    for shard in shards:
        if shard.run_attempt > max_attempt:
            continue
        job = jobs_by_gpu.get(shard.gpu)
        if job is not None and shard.run_attempt != job.run_attempt:
            continue
        current = by_gpu.get(shard.gpu)
        if current is not None and current.run_attempt == shard.run_attempt:
            raise UserError(f"{shard.where}: a second shard for GPU {shard.gpu!r} "
                            f"attempt {shard.run_attempt}")
        if current is None or shard.run_attempt > current.run_attempt:
            by_gpu[shard.gpu] = shard
    return by_gpu


def check_job_name(job_name, where="--job-name"):
    """The matrix jobs' name: text with `{gpu}` where the key goes, and no other field ({{ and }} are
    braces), so filling it in is plain substitution."""
    import string

    try:
        fields = [(name, spec, conversion) for _, name, spec, conversion in string.Formatter().parse(job_name)
                  if name is not None]
    except ValueError as exc:
        raise UserError(f"{where}: {exc} in {job_name!r} (write {{{{ and }}}} for braces)") from None
    if not fields or any(field != ("gpu", "", None) for field in fields):
        raise UserError(f"{where}: must hold {{gpu}} where the GPU key goes and no other {{...}} field "
                        f"(write {{{{ and }}}} for braces), got {job_name!r}")
    return job_name


def jobs_by_gpu(jobs, gpus, job_name=DEFAULT_JOB_NAME):
    """{gpu: JobInfo} of the matrix jobs, matched by name (job_name with {gpu} filled in)."""
    wanted = {check_job_name(job_name).format(gpu=gpu): gpu for gpu in gpus}
    found = {}
    for job in jobs:
        gpu = wanted.get(job.name)
        if gpu is not None and (gpu not in found or job.run_attempt > found[gpu].run_attempt):
            found[gpu] = job
    return found

