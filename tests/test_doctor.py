"""`speedstats doctor`: one table of what this runner needs for the suite and its builds, each row ok,
warning or fails with what to do; exit 0, or 2 when a row fails.

No GPU here. NVML is the stand-in of tests/fakenvml.py (one H100, or an RTX 3080 Ti), and the one-op
probe that would run on a GPU is replaced, where a test needs a GPU's answer, by a stand-in that answers
as the GPU would (a build with kernels for it runs, one without fails with CUDA's message); the probe's
own process is tested for real on the CPU and with a stand-in framework whose op fails as CUDA's does.
GitHub is the loopback fake of tests/fakegithub.py; the locks, /dev/shm, the disk and the machine's
CPU time are this machine's.
"""

import json
import sys
from pathlib import Path

import pytest

from fakegithub import actions_env, event_payload, run_speedstats
from fakenvml import fake_nvml, gpu
from speedstats.bench import doctor, gpu_probe, machine_state
from speedstats.bench.builds import Build
from speedstats.bench.doctor import FAILS, OK, WARNING, Row
from speedstats.lock import device_lock
from speedstats.suite import load_suite

H100 = {"name": "NVIDIA H100 80GB HBM3", "compute_capability": (9, 0)}
RTX_3080_TI = {"name": "NVIDIA GeForce RTX 3080 Ti", "compute_capability": (8, 6)}
DDP_CASES = "resnet50-ddp-bs16, resnet50-ddp-bs8, resnet50-ddp-bs4, resnet50-ddp-bs2, resnet50-ddp-bs1"
TOKEN = "ghs_doctor_test_token"
REPO = "o/r"
# The kernels of PyPI's oneflow 0.9.0, as bench.driver_check knows them; torch 2.7.1's, as its probe reads.
ONEFLOW_0_9_0 = "sm_60 sm_61 sm_70 sm_75 sm_80 sm_86"
TORCH_2_7_1 = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]


@pytest.fixture
def nvml(monkeypatch):
    def install(*gpus, **driver):
        module = fake_nvml([gpu(**g) for g in gpus], **driver)
        monkeypatch.setitem(sys.modules, "pynvml", module)
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        return module

    return install


def oneflow_build(version="0.9.0", archs=None, site_dir=None, role="oneflow"):
    entry = {"version": version, "cuda": "11.7", "cuda_archs": archs}
    return Build(role, "oneflow", site_dir, {"family": "oneflow", "packages": {"oneflow": entry}})


def pytorch_build(archs=TORCH_2_7_1):
    entry = {"version": "2.7.1", "cuda": "12.6", "cuda_archs": archs}
    return Build("pytorch", "pytorch", None, {"family": "pytorch", "packages": {"torch": entry}})


def gpu_facts(count=1):
    gpus = machine_state.Gpus(list(range(count)))
    try:
        return gpus.run_info()
    finally:
        gpus.close()


def a_gpu_as_it_would_answer(build, indices):
    """The stand-in for the GPU itself (none here): an op runs where the build has kernels for the GPU's
    compute capability and fails with CUDA's message where it has none; a build that does not tell its
    kernels runs."""
    from speedstats.bench.driver_check import build_archs, build_runs_on, parse_capability

    facts = {f["index"]: f for f in gpu_facts(len(indices))}
    archs = build_archs(build.provenance)[2]
    found = []
    for index in indices:
        capability = parse_capability(facts[index]["compute_capability"])
        if archs is None or build_runs_on(archs, capability):
            found.append(gpu_probe.ProbeResult(index, True))
        else:
            found.append(gpu_probe.ProbeResult(index, False, "CUDA error: no kernel image is available for "
                                                             "execution on the device"))
    return found


def doctor_cli(tmp_path, *args, env=None):
    """`speedstats doctor` in-process (the stand-in NVML reaches it); its rows by check, and the result."""
    env = {"SPEEDSTATS_LOCK_DIR": str(tmp_path / "locks"), **(env or {})}
    result = run_speedstats(["doctor", "--quiet-seconds", "0", "--cache-dir", str(tmp_path / "cache"),
                             "--json", *args], env)
    report = json.loads(result.out)
    assert report["status"] == result.rc
    return {row["check"]: (row["status"], row["text"]) for row in report["rows"]}, result


# -- the GPUs and the cases ---------------------------------------------------------------------------


def test_one_gpu_and_the_default_suite_name_the_ddp_cases(tmp_path, nvml, monkeypatch):
    nvml(H100)
    monkeypatch.setattr(gpu_probe, "probe_build", a_gpu_as_it_would_answer)
    rows, result = doctor_cli(tmp_path, "--profile", "default")
    assert rows["GPUs"] == (OK, "1 seen through NVML: GPU 0 NVIDIA H100 80GB HBM3 (compute capability 9.0)")
    assert rows["GPUs for the cases"] == (
        WARNING, (f"{DDP_CASES} need 2 GPUs, this runner has 1: the run skips them, with a line each in the "
                 "comment (the suite's too_few_gpus: skip), or give the runner more GPUs"))
    assert "Traceback" not in result.err


def test_a_suite_that_fails_on_too_few_gpus_fails_the_row_and_exits_2(tmp_path, nvml, monkeypatch):
    nvml(H100)
    suite = tmp_path / "suite.yml"
    suite.write_text("extends: default\ntoo_few_gpus: fail\n")
    monkeypatch.setattr(gpu_probe, "probe_build", a_gpu_as_it_would_answer)
    rows, result = doctor_cli(tmp_path, "--suite", str(suite), "--only", "pytorch")
    assert rows["GPUs for the cases"] == (
        FAILS, (f"{DDP_CASES} need 2 GPUs, this runner has 1: the run exits 2 before the lock (the suite's "
               "too_few_gpus: fail; 'skip' leaves them out), or give the runner more GPUs"))
    assert result.rc == 2


def test_two_gpus_fit_every_case_and_the_cpu_has_no_gpu_rows(nvml):
    nvml(H100, dict(H100, uuid="GPU-2"))
    gpus = machine_state.Gpus([0, 1])
    try:
        rows = doctor.gpu_rows(gpus, gpus.run_info(), load_suite(profile="default"), "auto")
    finally:
        gpus.close()
    assert rows[1] == Row("GPUs for the cases", OK, "every case fits: the most GPUs a case needs is 2")
    nvml()
    none = machine_state.Gpus([0])
    assert doctor.gpu_rows(none, [], load_suite(profile="default"), "cuda") == [Row(
        "GPUs", FAILS, "GPU 0: Not Found: a run with --device cuda exits 2 (install the NVIDIA driver and "
                       "nvidia-ml-py, or give the container the GPUs: --gpus all)")]
    assert doctor.gpu_rows(none, [], load_suite(profile="smoke"), "auto") == [Row(
        "GPUs", WARNING, "GPU 0: Not Found: the run measures on the CPU (--device auto)")]


# -- each build against each GPU ------------------------------------------------------------------------


def test_pypi_oneflow_on_a_hopper_gpu_is_named_by_its_kernel_list(nvml):
    """PyPI's oneflow 0.9.0 does not tell its kernels; bench.driver_check knows them (read from its
    liboneflow's fatbin): no sm_90, no PTX. The list decides, so no op is run for it."""
    nvml(H100)
    probed = []

    def probe(build, indices):
        probed.append(build.role)
        return a_gpu_as_it_would_answer(build, indices)

    rows = doctor.architecture_rows({"oneflow": oneflow_build(), "pytorch": pytorch_build()}, gpu_facts(),
                                    probe=probe)
    assert rows == [
        Row("OneFlow build oneflow 0.9.0 on GPU 0", FAILS,
            f"OneFlow build oneflow 0.9.0 ({ONEFLOW_0_9_0}) has no kernels for GPU 0 NVIDIA H100 80GB HBM3 "
            "(compute capability 9.0): use a OneFlow build compiled for compute capability 9.0"),
        Row("PyTorch build torch 2.7.1 on GPU 0", OK,
            f"its kernels ({' '.join(TORCH_2_7_1)}) fit, and an op ran on GPU 0 NVIDIA H100 80GB HBM3 "
            "(compute capability 9.0)"),
    ]
    assert probed == ["pytorch"]


def test_pypi_oneflow_on_an_ampere_gpu_runs_its_op(nvml, monkeypatch):
    nvml(RTX_3080_TI)
    rows = doctor.architecture_rows({"oneflow": oneflow_build()}, gpu_facts(), probe=a_gpu_as_it_would_answer)
    assert rows == [Row("OneFlow build oneflow 0.9.0 on GPU 0", OK,
                        f"its kernels ({ONEFLOW_0_9_0}) fit, and an op ran on GPU 0 NVIDIA GeForce RTX 3080 "
                        "Ti (compute capability 8.6)")]


def test_a_oneflow_build_that_does_not_tell_its_kernels_is_decided_by_the_op(nvml):
    nvml(H100)

    def no_kernels(build, indices):  # the GPU's answer to a build compiled without sm_90
        return [gpu_probe.ProbeResult(i, False, "CUDA error: no kernel image is available for execution on "
                                                "the device") for i in indices]

    head = oneflow_build("0.9.1.dev20240101+cu118", role="oneflow")
    assert doctor.architecture_rows({"oneflow": head}, gpu_facts(), probe=no_kernels) == [Row(
        "OneFlow build oneflow 0.9.1.dev20240101+cu118 on GPU 0", FAILS,
        "an op failed on GPU 0 NVIDIA H100 80GB HBM3 (compute capability 9.0): CUDA error: no kernel image "
        "is available for execution on the device (use a build compiled for this GPU's compute capability)")]


# The framework of a stand-in build: its op fails on a CUDA device as a build without kernels for the GPU
# does, and works on the CPU; `hang` never returns.
STAND_IN_FRAMEWORK = '''
import sys, time
__version__ = "0.9.1+stub"
class Tensor:
    def __init__(self, value): self.value = value
    def __mul__(self, k): return Tensor(self.value * k)
    def sum(self): return Tensor(self.value)
    def item(self): return self.value
def ones(n, device="cpu"):
    if device.startswith("cuda"):
        if HANG:
            time.sleep(60)
        raise RuntimeError("CUDA error: no kernel image is available for execution on the device")
    return Tensor(float(n))
HANG = False
'''


def stand_in_build(tmp_path, hang=False):
    site = tmp_path / "site"
    (site / "oneflow").mkdir(parents=True)
    text = STAND_IN_FRAMEWORK.replace("HANG = False", f"HANG = {hang}")
    (site / "oneflow" / "__init__.py").write_text(text, encoding="utf-8")
    return oneflow_build("0.9.1+stub", site_dir=site)


def test_the_probe_runs_its_op_in_a_process_of_the_builds_own(tmp_path):
    build = stand_in_build(tmp_path)
    results = gpu_probe.probe_build(build, [gpu_probe.CPU, 0, 1])
    cause = "RuntimeError: CUDA error: no kernel image is available for execution on the device"
    assert results == [gpu_probe.ProbeResult(-1, True), gpu_probe.ProbeResult(0, False, cause),
                       gpu_probe.ProbeResult(1, False, cause)]  # GPU 1 tried again in a fresh process


def test_a_probe_that_hangs_is_not_known_after_its_timeout(tmp_path):
    results = gpu_probe.probe_build(stand_in_build(tmp_path, hang=True), [0], timeout_s=2)
    assert results == [gpu_probe.ProbeResult(0, None, "the op did not finish within 2s")]


@pytest.mark.heavy
@pytest.mark.skipif(Path("/dev/nvidia0").exists(), reason="a machine with a GPU: cuda:0 would run")
def test_the_probe_runs_the_real_frameworks_on_the_cpu_and_names_the_error_without_a_gpu():
    causes = {"oneflow": "Check failed: cudaGetDevice(&saved_dev_id_) : CUDA driver version is insufficient "
                         "for CUDA runtime version (35)",
              "pytorch": "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an "
                         "NVIDIA GPU and installed a driver from http://www.nvidia.com/Download/index.aspx"}
    for family, package in (("oneflow", "oneflow"), ("pytorch", "torch")):
        build = Build(family, family, None, {"family": family, "packages": {package: {}}})
        cpu, cuda = gpu_probe.probe_build(build, [gpu_probe.CPU, 0])
        assert cpu == gpu_probe.ProbeResult(-1, True)
        assert cuda == gpu_probe.ProbeResult(0, False, causes[family])  # OneFlow's log prefix cut off


@pytest.mark.frameworks
def test_doctor_on_a_hopper_gpu_names_the_pypi_oneflow_build_and_exits_2(tmp_path, nvml, monkeypatch):
    """The environment's own builds (oneflow 0.9.0 from PyPI, torch 2.7.1), prepared as `run` prepares them;
    the op each would run on the GPU is answered by the stand-in GPU."""
    nvml(H100)
    monkeypatch.setattr(gpu_probe, "probe_build", a_gpu_as_it_would_answer)
    rows, result = doctor_cli(tmp_path, "--profile", "default")
    assert rows["OneFlow build"] == (OK, "oneflow (installed): oneflow 0.9.0, CUDA 11.7")
    assert rows["OneFlow build oneflow 0.9.0 on GPU 0"] == (
        FAILS, (f"OneFlow build oneflow 0.9.0 ({ONEFLOW_0_9_0}) has no kernels for GPU 0 NVIDIA H100 80GB "
               "HBM3 (compute capability 9.0): use a OneFlow build compiled for compute capability 9.0"))
    assert rows["PyTorch build torch 2.7.1 on GPU 0"][0] == OK
    assert rows["driver for OneFlow build oneflow 0.9.0"] == (
        OK, "driver 580.95.05 supports CUDA 13.0, the build is for 11.7")
    assert result.rc == 2


def test_the_driver_is_checked_against_each_builds_cuda():
    driver = {"version": "470.82.01", "cuda": "11.4"}
    rows = doctor.driver_rows({"oneflow": oneflow_build(), "pytorch": pytorch_build()}, driver)
    assert rows[0] == Row("driver for OneFlow build oneflow 0.9.0", OK,
                          "OneFlow build oneflow 0.9.0 (CUDA 11.7) runs on driver 470.82.01 (CUDA 11.4) "
                          "through CUDA's minor version compatibility")
    assert rows[1].status == FAILS and rows[1].text.startswith(
        "PyTorch build torch 2.7.1 (CUDA 12.6) needs an NVIDIA driver for CUDA 12 (525.60.13 or newer); this "
        "machine's driver 470.82.01 supports CUDA 11.4: ")
    assert doctor.driver_rows({}, None) == [Row("driver", OK, "no NVIDIA driver to check")]


# -- clocks, GPU processes ----------------------------------------------------------------------------


def clock_rows():
    gpus = machine_state.Gpus([0])
    try:
        return doctor.clock_rows(gpus, gpus.run_info(), load_suite(profile="default"))
    finally:
        gpus.close()


def test_the_clock_policy_says_what_it_means_for_the_band(nvml):
    nvml(dict(H100, persistence=0))
    assert clock_rows() == [Row("clocks of GPU 0", WARNING,
                                "persistence mode is off: the driver may unload between jobs, so each "
                                "worker's first CUDA call is slower and clock settings reset (sudo "
                                "nvidia-smi -pm 1); clocks are not locked: the GPU boosts by temperature and "
                                "power, so times move a few percent between runs; head and base, measured in "
                                "alternating rounds of one run, keep the ±4% band, a max_oneflow_ms "
                                "threshold across runs less so")]
    nvml(dict(H100, app_sm_clock=1590, default_app_sm_clock=1755))
    assert clock_rows() == [Row("clocks of GPU 0", OK,
                                "persistence mode is on; application clocks set to 1590 MHz (default 1755): "
                                "steadier from run to run; a max_oneflow_ms threshold set at other clocks "
                                "may not fit")]
    nvml(dict(RTX_3080_TI, app_sm_clock="NOT_SUPPORTED", default_app_sm_clock="NOT_SUPPORTED"))
    assert clock_rows()[0].text.startswith("persistence mode is on; clocks are not locked: ")


def test_gpu_processes_nvml_reports_that_this_machine_does_not_have_are_host_pids(nvml):
    nvml(dict(H100, processes=[(2**22 + 17, 1 << 30)]))  # a PID above the kernel's pid_max: none here
    gpus = machine_state.Gpus([0])
    try:
        (row,) = doctor.container_rows(gpus)
    finally:
        gpus.close()
    assert row.status == WARNING and row.text.startswith(
        f"NVML reports PIDs this machine's /proc does not have ({2**22 + 17}): host PIDs in a container. A "
        "GPU process counts as the run's when it appears while a worker starts, so another job's process "
        "starting in that window is taken for the run's")


# -- disk, /dev/shm, the lock, the machine --------------------------------------------------------------


def test_shm_too_small_for_dataloader_workers_names_the_cases_and_dockers_default(tmp_path, monkeypatch):
    from speedstats.bench import shm

    suite = load_suite(profile="default")
    monkeypatch.setattr(shm, "free_bytes", lambda path=shm.SHM_PATH: 64 * 1024 * 1024)
    (row,) = doctor.shm_rows(suite, 2)
    assert row.status == FAILS
    assert row.text == (
        "64 MiB free (Docker's default is 64 MB, and a Docker action cannot pass --shm-size), too small for "
        "swin-dataloader-w1 (1 workers, 110 MiB), swin-dataloader-w4 (4 workers, 441 MiB), "
        f"swin-dataloader-w8 (8 workers, 882 MiB): those cases fail; {shm.FIX}")
    monkeypatch.setattr(shm, "free_bytes", lambda path=shm.SHM_PATH: 8 << 30)
    assert doctor.shm_rows(suite, 2) == [Row("/dev/shm", OK, "8192 MiB free; the DataLoader workers need at "
                                                             "most 882 MiB")]
    assert doctor.shm_rows(load_suite(profile="smoke"), 2)[0].status == OK


def test_the_disk_row_reads_the_caches_file_system(tmp_path):
    cache = tmp_path / "not-yet" / "cache"
    (row,) = doctor.disk_rows(cache, {"oneflow": oneflow_build()}, 8)
    assert row.status == OK and row.text.endswith("; the builds are the installed ones")
    assert f"GiB free for the cache {cache}" in row.text
    wheel = oneflow_build(site_dir=tmp_path / "site")
    rows = doctor.disk_rows(cache, {"oneflow": wheel}, 10**6)  # a million builds do not fit anywhere
    assert rows[0].status == WARNING and "the cache keeps up to 1000000 builds" in rows[0].text


def test_a_held_device_lock_names_its_holder_and_an_unwritable_folder_fails(tmp_path):
    locks = tmp_path / "locks"
    assert doctor.lock_rows("cpu", locks) == [Row("device lock", OK, f"{locks}: cpu is free")]
    assert not locks.exists()  # looked at, not made
    with device_lock("cpu", 0, lock_dir=locks):
        (row,) = doctor.lock_rows("cpu", locks, timeout_s=3600)
    assert row.status == WARNING
    assert row.text.startswith(f"{locks}: cpu is held by pid ") and row.text.endswith(
        ": a run waits for it up to 3600s")
    assert doctor.lock_rows("cpu", locks)[0].status == OK  # free again
    (tmp_path / "file").write_text("")
    (row,) = doctor.lock_rows("cpu", tmp_path / "file" / "locks")
    assert row == Row("device lock", FAILS, f"{tmp_path / 'file' / 'locks'}: cpu: cannot make the lock file: "
                                            f"{tmp_path / 'file'} is not a writable folder (set "
                                            "SPEEDSTATS_LOCK_DIR to a folder every job can write)")


def test_the_quiet_check_judges_the_machine_as_a_round_and_can_be_skipped(nvml):
    spec = load_suite(profile="default").disturbance
    assert doctor.quiet_rows("cpu", spec, 0) == [Row("quiet machine", WARNING,
                                                     "not checked (--quiet-seconds 0)")]
    nvml(dict(H100, processes=[(2**22 + 17, 1 << 30)], clock_events=0x40))
    spec.max_other_cores = 1e6  # other jobs of this machine's tests may use the CPU meanwhile
    (row,) = doctor.quiet_rows("cuda", spec, 0.3)
    assert row.status == WARNING
    assert row.text == (f"over 0.3s: GPU 0 throttled (hardware thermal slowdown); another compute process on "
                        f"GPU 0 (pid {2**22 + 17}): a round measured so is marked disturbed and measured "
                        "again (the suite's disturbance:)")
    nvml(H100)
    (row,) = doctor.quiet_rows("cuda", spec, 0.3)
    assert row.status == OK and row.text.endswith(", no other GPU process, no throttling")


# -- the token --------------------------------------------------------------------------------------


@pytest.fixture
def gh(fake_github):
    server = fake_github(TOKEN)
    server.add_repo(REPO)
    server.add_token("ghs_read_only", write=False)
    server.add_token("ghp_person_read_only", login="someone", user_type="User", write=False)
    server.add_token("ghp_person", login="maintainer", user_type="User")
    return server


TOKEN_CHECKS = ("GitHub token", "comment on pull requests", "edit labels", "create check runs")


def token_rows(gh, tmp_path, token, nvml, **env):
    """The token's rows of `speedstats doctor`, run as a job would (the builds and the GPU are not the
    point: the CPU, and no op)."""
    nvml()
    rows, result = doctor_cli(tmp_path, "--profile", "smoke", "--device", "cpu",
                              env=actions_env(gh, token, REPO, tmp_path, **env))
    return {check: rows[check] for check in TOKEN_CHECKS if check in rows}, result


def permission_rows(gh, tmp_path, token, repo=REPO, **env):
    """The same rows from github.permissions, with a client of the fake (no builds prepared: faster)."""
    from speedstats.github.client import GitHubClient, RetryPolicy
    from speedstats.github.permissions import token_rows as rows_of

    environ = actions_env(gh, token, REPO, tmp_path, **env)
    client = GitHubClient(token, gh.url, RetryPolicy.from_env(environ))
    return {check: (status, text) for check, status, text in rows_of(client, repo, environ)}


def test_a_persons_read_only_token_fails_naming_the_permissions(gh, tmp_path, nvml):
    rows, result = token_rows(gh, tmp_path, "ghp_person_read_only", nvml)
    assert rows == {
        "GitHub token": (OK, "a person's token; it reads o/r"),
        "comment on pull requests": (FAILS, ("the token's holder has read access only to o/r: it needs write "
                                            "access (`pull-requests: write` for a fine-grained token)")),
        "edit labels": (FAILS, ("the token's holder has read access only to o/r: it needs write access "
                               "(`issues: write` for a fine-grained token)")),
        "create check runs": (WARNING, ("only an installation token can create check runs (the Checks API "
                                       "refuses a person's token): use GITHUB_TOKEN with `checks: write`")),
    }
    assert result.rc == 2
    # read-only calls only: nothing was posted, edited or deleted
    assert {r.method for r in gh.requests} == {"GET"}
    assert "ghp_person_read_only" not in result.out + result.err


def test_an_actions_token_reported_read_only_is_a_warning_naming_what_the_job_must_give(gh, tmp_path):
    rows = permission_rows(gh, tmp_path, "ghs_read_only")
    assert rows == {
        "GitHub token": (OK, "an installation token (GITHUB_TOKEN or a GitHub App's); it reads o/r"),
        "comment on pull requests": (WARNING, ("GitHub reports read access only: the job's `permissions:` "
                                              "must give `pull-requests: write`")),
        "edit labels": (WARNING, ("GitHub reports read access only: the job's `permissions:` must give "
                                 "`issues: write`")),
        "create check runs": (WARNING, ("GitHub reports read access only: the job's `permissions:` must give "
                                       "`checks: write`")),
    }
    writable = permission_rows(gh, tmp_path, TOKEN)
    assert {status for status, _ in writable.values()} == {OK}
    person = permission_rows(gh, tmp_path, "ghp_person")
    assert person["comment on pull requests"] == (OK, "the token's holder has write access")


def test_a_forks_pull_request_fails_every_write_whatever_the_token(gh, tmp_path):
    event = event_payload("pull_request", REPO, 7, "a" * 40, head_repo="someone/fork")
    rows = permission_rows(gh, tmp_path, TOKEN, event=event)
    assert rows["comment on pull requests"] == (
        FAILS, ("a fork's pull request gets a read-only token whatever the workflow asks: `pull-requests: "
               "write` is not there; comment from a second workflow (docs/forks.md)"))
    assert rows["edit labels"][0] == rows["create check runs"][0] == FAILS


def test_a_token_github_refuses_or_a_repository_it_cannot_see_fails_the_row(gh, tmp_path):
    rows = permission_rows(gh, tmp_path, "ghs_unknown")
    assert rows["GitHub token"] == (FAILS, ("token: GitHub rejected it (401 Bad credentials) on read o/r "
                                           "(GET /repos/o/r)"))
    rows = permission_rows(gh, tmp_path, TOKEN, repo="o/missing")
    assert rows["GitHub token"] == (FAILS, ("read o/missing (GET /repos/o/missing): not found (404); check "
                                           "the repository and number, and that the token can read it"))


def test_without_a_token_the_row_says_it_was_not_checked(tmp_path, nvml, monkeypatch):
    nvml()
    for name in ("GITHUB_TOKEN", "INPUT_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    rows, _ = doctor_cli(tmp_path, "--profile", "smoke", "--device", "cpu")
    assert rows["GitHub token"] == (WARNING, ("none given (GITHUB_TOKEN or --token): whether it can comment, "
                                             "edit labels and create check runs is not checked"))
    assert rows["GPUs"] == (OK, "not looked for (--device cpu): the run measures on the CPU")


# -- the table ----------------------------------------------------------------------------------------


def test_the_table_lines_up_its_columns_and_ends_with_the_verdict(tmp_path, nvml, monkeypatch):
    nvml(H100)
    monkeypatch.setattr(gpu_probe, "probe_build", a_gpu_as_it_would_answer)
    result = run_speedstats(["doctor", "--profile", "smoke", "--quiet-seconds", "0", "--cache-dir",
                             str(tmp_path / "cache")], {"SPEEDSTATS_LOCK_DIR": str(tmp_path / "locks")})
    lines = result.out.splitlines()
    assert lines[0] == "speedstats doctor: suite 'smoke' (5 cases), device cuda"
    header = lines[1]
    assert header.startswith("CHECK ") and header.endswith("  STATUS   WHAT IT FOUND, WHAT TO DO")
    column = header.index("STATUS")
    for line in lines[2:-1]:
        assert line[column:].split()[0] in (OK, WARNING, FAILS), line
    assert lines[2][:column].rstrip() == "GPUs"
    fails = sum(line[column:].startswith(FAILS) for line in lines[2:-1])
    assert lines[-1].startswith(f"{fails} failed, " if fails else "nothing fails")
    assert result.rc == (2 if fails else 0)


def test_a_bad_quiet_seconds_or_suite_is_one_line(tmp_path):
    result = run_speedstats(["doctor", "--quiet-seconds", "-1"], {})
    assert (result.rc, result.err) == (2, ("speedstats: error: --quiet-seconds: must be between 0 and 600, "
                                          "got -1\n"))
    result = run_speedstats(["doctor", "--profile", "defualt"], {})
    assert result.rc == 2 and result.err.startswith("speedstats: error: --profile: unknown profile 'defualt'")


def test_no_op_is_tried_on_a_gpu_that_a_run_is_measuring(tmp_path, nvml, monkeypatch):
    from speedstats.doctor_cli import _probe_unless_measuring

    nvml(H100)
    monkeypatch.setenv("SPEEDSTATS_LOCK_DIR", str(tmp_path / "locks"))
    assert _probe_unless_measuring("cuda") is None  # free: the real probe
    with device_lock("cuda", 0):
        probe = _probe_unless_measuring("cuda")
        rows = doctor.architecture_rows({"oneflow": oneflow_build("0.9.1+stub")}, gpu_facts(), probe=probe)
    (row,) = rows
    assert row.status == WARNING and row.text.startswith(
        "not known whether it runs on GPU 0 NVIDIA H100 80GB HBM3 (compute capability 9.0): not tried while "
        "pid ")
    assert row.text.endswith("holds the device (an op would disturb its measurement); run doctor again when "
                             "it is free")
