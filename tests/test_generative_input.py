"""Hostile results files and suites, drawn by Hypothesis from real ones.

Every field of a real results file (a head-against-base run with its pairs, attribution, ops, memory and
warm-up; the old bot's run read back; a matrix shard) is given, one at a time and several at once, a
wrong type, an extreme, an empty or huge value or hostile text, and driven through `render`,
`post-from-artifact` and `report --from-run` (against the loopback GitHub); a suite file the same way
through `suite` and the reading `run` does. Each command ends with 0, 1 or 2 (7: a case measured on a
disturbed machine) and an error on one line, never an internal error; and the Markdown it would post has
nothing live outside code: no mention, link, image or raw HTML, and no <details> or code fence beyond the
templates' own, as markdown-it-py reads it (GitHub's own parser is CommonMark with tables).

The fast tier runs a few dozen examples; HYPOTHESIS_PROFILE=long (the weekly CI job) runs thousands.
"""

import contextlib
import copy
import functools
import io
import json
import os
import random
import re
import tempfile
import zipfile
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import jinja2
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from fakegithub import FakeGitHub, actions_env, event_payload, run_speedstats
from speedstats import suite as suite_model
from speedstats.analysis.attribution import ProfiledRound, attribute
from speedstats.analysis.sequence import DONE, Rounds
from speedstats.bundle import write_bundle
from speedstats.errors import UserError
from speedstats.github import shards
from speedstats.parse import parse_speed_stats
from speedstats.pipeline import RunOptions, build_requests, check_templates

DATA = Path(__file__).parent / "data"

settings.register_profile("fast", max_examples=60, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                                 HealthCheck.data_too_large])
settings.register_profile("long", settings.get_profile("fast"), max_examples=2000)
PROFILE = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "fast"))


def examples(share):
    """The profile's settings with a share of its examples (a poster's example costs a loopback GitHub)."""
    return settings(PROFILE, max_examples=max(5, int(PROFILE.max_examples * share)))


@pytest.fixture(autouse=True)
def templates_compiled_once(monkeypatch):
    """The renderer makes a Jinja environment per template and compiles the template anew (0.1 s a
    render); here a template's code is compiled once per source and environment configuration."""
    compile_ = jinja2.Environment.compile
    cache = {}

    def same(value):
        return getattr(value, "__code__", value)  # a function made anew per environment: its code

    def compiled(env, source, name=None, filename=None, raw=False, defer_init=False):
        config = tuple(same(getattr(env, attr, None)) for attr in (
            "autoescape", "finalize", "undefined", "trim_blocks", "lstrip_blocks", "keep_trailing_newline",
            "newline_sequence", "optimized", "block_start_string", "variable_start_string",
            "comment_start_string", "line_statement_prefix", "is_async"))
        key = (source, name, filename, raw, defer_init, config, tuple(sorted(env.extensions)))
        if key not in cache:
            cache[key] = compile_(env, source, name, filename, raw, defer_init)
        return cache[key]

    monkeypatch.setattr(jinja2.Environment, "compile", compiled)


# -- the real files the mutations start from ----------------------------------------------------------------


def profiled_rounds(rng, extra):
    """Ten profiled rounds of one build on CUDA: three places and three ops, sgd:step and conv2d costing
    `extra` times 40 ms and 6 ms more per round (as in tests/test_attribution.py, test_opprofile.py)."""
    rounds = []
    for _ in range(10):
        self_s = {"oneflow.nn.module:forward": rng.gauss(0.01, 0.0015),
                  "oneflow.nn.optimizer.sgd:step": rng.gauss(0.002, 0.0003) + 0.04 * extra,
                  "oneflow.utils.data:next": rng.gauss(0.01, 0.0015)}
        ops = {"conv2d": rng.gauss(0.02, 0.001) + 0.006 * extra, "relu": rng.gauss(0.004, 0.0004),
               "add_n": rng.gauss(0.008, 0.0008)}
        rounds.append(ProfiledRound(steps=2, total_s=sum(self_s.values()) + 0.006 * extra, self_s=self_s,
                                    place_total_s=dict(self_s), op_self_s=ops, op_total_s=dict(ops),
                                    op_device="cuda"))
    return rounds


@functools.lru_cache(maxsize=None)
def head_vs_base_run():
    """The smoke run of tests/data with, on its first case, what a run against a base build records: the
    base's figures, the paired verdict of its rounds, the places and ops where the head is slower, the
    sampled memory and warm-up of each build, the builds and the machine."""
    data = json.loads((DATA / "smoke-results-head.json").read_text(encoding="utf-8"))
    case = data["cases"][0]
    head = case["frameworks"]["oneflow"]
    ratios = [1.21, 1.18, 1.24, 1.19, 1.22, 1.20, 1.17, 1.23, 1.20, 1.21]
    base_rounds = [r / 1.2 for r in head["rounds_s"]]
    base_per_iter = sorted(base_rounds)[len(base_rounds) // 2]
    case["frameworks"]["oneflow_base"] = dict(head, rounds_s=base_rounds, per_iter_s=base_per_iter,
                                              total_s=base_per_iter * head["times"])
    rounds = Rounds()
    for ratio in ratios:
        if rounds.action == DONE:
            break
        rounds.add(ratio)
    base_s = [0.26] * len(rounds.ratios)
    case["paired"] = rounds.verdict([b * r for b, r in zip(base_s, ratios)], base_s).to_dict()
    rng = random.Random(7)
    case["attribution"] = attribute(profiled_rounds(rng, 1), profiled_rounds(rng, 0),
                                    profiler="Python stack sampled every 1 ms in the worker",
                                    ops_profiler="the framework's own profiler").to_dict()
    for role, fw in case["frameworks"].items():
        fw.update(sampled_peak_bytes=(900 + 50 * (role == "oneflow")) << 20, sampled_memory_kind="rss-tree",
                  rss_peak_bytes=1 << 30, setup_s=4.2 + 0.4 * (role == "oneflow"), setup_starts_s=[4.1, 4.3])
    case["confirmation"] = {"flags": ["resnet50-bs2: relative speed 0.20 is below 0.25"],
                            "status": "confirmed"}
    data["builds"] = {
        "oneflow": {"role": "oneflow", "family": "oneflow", "source": "wheel",
                    "packages": {"oneflow": {"version": "0.9.0+slow", "git_commit": "381b12c",
                                             "wheel": "oneflow-0.9.0+slow-cp310-cp310-linux_x86_64.whl",
                                             "sha256": "ab" * 32},
                                 "flowvision": {"version": "0.2.1"}}},
        "oneflow_base": {"role": "oneflow_base", "family": "oneflow", "source": "installed",
                         "packages": {"oneflow": {"version": "0.9.0", "git_commit": "381b12c"}}},
        "pytorch": {"role": "pytorch", "family": "pytorch", "source": "requirement",
                    "packages": {"torch": {"version": "2.14.1", "requirement": "torch==2.14.1"}}},
    }
    data["machine"] = {"preflight": {"quiet": False, "waited_s": 12.4, "reasons": ["another process"]},
                       "driver": {"version": "535", "notes": ["an old driver"]}}
    return json.dumps(data)


@functools.lru_cache(maxsize=None)
def old_bot_run():
    """The old bot's comment of a real pull request, read back as results (a GPU run, no base)."""
    return parse_speed_stats((DATA / "pr-cu12-release-thread.txt").read_text(encoding="utf-8")).to_json()


SEEDS = {"head-vs-base": head_vs_base_run, "old-bot": old_bot_run}

SUITE = {
    "extends": "smoke", "name": "hostile", "warmup": 1, "rounds": 3, "timeout_s": 120, "show_memory": True,
    "lock_timeout_s": 60, "mode": "clean", "model": "library", "env": {"OMP_NUM_THREADS": "1"},
    "dataset": {"images": 32, "classes": 2, "min_side": 160, "max_side": 320},
    "builds": {"oneflow": "installed", "baseline_oneflow": "installed",
               "pip_args": "--extra-index-url https://example.org/simple"},
    "head_vs_base": {"min_effect": 0.04, "confidence": 0.95, "first_rounds": 10, "step_rounds": 5,
                     "max_rounds": 40},
    "disturbance": {"max_other_cores": 0.5, "allowed_clock_events": ["gpu_idle"], "max_cv": 0.2},
    "attribute": "always", "attribute_rounds": 4, "attribute_budget": 0.5,
    "cases": [{"id": "resnet50-bs2", "times": 12, "max_oneflow_ms": {"default": 100, "NVIDIA A100": 40}},
              {"id": "resnet50-bs1", "skip": True},
              {"id": "resnet50-bs4", "kind": "resnet50", "batch_size": 4, "times": 10, "image_size": 32,
               "min_relative_speed": 0.5, "env": {"X": "1"}}],
}


# -- mutations -----------------------------------------------------------------------------------------------


class Deleted:
    def __repr__(self):
        return "<deleted>"


DELETE = Deleted()


def dotted(path):
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".") or "<the file>"


@dataclass(frozen=True)
class Mutation:
    path: tuple
    value: object

    def __repr__(self):
        shown = repr(self.value)
        return f"{dotted(self.path)} = {shown[:100] + '...' if len(shown) > 100 else shown}"

    def apply(self, data):
        """data with this mutation (in place where it can be); a path an earlier mutation removed is left."""
        if not self.path:
            return data if self.value is DELETE else copy.deepcopy(self.value)
        parent = data
        for key in self.path[:-1]:
            if not reachable(parent, key):
                return data
            parent = parent[key]
        key = self.path[-1]
        if reachable(parent, key):
            if self.value is DELETE:
                del parent[key]
            else:  # a copy: a later mutation may change a drawn list or mapping in place
                parent[key] = copy.deepcopy(self.value)
        return data


def reachable(parent, key):
    if isinstance(parent, dict):
        return isinstance(key, str) and key in parent
    return isinstance(parent, list) and isinstance(key, int) and -len(parent) <= key < len(parent)


def field_paths(value, path=()):
    """Every field of a JSON value, the file itself first; of a list, its first and last entries."""
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from field_paths(item, (*path, key))
    elif isinstance(value, list):
        for index in sorted({0, len(value) - 1}) if value else ():
            yield from field_paths(value[index], (*path, index))


HOSTILE = (
    "x ``` </details> @octocat ![p](https://evil.example/p.png)",
    "<img src=x>", "[l](https://evil.example)", "&#64;octocat", "https://evil.example", "www.evil.example",
    "@octocat", "a@evil.example", "</details>", "<details>", "<!-- x", "<https://evil.example>",
    "##[set-output name=x;]y", "::error::x", "x\n::warning::y", "x\r\n</details>\r\n\n@octocat", "\n\n# x\n",
    "`x`", "```", "~~~", "| a | b |", "\\", "\u202e@octocat\u202c", "\u2066[l](https://evil.example)\u2069",
    "\x1b[31mred\x1b[0m", "\x00", "@\u200boctocat", "&lt;img src=x&gt;", "&#x3C;img src=x&#x3E;",
)
TEXTS = st.one_of(
    st.sampled_from(HOSTILE),
    st.tuples(st.sampled_from(HOSTILE), st.text(max_size=8), st.sampled_from(HOSTILE)).map("".join),
    st.text(max_size=30),
    st.sampled_from(["", " ", "x" * 100_000, "@octocat " * 10_000, "\n" * 1000, "NaN", "Infinity", "-1",
                     "1e999", "0x10", "cuda", "cpu", "oneflow", "no change", "regression"]),
)
NUMBERS = st.one_of(
    st.sampled_from([0, -1, 1, -0.0, 0.5, 1e308, -1e308, 5e-324, 2**31, 2**63, 10**30, -(10**30), 10**400,
                     float("nan"), float("inf"), float("-inf")]),
    st.integers(),
    st.floats(),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, TEXTS)
VALUES = st.one_of(
    SCALARS,
    st.just(DELETE),
    st.sampled_from([[], {}, [None], [[]], [{}], {"": None}, [1], ["x"] * 5000]),
    st.lists(SCALARS, max_size=3),
    st.dictionaries(TEXTS, SCALARS, max_size=2),
)


def mutations(paths, max_size=4):
    return st.lists(st.builds(Mutation, st.sampled_from(paths), VALUES), min_size=1, max_size=max_size)


def seeded_mutations(seeds):
    """(seed name, mutations of its fields): one seed of `seeds`, drawn first."""
    return st.sampled_from(seeds).flatmap(
        lambda name: st.tuples(st.just(name), mutations(paths_of(name))))


@functools.lru_cache(maxsize=None)
def paths_of(name):
    return list(field_paths(json.loads(SEEDS[name]())))


def mutated(text, changes):
    data = json.loads(text)
    for change in changes:
        data = change.apply(data)
    return json.dumps(data, ensure_ascii=False)


# -- what must hold -----------------------------------------------------------------------------------------

DEBUG = {"SPEEDSTATS_DEBUG": "1"}  # an internal error's traceback on stderr, for the failure message
RENDER_STATUSES = {0, 1, 2, 7}
_MARKER = re.compile(r"\n\n<!-- speedstats:[a-z-]+(?: [\w=.-]+)* -->\Z")
MENTION = re.compile(r"@\w")
BARE_URL = re.compile(r"(?i)https?://|\bwww\.")
MARKDOWN = MarkdownIt("commonmark").enable(["table", "strikethrough"])
try:  # GitHub links bare URLs; without linkify-it-py, BARE_URL finds them in the text instead
    import linkify_it  # noqa: F401

    MARKDOWN = MarkdownIt("commonmark", {"linkify": True}).enable(["table", "strikethrough", "linkify"])
except ImportError:
    pass


def ended_well(result, statuses, what):
    """The command's status is one of `statuses`; an error is the one last line of stderr, every line of
    which is speedstats' own."""
    err = result.err
    assert result.rc in statuses, f"{what}: exit {result.rc}:\n{err[-1500:]}"
    assert "Traceback" not in err, f"{what}:\n{err[-1500:]}"
    lines = err.splitlines()
    assert all(line.startswith("speedstats:") for line in lines), f"{what}: stderr lines not its own:\n{err}"
    errors = [line for line in lines if line.startswith("speedstats: error:")]
    if result.rc == 2:
        assert errors == lines[-1:], f"{what}: exit 2 with stderr:\n{err}"
    else:
        assert errors == [], f"{what}: exit {result.rc} with stderr:\n{err}"


@dataclass
class Markup:
    """What a comment holds that GitHub would make live: links and images, raw HTML, code fences, and
    mentions and bare URLs in its text (code aside)."""

    links: list
    html: Counter
    fences: int
    text: list
    details: str = ""  # "<>" for each <details> block opened and closed, in order

    @classmethod
    def of(cls, body):
        body = _MARKER.sub("", body, count=1)  # the poster's own marker, an HTML comment at the end
        found = cls([], Counter(), 0, [])

        def walk(tokens):
            for token in tokens:
                if token.type == "fence":
                    found.fences += 1
                elif token.type in ("link_open", "image"):
                    found.links.append(token.attrs.get("href") or token.attrs.get("src"))
                elif token.type in ("html_block", "html_inline"):
                    found.html[token.content.strip()] += 1
                    found.details += "".join("<" if tag == "<" else ">"
                                             for tag in re.findall(r"(?i)(<|</)details\b", token.content))
                elif token.type == "text" and (MENTION.search(token.content)
                                               or BARE_URL.search(token.content)):
                    found.text.append(token.content)
                walk(token.children or ())

        walk(MARKDOWN.parse(body))
        return found


def nothing_live(body, clean, what, link_prefix=None):
    """body has no more markup than the clean render of its seed: no link (but to the fake GitHub's own
    runs and jobs, link_prefix), image, mention or bare URL, no HTML but the templates' <details> blocks
    (as many at most), and no more code fences (data that closes the fence early opens another)."""
    found, own = Markup.of(body), Markup.of(clean)
    problems = [f"link or image {href!r}" for href in found.links
                if link_prefix is None or not str(href).startswith(link_prefix)]
    problems += [f"mention or bare URL in the text {text!r}" for text in found.text]
    problems += [f"HTML {html!r} (x{count})" for html, count in (found.html - own.html).items()]
    if found.fences > own.fences:
        problems.append(f"{found.fences} code blocks, the clean comment has {own.fences}")
    if found.details.replace("<>", ""):
        problems.append(f"<details> opened and closed out of turn: {found.details}")
    assert not problems, f"{what}: live Markdown: {'; '.join(problems)}\n--- the comment:\n{body[:3000]}"


def render(tmp_path, text, *extra):
    """`speedstats render` of a results text: the result, and the comment (None when it wrote none)."""
    path, out = tmp_path / "results.json", tmp_path / "comment.md"
    path.write_text(text, encoding="utf-8")
    with contextlib.suppress(FileNotFoundError):
        out.unlink()
    result = run_speedstats(["render", path, "--out", out, *extra], DEBUG)
    return result, out.read_text(encoding="utf-8") if out.exists() else None


@functools.lru_cache(maxsize=None)
def clean_render(name):
    with tempfile.TemporaryDirectory() as folder:
        result, body = render(Path(folder), SEEDS[name]())
    assert result.rc in (0, 1), result.err
    return body


def check_render(tmp_path, name, text, what):
    result, body = render(tmp_path, text)
    ended_well(result, RENDER_STATUSES, what)
    if result.rc == 2:
        assert body is None, f"{what}: a comment written on bad input"
    else:
        nothing_live(body, clean_render(name), what)


# -- the seeds are what they claim --------------------------------------------------------------------------


def test_the_seeds_render_every_part_of_the_comment_and_nothing_live(tmp_path):
    body = clean_render("head-vs-base")
    for part in ("Where the head spends more time than the base", "Where the head's ops take more CUDA time",
                 "| oneflow.nn.optimizer.sgd:step |", "| conv2d |", "Warm-up, from the worker's start",
                 "resnet50-bs2 memory: OneFlow 950 MiB, base 900 MiB", "How these verdicts are made",
                 "Builds: head OneFlow 0.9.0+slow", "an old driver"):
        assert part in body, part
    markup = Markup.of(body)
    assert (markup.links, markup.text, markup.fences) == ([], [], 1)
    assert markup.html == Counter({"<details>\n <summary>Speed stats:</summary>": 1, "</details>": 2,
                                   "<details><summary>How these verdicts are made</summary>": 1})
    assert Markup.of(clean_render("old-bot")).html == Counter(
        {"<details>\n <summary>Speed stats:</summary>": 1, "</details>": 1})
    assert len(paths_of("head-vs-base")) > 200


@pytest.mark.parametrize("text, live", [
    ("x @octocat", "mention"), ("x &#64;octocat", "mention"), ("see https://evil.example", "bare URL"),
    ("[l](https://evil.example)", "link"), ("![p](https://evil.example/p.png)", "image"),
    ("a <img src=x> b", "HTML"), ("</details>", "HTML"), ("`@octocat` and\n\n    @octocat", None),
    ("x @\u2060octocat https:/\u2060/evil.example www\u2060.evil.example \\[l\\](x)", None),
])
def test_the_markdown_check_finds_what_github_makes_live(text, live):
    clean = "<details>\n <summary>Speed stats:</summary>\n\n ``` \nx\n ``` \n\n</details>"
    if live is None:
        nothing_live(f"{clean}\n\n{text}", clean, "a safe text")
    else:
        with pytest.raises(AssertionError, match="live Markdown"):
            nothing_live(f"{clean}\n\n{text}", clean, live)


def test_the_markdown_check_finds_the_speed_stats_block_closed_early():
    clean = "<details>\n <summary>Speed stats:</summary>\n\n ``` \nx\n ``` \n\n</details>"
    with pytest.raises(AssertionError, match="2 code blocks"):
        nothing_live(clean.replace("\nx\n", "\nx\n```\n"), clean, "the fence closed early")
    notes = "<details><summary>How</summary>\n\ny\n\n</details>"
    with pytest.raises(AssertionError, match="out of turn"):  # as many tags as the clean one, one moved
        nothing_live(f"{clean}\n\n</details>\n\n{notes.replace('</details>', '')}", f"{clean}\n\n{notes}",
                     "the block closed early")


# -- render --------------------------------------------------------------------------------------------------


def check_render_changes(tmp_path, name, changes):
    check_render(tmp_path, name, mutated(SEEDS[name](), changes), f"render {name} with {changes}")


@examples(1)
@given(drawn=seeded_mutations(list(SEEDS)))
def test_render_of_a_hostile_results_file_is_a_status_and_nothing_live(tmp_path, drawn):
    check_render_changes(tmp_path, *drawn)


# The examples (#46: 1, 3, 4 and 7), each on the head-vs-base run.
CASE = ("cases", 0)
HOSTILE_OPS_DEVICE = HOSTILE[0]
BAD_INPUT = [
    ((*CASE, "paired", "min_effect"), "x"),
    ((*CASE, "paired", "stages"), 5),
    ((*CASE, "attribution", "base_step_ms"), "x"),
    ((*CASE, "attribution", "step_change_ms"), [1]),
    ((*CASE, "attribution", "ops_device"), 5),
    (("builds", "oneflow", "packages"), "x"),
    (("builds", "oneflow", "packages"), {"oneflow": "0.9.0"}),
    (("builds", "oneflow", "packages"), ["oneflow"]),
    ((*CASE, "attribution", "confidence"), None),
    ((*CASE, "attribution", "head_step_ms"), "x"),
    ((*CASE, "paired", "stages"), [None]),
    ((*CASE, "attribution", "rounds"), "10 @octocat"),
]


def test_a_hostile_ops_device_puts_nothing_live_in_the_comment(tmp_path):
    text = mutated(head_vs_base_run(), [Mutation((*CASE, "attribution", "ops_device"), HOSTILE_OPS_DEVICE)])
    check_render(tmp_path, "head-vs-base", text, "attribution.ops_device")


@pytest.mark.parametrize("path, value", BAD_INPUT, ids=[f"{dotted(p[2:])}={v!r}" for p, v in BAD_INPUT])
def test_a_field_of_the_wrong_type_is_bad_input_on_one_line(tmp_path, path, value):
    result, body = render(tmp_path, mutated(head_vs_base_run(), [Mutation(path, value)]))
    ended_well(result, {2}, f"render with {dotted(path)} = {value!r}")
    assert body is None


# -- the posters: post-from-artifact and report --from-run -------------------------------------------------

REPO, PR, RUN = "o/r", 7, 5550
TOKEN = "ghs_GenerativeT0kenNeverToBePrinted0000046"
SHA = "e" * 40


def zipped(files):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buf.getvalue()


def fork_run(gh):
    """A fork's pull request and its benchmark run, which lists no pull requests."""
    gh.add_token(TOKEN)
    gh.add_pull(REPO, PR, head_sha=SHA, head_repo="fork/r")
    gh.add_workflow_run(REPO, RUN, SHA, pull_requests=[], conclusion="success", head_repo="fork/r")


def fork_env(gh, tmp_path):
    return actions_env(gh, TOKEN, REPO, tmp_path, event_name="workflow_run",
                       event=event_payload("workflow_run", REPO, run_id=RUN, head_sha=SHA),
                       GITHUB_RUN_ID=9999, **DEBUG)


def posted(gh):
    return [c["body"] for c in gh.comments(REPO, PR) if "speedstats:speed-stats" in c["body"]]


@functools.lru_cache(maxsize=None)
def bundle_manifest(name):
    """The bundle.json a run writes for its results (speedstats.bundle)."""
    with tempfile.TemporaryDirectory() as folder:
        write_bundle(folder, SEEDS[name](), None, PR, SHA, RUN, REPO)
        return (Path(folder) / "bundle.json").read_text(encoding="utf-8")


def post_bundle(tmp_path, files):
    """post-from-artifact of a fork's run whose artifact holds `files` (name: text)."""
    with FakeGitHub() as gh:
        fork_run(gh)
        gh.add_artifact(REPO, RUN, "speedstats-bundle", zipped(files))
        result = run_speedstats(["post-from-artifact"], fork_env(gh, tmp_path))
        return result, posted(gh), gh.url


def check_post(tmp_path, name, files, what):
    result, bodies, _ = post_bundle(tmp_path, files)
    ended_well(result, {0, 1, 2}, what)
    if result.rc == 2:
        assert bodies == [], f"{what}: posted on bad input"
    for body in bodies:
        nothing_live(body, clean_render(name), what)


def artifact(name, manifest):
    """A run's artifact of the seed `name`: its manifest (bundle.json or shard.json) and its results."""
    text = bundle_manifest(name) if manifest == "bundle.json" else shard_manifest(name)
    return {manifest: json.loads(text), "results.json": json.loads(SEEDS[name]())}


def artifact_paths(name, manifest):
    return [p for p in field_paths(artifact(name, manifest)) if p]


def artifact_files(name, manifest, changes):
    """The artifact's files (name: text), mutated; a file a mutation deletes is left out."""
    files = artifact(name, manifest)
    for change in changes:
        files = change.apply(files)
    return {k: json.dumps(v, ensure_ascii=False) for k, v in files.items()}


def artifact_mutations(manifest):
    return st.sampled_from(list(SEEDS)).flatmap(
        lambda name: st.tuples(st.just(name), mutations(artifact_paths(name, manifest))))


def check_post_changes(tmp_path, name, changes):
    check_post(tmp_path, name, artifact_files(name, "bundle.json", changes),
               f"post-from-artifact {name} with {changes}")


@examples(0.25)
@given(drawn=artifact_mutations("bundle.json"))
def test_post_from_artifact_of_a_hostile_bundle_is_a_status_and_nothing_live(tmp_path, drawn):
    check_post_changes(tmp_path, *drawn)


@pytest.mark.parametrize("path, value", [BAD_INPUT[1], BAD_INPUT[4], BAD_INPUT[-1]],
                         ids=["paired.stages", "attribution.ops_device", "attribution.rounds"])
def test_post_from_artifact_refuses_a_field_of_the_wrong_type(tmp_path, path, value):
    text = mutated(head_vs_base_run(), [Mutation(path, value)])
    result, bodies, _ = post_bundle(tmp_path, {"bundle.json": bundle_manifest("head-vs-base"),
                                               "results.json": text})
    ended_well(result, {2}, f"post-from-artifact with {dotted(path)} = {value!r}")
    assert bodies == []


def test_post_from_artifact_of_a_hostile_ops_device_posts_nothing_live(tmp_path):
    text = mutated(head_vs_base_run(), [Mutation((*CASE, "attribution", "ops_device"), HOSTILE_OPS_DEVICE)])
    files = {"bundle.json": bundle_manifest("head-vs-base"), "results.json": text}
    check_post(tmp_path, "head-vs-base", files, "attribution.ops_device")


@functools.lru_cache(maxsize=None)
def shard_manifest(name):
    """The shard.json the a100 job of a matrix writes for its results (speedstats shard)."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "out").mkdir()
        (root / "out" / "results.json").write_text(SEEDS[name](), encoding="utf-8")
        shards.write_shard(root / "shard", "a100", "success", root / "out", (PR, SHA, RUN, REPO), 1)
        return (root / "shard" / "shard.json").read_text(encoding="utf-8")


@functools.lru_cache(maxsize=None)
def clean_report(name):
    with tempfile.TemporaryDirectory() as folder:
        result, bodies, url = report_shard(Path(folder), {"shard.json": shard_manifest(name),
                                                          "results.json": SEEDS[name]()})
    assert result.rc == 0 and len(bodies) == 1, result.err
    return bodies[0], url


def report_shard(tmp_path, files):
    with FakeGitHub() as gh:
        fork_run(gh)
        gh.add_artifact(REPO, RUN, shards.artifact_name("a100", 1), zipped(files))
        result = run_speedstats(["report", "--gpus", '["a100"]', "--from-run"], fork_env(gh, tmp_path))
        return result, posted(gh), gh.url


@examples(0.25)
@given(drawn=artifact_mutations("shard.json"))
def test_report_from_a_forks_hostile_shard_is_a_status_and_nothing_live(tmp_path, drawn):
    check_report_changes(tmp_path, *drawn)


def check_report_changes(tmp_path, name, changes):
    what = f"report --from-run {name} with {changes}"
    result, bodies, url = report_shard(tmp_path, artifact_files(name, "shard.json", changes))
    ended_well(result, {0, 1, 2}, what)
    if result.rc == 2:
        assert bodies == [], f"{what}: posted on bad input"
    clean, clean_url = clean_report(name)
    for body in bodies:
        # The report links each GPU to its job or run: the fake GitHub's own address, which differs per test.
        nothing_live(body, clean.replace(clean_url, url), what, link_prefix=f"{url}/{REPO}/actions/runs/")


# -- suites: `speedstats suite`, and the reading `run` does -------------------------------------------------

SUITE_PATHS = [p for p in field_paths(SUITE) if p]


def read_as_run_does(path):
    """What `speedstats run` does with its suite before it measures: read it, render made-up figures of
    its cases through the templates, and read the builds it names."""
    suite = suite_model.load_suite(path)
    check_templates(suite, None)
    build_requests(suite, RunOptions(suite=str(path)))


def test_the_suite_seed_is_a_suite(tmp_path):
    path = tmp_path / "speedstats.yml"
    path.write_text(yaml.safe_dump(SUITE))
    assert len(suite_model.load_suite(path).cases) == 5
    read_as_run_does(path)
    result = run_speedstats(["suite", "--suite", path], DEBUG)
    assert (result.rc, result.err) == (0, "")


@examples(0.4)
@given(changes=mutations(SUITE_PATHS))
def test_a_hostile_suite_is_read_or_refused_on_one_line(tmp_path, changes):
    check_suite_changes(tmp_path, changes)


def check_suite_changes(tmp_path, changes):
    what = f"suite with {changes}"
    data = json.loads(json.dumps(SUITE))
    for change in changes:
        data = change.apply(data)
    path = tmp_path / "speedstats.yml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    try:
        read_as_run_does(path)
    except UserError as exc:
        assert "\n" not in str(exc), f"{what}: a refusal of more than one line: {exc}"
    except Exception as exc:  # `run` would exit 6
        raise AssertionError(f"{what}: internal error in reading the suite as run does: "
                             f"{type(exc).__name__}: {exc}") from exc
    result = run_speedstats(["suite", "--suite", path], DEBUG)
    ended_well(result, {0, 2}, what)
    # The suite judges a run: its names and thresholds reach the comment.
    result, body = render(tmp_path, head_vs_base_run(), "--suite", path)
    ended_well(result, RENDER_STATUSES, f"render --suite, {what}")
    if body is not None:
        nothing_live(body, clean_render("head-vs-base"), f"render --suite, {what}")


# -- the weekly sweep: every field given each kind of value, one at a time ----------------------------------

SWEEP_VALUES = (None, DELETE, "", "x", HOSTILE[0], "<img src=x>", 5, -1, 0, 1e308, 10**400, True, [1], [None],
                {}, {"a": 1})
weekly = pytest.mark.skipif(PROFILE.max_examples < 1000,
                            reason="a sweep of every field: HYPOTHESIS_PROFILE=long, the weekly CI job")


def every(paths, values=SWEEP_VALUES):
    return [Mutation(path, value) for path in paths for value in values]


def sweep(check, changes):
    """check([change]) for each change; one failure that lists them all, grouped by cause."""
    failures = defaultdict(list)
    for change in changes:
        try:
            check([change])
        except AssertionError as exc:
            message = str(exc).replace(repr([change]), "[...]")
            cause = re.search(r"internal error in .*|live Markdown: .*", message)
            failures[cause.group() if cause else message.split("\n")[0]].append(change)
    assert not failures, f"{sum(map(len, failures.values()))} failures:\n" + "\n".join(
        f"{cause}\n    {found[:6]}{f' and {len(found) - 6} more' if len(found) > 6 else ''}"
        for cause, found in failures.items())


@weekly
@pytest.mark.parametrize("name", list(SEEDS))
def test_every_field_of_a_results_file_through_render(tmp_path, name):
    sweep(functools.partial(check_render_changes, tmp_path, name), every(paths_of(name)))


@weekly
def test_every_field_of_a_suite(tmp_path):
    sweep(functools.partial(check_suite_changes, tmp_path), every(SUITE_PATHS))


@weekly
@pytest.mark.parametrize("manifest", ["bundle.json", "shard.json"])
def test_every_field_of_an_artifact_through_its_poster(tmp_path, manifest):
    check = functools.partial(check_post_changes if manifest == "bundle.json" else check_report_changes,
                              tmp_path, "head-vs-base")
    paths = artifact_paths("head-vs-base", manifest)
    # The manifest with every kind of value; the results, read as render reads them, with fewer.
    sweep(check, every([p for p in paths if p[0] == manifest])
          + every([p for p in paths if p[0] != manifest], values=(None, "x", [1], HOSTILE[0])))
