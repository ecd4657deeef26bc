"""The GitHub Actions runtime, read here and nowhere else.

What a job is given: its identity in environment variables (GITHUB_REPOSITORY, GITHUB_RUN_ID,
GITHUB_SHA, GITHUB_JOB, GITHUB_BASE_REF, GITHUB_API_URL, the token), the triggering event's payload
(the JSON file at GITHUB_EVENT_PATH, parsed once per process and cached), and the file commands it
writes: step outputs ($GITHUB_OUTPUT) and the job summary ($GITHUB_STEP_SUMMARY). Those files are
appended to, one record per call, as the runner reads them after the step. Outside Actions (the
variables unset) the readers return None and the writers do nothing and return False. The workflow
commands of the log (annotations, groups) are formatted here too, for GITHUB_ACTIONS=true only.

Every reader takes `environ` (default: os.environ), so a caller can point it at another job's variables.

No line of the log forges a workflow command: the CLI writes stdout and stderr through LogStream, which
passes each line through log_safe, the workflow commands that workflow_command made aside.
"""
from __future__ import annotations

import codecs
import contextlib
import json
import os
import re
import sys
import threading
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


def git_ref(environ=None):
    """The branch or tag the workflow run is for ($GITHUB_REF, e.g. refs/heads/main), or None."""
    return _environ(environ).get("GITHUB_REF") or None


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
    default_branch: str | None = None  # the repository's default branch, as the payload gives it


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
    if isinstance(repository_, dict) and isinstance(repository_.get("default_branch"), str):
        fields["default_branch"] = repository_["default_branch"] or None
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
    """Append markdown to the job summary (through log_safe, as a line of the log); True when
    $GITHUB_STEP_SUMMARY is set."""
    path = (os.environ if env is None else env).get("GITHUB_STEP_SUMMARY")
    if not path:
        return False
    text = log_safe(text)
    _append(path, text if text.endswith("\n") else text + "\n")
    return True


def verdict_summary(verdict, score, comment, posted=None):
    """A run's job summary: its verdict line, then the comment; `posted`, when given, is where the comment
    went ("" for nowhere)."""
    line = f"Verdict: **{verdict}** (score {score})."
    if posted is not None:
        line += f" Posted: {posted or 'nothing'}"
    return f"{line}\n\n{comment}"


# -- workflow commands in the log -------------------------------------------------------------------------


def in_actions(environ=None):
    """True inside a GitHub Actions job (GITHUB_ACTIONS=true), where the log reads workflow commands."""
    return _environ(environ).get("GITHUB_ACTIONS") == "true"


def _escape_data(text):
    return str(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text):
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(name, message="", **properties):
    """One workflow command line, `::name key=value,...::message`, escaped as the runner unescapes it, with
    no command in its message or properties (log_safe). LogStream writes it as it is."""
    if not _COMMAND_NAME.fullmatch(str(name)):
        raise ValueError(f"workflow command name {name!r} is not valid")
    props = ",".join(f"{key}={log_safe(_escape_property(value))}" for key, value in properties.items()
                     if value is not None)
    line = f"::{name}{' ' + props if props else ''}::{log_safe(_escape_data(message))}"
    _issued[line] = None
    while len(_issued) > _ISSUED_KEEP:
        del _issued[next(iter(_issued))]
    return line


def annotation(level, title, message):
    """An `error`, `warning` or `notice` annotation with its title: shown on the run's summary page."""
    if level not in ("error", "warning", "notice"):
        raise ValueError(f"annotation level {level!r} is not error, warning or notice")
    return workflow_command(level, message, title=title)


# -- no line of the log forges a command ------------------------------------------------------------------

# The runner reads a command in two forms: `::name ...::data` at the start of a line (after white space),
# and the older `##[name ...]data` anywhere in a line. log_safe puts the fullwidth twin of the form's second
# character in its place (`#＃[`, `:：`): a reader reads the same, and the runner sees no command. Not a
# zero-width character: the runner compares culture-sensitively, which skips those.
_LEGACY_COMMAND = "##["
_LEGACY_SAFE = "#\uff03["
# Where a line starts: where a string starts, and after any line break (the runner splits at \r as at \n).
_LINE_START_COMMAND = re.compile(r"(?:^|(?<=[\r\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029]))(\s*)::")
_COMMAND_NAME = re.compile("[a-z][a-z-]*")
_issued: dict[str, None] = {}  # the lines workflow_command made lately, oldest first: LogStream lets them be
_ISSUED_KEEP = 1024


def log_safe(text):
    """Text for the job's log with no workflow command in it: `##[` anywhere and `::` at a line's start
    (after white space) lose their meaning; ordinary text is unchanged."""
    text = str(text).replace(_LEGACY_COMMAND, _LEGACY_SAFE)
    return _LINE_START_COMMAND.sub(lambda m: m.group(1) + ":\uff1a", text)


class LogStream:
    """stdout or stderr with each line written through log_safe, except a line that workflow_command made
    (the commands speedstats means). Lines go on whole: a partial one waits for its end, or for drain(),
    so that a command split over writes is seen whole. Writes to .buffer (bytes, UTF-8) go the same way."""

    def __init__(self, stream):
        self.stream = stream
        self._pending = ""
        self._pending_buffer = None  # where the partial line came from: None (text), or the bytes buffer
        self._lock = threading.RLock()
        has_buffer = getattr(stream, "buffer", None) is not None
        self.buffer = _LogBuffer(self, stream.buffer) if has_buffer else None

    def __getattr__(self, name):  # encoding, fileno, isatty, ...: the stream's own
        return getattr(self.stream, name)

    def write(self, text):
        self._feed(text, None)
        return len(text)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        with self._lock:
            self.stream.flush()

    def drain(self):
        """Write out a partial line waiting for its end, and flush."""
        with self._lock:
            pending, self._pending = self._pending, ""
            if pending:
                self._emit(pending, self._pending_buffer)
            self.stream.flush()

    def _feed(self, text, buffer):
        with self._lock:
            self._pending += text
            self._pending_buffer = buffer
            end = self._pending.rfind("\n") + 1
            if end:
                lines, self._pending = self._pending[:end], self._pending[end:]
                self._emit(lines, buffer)

    def _emit(self, text, buffer):
        safe = "\n".join(line if line in _issued else log_safe(line) for line in text.split("\n"))
        if buffer is None:
            self.stream.write(safe)
        else:
            self.stream.flush()
            buffer.write(safe.encode("utf-8", "replace"))


class _LogBuffer:
    """The bytes side of a LogStream: UTF-8, decoded into its lines."""

    def __init__(self, owner, buffer):
        self._owner, self._buffer = owner, buffer
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def __getattr__(self, name):
        return getattr(self._buffer, name)

    def write(self, data):
        self._owner._feed(self._decoder.decode(bytes(data)), self._buffer)
        return len(data)

    def flush(self):
        self._owner.flush()


@contextlib.contextmanager
def log_safe_streams():
    """Inside, sys.stdout and sys.stderr are LogStreams (in a workflow step both are the job's log); the
    streams that were there before are put back after, each partial line written out."""
    saved = sys.stdout, sys.stderr
    wrapped = [s if s is None or isinstance(s, LogStream) else LogStream(s) for s in saved]
    sys.stdout, sys.stderr = wrapped
    try:
        yield
    finally:
        for stream in wrapped:
            if stream is not None:
                with contextlib.suppress(OSError, ValueError):  # a closed pipe: the CLI reports it after
                    stream.drain()
        sys.stdout, sys.stderr = saved


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
