"""The release: the licence, one version and one home stated alike everywhere, the action on the
prebuilt image of its version, and the release workflow that builds it. scripts/release.py runs as a
process, as the release workflow and a fork's maintainer run it."""

import base64
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from actions_runner import action
from helpers import dockerfile_instructions, project_home, pyproject, release
from speedstats import __version__

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "release.py"
RELEASE_WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"


def run_script(*args, root=ROOT):
    return subprocess.run([sys.executable, str(Path(root) / "scripts" / "release.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=60, check=False)


def changelog_versions(text):
    return re.findall(r"^## (\S+)$", text, re.MULTILINE)


# -- the licence and the package's metadata -----------------------------------------------------------


def test_the_licence_is_the_apache_2_text_and_the_package_says_so():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.lstrip().startswith("Apache License\n                           Version 2.0, January 2004")
    assert "END OF TERMS AND CONDITIONS" in text and "9. Accepting Warranty or Additional Liability." in text
    project = pyproject()
    assert (project["license"], project["license-files"]) == ("Apache-2.0", ["LICENSE"])
    assert set(project["urls"]) == {"Homepage", "Repository", "Changelog", "Issues"}
    assert all(url.startswith(f"https://github.com/{project_home()}") for url in project["urls"].values())
    # setuptools refuses a licence classifier beside an SPDX licence expression
    assert not [c for c in project["classifiers"] if c.startswith("License ::")]
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    labels = dict(re.findall(r'(org\.opencontainers\.image\.\w+)="([^"]*)"', dockerfile))
    assert labels["org.opencontainers.image.licenses"] == project["license"]


# -- one version ---------------------------------------------------------------------------------------


def test_one_version_in_the_package_the_action_and_the_changelog():
    version = pyproject()["version"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", version)
    assert __version__ == version
    assert action()["runs"]["image"].rsplit(":", 1)[1] == version
    versions = changelog_versions((ROOT / "CHANGELOG.md").read_text(encoding="utf-8"))
    assert versions[0] == version and "0.1.0" in versions
    assert len(set(versions)) == len(versions)


def test_the_action_runs_the_prebuilt_image_of_its_version_and_the_dockerfile_builds_it():
    assert action()["runs"] == {"using": "docker",
                                "image": f"docker://ghcr.io/{project_home().lower()}:{__version__}"}
    assert (ROOT / "Dockerfile").is_file()


def test_the_dockerfile_takes_a_package_index_mirror_and_defaults_to_pypi():
    instructions = dockerfile_instructions((ROOT / "Dockerfile").read_text())
    keywords = [keyword for keyword, _ in instructions]
    assert ("ARG", "PIP_INDEX_URL=") in instructions
    first_pip = next(i for i, (keyword, argument) in enumerate(instructions)
                     if keyword == "RUN" and "pip install" in argument)
    assert keywords.index("ARG") < first_pip  # pip sees it in the environment of every install
    runner = (ROOT / "docs" / "runner.md").read_text(encoding="utf-8")
    assert "docker build --build-arg PIP_INDEX_URL=" in runner


# -- one home ------------------------------------------------------------------------------------------

# Where a file names a repository that hosts speedstats: `uses:`, a GitHub URL, the image, zizmor's policy.
NAMED_HOME = re.compile(r'(?:uses:\s*|github\.com/|ghcr\.io/|^\s*")([\w.-]+/[\w.-]+?)(?=[@:"/\s)`]|$)',
                        re.MULTILINE)


def homes_named(root):
    """{file: set of OWNER/REPO named} over the files scripts/release.py rewrites."""
    found = {}
    for path in release.home_files(root):
        names = {name for name in NAMED_HOME.findall(path.read_text(encoding="utf-8"))
                 if name.lower().endswith("/speedstats") or name.lower() == project_home(root).lower()}
        found[str(path.relative_to(root))] = names
    return found


def assert_one_home(root, home):
    named = homes_named(root)
    for name, homes in named.items():
        for found in homes:
            # The image's name is the home in lower case, as the registry wants it.
            assert found == home or found == home.lower(), f"{name} names {found}, not {home}"
    examples = [f"examples/workflows/{p.name}" for p in (Path(root) / "examples" / "workflows").glob("*.yml")]
    for name in ("README.md", "action.yml", "Dockerfile", "pyproject.toml", ".github/zizmor.yml", *examples):
        assert named[name], f"{name} does not name the home {home}"
    major = "v" + pyproject(root)["version"].split(".")[0]
    for name in ("README.md", *[n for n in named if n.startswith("examples/")]):
        uses = re.findall(r"uses:\s*(\S+)", (Path(root) / name).read_text(encoding="utf-8"))
        ours = [u for u in uses if u.split("@")[0] == home]
        assert all(u == f"{home}@{major}" for u in ours), (name, ours)


def test_every_file_names_the_one_home_and_the_examples_its_major_tag():
    assert_one_home(ROOT, project_home())
    assert not re.search(r"your-org|OWNER/speedstats", "".join(
        p.read_text(encoding="utf-8") for p in release.home_files(ROOT)), re.IGNORECASE)


def copy_of_the_release_files(tmp_path):
    root = tmp_path / "checkout"
    package_init = ROOT / "src" / "speedstats" / "__init__.py"
    for path in [*release.home_files(ROOT), SCRIPT, ROOT / "CHANGELOG.md", package_init]:
        target = root / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    return root


def test_set_home_rewrites_every_copy_for_a_fork(tmp_path):
    root = copy_of_the_release_files(tmp_path)
    old = project_home()
    proc = run_script("set-home", "Someone/bench-fork", root=root)
    assert (proc.returncode, proc.stderr) == (0, "")
    changed = set(proc.stdout.split())
    assert {"README.md", "action.yml", "Dockerfile", "pyproject.toml", ".github/zizmor.yml",
            "examples/workflows/speedstats-pull-request.yml"} <= changed
    assert project_home(root) == "Someone/bench-fork"
    assert_one_home(root, "Someone/bench-fork")
    text = "".join(p.read_text(encoding="utf-8") for p in release.home_files(root))
    assert old not in text and old.lower() not in text
    assert f"image: docker://ghcr.io/someone/bench-fork:{__version__}\n" in (root / "action.yml").read_text()
    # The fork's release then checks against its own repository.
    proc = run_script("check", f"v{__version__}", "--repository", "Someone/bench-fork", root=root)
    assert (proc.returncode, proc.stderr) == (0, "")


def test_set_home_refuses_what_is_not_owner_slash_repo_and_changes_nothing(tmp_path):
    root = copy_of_the_release_files(tmp_path)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    proc = run_script("set-home", "not-a-repository", root=root)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == "release: error: home 'not-a-repository': not OWNER/REPO\n"
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


# -- the release check, as the release workflow runs it -----------------------------------------------


def test_the_check_passes_the_versions_tag_and_writes_its_changelog_entry(tmp_path):
    notes = tmp_path / "notes.md"
    proc = run_script("check", f"v{__version__}", "--repository", project_home(), "--notes", notes)
    assert (proc.returncode, proc.stderr) == (0, "")
    major = __version__.split(".")[0]
    assert proc.stdout == (f"version={__version__}\nmajor=v{major}\n"
                           f"image=ghcr.io/{project_home().lower()}\n")
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    entry = changelog.split(f"## {__version__}\n", 1)[1].split("\n## ", 1)[0]
    assert notes.read_text(encoding="utf-8") == entry.strip() + "\n"


def test_the_check_refuses_a_tag_or_repository_that_disagrees_in_one_line(tmp_path):
    notes = tmp_path / "notes.md"
    cases = {
        ("v9.9.9",): f"pyproject.toml: version {__version__}, but the tag is v9.9.9",
        ("v0.2",): "tag 'v0.2': not a release tag vX.Y.Z",
        (f"v{__version__}", "--repository", "someone/fork"):
            f"action.yml: image ghcr.io/{project_home().lower()}, but this repository's is "
            "ghcr.io/someone/fork (scripts/release.py set-home someone/fork)",
    }
    for args, message in cases.items():
        proc = run_script("check", *args, "--notes", notes)
        assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", f"release: error: {message}\n"), args
        assert not notes.exists()


def test_the_check_names_the_file_whose_version_disagrees(tmp_path):
    root = copy_of_the_release_files(tmp_path)
    changelog = root / "CHANGELOG.md"
    changelog.write_text(changelog.read_text().replace(f"## {__version__}\n", "## 9.0.0\n", 1))
    proc = run_script("check", f"v{__version__}", root=root)
    message = f"release: error: CHANGELOG.md: version 9.0.0, but the tag is v{__version__}\n"
    assert (proc.returncode, proc.stderr) == (2, message)


# -- the release workflow -------------------------------------------------------------------------------


def load_release_workflow():
    data = yaml.safe_load(RELEASE_WORKFLOW.read_text(encoding="utf-8"))
    data["on"] = data.pop(True)
    return data


def test_the_release_workflow_runs_on_version_tags_with_the_least_permissions():
    workflow = load_release_workflow()
    assert workflow["on"] == {"push": {"tags": ["v[0-9]+.[0-9]+.[0-9]+"]}}
    assert workflow["permissions"] == {}
    jobs = workflow["jobs"]
    assert {name: job["permissions"] for name, job in jobs.items()} == {
        "check": {"contents": "read"},
        "image": {"contents": "read", "packages": "write"},
        "release": {"contents": "write"},
    }
    assert jobs["image"]["needs"] == "check" and jobs["release"]["needs"] == ["check", "image"]


def test_the_release_workflow_pushes_the_image_action_yml_names_and_then_moves_the_major_tag(tmp_path):
    jobs = load_release_workflow()["jobs"]
    (check_step,) = [s for s in jobs["check"]["steps"] if "scripts/release.py check" in s.get("run", "")]
    assert check_step["env"] == {"TAG": "${{ github.ref_name }}"}
    # The step's own script, as the runner runs it, gives the outputs the later jobs use.
    output = tmp_path / "github_output"
    proc = subprocess.run(["bash", "-eo", "pipefail", "-c", check_step["run"]], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False,
                          env={"PATH": "/usr/bin:/bin", "TAG": f"v{__version__}",
                               "GITHUB_REPOSITORY": project_home(), "GITHUB_OUTPUT": str(output)})
    assert proc.returncode == 0, proc.stderr
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    assert set(jobs["check"]["outputs"]) == set(outputs)
    pushed = next(s for s in jobs["image"]["steps"]
                  if s.get("uses", "").startswith("docker/build-push-action@"))
    tag = pushed["with"]["tags"].replace("${{ needs.check.outputs.image }}", outputs["image"]).replace(
        "${{ needs.check.outputs.version }}", outputs["version"])
    assert f"docker://{tag}" == action()["runs"]["image"] and pushed["with"]["push"] is True
    steps = [s["name"] for s in jobs["release"]["steps"]]
    assert steps.index("Create the release with the CHANGELOG entry") < steps.index("Move the major tag to "
                                                                                   "this release")
    assert steps.index("Name the image by its digest in the released action.yml") < steps.index(
        "Create the release with the CHANGELOG entry")
    move = jobs["release"]["steps"][-1]
    assert move["env"]["MAJOR"] == "${{ needs.check.outputs.major }}"
    assert move["env"]["SHA"] == "${{ steps.pinned.outputs.sha }}"  # the commit whose action.yml is pinned


# -- the released action.yml names its image by digest ---------------------------------------------------

DIGEST = "sha256:" + "0123456789abcdef" * 4
SAMPLE_ACTION = """\
name: speedstats
runs:
  using: docker
  # The image the release workflow built from the Dockerfile for this version.
  image: docker://ghcr.io/someone/bench-fork:1.4.2
"""


def test_pin_image_names_the_image_by_its_digest_instead_of_its_tag():
    assert release.pin_image(SAMPLE_ACTION, DIGEST) == SAMPLE_ACTION.replace(
        "  image: docker://ghcr.io/someone/bench-fork:1.4.2\n",
        "  # speedstats 1.4.2's image, by the digest the release pushed\n"
        f"  image: docker://ghcr.io/someone/bench-fork@{DIGEST}\n")
    pinned = yaml.safe_load(release.pin_image(SAMPLE_ACTION, DIGEST))
    assert pinned["runs"] == {"using": "docker", "image": f"docker://ghcr.io/someone/bench-fork@{DIGEST}"}
    for digest in ("sha256:" + "0" * 63, "0123456789abcdef" * 4, DIGEST.upper(), f"{DIGEST}\nimage: x"):
        with pytest.raises(release.ReleaseError, match="not sha256: and 64 hexadecimal digits"):
            release.pin_image(SAMPLE_ACTION, digest)
    with pytest.raises(release.ReleaseError, match=r"found 0$"):  # pinned already
        release.pin_image(release.pin_image(SAMPLE_ACTION, DIGEST), DIGEST)


def test_pin_image_prints_the_projects_action_yml_pinned_and_changes_no_file(tmp_path):
    root = copy_of_the_release_files(tmp_path)
    before = (root / "action.yml").read_text(encoding="utf-8")
    proc = run_script("pin-image", DIGEST, root=root)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == release.pin_image(before, DIGEST)
    assert yaml.safe_load(proc.stdout)["runs"]["image"] == f"docker://ghcr.io/{project_home().lower()}@{DIGEST}"
    assert yaml.safe_load(proc.stdout)["inputs"] == action()["inputs"]
    assert (root / "action.yml").read_text(encoding="utf-8") == before
    proc = run_script("pin-image", "latest", root=root)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == "release: error: digest 'latest': not sha256: and 64 hexadecimal digits\n"


# GitHub's API cannot be reached from the tests: this stand-in for the `gh` CLI records each call
# (arguments and what it read on stdin) and answers the --jq query with a made-up sha.
FAKE_GH = """\
import json, os, sys
args = sys.argv[1:]
stdin = sys.stdin.read() if "--input" in args else None
with open(os.environ["GH_CALLS"], "a") as f:
    f.write(json.dumps({"args": args, "stdin": stdin}) + "\\n")
if "--jq" in args:
    print({"blobs": "b" * 40, "trees": "t" * 40}.get(args[1].rsplit("/", 1)[-1], "c" * 40))
"""


def test_the_release_commits_the_pinned_action_yml_on_the_tagged_commit_and_moves_the_tag(tmp_path):
    jobs = load_release_workflow()["jobs"]
    assert jobs["image"]["outputs"] == {"digest": "${{ steps.push.outputs.digest }}"}
    assert next(s for s in jobs["image"]["steps"] if s.get("id") == "push")["uses"].startswith(
        "docker/build-push-action@")
    (pin,) = [s for s in jobs["release"]["steps"] if s.get("id") == "pinned"]
    assert pin["env"] == {"GH_TOKEN": "${{ github.token }}", "DIGEST": "${{ needs.image.outputs.digest }}",
                          "TAG": "${{ github.ref_name }}", "SHA": "${{ github.sha }}"}
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text(f"#!{sys.executable}\n{FAKE_GH}")
    (bin_dir / "gh").chmod(0o755)
    calls, output, runner_temp = tmp_path / "calls.jsonl", tmp_path / "github_output", tmp_path / "temp"
    runner_temp.mkdir()
    sha, before = "5" * 40, (ROOT / "action.yml").read_text(encoding="utf-8")
    proc = subprocess.run(["bash", "-eo", "pipefail", "-c", pin["run"]], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False,
                          env={"PATH": f"{bin_dir}:/usr/bin:/bin", "GH_CALLS": str(calls), "DIGEST": DIGEST,
                               "TAG": f"v{__version__}", "SHA": sha, "GITHUB_REPOSITORY": project_home(),
                               "GITHUB_OUTPUT": str(output), "RUNNER_TEMP": str(runner_temp)})
    assert proc.returncode == 0, proc.stderr
    api = f"repos/{project_home()}/git"
    made = [json.loads(line) for line in calls.read_text().splitlines()]
    assert [call["args"][:3] for call in made] == [
        ["api", f"{api}/blobs", "-f"], ["api", f"{api}/commits/{sha}", "--jq"],
        ["api", f"{api}/trees", "--input"], ["api", f"{api}/commits", "-f"], ["api", "-X", "PATCH"]]
    blob = made[0]["args"]
    assert blob[2:4] == ["-f", "encoding=base64"] and blob[4] == "-f" and blob[5].startswith("content=")
    pinned = base64.b64decode(blob[5][len("content="):]).decode()
    assert pinned == release.pin_image(before, DIGEST)
    assert json.loads(made[2]["stdin"]) == {"base_tree": "c" * 40, "tree": [
        {"path": "action.yml", "mode": "100644", "type": "blob", "sha": "b" * 40}]}
    commit = made[3]["args"]
    assert [commit[i + 1] for i, a in enumerate(commit) if a == "-f"] == [
        f"message=speedstats v{__version__}: action.yml names the image by its digest", "tree=" + "t" * 40,
        f"parents[]={sha}"]
    assert made[4]["args"] == ["api", "-X", "PATCH", f"{api}/refs/tags/v{__version__}",
                               "-f", "sha=" + "c" * 40, "-F", "force=true", "--silent"]
    assert output.read_text() == "sha=" + "c" * 40 + "\n"
    assert (ROOT / "action.yml").read_text(encoding="utf-8") == before  # the checkout's is left as it was

