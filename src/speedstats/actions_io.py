"""The GitHub Actions runtime, read here and nowhere else.

What a job is given: its identity in environment variables (GITHUB_REPOSITORY, GITHUB_RUN_ID,
GITHUB_SHA, GITHUB_JOB, GITHUB_BASE_REF, GITHUB_API_URL, the token), the triggering event's payload
(the JSON file at GITHUB_EVENT_PATH, parsed once per process and cached), and the file commands it
writes: step outputs ($GITHUB_OUTPUT) and the job summary ($GITHUB_STEP_SUMMARY). Those files are
appended to, one record per call, as the runner reads them after the step. Outside Actions (the
variables unset) the readers return None and the writers do nothing and return False. The workflow
commands of the log (annotations, groups) are formatted here too, for GITHUB_ACTIONS=true only.

Every reader takes `environ` (default: os.environ), so a caller can point it at another job's variables.
"""
from __future__ import annotations

import json
import os
import re
import uuid
from dataclasses import dataclass, replace

from speedstats.errors import UserError

TOKEN_VARIABLES = ("GITHUB_TOKEN", "INPUT_TOKEN")  # the job's token, then the action's `token` input
_REPO_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_SHA_RE = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


def check_repo(repo, where="--repo"):
    if not isinstance(repo, str) or not _REPO_RE.match(repo):
        raise UserError(f"{where}: must be OWNER/NAME, got {repo!r}")
    return repo


def check_sha(sha, where="--head-sha"):
    if not isinstance(sha, str) or not _SHA_RE.match(sha):
        raise UserError(f"{where}: must be a full commit sha (40 hex digits), got {sha!r}")
    return sha


def _environ(environ):
    return os.environ if environ is None else environ


def _int(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


# -- the job's identity ----------------------------------------------------------------------------------


def repository(environ=None):
    """The workflow's repository, OWNER/NAME ($GITHUB_REPOSITORY), unchecked; None outside Actions."""
    return _environ(environ).get("GITHUB_REPOSITORY") or None


def run_id(environ=None):
    """The workflow run's id ($GITHUB_RUN_ID), or None."""
    return _int(_environ(environ).get("GITHUB_RUN_ID"))


def run_attempt(environ=None):
    """The workflow run's attempt ($GITHUB_RUN_ATTEMPT: 1, then 2 for a re-run), or None."""
    return _int(_environ(environ).get("GITHUB_RUN_ATTEMPT"))


def server_url(environ=None):
    """The web address of GitHub ($GITHUB_SERVER_URL, e.g. https://github.com), or None."""
    return (_environ(environ).get("GITHUB_SERVER_URL") or "").rstrip("/") or None


def commit_sha(environ=None):
    """The commit the workflow run is for ($GITHUB_SHA), or None."""
    return _environ(environ).get("GITHUB_SHA") or None


def job_path(environ=None):
    """OWNER/NAME/RUN_ID/JOB of the running job, as far as it is known ('' outside Actions)."""
    env = _environ(environ)
    return "/".join(v for v in (env.get("GITHUB_REPOSITORY"), env.get("GITHUB_RUN_ID"), env.get("GITHUB_JOB"))
                    if v)


def api_url(environ=None):
    """The REST API base URL the runner gives ($GITHUB_API_URL), unchecked; None when unset."""
    return _environ(environ).get("GITHUB_API_URL") or None


def tokens(environ=None):
    """The token candidates, in order of preference ($GITHUB_TOKEN, then $INPUT_TOKEN); None where unset."""
    env = _environ(environ)
    return tuple(env.get(name) for name in TOKEN_VARIABLES)


# -- the triggering event --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """What speedstats reads of the triggering event; any field may be None (or empty)."""

    name: str | None = None  # $GITHUB_EVENT_NAME
    path: str | None = None  # $GITHUB_EVENT_PATH
    repo: str | None = None
    pr_number: int | None = None
    head_sha: str | None = None
    run_id: int | None = None  # the triggering run of a workflow_run event
    base_ref: str | None = None  # the pull request's base branch
    labels: tuple[str, ...] = ()  # the label names of the pull request (or issue) when the event fired
    # A pull_request payload's pull request comes from another repository than its base (a fork, or a
    # deleted one: head.repo null); None when the payload does not say.
    pr_from_fork: bool | None = None


_parsed: tuple[tuple, Event] | None = None  # (file key, event): the last event file parsed


def event_path(environ=None):
    return _environ(environ).get("GITHUB_EVENT_PATH") or None


def read_event(environ=None):
    """The triggering event: $GITHUB_EVENT_NAME and the payload at $GITHUB_EVENT_PATH (if set).

    The file is parsed once: later calls get the cached reading while the file is unchanged. A missing,
    unreadable or malformed file is a one-line UserError naming it.
    """
    global _parsed
    env = _environ(environ)
    name = env.get("GITHUB_EVENT_NAME") or None
    path = env.get("GITHUB_EVENT_PATH")
    if not path:
        return Event(name=name)
    try:
        stat = os.stat(path)
        key = (path, stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
        if _parsed is None or _parsed[0] != key:
            with open(path, encoding="utf-8") as f:
                payload = json.load(f)
            _parsed = (key, _event_from_payload(payload, path))
    except FileNotFoundError:
        raise UserError(f"GITHUB_EVENT_PATH ({path}): event file not found") from None
    except (OSError, ValueError, RecursionError) as exc:
        raise UserError(f"GITHUB_EVENT_PATH ({path}): not a readable JSON event: {exc}") from None
    return replace(_parsed[1], name=name)


def _event_from_payload(payload, path):
    if not isinstance(payload, dict):
        raise UserError(f"GITHUB_EVENT_PATH ({path}): the event must be a JSON object")
    fields = {"path": path}
    repository_ = payload.get("repository")
    if isinstance(repository_, dict) and isinstance(repository_.get("full_name"), str):
        fields["repo"] = repository_["full_name"]
    pull = payload.get("pull_request")
    issue = payload.get("issue")
    run = payload.get("workflow_run")
    if isinstance(pull, dict):
        fields["pr_number"] = _int(pull.get("number"))
        head = pull.get("head")
        if isinstance(head, dict) and isinstance(head.get("sha"), str):
            fields["head_sha"] = head["sha"]
        base = pull.get("base")
        if isinstance(base, dict) and isinstance(base.get("ref"), str) and base["ref"]:
            fields["base_ref"] = base["ref"]
        fields["pr_from_fork"] = _from_fork(head, base, fields.get("repo"))
    elif isinstance(issue, dict) and isinstance(issue.get("pull_request"), dict):
        fields["pr_number"] = _int(issue.get("number"))
    elif isinstance(run, dict):
        fields["run_id"] = _int(run.get("id"))
        if isinstance(run.get("head_sha"), str):
            fields["head_sha"] = run["head_sha"]
        pulls = run.get("pull_requests")
        if isinstance(pulls, list) and pulls and isinstance(pulls[0], dict):
            fields["pr_number"] = _int(pulls[0].get("number"))
    for key in ("pull_request", "issue"):
        item = payload.get(key)
        if isinstance(item, dict) and isinstance(item.get("labels"), list):
            fields["labels"] = tuple(label["name"] for label in item["labels"]
                                     if isinstance(label, dict) and isinstance(label.get("name"), str))
            break
    return Event(**fields)


def _full_name(repo):
    return repo.get("full_name") if isinstance(repo, dict) else None


def _from_fork(head, base, repository_):
    if not isinstance(head, dict) or "repo" not in head:
        return None
    base_repo = _full_name(base.get("repo")) if isinstance(base, dict) else None
    base_repo = base_repo or repository_
    head_repo = _full_name(head["repo"])
    if base_repo is None:
        return None
    return head_repo != base_repo


def base_branch(environ=None):
    """The pull request's base branch: the event payload's pull_request.base.ref, else $GITHUB_BASE_REF."""
    return read_event(environ).base_ref or _environ(environ).get("GITHUB_BASE_REF") or None


# -- file commands ---------------------------------------------------------------------------------------


def _append(path, text):
    from speedstats.errors import UserError

    try:
        with open(path, "a", encoding="utf-8", newline="") as f:
            f.write(text)
    except OSError as exc:  # a full disk: the runner's file, appended to, cannot be replaced whole
        why = exc.strerror or type(exc).__name__
        raise UserError(f"{path}: cannot append to the Actions file: {why}") from None


def format_output(name, value):
    """One $GITHUB_OUTPUT record: `name=value`, or the heredoc form when the value has newlines."""
    name = str(name)
    value = "" if value is None else str(value)
    if not name or any(c in name for c in "=\r\n") or name != name.strip():
        raise ValueError(f"output name {name!r} is not valid")
    if "\n" not in value and "\r" not in value:
        return f"{name}={value}\n"
    delimiter = f"ghadelimiter_{uuid.uuid4()}"
    return f"{name}<<{delimiter}\n{value}\n{delimiter}\n"


def set_output(name, value, env=None):
    """Append a step output; True when $GITHUB_OUTPUT is set and the record was written."""
    path = (os.environ if env is None else env).get("GITHUB_OUTPUT")
    if not path:
        return False
    _append(path, format_output(name, value))
    return True


def append_summary(text, env=None):
    """Append markdown to the job summary; True when $GITHUB_STEP_SUMMARY is set."""
    path = (os.environ if env is None else env).get("GITHUB_STEP_SUMMARY")
    if not path:
        return False
    _append(path, text if text.endswith("\n") else text + "\n")
    return True


# -- workflow commands in the log -------------------------------------------------------------------------


def in_actions(environ=None):
    """True inside a GitHub Actions job (GITHUB_ACTIONS=true), where the log reads workflow commands."""
    return _environ(environ).get("GITHUB_ACTIONS") == "true"


def _escape_data(text):
    return str(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text):
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(name, message="", **properties):
    """One workflow command line, `::name key=value,...::message`, escaped as the runner unescapes it."""
    props = ",".join(f"{key}={_escape_property(value)}" for key, value in properties.items()
                     if value is not None)
    return f"::{name}{' ' + props if props else ''}::{_escape_data(message)}"


def annotation(level, title, message):
    """An `error`, `warning` or `notice` annotation with its title: shown on the run's summary page."""
    if level not in ("error", "warning", "notice"):
        raise ValueError(f"annotation level {level!r} is not error, warning or notice")
    return workflow_command(level, message, title=title)


def read_outputs(path):
    """Parse a $GITHUB_OUTPUT file the way the runner does (later records win)."""
    outputs = {}
    with open(path, encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            value_lines = []
            while i < len(lines) and lines[i] != delimiter:
                value_lines.append(lines[i])
                i += 1
            if i >= len(lines):
                raise ValueError(f"{path}: output {name!r} has no closing delimiter {delimiter!r}")
            i += 1
            outputs[name] = "\n".join(value_lines)
        elif "=" in line:
            name, value = line.split("=", 1)
            outputs[name] = value
        else:
            raise ValueError(f"{path}: not an output record: {line!r}")
    return outputs
