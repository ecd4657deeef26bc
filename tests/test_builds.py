"""Builds as inputs: parsing the user's text, installing a build once into the cache, probing it,
and failing in seconds with one line when a build does not install or import. The cache itself (digests,
shared files, locking, eviction) is tested in test_buildcache.py.

The light tests install tiny wheels (tests/helpers.py: a stand-in oneflow and flowvision) with real
pip; the heavy ones install the real OneFlow wheel repacked as 0.9.0+a."""

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from helpers import (
    cache_entries,
    file_sha256,
    stand_in_flowvision,
    stand_in_oneflow,
    stand_in_oneflow_request,
)
from speedstats.bench.builds import (
    BuildSource,
    parse_build_spec,
    prepare_build,
    prepare_builds,
    run_with_progress,
)
from speedstats.bench.environment import subprocess_env
from speedstats.contenders import FAMILIES, family_packages
from speedstats.errors import UserError

WHEEL_TAIL = "cp310-cp310-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"


# --- parse_build_spec ---------------------------------------------------------------------------


def test_installed_is_the_default():
    for spec in ("installed", "", None, "  installed "):
        request = parse_build_spec("oneflow", "oneflow", spec, companion_specs=["installed"])
        assert request.sources == [] and request.installed
        assert request.describe() == "oneflow (installed)"


def test_a_wheel_file(tmp_path):
    wheel = tmp_path / f"oneflow-0.9.0+a-{WHEEL_TAIL}"
    wheel.write_bytes(b"")
    request = parse_build_spec("oneflow", "oneflow", str(wheel))
    assert request.sources == [BuildSource("wheel", str(wheel))]
    assert request.sources[0].package == "oneflow"
    assert request.describe() == f"oneflow (wheel oneflow-0.9.0+a-{WHEEL_TAIL})"


def test_a_folder_and_a_glob_of_wheels(tmp_path, monkeypatch):
    house = tmp_path / "wheelhouse"
    house.mkdir()
    for name in (f"oneflow-0.9.0-{WHEEL_TAIL}", "flowvision-0.2.1-py3-none-any.whl", "notes.txt"):
        (house / name).write_bytes(b"")
    in_folder = parse_build_spec("oneflow", "oneflow", str(house))
    assert [Path(s.value).name for s in in_folder.sources] == [
        "flowvision-0.2.1-py3-none-any.whl", f"oneflow-0.9.0-{WHEEL_TAIL}"]
    monkeypatch.chdir(tmp_path)
    globbed = parse_build_spec("oneflow", "oneflow", "wheelhouse/oneflow-*.whl")
    assert globbed.sources == [BuildSource("wheel", str(house / f"oneflow-0.9.0-{WHEEL_TAIL}"))]
    # A bare word names a folder only when the folder holds wheels.
    (tmp_path / "oneflow").mkdir()
    assert parse_build_spec("oneflow", "oneflow", "oneflow").sources == [BuildSource("requirement",
                                                                                     "oneflow")]
    assert parse_build_spec("oneflow", "oneflow", "wheelhouse").sources == in_folder.sources


def test_requirements_companions_and_pip_args():
    request = parse_build_spec("pytorch", "pytorch", "torch==2.3.1  torchvision==0.18.1",
                               pip_args="--extra-index-url 'https://download.example/whl cpu'")
    assert request.sources == [BuildSource("requirement", "torch==2.3.1"),
                               BuildSource("requirement", "torchvision==0.18.1")]
    assert request.pip_args == ["--extra-index-url", "https://download.example/whl cpu"]
    assert request.describe() == "pytorch (torch==2.3.1 + torchvision==0.18.1)"
    nightly = parse_build_spec("oneflow", "oneflow", "oneflow==0.9.1.dev20240101+cu118",
                               companion_specs=["flowvision==0.2.1"], pip_args=["--pre"])
    assert [s.package for s in nightly.sources] == ["oneflow", "flowvision"]
    assert nightly.pip_args == ["--pre"]


@pytest.mark.parametrize("spec", ["wheelhouse/oneflow-*.whl", "missing/oneflow.whl", "oneflow-0.9.0.whl",
                                  "./nowhere"])
def test_a_path_that_matches_nothing_names_the_role_and_the_spec(tmp_path, monkeypatch, spec):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError) as raised:
        parse_build_spec("oneflow_base", "oneflow", spec)
    message = str(raised.value)
    assert message.startswith(f"oneflow_base: {spec}: ") and "\n" not in message


def test_bad_specs(tmp_path):
    with pytest.raises(UserError, match=r"^oneflow: --pre oneflow: --pre is a pip option"):
        parse_build_spec("oneflow", "oneflow", "--pre oneflow")
    with pytest.raises(UserError, match=r"^oneflow: unknown framework family 'jax'"):
        parse_build_spec("oneflow", "jax", "installed")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match=r"no wheel \(\.whl\) in this folder"):
        parse_build_spec("oneflow", "oneflow", str(tmp_path / "empty"))
    assert set(FAMILIES) == {"oneflow", "pytorch"}


# --- prepare_build with real pip, stand-in packages ---------------------------------------------


@pytest.mark.venv
def test_a_corrupt_wheel_fails_in_seconds_with_one_line(tmp_path):
    wheel = tmp_path / f"oneflow-0.9.0-{WHEEL_TAIL}"
    wheel.write_text("not a zip archive\n")
    request = parse_build_spec("oneflow", "oneflow", str(wheel))
    start = time.monotonic()
    with pytest.raises(UserError) as raised:
        prepare_build(request, tmp_path / "cache", progress=lambda _: None)
    assert time.monotonic() - start < 5
    assert str(raised.value) == (f"oneflow (wheel {wheel.name}): {wheel.name} is not a valid wheel: "
                                 "File is not a zip file")
    assert cache_entries(tmp_path / "cache") == []


@pytest.mark.venv
def test_a_zip_that_is_no_wheel_fails(tmp_path):
    wheel = tmp_path / f"oneflow-0.9.0-{WHEEL_TAIL}"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("oneflow/__init__.py", "")
    with pytest.raises(UserError, match=r"is not a valid wheel: no \.dist-info/WHEEL in it$"):
        prepare_build(parse_build_spec("oneflow", "oneflow", str(wheel)), tmp_path / "cache")


@pytest.mark.venv
def test_a_requirement_that_does_not_resolve_fails_with_one_line(tmp_path):
    request = parse_build_spec("oneflow_base", "oneflow", "oneflow==0.0.0.dev0+nope")
    start = time.monotonic()
    with pytest.raises(UserError) as raised:
        prepare_build(request, tmp_path / "cache", progress=lambda _: None)
    elapsed = time.monotonic() - start
    message = str(raised.value)
    assert message.startswith("oneflow_base (oneflow==0.0.0.dev0+nope): pip install failed: ")
    assert "oneflow==0.0.0.dev0+nope" in message.split("pip install failed: ")[1]
    assert "\n" not in message and len(message) < 400
    assert elapsed < 60, elapsed
    assert cache_entries(tmp_path / "cache") == []


@pytest.mark.venv
def test_a_build_that_does_not_import_fails_and_leaves_nothing(tmp_path):
    wheel = stand_in_oneflow(tmp_path / "w", init='raise ImportError("this build is broken")\n')
    request = parse_build_spec("oneflow", "oneflow", str(wheel))
    with pytest.raises(UserError) as raised:
        prepare_build(request, tmp_path / "cache", progress=lambda _: None)
    assert str(raised.value) == (f"oneflow (wheel {wheel.name}): the build does not import: "
                                 "ImportError: this build is broken")
    assert cache_entries(tmp_path / "cache") == []


@pytest.mark.frameworks  # records the numpy and pillow of the running environment
@pytest.mark.venv
def test_a_build_installs_once_and_is_reused(tmp_path):
    oneflow_wheel = stand_in_oneflow(tmp_path / "w")
    flowvision_wheel = stand_in_flowvision(tmp_path / "w")
    request = parse_build_spec("oneflow", "oneflow", str(oneflow_wheel),
                               companion_specs=[str(flowvision_wheel)])
    first_lines = []
    build = prepare_build(request, tmp_path / "cache", progress=first_lines.append)
    assert any("installing with pip" in line for line in first_lines)
    site = build.site_dir
    assert site.parent.parent == tmp_path / "cache" / "builds" and site.name == "site"
    assert cache_entries(tmp_path / "cache") == [site.parent.name]
    provenance = build.provenance
    assert provenance["source"] == "wheel" and provenance["role"] == "oneflow"
    assert site.parent.name == f"oneflow-{provenance['cache_key'][:16]}"
    oneflow = provenance["packages"]["oneflow"]
    assert oneflow == {"version": "0.0.1+fake", "module_version": "0.0.1+fake", "git_commit": "abc1234",
                       "wheel": oneflow_wheel.name, "sha256": file_sha256(oneflow_wheel), "requirement": None,
                       "file": str(site / "oneflow" / "__init__.py"),
                       "cuda": None,  # the stand-in has no oneflow.sysconfig: its CUDA version is untold
                       "cuda_archs": None}
    assert provenance["packages"]["flowvision"]["file"] == str(site / "flowvision" / "__init__.py")
    assert provenance["environment"]["python"] == ".".join(map(str, sys.version_info[:3]))
    assert set(provenance["environment"]) >= {"numpy", "pillow"}
    assert json.loads(json.dumps(provenance)) == provenance  # plain JSON data, as results.json keeps it

    stamp = (site / "oneflow" / "__init__.py").stat().st_mtime_ns
    again_lines = []
    again = prepare_builds([parse_build_spec("oneflow_base", "oneflow", str(oneflow_wheel),
                                             companion_specs=[str(flowvision_wheel)])],
                           tmp_path / "cache", progress=again_lines.append)["oneflow_base"]
    assert again.site_dir == site and (site / "oneflow" / "__init__.py").stat().st_mtime_ns == stamp
    assert not any("installing" in line for line in again_lines)
    from_cache = f": from the cache ({provenance['cache_key'][:16]}), oneflow 0.0.1+fake (git abc1234)"
    assert any(from_cache in line for line in again_lines)
    assert again.provenance == {**provenance, "role": "oneflow_base"}

    # Other pip arguments are another build.
    other = prepare_build(parse_build_spec("oneflow", "oneflow", str(oneflow_wheel), [str(flowvision_wheel)],
                                           pip_args="--no-compile"), tmp_path / "cache",
                          progress=lambda _: None)
    assert other.site_dir != site and len(cache_entries(tmp_path / "cache")) == 2


@pytest.mark.frameworks  # probes the installed PyTorch
@pytest.mark.venv
def test_installed_builds_are_probed_beside_the_others_and_the_first_failure_is_raised(tmp_path):
    good = stand_in_oneflow(tmp_path / "good")
    broken = stand_in_oneflow(tmp_path / "broken", init='raise ImportError("this build is broken")\n')
    lines = []
    builds = prepare_builds([stand_in_oneflow_request(good),
                             parse_build_spec("pytorch", "pytorch", "installed")],
                            tmp_path / "cache", progress=lines.append)
    assert list(builds) == ["oneflow", "pytorch"]
    assert builds["pytorch"].site_dir is None and builds["pytorch"].provenance["source"] == "installed"
    assert builds["oneflow"].provenance["packages"]["oneflow"]["version"] == "0.0.1+fake"
    assert sorted(line.split(" ", 2)[1] for line in lines) == ["oneflow", "oneflow", "oneflow", "pytorch"]

    with pytest.raises(UserError) as raised:
        prepare_builds([parse_build_spec("pytorch", "pytorch", "installed"), stand_in_oneflow_request(broken),
                        stand_in_oneflow_request(good, role="oneflow_base")],
                       tmp_path / "cache", progress=lambda _: None)
    assert str(raised.value) == (f"oneflow (wheel {broken.name} + wheel flowvision-0.0.1+fake-py3-none-any"
                                 ".whl): the build does not import: ImportError: this build is broken")


@pytest.mark.venv
def test_a_wheelhouse_with_one_wheel_per_python_installs_the_one_that_fits(tmp_path):
    ours = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    other = "cp38" if ours != "cp38" else "cp39"
    house = tmp_path / "wheelhouse"
    house.mkdir()
    stand_in = stand_in_oneflow(tmp_path / "w")
    for tag in (ours, other):
        (house / f"oneflow-0.0.1+fake-{tag}-{tag}-linux_x86_64.whl").write_bytes(stand_in.read_bytes())
    stand_in_flowvision(house)
    build = prepare_build(parse_build_spec("oneflow", "oneflow", str(house)), tmp_path / "cache",
                          progress=lambda _: None)
    assert (build.provenance["packages"]["oneflow"]["wheel"]
            == f"oneflow-0.0.1+fake-{ours}-{ours}-linux_x86_64.whl")
    assert build.provenance["packages"]["flowvision"]["wheel"] == "flowvision-0.0.1+fake-py3-none-any.whl"

    (house / "oneflow-0.0.1+fake-py3-none-any.whl").write_bytes(stand_in.read_bytes())
    with pytest.raises(UserError, match=r"^oneflow \(wheel .*\): several wheels of oneflow fit Python "
                                        r"[0-9.]+: oneflow-0\.0\.1\+fake-.*; give one$"):
        prepare_build(parse_build_spec("oneflow", "oneflow", str(house)), tmp_path / "cache")


def test_wheel_tags_that_fit_a_python():
    from speedstats.bench.builds import _wheel_fits

    fits = {name: _wheel_fits(name, "3.10.12") for name in (
        "oneflow-0.9.0-cp310-cp310-manylinux2014_x86_64.whl",
        "oneflow-0.9.0-cp39-cp39-manylinux2014_x86_64.whl",
        "x-1-py3-none-any.whl", "x-1-cp38-abi3-linux_x86_64.whl", "x-1-cp311-abi3-linux_x86_64.whl",
        "x-1-py2-none-any.whl", "x-1-cp310-cp310m-linux_x86_64.whl")}
    assert [name for name, fit in fits.items() if fit] == [
        "oneflow-0.9.0-cp310-cp310-manylinux2014_x86_64.whl", "x-1-py3-none-any.whl",
        "x-1-cp38-abi3-linux_x86_64.whl"]


@pytest.mark.parametrize("tags", ["cp38-cp38-manylinux2014_x86_64", "cp310-cp310-macosx_11_0_arm64",
                                  "py3-none-win_amd64"])
def test_a_wheel_for_another_python_or_platform_fails_before_pip_naming_the_tags_this_python_takes(
        tmp_path, tags):
    from packaging.tags import sys_tags

    wheel = tmp_path / f"oneflow-0.0.1+fake-{tags}.whl"
    wheel.write_bytes(stand_in_oneflow(tmp_path / "w").read_bytes())  # a valid wheel, under another name
    request = parse_build_spec("oneflow", "oneflow", str(wheel), companion_specs=["installed"])
    lines = []
    with pytest.raises(UserError) as raised:
        prepare_build(request, tmp_path / "cache", progress=lines.append)
    first = next(iter(sys_tags()))
    assert str(raised.value).startswith(
        f"oneflow (wheel {wheel.name}): {wheel.name} is for {tags}, which this Python (CPython "
        f"{sys.version_info[0]}.{sys.version_info[1]}.")
    assert f"does not take: it takes {first} and " in str(raised.value)
    assert f"other tags, for the platforms {first.platform}, " in str(raised.value)
    assert lines == [] and cache_entries(tmp_path / "cache") == []  # pip never ran


def test_a_slow_command_says_how_long_it_has_run_every_interval():
    lines = []
    script = "import sys, time; print('first'); time.sleep(1.3); print('done', file=sys.stderr)"
    status, output = run_with_progress([sys.executable, "-c", script], None, 30, lines.append,
                                       "installing oneflow (wheel x.whl)", interval_s=0.4)
    assert (status, output) == (0, "first\ndone\n")
    assert 2 <= len(lines) <= 4, lines
    seconds = [int(line.rsplit(": ", 1)[1].rstrip("s")) for line in lines]
    assert all(line.startswith("installing oneflow (wheel x.whl): ") for line in lines)
    assert seconds == sorted(seconds) and seconds[-1] <= 2


def test_a_command_past_its_timeout_is_killed():
    lines = []
    start = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_with_progress([sys.executable, "-c", "import time; time.sleep(60)"], None, 1, lines.append,
                          "installing x", interval_s=0.3)
    assert time.monotonic() - start < 10
    assert len(lines) >= 2


def test_worker_env_puts_the_build_first():
    from speedstats.bench.builds import Build

    build = Build(role="oneflow", family="oneflow", site_dir=Path("/b/site"), provenance={})
    env = {"PYTHONPATH": "/src", "HOME": "/h"}
    assert build.worker_env(env) == {"PYTHONPATH": f"/b/site{os.pathsep}/src", "HOME": "/h"}
    assert env == {"PYTHONPATH": "/src", "HOME": "/h"}
    installed = Build(role="oneflow", family="oneflow", site_dir=None, provenance={})
    assert installed.worker_env(env) == env


# --- the real OneFlow wheel ---------------------------------------------------------------------

WORKER_IMPORT = """
import importlib.metadata, json, oneflow
libraries = sorted({line.split()[-1] for line in open("/proc/self/maps") if "liboneflow" in line})
print(json.dumps({"version": oneflow.__version__, "metadata": importlib.metadata.version("oneflow"),
                  "files": [oneflow.__file__, oneflow._oneflow_internal.__file__], "libraries": libraries}))
"""


@pytest.mark.heavy
def test_the_repacked_oneflow_wheel_is_installed_once_and_its_workers_import_it(tmp_path,
                                                                                 repacked_oneflow_wheel):
    cache = tmp_path / "cache"
    try:
        request = parse_build_spec("oneflow", "oneflow", str(repacked_oneflow_wheel))
        first_lines = []
        build = prepare_build(request, cache, progress=first_lines.append)
        assert any("installing with pip" in line for line in first_lines)
        site = build.site_dir
        oneflow = build.provenance["packages"]["oneflow"]
        assert oneflow["version"] == oneflow["module_version"] == "0.9.0+a"
        assert oneflow["git_commit"] == "381b12c"
        assert oneflow["wheel"] == repacked_oneflow_wheel.name
        assert repacked_oneflow_wheel.name.startswith("oneflow-0.9.0+a-cp310-cp310-")
        assert oneflow["sha256"] == file_sha256(repacked_oneflow_wheel)
        assert oneflow["file"] == str(site / "oneflow" / "__init__.py")
        assert build.provenance["source"] == "wheel" and build.provenance["environment"]["numpy"]
        # flowvision was not given: it comes from the environment.
        assert build.provenance["packages"]["flowvision"]["wheel"] is None
        assert not build.provenance["packages"]["flowvision"]["file"].startswith(str(site))

        stamp = (site / "oneflow" / "version.py").stat().st_mtime_ns
        lines = []
        again = prepare_build(request, cache, progress=lines.append)
        assert again.site_dir == site and (site / "oneflow" / "version.py").stat().st_mtime_ns == stamp
        assert not any("installing" in line for line in lines)
        assert any("from the cache" in line for line in lines)
        assert again.provenance == build.provenance

        worker = subprocess.run([sys.executable, "-c", WORKER_IMPORT], check=False, capture_output=True,
                                text=True, env=build.worker_env(subprocess_env("oneflow")), timeout=180)
        assert worker.returncode == 0, worker.stderr
        imported = json.loads(worker.stdout.splitlines()[-1])
        assert (imported["version"], imported["metadata"]) == ("0.9.0+a", "0.9.0+a")
        # The Python code, the extension module and the native library all come from the build.
        assert imported["files"][0] == str(site / "oneflow" / "__init__.py")
        assert imported["files"][1].startswith(str(site / "oneflow") + os.sep)
        assert imported["libraries"] and all(lib.startswith(str(site) + os.sep)
                                             for lib in imported["libraries"])
    finally:
        shutil.rmtree(cache, ignore_errors=True)  # 2.5 GB; pytest keeps its last temporary folders


@pytest.mark.heavy
def test_the_installed_oneflow_and_pytorch_are_probed(tmp_path):
    requests = [parse_build_spec("oneflow", "oneflow", "installed"),
                parse_build_spec("pytorch", "pytorch", "installed")]
    builds = prepare_builds(requests, tmp_path / "cache", progress=lambda _: None)
    oneflow, pytorch = builds["oneflow"], builds["pytorch"]
    assert oneflow.site_dir is None and oneflow.provenance["source"] == "installed"
    entry = oneflow.provenance["packages"]["oneflow"]
    assert entry["version"] == "0.9.0" and entry["git_commit"] == "381b12c" and entry["wheel"] is None
    torch = pytorch.provenance["packages"]["torch"]
    assert torch["version"] and torch["git_commit"]
    assert set(pytorch.provenance["packages"]) == set(family_packages("pytorch"))
    assert cache_entries(tmp_path / "cache") == []


@pytest.mark.frameworks  # reads the installed OneFlow's conv.py
def test_the_slow_build_edits_only_conv2d_forward(tmp_path):
    import importlib.util

    import oneflow_builds

    spec = importlib.util.find_spec("oneflow")  # finds the package without importing it
    original = (Path(spec.origin).parent / "nn" / "modules" / "conv.py").read_text()
    conv = tmp_path / "oneflow" / "nn" / "modules" / "conv.py"
    conv.parent.mkdir(parents=True)
    conv.write_text(original)
    oneflow_builds._slow_conv2d(tmp_path)
    edited = conv.read_text()
    compile(edited, str(conv), "exec")
    assert edited.count("self._conv_forward(x, self.weight, self.bias)") == (
        original.count("self._conv_forward(x, self.weight, self.bias)") + 1)
    conv2d = edited[edited.index("\nclass Conv2d("):edited.index("\nclass Conv3d(")]
    assert oneflow_builds._SLOW_CONV2D_FORWARD in conv2d
    assert edited.replace(oneflow_builds._SLOW_CONV2D_FORWARD, oneflow_builds._CONV2D_FORWARD) == original


@pytest.mark.frameworks  # reads the installed OneFlow's conv.py
def test_the_slowdown_build_edits_only_conv2d_forward_with_its_share(tmp_path):
    import importlib.util

    import oneflow_builds

    spec = importlib.util.find_spec("oneflow")
    original = (Path(spec.origin).parent / "nn" / "modules" / "conv.py").read_text()
    conv = tmp_path / "oneflow" / "nn" / "modules" / "conv.py"
    conv.parent.mkdir(parents=True)
    conv.write_text(original)
    share = oneflow_builds.extra_forward_share(15)
    forward = oneflow_builds._SHARED_CONV2D_FORWARD.format(percent=15, extra=share)
    oneflow_builds._edit_conv2d_forward(tmp_path, forward)
    edited = conv.read_text()
    compile(edited, str(conv), "exec")
    assert "extra = 0.75\n" in forward and "0.9.0+slow15" in forward
    conv2d = edited[edited.index("\nclass Conv2d("):edited.index("\nclass Conv3d(")]
    assert forward in conv2d and edited.replace(forward, oneflow_builds._CONV2D_FORWARD) == original
    assert oneflow_builds.extra_forward_share(25) == 1.25
    with pytest.raises(ValueError, match="percent must be an integer from 1 to 200"):
        oneflow_builds.slowdown_oneflow_wheel(0)


def test_a_build_spec_of_several_lines_is_refused_on_one():
    from speedstats.bench.builds import _parse_sources
    from speedstats.errors import UserError

    with pytest.raises(UserError) as refused:
        _parse_sources("oneflow", "x ``` </details>\n@octocat ![p](https://evil.example/p.png)")
    said = str(refused.value)
    assert "\n" not in said and said.startswith("oneflow: x ``` </details> @octocat")
