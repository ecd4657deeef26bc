"""File helpers: outputs are written whole or not at all, and only over regular files.

Every failure comes out as a UserError naming the path: a path that is a folder, a symbolic link,
a FIFO or a device is refused before anything is written; a full disk or a read-only folder leaves
the old file as it was and no temporary file behind.
"""

import os
import stat
import tempfile
from pathlib import Path

from speedstats.errors import UserError


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _why(exc):
    return exc.strerror or type(exc).__name__


def ensure_dir(path, what="output folder"):
    """Create the folder (and its parents) unless it exists; UserError when it cannot be one."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UserError(f"{path}: {what} is not a folder") from None
    except NotADirectoryError:
        raise UserError(f"{path}: cannot create the {what}: a part of the path is a file") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot create the {what}: {_why(exc)}") from None
    if not path.is_dir():
        raise UserError(f"{path}: {what} is not a folder")
    return path


def check_output_file(path, what="output file"):
    """Refuse an existing path that is not a regular file (a folder, a symbolic link, a FIFO, a device)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except NotADirectoryError:
        raise UserError(f"{path}: cannot write the {what}: a parent is not a folder") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot write the {what}: {_why(exc)}") from None
    if stat.S_ISLNK(mode):
        raise UserError(f"{path}: the {what} is a symbolic link; refusing to replace it")
    if stat.S_ISDIR(mode):
        raise UserError(f"{path}: the {what} is a folder")
    if not stat.S_ISREG(mode):
        raise UserError(f"{path}: the {what} is not a regular file (a FIFO, a device or a socket); "
                        "refusing to replace it")


def write_atomic(path, data, what="output file"):
    """Write text or bytes to path through a temporary file in the same folder, then rename."""
    path = Path(path)
    check_output_file(path, what)
    ensure_dir(path.parent, f"folder of the {what}")
    mode = "wb" if isinstance(data, bytes) else "w"
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:
        raise UserError(f"{path}: cannot write the {what}: {_why(exc)}") from None
    try:
        with os.fdopen(fd, mode, **({} if mode == "wb" else {"encoding": "utf-8", "newline": ""})) as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it 0600; give it a plain new file's mode
        check_output_file(path, what)  # it may have changed while we wrote
        os.replace(tmp, path)
    except BaseException as exc:
        os.unlink(tmp)
        if isinstance(exc, OSError):
            raise UserError(f"{path}: cannot write the {what}: {_why(exc)}") from None
        raise


MEBIBYTE = 1 << 20
# The largest input each kind of file may be: far above any real one, far below a machine's memory.
READ_LIMITS = {
    "suite file": MEBIBYTE,
    "comment body": 4 * MEBIBYTE,
    "--gpus-file": MEBIBYTE,
    "results file": 64 * MEBIBYTE,
    "Speed stats file": 16 * MEBIBYTE,
    "history file": 256 * MEBIBYTE,
}
DEFAULT_READ_LIMIT = 16 * MEBIBYTE


def _size(limit):
    return f"{limit // MEBIBYTE} MiB" if limit % MEBIBYTE == 0 else f"{limit} bytes"


def _kind(mode):
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_bytes(path, what="file", limit=None):
    """Read a regular file whole, up to `limit` bytes (READ_LIMITS by `what`), as bytes.

    A FIFO, a device, a socket or a folder (a symbolic link to one too) is refused before anything is
    read, so neither a FIFO without a writer nor /dev/zero can hold the command; a file over the
    limit is refused without reading it into memory. Every refusal is one UserError naming the file.
    """
    limit = limit or READ_LIMITS.get(what, DEFAULT_READ_LIMIT)
    try:
        # O_NONBLOCK: opening a FIFO without a writer would otherwise wait forever
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise UserError(f"{path}: {what} not found") from None
    except IsADirectoryError:
        raise UserError(f"{path}: the {what} is a folder") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read the {what}: {_why(exc)}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UserError(f"{path}: the {what} is {_kind(mode)}, not a regular file")
        os.set_blocking(fd, True)
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(limit + 1 - size, MEBIBYTE))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise UserError(f"{path}: the {what} is larger than {_size(limit)}")
        return b"".join(chunks)
    except OSError as exc:
        raise UserError(f"{path}: cannot read the {what}: {_why(exc)}") from None
    finally:
        os.close(fd)


def _read_stdin(what, limit):
    import sys

    stream = sys.stdin
    if stream is None:
        raise UserError(f"stdin: closed; cannot read the {what}")
    buffer = getattr(stream, "buffer", None)
    if buffer is None:
        text = stream.read(limit + 1)
        data = None
    else:
        data = buffer.read(limit + 1)
        text = None
    if len(data if data is not None else text) > limit:
        raise UserError(f"stdin: the {what} is larger than {_size(limit)}")
    if data is None:
        return text
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"stdin: cannot read the {what}: {exc}") from None


def read_text(path, what="file", limit=None):
    """Read a UTF-8 text file ('-' is stdin) through read_bytes's checks; UserError naming the file."""
    limit = limit or READ_LIMITS.get(what, DEFAULT_READ_LIMIT)
    if str(path) == "-":
        return _read_stdin(what, limit)
    data = read_bytes(path, what, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: cannot read the {what}: {exc}") from None


def write_stdout(text):
    """Write text to stdout as UTF-8 whatever the locale, without adding a newline.

    A closed stdout is a UserError; a broken pipe propagates (BrokenPipeError) for the CLI to report.
    """
    import sys

    if sys.stdout is None:
        raise UserError("stdout: closed; write the output to a file with --out")
    stream = getattr(sys.stdout, "buffer", None)
    if stream is None:
        sys.stdout.write(text)
    else:
        sys.stdout.flush()
        stream.write(text.encode("utf-8"))
    sys.stdout.flush()
