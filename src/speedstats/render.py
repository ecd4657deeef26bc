"""The comments the bot posts, rendered from Jinja templates.

Templates come from the project's `templates/` folder; a user folder given as `templates_dir` is
searched first, so it may replace any one template (e.g. only `speed_stats_macros.md.j2`) and keep
the others. Templates run with StrictUndefined (a misspelt variable fails), keep_trailing_newline
and no HTML autoescaping (the output is markdown, not HTML). An error raised from a template becomes a
UserError naming the template file and line. No framework is imported here.

Every string a template is given, or reaches through the objects it is given, is escaped for markdown
(text.markdown_safe: no link, image, mention, HTML tag or code span can form, on one line) unless it is
a text.SafeText: the project's own words (text.trusted), or text already made safe for its place, such
as the code fence's (text.fence_safe). So no template, the project's or a user's, can print a string
from the data unescaped; a string that was not marked shows escaped, never live.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import jinja2

from speedstats import verdict as verdicts
from speedstats.analysis.attribution import QUEUE_WAITS
from speedstats.analysis.look import TIME_BUDGET
from speedstats.analysis.pairs import head_starts_first
from speedstats.casekinds import case_kind
from speedstats.contenders import BASE, HEAD, LABELS, PYTORCH, ROLE_WORDS, build_family, of_family
from speedstats.errors import UserError
from speedstats.machine import unstable_contenders
from speedstats.resources import templates_dir as builtin_templates_dir
from speedstats.suite import Suite
from speedstats.text import SafeText, change_percent, fence_safe, markdown_safe, time_text, trusted

SPEED_STATS_TEMPLATE = "speed_stats.md.j2"
NOTES_TEMPLATE = "speed_stats_notes.md.j2"
MACHINE_NOTES_TEMPLATE = "machine_notes.md.j2"
ROLE_LABELS = ROLE_WORDS  # the role of each build in the builds line: head, base, PyTorch
BASELINE_TABLE_TEMPLATE = "baseline_table.md.j2"
DOCS_PREVIEW_TEMPLATE = "docs_preview.md.j2"
AUTOMERGE_REMOVED_TEMPLATE = "automerge_removed.md.j2"
BISECT_REPORT_TEMPLATE = "bisect_report.md.j2"
GPU_NAME_LIMIT = 200
CASE_ID_LIMIT = 100
MACHINE_NOTE_TEXT_LIMIT = 300
MACHINE_WARNING = "\u26a0\ufe0f "  # warning sign, emoji presentation, space
DATA_TEXT_LIMIT = 2000  # a string from the data longer than this is cut where it is printed


def guarded(value):
    """A context value as templates see it: strings escaped for markdown unless SafeText, containers
    and objects guarded all the way down (an object's attributes, and what its methods return)."""
    if value is None or isinstance(value, (SafeText, bool, int, float, GuardedObject)):
        return value
    if isinstance(value, str):
        return markdown_safe(value, DATA_TEXT_LIMIT)
    if isinstance(value, dict):
        return {key: guarded(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [guarded(item) for item in value]
    return _guard_class(type(value))(value)


_GUARD_CLASSES = {}


def _guard_class(cls):
    """A GuardedObject class named as the object's own, so that a template's error names that class."""
    if cls not in _GUARD_CLASSES:
        namespace = {"__slots__": (), "__module__": cls.__module__}
        _GUARD_CLASSES[cls] = type(cls.__name__, (GuardedObject,), namespace)
    return _GUARD_CLASSES[cls]


class GuardedObject:
    """An object of the context (a results record, a suite, a view) whose attributes are guarded."""

    __slots__ = ("_target",)

    def __init__(self, target):
        object.__setattr__(self, "_target", target)

    def __getattr__(self, name):
        value = getattr(object.__getattribute__(self, "_target"), name)
        if callable(value) and not isinstance(value, type):
            return lambda *args, **kwargs: guarded(value(*args, **kwargs))
        return guarded(value)

    def __getitem__(self, key):
        return guarded(object.__getattribute__(self, "_target")[key])

    def __iter__(self):
        return (guarded(item) for item in object.__getattribute__(self, "_target"))

    def __len__(self):
        return len(object.__getattribute__(self, "_target"))

    def __bool__(self):
        return bool(object.__getattribute__(self, "_target"))

    def __eq__(self, other):
        if isinstance(other, GuardedObject):
            other = object.__getattribute__(other, "_target")
        return object.__getattribute__(self, "_target") == other

    def __hash__(self):
        return hash(object.__getattribute__(self, "_target"))

    def __str__(self):
        return markdown_safe(object.__getattribute__(self, "_target"), DATA_TEXT_LIMIT)


@dataclass
class FrameworkView:
    per_iter_s: float | None
    total_s: float | None
    times: int | None
    per_iter_ms: float | None
    total_ms: float | None
    peak_memory_bytes: int | None = None
    memory_kind: str | None = None  # "cuda-allocator", "nvml-process" or "rss"


@dataclass
class CaseView:
    """What a case macro sees: the case's figures, its marks and, for a failed case, its error."""

    id: str
    kind: str
    macro: str  # the macro that prints its figures' lines (its kind's, speedstats.casekinds)
    batch_size: int
    times: int
    input_shape: list[int] | None
    num_workers: int | None
    ddp: bool
    world_size: int
    oneflow: FrameworkView | None
    pytorch: FrameworkView | None
    relative_speed: float | None
    marks: dict[str, str]
    score: int
    failure: str | None
    named: bool = False  # the id is not the one parse would give these figures: a failed line shows it


def environment(templates_dir=None):
    """A Jinja environment over the user's template folder (if any), then the built-in one: one per
    folder, so each template is compiled once (a template changed on disk is read again)."""
    if templates_dir is not None and not Path(templates_dir).is_dir():
        raise UserError(f"{templates_dir}: template folder not found")
    return _environment(None if templates_dir is None else str(Path(templates_dir).resolve()))


@functools.lru_cache(maxsize=16)
def _environment(user_folder):
    folders = [builtin_templates_dir()] if user_folder is None else [user_folder, builtin_templates_dir()]
    loader = jinja2.ChoiceLoader([jinja2.FileSystemLoader(str(f)) for f in folders])
    return jinja2.Environment(
        loader=loader, undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False
    )


def _template_frames(exc):
    """'file:line' of each template frame of a rendering error, innermost first."""
    if isinstance(exc, jinja2.TemplateSyntaxError) and exc.filename:
        return [f"{exc.filename}:{exc.lineno}"]
    frames, tb = [], exc.__traceback__
    while tb is not None:
        if "__jinja_exception__" in tb.tb_frame.f_globals:  # a frame jinja points at template source
            frames.insert(0, f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}")
        tb = tb.tb_next
    return list(dict.fromkeys(frames))


def render_template(name, context, templates_dir=None):
    """Render one template to text; template errors become UserErrors naming file and line."""
    env = environment(templates_dir)
    context = {key: guarded(value) for key, value in context.items()}
    try:
        return env.get_template(name).render(**context)
    except UserError:
        raise
    except Exception as exc:  # a user's template may fail in any way; say where
        frames = _template_frames(exc)
        if isinstance(exc, jinja2.TemplateNotFound):
            folder = templates_dir if templates_dir is not None else builtin_templates_dir()
            message = f"template {exc.name!r} not found in {folder}"
        elif frames:
            detail = exc.message if isinstance(exc, jinja2.TemplateError) and exc.message else str(exc)
            message = f"{type(exc).__name__}: {verdicts.one_line(detail)}"
        else:
            raise
        # A misspelt argument fails in the macro that uses it, so its callers are named too.
        where = f"{frames[0]}: " if frames else ""
        callers = f" (called from {', '.join(frames[1:])})" if len(frames) > 1 else ""
        raise UserError(f"{where}{message}{callers}") from None


def _framework_view(fw):
    if fw is None:
        return None

    def scaled(value):
        return None if value is None else value * 1000

    return FrameworkView(
        per_iter_s=fw.per_iter_s,
        total_s=fw.total_s,
        times=fw.times,
        per_iter_ms=scaled(fw.per_iter_s),
        total_ms=scaled(fw.total_s),
        peak_memory_bytes=fw.peak_memory_bytes,
        memory_kind=fw.memory_kind,
    )


def case_view(case, case_verdict):
    """What the templates see of a case; its free text (id, error) already made safe for the fence."""
    case_id = fence_safe(case.id, CASE_ID_LIMIT)
    kind = case_kind(case.kind)
    return CaseView(
        id=case_id,
        kind=case.kind,
        macro=trusted(kind.macro) if kind is not None else case.kind,
        batch_size=case.batch_size,
        times=case.times,
        input_shape=case.input_shape,
        num_workers=case.num_workers,
        ddp=case.ddp,
        world_size=case.world_size,
        oneflow=_framework_view(case.frameworks.get(HEAD)),
        pytorch=_framework_view(case.frameworks.get(PYTORCH)),
        relative_speed=case.relative_speed,
        marks={role: trusted(mark) for role, mark in case_verdict.marks.items()},
        score=case_verdict.score,
        failure=fence_safe(case_verdict.failure, verdicts.ERROR_TEXT_LIMIT) if case_verdict.failure else None,
        named=kind is None or case.id != kind.id_of(case),
    )


def _or_defaults(suite):
    """The suite, or without one (render with no suite) a Suite of the defaults."""
    return suite if suite is not None else Suite()


def render_speed_stats(results, suite, verdict, templates_dir=None, show_memory=None):
    """The Speed stats comment body for results and their verdict, `verdict.judge(results, suite)`
    (suite None: no thresholds).

    show_memory adds each case's peak memory lines; None takes the suite's `show_memory`.
    """
    if show_memory is None:
        show_memory = _or_defaults(suite).show_memory
    context = {
        "gpu_name": fence_safe(results.gpu_name, GPU_NAME_LIMIT),
        "cases": [case_view(c, v) for c, v in zip(results.cases, verdict.cases)],
        "error": fence_safe(verdict.error, verdicts.ERROR_TEXT_LIMIT) if verdict.error else None,
        "cancelled": bool(results.cancelled),
        "passed": verdict.passed,
        "score": verdict.score,
        "results": results,
        "suite": suite,
        "pass_mark": trusted(verdicts.PASS_MARK),
        "fail_mark": trusted(verdicts.FAIL_MARK),
        "show_memory": show_memory,
    }
    body = render_template(SPEED_STATS_TEMPLATE, context, templates_dir)
    machine_notes = render_template(MACHINE_NOTES_TEMPLATE, machine_notes_context(results, suite),
                                    templates_dir)
    if machine_notes:  # right after the block: a disturbed machine is said before anything else
        body = f"{body}\n\n{machine_notes}"
    notes = render_template(NOTES_TEMPLATE, speed_stats_notes_context(results, verdict, show_memory, suite),
                            templates_dir)
    if notes:
        body = f"{body}\n\n{notes}"
    return body


def _percent(ratio):
    """A ratio (1.05) as a change in percent (+5.0)."""
    return None if ratio is None else change_percent(ratio - 1)


def _hidden_work(case, row):
    """The head's extra main-thread work that held a case back from "no change": {time (per iteration),
    share, low, high (percent of a step)}, or None."""
    extra = case.paired.hidden_work if case.paired is not None else None
    if not extra or row.verdict != "inconclusive" or row.base_s is None:
        return None
    return {"time": time_text(extra["share"] * row.base_s, case.kind), "share": extra["share"] * 100,
            "low": extra["low"] * 100, "high": extra["high"] * 100}


def _main_thread(case, row):
    """The head's extra main-thread work beyond the band, when no "Hidden work" line says it already:
    {time, share, low, high, place (where the profile put most of it), place_change}, or None."""
    extra = case.paired.main_thread if case.paired is not None else None
    if not extra or row.base_s is None or _hidden_work(case, row):
        return None
    out = {"time": time_text(extra["share"] * row.base_s, case.kind), "share": extra["share"] * 100,
           "low": extra["low"] * 100, "high": extra["high"] * 100, "place": None, "place_change": None}
    places = case.attribution.significant if case.attribution is not None else []
    if places:
        out["place"], out["place_change"] = _place_text(places[0].place), _signed_ms(places[0].change_ms)
    return out


def _cell(text):
    """Text from results safe as markdown, inside a table cell too: one line, nothing active."""
    return markdown_safe(text, verdicts.ERROR_TEXT_LIMIT)


SETTLE_ROUNDS = 10  # the rounds whose cost the advice for a case left likely slower gives


def _settle(case, row, rule, max_cv):
    """What would settle a case left likely slower: a quieter machine when this run's was not quiet (a
    disturbed round, an unsteady control, figures that scatter beyond max_cv), else more rounds, with the
    fields that allow them and what they cost here."""
    moved = (case.disturbance or (row.control is not None and row.control.steady is False)
             or any(fw.remeasured for fw in case.frameworks.values())
             or unstable_contenders(case.frameworks, max_cv))
    if moved:
        return trusted("this run's machine was not quiet (its rounds scattered or it moved): measure again "
                       "on a quieter one to settle it")
    text = f"more rounds would settle it here: raise head_vs_base's max_rounds (now {rule['max_rounds']})"
    if case.paired is not None and case.paired.stopped == TIME_BUDGET and rule.get("case_cap_factor"):
        text += f" and case_cap_factor (now {rule['case_cap_factor']:g}), whose time budget stopped it"
    round_s = sum(fw.per_iter_s * (fw.round_iterations or 1) for role, fw in case.frameworks.items()
                  if role in (HEAD, BASE, PYTORCH) and fw.ok)
    if round_s:
        text += f"; {SETTLE_ROUNDS} more rounds of each build take about {SETTLE_ROUNDS * round_s:.0f}s"
    return trusted(text)


def _paired_row(case, row, rule, max_cv):
    """A HeadVsBase (computed by the verdict) in printed units, for the notes template."""
    control = None
    if row.control is not None:
        c = row.control
        control = {
            "base": time_text(c.first, case.kind), "head": time_text(c.last, case.kind),
            "change": _percent(c.ratio), "low": _percent(c.low), "high": _percent(c.high),
            "steady": c.steady, "text": c.text,
        }
    return {
        "case": _cell(case.id), "kind": case.kind,
        "base": time_text(row.base_s, case.kind), "head": time_text(row.head_s, case.kind),
        "change": _percent(row.ratio), "low": _percent(row.low), "high": _percent(row.high),
        "verdict": row.verdict, "leaning": row.leaning, "rounds": row.rounds, "text": _cell(row.text),
        "control": control, "confirmation": (case.confirmation or {}).get("status"),
        "disagree": bool(case.paired and case.paired.disagree),
        "hidden_work": _hidden_work(case, row),
        "main_thread": _main_thread(case, row),
        "settle": _settle(case, row, rule, max_cv) if row.leaning == verdicts.LIKELY_SLOWER else None,
        "start_order": _percent(case.paired.start_order) if case.paired else None,
        "pairs": [{"change": _percent(p.get("ratio")), "low": _percent(p.get("low")),
                   "high": _percent(p.get("high")),
                   "first": ROLE_WORDS[HEAD if head_starts_first(i) else BASE]}
                  for i, p in enumerate(case.paired.pairs if case.paired else [])],
        "resolvable": (None if case.paired is None or case.paired.resolvable is None
                       or row.verdict not in ("no change", "inconclusive")
                       else case.paired.resolvable * 100),
    }


def build_text(provenance):
    """One build as the builds line names it: version, git commit, and where it came from."""
    family = build_family(provenance)
    known = of_family(family)
    package, label = (known.package, known.framework) if known is not None else (family, family)
    packages = provenance.get("packages") or {}
    main = packages.get(package) or {}
    details = []
    if main.get("git_commit"):
        details.append(f"git {str(main['git_commit'])[:12]}")
    if main.get("wheel"):
        sha = f" sha256 {str(main['sha256'])[:12]}" if main.get("sha256") else ""
        details.append(f"{main['wheel']}{sha}")
    elif main.get("requirement"):
        details.append(str(main["requirement"]))
    else:
        details.append(provenance.get("source") or "installed")
    text = f"{label} {main.get('version') or 'unknown version'} ({', '.join(details)})"
    companions = [f"{name} {packages[name]['version']}" for name in (known.companions if known else ())
                  if (packages.get(name) or {}).get("version")]
    if companions:
        text += f" with {', '.join(companions)}"
    return markdown_safe(text, verdicts.ERROR_TEXT_LIMIT)


def disturbed_line(case_id, disturbance):
    """The note after the Speed stats block for a case measured on a disturbed machine."""
    return trusted(f"{MACHINE_WARNING}{case_id}: {disturbance['text']}; its figures are not comparable")


def machine_notes_context(results, suite=None):
    """What machine_notes.md.j2 sees: lines for cases not measured, disturbed cases, unstable figures, a
    GPU that was not quiet before the first case, and builds run through minor version compatibility."""
    spec = _or_defaults(suite).disturbance
    max_cv = spec.cv_limit(results.device)
    disturbed, unstable = [], []
    for case in results.cases:
        case_id = markdown_safe(case.id, MACHINE_NOTE_TEXT_LIMIT)
        if case.disturbance:
            disturbed.append(disturbed_line(
                case_id, {"text": markdown_safe(case.disturbance["text"], MACHINE_NOTE_TEXT_LIMIT)}))
        if case.failure:
            continue
        unstable += [f"{case_id} {LABELS.get(role, role)} {cv * 100:.1f}%"
                     for role, cv in unstable_contenders(case.frameworks, max_cv)]
    machine = results.machine or {}
    preflight = machine.get("preflight") or {}
    not_quiet = None
    if preflight.get("quiet") is False:
        reasons = "; ".join(str(r) for r in preflight.get("reasons") or [])
        not_quiet = trusted(
            f"{MACHINE_WARNING}The GPU was not quiet before the first case after waiting "
            f"{preflight.get('waited_s') or 0:.0f}s ({markdown_safe(reasons, MACHINE_NOTE_TEXT_LIMIT)}); "
            "measured anyway, each round checked"
        )
    driver_notes = [
        markdown_safe(n, MACHINE_NOTE_TEXT_LIMIT) for n in (machine.get("driver") or {}).get("notes") or []
    ]
    skipped = [trusted(f"{MACHINE_WARNING}{markdown_safe(case.id, MACHINE_NOTE_TEXT_LIMIT)}: not measured, "
                       f"{markdown_safe(case.reason, MACHINE_NOTE_TEXT_LIMIT)}") for case in results.skipped]
    if unstable:  # one line for all: on a noisy machine every case may have one
        unstable = [trusted(f"{MACHINE_WARNING}Unstable figures, their rounds scatter with a coefficient of "
                     f"variation above {max_cv * 100:g}%: {'; '.join(unstable)}")]
    return {
        "disturbed": disturbed,
        "unstable": unstable,
        "not_quiet": not_quiet,
        "driver_notes": driver_notes,
        "skipped": skipped,
    }


MAX_ATTRIBUTION_ROWS = 5


def _ms(value):
    return f"{value:.1f}ms"


def _signed_ms(value):
    return f"{value:+.1f}ms"


def _or_none(text, value):
    return None if value is None else text(value)


def _place_text(place):
    """A place as the notes name it: the worker's waits for queued work said as such (a slower kernel
    shows there, not in speedstats' own code), every other place as it was sampled."""
    wait = QUEUE_WAITS.get(place)
    return trusted(f"{wait} ({place})") if wait else _cell(place)


def _change_rows(changes, total=True):
    rows = []
    for p in changes[:MAX_ATTRIBUTION_ROWS]:
        row = {"place": _place_text(p.place), "base": _ms(p.base_ms), "head": _ms(p.head_ms),
               "change": _signed_ms(p.change_ms), "low": _signed_ms(p.low_ms), "high": _signed_ms(p.high_ms)}
        if total:
            row["total"] = f"{_ms(p.base_total_ms)} → {_ms(p.head_total_ms)}"
        rows.append(row)
    return rows


_CODE_SPAN = re.compile(r"[A-Za-z0-9_.:<>-]{1,200}")


def _code(text):
    """A place or an op as inline code where it is a plain name (`module:function`), else escaped."""
    return trusted(f"`{text}`") if _CODE_SPAN.fullmatch(text) else _cell(text)


def _count_text(value):
    """A count per step or per call: whole where it is one, else to one decimal."""
    value = abs(value)
    return f"{round(value)}" if abs(value - round(value)) < 0.05 else f"{value:.1f}"


def _dispatch_line(d):
    """One op of a place whose count changed: "`place` dispatches 13 more `mul` per call (0 → 13), called
    53 times per step"; per step where the place's calls changed too, with the place that calls it more
    (or fewer) times."""
    more = "more" if d.change_per_step > 0 else "fewer"
    place, op = _code(d.place), _code(d.op)
    if d.change_per_call is not None and d.base_calls > 0 and d.head_calls > 0:
        base, head = d.base_per_step / d.base_calls, d.head_per_step / d.head_calls
        return trusted(f"{place} dispatches {_count_text(d.change_per_call)} {more} {op} per call "
                       f"({_count_text(base)} → {_count_text(head)}), called {_count_text(d.head_calls)} "
                       f"times per step")
    text = (f"{place} dispatches {_count_text(d.change_per_step)} {more} {op} per step "
            f"({_count_text(d.base_per_step)} → {_count_text(d.head_per_step)}): it is called "
            f"{_count_text(d.head_calls)} times per step in the head and {_count_text(d.base_calls)} in the "
            "base")
    if d.caller and d.caller != "?" and d.caller_change:
        text += (f", {_count_text(d.caller_change)} {'more' if d.caller_change > 0 else 'fewer'} from "
                 f"{_code(d.caller)}")
    return trusted(text)


def _dispatch_context(record):
    """The ops dispatched that changed, as the notes say them: {lines, shown, changed, rounds}, or None."""
    if not record.dispatches:
        return None
    lines = [_dispatch_line(d) for d in record.dispatches[:MAX_ATTRIBUTION_ROWS]]
    return {"lines": lines, "shown": len(lines), "changed": len(record.dispatches),
            "rounds": record.dispatch_rounds}


def attribution_context(case):
    """What the notes show of a case's attribution: its significant places where the head spends more
    time, on CUDA its significant ops, and the ops whose count per place changed (at most
    MAX_ATTRIBUTION_ROWS of each), or None when there is none of them."""
    record = case.attribution
    if record is None:
        return None
    significant, significant_ops = record.significant, record.significant_ops
    dispatches = _dispatch_context(record)
    if not significant and not significant_ops and not dispatches:
        return None
    rows = _change_rows(significant)
    ops = None
    if significant_ops:
        op_rows = _change_rows(significant_ops, total=False)
        added = sum(p.change_ms for p in significant_ops)
        ops = {"rows": op_rows, "shown": len(op_rows), "significant": len(significant_ops),
               "device": (record.ops_device or "").upper(), "added": _signed_ms(added),
               "share": (added / record.step_change_ms * 100
                         if record.step_change_ms and record.step_change_ms > 0 else None)}
    return {
        "case": _cell(case.id), "rows": rows, "rounds": record.rounds, "places": record.places_compared,
        "ops_compared": record.ops_compared, "ops": ops, "dispatches": dispatches,
        "confidence": record.confidence * 100, "shown": len(rows), "significant": len(significant),
        "explained": None if record.explained is None else record.explained * 100,
        # None where fewer profiled rounds than a comparison needs counted the ops dispatched all the same
        "step_change": _or_none(_signed_ms, record.step_change_ms),
        "base_step": _or_none(_ms, record.base_step_ms), "head_step": _or_none(_ms, record.head_step_ms),
    }


MEMORY_KIND_WORDS = {"rss-tree": "resident memory of the process tree",
                     "nvml-tree": "GPU memory of the process tree"}


def _mib(value):
    return f"{value / verdicts.MIB:.0f} MiB"


def memory_lines(results, verdict, show_memory=False):
    """The memory lines after the block: with a baseline, one per case whose head and base both have a
    sampled peak (the change, and whether it is a regression); without one, with show_memory, one per
    case with each framework's sampled peak."""
    lines = []
    if verdict.memory:
        for m in verdict.memory:
            mib = round(m.change_bytes / verdicts.MIB) or 0  # never "-0"
            change = f"{mib:+d} MiB ({change_percent(m.change_pct / 100):+.1f}%)"
            if m.verdict == verdicts.MEMORY_REGRESSION:
                said = "regression" if m.judged else "regression (reported, not judged)"
                mark = verdicts.FAIL_MARK if m.judged else verdicts.WARN_MARK
            else:
                said, mark = f"within {m.threshold_bytes / verdicts.MIB:.0f} MiB", ""
            lines.append(trusted(f"{mark}{_cell(m.case_id)} memory: OneFlow {_mib(m.head_bytes)}, base "
                         f"{_mib(m.base_bytes)}, {change} {said}"))
        return lines
    if not show_memory:
        return lines
    for case in results.cases:
        figures = [f"{LABELS.get(role, role)} {_mib(fw.sampled_peak_bytes)}"
                   for role, fw in case.frameworks.items() if fw.ok and fw.sampled_peak_bytes]
        kinds = {fw.sampled_memory_kind for fw in case.frameworks.values() if fw.ok and fw.sampled_peak_bytes}
        if figures and len(kinds) == 1:
            lines.append(trusted(f"{_cell(case.id)} peak {MEMORY_KIND_WORDS.get(kinds.pop(), 'memory')}: "
                                 f"{', '.join(figures)}"))
    return lines


def warmup_line(results, verdict):
    """With a baseline: each case's warm-up (worker start to first timed round), head against base: the
    median of each build's starts, and with more than one, each pair of processes' change; reported,
    never judged. None when no case has both."""
    parts = []
    for row in verdict.head_vs_base:
        case = next(c for c in results.cases if c.id == row.case_id)
        head, base = case.frameworks.get(HEAD), case.frameworks.get(BASE)
        if head is None or base is None or not head.setup_s or not base.setup_s:
            continue
        starts = {len(head.setup_starts_s) or 1, len(base.setup_starts_s) or 1}
        if starts == {1}:
            said = "one start each"
        elif len(starts) == 1:
            pairs = ", ".join(f"{change_percent(h / b - 1):+.1f}%"
                              for h, b in zip(head.setup_starts_s, base.setup_starts_s))
            said = f"the median of {starts.pop()} starts each; pair by pair {pairs}"
        else:
            said = f"the median of {len(head.setup_starts_s)} and {len(base.setup_starts_s)} starts"
        parts.append(f"{_cell(case.id)} {head.setup_s:.1f}s, base {base.setup_s:.1f}s "
                     f"({change_percent(head.setup_s / base.setup_s - 1):+.1f}%, {said})")
    if not parts:
        return None
    return trusted("Warm-up, from the worker's start to its first timed round (reported, not judged): "
                   + "; ".join(parts))


def speed_stats_notes_context(results, verdict, show_memory=False, suite=None):
    """What speed_stats_notes.md.j2 sees (see its header): the head-vs-base rows, confirmations, memory
    lines and the builds line; verdict is verdicts.judge's for these results."""
    with_base = verdicts.with_baseline(results)
    spec = _or_defaults(suite).disturbance
    rows = [_paired_row(c, row, verdict.rule, spec.cv_limit(results.device))
            for c, row in zip(results.cases, verdict.head_vs_base)]
    confirmed, cleared = [], []
    for case in results.cases:
        status = (case.confirmation or {}).get("status")
        entry = {"id": _cell(case.id), "flags": [_cell(f.split(": ", 1)[-1])
                                                 for f in case.confirmation["flags"]]
                 if status else []}
        if status == "confirmed":
            confirmed.append(entry)
        elif status == "cleared":
            cleared.append(entry)
    # A case whose pairs of processes disagree gets its own line, not "likely slower, not confirmed".
    likely = [row for row in rows if row["verdict"] == "inconclusive" and not row["disagree"]
              and row["leaning"] == verdicts.LIKELY_SLOWER]
    roles = [r for r in ROLE_LABELS if r in results.builds]
    # The role is named for the head only beside a base, and never for PyTorch.
    builds = [{"role": ROLE_LABELS[r] if (with_base or r != HEAD) and r != PYTORCH else "",
               "text": build_text(results.builds[r])}
              for r in roles]
    rule = verdict.rule
    baseline_missing = _cell(results.baseline_missing) if results.baseline_missing and not rows else None
    attribution = [view for view in map(attribution_context, results.cases) if view]
    return {
        "rows": rows, "likely": likely, "disagreeing": [row for row in rows if row["disagree"]],
        "hiding": [row for row in rows if row["hidden_work"]],
        "working": [row for row in rows if row["main_thread"]],
        # Cases whose start order moved their pairs by more than half the band, which the change cancels.
        "ordered": [row for row in rows if not row["disagree"] and row["start_order"] is not None
                    and abs(row["start_order"]) > rule["min_effect"] * 100 / 2],
        "attribution": attribution, "confirmed": confirmed,
        "cleared": cleared, "builds": builds,
        "memory": memory_lines(results, verdict, show_memory) + [
            line for line in (warmup_line(results, verdict),) if line],
        "baseline_missing": baseline_missing,
        "min_effect": rule["min_effect"] * 100, "confidence": rule["confidence"] * 100,
        "max_rounds": rule["max_rounds"], "trim": rule["trim"] * 100,
        # results.upgrade gave the rules of older runs the fields they lacked
        "process_pairs": rule["pairs"], "disagreement_pairs": rule["disagreement_pairs"],
        "settling_pairs": rule["settling_pairs"],
        "pairs_counted": bool(rule.get("process_sd")) and rule["pairs"] > 1,
        # Results of runs before the main thread's CPU time was measured: no such check to describe.
        "work_checked": any(case.paired is not None and case.paired.work for case in results.cases),
        "fail_mark": trusted(verdicts.FAIL_MARK), "warn_mark": trusted(verdicts.WARN_MARK),
    }


def baseline_table_context(report):
    """What the baseline table template sees of an analysis.compare Report: one entry per row, with
    its figures in printed units."""
    rows = []
    for row in report.rows:
        c = row.comparison
        rows.append({
            "case": _table_cell(row.case_id),
            "framework": row.label,
            "base": time_text(c.base_s, row.kind),
            "head": time_text(c.head_s, row.kind),
            "change": change_percent(c.change),
            "low": None if c.low is None else change_percent(c.low - 1),
            "high": None if c.high is None else change_percent(c.high - 1),
            "verdict": c.verdict,
            "text": _table_cell(c.text),
            "rounds": (c.base_rounds, c.head_rounds),
        })
    return {
        "rows": rows,
        "min_effect": report.min_effect * 100,
        "confidence": report.confidence * 100,
        "single_round_threshold": report.single_round_threshold * 100,
        "trim": report.trim * 100,
        "regressions": len(report.regressions),
        "base": report.base,
        "head": report.head,
        "fail_mark": trusted(verdicts.FAIL_MARK),
    }


def _table_cell(text):
    """Text safe inside one markdown table cell: the rule of the run's head-vs-base table (markdown_safe)."""
    return markdown_safe(text, 300)


def render_baseline_table(report, templates_dir=None):
    """The markdown table of an analysis.compare Report that follows the Speed stats block (no newline
    at the end)."""
    return render_template(BASELINE_TABLE_TEMPLATE, baseline_table_context(report), templates_dir)


def render_trend_index(plots):
    """The index.md of `speedstats trend`: a title, then each case's plot (analysis.trend's TrendPlots)."""
    return "# Speed over commits\n\n" + "".join(f"![{p.case_id}]({p.path.name})\n\n" for p in plots)


def render_docs_preview(base_url, owner, repo, number, templates_dir=None):
    # The base URL is the workflow's own input, printed as a link: trusted; the names are escaped.
    context = {"base_url": trusted(str(base_url).rstrip("/")), "owner": owner, "repo": repo, "number": number}
    return render_template(DOCS_PREVIEW_TEMPLATE, context, templates_dir)


def render_automerge_removed(job, label="automerge", templates_dir=None):
    return render_template(AUTOMERGE_REMOVED_TEMPLATE, {"job": job, "label": label}, templates_dir)


def bisect_report_context(report):
    """What the bisect report's template sees of an analysis.bisect Report."""
    from speedstats.analysis import bisect as search

    rows = [{"step": step, "head": head, "base": base, "case": _table_cell(case_id), "change": change,
             "verdict": _table_cell(verdict), "regression": report.steps[step - 1].cases[case_id].verdict
             == verdicts.REGRESSION}
            for step, head, base, case_id, change, verdict in search.report_rows(report)]
    builds = [{"number": search.number(i), "role": search.role(i, report.count), "text": report.builds[i]}
              for i in report.named_builds]
    return {"count": report.count, "lines": search.conclusion_lines(report), "rows": rows, "builds": builds,
            "fail_mark": trusted(verdicts.FAIL_MARK)}


def render_bisect_report(report, templates_dir=None):
    """The Markdown report of `speedstats bisect` (no newline at the end)."""
    return render_template(BISECT_REPORT_TEMPLATE, bisect_report_context(report), templates_dir)


SHIFT_ISSUE_TEMPLATE = "shift_issue.md.j2"
SHIFT_COMMENT_TEMPLATE = "shift_comment.md.j2"


def render_shift_issue(context, templates_dir=None):
    """The body of a tracking issue of a shift on the default branch (no newline at the end); the context
    is github.tracking's: its own words and figures marked trusted, every string from the data escaped."""
    return render_template(SHIFT_ISSUE_TEMPLATE, context, templates_dir)


def render_shift_comment(context, templates_dir=None):
    """The comment a later shift posts on an open tracking issue (no newline at the end)."""
    return render_template(SHIFT_COMMENT_TEMPLATE, context, templates_dir)
