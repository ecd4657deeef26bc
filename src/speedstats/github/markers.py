"""The hidden marker that lets the bot find its own comments again, and GitHub's length limit.

The rendered bodies stay byte-exact; the comment command appends, after a blank line, one HTML
comment that GitHub does not render:

    <!-- speedstats:speed-stats head=<sha> run=<run id> -->
    <!-- speedstats:docs-preview -->
    <!-- speedstats:automerge-removed job=<job, %-quoted> head=<sha> run=<run id> -->
    <!-- speedstats:speed-alert head=<sha> run=<run id> state=open|resolved -->
    <!-- speedstats:speed-bisect run=<run id> -->

A matrix report (github/report.py) is a speed-stats comment whose marker also carries
`attempt=<run attempt>` and `verdict=pass|fail|incomplete`; its turning-red notice is a speed-alert.

Fields are `key=value`, values %-quoted (urllib.parse.quote) so a job name with spaces stays one
field; `post=<nonce>` is added in `--mode new` to tell one's own fresh comment from an earlier one.
A tracking issue of a shift on the default branch (github/tracking.py) ends its body the same way:

    <!-- speedstats:speed-shift case=<case id> gpu=<GPU name> shifts=<commit>:slower,<commit>:faster -->

A marker counts only as the last line of a body, so a reply that quotes the bot ("> <!-- ...") is
never taken for the bot's comment, and only on a comment by the bot's own login (post.own_comments
with the author the CLI resolves), since anyone can paste a marker into a comment of their own.
"""
from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass, field

SPEED_STATS = "speed-stats"
DOCS_PREVIEW = "docs-preview"
AUTOMERGE_REMOVED = "automerge-removed"
SPEED_ALERT = "speed-alert"
BISECT = "speed-bisect"  # the report of `speedstats bisect --pr`
KINDS = (SPEED_STATS, DOCS_PREVIEW, AUTOMERGE_REMOVED, SPEED_ALERT, BISECT)

SPEED_SHIFT = "speed-shift"  # ends an issue's body, not a comment's
ISSUE_KINDS = (SPEED_SHIFT,)

MAX_COMMENT_CHARS = 65536  # GitHub rejects longer bodies ("body is too long (maximum is 65536 characters)")

# Comments of the bot this project replaces, which carry no marker.
LEGACY_PREFIXES = {
    SPEED_STATS: "<details>\n <summary>Speed stats:</summary>",
    DOCS_PREVIEW: "View latest API docs preview at: ",
}

_MARKER_RE = re.compile(r"\n\n<!-- speedstats:(?P<kind>[a-z-]+)(?P<fields>(?: [a-z]+=[^\s>]*)*) -->\Z")


@dataclass
class Marker:
    kind: str
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def head_sha(self) -> str | None:
        return self.fields.get("head")

    @property
    def run_id(self) -> int | None:
        value = self.fields.get("run", "")
        return int(value) if value.isdigit() else None

    @property
    def run_attempt(self) -> int | None:
        value = self.fields.get("attempt", "")
        return int(value) if value.isdigit() else None

    @property
    def verdict(self) -> str | None:
        return self.fields.get("verdict")

    def render(self):
        parts = [f"speedstats:{self.kind}"]
        parts += [f"{key}={urllib.parse.quote(str(value), safe='')}" for key, value in self.fields.items()
                  if value is not None and value != ""]
        return "\n\n<!-- " + " ".join(parts) + " -->"


def make_marker(kind, **fields):
    return Marker(kind, {k: str(v) for k, v in fields.items() if v is not None and v != ""})


def parse_marker(body):
    """The marker at the end of a comment body, or None."""
    match = _MARKER_RE.search(body or "")
    if match is None or match.group("kind") not in KINDS + ISSUE_KINDS:
        return None
    fields = {}
    for part in match.group("fields").split():
        key, _, value = part.partition("=")
        fields[key] = urllib.parse.unquote(value)
    return Marker(match.group("kind"), fields)


def strip_marker(body):
    match = _MARKER_RE.search(body or "")
    return body[: match.start()] if match else body


def is_legacy(kind, body):
    prefix = LEGACY_PREFIXES.get(kind)
    return bool(prefix) and (body or "").startswith(prefix)


def cut_note(omitted, total, limit):
    return (f"\n\n_(comment cut to fit GitHub's limit of {limit} characters: "
            f"{omitted} of {total} characters left out)_")


# Room for what closes a cut body: a code fence, and the Speed stats block and the method's collapsed
# block after it (never nested, so at most one is open where a cut falls).
CLOSERS_ROOM = len("\n ``` ") + 2 * len("\n\n</details>")


def closers(kept):
    """What closes the code fence and the <details> blocks left open in a cut body's kept part."""
    fence = "\n ``` " if kept.count("```") % 2 == 1 else ""
    return fence + "\n\n</details>" * max(kept.count("<details>") - kept.count("</details>"), 0)


def fit_body(body, marker_text, limit=MAX_COMMENT_CHARS):
    """body + marker, cut at a line boundary with a note when longer than GitHub allows.

    A cut keeps the markdown closed: an open code fence and an open <details> are closed before the
    note, so the rest of the thread renders normally. The marker always survives.
    """
    if len(body) + len(marker_text) <= limit:
        return body + marker_text
    total = len(body)
    # Reserve room for the closers and a note whose numbers have at most as many digits as `total`.
    reserve = len(marker_text) + len(cut_note(total, total, limit)) + CLOSERS_ROOM
    kept = body[: max(limit - reserve, 0)]
    if "\n" in kept:
        kept = kept[: kept.rindex("\n")]
    return kept + closers(kept) + cut_note(total - len(kept), total, limit) + marker_text
