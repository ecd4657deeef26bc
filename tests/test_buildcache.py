"""The build cache (speedstats.bench.buildcache): each wheel's digest remembered by its file, two runs
installing the same build once, large files shared between builds, and the least recently used builds
evicted, never one that a run is measuring. Builds of stand-in wheels installed with real pip."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import (
    cache_entries,
    file_sha256,
    make_wheel,
    stand_in_flowvision,
    stand_in_oneflow,
    stand_in_oneflow_request,
)
from speedstats.bench.buildcache import DIGEST_KEEP_S, DIGESTS, EVICT_GRACE_S, STORE, evict_builds
from speedstats.bench.builds import parse_build_spec, prepare_build


def remembered_digests(cache):
    """{file name: text} of the wheels' digests the cache remembers."""
    folder = Path(cache) / "builds" / DIGESTS
    return {p.name: p.read_text() for p in folder.iterdir()} if folder.is_dir() else {}


# --- the wheels' digests ------------------------------------------------------------------------


@pytest.mark.venv
def test_a_wheel_file_is_read_once_while_it_is_unchanged(tmp_path):
    wheel = stand_in_oneflow(tmp_path / "w")
    cache = tmp_path / "cache"
    request = stand_in_oneflow_request(wheel)
    first = prepare_build(request, cache, progress=lambda _: None)
    assert first.provenance["packages"]["oneflow"]["sha256"] == file_sha256(wheel)
    memo, = (name for name, text in remembered_digests(cache).items() if text == file_sha256(wheel) + "\n")

    # While the file is unchanged its digest is taken from the cache, not read from the file (a digest
    # planted there shows it; that build is another one, as its key is made from the digest).
    planted = "0" * 64
    (cache / "builds" / DIGESTS / memo).write_text(planted + "\n")
    again = prepare_build(request, cache, progress=lambda _: None)
    assert again.provenance["packages"]["oneflow"]["sha256"] == planted

    # A file with another modification time is read again (a new download, a rebuilt wheel)...
    os.utime(wheel, ns=(time.time_ns(), time.time_ns() - 10**9))
    touched = prepare_build(request, cache, progress=lambda _: None)
    assert touched.provenance["packages"]["oneflow"]["sha256"] == file_sha256(wheel)
    assert touched.site_dir == first.site_dir
    # ... and so is one whose remembered digest is no digest.
    for memo in (cache / "builds" / DIGESTS).iterdir():
        memo.write_text("not a digest\n")
    mended = prepare_build(request, cache, progress=lambda _: None)
    assert mended.provenance["packages"]["oneflow"]["sha256"] == file_sha256(wheel)
    assert mended.site_dir == first.site_dir


@pytest.mark.venv
def test_remembered_digests_unused_for_a_week_are_deleted_with_the_evicted_builds(tmp_path):
    cache = tmp_path / "cache"
    prepare_build(stand_in_oneflow_request(stand_in_oneflow(tmp_path / "w")), cache, progress=lambda _: None)
    memos = sorted((cache / "builds" / DIGESTS).iterdir())
    assert len(memos) == 2  # OneFlow's wheel and flowvision's
    long_ago = time.time() - DIGEST_KEEP_S - 60
    os.utime(memos[0], (long_ago, long_ago))
    evict_builds(cache, keep=8, progress=lambda _: None)
    assert sorted((cache / "builds" / DIGESTS).iterdir()) == memos[1:]


def test_what_is_not_a_regular_file_among_the_digests_and_the_store_is_left_alone(tmp_path):
    # A job's own code runs on the runner and may leave anything in the cache: a folder where a digest's
    # file would be, a link. Eviction skips them, whatever their age, and still deletes what it should.
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


# --- two runs, one install ----------------------------------------------------------------------

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


# --- shared files, least recently used builds evicted -------------------------------------------

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
    assert stored.name == f"{file_sha256(first.site_dir / BUNDLED_LIBRARY)}-644"
    # Small files are each build's own, and the builds still import as themselves.
    inits = [(b.site_dir / "oneflow" / "__init__.py").stat().st_ino for b in (first, second)]
    assert inits[0] != inits[1]
    assert second.provenance["packages"]["oneflow"]["version"] == "0.0.1+b"


@pytest.mark.venv
def test_the_cache_evicts_the_least_recently_used_builds_it_is_not_measuring(tmp_path):
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
