"""The action: action.yml's inputs all reach the entrypoint, its outputs are all set, and the
entrypoint, run outside a container with the runner's INPUT_* environment, posts to a loopback GitHub."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from actions_runner import (
    ENTRYPOINT,
    HEAD,
    PR,
    REPO,
    TINY_BODY,
    TINY_SUITE,
    TOKEN,
    action,
    action_env,
    clean_environ,
    planned,
    run_entrypoint,
)
from helpers import stand_in_flowvision, stand_in_oneflow
from procfs import reading_stdin
from speedstats.gpuinfo import cpu_name


def outputs_of(env):
    from speedstats.actions_io import read_outputs

    path = Path(env["GITHUB_OUTPUT"])
    return read_outputs(path) if path.exists() else {}


# -- action.yml ----------------------------------------------------------------------------------------


def test_action_is_a_docker_action_whose_inputs_and_outputs_are_described():
    meta = action()
    assert meta["runs"]["using"] == "docker"  # its image: tests/test_release.py
    for kind in ("inputs", "outputs"):
        for name, spec in meta[kind].items():
            assert isinstance(spec.get("description"), str) and len(spec["description"]) > 20, name


def test_entrypoint_knows_every_input_with_the_same_default():
    sys.path.insert(0, str(ENTRYPOINT.parent))
    try:
        import entrypoint
    finally:
        sys.path.remove(str(ENTRYPOINT.parent))
    inputs = action()["inputs"]
    assert set(entrypoint.DEFAULTS) == set(inputs)
    for name, spec in inputs.items():
        default = str(spec.get("default", ""))
        # Expression defaults (the job's token and id) come from the environment outside the action.
        assert entrypoint.DEFAULTS[name] == ("" if default.startswith("${{") else default), name
    assert inputs["command"]["default"] in entrypoint.COMMANDS


def test_the_job_summary_is_appended_the_verdict_line_then_the_comment(tmp_path):
    sys.path.insert(0, str(ENTRYPOINT.parent))
    try:
        import entrypoint
    finally:
        sys.path.remove(str(ENTRYPOINT.parent))
    from speedstats.actions_io import set_output

    summary, outputs, comment = tmp_path / "summary.md", tmp_path / "outputs", tmp_path / "comment.md"
    env = {"GITHUB_STEP_SUMMARY": str(summary), "GITHUB_OUTPUT": str(outputs)}
    summary.write_text("an earlier step's summary\n", encoding="utf-8")
    entrypoint.write_summary(env, comment, posting=True)  # the run wrote no comment.md: nothing to say
    assert summary.read_text(encoding="utf-8") == "an earlier step's summary\n"
    comment.write_text("<details>the comment</details>", encoding="utf-8")
    for name, value in (("verdict", "fail"), ("score", "3"), ("comment-file", str(comment))):
        set_output(name, value, env)
    entrypoint.write_summary(env, comment, posting=False)  # command: run
    set_output("comment-url", "https://github.example/o/r/pull/7#issuecomment-1", env)
    entrypoint.write_summary(env, comment, posting=True)  # command: run-and-comment
    assert summary.read_text(encoding="utf-8") == (
        "an earlier step's summary\n"
        "Verdict: **fail** (score 3).\n\n<details>the comment</details>\n"
        "Verdict: **fail** (score 3). Posted: https://github.example/o/r/pull/7#issuecomment-1\n\n"
        "<details>the comment</details>\n")


def test_outputs_are_the_ones_the_commands_set():
    assert set(action()["outputs"]) == {"verdict", "score", "regressions", "likely-regressions", "results",
                                        "comment-file", "comment-url", "baseline-path", "baseline-missing",
                                        "failed-gpus", "artifact-name"}


# -- every input reaches the command line (the runner's spelling: INPUT_COMMENT-MODE) -----------------


def test_run_inputs_reach_speedstats_run(tmp_path):
    assert planned(tmp_path, command="run") == "speedstats run --device cuda --out speedstats-out\n"
    printed = planned(tmp_path, command="run", suite=".github/speed.yml", profile="smoke", device="cpu",
                      out="o2", history="h.jsonl", **{"lock-timeout": "90", "bundle": "bundle-dir"})
    assert printed == ("speedstats run --device cpu --out o2 --suite .github/speed.yml --profile smoke "
                       "--lock-timeout 90 --bundle bundle-dir --history h.jsonl\n")


def test_a_run_with_a_history_branch_is_then_recorded_there(tmp_path):
    assert planned(tmp_path, command="run", **{"history-branch": "speedstats-data"}) == (
        "speedstats run --device cuda --out speedstats-out\n"
        "speedstats record --results speedstats-out/results.json --branch speedstats-data\n")
    assert planned(tmp_path, command="record", out="o", author="bot[bot]",
                   **{"tracking-issues": "false", "github-deadline": "60"}) == (
        "speedstats record --results o/results.json --branch speedstats-data --no-issues --author 'bot[bot]' "
        "--github-deadline 60\n")


def test_doctor_checks_what_run_would_need_with_the_same_inputs(tmp_path):
    assert planned(tmp_path, command="doctor") == "speedstats doctor --device cuda\n"
    printed = planned(tmp_path, command="doctor", suite="s.yml", device="auto", oneflow="w/*.whl",
                      only="oneflow", **{"pip-args": "--pre", "cache-dir": "c", "github-deadline": "60"})
    assert printed == ("speedstats doctor --device auto --suite s.yml --oneflow 'w/*.whl' --pip-args=--pre "
                       "--only oneflow --cache-dir c --github-deadline 60\n")
    from speedstats.cli import build_parser

    args = build_parser().parse_args(shlex.split(printed)[1:])
    assert (args.command, args.oneflow, args.pip_args, args.github_deadline) == ("doctor", "w/*.whl", "--pre",
                                                                                60.0)


def test_calibrate_measures_the_build_run_would_judge_with_the_same_inputs(tmp_path):
    printed = planned(tmp_path, command="calibrate", suite="s.yml", oneflow="w/*.whl",
                      **{"cache-dir": "c", "lock-timeout": "60"})
    assert printed == ("speedstats calibrate --device cuda --out speedstats-out --suite s.yml --oneflow "
                       "'w/*.whl' --lock-timeout 60 --cache-dir c\n")
    from speedstats.cli import build_parser

    args = build_parser().parse_args(shlex.split(printed)[1:])
    assert (args.command, args.oneflow, args.cache_dir, args.pairs) == ("calibrate", "w/*.whl", "c", 6)


def test_bisect_inputs_reach_speedstats_bisect(tmp_path):
    printed = planned(tmp_path, command="bisect", oneflow="oneflow==0.9.1.dev20240108+cu118", pr="12",
                      suite=".github/speedstats.yml",
                      **{"baseline-oneflow": "oneflow==0.9.1.dev20240101+cu118",
                         "between": "oneflow=={version}", "pip-args": "--extra-index-url https://x/cu118",
                         "budget": "5400", "out": ".git/bisect"})
    assert printed == ("speedstats bisect --good oneflow==0.9.1.dev20240101+cu118 --bad "
                       "oneflow==0.9.1.dev20240108+cu118 --between 'oneflow=={version}' --device cuda --out "
                       ".git/bisect --suite .github/speedstats.yml "
                       "'--pip-args=--extra-index-url https://x/cu118' --budget-s 5400 --pr 12 "
                       "--mode update\n")
    # Without `pr` the report goes to the log and the job summary only.
    assert "--pr" not in planned(tmp_path, command="bisect", oneflow="b", **{"baseline-oneflow": "g",
                                                                            "between": "x"})


def test_build_inputs_reach_speedstats_run(tmp_path):
    printed = planned(tmp_path, command="run", oneflow="wheelhouse/oneflow-*.whl",
                      pytorch="torch==2.3.1 torchvision==0.18.1", flowvision="flowvision==0.2.1",
                      only="oneflow",
                      **{"baseline-oneflow": "base-wheel/", "pip-args": "--extra-index-url https://x/cu118"})
    assert printed == ("speedstats run --device cuda --out speedstats-out --oneflow "
                       "'wheelhouse/oneflow-*.whl' "
                       "--baseline-oneflow base-wheel/ --pytorch 'torch==2.3.1 torchvision==0.18.1' "
                       "--flowvision flowvision==0.2.1 '--pip-args=--extra-index-url https://x/cu118' "
                       "--only oneflow\n")


def test_run_and_comment_posts_the_rendered_body(tmp_path):
    printed = planned(tmp_path, out="results dir", pr="12", **{"comment-mode": "new"})
    assert printed == ("speedstats run --device cuda --out 'results dir'\n"
                       "speedstats comment --body-file 'results dir/comment.md' --mode new "
                       "--results 'results dir/results.json' --pr 12\n")


def test_matrix_inputs_reach_shard_and_report(tmp_path):
    assert planned(tmp_path, command="shard", gpu="a100", status="success") == (
        "speedstats shard --gpu a100 --out speedstats-out --dir speedstats-shard --status success\n")
    printed = planned(tmp_path, command="report", gpus='["a100", "t4"]', suite=".github/speed.yml",
                      **{"shards-dir": "shards", "notify-on-flip": "alice, bob"})
    assert printed == ("speedstats report --gpus '[\"a100\", \"t4\"]' --shards shards --notify-on-flip "
                       "'alice, bob' --suite .github/speed.yml\n")
    printed = planned(tmp_path, command="report", gpus='["a100"]', label="merge-me",
                      **{"automerge-job": "speed-stats"})
    assert printed.startswith("speedstats report --gpus '[\"a100\"]' --shards speedstats-shards "
                              "--notify-on-flip author --automerge-job speed-stats "
                              "--automerge-label merge-me")


@pytest.mark.parametrize("command, missing", [("shard", "gpu"), ("report", "gpus")])
def test_matrix_commands_name_the_input_they_miss(tmp_path, command, missing):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    proc = run_entrypoint(action_env(workspace, inputs={"command": command}), workspace, ["--print"])
    assert proc.returncode == 2
    assert f"input '{missing}': needed by command '{command}'" in proc.stderr


def test_comment_inputs(tmp_path):
    assert planned(tmp_path, command="comment", **{"body-file": "b.md"}) == \
        "speedstats comment --body-file b.md --mode update\n"


def test_docs_preview_inputs(tmp_path):
    printed = planned(tmp_path, command="docs-preview", pr="9",
                      **{"docs-base-url": "https://staging.oneflow.info", "comment-mode": "new"})
    assert printed == "speedstats docs-preview --base-url https://staging.oneflow.info --mode new --pr 9\n"


def test_author_reaches_the_commands_that_find_the_bots_comment(tmp_path):
    assert planned(tmp_path, command="comment", author="my-app[bot]", **{"body-file": "b.md"}) == \
        "speedstats comment --body-file b.md --mode update --author 'my-app[bot]'\n"
    assert planned(tmp_path, pr="5",
                   author="perf-bot") == ("speedstats run --device cuda --out speedstats-out\n"
                                                           "speedstats comment --body-file "
                                                           "speedstats-out/comment.md"
                                                           " --mode update --results "
                                                           "speedstats-out/results.json --pr 5 --author "
                                                           "perf-bot\n")


def test_automerge_guard_inputs(tmp_path):
    assert planned(tmp_path, command="automerge-guard") == \
        "speedstats automerge-guard --job speed --label automerge --status failure\n"
    printed = planned(tmp_path, command="automerge-guard", job="Build cu116", label="merge-me",
                      status="cancelled", pr="3")
    assert printed == ("speedstats automerge-guard --job 'Build cu116' --label merge-me --status cancelled "
                       "--pr 3\n")


def test_post_from_artifact_inputs(tmp_path):
    assert planned(tmp_path, command="post-from-artifact") == "speedstats post-from-artifact --mode update\n"
    printed = planned(tmp_path, command="post-from-artifact", suite=".github/speed.yml", label="merge-me",
                      author="perf-bot", **{"automerge-job": "speed stats", "comment-mode": "new",
                                            "docs-base-url": "https://d.example", "github-deadline": "60"})
    assert printed == ("speedstats post-from-artifact --mode new --suite .github/speed.yml --docs-base-url "
                       "https://d.example --automerge-job 'speed stats' --automerge-label merge-me --author "
                       "perf-bot --github-deadline 60\n")


def test_fetch_baseline_inputs(tmp_path):
    assert planned(tmp_path, command="fetch-baseline", **{"baseline-workflow": "build.yml"}) == (
        "speedstats fetch-baseline --workflow build.yml --artifact wheelhouse --dest "
        "speedstats-out/baseline\n")
    printed = planned(tmp_path, command="fetch-baseline", out="o", **{
        "baseline-workflow": "1234", "baseline-artifact": "wheels cu118", "baseline-branch": "release/0.9"})
    assert printed == ("speedstats fetch-baseline --workflow 1234 --artifact 'wheels cu118' --dest "
                       "o/baseline "
                       "--branch release/0.9\n")
    optional = planned(tmp_path, command="fetch-baseline", **{"baseline-workflow": "b.yml",
                                                               "baseline-optional": "true"})
    assert optional.endswith(" --dest speedstats-out/baseline --optional\n")
    reason = "no successful run of workflow 'b.yml' on branch 'master' of o/r (push events) yet"
    assert f" --baseline-missing {shlex.quote(reason)}" in planned(tmp_path, **{"baseline-missing": reason})


def test_github_deadline_reaches_every_github_command(tmp_path):
    deadline = {"github-deadline": "45"}
    assert planned(tmp_path, command="comment", **{"body-file": "c.md"}, **deadline) == (
        "speedstats comment --body-file c.md --mode update --github-deadline 45\n")
    docs = {"docs-base-url": "https://d.example"}
    assert planned(tmp_path, command="docs-preview", **docs, **deadline) == (
        "speedstats docs-preview --base-url https://d.example --mode update --github-deadline 45\n")
    assert planned(tmp_path, command="automerge-guard", job="build", **deadline) == (
        "speedstats automerge-guard --job build --label automerge --status failure --github-deadline 45\n")
    assert planned(tmp_path, command="fetch-baseline", **{"baseline-workflow": "b.yml"}, **deadline) == (
        "speedstats fetch-baseline --workflow b.yml --artifact wheelhouse --dest speedstats-out/baseline "
        "--github-deadline 45\n")
    run, comment = planned(tmp_path, command="run-and-comment", **deadline).splitlines()
    assert comment.endswith("--github-deadline 45") and "deadline" not in run


def test_underscore_spelling_works_outside_the_runner(tmp_path):
    env = clean_environ()
    env.update({"INPUT_COMMAND": "comment", "INPUT_BODY_FILE": "x.md", "INPUT_COMMENT_MODE": "new"})
    proc = run_entrypoint(env, tmp_path, ["--print"])
    assert (proc.returncode, proc.stdout) == (0, "speedstats comment --body-file x.md --mode new\n")


@pytest.mark.parametrize(("inputs", "message"), [
    ({"command": "benchmark"},
     ("input 'command': must be one of run-and-comment, run, comment, docs-preview, "
                               "automerge-guard, fetch-baseline, shard, report, post-from-artifact, "
                               "doctor, bisect, record, calibrate, got 'benchmark'")),
    ({"fail-on-regression": "yes"}, "input 'fail-on-regression': must be true or false, got 'yes'"),
    ({"baseline-optional": "1"}, "input 'baseline-optional': must be true or false, got '1'"),
    ({"tracking-issues": "no"}, "input 'tracking-issues': must be true or false, got 'no'"),
    ({"command": "comment"}, "input 'body-file': needed by command 'comment'"),
    ({"command": "docs-preview"}, "input 'docs-base-url': needed by command 'docs-preview'"),
    ({"command": "fetch-baseline"}, "input 'baseline-workflow': needed by command 'fetch-baseline'"),
    ({"command": "bisect", "oneflow": "bad.whl", "between": "b.txt"},
     "input 'baseline-oneflow': needed by command 'bisect' (the good build)"),
    ({"command": "bisect", "baseline-oneflow": "good.whl", "oneflow": "bad.whl"},
     "input 'between': needed by command 'bisect' (the builds between them)"),
])
def test_bad_inputs_are_one_line_errors(tmp_path, inputs, message):
    env = action_env(tmp_path, inputs=inputs)
    proc = run_entrypoint(env, tmp_path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", f"speedstats: error: {message}\n")


def test_planned_command_lines_parse_with_the_real_cli(tmp_path):
    """The flags the entrypoint passes are the ones the speedstats commands define."""
    from speedstats.cli import build_parser

    parser = build_parser()
    lines = (planned(tmp_path, command="run", suite="s.yml", profile="smoke", device="cpu",
                     history="h.jsonl", **{"lock-timeout": "5", "bundle": "b", "baseline-missing": "why",
                                           "cache-dir": "c"})
             + planned(tmp_path, pr="3", **{"comment-mode": "new"})
             + planned(tmp_path, command="docs-preview", pr="3", **{"docs-base-url": "https://d"})
             + planned(tmp_path, command="automerge-guard", pr="3", status="success")
             + planned(tmp_path, command="fetch-baseline",
                       **{"baseline-workflow": "b.yml", "baseline-branch": "m", "baseline-optional": "true"})
             + planned(tmp_path, command="post-from-artifact", profile="smoke", author="a",
                       **{"automerge-job": "speed", "docs-base-url": "https://d", "github-deadline": "9"})
             + planned(tmp_path, command="bisect", oneflow="bad.whl", pr="12", author="a", flowvision="f.whl",
                       **{"baseline-oneflow": "good.whl", "between": "b.txt", "budget": "3600",
                          "pip-args": "--pre", "lock-timeout": "5", "github-deadline": "9"})
             + planned(tmp_path, command="run", author="a",
                       **{"history-branch": "data", "github-deadline": "9", "tracking-issues": "false"}))
    for line in lines.splitlines():
        argv = shlex.split(line)[1:]
        args = parser.parse_args(argv)
        assert args.command == argv[0] and callable(args.func)


# -- against the loopback GitHub ------------------------------------------------------------------------


@pytest.fixture
def gh(fake_github):
    server = fake_github(TOKEN)
    server.add_pull(REPO, PR, labels=["automerge", "bug"], head_sha=HEAD)
    return server


def test_comment_lands_byte_for_byte_and_comment_url_is_set(tmp_path, gh):
    body = "<details>\n <summary>Speed stats:</summary>\n\n ``` \nGPU Name: X \n\n ``` \n\n</details>"
    (tmp_path / "body.md").write_text(body, encoding="utf-8")
    env = action_env(tmp_path, gh.url, {"command": "comment", "body-file": "body.md"})
    proc = run_entrypoint(env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    comments = gh.comments(REPO, PR)
    # The body as given, then the hidden marker by which the bot finds its comment again.
    assert [c["body"] for c in comments] == [body
                                             + f"\n\n<!-- speedstats:speed-stats head={HEAD} run=4242 -->"]
    assert outputs_of(env) == {"comment-url": f"{gh.url}/{REPO}/pull/{PR}#issuecomment-{comments[0]['id']}"}
    # The token input is what authenticated the request.
    posts = gh.requests_matching("POST", f"/repos/{REPO}/issues/{PR}/comments")
    assert posts and posts[-1].headers["Authorization"].split(" ", 1)[1] == TOKEN


def test_a_wrong_token_input_fails_the_step(tmp_path, gh):
    (tmp_path / "body.md").write_text("Speed stats", encoding="utf-8")
    env = action_env(tmp_path, gh.url, {"command": "comment", "body-file": "body.md", "token": "ghs_wrong"})
    proc = run_entrypoint(env, tmp_path)
    assert proc.returncode != 0
    assert gh.comments(REPO, PR) == []
    assert "speedstats: error: " in proc.stderr


@pytest.mark.parametrize("head_repo", [REPO, "someone/r"], ids=["same-repository", "fork"])
def test_a_token_that_cannot_write_fails_the_step_unless_it_is_a_forks(tmp_path, gh, head_repo):
    """GitHub answers 403 'Resource not accessible by integration' to every write of a read-only token:
    an organisation's read-only default GITHUB_TOKEN, or any fork's."""
    gh.add_token("ghs_readOnly", write=False)
    (tmp_path / "body.md").write_text("Speed stats", encoding="utf-8")
    event = {"action": "synchronize", "number": PR, "repository": {"full_name": REPO},
             "pull_request": {"number": PR, "head": {"sha": HEAD, "repo": {"full_name": head_repo}},
                              "base": {"repo": {"full_name": REPO}}}}
    inputs = {"command": "comment", "body-file": "body.md", "token": "ghs_readOnly"}
    env = action_env(tmp_path, gh.url, inputs, event=event)
    proc = run_entrypoint(env, tmp_path)
    summary = Path(env["GITHUB_STEP_SUMMARY"])
    assert gh.comments(REPO, PR) == []
    if head_repo == REPO:
        assert proc.returncode == 2
        assert proc.stderr.splitlines()[-1].endswith(
            "GitHub answered 403 Resource not accessible by integration; the token needs "
            "`pull-requests: write` (add it to the workflow's or the job's `permissions:`)")
        assert not summary.exists()
    else:
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("::warning::speedstats: could not post the comment on o/r#7")
        assert summary.read_text(encoding="utf-8") == "Speed stats\n"


def test_docs_preview_lands(tmp_path, gh):
    env = action_env(tmp_path, gh.url, {"command": "docs-preview",
                                        "docs-base-url": "https://oneflow-staging.oss-cn-beijing.aliyuncs.com"})
    proc = run_entrypoint(env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert [c["body"] for c in gh.comments(REPO, PR)] == [
        ("View latest API docs preview at: https://oneflow-staging.oss-cn-beijing.aliyuncs.com/docs/o/r/pr/7/"
        "\n\n<!-- speedstats:docs-preview -->")]
    comment_id = gh.comments(REPO, PR)[0]["id"]
    assert outputs_of(env) == {"comment-url": f"{gh.url}/{REPO}/pull/{PR}#issuecomment-{comment_id}"}


@pytest.mark.parametrize("event_name", ["push", "pull_request"])
def test_record_appends_the_runs_results_to_the_data_branch_on_the_default_branch_only(tmp_path, gh,
                                                                                      event_name):
    from speedstats.history import history_file_name, read_history_text
    from speedstats.results import load

    data = Path(__file__).parent / "data" / "smoke-results.json"
    (tmp_path / "speedstats-out").mkdir()
    shutil.copy(data, tmp_path / "speedstats-out" / "results.json")
    env = action_env(tmp_path, gh.url, {"command": "record"},
                     event={"repository": {"full_name": REPO, "default_branch": "main"}})
    env.update(GITHUB_EVENT_NAME=event_name, GITHUB_REF="refs/heads/main")
    proc = run_entrypoint(env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    path = history_file_name(load(data).gpu_name)
    written = gh.branch_file(REPO, "speedstats-data", path)
    if event_name == "pull_request":
        assert written is None and "not recorded: a pull_request event never writes" in proc.stdout
        return
    (entry,) = read_history_text(written.decode(), path).entries
    assert entry.commit == HEAD and entry.results == load(data)
    assert f"appended the run of {HEAD[:7]} to {path}" in proc.stderr


def test_automerge_guard_removes_the_label_and_says_which_job_failed(tmp_path, gh):
    env = action_env(tmp_path, gh.url, {"command": "automerge-guard", "job": "cuda-module"})
    proc = run_entrypoint(env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert gh.labels(REPO, PR) == ["bug"]
    assert [c["body"] for c in gh.comments(REPO, PR)] == [
        ("CI failed when running job: cuda-module. PR label automerge has been removed"
        f"\n\n<!-- speedstats:automerge-removed job=cuda-module head={HEAD} run=4242 -->")]


BASE_WHEEL = "oneflow-0.9.1+cu118-cp310-cp310-manylinux_2_17_x86_64.whl"


def add_base_build(gh):
    """A successful push run of build.yml on `release` whose artifact `wheelhouse` holds BASE_WHEEL."""
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr(f"wheelhouse/{BASE_WHEEL}", b"base build")
    gh.add_workflow_run(REPO, 77, "7" * 40, event="push", workflow="build.yml", branch="release")
    gh.add_artifact(REPO, 77, "wheelhouse", buf.getvalue())


def test_fetch_baseline_downloads_the_base_build_and_sets_baseline_path(tmp_path, gh):
    wheel = BASE_WHEEL
    add_base_build(gh)
    workspace = tmp_path / "workspace"  # the runner's files go beside it, not into a folder other tests share
    workspace.mkdir()
    env = action_env(workspace, gh.url, {"command": "fetch-baseline", "baseline-workflow": "build.yml",
                                         "baseline-branch": "release"})
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,127.0.0.2,localhost"
    proc = run_entrypoint(env, workspace)
    assert proc.returncode == 0, proc.stderr
    assert outputs_of(env) == {"baseline-path": f"speedstats-out/baseline/{wheel}"}
    assert (workspace / "speedstats-out" / "baseline" / wheel).read_bytes() == b"base build"


def test_automerge_guard_leaves_a_cancelled_run_alone(tmp_path, gh):
    env = action_env(tmp_path, gh.url, {"command": "automerge-guard", "status": "cancelled"})
    proc = run_entrypoint(env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert gh.labels(REPO, PR) == ["automerge", "bug"]
    assert gh.comments(REPO, PR) == []


@pytest.mark.heavy
def test_run_and_comment_with_a_real_tiny_suite_on_the_cpu(tmp_path, gh):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "speed.yml").write_text(TINY_SUITE.format(max_oneflow_ms=1e9))
    stale = workspace / "speedstats-out" / "comment.md"
    stale.parent.mkdir()
    stale.write_text("left over from an earlier job")
    env = action_env(workspace, gh.url, {"suite": "speed.yml", "device": "cpu"})
    proc = run_entrypoint(env, workspace)
    assert proc.returncode == 0, proc.stderr
    body = (workspace / "speedstats-out" / "comment.md").read_text(encoding="utf-8")
    assert re.fullmatch(TINY_BODY.format(gpu_name=re.escape(cpu_name()), mark="✔️"), body), body
    assert [c["body"] for c in gh.comments(REPO, PR)] == [
        body + f"\n\n<!-- speedstats:speed-stats head={HEAD} run=4242 -->"]
    outputs = outputs_of(env)
    # baseline-path, baseline-missing: fetch-baseline's; failed-gpus, artifact-name: report's and shard's
    assert set(action()["outputs"]) - {"baseline-path", "baseline-missing", "failed-gpus",
                                       "artifact-name"} <= set(outputs)
    assert outputs["verdict"] == "pass" and outputs["score"] == "0"
    assert outputs["results"] == "speedstats-out/results.json"
    assert outputs["comment-file"] == "speedstats-out/comment.md"
    assert json.loads((workspace / outputs["results"]).read_text())["suite"] == "tiny"
    assert outputs["comment-url"] == (f"{gh.url}/{REPO}/pull/{PR}#issuecomment-"
                                      f"{gh.comments(REPO, PR)[0]['id']}")


@pytest.mark.heavy
def test_fail_on_regression_false_reports_a_failed_verdict_without_failing(tmp_path, gh):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "speed.yml").write_text(TINY_SUITE.format(max_oneflow_ms=0.001))
    env = action_env(workspace, gh.url, {"suite": "speed.yml", "device": "cpu",
                                         "fail-on-regression": "false"})
    proc = run_entrypoint(env, workspace)
    assert proc.returncode == 0, proc.stderr
    body = (workspace / "speedstats-out" / "comment.md").read_text(encoding="utf-8")
    assert re.fullmatch(TINY_BODY.format(gpu_name=re.escape(cpu_name()), mark="❌"), body), body
    assert [c["body"] for c in gh.comments(REPO, PR)] == [
        body + f"\n\n<!-- speedstats:speed-stats head={HEAD} run=4242 -->"]
    assert (outputs_of(env)["verdict"], outputs_of(env)["score"]) == ("fail", "2")
    # What GitHub shows of it: the case's log folded in a group, an annotation for the missed
    # threshold, the verdict line and the comment in the job summary.
    log = proc.stderr.splitlines()
    (group,) = [line for line in log if line.startswith("::group::")]
    assert group == ("::group::[1/1] resnet50-bs1 (resnet50, input_shape=[1, 3, 64, 64]): 0s elapsed, "
                     "time left unknown")
    case_line = log.index("[1/1] resnet50-bs1 (resnet50, input_shape=[1, 3, 64, 64])")
    assert log.index(group) < case_line < log.index("::endgroup::")
    error = (f"::error title=speedstats resnet50-bs1::resnet50-bs1: OneFlow {oneflow_ms(body)}ms is above "
             f"0.001ms on {cpu_name()}")
    assert [line for line in log if line.startswith("::error ")] == [error]
    comment_url = outputs_of(env)["comment-url"]
    assert Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8") == (
        f"Verdict: **fail** (score 2). Posted: {comment_url}\n\n{body}\n")


def oneflow_ms(body):
    return re.search(r"OneFlow resnet50 time: (\d+\.\d)ms", body).group(1)


@pytest.mark.frameworks  # speedstats run checks its frameworks are installed before its --out
def test_fail_on_regression_false_forgives_only_a_failed_verdict(tmp_path, gh):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "a-file").write_text("not a folder")
    # --out under a file: bad input (2), refused before anything is measured, and not forgiven
    env = action_env(workspace, gh.url, {"command": "run", "profile": "smoke", "device": "cpu",
                                         "out": "a-file/out", "fail-on-regression": "false"})
    proc = run_entrypoint(env, workspace)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        "speedstats: error: a-file/out: cannot create the --out folder: a part of the path is a file")
    # GitHub answering 500 to every try: unreachable (5), not forgiven either
    gh.fail("GET", f"/repos/{REPO}/issues/{PR}/comments", status=500, times=99)
    (workspace / "body.md").write_text("Speed stats", encoding="utf-8")
    env = action_env(workspace, gh.url, {"command": "comment", "body-file": "body.md",
                                         "fail-on-regression": "false"})
    env["SPEEDSTATS_GITHUB_TIME_SCALE"] = "0"
    proc = run_entrypoint(env, workspace)
    assert proc.returncode == 5, proc.stderr
    assert gh.comments(REPO, PR) == []


# -- required-label: the verdict fails the step only on a pull request carrying the label ---------------


def test_required_label_reaches_speedstats_run(tmp_path):
    printed = planned(tmp_path, command="run", **{"required-label": "need-pass-speed-test"})
    assert printed == ("speedstats run --device cuda --out speedstats-out --required-label "
                       "need-pass-speed-test\n")


def labelled_event(*labels):
    return {"action": "synchronize", "number": PR, "repository": {"full_name": REPO},
            "pull_request": {"number": PR, "head": {"sha": HEAD}, "labels": [{"name": n} for n in labels]}}


@pytest.mark.heavy
@pytest.mark.parametrize("live_labels, event_labels, step_fails", [
    # The API's labels count, not the event's: a label added before a re-run fails the step ...
    (["bug", "need-pass-speed-test"], ["bug"], True),
    # ... and one removed since the event no longer does.
    (["bug"], ["need-pass-speed-test"], False),
])
def test_required_label_decides_whether_a_failed_verdict_fails_the_step(tmp_path, gh, live_labels,
                                                                        event_labels,
                                                                         step_fails):
    for name in live_labels:
        gh.add_label(REPO, PR, name)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "speed.yml").write_text(TINY_SUITE.format(max_oneflow_ms=0.001))
    env = action_env(workspace, gh.url, {"suite": "speed.yml", "device": "cpu",
                                         "required-label": "need-pass-speed-test"},
                     event=labelled_event(*event_labels))
    proc = run_entrypoint(env, workspace)
    assert proc.returncode == (1 if step_fails else 0), proc.stderr
    body = (workspace / "speedstats-out" / "comment.md").read_text(encoding="utf-8")
    assert re.fullmatch(TINY_BODY.format(gpu_name=re.escape(cpu_name()), mark="❌"), body), body
    assert [c["body"] for c in gh.comments(REPO, PR)] == [
        body + f"\n\n<!-- speedstats:speed-stats head={HEAD} run=4242 -->"]
    assert (outputs_of(env)["verdict"], outputs_of(env)["score"]) == ("fail", "2")
    assert gh.requests_matching("GET", f"/repos/{REPO}/issues/{PR}/labels")
    if not step_fails:
        assert "do not include 'need-pass-speed-test' (required-label): the step does not fail" in proc.stderr


# -- the build cache ---------------------------------------------------------------------------------


def test_the_build_cache_is_in_the_checkouts_git_folder_unless_cache_dir_says(tmp_path):
    assert "--cache-dir" not in planned(tmp_path)  # no checkout: speedstats' own default
    (tmp_path / "workspace" / ".git").mkdir()
    assert " --cache-dir .git/speedstats-cache" in planned(tmp_path)
    assert " --cache-dir ../cache" in planned(tmp_path, **{"cache-dir": "../cache"})


@pytest.mark.venv
def test_a_build_installed_by_one_job_comes_from_the_cache_in_the_next(tmp_path):
    """Two jobs on one runner: the second finds the build the first installed, though actions/checkout
    deleted every untracked file of the workspace between them."""

    workspace = tmp_path / "workspace"
    (workspace / ".git").mkdir(parents=True)
    if os.geteuid() == 0:  # a runner whose user is not root, as the container is
        for path in (workspace, workspace / ".git"):
            os.chown(path, *RUNNER_USER)
    (workspace / "speed.yml").write_text(TINY_SUITE.format(max_oneflow_ms=1e9))
    inputs = {"command": "run", "suite": "speed.yml", "device": "cpu", "only": "oneflow",
              "oneflow": stand_in_oneflow(tmp_path / "wheels"),
              "flowvision": stand_in_flowvision(tmp_path / "wheels")}
    logs = []
    for job in range(2):
        env = action_env(workspace, inputs=inputs)
        proc = run_entrypoint(env, workspace)
        logs.append(proc.stderr)
        # `speedstats run` writes the job summary itself, once: the verdict line, then the comment.
        summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
        assert summary.count("Verdict: **") == job + 1 and summary.endswith(
            (workspace / "speedstats-out" / "comment.md").read_text(encoding="utf-8") + "\n")
        if os.geteuid() == 0:  # the cache in .git and the out folder are the runner's user's
            assert root_owned(workspace) == ["speed.yml"], proc.stderr  # the test wrote that one
        for path in workspace.iterdir():  # what `git clean -ffdx` leaves of a workspace without tracked files
            if path.name != ".git":
                shutil.rmtree(path) if path.is_dir() else path.unlink()
        (workspace / "speed.yml").write_text(TINY_SUITE.format(max_oneflow_ms=1e9))
    first, second = ([line for line in log.splitlines() if line.startswith("build oneflow ")] for log in logs)
    assert any(line.endswith("installing with pip…") for line in first), logs[0]
    assert not any("installing" in line for line in second), logs[1]
    (cached,) = [line for line in second if ": from the cache (" in line]
    # In the workspace's .git, named in full: the workers, in folders of their own, are given it.
    folder = re.escape(str(workspace.resolve()))
    assert re.search(r": from the cache \([0-9a-f]{16}\), oneflow 0\.0\.1\+fake \(git abc1234\).* in "
                     + folder + r"/\.git/speedstats-cache/builds/oneflow-[0-9a-f]{16}$", cached), cached


# -- a cancelled step -------------------------------------------------------------------------------------


def test_a_sigterm_to_the_entrypoint_reaches_the_command_which_exits_130(tmp_path):
    """In the container the entrypoint is PID 1, which gets no default action for SIGTERM: it passes
    the signal on to the command running, and ends with the command's status."""
    import signal
    import time


    workspace = tmp_path / "workspace"
    workspace.mkdir()
    env = action_env(workspace, inputs={"command": "comment", "body-file": "-"})
    proc = subprocess.Popen([sys.executable, str(ENTRYPOINT)], cwd=workspace, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    deadline = time.monotonic() + 60
    while True:  # until the command waits for its body on stdin
        pids = children.read_text().split() if proc.poll() is None else []
        if pids and reading_stdin(pids[0]):
            break
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)  # stdin stays open: its end must not end the command first
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.splitlines()[-1] == "speedstats: interrupted" and "Traceback" not in err


# -- what the container wrote belongs to the runner's user --------------------------------------------------

RUNNER_USER = (1000, 1000)
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving files to another user needs root")


def root_owned(folder):
    """What under `folder` (links themselves, never followed) root's user or group owns."""
    found = []
    for dirpath, dirs, files in os.walk(folder):
        for name in dirs + files:
            info = os.lstat(Path(dirpath, name))
            if 0 in (info.st_uid, info.st_gid):
                found.append(str(Path(dirpath, name).relative_to(folder)))
    return sorted(found)


def runners_workspace(tmp_path):
    """A workspace owned by the runner's user (not root), beside files of root's outside it."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    os.chown(workspace, *RUNNER_USER)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "roots-file").write_text("root's")
    return workspace, outside


@needs_root
def test_what_the_container_wrote_in_the_workspace_belongs_to_the_workspaces_owner(tmp_path, gh):
    """The container runs as root; a runner's own user must be able to delete what it wrote (the next
    job's actions/checkout does). Links a pull request planted are not followed."""
    add_base_build(gh)
    workspace, outside = runners_workspace(tmp_path)
    out = workspace / "speedstats-out"
    out.mkdir()  # a pull request's code ran before: its links in the out folder
    (out / "to-a-folder").symlink_to(outside)
    (out / "to-a-file").symlink_to(outside / "roots-file")
    os.link(outside / "roots-file", out / "second-name")
    env = action_env(workspace, gh.url, {"command": "fetch-baseline", "baseline-workflow": "build.yml",
                                         "baseline-branch": "release"})
    proc = run_entrypoint(env, workspace)
    assert proc.returncode == 0, proc.stderr
    assert (out / "baseline" / BASE_WHEEL).read_bytes() == b"base build"
    # A file with a second name is left alone: the other name may lie outside the workspace.
    assert root_owned(workspace) == ["speedstats-out/second-name"]
    assert {(p.name, p.lstat().st_uid) for p in out.iterdir()} == {
        ("baseline", 1000), ("to-a-folder", 1000), ("to-a-file", 1000), ("second-name", 0)}
    assert root_owned(outside) == ["roots-file"] and os.stat(outside).st_uid == 0


@needs_root
def test_a_cancelled_step_gives_back_what_it_wrote_too(tmp_path, gh):
    """SIGTERM while fetch-baseline downloads (GitHub's storage dripping a byte at a time): the command
    exits 130, and the folders it made, a nested out folder's parents included, are the runner's user's."""
    import signal
    import time

    add_base_build(gh)
    gh.drip("GET", "/_blobs/*", interval_s=0.5)
    workspace, outside = runners_workspace(tmp_path)
    env = action_env(workspace, gh.url, {"command": "fetch-baseline", "baseline-workflow": "build.yml",
                                         "baseline-branch": "release", "out": "reports/speed"})
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,127.0.0.2,localhost"
    proc = subprocess.Popen([sys.executable, str(ENTRYPOINT)], cwd=workspace, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not gh.storage_requests:  # the download has begun, in a folder it made
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    assert root_owned(workspace) == ["reports", "reports/speed", "reports/speed/baseline"] + [
        f"reports/speed/baseline/{p.name}" for p in (workspace / "reports/speed/baseline").iterdir()]
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert (workspace / "reports" / "speed" / "baseline").is_dir()
    assert root_owned(workspace) == []
    assert root_owned(outside) == ["roots-file"]
