"""The table of contenders (speedstats.contenders) and the worker spec: what the other modules read."""

import ast
import json
from pathlib import Path

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


def test_each_family_names_its_op_profiler_and_its_launcher():
    from speedstats.bench import opprofile

    for c in contenders.CONTENDERS:
        assert opprofile.PROFILERS[c.family].__name__ == c.op_profiler
        assert c.ddp_launcher[0].startswith(f"{c.package}.distributed.")
    assert contenders.framework_packages() == ("oneflow", "torch")
    assert contenders.build_family({"family": "pytorch"}) == "pytorch"
    assert contenders.build_family({}) == contenders.contender(contenders.HEAD).family  # older results


SRC = Path(__file__).resolve().parents[1] / "src" / "speedstats"
FAMILY_WORDS = {*contenders.FAMILIES, *contenders.ROLES}


def _family_words(node):
    """The family or role strings a node spells: a constant, or a tuple, list or set of them."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant) and i.value in FAMILY_WORDS]


def test_no_module_but_the_table_compares_a_family_string():
    """A branch on "oneflow" or "pytorch" asks the contender table instead (a field of its row), and a list
    of the families or roles (a flag's choices) is the table's FAMILIES or ROLES."""
    found = set()
    for path in sorted(SRC.rglob("*.py")):
        name = path.relative_to(SRC).as_posix()
        if name == "contenders.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), name)):
            if isinstance(node, ast.Compare):
                spelled = [w for side in (node.left, *node.comparators) for w in _family_words(side)]
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr == "get" and len(node.args) == 2):
                spelled = _family_words(node.args[1])  # a fallback family
            elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(_family_words(node)) > 1:
                spelled = _family_words(node)  # the families or roles listed out
            else:
                continue
            found.update(f"{name}:{node.lineno}: {word!r}" for word in spelled)
    assert sorted(found) == []


def test_the_build_probe_reads_what_each_framework_tells_of_itself():
    """Every framework package of the table has its reader of git commit and CUDA in the build probe."""
    from speedstats.bench import builds

    (readers,) = [node.value for node in ast.parse(builds.PROBE).body if isinstance(node, ast.Assign)
                  and [getattr(target, "id", None) for target in node.targets] == ["FRAMEWORK_DETAILS"]]
    assert sorted(key.value for key in readers.keys) == sorted(contenders.framework_packages())
