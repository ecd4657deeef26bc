"""The history file: one JSON line per run (its results, the commit and when it was recorded).

`speedstats run --history FILE` appends to a file of its own; on the default branch the action keeps one
file per GPU in a data branch of the repository (github/databranch.py), written with the same lines.
`speedstats trend` draws from either and `speedstats changes` finds the shifts in it.

Each line is a record read with the declarations below, as results.json is (settings.read_record): a run
(`speedstats/history/v1`) or, where a bounded file let its oldest runs go, a summary of them
(`speedstats/history-summary/v1`: how many runs, their commits and dates, each case's median per
framework). A bounded file never drops a run silently: the summary line says what it took the place of.

Appending rewrites the whole file through a temporary one, so a crash never leaves half a line; runs
that share one local file must not append at the same moment (the data branch retries instead). Reading
skips a bad line and reports it with its line number, keeping the others.
"""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from speedstats import actions_io
from speedstats import results as results_model
from speedstats.analysis.stats import median
from speedstats.contenders import ROLES
from speedstats.errors import UserError
from speedstats.fsutil import read_bytes, write_atomic
from speedstats.settings import read_record, setting
from speedstats.text import shown

HISTORY_SCHEMA = "speedstats/history/v1"
SUMMARY_SCHEMA = "speedstats/history-summary/v1"
SHORT_SHA = 7
# A bounded file (the data branch's) keeps at most this many runs; past it, the oldest FOLD_SHARE of
# them become one summary line.
DEFAULT_MAX_RUNS = 500
FOLD_SHARE = 0.2


def _results(value, where, name):
    return results_model.results_from_dict(value, f"{where}: {name}")


@dataclass
class HistoryRecord:
    """One run of the history: the commit it measured, when it was recorded, and its results."""

    OPEN_RECORD = True
    schema: str = setting(choices=(HISTORY_SCHEMA,))
    commit: str | None = setting(None)
    recorded_at: str | None = setting(None)
    results: object = setting(None, required=True, read=_results, schema={"$ref": results_model.SCHEMA})


@dataclass
class FigureSummary:
    """One framework's figures over the summarised runs that measured it: the median time per iteration
    of those runs, and how many they were."""

    median_s: float = setting(**results_model.SECONDS)
    runs: int = setting(minimum=1, maximum=results_model.MAX_COUNT)


@dataclass
class CaseSummary:
    """One case over the summarised runs, framework by framework."""

    id: str = setting()
    frameworks: dict[str, FigureSummary] = setting(factory=dict, record=FigureSummary, keys=ROLES)


@dataclass
class SummaryRecord:
    """Runs taken out of a bounded history file: how many, the commits and dates of the first and last,
    the device and GPU, and each case's median per framework."""

    OPEN_RECORD = True
    schema: str = setting(choices=(SUMMARY_SCHEMA,))
    runs: int = setting(minimum=1, maximum=results_model.MAX_COUNT)
    first_commit: str | None = setting(None)
    last_commit: str | None = setting(None)
    first_recorded_at: str | None = setting(None)
    last_recorded_at: str | None = setting(None)
    device: str | None = setting(None)
    gpu_name: str | None = setting(None)
    cases: list[CaseSummary] = setting(factory=list, record=CaseSummary)
    note: str = setting("")

    @property
    def commits_text(self):
        first, last = (short_commit(c) for c in (self.first_commit, self.last_commit))
        return first if first == last else f"{first}..{last}"


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


@dataclass
class History:
    """A history file read: its runs in file order, the summaries of runs it let go, one message per bad
    line."""

    entries: list[HistoryEntry] = field(default_factory=list)
    summaries: list[SummaryRecord] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def summarised_runs(self):
        return sum(s.runs for s in self.summaries)

    def summary_note(self):
        """One line on the runs summarised out of the file, or None when there are none."""
        if not self.summaries:
            return None
        ranges = ", ".join(s.commits_text for s in self.summaries)
        return (f"{self.summarised_runs} older run(s) are summarised in the file (commits {ranges}): "
                "their medians are kept, not their runs")


def short_commit(commit):
    return commit[:SHORT_SHA] if commit else "?"


def utc_now():
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _line(record):
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


def history_line(results, commit=None, recorded_at=None):
    """One history record as a JSON line (with its newline)."""
    return _line({"schema": HISTORY_SCHEMA, "commit": commit, "recorded_at": recorded_at or utc_now(),
                  "results": results.to_dict()})


def history_file_name(gpu_name):
    """The data branch's file of a GPU (or CPU) name: `history/<name, letters, digits, . _ - kept>.jsonl`."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", str(gpu_name)).strip("._-")[:100] or "unknown"
    return f"history/{slug}.jsonl"


def summarise(entries):
    """The SummaryRecord of runs (HistoryEntry, oldest first) that leave a bounded file."""
    figures = {}  # case id -> role -> [per-iteration seconds]
    for entry in entries:
        for case in entry.results.cases:
            for role, fw in case.frameworks.items():
                if not case.error and fw.ok:
                    figures.setdefault(case.id, {}).setdefault(role, []).append(fw.per_iter_s)
    first, last = entries[0], entries[-1]
    return SummaryRecord(
        schema=SUMMARY_SCHEMA, runs=len(entries), first_commit=first.commit, last_commit=last.commit,
        first_recorded_at=first.recorded_at, last_recorded_at=last.recorded_at,
        device=last.results.device, gpu_name=last.results.gpu_name,
        cases=[CaseSummary(id=case_id, frameworks={role: FigureSummary(median(values), len(values))
                                                   for role, values in roles.items()})
               for case_id, roles in figures.items()],
        note=(f"{len(entries)} run(s) summarised to keep the file bounded: each case's median time per "
              "iteration per framework and how many runs had it; their rounds are not kept"))


def appended(text, line, max_runs=None):
    """The history text `text` with `line` appended; with max_runs, when it then holds more runs than
    that, the oldest of them (FOLD_SHARE of max_runs, at least the excess) become one summary line where
    the first of them was. Summary and bad lines stay as they are."""
    if text and not text.endswith("\n"):
        text += "\n"  # a line cut short by someone else stays separate from ours
    lines = (text + line).splitlines(keepends=True)
    if max_runs is None:
        return "".join(lines)
    runs = []
    for index, raw in enumerate(lines):
        try:
            record = _record(raw, index + 1, "history")
        except UserError:
            continue
        if isinstance(record, HistoryEntry):
            runs.append((index, record))
    excess = len(runs) - max_runs
    if excess <= 0:
        return "".join(lines)
    folded = runs[:max(excess, int(max_runs * FOLD_SHARE), 1)]
    summary = _line(asdict(summarise([entry for _, entry in folded])))
    first, gone = folded[0][0], {index for index, _ in folded}
    return "".join(summary if index == first else raw for index, raw in enumerate(lines)
                   if index not in gone or index == first)


def append_history(path, results, commit=None, recorded_at=None, max_runs=None):
    """Append one line for `results` to the history file at path (created when missing).

    commit defaults to $GITHUB_SHA, the commit a workflow run is for; a run outside a workflow may
    record none. With max_runs, the oldest runs past it are summarised (appended). Returns the line
    written.
    """
    if commit is None:
        commit = actions_io.commit_sha()
    path = Path(path)
    existing = read_bytes(path, "history file").decode("utf-8", "replace") if path.exists() else ""
    line = history_line(results, commit=commit, recorded_at=recorded_at)
    write_atomic(path, appended(existing, line, max_runs).encode("utf-8"))
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
        history = load_history(path)
        if history.problems and not history.entries and not history.summaries:
            raise UserError(f"{path}: not a speedstats history file (JSON Lines): {history.problems[0]}")
    try:
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as exc:
        raise UserError(f"{path}: cannot write the history file in {folder}: {exc.strerror}") from None


def _record(text, number, where):
    """A HistoryEntry or a SummaryRecord from one line; UserError naming `where:number`."""
    where = f"{where}:{number}"
    try:
        data = results_model.parse_json(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{where}: not valid JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise UserError(f"{where}: JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise UserError(f"{where}: must be a JSON object")
    if data.get("schema") == SUMMARY_SCHEMA:
        results_model.check_numbers(data, where)
        return read_record(SummaryRecord, data, where)
    if data.get("schema") != HISTORY_SCHEMA:
        raise UserError(f"{where}: field 'schema' must be {HISTORY_SCHEMA!r} or {SUMMARY_SCHEMA!r}, "
                        f"got {shown(data.get('schema'))}")
    record = read_record(HistoryRecord, data, where)
    return HistoryEntry(line=number, commit=record.commit or None, recorded_at=record.recorded_at,
                        results=record.results)


def read_history_text(text, where):
    """The History of a history file's text; `where` (its path) starts each problem."""
    history = History()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = _record(line, number, where)
        except UserError as exc:
            history.problems.append(str(exc))
            continue
        (history.entries if isinstance(record, HistoryEntry) else history.summaries).append(record)
    return history


def load_history(path):
    """The History of the history file at path."""
    from speedstats.fsutil import read_text

    return read_history_text(read_text(path, "history file"), str(path))


def read_history(path):
    """(entries, problems): the runs in file order, and one message per bad line (summary lines are
    neither)."""
    history = load_history(path)
    return history.entries, history.problems
