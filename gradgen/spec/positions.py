"""Positions in a spec file: key paths, where an expression's text sits, and lookups.

Receives: the positions the YAML reader records (spec key path -> 1-based line and
column of each value and of each key), and offsets into an expression's text.
Returns: :data:`Loc` (a spec key path such as ``('ops', 0, 'inputs', 'x')``),
:class:`ExprAnchor` (maps an offset in an expression to its line and column in the
file), :func:`locate` (the :class:`~gradgen.errors.Location` of a key path, or of the
nearest enclosing value that has one) and :func:`format_key_path` (``ops[0].inputs.x``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from ..errors import Location


Loc = tuple[Union[str, int], ...]


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


def locate(path, positions, key_positions, loc, key=False) -> Location:
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
