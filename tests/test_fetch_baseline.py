"""`speedstats fetch-baseline` against the loopback GitHub: runs list, artifacts, redirect to storage."""

import io
import json
import zipfile
from pathlib import Path

import pytest

from fakegithub import actions_env, run_speedstats
from speedstats.actions_io import read_outputs

REPO = "Oneflow-Inc/oneflow"
TOKEN = "ghs_BaselineT0kenNeverToBePrinted000000007"
WHEEL = "oneflow-0.9.1.dev20240101+cu118-cp310-cp310-manylinux_2_17_x86_64.whl"
WHEEL_BYTES = b"PK\x03\x04 not really a wheel, the command does not open it"


def wheelhouse(members):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buf.getvalue()


@pytest.fixture
def gh(fake_github):
    return fake_github(TOKEN)


def pr_event(base="master"):
    return {"repository": {"full_name": REPO},
            "pull_request": {"number": 42, "head": {"sha": "a" * 40}, "base": {"ref": base, "sha": "b" * 40}}}


def fetch(gh, tmp_path, *extra, event=None):
    env = actions_env(gh, TOKEN, REPO, tmp_path, event_name="pull_request", event=event or pr_event(),
                      GITHUB_OUTPUT=tmp_path / "outputs")
    return run_speedstats(["fetch-baseline", "--dest", tmp_path / "baseline", *extra], env)


def add_build(gh, run_id, branch="master", conclusion="success", event="push", artifacts=None):
    gh.add_workflow_run(REPO, run_id, f"{run_id:03d}" + "c" * 37, conclusion=conclusion, event=event,
                        workflow="build.yml",
                        branch=branch, name="Build")
    for name, data in (artifacts or {}).items():
        gh.add_artifact(REPO, run_id, name, data)


def test_the_newest_successful_base_build_is_downloaded_from_storage_without_the_token(gh, tmp_path):
    add_build(gh, 100, artifacts={"wheelhouse": wheelhouse({"old.whl": b"old"})})
    add_build(gh, 101, artifacts={"wheelhouse": wheelhouse({f"wheelhouse/{WHEEL}": WHEEL_BYTES,
                                                            "wheelhouse/build.log": b"log"})})
    add_build(gh, 102, conclusion="failure", artifacts={"wheelhouse": wheelhouse({"broken.whl": b"x"})})
    add_build(gh, 103, branch="feature", artifacts={"wheelhouse": wheelhouse({"feature.whl": b"x"})})
    add_build(gh, 104, event="pull_request", artifacts={"wheelhouse": wheelhouse({"pr.whl": b"x"})})
    for i in range(105, 140):  # newer successful runs on other branches, which the branch filter leaves out
        add_build(gh, i, branch=f"b{i}")
    for i in range(120):  # and run 101 has more artifacts than one page of them
        gh.add_artifact(REPO, 101, f"logs-{i:03d}", b"")
    (tmp_path / "baseline").mkdir()
    (tmp_path / "baseline" / "stale-0.1.whl").write_bytes(b"from an earlier job")

    result = fetch(gh, tmp_path, "--workflow", "build.yml")

    assert result.rc == 0, result.err
    wheel = tmp_path / "baseline" / WHEEL
    assert result.out == f"{wheel}\n"
    assert read_outputs(tmp_path / "outputs") == {"baseline-path": str(wheel)}
    assert sorted(p.name for p in (tmp_path / "baseline").iterdir()) == [WHEEL]
    assert wheel.read_bytes() == WHEEL_BYTES
    assert ("baseline from run 101 (commit 101ccccccccc) of workflow 'build.yml' on branch 'master'"
            in result.err)
    (runs_query,) = [r.query for r in gh.requests_matching("GET",
                                                           f"/repos/{REPO}/actions/workflows/build.yml/runs")]
    assert runs_query["branch"] == ["master"] and runs_query["status"] == ["success"]
    assert runs_query["event"] == ["push"]
    assert len(gh.requests_matching("GET", f"/repos/{REPO}/actions/runs/101/artifacts")) == 2  # two pages
    (blob,) = gh.storage_requests
    assert not [name for name in blob.headers if name.lower() == "authorization"]
    assert TOKEN not in json.dumps(blob.headers)


def test_several_wheels_give_their_folder_and_the_workflow_may_be_named_by_id(gh, tmp_path):
    add_build(gh, 200, branch="release", artifacts={
        "wheels": wheelhouse({"a/oneflow-0.9.1-cp310-none-any.whl": b"1",
                              "b/flowvision-0.2.2-py3-none-any.whl": b"2"})})
    workflow_id = gh.workflow_id("build.yml")
    result = fetch(gh, tmp_path, "--workflow", workflow_id, "--artifact", "wheels", "--branch", "release")
    assert result.rc == 0, result.err
    assert result.out == f"{tmp_path / 'baseline'}\n"
    assert sorted(p.name for p in (tmp_path / "baseline").iterdir()) == [
        "flowvision-0.2.2-py3-none-any.whl", "oneflow-0.9.1-cp310-none-any.whl"]


def test_no_successful_run_is_a_one_line_error(gh, tmp_path):
    add_build(gh, 300, conclusion="failure", artifacts={"wheelhouse": wheelhouse({WHEEL: b"x"})})
    result = fetch(gh, tmp_path, "--workflow", "build.yml")
    assert (result.rc, result.out) == (2, "")
    assert result.err == ("speedstats: error: --workflow: no successful run of workflow 'build.yml' on "
                          "branch "
                          f"'master' of {REPO} (push events)\n")
    assert not (tmp_path / "outputs").exists() and not (tmp_path / "baseline").exists()
    assert gh.storage_requests == []


def test_a_missing_or_expired_artifact_or_one_without_wheels_is_a_one_line_error(gh, tmp_path):
    add_build(gh, 400, artifacts={"logs": b"", "notes": wheelhouse({"README.txt": b"no wheel here"})})
    missing = fetch(gh, tmp_path, "--workflow", "build.yml")
    assert (missing.rc, missing.err) == (2, (
        f"speedstats: error: --artifact: run 400 (workflow 'build.yml' on branch 'master' of {REPO} (push "
        "events)) has no artifact named 'wheelhouse' (its artifacts: logs, notes)\n"))
    no_wheel = fetch(gh, tmp_path, "--workflow", "build.yml", "--artifact", "notes")
    assert (no_wheel.rc, no_wheel.err) == (
        2, "speedstats: error: artifact 'notes' of run 400: holds no .whl file (it has: README.txt)\n")
    gh.add_artifact(REPO, 400, "wheelhouse", wheelhouse({WHEEL: b"x"}), expired=True)
    expired = fetch(gh, tmp_path, "--workflow", "build.yml")
    assert expired.rc == 2
    assert expired.err == ("speedstats: error: artifact 'wheelhouse' of run 400: expired; GitHub no longer "
                           "has it "
                           "(rerun the build on 'master')\n")
    assert not (tmp_path / "outputs").exists()


def test_an_unknown_workflow_and_no_base_branch_are_clear(gh, tmp_path):
    add_build(gh, 500)
    unknown = fetch(gh, tmp_path, "--workflow", "nope.yml")
    assert unknown.rc == 2 and "not found (404)" in unknown.err and "nope.yml" in unknown.err
    push = {"repository": {"full_name": REPO}}
    no_branch = fetch(gh, tmp_path, "--workflow", "build.yml", event=push)
    assert (no_branch.rc, no_branch.err) == (
        2, "speedstats: error: --branch: no branch (give --branch NAME, or run from a pull_request event)\n")


def test_only_wheels_leave_the_archive_whatever_their_paths(gh, tmp_path):
    evil = {"../../escape.whl": b"up", "/abs/root.whl": b"abs", "dir/../x.sh": b"#!/bin/sh"}
    add_build(gh, 600, artifacts={"wheelhouse": wheelhouse(evil)})
    result = fetch(gh, tmp_path, "--workflow", "build.yml")
    assert result.rc == 0, result.err
    assert sorted(p.name for p in (tmp_path / "baseline").iterdir()) == ["escape.whl", "root.whl"]
    assert not (tmp_path.parent / "escape.whl").exists() and not Path("/abs/root.whl").exists()



def test_the_wheels_download_has_its_own_deadline_beyond_the_commands(gh, tmp_path):
    archive = wheelhouse({f"wheelhouse/{WHEEL}": WHEEL_BYTES})
    add_build(gh, 101)
    blob = gh.add_artifact(REPO, 101, "wheelhouse", archive)
    gh.drip("GET", f"/_blobs/{blob}", interval_s=2.0 / (len(archive) + 200))  # about 2 s, headers included
    result = fetch(gh, tmp_path, "--workflow", "build.yml", "--github-deadline", "1")
    assert result.rc == 0, result.err
    assert (tmp_path / "baseline" / WHEEL).read_bytes() == WHEEL_BYTES


NO_RUN = f"no successful run of workflow 'build.yml' on branch 'master' of {REPO} (push events) yet"
EXPIRED = ("the artifact 'wheelhouse' of the newest successful run of workflow 'build.yml' on branch "
           f"'master' of {REPO} (push events) (run 700) has expired")


@pytest.mark.parametrize("base, reason", [
    ("none", NO_RUN),
    ("failed", NO_RUN),  # a base branch whose builds all failed has no base build either
    ("expired", EXPIRED),  # GitHub lists the artifact as expired
    ("gone", EXPIRED),  # listed, then expired before its download: 410
])
def test_with_optional_no_base_build_is_a_warning_and_says_why(gh, tmp_path, base, reason):
    # The pull request that adds the workflow: its own run is the workflow's only one.
    add_build(gh, 699, branch="add-speed-stats", event="pull_request",
              artifacts={"wheelhouse": wheelhouse({WHEEL: b"x"})})
    if base == "failed":
        add_build(gh, 700, conclusion="failure", artifacts={"wheelhouse": wheelhouse({WHEEL: b"x"})})
    elif base in ("expired", "gone"):
        add_build(gh, 700)
        gh.add_artifact(REPO, 700, "wheelhouse", wheelhouse({WHEEL: b"x"}), expired=base == "expired")
        if base == "gone":
            gh.fail("GET", f"/repos/{REPO}/actions/artifacts/*/zip", status=410,
                    message="Artifact has expired")
    result = fetch(gh, tmp_path, "--workflow", "build.yml", "--optional")
    assert result.rc == 0, result.err
    assert result.out == ("::warning::speedstats: no base build, measuring without a baseline: "
                          f"{reason}\n")
    assert read_outputs(tmp_path / "outputs") == {"baseline-path": "", "baseline-missing": reason}
    assert gh.storage_requests == []
    assert not list(tmp_path.glob("baseline/*"))


def test_without_optional_an_artifact_gone_at_download_is_a_one_line_error(gh, tmp_path):
    add_build(gh, 700, artifacts={"wheelhouse": wheelhouse({WHEEL: b"x"})})
    gh.fail("GET", f"/repos/{REPO}/actions/artifacts/*/zip", status=410, message="Artifact has expired")
    result = fetch(gh, tmp_path, "--workflow", "build.yml")
    assert result.rc == 2
    assert result.err.startswith("speedstats: error: download artifact 'wheelhouse' of run 700: GitHub "
                                 "answered 410 Artifact has expired")
    assert not (tmp_path / "outputs").exists()


def test_optional_still_fails_on_an_artifact_that_is_not_there(gh, tmp_path):
    """A wrong artifact name is a mistake in the workflow, not a base branch without a build."""
    add_build(gh, 700, artifacts={"logs": b""})
    result = fetch(gh, tmp_path, "--workflow", "build.yml", "--optional")
    assert result.rc == 2 and "has no artifact named 'wheelhouse' (its artifacts: logs)" in result.err
    assert not (tmp_path / "outputs").exists()


# -- nothing half written ------------------------------------------------------------------------------------

GOOD = "oneflow-0.9.1-cp310-none-any.whl"
SECOND = "flowvision-0.2.2-py3-none-any.whl"


def two_wheels(method=zipfile.ZIP_STORED):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as archive:
        archive.writestr(GOOD, b"the first wheel" * 1000)
        archive.writestr(SECOND, bytes(range(256)) * 400)
    return bytearray(buf.getvalue())


def with_stale_wheel(tmp_path):
    dest = tmp_path / "baseline"
    dest.mkdir()
    (dest / "stale-0.1.whl").write_bytes(b"from an earlier job")
    return dest


def test_a_wheel_that_lies_about_its_size_leaves_the_old_wheels_and_nothing_else(gh, tmp_path):
    data = two_wheels()
    central = [i for i in range(len(data)) if data[i:i + 4] == b"PK\x01\x02"][1]  # the second's entry
    size = int.from_bytes(data[central + 24:central + 28], "little")
    data[central + 24:central + 28] = (size + 10).to_bytes(4, "little")  # uncompressed size: 10 too many
    add_build(gh, 700, artifacts={"wheelhouse": bytes(data)})
    dest = with_stale_wheel(tmp_path)
    result = fetch(gh, tmp_path, "--workflow", "build.yml")
    assert result.rc == 2 and result.err.endswith(f"{SECOND} is not the size its header says\n")
    assert sorted(p.name for p in dest.iterdir()) == ["stale-0.1.whl"]


def test_a_corrupt_deflate_stream_is_one_line_and_leaves_the_old_wheels_and_nothing_else(gh, tmp_path):
    data = two_wheels(zipfile.ZIP_DEFLATED)
    info = zipfile.ZipFile(io.BytesIO(bytes(data))).getinfo(SECOND)
    start = info.header_offset + 30 + len(SECOND.encode()) + len(info.extra)
    data[start:start + 40] = b"\xff" * 40
    add_build(gh, 701, artifacts={"wheelhouse": bytes(data)})
    dest = with_stale_wheel(tmp_path)
    result = fetch(gh, tmp_path, "--workflow", "build.yml")
    assert result.rc == 2 and "artifact 'wheelhouse'" in result.err and ": a corrupt archive: " in result.err
    assert result.err.count("\n") == 1
    assert sorted(p.name for p in dest.iterdir()) == ["stale-0.1.whl"]


def test_a_dest_that_is_a_file_or_lies_below_one_is_one_line(gh, tmp_path):
    add_build(gh, 702, artifacts={"wheelhouse": wheelhouse({WHEEL: WHEEL_BYTES})})
    (tmp_path / "baseline").write_text("a file")
    result = fetch(gh, tmp_path, "--workflow", "build.yml")
    assert result.rc == 2
    assert result.err == f"speedstats: error: {tmp_path / 'baseline'}: --dest folder is not a folder\n"
    below = tmp_path / "baseline" / "x"
    env = actions_env(gh, TOKEN, REPO, tmp_path, event_name="pull_request", event=pr_event())
    result = run_speedstats(["fetch-baseline", "--workflow", "build.yml", "--dest", below], env)
    assert result.rc == 2
    assert result.err == (f"speedstats: error: {below}: cannot create the --dest folder: "
                          "a part of the path is a file\n")


def test_what_a_killed_fetch_left_is_cleared_by_the_next(gh, tmp_path):
    add_build(gh, 703, artifacts={"wheelhouse": wheelhouse({WHEEL: WHEEL_BYTES})})
    dest = tmp_path / "baseline"
    (dest / ".baseline-k1ll3d").mkdir(parents=True)
    (dest / ".baseline-k1ll3d" / GOOD).write_bytes(b"half a wheel")
    (dest / ".baseline-x7d2q9.zip").write_bytes(b"half a download")
    result = fetch(gh, tmp_path, "--workflow", "build.yml")
    assert result.rc == 0, result.err
    assert sorted(p.name for p in dest.iterdir()) == [WHEEL]
