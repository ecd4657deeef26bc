"""The comment as GitHub lays it out, not only its bytes: read back with markdown-it-py (CommonMark with
tables, as GitHub's renderer is), each line after the Speed stats block is a paragraph of its own (a
single newline would run two lines together into one), every table is a table, and the <details> blocks
open and close where the templates put them."""

import json
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from speedstats import results as results_model
from speedstats.render import render_speed_stats
from speedstats.verdict import judge

DATA = Path(__file__).parent / "data"
PARSER = MarkdownIt("commonmark").enable("table")


def comment(name):
    results = results_model.load(DATA / name)
    return render_speed_stats(results, None, judge(results, None))


def tokens_outside_code(body):
    for token in PARSER.parse(body):
        yield token
        yield from token.children or ()


@pytest.mark.parametrize("name", ["head-vs-base-results.json", "smoke-results.json"])
def test_each_line_after_the_block_is_its_own_paragraph(name):
    body = comment(name)
    assert not [t for t in tokens_outside_code(body) if t.type == "softbreak"], "lines run together"
    after = body.split("</details>", 1)[1]
    lines = [line for line in after.splitlines()
             if line.strip() and not line.startswith(("|", "<"))]  # tables and the method's <details>
    assert sum(t.type == "paragraph_open" for t in PARSER.parse(after)) == len(lines)


def test_every_table_is_a_table_and_the_details_close_where_they_open():
    body = comment("head-vs-base-results.json")
    tokens = PARSER.parse(body)
    headers = [line for line in body.splitlines() if line.startswith("| ") and "| ---" not in line]
    rows = sum(t.type == "tr_open" for t in tokens)
    assert sum(t.type == "table_open" for t in tokens) == 3 and rows == len(headers)
    html = "".join(t.content for t in tokens if t.type == "html_block")
    assert html.count("<details>") == html.count("</details>") == 2
    fence = next(t for t in tokens if t.type == "fence")
    assert fence.content.startswith("GPU Name: ")
    assert json.loads((DATA / "head-vs-base-results.json").read_text())["gpu_name"] in fence.content
