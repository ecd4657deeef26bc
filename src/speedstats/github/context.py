"""Where a GitHub command points: repository, pull request, head commit, run, token and API URL.

Flags win; inside a GitHub Actions job the rest comes from the environment (GITHUB_REPOSITORY,
GITHUB_EVENT_PATH, GITHUB_RUN_ID, GITHUB_API_URL, GITHUB_TOKEN). Light: no PyGithub import here, so
the runner can use it to fill a results bundle.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from speedstats.errors import UserError

DEFAULT_API_URL = "https://api.github.com"
_REPO_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_SHA_RE = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


class NoPullRequest(Exception):
    """The triggering event has no pull request (a push, a schedule): nothing to comment on."""


@dataclass
class PullRequestEvent:
    """What the event payload says about the pull request; any field may be None."""

    event_name: str | None = None
    repo: str | None = None
    pr_number: int | None = None
    head_sha: str | None = None
    run_id: int | None = None  # the triggering run of a workflow_run event


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


def check_repo(repo, where="--repo"):
    if not isinstance(repo, str) or not _REPO_RE.match(repo):
        raise UserError(f"{where}: must be OWNER/NAME, got {repo!r}")
    return repo


def check_sha(sha, where="--head-sha"):
    if not isinstance(sha, str) or not _SHA_RE.match(sha):
        raise UserError(f"{where}: must be a full commit sha (40 hex digits), got {sha!r}")
    return sha


def _int(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def read_event(environ=None):
    """Parse $GITHUB_EVENT_PATH (if set) into a PullRequestEvent."""
    env = os.environ if environ is None else environ
    event = PullRequestEvent(event_name=env.get("GITHUB_EVENT_NAME") or None)
    path = env.get("GITHUB_EVENT_PATH")
    if not path:
        return event
    try:
        with open(path, encoding="utf-8") as f:
            payload = json.load(f)
    except FileNotFoundError:
        raise UserError(f"GITHUB_EVENT_PATH ({path}): event file not found") from None
    except (OSError, ValueError, RecursionError) as exc:
        raise UserError(f"GITHUB_EVENT_PATH ({path}): not a readable JSON event: {exc}") from None
    if not isinstance(payload, dict):
        raise UserError(f"GITHUB_EVENT_PATH ({path}): the event must be a JSON object")
    repository = payload.get("repository")
    if isinstance(repository, dict) and isinstance(repository.get("full_name"), str):
        event.repo = repository["full_name"]
    pull = payload.get("pull_request")
    issue = payload.get("issue")
    run = payload.get("workflow_run")
    if isinstance(pull, dict):
        event.pr_number = _int(pull.get("number"))
        head = pull.get("head")
        if isinstance(head, dict) and isinstance(head.get("sha"), str):
            event.head_sha = head["sha"]
    elif isinstance(issue, dict) and isinstance(issue.get("pull_request"), dict):
        event.pr_number = _int(issue.get("number"))
    elif isinstance(run, dict):
        event.run_id = _int(run.get("id"))
        if isinstance(run.get("head_sha"), str):
            event.head_sha = run["head_sha"]
        pulls = run.get("pull_requests")
        if isinstance(pulls, list) and pulls and isinstance(pulls[0], dict):
            event.pr_number = _int(pulls[0].get("number"))
    return event


def resolve_repo(flag, environ=None, event=None):
    env = os.environ if environ is None else environ
    repo = flag or env.get("GITHUB_REPOSITORY") or (event.repo if event else None)
    if not repo:
        raise UserError("--repo: no repository (give --repo OWNER/NAME, or run inside GitHub Actions)")
    return check_repo(repo, "--repo" if flag else "GITHUB_REPOSITORY")


def resolve_target(pr=None, repo=None, head_sha=None, run_id=None, environ=None):
    """The pull request a command acts on. Raises NoPullRequest when the event has none."""
    env = os.environ if environ is None else environ
    event = read_event(env)
    repo = resolve_repo(repo, env, event)
    if pr is not None:
        if pr <= 0:
            raise UserError(f"--pr: must be a positive number, got {pr}")
        number = pr
    elif event.pr_number is not None:
        number = event.pr_number
    elif env.get("GITHUB_EVENT_PATH"):
        what = f"a {event.event_name} event" if event.event_name else "this event"
        raise NoPullRequest(f"{what} has no pull request; nothing to comment on")
    else:
        raise UserError("--pr: no pull request number (give --pr N, or run inside a pull_request workflow)")
    if head_sha is not None:
        check_sha(head_sha)
    elif pr is None or pr == event.pr_number:
        head_sha = event.head_sha
    if run_id is None:
        run_id = _int(env.get("GITHUB_RUN_ID"))
    return Target(repo=repo, pr_number=number, head_sha=head_sha, run_id=run_id)


def resolve_token(flag=None, environ=None):
    """The token from --token, GITHUB_TOKEN or INPUT_TOKEN; None when there is none."""
    env = os.environ if environ is None else environ
    for token in (flag, env.get("GITHUB_TOKEN"), env.get("INPUT_TOKEN")):
        if token and token.strip():
            token = token.strip()
            if any(c.isspace() or ord(c) < 32 for c in token):
                raise UserError("token: contains whitespace or control characters (check how it was passed)")
            return token
    return None


def resolve_api_url(flag=None, environ=None):
    env = os.environ if environ is None else environ
    url = (flag or env.get("GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/")
    if not re.match(r"^https?://[^/\s]+", url):
        raise UserError(f"--api-url: must be an http(s) URL, got {url!r}")
    return url
