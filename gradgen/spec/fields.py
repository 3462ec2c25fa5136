"""The field types of the spec model, each with the check that validates it.

Receives: the plain value the YAML reader produced for one field (a dtype or a set of
them, a dim, a shape, a domain, a doc text, a name, an expression).
Returns: pydantic ``Annotated`` types (:data:`DTypeSet`, :data:`DimDecl`,
:data:`ShapeDecl`, :data:`Domain`, :data:`DocText`, :data:`Name`, :data:`Expression`)
whose checks pass a value on (a domain shorthand as its ``(low, high)`` pair) or raise
``ValueError`` with one message for the field; :data:`BATCH` and :data:`DOMAINS`, the
spellings they accept; :func:`describe`, how a message quotes a value the user wrote.
"""

from __future__ import annotations

import difflib
from typing import Annotated, Any, Optional

from pydantic import AfterValidator, BeforeValidator, Field, WithJsonSchema

from ..naming import IDENTIFIER_RE
from ..safe import unsafe
from .dtypes import DTYPES, FLOAT_DTYPES, FLOATING
from .limits import MAX_DIM, MAX_EXPRESSION_CHARS, MAX_RANK


def describe(value: Any) -> str:
    """How a message quotes a value the user wrote: null, true or false, "a mapping" or
    "a list" for a collection, else its repr (cut to 60 characters)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return "a mapping" if isinstance(value, dict) else "a list"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_dtype_set(value: Any) -> Any:
    """One dtype, ``floating``, or a list of distinct float dtypes; one message for
    anything else (not one per alternative)."""
    if isinstance(value, str) and (value in DTYPES or value == FLOATING):
        return value
    if value == []:
        raise ValueError("a list of dtypes must not be empty")
    if isinstance(value, list) and all(isinstance(d, str) for d in value):
        for d in value:
            if d not in FLOAT_DTYPES:
                hint = difflib.get_close_matches(d, FLOAT_DTYPES, n=1)
                raise ValueError(
                    f"a list of dtypes holds float dtypes ({', '.join(FLOAT_DTYPES)}); got "
                    f"{describe(d)}" + (f"; did you mean '{hint[0]}'?" if hint else "")
                )
        twice = [d for i, d in enumerate(value) if d in value[:i]]
        if twice:
            raise ValueError(f"dtype '{twice[0]}' is listed twice")
        return value
    hint = difflib.get_close_matches(value, DTYPES + (FLOATING,), n=1) if isinstance(
        value, str) else []
    raise ValueError(
        f"expected a dtype ({', '.join(DTYPES)}), 'floating' (every float dtype) or a list "
        f"of float dtypes; got {describe(value)}"
        + (f"; did you mean '{hint[0]}'?" if hint else "")
    )


DTypeSet = Annotated[Any, BeforeValidator(_check_dtype_set)]


BATCH = "..."  # a shape's first entry: any number of leading batch dims


def _check_dim(value: Any) -> Any:
    if value is None or value == BATCH:
        return value
    if isinstance(value, bool):
        raise ValueError(f"a dim is a size >= 0, null or a name; got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"a dim size must be >= 0; got {value}")
        if value > MAX_DIM:
            raise ValueError(f"a dim size must be at most 2**40; got {value}")
        return value
    if isinstance(value, str):
        if not IDENTIFIER_RE.match(value):
            raise ValueError(
                f"a dim name must be an identifier like 'batch'; got {value!r}"
            )
        return value
    raise ValueError(f"a dim is a size >= 0, null or a name; got {value!r}")


DimDecl = Annotated[
    Any,
    BeforeValidator(_check_dim),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 0},
                {"type": "null"},
                {"type": "string", "pattern": IDENTIFIER_RE.pattern},
                {"const": BATCH},
            ]
        }
    ),
]


def _check_shape(value: list) -> list:
    if BATCH in value[1:]:
        raise ValueError(
            "'...' (any number of batch dims) may only be a shape's first entry, as in "
            f"[..., n, n]; got it at index {value.index(BATCH, 1)}"
        )
    return value


ShapeDecl = Annotated[
    list[DimDecl], Field(max_length=MAX_RANK), AfterValidator(_check_shape)
]


Name = Annotated[str, Field(pattern=IDENTIFIER_RE.pattern)]
Expression = Annotated[str, Field(min_length=1, max_length=MAX_EXPRESSION_CHARS)]


# `domain:` shorthands, as the ranges the tests and the build-time check draw from
DOMAINS = {"positive": (0.1, 3.0), "negative": (-3.0, -0.1)}
MAX_DOMAIN = 1e300  # a bound beyond this is not a range a test can draw from


def _check_domain(value: Any) -> Any:
    """``positive``, ``negative`` or ``[low, high]`` (finite numbers, low < high), as a
    ``(low, high)`` pair of floats."""
    if isinstance(value, str):
        if value in DOMAINS:
            return DOMAINS[value]
        hint = difflib.get_close_matches(value, list(DOMAINS), n=1)
        raise ValueError(
            f"expected [low, high], 'positive' or 'negative'; got {describe(value)}"
            + (f"; did you mean '{hint[0]}'?" if hint else "")
        )
    if isinstance(value, list) and len(value) != 2:
        raise ValueError(f"a domain [low, high] has two numbers; got {len(value)}")
    numbers = isinstance(value, list) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    if isinstance(value, list) and not numbers:
        bad = next(v for v in value if not isinstance(v, (int, float)) or isinstance(v, bool))
        raise ValueError(f"a domain's bounds are numbers; got {describe(bad)}")
    if not numbers:
        raise ValueError(
            f"expected [low, high], 'positive' or 'negative'; got {describe(value)}"
        )
    low, high = (float(v) for v in value)
    if not all(abs(v) <= MAX_DOMAIN for v in (low, high)):
        raise ValueError(f"a domain's bounds are finite numbers of magnitude at most "
                         f"1e300; got [{low:g}, {high:g}]")
    if not low < high:
        raise ValueError(f"a domain [low, high] needs low < high; got [{low:g}, {high:g}]")
    return (low, high)


Domain = Annotated[
    Any,
    BeforeValidator(_check_domain),
    WithJsonSchema({"anyOf": [
        {"enum": sorted(DOMAINS)},
        {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2},
    ]}),
]


def _invisible(ch: str) -> bool:
    """Control, format (bidirectional marks and overrides, zero-width, tags),
    surrogate, private-use, unassigned and blank characters (:func:`gradgen.safe.unsafe`)
    other than newline and tab: they can hide or reorder code in a reviewer's view
    ("Trojan Source") or break the output."""
    return ch not in "\n\t" and unsafe(ch)


def _check_text(value: Any) -> Any:
    if isinstance(value, str):
        bad = [c for c in value if _invisible(c)]
        if bad:
            raise ValueError(
                f"doc text contains the invisible or control character U+{ord(bad[0]):04X}; "
                "only printable text, newlines and tabs are allowed"
            )
    return value


DocText = Annotated[Optional[str], BeforeValidator(_check_text)]
