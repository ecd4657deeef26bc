"""What a run measures: one table of the case kinds, and the lookups the other modules read from it.

A case kind is a suite's `kind:` and a results file's `kind`. Its row says all that the rest of the
package asks of a kind: the fields that size a case of it besides the batch (and the defaults its suite
cases take), how its id and its line in the run's log are made from them, how the Speed stats block
prints its times and how `speedstats parse` reads its lines back, whether the suite's thresholds judge
it, which worker step measures it (a class of speedstats.bench.worker), whether that step reads the
generated image folder, and which macro of the Speed stats templates prints it. Plain data: nothing of
the rest of the package is imported here, so every layer may read it.

The other modules look a kind up when they use it (case_kind, KIND_NAMES), never only when they are
imported, so a row added to CASE_KINDS is known to every one of them. Adding a kind is one row here, its
step in bench/worker.py and its lines in templates/speed_stats_macros.md.j2 (CONTRIBUTING.md, "Adding a
case kind").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

RESNET50 = "resnet50"
SWIN_DATALOADER = "swin_dataloader"
DEFAULT_DDP_WORLD_SIZE = 2  # the old bot's DDP cases ran on 2 ranks
# The units a time prints in: how many decimal digits of a second each is below it.
UNIT_DIGITS = {"ms": 3, "s": 0}


@dataclass(frozen=True)
class PrintedLines:
    """A kind's lines in the Speed stats block as `speedstats parse` reads them back (the kind's macro
    prints them). Parse makes the whole lines around these parts: `<framework> <printed> time: <per><unit>
    (= <total><unit> / <times>, <sizes>)` and, for a failed case, `<printed> batch <batch><failed_sizes>`
    before the case's id and error. The named groups of the parts must not be named fw, per, total,
    times, batch, id or error (the whole line's)."""

    sizes: str  # a regex of the sizes a time line ends with; each of its groups is the same in both lines
    failed_sizes: str  # a regex of what a failed case's line prints after its batch
    # The case's fields (batch_size, its size fields, ddp and world_size if it prints them) from the groups
    # of one of its lines: a time line's (the sizes') or a failed case's (with "batch").
    read: Callable[[dict], dict]


@dataclass(frozen=True)
class CaseKind:
    name: str  # its key in suites and results.json
    printed: str  # its name in the comment's lines ("OneFlow swin dataloader time: ...")
    # The fields of a results case that size it besides the batch, each required there; a suite case gives
    # each from its field or property of the same name (CaseSpec.input_shape, made of image_size).
    size_fields: tuple[str, ...]
    # Fields of a suite case whose default is this kind's own, where the case gives none.
    suite_defaults: dict = field(hash=False)
    id_format: str  # the usual id: batch_size and the size fields in braces
    ddp_id_format: str | None  # the usual id of a DDP case ({ranks}: empty on 2 ranks); None: no DDP
    log_format: str  # its sizes in the run's log, after its printed name: the same fields in braces
    unit: str  # how the comment prints its times: a key of UNIT_DIGITS
    decimals: int  # digits after the point of a printed time
    macro: str  # the macro of templates/speed_stats_macros.md.j2 that prints its figures' lines
    lines: PrintedLines  # those lines, as parse reads them back
    judged: bool  # the suite's thresholds (min_relative_speed, max_oneflow_ms) apply to it
    step: str  # the class of speedstats.bench.worker that measures one of its iterations
    uses_dataset: bool  # its step reads the generated image folder (the suite's `dataset:`)

    @property
    def ddp(self):
        """Whether a case of this kind may run under DDP."""
        return self.ddp_id_format is not None

    @property
    def scale(self):
        """Printed units per second."""
        return 10.0 ** UNIT_DIGITS[self.unit]

    @property
    def half_printed_unit_s(self):
        """Half the last printed digit, in seconds: how far a time may be from what the comment prints."""
        return 0.5 / (self.scale * 10**self.decimals)

    def time_text(self, seconds):
        """A time as the Speed stats block prints it (213.6ms, 0.047s)."""
        return f"{seconds * self.scale:.{self.decimals}f}{self.unit}"

    def seconds(self, printed):
        """The seconds of a figure as printed in this kind's unit ("4340.5" -> 4.3405), converted exactly."""
        value, digits = Decimal(printed), UNIT_DIGITS[self.unit]
        return float(value.scaleb(-digits) if digits else value)

    def sizes_of(self, case):
        """{size field: value} of a case (a suite case or a results case)."""
        return {name: getattr(case, name) for name in self.size_fields}

    def case_id(self, batch_size, ddp=False, world_size=DEFAULT_DDP_WORLD_SIZE, **sizes):
        """The usual id of a case of these sizes (its size fields given by name)."""
        if ddp and self.ddp_id_format is not None:
            ranks = "" if world_size == DEFAULT_DDP_WORLD_SIZE else str(world_size)
            return self.ddp_id_format.format(batch_size=batch_size, ranks=ranks, **sizes)
        return self.id_format.format(batch_size=batch_size, **sizes)

    def id_of(self, case):
        """The usual id of a case (a suite case or a results case), from its sizes."""
        return self.case_id(case.batch_size, ddp=case.ddp, world_size=case.world_size, **self.sizes_of(case))

    def log_text(self, case):
        """A case as the run's log names it: "resnet50, input_shape=[16, 3, 224, 224], ddp, world size=2"."""
        sizes = self.log_format.format(batch_size=case.batch_size, **self.sizes_of(case))
        ddp = f", ddp, world size={case.world_size}" if case.ddp else ""
        return f"{self.printed}, {sizes}{ddp}"


OLD_BOT_IMAGE_SIDE = 224  # the old bot's ResNet50 input side, which its failed lines do not print
OLD_BOT_LOADER_BATCH = 32  # the old bot's dataloader batch, which its time lines do not print


def _resnet50_fields(groups):
    """A ResNet50 line's fields: its input shape (a failed case's: its batch at the old bot's side) and
    its DDP ranks."""
    if groups.get("shape") is not None:
        shape = [int(size) for size in groups["shape"].split(", ")]
    else:
        shape = [int(groups["batch"]), 3, OLD_BOT_IMAGE_SIDE, OLD_BOT_IMAGE_SIDE]
    ddp = groups.get("ws") is not None
    return {"batch_size": shape[0], "input_shape": shape, "ddp": ddp,
            "world_size": int(groups["ws"]) if ddp else 1}


def _swin_dataloader_fields(groups):
    """A dataloader line's fields: its workers, and its batch where the line prints one."""
    batch = groups.get("batch")
    return {"batch_size": int(batch) if batch is not None else OLD_BOT_LOADER_BATCH,
            "num_workers": int(groups["workers"])}


_DDP_RANKS = r"(?P<ddp>, ddp, world size=(?P<ws>\d+))?"

CASE_KINDS = (
    CaseKind(
        name=RESNET50, printed="resnet50", size_fields=("input_shape",), suite_defaults={},
        id_format="resnet50-bs{batch_size}", ddp_id_format="resnet50-ddp{ranks}-bs{batch_size}",
        log_format="input_shape={input_shape}", unit="ms", decimals=1, macro="resnet50",
        lines=PrintedLines(sizes=r"input_shape=\[(?P<shape>\d+(?:, \d+)*)\]" + _DDP_RANKS,
                           failed_sizes=r"(?:, ddp, world size=(?P<ws>\d+))?", read=_resnet50_fields),
        judged=True, step="ResNet50Step", uses_dataset=False,
    ),
    CaseKind(
        name=SWIN_DATALOADER, printed="swin dataloader", size_fields=("num_workers",),
        suite_defaults={"num_workers": 0}, id_format="swin-dataloader-w{num_workers}", ddp_id_format=None,
        log_format="batch {batch_size}, num_workers={num_workers}", unit="s", decimals=3,
        macro="swin_dataloader",
        lines=PrintedLines(sizes=r"num_workers=(?P<workers>\d+)",
                           failed_sizes=r", num_workers=(?P<workers>\d+)", read=_swin_dataloader_fields),
        judged=False, step="DataLoaderBatches", uses_dataset=True,
    ),
)


class _KindNames(Sequence):
    """The names of the kinds in CASE_KINDS as the table is when they are read (a field's `choices`)."""

    def _names(self):
        return tuple(kind.name for kind in CASE_KINDS)

    def __getitem__(self, index):
        return self._names()[index]

    def __len__(self):
        return len(CASE_KINDS)

    def __repr__(self):
        return repr(self._names())


KIND_NAMES = _KindNames()


def case_kind(name):
    """The CaseKind of a name, or None for an unknown one."""
    return next((kind for kind in CASE_KINDS if kind.name == name), None)


def size_field_names():
    """Every field that sizes a case of some kind, in the table's order."""
    return tuple(dict.fromkeys(name for kind in CASE_KINDS for name in kind.size_fields))


def case_id_for(kind, batch_size, ddp=False, world_size=DEFAULT_DDP_WORLD_SIZE, **sizes):
    """The suite id of a case: resnet50-bs16, resnet50-ddp-bs16, swin-dataloader-w4 (its size fields
    given by name: num_workers=4).

    A DDP run on other than 2 ranks gets its own id (resnet50-ddp4-bs16), so the 2-rank thresholds
    of the default suite do not apply to it.
    """
    found = case_kind(kind)
    if found is None:
        raise ValueError(f"unknown case kind {kind!r}")
    return found.case_id(batch_size, ddp=ddp, world_size=world_size, **sizes)
