"""The workflows: the example one, run step by step as a runner would (its `${{ }}` expressions, `if:`
conditions and step outputs, the action's steps through the entrypoint), against a loopback GitHub;
and the project's CI, which must run the README's commands."""

import json
import re
import subprocess
from pathlib import Path

import pytest

from actions_runner import (
    ENTRYPOINT,
    HEAD,
    PR,
    REPO,
    THIS_ACTION,
    TINY_BODY,
    TINY_SUITE,
    TOKEN,
    action,
    condition,
    interpolate,
    load_workflow,
    run_job,
)
from helpers import nvidia_smi_name
from speedstats.gpuinfo import cpu_name

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
EXAMPLES = ROOT / "examples" / "workflows"
EXAMPLE = EXAMPLES / "speedstats-pull-request.yml"
PIPELINE = EXAMPLES / "speedstats-oneflow-pipeline.yml"


# -- the example workflow ----------------------------------------------------------------------------------


def pull_request_event(head_repo=REPO):
    return {"action": "synchronize", "number": PR, "repository": {"full_name": REPO},
            "pull_request": {"number": PR, "head": {"sha": HEAD, "repo": {"full_name": head_repo}}}}


def speed_step_overrides():
    """This machine's device: the example benchmarks on cuda, which a CPU-only machine lacks."""
    return {} if nvidia_smi_name() else {"speed": {"device": "cpu"}}


def test_example_runs_on_pull_requests_with_the_permissions_it_needs():
    workflow = load_workflow(EXAMPLE)
    assert set(workflow["on"]) == {"pull_request"}
    assert workflow["permissions"] == {}  # the job's own, and no other's
    (job,) = workflow["jobs"].values()
    assert job["permissions"] == {"checks": "write", "contents": "read", "issues": "write",
                                  "pull-requests": "write"}
    assert "self-hosted" in job["runs-on"] and "gpu" in job["runs-on"]
    guard = job["steps"][-1]
    assert guard["if"] == "failure()" and guard["with"]["command"] == "automerge-guard"
    assert guard["with"]["status"] == "${{ job.status }}"


def test_example_every_with_is_an_input_of_the_action():
    inputs = action()["inputs"]
    uses_this_action = [s for s in load_workflow(EXAMPLE)["jobs"]["speed-stats"]["steps"]
                        if THIS_ACTION.match(s.get("uses", ""))]
    assert len(uses_this_action) == 2
    for step in uses_this_action:
        assert set(step["with"]) <= set(inputs), step["name"]


def test_example_skips_a_forks_pull_request(tmp_path):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    run = run_job(load_workflow(EXAMPLE), "speed-stats", workspace, "http://127.0.0.1:9",
                  pull_request_event(head_repo="someone/r"))
    assert (run.status, run.ran) == ("skipped", [])


def test_expressions_the_example_relies_on():
    contexts = {"job": {"status": "failure"}, "steps": {"speed": {"outputs": {"comment-file": "a.md"}}},
                "github": {"repository": "o/r",
                           "event": {"pull_request": {"head": {"repo": {"full_name": "O/R"}}}}}}
    assert condition("failure()", contexts)
    assert not condition("success()", contexts)
    assert condition("always() && steps.speed.outputs.comment-file != ''", contexts)
    assert not condition("steps.speed.outputs.comment-file != ''", contexts)  # implies success()
    contexts["job"]["status"] = "success"
    assert condition("github.event.pull_request.head.repo.full_name == github.repository", contexts)
    assert not condition("always() && steps.speed.outputs.missing != ''", contexts)
    assert interpolate("a-${{ steps.speed.outputs.comment-file }}-${{ job.status }}",
                       contexts) == "a-a.md-success"


@pytest.fixture
def gh(fake_github):
    server = fake_github(TOKEN)
    server.add_pull(REPO, PR, labels=["automerge"], head_sha=HEAD)
    return server


def prepared_workspace(tmp_path, max_oneflow_ms):
    workspace = tmp_path / "workspace"
    (workspace / ".github").mkdir(parents=True)
    (workspace / ".github" / "speedstats.yml").write_text(TINY_SUITE.format(max_oneflow_ms=max_oneflow_ms))
    return workspace


def marked(body, kind, **fields):
    extra = "".join(f" {k}={v}" for k, v in fields.items())
    return f"{body}\n\n<!-- speedstats:{kind}{extra} -->"


@pytest.mark.heavy
def test_example_on_a_passing_pull_request(tmp_path, gh):
    workspace = prepared_workspace(tmp_path, max_oneflow_ms=1e9)
    run = run_job(load_workflow(EXAMPLE), "speed-stats", workspace, gh.url, pull_request_event(),
                  speed_step_overrides())
    assert run.status == "success", run.logs
    assert run.ran == ["Check out", "Benchmark and comment", "Keep the results"]
    assert run.skipped == ["Remove automerge from the failed pull request"]
    body = (workspace / "speedstats-out" / "comment.md").read_text(encoding="utf-8")
    assert re.fullmatch(TINY_BODY.format(gpu_name=re.escape(nvidia_smi_name() or cpu_name()), mark="✔️"), body)
    comments = gh.comments(REPO, PR)
    assert [c["body"] for c in comments] == [marked(body, "speed-stats", head=HEAD, run=4242)]
    assert gh.labels(REPO, PR) == ["automerge"]
    comment_url = f"{gh.url}/{REPO}/pull/{PR}#issuecomment-{comments[0]['id']}"
    # The action's own job summary: the verdict line, then the comment.
    assert run.summary == f"Verdict: **pass** (score 0). Posted: {comment_url}\n\n{body}\n"
    artifact = tmp_path / "artifacts" / "speedstats-results" / "speedstats-out"
    assert sorted(p.name for p in artifact.iterdir()) == ["comment.md", "results.json"]
    assert json.loads((artifact / "results.json").read_text())["suite"] == "tiny"


@pytest.mark.heavy
def test_example_on_a_regression_labelled_need_pass_speed_test_comments_then_removes_automerge(tmp_path, gh):
    gh.add_label(REPO, PR, "need-pass-speed-test")
    workspace = prepared_workspace(tmp_path, max_oneflow_ms=0.001)
    run = run_job(load_workflow(EXAMPLE), "speed-stats", workspace, gh.url, pull_request_event(),
                  speed_step_overrides())
    assert run.status == "failure"
    assert run.ran == ["Check out", "Benchmark and comment", "Keep the results",
                       "Remove automerge from the failed pull request"]
    assert run.skipped == []
    body = (workspace / "speedstats-out" / "comment.md").read_text(encoding="utf-8")
    assert re.fullmatch(TINY_BODY.format(gpu_name=re.escape(nvidia_smi_name() or cpu_name()),
                                         mark="❌"), body)
    assert [c["body"] for c in gh.comments(REPO, PR)] == [
        marked(body, "speed-stats", head=HEAD, run=4242),
        marked("CI failed when running job: speed-stats. PR label automerge has been removed",
               "automerge-removed", job="speed-stats", head=HEAD, run=4242),
    ]
    assert gh.labels(REPO, PR) == ["need-pass-speed-test"]
    assert run.summary.startswith("Verdict: **fail** (score 2). Posted: ")


@pytest.mark.heavy
def test_example_on_a_regression_without_the_label_comments_and_passes(tmp_path, gh):
    """As the old job's continue-on-error: the marks are in the comment, the job goes on."""
    workspace = prepared_workspace(tmp_path, max_oneflow_ms=0.001)
    run = run_job(load_workflow(EXAMPLE), "speed-stats", workspace, gh.url, pull_request_event(),
                  speed_step_overrides())
    assert run.status == "success", run.logs
    assert run.skipped == ["Remove automerge from the failed pull request"]
    body = (workspace / "speedstats-out" / "comment.md").read_text(encoding="utf-8")
    assert re.fullmatch(TINY_BODY.format(gpu_name=re.escape(nvidia_smi_name() or cpu_name()),
                                         mark="❌"), body)
    assert [c["body"] for c in gh.comments(REPO, PR)] == [marked(body, "speed-stats", head=HEAD, run=4242)]
    assert gh.labels(REPO, PR) == ["automerge"]
    assert run.summary.startswith("Verdict: **fail** (score 2). Posted: ")


# -- the OneFlow pipeline example ----------------------------------------------------------------------------


@pytest.mark.heavy
def test_pipeline_on_a_base_branch_without_a_build_measures_without_a_baseline_and_says_why(tmp_path, gh):
    """The pull request that adds the pipeline: its own run is the workflow's only one, so the base
    branch has no successful run to take the base build from."""
    gh.add_workflow_run(REPO, 4242, HEAD, event="pull_request", workflow=PIPELINE.name,
                        branch="add-speed-stats", conclusion=None)
    workspace = prepared_workspace(tmp_path, max_oneflow_ms=1e9)
    wheel = tmp_path / "artifacts" / "oneflow-wheel" / "oneflow-0.9.0-cp310-cp310-linux_x86_64.whl"
    wheel.parent.mkdir(parents=True)
    wheel.write_bytes(b"the build job's wheel")
    event = pull_request_event()
    event["pull_request"]["base"] = {"ref": "master", "repo": {"full_name": REPO}}
    # This machine measures the environment's own OneFlow on its CPU: the head build is not the point.
    overrides = {"speed": {"oneflow": "installed", **speed_step_overrides().get("speed", {})}}
    run = run_job(load_workflow(PIPELINE), "speed-stats", workspace, gh.url, event, overrides)
    assert run.status == "success", "\n".join(f"--- {k}\n{v}" for k, v in run.logs.items())
    assert run.ran[1:] == ["The pull request's wheel", "The base branch's wheel",
                       "Benchmark head against base and PyTorch, and comment", "Keep the results"]
    reason = (f"no successful run of workflow '{PIPELINE.name}' on branch 'master' of {REPO} (push events) "
              "yet")
    assert run.logs["The base branch's wheel"].startswith(
        f"::warning::speedstats: no base build, measuring without a baseline: {reason}\n")
    body = (workspace / "speedstats-out" / "comment.md").read_text(encoding="utf-8")
    block, notes = body.split("\n\n</details>\n\n", 1)
    assert "GPU Name: " in block and "Against the base build" not in body
    line = f"No head-against-base table, there is no base build: {reason}."
    assert line in notes.split("\n\n")
    results = json.loads((workspace / "speedstats-out" / "results.json").read_text())
    assert results["baseline_missing"] == reason
    assert [c["body"] for c in gh.comments(REPO, PR)] == [marked(body, "speed-stats", head=HEAD, run=4242)]


# -- the project's CI -------------------------------------------------------------------------------------


def test_ci_lints_and_runs_the_readme_test_command():
    workflow = load_workflow(WORKFLOWS / "ci.yml")
    assert set(workflow["on"]) == {"push", "pull_request", "schedule"}
    runs = {job_id: [s.get("run", "") for s in job["steps"]] for job_id, job in workflow["jobs"].items()}
    assert "ruff check" in runs["lint"]  # the whole project, as pyproject.toml configures it
    assert "./scripts/test.sh" in runs["test"]
    # The weekly run: the generative test at length, and only that.
    conditions = {job_id: job.get("if") for job_id, job in workflow["jobs"].items()}
    not_weekly, weekly = "github.event_name != 'schedule'", "github.event_name == 'schedule'"
    assert conditions == {"lint": not_weekly, "test": not_weekly, "generative": weekly}
    generative = workflow["jobs"]["generative"]
    assert runs["generative"][-1] == ".venv-light/bin/python -m pytest -q tests/test_generative_input.py"
    assert generative["steps"][-1]["env"] == {"HYPOTHESIS_PROFILE": "long"}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "./scripts/test.sh" in readme.split("\n## ", 1)[0]
    for job in workflow["jobs"].values():
        python = [s["with"]["python-version"] for s in job["steps"]
                  if s.get("uses", "").startswith("actions/setup-python")]
        assert python == ["3.10"]  # oneflow 0.9.0 has wheels for CPython 3.8-3.10


def test_ci_installs_the_ruff_that_the_tests_pin():
    script = next(s["run"] for s in load_workflow(WORKFLOWS / "ci.yml")["jobs"]["lint"]["steps"]
                  if "pip install" in s.get("run", ""))
    pinned = subprocess.run(["bash", "-c", "grep '^ruff==' requirements/test.txt"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.strip()
    assert re.fullmatch(r"ruff==[\d.]+", pinned)
    assert '"$(grep \'^ruff==\' requirements/test.txt)"' in script and "-c constraints.txt" in script


def test_entrypoint_is_the_file_the_tests_run():
    assert ENTRYPOINT == ROOT / "docker" / "entrypoint.py"
