"""Who a run measures: one table of the contenders, and the lookups the other modules read from it.

A contender is one build measured in a run: the OneFlow build under test (the head), optionally a base
OneFlow build the head is judged against, and PyTorch, the reference. Its role names it in
results.json (`frameworks` of a case, `builds`); its family says which framework its worker imports and
which packages make up its build. Plain data: nothing of the rest of the package is imported here, so
every layer may read it. Adding a contender is one row of CONTENDERS.
"""

from __future__ import annotations

from dataclasses import dataclass

HEAD = "oneflow"  # the OneFlow build under test
BASE = "oneflow_base"  # the OneFlow build the head is judged against, when a baseline is given
PYTORCH = "pytorch"


@dataclass(frozen=True)
class Contender:
    role: str  # its key in results.json
    family: str  # the framework its worker imports: "oneflow" or "pytorch"
    framework: str  # the framework's name as the comment prints it
    label: str  # this contender in progress lines and tables
    role_word: str  # its role in the builds line of the notes
    package: str  # the framework's package, the one whose version identifies the build
    companions: tuple[str, ...]  # packages installed with it into the same build
    in_speed_stats: bool  # has its lines in the Speed stats block
    ddp_launcher: tuple[str, ...]  # the module that starts a DDP case's ranks, with its fixed flags
    op_profiler: str  # its class in bench/opprofile.py, which times the framework's ops
    nvidia_wheel_libraries: bool  # its worker loads cuDNN and cuBLAS from the nvidia-* wheels' folders
    # Published for several CUDA versions and GPU generations (torch+cu118): where the driver or a GPU
    # does not fit one build, the advice names another to pick.
    builds_to_pick: bool

    @property
    def packages(self):
        return (self.package, *self.companions)


CONTENDERS = (
    Contender(role=HEAD, family="oneflow", framework="OneFlow", label="OneFlow", role_word="head",
              package="oneflow", companions=("flowvision",), in_speed_stats=True,
              ddp_launcher=("oneflow.distributed.launch",), op_profiler="OneFlowOps",
              nvidia_wheel_libraries=True, builds_to_pick=False),
    Contender(role=BASE, family="oneflow", framework="OneFlow", label="OneFlow base", role_word="base",
              package="oneflow", companions=("flowvision",), in_speed_stats=False,
              ddp_launcher=("oneflow.distributed.launch",), op_profiler="OneFlowOps",
              nvidia_wheel_libraries=True, builds_to_pick=False),
    Contender(role=PYTORCH, family="pytorch", framework="PyTorch", label="PyTorch", role_word="PyTorch",
              package="torch", companions=("torchvision", "timm"), in_speed_stats=True,
              ddp_launcher=("torch.distributed.run", "--nnodes", "1"), op_profiler="TorchOps",
              nvidia_wheel_libraries=False, builds_to_pick=True),
)

ROLES = tuple(c.role for c in CONTENDERS)
SPEED_STATS_ROLES = tuple(c.role for c in CONTENDERS if c.in_speed_stats)  # head OneFlow and PyTorch
FAMILIES = tuple(dict.fromkeys(c.family for c in CONTENDERS))
LABELS = {c.role: c.label for c in CONTENDERS}
ROLE_WORDS = {c.role: c.role_word for c in CONTENDERS}
_BY_ROLE = {c.role: c for c in CONTENDERS}
_BY_FAMILY = {family: next(c for c in CONTENDERS if c.family == family) for family in FAMILIES}


def contender(role):
    """The Contender of a role; KeyError for an unknown one."""
    return _BY_ROLE[role]


def of_family(family):
    """A Contender of the family (its first), for what a family's contenders share: framework name,
    package, companions; None for an unknown family."""
    return _BY_FAMILY.get(family)


def build_family(provenance):
    """The family a build's record names; one that names none (results of older runs) is the head's."""
    return provenance.get("family", _BY_ROLE[HEAD].family)


def framework_packages():
    """The framework package of each family: what a worker imports to measure."""
    return tuple(_BY_FAMILY[family].package for family in FAMILIES)


def family_packages(family):
    """The packages of a build of this family: the framework's first, then its companions."""
    return _BY_FAMILY[family].packages


def versioned_packages():
    """Every package whose version a run records: each family's in turn."""
    return tuple(dict.fromkeys(name for family in FAMILIES for name in family_packages(family)))
