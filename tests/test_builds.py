"""Builds as inputs: parsing the user's text, installing a build once into the cache, probing it,
and failing in seconds with one line when a build does not install or import.

The light tests install tiny wheels (tests/helpers.py: a stand-in oneflow and flowvision) with real
pip; the heavy ones install the real OneFlow wheel repacked as 0.9.0+a."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from helpers import make_wheel, stand_in_flowvision, stand_in_oneflow
from speedstats.bench.builds import (
    DIGESTS,
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


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def cache_entries(cache):
    """What the builds cache holds, lock files and the wheels' remembered digests aside."""
    builds = Path(cache) / "builds"
    if not builds.is_dir():
        return []
    return sorted(p.name for p in builds.iterdir() if not p.name.endswith(".lock") and p.name != DIGESTS)


def remembered_digests(cache):
    """{file name: text} of the wheels' digests the cache remembers."""
    folder = Path(cache) / "builds" / DIGESTS
    return {p.name: p.read_text() for p in folder.iterdir()} if folder.is_dir() else {}


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
                       "wheel": oneflow_wheel.name, "sha256": sha256(oneflow_wheel), "requirement": None,
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


def oneflow_request(oneflow_wheel, role="oneflow"):
    """A request for a stand-in OneFlow with the stand-in flowvision (an environment with the real
    flowvision installed would import it, and it the real OneFlow's modules)."""
    flowvision_wheel = stand_in_flowvision(Path(oneflow_wheel).parent / "flowvision")
    return parse_build_spec(role, "oneflow", str(oneflow_wheel), companion_specs=[str(flowvision_wheel)])


@pytest.mark.venv
def test_a_wheel_file_is_read_once_while_it_is_unchanged(tmp_path):
    wheel = stand_in_oneflow(tmp_path / "w")
    cache = tmp_path / "cache"
    request = oneflow_request(wheel)
    first = prepare_build(request, cache, progress=lambda _: None)
    assert first.provenance["packages"]["oneflow"]["sha256"] == sha256(wheel)
    memo, = (name for name, text in remembered_digests(cache).items() if text == sha256(wheel) + "\n")

    # While the file is unchanged its digest is taken from the cache, not read from the file (a digest
    # planted there shows it; that build is another one, as its key is made from the digest).
    planted = "0" * 64
    (cache / "builds" / DIGESTS / memo).write_text(planted + "\n")
    again = prepare_build(request, cache, progress=lambda _: None)
    assert again.provenance["packages"]["oneflow"]["sha256"] == planted

    # A file with another modification time is read again (a new download, a rebuilt wheel)...
    os.utime(wheel, ns=(time.time_ns(), time.time_ns() - 10**9))
    touched = prepare_build(request, cache, progress=lambda _: None)
    assert touched.provenance["packages"]["oneflow"]["sha256"] == sha256(wheel)
    assert touched.site_dir == first.site_dir
    # ... and so is one whose remembered digest is no digest.
    for memo in (cache / "builds" / DIGESTS).iterdir():
        memo.write_text("not a digest\n")
    mended = prepare_build(request, cache, progress=lambda _: None)
    assert mended.provenance["packages"]["oneflow"]["sha256"] == sha256(wheel)
    assert mended.site_dir == first.site_dir


@pytest.mark.venv
def test_remembered_digests_unused_for_a_week_are_deleted_with_the_evicted_builds(tmp_path):
    from speedstats.bench.builds import DIGEST_KEEP_S, evict_builds

    cache = tmp_path / "cache"
    prepare_build(oneflow_request(stand_in_oneflow(tmp_path / "w")), cache, progress=lambda _: None)
    memos = sorted((cache / "builds" / DIGESTS).iterdir())
    assert len(memos) == 2  # OneFlow's wheel and flowvision's
    long_ago = time.time() - DIGEST_KEEP_S - 60
    os.utime(memos[0], (long_ago, long_ago))
    evict_builds(cache, keep=8, progress=lambda _: None)
    assert sorted((cache / "builds" / DIGESTS).iterdir()) == memos[1:]


def test_what_is_not_a_regular_file_among_the_digests_and_the_store_is_left_alone(tmp_path):
    # A job's own code runs on the runner and may leave anything in the cache: a folder where a digest's
    # file would be, a link. Eviction skips them, whatever their age, and still deletes what it should.
    from speedstats.bench.builds import DIGEST_KEEP_S, STORE, evict_builds

    builds = tmp_path / "cache" / "builds"
    digests, store = builds / DIGESTS, builds / STORE
    for folder in (digests, store):
        (folder / "planted").mkdir(parents=True)
        (folder / "planted" / "inside").write_text("x\n")
        (folder / "link").symlink_to(tmp_path / "elsewhere")
        (folder / "dangling").symlink_to(tmp_path / "nothing")
    (tmp_path / "elsewhere").write_text("not the cache's\n")
    (digests / "old").write_text("0" * 64 + "\n")
    (digests / "new").write_text("1" * 64 + "\n")
    (store / "unlinked").write_text("no build links to it\n")
    long_ago = time.time() - DIGEST_KEEP_S - 60
    for path in (digests / "old", digests / "planted", digests / "link", store / "planted"):
        os.utime(path, (long_ago, long_ago), follow_symlinks=False)

    assert evict_builds(tmp_path / "cache", keep=0, progress=lambda _: None) == []
    assert sorted(p.name for p in digests.iterdir()) == ["dangling", "link", "new", "planted"]
    assert sorted(p.name for p in store.iterdir()) == ["dangling", "link", "planted"]
    assert (tmp_path / "elsewhere").read_text() == "not the cache's\n"
    assert (digests / "planted" / "inside").is_file()


@pytest.mark.frameworks  # probes the installed PyTorch
@pytest.mark.venv
def test_installed_builds_are_probed_beside_the_others_and_the_first_failure_is_raised(tmp_path):
    good = stand_in_oneflow(tmp_path / "good")
    broken = stand_in_oneflow(tmp_path / "broken", init='raise ImportError("this build is broken")\n')
    lines = []
    builds = prepare_builds([oneflow_request(good), parse_build_spec("pytorch", "pytorch", "installed")],
                            tmp_path / "cache", progress=lines.append)
    assert list(builds) == ["oneflow", "pytorch"]
    assert builds["pytorch"].site_dir is None and builds["pytorch"].provenance["source"] == "installed"
    assert builds["oneflow"].provenance["packages"]["oneflow"]["version"] == "0.0.1+fake"
    assert sorted(line.split(" ", 2)[1] for line in lines) == ["oneflow", "oneflow", "oneflow", "pytorch"]

    with pytest.raises(UserError) as raised:
        prepare_builds([parse_build_spec("pytorch", "pytorch", "installed"), oneflow_request(broken),
                        oneflow_request(good, role="oneflow_base")],
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


PREPARE = """
import sys
from speedstats.bench.builds import parse_build_spec, prepare_build
request = parse_build_spec(sys.argv[1], "oneflow", sys.argv[2], companion_specs=[sys.argv[3]])
print(prepare_build(request, sys.argv[4]).site_dir)
"""


@pytest.mark.venv
def test_two_runs_preparing_the_same_build_install_it_once(tmp_path):
    oneflow_wheel = stand_in_oneflow(tmp_path / "w")
    flowvision_wheel = stand_in_flowvision(tmp_path / "w")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    runs = [subprocess.Popen([sys.executable, "-c", PREPARE, role, str(oneflow_wheel), str(flowvision_wheel),
                              str(tmp_path / "cache")], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE,
                             text=True) for role in ("oneflow", "oneflow_base")]
    outputs = [run.communicate(timeout=120) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    (folder,) = cache_entries(tmp_path / "cache")
    assert {out.strip() for out, _ in outputs} == {str(tmp_path / "cache" / "builds" / folder / "site")}
    assert sum("installing with pip" in err for _, err in outputs) == 1
    assert sum(": from the cache (" in err for _, err in outputs) == 1


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
        assert oneflow["sha256"] == sha256(repacked_oneflow_wheel)
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


# --- a bounded cache: shared files, least recently used builds evicted ------------------------------

BUNDLED_LIBRARY = "oneflow.libs/libnccl-stand-in.so"


def stand_in_with_bundled_library(folder, version):
    """A stand-in oneflow whose wheel bundles a 2 MiB library, the same bytes in every version."""
    return make_wheel(folder, "oneflow", version, {
        "oneflow/__init__.py": f'__version__ = "{version}"\n__git_commit__ = "abc1234"\n',
        BUNDLED_LIBRARY: "nccl " * (2 << 18),
    })


def prepare_version(tmp_path, version, lines=None):
    wheels = list((tmp_path / "w" / version).glob("*.whl"))  # the same bytes when asked again
    wheel = wheels[0] if wheels else stand_in_with_bundled_library(tmp_path / "w" / version, version)
    flowvision = tmp_path / "w" / "flowvision-0.0.1+fake-py3-none-any.whl"
    if not flowvision.exists():
        stand_in_flowvision(tmp_path / "w")
    request = parse_build_spec("oneflow", "oneflow", str(wheel), companion_specs=[str(flowvision)])
    return prepare_build(request, tmp_path / "cache",
                         progress=(lines.append if lines is not None else lambda _: None))


def last_used(build, seconds_ago):
    stamp = time.time() - seconds_ago
    os.utime(build.site_dir.parent, (stamp, stamp))


@pytest.mark.venv
def test_builds_that_bundle_the_same_library_keep_it_once(tmp_path):
    lines = []
    first = prepare_version(tmp_path, "0.0.1+a")
    second = prepare_version(tmp_path, "0.0.1+b", lines)
    libraries = [(b.site_dir / BUNDLED_LIBRARY).stat() for b in (first, second)]
    assert libraries[0].st_ino == libraries[1].st_ino and libraries[0].st_nlink == 3  # two builds, the store
    assert any(": 2 MiB shared with builds in the cache" in line for line in lines), lines
    (stored,) = (tmp_path / "cache" / "builds" / ".files").iterdir()
    assert stored.name == f"{sha256(first.site_dir / BUNDLED_LIBRARY)}-644"
    # Small files are each build's own, and the builds still import as themselves.
    inits = [(b.site_dir / "oneflow" / "__init__.py").stat().st_ino for b in (first, second)]
    assert inits[0] != inits[1]
    assert second.provenance["packages"]["oneflow"]["version"] == "0.0.1+b"


@pytest.mark.venv
def test_the_cache_evicts_the_least_recently_used_builds_it_is_not_measuring(tmp_path):
    from speedstats.bench.builds import EVICT_GRACE_S, evict_builds

    builds = {version: prepare_version(tmp_path, version) for version in ("1", "2", "3", "4", "5")}
    for age, version in enumerate(("5", "4", "3", "2", "1")):  # 1 the least recently used
        last_used(builds[version], EVICT_GRACE_S + 60 * (age + 1))
    for version in ("1", "2", "5"):
        builds[version].in_use.close()  # those runs ended; 3 and 4 are still being measured
    folders = {version: build.site_dir.parent for version, build in builds.items()}

    lines = []
    evicted = evict_builds(tmp_path / "cache", keep=2, progress=lines.append)
    # 5 and 4 are the two most recent; 3 is older but in use; 2 and 1 go.
    assert evicted == [folders["2"].name, folders["1"].name]
    assert [v for v, f in folders.items() if f.is_dir()] == ["3", "4", "5"]
    names = f"{folders['2'].name}, {folders['1'].name}"
    assert lines == [f"build cache: deleted 2 least recently used build(s) beyond 2: {names}"]
    (stored,) = (tmp_path / "cache" / "builds" / ".files").iterdir()
    assert stored.stat().st_nlink == 4  # the store and three builds
    assert not [p for p in (tmp_path / "cache" / "builds").iterdir() if ".tmp-" in p.name]

    # A build used within the grace period stays, whatever its rank; when no build links to a
    # stored file any more, the store lets it go.
    for version in ("3", "4", "5"):
        builds[version].in_use.close()
    last_used(builds["3"], 5)
    assert evict_builds(tmp_path / "cache", keep=0, progress=lines.append) == [folders["5"].name,
                                                                                 folders["4"].name]
    assert [v for v, f in folders.items() if f.is_dir()] == ["3"]
    assert stored.stat().st_nlink == 2
    last_used(builds["3"], EVICT_GRACE_S + 1)
    evict_builds(tmp_path / "cache", keep=0, progress=lines.append)
    assert list(stored.parent.iterdir()) == []

    # An evicted build is installed again when a run asks for it.
    again = []
    assert prepare_version(tmp_path, "1", again).site_dir == folders["1"] / "site"
    assert any("installing with pip" in line for line in again)


def test_a_build_spec_of_several_lines_is_refused_on_one():
    from speedstats.bench.builds import _parse_sources
    from speedstats.errors import UserError

    with pytest.raises(UserError) as refused:
        _parse_sources("oneflow", "x ``` </details>\n@octocat ![p](https://evil.example/p.png)")
    said = str(refused.value)
    assert "\n" not in said and said.startswith("oneflow: x ``` </details> @octocat")
