"""The results bundle: written by the run, read back (from a folder or an artifact zip) strictly."""

import io
import json
import zipfile

import pytest

from speedstats.bundle import (
    SCHEMA,
    Bundle,
    identity_from_env,
    read_bundle,
    read_bundle_zip,
    write_bundle,
)
from speedstats.errors import UserError

SHA = "ab" * 20
RESULTS = json.dumps({"schema": "speedstats/results/v1", "suite": "smoke", "device": "cpu", "gpu_name": "cpu",
                      "cases": []}) + "\n"
BODY = "<details>\n <summary>Speed stats:</summary>\n\n ``` \nGPU Name: cpu \n\n x\n ``` \n\n</details>"


def zip_of(folder, prefix=""):
    """The folder as actions/upload-artifact zips it (files relative to the uploaded folder)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.iterdir()):
            archive.write(path, prefix + path.name)
    return buf.getvalue()


def test_a_written_bundle_reads_back_whole(tmp_path):
    manifest = write_bundle(tmp_path / "b", RESULTS, BODY, 7, SHA, "123", "o/r")
    assert json.loads(manifest.read_text()) == {
        "schema": SCHEMA, "repo": "o/r", "pr_number": 7, "head_sha": SHA, "run_id": 123,
        "results": "results.json", "body": "comment.md"}
    assert (tmp_path / "b" / "comment.md").read_bytes() == BODY.encode()
    expected = Bundle(repo="o/r", pr_number=7, head_sha=SHA, run_id=123, results_json=RESULTS, body=BODY)
    assert read_bundle(tmp_path / "b") == expected
    assert read_bundle_zip(zip_of(tmp_path / "b")) == expected
    assert read_bundle_zip(zip_of(tmp_path / "b", prefix="bundle/")) == expected  # one top-level folder


def test_without_a_body_the_poster_renders_and_a_stale_body_is_removed(tmp_path):
    write_bundle(tmp_path, RESULTS, BODY, 7, SHA, 1, "o/r")
    write_bundle(tmp_path, RESULTS, None, None, SHA, 2, "o/r")  # a push run: no pull request
    assert not (tmp_path / "comment.md").exists()
    bundle = read_bundle(tmp_path)
    assert (bundle.body, bundle.pr_number, bundle.run_id) == (None, None, 2)
    assert bundle.results.suite == "smoke"


@pytest.mark.parametrize("args, message", [
    ((RESULTS, BODY, 7, "abc", 1, "o/r"), "head_sha: must be a full commit sha"),
    ((RESULTS, BODY, 0, SHA, 1, "o/r"), "pr_number: must be a positive integer, got 0"),
    ((RESULTS, BODY, 7, SHA, None, "o/r"), "run_id: must be a positive integer, got None"),
    ((RESULTS, BODY, 7, SHA, 1, "o"), "repo: must be OWNER/NAME"),
    (("{", BODY, 7, SHA, 1, "o/r"), "results.json: not valid JSON"),
    ((RESULTS, "", 7, SHA, 1, "o/r"), "body must be a non-empty string or None"),
])
def test_write_bundle_refuses_bad_fields(tmp_path, args, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace("[", r"\[")):
        write_bundle(tmp_path / "b", *args)
    assert not (tmp_path / "b" / "bundle.json").exists()


def archive(files):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def manifest(**changes):
    data = {"schema": SCHEMA, "repo": "o/r", "pr_number": 7, "head_sha": SHA, "run_id": 5,
            "results": "results.json", "body": "comment.md"}
    data.update(changes)
    return json.dumps(data)


@pytest.mark.parametrize("files, message", [
    ({"results.json": RESULTS}, "artifact: no bundle.json (not a speedstats bundle)"),
    ({"bundle.json": "[1]", "results.json": RESULTS}, "bundle.json must be a JSON object"),
    ({"bundle.json": manifest(schema="v0"), "results.json": RESULTS}, "field 'schema' must be"),
    ({"bundle.json": manifest(extra=1), "results.json": RESULTS}, "unknown field 'extra'"),
    ({"bundle.json": manifest(body="../../etc/passwd"), "results.json": RESULTS}, "files must be"),
    ({"bundle.json": manifest(pr_number="7; rm"), "results.json": RESULTS}, "pr_number: must be a positive"),
    ({"bundle.json": manifest(), "results.json": RESULTS}, "names comment.md, which is missing"),
    ({"bundle.json": manifest(), "comment.md": BODY}, "artifact: no results.json"),
    ({"bundle.json": manifest(), "results.json": "{}", "comment.md": BODY}, "missing field 'suite'"),
    ({"bundle.json": manifest(), "results.json": RESULTS, "comment.md": b"\xff\xfe"},
     "comment.md is not UTF-8"),
    ({"bundle.json": manifest(), "results.json": RESULTS, "comment.md": " \n"}, "comment.md is empty"),
])
def test_a_downloaded_bundle_is_read_strictly(files, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_bundle_zip(archive(files))


def test_not_a_zip_and_oversized_members_are_refused(monkeypatch):
    with pytest.raises(UserError, match="artifact: not a zip archive"):
        read_bundle_zip(b"PK\x03\x04 not really")
    import speedstats.bundle as bundle_module

    monkeypatch.setattr(bundle_module, "MAX_FILE_BYTES", 1000)
    big = archive({"bundle.json": manifest(), "results.json": RESULTS, "comment.md": "x" * 5000})
    with pytest.raises(UserError, match="comment.md is larger than 1000 bytes"):
        read_bundle_zip(big)


def test_identity_comes_from_the_job_environment(tmp_path):
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 12, "head": {"sha": SHA}},
                                 "repository": {"full_name": "o/r"}}))
    env = {"GITHUB_EVENT_PATH": str(event), "GITHUB_RUN_ID": "987", "GITHUB_REPOSITORY": "o/r",
           "GITHUB_SHA": "f" * 40}
    identity = identity_from_env(env)
    assert identity == (12, SHA, 987, "o/r")
    write_bundle(tmp_path / "b", RESULTS, BODY, *identity)
    assert read_bundle(tmp_path / "b").pr_number == 12
    push = identity_from_env({"GITHUB_RUN_ID": "5", "GITHUB_REPOSITORY": "o/r", "GITHUB_SHA": "f" * 40})
    assert push == (None, "f" * 40, 5, "o/r")
