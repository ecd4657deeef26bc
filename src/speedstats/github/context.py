"""Where a GitHub command points: repository, pull request, head commit, run, token and API URL.

Flags win; inside a GitHub Actions job the rest comes from the job's runtime, read by
speedstats.actions_io (GITHUB_REPOSITORY, the event payload, GITHUB_RUN_ID, GITHUB_API_URL, the token).
Light: no PyGithub import here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from speedstats import actions_io
from speedstats.actions_io import check_sha
from speedstats.errors import UserError

DEFAULT_API_URL = "https://api.github.com"


class NoPullRequest(Exception):
    """The triggering event has no pull request (a push, a schedule): nothing to comment on."""


@dataclass
class Target:
    repo: str
    pr_number: int
    head_sha: str | None = None
    run_id: int | None = None

    @property
    def owner(self):
        return self.repo.split("/", 1)[0]

    @property
    def name(self):
        return self.repo.split("/", 1)[1]

    def __str__(self):
        return f"{self.repo}#{self.pr_number}"


def resolve_repo(flag, environ=None, event=None):
    repo = flag or actions_io.repository(environ) or (event.repo if event else None)
    if not repo:
        raise UserError("--repo: no repository (give --repo OWNER/NAME, or run inside GitHub Actions)")
    return actions_io.check_repo(repo, "--repo" if flag else "GITHUB_REPOSITORY")


def resolve_target(pr=None, repo=None, head_sha=None, run_id=None, environ=None):
    """The pull request a command acts on. Raises NoPullRequest when the event has none."""
    event = actions_io.read_event(environ)
    repo = resolve_repo(repo, environ, event)
    if pr is not None:
        if pr <= 0:
            raise UserError(f"--pr: must be a positive number, got {pr}")
        number = pr
    elif event.pr_number is not None:
        number = event.pr_number
    elif event.path:
        what = f"a {event.name} event" if event.name else "this event"
        raise NoPullRequest(f"{what} has no pull request; nothing to comment on")
    else:
        raise UserError("--pr: no pull request number (give --pr N, or run inside a pull_request workflow)")
    if head_sha is not None:
        check_sha(head_sha)
    elif pr is None or pr == event.pr_number:
        head_sha = event.head_sha
    if run_id is None:
        run_id = actions_io.run_id(environ)
    return Target(repo=repo, pr_number=number, head_sha=head_sha, run_id=run_id)


# The events whose job gets a read-only GITHUB_TOKEN when the pull request comes from a fork.
FORK_READ_ONLY_EVENTS = ("pull_request", "pull_request_review", "pull_request_review_comment")


def read_only_because_fork(target, environ=None):
    """True when this job's token is read-only because the event is a fork's pull request (the target):
    what GitHub does by design, as opposed to a same-repository job whose token lacks a permission."""
    event = actions_io.read_event(environ)
    return (event.name in FORK_READ_ONLY_EVENTS and event.pr_from_fork is True
            and event.pr_number == target.pr_number and event.repo in (None, target.repo))


def resolve_token(flag=None, environ=None):
    """The token from --token, GITHUB_TOKEN or INPUT_TOKEN; None when there is none."""
    for token in (flag, *actions_io.tokens(environ)):
        if token and token.strip():
            token = token.strip()
            if any(c.isspace() or ord(c) < 32 for c in token):
                raise UserError("token: contains whitespace or control characters (check how it was passed)")
            return token
    return None


def server_url(api_url, environ=None):
    """GitHub's web address: $GITHUB_SERVER_URL, else github.com for its API, else the API's own URL."""
    server = actions_io.server_url(environ)
    if server:
        return server
    return "https://github.com" if api_url == DEFAULT_API_URL else api_url


def run_url(repo, run_id, api_url, environ=None):
    """The web address of a workflow run."""
    return f"{server_url(api_url, environ)}/{repo}/actions/runs/{run_id}"


def resolve_api_url(flag=None, environ=None):
    url = (flag or actions_io.api_url(environ) or DEFAULT_API_URL).rstrip("/")
    if not re.match(r"^https?://[^/\s]+", url):
        raise UserError(f"--api-url: must be an http(s) URL, got {url!r}")
    return url
