"""Helpers that several test files share: the project's files read as the tests read them, stand-in
wheels, the machine's GPU, and records of runs made in memory (head against base from per-round ratios,
a disturbed run, profiled rounds). The larger ones have modules of their own: actions_runner.py,
fakebench.py, fakegithub.py, fakenvml.py, layer_table.py, matrix_shards.py, procfs.py."""

import base64
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from oneflow_builds import SLOWED_PLACE
from speedstats.analysis.attribution import ProfiledRound
from speedstats.analysis.rule import DEFAULT_RULE
from speedstats.analysis.sequence import DONE, Rounds
from speedstats.render import render_speed_stats
from speedstats.results import CaseResult, FrameworkResult, Results
from speedstats.verdict import judge

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
RELEASE_SCRIPT = ROOT / "scripts" / "release.py"


# -- the project's files -------------------------------------------------------------------------------


# A small valid results file: one ResNet50 case on the CPU, both frameworks.
RESULTS = {
    "schema": "speedstats/results/v1", "suite": "smoke", "device": "cpu", "gpu_name": "Some CPU",
    "cases": [{"id": "resnet50-bs2", "kind": "resnet50", "batch_size": 2, "times": 5,
               "input_shape": [2, 3, 64, 64],
               "frameworks": {"oneflow": {"total_s": 0.5, "per_iter_s": 0.1, "times": 5},
                              "pytorch": {"total_s": 0.25, "per_iter_s": 0.05, "times": 5}}}],
}


def dockerfile_instructions(text):
    """(INSTRUCTION, argument) pairs, with continuation lines joined and comments dropped."""
    instructions, current = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if current and stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        current += stripped
        keyword, _, argument = current.partition(" ")
        instructions.append((keyword.upper(), argument.strip()))
        current = ""
    assert not current, "the Dockerfile ends inside a continued line"
    return instructions


def load_script():
    spec = importlib.util.spec_from_file_location("release_script", RELEASE_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


release = load_script()


def pyproject(root=ROOT):
    with open(Path(root) / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]


def project_home(root=ROOT):
    """OWNER/REPO of the action: pyproject.toml's Repository URL, the one place it is written."""
    url = pyproject(root)["urls"]["Repository"]
    assert url.startswith("https://github.com/"), url
    return url[len("https://github.com/"):]


# -- stand-in wheels: pure Python, made in seconds ------------------------------------------------------


def make_wheel(folder, name, version, files):
    """A minimal valid pure-Python wheel holding `files` ({path in the wheel: text})."""
    dist_info = f"{name}-{version}.dist-info"
    files = {
        **files,
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist_info}/WHEEL": ("Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: "
                               "py3-none-any\n"),
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{dist_info}/RECORD,,")
    wheel = Path(folder) / f"{name}-{version}-py3-none-any.whl"
    wheel.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
        archive.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")
    return wheel


def stand_in_oneflow(folder, version="0.0.1+fake", init=None):
    init = init or f'__version__ = "{version}"\n__git_commit__ = "abc1234"\n'
    return make_wheel(folder, "oneflow", version, {"oneflow/__init__.py": init})


def stand_in_flowvision(folder, version="0.0.1+fake"):
    return make_wheel(folder, "flowvision", version,
                      {"flowvision/__init__.py": f'import oneflow\n__version__ = "{version}"\n'})


def stand_in_oneflow_request(oneflow_wheel, role="oneflow"):
    """A build request for a stand-in OneFlow with the stand-in flowvision (an environment with the real
    flowvision installed would import it, and it the real OneFlow's modules)."""
    from speedstats.bench.builds import parse_build_spec

    flowvision_wheel = stand_in_flowvision(Path(oneflow_wheel).parent / "flowvision")
    return parse_build_spec(role, "oneflow", str(oneflow_wheel), companion_specs=[str(flowvision_wheel)])


def file_sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def cache_entries(cache):
    """What a build cache holds, lock files and the wheels' remembered digests aside."""
    from speedstats.bench.buildcache import DIGESTS

    builds = Path(cache) / "builds"
    if not builds.is_dir():
        return []
    return sorted(p.name for p in builds.iterdir() if not p.name.endswith(".lock") and p.name != DIGESTS)


# -- the machine -----------------------------------------------------------------------------------------


def nvidia_smi_name():
    """The name of GPU 0 as nvidia-smi prints it, or None without a GPU."""
    if not shutil.which("nvidia-smi"):
        return None
    proc = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", "0"],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return None
    return proc.stdout.strip() or None


# -- a case measured head against base, from its per-round ratios -------------------------------------------


BASE = [0.25, 0.26, 0.25, 0.27, 0.25, 0.26, 0.25, 0.26, 0.27, 0.25]
# Per-round ratios head/base: a clear slowdown, a change inside the band, a clear speed-up, and a
# slowdown the rounds scatter too much to show.
SLOWER = [1.21, 1.18, 1.24, 1.19, 1.22, 1.20, 1.17, 1.23, 1.20, 1.21]
SAME = [1.01, 0.99, 1.00, 1.02, 0.99, 1.00, 1.01, 0.98, 1.00, 1.01]
FASTER = [0.84, 0.86, 0.85, 0.83, 0.86, 0.85, 0.84, 0.87, 0.85, 0.86]
UNCLEAR = [1.20, 0.98, 1.25, 1.01, 1.30, 0.97, 1.18, 1.05, 1.22, 0.99]
PYTORCH = [0.18, 0.181, 0.179, 0.18, 0.182, 0.18, 0.181, 0.18, 0.179, 0.18]


def fw(rounds, times=10):
    per_iter = sorted(rounds)[len(rounds) // 2]
    return FrameworkResult(total_s=per_iter * times, per_iter_s=per_iter, times=times, rounds_s=list(rounds),
                           round_iterations=2)


def base_rounds(count):
    return [BASE[k % len(BASE)] for k in range(count)]


def measured(ratios, rule=DEFAULT_RULE):
    """The rule driven over these ratios as the runner drives it: its verdict on the rounds it took."""
    rounds = Rounds(rule)
    for ratio in ratios:
        if rounds.action == DONE:
            break
        rounds.add(ratio)
    if rounds.action != DONE:
        rounds.stop_now()
    n = len(rounds.ratios)
    return rounds.verdict([b * r for b, r in zip(base_rounds(n), ratios)], base_rounds(n))


def case(case_id, batch, ratios=SLOWER, pytorch=PYTORCH, rule=DEFAULT_RULE):
    record = CaseResult(id=case_id, kind="resnet50", batch_size=batch, times=10,
                        input_shape=[batch, 3, 64, 64])
    base = base_rounds(len(ratios))
    head = [b * r for b, r in zip(base, ratios)]
    record.frameworks = {"oneflow": fw(head), "oneflow_base": fw(base), "pytorch": fw(pytorch)}
    record.paired = measured(ratios, rule)
    return record


# -- a run of one case on the CPU whose PyTorch rounds were disturbed, and the CLI on it --------------------


BLOCK = (
    "<details>\n <summary>Speed stats:</summary>\n\n ``` \nGPU Name: CPU: AMD EPYC (2 cores) \n\n"
    " OneFlow resnet50 time: 283.9ms (= 2839.0ms / 10, input_shape=[2, 3, 64, 64])\n"
    "PyTorch resnet50 time: 5134.0ms (= 51340.0ms / 10, input_shape=[2, 3, 64, 64])\n"
    "\u2714\ufe0f Relative speed: 18.08 (= 5134.0ms / 283.9ms)\n ``` \n\n</details>"
)


def framework(ms, rounds_ms):
    return FrameworkResult(
        total_s=ms / 100,
        per_iter_s=ms / 1000,
        times=10,
        rounds_s=[r / 1000 for r in rounds_ms],
        round_iterations=10,
    )


def results(disturbed=True, pytorch_rounds=(5134.0,)):
    case = CaseResult(
        id="resnet50-bs2",
        kind="resnet50",
        batch_size=2,
        times=10,
        input_shape=[2, 3, 64, 64],
        frameworks={"oneflow": framework(283.9, [283.9]), "pytorch": framework(5134.0, list(pytorch_rounds))},
    )
    if disturbed:
        case.disturbance = {
            "contenders": {"pytorch": ["other processes used 1.0 of 2 cores"]},
            "text": "other processes used 1.0 of 2 cores during PyTorch's rounds",
        }
    return Results(suite="smoke", device="cpu", gpu_name="CPU: AMD EPYC (2 cores)", cases=[case])


def speedstats(*args):
    return subprocess.run(
        [sys.executable, "-m", "speedstats", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )


# -- profiled rounds, and the lines after the block ------------------------------------------------------


def profiled(rng, extra_s=0.0, places=40, steps=2):
    """One profiled round of `places` places around 5 ms per step each, SLOWED_PLACE costing extra_s more."""
    self_s = {f"oneflow.module{i}:function": max(0.0, rng.gauss(0.01, 0.0015)) for i in range(places)}
    self_s[SLOWED_PLACE] = max(0.0, rng.gauss(0.002, 0.0003)) + extra_s
    total = dict(self_s, **{"speedstats.bench.worker:main": sum(self_s.values())})
    return ProfiledRound(steps=steps, total_s=sum(self_s.values()), self_s=self_s, place_total_s=total)


def results_with(attribution):
    record = case("resnet50-bs2", 2)
    record.attribution = attribution
    return Results(suite="smoke", device="cpu", gpu_name="CPU", cases=[record])


def notes_of(results):
    return render_speed_stats(results, None, judge(results, None)).split("\n\n</details>\n\n", 1)[1]
