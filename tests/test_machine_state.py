"""The machine's state around a round: the GPU through a stand-in NVML (there is no GPU here), the
CPU with real processes, the driver check, and what a disturbed round or case is said to be."""

import json
import mmap
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fakenvml import NVML_ERROR_LIBRARY_NOT_FOUND, fake_nvml, gpu
from speedstats import machine, render
from speedstats.bench import driver_check, machine_state
from speedstats.contenders import LABELS
from speedstats.errors import UserError
from speedstats.machine import DisturbanceSpec

SRC = str(Path(__file__).resolve().parents[1] / "src")
NOT_A_PID = 4_194_304 + 17  # above the kernel's largest pid_max: never a process visible here


@pytest.fixture
def nvml(monkeypatch):
    """Install a stand-in pynvml over the given GPUs (no GPU on this machine, so NVML cannot be reached)."""

    def install(gpus, **kwargs):
        module = fake_nvml(gpus, **kwargs)
        monkeypatch.setitem(sys.modules, "pynvml", module)
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        return module

    return install


def test_each_gpu_field_of_a_round_and_of_the_run(nvml):
    nvml([gpu(sm_clock=1410, clock_events=0x4 | 0x20, temperature=83, power_mw=698_500)])
    gpus = machine_state.Gpus([0])
    assert gpus.sample() == [
        {
            "index": 0,
            "null_reasons": {},
            "sm_clock_mhz": 1410,
            "sm_clock_max_mhz": 1980,
            "mem_clock_mhz": 2619,
            "mem_clock_max_mhz": 2619,
            "clock_events": ["sw_power_cap", "sw_thermal"],
            "temperature_c": 83,
            "power_w": 698.5,
            "power_limit_w": 700.0,
        }
    ]
    assert gpus.run_info() == [
        {
            "index": 0,
            "null_reasons": {},
            "name": "NVIDIA Test GPU",
            "uuid": "GPU-00000000-1111-2222-3333-444444444444",
            "persistence_mode": 1,
            "pcie_generation": 5,
            "pcie_generation_max": 5,
            "pcie_width": 16,
            "pcie_width_max": 16,
            "mig_mode": 0,
            "ecc_uncorrected_volatile": 0,
            "sm_clock_max_mhz": 1980,
            "mem_clock_max_mhz": 2619,
            "power_limit_w": 700.0,
            "compute_capability": "9.0",
        }
    ]
    assert gpus.driver() == {"version": "580.95.05", "cuda": "13.0"}


def test_a_query_the_gpu_does_not_support_is_null_with_the_reason(nvml):
    # As on a GeForce card: no ECC, no persistence mode, no power reading.
    nvml(
        [
            gpu(
                ecc_uncorrected="NOT_SUPPORTED",
                persistence="NOT_SUPPORTED",
                power_mw="NOT_SUPPORTED",
                clock_events="NOT_SUPPORTED",
            )
        ]
    )
    gpus = machine_state.Gpus([0])
    (sample,) = gpus.sample()
    assert (sample["power_w"], sample["clock_events"]) == (None, None)
    assert sample["null_reasons"] == {"power_w": "Not Supported", "clock_events": "Not Supported"}
    (info,) = gpus.run_info()
    assert (info["ecc_uncorrected_volatile"], info["persistence_mode"]) == (None, None)
    assert info["null_reasons"] == {
        "ecc_uncorrected_volatile": "Not Supported",
        "persistence_mode": "Not Supported",
    }
    state = {"gpus": [dict(sample, foreign_processes=[])]}
    assert machine.round_disturbance(state, DisturbanceSpec()) == []


def test_without_nvml_the_run_records_why(nvml):
    nvml([], init_error=NVML_ERROR_LIBRARY_NOT_FOUND)
    watch = machine_state.MachineWatch("cuda:0")
    info = watch.run_info()
    assert info["driver"] is None and info["gpus"] == []
    assert info["gpu_null_reason"] == "NVML: NVML Shared Library Not Found"
    assert watch.end(watch.begin([]))["gpus"] == []


def test_a_throttle_reason_and_a_low_sm_clock_disturb_a_round(nvml):
    nvml([gpu(clock_events=0x4 | 0x80, sm_clock=1200)])
    watch = machine_state.MachineWatch("cuda:0")
    state = watch.end(watch.begin([]))
    assert state["cpu"]["other_cores"] is None  # a round of no time: too short to judge the CPU
    assert [d["text"] for d in machine.round_disturbance(state, DisturbanceSpec())] == [
        "GPU 0 throttled (software power cap, power brake)",
        "GPU 0 SM clock at 1200 of 1980 MHz",
    ]
    lenient = DisturbanceSpec(
        allowed_clock_events=["gpu_idle", "sw_power_cap", "hw_power_brake"], min_sm_clock_ratio=0.5
    )
    assert machine.round_disturbance(state, lenient) == []


def test_idle_and_applications_clocks_are_no_disturbance(nvml):
    nvml([gpu(clock_events=0x1 | 0x2)])
    watch = machine_state.MachineWatch("cuda:0")
    assert machine.round_disturbance(watch.end(watch.begin([])), DisturbanceSpec()) == []


def test_a_foreign_compute_process_is_seen_and_the_runs_own_are_not(nvml):
    own = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        fake = nvml([gpu()])
        watch = machine_state.MachineWatch("cuda:0")
        # A worker of ours starts: its process shows up on the GPU meanwhile (in a container NVML
        # gives a host PID, invisible here).
        in_container = NOT_A_PID + 1
        watch.starting()
        fake.nvmlDeviceGetHandleByIndex(0)["processes"] = [(own.pid, 2**30), (in_container, 2**30)]
        watch.started()
        begin = watch.begin([own.pid])
        fake.nvmlDeviceGetHandleByIndex(0)["processes"] += [(NOT_A_PID, 3 * 2**30), (1, 2**20)]
        state = watch.end(begin)
        assert state["gpus"][0]["foreign_processes"] == [
            {"pid": 1, "used_memory_bytes": 2**20},
            {"pid": NOT_A_PID, "used_memory_bytes": 3 * 2**30},
        ]
        assert [d["text"] for d in machine.round_disturbance(state, DisturbanceSpec())] == [
            f"another compute process on GPU 0 (pid 1, {NOT_A_PID})"
        ]
        assert machine.round_disturbance(state, DisturbanceSpec(foreign_gpu_processes=False)) == []
    finally:
        own.kill()
        own.wait()


def test_the_quiet_check_waits_for_a_foreign_process_to_leave(nvml):
    fake = nvml([gpu(processes=[(NOT_A_PID, 2**30)], sm_clock=300)])  # idle clocks: not judged before a run
    watch = machine_state.MachineWatch("cuda:0")
    lines, sleeps = [], []

    def sleep(seconds):
        sleeps.append(seconds)
        if len(sleeps) == 2:
            fake.nvmlDeviceGetHandleByIndex(0)["processes"] = []

    record = watch.wait_quiet(DisturbanceSpec(), 60, lines.append, sleep=sleep)
    assert record["quiet"] is True and record["reasons"] == [] and len(sleeps) == 2
    assert lines[0] == (
        f"speedstats: the GPU is not quiet (another compute process on GPU 0 (pid {NOT_A_PID})): "
        "waiting up to 60s"
    )


def test_the_quiet_check_goes_ahead_and_says_why(nvml):
    nvml([gpu(clock_events=0x40)])
    watch = machine_state.MachineWatch("cuda:0")
    lines = []
    record = watch.wait_quiet(DisturbanceSpec(), 0, lines.append)
    assert record == {
        "quiet": False,
        "waited_s": 0.0,
        "reasons": ["GPU 0 throttled (hardware thermal slowdown)"],
    }
    assert lines == [
        (
            "speedstats: the GPU is still not quiet after 0s (GPU 0 throttled (hardware thermal slowdown)): "
            "measuring anyway; each round is checked and a disturbed case is marked"
        )
    ]


def provenance(family, version, cuda=None):
    package = "torch" if family == "pytorch" else "oneflow"
    return {"family": family, "packages": {package: {"version": version, "cuda": cuda}}}


BUILDS = {
    "oneflow": provenance("oneflow", "0.9.0", "11070"),
    "pytorch": provenance("pytorch", "2.14.1", "13.0"),
}


def test_a_new_driver_runs_every_build(nvml):
    nvml([gpu()], driver="580.95.05", cuda=13000)
    driver = machine_state.Gpus([0]).driver()
    assert driver_check.check_driver(BUILDS, driver) == []


def test_an_old_driver_fails_naming_the_build_the_driver_and_the_pytorch_build_to_pick(nvml):
    nvml([gpu()], driver="535.104.05", cuda=12020)
    driver = machine_state.Gpus([0]).driver()
    with pytest.raises(UserError) as error:
        driver_check.check_driver(BUILDS, driver)
    assert str(error.value) == (
        "PyTorch build torch 2.14.1 (CUDA 13.0) needs an NVIDIA driver for CUDA 13 (580.65.06 or newer); "
        "this machine's driver 535.104.05 supports CUDA 12.2: pick a PyTorch build for CUDA 12.9 with "
        "`pytorch:` (e.g. torch==VERSION+cu129 and "
        "`pip-args: --extra-index-url https://download.pytorch.org/whl/cu129`; it runs on this driver "
        "through CUDA's minor version compatibility)"
    )
    # The build advised runs there, by the same rule: a note, not a failure.
    advised = dict(BUILDS, pytorch=provenance("pytorch", "2.8.0+cu129"))  # its CUDA from the version tag
    assert driver_check.check_driver(advised, driver) == [
        ("PyTorch build torch 2.8.0+cu129 (CUDA 12.9) runs on driver 535.104.05 (CUDA 12.2) through CUDA's "
         "minor version compatibility")]


@pytest.mark.parametrize(("driver_cuda", "pick"), [
    ((12, 2), "12.9"),  # the newest build of the driver's major, not the newest minor at or below 12.2
    ((12, 9), "12.9"),
    ((11, 4), "11.8"),
    ((13, 1), "13.0"),
    ((14, 0), "13.0"),  # no build of the driver's major: the newest older major runs on it
    ((10, 2), None),
])
def test_the_pytorch_build_advised_is_the_newest_the_driver_runs(driver_cuda, pick):
    assert driver_check.pytorch_to_pick(driver_cuda) == pick


def test_a_driver_of_the_same_major_but_older_minor_is_a_note(nvml):
    nvml([gpu()], driver="525.60.13", cuda=12000)
    builds = {"oneflow": provenance("oneflow", "0.9.0"), "pytorch": provenance("pytorch", "2.5.1+cu124")}
    assert driver_check.check_driver(builds, machine_state.Gpus([0]).driver()) == [
        (
            "PyTorch build torch 2.5.1+cu124 (CUDA 12.4) runs on driver 525.60.13 (CUDA 12.0) through CUDA's "
            "minor version compatibility"
        )
    ]


def test_oneflow_on_a_driver_older_than_cuda_11_says_to_update_it():
    with pytest.raises(
        UserError,
        match=r"^OneFlow build oneflow 0.9.0 \(CUDA 11.7\) needs an NVIDIA driver for "
        r"CUDA 11 \(450.80.02 or newer\); this machine's driver 440.33.01 supports "
        r"CUDA 10.2: update the driver to 450.80.02 or newer$",
    ):
        driver_check.check_driver(
            {"oneflow": provenance("oneflow", "0.9.0")}, {"version": "440.33.01", "cuda": "10.2"}
        )


# A "runner" of its own (the sampler) with one busy child of its own; the test starts the foreign
# busy loop itself, so it is outside the sampler's process tree. Everything runs on one CPU.
SAMPLER = textwrap.dedent("""
    import json, os, subprocess, sys, time
    from speedstats.bench import machine_state
    own = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    time.sleep(0.3)
    watch = machine_state.MachineWatch("cpu")
    before = machine_state.process_ticks(own.pid)[1]
    begin = watch.begin([own.pid])
    time.sleep(2.0)
    state = watch.end(begin)
    ticks = machine_state.process_ticks(own.pid)[1] - before
    child = ticks / machine_state.CLK_TCK / state["cpu"]["wall_s"]
    own.kill()
    print(json.dumps({"cpu": state["cpu"], "child_cores": child}))
""")


def busy_loop():
    code = f"import os; os.sched_setaffinity(0, {{{CPU}}})\nwhile True: pass"
    return subprocess.Popen([sys.executable, "-c", code])


CPU = min(os.sched_getaffinity(0))


def sample_cpu():
    code = f"import os; os.sched_setaffinity(0, {{{CPU}}}); exec({SAMPLER!r})"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "PYTHONPATH": SRC},
    ).stdout
    return json.loads(out)


def cores_of(pid, seconds):
    start = machine_state.process_ticks(pid)[1]
    time.sleep(seconds)
    return (machine_state.process_ticks(pid)[1] - start) / machine_state.CLK_TCK / seconds


def test_a_busy_loop_outside_the_run_is_other_cpu_time_and_the_runs_own_child_is_not():
    foreign = busy_loop()
    try:
        time.sleep(0.3)
        sampled = sample_cpu()
        foreign_share = cores_of(foreign.pid, 1.0)
    finally:
        foreign.kill()
        foreign.wait()
    cpu = sampled["cpu"]
    assert cpu["cores"] == 1
    # The busy child of the sampler is its own (it shares the one CPU with the foreign loop)...
    # (On a loaded machine the child gets less of the CPU; it still gets some.)
    assert cpu["own_cores"] >= sampled["child_cores"] - 0.05 and sampled["child_cores"] > 0.05
    # ...and the foreign loop is seen as other processes' CPU time: more than a quarter of a core.
    assert cpu["other_cores"] >= min(foreign_share, 0.4) - 0.1 and cpu["other_cores"] > 0.25
    assert cpu["own_cores"] + cpu["other_cores"] <= 1.1
    assert machine.round_disturbance({"cpu": cpu}, DisturbanceSpec())[0]["text"].startswith(
        "other processes used "
    )


def test_the_runs_own_busy_child_alone_is_not_other_cpu_time():
    cpu = sample_cpu()
    own, child = cpu["cpu"]["own_cores"], cpu["child_cores"]
    assert child > 0.05 and own >= child - 0.05
    # On one CPU that the own child keeps busy, what is left for others is at most the rest.
    assert cpu["cpu"]["other_cores"] <= 1 - child + 0.1


WORKER = """
import mmap, sys, time
sys.stdin.readline()
memory = mmap.mmap(-1, 64 << 20)
memory.madvise(mmap.MADV_NOHUGEPAGE)  # small pages whatever the machine's transparent huge pages
for i in range(0, len(memory), mmap.PAGESIZE):
    memory[i] = 1
end = time.process_time() + 0.3
while time.process_time() < end:
    pass
print("done", flush=True)
sys.stdin.readline()
"""


def test_a_round_records_the_workers_cpu_seconds_and_page_faults_and_only_the_rounds():
    worker = subprocess.Popen([sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        time.sleep(0.3)  # the interpreter's own start-up falls before the round
        cpus = machine_state.cpu_set()
        begin = machine_state.cpu_begin(cpus, [worker.pid])
        worker.stdin.write("go\n")
        worker.stdin.flush()
        assert worker.stdout.readline() == "done\n"
        cpu = machine_state.cpu_end(begin, cpus, [worker.pid])
    finally:
        worker.kill()
        worker.wait()
    pages = (64 << 20) // mmap.PAGESIZE  # touched one by one, each faulted in once
    assert pages <= cpu["worker_minor_faults"] < pages + 2000
    assert cpu["worker_user_s"] + cpu["worker_system_s"] >= 0.25
    assert cpu["worker_system_s"] > 0  # the kernel's side of the faults
    # A process gone before the round ends counts nothing, never less than nothing.
    cpu = machine_state.cpu_end(begin, cpus, [worker.pid])
    assert (cpu["worker_minor_faults"], cpu["worker_user_s"], cpu["worker_system_s"]) == (0, 0, 0)


def test_cpu_pressure_is_read_where_the_kernel_has_it_and_null_with_the_reason_where_not(tmp_path):
    present = os.path.exists(machine_state.PRESSURE_PATH)
    value, reason = machine_state.cpu_pressure()
    assert (value is not None, reason is None) == (present, present)
    assert machine_state.cpu_pressure(str(tmp_path / "cpu")) == (
        None,
        f"no {tmp_path / 'cpu'} (a kernel without pressure stall information)",
    )
    (tmp_path / "cpu").write_text(
        "some avg10=2.50 avg60=1.00 avg300=0.50 total=123456\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    )
    assert machine_state.cpu_pressure(str(tmp_path / "cpu")) == ({"avg10": 2.5, "total_us": 123456}, None)


def test_case_disturbance_names_the_contender_and_the_largest_figure():
    def state(other):
        cpu = {"cores": 2, "other_cores": other}
        return {"cpu": cpu, "disturbed": machine.round_disturbance({"cpu": cpu}, DisturbanceSpec())}

    disturbance = machine.case_disturbance(
        {"oneflow": [state(0.01), state(0.02)], "pytorch": [state(0.97), state(1.04)]},
        LABELS,
    )
    assert disturbance == {
        "contenders": {"pytorch": ["other processes used 1.0 of 2 cores"]},
        "text": "other processes used 1.0 of 2 cores during PyTorch's rounds",
    }
    assert render.disturbed_line("resnet50-bs2", disturbance) == (
        "\u26a0\ufe0f resnet50-bs2: other processes used 1.0 of 2 cores during PyTorch's rounds; "
        "its figures are not comparable"
    )
    assert machine.case_disturbance({"oneflow": [state(0.1)]}, LABELS) is None
