#!/usr/bin/env python3
"""The action's entrypoint: maps the INPUT_* variables the runner sets to `speedstats` commands.

It stays a thin mapping; the commands do the work and write the step outputs themselves (run:
verdict, score, results, comment-file, and the job summary; comment and docs-preview: comment-url).
After `run-and-comment` it appends the verdict line, where it posted and the comment to the job summary.
Run it outside a container the same way, with INPUT_* in the environment (`INPUT_COMMENT_MODE` is
accepted for `INPUT_COMMENT-MODE`, which a shell cannot export). `--print` shows the commands without
running them.

The container runs as root. When it ends, however it ends, what the commands wrote in the workspace
is given to the workspace's owner (give_back), so that a runner's own user can delete it.
"""

import os
import shlex
import signal
import stat
import subprocess
import sys
from pathlib import Path

# What the commands exit with; only EXIT_VERDICT_FAILED is ever forgiven, by `fail-on-regression:
# false`. Every other status but 0 (bad input, a case without figures, device busy, GitHub
# unreachable, internal error) fails the step.
from speedstats.actions_io import append_summary, read_outputs, verdict_summary
from speedstats.errors import EXIT_BAD_INPUT, EXIT_VERDICT_FAILED, UserError

COMMANDS = ("run-and-comment", "run", "comment", "docs-preview", "automerge-guard", "fetch-baseline", "shard",
            "report", "post-from-artifact", "doctor", "bisect", "record", "calibrate")

# The defaults of action.yml, for runs outside the action; `job` defaults to GITHUB_JOB there.
DEFAULTS = {
    "command": "run-and-comment",
    "token": "",
    "suite": "",
    "profile": "",
    "device": "cuda",
    "out": "speedstats-out",
    "comment-mode": "update",
    "author": "",
    "body-file": "",
    "pr": "",
    "docs-base-url": "",
    "job": "",
    "label": "automerge",
    "status": "failure",
    "automerge-job": "",
    "fail-on-regression": "true",
    "lock-timeout": "",
    "bundle": "",
    "history": "",
    "history-branch": "",
    "tracking-issues": "true",
    "oneflow": "",
    "baseline-oneflow": "",
    "pytorch": "",
    "flowvision": "",
    "pip-args": "",
    "cache-dir": "",
    "only": "",
    "baseline-workflow": "",
    "baseline-artifact": "wheelhouse",
    "baseline-branch": "",
    "baseline-optional": "false",
    "baseline-missing": "",
    "required-label": "",
    "github-deadline": "",
    "gpu": "",
    "gpus": "",
    "shard-dir": "speedstats-shard",
    "shards-dir": "speedstats-shards",
    "notify-on-flip": "author",
    "check-run": "true",
    "between": "",
    "budget": "",
}

# The build cache when `cache-dir` is empty. A container action sees only the workspace and a few
# folders of the runner's _temp, which the runner empties before every job; actions/checkout empties
# the workspace of everything git does not track (git clean -ffdx), but never looks inside .git.
CHECKOUT_CACHE = ".git/speedstats-cache"



class InputError(Exception):
    pass


def read_inputs(env):
    """Every input's value: INPUT_<NAME> as the runner spells it, else the underscore form,
    else the default."""
    inputs = {}
    for name, default in DEFAULTS.items():
        value = None
        for key in (f"INPUT_{name.upper()}", f"INPUT_{name.upper().replace('-', '_')}"):
            if key in env:
                value = env[key]
                break
        value = default if value is None else value.strip()
        inputs[name] = value
    if not inputs["job"]:
        inputs["job"] = env.get("GITHUB_JOB", "")
    return inputs


def boolean(inputs, name):
    value = inputs[name]
    if value in ("true", "True", "TRUE"):
        return True
    if value in ("false", "False", "FALSE"):
        return False
    raise InputError(f"input '{name}': must be true or false, got {value!r}")


def _optional(flag, value):
    return [flag, value] if value else []


def run_argv(inputs):
    return (["run", "--device", inputs["device"], "--out", inputs["out"]]
            + _optional("--suite", inputs["suite"]) + _optional("--profile", inputs["profile"])
            + _optional("--lock-timeout", inputs["lock-timeout"]) + _optional("--bundle", inputs["bundle"])
            + _optional("--history", inputs["history"])
            + _optional("--oneflow", inputs["oneflow"])
            + _optional("--baseline-oneflow", inputs["baseline-oneflow"])
            + _optional("--baseline-missing", inputs["baseline-missing"])
            + _optional("--pytorch", inputs["pytorch"]) + _optional("--flowvision", inputs["flowvision"])
            # One argument, so that pip arguments starting with '-' are not read as speedstats options.
            + ([f"--pip-args={inputs['pip-args']}"] if inputs["pip-args"] else [])
            + _optional("--only", inputs["only"]) + _optional("--required-label", inputs["required-label"])
            + _optional("--cache-dir", cache_dir(inputs)))


def doctor_argv(inputs):
    """`doctor` for what `run` would need here: the same suite, device and builds."""
    return (["doctor", "--device", inputs["device"]]
            + _optional("--suite", inputs["suite"]) + _optional("--profile", inputs["profile"])
            + _optional("--oneflow", inputs["oneflow"])
            + _optional("--baseline-oneflow", inputs["baseline-oneflow"])
            + _optional("--pytorch", inputs["pytorch"]) + _optional("--flowvision", inputs["flowvision"])
            + ([f"--pip-args={inputs['pip-args']}"] if inputs["pip-args"] else [])
            + _optional("--only", inputs["only"]) + _optional("--cache-dir", cache_dir(inputs))
            + _deadline(inputs))


def calibrate_argv(inputs):
    """`calibrate`: an A/A run of the suite's cases with the `oneflow` build, kept in the runner's cache
    for `run`'s rule."""
    return (["calibrate", "--device", inputs["device"], "--out", inputs["out"]]
            + _optional("--suite", inputs["suite"]) + _optional("--profile", inputs["profile"])
            + _optional("--oneflow", inputs["oneflow"]) + _optional("--flowvision", inputs["flowvision"])
            + ([f"--pip-args={inputs['pip-args']}"] if inputs["pip-args"] else [])
            + _optional("--lock-timeout", inputs["lock-timeout"])
            + _optional("--cache-dir", cache_dir(inputs)))


def bisect_argv(inputs):
    """`bisect` from baseline-oneflow (the good build) through `between` to oneflow (the bad one), its
    report posted on `pr` when given."""
    for name, what in (("baseline-oneflow", "the good build"), ("oneflow", "the bad build"),
                       ("between", "the builds between them")):
        if not inputs[name]:
            raise InputError(f"input '{name}': needed by command 'bisect' ({what})")
    return (["bisect", "--good", inputs["baseline-oneflow"], "--bad", inputs["oneflow"], "--between",
             inputs["between"], "--device", inputs["device"], "--out", inputs["out"]]
            + _optional("--suite", inputs["suite"]) + _optional("--profile", inputs["profile"])
            + _optional("--flowvision", inputs["flowvision"])
            + ([f"--pip-args={inputs['pip-args']}"] if inputs["pip-args"] else [])
            + _optional("--lock-timeout", inputs["lock-timeout"])
            + _optional("--cache-dir", cache_dir(inputs)) + _optional("--budget-s", inputs["budget"])
            + (["--pr", inputs["pr"], "--mode", inputs["comment-mode"]] if inputs["pr"] else [])
            + _optional("--author", inputs["author"]) + _deadline(inputs))


def cache_dir(inputs):
    """`cache-dir`, else .git/speedstats-cache in a checked-out workspace, else speedstats' own default."""
    if inputs["cache-dir"]:
        return inputs["cache-dir"]
    return CHECKOUT_CACHE if Path(".git").is_dir() else ""


def _deadline(inputs):
    return _optional("--github-deadline", inputs["github-deadline"])


def comment_argv(inputs, body_file, extra=()):
    return (["comment", "--body-file", body_file, "--mode", inputs["comment-mode"], *extra]
            + _optional("--pr", inputs["pr"])
            + _optional("--author", inputs["author"]) + _deadline(inputs))


def fetch_baseline_argv(inputs):
    if not inputs["baseline-workflow"]:
        raise InputError("input 'baseline-workflow': needed by command 'fetch-baseline'")
    return (["fetch-baseline", "--workflow", inputs["baseline-workflow"], "--artifact",
             inputs["baseline-artifact"],
             "--dest", str(Path(inputs["out"]) / "baseline")]
            + _optional("--branch", inputs["baseline-branch"])
            + (["--optional"] if boolean(inputs, "baseline-optional") else []) + _deadline(inputs))


def shard_argv(inputs):
    if not inputs["gpu"]:
        raise InputError("input 'gpu': needed by command 'shard'")
    return ["shard", "--gpu", inputs["gpu"], "--out", inputs["out"], "--dir", inputs["shard-dir"],
            "--status", inputs["status"]]


def _no_check_run(inputs):
    return [] if boolean(inputs, "check-run") else ["--no-check-run"]


def _automerge(inputs):
    """The automerge guard of post-from-artifact and report: the job it names, the label it removes."""
    if not inputs["automerge-job"]:
        return []
    return ["--automerge-job", inputs["automerge-job"], "--automerge-label", inputs["label"]]


def post_from_artifact_argv(inputs):
    return (["post-from-artifact", "--mode", inputs["comment-mode"]]
            + _optional("--suite", inputs["suite"]) + _optional("--profile", inputs["profile"])
            + _optional("--docs-base-url", inputs["docs-base-url"])
            + _automerge(inputs)
            + _optional("--author", inputs["author"]) + _deadline(inputs))


def report_argv(inputs):
    if not inputs["gpus"]:
        raise InputError("input 'gpus': needed by command 'report'")
    return (["report", "--gpus", inputs["gpus"], "--shards", inputs["shards-dir"],
             "--notify-on-flip", inputs["notify-on-flip"]]
            + _automerge(inputs)
            + _optional("--suite", inputs["suite"]) + _optional("--profile", inputs["profile"])
            + _optional("--pr", inputs["pr"]) + _optional("--author", inputs["author"]) + _deadline(inputs)
            + _no_check_run(inputs))


def record_argv(inputs):
    """`record` of the run's results in `out`: main's history in the data branch, and its tracking issues."""
    return (["record", "--results", str(Path(inputs["out"]) / "results.json"), "--branch",
             inputs["history-branch"] or "speedstats-data"]
            + ([] if boolean(inputs, "tracking-issues") else ["--no-issues"])
            + _optional("--author", inputs["author"]) + _deadline(inputs))


def plan(inputs):
    """The speedstats commands (argv after 'speedstats') this step runs, in order."""
    command = inputs["command"]
    if command not in COMMANDS:
        raise InputError(f"input 'command': must be one of {', '.join(COMMANDS)}, got {command!r}")
    boolean(inputs, "fail-on-regression")
    boolean(inputs, "baseline-optional")
    boolean(inputs, "check-run")
    boolean(inputs, "tracking-issues")
    if command == "run":  # with history-branch, the run is then recorded in main's history
        return [run_argv(inputs)] + ([record_argv(inputs)] if inputs["history-branch"] else [])
    if command == "record":
        return [record_argv(inputs)]
    if command == "run-and-comment":
        # the run's results give the check run its verdict, judged by the same suite
        check = (["--results", str(Path(inputs["out"]) / "results.json")]
                 + _optional("--suite", inputs["suite"]) + _optional("--profile", inputs["profile"])
                 if boolean(inputs, "check-run") else [])
        return [run_argv(inputs), comment_argv(inputs, str(Path(inputs["out"]) / "comment.md"), check)]
    if command == "comment":
        if not inputs["body-file"]:
            raise InputError("input 'body-file': needed by command 'comment'")
        return [comment_argv(inputs, inputs["body-file"])]
    if command == "docs-preview":
        if not inputs["docs-base-url"]:
            raise InputError("input 'docs-base-url': needed by command 'docs-preview'")
        return [["docs-preview", "--base-url", inputs["docs-base-url"], "--mode", inputs["comment-mode"]]
                + _optional("--pr", inputs["pr"]) + _optional("--author", inputs["author"])
                + _deadline(inputs)]
    if command == "fetch-baseline":
        return [fetch_baseline_argv(inputs)]
    if command == "shard":
        return [shard_argv(inputs)]
    if command == "report":
        return [report_argv(inputs)]
    if command == "post-from-artifact":
        return [post_from_artifact_argv(inputs)]
    if command == "doctor":
        return [doctor_argv(inputs)]
    if command == "bisect":
        return [bisect_argv(inputs)]
    if command == "calibrate":
        return [calibrate_argv(inputs)]
    if not inputs["job"]:
        raise InputError("input 'job': needed by command 'automerge-guard'")
    return [["automerge-guard", "--job", inputs["job"], "--label", inputs["label"], "--status",
             inputs["status"]]
            + _optional("--pr", inputs["pr"]) + _deadline(inputs)]


class Stopped(Exception):
    """The step was cancelled (SIGTERM or SIGINT) while a command ran; it ended with `status`."""

    def __init__(self, status):
        super().__init__(status)
        self.status = status


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_received = []  # the stop signals this process got


def _remember(signum, frame):
    _received.append(signum)


def speedstats(argv, env):
    """Run one speedstats command; its exit status. A SIGTERM or SIGINT the step gets (a cancelled job;
    in the container this process is PID 1, which the kernel gives no default action) is passed on to
    the command, which cleans up and exits 130, and no further command runs (Stopped)."""
    print("$ speedstats " + shlex.join(argv), file=sys.stderr, flush=True)
    started = []

    def forward(signum, frame):
        _received.append(signum)
        for proc in started:
            proc.send_signal(signum)

    previous = {signum: signal.signal(signum, forward) for signum in STOP_SIGNALS}
    try:
        if _received:  # before this command, or between two
            raise Stopped(128 + _received[0])
        started.append(subprocess.Popen([sys.executable, "-m", "speedstats", *argv], env=env))
        if _received:  # arrived while the command was being started
            started[0].send_signal(_received[0])
        status = started[0].wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    status = status if status >= 0 else 128 - status  # killed by a signal: as a shell reports it
    if _received:
        raise Stopped(status)
    return status


def main(args=None, env=None):
    args = sys.argv[1:] if args is None else args
    env = dict(os.environ if env is None else env)
    _received.clear()
    # Until it ends, a stop signal is only remembered: the give-back below always runs to its end.
    previous = {signum: signal.signal(signum, _remember) for signum in STOP_SIGNALS}
    try:
        try:
            return run_steps(args, env)
        except Stopped as stopped:
            return stopped.status
        finally:
            if not args:
                try:
                    give_back_outputs(read_inputs(env), env)
                except Exception as exc:  # noqa: BLE001 - never in place of the step's own status
                    print(f"speedstats: warning: could not give the outputs back to the workspace's owner: "
                          f"{type(exc).__name__}: {exc}", file=sys.stderr)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


# -- what the commands wrote, given back to the workspace's owner ----------------------------------------


def written_paths(inputs, env):
    """What this step's commands may write in the workspace: the out folder (fetch-baseline's baseline/
    and an internal error's traceback included), the bundle, the shard folder, the history file and the
    build cache."""
    from speedstats.pipeline import DEFAULT_CACHE

    cache = cache_dir(inputs) or env.get("SPEEDSTATS_CACHE") or DEFAULT_CACHE
    return [p for p in (inputs["out"], inputs["bundle"], inputs["shard-dir"], inputs["history"], cache) if p]


def give_back_outputs(inputs, env):
    """As root, give what the commands wrote under $GITHUB_WORKSPACE to the workspace's owner (uid and
    gid); nothing when this process is not root or the owner is this process's user."""
    workspace = env.get("GITHUB_WORKSPACE")
    if not workspace or os.geteuid() != 0:
        return
    try:
        owner = os.stat(workspace)
    except OSError:
        return
    if (owner.st_uid, owner.st_gid) == (os.geteuid(), os.getegid()):
        return
    give_back(written_paths(inputs, env), workspace, owner.st_uid, owner.st_gid)


def give_back(paths, workspace, uid, gid):
    """Give each path under `workspace` that this process's user owns, and everything in it, to uid:gid;
    paths outside the workspace are left alone.

    A pull request's code may have planted links. Every folder is opened without following a link
    (O_NOFOLLOW) and changed through its descriptor, a link is changed itself and never followed, and a
    folder's entries are changed before the folder, while it is still this user's and nobody else can
    swap them. A file with more than one name is left as it is: its other name may lie outside the
    workspace (deleting it needs only its folder, which is given back)."""
    top = os.path.abspath(workspace)
    for path in paths:
        rel = os.path.relpath(os.path.abspath(path), top)
        if rel == os.curdir or rel == os.pardir or rel.startswith(os.pardir + os.sep):
            continue
        folders = []  # the workspace, then each folder down to the path's own
        try:
            folders.append(os.open(top, os.O_RDONLY | os.O_DIRECTORY))
            *parents, name = Path(rel).parts
            for parent in parents:
                folders.append(os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                                       dir_fd=folders[-1]))
            _give_back_entry(name, folders[-1], uid, gid)
            for fd in reversed(folders[1:]):  # the folders a command made above it (out: a/b/out)
                _give_back_fd(fd, uid, gid)
        except OSError:  # gone, or a link where a folder was
            pass
        finally:
            for fd in folders:
                os.close(fd)


def _give_back_entry(name, folder_fd, uid, gid):
    me = os.geteuid()
    try:
        info = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            if info.st_uid == me and os.fstat(folder_fd).st_uid == me:
                os.chown(name, uid, gid, dir_fd=folder_fd, follow_symlinks=False)
            return
        is_dir = stat.S_ISDIR(info.st_mode)
        if not (is_dir or (stat.S_ISREG(info.st_mode) and info.st_uid == me)):
            return
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | (os.O_DIRECTORY if is_dir else 0),
                     dir_fd=folder_fd)
    except OSError:
        return
    try:
        if is_dir:
            for child in os.listdir(fd):
                _give_back_entry(child, fd, uid, gid)
        _give_back_fd(fd, uid, gid)
    except OSError:
        pass
    finally:
        os.close(fd)


def _give_back_fd(fd, uid, gid):
    info = os.fstat(fd)
    if (info.st_uid != os.geteuid() or (info.st_uid, info.st_gid) == (uid, gid)
            or not (stat.S_ISDIR(info.st_mode) or (stat.S_ISREG(info.st_mode) and info.st_nlink == 1))):
        return
    os.fchown(fd, uid, gid)


def run_steps(args, env):
    try:
        inputs = read_inputs(env)
        steps = plan(inputs)
        fail_on_regression = boolean(inputs, "fail-on-regression")
    except InputError as exc:
        print(f"speedstats: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args == ["--print"]:
        for argv in steps:
            print("speedstats " + shlex.join(argv))
        return 0
    if args:
        print(f"speedstats: error: entrypoint arguments: only --print is known, got {shlex.join(args)}",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    if inputs["token"]:
        env["GITHUB_TOKEN"] = inputs["token"]
    if inputs["github-deadline"]:  # for run's required-label lookup; the GitHub commands get the flag
        env["SPEEDSTATS_GITHUB_DEADLINE"] = inputs["github-deadline"]

    if inputs["command"] not in ("run", "run-and-comment"):
        return speedstats(steps[0], env)

    out = Path(inputs["out"])
    for stale in (out / "comment.md", out / "results.json"):  # a self-hosted workspace keeps old files
        if stale.is_file():
            stale.unlink()
    if inputs["command"] == "run":  # it writes the job summary itself
        run_code = forgiven(speedstats(steps[0], env), fail_on_regression)
        if len(steps) == 1:
            return run_code
        if not (out / "results.json").is_file():
            print(f"speedstats: the run wrote no {out / 'results.json'}; nothing to record", file=sys.stderr)
            return run_code
        record_code = speedstats(steps[1], env)  # also after a failed verdict or case: the others' figures
        return run_code or record_code
    # The job summary is this step's to write, after posting, saying where: neither command writes it
    # (a fork's read-only token prints the body in the log instead of adding it a second time).
    quiet_env = {k: v for k, v in env.items() if k != "GITHUB_STEP_SUMMARY"}
    run_code = forgiven(speedstats(steps[0], quiet_env), fail_on_regression)
    comment_code = 0
    if (out / "comment.md").is_file():
        comment_code = speedstats(steps[1], quiet_env)
    else:
        print(f"speedstats: the run wrote no {out / 'comment.md'}; nothing to post", file=sys.stderr)
    try:
        write_summary(env, out / "comment.md", posting=True)
    except UserError as exc:
        print(f"speedstats: error: {exc}", file=sys.stderr)
        return run_code or comment_code or EXIT_BAD_INPUT
    return run_code or comment_code


def forgiven(status, fail_on_regression):
    """A failed verdict passes the step with `fail-on-regression: false`; every other status stands."""
    return 0 if status == EXIT_VERDICT_FAILED and not fail_on_regression else status


def write_summary(env, comment_file, posting):
    """Append the verdict line and the comment to the job summary, as the step's outputs give them."""
    if not env.get("GITHUB_STEP_SUMMARY") or not comment_file.is_file():
        return
    outputs_file = env.get("GITHUB_OUTPUT")
    outputs = read_outputs(outputs_file) if outputs_file and Path(outputs_file).is_file() else {}
    append_summary(verdict_summary(outputs.get("verdict", "unknown"), outputs.get("score", "unknown"),
                                   comment_file.read_text(encoding="utf-8"),
                                   posted=outputs.get("comment-url", "") if posting else None), env)


if __name__ == "__main__":
    sys.exit(main())
