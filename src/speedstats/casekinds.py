"""What a run measures: one table of the case kinds, and the lookups the other modules read from it.

A case kind is a suite's `kind:` and a results file's `kind`: how the case's id is made from its sizes,
the unit its times print in, whether the suite's thresholds judge it, which worker step measures it
(a class of speedstats.bench.worker) and whether that step reads the generated image folder. Plain data:
nothing of the rest of the package is imported here, so every layer may read it. Adding a kind is one
row of CASE_KINDS, a step in the worker and a macro of the same name in the Speed stats templates.
"""

from __future__ import annotations

from dataclasses import dataclass

RESNET50 = "resnet50"
SWIN_DATALOADER = "swin_dataloader"
DEFAULT_DDP_WORLD_SIZE = 2  # the old bot's DDP cases ran on 2 ranks


@dataclass(frozen=True)
class CaseKind:
    name: str  # its key in suites and results.json
    printed: str  # its name in the comment's lines ("OneFlow swin dataloader time: ...")
    id_format: str  # the usual id: fields of the case in braces
    ddp_id_format: str | None  # the usual id of a DDP case ({ranks}: empty on 2 ranks); None: no DDP
    sized_by: str  # the field of a results case that sizes it besides the batch: input_shape or num_workers
    unit: str  # how the comment prints its times: "ms" or "s"
    decimals: int  # digits after the point of a printed time
    judged: bool  # the suite's thresholds (min_relative_speed, max_oneflow_ms) apply to it
    step: str  # the class of speedstats.bench.worker that measures one of its iterations
    uses_dataset: bool  # its step reads the generated image folder (the suite's `dataset:`)
    default_num_workers: int | None  # a case's num_workers when the suite gives none

    @property
    def ddp(self):
        """Whether a case of this kind may run under DDP."""
        return self.ddp_id_format is not None

    @property
    def scale(self):
        """Printed units per second."""
        return 1000.0 if self.unit == "ms" else 1.0

    @property
    def half_printed_unit_s(self):
        """Half the last printed digit, in seconds: how far a time may be from what the comment prints."""
        return 0.5 / (self.scale * 10**self.decimals)

    def time_text(self, seconds):
        """A time as the Speed stats block prints it (213.6ms, 0.047s)."""
        return f"{seconds * self.scale:.{self.decimals}f}{self.unit}"

    def case_id(self, batch_size, ddp=False, num_workers=None, world_size=DEFAULT_DDP_WORLD_SIZE):
        if ddp and self.ddp_id_format is not None:
            ranks = "" if world_size == DEFAULT_DDP_WORLD_SIZE else str(world_size)
            return self.ddp_id_format.format(batch_size=batch_size, ranks=ranks)
        return self.id_format.format(batch_size=batch_size, num_workers=num_workers)


CASE_KINDS = (
    CaseKind(name=RESNET50, printed="resnet50", id_format="resnet50-bs{batch_size}",
             ddp_id_format="resnet50-ddp{ranks}-bs{batch_size}", sized_by="input_shape", unit="ms",
             decimals=1, judged=True, step="ResNet50Step", uses_dataset=False, default_num_workers=None),
    CaseKind(name=SWIN_DATALOADER, printed="swin dataloader", id_format="swin-dataloader-w{num_workers}",
             ddp_id_format=None, sized_by="num_workers", unit="s", decimals=3,
             judged=False, step="DataLoaderBatches", uses_dataset=True, default_num_workers=0),
)

KIND_NAMES = tuple(k.name for k in CASE_KINDS)
JUDGED_KINDS = tuple(k.name for k in CASE_KINDS if k.judged)
_BY_NAME = {k.name: k for k in CASE_KINDS}


def case_kind(name):
    """The CaseKind of a name, or None for an unknown one."""
    return _BY_NAME.get(name)


def case_id_for(kind, batch_size, ddp=False, num_workers=None, world_size=DEFAULT_DDP_WORLD_SIZE):
    """The suite id of a case: resnet50-bs16, resnet50-ddp-bs16, swin-dataloader-w4.

    A DDP run on other than 2 ranks gets its own id (resnet50-ddp4-bs16), so the 2-rank thresholds
    of the default suite do not apply to it.
    """
    found = case_kind(kind)
    if found is None:
        raise ValueError(f"unknown case kind {kind!r}")
    return found.case_id(batch_size, ddp=ddp, num_workers=num_workers, world_size=world_size)
