"""`speedstats suite`: the suite a run would use, every case with every field, for a user writing one.

It prints YAML that reads back as the same suite: each field with its value, marked `# default` when
the suite does not set it and `# the suite's` when a case takes the suite-wide value.

`speedstats schema results`: the JSON Schema of results.json, made from the declaration the reader reads
it by (speedstats.results), for other tools and editors.
"""

import dataclasses
import json

import yaml

from speedstats.fsutil import write_stdout
from speedstats.results import results_schema
from speedstats.settings import setting_fields
from speedstats.suite import SUITE_WIDE, suite_data, suite_from_dict

SCHEMAS = {"results": results_schema}

DEFAULT = "  # default"
SUITE_WIDE_MARK = "  # the suite's"


def flow(value):
    """A value as one line of YAML (flow style)."""
    text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, allow_unicode=True, width=1 << 20)
    text = text.strip()
    return text[: -len("\n...")] if text.endswith("\n...") else text  # a scalar ends its document


def field_lines(obj, given, indent, wide=()):
    """`name: value` for each field of a dataclass instance; given: the keys its mapping sets."""
    lines = []
    for f in setting_fields(obj):
        if f.name == "cases":
            continue
        value = getattr(obj, f.name)
        mark = "" if f.name in given else SUITE_WIDE_MARK if f.name in wide else DEFAULT
        if dataclasses.is_dataclass(value):
            nested = given.get(f.name) if isinstance(given.get(f.name), dict) else {}
            lines.append(f"{indent}{f.name}:{mark}")
            lines += field_lines(value, nested, indent + "  ")
        else:
            lines.append(f"{indent}{f.name}: {flow(value)}{mark}")
    return lines


def describe(suite, data, where):
    """The suite as the YAML `speedstats suite` prints."""
    by_id = {c.get("id"): c for c in data.get("cases") or [] if isinstance(c, dict)}
    lines = [f"# The suite {suite.name!r} read from {where}: every field with its value. '# default': the",
             "# suite does not set it; \"# the suite's\": the case takes the suite-wide value."]
    lines += field_lines(suite, data, "")
    lines.append("cases:")
    for case in suite.cases:
        case_lines = field_lines(case, by_id.get(case.id, {}), "    ", wide=SUITE_WIDE)
        lines += ["  - " + case_lines[0].lstrip()] + case_lines[1:]
    return "\n".join(lines) + "\n"


def suite_command(args):
    data, where = suite_data(args.suite, args.profile)
    write_stdout(describe(suite_from_dict(data, where), data, where))
    return 0


def register(subparsers):
    p = subparsers.add_parser(
        "suite",
        help="print the suite's cases and every field with its value, defaults marked",
        description="Print the suite a run would use (the built-in profile, or --suite FILE merged onto "
        "the profile it extends) as YAML: the suite-wide fields, then each case with every field and its "
        "value; '# default' marks a value the suite does not set. Exit 0, or 2 on a bad suite.",
    )
    p.add_argument("--suite", metavar="FILE", help="suite YAML (may extend a profile with 'extends:')")
    p.add_argument("--profile", metavar="NAME",
                   help="built-in suite (default: default); with --suite, the profile the file extends")
    p.set_defaults(func=suite_command)

    schema = subparsers.add_parser(
        "schema", help="print the JSON Schema of a file speedstats reads (results: results.json)",
        description="Print the JSON Schema (draft 2020-12) of results.json, made from the same declaration "
        "speedstats reads it by: each field with its type, bounds and allowed values. Exit 0.")
    schema.add_argument("what", choices=sorted(SCHEMAS), help="the file: results (results.json)")
    schema.set_defaults(func=schema_command)


def schema_text(what):
    return json.dumps(SCHEMAS[what](), indent=2, ensure_ascii=False) + "\n"


def schema_command(args):
    write_stdout(schema_text(args.what))
    return 0
