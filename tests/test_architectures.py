"""Which build runs on which GPU: each GPU's compute capability (NVML) against the architectures a
build's kernels were compiled for, checked before the device lock.

No GPU here: NVML is the stand-in of tests/fakenvml.py, answering for a GTX 1080 (6.1), a V100 (7.0),
an RTX 3080 Ti (8.6), an H100 (9.0) and a B200 (10.0). The architecture lists are the real ones:
torch 2.7.1's is read from the installed torch (frameworks tier), 2.14.1's is the one its wheel carries.
"""

import sys

import pytest

from fakenvml import fake_nvml, gpu
from helpers import make_wheel
from speedstats.bench import driver_check, machine_state
from speedstats.bench.driver_check import arch_runs_on, build_runs_on, check_architectures
from speedstats.errors import UserError

TORCH_2_7_1 = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]
TORCH_2_14_1 = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
GPUS = {
    "6.1": ("NVIDIA GeForce GTX 1080", (6, 1)),
    "7.0": ("Tesla V100-SXM2-32GB", (7, 0)),
    "8.6": ("NVIDIA GeForce RTX 3080 Ti", (8, 6)),
    "9.0": ("NVIDIA H100 80GB HBM3", (9, 0)),
    "10.0": ("NVIDIA B200", (10, 0)),
}
ADVICE_2_7_1 = ("use torch==2.7.1 torchvision==0.22.1 with `pytorch:` (its default build covers sm_50 to "
                "sm_90)")
ADVICE_2_8_0 = ("use torch==2.8.0 torchvision==0.23.0 with `pytorch:` (its default build, for CUDA 12.8, "
                "covers sm_70 to sm_120)")


@pytest.fixture
def nvml(monkeypatch):
    def install(capability, driver="580.95.05", cuda=13000):
        name, pair = GPUS[capability]
        module = fake_nvml([gpu(name=name, compute_capability=pair)], driver=driver, cuda=cuda)
        monkeypatch.setitem(sys.modules, "pynvml", module)
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        return module

    return install


def pytorch(version, archs, cuda="12.6"):
    entry = {"version": version, "cuda": cuda, "cuda_archs": archs}
    return {"family": "pytorch", "packages": {"torch": entry}}


def gpu_facts():
    gpus = machine_state.Gpus([0])
    try:
        return gpus.run_info()
    finally:
        gpus.close()


@pytest.mark.parametrize("arch, capability, runs", [
    ("sm_60", (6, 0), True),
    ("sm_60", (6, 1), True),  # a cubin runs on later minors of its major
    ("sm_61", (6, 0), False),
    ("sm_70", (7, 5), True),
    ("sm_86", (8, 9), True),
    ("sm_90", (10, 0), False),  # but never on another major
    ("sm_75", (6, 1), False),
    ("sm_90a", (9, 0), True),  # an arch-specific cubin runs on its own capability only
    ("sm_100a", (10, 3), False),
    ("compute_90", (10, 0), True),  # PTX is compiled by the driver for any newer GPU
    ("compute_90", (12, 0), True),
    ("compute_80", (7, 5), False),
    ("sm_120", (12, 0), True),
    ("sm_100", (12, 0), False),
    ("nonsense", (9, 0), False),
])
def test_the_matching_rule(arch, capability, runs):
    assert arch_runs_on(arch, capability) is runs


def test_nvml_reports_the_compute_capability(nvml):
    nvml("6.1")
    (facts,) = gpu_facts()
    assert (facts["name"], facts["compute_capability"]) == ("NVIDIA GeForce GTX 1080", "6.1")


@pytest.mark.parametrize("capability", ["6.1", "7.0", "8.6", "9.0"])
def test_torch_2_7_1_runs_on_pascal_to_hopper(nvml, capability):
    nvml(capability)
    check_architectures({"pytorch": pytorch("2.7.1", TORCH_2_7_1)}, gpu_facts())


def test_torch_2_7_1_on_blackwell_names_torch_2_8(nvml):
    nvml("10.0")
    with pytest.raises(UserError) as error:
        check_architectures({"pytorch": pytorch("2.7.1", TORCH_2_7_1)}, gpu_facts())
    assert str(error.value) == (
        "PyTorch build torch 2.7.1 (sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90) has no kernels for GPU 0 "
        f"NVIDIA B200 (compute capability 10.0): {ADVICE_2_8_0}")


@pytest.mark.parametrize("capability", ["8.6", "9.0", "10.0"])
def test_torch_2_14_1_runs_from_turing_on(nvml, capability):
    nvml(capability)
    check_architectures({"pytorch": pytorch("2.14.1", TORCH_2_14_1, cuda="13.0")}, gpu_facts())


@pytest.mark.parametrize("capability", ["6.1", "7.0"])
def test_torch_2_14_1_on_pascal_or_volta_names_torch_2_7_1(nvml, capability):
    nvml(capability)
    name, _ = GPUS[capability]
    with pytest.raises(UserError) as error:
        check_architectures({"pytorch": pytorch("2.14.1", TORCH_2_14_1, cuda="13.0")}, gpu_facts())
    assert str(error.value) == (
        f"PyTorch build torch 2.14.1 (sm_75 sm_80 sm_86 sm_90 sm_100 sm_120) has no kernels for GPU 0 {name} "
        f"(compute capability {capability}): {ADVICE_2_7_1}")


def test_a_build_that_does_not_tell_its_architectures_is_not_checked_by_a_list(nvml):
    nvml("6.1")  # the one-op probe decides for such a build (bench.gpu_probe, tests/test_run_gpus.py)
    oneflow = {"family": "oneflow", "packages": {"oneflow": {"version": "0.9.1.dev20240101+cu118",
                                                             "cuda": "11080", "cuda_archs": None}}}
    check_architectures({"oneflow": oneflow, "pytorch": pytorch("2.7.1", None)}, gpu_facts())


@pytest.mark.parametrize("capability", ["6.1", "7.0", "8.6"])
def test_pypi_oneflow_0_9_0_runs_from_pascal_to_ampere(nvml, capability):
    nvml(capability)
    oneflow = {"family": "oneflow", "packages": {"oneflow": {"version": "0.9.0", "cuda": "11070"}}}
    check_architectures({"oneflow": oneflow}, gpu_facts())


def test_pypi_oneflow_0_9_0_has_no_kernels_for_hopper(nvml):
    """Its liboneflow's fatbin holds sm_60 to sm_86 and no PTX (driver_check.KNOWN_ARCHS)."""
    nvml("9.0")
    oneflow = {"family": "oneflow", "packages": {"oneflow": {"version": "0.9.0", "cuda": "11070"}}}
    with pytest.raises(UserError) as error:
        check_architectures({"oneflow": oneflow}, gpu_facts())
    assert str(error.value) == (
        "OneFlow build oneflow 0.9.0 (sm_60 sm_61 sm_70 sm_75 sm_80 sm_86) has no kernels for GPU 0 NVIDIA "
        "H100 80GB HBM3 (compute capability 9.0): use a OneFlow build compiled for compute capability 9.0")


def test_a_oneflow_build_without_kernels_for_the_gpu_fails_naming_the_capability(nvml):
    nvml("10.0")
    oneflow = {"family": "oneflow", "packages": {"oneflow": {"version": "0.9.1+cu118", "cuda": "11.8",
                                                             "cuda_archs": ["sm_70", "sm_80", "sm_86"]}}}
    with pytest.raises(UserError, match=r"^OneFlow base build oneflow 0.9.1\+cu118 \(sm_70 sm_80 sm_86\) has "
                                        r"no kernels for GPU 0 NVIDIA B200 \(compute capability 10.0\): use "
                                        r"a OneFlow build compiled for compute capability 10.0$"):
        check_architectures({"oneflow_base": oneflow}, gpu_facts())


def test_a_gpu_older_than_every_pypi_build_says_so():
    with pytest.raises(UserError, match=r"GPU 0 Tesla K80 \(compute capability 3.7\): no PyTorch build on "
                                        r"PyPI has kernels for it$"):
        check_architectures({"pytorch": pytorch("2.7.1", TORCH_2_7_1)},
                            [{"index": 0, "name": "Tesla K80", "compute_capability": "3.7"}])


def test_the_advice_table_matches_the_rule():
    for _, _, archs in driver_check.PYTORCH_ARCH_BUILDS:
        assert archs == tuple(sorted(archs, key=lambda a: int(a[3:])))
    assert driver_check.pytorch_for((6, 1))[0] == "torch==2.7.1 torchvision==0.22.1"
    assert driver_check.pytorch_for((12, 0))[0] == "torch==2.8.0 torchvision==0.23.0"
    assert driver_check.pytorch_for((3, 7)) is None


# -- the installed torch (the image's) -------------------------------------------------------------


@pytest.mark.frameworks
def test_the_installed_torch_has_kernels_for_every_gpu_of_the_old_job(tmp_path):
    from speedstats.bench.builds import parse_build_spec, prepare_build

    request = parse_build_spec("pytorch", "pytorch", "installed")
    build = prepare_build(request, tmp_path, progress=lambda _: None)
    archs = build.provenance["packages"]["torch"]["cuda_archs"]
    assert archs == TORCH_2_7_1  # read by the probe from libtorch_cuda, without a GPU
    assert driver_check.PYTORCH_ARCH_BUILDS[0][2] == tuple(archs)
    for capability in ((6, 1), (7, 0), (8, 6), (9, 0)):  # GTX 1080, V100, RTX 3080 Ti, H100/H200
        assert build_runs_on(archs, capability), capability
    assert not build_runs_on(archs, (10, 0))


# -- `speedstats run --device cuda`: the check comes before the lock ---------------------------------


def stand_in_torch_wheels(folder, version, archs, cuda):
    """torch, torchvision and timm wheels whose import reports `version`, `cuda` and the architecture
    list `archs`, as torch 2.14.1's wheel would; a stand-in because the real one is 1 GB."""

    return [
        make_wheel(folder, "torch", version, {
            "torch/__init__.py": f'__version__ = "{version}"\nfrom torch import _C, version\n',
            "torch/version.py": f'cuda = "{cuda}"\ngit_version = "0123456789abcdef"\n',
            "torch/_C.py": f'def _cuda_getArchFlags():\n    return "{" ".join(archs)}"\n',
        }),
        make_wheel(folder, "torchvision", "0.29.1",
                   {"torchvision/__init__.py": 'import torch\n__version__ = "0.29.1"\n'}),
        make_wheel(folder, "timm", "1.0.31", {"timm/__init__.py": '__version__ = "1.0.31"\n'}),
    ]


def run_cuda(tmp_path, monkeypatch, capsys, *args):
    from speedstats.cli import main

    monkeypatch.setenv("SPEEDSTATS_LOCK_DIR", str(tmp_path / "locks"))
    out = tmp_path / "out"
    rc = main(["run", "--profile", "smoke", "--device", "cuda", "--out", str(out),
               "--cache-dir", str(tmp_path / "cache"), *args])
    err = capsys.readouterr().err
    assert list(out.iterdir()) == [] and not (tmp_path / "locks").exists()  # nothing written, no lock taken
    return rc, err.splitlines()[-1]


@pytest.mark.frameworks
def test_run_on_a_blackwell_gpu_with_the_image_torch_exits_2_before_the_lock(tmp_path, monkeypatch, capsys,
                                                                                nvml):
    nvml("10.0", driver="580.95.05", cuda=13000)
    rc, last = run_cuda(tmp_path, monkeypatch, capsys, "--only", "pytorch")  # OneFlow 0.9.0 has none either
    assert rc == 2
    assert last == (
        "speedstats: error: PyTorch build torch 2.7.1 (sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90) has no "
        f"kernels for GPU 0 NVIDIA B200 (compute capability 10.0): {ADVICE_2_8_0}")


@pytest.mark.frameworks
@pytest.mark.venv
def test_run_on_a_gtx_1080_with_torch_2_14_1_exits_2_naming_torch_2_7_1(tmp_path, monkeypatch, capsys, nvml):
    nvml("6.1", driver="580.95.05", cuda=13000)
    wheels = stand_in_torch_wheels(tmp_path / "wheels", "2.14.1", TORCH_2_14_1, "13.0")
    rc, last = run_cuda(tmp_path, monkeypatch, capsys, "--pytorch", " ".join(map(str, wheels)))
    assert rc == 2
    assert last == (
        "speedstats: error: PyTorch build torch 2.14.1 (sm_75 sm_80 sm_86 sm_90 sm_100 sm_120) has no "
        f"kernels for GPU 0 NVIDIA GeForce GTX 1080 (compute capability 6.1): {ADVICE_2_7_1}")
