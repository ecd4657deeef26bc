"""Reading a mapping of settings (a suite's, or one of its `dataset:`, `builds:`, `disturbance:`,
`head_vs_base:` or case mappings) into the fields of a dataclass, driven by those fields.

A field's type says what its value must be: `int` an integer, `float` a number, `bool` true or false,
`str` a string, `list[str]` a list, a dataclass a nested mapping read the same way. Its metadata, given
with `setting(...)`, adds what a type cannot say: a `minimum`, the `choices`, a `read` function for a
value of a shape of its own. Its default is the dataclass's, written there once; a caller may give
defaults of its own (a case's warmup is its suite's). A key that is missing or null takes the default.
A nested dataclass with a `check(where)` method is checked after it is built; a ValueError it raises
names the field. Plain data: every layer may read it.
"""

from __future__ import annotations

import dataclasses
import math

from speedstats.errors import UserError
from speedstats.text import did_you_mean, one_line, shown

MAX_INTEGER = 2**31 - 1
REQUIRED = dataclasses.MISSING


def setting(default=dataclasses.MISSING, *, factory=dataclasses.MISSING, minimum=None, choices=None,
            read=None, section=False):
    """A dataclass field with what the reader checks beyond its type. minimum: the least number it takes;
    choices: the values it takes (for a list, each item); read: read(value, where, name) -> value, for a
    value of a shape of its own; section: a nested mapping whose errors say `where: NAME: field 'x'`
    rather than `where: field 'NAME.x'`."""
    metadata = {"minimum": minimum, "choices": choices, "read": read, "section": section}
    return dataclasses.field(default=default, default_factory=factory, metadata=metadata)


def default_of(field):
    """The dataclass default of a field, or REQUIRED."""
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


def read_settings(cls, data, where, prefix="", defaults=None, skip=(), ignore=()):
    """{name: value} of every field of the dataclass cls but those in skip, read from the mapping data.

    where starts every error message, prefix names a nested field in it (`disturbance.`); defaults
    replace the dataclass's; keys in ignore are accepted and not read (skip's too).
    """
    if not isinstance(data, dict):
        raise UserError(f"{where}: must be a mapping")
    fields = dataclasses.fields(cls)
    check_known(data, [f.name for f in fields] + list(ignore), where, prefix)
    defaults = defaults or {}
    values = {}
    for field in fields:
        if field.name in skip:
            continue
        default = defaults[field.name] if field.name in defaults else default_of(field)
        given = data.get(field.name)
        values[field.name] = read_value(given, field, where, prefix, default)
    return values


_SCALARS = {"int": int, "float": float, "bool": bool, "str": str}


def _kind(field):
    """What a field holds, from its annotation (a string under `from __future__ import annotations`, so
    read without evaluating it: `int | None` is read on every Python the package runs on): int, float,
    bool, str, list, a dataclass (its default's), or None."""
    default = default_of(field)
    if dataclasses.is_dataclass(default):
        return type(default)
    annotation = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", "")
    base = annotation.split("|")[0].strip()
    return list if base.startswith("list") else _SCALARS.get(base)


def read_value(value, field, where, prefix, default):
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
        return read_nested(kind, value, where, field.name, prefix, section=meta.get("section", False))
    if kind is bool:
        if not isinstance(value, bool):
            raise UserError(f"{where}: field '{name}' must be true or false, got {shown(value)}")
    elif kind in (int, float):
        value = number(value, name, where, integer=kind is int, minimum=meta.get("minimum"))
    elif kind is str:
        if not isinstance(value, str):
            raise UserError(f"{where}: field '{name}' must be a string, got {shown(value)}")
    elif kind is list:
        choices = meta.get("choices")
        if not isinstance(value, list) or (choices and any(item not in choices for item in value)):
            raise UserError(f"{where}: field '{name}' must be a list of {', '.join(choices)}, got "
                            f"{shown(value)}")
        return list(value)
    else:
        raise TypeError(f"{name}: no reader for {field.type!r}; give it read=")
    choices = meta.get("choices")
    if choices and value not in choices:
        raise UserError(f"{where}: field '{name}' must be one of {', '.join(choices)}, got {shown(value)}")
    return value


def read_nested(cls, data, where, name, prefix="", section=False):
    """A nested mapping as an instance of the dataclass cls, checked by its check(where) if it has one."""
    full = f"{prefix}{name}"
    if not isinstance(data, dict):
        raise UserError(f"{where}: field '{full}' must be a mapping")
    inner_where, inner_prefix = (f"{where}: {full}", "") if section else (where, f"{full}.")
    values = read_settings(cls, data, inner_where, inner_prefix, ignore=getattr(cls, "DERIVED_FIELDS", ()))
    built = cls(**values)
    if hasattr(built, "check"):
        try:
            built.check(f"{where}: {full}")
        except ValueError as exc:
            raise UserError(str(exc)) from None
    return built


def number(value, name, where, integer=False, minimum=None):
    """A number (an integer with integer) from outside: finite, of sensible size, at least minimum."""
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        raise UserError(f"{where}: field '{name}' must be {kind}, got {shown(value)}")
    try:
        finite = math.isfinite(float(value))
    except OverflowError:
        finite = False
    if not finite or (integer and abs(value) > MAX_INTEGER):
        raise UserError(f"{where}: field '{name}' must be a finite number of sensible size, "
                        f"got {shown(value)}")
    if minimum is not None and value < minimum:
        raise UserError(f"{where}: field '{name}' must be at least {minimum:g}, got {shown(value)}")
    return value
