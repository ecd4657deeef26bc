"""`required-label`: a failed verdict fails the step only on a pull request that carries the label.

The old job had `continue-on-error: ${{ !contains(github.event.pull_request.labels.*.name,
'need-pass-speed-test') }}`. Here the pull request's labels are read live through the API when a
token and the pull request are known: a job re-run after the label was added then sees it (GitHub
re-runs a job with the event payload of the first run, which lists the labels of that moment).
Without a token, or when the API call fails, the labels of the event payload (GITHUB_EVENT_PATH)
count. An event without a pull request (a push, a schedule) carries no label.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

from speedstats import actions_io
from speedstats.errors import GitHubUnreachable, UserError
from speedstats.github import context
from speedstats.github.client import GitHubClient, RetryPolicy


@dataclass
class LabelLookup:
    """Where a pull request's labels come from; target is None when the event has no pull request."""

    target: context.Target | None
    event_labels: list[str]
    token: str | None
    api_url: str
    why_none: str = ""


def check_label(name, where="--required-label"):
    if not isinstance(name, str) or not name.strip():
        raise UserError(f"{where}: must be a label name, got {name!r}")
    return name.strip()


def prepare(pr=None, repo=None, token=None, api_url=None, environ=None):
    """Everything the lookup needs, resolved (and checked) before anything is measured."""
    if actions_io.event_path(environ) is None and pr is None:
        return LabelLookup(None, [], None, context.DEFAULT_API_URL,
                           "no pull request event (GITHUB_EVENT_PATH)")
    try:
        target = context.resolve_target(pr=pr, repo=repo, environ=environ)
    except context.NoPullRequest:
        return LabelLookup(None, [], None, context.DEFAULT_API_URL, "the event has no pull request")
    event_labels = list(actions_io.read_event(environ).labels)
    return LabelLookup(target, event_labels, context.resolve_token(token, environ),
                       context.resolve_api_url(api_url, environ))


def current_labels(lookup, client=None, err=None):
    """(labels, source): live from the API when possible, else the event payload's."""
    err = err or sys.stderr
    if client is None and lookup.token:
        client = GitHubClient(lookup.token, lookup.api_url, RetryPolicy.from_env())
    if client is not None:
        try:
            return client.labels(lookup.target), f"the labels of {lookup.target} (GitHub API)"
        except (UserError, GitHubUnreachable) as exc:
            print(actions_io.workflow_command(
                "warning", f"speedstats: could not read the labels of {lookup.target} ({exc}); using the "
                "event's"), file=err)
    return lookup.event_labels, f"the labels of {lookup.target} in the event payload"


def verdict_fails_step(label, lookup, client=None, err=None):
    """True when the pull request carries `label`; says on err which way it went and why."""
    err = err or sys.stderr
    if lookup.target is None:
        print(actions_io.workflow_command(
            "notice", f"speedstats: the verdict failed, but {lookup.why_none} to carry {label!r} "
            "(required-label): the step does not fail"), file=err)
        return False
    labels, source = current_labels(lookup, client, err)
    if label in labels:
        print(f"speedstats: the verdict failed and {source} include {label!r}: the step fails", file=err)
        return True
    print(actions_io.workflow_command(
        "notice", f"speedstats: the verdict failed, but {source} do not include {label!r} "
        "(required-label): the step does not fail"), file=err)
    return False
