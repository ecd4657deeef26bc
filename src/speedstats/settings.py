"""Reading a mapping of settings (a suite's, or one of its `dataset:`, `builds:`, `disturbance:`,
`head_vs_base:` or case mappings) into the fields of a dataclass, driven by those fields.

A field's type says what its value must be: `int` an integer, `float` a number, `bool` true or false,
`str` a string, `list[str]` a list, a dataclass a nested mapping read the same way. Its metadata, given
with `setting(...)`, adds what a type cannot say: a `minimum`, the `choices`, a `read` function for a
value of a shape of its own. Its default is the dataclass's, written there once; a caller may give
defaults of its own (a case's warmup is its suite's). A key that is missing or null takes the default.
A nested dataclass with a `check(where)` method is checked after it is built; a ValueError it raises
names the field. Plain data: every layer may read it.

The same declarations read results.json (speedstats.results): there a field may also give a `maximum`,
an exclusive lower bound (`above`), the dataclass of a nested record or of a list's items or a mapping's
values (`record`), the keys a mapping takes (`keys`), the most items a list holds (`max_items`), and the
JSON Schema of a value read by `read` (`schema`); a dataclass with OPEN_RECORD = True ignores keys it
does not declare (results written by a newer version). `json_schema(cls)` is the JSON Schema of the
mappings `read_settings(cls, ...)` accepts, made from the same declarations.
"""

from __future__ import annotations

import dataclasses
import math

from speedstats.errors import UserError
from speedstats.text import did_you_mean, one_line, shown

MAX_INTEGER = 2**31 - 1
REQUIRED = dataclasses.MISSING


def setting(default=dataclasses.MISSING, *, factory=dataclasses.MISSING, minimum=None, choices=None,
            read=None, section=False, maximum=None, above=None, record=None, keys=None, max_items=None,
            schema=None, required=False):
    """A dataclass field with what the reader checks beyond its type. minimum: the least number it takes;
    choices: the values it takes (for a list, each item); read: read(value, where, name) -> value, for a
    value of a shape of its own (schema: its JSON Schema); section: a nested mapping whose errors say
    `where: NAME: field 'x'` rather than `where: field 'NAME.x'`. maximum, above: the most a number may
    be, and what it must be above; record: the dataclass of a nested mapping, of each item of a list,
    or of each value of a mapping; keys: the keys a mapping takes; max_items: the most items a list
    holds; required: the reader needs it though the dataclass has a default."""
    metadata = {"minimum": minimum, "choices": choices, "read": read, "section": section,
                "maximum": maximum, "above": above, "record": record, "keys": keys, "max_items": max_items,
                "schema": schema, "required": required}
    return dataclasses.field(default=default, default_factory=factory, metadata=metadata)


def default_of(field):
    """The dataclass default of a field, or REQUIRED."""
    if field.metadata.get("required"):
        return REQUIRED
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return REQUIRED


def check_known(data, known, where, prefix=""):
    """UserError naming the first key of data that is not known, with the known key closest to it."""
    unknown = sorted(set(data) - set(known), key=str)
    if unknown:
        key = one_line(unknown[0], 60)
        raise UserError(f"{where}: unknown field '{prefix}{key}'{did_you_mean(str(unknown[0]), known)}")


def setting_fields(cls):
    """The fields of a dataclass (or of an instance) that are settings: those its __init__ takes (one it
    does not is the record's own bookkeeping, never read from a mapping)."""
    return [f for f in dataclasses.fields(cls) if f.init]


def read_settings(cls, data, where, prefix="", defaults=None, skip=(), ignore=(), nest=None):
    """{name: value} of every field of the dataclass cls but those in skip and those its __init__ does not
    take (a record's own bookkeeping, not a setting), read from the mapping data.

    where starts every error message, prefix names a nested field in it (`disturbance.`); defaults
    replace the dataclass's; keys in ignore are accepted and not read (skip's too). nest: how the
    errors of nested records name them, None for `where: field 'NAME.x'`, or the text joining where
    and the record's name (`results: cases[0]`, then `.paired`: `results: cases[0].paired: field 'x'`).
    """
    if not isinstance(data, dict):
        raise UserError(f"{where}: must be a mapping")
    fields = setting_fields(cls)
    if not getattr(cls, "OPEN_RECORD", False):
        check_known(data, [f.name for f in fields] + list(ignore), where, prefix)
    defaults = defaults or {}
    values = {}
    for field in fields:
        if field.name in skip:
            continue
        default = defaults[field.name] if field.name in defaults else default_of(field)
        given = data.get(field.name)
        values[field.name] = read_value(given, field, where, prefix, default, nest)
    return values


_SCALARS = {"int": int, "float": float, "bool": bool, "str": str}


def _annotation_kind(annotation):
    """int, float, bool, str, list, dict or None from an annotation's text (`int | None`, `list[str]`)."""
    base = annotation.split("|")[0].strip()
    if base.startswith("list"):
        return list
    if base.startswith("dict"):
        return dict
    return _SCALARS.get(base)


def _inner_annotation(annotation):
    """The annotation of a list's items or a mapping's values: `float` of `list[float]`, `str | None` of
    `dict[str, str | None]`; '' for a bare list or dict."""
    base = annotation.split("|")[0].strip() if "[" not in annotation else annotation.strip()
    if "[" not in base:
        return ""
    inner = base[base.index("[") + 1: base.rindex("]")]
    return inner.split(",", 1)[1].strip() if base.startswith("dict") else inner.strip()


def _annotation(field):
    return field.type if isinstance(field.type, str) else getattr(field.type, "__name__", "")


def _kind(field):
    """What a field holds, from its annotation (a string under `from __future__ import annotations`, so
    read without evaluating it: `int | None` is read on every Python the package runs on): int, float,
    bool, str, list, dict, a dataclass (its default's or its `record`), or None."""
    default = default_of(field)
    if dataclasses.is_dataclass(default):
        return type(default)
    annotation = _annotation(field)
    kind = _annotation_kind(annotation)
    record = field.metadata.get("record")
    if record is not None and (kind is None or (kind is dict and "[" not in annotation)):
        return record  # a nested record (`dict | None` with a record: one record kept as a mapping)
    return kind


def read_value(value, field, where, prefix, default, nest=None):
    """One field's value from data (None: not given)."""
    name = f"{prefix}{field.name}"
    if value is None:
        if default is REQUIRED:
            raise UserError(f"{where}: missing field '{name}'")
        return default
    meta = field.metadata
    if meta.get("read"):
        return meta["read"](value, where, name)
    kind = _kind(field)
    if dataclasses.is_dataclass(kind):
        return read_nested(kind, value, where, field.name, prefix, section=meta.get("section", False),
                           nest=nest)
    if nest is not None and kind in (list, dict):
        return _read_collection(value, kind, field, where, name, nest)
    return _read_scalar(value, kind, meta, where, name, field.type)


def _read_collection(value, kind, field, where, name, nest):
    """A list or a mapping of a results record: each item (value) read as its annotation or `record`
    says, named `name[i]` (`name.key`) in errors."""
    meta = field.metadata
    record, inner = meta.get("record"), _inner_annotation(_annotation(field))
    item_meta = {"minimum": meta.get("minimum"), "maximum": meta.get("maximum"), "above": meta.get("above"),
                 "choices": meta.get("choices")}
    optional = "None" in inner.split("|")[1:] if "|" in inner else False
    item_kind = _annotation_kind(inner) if inner else None

    def item(entry, item_name):
        if record is not None:
            named = entry.get("id") if isinstance(entry, dict) and kind is list else None
            named = f" ({one_line(named, 60)})" if isinstance(named, str) else ""
            return read_record(record, entry, f"{where}{nest}{item_name}{named}", nest=".")
        if entry is None and optional:
            return None
        if item_kind is None:  # a bare list or dict: any JSON value
            return entry
        if entry is None:
            raise UserError(f"{where}: field '{item_name}' must not be null")
        return _read_scalar(entry, item_kind, item_meta, where, item_name, inner)

    if kind is list:
        if not isinstance(value, list):
            raise UserError(f"{where}: field '{name}' must be a list, got {shown(value)}")
        most = meta.get("max_items")
        if most is not None and len(value) > most:
            raise UserError(f"{where}: field '{name}' has {len(value)} entries, at most {most}")
        return [item(entry, f"{name}[{i}]") for i, entry in enumerate(value)]
    if not isinstance(value, dict):
        raise UserError(f"{where}: field '{name}' must be a mapping, got {shown(value)}")
    keys = meta.get("keys")
    for key in value:
        if keys is not None and key not in keys:
            raise UserError(f"{where}: field '{name}' has an unknown key {shown(key)} (one of "
                            f"{', '.join(keys)}){did_you_mean(key, keys)}")
    return {key: item(entry, f"{name}.{one_line(key, 60)}") for key, entry in value.items()}


def _read_scalar(value, kind, meta, where, name, annotation):
    """A bool, number or string (or a suite's list of choices), checked against its metadata."""
    if kind is bool:
        if not isinstance(value, bool):
            raise UserError(f"{where}: field '{name}' must be true or false, got {shown(value)}")
    elif kind in (int, float):
        value = number(value, name, where, integer=kind is int, minimum=meta.get("minimum"),
                       maximum=meta.get("maximum"), above=meta.get("above"))
    elif kind is str:
        if not isinstance(value, str):
            raise UserError(f"{where}: field '{name}' must be a string, got {shown(value)}")
    elif kind is list:
        choices = meta.get("choices")
        if not isinstance(value, list) or (choices and any(item not in choices for item in value)):
            of = f" of {', '.join(choices)}" if choices else ""
            raise UserError(f"{where}: field '{name}' must be a list{of}, got {shown(value)}")
        return list(value)
    elif kind is dict:
        if not isinstance(value, dict):
            raise UserError(f"{where}: field '{name}' must be a mapping, got {shown(value)}")
        return dict(value)
    else:
        raise TypeError(f"{name}: no reader for {annotation!r}; give it read=")
    choices = meta.get("choices")
    if choices and value not in choices:
        raise UserError(f"{where}: field '{name}' must be one of {', '.join(choices)}, got {shown(value)}"
                        f"{did_you_mean(value, choices)}")
    return value


def read_nested(cls, data, where, name, prefix="", section=False, nest=None):
    """A nested mapping as an instance of the dataclass cls, checked by its check(where) if it has one."""
    full = f"{prefix}{name}"
    if not isinstance(data, dict):
        got = f", got {shown(data)}" if nest is not None else ""
        raise UserError(f"{where}: field '{full}' must be a mapping{got}")
    if nest is not None:
        return read_record(cls, data, f"{where}{nest}{full}", nest=".")
    inner_where, inner_prefix = (f"{where}: {full}", "") if section else (where, f"{full}.")
    values = read_settings(cls, data, inner_where, inner_prefix, ignore=getattr(cls, "DERIVED_FIELDS", ()))
    built = cls(**values)
    if hasattr(built, "check"):
        try:
            built.check(f"{where}: {full}")
        except ValueError as exc:
            raise UserError(str(exc)) from None
    return built


def read_record(cls, data, where, nest=": "):
    """A record of results.json (a mapping) as an instance of the dataclass cls: every field read as
    declared, its nested records named `where.NAME` in errors, then its check(where) if it has one (a
    UserError or ValueError naming the field)."""
    if not isinstance(data, dict):
        raise UserError(f"{where}: must be a mapping, got {shown(data)}")
    values = read_settings(cls, data, where, ignore=getattr(cls, "DERIVED_FIELDS", ()), nest=nest)
    built = cls(**values)
    if hasattr(built, "check"):
        try:
            built.check(where)
        except ValueError as exc:
            raise UserError(f"{where}: {one_line(exc, 200)}") from None
    if getattr(cls, "AS_MAPPING", False):  # checked, and kept as the mapping it was
        return {key: values.get(key, value) for key, value in data.items()}
    return built


def number(value, name, where, integer=False, minimum=None, maximum=None, above=None):
    """A number (an integer with integer) from outside: finite, of sensible size, at least minimum, at
    most maximum, above `above`."""
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        raise UserError(f"{where}: field '{name}' must be {kind}, got {shown(value)}")
    try:
        finite = math.isfinite(float(value))
    except OverflowError:
        finite = False
    if not finite or (integer and maximum is None and abs(value) > MAX_INTEGER):
        raise UserError(f"{where}: field '{name}' must be a finite number of sensible size, "
                        f"got {shown(value)}")
    below_minimum = minimum is not None and value < minimum
    not_above = above is not None and value <= above
    if below_minimum or not_above or (maximum is not None and value > maximum):
        low, high = _bound(minimum), _bound(maximum)
        lower = (f"at least {low}" if minimum is not None
                 else f"above {_bound(above)}" if above is not None else None)
        if maximum is None:
            bounds = lower
        elif lower is None:
            bounds = f"at most {high}"
        else:
            bounds = f"between {low} and {high}" if minimum is not None else f"{lower} and at most {high}"
        raise UserError(f"{where}: field '{name}' must be {bounds}, got {shown(value)}")
    return value


def _bound(value):
    return str(value) if isinstance(value, int) else f"{value:g}" if value is not None else None


_JSON_TYPES = {int: "integer", float: "number", bool: "boolean", str: "string", list: "array", dict: "object"}


def json_schema(cls, title=None):
    """The JSON Schema (draft 2020-12) of the mappings read_settings(cls, ...) accepts, nested records
    under $defs by their class name."""
    defs = {}
    root = _record_schema(cls, defs)
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema"}
    if title:
        schema["title"] = title
    schema.update(root)
    if defs:
        schema["$defs"] = dict(sorted(defs.items()))
    return schema


def _record_schema(cls, defs):
    properties, required = {}, []
    for field in setting_fields(cls):
        properties[field.name] = _field_schema(field, defs)
        if default_of(field) is REQUIRED:
            required.append(field.name)
    for name in getattr(cls, "DERIVED_FIELDS", ()):
        properties.setdefault(name, {"description": "written for the reader, not read"})
    schema = {"type": "object", "properties": properties}
    if cls.__doc__ and not cls.__doc__.startswith(f"{cls.__name__}("):  # not dataclass's own signature
        schema = {"description": " ".join(cls.__doc__.split()), **schema}
    if required:
        schema["required"] = required
    if not getattr(cls, "OPEN_RECORD", False):
        schema["additionalProperties"] = False
    return schema


def _ref(cls, defs):
    if cls.__name__ not in defs:
        defs[cls.__name__] = {}  # a placeholder while its own fields are made (a record may nest itself)
        defs[cls.__name__] = _record_schema(cls, defs)
    return {"$ref": f"#/$defs/{cls.__name__}"}


def _value_schema(kind, meta, annotation, defs):
    if dataclasses.is_dataclass(kind):
        return _ref(kind, defs)
    if kind in (list, dict):
        record, inner = meta.get("record"), _inner_annotation(annotation)
        if record is not None:
            items = _ref(record, defs)
        elif inner:
            item_meta = {k: meta.get(k) for k in ("minimum", "maximum", "above", "choices")}
            items = _value_schema(_annotation_kind(inner), item_meta, inner, defs)
            if "None" in inner.split("|")[1:]:
                items = {"anyOf": [items, {"type": "null"}]}
        else:
            items = {}
        if kind is list:
            schema = {"type": "array", "items": items}
            if meta.get("max_items") is not None:
                schema["maxItems"] = meta["max_items"]
            return schema
        schema = {"type": "object", "additionalProperties": items}
        if meta.get("keys"):
            schema["propertyNames"] = {"enum": list(meta["keys"])}
        return schema
    schema = {"type": _JSON_TYPES[kind]} if kind in _JSON_TYPES else {}
    if kind in (int, float):
        if kind is int:
            schema.update(minimum=-MAX_INTEGER, maximum=MAX_INTEGER)
        if meta.get("minimum") is not None:
            schema["minimum"] = meta["minimum"]
        if meta.get("maximum") is not None:
            schema["maximum"] = meta["maximum"]
        if meta.get("above") is not None:
            schema["exclusiveMinimum"] = meta["above"]
    if meta.get("choices") and kind is not list:
        schema["enum"] = list(meta["choices"])
    return schema


def _field_schema(field, defs):
    meta = field.metadata
    if meta.get("read"):
        schema = dict(meta.get("schema") or {})
    else:
        schema = _value_schema(_kind(field), meta, _annotation(field), defs)
        if _kind(field) is list and meta.get("choices") and not meta.get("record"):
            schema["items"] = {"enum": list(meta["choices"])}
    if default_of(field) is not REQUIRED and schema:
        schema = {"anyOf": [schema, {"type": "null"}]}
    return schema
