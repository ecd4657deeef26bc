"""Two `speedstats comment` processes racing on one pull request end with one Speed stats comment.

The fake server forces the bad interleavings: both list before either creates (each then creates
one), or both creations land before either lists again. Each round uses a fresh pull request.
"""

from concurrent.futures import ThreadPoolExecutor

import pytest

from fakegithub import actions_env, event_payload, run_speedstats

REPO = "o/r"
TOKEN = "ghs_RaceT0kenNeverToBePrinted000000000005"
OLD, NEW = "0a" * 20, "0b" * 20
LEGACY = ("<details>\n <summary>Speed stats:</summary>\n\n ``` \nGPU Name: old \n\n old figures\n ``` "
          "\n\n</details>")
ROUNDS = 20
# (what the server holds, whether the two runs are for different commits, an old bot's comment exists).
# Both runs editing the old bot's comment at once is a blind last-write-wins race (GitHub has no
# conditional edit), so there only the count is checked; elsewhere the newer run's body must win.
SCENARIOS = [
    ("list", False, False),
    ("list", True, False),
    ("create", True, False),
    (None, False, False),
    (None, True, False),
    ("list", True, True),
]


def body(label):
    return (f"<details>\n <summary>Speed stats:</summary>\n\n ``` \nGPU Name: X \n\n {label}\n ``` "
            "\n\n</details>")


@pytest.fixture
def gh(fake_github):
    return fake_github(TOKEN)


# every scenario once in each tier; their repetitions only in the full suite
@pytest.mark.parametrize("round_", [pytest.param(r, marks=pytest.mark.repeat if r >= len(SCENARIOS) else ())
                                    for r in range(ROUNDS)])
def test_two_concurrent_comment_processes_leave_one_comment(gh, tmp_path, round_):
    hold, two_commits, legacy = SCENARIOS[round_ % len(SCENARIOS)]
    number = 100 + round_
    gh.add_pull(REPO, number, commits=[OLD, NEW] if two_commits else [NEW])
    gh.add_comment(REPO, number, "please rebase", login="reviewer")
    if legacy:
        gh.add_comment(REPO, number, LEGACY, login="github-actions[bot]", user_type="Bot")
    comments_path = f"/repos/{REPO}/issues/{number}/comments"
    if hold == "list":
        gh.hold("GET", comments_path, parties=2)
    elif hold == "create":
        gh.hold("POST", comments_path, parties=2)

    runs = [(OLD if two_commits else NEW, 201, "older run"), (NEW, 202, "newer run")]

    def comment(run):
        sha, run_id, label = run
        path = tmp_path / f"{run_id}.md"
        path.write_text(body(label), encoding="utf-8")
        event = event_payload("pull_request", REPO, number=number, head_sha=sha)
        env = actions_env(gh, TOKEN, REPO, tmp_path, event=event, GITHUB_RUN_ID=run_id)
        return run_speedstats(["comment", "--body-file", path], env, subprocess_=True)

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(comment, runs))

    assert [r.rc for r in results] == [0, 0], [r.err for r in results]
    comments = gh.comments(REPO, number)
    assert [c["body"] for c in comments if c["login"] == "reviewer"] == ["please rebase"]
    stats = [c for c in comments if "Speed stats:" in c["body"]]
    assert len(stats) == 1, [c["body"] for c in stats]
    newer = body("newer run") + f"\n\n<!-- speedstats:speed-stats head={NEW} run=202 -->"
    older = body("older run") + (f"\n\n<!-- speedstats:speed-stats head={OLD if two_commits else NEW} "
                                 "run=201 -->")
    assert stats[0]["body"] in ((older, newer) if legacy else (newer,))
    urls = {r.out.strip() for r in results}
    assert urls == {f"{gh.url}/{REPO}/pull/{number}#issuecomment-{stats[0]['id']}"}
