"""Turning red is announced: a short new comment when a matrix report's verdict becomes fail.

An edited comment notifies nobody, so when the report's verdict goes from pass (or incomplete) to
fail, the bot posts a new comment naming the GPUs and what failed there, with the head commit,
mentioning the pull request's author or the logins given (the mention is in the comment as posted:
a mention added by an edit notifies nobody). A verdict that stays fail posts nothing new. When the
verdict is pass again, each open alert is edited to say so (with no mention) and hidden as outdated
(GraphQL minimizeComment), where the token may.

An alert's marker: `<!-- speedstats:speed-alert head=<sha> run=<id> state=open|resolved gpus=a,b -->`.
"""
from __future__ import annotations

import re
import sys

from speedstats import actions_io
from speedstats.errors import UserError
from speedstats.github.markers import MAX_COMMENT_CHARS, SPEED_ALERT, fit_body, make_marker, parse_marker

ALERT_TEMPLATE = "matrix_alert.md.j2"
OFF, AUTHOR = "off", "author"
OPEN, RESOLVED = "open", "resolved"
MAX_LINES_PER_GPU = 5
_LOGIN_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}$")


def parse_notify(value, where="--notify-on-flip"):
    """OFF, AUTHOR, or a list of logins (comma or space separated, '@' optional)."""
    text = (value or "").strip()
    if text.lower() in (OFF, AUTHOR):
        return text.lower()
    logins = [word.lstrip("@") for word in re.split(r"[\s,]+", text) if word]
    bad = [login for login in logins if not _LOGIN_RE.match(login)]
    if not logins or bad:
        raise UserError(f"{where}: must be off, author or a list of GitHub logins, got {value!r}")
    return list(dict.fromkeys(logins))


def render_alert(head_sha, failures, comment_url, run_url, run_id, mentions=(), resolved=False,
                 failed_head_sha=None, omitted=0):
    from speedstats.render import render_template
    from speedstats.text import trusted

    # The logins were checked (mentions_from); the links are the comment's and the run's, from GitHub.
    return render_template(ALERT_TEMPLATE, {
        "mentions": list(mentions), "resolved": resolved, "head_sha": head_sha,
        "failed_head_sha": failed_head_sha or head_sha, "failures": failures,
        "comment_url": trusted(comment_url), "run_url": trusted(run_url), "run_id": run_id,
        "omitted": omitted})


def fit_alert(head_sha, failures, comment_url, run_url, run_id, mentions, marker_text,
              limit=MAX_COMMENT_CHARS):
    """The alert and its marker within GitHub's limit: fewer lines per GPU until it fits (the links and
    every GPU's name kept, the lines left out counted), cut as any comment is only past that."""
    total = sum(len(f["lines"]) for f in failures)
    for per_gpu in range(max((len(f["lines"]) for f in failures), default=0), -1, -1):
        kept = [{"gpu": f["gpu"], "lines": f["lines"][:per_gpu]} for f in failures]
        omitted = total - sum(len(f["lines"]) for f in kept)
        body = render_alert(head_sha, kept, comment_url, run_url, run_id, mentions=mentions, omitted=omitted)
        if len(body) + len(marker_text) <= limit:
            return body + marker_text
    return fit_body(body, marker_text, limit)


def _own_alerts(comments, author, state):
    from speedstats.github.post import own_comments

    return [c for c in own_comments(comments, SPEED_ALERT, author)
            if parse_marker(c.body).fields.get("state") == state]


def announce(client, target, outcome, verdict, rows, logins, author, run_url):
    """After the report was written: post, or resolve and hide, the turning-red alert.

    logins: who the alert mentions (None: nobody is alerted). outcome.previous is the report the
    write replaced; outcome.listing the comments before it.
    """
    open_alerts = _own_alerts(outcome.listing or [], author, OPEN)
    previous = outcome.previous.verdict if outcome.previous is not None else None
    comment_url = outcome.url
    if verdict == "fail" and previous in ("pass", "incomplete") and not open_alerts and logins is not None:
        failures = [{"gpu": row.gpu, "lines": row.failures[:MAX_LINES_PER_GPU]}
                    for row in rows if row.failures]
        marker = make_marker(SPEED_ALERT, head=target.head_sha, run=target.run_id, state=OPEN,
                             gpus=",".join(f["gpu"] for f in failures)).render()
        full = fit_alert(target.head_sha, failures, comment_url, run_url, target.run_id,
                         [login for login in logins if login], marker)
        created = client.create_comment(target, full,
                                        lambda cs: next((c for c in cs if c.body == full), None))
        client.notice(f"{target}: the verdict turned from {previous} to fail; alert comment {created.id}")
        # Two reports racing through the same flip keep the oldest alert.
        alerts = sorted(_own_alerts(client.list_comments(target), author, OPEN), key=lambda c: c.id)
        for extra in alerts[1:]:
            client.delete_comment(extra)
    elif verdict == "pass" and open_alerts:
        for alert in open_alerts:
            resolve(client, target, alert, comment_url, run_url)


def resolve(client, target, alert, comment_url, run_url):
    """Edit an open alert to say the pull request passes again, then hide it as outdated."""
    from speedstats.github.client import ReadOnlyToken

    marker = parse_marker(alert.body)
    gpus = [g for g in (marker.fields.get("gpus") or "").split(",") if g]
    failures = [{"gpu": gpu, "lines": []} for gpu in gpus or ["?"]]
    body = render_alert(target.head_sha, failures, comment_url, run_url, target.run_id, resolved=True,
                        failed_head_sha=marker.head_sha)
    fields = dict(marker.fields, state=RESOLVED)
    client.edit_comment(alert, body + make_marker(SPEED_ALERT, **fields).render())
    try:
        hidden = client.minimize_comment(alert)
    except (UserError, ReadOnlyToken) as exc:
        print(actions_io.workflow_command(
            "notice", f"speedstats: alert comment {alert.id} says the checks pass again but stays visible: "
            f"the token may not hide it ({exc})"), file=sys.stderr)
        return False
    client.notice(f"{target}: passing again; alert comment {alert.id} edited and hidden as outdated")
    return hidden
