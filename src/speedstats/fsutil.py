"""File helpers: outputs are written whole or not at all."""

import os
import tempfile
from pathlib import Path


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path, data):
    """Write text or bytes to path through a temporary file in the same folder, then rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, mode, **({} if mode == "wb" else {"encoding": "utf-8", "newline": ""})) as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it 0600; give it a plain new file's mode
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def read_text(path, what="file"):
    """Read a UTF-8 text file ('-' is stdin), raising UserError naming the file on failure."""
    import sys

    from speedstats.errors import UserError

    if str(path) == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: {what} not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read {what}: {exc}") from None
