"""The `speedstats` command line: one subcommand per job a workflow step does.

Each command module exposes `register(subparsers)`; modules import only light libraries at import
time, so `speedstats render` and the GitHub commands work without torch or oneflow installed.

Errors come out on one line with an exit status of speedstats.errors. An unexpected exception (a
bug) exits EXIT_INTERNAL_ERROR with a line naming the command and the operation; its traceback goes
to a file that the line names (beside the command's --out, else in $RUNNER_TEMP, else in the temp
folder), or to stderr with `--debug`. Every line written to stdout and stderr goes through
actions_io.LogStream: none forges a workflow command in a job's log.
"""

import argparse
import importlib
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

from speedstats import __version__
from speedstats.actions_io import log_safe_streams
from speedstats.errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL_ERROR,
    EXIT_INTERRUPTED,
    SpeedstatsError,
    unwinding_on_signals,
)
from speedstats.text import did_you_mean, one_line

# The module that registers each command: a run imports only its own command's module (the others bring
# jinja2, PyGithub and the like), so that each step of a job starts sooner.
COMMANDS = {
    "run": "speedstats.run_cli",
    "render": "speedstats.render_cli",
    "parse": "speedstats.render_cli",
    "suite": "speedstats.suite_cli",
    "schema": "speedstats.suite_cli",
    "compare": "speedstats.compare_cli",
    "trend": "speedstats.compare_cli",
    "changes": "speedstats.compare_cli",
    "doctor": "speedstats.doctor_cli",
    "bisect": "speedstats.bisect_cli",
    "reproduce": "speedstats.reproduce_cli",
    "calibrate": "speedstats.calibrate_cli",
    "comment": "speedstats.github.cli",
    "docs-preview": "speedstats.github.cli",
    "automerge-guard": "speedstats.github.cli",
    "post-from-artifact": "speedstats.github.cli",
    "fetch-baseline": "speedstats.github.cli",
    "shard": "speedstats.github.cli",
    "report": "speedstats.github.cli",
    "record": "speedstats.github.cli",
}
COMMAND_MODULES = tuple(dict.fromkeys(COMMANDS.values()))
DEBUG_HELP = "on an internal error, print the traceback on stderr instead of writing it to a file"
SECRET_ENV = ("GITHUB_TOKEN", "INPUT_TOKEN")
MESSAGE_LIMIT = 400


def build_parser(command=None):
    """The command line's parser: with `command` (one of COMMANDS), only that command's module is
    imported and registered; every command otherwise (the top-level help, a word that is no command)."""
    parser = argparse.ArgumentParser(
        prog="speedstats",
        description="Benchmark OneFlow against PyTorch and post the Speed stats comment on a pull request.",
    )
    parser.add_argument("--version", action="version", version=f"speedstats {__version__}")
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in (COMMANDS[command],) if command in COMMANDS else COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    # `speedstats run --debug` works as well as `speedstats --debug run`
    for sub in subparsers.choices.values():
        sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
    return parser


def _secrets(args):
    values = [getattr(args, "token", None)] + [os.environ.get(name) for name in SECRET_ENV]
    return [v for v in values if v and len(v) >= 4]


def redact(text, args):
    text = str(text)
    for secret in _secrets(args):
        text = text.replace(secret, "***")
    return text


def _error(message, args):
    try:
        print(f"speedstats: error: {one_line(redact(message, args), MESSAGE_LIMIT)}", file=sys.stderr,
              flush=True)
    except (OSError, ValueError, AttributeError):  # stderr closed too: the status is all there is
        pass


def _silence_stdout():
    """After stdout broke, point it at /dev/null so the interpreter's final flush stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass


def _operation(exc):
    """Where the exception came from: the innermost frame inside speedstats, as `function (file:line)`."""
    package = os.path.dirname(os.path.abspath(__file__))
    where = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if os.path.abspath(frame.filename).startswith(package + os.sep):
            where = frame
    if where is None:
        return "an unknown operation"
    path = os.path.relpath(os.path.abspath(where.filename), os.path.dirname(package))
    return f"{where.name} ({path}:{where.lineno})"


def traceback_folder(args):
    """Where an internal error's traceback goes: beside the command's output (its --out folder, or the
    folder of its --out file), else $RUNNER_TEMP (emptied by the runner after each job), else the temp
    folder."""
    out = getattr(args, "out", None)
    if isinstance(out, str) and out:
        folder = Path(out) if Path(out).is_dir() else Path(out).parent
        if folder.is_dir():
            return folder
    runner_temp = os.environ.get("RUNNER_TEMP")
    if runner_temp and os.path.isdir(runner_temp):
        return Path(runner_temp)
    return Path(tempfile.gettempdir())


def internal_error(command, exc, args):
    from speedstats.fsutil import write_atomic

    text = redact("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)), args)
    debug = getattr(args, "debug", False) or os.environ.get("SPEEDSTATS_DEBUG") == "1"
    where = None
    if not debug:
        name = f"speedstats-traceback-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.txt"
        try:
            where = traceback_folder(args) / name
            write_atomic(where, text, "traceback file")  # whole or not at all, a full disk included
        except (SpeedstatsError, OSError):
            where = None
    if where is None:
        try:
            sys.stderr.write(text)
        except (OSError, ValueError, AttributeError):
            pass
    tail = f"; traceback in {where} (or run with --debug)" if where else ""
    _error(f"internal error in 'speedstats {command}' during {_operation(exc)}: "
           f"{type(exc).__name__}: {exc}{tail}", args)
    return EXIT_INTERNAL_ERROR


def _command_parser_action(parser):
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def _command_parser(parser, command):
    return _command_parser_action(parser).choices.get(command)


def unrecognized(parser, args, extras):
    """Arguments no option takes: one line naming them, with the option closest to the first unknown
    one (argparse suggests only for choices); EXIT_BAD_INPUT, as argparse's own usage errors."""
    options = [o for p in (parser, _command_parser(parser, args.command)) if p is not None
               for action in p._actions for o in action.option_strings if o.startswith("--")]
    unknown = next((e.split("=", 1)[0] for e in extras if e.startswith("--")), None)
    hint = did_you_mean(unknown[2:], [o[2:] for o in options], prefix="--") if unknown else ""
    if not hint:
        command = f" {args.command}" if getattr(args, "command", None) else ""
        hint = f" (see 'speedstats{command} --help')"
    _error(f"unrecognized arguments: {' '.join(extras)}{hint}", args)
    return EXIT_BAD_INPUT


def command_word(argv):
    """The command argv names: the options before it take no value, so the first word that is not one."""
    return next((a for a in argv if not a.startswith("-")), None)


def unknown_command(argv):
    """A command that is not one: one line with the command closest to it (argparse's own error lists
    every command over two lines with the usage); EXIT_BAD_INPUT. None when the command is known."""
    commands = list(COMMANDS)
    word = command_word(argv)
    if word is None or word in commands:
        return None
    hint = did_you_mean(word, commands) or f" (the commands: {', '.join(commands)})"
    _error(f"unknown command '{word}'{hint}", argparse.Namespace())
    return EXIT_BAD_INPUT


def _run_interruptible(args):
    """_run, where SIGTERM and SIGINT unwind as KeyboardInterrupt: each command's cleanup (temporary
    files, atomic writes) runs and it exits EXIT_INTERRUPTED."""
    with unwinding_on_signals():
        try:
            return _run(args)
        except KeyboardInterrupt:  # the signal came while _run was handling another outcome
            print("speedstats: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED


def main(argv=None):
    with log_safe_streams():  # no line it writes forges a workflow command in the job's log
        words = sys.argv[1:] if argv is None else [str(a) for a in argv]
        status = unknown_command(words)
        if status is not None:
            return status
        parser = build_parser(command_word(words))
        args, extras = parser.parse_known_args(argv)
        if extras:
            return unrecognized(parser, args, extras)
        status = _run_interruptible(args)
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        _error("stdout: closed before the output was written (write it to a file with --out)", args)
        status = status or EXIT_BAD_INPUT
    return status


def _run(args):
    command = getattr(args, "command", "?")
    try:
        return int(args.func(args) or 0)
    except SpeedstatsError as exc:
        _error(exc, args)
        return exc.exit_code
    except KeyboardInterrupt:
        print("speedstats: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        _error("stdout: closed before the output was written (write it to a file with --out)", args)
        return EXIT_BAD_INPUT
    except RecursionError:
        _error("input nested too deeply to read", args)
        return EXIT_BAD_INPUT
    except Exception as exc:  # noqa: BLE001 - a bug: one line, the traceback kept for the report
        return internal_error(command, exc, args)
