"""Before a CUDA run: does the NVIDIA driver support the CUDA version each build was made for?

The driver's CUDA version comes from NVML (nvmlSystemGetCudaDriverVersion); a build's from its probe
(bench.builds: torch.version.cuda, oneflow.sysconfig.get_cuda_version()), else from a `+cuXYZ` local
version tag, else, for the PyPI oneflow 0.9.0, CUDA 11.7. A driver whose CUDA major version is older
than a build's fails the run before anything is measured, with one line naming the build, the driver
and the PyTorch build to pick. A driver of the same major version but an older minor one runs the
build through CUDA's minor version compatibility (no PTX JIT of newer code): a note, not a failure.
See docs/runner.md ("Which driver runs which build") for the table.

It also checks that each build has kernels for each GPU of the run: the GPU's compute capability
(NVML) against the architectures the build was compiled for (its probe: torch._C._cuda_getArchFlags();
OneFlow does not tell: PyPI's 0.9.0 from KNOWN_ARCHS, any other OneFlow build by running a tiny op on
each GPU, bench.gpu_probe). A GPU no build kernel runs on fails the run the same way, naming the
PyTorch build to use (docs/runner.md, "Which PyTorch runs on which GPU").
"""

import re

from speedstats.contenders import FAMILIES, LABELS, build_family, of_family
from speedstats.errors import UserError

# The oldest Linux driver of each CUDA major version, under minor version compatibility.
MIN_DRIVER = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}
# Builds that report no CUDA version themselves: (package, version) -> CUDA version.
KNOWN_BUILDS = {("oneflow", "0.9.0"): "11.7"}
# Builds that do not tell their architectures: (package, version) -> the cubins they carry. PyPI's
# oneflow 0.9.0 (cu117): the .nv_fatbin of its liboneflow holds sm_60 to sm_86 and no PTX, so no Hopper.
KNOWN_ARCHS = {("oneflow", "0.9.0"): ("sm_60", "sm_61", "sm_70", "sm_75", "sm_80", "sm_86")}
# The CUDA versions PyTorch publishes builds for (https://download.pytorch.org/whl/cuXYZ).
PYTORCH_CUDA_BUILDS = ("11.8", "12.1", "12.4", "12.6", "12.8", "12.9", "13.0")
PACKAGE = {family: of_family(family).package for family in FAMILIES}


def parse_version(text):
    """(major, minor) of "12.4", "12040" or 12040 (NVML's and OneFlow's integer form), or None."""
    if text is None:
        return None
    text = str(text).strip()
    if text.isdigit() and len(text) >= 4:
        number = int(text)
        return number // 1000, number % 1000 // 10
    match = re.fullmatch(r"(\d+)\.(\d+)(?:\.\d+)?", text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def build_cuda(provenance):
    """(package, version, (major, minor) or None) of a build's framework, from its provenance."""
    family = build_family(provenance)
    package = PACKAGE.get(family, family)
    entry = (provenance.get("packages") or {}).get(package) or {}
    version = entry.get("version") or ""
    cuda = parse_version(entry.get("cuda"))
    if cuda is None:
        tag = re.search(r"\+cu(\d{2,3})\b", version)
        if tag:
            digits = tag.group(1)
            cuda = (int(digits[:-1]), int(digits[-1]))
    if cuda is None and (package, version) in KNOWN_BUILDS:
        cuda = parse_version(KNOWN_BUILDS[(package, version)])
    return package, version, cuda


def pytorch_to_pick(driver_cuda):
    """The newest PyTorch CUDA build the driver runs, as "12.9", or None when even the oldest is newer.
    Every build of the driver's CUDA major runs through minor version compatibility (a CUDA 12.2 driver
    runs a +cu129 build), and a build of an older major runs on a newer driver."""
    fitting = [v for v in PYTORCH_CUDA_BUILDS if parse_version(v)[0] <= driver_cuda[0]]
    return fitting[-1] if fitting else None


def _builds_to_pick(provenance):
    """Whether the build's family publishes builds to pick from (PyTorch's per CUDA version)."""
    known = of_family(build_family(provenance))
    return known is not None and known.builds_to_pick


def _text(version):
    return f"{version[0]}.{version[1]}"


def check_driver(builds, driver):
    """Notes (lines) on builds the driver runs by minor version compatibility; UserError when one needs a
    newer driver. builds: {role: bench.builds.Build or its provenance}; driver: {"version", "cuda"}."""
    have = parse_version((driver or {}).get("cuda"))
    if have is None:
        return []
    notes = []
    for role, build in builds.items():
        provenance = getattr(build, "provenance", build)
        package, version, need = build_cuda(provenance)
        if need is None:
            continue
        name = f"{LABELS.get(role, role)} build {package} {version} (CUDA {_text(need)})"
        if have[0] < need[0]:
            pick = pytorch_to_pick(have)
            tag = f"cu{pick.replace('.', '')}" if pick else None
            advice = (
                f"pick a PyTorch build for CUDA {pick} with `pytorch:` (e.g. torch==VERSION+{tag} "
                f"and `pip-args: --extra-index-url https://download.pytorch.org/whl/{tag}`"
                + ("; it runs on this driver through CUDA's minor version compatibility"
                   if parse_version(pick) > have else "") + ")"
                if pick
                else "update the driver"
            )
            if not _builds_to_pick(provenance):
                advice = f"update the driver to {MIN_DRIVER.get(need[0], 'a newer one')} or newer"
            raise UserError(
                f"{name} needs an NVIDIA driver for CUDA {need[0]} ({MIN_DRIVER.get(need[0], '?')} or "
                f"newer); this machine's driver {driver.get('version')} supports CUDA {_text(have)}: "
                f"{advice}"
            )
        if have < need:
            notes.append(
                f"{name} runs on driver {driver.get('version')} (CUDA {_text(have)}) through CUDA's "
                "minor version compatibility"
            )
    return notes


# PyPI's default Linux builds of torch that the advice names, first the image's own; the architectures
# are their libtorch_cuda's list (torch._C._cuda_getArchFlags()).
PYTORCH_ARCH_BUILDS = (
    ("torch==2.7.1 torchvision==0.22.1", "its default build covers sm_50 to sm_90",
     ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90")),
    ("torch==2.8.0 torchvision==0.23.0", "its default build, for CUDA 12.8, covers sm_70 to sm_120",
     ("sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")),
)


def parse_capability(text):
    """(major, minor) of a compute capability "8.6" or (8, 6), or None."""
    if isinstance(text, (tuple, list)) and len(text) == 2:
        return int(text[0]), int(text[1])
    match = re.fullmatch(r"(\d+)\.(\d+)", str(text or "").strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


def arch_runs_on(arch, capability):
    """Whether code for `arch` runs on a GPU of `capability` (major, minor). A cubin "sm_XY" runs on
    compute capability X.Y and later minors of the same major (sm_60 on a 6.1 GPU, sm_86 on 8.9);
    "sm_XYa" only on X.Y itself. PTX "compute_XY" is compiled by the driver for any X.Y or newer."""
    match = re.fullmatch(r"(sm|compute)_(\d+)(\d)([af]?)", arch.strip())
    if not match:
        return False
    kind, major, minor, suffix = match.group(1), int(match.group(2)), int(match.group(3)), match.group(4)
    if kind == "compute":
        return (major, minor) <= tuple(capability)
    if suffix == "a":
        return (major, minor) == tuple(capability)
    return major == capability[0] and minor <= capability[1]


def build_runs_on(archs, capability):
    return any(arch_runs_on(arch, capability) for arch in archs)


def build_archs(provenance):
    """(package, version, [architectures]) of a build's framework; the list is None when untold."""
    family = build_family(provenance)
    package = PACKAGE.get(family, family)
    entry = (provenance.get("packages") or {}).get(package) or {}
    version = entry.get("version") or ""
    archs = entry.get("cuda_archs") or KNOWN_ARCHS.get((package, version))
    return package, version, list(archs) if archs else None


def pytorch_for(capability):
    """(requirement, what it covers) of the first build in PYTORCH_ARCH_BUILDS that runs on
    `capability`, or None."""
    for requirement, covers, archs in PYTORCH_ARCH_BUILDS:
        if build_runs_on(archs, capability):
            return requirement, covers
    return None


def check_architectures(builds, gpus):
    """UserError when a build has no kernels for one of the GPUs. builds: {role: bench.builds.Build or
    its provenance}; gpus: [{"index", "name", "compute_capability": "6.1"}] (machine_state.Gpus)."""
    for gpu in gpus or ():
        capability = parse_capability(gpu.get("compute_capability"))
        if capability is None:
            continue
        for role, build in builds.items():
            provenance = getattr(build, "provenance", build)
            package, version, archs = build_archs(provenance)
            if archs is None or build_runs_on(archs, capability):
                continue
            name = f"{LABELS.get(role, role)} build {package} {version} ({' '.join(archs)})"
            where = (f"GPU {gpu.get('index', 0)} {gpu.get('name') or 'unnamed'} "
                     f"(compute capability {_text(capability)})")
            if _builds_to_pick(provenance):
                pick = pytorch_for(capability)
                advice = (f"use {pick[0]} with `pytorch:` ({pick[1]})" if pick
                          else "no PyTorch build on PyPI has kernels for it")
            else:
                advice = f"use a OneFlow build compiled for compute capability {_text(capability)}"
            raise UserError(f"{name} has no kernels for {where}: {advice}")
