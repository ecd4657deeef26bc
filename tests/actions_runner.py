"""GitHub Actions as a runner runs them, on this machine: the environment of the action's step (every
input's INPUT_* variable, the GitHub variables and file commands), docker/entrypoint.py run with it, and a
workflow's job step by step (its `${{ }}` expressions, `if:` conditions and step outputs, the action's
steps through the entrypoint). Also the tiniest real suite the action's tests run, and its comment."""

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from busy_machine import TOLERATE_OTHER_LOAD
from speedstats.actions_io import read_outputs

ROOT = Path(__file__).resolve().parents[1]


ENTRYPOINT = ROOT / "docker" / "entrypoint.py"


TOKEN = "ghs_speedstats_test_token"


REPO = "o/r"


PR = 7


HEAD = "a" * 40


# The tiniest real benchmark: one ResNet50 step per framework on the CPU. The ratio always passes; a
# millisecond threshold that fails scores 2, which fails the verdict.
TINY_SUITE = """\
name: tiny
warmup: 0
timeout_s: 600
lock_timeout_s: 600
cases:
  - id: resnet50-bs1
    kind: resnet50
    batch_size: 1
    image_size: 64
    times: 1
    min_relative_speed: 0.001
    max_oneflow_ms:
      default: {max_oneflow_ms}
""" + TOLERATE_OTHER_LOAD


# The comment of that run: the CPU named on the GPU line, three lines for the case, both checks marked,
# then, for a missed threshold, its confirmation in fresh processes, and the builds that were measured
# (the environment's own).
TINY_BODY = (
    r"<details>\n <summary>Speed stats:</summary>\n\n ``` \nGPU Name: {gpu_name} \n\n "
    r"{mark} OneFlow resnet50 time: (\d+\.\d)ms \(= \1ms / 1, input_shape=\[1, 3, 64, 64\]\)\n"
    r"PyTorch resnet50 time: (\d+\.\d)ms \(= \2ms / 1, input_shape=\[1, 3, 64, 64\]\)\n"
    r"✔️ Relative speed: \d+\.\d\d \(= \2ms / \1ms\)\n ``` \n\n</details>"
    # Real rounds on a shared CPU may scatter: a note then says so, truthfully.
    r"(?:\n\n⚠️ Unstable figures, their rounds scatter with a coefficient of variation above 30%: [^\n]+)?"
    r"(?:\n\n❌ Confirmed in fresh processes: resnet50-bs1 \(OneFlow [\d.]+ms is above 0\.001ms on .*\))?"
    r"\n\nBuilds: OneFlow 0\.9\.0 \(git \w+, installed\) with flowvision [\d.]+; "
    r"PyTorch [\w.+]+ \(git \w+, installed\) with torchvision [\w.+]+, timm [\w.+]+"
)


def action():
    return yaml.safe_load((ROOT / "action.yml").read_text())


def input_env_name(name):
    """How the runner names an input's variable: INPUT_ + upper case, spaces to '_', '-' kept."""
    return "INPUT_" + name.replace(" ", "_").upper()


def clean_environ():
    """This process's environment without what a surrounding Actions job would leak in."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "INPUT_", "RUNNER_", "ACTIONS_", "SPEEDSTATS_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src")] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def action_env(workspace, gh_url=None, inputs=None, event=None):
    """The environment a Docker action step gets: every input's INPUT_* (action.yml defaults where
    not given, `${{ github.* }}` defaults evaluated), the GitHub variables and file commands."""
    workspace = Path(workspace)
    files = workspace.parent / "_runner_file_commands"
    files.mkdir(exist_ok=True)
    event_path = workspace.parent / "event.json"
    event_path.write_text(json.dumps(event or {
        "action": "synchronize", "number": PR,
        "pull_request": {"number": PR, "head": {"sha": HEAD, "repo": {"full_name": REPO}},
                         "base": {"repo": {"full_name": REPO}}},
        "repository": {"full_name": REPO},
    }))
    github = {"token": TOKEN, "job": "speed"}
    env = clean_environ()
    env.update({
        "GITHUB_ACTIONS": "true", "CI": "true", "GITHUB_REPOSITORY": REPO,
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event_path), "GITHUB_WORKSPACE": str(workspace), "GITHUB_JOB": "speed",
        "GITHUB_RUN_ID": "4242", "GITHUB_SHA": HEAD,
        "GITHUB_OUTPUT": str(files / "set_output"), "GITHUB_STEP_SUMMARY": str(files / "step_summary"),
        "RUNNER_TEMP": str(workspace.parent / "_temp"),
        "SPEEDSTATS_LOCK_DIR": str(workspace.parent / "locks"),
    })
    if gh_url:
        env["GITHUB_API_URL"] = gh_url
    for name, spec in action()["inputs"].items():
        value = str(spec.get("default", ""))
        if value.startswith("${{"):
            expression = value.strip("${} ")
            assert expression.startswith("github."), f"input {name}: default {value} is not a github.* value"
            value = github[expression.split(".", 1)[1]]
        env[input_env_name(name)] = value
    for name, value in (inputs or {}).items():
        assert name in action()["inputs"], f"no input {name!r} in action.yml"
        env[input_env_name(name)] = str(value)
    return env


def run_entrypoint(env, cwd, args=()):
    return subprocess.run([sys.executable, str(ENTRYPOINT), *args], check=False, cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


def planned(tmp_path, **inputs):
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    proc = run_entrypoint(action_env(workspace, inputs=inputs), workspace, ["--print"])
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


# -- a workflow: a small evaluator of GitHub expressions, enough for the example workflows, strict about
# the rest; then the runner, one job's steps in order


THIS_ACTION = re.compile(r"^([\w.-]+/speedstats@[\w.-]+|\./?)$")


def load_workflow(path):
    data = yaml.safe_load(Path(path).read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as true
    return data


_TOKEN_RE = re.compile(r"\s*(?:(?P<op>&&|\|\||==|!=|!|\(|\)|\.)|'(?P<str>(?:[^']|'')*)'"
                       r"|(?P<num>\d+(?:\.\d+)?)"
                       r"|(?P<name>[A-Za-z_][\w-]*))")


STATUS_FUNCTIONS = ("success", "failure", "always", "cancelled")


def _tokens(text):
    pos, out = 0, []
    while pos < len(text.rstrip()):
        match = _TOKEN_RE.match(text, pos)
        assert match and match.end() > pos, f"cannot read expression {text!r} at {text[pos:]!r}"
        pos = match.end()
        kind = match.lastgroup
        out.append((kind, match.group(kind).replace("''", "'") if kind == "str" else match.group(kind)))
    return out


class Expression:
    def __init__(self, text, contexts):
        self.tokens, self.i, self.contexts = _tokens(text), 0, contexts

    def peek(self):
        return self.tokens[self.i] if self.i < len(self.tokens) else (None, None)

    def take(self, value=None):
        token = self.peek()
        assert value is None or token[1] == value, f"expected {value!r}, got {token!r}"
        self.i += 1
        return token

    def evaluate(self):
        value = self.or_()
        assert self.i == len(self.tokens), f"unread tokens {self.tokens[self.i:]}"
        return value

    def or_(self):
        value = self.and_()
        while self.peek()[1] == "||":
            self.take()
            right = self.and_()
            value = value or right
        return value

    def and_(self):
        value = self.unary()
        while self.peek()[1] == "&&":
            self.take()
            right = self.unary()
            value = value and right
        return value

    def unary(self):
        if self.peek()[1] == "!":
            self.take()
            return not self.unary()
        left = self.primary()
        if self.peek()[1] in ("==", "!="):
            op = self.take()[1]
            right = self.primary()
            equal = str(left).lower() == str(right).lower()  # GitHub compares strings ignoring case
            return equal if op == "==" else not equal
        return left

    def primary(self):
        kind, value = self.take()
        if value == "(":
            inner = self.or_()
            self.take(")")
            return inner
        if kind == "str":
            return value
        if kind == "num":
            return float(value)
        assert kind == "name", f"unexpected {value!r}"
        if value in ("true", "false", "null"):
            return {"true": True, "false": False, "null": ""}[value]
        if self.peek()[1] == "(":
            self.take("(")
            self.take(")")
            assert value in STATUS_FUNCTIONS, f"function {value}() is not known here"
            status = self.contexts["job"]["status"]
            return {"always": True, "success": status == "success", "failure": status == "failure",
                    "cancelled": False}[value]
        assert value in self.contexts, f"context {value!r} is not known here"
        current = self.contexts[value]
        while self.peek()[1] == ".":
            self.take(".")
            key = self.take()[1]
            current = current.get(key, "") if isinstance(current, dict) else ""
        return current


def condition(text, contexts):
    """An `if:` value; without a status function it means `success() && (...)`, as on GitHub."""
    text = str(text).strip()
    if text.startswith("${{") and text.endswith("}}"):
        text = text[3:-2]
    value = Expression(text, contexts).evaluate()
    if not any(re.search(rf"\b{f}\s*\(", text) for f in STATUS_FUNCTIONS):
        value = contexts["job"]["status"] == "success" and value
    return bool(value)


def interpolate(text, contexts):
    def one(match):
        value = Expression(match.group(1), contexts).evaluate()
        return "" if value is None else (str(value).lower() if isinstance(value, bool) else str(value))

    return re.sub(r"\$\{\{(.*?)\}\}", one, str(text))


@dataclass
class JobRun:
    status: str = "success"
    ran: list = field(default_factory=list)  # step names, in order
    skipped: list = field(default_factory=list)
    logs: dict = field(default_factory=dict)  # step name -> its output
    summary: str = ""


def run_job(workflow, job_id, workspace, gh_url, event, input_overrides=None, event_name="pull_request"):
    """Run the steps of `job_id` as the Actions runner would, on this machine.

    The action's steps run docker/entrypoint.py with the INPUT_* variables the runner would give the
    container; `run:` steps run in bash -eo pipefail; actions/checkout is the prepared workspace and
    actions/upload-artifact copies its files to <workspace>/../artifacts/<name>. input_overrides
    (step id -> inputs) replace `with:` values, for what this machine lacks (a GPU).
    """
    job = workflow["jobs"][job_id]
    home = Path(workspace).parent
    event_path = home / "event.json"
    event_path.write_text(json.dumps(event))
    contexts = {
        "github": {"token": TOKEN, "job": job_id, "repository": REPO, "event_name": event_name,
                   "event": event, "workspace": str(workspace), "run_id": "4242", "run_attempt": "1",
                   "sha": HEAD},
        "secrets": {"GITHUB_TOKEN": TOKEN},
        "job": {"status": "success"},
        "steps": {},
        "env": {},
        "runner": {"temp": str(home / "_temp"), "os": "Linux"},
        "inputs": dict(event.get("inputs") or {}),  # a workflow_dispatch's, as its payload has them
    }
    run = JobRun()
    if "if" in job and not condition(job["if"], contexts):
        run.status = "skipped"
        return run
    base_env = clean_environ()
    base_env.update({
        "GITHUB_ACTIONS": "true", "CI": "true", "GITHUB_REPOSITORY": REPO,
        "GITHUB_EVENT_NAME": event_name,
        "GITHUB_EVENT_PATH": str(event_path), "GITHUB_WORKSPACE": str(workspace), "GITHUB_JOB": job_id,
        "GITHUB_RUN_ID": "4242", "GITHUB_SHA": HEAD, "GITHUB_API_URL": gh_url,
        "RUNNER_TEMP": str(home / "_temp"), "SPEEDSTATS_LOCK_DIR": str(home / "locks"),
    })
    for index, step in enumerate(job["steps"]):
        name = step.get("name") or step.get("uses") or step["run"].splitlines()[0]
        contexts["job"]["status"] = run.status
        if not condition(step.get("if", "success()"), contexts):
            run.skipped.append(name)
            continue
        run.ran.append(name)
        files = home / "_runner_file_commands" / str(index)
        files.mkdir(parents=True)
        env = dict(base_env)
        env.update({k: interpolate(v, contexts) for k, v in (workflow.get("env") or {}).items()})
        env.update({k: interpolate(v, contexts) for k, v in (job.get("env") or {}).items()})
        env.update({k: interpolate(v, contexts) for k, v in (step.get("env") or {}).items()})
        env["GITHUB_OUTPUT"] = str(files / "output")
        env["GITHUB_STEP_SUMMARY"] = str(files / "summary")
        code, log = _run_step(step, env, workspace, contexts, (input_overrides or {}).get(step.get("id"), {}))
        run.logs[name] = log
        outputs = read_outputs(files / "output") if (files / "output").exists() else {}
        if (files / "summary").exists():
            run.summary += (files / "summary").read_text(encoding="utf-8")
        outcome = "success" if code == 0 else "failure"
        if step.get("id"):
            contexts["steps"][step["id"]] = {"outputs": outputs, "outcome": outcome, "conclusion": outcome}
        if code != 0 and not step.get("continue-on-error"):
            run.status = "failure"
    return run


def _run_step(step, env, workspace, contexts, overrides):
    uses = step.get("uses")
    if uses is None:
        script = interpolate(step["run"], contexts)
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], check=False,
                              cwd=workspace, env=env, capture_output=True, text=True, timeout=60)
        return proc.returncode, proc.stdout + proc.stderr
    with_ = {k: interpolate(v, contexts) for k, v in (step.get("with") or {}).items()}
    if uses.startswith("actions/checkout@"):
        return 0, "the workspace is the checked-out repository"
    if uses.startswith("actions/download-artifact@"):  # from <workspace>/../artifacts/<name>
        source = Path(workspace).parent / "artifacts" / with_["name"]
        shutil.copytree(source, Path(workspace) / with_.get("path", "."), dirs_exist_ok=True)
        return 0, f"downloaded {with_['name']}"
    if uses.startswith("actions/upload-artifact@"):
        target = Path(workspace).parent / "artifacts" / with_["name"]
        patterns = [p.strip() for p in with_["path"].splitlines() if p.strip()]
        found = [p for p in sorted(Path(workspace).rglob("*")) if p.is_file()
                 and any(fnmatch.fnmatchcase(str(p.relative_to(workspace)), pat) for pat in patterns)]
        if not found and with_.get("if-no-files-found", "warn") == "error":
            return 1, "no files"
        for path in found:
            (target / path.relative_to(workspace)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target / path.relative_to(workspace))
        return 0, f"uploaded {len(found)} files"
    assert THIS_ACTION.match(uses), f"the test runner does not know the action {uses}"
    inputs = action()["inputs"]
    for name in with_:
        assert name in inputs, f"step {step.get('name')}: {name!r} is not an input of action.yml"
    for name, spec in inputs.items():
        default = interpolate(spec.get("default", ""), contexts)
        env[input_env_name(name)] = str(overrides.get(name, with_.get(name, default)))
    proc = run_entrypoint(env, workspace)
    return proc.returncode, proc.stdout + proc.stderr
