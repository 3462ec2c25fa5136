"""The allow-list of the expression language, and reading text into a bounded tree.

Receives: the text of one expression. Returns: :func:`read_expression` gives its
:mod:`ast` tree (``eval`` mode) within the size bounds, or raises :class:`_ExprError`
(a message and the node it points at, which the parser turns into a located
:class:`~gradgen.errors.SpecError`). Also holds what the visitors allow: the functions of
the spec language (:data:`FUNCTIONS`, from their declarations in
:mod:`gradgen.functions`), the operators, comparisons and refused constructs, and the
bounds on literals and constants.
"""

from __future__ import annotations

import ast
from typing import Callable

import sympy

from ..functions import declarations as fns
from ..functions.registry import ELEMENTWISE, FORM, MATRIX, REDUCTION, SOFTMAX
from ..naming import EXPRESSION_NAMES

MAX_AST_NODES = 2000
MAX_AST_DEPTH = 64
MAX_INT_LITERAL = 2**53
MAX_CONSTANT_LOG10 = 300
MAX_CONSTANT_BITS = 1100  # a rational's numerator or denominator: about 330 digits


class _ExprError(Exception):
    """A refused expression: the message, and the node it points at (None: the whole
    expression)."""

    def __init__(self, node: ast.AST | None, message: str):
        super().__init__(message)
        self.node = node
        self.message = message


# The spec language's functions, from their declarations (gradgen.functions).
UNARY: dict[str, Callable] = {
    s: f.build for f in fns.FUNCTIONS if f.kind == ELEMENTWISE and f.arity == (1, 1)
    for s in f.spellings
}
TENSOR_FUNCTIONS = fns.spellings(MATRIX, REDUCTION, SOFTMAX)
# Reductions over axes (``axis=``, ``keepdims=``) and the softmax family (``axis=``).
REDUCTIONS = fns.spellings(REDUCTION)
SOFTMAXES = fns.spellings(SOFTMAX)
FUNCTIONS = tuple(sorted(fns.spellings(ELEMENTWISE, FORM, MATRIX, REDUCTION, SOFTMAX)))
# Functions added after version 1 of the spec format: specs that name a value like one
# stay valid (the value wins, and calling it is an error), so these are not reserved.
UNRESERVED_FUNCTIONS = frozenset(FUNCTIONS) - EXPRESSION_NAMES - {"max", "min"}  # builtins

_OPERATORS = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.Pow: "**",
    ast.MatMult: "@",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
}
# What a user who writes these operators most likely means.
_OPERATOR_HINTS = {
    "&": "; use 'and' to combine conditions",
    "|": "; use 'or' to combine conditions",
    "^": "; use '**' for a power",
    "%": "; the expression language has no remainder",
    "//": "; use floor(a / b)",
}
_COMPARE = {
    ast.Lt: sympy.StrictLessThan,
    ast.LtE: sympy.LessThan,
    ast.Gt: sympy.StrictGreaterThan,
    ast.GtE: sympy.GreaterThan,
    ast.Eq: sympy.Eq,
    ast.NotEq: sympy.Ne,
}
_FORBIDDEN = {
    ast.Attribute: "attribute access ('.') is not allowed",
    ast.Subscript: "indexing ('[...]') is not allowed",
    ast.Lambda: "lambdas are not allowed",
    ast.ListComp: "comprehensions are not allowed",
    ast.SetComp: "comprehensions are not allowed",
    ast.DictComp: "comprehensions are not allowed",
    ast.GeneratorExp: "comprehensions are not allowed",
    ast.JoinedStr: "f-strings are not allowed",
    ast.FormattedValue: "f-strings are not allowed",
    ast.Starred: "'*' unpacking is not allowed",
    ast.NamedExpr: "assignment expressions (':=') are not allowed",
    ast.IfExp: "'a if c else b' is not allowed; use where(c, a, b) or Piecewise",
    ast.Dict: "dict literals are not allowed",
    ast.Set: "set literals are not allowed",
    ast.Await: "'await' is not allowed",
    ast.Yield: "'yield' is not allowed",
    ast.YieldFrom: "'yield' is not allowed",
    ast.Slice: "slices are not allowed",
}


def _balanced(text: str) -> bool:
    """True when brackets never close more than they opened (outside strings)."""
    depth, quote = 0, None
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def read_expression(text: str) -> tuple[ast.Expression, list[str]]:
    """``text`` as a bounded tree (``ast`` in ``eval`` mode), and its lines (stripped),
    in which error positions are looked up.

    Raises:
        _ExprError: a comment or a character outside printable ASCII, invalid syntax,
            a tree Python cannot build, one nested deeper than :data:`MAX_AST_DEPTH`
            or with more than :data:`MAX_AST_NODES` parts.
    """
    for i, ch in enumerate(text):
        if ch == "#":
            raise _ExprError(None, "comments ('#') are not allowed in an expression")
        if not (32 <= ord(ch) < 127 or ch in "\n\t"):
            raise _ExprError(
                None, f"expressions are ASCII; found {ch!r} at character {i + 1}"
            )
    text = text.strip()
    lines = text.split("\n")
    # A multi-line expression (a YAML block scalar): parse it as if it were in
    # parentheses, which keeps every line's columns; only line numbers shift, by one.
    wrapped = "\n" in text and _balanced(text)
    if wrapped:
        text = f"(\n{text}\n)"
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as e:
        node = ast.Constant(0)
        node.lineno, node.col_offset = e.lineno or 1, max((e.offset or 1) - 1, 0)
        if wrapped:  # a line of the text, not of its parenthesized copy (an unfinished
            # text fails on the copy's last line, the closing parenthesis: its own last)
            node.lineno = min(max(node.lineno - 1, 1), len(lines))
        raise _ExprError(node, f"invalid expression syntax: {e.msg}") from None
    except (RecursionError, MemoryError, ValueError):
        raise _ExprError(None, "expression is nested too deeply or too large") from None
    if wrapped:
        for node in ast.walk(tree):
            if hasattr(node, "lineno"):
                node.lineno -= 1
            if getattr(node, "end_lineno", None) is not None:
                node.end_lineno -= 1
    count, stack = 0, [(tree.body, 1)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if depth > MAX_AST_DEPTH:
            raise _ExprError(node, f"expression is nested deeper than {MAX_AST_DEPTH}")
        if count > MAX_AST_NODES:
            raise _ExprError(None, f"expression has more than {MAX_AST_NODES} parts")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return tree, lines
