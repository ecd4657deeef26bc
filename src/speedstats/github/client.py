"""A thin PyGithub client: the few calls the bot makes, with retries and errors a person can act on.

Retries are done here, not by PyGithub's urllib3 retry, because a POST that failed with a 5xx may
have been stored anyway: after such a failure, create_comment lists the comments again and looks
for the one it was posting before it posts again. 5xx and network errors back off exponentially;
403/429 rate limits wait what GitHub asks (Retry-After, or the primary limit's reset time).

Deadlines: each API call (its pages and an artifact's body included) must finish within
`request_deadline_s`, counted from its start: the per-read timeout of requests alone lets a server
that drips one byte at a time hold a command forever. The whole command, every call and wait
together, stops at `command_deadline_s` (DEFAULT_COMMAND_DEADLINE_S; the commands' --github-deadline,
the action's `github-deadline` input, or $SPEEDSTATS_GITHUB_DEADLINE), except a download given a
deadline of its own (fetch-baseline's wheels). Running out of retries or time is GitHubUnreachable
(exit 5); a refusal that retrying cannot fix (401, 404, 422) is a UserError (exit 2).

The token is never printed: every message leaving this module passes through redact().
"""
from __future__ import annotations

import base64
import contextlib
import email.utils
import math
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable

from speedstats.errors import GitHubUnreachable, UserError
from speedstats.github import storage
from speedstats.text import one_line

NOT_ACCESSIBLE_MESSAGES = ("resource not accessible by integration",
                           "resource not accessible by personal access token")
# What the Checks API answers a token that is not a GitHub App's (a personal access token).
APP_ONLY_MESSAGE = "you must authenticate via a github app"
TIME_SCALE_ENV = "SPEEDSTATS_GITHUB_TIME_SCALE"
REQUEST_DEADLINE_ENV = "SPEEDSTATS_GITHUB_REQUEST_DEADLINE"
COMMAND_DEADLINE_ENV = "SPEEDSTATS_GITHUB_DEADLINE"
DEFAULT_COMMAND_DEADLINE_S = 300.0
# No deadline is longer than a week (no job runs that long) and no time scale above 1000: beyond them the
# timers and sleeps overflow.
MAX_DEADLINE_S = 7 * 86400.0
MAX_TIME_SCALE = 1000.0
# Who posts with the Actions GITHUB_TOKEN; GET /user answers 403 for it (and for any app installation token).
ACTIONS_BOT_LOGIN = "github-actions[bot]"


class _DeadlinePassed(BaseException):
    """Raised by the alarm inside a request that ran past its deadline (a BaseException, so that no
    library code on the way catches it and carries on with the connection)."""


class ReadOnlyToken(Exception):
    """GitHub refused a write with 403 'Resource not accessible by integration': a fork's pull request
    (read-only token), or a token without the permission for that write. `what` is the refused request."""

    def __init__(self, message, what=""):
        super().__init__(message)
        self.what = what

    @property
    def permission(self):
        """The permission the refused write needs: labels live on the issue, comments on the pull request,
        check runs on the commit."""
        if "check run" in self.what:
            return "checks: write"
        if "data branch" in self.what:
            return "contents: write"
        return "issues: write" if "label" in self.what or "issue" in self.what else "pull-requests: write"


class AppTokenOnly(UserError):
    """GitHub answered 403 'You must authenticate via a GitHub App': only an app's token (the Actions
    GITHUB_TOKEN is one) may do this; a personal access token may not."""


class RefMoved(Exception):
    """Another writer moved the branch between our reading it and moving it (GitHub's 422 "Update is not a
    fast forward", or "Reference already exists" for a branch both created): read it again."""


# GitHub's 422 messages when a ref is not where the writer read it (lower case, as _message gives them).
MOVED_MESSAGES = ("update is not a fast forward", "reference already exists", "reference does not exist")


class Gone(UserError):
    """GitHub answered 410 Gone, or listed the artifact as expired: it no longer has it."""


@dataclass
class RetryPolicy:
    attempts: int = 5  # tries per request, the first included
    backoff_s: float = 1.0  # wait after the first 5xx or network error; doubles each time
    max_backoff_s: float = 30.0
    max_wait_s: float = 300.0  # longest rate-limit wait honoured; beyond it the command fails
    secondary_wait_s: float = 60.0  # GitHub: wait a minute when a secondary limit gives no Retry-After
    time_scale: float = 1.0  # multiplies every wait, PyGithub's pacing included (tests set it near 0)
    request_deadline_s: float = 120.0  # one API call, connect, headers and body together
    command_deadline_s: float = DEFAULT_COMMAND_DEADLINE_S  # every call and wait of the command together

    @classmethod
    def from_env(cls, environ=None, command_deadline_s=None):
        """The policy from $SPEEDSTATS_GITHUB_*; command_deadline_s (--github-deadline) wins over one."""
        env = os.environ if environ is None else environ
        values = {}
        limits = ((TIME_SCALE_ENV, "time_scale", False, MAX_TIME_SCALE),
                  (REQUEST_DEADLINE_ENV, "request_deadline_s", True, MAX_DEADLINE_S),
                  (COMMAND_DEADLINE_ENV, "command_deadline_s", True, MAX_DEADLINE_S))
        for name, key, positive, maximum in limits:
            raw = env.get(name)
            if raw:
                values[key] = _seconds(raw, name, positive, maximum)
        if command_deadline_s is not None:
            values["command_deadline_s"] = command_deadline_s
        return cls(**values)

    def backoff(self, attempt):
        return min(self.backoff_s * 2 ** (attempt - 1), self.max_backoff_s)

    def sleep(self, seconds):
        if seconds * self.time_scale > 0:
            time.sleep(seconds * self.time_scale)


@dataclass
class Comment:
    id: int
    body: str
    login: str
    user_type: str
    html_url: str
    raw: object = None  # the PyGithub IssueComment, for edit/delete


@dataclass
class CheckRunInfo:
    id: int
    name: str
    head_sha: str
    status: str | None
    conclusion: str | None
    details_url: str | None
    title: str | None
    summary: str | None
    html_url: str | None
    raw: object = None  # the PyGithub CheckRun, for edit


@dataclass
class BranchHead:
    """A branch's head as read: its commit's sha, that commit's tree, and PyGithub's ref and commit objects
    (to move the ref, and as the parent of the next commit)."""

    branch: str
    sha: str
    tree_sha: str
    ref: object = None
    commit: object = None


@dataclass
class IssueInfo:
    number: int
    title: str
    body: str
    state: str
    login: str
    html_url: str
    raw: object = None  # the PyGithub Issue, for edit and comments


@dataclass
class WorkflowRunInfo:
    id: int
    head_sha: str
    head_repo: str | None
    event: str
    conclusion: str | None
    pull_requests: list[int]
    run_attempt: int = 1


@dataclass
class JobInfo:
    name: str
    status: str | None  # queued, in_progress, completed
    conclusion: str | None  # success, failure, cancelled, skipped, timed_out, ...
    html_url: str | None
    run_attempt: int


@dataclass
class ArtifactInfo:
    id: int
    name: str
    size: int
    expired: bool
    download_url: str


def _seconds(raw, name, positive, maximum):
    try:
        value = float(raw)
    except ValueError:
        raise UserError(f"{name}: must be a number, got {raw!r}") from None
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise UserError(f"{name}: must be a {'positive' if positive else 'non-negative'} number, got {raw!r}")
    if value > maximum:
        raise UserError(f"{name}: must be at most {maximum:g}, got {raw!r}")
    return value


@contextlib.contextmanager
def _alarm(seconds):
    """Raise _DeadlinePassed in the main thread after `seconds` (elsewhere only the read timeouts hold)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def ring(signum, frame):
        raise _DeadlinePassed()

    previous = signal.signal(signal.SIGALRM, ring)
    started = time.monotonic()
    outer, _interval = signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:  # someone else's timer was running: give it back what is left of it
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - started), 0.001))


def _header(headers, name):
    for key, value in (headers or {}).items():
        if key.lower() == name.lower():
            return value
    return None


def _message(exc):
    data = getattr(exc, "data", None)
    if isinstance(data, dict):
        message = str(data.get("message") or "")
        details = [e.get("message") or e.get("code") for e in data.get("errors") or [] if isinstance(e, dict)]
        details = [str(d) for d in details if d]
        return message + (f" ({'; '.join(details)})" if details else "")
    return one_line(data or "", limit=200)  # e.g. a proxy's HTML error page: keep a short line


class GitHubClient:
    def __init__(self, token, api_url, policy=None, err=None):
        import github

        if not token:
            raise UserError("token: none given (set GITHUB_TOKEN, or pass --token)")
        self._token = token
        self.api_url = api_url
        self.policy = policy or RetryPolicy()
        self.err = err or sys.stderr
        self._runs = {}
        self._login = None
        self._command_deadline = time.monotonic() + self.policy.command_deadline_s
        scale = self.policy.time_scale
        self._gh = github.Github(
            auth=github.Auth.Token(token),
            base_url=api_url,
            retry=None,  # retries are ours, see the module docstring
            per_page=100,
            lazy=True,
            seconds_between_requests=0.25 * scale,
            seconds_between_writes=1.0 * scale,
        )

    # -- plumbing --------------------------------------------------------------------------------------

    def redact(self, text):
        text = str(text)
        return text.replace(self._token, "***") if self._token else text

    def notice(self, message):
        print(self.redact(f"speedstats: {message}"), file=self.err, flush=True)

    def _retry_wait(self, exc, attempt):
        """Seconds to wait before retrying after exc, or None when exc is not worth retrying."""
        from github import GithubException

        if isinstance(exc, storage.StorageError):
            return (self.policy.backoff(attempt), str(exc)) if exc.retriable else None
        if isinstance(exc, _Unreadable):
            return self.policy.backoff(attempt), str(exc)
        if not isinstance(exc, GithubException):  # network error, timeout, dropped connection
            return self.policy.backoff(attempt), f"could not reach GitHub ({type(exc).__name__})"
        status = exc.status
        message = _message(exc)
        retry_after = _header(exc.headers, "Retry-After")
        if 500 <= status < 600:
            wait = self.policy.backoff(attempt)
            if retry_after is not None:
                wait = min(max(wait, _parse_retry_after(retry_after)), self.policy.max_wait_s)
            return wait, f"GitHub answered {status} {message or 'server error'}"
        limited = "rate limit" in message.lower()
        if status == 429 or (status == 403 and (limited or retry_after is not None)):
            if retry_after is not None:
                wait = _parse_retry_after(retry_after)
                why = f"GitHub answered {status} rate limit, Retry-After {retry_after}"
            elif (_header(exc.headers, "X-RateLimit-Remaining") == "0"
                  and _header(exc.headers, "X-RateLimit-Reset")):
                wait = max(float(_header(exc.headers, "X-RateLimit-Reset")) - time.time(), 0) + 1
                why = f"GitHub answered {status} rate limit until its reset"
            else:
                wait = self.policy.secondary_wait_s
                why = f"GitHub answered {status} secondary rate limit"
            if wait > self.policy.max_wait_s:
                raise GitHubUnreachable(f"GitHub rate limit: asked to wait {wait:.0f}s, more than the "
                                        f"{self.policy.max_wait_s:.0f}s this command waits; try again later")
            return max(wait, self.policy.backoff(attempt)), why
        return None

    def _error(self, exc, what):
        """The error to raise for a failed request: GitHubUnreachable when retrying might have helped,
        UserError when the request itself was refused, ReadOnlyToken for a fork's token."""
        from github import GithubException

        if isinstance(exc, storage.StorageError):  # retries that ran out, or a refusal of the storage host
            return (GitHubUnreachable if exc.retriable else UserError)(self.redact(f"{what}: {exc}"))
        if isinstance(exc, _Unreadable):
            return GitHubUnreachable(self.redact(f"GitHub API ({self.api_url}): {what}: {exc}"))
        if not isinstance(exc, GithubException):
            return GitHubUnreachable(self.redact(f"GitHub API ({self.api_url}): {what} failed: "
                                                 f"{type(exc).__name__}: {exc}"))
        status, message = exc.status, _message(exc)
        if status >= 500 or status == 429 or (status == 403 and "rate limit" in message.lower()):
            return GitHubUnreachable(self.redact(f"{what}: GitHub answered {status} {message}".rstrip()))
        if status == 403 and message.lower().startswith(NOT_ACCESSIBLE_MESSAGES):
            return ReadOnlyToken(self.redact(f"{what}: GitHub answered 403 {message}"), what=what)
        if status == 403 and message.lower().startswith(APP_ONLY_MESSAGE):
            return AppTokenOnly(self.redact(f"{what}: GitHub answered 403 {message}"))
        if status == 410:
            return Gone(self.redact(f"{what}: GitHub answered 410 {message}".rstrip()))
        if status == 401:
            return UserError(f"token: GitHub rejected it (401 {message or 'Bad credentials'}) on {what}")
        if status == 404:
            return UserError(self.redact(
                f"{what}: not found (404); check the repository and number, and that the token can read it"))
        return UserError(self.redact(f"{what}: GitHub answered {status} {message}".rstrip()))

    def _remaining(self):
        return self._command_deadline - time.monotonic()

    def _once(self, what, fn, deadline_s=None):
        """fn() within the request deadline, or deadline_s (and what is left of the command's)."""
        limit = min(deadline_s or self.policy.request_deadline_s, self._remaining())
        if limit <= 0:
            raise GitHubUnreachable(f"{what}: gave up, the command's deadline of "
                                    f"{self.policy.command_deadline_s:g}s (--github-deadline) has passed")
        try:
            with _alarm(limit):
                return fn()
        except _DeadlinePassed:
            raise _Unreadable(f"no complete answer within {limit:.3g}s") from None
        except ValueError as exc:  # JSON that does not parse
            raise _Unreadable(f"GitHub's answer is not valid JSON ({one_line(exc, 120)})") from None
        except (TypeError, KeyError, AttributeError, IndexError) as exc:
            if not _raised_in_pygithub(exc):
                raise
            # PyGithub takes a body that is not JSON as {"data": text}, then trips over it
            raise _Unreadable(f"GitHub's answer is not the JSON the API returns ({type(exc).__name__}: "
                              f"{one_line(exc, 80)})") from None

    def _call(self, what, fn, on_retry: Callable[[], object] | None = None, deadline_s=None):
        """fn() with retries. on_retry runs before each retry; a non-None result ends the loop with it."""
        import requests
        from github import GithubException

        for attempt in range(1, self.policy.attempts + 1):
            try:
                return self._once(what, fn, deadline_s)
            except (GithubException, requests.exceptions.RequestException, storage.StorageError,
                    _Unreadable) as exc:
                decision = self._retry_wait(exc, attempt)
                if decision is None or attempt == self.policy.attempts:
                    raise self._error(exc, what) from None
                wait, why = decision
                if wait * self.policy.time_scale >= self._remaining():
                    raise GitHubUnreachable(self.redact(
                        f"{what}: {why}; gave up, a retry in {wait:g}s would pass the command's deadline of "
                        f"{self.policy.command_deadline_s:g}s (--github-deadline)")) from None
                self.notice(f"{what}: {why}; retry {attempt} of "
                            f"{self.policy.attempts - 1} in {wait:g}s")
                self.policy.sleep(wait)
                if on_retry is not None:
                    found = on_retry()
                    if found is not None:
                        return found

    def _repo(self, repo):
        return self._gh.get_repo(repo)

    def login(self):
        """Whom this token posts as: GET /user, or github-actions[bot] when GitHub will not say (403:
        an installation token such as the Actions GITHUB_TOKEN)."""
        from github import GithubException

        if self._login is None:
            def fetch():
                try:
                    return self._gh.get_user().login
                except GithubException as exc:
                    if exc.status == 403 and "rate limit" not in _message(exc).lower():
                        return None
                    raise

            login = self._call("find the token's login (GET /user)", fetch)
            if not isinstance(login, str) or not login:
                login = ACTIONS_BOT_LOGIN
                self.notice(f"the token cannot read GET /user (an installation token); taking its comments "
                            f"to be {login}'s (give --author for a GitHub App's token)")
            self._login = login
        return self._login

    # -- comments --------------------------------------------------------------------------------------

    def list_comments(self, target) -> list[Comment]:
        issue = self._repo(target.repo).get_issue(target.pr_number)
        raw = self._call(f"list comments of {target}", lambda: list(issue.get_comments()))
        return [_comment(c) for c in raw]

    def create_comment(self, target, body, already_posted: Callable[[list[Comment]], Comment | None]):
        """POST a comment. After a failed try, already_posted(fresh listing) decides if it went through."""
        issue = self._repo(target.repo).get_issue(target.pr_number)

        def look_again():
            return already_posted(self.list_comments(target))

        found = self._call(f"create a comment on {target}", lambda: issue.create_comment(body), look_again)
        return found if isinstance(found, Comment) else _comment(found)

    def edit_comment(self, comment, body):
        self._call(f"edit comment {comment.id}", lambda: comment.raw.edit(body))
        comment.body = body
        return comment

    def delete_comment(self, comment):
        """Delete; False when it was already gone (another run deleted it)."""
        from github import GithubException

        def delete():
            try:
                comment.raw.delete()
            except GithubException as exc:
                if exc.status == 404:
                    return False
                raise
            return True

        return self._call(f"delete comment {comment.id}", delete)

    # -- labels ----------------------------------------------------------------------------------------

    def labels(self, target):
        issue = self._repo(target.repo).get_issue(target.pr_number)
        return [label.name for label in self._call(f"list labels of {target}",
                                                   lambda: list(issue.get_labels()))]

    def remove_label(self, target, name):
        """Remove a label; False when it was not there (someone else removed it first)."""
        from github import GithubException

        issue = self._repo(target.repo).get_issue(target.pr_number)
        attempts = []

        def remove():
            attempts.append(1)
            try:
                issue.remove_from_labels(name)
            except GithubException as exc:
                # a 404 after a failed try means the failed try did remove it
                if exc.status == 404 and _message(exc).lower().startswith("label does not exist"):
                    return len(attempts) > 1
                raise
            return True

        return self._call(f"remove label {name!r} from {target}", remove)

    # -- check runs ------------------------------------------------------------------------------------

    def check_runs(self, repo, sha, name):
        """The newest check run of each app named `name` on commit sha, newest first."""
        from github.CheckRun import CheckRun
        from github.PaginatedList import PaginatedList

        repository = self._repo(repo)

        def fetch():
            # through the commit's URL: get_commit would fetch the commit first
            runs = PaginatedList(CheckRun, repository.requester, f"{repository.url}/commits/{sha}/check-runs",
                                 {"check_name": name, "filter": "latest"}, list_item="check_runs")
            return [_check_run(c) for c in runs]

        return self._call(f"list check runs {name!r} of commit {sha[:12]} in {repo}", fetch)

    def create_check_run(self, repo, name, sha, fields, already_created: Callable[[], CheckRunInfo | None]):
        """POST a completed check run (fields: conclusion, details_url, output). After a failed try,
        already_created() decides if it went through."""
        repository = self._repo(repo)
        found = self._call(f"create check run {name!r} on commit {sha[:12]} in {repo}",
                           lambda: repository.create_check_run(name, sha, status="completed", **fields),
                           already_created)
        return found if isinstance(found, CheckRunInfo) else _check_run(found)

    def edit_check_run(self, check_run, fields):
        self._call(f"update check run {check_run.name!r} ({check_run.id})",
                   lambda: check_run.raw.edit(status="completed", **fields))
        return _check_run(check_run.raw)

    # -- a data branch (the Git Data API) ------------------------------------------------------------

    def default_branch(self, repo):
        """The repository's default branch (GET /repos/{repo})."""
        repository = self._repo(repo)
        return self._call(f"read {repo}", lambda: repository.default_branch)

    def branch_head(self, repo, branch):
        """The branch's head (a BranchHead), or None when the repository has no such branch."""
        from github import GithubException

        repository = self._repo(repo)

        def fetch():
            ref = repository.get_git_ref(f"heads/{branch}")
            try:
                sha = ref.object.sha
            except GithubException as exc:
                if exc.status == 404:
                    return None
                raise
            commit = repository.get_git_commit(sha)
            return BranchHead(branch=branch, sha=sha, tree_sha=commit.tree.sha, ref=ref, commit=commit)

        return self._call(f"read the data branch {branch} of {repo}", fetch)

    def branch_files(self, repo, head):
        """{path: blob sha} of every file at a branch's head (a BranchHead)."""
        repository = self._repo(repo)

        def fetch():
            tree = repository.get_git_tree(head.tree_sha, recursive=True)
            return {entry.path: entry.sha for entry in tree.tree if entry.type == "blob"}

        return self._call(f"list the files of the data branch {head.branch} of {repo}", fetch)

    def blob(self, repo, sha, what):
        """A blob's bytes."""
        repository = self._repo(repo)

        def fetch():
            blob = repository.get_git_blob(sha)
            if blob.encoding == "base64":
                return base64.b64decode(blob.content)
            return blob.content.encode("utf-8")

        return self._call(what, fetch)

    def commit_files(self, repo, head, branch, files, message):
        """A commit changing the files ({path: bytes}) on top of head (a BranchHead; None: the first commit
        of a new branch); its sha. The branch stays where it is (move_branch moves it). Each step may be
        tried again: a blob or tree of the same content is the same object, and a commit that no ref
        points to is left for GitHub's garbage collection."""
        import github

        repository = self._repo(repo)
        what = f"write the data branch {branch} of {repo}"

        def blobs():
            return {path: repository.create_git_blob(base64.b64encode(data).decode("ascii"), "base64").sha
                    for path, data in sorted(files.items())}

        shas = self._call(f"{what} (its files' blobs)", blobs)
        elements = [github.InputGitTreeElement(path, "100644", "blob", sha=sha) for path, sha in shas.items()]
        if head is None:
            tree = self._call(f"{what} (its tree)", lambda: repository.create_git_tree(elements))
            parents = []
        else:
            tree = self._call(f"{what} (its tree)",
                              lambda: repository.create_git_tree(elements, base_tree=head.commit.tree))
            parents = [head.commit]
        commit = self._call(f"{what} (its commit)",
                            lambda: repository.create_git_commit(message, tree, parents))
        return commit.sha

    def move_branch(self, repo, head, branch, sha):
        """Point the branch at commit sha: a fast-forward of head, or a new branch when head is None.
        RefMoved when another writer moved (or created) the branch first."""
        from github import GithubException

        repository = self._repo(repo)

        def move():
            try:
                if head is None:
                    repository.create_git_ref(f"refs/heads/{branch}", sha)
                else:
                    head.ref.edit(sha, force=False)
            except GithubException as exc:
                if exc.status == 422 and _message(exc).lower().startswith(MOVED_MESSAGES):
                    raise RefMoved(_message(exc)) from None
                raise

        self._call(f"move the data branch {branch} of {repo} to commit {sha[:12]}", move)

    # -- issues ----------------------------------------------------------------------------------------

    def issues_by(self, repo, creator):
        """The issues (not pull requests) of a repository that `creator` opened, open and closed, newest
        first."""
        repository = self._repo(repo)

        def fetch():
            return [_issue(raw) for raw in repository.get_issues(state="all", creator=creator)
                    if raw.pull_request is None]

        return self._call(f"list the issues of {repo} opened by {creator}", fetch)

    def create_issue(self, repo, title, body, labels, already_created: Callable[[], IssueInfo | None]):
        """POST an issue. After a failed try, already_created() decides if it went through."""
        repository = self._repo(repo)
        found = self._call(f"create an issue in {repo}",
                           lambda: repository.create_issue(title, body=body, labels=list(labels)),
                           already_created)
        return found if isinstance(found, IssueInfo) else _issue(found)

    def edit_issue(self, repo, issue, **fields):
        """PATCH an issue's title, body or state (and state_reason)."""
        self._call(f"edit issue {repo}#{issue.number}", lambda: issue.raw.edit(**fields))
        for key in ("title", "body", "state"):
            if key in fields:
                setattr(issue, key, fields[key])
        return issue

    def issue_comments(self, repo, issue) -> list[Comment]:
        return [_comment(c) for c in self._call(f"list comments of issue {repo}#{issue.number}",
                                                lambda: list(issue.raw.get_comments()))]

    def comment_on_issue(self, repo, issue, body, author=None):
        """Comment on an issue; after a failed try, a comment by `author` with this body counts as made."""
        def look_again():
            return next((c for c in self.issue_comments(repo, issue)
                         if c.body == body and (author is None or c.login.lower() == author.lower())), None)

        found = self._call(f"comment on issue {repo}#{issue.number}", lambda: issue.raw.create_comment(body),
                           look_again)
        return found if isinstance(found, Comment) else _comment(found)

    # -- pull requests and runs ------------------------------------------------------------------------

    def pull(self, target):
        """(head sha, head repository full name) of the pull request."""
        pull = self._repo(target.repo).get_pull(target.pr_number)

        def fetch():
            head = pull.head
            return head.sha, (head.repo.full_name if head.repo is not None else None)

        return self._call(f"get pull request {target}", fetch)

    def pull_author(self, target):
        """(head sha, the author's login) of the pull request, in one request."""
        pull = self._repo(target.repo).get_pull(target.pr_number)
        return self._call(f"get pull request {target}", lambda: (pull.head.sha, pull.user.login))

    def run_jobs(self, repo, run_id):
        """The jobs of a run, each in its latest attempt (a re-run job replaces its earlier try)."""
        from github.PaginatedList import PaginatedList
        from github.WorkflowJob import WorkflowJob

        run = self._run(repo, run_id)

        def fetch():
            # run.jobs() wants the run's jobs_url, which a lazy run object has not fetched
            jobs = PaginatedList(WorkflowJob, run.requester, f"{run.url}/jobs", {"filter": "latest"},
                                 list_item="jobs")
            return [JobInfo(j.name, j.status, j.conclusion, j.html_url, j.run_attempt or 1) for j in jobs]

        return self._call(f"list jobs of run {run_id}", fetch)

    def minimize_comment(self, comment, classifier="OUTDATED"):
        """Hide a comment (GraphQL minimizeComment); True when GitHub says it is hidden."""
        return self._call(f"hide comment {comment.id}", lambda: comment.raw.minimize(classifier))

    def pull_commits(self, target):
        pull = self._repo(target.repo).get_pull(target.pr_number)
        return self._call(f"list commits of {target}", lambda: [c.sha for c in pull.get_commits()])

    def _run(self, repo, run_id):
        # one lazy object per run, so that reading it and listing its artifacts fetch it once
        key = (repo, run_id)
        if key not in self._runs:
            self._runs[key] = self._repo(repo).get_workflow_run(run_id)
        return self._runs[key]

    def workflow_run(self, repo, run_id):
        run = self._run(repo, run_id)

        def fetch():
            head_repo = run.head_repository
            return WorkflowRunInfo(
                id=run.id, head_sha=run.head_sha, head_repo=head_repo.full_name if head_repo else None,
                event=run.event, conclusion=run.conclusion,
                pull_requests=[p.number for p in run.pull_requests], run_attempt=run.run_attempt or 1,
            )

        return self._call(f"get workflow run {run_id} of {repo}", fetch)

    def artifacts(self, repo, run_id):
        run = self._run(repo, run_id)

        def fetch():
            return [ArtifactInfo(a.id, a.name, a.size_in_bytes, a.expired, a.archive_download_url)
                    for a in run.get_artifacts()]

        return self._call(f"list artifacts of run {run_id}", fetch)

    def latest_successful_run(self, repo, workflow, branch, event=None):
        """The newest successful run of a workflow (file name or id) on a branch, or None."""
        flow = self._repo(repo).get_workflow(workflow)
        filters = {"branch": branch, "status": "success", **({"event": event} if event else {})}

        def fetch():
            for run in flow.get_runs(**filters):
                if run.conclusion == "success":
                    return WorkflowRunInfo(id=run.id, head_sha=run.head_sha, head_repo=None, event=run.event,
                                           conclusion=run.conclusion, pull_requests=[])
            return None

        return self._call(f"list runs of workflow {workflow!r} on branch {branch!r} of {repo}", fetch)

    def download(self, url, what, max_bytes, sink=None, deadline_s=600.0, own_deadline=False):
        """GET an artifact zip: bytes in memory, or written to sink (a binary file) when one is given.

        The API answers 302 with a pre-signed storage URL on another host (blob storage for
        upload-artifact v4). That URL is fetched with a plain HTTP client and no Authorization header:
        the token stays with GitHub. At most max_bytes, in at most deadline_s seconds per try, within
        the command's deadline; with own_deadline, within deadline_s over all tries instead, the time
        it takes left out of the command's (a build's wheels may take longer than every API call).
        """
        import io

        out = io.BytesIO() if sink is None else sink

        def fetch():
            out.seek(0)
            out.truncate()
            deadline = time.monotonic() + deadline_s
            with self._api_get(url) as response:
                if response.status_code in (301, 302, 303, 307, 308):
                    location = response.headers.get("Location") or ""
                    if not location.startswith(("https://", "http://")):
                        raise storage.StorageError(f"GitHub redirected to {location!r}, not an http(s) URL",
                                                   retriable=False)
                elif response.status_code == 200:  # GitHub served the bytes itself
                    for chunk in response.iter_content(storage.CHUNK_BYTES):
                        storage.write_bounded(out, chunk, max_bytes, deadline)
                    return out
                else:
                    raise _response_error(response)
            storage.fetch(location, max_bytes, out, deadline_s)
            return out

        # A large artifact may take longer than an API call is allowed: the download has its own deadline.
        started, command_deadline = time.monotonic(), self._command_deadline
        if own_deadline:
            self._command_deadline = started + deadline_s + storage.SOCKET_TIMEOUT_S
        try:
            self._call(what, fetch, deadline_s=deadline_s + storage.SOCKET_TIMEOUT_S)
        finally:
            if own_deadline:
                self._command_deadline = command_deadline + (time.monotonic() - started)
        return out.getvalue() if sink is None else None

    def _api_get(self, url):
        import requests

        return requests.get(url, headers={"Authorization": f"token {self._token}",
                                          "Accept": "application/vnd.github+json",
                                          "X-GitHub-Api-Version": "2022-11-28",
                                          "User-Agent": "speedstats"},
                            allow_redirects=False, stream=True, timeout=storage.SOCKET_TIMEOUT_S)


def _raised_in_pygithub(exc):
    import github

    package = os.path.dirname(os.path.abspath(github.__file__)) + os.sep
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    return bool(frames) and os.path.abspath(frames[-1]).startswith(package)


class _Unreadable(Exception):
    """GitHub's answer did not come whole in time, or is not JSON: worth a retry."""


def _response_error(response):
    from github import GithubException

    try:
        data = response.json()
    except ValueError:
        data = {"message": response.reason}
    return GithubException(response.status_code, data, dict(response.headers))


def _parse_retry_after(value):
    value = str(value).strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return 60.0
    return max(when.timestamp() - time.time(), 0.0)


def _check_run(raw):
    output = raw.output
    return CheckRunInfo(id=raw.id, name=raw.name, head_sha=raw.head_sha, status=raw.status,
                        conclusion=raw.conclusion, details_url=raw.details_url,
                        title=output.title if output else None, summary=output.summary if output else None,
                        html_url=raw.html_url, raw=raw)


def _issue(raw):
    user = raw.user
    return IssueInfo(number=raw.number, title=raw.title or "", body=raw.body or "", state=raw.state or "",
                     login=user.login if user else "", html_url=raw.html_url, raw=raw)


def _comment(raw):
    user = raw.user
    return Comment(id=raw.id, body=raw.body or "", login=user.login if user else "",
                   user_type=(user.type if user else "") or "", html_url=raw.html_url, raw=raw)
