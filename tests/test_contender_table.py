"""The table of contenders (speedstats.contenders) and the worker spec: what the other modules read."""

import json

import pytest

from speedstats import contenders
from speedstats.bench.environment import package_versions
from speedstats.bench.workerspec import WorkerSpec
from speedstats.errors import UserError
from speedstats.results import case_from_dict


def test_the_contenders_of_a_run():
    assert contenders.ROLES == ("oneflow", "oneflow_base", "pytorch")
    assert (contenders.HEAD, contenders.BASE, contenders.PYTORCH) == contenders.ROLES
    assert contenders.SPEED_STATS_ROLES == ("oneflow", "pytorch")
    assert contenders.FAMILIES == ("oneflow", "pytorch")
    assert contenders.LABELS == {"oneflow": "OneFlow", "oneflow_base": "OneFlow base", "pytorch": "PyTorch"}
    assert contenders.ROLE_WORDS == {"oneflow": "head", "oneflow_base": "base", "pytorch": "PyTorch"}
    assert contenders.family_packages("oneflow") == ("oneflow", "flowvision")
    assert contenders.family_packages("pytorch") == ("torch", "torchvision", "timm")
    assert contenders.versioned_packages() == ("oneflow", "flowvision", "torch", "torchvision", "timm")
    assert contenders.of_family("jax") is None
    with pytest.raises(KeyError):
        contenders.contender("jax")


def test_contenders_of_one_family_share_its_framework_and_packages():
    for family in contenders.FAMILIES:
        members = [c for c in contenders.CONTENDERS if c.family == family]
        assert len({(c.framework, c.package, c.companions) for c in members}) == 1
    with pytest.raises(AttributeError):
        contenders.CONTENDERS[0].label = "x"  # frozen


def test_results_accept_every_role_and_nothing_else():
    figures = {"total_s": 1.0, "per_iter_s": 0.1, "times": 10}
    case = {"id": "resnet50-bs2", "kind": "resnet50", "batch_size": 2, "times": 10,
            "input_shape": [2, 3, 64, 64]}
    loaded = case_from_dict(dict(case, frameworks={role: figures for role in contenders.ROLES}), "r")
    assert list(loaded.frameworks) == list(contenders.ROLES)
    with pytest.raises(UserError, match=r"^r \(resnet50-bs2\): field 'frameworks' has an unknown key 'jax' "
                       r"\(one of oneflow, "
                       r"oneflow_base, pytorch\)$"):
        case_from_dict(dict(case, frameworks={"jax": figures}), "r")


def test_a_run_records_the_version_of_every_package_of_the_table():
    versions = package_versions()
    assert list(versions) == ["python", "speedstats", *contenders.versioned_packages()]


def test_the_worker_spec_goes_through_json_unchanged():
    spec = WorkerSpec(framework="oneflow", device="cpu", ddp=True, role="oneflow_base",
                      kind="swin_dataloader", batch_size=4, times=3, warmup=1, rounds=5, num_workers=2,
                      input_size=32, dataset_dir="imagefolder", mode="clean", env={"OMP_NUM_THREADS": "1"},
                      timeout_s=12.5)
    text = spec.to_json()
    assert json.loads(text)["role"] == "oneflow_base" and json.loads(text)["env"] == {"OMP_NUM_THREADS": "1"}
    assert WorkerSpec.from_json(text) == spec
    with pytest.raises(TypeError):
        WorkerSpec.from_json(json.dumps(dict(json.loads(text), colour="blue")))  # a field it does not know
