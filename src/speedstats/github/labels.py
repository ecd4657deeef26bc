"""`required-label`: a failed verdict fails the step only on a pull request that carries the label.

The old job had `continue-on-error: ${{ !contains(github.event.pull_request.labels.*.name,
'need-pass-speed-test') }}`. Here the pull request's labels are read live through the API when a
token and the pull request are known: a job re-run after the label was added then sees it (GitHub
re-runs a job with the event payload of the first run, which lists the labels of that moment).
Without a token, or when the API call fails, the labels of the event payload (GITHUB_EVENT_PATH)
count. An event without a pull request (a push, a schedule) carries no label.
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass

from speedstats.errors import GitHubUnreachable, UserError
from speedstats.github import context


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


def event_labels(environ=None):
    """The label names the event payload lists for its pull request (or issue)."""
    env = os.environ if environ is None else environ
    path = env.get("GITHUB_EVENT_PATH")
    if not path:
        return []
    context.read_event(env)  # a missing or malformed file is a one-line UserError
    with open(path, encoding="utf-8") as f:
        payload = json.load(f)
    for key in ("pull_request", "issue"):
        item = payload.get(key)
        if isinstance(item, dict) and isinstance(item.get("labels"), list):
            return [label["name"] for label in item["labels"]
                    if isinstance(label, dict) and isinstance(label.get("name"), str)]
    return []


def prepare(pr=None, repo=None, token=None, api_url=None, environ=None):
    """Everything the lookup needs, resolved (and checked) before anything is measured."""
    env = os.environ if environ is None else environ
    if not env.get("GITHUB_EVENT_PATH") and pr is None:
        return LabelLookup(None, [], None, context.DEFAULT_API_URL, "no pull request event (GITHUB_EVENT_PATH)")
    try:
        target = context.resolve_target(pr=pr, repo=repo, environ=env)
    except context.NoPullRequest:
        return LabelLookup(None, [], None, context.DEFAULT_API_URL, "the event has no pull request")
    return LabelLookup(target, event_labels(env), context.resolve_token(token, env),
                       context.resolve_api_url(api_url, env))


def current_labels(lookup, client=None, err=None):
    """(labels, source): live from the API when possible, else the event payload's."""
    err = err or sys.stderr
    if client is None and lookup.token:
        from speedstats.github.client import GitHubClient, RetryPolicy

        client = GitHubClient(lookup.token, lookup.api_url, RetryPolicy.from_env())
    if client is not None:
        try:
            return client.labels(lookup.target), f"the labels of {lookup.target} (GitHub API)"
        except (UserError, GitHubUnreachable) as exc:
            print(f"::warning::speedstats: could not read the labels of {lookup.target} ({exc}); "
                  "using the event's", file=err)
    return lookup.event_labels, f"the labels of {lookup.target} in the event payload"


def verdict_fails_step(label, lookup, client=None, err=None):
    """True when the pull request carries `label`; says on err which way it went and why."""
    err = err or sys.stderr
    if lookup.target is None:
        print(f"::notice::speedstats: the verdict failed, but {lookup.why_none} to carry {label!r} "
              "(required-label): the step does not fail", file=err)
        return False
    labels, source = current_labels(lookup, client, err)
    if label in labels:
        print(f"speedstats: the verdict failed and {source} include {label!r}: the step fails", file=err)
        return True
    print(f"::notice::speedstats: the verdict failed, but {source} do not include {label!r} "
          "(required-label): the step does not fail", file=err)
    return False
