"""The build cache: where the builds a run installs are kept, found again, shared, locked and evicted.

Its layout, under `<cache>/builds/`:

- `<family>-<key>/`: one build, `site/` (what pip installed) and `build.json` (its provenance). The key
  is a sha256 over the family, each wheel's sha256 or requirement, the pip arguments and the Python
  version (`cache_key`), so a rerun with the same inputs reuses the folder without running pip. A build
  is installed in a temporary folder beside it (`.<family>-<key>.tmp-*`) and renamed into place with its
  `build.json` last, so a folder with `build.json` is always whole.
- `.<family>-<key>.lock`: the build's lock file. Installing holds it exclusively, so two runs never
  install the same build at once; each run holds it shared while it measures the build, so that
  `evict_builds` skips it.
- `.files/<sha256>-<mode>`: the store. Every large file of a new build is hard-linked to an identical one
  already there, so builds that bundle the same libraries (NCCL, CUTLASS, cuFFT in a OneFlow wheel) keep
  them once; a file of the store goes with its last build.
- `.digests/`: each wheel's sha256, remembered by its file's identity (`wheel_digest`), so the same
  file is not read again.

The cache stays bounded: `evict_builds` deletes the least recently used builds beyond a count, never
one that a run is using nor one used in the last few minutes.
"""

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import time
from pathlib import Path

from speedstats.errors import UserError
from speedstats.fsutil import write_atomic

STORE = ".files"
DIGESTS = ".digests"  # each wheel's sha256, by the identity of its file (wheel_digest)
DIGEST_KEEP_S = 7 * 24 * 3600  # a remembered digest not used for this long is deleted by evict_builds
BUILD_RECORD = "build.json"  # written last: a build's folder holding it is finished
LAYOUT_VERSION = 1
DEFAULT_KEEP_BUILDS = 8
SHARE_MIN_BYTES = 1 << 20  # smaller files are not worth a hash and a link
EVICT_GRACE_S = 600  # a build used this recently is kept: a run may be about to take its lock


def print_to_stderr(message):
    print(message, file=sys.stderr, flush=True)


def _builds_dir(cache_dir):
    return Path(cache_dir) / "builds"


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def wheel_digest(path, cache_dir):
    """The wheel's sha256, remembered under the cache by its file's identity (path, device, inode, size,
    modification time in ns): a run that measures the same wheel file again does not read its gigabyte
    again. A file rewritten in place that keeps its size and modification time is taken as unchanged."""
    info = os.stat(path)
    identity = [os.path.realpath(path), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns]
    memo = _builds_dir(cache_dir) / DIGESTS / hashlib.sha256(json.dumps(identity).encode()).hexdigest()
    with contextlib.suppress(OSError, UnicodeDecodeError):
        known = memo.read_text(encoding="ascii").strip()
        if re.fullmatch("[0-9a-f]{64}", known):
            os.utime(memo)  # its last use: evict_builds deletes those unused for DIGEST_KEEP_S
            return known
    digest = _sha256(path)
    with contextlib.suppress(UserError):  # a cache that cannot keep it reads the wheel next time too
        write_atomic(memo, digest + "\n", "build cache's digest")
    return digest


def cache_key(request, wheel_hashes, python_version):
    """The key of a build request (bench.builds.BuildRequest): its family, its sources (a wheel by its
    sha256 in wheel_hashes), its pip arguments and the workers' Python version."""
    material = {
        "layout": LAYOUT_VERSION,
        "family": request.family,
        "sources": [[s.kind, wheel_hashes[s.value] if s.kind == "wheel" else s.value]
                    for s in request.sources],
        "pip_args": list(request.pip_args),
        "python": python_version,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def build_folder(cache_dir, family, key):
    """The folder of the build with this family and cache key."""
    return _builds_dir(cache_dir) / f"{family}-{key[:16]}"


def _finished(folder):
    return (folder / BUILD_RECORD).is_file()


def _lock_path(folder):
    return folder.parent / f".{folder.name}.lock"


def _hold_in_use(folder):
    """A shared lock on the build's lock file, held until the process exits (or the handle closes)."""
    handle = open(_lock_path(folder), "a")  # noqa: SIM115 (held past this function, on purpose)
    fcntl.flock(handle, fcntl.LOCK_SH)
    with contextlib.suppress(FileNotFoundError):  # evicted meanwhile: the caller looks again
        os.utime(folder)  # the folder's mtime is its last use, the order in which evict_builds deletes
    return handle


@contextlib.contextmanager
def _installing(folder, what, progress):
    with open(_lock_path(folder), "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"build {what}: waiting for another run installing the same build…")
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def hold_or_install(folder, install, what, progress):
    """(in_use, installed): a shared lock on the build's folder that keeps it from eviction until the
    handle closes, and what `install()` returned, or None when the cache had the build finished.
    `install()` runs under the build's exclusive lock, after a killed run's temporary folders are
    cleared; `what` names the build in the line said while another run installs it."""
    in_use = _hold_in_use(folder) if _finished(folder) else None
    if in_use is not None and not _finished(folder):  # evicted while this run waited for the lock
        in_use.close()
        in_use = None
    if in_use is not None:
        return in_use, None
    folder.parent.mkdir(parents=True, exist_ok=True)
    installed = None
    with _installing(folder, what, progress):
        if not _finished(folder):
            for stale in folder.parent.glob(f".{folder.name}.tmp-*"):  # a killed run's; we hold the lock
                shutil.rmtree(stale, ignore_errors=True)
            installed = install()
    # Taken after the exclusive lock is let go (flock would wait on this process's own lock);
    # evict_builds leaves a build this fresh alone in between.
    return _hold_in_use(folder), installed


def _temporary_beside(folder):
    return Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=folder.parent))


def temporary_folder(folder):
    """A new temporary folder beside the build's, to install it in; put_in_place renames it into place."""
    tmp = _temporary_beside(folder)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp's 0700 would hide the build from other users' jobs
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return tmp


def share_identical_files(site, folder):
    """Replace each large file of a new build (`site`, to become `folder`'s) by a hard link to an
    identical file already in the cache's store, or put it in the store; a filesystem without hard
    links keeps every build's own copies. The bytes shared."""
    store = folder.parent / STORE
    shared = 0
    for path in sorted(site.rglob("*")):
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode) or info.st_size < SHARE_MIN_BYTES:
            continue
        stored = store / f"{_sha256(path)}-{stat.S_IMODE(info.st_mode):o}"
        try:
            store.mkdir(exist_ok=True)
            if stored.exists():
                link = path.with_name(f".{path.name}.link")
                os.link(stored, link)
                os.replace(link, path)
                shared += info.st_size
            else:
                os.link(path, stored)
        except OSError:
            return shared
    return shared


def put_in_place(tmp, folder, record):
    """Write the build's record (`build.json`) into its temporary folder and rename that into place."""
    write_atomic(tmp / BUILD_RECORD, json.dumps(record, indent=2, sort_keys=True) + "\n")
    if folder.exists():  # a folder without build.json: left by hand, never by a finished install
        shutil.rmtree(folder)
    os.rename(tmp, folder)


def _evictable(folder, now):
    try:
        return _finished(folder) and now - folder.stat().st_mtime >= EVICT_GRACE_S
    except FileNotFoundError:
        return False


def _regular_files(folder):
    """(path, lstat) of each regular file in a folder of the cache; anything else there (a folder, a link,
    planted by a job or left by another version) is left alone, and an entry gone meanwhile skipped."""
    if not folder.is_dir() or folder.is_symlink():
        return
    for path in folder.iterdir():
        try:
            info = path.lstat()
        except FileNotFoundError:
            continue
        if stat.S_ISREG(info.st_mode):
            yield path, info


def evict_builds(cache_dir, keep=DEFAULT_KEEP_BUILDS, progress=print_to_stderr):
    """Delete the least recently used builds beyond `keep`, skipping any that a run holds; then the
    files of the store that no build links to any more. The names of the builds deleted."""
    builds_dir = _builds_dir(cache_dir)
    if not builds_dir.is_dir():
        return []
    folders = [f for f in builds_dir.iterdir() if f.is_dir() and not f.name.startswith(".") and _finished(f)]
    folders.sort(key=lambda f: f.stat().st_mtime, reverse=True)
    now, evicted = time.time(), []
    for folder in folders[keep:]:
        if not _evictable(folder, now):
            continue
        with open(_lock_path(folder), "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a run is measuring it
            # Renamed first, so that a deletion cut short leaves a stale temporary folder (which the
            # next install of this build clears), never a build that looks finished but lacks files.
            doomed = _temporary_beside(folder)
            os.rename(folder, doomed / "build")
            shutil.rmtree(doomed, ignore_errors=True)
        evicted.append(folder.name)
    for stored, info in _regular_files(builds_dir / STORE):
        if info.st_nlink == 1:  # only the store's own name is left
            stored.unlink(missing_ok=True)
    for memo, info in _regular_files(builds_dir / DIGESTS):
        if now - info.st_mtime > DIGEST_KEEP_S:
            memo.unlink(missing_ok=True)
    if evicted:
        progress(f"build cache: deleted {len(evicted)} least recently used build(s) beyond {keep}: "
                 + ", ".join(evicted))
    return evicted
