#!/usr/bin/env python3
"""The release's one source of truth, checked and rewritten (standard library only, Python 3.8+).

    scripts/release.py check vX.Y.Z [--repository OWNER/REPO] [--notes FILE]
        Checks that the tag, pyproject.toml's version, speedstats.__version__, action.yml's image tag
        and the CHANGELOG's newest entry agree, and that action.yml's image is the home's (or
        OWNER/REPO's) in the GitHub container registry. Prints `version=`, `major=` and `image=`
        lines (for $GITHUB_OUTPUT) and writes the CHANGELOG entry of the version to FILE.
    scripts/release.py pin-image sha256:DIGEST
        Prints action.yml with its image named by the digest of the image the release pushed,
        `docker://ghcr.io/owner/repo@sha256:...`, instead of its version tag: the release workflow
        commits that action.yml on top of the tagged commit, so the released action runs exactly the
        image it built.
    scripts/release.py set-home OWNER/REPO
        Rewrites the action's home (pyproject.toml's Repository URL) in every file that names it, for
        a fork that publishes its own copy: `uses: OWNER/REPO@v0`, the URLs, the image
        ghcr.io/owner/repo (lower case, as the registry wants it).

A wrong tag, version or home is one line on stderr and exit status 2; nothing is written then.
"""
import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXIT_BAD_INPUT = 2
# Every file that names the action's home: what set-home rewrites and tests/test_release.py checks.
HOME_FILES = ("README.md", "action.yml", "Dockerfile", "pyproject.toml", ".github/zizmor.yml",
              "docs/*.md", "examples/workflows/*.yml")
HOME_RE = re.compile(r'^Repository = "https://github\.com/([\w.-]+/[\w.-]+)"$', re.MULTILINE)
VERSION_RE = re.compile(r'^version = "([^"]+)"$', re.MULTILINE)
TAG_RE = re.compile(r"v(\d+)\.(\d+)\.(\d+)")
IMAGE_RE = re.compile(r"^  image: docker://ghcr\.io/([\w./-]+):(\S+)$", re.MULTILINE)
CHANGELOG_ENTRY_RE = re.compile(r"^## (\S+)\n(.*?)(?=^## |\Z)", re.MULTILINE | re.DOTALL)
DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")


class ReleaseError(Exception):
    pass


def read(root, name):
    try:
        return (Path(root) / name).read_text(encoding="utf-8")
    except OSError as exc:
        raise ReleaseError(f"{name}: cannot read it ({exc.strerror})") from None


def one(pattern, root, name, what):
    found = pattern.findall(read(root, name))
    if len(found) != 1:
        raise ReleaseError(f"{name}: expected one {what}, found {len(found)}")
    return found[0]


def home(root=ROOT):
    """OWNER/REPO of the action, as pyproject.toml's [project.urls] Repository names it."""
    return one(HOME_RE, root, "pyproject.toml", "Repository URL on github.com")


def home_files(root=ROOT):
    return sorted(path for pattern in HOME_FILES for path in Path(root).glob(pattern))


def versions(root=ROOT):
    """The version as each file states it: {file: version}."""
    image_tag = one(IMAGE_RE, root, "action.yml", "`image: docker://ghcr.io/...` line")[1]
    newest = CHANGELOG_ENTRY_RE.search(read(root, "CHANGELOG.md"))
    return {
        "pyproject.toml": one(VERSION_RE, root, "pyproject.toml", "`version = ...` line"),
        "src/speedstats/__init__.py": one(re.compile(r'^__version__ = "([^"]+)"$', re.MULTILINE), root,
                                          "src/speedstats/__init__.py", "__version__"),
        "action.yml": image_tag,
        "CHANGELOG.md": newest.group(1) if newest else "(no `## X.Y.Z` entry)",
    }


def changelog_entry(version, root=ROOT):
    for heading, body in CHANGELOG_ENTRY_RE.findall(read(root, "CHANGELOG.md")):
        if heading == version:
            return body.strip() + "\n"
    raise ReleaseError(f"CHANGELOG.md: no entry `## {version}`")


def check(tag, repository=None, root=ROOT):
    """{version, major, image} of a release tag, or ReleaseError naming what disagrees."""
    match = TAG_RE.fullmatch(tag)
    if not match:
        raise ReleaseError(f"tag {tag!r}: not a release tag vX.Y.Z")
    version = tag[1:]
    for name, stated in versions(root).items():
        if stated != version:
            raise ReleaseError(f"{name}: version {stated}, but the tag is {tag}")
    repository = repository or home(root)
    image_repository = one(IMAGE_RE, root, "action.yml", "`image: docker://ghcr.io/...` line")[0]
    if image_repository != repository.lower():
        raise ReleaseError(f"action.yml: image ghcr.io/{image_repository}, but this repository's is "
                           f"ghcr.io/{repository.lower()} (scripts/release.py set-home {repository})")
    return {"version": version, "major": f"v{match.group(1)}", "image": f"ghcr.io/{image_repository}"}


def pin_image(text, digest):
    """action.yml's text with its image named by `digest` (sha256:...) instead of its version tag."""
    if not DIGEST_RE.fullmatch(digest):
        raise ReleaseError(f"digest {digest!r}: not sha256: and 64 hexadecimal digits")
    found = IMAGE_RE.findall(text)
    if len(found) != 1:
        raise ReleaseError("action.yml: expected one `image: docker://ghcr.io/...:VERSION` line, "
                           f"found {len(found)}")
    image, version = found[0]
    return IMAGE_RE.sub(lambda _: f"  # speedstats {version}'s image, by the digest the release pushed\n"
                                  f"  image: docker://ghcr.io/{image}@{digest}", text)


def set_home(new_home, root=ROOT):
    """Rewrites the home in every file that names it; returns the files changed."""
    if not re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", new_home):
        raise ReleaseError(f"home {new_home!r}: not OWNER/REPO")
    old_home = home(root)
    image_re = re.compile(re.escape(f"ghcr.io/{old_home}"), re.IGNORECASE)
    texts = {}
    for path in home_files(root):
        text = path.read_text(encoding="utf-8")
        new_text = image_re.sub(f"ghcr.io/{new_home.lower()}", text).replace(old_home, new_home)
        if new_text != text:
            texts[path] = new_text
    for path, text in texts.items():  # every file read first, so an unreadable one leaves all unchanged
        path.write_text(text, encoding="utf-8")
    return sorted(texts)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="scripts/release.py", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    check_parser = commands.add_parser("check", help="check a release tag against the files")
    check_parser.add_argument("tag")
    check_parser.add_argument("--repository", help="OWNER/REPO the image is pushed for (default: the home)")
    check_parser.add_argument("--notes", type=Path, help="write the version's CHANGELOG entry here")
    pin_parser = commands.add_parser("pin-image", help="name the image by its digest in action.yml")
    pin_parser.add_argument("digest", metavar="sha256:DIGEST")
    home_parser = commands.add_parser("set-home", help="rewrite the action's home in every file")
    home_parser.add_argument("home", metavar="OWNER/REPO")
    args = parser.parse_args(argv)
    try:
        if args.command == "check":
            found = check(args.tag, args.repository)
            notes = changelog_entry(found["version"])
            if args.notes:
                try:
                    args.notes.write_text(notes, encoding="utf-8")
                except OSError as exc:
                    raise ReleaseError(f"--notes {args.notes}: cannot write it ({exc.strerror})") from None
            for key, value in found.items():
                print(f"{key}={value}")
        elif args.command == "pin-image":
            sys.stdout.write(pin_image(read(ROOT, "action.yml"), args.digest))
        else:
            for path in set_home(args.home):
                print(path.relative_to(ROOT))
    except ReleaseError as exc:
        print(f"release: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0


if __name__ == "__main__":
    sys.exit(main())
