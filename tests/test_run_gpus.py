"""`speedstats run` checks the GPUs before it takes the device lock: a case that needs more GPUs than the
runner has is skipped with a line after the block (exact bytes), or, with the suite's `too_few_gpus:
fail`, the run exits 2 naming it; a build that cannot run on a GPU exits 2 naming the build and the GPU.

No GPU here. NVML is the stand-in of tests/fakenvml.py; where a run goes on to measure, the measuring of
a case on the GPU (SuiteRunner.run_case) is a stand-in that records which cases reached it and returns
made-up figures. The device lock is the real one, held by the test where a test shows that a check came
before it. An untold OneFlow build's op is run for real, by a stand-in framework that fails on a CUDA
device as a build without kernels for the GPU does.
"""

import sys

import pytest

from fakenvml import fake_nvml, gpu
from helpers import BLOCK, make_wheel, results, speedstats, stand_in_flowvision
from speedstats import pipeline
from speedstats.bench.runner import SuiteRunner
from speedstats.errors import UserError
from speedstats.lock import device_lock
from speedstats.results import SkippedCase, loads
from speedstats.suite import load_suite, suite_from_dict

RTX_3080_TI = {"name": "NVIDIA GeForce RTX 3080 Ti", "compute_capability": (8, 6)}
H100 = {"name": "NVIDIA H100 80GB HBM3", "compute_capability": (9, 0)}
DDP = ["resnet50-ddp-bs16", "resnet50-ddp-bs8", "resnet50-ddp-bs4", "resnet50-ddp-bs2", "resnet50-ddp-bs1"]
SHORTFALL = f"{', '.join(DDP)} need 2 GPUs, this runner has 1"
SKIPPED_LINES = "\n\n".join(f"\u26a0\ufe0f {case}: not measured, needs 2 GPUs, this runner has 1"
                          for case in DDP)


@pytest.fixture
def nvml(monkeypatch):
    def install(*gpus):
        monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([gpu(**g) for g in gpus]))
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    return install


# -- which cases a runner's GPUs run ---------------------------------------------------------------------


def test_one_gpu_skips_the_ddp_cases_of_the_default_suite(nvml):
    nvml(RTX_3080_TI)
    suite, said = load_suite(profile="default"), []
    skipped = pipeline.skip_cases_beyond_the_gpus(suite, "cuda", said.append)
    assert skipped == [SkippedCase(id=case, reason="needs 2 GPUs, this runner has 1") for case in DDP]
    assert [case.id for case in suite.cases] == [
        "resnet50-bs16", "resnet50-bs8", "resnet50-bs4", "resnet50-bs2", "resnet50-bs1", "swin-dataloader-w1",
        "swin-dataloader-w4", "swin-dataloader-w8"]
    assert said == [f"speedstats: not measured: {SHORTFALL} (the suite's too_few_gpus: skip)"]


def test_two_gpus_or_the_cpu_skip_nothing(nvml):
    nvml(RTX_3080_TI, dict(RTX_3080_TI, uuid="GPU-2"))
    suite = load_suite(profile="default")
    assert pipeline.skip_cases_beyond_the_gpus(suite, "cuda", print) == [] and len(suite.cases) == 13
    nvml()
    assert pipeline.skip_cases_beyond_the_gpus(suite, "cpu", print) == [] and len(suite.cases) == 13


def test_too_few_gpus_fail_names_the_cases_and_a_suite_of_only_them_fails_too(nvml):
    nvml(RTX_3080_TI)
    data = {"name": "t", "too_few_gpus": "fail", "cases": [
        {"id": "one", "kind": "resnet50", "batch_size": 1, "times": 1},
        {"id": "four", "kind": "resnet50", "batch_size": 1, "times": 1, "ddp": True, "world_size": 4},
        {"id": "two", "kind": "resnet50", "batch_size": 1, "times": 1, "ddp": True}]}
    with pytest.raises(UserError) as error:
        pipeline.skip_cases_beyond_the_gpus(suite_from_dict(data, "t.yml"), "cuda", print)
    assert str(error.value) == ("two needs 2 GPUs; four needs 4 GPUs, this runner has 1 (the suite's "
                                "too_few_gpus: fail; 'skip' leaves them out with a line in the comment)")
    data.update(too_few_gpus="skip", cases=data["cases"][1:])
    with pytest.raises(UserError, match=r"^no case of the suite runs here: two needs 2 GPUs; four needs 4 "
                                        r"GPUs, this runner has 1$"):
        pipeline.skip_cases_beyond_the_gpus(suite_from_dict(data, "t.yml"), "cuda", print)
    data["too_few_gpus"] = "sometimes"
    with pytest.raises(UserError, match=r"field 'too_few_gpus' must be one of skip, fail"):
        suite_from_dict(data, "t.yml")


# -- the comment --------------------------------------------------------------------------------------


def test_a_skipped_case_is_a_line_after_the_block_byte_for_byte(tmp_path):
    measured = results(disturbed=False)
    measured.skipped = [SkippedCase(id=case, reason="needs 2 GPUs, this runner has 1") for case in DDP[:2]]
    path = tmp_path / "results.json"
    path.write_text(measured.to_json())
    assert loads(path.read_text()).skipped == measured.skipped
    proc = speedstats("render", str(path), "--profile", "smoke")
    assert proc.stdout.encode() == (
        f"{BLOCK}\n\n\u26a0\ufe0f resnet50-ddp-bs16: not measured, needs 2 GPUs, this runner has 1\n\n"
        "\u26a0\ufe0f resnet50-ddp-bs8: not measured, needs 2 GPUs, this runner has 1").encode()
    assert proc.returncode == 0  # not measured is not a failure


def test_a_skipped_cases_text_is_escaped_as_data(tmp_path):
    measured = results(disturbed=False)
    measured.skipped = [SkippedCase(id="@team [x](http://e.vil)", reason="needs `2` GPUs")]
    path = tmp_path / "results.json"
    path.write_text(measured.to_json())
    out = speedstats("render", str(path), "--profile", "smoke").stdout
    assert out.endswith("\u26a0\ufe0f @\u2060team \\[x\\](http:/\u2060/e.vil): not measured, "
                        "needs \\`2\\` GPUs")


# -- `speedstats run` ---------------------------------------------------------------------------------


def run(tmp_path, *args):
    from speedstats.cli import main

    return main(["run", "--device", "cuda", "--out", str(tmp_path / "out"), "--cache-dir",
                 str(tmp_path / "cache"), *args])


@pytest.fixture
def locks(tmp_path, monkeypatch):
    monkeypatch.setenv("SPEEDSTATS_LOCK_DIR", str(tmp_path / "locks"))
    return tmp_path / "locks"


@pytest.mark.frameworks
def test_run_with_one_gpu_skips_the_ddp_cases_before_the_lock(tmp_path, nvml, locks, capsys):
    """The device is held by another job: the run waits for it (and gives up, exit 4), having said
    before that which cases it leaves out."""
    nvml(RTX_3080_TI)
    with device_lock("cuda", 0, lock_dir=locks):
        rc = run(tmp_path, "--profile", "default", "--lock-timeout", "1")
    err = capsys.readouterr().err.splitlines()
    assert rc == 4
    said = err.index(f"speedstats: not measured: {SHORTFALL} (the suite's too_few_gpus: skip)")
    waited = next(i for i, line in enumerate(err) if line.startswith("waiting for cuda:0 (held by pid "))
    assert said < waited


@pytest.mark.frameworks
def test_too_few_gpus_fail_exits_2_without_waiting_for_the_lock(tmp_path, nvml, locks, capsys):
    nvml(RTX_3080_TI)
    suite = tmp_path / "suite.yml"
    suite.write_text("extends: default\ntoo_few_gpus: fail\n")
    with device_lock("cuda", 0, lock_dir=locks):
        rc = run(tmp_path, "--suite", str(suite), "--lock-timeout", "600")
    assert (rc, capsys.readouterr().err.splitlines()[-1]) == (
        2, (f"speedstats: error: {SHORTFALL} (the suite's too_few_gpus: fail; 'skip' leaves them out with a "
           "line in the comment)"))


@pytest.mark.frameworks
def test_a_run_with_one_gpu_measures_the_rest_and_the_comment_names_the_skipped(tmp_path, nvml, locks,
                                                                               monkeypatch, capsys):
    from speedstats.bench.assemble import case_record
    from speedstats.results import FrameworkResult

    nvml(RTX_3080_TI)
    measured = []

    def measuring_on_the_gpu(self, case, log):  # the stand-in for a case measured on a GPU
        measured.append(case.id)
        record = case_record(case)
        record.frameworks = {role: FrameworkResult(total_s=ms / 1000 * case.times, per_iter_s=ms / 1000,
                                                   times=case.times, rounds_s=[ms / 1000])
                             for role, ms in (("oneflow", 50.0), ("pytorch", 100.0))}
        return record

    monkeypatch.setattr(SuiteRunner, "run_case", measuring_on_the_gpu)
    rc = run(tmp_path, "--profile", "default", "--quiet")
    assert rc == 0, capsys.readouterr().err
    assert measured == [c.id for c in load_suite(profile="default").cases if not c.ddp]
    comment = (tmp_path / "out" / "comment.md").read_text(encoding="utf-8")
    assert f"</details>\n\n{SKIPPED_LINES}\n\n" in comment
    written = loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    assert [s.id for s in written.skipped] == DDP and [c.id for c in written.cases] == measured


@pytest.mark.frameworks
def test_run_on_a_hopper_gpu_with_the_pypi_oneflow_exits_2_before_the_lock_naming_it(tmp_path, nvml, locks,
                                                                                      capsys):
    nvml(H100)
    rc = run(tmp_path, "--profile", "smoke")
    assert (rc, capsys.readouterr().err.splitlines()[-1]) == (
        2, ("speedstats: error: OneFlow build oneflow 0.9.0 (sm_60 sm_61 sm_70 sm_75 sm_80 sm_86) has no "
           "kernels for GPU 0 NVIDIA H100 80GB HBM3 (compute capability 9.0): use a OneFlow build compiled "
           "for compute capability 9.0"))
    assert not locks.exists() and list((tmp_path / "out").iterdir()) == []


# A OneFlow whose op fails on a CUDA device as a build without kernels for the GPU does (and flowvision).
STUB_ONEFLOW = '''
__version__ = "0.9.1+stub"
__git_commit__ = "abc1234"
def ones(n, device="cpu"):
    raise RuntimeError("CUDA error: no kernel image is available for execution on the device")
'''


@pytest.mark.frameworks
@pytest.mark.venv
def test_an_untold_oneflow_build_that_cannot_run_on_the_gpu_exits_2_before_the_lock(tmp_path, nvml, locks,
                                                                                     capsys):

    nvml(RTX_3080_TI)
    wheels = [make_wheel(tmp_path / "wheels", "oneflow", "0.9.1+stub", {"oneflow/__init__.py": STUB_ONEFLOW}),
              stand_in_flowvision(tmp_path / "wheels", "0.2.1+stub")]
    rc = run(tmp_path, "--profile", "smoke", "--oneflow", wheels[0].as_posix(), "--flowvision",
             wheels[1].as_posix(), "--only", "oneflow")
    err = capsys.readouterr().err.splitlines()
    assert ("speedstats: OneFlow build oneflow 0.9.1+stub does not tell its GPU architectures: running one "
            "op on 1 GPU") in err
    assert (rc, err[-1]) == (
        2, ("speedstats: error: OneFlow build oneflow 0.9.1+stub cannot run on GPU 0 NVIDIA GeForce RTX 3080 "
           "Ti (compute capability 8.6): an op on it failed: RuntimeError: CUDA error: no kernel image is "
           "available for execution on the device (use a build compiled for this GPU's compute capability)"))
    assert not locks.exists() and list((tmp_path / "out").iterdir()) == []
