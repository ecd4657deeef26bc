"""GitHub commands: comment, docs-preview, automerge-guard, post-from-artifact, fetch-baseline, for a
matrix of GPU runners, shard and report, and record (main's history in a data branch).

They run inside a GitHub Actions job (GITHUB_TOKEN, GITHUB_REPOSITORY, GITHUB_EVENT_PATH,
GITHUB_API_URL) or from a shell with --repo/--pr/--token. This module only registers them; each
command lives in its own module. PyGithub is imported only when a command talks to GitHub, so
`speedstats --help` stays quick.
"""

from speedstats.github import artifact, automerge_guard, baseline, comment, record, report, shards


def register(subparsers):
    comment.register(subparsers)  # comment, docs-preview
    automerge_guard.register(subparsers)
    artifact.register(subparsers)  # post-from-artifact
    baseline.register(subparsers)  # fetch-baseline
    shards.register(subparsers)  # shard: a matrix job's results, packed for the report
    report.register(subparsers)  # report: one comment for a matrix of GPU runners
    record.register(subparsers)  # record: a run of the default branch, appended in the data branch
