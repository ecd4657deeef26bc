"""A stand-in for the `pynvml` module (nvidia-ml-py), for the GPU paths: there is no GPU here.

Installed with monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(...)): speedstats.gpuinfo and
speedstats.bench.machine_state import pynvml lazily, so they get this module instead of NVML. It
answers with the real module's constants and error classes' behaviour (an NVMLError made with a
value is its subclass; str() is NVML's text), from a plain dict per GPU.
"""

import importlib.machinery
import types

NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_LIBRARY_NOT_FOUND = 12
TEXTS = {
    NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    NVML_ERROR_NOT_FOUND: "Not Found",
    NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
}


class NVMLError(Exception):
    def __new__(cls, value):
        sub = {NVML_ERROR_NOT_SUPPORTED: NVMLError_NotSupported}.get(value, cls) if cls is NVMLError else cls
        return Exception.__new__(sub)

    def __init__(self, value):
        super().__init__(value)
        self.value = value

    def __str__(self):
        return TEXTS.get(self.value, f"NVML error {self.value}")


class NVMLError_NotSupported(NVMLError):  # the real module's name
    pass


def gpu(**overrides):
    """One GPU's answers: a data-centre card at full clocks, idle, with nothing else on it."""
    state = {
        "name": "NVIDIA Test GPU",
        "uuid": "GPU-00000000-1111-2222-3333-444444444444",
        "sm_clock": 1980,
        "sm_clock_max": 1980,
        "mem_clock": 2619,
        "mem_clock_max": 2619,
        "clock_events": 0x1,
        "temperature": 41,
        "power_mw": 95_000,
        "power_limit_mw": 700_000,
        "processes": [],  # [(pid, used bytes)]
        "energy_mj": 0,  # the total energy counter; "NOT_SUPPORTED" before Volta
        "persistence": 1,
        "pcie_gen": 5,
        "pcie_gen_max": 5,
        "pcie_width": 16,
        "pcie_width_max": 16,
        "mig": [0, 0],
        "ecc_uncorrected": 0,
        "compute_capability": (9, 0),
        "app_sm_clock": 1980,  # application clocks: "NOT_SUPPORTED" on most GeForce cards
        "default_app_sm_clock": 1980,
    }
    state.update(overrides)
    return state


def fake_nvml(gpus, driver="580.95.05", cuda=13000, init_error=None):
    """A pynvml module over `gpus` (a list of gpu() dicts); a value of NOT_SUPPORTED raises NotSupported."""
    nvml = types.ModuleType("pynvml")
    nvml.__spec__ = importlib.machinery.ModuleSpec("pynvml", None)  # as an imported module has (find_spec)
    nvml.NVMLError = NVMLError
    nvml.NVMLError_NotSupported = NVMLError_NotSupported
    nvml.NVML_ERROR_NOT_SUPPORTED = NVML_ERROR_NOT_SUPPORTED
    nvml.NVML_ERROR_NOT_FOUND = NVML_ERROR_NOT_FOUND
    nvml.NVML_CLOCK_SM, nvml.NVML_CLOCK_MEM = 1, 2
    nvml.NVML_TEMPERATURE_GPU = 0
    nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC = 1, 0
    nvml.calls = []

    def answer(value):
        if value == "NOT_SUPPORTED":
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return value

    def init():
        if init_error is not None:
            raise NVMLError(init_error)

    def handle(index):
        if not 0 <= index < len(gpus):
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        return gpus[index]

    clocks = {1: ("sm_clock", "sm_clock_max"), 2: ("mem_clock", "mem_clock_max")}
    nvml.nvmlInit = init
    nvml.nvmlShutdown = lambda: None
    nvml.nvmlDeviceGetHandleByIndex = handle
    nvml.nvmlDeviceGetHandleByUUID = lambda uuid: next(g for g in gpus if g["uuid"] == uuid)
    nvml.nvmlSystemGetDriverVersion = lambda: answer(driver)
    nvml.nvmlSystemGetCudaDriverVersion = lambda: answer(cuda)
    nvml.nvmlDeviceGetName = lambda h: answer(h["name"])
    nvml.nvmlDeviceGetUUID = lambda h: answer(h["uuid"])
    nvml.nvmlDeviceGetClockInfo = lambda h, kind: answer(h[clocks[kind][0]])
    nvml.nvmlDeviceGetMaxClockInfo = lambda h, kind: answer(h[clocks[kind][1]])
    nvml.nvmlDeviceGetCurrentClocksEventReasons = lambda h: answer(h["clock_events"])
    nvml.nvmlDeviceGetTemperature = lambda h, sensor: answer(h["temperature"])
    nvml.nvmlDeviceGetPowerUsage = lambda h: answer(h["power_mw"])
    nvml.nvmlDeviceGetEnforcedPowerLimit = lambda h: answer(h["power_limit_mw"])
    nvml.nvmlDeviceGetPersistenceMode = lambda h: answer(h["persistence"])
    nvml.nvmlDeviceGetCurrPcieLinkGeneration = lambda h: answer(h["pcie_gen"])
    nvml.nvmlDeviceGetMaxPcieLinkGeneration = lambda h: answer(h["pcie_gen_max"])
    nvml.nvmlDeviceGetCurrPcieLinkWidth = lambda h: answer(h["pcie_width"])
    nvml.nvmlDeviceGetMaxPcieLinkWidth = lambda h: answer(h["pcie_width_max"])
    nvml.nvmlDeviceGetMigMode = lambda h: answer(h["mig"])
    nvml.nvmlDeviceGetTotalEccErrors = lambda h, kind, counter: answer(h["ecc_uncorrected"])
    nvml.nvmlDeviceGetCudaComputeCapability = lambda h: answer(h["compute_capability"])
    nvml.nvmlDeviceGetTotalEnergyConsumption = lambda h: answer(h["energy_mj"])
    nvml.nvmlDeviceGetApplicationsClock = lambda h, kind: answer(h["app_sm_clock"])
    nvml.nvmlDeviceGetDefaultApplicationsClock = lambda h, kind: answer(h["default_app_sm_clock"])

    def processes(h):
        answer(h["processes"])
        return [types.SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in h["processes"]]

    nvml.nvmlDeviceGetComputeRunningProcesses = processes
    return nvml
