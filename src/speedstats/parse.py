"""Reading Speed stats back into results, so the history of an existing bot can be re-checked.

Three forms are accepted: the comment body as the API returns it (<details> wrapper and code
fence), the text as GitHub shows it ("Speed stats:", then the stats), and the old bot's raw log
(the stats lines among other log lines, maybe with the runner's timestamps). Lines that are not part
of a block are skipped; a line that starts like a stats line but does not parse is an error naming
its line number. Marks (✔️/❌) are ignored: `render` recomputes the verdict.

Figures come from printed decimals and are converted exactly (4340.5ms -> total_s 4.3405), so
rendering the parsed results prints the same text again. The results are those of the default
suite on "cuda": case ids are the usual ones of their kinds and sizes (speedstats.casekinds), the GPU
name comes from the GPU line. Each kind's lines are read as its row of casekinds.CASE_KINDS declares them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal

from speedstats import casekinds
from speedstats.contenders import HEAD, PYTORCH, SPEED_STATS_ROLES, contender
from speedstats.errors import UserError
from speedstats.results import CaseResult, FrameworkResult, Results, check_count, check_framework, check_sizes

PARSED_SUITE = "default"
PARSED_DEVICE = "cuda"
UNKNOWN_GPU = "unknown"
SNIPPET_LIMIT = 120


_NUMBER = r"\d+(?:\.\d+)?"
_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z\s")  # a runner log line's prefix
_MARKS = re.compile(r"^\s*((?:(?:\u2714\ufe0f?|\u274c)\s*)*)")
_HEADER = re.compile(r"^(?:<summary>\s*)?Speed stats:\s*(?:</summary>)?$")
_GPU = re.compile(r"^GPU Name:(?P<name>.*)$")
_FRAMEWORKS = tuple(contender(role).framework for role in SPEED_STATS_ROLES)  # OneFlow, PyTorch
_FRAMEWORK = "(?P<fw>" + "|".join(map(re.escape, _FRAMEWORKS)) + ")"
_NAMED = r"(?: \(case (?P<id>[^()]+?)\))?"  # a case whose id is not the usual one for its sizes
_RUN_FAILED = re.compile(r"^speed job failed: (?P<error>.+)$")
_NO_RESULTS = re.compile(r"^speed job produced no results$")
_RUN_FAILED_START = "speed job"
_OTHER_STATS = ("Relative speed", "GPU Name")  # the stats lines of no kind, before their colon
TRUNCATED_MIN = 4


def _first_words(text):
    return " ".join(text.split()[:2])


def _starts(texts):
    return re.compile("^(?:" + "|".join(re.escape(_first_words(t)) for t in texts) + ")")


@dataclass(frozen=True)
class _KindLines:
    """A case kind's lines as parse matches them (speedstats.casekinds: CaseKind.lines)."""

    kind: casekinds.CaseKind
    time: re.Pattern
    failed: re.Pattern
    same_case: tuple  # the groups of the sizes, which a case's OneFlow and PyTorch lines share

    @classmethod
    def of(cls, kind):
        printed, unit, lines = re.escape(kind.printed), re.escape(kind.unit), kind.lines
        time = re.compile(rf"^{_FRAMEWORK} {printed} time: (?P<per>{_NUMBER}){unit} "
                          rf"\(= (?P<total>{_NUMBER}){unit} / (?P<times>\d+), {lines.sizes}\)$")
        failed = re.compile(rf"^{printed} batch (?P<batch>\d+){lines.failed_sizes}{_NAMED}: (?P<error>.+)$")
        return cls(kind, time, failed, tuple(re.compile(lines.sizes).groupindex))


class _Lines:
    """The lines of a Speed stats block, as the case kinds' table is when a parse starts."""

    def __init__(self):
        self.kinds = [_KindLines.of(kind) for kind in casekinds.CASE_KINDS]
        units = sorted({kind.unit for kind in casekinds.CASE_KINDS}, key=lambda unit: (-len(unit), unit))
        self.relative = re.compile(
            rf"^Relative speed: (?P<ratio>{_NUMBER}) \(= (?P<pt>{_NUMBER})(?P<unit>{'|'.join(units)}) / "
            rf"(?P<of>{_NUMBER})(?P=unit)\)$"
        )
        # What a stats line or a failed case's line starts with (its first two words); such a line must
        # parse in full, and a line that is only the start of a stats phrase (at least TRUNCATED_MIN
        # characters of it) was cut off.
        time_phrases = tuple(f"{framework} {kind.printed} time:" for framework in _FRAMEWORKS
                             for kind in casekinds.CASE_KINDS)
        self.stats_phrases = time_phrases + tuple(f"{phrase}:" for phrase in _OTHER_STATS)
        self.stats_start = _starts(time_phrases + _OTHER_STATS)
        self.failed_start = _starts([f"{kind.printed} batch" for kind in casekinds.CASE_KINDS]
                                    + [_RUN_FAILED_START])


@dataclass
class _Half:
    """One framework's time line of a case."""

    line: int
    lines: _KindLines  # of its kind
    match: re.Match

    def same_case(self, other):
        return self.lines is other.lines and all(self.match.group(k) == other.match.group(k)
                                                 for k in self.lines.same_case)


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


def _default_times(case_id):
    from speedstats.suite import load_suite

    spec = load_suite(profile=PARSED_SUITE).case(case_id)
    return spec.times if spec is not None else 0  # 0: not known, and not printed for a failed case


class _Parser:
    def __init__(self, where, gpu_name):
        self.where = where
        self.default_gpu = gpu_name
        self.lines = _Lines()
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
        elif self.lines.stats_start.match(text):
            self.stats_line(number, text)
        elif len(text) >= TRUNCATED_MIN and any(p.startswith(text) for p in self.lines.stats_phrases):
            self.fail(number, f"truncated or malformed stats line: {_snippet(text)!r}")
        elif had_fail_mark and self.lines.failed_start.match(text):
            self.failure_line(number, text)

    def stats_line(self, number, text):
        gpu = _GPU.match(text)
        if gpu:
            self.expect_no_open_case(number, text)
            if not self.blocks or not self.blocks[-1].empty:
                self.blocks.append(_Block())
            self.blocks[-1].gpu_name = gpu.group("name").strip()
            return
        for lines in self.lines.kinds:
            match = lines.time.match(text)
            if match:
                self.time_line(number, text, _Half(number, lines, match))
                return
        match = self.lines.relative.match(text)
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
        kind = self.oneflow.lines.kind
        unit = kind.unit
        if match.group("unit") != unit or (Decimal(match.group("pt")), Decimal(match.group("of"))) != (
            Decimal(pt.group("per")), Decimal(of.group("per"))
        ):
            self.fail(number, f"the Relative speed line's times do not match the case's "
                              f"({pt.group('per')}{unit} / {of.group('per')}{unit}): {_snippet(text)!r}")
        self.blocks[-1].cases.append(self.checked(self.case(kind), self.oneflow.line))
        self.oneflow = self.pytorch = None

    def checked(self, case, number):
        """The case, once its figures make sense (positive times, per-iteration = total / times)."""
        where = f"{self.where}: line {number}"
        check_count(case.batch_size, "batch_size", where)
        check_sizes(case, where)
        if case.ddp:
            check_count(case.world_size, "world size", where)
        for name, fw in case.frameworks.items():
            check_framework(fw, case.kind, f"{where} ({name})")
        return case

    def case(self, kind):
        of, pt = self.oneflow.match, self.pytorch.match
        frameworks = {
            name: FrameworkResult(
                total_s=kind.seconds(m.group("total")),
                per_iter_s=kind.seconds(m.group("per")),
                times=int(m.group("times")),
            )
            for name, m in ((HEAD, of), (PYTORCH, pt))
        }
        times = int(of.group("times"))
        fields = kind.lines.read(of.groupdict())
        return CaseResult(id=kind.case_id(**fields), kind=kind.name, times=times, frameworks=frameworks,
                          **fields)

    def failure_line(self, number, text):
        self.expect_no_open_case(number, text)
        block = self.current_block()
        for lines in self.lines.kinds:
            match = lines.failed.match(text)
            if match:
                kind = lines.kind
                fields = kind.lines.read(match.groupdict())
                case_id = match.group("id") or kind.case_id(**fields)
                block.cases.append(self.checked(CaseResult(
                    id=case_id, kind=kind.name, times=_default_times(case_id), error=match.group("error"),
                    **fields,
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
