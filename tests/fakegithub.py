"""A small GitHub REST server on loopback, with in-memory state, for tests.

It speaks the endpoints the bot uses, closely enough for PyGithub:

    GET    /repos/{o}/{r}  (with `permissions`)        GET /repos/{o}/{r}/issues/{n}
    GET    /repos/{o}/{r}/issues/{n}/comments          POST /repos/{o}/{r}/issues/{n}/comments
    PATCH  /repos/{o}/{r}/issues/comments/{id}         DELETE /repos/{o}/{r}/issues/comments/{id}
    GET    /repos/{o}/{r}/issues/{n}/labels            DELETE /repos/{o}/{r}/issues/{n}/labels/{name}
    GET    /repos/{o}/{r}/pulls/{n}                    GET /repos/{o}/{r}/pulls/{n}/commits
    GET    /repos/{o}/{r}/actions/runs/{id}            GET /repos/{o}/{r}/actions/runs/{id}/artifacts
    GET    /repos/{o}/{r}/actions/workflows/{wf}/runs  (filters branch, status, event; newest first)
    GET    /repos/{o}/{r}/actions/artifacts/{id}/zip   (302 to the storage server, which serves the zip)
    GET    /user                                       (403 for an installation token, as GITHUB_TOKEN)
    GET    /repos/{o}/{r}/actions/runs/{id}/jobs       (filter=latest: each job's latest attempt; or all)
    POST   /graphql                                    (the minimizeComment mutation only)
    POST   /repos/{o}/{r}/check-runs                   PATCH /repos/{o}/{r}/check-runs/{id}
    GET    /repos/{o}/{r}/commits/{sha}/check-runs     (check_name; filter=latest per name and app, or all)
    GET    /repos/{o}/{r}/issues  (state, labels, creator; pull requests too, as GitHub lists them)
    POST   /repos/{o}/{r}/issues                       PATCH /repos/{o}/{r}/issues/{n}  (title, body, state)
    GET    /repos/{o}/{r}/git/ref/{ref}                POST /repos/{o}/{r}/git/refs
    PATCH  /repos/{o}/{r}/git/refs/{ref}               (422 "Update is not a fast forward" unless force)
    GET|POST /repos/{o}/{r}/git/blobs, git/trees, git/commits  (the Git Data API)

Comments: a body over 65,536 characters is a 422, as on GitHub. A created comment's @mentions are
recorded in gh.notified (an edit notifies nobody, so edits record none); a hidden comment carries
"minimized" (its classifier, e.g. OUTDATED) in gh.comments(). An installation token may hide
comments unless add_token(..., may_minimize=False), which gets GraphQL's FORBIDDEN error. An artifact
name used twice in one run raises, as upload-artifact v4 gets a 409 Conflict.

Artifact downloads redirect, as GitHub's do, to blob storage on another host: a second loopback server
(127.0.0.2 where it can bind, else another port) at gh.storage_url, serving /_blobs/{id}?sig=... with a
signature in the URL. It refuses a request carrying an Authorization header, as a pre-signed URL's
host may, and records every request it gets in `gh.storage_requests` (headers included).

Usage:

    with FakeGitHub() as gh:
        gh.add_token("ghs_secret", login="github-actions[bot]")       # write access by default
        gh.add_pull("o/r", 7, labels=["automerge"], head_sha="a" * 40)
        gh.fail("POST", "/repos/o/r/issues/7/comments", status=500, after=True)  # stored, then 500
        ... point PyGithub (or `speedstats --api-url`) at gh.url ...
        gh.comments("o/r", 7)   # final state: [{"id", "body", "login", ...}, ...] oldest first
        gh.labels("o/r", 7)     # ["automerge", ...]

Authentication: a request must carry `Authorization: token T` (or `Bearer T`) for a token added with
add_token, else 401 "Bad credentials". A token added with write=False gets the 403 "Resource not
accessible by integration" that GitHub gives a fork's pull request on every write.

Check runs (the Checks API): only a GitHub App's token may write them: a person's token (one that
GET /user answers) gets 403 "You must authenticate via a GitHub App.", a token added with checks=False
(no `checks: write`) or write=False the 403 "Resource not accessible by integration". name and head_sha
(a commit the repository has) are required, a conclusion is one of GitHub's and goes with status
completed, an output has both title and summary, and a summary or text over 65,535 characters is a
422, as on GitHub. gh.check_runs(repo, sha) gives them, oldest first.

Issues: a created issue takes the next number of the repository (pull requests share the numbers),
its labels are created when the repository lacks them (as GitHub does for a writer), a body over
65,536 characters is a 422; a token added with issues=False (no `issues: write`) gets the 403 "Resource
not accessible by integration" on every issue write (a comment on an issue that is not a pull
request included). gh.issues(repo) gives them, with their comments through gh.comments(repo, number).

The Git Data API (a data branch written through blobs, trees, commits and a ref): objects are kept
per repository, blobs under their git sha; a tree is kept whole (every path of it), and a tree made
with base_tree and nested paths (`history/a.jsonl`) gets its folders as git does. Updating a ref to a
commit that does not descend from the ref's commit is refused with 422 "Update is not a fast forward"
unless force is given, creating a ref that exists with 422 "Reference already exists": what lets two
jobs that append at once each notice the other. A token added with contents=False (no `contents:
write`) gets the 403 on every Git Data write. gh.branch_file(repo, branch, path) reads a file at the
branch's head, gh.branch_commits(repo, branch) lists its commits, newest first.

Faults: fail() answers matching requests with a status (a 403 with retry_after is a secondary rate
limit); with after=True the request takes effect first and then fails, like a 5xx behind which
GitHub did store the comment. hold() makes the first N matching requests wait for each other, which
forces two clients to interleave. answer_raw() answers given bytes (malformed JSON); drip() sends an
answer one byte at a time. Every request is recorded in `gh.requests`.

Helpers: actions_env(gh, token, repo, tmp_path, event=event_payload("pull_request", ...)) builds
the environment of an Actions job aimed at the fake (waits scaled down); run_speedstats(argv, env)
runs the CLI in-process, or as a `python -m speedstats` subprocess with subprocess_=True.
"""
from __future__ import annotations

import base64
import contextlib
import fnmatch
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from unittest import mock

MAX_COMMENT_CHARS = 65536
FORK_MESSAGE = "Resource not accessible by integration"
SECONDARY_RATE_LIMIT_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
)
_TIMESTAMP = "2024-01-01T00:00:{:02d}Z"


@dataclass
class Token:
    login: str
    write: bool = True
    user_type: str = "Bot"
    # GET /user: a person's token (or an app's user token) is told who it is; an installation token,
    # GITHUB_TOKEN among them, gets 403 "Resource not accessible by integration".
    answers_user: bool = False
    may_minimize: bool = True  # GraphQL minimizeComment
    checks: bool = True  # `checks: write`: create and update check runs (an app's token only)
    contents: bool = True  # `contents: write`: the Git Data API's writes (a data branch)
    issues: bool = True  # `issues: write`: create and edit issues, comment on an issue


@dataclass
class Fault:
    method: str
    pattern: str
    status: int
    times: int
    after: bool
    headers: dict[str, str]
    message: str | None
    raw: bytes | None = None  # answer these bytes as the body instead of an error
    drip_s: float | None = None  # send the answer one byte every drip_s seconds


@dataclass
class Hold:
    method: str
    pattern: str
    parties: int
    timeout_s: float
    arrived: int = 0
    served: int = 0  # of the arrived parties, those answered by the fake's state


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    status: int = 0


@dataclass
class _Issue:
    number: int
    is_pull: bool
    labels: list[str] = field(default_factory=list)
    commits: list[str] = field(default_factory=list)  # pull requests: oldest first, last is the head
    head_repo: str | None = None
    author: str = "someone"
    title: str = ""
    body: str | None = None
    state: str = "open"
    state_reason: str | None = None
    author_type: str = "User"


@dataclass
class _Run:
    id: int
    head_sha: str
    pull_requests: list[int]
    conclusion: str
    event: str
    head_repo: str | None
    name: str
    workflow: str | None = None  # file name, e.g. build.yml
    branch: str = "pr"
    run_attempt: int = 1


@dataclass
class _Job:
    id: int
    run_id: int
    name: str
    run_attempt: int
    status: str
    conclusion: str | None


@dataclass
class _CheckRun:
    id: int
    repo: str
    name: str
    head_sha: str
    app: str  # the login of the app's token that created it
    fields: dict = field(default_factory=dict)  # status, conclusion, details_url, output, ...


@dataclass
class _Artifact:
    id: int
    run_id: int
    name: str
    data: bytes
    expired: bool


class _GitStore:
    """One repository's git objects: blobs by their git sha, trees as {path: blob sha} of every file,
    commits, and refs ({"refs/heads/x": commit sha})."""

    def __init__(self):
        self.blobs: dict[str, bytes] = {}
        self.trees: dict[str, dict[str, str]] = {}
        self.commits: dict[str, dict] = {}
        self.refs: dict[str, str] = {}

    def add_blob(self, data):
        sha = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        self.blobs[sha] = data
        return sha

    def add_tree(self, paths):
        sha = hashlib.sha1(b"tree " + json.dumps(sorted(paths.items())).encode()).hexdigest()
        self.trees[sha] = dict(paths)
        return sha

    def add_commit(self, tree, parents, message, when):
        commit = {"tree": tree, "parents": list(parents), "message": message, "date": when}
        sha = hashlib.sha1(b"commit " + json.dumps(commit, sort_keys=True).encode()
                           + str(len(self.commits)).encode()).hexdigest()
        self.commits[sha] = commit
        return sha

    def descends(self, sha, ancestor):
        """True when commit sha is ancestor or has it among its ancestors."""
        seen, todo = set(), [sha]
        while todo:
            current = todo.pop()
            if current == ancestor:
                return True
            if current not in seen and current in self.commits:
                seen.add(current)
                todo.extend(self.commits[current]["parents"])
        return False


class FakeGitHub:
    def __init__(self):
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._tokens: dict[str, Token] = {}
        self._repos: dict[str, dict[int, _Issue]] = {}
        self._comments: dict[int, dict] = {}  # id -> {"repo", "number", "body", "login", "user_type", ...}
        self._runs: dict[str, dict[int, _Run]] = {}
        self._artifacts: dict[int, _Artifact] = {}
        self._jobs: dict[int, _Job] = {}
        self._check_runs: dict[int, _CheckRun] = {}
        self._git: dict[str, _GitStore] = {}
        self.notified: list[tuple[int, str]] = []  # (comment id, login) for each @mention of a new comment
        self._faults: list[Fault] = []
        self._holds: list[Hold] = []
        self._next_id = 1000
        self._clock = 0
        self._workflow_ids: dict[str, int] = {}
        self.requests: list[RecordedRequest] = []
        self.storage_requests: list[RecordedRequest] = []
        self._server = None
        self._thread = None
        self._storage = None
        self._storage_thread = None

    # -- lifecycle -------------------------------------------------------------------------------------

    def start(self):
        handler = type("Handler", (_Handler,), {"fake": self, "storage": False})
        self._server, self._thread = _serve(("127.0.0.1", 0), handler, "fakegithub")
        storage = type("StorageHandler", (_Handler,), {"fake": self, "storage": True})
        try:  # another host, as GitHub's blob storage is; Linux answers on all of 127.0.0.0/8
            self._storage, self._storage_thread = _serve(("127.0.0.2", 0), storage, "fakestorage")
        except OSError:
            self._storage, self._storage_thread = _serve(("127.0.0.1", 0), storage, "fakestorage")
        return self

    def stop(self):
        if self._server is not None:
            with self._cond:
                self._holds.clear()
                self._cond.notify_all()
            for server, thread in ((self._server, self._thread), (self._storage, self._storage_thread)):
                server.shutdown()
                server.server_close()
                thread.join(timeout=5)
            self._server = self._storage = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    @property
    def url(self):
        """The API base URL, e.g. http://127.0.0.1:40123 (what GITHUB_API_URL would hold)."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def storage_url(self):
        """The blob storage's base URL: another host and port than url."""
        host, port = self._storage.server_address[:2]
        return f"http://{host}:{port}"

    # -- setting up state ------------------------------------------------------------------------------

    def add_token(self, token, login="github-actions[bot]", write=True, user_type="Bot", answers_user=None,
                  may_minimize=True, checks=True, contents=True, issues=True):
        """answers_user: whether GET /user says who the token is (default: for a User's token only);
        checks, contents, issues: whether it has `checks: write`, `contents: write`, `issues: write`."""
        if answers_user is None:
            answers_user = user_type != "Bot"
        with self._lock:
            self._tokens[token] = Token(login=login, write=write, user_type=user_type,
                                        answers_user=answers_user, may_minimize=may_minimize, checks=checks,
                                        contents=contents, issues=issues)

    def add_repo(self, repo):
        with self._lock:
            self._repos.setdefault(repo, {})
            self._runs.setdefault(repo, {})
            self._git.setdefault(repo, _GitStore())

    def add_pull(self, repo, number, labels=(), head_sha=None, commits=None, head_repo=None,
                 author="someone"):
        """A pull request; commits (oldest first) default to [head_sha]; head_repo defaults to repo."""
        self.add_repo(repo)
        shas = list(commits) if commits else [head_sha or f"{number:040x}"]
        if head_sha and shas[-1] != head_sha:
            shas.append(head_sha)
        with self._lock:
            self._repos[repo][number] = _Issue(number, True, list(labels), shas, head_repo or repo, author)
        return number

    def add_issue(self, repo, number, labels=(), title="", body=None, author="someone", state="open"):
        self.add_repo(repo)
        with self._lock:
            self._repos[repo][number] = _Issue(number, False, list(labels), title=title, body=body,
                                               author=author, state=state)
        return number

    def push(self, repo, number, sha):
        """A new head commit on the pull request."""
        with self._lock:
            self._repos[repo][number].commits.append(sha)

    def add_label(self, repo, number, name):
        with self._lock:
            labels = self._repos[repo][number].labels
            if name not in labels:
                labels.append(name)

    def add_comment(self, repo, number, body, login="someone", user_type="User"):
        """A comment as if someone posted it; returns its id."""
        with self._lock:
            return self._store_comment(repo, number, body, login, user_type)["id"]

    def add_workflow_run(self, repo, run_id, head_sha, pull_requests=(), conclusion="success",
                         event="pull_request", head_repo=None, name="Speed stats", workflow=None, branch="pr",
                         run_attempt=1):
        """A completed workflow run. A fork's run has pull_requests=() and head_repo='fork/r'.

        workflow (a file name such as build.yml) lists the run under /actions/workflows/{workflow}/runs,
        newest (highest id) first; the workflow's numeric id is gh.workflow_id(workflow).
        """
        self.add_repo(repo)
        with self._lock:
            if workflow is not None:
                self._workflow_ids.setdefault(workflow, 800 + len(self._workflow_ids))
            self._runs[repo][run_id] = _Run(run_id, head_sha, list(pull_requests), conclusion, event,
                                            head_repo or repo, name, workflow, branch, run_attempt)
        return run_id

    def rerun(self, repo, run_id):
        """A re-run of the run (of its failed jobs): its attempt goes up by one; returns the new attempt."""
        with self._lock:
            run = self._runs[repo][run_id]
            run.run_attempt += 1
            return run.run_attempt

    def add_job(self, repo, run_id, name, conclusion="success", run_attempt=1, status="completed"):
        """A job of a run in one attempt (a matrix job is named e.g. 'speed-stats (a100)'). Returns its id."""
        with self._lock:
            self._next_id += 1
            self._jobs[self._next_id] = _Job(self._next_id, run_id, name, run_attempt, status, conclusion)
            return self._next_id

    def workflow_id(self, workflow):
        with self._lock:
            return self._workflow_ids[workflow]

    def add_artifact(self, repo, run_id, name, data, expired=False):
        """An artifact of a run; data is the zip archive's bytes. Returns its id. A name the run already
        has is refused, as upload-artifact v4 is (409 Conflict)."""
        with self._lock:
            if any(a.run_id == run_id and a.name == name for a in self._artifacts.values()):
                raise ValueError(f"409 Conflict: an artifact named {name!r} already exists in run {run_id}")
            self._next_id += 1
            self._artifacts[self._next_id] = _Artifact(self._next_id, run_id, name, bytes(data), expired)
            return self._next_id

    # -- faults ----------------------------------------------------------------------------------------

    def fail(self, method, path, status=500, times=1, after=False, headers=None, message=None):
        """Answer the next `times` requests matching method and path (a glob) with `status`.

        after=True lets the request take effect before the error is returned.
        """
        with self._lock:
            self._faults.append(Fault(method.upper(), path, status, times, after, dict(headers or {}),
                                      message))

    def answer_raw(self, method, path, data, status=200, times=1):
        """Answer the next `times` matching requests with these bytes as a JSON body (e.g. malformed)."""
        with self._lock:
            self._faults.append(Fault(method.upper(), path, status, times, False, {}, None, raw=bytes(data)))

    def drip(self, method, path, interval_s=0.5, times=1):
        """Answer the next `times` matching requests normally, but one byte every interval_s seconds."""
        with self._lock:
            self._faults.append(Fault(method.upper(), path, 0, times, False, {}, None, drip_s=interval_s))

    def rate_limit(self, method, path, retry_after=1, times=1):
        """A secondary rate limit: 403 with Retry-After, as GitHub sends it."""
        self.fail(method, path, status=403, times=times, headers={"Retry-After": str(retry_after)},
                  message=SECONDARY_RATE_LIMIT_MESSAGE)

    def hold(self, method, path, parties=2, timeout_s=10.0):
        """The first `parties` matching requests wait until all of them have arrived (or timeout)."""
        with self._lock:
            self._holds.append(Hold(method.upper(), path, parties, timeout_s))

    # -- reading state ---------------------------------------------------------------------------------

    def comments(self, repo, number):
        """The comments on an issue or pull request, oldest first: dicts with id, body, login."""
        with self._lock:
            return [dict(c) for c in sorted(self._comments.values(), key=lambda c: c["id"])
                    if c["repo"] == repo and c["number"] == number]

    def labels(self, repo, number):
        with self._lock:
            return list(self._repos[repo][number].labels)

    def check_runs(self, repo, sha=None):
        """The check runs of a repository (of one commit), oldest first: dicts with id, name, head_sha,
        app and the fields as last written (status, conclusion, details_url, output, ...)."""
        with self._lock:
            return [dict(c.fields, id=c.id, name=c.name, head_sha=c.head_sha, app=c.app)
                    for c in sorted(self._check_runs.values(), key=lambda c: c.id)
                    if c.repo == repo and sha in (None, c.head_sha)]

    def issues(self, repo):
        """The issues of a repository that are not pull requests, by number: dicts with number, title,
        body, state, state_reason, labels, login."""
        with self._lock:
            issues = sorted(self._repos.get(repo, {}).values(), key=lambda i: i.number)
            return [{"number": i.number, "title": i.title, "body": i.body, "state": i.state,
                     "state_reason": i.state_reason, "labels": list(i.labels), "login": i.author}
                    for i in issues if not i.is_pull]

    def branch_commits(self, repo, branch):
        """The commits of a branch, newest first along the first parents: dicts with sha, message, tree
        (every path of it: blob sha) and parents; [] when there is no such branch."""
        with self._lock:
            store = self._git.get(repo) or _GitStore()
            sha, out = store.refs.get(f"refs/heads/{branch}"), []
            while sha is not None:
                commit = store.commits[sha]
                out.append({"sha": sha, "message": commit["message"], "parents": list(commit["parents"]),
                            "tree": dict(store.trees[commit["tree"]])})
                sha = commit["parents"][0] if commit["parents"] else None
            return out

    def branch_file(self, repo, branch, path):
        """The bytes of a file at the head of a branch, or None."""
        with self._lock:
            commits = self.branch_commits(repo, branch)
            blob = commits[0]["tree"].get(path) if commits else None
            return self._git[repo].blobs[blob] if blob is not None else None

    def add_branch(self, repo, branch, files, message="seed"):
        """A branch holding files ({path: bytes or str}), one commit on top of what it had; its sha."""
        self.add_repo(repo)
        with self._lock:
            store = self._git[repo]
            parent = store.refs.get(f"refs/heads/{branch}")
            paths = dict(store.trees[store.commits[parent]["tree"]]) if parent else {}
            for path, data in files.items():
                paths[path] = store.add_blob(data.encode("utf-8") if isinstance(data, str) else bytes(data))
            sha = store.add_commit(store.add_tree(paths), [parent] if parent else [], message, self._tick())
            store.refs[f"refs/heads/{branch}"] = sha
            return sha

    def requests_matching(self, method, path):
        with self._lock:
            return [r for r in self.requests if r.method == method.upper()
                    and fnmatch.fnmatchcase(r.path, path)]

    # -- internals -------------------------------------------------------------------------------------

    def _tick(self):
        self._clock += 1
        return _TIMESTAMP.format(self._clock % 60)

    def _store_comment(self, repo, number, body, login, user_type):
        self._next_id += 1
        now = self._tick()
        comment = {"id": self._next_id, "repo": repo, "number": number, "body": body, "login": login,
                   "user_type": user_type, "created_at": now, "updated_at": now, "minimized": None}
        self._comments[comment["id"]] = comment
        # GitHub notifies whom a new comment mentions (not in code, not after a word joiner)
        for mention in re.findall(r"(?<![\w`])@([A-Za-z0-9](?:[A-Za-z0-9-]{0,38}))(?![\w\u2060-])", body):
            self.notified.append((comment["id"], mention))
        return comment

    def _take_fault(self, method, path):
        for fault in self._faults:
            if fault.method == method and fnmatch.fnmatchcase(path, fault.pattern) and fault.times > 0:
                fault.times -= 1
                return fault
        return None

    def _wait_at_hold(self, method, path):
        """The hold this request is a party of (None: none), once it is released. A request outside
        every hold waits while a released hold's parties are still to be served: they are served before
        anything that follows them, whatever the threads' scheduling (on a busy machine a woken party
        could otherwise be served after a later request that changed what it sees)."""
        with self._cond:
            hold = next((h for h in self._holds if h.method == method and h.arrived < h.parties
                         and fnmatch.fnmatchcase(path, h.pattern)), None)
            if hold is None:
                pending = [h for h in self._holds if h.parties <= h.arrived and h.served < h.arrived]
                if pending:
                    self._cond.wait_for(lambda: all(h.served >= h.arrived for h in pending),
                                        timeout=max(h.timeout_s for h in pending))
                return None
            hold.arrived += 1
            self._cond.notify_all()
            self._cond.wait_for(lambda: hold.arrived >= hold.parties
                                or all(h is not hold for h in self._holds),
                                timeout=hold.timeout_s)
            return hold


_ROUTES = []


def _route(method, pattern):
    def register(fn):
        _ROUTES.append((method, re.compile("^" + pattern + "$"), fn))
        return fn
    return register


class _Reply(Exception):
    def __init__(self, status, payload=None, headers=None, raw=None):
        super().__init__(status)
        self.status = status
        self.payload = payload
        self.headers = headers or {}
        self.raw = raw


def _error(status, message):
    return _Reply(status, {"message": message, "documentation_url": "https://docs.github.com/rest"})


class _Handler(BaseHTTPRequestHandler):
    fake: FakeGitHub = None
    storage = False  # True: the blob storage server
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle's algorithm the body waits for the client's
    # delayed ACK of the headers (up to 40 ms a request on loopback).
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def do_GET(self):
        self._serve("GET")

    def do_POST(self):
        self._serve("POST")

    def do_PATCH(self):
        self._serve("PATCH")

    def do_DELETE(self):
        self._serve("DELETE")

    def _serve(self, method):
        fake = self.fake
        parsed = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(parsed.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        record = RecordedRequest(method, path, urllib.parse.parse_qs(parsed.query),
                                 dict(self.headers.items()), body)
        with fake._lock:
            (fake.storage_requests if self.storage else fake.requests).append(record)
        hold = fake._wait_at_hold(method, path)
        drip_s = None
        with fake._lock:
            if hold is not None:
                hold.served += 1
                fake._cond.notify_all()
            fault = fake._take_fault(method, path)
            if fault is not None and fault.drip_s is not None:
                drip_s, fault = fault.drip_s, None
            try:
                if fault is not None and fault.raw is not None:
                    raise _Reply(fault.status, raw=fault.raw, headers={"Content-Type": "application/json"})
                if fault is not None and not fault.after:
                    raise self._fault_reply(fault)
                reply = self._dispatch(method, path, record)
                if fault is not None:
                    raise self._fault_reply(fault)
            except _Reply as exc:
                reply = exc
            record.status = reply.status
        if drip_s is None:
            self._send(reply)
        else:
            self._drip(reply, drip_s)

    def _drip(self, reply, interval_s):
        real, buffer = self.wfile, io.BytesIO()
        self.wfile = buffer
        try:
            self._send(reply)
        finally:
            self.wfile = real
        try:
            for i in range(len(buffer.getvalue())):
                real.write(buffer.getvalue()[i:i + 1])
                real.flush()
                time.sleep(interval_s)
        except OSError:  # the client gave up
            self.close_connection = True

    @staticmethod
    def _fault_reply(fault):
        default = {401: "Bad credentials", 403: FORK_MESSAGE, 404: "Not Found", 422: "Validation Failed"}
        message = fault.message or default.get(fault.status, "Server Error")
        reply = _error(fault.status, message)
        reply.headers.update(fault.headers)
        return reply

    def _dispatch(self, method, path, record):
        if self.storage:  # the blob storage an artifact download redirects to: the URL is the credential
            if method != "GET" or not path.startswith("/_blobs/"):
                raise _error(404, "The specified resource does not exist.")
            return self._blob(path, record)
        if path.startswith("/_blobs/"):
            raise _error(404, "Not Found")
        token = self._token(record)
        for route_method, regex, fn in _ROUTES:
            match = regex.match(path)
            if match and route_method == method:
                return fn(self, token, record, **match.groupdict())
        raise _error(404, "Not Found")

    def _token(self, record):
        value = record.headers.get("Authorization") or record.headers.get("authorization") or ""
        scheme, _, secret = value.partition(" ")
        token = self.fake._tokens.get(secret) if scheme.lower() in ("token", "bearer") else None
        if token is None:
            raise _error(401, "Bad credentials")
        return token

    def _send(self, reply):
        if reply.raw is not None:
            data, content_type = reply.raw, reply.headers.pop("Content-Type", "application/zip")
        elif reply.payload is None:
            data, content_type = b"", None
        else:
            data, content_type = json.dumps(reply.payload).encode(), "application/json; charset=utf-8"
        self.send_response(reply.status)
        if content_type:
            self.send_header("Content-Type", content_type)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    # -- helpers building GitHub's JSON ------------------------------------------------------------------

    @property
    def base(self):
        return self.fake.url

    def _issue(self, repo, number):
        issue = self.fake._repos.get(repo, {}).get(int(number))
        if issue is None:
            raise _error(404, "Not Found")
        return issue

    def _require_write(self, token):
        if not token.write:
            raise _error(403, FORK_MESSAGE)

    def _user(self, login, user_type):
        return {"login": login, "id": abs(hash(login)) % 10**8, "type": user_type,
                "url": f"{self.base}/users/{urllib.parse.quote(login)}"}

    def _comment_json(self, c):
        repo, number = c["repo"], c["number"]
        return {
            "id": c["id"], "node_id": f"IC_{c['id']}", "body": c["body"],
            "url": f"{self.base}/repos/{repo}/issues/comments/{c['id']}",
            "html_url": f"{self.base}/{repo}/pull/{number}#issuecomment-{c['id']}",
            "issue_url": f"{self.base}/repos/{repo}/issues/{number}",
            "user": self._user(c["login"], c["user_type"]),
            "created_at": c["created_at"], "updated_at": c["updated_at"], "author_association": "NONE",
        }

    def _label_json(self, repo, name):
        return {"id": abs(hash(name)) % 10**8, "name": name, "color": "ededed", "default": False,
                "url": f"{self.base}/repos/{repo}/labels/{urllib.parse.quote(name)}"}

    def _repo_json(self, repo):
        owner, name = repo.split("/", 1)
        return {"id": abs(hash(repo)) % 10**8, "name": name, "full_name": repo,
                "owner": self._user(owner, "User"), "url": f"{self.base}/repos/{repo}",
                "html_url": f"{self.base}/{repo}"}

    def _pull_json(self, repo, issue):
        head = issue.commits[-1]
        return {
            "number": issue.number, "state": "open", "url": f"{self.base}/repos/{repo}/pulls/{issue.number}",
            "html_url": f"{self.base}/{repo}/pull/{issue.number}",
            "user": self._user(issue.author, "User"),
            "head": {"sha": head, "ref": f"pr-{issue.number}", "repo": self._repo_json(issue.head_repo)},
            "base": {"sha": "0" * 40, "ref": "main", "repo": self._repo_json(repo)},
            "labels": [self._label_json(repo, n) for n in issue.labels],
        }

    def _paginate(self, record, items):
        per_page = min(int((record.query.get("per_page") or ["30"])[0]), 100)
        page = int((record.query.get("page") or ["1"])[0])
        chunk = items[(page - 1) * per_page: page * per_page]
        headers = {}
        if page * per_page < len(items):
            query = {k: v[0] for k, v in record.query.items()}
            query.update(page=str(page + 1), per_page=str(per_page))
            headers["Link"] = f'<{self.base}{record.path}?{urllib.parse.urlencode(query)}>; rel="next"'
        return chunk, headers

    def _json_body(self, record):
        try:
            return json.loads(record.body or b"{}")
        except ValueError:
            raise _error(400, "Problems parsing JSON") from None

    def _blob(self, path, record):
        if any(name.lower() == "authorization" for name in record.headers):
            raise _error(400, "Authentication information is not given in the correct format.")
        name = path.rsplit("/", 1)[-1]
        artifact = self.fake._artifacts.get(int(name)) if name.isdigit() else None
        if artifact is None or record.query.get("sig") != [_signature(artifact.id)]:
            raise _error(403, "Server failed to authenticate the request.")
        return _Reply(200, raw=artifact.data)

    def _run(self, repo, run_id):
        run = self.fake._runs.get(repo, {}).get(int(run_id))
        if run is None:
            raise _error(404, "Not Found")
        return run


def _serve(address, handler, name):
    server = ThreadingHTTPServer(address, handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, name=name,
                              daemon=True)
    thread.start()
    return server, thread


def _check_body(payload):
    body = payload.get("body")
    if not isinstance(body, str) or not body:
        raise _error(422, "Validation Failed")
    if len(body) > MAX_COMMENT_CHARS:
        reply = _error(422, "Validation Failed")
        reply.payload["errors"] = [{"resource": "IssueComment", "code": "custom", "field": "body",
                                    "message": (f"body is too long (maximum is {MAX_COMMENT_CHARS} "
                                                "characters)")}]
        raise reply
    return body


_REPO = r"/repos/(?P<repo>[^/]+/[^/]+)"


@_route("GET", "/user")
def _get_user(h, token, record):
    if not token.answers_user:
        raise _error(403, FORK_MESSAGE)
    return _Reply(200, h._user(token.login, token.user_type))


@_route("GET", _REPO)
def _get_repo(h, token, record, repo):
    if repo not in h.fake._repos:
        raise _error(404, "Not Found")
    # The access GitHub reports for the token's holder: a write=False token's is read-only.
    access = {"admin": False, "maintain": False, "push": token.write, "triage": token.write, "pull": True}
    return _Reply(200, {**h._repo_json(repo), "permissions": access, "default_branch": "main"})


def _issue_json(h, repo, issue):
    kind = "pull" if issue.is_pull else "issues"
    data = {"id": 500000 + issue.number, "node_id": f"I_{issue.number}", "number": issue.number,
            "state": issue.state, "state_reason": issue.state_reason,
            "title": issue.title or f"#{issue.number}",
            "body": issue.body, "user": h._user(issue.author, issue.author_type),
            "url": f"{h.base}/repos/{repo}/issues/{issue.number}",
            "html_url": f"{h.base}/{repo}/{kind}/{issue.number}",
            "comments_url": f"{h.base}/repos/{repo}/issues/{issue.number}/comments",
            "comments": len(h.fake.comments(repo, issue.number)),
            "labels": [h._label_json(repo, n) for n in issue.labels]}
    if issue.is_pull:
        data["pull_request"] = {"url": f"{h.base}/repos/{repo}/pulls/{issue.number}"}
    return data


@_route("GET", _REPO + r"/issues/(?P<number>\d+)")
def _get_issue(h, token, record, repo, number):
    return _Reply(200, _issue_json(h, repo, h._issue(repo, number)))


def _require_issues(h, token):
    h._require_write(token)
    if not token.issues:
        raise _error(403, FORK_MESSAGE)


def _check_issue_fields(payload, creating):
    title = payload.get("title")
    if (creating or "title" in payload) and (not isinstance(title, str) or not title.strip()):
        reply = _error(422, "Validation Failed")
        reply.payload["errors"] = [{"resource": "Issue", "code": "missing_field", "field": "title"}]
        raise reply
    body = payload.get("body")
    if body is not None and not isinstance(body, str):
        raise _invalid(f"For 'properties/body', {json.dumps(body)} is not a string or null.")
    if isinstance(body, str) and len(body) > MAX_COMMENT_CHARS:
        reply = _error(422, "Validation Failed")
        too_long = f"body is too long (maximum is {MAX_COMMENT_CHARS} characters)"
        reply.payload["errors"] = [{"resource": "Issue", "code": "custom", "field": "body",
                                    "message": too_long}]
        raise reply
    labels = payload.get("labels")
    if labels is not None and (not isinstance(labels, list) or not all(isinstance(n, str) for n in labels)):
        raise _invalid("For 'properties/labels', it is not an array of strings.")


@_route("GET", _REPO + r"/issues")
def _list_issues(h, token, record, repo):
    if repo not in h.fake._repos:
        raise _error(404, "Not Found")
    query = {k: v[0] for k, v in record.query.items()}
    state = query.get("state", "open")
    if state not in ("open", "closed", "all"):
        raise _invalid(f"For 'state', {json.dumps(state)} is not one of open, closed, all.")
    wanted = [n for n in query.get("labels", "").split(",") if n]
    issues = sorted(h.fake._repos[repo].values(), key=lambda i: -i.number)  # newest first, as GitHub sorts
    items = [_issue_json(h, repo, i) for i in issues
             if state in ("all", i.state) and all(n in i.labels for n in wanted)
             and query.get("creator", i.author).lower() == i.author.lower()]
    chunk, headers = h._paginate(record, items)
    return _Reply(200, chunk, headers)


@_route("POST", _REPO + r"/issues")
def _create_issue(h, token, record, repo):
    if repo not in h.fake._repos:
        raise _error(404, "Not Found")
    _require_issues(h, token)
    payload = h._json_body(record)
    _check_issue_fields(payload, creating=True)
    number = max(h.fake._repos[repo], default=0) + 1
    issue = _Issue(number, False, list(dict.fromkeys(payload.get("labels") or [])), title=payload["title"],
                   body=payload.get("body"), author=token.login, author_type=token.user_type)
    h.fake._repos[repo][number] = issue
    return _Reply(201, _issue_json(h, repo, issue))


@_route("PATCH", _REPO + r"/issues/(?P<number>\d+)")
def _edit_issue(h, token, record, repo, number):
    issue = h._issue(repo, number)
    _require_issues(h, token)
    payload = h._json_body(record)
    _check_issue_fields(payload, creating=False)
    if "state" in payload:
        if payload["state"] not in ("open", "closed"):
            raise _invalid(f"For 'properties/state', {json.dumps(payload['state'])} is not one of "
                           "open, closed.")
        issue.state = payload["state"]
        issue.state_reason = payload.get("state_reason") if issue.state == "closed" else "reopened"
    for key in ("title", "body"):
        if key in payload:
            setattr(issue, key, payload[key])
    if "labels" in payload:
        issue.labels = list(dict.fromkeys(payload["labels"] or []))
    return _Reply(200, _issue_json(h, repo, issue))


@_route("GET", _REPO + r"/issues/(?P<number>\d+)/comments")
def _list_comments(h, token, record, repo, number):
    h._issue(repo, number)
    items = [h._comment_json(c) for c in h.fake.comments(repo, int(number))]
    chunk, headers = h._paginate(record, items)
    return _Reply(200, chunk, headers)


@_route("POST", _REPO + r"/issues/(?P<number>\d+)/comments")
def _create_comment(h, token, record, repo, number):
    issue = h._issue(repo, number)
    h._require_write(token)
    if not issue.is_pull and not token.issues:
        raise _error(403, FORK_MESSAGE)
    body = _check_body(h._json_body(record))
    comment = h.fake._store_comment(repo, int(number), body, token.login, token.user_type)
    return _Reply(201, h._comment_json(comment))


def _stored_comment(h, repo, comment_id):
    comment = h.fake._comments.get(int(comment_id))
    if comment is None or comment["repo"] != repo:
        raise _error(404, "Not Found")
    return comment


@_route("GET", _REPO + r"/issues/comments/(?P<comment_id>\d+)")
def _get_comment(h, token, record, repo, comment_id):
    return _Reply(200, h._comment_json(_stored_comment(h, repo, comment_id)))


@_route("PATCH", _REPO + r"/issues/comments/(?P<comment_id>\d+)")
def _edit_comment(h, token, record, repo, comment_id):
    comment = _stored_comment(h, repo, comment_id)
    h._require_write(token)
    comment["body"] = _check_body(h._json_body(record))
    comment["updated_at"] = h.fake._tick()
    return _Reply(200, h._comment_json(comment))


@_route("DELETE", _REPO + r"/issues/comments/(?P<comment_id>\d+)")
def _delete_comment(h, token, record, repo, comment_id):
    comment = _stored_comment(h, repo, comment_id)
    h._require_write(token)
    del h.fake._comments[comment["id"]]
    return _Reply(204)


@_route("GET", _REPO + r"/issues/(?P<number>\d+)/labels")
def _list_labels(h, token, record, repo, number):
    issue = h._issue(repo, number)
    chunk, headers = h._paginate(record, [h._label_json(repo, n) for n in issue.labels])
    return _Reply(200, chunk, headers)


@_route("DELETE", _REPO + r"/issues/(?P<number>\d+)/labels/(?P<name>[^/]+)")
def _remove_label(h, token, record, repo, number, name):
    issue = h._issue(repo, number)
    h._require_write(token)
    matching = [n for n in issue.labels if n.lower() == name.lower()]
    if not matching:
        raise _error(404, "Label does not exist")
    issue.labels.remove(matching[0])
    return _Reply(200, [h._label_json(repo, n) for n in issue.labels])


@_route("GET", _REPO + r"/pulls/(?P<number>\d+)")
def _get_pull(h, token, record, repo, number):
    issue = h._issue(repo, number)
    if not issue.is_pull:
        raise _error(404, "Not Found")
    return _Reply(200, h._pull_json(repo, issue))


@_route("GET", _REPO + r"/pulls/(?P<number>\d+)/commits")
def _list_pull_commits(h, token, record, repo, number):
    issue = h._issue(repo, number)
    if not issue.is_pull:
        raise _error(404, "Not Found")
    items = [{"sha": sha, "url": f"{h.base}/repos/{repo}/commits/{sha}", "commit": {"message": sha[:7]}}
             for sha in issue.commits]
    chunk, headers = h._paginate(record, items)
    return _Reply(200, chunk, headers)


@_route("GET", _REPO + r"/actions/runs/(?P<run_id>\d+)")
def _get_run(h, token, record, repo, run_id):
    run = h._run(repo, run_id)
    pulls = []
    for number in run.pull_requests:
        issue = h._issue(repo, number)
        pulls.append({"number": number, "url": f"{h.base}/repos/{repo}/pulls/{number}",
                      "head": {"sha": issue.commits[-1], "ref": f"pr-{number}"},
                      "base": {"sha": "0" * 40, "ref": "main"}})
    return _Reply(200, dict(_run_json(h, repo, run), pull_requests=pulls))


def _artifact_json(h, repo, artifact):
    return {"id": artifact.id, "node_id": f"A_{artifact.id}", "name": artifact.name,
            "size_in_bytes": len(artifact.data), "expired": artifact.expired,
            "url": f"{h.base}/repos/{repo}/actions/artifacts/{artifact.id}",
            "archive_download_url": f"{h.base}/repos/{repo}/actions/artifacts/{artifact.id}/zip",
            "workflow_run": {"id": artifact.run_id}}


@_route("GET", _REPO + r"/actions/runs/(?P<run_id>\d+)/artifacts")
def _list_artifacts(h, token, record, repo, run_id):
    run = h._run(repo, run_id)
    items = [_artifact_json(h, repo, a) for a in sorted(h.fake._artifacts.values(), key=lambda a: a.id)
             if a.run_id == run.id]
    chunk, headers = h._paginate(record, items)
    return _Reply(200, {"total_count": len(items), "artifacts": chunk}, headers)


@_route("GET", _REPO + r"/actions/artifacts/(?P<artifact_id>\d+)/zip")
def _download_artifact(h, token, record, repo, artifact_id):
    artifact = h.fake._artifacts.get(int(artifact_id))
    if artifact is None or artifact.run_id not in h.fake._runs.get(repo, {}):
        raise _error(404, "Not Found")
    if artifact.expired:
        raise _error(410, "Artifact has expired")
    location = f"{h.fake.storage_url}/_blobs/{artifact.id}?sv=2024-01-01&sig={_signature(artifact.id)}"
    return _Reply(302, headers={"Location": location})


@_route("GET", _REPO + r"/actions/runs/(?P<run_id>\d+)/jobs")
def _list_jobs(h, token, record, repo, run_id):
    run = h._run(repo, run_id)
    jobs = sorted((j for j in h.fake._jobs.values() if j.run_id == run.id), key=lambda j: j.id)
    if (record.query.get("filter") or ["latest"])[0] == "latest":  # each job name in its latest attempt
        latest = {}
        for job in jobs:
            if job.name not in latest or job.run_attempt >= latest[job.name].run_attempt:
                latest[job.name] = job
        jobs = sorted(latest.values(), key=lambda j: j.id)
    items = [{"id": j.id, "run_id": j.run_id, "run_attempt": j.run_attempt, "name": j.name,
              "status": j.status, "conclusion": j.conclusion, "node_id": f"CR_{j.id}",
              "url": f"{h.base}/repos/{repo}/actions/jobs/{j.id}",
              "html_url": f"{h.base}/{repo}/actions/runs/{j.run_id}/job/{j.id}",
              "run_url": f"{h.base}/repos/{repo}/actions/runs/{j.run_id}", "steps": []} for j in jobs]
    chunk, headers = h._paginate(record, items)
    return _Reply(200, {"total_count": len(items), "jobs": chunk}, headers)


@_route("POST", "/graphql")
def _graphql(h, token, record):
    payload = h._json_body(record)
    query, variables = payload.get("query") or "", payload.get("variables") or {}
    if "minimizeComment" not in query:
        return _Reply(200, {"errors": [{"message": "this fake knows the minimizeComment mutation only"}]})
    subject = (variables.get("input") or {}).get("subjectId") or ""
    classifier = (variables.get("input") or {}).get("classifier")
    comment = h.fake._comments.get(int(subject[3:])) if re.fullmatch(r"IC_\d+", subject) else None
    if comment is None:
        return _Reply(200, {"data": {"minimizeComment": None}, "errors": [
            {"type": "NOT_FOUND", "path": ["minimizeComment"],
             "message": f"Could not resolve to a node with the global id of '{subject}'"}]})
    if not token.write or not token.may_minimize:
        return _Reply(200, {"data": {"minimizeComment": None}, "errors": [
            {"type": "FORBIDDEN", "path": ["minimizeComment"], "message": FORK_MESSAGE}]})
    if classifier not in ("SPAM", "ABUSE", "OFF_TOPIC", "OUTDATED", "DUPLICATE", "RESOLVED"):
        message = f"Argument 'classifier' has an invalid value ({classifier})"
        return _Reply(200, {"errors": [{"message": message}]})
    comment["minimized"] = classifier
    return _Reply(200, {"data": {"minimizeComment": {"minimizedComment": {"isMinimized": True}}}})


# -- the Checks API ---------------------------------------------------------------------------------------

APP_ONLY_MESSAGE = "You must authenticate via a GitHub App."
MAX_CHECK_TEXT = 65535
CHECK_STATUSES = ("queued", "in_progress", "completed")
CHECK_CONCLUSIONS = ("action_required", "cancelled", "failure", "neutral", "success", "skipped", "stale",
                     "timed_out")


def _invalid(detail):
    return _error(422, f"Invalid request.\n\n{detail}")


def _check_write(token):
    if token.answers_user:  # a person's token: the Checks API is for GitHub Apps only
        raise _error(403, APP_ONLY_MESSAGE)
    if not token.write or not token.checks:
        raise _error(403, FORK_MESSAGE)


def _known_commits(h, repo):
    shas = {sha for issue in h.fake._repos.get(repo, {}).values() for sha in issue.commits}
    return shas | {run.head_sha for run in h.fake._runs.get(repo, {}).values()}


def _check_fields(h, payload, current):
    """The fields of a check run after payload is applied to current, checked as GitHub checks them."""
    fields = dict(current)
    for key in ("details_url", "external_id", "status", "conclusion", "started_at", "completed_at", "output"):
        if key in payload:
            fields[key] = payload[key]
    for key in ("details_url", "external_id", "started_at", "completed_at"):
        if fields.get(key) is not None and not isinstance(fields[key], str):
            raise _invalid(f"For 'properties/{key}', {json.dumps(fields[key])} is not a string.")
    if fields.get("status") not in (None, *CHECK_STATUSES):
        raise _invalid(f"For 'properties/status', {json.dumps(fields['status'])} is not one of "
                       f"{list(CHECK_STATUSES)}.")
    if "conclusion" in payload:
        if payload["conclusion"] not in CHECK_CONCLUSIONS:
            raise _invalid(f"For 'properties/conclusion', {json.dumps(payload['conclusion'])} is not one of "
                           f"{list(CHECK_CONCLUSIONS)}.")
        if payload.get("status", "completed") != "completed":
            raise _invalid("\"conclusion\" can only be given with a status of \"completed\".")
        fields["status"] = "completed"  # GitHub: a conclusion completes the check run
    elif fields.get("status") == "completed" and not fields.get("conclusion"):
        raise _invalid("\"conclusion\" wasn't supplied.")
    if "completed_at" in payload and not fields.get("conclusion"):
        raise _invalid("\"conclusion\" wasn't supplied.")
    if fields.get("status") == "completed":
        fields.setdefault("completed_at", h.fake._tick())
    fields.setdefault("status", "queued")
    fields.setdefault("started_at", h.fake._tick())
    output = payload.get("output")
    if "output" in payload:
        if not isinstance(output, dict):
            raise _invalid("For 'properties/output', it is not an object.")
        for key in ("title", "summary"):
            if not isinstance(output.get(key), str):
                raise _invalid(f"\"{key}\" wasn't supplied.")
        for key in ("summary", "text"):
            value = output.get(key)
            if isinstance(value, str) and len(value) > MAX_CHECK_TEXT:
                raise _invalid(f"Only {MAX_CHECK_TEXT} characters are allowed; {len(value)} were supplied.")
    return fields


def _check_run_json(h, check):
    fields, repo = check.fields, check.repo
    output = fields.get("output") or {}
    slug = check.app.removesuffix("[bot]")
    return {
        "id": check.id, "node_id": f"CR_{check.id}", "name": check.name, "head_sha": check.head_sha,
        "external_id": fields.get("external_id") or "", "status": fields.get("status"),
        "conclusion": fields.get("conclusion"), "started_at": fields.get("started_at"),
        "completed_at": fields.get("completed_at"),
        "url": f"{h.base}/repos/{repo}/check-runs/{check.id}",
        "html_url": f"{h.base}/{repo}/runs/{check.id}",
        "details_url": fields.get("details_url") or f"{h.base}/{repo}/runs/{check.id}",
        "output": {"title": output.get("title"), "summary": output.get("summary"), "text": output.get("text"),
                   "annotations_count": 0,
                   "annotations_url": f"{h.base}/repos/{repo}/check-runs/{check.id}/annotations"},
        "check_suite": {"id": 5000}, "app": {"id": abs(hash(slug)) % 10**6, "slug": slug, "name": slug},
        "pull_requests": [],
    }


@_route("POST", _REPO + r"/check-runs")
def _create_check_run(h, token, record, repo):
    if repo not in h.fake._repos:
        raise _error(404, "Not Found")
    _check_write(token)
    payload = h._json_body(record)
    for key in ("name", "head_sha"):
        if not isinstance(payload.get(key), str) or not payload[key]:
            raise _invalid(f"\"{key}\" wasn't supplied.")
    if payload["head_sha"] not in _known_commits(h, repo):
        raise _error(422, f"No commit found for SHA: {payload['head_sha']}")
    fields = _check_fields(h, payload, {})
    h.fake._next_id += 1
    check = _CheckRun(h.fake._next_id, repo, payload["name"], payload["head_sha"], token.login, fields)
    h.fake._check_runs[check.id] = check
    return _Reply(201, _check_run_json(h, check))


@_route("PATCH", _REPO + r"/check-runs/(?P<check_id>\d+)")
def _update_check_run(h, token, record, repo, check_id):
    check = h.fake._check_runs.get(int(check_id))
    if check is None or check.repo != repo:
        raise _error(404, "Not Found")
    _check_write(token)
    if token.login != check.app:  # an app updates its own check runs only
        raise _error(403, FORK_MESSAGE)
    payload = h._json_body(record)
    if "name" in payload:
        if not isinstance(payload["name"], str) or not payload["name"]:
            raise _invalid("\"name\" wasn't supplied.")
        check.name = payload["name"]
    check.fields = _check_fields(h, payload, check.fields)
    return _Reply(200, _check_run_json(h, check))


@_route("GET", _REPO + r"/commits/(?P<sha>[^/]+)/check-runs")
def _list_check_runs(h, token, record, repo, sha):
    if repo not in h.fake._repos:
        raise _error(404, "Not Found")
    if sha not in _known_commits(h, repo):
        raise _error(422, f"No commit found for SHA: {sha}")
    query = {k: v[0] for k, v in record.query.items()}
    checks = [c for c in sorted(h.fake._check_runs.values(), key=lambda c: -c.id)
              if c.repo == repo and c.head_sha == sha]
    if "check_name" in query:
        checks = [c for c in checks if c.name == query["check_name"]]
    if "status" in query:
        checks = [c for c in checks if c.fields.get("status") == query["status"]]
    if query.get("filter", "latest") == "latest":  # the newest of each name, per app
        seen, latest = set(), []
        for check in checks:
            if (check.name, check.app) not in seen:
                seen.add((check.name, check.app))
                latest.append(check)
        checks = latest
    items = [_check_run_json(h, c) for c in checks]
    chunk, headers = h._paginate(record, items)
    return _Reply(200, {"total_count": len(items), "check_runs": chunk}, headers)


# -- the Git Data API ---------------------------------------------------------------------------------------

NOT_FAST_FORWARD = "Update is not a fast forward"
REF_EXISTS = "Reference already exists"
_SHA = r"(?P<sha>[0-9a-f]{40})"


def _git(h, repo):
    if repo not in h.fake._repos:
        raise _error(404, "Not Found")
    return h.fake._git[repo]


def _git_write(h, token, repo):
    store = _git(h, repo)
    h._require_write(token)
    if not token.contents:
        raise _error(403, FORK_MESSAGE)
    return store


def _ref_json(h, repo, name, sha):
    return {"ref": name, "node_id": f"REF_{name}", "url": f"{h.base}/repos/{repo}/git/{name}",
            "object": {"type": "commit", "sha": sha, "url": f"{h.base}/repos/{repo}/git/commits/{sha}"}}


def _commit_json(h, repo, store, sha):
    commit = store.commits[sha]
    person = {"name": "github-actions[bot]", "email": "github-actions[bot]@users.noreply.github.com",
              "date": commit["date"]}
    return {"sha": sha, "node_id": f"C_{sha}", "url": f"{h.base}/repos/{repo}/git/commits/{sha}",
            "html_url": f"{h.base}/{repo}/commit/{sha}", "author": person, "committer": person,
            "message": commit["message"],
            "tree": {"sha": commit["tree"], "url": f"{h.base}/repos/{repo}/git/trees/{commit['tree']}"},
            "parents": [{"sha": p, "url": f"{h.base}/repos/{repo}/git/commits/{p}",
                         "html_url": f"{h.base}/{repo}/commit/{p}"} for p in commit["parents"]],
            "verification": {"verified": False, "reason": "unsigned", "signature": None, "payload": None}}


def _tree_entries(h, repo, store, paths, recursive):
    """GitHub's entries of a tree kept as {path: blob sha}: its folders as entries of type tree (each a
    tree of its own, stored so that it can be read), every path with recursive, the top level without."""
    folders = sorted({"/".join(p.split("/")[:i]) for p in paths for i in range(1, p.count("/") + 1)})
    entries = []
    for folder in folders:
        inside = {p[len(folder) + 1:]: b for p, b in paths.items() if p.startswith(folder + "/")}
        sha = store.add_tree(inside)
        entries.append({"path": folder, "mode": "040000", "type": "tree", "sha": sha,
                        "url": f"{h.base}/repos/{repo}/git/trees/{sha}"})
    for path, blob in sorted(paths.items()):
        entries.append({"path": path, "mode": "100644", "type": "blob", "sha": blob,
                        "size": len(store.blobs[blob]), "url": f"{h.base}/repos/{repo}/git/blobs/{blob}"})
    if not recursive:
        entries = [e for e in entries if "/" not in e["path"]]
    return sorted(entries, key=lambda e: e["path"])


@_route("GET", _REPO + r"/git/(?:ref|refs)/(?P<name>.+)")
def _get_ref(h, token, record, repo, name):
    store = _git(h, repo)
    full = "refs/" + name
    if full not in store.refs:
        raise _error(404, "Not Found")
    return _Reply(200, _ref_json(h, repo, full, store.refs[full]))


@_route("POST", _REPO + r"/git/refs")
def _create_ref(h, token, record, repo):
    store = _git_write(h, token, repo)
    payload = h._json_body(record)
    name, sha = payload.get("ref"), payload.get("sha")
    if not isinstance(name, str) or not name.startswith("refs/") or name.count("/") < 2:
        raise _error(422, "Reference name must start with 'refs/' and have at least two slashes.")
    if sha not in store.commits:
        raise _error(422, "Object does not exist")
    if name in store.refs:
        raise _error(422, REF_EXISTS)
    store.refs[name] = sha
    return _Reply(201, _ref_json(h, repo, name, sha))


@_route("PATCH", _REPO + r"/git/refs/(?P<name>.+)")
def _update_ref(h, token, record, repo, name):
    store = _git_write(h, token, repo)
    full = "refs/" + name
    payload = h._json_body(record)
    sha = payload.get("sha")
    if full not in store.refs:
        raise _error(422, "Reference does not exist")
    if sha not in store.commits:
        raise _error(422, "Object does not exist")
    if not payload.get("force") and not store.descends(sha, store.refs[full]):
        raise _error(422, NOT_FAST_FORWARD)
    store.refs[full] = sha
    return _Reply(200, _ref_json(h, repo, full, sha))


@_route("GET", _REPO + r"/git/commits/" + _SHA)
def _get_git_commit(h, token, record, repo, sha):
    store = _git(h, repo)
    if sha not in store.commits:
        raise _error(404, "Not Found")
    return _Reply(200, _commit_json(h, repo, store, sha))


@_route("POST", _REPO + r"/git/commits")
def _create_git_commit(h, token, record, repo):
    store = _git_write(h, token, repo)
    payload = h._json_body(record)
    message, tree, parents = payload.get("message"), payload.get("tree"), payload.get("parents", [])
    if not isinstance(message, str):
        raise _invalid("\"message\" wasn't supplied.")
    if tree not in store.trees:
        raise _error(422, "Tree SHA does not exist")
    if not isinstance(parents, list) or any(p not in store.commits for p in parents):
        raise _error(422, "Parent SHA does not exist or is not a commit object")
    sha = store.add_commit(tree, parents, message, h.fake._tick())
    return _Reply(201, _commit_json(h, repo, store, sha))


@_route("GET", _REPO + r"/git/trees/" + _SHA)
def _get_git_tree(h, token, record, repo, sha):
    store = _git(h, repo)
    if sha not in store.trees:
        raise _error(404, "Not Found")
    recursive = (record.query.get("recursive") or ["0"])[0] not in ("0", "false", "")
    return _Reply(200, {"sha": sha, "url": f"{h.base}/repos/{repo}/git/trees/{sha}", "truncated": False,
                        "tree": _tree_entries(h, repo, store, store.trees[sha], recursive)})


@_route("POST", _REPO + r"/git/trees")
def _create_git_tree(h, token, record, repo):
    store = _git_write(h, token, repo)
    payload = h._json_body(record)
    base = payload.get("base_tree")
    if base is not None and base not in store.trees:
        raise _error(422, "base_tree is not a valid tree oid")
    paths = dict(store.trees[base]) if base is not None else {}
    entries = payload.get("tree")
    if not isinstance(entries, list):
        raise _invalid("\"tree\" wasn't supplied.")
    for entry in entries:
        path = entry.get("path") if isinstance(entry, dict) else None
        if not isinstance(path, str) or not path or path.startswith("/") or "" in path.split("/"):
            raise _error(422, "tree.path contains a malformed path component")
        if entry.get("type", "blob") != "blob" or entry.get("mode", "100644") not in ("100644", "100755"):
            raise _error(422, "this fake keeps files only (type blob, mode 100644 or 100755)")
        if "content" in entry:
            paths[path] = store.add_blob(str(entry["content"]).encode("utf-8"))
        elif entry.get("sha") is None:
            paths.pop(path, None)
        elif entry["sha"] in store.blobs:
            paths[path] = entry["sha"]
        else:
            raise _error(422, f"tree.sha {entry['sha']} is not a valid blob")
    sha = store.add_tree(paths)
    return _Reply(201, {"sha": sha, "url": f"{h.base}/repos/{repo}/git/trees/{sha}", "truncated": False,
                        "tree": _tree_entries(h, repo, store, paths, False)})


@_route("GET", _REPO + r"/git/blobs/" + _SHA)
def _get_git_blob(h, token, record, repo, sha):
    store = _git(h, repo)
    if sha not in store.blobs:
        raise _error(404, "Not Found")
    data = store.blobs[sha]
    return _Reply(200, {"sha": sha, "node_id": f"B_{sha}", "size": len(data),
                        "url": f"{h.base}/repos/{repo}/git/blobs/{sha}",
                        "content": base64.encodebytes(data).decode("ascii"), "encoding": "base64"})


@_route("POST", _REPO + r"/git/blobs")
def _create_git_blob(h, token, record, repo):
    store = _git_write(h, token, repo)
    payload = h._json_body(record)
    content, encoding = payload.get("content"), payload.get("encoding", "utf-8")
    if not isinstance(content, str):
        raise _invalid("\"content\" wasn't supplied.")
    if encoding == "base64":
        try:
            data = base64.b64decode(content, validate=False)
        except ValueError:
            raise _error(422, "content is not valid Base64") from None
    elif encoding in ("utf-8", "utf8"):
        data = content.encode("utf-8")
    else:
        raise _error(422, f"encoding {encoding!r} is not one of utf-8, base64")
    sha = store.add_blob(data)
    return _Reply(201, {"sha": sha, "url": f"{h.base}/repos/{repo}/git/blobs/{sha}"})


def _signature(artifact_id):
    return f"s{artifact_id * 7919 % 100003:05d}"


def _run_json(h, repo, run):
    return {"id": run.id, "name": run.name, "event": run.event, "status": "completed",
            "run_attempt": run.run_attempt,
            "conclusion": run.conclusion, "head_sha": run.head_sha, "head_branch": run.branch,
            "head_repository": h._repo_json(run.head_repo), "repository": h._repo_json(repo),
            "url": f"{h.base}/repos/{repo}/actions/runs/{run.id}",
            "html_url": f"{h.base}/{repo}/actions/runs/{run.id}",
            "artifacts_url": f"{h.base}/repos/{repo}/actions/runs/{run.id}/artifacts"}


@_route("GET", _REPO + r"/actions/workflows/(?P<workflow>[^/]+)/runs")
def _list_workflow_runs(h, token, record, repo, workflow):
    known = h.fake._workflow_ids
    name = next((w for w, i in known.items() if workflow in (w, str(i))), None)
    if name is None or repo not in h.fake._runs:
        raise _error(404, "Not Found")
    wanted = {k: v[0] for k, v in record.query.items() if k in ("branch", "event", "status")}
    runs = []
    for run in sorted(h.fake._runs[repo].values(), key=lambda r: -r.id):
        if run.workflow != name:
            continue
        if "branch" in wanted and run.branch != wanted["branch"]:
            continue
        if "event" in wanted and run.event != wanted["event"]:
            continue
        if "status" in wanted and wanted["status"] not in ("completed", run.conclusion):
            continue
        runs.append(dict(_run_json(h, repo, run), pull_requests=[]))
    chunk, headers = h._paginate(record, runs)
    return _Reply(200, {"total_count": len(runs), "workflow_runs": chunk}, headers)


# -- helpers for tests that run speedstats against the fake ------------------------------------------------


def event_payload(kind, repo, number=None, head_sha=None, run_id=None, head_repo=None):
    """A minimal GITHUB_EVENT_PATH payload: pull_request, issue_comment, workflow_run, push, ...

    A pull request's head and base name their repositories as GitHub's do: head_repo is the fork's
    OWNER/NAME (default: repo, a branch of the same repository), or "" for a deleted fork (null).
    """
    payload = {"repository": {"full_name": repo}}
    if kind in ("pull_request", "pull_request_target"):
        head_repo = repo if head_repo is None else head_repo
        head = {"sha": head_sha, "repo": {"full_name": head_repo} if head_repo else None}
        payload["pull_request"] = {"number": number, "head": head, "base": {"repo": {"full_name": repo}}}
    elif kind == "issue_comment":
        payload["issue"] = {"number": number, "pull_request": {"url": f"/repos/{repo}/pulls/{number}"}}
    elif kind == "workflow_run":
        pulls = [{"number": number, "head": {"sha": head_sha}}] if number else []
        payload["workflow_run"] = {"id": run_id, "head_sha": head_sha, "pull_requests": pulls}
    return payload


def actions_env(gh, token, repo, tmp_path, event_name=None, event=None, **extra):
    """Environment variables as a GitHub Actions job would have them, aimed at the fake.

    Waits (retry backoff, Retry-After, PyGithub's pacing) are scaled down to a thousandth so tests
    stay fast. With event (a payload dict), it is written under tmp_path and GITHUB_EVENT_PATH set.
    """
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_API_URL": gh.url,
        "GITHUB_REPOSITORY": repo,
        "GITHUB_TOKEN": token,
        "SPEEDSTATS_GITHUB_TIME_SCALE": "0.001",
    }
    if event is not None:
        # a fresh name per call: concurrent runs in one test must not share (or overwrite) a payload
        fd, name = tempfile.mkstemp(prefix="event-", suffix=".json", dir=tmp_path)
        os.close(fd)
        path = Path(name)
        path.write_text(json.dumps(event), encoding="utf-8")
        env["GITHUB_EVENT_PATH"] = str(path)
        env["GITHUB_EVENT_NAME"] = event_name or next(
            (k for k in ("pull_request", "workflow_run") if k in event), "push")
    elif event_name:
        env["GITHUB_EVENT_NAME"] = event_name
    env.update({k: str(v) for k, v in extra.items()})
    return env


@dataclass
class CommandResult:
    rc: int
    out: str
    err: str


_OWN_ENV_PREFIXES = ("GITHUB_", "INPUT_", "RUNNER_", "SPEEDSTATS_")


def run_speedstats(argv, env, subprocess_=False, timeout=60):
    """Run `speedstats ARGV` with env (and none of the outer job's GITHUB_*/INPUT_* variables).

    In-process by default (fast); subprocess_=True spawns `python -m speedstats` with PYTHONPATH=src.
    """
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(_OWN_ENV_PREFIXES)}
    full_env.update({k: str(v) for k, v in env.items()})
    # the fake is never behind a proxy
    full_env["NO_PROXY"] = full_env["no_proxy"] = "127.0.0.1,127.0.0.2,localhost"
    if subprocess_:
        src = str(Path(__file__).resolve().parents[1] / "src")
        full_env["PYTHONPATH"] = src + os.pathsep + full_env.get("PYTHONPATH", "")
        proc = subprocess.run([sys.executable, "-m", "speedstats", *map(str, argv)], env=full_env,
                              capture_output=True, text=True, timeout=timeout, check=False)
        return CommandResult(proc.returncode, proc.stdout, proc.stderr)
    from speedstats.cli import main

    out, err = io.StringIO(), io.StringIO()
    with mock.patch.dict(os.environ, full_env, clear=True), \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main([str(a) for a in argv])
        except SystemExit as exc:  # argparse errors
            rc = exc.code if isinstance(exc.code, int) else 1
    return CommandResult(rc, out.getvalue(), err.getvalue())
