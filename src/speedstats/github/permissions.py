"""What a token may do on a repository, found with read-only calls (`speedstats doctor`): nothing posted.

Two GETs: `GET /repos/{repo}` (is the token accepted, does it see the repository, and its `permissions`:
the access GitHub reports for the token's holder) and `GET /user` (answered for a person's token, 403 for
an installation token: the Actions GITHUB_TOKEN or a GitHub App's). From them, a row for each thing the
bot writes, with the permission it needs:

- comment on pull requests: `pull-requests: write`; edit labels: `issues: write` (a label of a pull
  request lives on its issue); create check runs: `checks: write`, which only an installation token can
  have (the Checks API refuses a person's token).
- A fork's pull request (told by the event payload) gets a read-only token whatever the workflow asks:
  each row fails, pointing at the fork workflows.
- `permissions` without write access fails the row for a person's token. For an installation token
  GitHub's `permissions` is not the token's own (its permissions are the job's `permissions:` block,
  which the API does not show), so there it is a warning naming what the job must give; the first
  write's 403 is the final word (it exits 2 naming the permission, as `comment` does).
"""

from __future__ import annotations

from speedstats import actions_io
from speedstats.errors import SpeedstatsError
from speedstats.github.client import ReadOnlyToken

OK, WARNING, FAILS = "ok", "warning", "fails"
FORKS_DOC = "docs/forks.md"
# (row, the permission an installation token needs, the access a person needs in `permissions`)
NEEDS = (
    ("comment on pull requests", "pull-requests: write", ("push",)),
    ("edit labels", "issues: write", ("push", "triage")),
    ("create check runs", "checks: write", None),
)


def _get(client, what, path):
    """(headers, JSON) of a GET through the client's retries and deadline; GithubException's status
    mapped by the client (UserError for 401/404, GitHubUnreachable for 5xx)."""
    # The client has no call that returns a response's headers; its requester does.
    return client._call(what, lambda: client._gh.requester.requestJsonAndCheck("GET", path))


def _installation_token(client):
    """True when GET /user answers 403 (an installation token), False when it says who the token is."""
    from github import GithubException

    def fetch():
        try:
            client._gh.requester.requestJsonAndCheck("GET", "/user")
        except GithubException as exc:
            if exc.status == 403 and "rate limit" not in str(exc).lower():
                return True
            raise
        return False

    return client._call("find whose token it is (GET /user)", fetch)


def token_rows(client, repo, environ=None):
    """[(check, status, text)] for the token of a github.client.GitHubClient on repo."""
    try:
        _, data = _get(client, f"read {repo} (GET /repos/{repo})", f"/repos/{repo}")
        installation = _installation_token(client)
    except (SpeedstatsError, ReadOnlyToken) as exc:
        return [("GitHub token", FAILS, client.redact(str(exc)))]
    kind = ("an installation token (GITHUB_TOKEN or a GitHub App's)" if installation
            else "a person's token")
    rows = [("GitHub token", OK, f"{kind}; it reads {repo}")]
    event = actions_io.read_event(environ)
    fork = event.pr_from_fork is True and event.repo in (None, repo)
    permissions = data.get("permissions") if isinstance(data, dict) else None
    for check, permission, access in NEEDS:
        rows.append((check, *_verdict(permission, access, installation, fork, permissions, repo)))
    return rows


def _verdict(permission, access, installation, fork, permissions, repo):
    """(status, text) of one thing the bot writes (see the module's docstring)."""
    if fork:
        return FAILS, (f"a fork's pull request gets a read-only token whatever the workflow asks: "
                       f"`{permission}` is not there; comment from a second workflow ({FORKS_DOC})")
    if access is None and not installation:
        return WARNING, ("only an installation token can create check runs (the Checks API refuses a "
                         f"person's token): use GITHUB_TOKEN with `{permission}`")
    if not isinstance(permissions, dict):
        return WARNING, f"GitHub does not tell this token's permissions: the job needs `{permission}`"
    if any(permissions.get(name) for name in access or ("push",)):
        if installation:
            return OK, f"GitHub reports write access; the job's `permissions:` must give `{permission}`"
        return OK, "the token's holder has write access"
    if installation:
        return WARNING, f"GitHub reports read access only: the job's `permissions:` must give `{permission}`"
    return FAILS, (f"the token's holder has read access only to {repo}: it needs write access "
                   f"(`{permission}` for a fine-grained token)")
