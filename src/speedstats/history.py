"""The history file: one JSON line per run (its results, the commit and when it was recorded).

The action keeps the file between runs (as an artifact or in a branch); `speedstats run --history FILE`
appends to it and `speedstats trend` draws from it. Appending rewrites the whole file through a
temporary one, so a crash never leaves half a line; runs that share one file must not append at the
same moment. Reading skips a bad line and reports it with its line number, keeping the others.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from speedstats import actions_io
from speedstats import results as results_model
from speedstats.errors import UserError
from speedstats.fsutil import read_bytes, write_atomic

HISTORY_SCHEMA = "speedstats/history/v1"
SHORT_SHA = 7


@dataclass
class HistoryEntry:
    line: int  # 1-based line number in the history file
    commit: str | None
    recorded_at: str | None
    results: results_model.Results

    @property
    def label(self):
        """Short commit sha for a plot axis, or the line number when the run recorded no commit."""
        return self.commit[:SHORT_SHA] if self.commit else f"#{self.line}"


def utc_now():
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def history_line(results, commit=None, recorded_at=None):
    """One history record as a JSON line (with its newline)."""
    record = {
        "schema": HISTORY_SCHEMA,
        "commit": commit,
        "recorded_at": recorded_at or utc_now(),
        "results": results.to_dict(),
    }
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


def append_history(path, results, commit=None, recorded_at=None):
    """Append one line for `results` to the history file at path (created when missing).

    commit defaults to $GITHUB_SHA, the commit a workflow run is for; a run outside a workflow may
    record none. Returns the line written.
    """
    if commit is None:
        commit = actions_io.commit_sha()
    path = Path(path)
    existing = read_bytes(path, "history file") if path.exists() else b""
    if existing and not existing.endswith(b"\n"):
        existing += b"\n"  # a line cut short by someone else stays separate from ours
    line = history_line(results, commit=commit, recorded_at=recorded_at)
    write_atomic(path, existing + line.encode("utf-8"))
    return line


def check_history_file(path):
    """Refuse, before a run measures anything, a history path that the run could not append to:
    its folder must exist and take new files (the file is rewritten through a temporary one), and
    the file, if there, must be a regular file holding history lines."""
    path = Path(path)
    folder = path.parent
    if not folder.is_dir():
        raise UserError(f"{path}: cannot write the history file: folder {folder} not found")
    if path.exists():
        if not path.is_file():
            raise UserError(f"{path}: the history file is not a regular file")
        entries, problems = read_history(path)
        if problems and not entries:
            raise UserError(f"{path}: not a speedstats history file (JSON Lines): {problems[0]}")
    try:
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as exc:
        raise UserError(f"{path}: cannot write the history file in {folder}: {exc.strerror}") from None


def _entry(text, number, where):
    try:
        record = results_model.parse_json(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{where}: not valid JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise UserError(f"{where}: JSON nested too deeply") from None
    if not isinstance(record, dict):
        raise UserError(f"{where}: must be a JSON object")
    schema = record.get("schema")
    if schema != HISTORY_SCHEMA:
        raise UserError(f"{where}: field 'schema' must be {HISTORY_SCHEMA!r}, got {schema!r}")
    commit, recorded_at = record.get("commit"), record.get("recorded_at")
    if commit is not None and not isinstance(commit, str):
        raise UserError(f"{where}: field 'commit' must be a string, got {commit!r}")
    if recorded_at is not None and not isinstance(recorded_at, str):
        raise UserError(f"{where}: field 'recorded_at' must be a string, got {recorded_at!r}")
    if "results" not in record:
        raise UserError(f"{where}: missing field 'results'")
    results = results_model.results_from_dict(record["results"], f"{where}: results")
    return HistoryEntry(line=number, commit=commit or None, recorded_at=recorded_at, results=results)


def read_history(path):
    """(entries, problems): the good lines in file order, and one message per bad line."""
    from speedstats.fsutil import read_text

    entries, problems = [], []
    for number, text in enumerate(read_text(path, "history file").splitlines(), start=1):
        if not text.strip():
            continue
        try:
            entries.append(_entry(text, number, f"{path}:{number}"))
        except UserError as exc:
            problems.append(str(exc))
    return entries, problems
