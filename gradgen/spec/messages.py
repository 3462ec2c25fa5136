"""Word the problems found in a spec: pydantic's errors as gradgen's messages, and a
:class:`~gradgen.errors.Diagnostic` for any spec key path.

Receives: one error of pydantic's ``ValidationError.errors()``; or a spec key path, a
message, the spec's plain data and the positions the YAML reader recorded.
Returns: :func:`pydantic_message`, the key path, the message (with a did-you-mean hint
and the allowed keys for an unknown key) and whether it points at the key rather than
the value; :func:`diagnostic_at` and :func:`op_field`, the op (by name where it has a
valid one) and the field a key path names, :func:`diagnostic_at` with its position.
"""

from __future__ import annotations

import difflib
import typing
from typing import Annotated, Any, Union

from pydantic import BaseModel

from ..errors import Diagnostic
from ..naming import IDENTIFIER_RE
from .fields import describe
from .limits import MAX_EXPRESSION_CHARS
from .model import ModuleSpec
from .positions import Loc, format_key_path, locate
from .yaml_reader import value_at


def _model_at(loc: Loc) -> type[BaseModel] | None:
    """The model class whose field set applies at ``loc`` (for did-you-mean hints)."""
    current: Any = ModuleSpec
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            info = current.model_fields.get(part) if isinstance(part, str) else None
            if info is None:
                return None
            current = info.annotation
        elif typing.get_origin(current) is list and isinstance(part, int):
            current = typing.get_args(current)[0]
        elif typing.get_origin(current) is dict and isinstance(part, str):
            current = typing.get_args(current)[1]
        else:
            return None
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(tp: Any) -> Any:
    while True:
        origin = typing.get_origin(tp)
        if origin is Annotated:
            tp = typing.get_args(tp)[0]
        elif origin is Union:
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp
            tp = args[0]
        else:
            return tp


_TYPE_NAMES = {
    "string_type": "a string",
    "int_type": "an integer",
    "bool_type": "true or false",
    "dict_type": "a mapping",
    "list_type": "a list",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}


def pydantic_message(err: dict, data: Any) -> tuple[Loc, str, bool]:
    """(loc, message, at_key) for one pydantic error."""
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and "[" in p))
    kind = err["type"]
    value = err.get("input")
    if kind == "missing":
        return loc[:-1], f"missing required key '{loc[-1]}'", False
    if kind == "extra_forbidden":
        model = _model_at(loc[:-1])
        allowed = sorted(model.model_fields) if model else []
        hint = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        msg = f"unknown key '{loc[-1]}'"
        msg += f"; did you mean '{hint[0]}'?" if hint else ""
        if allowed:
            msg += f" (allowed: {', '.join(allowed)})"
        return loc, msg, True
    if kind in ("model_type", "model_attributes_type") and len(loc) == 4 and (
        loc[2] == "inputs"
    ):
        return loc, (
            "expected a shape list like [3, null] or a mapping {shape: ..., dtype: ..., "
            f"differentiable: ...}}; got {describe(value)}"
        ), False
    if kind in _TYPE_NAMES:
        return loc, f"expected {_TYPE_NAMES[kind]}, got {describe(value)}", False
    if kind == "literal_error":
        expected = err.get("ctx", {}).get("expected", "")
        return loc, f"expected one of {expected}; got {describe(value)}", False
    if kind == "string_pattern_mismatch":
        return (
            loc,
            f"expected an identifier (letters, digits, '_', starting with a letter); "
            f"got {describe(value)}",
            False,
        )
    if kind in ("too_short", "string_too_short"):
        return loc, f"must not be empty; got {describe(value)}", False
    if kind == "string_too_long":
        return loc, f"longer than {MAX_EXPRESSION_CHARS} characters", False
    if kind == "too_long":
        limit = err.get("ctx", {}).get("max_length")
        return loc, f"at most {limit} entries allowed; got {err.get('ctx', {}).get('actual_length')}", False
    if kind == "value_error":
        msg = str(err.get("ctx", {}).get("error", err["msg"]))
        return loc, msg, False
    return loc, f"{err['msg'][0].lower()}{err['msg'][1:]}; got {describe(value)}", False


def _op_label(data: Any, i: int) -> str:
    op = value_at(data, ("ops", i))
    name = op.get("name") if isinstance(op, dict) else None
    if isinstance(name, str) and IDENTIFIER_RE.match(name):
        return name
    return f"ops[{i}]"


def diagnostic_at(
    path: str,
    positions: dict,
    key_positions: dict,
    data: Any,
    loc: Loc,
    message: str,
    key: bool = False,
) -> Diagnostic:
    """Build a :class:`Diagnostic` for spec key path ``loc`` (op and field derived from it)."""
    location = locate(path, positions, key_positions, loc, key)
    if len(loc) >= 2 and loc[0] == "ops" and isinstance(loc[1], int):
        return Diagnostic(location, message, _op_label(data, loc[1]), format_key_path(loc[2:]))
    return Diagnostic(location, message, None, format_key_path(loc) or None)


def op_field(raw: Any, loc: Loc) -> tuple[str | None, str | None]:
    if len(loc) >= 2 and loc[0] == "ops" and isinstance(loc[1], int):
        return _op_label(raw, loc[1]), format_key_path(loc[2:]) or None
    return None, format_key_path(loc) or None
