"""One benchmark at a time per device: a file lock shared by every job on the runner host.

Two jobs measuring on the same GPU (or the same CPU) at once make both sets of figures meaningless,
so `speedstats run` holds `device_lock(device, ...)` for the whole run. The lock is `flock` on one
file per device in a folder that all jobs of the host see:

- `$SPEEDSTATS_LOCK_DIR` when set (point it at a host folder mounted into every container),
- else `/tmp/speedstats-locks`.

The kernel drops an flock when the last process holding its open file exits, even on SIGKILL, so a
crashed job never leaves a stale lock behind; benchmark workers inherit the open file (see
`held_lock_fds`), so the device stays locked until they are gone too. While waiting, a line on stderr
names the holder's pid and since when it holds the device, again whenever another job takes it first,
and every minute.
"""

import contextlib
import datetime
import fcntl
import os
import re
import sys
import time
from pathlib import Path

from speedstats import actions_io
from speedstats.errors import EXIT_DEVICE_BUSY, UserError

DEFAULT_LOCK_DIR = "/tmp/speedstats-locks"
_REMINDER_EVERY_S = 60.0
_held_fds = []  # descriptors of the locks this process holds now


def held_lock_fds():
    """The open lock files of the devices held now. Benchmark workers inherit them, so the kernel
    keeps a device locked until the last process of a run is gone, even after SIGKILL of the run."""
    return tuple(_held_fds)


class DeviceBusyError(UserError):
    """The device stayed locked by another job for longer than the timeout."""

    exit_code = EXIT_DEVICE_BUSY


def default_lock_dir():
    return Path(os.environ.get("SPEEDSTATS_LOCK_DIR") or DEFAULT_LOCK_DIR)


def normalize_device(device):
    """Lower case without spaces; 'gpu' is 'cuda'."""
    name = str(device).strip().lower()
    if not name:
        raise UserError("device: empty device name")
    return "cuda" if name == "gpu" else name


def lock_targets(device):
    """The (name, lock file stem) pairs that `device` stands for.

    A GPU's lock is named by its NVML UUID where NVML answers, so "cuda:0" under
    CUDA_VISIBLE_DEVICES=1 and "cuda:1" without it are one lock, as they are one GPU; without NVML
    it is "cuda-N". Plain "cuda" is every GPU the process sees (a DDP case uses several).
    """
    from speedstats import gpuinfo

    name = normalize_device(device)
    if name == "cuda":
        indices = list(range(gpuinfo.visible_gpu_count())) or [0]
    elif re.fullmatch(r"cuda:\d+", name):
        indices = [int(name.split(":")[1])]
    else:
        return [(name, re.sub(r"[^a-z0-9_.-]+", "-", name))]
    targets = []
    for index in indices:
        uuid = gpuinfo.nvml_gpu_uuid(index)
        stem = re.sub(r"[^a-z0-9_.-]+", "-", uuid.lower()) if uuid else f"cuda-{index}"
        targets.append((f"cuda:{index}", stem))
    return targets


def lock_path(device, lock_dir=None):
    """The lock file of one device, e.g. <dir>/cpu.lock or <dir>/gpu-<uuid>.lock."""
    (_, stem), *_ = lock_targets(device)
    return Path(lock_dir or default_lock_dir()) / f"{stem}.lock"


def read_holder(path):
    """What the lock file says about its holder ('pid N since T'), or None when it says nothing."""
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    fields = dict(part.split("=", 1) for part in text.split() if "=" in part)
    if "pid" not in fields:
        return None
    holder = f"pid {fields['pid']}"
    if "since" in fields:
        holder += f" since {fields['since']}"
    if fields.get("job"):
        holder += f", job {fields['job']}"
    return holder


def _holder_record():
    since = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    record = f"pid={os.getpid()} since={since}"
    job = actions_io.job_path()
    if job:
        record += f" job={job}"
    return record + "\n"


def _open_lock_file(path):
    """(fd, writable). The folder and files are made writable for all, like /tmp, since jobs of one
    host may run as different users; a file that stays read-only still locks, without a record."""
    folder = path.parent
    try:
        if not folder.is_dir():
            folder.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(OSError):
                folder.chmod(0o1777)
        # Opened without truncating: the holder's record must survive a waiter opening the file.
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except PermissionError:
        try:
            return os.open(path, os.O_RDONLY), False
        except OSError as exc:
            raise UserError(f"{path}: cannot open the device lock: {exc.strerror}") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot open the device lock: {exc.strerror}") from None
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o666)  # the umask took write access from the others
    return fd, True


@contextlib.contextmanager
def _one_device_lock(name, stem, timeout_s, lock_dir, stream):
    path = Path(lock_dir or default_lock_dir()) / f"{stem}.lock"
    fd, writable = _open_lock_file(path)
    try:
        start = time.monotonic()
        next_reminder = None
        announced = None  # the holder the last message named
        delay = 0.05
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                pass
            now = time.monotonic()
            waited = now - start
            holder = read_holder(path)
            if waited >= timeout_s:
                raise DeviceBusyError(
                    f"{name}: still locked by {holder or 'another process'} after waiting {waited:.0f}s "
                    f"(lock file {path}; wait longer with the suite's lock_timeout_s or --lock-timeout)"
                )
            # One line when waiting starts, one when another job takes the device first, and a reminder
            # every minute.
            if next_reminder is None or (holder and holder != announced) or now >= next_reminder:
                verb = "still waiting" if next_reminder is not None and holder == announced else "waiting"
                print(f"{verb} for {name} (held by {holder or 'another process'})…", file=stream, flush=True)
                announced = holder
                next_reminder = now + _REMINDER_EVERY_S
            time.sleep(min(delay, max(0.0, timeout_s - waited)))
            delay = min(delay * 2, 1.0)
        if writable:
            os.ftruncate(fd, 0)
            os.pwrite(fd, _holder_record().encode("utf-8"), 0)
        _held_fds.append(fd)
        try:
            yield path
        finally:
            _held_fds.remove(fd)
            if writable:
                os.ftruncate(fd, 0)
            # No LOCK_UN: that would free the device for every holder of this open file. Closing it
            # frees the device once no benchmark worker that inherited it is left either.
    finally:
        os.close(fd)


def lock_states(device, lock_dir=None):
    """What a run on `device` would find, without taking or making anything: for each of its locks
    (name, path, holder, problem). holder: None when free, else what the file says of its holder
    ("pid N since T", or "another process"); problem: why a run could not open the lock, or None."""
    folder = Path(lock_dir or default_lock_dir())
    states = []
    for name, stem in lock_targets(device):
        path = folder / f"{stem}.lock"
        holder = problem = None
        if path.exists():
            if not os.access(path, os.W_OK):
                problem = "the lock file is not writable: a run locks it without naming itself"
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError as exc:
                states.append((name, path, None, f"cannot open the lock file: {exc.strerror}"))
                continue
            try:
                # A shared lock, let go at once: it fails only while a run holds the device.
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = read_holder(path) or "another process"
            finally:
                os.close(fd)
        else:
            existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
            if existing is None or not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
                problem = f"cannot make the lock file: {existing or folder} is not a writable folder"
        states.append((name, path, holder, problem))
    return states


@contextlib.contextmanager
def device_lock(device, timeout_s, lock_dir=None, stream=None):
    """Hold the lock of `device` (or of each of several devices) for the body of the with-block.

    `device` is a name like "cuda:0", "cuda" (every visible GPU) or "cpu", or a list of names. Locks
    are taken in sorted order, so two runs wanting the same GPUs cannot deadlock. Waits up to
    `timeout_s` seconds in all, then raises DeviceBusyError. Yields the list of lock files held.
    """
    names = [device] if isinstance(device, str) else list(device)
    targets = sorted({target for d in names for target in lock_targets(d)}, key=lambda t: t[1])
    if not targets:
        raise UserError("device: no device to lock")
    stream = stream if stream is not None else sys.stderr
    deadline = time.monotonic() + max(0.0, float(timeout_s))
    with contextlib.ExitStack() as stack:
        held = []
        for name, stem in targets:
            remaining = max(0.0, deadline - time.monotonic())
            held.append(stack.enter_context(_one_device_lock(name, stem, remaining, lock_dir, stream)))
        yield held
