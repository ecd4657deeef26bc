"""The workflows to copy are examples: they live in examples/workflows/, and .github/workflows/ keeps
only this repository's own CI and release, so nothing here waits for a GPU runner it does not have.
No example runs a fork's code on a self-hosted runner, save the fork workflow built for that. The
bisect workflow, started by hand, runs on the loopback GitHub here. The one that keeps main's history runs
on the default branch's pushes and schedule only."""

from pathlib import Path

import pytest

from actions_runner import condition, load_workflow

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples" / "workflows").glob("*.yml"))
# Runs a fork's pull request on the GPU runner by design, read-only and after a maintainer's approval
# (docs/forks.md); its partner posts without running the fork's code.
FORK_BENCH = ("speedstats-fork-bench.yml", "speed-stats")
# What runs the default branch's own code, never a pull request's.
DEFAULT_BRANCH_EVENTS = {"push", "schedule", "workflow_dispatch"}


def self_hosted(job):
    runs_on = job["runs-on"]
    return "self-hosted" in ([runs_on] if isinstance(runs_on, str) else runs_on)


def pull_request_contexts(head_repo):
    return {"github": {"event_name": "pull_request", "repository": "o/r",
                       "event": {"pull_request": {"head": {"repo": {"full_name": head_repo}}}}}}


def job_results(workflow, contexts):
    """Each job's result on this event: `skipped` unless its `if:` holds given its needs' results."""
    results = {}

    def result(name):
        if name not in results:
            job = workflow["jobs"][name]
            needs = job.get("needs", [])
            needs = [needs] if isinstance(needs, str) else needs
            need_results = {need: {"result": result(need)} for need in needs}
            status = "success" if all(r["result"] == "success" for r in need_results.values()) else "skipped"
            ran = condition(job.get("if", "success()"), {**contexts, "needs": need_results,
                                                         "job": {"status": status}})
            results[name] = "success" if ran else "skipped"
        return results[name]

    for name in workflow["jobs"]:
        result(name)
    return results


def test_the_repositorys_own_workflows_are_ci_and_release_only_and_none_is_self_hosted():
    own = sorted(p.name for p in (ROOT / ".github" / "workflows").iterdir())
    assert own == ["ci.yml", "release.yml"]
    for name in own:
        jobs = load_workflow(ROOT / ".github" / "workflows" / name)["jobs"]
        assert not [job_id for job_id, job in jobs.items() if self_hosted(job)], name


def test_the_examples_are_the_four_set_ups_and_the_bisect():
    assert [p.name for p in EXAMPLES] == [
        "speedstats-bisect.yml", "speedstats-fork-bench.yml", "speedstats-fork-post.yml",
        "speedstats-gpu-matrix.yml", "speedstats-main-history.yml", "speedstats-oneflow-pipeline.yml",
        "speedstats-pull-request.yml"]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_no_self_hosted_job_runs_a_forks_pull_request(path):
    workflow = load_workflow(path)
    if set(workflow["on"]) == {"workflow_dispatch"}:
        return  # started by hand, by someone who can write to the repository, on one of its branches
    if "pull_request" not in workflow["on"]:
        assert "pull_request_target" not in workflow["on"]
        if not set(workflow["on"]) <= DEFAULT_BRANCH_EVENTS:  # main's history runs on the default branch
            assert not any(self_hosted(job) for job in workflow["jobs"].values())
        return
    from_fork = job_results(workflow, pull_request_contexts("someone/r"))
    from_branch = job_results(workflow, pull_request_contexts("o/r"))
    for job_id, job in workflow["jobs"].items():
        if not self_hosted(job):
            continue
        if (path.name, job_id) == FORK_BENCH:
            assert (from_fork[job_id], from_branch[job_id]) == ("success", "skipped")
            assert (workflow["permissions"], job["permissions"]) == ({}, {"contents": "read"})
            assert "Require approval for all external contributors" in path.read_text(encoding="utf-8")
        else:
            assert (from_fork[job_id], from_branch[job_id]) == ("skipped", "success"), job_id


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_each_job_has_its_own_permissions_and_the_workflow_grants_nothing(path):
    """The job that posts has the writes it needs; a job beside it (a build, a matrix job running a pull
    request's code) gets none of them."""
    workflow = load_workflow(path)
    assert workflow["permissions"] == {}
    for job_id, job in workflow["jobs"].items():
        assert job["permissions"], job_id


def test_the_pipelines_build_job_runs_on_pushes_and_the_repositorys_branches_only():
    workflow = load_workflow(ROOT / "examples" / "workflows" / "speedstats-oneflow-pipeline.yml")
    assert set(workflow["on"]) == {"push", "pull_request"}
    push = {"github": {"event_name": "push", "repository": "o/r", "event": {}}}
    assert job_results(workflow, push)["build"] == "success"
    assert job_results(workflow, pull_request_contexts("someone/r"))["build"] == "skipped"
    assert job_results(workflow, pull_request_contexts("o/r"))["build"] == "success"


# -- the bisect, started by hand -------------------------------------------------------------------------

BISECT = ROOT / "examples" / "workflows" / "speedstats-bisect.yml"


def test_the_bisect_is_started_by_hand_and_may_post_on_an_issue_or_a_pull_request_only():
    workflow = load_workflow(BISECT)
    assert set(workflow["on"]) == {"workflow_dispatch"}
    inputs = workflow["on"]["workflow_dispatch"]["inputs"]
    required = {name for name, spec in inputs.items() if spec.get("required")}
    assert required == {"good", "bad", "between", "issue"}
    assert inputs["between"]["default"] == "oneflow=={version}" and inputs["issue"]["type"] == "number"
    (job,) = workflow["jobs"].values()
    assert job["permissions"] == {"contents": "read", "issues": "write", "pull-requests": "write"}
    assert workflow["concurrency"] == {"group": "speedstats-bisect-${{ inputs.issue }}",
                                       "cancel-in-progress": False}  # a second run goes on from the first


def test_the_bisect_workflow_goes_on_from_its_state_and_posts_on_the_issue(tmp_path, fake_github):
    """The job's steps as a runner runs them (the action through its entrypoint), on a workspace whose
    .git keeps a search a run before measured to its end: this run measures nothing and posts the report."""
    import argparse
    import json

    from actions_runner import REPO, TOKEN, run_job
    from helpers import stand_in_oneflow
    from speedstats import bisect_cli
    from speedstats.analysis import bisect as search

    gh = fake_github(TOKEN)
    gh.add_issue(REPO, 12)
    workspace = tmp_path / "workspace"
    (workspace / ".github").mkdir(parents=True)
    (workspace / ".github" / "speedstats.yml").write_text("extends: smoke\n")
    wheels = [stand_in_oneflow(workspace / "wheelhouse", f"0.0.1+c{i}") for i in range(1, 5)]
    (workspace / "builds.txt").write_text(f"wheelhouse/{wheels[1].name}\nwheelhouse/{wheels[2].name}\n")
    inputs = {"good": f"wheelhouse/{wheels[0].name}", "bad": f"wheelhouse/{wheels[3].name}",
              "between": "builds.txt", "pip-args": "", "issue": 12}
    args = argparse.Namespace(good=str(workspace / inputs["good"]), bad=str(workspace / inputs["bad"]),
                              between=str(workspace / "builds.txt"), suite=str(workspace / ".github" /
                                                                              "speedstats.yml"),
                              profile=None, device="cuda", pip_args=None, flowvision=None)
    given, _ = bisect_cli.all_builds(args)
    given = [inputs["good"], *given[1:-1], inputs["bad"]]  # as the job gives them, from the workspace
    steps = []
    for head, base, ratio in ((3, 0, 2.0), (1, 0, 1.0), (2, 1, 2.0)):
        change = search.CaseChange(verdict="regression" if ratio > 1 else "no change", ratio=ratio,
                                   low=ratio * 0.98, high=ratio * 1.02)
        steps.append(search.Step(head=head, base=base, cases={"resnet50-bs2": change}, wall_s=60.0))
    state = search.State(builds=given, steps=steps,
                         measure=bisect_cli.measure_identity(args, bisect_cli.suite_mapping(args)))
    out = workspace / ".git" / "speedstats-bisect-12"
    out.mkdir(parents=True)
    (out / "bisect.json").write_text(bisect_cli.state_json(state, None))

    run = run_job(load_workflow(BISECT), "bisect", workspace, gh.url, {"inputs": inputs},
                  event_name="workflow_dispatch")
    assert run.status == "success", run.logs
    assert run.ran == ["Check out", "Bisect and post the report",
                       "Keep the state, the report and each comparison's results"]
    (comment,) = gh.comments(REPO, 12)
    assert comment["body"].startswith("**Speed bisect** of 4 builds, from good (#1) to bad (#4).\n\n#3 is "
                                      "the first build slower than the one before it (#2): resnet50-bs2 "
                                      "+100.0%")
    assert comment["body"].endswith("\n\n<!-- speedstats:speed-bisect run=4242 -->")
    assert run.summary == comment["body"].split("\n\n<!-- ")[0] + "\n"
    kept = tmp_path / "artifacts" / "speedstats-bisect-12-4242-1" / ".git" / "speedstats-bisect-12"
    assert json.loads((kept / "bisect.json").read_text())["culprits"] == [2]
    assert (kept / "report.md").read_text() == run.summary



def test_mains_history_is_written_on_the_default_branchs_pushes_and_schedule_only():
    workflow = load_workflow(ROOT / "examples" / "workflows" / "speedstats-main-history.yml")
    assert set(workflow["on"]) == DEFAULT_BRANCH_EVENTS and workflow["on"]["push"] == {"branches": ["main"]}
    jobs = workflow["jobs"]
    assert jobs["gpus"]["permissions"] == {"contents": "read"} and not self_hosted(jobs["gpus"])
    writer = jobs["history"]
    assert writer["permissions"] == {"contents": "write", "issues": "write"} and self_hosted(writer)
    assert writer["concurrency"] == {"group": "speedstats-history-${{ matrix.gpu }}",
                                     "cancel-in-progress": False}
    (step,) = [s for s in writer["steps"] if str(s.get("uses", "")).endswith("/speedstats@v0")]
    assert step["with"]["command"] == "run" and step["with"]["history-branch"] == "speedstats-data"
