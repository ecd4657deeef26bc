"""speedstats as a user installs it: the wheel, in a fresh venv outside the checkout, light dependencies only.

The wheel is built from a copy of the project's sources; the venv gets requirements/light.txt under
constraints.txt (no torch, no oneflow, no matplotlib) and the wheel, from pip's cache where it has
them. Every light command then runs as the installed `speedstats` script from a folder outside the
checkout, with no PYTHONPATH, against the loopback GitHub; its output must be what the checkout's
code writes for the same input.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fakegithub import actions_env, event_payload, run_speedstats
from speedstats.bundle import write_bundle
from speedstats.history import append_history
from speedstats.results import loads

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
TOKEN = "ghs_InstalledWheelT0kenNeverToBePrinted0011"
REPO = "o/r"
SHA = "e" * 40
RUN = 7100
INSTALL_TIMEOUT_S = 900

pytestmark = pytest.mark.venv


def _run(argv, **kwargs):
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, check=False, **kwargs)
    assert proc.returncode == 0, (f"{' '.join(map(str, argv))} failed "
                                  f"({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """(the venv's speedstats script, a work folder): both outside the checkout."""
    base = tmp_path_factory.mktemp("installed-wheel")
    assert ROOT not in base.parents
    source = base / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, source / name)
    for name in ("src", "templates"):
        shutil.copytree(ROOT / name, source / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc"))
    wheels = base / "wheels"
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--no-deps",
          "--no-build-isolation", "--wheel-dir", wheels, source], timeout=INSTALL_TIMEOUT_S)
    (wheel,) = wheels.glob("speedstats-*.whl")

    env_dir = base / "venv"
    _run([sys.executable, "-m", "venv", env_dir], timeout=INSTALL_TIMEOUT_S)
    python = env_dir / "bin" / "python"
    _run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
          "-c", ROOT / "constraints.txt", "-r", ROOT / "requirements" / "light.txt", wheel],
         timeout=INSTALL_TIMEOUT_S, env=_clean_env())
    work = base / "work"
    work.mkdir()
    return env_dir / "bin" / "speedstats", work


def _clean_env(extra=None):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "INPUT_", "RUNNER_", "SPEEDSTATS_", "PYTHON", "VIRTUAL_ENV"))}
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,127.0.0.2,localhost"
    env.update({k: str(v) for k, v in (extra or {}).items()})
    return env


def installed(venv, *argv, env=None):
    script, work = venv
    return subprocess.run([str(script), *map(str, argv)], cwd=work, env=_clean_env(env), capture_output=True,
                          text=True, timeout=120, check=False)


def in_checkout(*argv):
    return run_speedstats([*argv], {})


def test_the_venv_has_the_light_dependencies_only(venv):
    script, work = venv
    python = script.parent / "python"
    probe = ("import importlib.util, speedstats, speedstats.resources as r; "
             "print(speedstats.__file__); print(r.templates_dir()); print(r.suites_dir()); "
             "print([m for m in ('torch', 'oneflow', 'matplotlib', 'flowvision') if "
             "importlib.util.find_spec(m)])")
    proc = _run([python, "-c", probe], cwd=work, env=_clean_env())
    module, templates, suites, heavy = proc.stdout.splitlines()
    assert str(ROOT) not in module and "site-packages" in module
    assert Path(templates, "speed_stats.md.j2").is_file() and Path(suites, "default.yml").is_file()
    assert Path(templates).parent == Path(suites).parent == Path(module).parent  # package data, in the wheel
    assert heavy == "[]"
    version = installed(venv, "--version")
    assert (version.returncode, version.stdout) == (0, in_checkout("--version").out)


def test_render_with_the_builtin_profile_and_a_user_suite(venv):
    _, work = venv
    shutil.copy(DATA / "smoke-results.json", work / "results.json")
    ours = installed(venv, "render", "results.json", "--profile", "smoke")
    theirs = in_checkout("render", DATA / "smoke-results.json", "--profile", "smoke")
    assert (ours.returncode, ours.stdout, ours.stderr) == (theirs.rc, theirs.out, theirs.err)
    assert "OneFlow resnet50 time:" in ours.stdout

    (work / "user-suite.yml").write_text("extends: smoke\nname: mine\n", encoding="utf-8")
    user = installed(venv, "render", "results.json", "--suite", "user-suite.yml")
    assert user.returncode == theirs.rc and user.stdout == theirs.out, user.stderr


def test_parse(venv):
    ours = installed(venv, "parse", DATA / "pr-revert-body.md")
    theirs = in_checkout("parse", DATA / "pr-revert-body.md")
    assert ours.returncode == 0, ours.stderr
    assert (ours.stdout, ours.stderr) == (theirs.out, theirs.err)
    assert loads(ours.stdout).cases


@pytest.mark.parametrize("fmt", ["markdown", "json"])
def test_compare(venv, fmt):
    argv = ["compare", "--format", fmt, DATA / "smoke-results.json", DATA / "smoke-results-head.json"]
    ours, theirs = installed(venv, *argv), in_checkout(*argv)
    assert ours.returncode in (0, 1), ours.stderr
    assert (ours.returncode, ours.stdout, ours.stderr) == (theirs.rc, theirs.out, theirs.err)


def test_trend_says_matplotlib_is_missing(venv, tmp_path):
    history = tmp_path / "history.jsonl"
    append_history(history, loads((DATA / "smoke-results.json").read_text(encoding="utf-8")), commit="1" * 40)
    result = installed(venv, "trend", history, "--out", tmp_path / "trend")
    assert result.returncode == 2
    assert result.stderr.startswith("speedstats: error: matplotlib: not installed; 'speedstats trend' needs "
                                    "it")
    assert result.stderr.count("\n") == 1 and result.stdout == ""
    assert not list(tmp_path.glob("trend/*.png"))


def test_changes(venv, tmp_path):
    """The change points need ruptures, which the light dependencies carry."""
    from histories import history_runs, history_text

    history = tmp_path / "history.jsonl"
    history.write_text(history_text(history_runs(40, shift_at=25, shift=0.10)), encoding="utf-8")
    ours, theirs = installed(venv, "changes", history), in_checkout("changes", history)
    assert (ours.returncode, ours.stdout, ours.stderr) == (theirs.rc, theirs.out, theirs.err)
    assert ours.stdout.count("\n") == 2 and ", OneFlow: +" in ours.stdout


@pytest.fixture
def gh(fake_github):
    return fake_github(TOKEN)


def github_env(gh, tmp_path, **extra):
    event = event_payload("pull_request", REPO, number=7, head_sha=SHA)
    return actions_env(gh, TOKEN, REPO, tmp_path, event=event, GITHUB_RUN_ID=RUN, **extra)


def test_comment_docs_preview_and_automerge_guard(venv, gh, tmp_path):
    gh.add_pull(REPO, 7, labels=["automerge"], head_sha=SHA)
    body = (DATA / "pr-revert-body.md").read_text(encoding="utf-8")
    (tmp_path / "body.md").write_text(body, encoding="utf-8")
    env = github_env(gh, tmp_path)

    comment = installed(venv, "comment", "--body-file", tmp_path / "body.md", env=env)
    assert comment.returncode == 0, comment.stderr
    docs = installed(venv, "docs-preview", "--base-url", "https://staging.oneflow.info", env=env)
    assert docs.returncode == 0, docs.stderr
    guard = installed(venv, "automerge-guard", "--job", "speed-stats", env=env)
    assert guard.returncode == 0, guard.stderr

    assert [c["body"] for c in gh.comments(REPO, 7)] == [
        body + f"\n\n<!-- speedstats:speed-stats head={SHA} run={RUN} -->",
        ("View latest API docs preview at: https://staging.oneflow.info/docs/o/r/pr/7/\n\n<!-- "
         "speedstats:docs-preview -->"),
        ("CI failed when running job: speed-stats. PR label automerge has been removed"
         f"\n\n<!-- speedstats:automerge-removed job=speed-stats head={SHA} run={RUN} -->"),
    ]
    assert gh.labels(REPO, 7) == []
    assert TOKEN not in comment.stdout + comment.stderr + docs.stderr + guard.stderr


def test_post_from_artifact_rerenders_and_removes_the_label_of_a_failed_run(venv, gh, tmp_path):
    import io
    import zipfile

    results_text = (DATA / "smoke-results.json").read_text(encoding="utf-8")
    bundle = tmp_path / "bundle"
    write_bundle(bundle, results_text, "text the fork wrote, which --rerender ignores", 7, SHA, RUN, REPO)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        for path in sorted(bundle.iterdir()):
            archive.write(path, path.name)
    gh.add_pull(REPO, 7, labels=["automerge"], head_sha=SHA, head_repo="fork/r")
    gh.add_workflow_run(REPO, RUN, SHA, pull_requests=[], conclusion="failure", head_repo="fork/r")
    gh.add_artifact(REPO, RUN, "speedstats-bundle", buf.getvalue())
    payload = event_payload("workflow_run", REPO, run_id=RUN, head_sha=SHA)
    env = actions_env(gh, TOKEN, REPO, tmp_path, event_name="workflow_run", event=payload, GITHUB_RUN_ID=9999)

    result = installed(venv, "post-from-artifact", "--rerender", "--docs-base-url", "https://staging.oneflow.info",
                       "--automerge-job", "speed-stats", env=env)

    assert result.returncode == 0, result.stderr
    rendered = in_checkout("render", DATA / "smoke-results.json", "--profile", "smoke").out.rstrip("\n")
    bodies = [c["body"] for c in gh.comments(REPO, 7)]
    assert bodies == [
        rendered + f"\n\n<!-- speedstats:speed-stats head={SHA} run={RUN} -->",
        ("View latest API docs preview at: https://staging.oneflow.info/docs/o/r/pr/7/\n\n<!-- "
         "speedstats:docs-preview -->"),
        ("CI failed when running job: speed-stats. PR label automerge has been removed"
         f"\n\n<!-- speedstats:automerge-removed job=speed-stats head={SHA} run={RUN} -->"),
    ]
    assert gh.labels(REPO, 7) == []
    (blob,) = gh.storage_requests  # the zip came from the storage host, without the token
    assert not [name for name in blob.headers if name.lower() == "authorization"]


def test_fetch_baseline(venv, gh, tmp_path):
    import io
    import zipfile

    wheel = "oneflow-0.9.1+cu118.gabcdef-cp310-cp310-manylinux_2_17_x86_64.whl"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr(wheel, b"the base build")
    gh.add_workflow_run(REPO, 300, "3" * 40, event="push", workflow="build.yml", branch="main")
    gh.add_artifact(REPO, 300, "wheelhouse", buf.getvalue())
    event = {"repository": {"full_name": REPO},
             "pull_request": {"number": 7, "head": {"sha": SHA}, "base": {"ref": "main"}}}
    env = actions_env(gh, TOKEN, REPO, tmp_path, event=event, GITHUB_OUTPUT=tmp_path / "outputs")

    result = installed(venv, "fetch-baseline", "--workflow", "build.yml", "--dest", tmp_path / "base",
                       env=env)

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{tmp_path / 'base' / wheel}\n"
    assert (tmp_path / "base" / wheel).read_bytes() == b"the base build"
    (blob,) = gh.storage_requests
    assert not [name for name in blob.headers if name.lower() == "authorization"]
