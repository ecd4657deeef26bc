"""GitHub Actions file commands: step outputs ($GITHUB_OUTPUT) and the job summary ($GITHUB_STEP_SUMMARY).

Both files are appended to, one record per call, as the runner reads them after the step. Outside
Actions (the variables unset) the functions do nothing and return False.
"""

import os
import uuid


def _append(path, text):
    from speedstats.errors import UserError

    try:
        with open(path, "a", encoding="utf-8", newline="") as f:
            f.write(text)
    except OSError as exc:  # a full disk: the runner's file, appended to, cannot be replaced whole
        why = exc.strerror or type(exc).__name__
        raise UserError(f"{path}: cannot append to the Actions file: {why}") from None


def format_output(name, value):
    """One $GITHUB_OUTPUT record: `name=value`, or the heredoc form when the value has newlines."""
    name = str(name)
    value = "" if value is None else str(value)
    if not name or any(c in name for c in "=\r\n") or name != name.strip():
        raise ValueError(f"output name {name!r} is not valid")
    if "\n" not in value and "\r" not in value:
        return f"{name}={value}\n"
    delimiter = f"ghadelimiter_{uuid.uuid4()}"
    return f"{name}<<{delimiter}\n{value}\n{delimiter}\n"


def set_output(name, value, env=None):
    """Append a step output; True when $GITHUB_OUTPUT is set and the record was written."""
    path = (os.environ if env is None else env).get("GITHUB_OUTPUT")
    if not path:
        return False
    _append(path, format_output(name, value))
    return True


def append_summary(text, env=None):
    """Append markdown to the job summary; True when $GITHUB_STEP_SUMMARY is set."""
    path = (os.environ if env is None else env).get("GITHUB_STEP_SUMMARY")
    if not path:
        return False
    _append(path, text if text.endswith("\n") else text + "\n")
    return True


def read_outputs(path):
    """Parse a $GITHUB_OUTPUT file the way the runner does (later records win)."""
    outputs = {}
    with open(path, encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            value_lines = []
            while i < len(lines) and lines[i] != delimiter:
                value_lines.append(lines[i])
                i += 1
            if i >= len(lines):
                raise ValueError(f"{path}: output {name!r} has no closing delimiter {delimiter!r}")
            i += 1
            outputs[name] = "\n".join(value_lines)
        elif "=" in line:
            name, value = line.split("=", 1)
            outputs[name] = value
        else:
            raise ValueError(f"{path}: not an output record: {line!r}")
    return outputs
