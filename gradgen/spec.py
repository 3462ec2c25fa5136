"""Load and validate a spec file, keeping the position of every value.

Consumes: the bytes of a YAML spec (format: SPEC.md / the README's "Spec format").
Guarantees: :func:`load_spec` returns a :class:`SpecDocument` whose ``model`` is a
validated, frozen :class:`ModuleSpec` (every input in the long form, every dtype
resolved), or raises :class:`~gradgen.errors.SpecError` listing every problem found, each
with file:line:col, op and field. Nothing in the spec is executed: YAML is read with
PyYAML's *safe* composer (no tags beyond the standard scalar/collection ones, no aliases,
no merge keys, no duplicate keys), and expressions stay text until
:mod:`gradgen.expr` parses them with an allow-list.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
    model_validator,
)

from .errors import Diagnostic, Location, SpecError
from .safe import unsafe
from .naming import IDENTIFIER_RE, module_reason, op_name_reason, reserved_reason

MAX_SPEC_BYTES = 1 << 20
MAX_EXPRESSION_CHARS = 4000
MAX_DIM = 1 << 40
MAX_RANK = 32
MAX_OPS = 1000
SPEC_VERSION = 1

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
# Every product rounds to 8 or 11 bits here: powers stay single pow calls (one rounding).
HALF_DTYPES = ("float16", "bfloat16")
COMPLEX_DTYPES = ("complex64", "complex128")
INT_DTYPES = ("int32", "int64")
DTYPES = FLOAT_DTYPES + COMPLEX_DTYPES + INT_DTYPES
DType = Literal[
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128", "int32", "int64"
]

FloatDType = Literal["float16", "bfloat16", "float32", "float64"]
# `dtype: floating` (or a list of float dtypes): an op generated for each, following its
# inputs' dtype like a TensorFlow op. Python numbers take the default (float32).
FLOATING = "floating"


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
                    f"{_describe(d)}" + (f"; did you mean '{hint[0]}'?" if hint else "")
                )
        twice = [d for i, d in enumerate(value) if d in value[:i]]
        if twice:
            raise ValueError(f"dtype '{twice[0]}' is listed twice")
        return value
    hint = difflib.get_close_matches(value, DTYPES + (FLOATING,), n=1) if isinstance(
        value, str) else []
    raise ValueError(
        f"expected a dtype ({', '.join(DTYPES)}), 'floating' (every float dtype) or a list "
        f"of float dtypes; got {_describe(value)}"
        + (f"; did you mean '{hint[0]}'?" if hint else "")
    )


DTypeSet = Annotated[Any, BeforeValidator(_check_dtype_set)]

Loc = tuple[Union[str, int], ...]


def dtype_set(value: Any) -> tuple[str, ...] | None:
    """The float dtypes of a ``dtype`` field that names several (a list or ``floating``),
    in the order of :data:`FLOAT_DTYPES`; None for one dtype (a string)."""
    if value == FLOATING:
        return FLOAT_DTYPES
    if isinstance(value, (list, tuple)):
        return tuple(d for d in FLOAT_DTYPES if d in value)
    return None


def default_dtype(dtypes: tuple[str, ...]) -> str:
    """The dtype a generic op computes in when every argument is a Python number or
    list: the first declared of float32, float64, float16, bfloat16 (TensorFlow's
    default float, then the most precise)."""
    return next(d for d in ("float32", "float64", "float16", "bfloat16") if d in dtypes)


# --------------------------------------------------------------------------- models


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

Name = Annotated[str, Field(pattern=IDENTIFIER_RE.pattern)]
Expression = Annotated[str, Field(min_length=1, max_length=MAX_EXPRESSION_CHARS)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


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
            f"expected [low, high], 'positive' or 'negative'; got {_describe(value)}"
            + (f"; did you mean '{hint[0]}'?" if hint else "")
        )
    if isinstance(value, list) and len(value) != 2:
        raise ValueError(f"a domain [low, high] has two numbers; got {len(value)}")
    numbers = isinstance(value, list) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    if isinstance(value, list) and not numbers:
        bad = next(v for v in value if not isinstance(v, (int, float)) or isinstance(v, bool))
        raise ValueError(f"a domain's bounds are numbers; got {_describe(bad)}")
    if not numbers:
        raise ValueError(
            f"expected [low, high], 'positive' or 'negative'; got {_describe(value)}"
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


class InputSpec(_Model):
    """One input of an op (long form; the shorthand ``x: [10, 1]`` means ``{shape: [10, 1]}``).

    Attributes:
        shape: dims, each a size >= 0, ``None`` (unknown until run time) or a dim name;
            the first may be ``"..."``: any number of leading batch dims.
        dtype: TF dtype name; ``None`` until resolved to the module's default.
        differentiable: whether a gradient is returned; ``None`` until resolved (true for
            float and complex dtypes, false for integers).
        domain: ``(low, high)``: where the emitted tests and the build-time check draw
            this input's values (``positive`` and ``negative`` stand for ranges, see
            :data:`DOMAINS`); ``None``: their default ranges.
    """

    shape: Annotated[
        list[DimDecl], Field(max_length=MAX_RANK), AfterValidator(_check_shape)
    ]
    dtype: Optional[DType] = None
    differentiable: Optional[bool] = None
    domain: Optional[Domain] = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, list):
            return {"shape": data}
        return data


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


class OpSpec(_Model):
    """One op: a public function with a custom gradient."""

    name: Name
    doc: DocText = None
    inputs: dict[Name, InputSpec] = Field(min_length=1)
    where: dict[Name, Expression] = Field(default_factory=dict)
    output: Optional[Expression] = None
    outputs: Optional[dict[Name, Expression]] = None
    memory: Optional[Literal["save", "recompute"]] = None
    dtype: Optional[DTypeSet] = None
    fuse: Optional[Literal["none", "xla"]] = None

    @model_validator(mode="after")
    def _one_output_form(self) -> "OpSpec":
        if (self.output is None) == (self.outputs is None):
            raise ValueError("give exactly one of 'output' (one expression) or 'outputs'")
        if self.outputs is not None and not self.outputs:
            raise ValueError("'outputs' needs at least one entry")
        return self


class ModuleSpec(_Model):
    """A whole spec: one generated Python module."""

    version: int
    module: Name
    dtype: DTypeSet = "float32"
    fuse: Literal["none", "xla"] = "none"
    doc: DocText = None
    ops: list[OpSpec] = Field(min_length=1, max_length=MAX_OPS)


# ------------------------------------------------------------------ document + positions


@dataclass(frozen=True)
class ExprAnchor:
    """Where an expression's text sits in the YAML file, to map AST offsets to positions.

    Attributes:
        line, col: 1-based position of the scalar's first character (the quote or block
            indicator included).
        style: PyYAML scalar style: None (plain), "'", '"', '|' or '>'.
        indent: for block scalars, the column (0-based) where content lines start.
        single_line: the scalar's text has no line break.
        source: the scalar as written in the file (indicators, quotes, line breaks).
        value: the scalar's value (the expression text).
    """

    line: int
    col: int
    style: Optional[str]
    indent: int
    single_line: bool
    source: str = ""
    value: str = ""

    def position(self, lineno: int, col_offset: int) -> tuple[int, int]:
        """Map an AST position (1-based line, 0-based column in the text) to the file.

        Literal blocks (``|``) and one-line scalars map directly. Folded (``>``) and
        multi-line plain or quoted scalars lose their line breaks and indentation in
        the value, so the value's non-space characters are matched, in order, with
        the written ones (escapes in double quotes can shift this; the result is then
        a nearby position, never an error). Falls back to the scalar's start.
        """
        if self.style == "|":
            return self.line + lineno, self.indent + col_offset + 1
        if lineno == 1:  # the parser strips the value; offsets count from its first token
            col_offset += len(self.value) - len(self.value.lstrip())
        if self.single_line and lineno == 1 and self.style in (None, "'", '"'):
            quote = 0 if self.style is None else 1
            return self.line, self.col + quote + col_offset
        lines = self.value.split("\n")
        if not self.source or lineno > len(lines):
            return self.line, self.col
        at = _written_index(self, sum(len(t) + 1 for t in lines[: lineno - 1]) + col_offset)
        if at is None:
            return self.line, self.col
        before = self.source[:at]
        if "\n" not in before:
            return self.line, self.col + at
        return self.line + before.count("\n"), at - before.rindex("\n")


def _written_index(anchor: ExprAnchor, target: int) -> int | None:
    """The index in ``anchor.source`` of the value's character at ``target`` (the next
    non-space one where that is a space), or None when they cannot be matched."""
    if anchor.style in ("|", ">"):
        start = anchor.source.find("\n") + 1  # after the block indicator line
    else:
        start = 0 if anchor.style is None else 1  # after the opening quote
    at = start
    for i, ch in enumerate(anchor.value):
        if ch.isspace():
            continue
        found = anchor.source.find(ch, at)
        if found < 0:
            return None
        if i >= target:
            return found
        at = found + 1
    return None


def content_sha256(data: Any) -> str:
    """The sha256 of a spec's content: its YAML data, not its bytes.

    Comments, quoting, indentation, flow or block style and anchors do not change it;
    any change of a key or value (an expression's text, a shape, the order of ops,
    inputs or ``where`` names) does. The data is written as compact JSON with the
    mappings as lists of ``[key, value]`` pairs in their order in the file (YAML values
    JSON has no form for, such as dates, as their ``str``). Called on validated specs
    only, so the data is a tree of bounded size.

    Args:
        data: the spec as loaded from YAML (mappings, lists, scalars).

    Returns:
        64 lowercase hex digits.
    """
    def plain(value: Any) -> Any:
        if isinstance(value, dict):
            return [[plain(k), plain(v)] for k, v in value.items()]
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        return str(value)

    text = json.dumps(plain(data), ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class SpecDocument:
    """A validated spec with the positions of its values.

    Attributes:
        path: the spec path as given (used in messages and, made relative to the output
            folder, in generated headers).
        source: the spec's text.
        sha256: hex digest of the spec's content (:func:`content_sha256`).
        model: the validated spec.
    """

    path: str
    source: str
    sha256: str
    model: ModuleSpec
    _positions: dict = field(repr=False, compare=False)
    _key_positions: dict = field(repr=False, compare=False)
    _anchors: dict = field(repr=False, compare=False)

    def location(self, loc: Loc, key: bool = False) -> Location:
        """Position of the value (or with ``key=True`` the key) at spec key path ``loc``.

        Falls back to the nearest enclosing value that has a position.
        """
        return _locate(self.path, self._positions, self._key_positions, loc, key)

    def anchor(self, loc: Loc) -> ExprAnchor | None:
        """The :class:`ExprAnchor` of an expression field, if ``loc`` is one."""
        return self._anchors.get(tuple(loc))


def _locate(path, positions, key_positions, loc, key=False) -> Location:
    loc = tuple(loc)
    if key and loc in key_positions:
        line, col = key_positions[loc]
        return Location(path, line, col)
    candidates = [loc]
    # Shorthand inputs: ('ops', i, 'inputs', x, 'shape', j) is ('ops', i, 'inputs', x, j).
    if len(loc) >= 5 and loc[2] == "inputs" and len(loc) > 4 and loc[4] == "shape":
        candidates.append(loc[:4] + loc[5:])
    for cand in candidates:
        for n in range(len(cand), -1, -1):
            if cand[:n] in positions:
                line, col = positions[cand[:n]]
                return Location(path, line, col)
    return Location(path, 1, 1)


def format_key_path(loc: Loc) -> str:
    """``('ops', 0, 'inputs', 'x')`` -> ``ops[0].inputs.x``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


# ------------------------------------------------------------------------- YAML layer

_DECIMAL = re.compile(r"^[-+]?(0|[1-9][0-9_]*)$")
_STANDARD_TAGS = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:map",
    "tag:yaml.org,2002:seq",
}


class _YamlReader:
    """Turns a composed PyYAML node tree into plain data plus positions."""

    def __init__(self, path: str, source: str):
        self.path = path
        self.source = source
        self.source_lines = source.splitlines()
        self.positions: dict[Loc, tuple[int, int]] = {}
        self.key_positions: dict[Loc, tuple[int, int]] = {}
        self.anchors: dict[Loc, ExprAnchor] = {}
        self.raw: dict[Loc, str] = {}
        self.errors: list[tuple[Loc, tuple[int, int], str]] = []
        self._seen: set[int] = set()
        self._constructor = yaml.SafeLoader("")

    def read(self, node: yaml.Node, loc: Loc = ()) -> Any:
        mark = (node.start_mark.line + 1, node.start_mark.column + 1)
        self.positions[loc] = mark
        if id(node) in self._seen:
            mark = self.key_positions.get(loc, mark)
            self.errors.append((loc, mark, "YAML aliases (*name) are not allowed in a spec"))
            return None
        self._seen.add(id(node))
        if node.tag not in _STANDARD_TAGS:
            self.errors.append((loc, mark, f"YAML tag {node.tag!r} is not allowed in a spec"))
            return None
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                kmark = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
                if not isinstance(key_node, yaml.ScalarNode) or (
                    key_node.tag != "tag:yaml.org,2002:str" and key_node.style is not None
                ) or key_node.tag.endswith(":merge"):
                    what = "a merge key '<<'" if key_node.tag.endswith(":merge") else (
                        f"{key_node.value!r}" if isinstance(key_node, yaml.ScalarNode)
                        else "a collection"
                    )
                    self.errors.append((loc, kmark, f"keys must be strings; got {what}"))
                    continue
                key = key_node.value
                if key in out:
                    self.errors.append((loc + (key,), kmark, f"duplicate key '{key}'"))
                    continue
                self.key_positions[loc + (key,)] = kmark
                out[key] = self.read(value_node, loc + (key,))
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self.read(item, loc + (i,)) for i, item in enumerate(node.value)]
        self.raw[loc] = node.value
        self._anchor(node, loc)
        if node.tag == "tag:yaml.org,2002:int" and not _DECIMAL.match(node.value):
            return node.value  # YAML 1.1 octal/sexagesimal forms (010, 1:30) stay text
        try:
            return self._constructor.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, OverflowError) as e:
            self.errors.append((loc, mark, f"invalid scalar {node.value!r}: {e}"))
            return None

    def _anchor(self, node: yaml.ScalarNode, loc: Loc) -> None:
        line = node.start_mark.line + 1
        indent = 0
        if node.style in ("|", ">"):
            for text in self.source_lines[line:]:
                if text.strip():
                    indent = len(text) - len(text.lstrip(" "))
                    break
        self.anchors[loc] = ExprAnchor(
            line=line,
            col=node.start_mark.column + 1,
            style=node.style,
            indent=indent,
            single_line=node.start_mark.line == node.end_mark.line,
            source=self.source[node.start_mark.index: node.end_mark.index],
            value=node.value,
        )


def _expression_locs(data: Any) -> list[Loc]:
    """Spec key paths whose values are expressions (kept as written, even if numeric)."""
    locs: list[Loc] = []
    if not isinstance(data, dict) or not isinstance(data.get("ops"), list):
        return locs
    for i, op in enumerate(data["ops"]):
        if not isinstance(op, dict):
            continue
        locs.append(("ops", i, "output"))
        for section in ("outputs", "where"):
            if isinstance(op.get(section), dict):
                locs.extend(("ops", i, section, k) for k in op[section])
    return locs


def _set(data: Any, loc: Loc, value: Any) -> None:
    for part in loc[:-1]:
        data = data[part]
    if isinstance(data, dict) and loc[-1] in data:
        data[loc[-1]] = value


def _get(data: Any, loc: Loc) -> Any:
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return None
    return data


# ------------------------------------------------------------------ pydantic messages


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


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return "a mapping" if isinstance(value, dict) else "a list"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _message(err: dict, data: Any) -> tuple[Loc, str, bool]:
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
            f"differentiable: ...}}; got {_describe(value)}"
        ), False
    if kind in _TYPE_NAMES:
        return loc, f"expected {_TYPE_NAMES[kind]}, got {_describe(value)}", False
    if kind == "literal_error":
        expected = err.get("ctx", {}).get("expected", "")
        return loc, f"expected one of {expected}; got {_describe(value)}", False
    if kind == "string_pattern_mismatch":
        return (
            loc,
            f"expected an identifier (letters, digits, '_', starting with a letter); "
            f"got {_describe(value)}",
            False,
        )
    if kind in ("too_short", "string_too_short"):
        return loc, f"must not be empty; got {_describe(value)}", False
    if kind == "string_too_long":
        return loc, f"longer than {MAX_EXPRESSION_CHARS} characters", False
    if kind == "too_long":
        limit = err.get("ctx", {}).get("max_length")
        return loc, f"at most {limit} entries allowed; got {err.get('ctx', {}).get('actual_length')}", False
    if kind == "value_error":
        msg = str(err.get("ctx", {}).get("error", err["msg"]))
        return loc, msg, False
    return loc, f"{err['msg'][0].lower()}{err['msg'][1:]}; got {_describe(value)}", False


# ---------------------------------------------------------------------------- loading


def _op_label(data: Any, i: int) -> str:
    op = _get(data, ("ops", i))
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
    location = _locate(path, positions, key_positions, loc, key)
    if len(loc) >= 2 and loc[0] == "ops" and isinstance(loc[1], int):
        return Diagnostic(location, message, _op_label(data, loc[1]), format_key_path(loc[2:]))
    return Diagnostic(location, message, None, format_key_path(loc) or None)


def load_spec(path: str | Path, display_path: str | None = None) -> SpecDocument:
    """Read, parse and validate one spec file.

    Args:
        path: the file to read.
        display_path: how to name the file in messages and headers (default: ``path`` as
            given).

    Returns:
        A :class:`SpecDocument`.

    Raises:
        SpecError: unreadable file, invalid YAML, or any structural or naming problem;
            every problem found is listed with its position.
    """
    shown = display_path if display_path is not None else str(path)
    from .files import FileRefused, read_bounded

    try:
        data = read_bounded(path, MAX_SPEC_BYTES, "spec")
    except FileRefused as e:
        raise SpecError(Diagnostic(Location(shown), str(e)))
    except OSError as e:
        raise SpecError(Diagnostic(Location(shown), f"cannot read spec: {e.strerror or e}"))
    return parse_spec(data, shown)


def parse_spec(data: bytes, path: str) -> SpecDocument:
    """Validate spec bytes; see :func:`load_spec`."""
    if len(data) > MAX_SPEC_BYTES:
        raise SpecError(
            Diagnostic(Location(path), f"spec is larger than {MAX_SPEC_BYTES} bytes")
        )
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError as e:
        before = data[: e.start]
        line = before.count(b"\n") + 1
        col = e.start - (before.rfind(b"\n") + 1) + 1
        raise SpecError(
            Diagnostic(Location(path, line, col), f"spec is not UTF-8 ({e.reason} at byte "
                       f"{e.start})")
        )
    try:
        node = yaml.compose(source, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = e.problem or e.context or "invalid YAML"
        raise SpecError(Diagnostic(Location(path, line, col), f"invalid YAML: {problem}"))
    except yaml.YAMLError as e:
        raise SpecError(Diagnostic(Location(path), f"invalid YAML: {e}"))
    except RecursionError:
        raise SpecError(Diagnostic(Location(path), "invalid YAML: nested too deeply"))
    if node is None:
        raise SpecError(Diagnostic(Location(path), "spec is empty; expected a mapping"))

    reader = _YamlReader(path, source)
    try:
        raw = reader.read(node)
    except RecursionError:
        raise SpecError(Diagnostic(Location(path), "spec is nested too deeply"))

    def diag(loc, message, key=False):
        return diagnostic_at(
            path, reader.positions, reader.key_positions, raw, loc, message, key
        )

    problems = [
        Diagnostic(Location(path, *mark), msg, *_op_field(raw, loc))
        for loc, mark, msg in reader.errors
    ]
    if problems:
        raise SpecError(problems)
    if not isinstance(raw, dict):
        # the type only: a file named by mistake (or by a hostile glob) is not quoted
        kind = "a list" if isinstance(raw, list) else (
            "nothing" if raw is None else f"a {type(raw).__name__} scalar")
        raise SpecError(diag((), f"a spec is a mapping; got {kind}"))
    if "version" in raw and raw["version"] != SPEC_VERSION:
        version = raw["version"]
        message = (
            f"unsupported spec version {version}; this gradgen reads version {SPEC_VERSION}"
            if isinstance(version, int) and not isinstance(version, bool)
            else f"expected the integer {SPEC_VERSION}; got {_describe(version)}"
        )
        raise SpecError(diag(("version",), message))
    # Expressions are text: `output: 2` or `output: 1.5` mean the expression as written.
    for loc in _expression_locs(raw):
        value = _get(raw, loc)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            _set(raw, loc, reader.raw[loc])

    try:
        model = ModuleSpec.model_validate(raw)
    except ValidationError as e:
        diagnostics = []
        for err in e.errors(include_url=False):
            loc, message, at_key = _message(err, raw)
            diagnostics.append(diag(loc, message, at_key))
        raise SpecError(diagnostics)

    model, problems = _resolve(model, diag)
    if problems:
        raise SpecError(problems)
    return SpecDocument(
        path=path,
        source=source,
        sha256=content_sha256(raw),
        model=model,
        _positions=reader.positions,
        _key_positions=reader.key_positions,
        _anchors=reader.anchors,
    )


def _op_field(raw: Any, loc: Loc) -> tuple[str | None, str | None]:
    if len(loc) >= 2 and loc[0] == "ops" and isinstance(loc[1], int):
        return _op_label(raw, loc[1]), format_key_path(loc[2:]) or None
    return None, format_key_path(loc) or None


def _resolve(model: ModuleSpec, diag) -> tuple[ModuleSpec, list[Diagnostic]]:
    """Names, uniqueness, default dtypes and differentiability."""
    problems: list[Diagnostic] = []

    def check_name(name: str, loc: Loc, what: str) -> None:
        reason = reserved_reason(name)
        if reason:
            problems.append(diag(loc, f"{what} name '{name}' is not allowed: {reason}", True))

    if module_reason(model.module):
        problems.append(
            diag(
                ("module",),
                f"module name '{model.module}' is not allowed: "
                f"{module_reason(model.module)}",
            )
        )
    seen_ops: dict[str, int] = {}
    ops = []
    for i, op in enumerate(model.ops):
        base: Loc = ("ops", i)
        reason = op_name_reason(op.name)
        if reason:
            problems.append(diag(base + ("name",), f"op name '{op.name}' is not allowed: {reason}"))
        if op.name in seen_ops:
            problems.append(
                diag(
                    base + ("name",),
                    f"duplicate op name '{op.name}' (also ops[{seen_ops[op.name]}])",
                )
            )
        seen_ops.setdefault(op.name, i)

        local: dict[str, str] = {}
        sections = [("inputs", op.inputs), ("where", op.where), ("outputs", op.outputs or {})]
        for section, mapping in sections:
            for name in mapping:
                loc = base + (section, name)
                check_name(name, loc, {"inputs": "input", "where": "intermediate",
                                       "outputs": "output"}[section])
                if name in local:
                    problems.append(
                        diag(loc, f"name '{name}' is already used in '{local[name]}'", True)
                    )
                local.setdefault(name, section)
        dims = {d for spec in op.inputs.values() for d in spec.shape
                if isinstance(d, str) and d != BATCH}
        for input_name, spec in op.inputs.items():
            for axis, d in enumerate(spec.shape):
                if isinstance(d, str) and d != BATCH and reserved_reason(d):
                    problems.append(
                        diag(base + ("inputs", input_name, "shape", axis),
                             f"dim name '{d}' is not allowed: {reserved_reason(d)}")
                    )
        for name in sorted(dims & set(local)):
            problems.append(
                diag(base + ("inputs",), f"dim name '{name}' is also a value name in this op")
            )

        inputs = {}
        op_dtype = op.dtype if op.dtype is not None else model.dtype
        generic = dtype_set(op_dtype)
        if generic and all(s.dtype in INT_DTYPES for s in op.inputs.values()):
            generic = None  # integer inputs only: one dtype, the default
        if generic:
            for name, spec in op.inputs.items():
                if spec.dtype is not None and spec.dtype not in INT_DTYPES:
                    problems.append(diag(
                        base + ("inputs", name, "dtype"),
                        f"input '{name}' declares dtype {spec.dtype}, but the op is "
                        f"generated for {', '.join(generic)} and its float inputs follow "
                        "the dtype of the arguments; drop the input's dtype (integer "
                        "dtypes may stay)",
                    ))
            single = default_dtype(generic)
        else:
            several = dtype_set(op_dtype)  # (an op of integer inputs only)
            single = default_dtype(several) if several else op_dtype
        for name, spec in op.inputs.items():
            dtype = spec.dtype or single
            is_int = dtype in INT_DTYPES
            if spec.differentiable and is_int:
                problems.append(
                    diag(
                        base + ("inputs", name, "differentiable"),
                        f"input '{name}' has integer dtype {dtype} and cannot be "
                        "differentiated; drop 'differentiable: true' or use a float dtype",
                    )
                )
            if is_int and spec.domain and math.ceil(spec.domain[0]) > spec.domain[1]:
                problems.append(diag(
                    base + ("inputs", name, "domain"),
                    f"input '{name}' has integer dtype {dtype}, and its domain "
                    f"[{spec.domain[0]:g}, {spec.domain[1]:g}] holds no integer",
                ))
            differentiable = (not is_int) if spec.differentiable is None else spec.differentiable
            inputs[name] = spec.model_copy(
                update={"dtype": dtype, "differentiable": differentiable and not is_int}
            )
        fuse = op.fuse or model.fuse
        ops.append(op.model_copy(update={"inputs": inputs,
                                          "dtype": list(generic) if generic else single,
                                          "fuse": fuse,
                                          "memory": op.memory or default_memory(fuse)}))
    return model.model_copy(update={"ops": ops}), problems


def default_memory(fuse: str) -> str:
    """An op's memory policy where its spec names none: ``recompute`` for ``fuse: xla``
    (inside one compiled kernel, recomputing forward values from the inputs costs less
    than writing them out and reading them back: equal to 2x faster at 1e5 to 1e7
    elements on the benchmark's ops, mish at 1e5 the one exception), else ``save``."""
    return "recompute" if fuse == "xla" else "save"


def dtype_variant(doc: "SpecDocument", index: int, dtype: str) -> "SpecDocument":
    """``doc`` with op ``index``, generated for several dtypes, fixed to one: its float
    inputs (those that follow the op's dtype) and the op's dtype become ``dtype``.
    Every other stage (derivation, stable forms, guards, the audit) then sees an
    ordinary one-dtype op."""
    import dataclasses

    op = doc.model.ops[index]
    inputs = {
        name: spec.model_copy(update={"dtype": dtype}) if spec.dtype in FLOAT_DTYPES else spec
        for name, spec in op.inputs.items()
    }
    ops = list(doc.model.ops)
    ops[index] = op.model_copy(update={"inputs": inputs, "dtype": dtype})
    return dataclasses.replace(doc, model=doc.model.model_copy(update={"ops": ops}))


# ------------------------------------------------------------------- JSON Schema

_DESCRIPTIONS = {
    "ModuleSpec": "A gradgen spec (version 1): one generated Python module of TensorFlow "
    "ops with custom gradients.",
    "OpSpec": "One op: a public function whose gradient is the derived VJP.",
    "InputSpec": "An input in the long form; the short form is the shape list alone.",
    ("ModuleSpec", "version"): "Spec format version; must be 1.",
    ("ModuleSpec", "module"): "Python identifier; the output file is <out>/<module>.py.",
    ("ModuleSpec", "dtype"): "Default dtype of every input; or several float dtypes (a "
    "list, or floating: all four), each op then following its arguments' dtype.",
    ("OpSpec", "dtype"): "The op's dtype, or several float dtypes (a list, or floating), "
    "overriding the module's dtype.",
    ("ModuleSpec", "doc"): "Module docstring.",
    ("ModuleSpec", "ops"): "The ops, in order.",
    ("OpSpec", "name"): "Python identifier, unique in the module.",
    ("OpSpec", "doc"): "The op's docstring summary.",
    ("OpSpec", "inputs"): "Inputs in argument order: a shape list, or {shape, dtype, "
    "differentiable}.",
    ("OpSpec", "where"): "Named intermediates, in order; each may use the inputs and "
    "earlier intermediates.",
    ("OpSpec", "output"): "The one output's expression (the op returns one tensor).",
    ("OpSpec", "outputs"): "Named outputs' expressions (the op returns a tuple in order).",
    ("OpSpec", "fuse"): "xla: the forward and the gradient each one XLA-compiled kernel "
    "(tf.function(jit_compile=True)), also in a model that does not use XLA; none: "
    "TensorFlow ops (default: the module's fuse).",
    ("ModuleSpec", "fuse"): "The default of every op's fuse: none (default) or xla.",
    ("OpSpec", "memory"): "save (default without fuse): the gradient reuses forward values "
    "kept alive; recompute (default with fuse: xla): it computes them again from the "
    "inputs, for a lower peak memory.",
    ("InputSpec", "shape"): "Dims: a size >= 0, null (known at run time) or a dim name "
    "(the same size wherever the name appears in the op); the first may be '...': any "
    "number of leading batch dims, broadcast across inputs as NumPy does.",
    ("InputSpec", "dtype"): "The input's dtype (default: the module's dtype).",
    ("InputSpec", "domain"): "Where tests and the build-time check draw the input's "
    "values: [low, high], positive ([0.1, 3]) or negative ([-3, -0.1]). The accuracy "
    "audit still tries the dtype's extreme points.",
    ("InputSpec", "differentiable"): "Whether a gradient is returned (default: true for "
    "float and complex dtypes; integers are never differentiated).",
}


def json_schema() -> dict:
    """The JSON Schema of a spec (draft 2020-12), for editors and CI validators.

    Built from the pydantic models, with the forms the loader also accepts: an input
    given as its shape list alone, and an expression written as a YAML number.
    """
    schema = ModuleSpec.model_json_schema()
    defs = schema["$defs"]
    expression = {"anyOf": [{"type": "string", "minLength": 1,
                             "maxLength": MAX_EXPRESSION_CHARS}, {"type": "number"}]}
    shape = defs["InputSpec"]["properties"]["shape"]
    op = defs["OpSpec"]["properties"]
    name_pattern = IDENTIFIER_RE.pattern

    def mapping(values):
        return {
            "type": "object",
            "patternProperties": {name_pattern: values},
            "additionalProperties": False,
        }

    op["inputs"] = dict(
        mapping({"anyOf": [shape, {"$ref": "#/$defs/InputSpec"}]}), minProperties=1
    )
    op["where"] = mapping(expression)
    op["output"] = expression
    op["outputs"] = dict(mapping(expression), minProperties=1)
    defs["OpSpec"]["oneOf"] = [{"required": ["output"]}, {"required": ["outputs"]}]
    schema["properties"]["version"] = {"const": SPEC_VERSION}
    dtype_set = {"anyOf": [
        {"enum": list(DTYPES) + [FLOATING]},
        {"type": "array", "items": {"enum": list(FLOAT_DTYPES)}, "minItems": 1,
         "maxItems": 4},
    ]}
    schema["properties"]["dtype"] = dict(dtype_set, default="float32")
    defs["OpSpec"]["properties"]["dtype"] = dict(dtype_set)
    schema["properties"]["doc"] = {"type": "string"}
    defs["OpSpec"]["properties"]["doc"] = {"type": "string"}
    defs["InputSpec"]["properties"]["dtype"] = {"enum": list(DTYPES)}
    defs["InputSpec"]["properties"]["differentiable"] = {"type": "boolean"}
    for name, model in (("ModuleSpec", schema), ("OpSpec", defs["OpSpec"]),
                        ("InputSpec", defs["InputSpec"])):
        model["description"] = _DESCRIPTIONS[name]
        model.pop("title", None)
        for prop, body in model["properties"].items():
            body.pop("title", None)
            body["description"] = _DESCRIPTIONS[(name, prop)]
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://gradgen.dev/schema/spec-v1.json",
        "title": "gradgen spec",
        **schema,
    }
    return schema
