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


def read_text(path, what="file"):
    """Read a UTF-8 text file ('-' is stdin), raising UserError naming the file on failure."""
    import sys

    if str(path) == "-":
        if sys.stdin is None:
            raise UserError(f"stdin: closed; cannot read the {what}")
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: {what} not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read {what}: {exc}") from None


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
