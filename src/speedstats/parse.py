"""Reading Speed stats back into results, so the history of an existing bot can be re-checked.

Three forms are accepted: the comment body as the API returns it (<details> wrapper and code
fence), the text as GitHub shows it ("Speed stats:", then the stats), and the old bot's raw log
(the stats lines among other log lines, maybe with the runner's timestamps). Lines that are not part
of a block are skipped; a line that starts like a stats line but does not parse is an error naming
its line number. Marks (✔️/❌) are ignored: `render` recomputes the verdict.

Figures come from printed decimals and are converted exactly (4340.5ms -> total_s 4.3405), so
rendering the parsed results prints the same text again. The results are those of the default
suite on "cuda": case ids follow `case_id_for`, the GPU name comes from the GPU line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal

from speedstats.casekinds import CASE_KINDS, RESNET50, SWIN_DATALOADER, case_id_for, case_kind
from speedstats.contenders import HEAD, PYTORCH, SPEED_STATS_ROLES, contender
from speedstats.errors import UserError
from speedstats.results import (
    CaseResult,
    FrameworkResult,
    Results,
    check_count,
    check_framework,
    check_input_shape,
)

PARSED_SUITE = "default"
PARSED_DEVICE = "cuda"
UNKNOWN_GPU = "unknown"
SWIN_DATALOADER_BATCH_SIZE = 32  # the old bot's dataloader batch, never printed
SNIPPET_LIMIT = 120


_NUMBER = r"\d+(?:\.\d+)?"
_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z\s")  # a runner log line's prefix
_MARKS = re.compile(r"^\s*((?:(?:\u2714\ufe0f?|\u274c)\s*)*)")
_HEADER = re.compile(r"^(?:<summary>\s*)?Speed stats:\s*(?:</summary>)?$")
_GPU = re.compile(r"^GPU Name:(?P<name>.*)$")
_RESNET = re.compile(
    rf"^(?P<fw>OneFlow|PyTorch) resnet50 time: (?P<per>{_NUMBER})ms \(= (?P<total>{_NUMBER})ms / "
    r"(?P<times>\d+),"
    r" input_shape=\[(?P<shape>\d+(?:, \d+)*)\](?P<ddp>, ddp, world size=(?P<ws>\d+))?\)$"
)
_SWIN = re.compile(
    rf"^(?P<fw>OneFlow|PyTorch) swin dataloader time: (?P<per>{_NUMBER})s \(= (?P<total>{_NUMBER})s"
    r" / (?P<times>\d+), num_workers=(?P<workers>\d+)\)$"
)
_RELATIVE = re.compile(
    rf"^Relative speed: (?P<ratio>{_NUMBER}) \(= (?P<pt>{_NUMBER})(?P<unit>ms|s) / "
    rf"(?P<of>{_NUMBER})(?P=unit)\)$"
)
_NAMED = r"(?: \(case (?P<id>[^()]+?)\))?"  # a case whose id is not the usual one for its sizes
_FAILED_RESNET = re.compile(
    rf"^resnet50 batch (?P<batch>\d+)(?:, ddp, world size=(?P<ws>\d+))?{_NAMED}: (?P<error>.+)$")
_FAILED_SWIN = re.compile(rf"^swin dataloader batch (?P<batch>\d+), num_workers=(?P<workers>\d+){_NAMED}: "
                          r"(?P<error>.+)$")
_RUN_FAILED = re.compile(r"^speed job failed: (?P<error>.+)$")
_NO_RESULTS = re.compile(r"^speed job produced no results$")
# What a stats line starts with; such a line must parse in full, and a line that is only the start of
# one of these phrases (at least TRUNCATED_MIN characters of it) was cut off.
_STATS_START = re.compile(r"^(?:(?:OneFlow|PyTorch) (?:resnet50|swin)|Relative speed|GPU Name)")
_STATS_PHRASES = tuple(f"{contender(role).framework} {kind.printed} time:" for role in SPEED_STATS_ROLES
                       for kind in CASE_KINDS) + ("Relative speed:", "GPU Name:")
TRUNCATED_MIN = 4
_FAILED_START = re.compile(r"^(?:resnet50 batch|swin dataloader|speed job)")
_TIME_LINES = {RESNET50: _RESNET, SWIN_DATALOADER: _SWIN}
_SAME_CASE = {RESNET50: ("shape", "ddp", "ws"), SWIN_DATALOADER: ("workers",)}  # the groups both lines share


@dataclass
class _Half:
    """One framework's time line of a case."""

    line: int
    kind: str
    match: re.Match

    def same_case(self, other):
        return self.kind == other.kind and all(self.match.group(k) == other.match.group(k)
                                               for k in _SAME_CASE[self.kind])


@dataclass
class _Block:
    gpu_name: str | None = None
    cases: list[CaseResult] = field(default_factory=list)
    error: str | None = None
    closed: bool = False  # a run-level line ends the block's stats

    @property
    def empty(self):
        return self.gpu_name is None and not self.cases and self.error is None and not self.closed


def _snippet(text):
    text = text.strip()
    return text if len(text) <= SNIPPET_LIMIT else text[: SNIPPET_LIMIT - 1] + "\u2026"


def _seconds(text, unit):
    value = Decimal(text)
    return float(value.scaleb(-3) if unit == "ms" else value)


def _default_times(case_id):
    from speedstats.suite import load_suite

    spec = load_suite(profile=PARSED_SUITE).case(case_id)
    return spec.times if spec is not None else 0  # 0: not known, and not printed for a failed case


class _Parser:
    def __init__(self, where, gpu_name):
        self.where = where
        self.default_gpu = gpu_name
        self.blocks: list[_Block] = []
        self.oneflow: _Half | None = None
        self.pytorch: _Half | None = None

    def fail(self, number, message):
        raise UserError(f"{self.where}: line {number}: {message}")

    def current_block(self):
        if not self.blocks:
            self.blocks.append(_Block())
        return self.blocks[-1]

    def expect_no_open_case(self, number, text):
        if self.oneflow is not None:
            missing = "Relative speed" if self.pytorch is not None else "PyTorch"
            self.fail(number, f"expected the {missing} line of the case at line {self.oneflow.line}, "
                              f"got: {_snippet(text)!r}")

    def feed(self, number, raw):
        text = raw.rstrip()
        stamp = _TIMESTAMP.match(text)
        if stamp:
            text = text[stamp.end():]
        marks = _MARKS.match(text)
        had_fail_mark = "\u274c" in marks.group(1)
        text = text[marks.end():]
        if _HEADER.match(text):
            self.expect_no_open_case(number, text)
            self.blocks.append(_Block())
        elif _STATS_START.match(text):
            self.stats_line(number, text)
        elif len(text) >= TRUNCATED_MIN and any(p.startswith(text) for p in _STATS_PHRASES):
            self.fail(number, f"truncated or malformed stats line: {_snippet(text)!r}")
        elif had_fail_mark and _FAILED_START.match(text):
            self.failure_line(number, text)

    def stats_line(self, number, text):
        gpu = _GPU.match(text)
        if gpu:
            self.expect_no_open_case(number, text)
            if not self.blocks or not self.blocks[-1].empty:
                self.blocks.append(_Block())
            self.blocks[-1].gpu_name = gpu.group("name").strip()
            return
        for kind, pattern in _TIME_LINES.items():
            match = pattern.match(text)
            if match:
                self.time_line(number, text, _Half(number, kind, match))
                return
        match = _RELATIVE.match(text)
        if match:
            self.relative_line(number, text, match)
            return
        self.fail(number, f"truncated or malformed stats line: {_snippet(text)!r}")

    def time_line(self, number, text, half):
        if half.match.group("fw") == "OneFlow":
            self.expect_no_open_case(number, text)
            self.current_block()
            self.oneflow = half
            return
        if self.oneflow is None or self.pytorch is not None:
            self.fail(number, f"a PyTorch line must follow a OneFlow line: {_snippet(text)!r}")
        if not self.oneflow.same_case(half):
            self.fail(number, f"the PyTorch line does not match the OneFlow line at line {self.oneflow.line}")
        self.pytorch = half

    def relative_line(self, number, text, match):
        if self.pytorch is None:
            self.fail(number, f"a Relative speed line must follow a PyTorch line: {_snippet(text)!r}")
        of, pt = self.oneflow.match, self.pytorch.match
        unit = case_kind(self.oneflow.kind).unit
        if match.group("unit") != unit or (Decimal(match.group("pt")), Decimal(match.group("of"))) != (
            Decimal(pt.group("per")), Decimal(of.group("per"))
        ):
            self.fail(number, f"the Relative speed line's times do not match the case's "
                              f"({pt.group('per')}{unit} / {of.group('per')}{unit}): {_snippet(text)!r}")
        self.blocks[-1].cases.append(self.checked(self.case(unit), self.oneflow.line))
        self.oneflow = self.pytorch = None

    def checked(self, case, number):
        """The case, once its figures make sense (positive times, per-iteration = total / times)."""
        where = f"{self.where}: line {number}"
        check_count(case.batch_size, "batch_size", where)
        if case.input_shape is not None:
            check_input_shape(case.input_shape, case.batch_size, where)
        if case.ddp:
            check_count(case.world_size, "world size", where)
        for name, fw in case.frameworks.items():
            check_framework(fw, case.kind, f"{where} ({name})")
        return case

    def case(self, unit):
        kind, of, pt = self.oneflow.kind, self.oneflow.match, self.pytorch.match
        frameworks = {
            name: FrameworkResult(
                total_s=_seconds(m.group("total"), unit),
                per_iter_s=_seconds(m.group("per"), unit),
                times=int(m.group("times")),
            )
            for name, m in ((HEAD, of), (PYTORCH, pt))
        }
        times = int(of.group("times"))
        if kind == RESNET50:
            shape = [int(x) for x in of.group("shape").split(", ")]
            ddp = of.group("ddp") is not None
            world_size = int(of.group("ws")) if ddp else 1
            return CaseResult(
                id=case_id_for(kind, shape[0], ddp=ddp, world_size=world_size), kind=kind,
                batch_size=shape[0], times=times, input_shape=shape, ddp=ddp, world_size=world_size,
                frameworks=frameworks,
            )
        workers = int(of.group("workers"))
        return CaseResult(
            id=case_id_for(kind, SWIN_DATALOADER_BATCH_SIZE, num_workers=workers), kind=kind,
            batch_size=SWIN_DATALOADER_BATCH_SIZE, times=times, num_workers=workers, frameworks=frameworks,
        )

    def failure_line(self, number, text):
        self.expect_no_open_case(number, text)
        block = self.current_block()
        match = _FAILED_RESNET.match(text)
        if match:
            batch, ddp = int(match.group("batch")), match.group("ws") is not None
            world_size = int(match.group("ws")) if ddp else 1
            case_id = match.group("id") or case_id_for(RESNET50, batch, ddp=ddp, world_size=world_size)
            block.cases.append(self.checked(CaseResult(
                id=case_id, kind=RESNET50, batch_size=batch, times=_default_times(case_id),
                input_shape=[batch, 3, 224, 224], ddp=ddp, world_size=world_size, error=match.group("error"),
            ), number))
            return
        match = _FAILED_SWIN.match(text)
        if match:
            workers = int(match.group("workers"))
            case_id = match.group("id") or case_id_for(SWIN_DATALOADER, int(match.group("batch")),
                                                       num_workers=workers)
            block.cases.append(self.checked(CaseResult(
                id=case_id, kind=SWIN_DATALOADER, batch_size=int(match.group("batch")),
                times=_default_times(case_id), num_workers=workers, error=match.group("error"),
            ), number))
            return
        match = _RUN_FAILED.match(text)
        if match or _NO_RESULTS.match(text):
            block.error = match.group("error") if match else None
            block.closed = True
            return
        self.fail(number, f"truncated or malformed failure line: {_snippet(text)!r}")

    def finish(self):
        if self.oneflow is not None:
            missing = "Relative speed" if self.pytorch is not None else "PyTorch"
            self.fail(self.oneflow.line, f"the case is cut off: no {missing} line follows")
        return [
            Results(
                suite=PARSED_SUITE, device=PARSED_DEVICE,
                gpu_name=self.default_gpu if b.gpu_name is None else b.gpu_name,
                cases=b.cases, error=b.error,
            )
            for b in self.blocks
        ]


def parse_blocks(text, where="input", gpu_name=UNKNOWN_GPU):
    """Every Speed stats block in text, each as Results; gpu_name is used where no GPU line is."""
    parser = _Parser(where, gpu_name)
    for number, line in enumerate(text.splitlines(), start=1):
        parser.feed(number, line)
    return parser.finish()


def parse_speed_stats(text, where="input", block=None, gpu_name=UNKNOWN_GPU):
    """The one Speed stats block in text as Results; block (1-based) picks one of several."""
    blocks = parse_blocks(text, where, gpu_name)
    if not blocks:
        raise UserError(f"{where}: no Speed stats found")
    if block is None:
        if len(blocks) > 1:
            raise UserError(f"{where}: {len(blocks)} Speed stats blocks found; choose one with --block N")
        return blocks[0]
    if not 1 <= block <= len(blocks):
        raise UserError(f"{where}: --block {block}: there are {len(blocks)} Speed stats block(s)")
    return blocks[block - 1]
