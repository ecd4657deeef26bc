"""`speedstats schema results`: the JSON Schema of results.json, made from the declaration the reader
reads it by. The shipped copy in docs/ is the command's output; every results file the tests ship, and
the old bot's comments read back, validate against it (jsonschema); a file the reader refuses for a
field's type or bounds is refused by the schema too."""

import json
from pathlib import Path

import jsonschema
import pytest

from fakegithub import run_speedstats
from speedstats import results as results_model
from speedstats.parse import parse_speed_stats

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
SHIPPED = sorted(DATA.glob("*results*.json"))


@pytest.fixture(scope="module")
def validator():
    schema = results_model.results_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_command_prints_the_schema_shipped_in_the_docs(tmp_path):
    result = run_speedstats(["schema", "results"], {})
    assert (result.rc, result.err) == (0, "")
    assert result.out == (ROOT / "docs" / "results.schema.json").read_text(encoding="utf-8")
    assert json.loads(result.out)["$id"] == results_model.SCHEMA


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_the_shipped_results_validate(validator, path):
    data = json.loads(path.read_text(encoding="utf-8"))
    assert not list(validator.iter_errors(data))
    assert results_model.results_from_dict(data).cases  # and the reader reads them


@pytest.mark.parametrize("thread", ["pr-cu12-release", "pr-revert"])
def test_the_old_bots_comments_read_back_validate(validator, thread):
    results = parse_speed_stats((DATA / f"{thread}-thread.txt").read_text(encoding="utf-8"))
    assert not list(validator.iter_errors(json.loads(results.to_json())))


@pytest.mark.parametrize("path, value", [
    (("cases", 0, "paired", "min_effect"), "x"),
    (("cases", 0, "paired", "stages"), 5),
    (("cases", 0, "paired", "stages"), [None]),
    (("cases", 0, "attribution", "ops_device"), 5),
    (("cases", 0, "attribution", "rounds"), "10 @octocat"),
    (("cases", 0, "attribution", "places", 0, "base_ms"), "x"),
    (("cases", 0, "frameworks", "oneflow", "times"), 0),
    (("cases", 0, "kind"), "resnet5"),
    (("builds", "oneflow", "packages"), ["oneflow"]),
    (("machine", "preflight", "reasons"), "busy"),
])
def test_what_the_reader_refuses_the_schema_refuses(validator, path, value):
    data = json.loads((DATA / "head-vs-base-results.json").read_text(encoding="utf-8"))
    record = data
    for key in path[:-1]:
        record = record[key]
    record[path[-1]] = value
    assert list(validator.iter_errors(data))
    with pytest.raises(results_model.UserError):
        results_model.results_from_dict(data)
