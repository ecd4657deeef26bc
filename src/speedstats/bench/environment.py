"""The environment of a framework's subprocess, and the versions a run reports.

OneFlow 0.9.0 is a CUDA 11.7 build that dlopens cuDNN 8 and cuBLAS 11; they come from the PyPI
packages nvidia-cudnn-cu11 and nvidia-cublas-cu11, whose lib/ folders must be on LD_LIBRARY_PATH
before the process starts. Nothing here imports torch or oneflow.
"""

import importlib.metadata
import importlib.util
import os
import platform
from pathlib import Path

import speedstats
from speedstats.contenders import of_family, versioned_packages

# Credentials a benchmark worker never needs: whatever the measured code does, it cannot use them.
SECRET_VARIABLES = ("GITHUB_TOKEN", "GH_TOKEN", "INPUT_TOKEN", "ACTIONS_RUNTIME_TOKEN",
                    "ACTIONS_ID_TOKEN_REQUEST_TOKEN")
# Set for each rank by a DDP launcher, never by the runner: inherited, they would make a single-process
# worker another rank than 0 (OneFlow 0.9.0's import sets RANK=-1 in the process that imports it).
LAUNCHER_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
_CU11_LIBRARIES = ("cudnn", "cublas")


def nvidia_library_dirs():
    """lib/ folders of the pip-installed NVIDIA cu11 libraries that OneFlow needs."""
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return []
    dirs = []
    for root in spec.submodule_search_locations:
        for name in _CU11_LIBRARIES:
            lib = Path(root) / name / "lib"
            if lib.is_dir() and str(lib) not in dirs:
                dirs.append(str(lib))
    return dirs


def subprocess_env(framework, base=None, extra=None):
    """The environment of a worker: base (default: ours), then the suite's `env:` (extra) on top."""
    env = dict(os.environ if base is None else base)
    for name in SECRET_VARIABLES + LAUNCHER_VARIABLES:
        env.pop(name, None)
    env.update({name: str(value) for name, value in (extra or {}).items()})
    src = str(Path(speedstats.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    known = of_family(framework)
    if known is not None and known.nvidia_wheel_libraries:
        extra = nvidia_library_dirs()
        env["LD_LIBRARY_PATH"] = os.pathsep.join(extra + [p for p in [env.get("LD_LIBRARY_PATH")] if p])
    return env


def package_versions():
    versions = {"python": platform.python_version(), "speedstats": speedstats.__version__}
    for name in versioned_packages():
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions
