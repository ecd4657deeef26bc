"""What a worker measures: the spec the runner writes to the worker's control folder (spec.json).

The runner and the worker are the same version of this package, so the JSON is read strictly: a
field missing or unknown is a bug, and fails loudly.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from speedstats.casekinds import RESNET50


@dataclass
class WorkerSpec:
    framework: str  # the family the worker imports: "oneflow" or "pytorch" (see speedstats.contenders)
    device: str  # "cpu" or "cuda"
    ddp: bool = False
    role: str | None = None  # the contender it measures, for its own logs
    kind: str = RESNET50  # a case kind (speedstats.casekinds)
    batch_size: int = 1
    image_size: int = 224  # resnet50 cases: the input's side
    times: int = 1  # timed iterations in each round
    warmup: int = 0
    rounds: int = 1
    num_workers: int | None = None  # dataloader cases
    input_size: int = 224  # dataloader cases: the transform's output side
    dataset_dir: str | None = None  # dataloader cases: the generated ImageFolder
    mode: str | None = None  # how a ResNet50 step is measured (suite.MODES); None: the default mode
    model: str = "shared"  # "shared" (bench.models) or "library" (torchvision's, flowvision's)
    env: dict[str, str] = field(default_factory=dict)  # the suite's env: for this case
    timeout_s: float = 60.0  # from the worker's start to its last round
    seed: int = 0  # of the dataloader cases' image draws
    op_profile: bool | None = None  # profiled rounds also profile ops (bench.opprofile); None: on CUDA

    def to_json(self):
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text):
        return cls(**json.loads(text))
