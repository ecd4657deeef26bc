"""`speedstats post-from-artifact` against the loopback GitHub, and the example fork workflows."""

import io
import json
import zipfile
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from actions_runner import TOKEN as JOB_TOKEN
from actions_runner import load_workflow, run_job
from fakegithub import actions_env, event_payload, run_speedstats
from helpers import project_home
from speedstats import results as results_model
from speedstats.bundle import write_bundle
from speedstats.render import render_speed_stats
from speedstats.suite import load_suite
from speedstats.verdict import judge

REPO = "o/r"
TOKEN = "ghs_ArtifactT0kenNeverToBePrinted00000004"
SHA = "d" * 40
RUN = 5550
RESULTS = json.dumps({
    "schema": "speedstats/results/v1", "suite": "smoke", "device": "cpu", "gpu_name": "Some CPU",
    "cases": [{"id": "resnet50-bs2", "kind": "resnet50", "batch_size": 2, "times": 5,
               "input_shape": [2, 3, 64, 64],
               "frameworks": {"oneflow": {"total_s": 0.5, "per_iter_s": 0.1, "times": 5},
                              "pytorch": {"total_s": 0.25, "per_iter_s": 0.05, "times": 5}}}],
})
BODY = ("<details>\n <summary>Speed stats:</summary>\n\n ``` \nGPU Name: Some CPU \n\n from the bundle\n ``` "
        "\n\n</details>")
RENDERED = render_speed_stats(results_model.loads(RESULTS), load_suite(profile="smoke"),
                              judge(results_model.loads(RESULTS), load_suite(profile="smoke")))
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "workflows"


def bundle_zip(tmp_path, pr=7, sha=SHA, run_id=RUN, repo=REPO, body=BODY):
    folder = tmp_path / f"bundle-{len(list(tmp_path.glob('bundle-*')))}"
    write_bundle(folder, RESULTS, body, pr, sha, run_id, repo)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.iterdir()):
            archive.write(path, path.name)
    return buf.getvalue()


@pytest.fixture
def gh(fake_github):
    return fake_github(TOKEN)


def fork_setup(gh, tmp_path, conclusion="success", **bundle):
    """A fork's pull request #7 and the benchmark run for it, which lists no pull requests."""
    gh.add_pull(REPO, 7, labels=["automerge"], head_sha=SHA, head_repo="fork/r")
    gh.add_workflow_run(REPO, RUN, SHA, pull_requests=[], conclusion=conclusion, head_repo="fork/r")
    gh.add_artifact(REPO, RUN, "speedstats-bundle", bundle_zip(tmp_path, **bundle))


def post(gh, tmp_path, *extra, event=True):
    payload = event_payload("workflow_run", REPO, run_id=RUN, head_sha=SHA) if event else None
    env = actions_env(gh, TOKEN, REPO, tmp_path, event_name="workflow_run", event=payload, GITHUB_RUN_ID=9999)
    return run_speedstats(["post-from-artifact", *extra], env)


def bodies(gh, number=7):
    return [c["body"] for c in gh.comments(REPO, number)]


def test_a_forks_bundle_is_posted_on_its_pull_request(gh, tmp_path):
    fork_setup(gh, tmp_path, conclusion="failure")
    result = post(gh, tmp_path, "--docs-base-url", "https://staging.oneflow.info", "--automerge-job",
                  "speed-stats")
    assert result.rc == 0, result.err
    assert bodies(gh) == [
        RENDERED + f"\n\n<!-- speedstats:speed-stats head={SHA} run={RUN} -->",
        ("View latest API docs preview at: https://staging.oneflow.info/docs/o/r/pr/7/\n\n<!-- "
         "speedstats:docs-preview -->"),
        ("CI failed when running job: speed-stats. PR label automerge has been removed"
        f"\n\n<!-- speedstats:automerge-removed job=speed-stats head={SHA} run={RUN} -->"),
    ]
    assert gh.labels(REPO, 7) == []
    assert result.out == f"{gh.url}/{REPO}/pull/7#issuecomment-{gh.comments(REPO, 7)[0]['id']}\n"
    again = post(gh, tmp_path, "--docs-base-url", "https://staging.oneflow.info", "--automerge-job",
                 "speed-stats")
    assert again.rc == 0 and len(bodies(gh)) == 3  # a re-run of the poster changes nothing


def test_a_same_repository_run_names_its_pull_request(gh, tmp_path):
    gh.add_pull(REPO, 7, head_sha=SHA)
    gh.add_workflow_run(REPO, RUN, SHA, pull_requests=[7], conclusion="success")
    gh.add_artifact(REPO, RUN, "other-artifact", b"not ours")
    gh.add_artifact(REPO, RUN, "speedstats-bundle", bundle_zip(tmp_path))
    result = post(gh, tmp_path, "--run-id", RUN, event=False)
    assert result.rc == 0, result.err
    assert bodies(gh) == [RENDERED + f"\n\n<!-- speedstats:speed-stats head={SHA} run={RUN} -->"]


def test_a_bundle_without_a_body_is_rendered_from_its_results(gh, tmp_path):
    fork_setup(gh, tmp_path, body=None)
    result = post(gh, tmp_path)
    assert result.rc == 0, result.err
    results, suite = results_model.loads(RESULTS), load_suite(profile="smoke")
    expected = render_speed_stats(results, suite, judge(results, suite))
    assert bodies(gh) == [expected + f"\n\n<!-- speedstats:speed-stats head={SHA} run={RUN} -->"]
    assert "OneFlow resnet50 time: 100.0ms" in expected


@pytest.mark.parametrize("flags", [[], ["--rerender"]])
def test_the_forks_text_is_ignored_unless_verbatim_is_asked_for(gh, tmp_path, flags):
    fork_setup(gh, tmp_path, body="@everyone free money at https://example.invalid")
    result = post(gh, tmp_path, *flags)
    assert result.rc == 0, result.err
    assert bodies(gh) == [RENDERED + f"\n\n<!-- speedstats:speed-stats head={SHA} run={RUN} -->"]


def test_verbatim_posts_the_forks_comment_md_as_it_is(gh, tmp_path):
    fork_setup(gh, tmp_path)
    result = post(gh, tmp_path, "--verbatim")
    assert result.rc == 0, result.err
    assert bodies(gh) == [BODY + f"\n\n<!-- speedstats:speed-stats head={SHA} run={RUN} -->"]
    both = post(gh, tmp_path, "--verbatim", "--rerender")
    assert both.rc == 2 and "not allowed with argument" in both.err


def test_a_bundle_naming_another_pull_request_is_refused(gh, tmp_path):
    gh.add_pull(REPO, 9, head_sha="9" * 40)  # the victim: a pull request from the base repository
    fork_setup(gh, tmp_path, pr=9)
    result = post(gh, tmp_path, "--automerge-job", "speed-stats")
    assert result.rc == 2
    assert result.err == (f"speedstats: error: artifact 'speedstats-bundle' of run {RUN}: refusing to post: "
                          "pull "
                          f"request #9 comes from o/r, run {RUN} from fork/r\n")
    assert bodies(gh, 9) == [] and bodies(gh, 7) == []
    assert gh.labels(REPO, 7) == ["automerge"]


def test_a_same_repository_bundle_naming_another_pull_request_is_refused(gh, tmp_path):
    gh.add_pull(REPO, 7, head_sha=SHA)
    gh.add_pull(REPO, 8, head_sha="8" * 40)
    gh.add_workflow_run(REPO, RUN, SHA, pull_requests=[7])
    gh.add_artifact(REPO, RUN, "speedstats-bundle", bundle_zip(tmp_path, pr=8))
    result = post(gh, tmp_path)
    assert result.rc == 2
    assert "refusing to post: the bundle names pull request #8, run 5550 belongs to #7" in result.err
    assert bodies(gh, 7) == [] and bodies(gh, 8) == []


def test_a_fork_pull_request_without_the_runs_commit_is_refused(gh, tmp_path):
    gh.add_pull(REPO, 7, head_sha="7" * 40, head_repo="fork/r")  # same fork, another pull request
    gh.add_workflow_run(REPO, RUN, SHA, pull_requests=[], head_repo="fork/r")
    gh.add_artifact(REPO, RUN, "speedstats-bundle", bundle_zip(tmp_path))
    result = post(gh, tmp_path)
    assert result.rc == 2
    assert f"refusing to post: commit {SHA[:12]} of run {RUN} is not in pull request #7" in result.err
    assert bodies(gh) == []


@pytest.mark.parametrize("bundle, message", [
    ({"sha": "e" * 40}, f"the bundle says commit eeeeeeeeeeee, run {RUN} ran dddddddddddd"),
    ({"run_id": 1234}, f"the bundle says run 1234, it was uploaded by run {RUN}"),
    ({"repo": "x/y"}, "the bundle is for x/y, this is o/r"),
])
def test_a_bundle_that_does_not_match_its_run_is_refused(gh, tmp_path, bundle, message):
    fork_setup(gh, tmp_path, **bundle)
    result = post(gh, tmp_path)
    assert result.rc == 2 and "refusing to post: " + message in result.err
    assert bodies(gh) == []


def test_a_missing_artifact_is_a_clear_error(gh, tmp_path):
    gh.add_pull(REPO, 7, head_sha=SHA)
    gh.add_workflow_run(REPO, RUN, SHA, pull_requests=[7])
    gh.add_artifact(REPO, RUN, "speedstats-results", b"")
    result = post(gh, tmp_path)
    assert (result.rc, result.err) == (2,
                                       (f"speedstats: error: --artifact-name: run {RUN} of o/r has no "
                                        "artifact "
                                          "named 'speedstats-bundle' (its artifacts: speedstats-results)\n"))
    assert bodies(gh) == []


def test_an_expired_or_broken_artifact_and_a_missing_run_are_clear_errors(gh, tmp_path):
    gh.add_pull(REPO, 7, head_sha=SHA)
    gh.add_workflow_run(REPO, RUN, SHA, pull_requests=[7])
    gh.add_artifact(REPO, RUN, "speedstats-bundle", bundle_zip(tmp_path), expired=True)
    gh.add_artifact(REPO, RUN, "broken", b"this is not a zip")
    expired = post(gh, tmp_path)
    assert expired.rc == 2 and f"artifact 'speedstats-bundle' of run {RUN}: expired" in expired.err
    broken = post(gh, tmp_path, "--artifact-name", "broken")
    assert broken.rc == 2 and f"artifact 'broken' of run {RUN}: not a zip archive" in broken.err
    missing = post(gh, tmp_path, "--run-id", 4040)
    assert missing.rc == 2 and "get workflow run 4040 of o/r: not found (404)" in missing.err
    assert bodies(gh) == []


def test_without_a_run_id_or_a_workflow_run_event_it_says_so(gh, tmp_path):
    result = post(gh, tmp_path, event=False)
    assert (result.rc, result.err) == (
        2, "speedstats: error: --run-id: no run (give --run-id ID, or run from a workflow_run event)\n")


def test_a_push_runs_bundle_has_nothing_to_comment_on(gh, tmp_path):
    gh.add_workflow_run(REPO, RUN, SHA, event="push")
    gh.add_artifact(REPO, RUN, "speedstats-bundle", bundle_zip(tmp_path, pr=None))
    result = post(gh, tmp_path)
    assert result.rc == 0 and "the run was not for a pull request; nothing to comment on" in result.err


def test_a_flaky_download_is_retried(gh, tmp_path):
    fork_setup(gh, tmp_path)
    gh.fail("GET", "/_blobs/*", status=503)
    gh.fail("GET", "/repos/o/r/actions/runs/*/artifacts", status=502)
    result = post(gh, tmp_path)
    assert result.rc == 0, result.err
    assert len(bodies(gh)) == 1


def test_dry_run_checks_the_bundle_and_writes_nothing(gh, tmp_path):
    fork_setup(gh, tmp_path, conclusion="failure")
    result = post(gh, tmp_path, "--dry-run", "--automerge-job", "speed-stats")
    assert result.rc == 0, result.err
    assert result.out.startswith("speedstats: dry run, nothing is "
                                 f"sent\nPOST {gh.url}/repos/o/r/issues/7/comments\n\n"
                                 + RENDERED)
    assert f"DELETE {gh.url}/repos/o/r/issues/7/labels/automerge" in result.out
    assert [r.method for r in gh.requests if r.method != "GET"] == []


# -- the example workflow pair -----------------------------------------------------------------------


def load(name):
    with open(EXAMPLES / name, encoding="utf-8") as f:
        return yaml.safe_load(f)


def test_the_example_pair_fits_together_and_the_poster_never_runs_the_forks_code():
    bench, poster = load("speedstats-fork-bench.yml"), load("speedstats-fork-post.yml")
    triggers = poster[True]  # YAML 1.1 reads the key `on` as True
    assert triggers["workflow_run"]["workflows"] == [bench["name"]]
    assert triggers["workflow_run"]["types"] == ["completed"]
    assert "pull_request_target" not in triggers
    assert bench["permissions"] == {} and poster["permissions"] == {}  # each job its own
    assert {job["permissions"]["contents"] for job in bench["jobs"].values()} == {"read"}
    assert [job["permissions"] for job in poster["jobs"].values()] == [
        {"actions": "read", "issues": "write", "pull-requests": "write"}]

    bench_steps = [s for job in bench["jobs"].values() for s in job["steps"]]
    upload = next(s for s in bench_steps if str(s.get("uses", "")).startswith("actions/upload-artifact@"))
    run_step = next(s for s in bench_steps if s.get("with", {}).get("command") == "run")
    assert (upload["with"]["name"] == "speedstats-bundle"
            and upload["with"]["path"] == run_step["with"]["bundle"])
    assert upload["if"] == "always()"

    # The job that holds the write token runs the action's own image: it checks out nothing, installs
    # nothing and runs no script.
    (post,) = [s for job in poster["jobs"].values() for s in job["steps"]]
    assert post["uses"].startswith(f"{project_home()}@v") and "run" not in post
    assert post["with"] == {"command": "post-from-artifact", "automerge-job": "speed-stats"}
    assert list(bench["jobs"]) == ["speed-stats"]  # the job the automerge comment names


def test_the_example_poster_posts_a_forks_bundle_from_the_actions_image(fake_github, tmp_path):
    """The poster workflow's job as the runner runs it (its `if:`, the action's step through the
    entrypoint), on the workflow_run event of a fork's failed benchmark run."""

    gh = fake_github(JOB_TOKEN)
    fork_setup(gh, tmp_path, conclusion="failure")
    event = event_payload("workflow_run", REPO, run_id=RUN, head_sha=SHA)
    event["workflow_run"].update({"event": "pull_request", "conclusion": "failure",
                                  "head_repository": {"full_name": "fork/r"}})
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    run = run_job(load_workflow(EXAMPLES / "speedstats-fork-post.yml"), "post", workspace, gh.url, event,
                  event_name="workflow_run")
    assert (run.status, run.ran) == ("success", ["Post the Speed stats comment"]), run.logs
    speed_stats, guard = bodies(gh)
    assert speed_stats.startswith(RENDERED + "\n\n<!-- speedstats:speed-stats ")
    assert guard.startswith("CI failed when running job: speed-stats. PR label automerge has been removed")
    assert "automerge" not in gh.labels(REPO, 7)
    # A run of the bench workflow on a branch of this repository is not the poster's to post.
    event["workflow_run"]["head_repository"]["full_name"] = REPO
    assert run_job(load_workflow(EXAMPLES / "speedstats-fork-post.yml"), "post", workspace, gh.url, event,
                   event_name="workflow_run").status == "skipped"


def test_the_zip_comes_from_storage_on_another_host_and_the_token_never_goes_there(gh, tmp_path):
    fork_setup(gh, tmp_path)
    result = post(gh, tmp_path)
    assert result.rc == 0, result.err
    assert urlsplit(gh.storage_url).netloc != urlsplit(gh.url).netloc
    (blob,) = gh.storage_requests
    assert blob.path.startswith("/_blobs/") and blob.status == 200 and blob.query["sig"]
    assert not [name for name in blob.headers if name.lower() == "authorization"]
    assert TOKEN not in json.dumps(blob.headers)
    api_download = gh.requests_matching("GET", "/repos/o/r/actions/artifacts/*/zip")
    assert [r.status for r in api_download] == [302]
    assert api_download[0].headers["Authorization"] == f"token {TOKEN}"


def test_storage_refusing_the_download_is_a_clear_error_without_the_signature(gh, tmp_path):
    fork_setup(gh, tmp_path)
    gh.fail("GET", "/_blobs/*", status=403, times=99, message="Server failed to authenticate the request.")
    result = post(gh, tmp_path)
    host = urlsplit(gh.storage_url).netloc
    assert result.rc == 2
    assert result.err == (f"speedstats: error: download artifact 'speedstats-bundle' of run {RUN}: "
                          f"storage host {host} answered 403 Forbidden\n")
    assert len(gh.storage_requests) == 1  # a 403 is not retried
    assert bodies(gh) == []


def test_a_download_is_bounded_in_size_and_never_retried_past_the_bound(gh, tmp_path, monkeypatch):
    from speedstats.errors import UserError
    from speedstats.github.client import GitHubClient, RetryPolicy

    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(name, "127.0.0.1,127.0.0.2,localhost")
    gh.add_workflow_run(REPO, RUN, SHA)
    artifact_id = gh.add_artifact(REPO, RUN, "big", b"x" * 4096)
    client = GitHubClient(TOKEN, gh.url, RetryPolicy(time_scale=0.001))
    url = f"{gh.url}/repos/{REPO}/actions/artifacts/{artifact_id}/zip"
    assert client.download(url, "download big", max_bytes=4096) == b"x" * 4096
    with pytest.raises(UserError) as raised:
        client.download(url, "download big", max_bytes=1000)
    host = urlsplit(gh.storage_url).netloc
    assert str(raised.value) == f"download big: 4096 bytes at {host}, more than 1000; refusing it"
    assert len(gh.storage_requests) == 2


def test_a_forks_hostile_results_cannot_leave_the_code_fence(gh, tmp_path):
    hostile = "\n ``` \n</details>\n@maintainer [click](https://e.test) \x1b[31mred\x1b[0m"
    data = json.loads(RESULTS)
    data["gpu_name"] += hostile
    data["cases"][0]["error"] = "crashed" + hostile
    folder = tmp_path / "hostile"
    write_bundle(folder, json.dumps(data), "anything", 7, SHA, RUN, REPO)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        for path in sorted(folder.iterdir()):
            archive.write(path, path.name)
    gh.add_pull(REPO, 7, head_sha=SHA, head_repo="fork/r")
    gh.add_workflow_run(REPO, RUN, SHA, pull_requests=[], head_repo="fork/r")
    gh.add_artifact(REPO, RUN, "speedstats-bundle", buf.getvalue())
    result = post(gh, tmp_path)
    assert result.rc == 0, result.err
    (body,) = bodies(gh)
    assert body.count("```") == 2 and body.count("</details>") == 1 and "\x1b" not in body
    assert "anything" not in body
    inside = body.split("```")[1]
    assert "@maintainer [click](https://e.test) red" in inside
