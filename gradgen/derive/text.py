"""Formulas as text: what docstrings, comments and ``gradgen explain`` show.

Receives SymPy expressions of a derivation (forward values, partials, node operands)
and returns text in the spec's own syntax (:func:`spec_str`: the parser reads it back),
with `where` names in place of their expressions and nodes shown as their operations
(``(a @ b)``, ``sum(x, axis=[1])``), shortened to :data:`FORMULA_MAX_CHARS`. Nothing
here changes what the generated code computes.
"""

from __future__ import annotations

import functools
import math

import sympy
from sympy.printing.precedence import PRECEDENCE
from sympy.printing.str import StrPrinter

from .. import stability as stable
from ..graph import Program, TensorNode
from ..pinned import Pinned
from ..stability import guards
from .forms import ratio_powers

FORMULA_MAX_CHARS = 240


class _SpecText(Pinned, StrPrinter):
    """SymPy's str form in the spec's syntax: conditions with ``and``, ``or``, ``not``,
    ``==`` and ``!=`` (the expression language refuses ``&``, ``|``, ``~``); a
    ``Piecewise`` with an otherwise-branch as nested ``where``; numbers as the shortest
    text of their double; ``Ratio(a, b)`` as ``(a/b)``."""

    def _print_And(self, expr):
        return self.stringify(expr.args, " and ", PRECEDENCE["And"])

    def _print_Or(self, expr):
        return self.stringify(expr.args, " or ", PRECEDENCE["Or"])

    def _print_Not(self, expr):
        return "not " + self.parenthesize(expr.args[0], PRECEDENCE["Not"])

    def _print_Piecewise(self, expr):
        *branches, (last, cond) = expr.args
        if cond is not sympy.true:  # no otherwise-branch: SymPy's form (also parsed)
            return self._print_Function(expr)  # (StrPrinter has no _print_Piecewise)
        text = self._print(last)
        for value, cond in reversed(branches):
            text = f"where({self._print(cond)}, {self._print(value)}, {text})"
        return text

    def _print_Equality(self, expr):
        return self.stringify(expr.args, " == ", PRECEDENCE["Relational"])

    def _print_Unequality(self, expr):
        return self.stringify(expr.args, " != ", PRECEDENCE["Relational"])

    def _print_BooleanTrue(self, expr):
        return "True"

    def _print_BooleanFalse(self, expr):
        return "False"

    def _print_overflowed(self, expr):
        return f"isinf({self._print(expr.args[0])})"

    def _print_Ratio(self, expr):
        a, b = (self.parenthesize(arg, PRECEDENCE["Mul"]) for arg in expr.args)
        return f"({a}/{b})"

    def _print_Float(self, expr):
        # the shortest text of a double that is this number (0.5, not 0.500000000000000)
        value = float(expr)
        if math.isfinite(value) and sympy.Float(repr(value), precision=expr._prec) == expr:
            return repr(value)
        return super()._print_Float(expr)


def spec_str(expr) -> str:
    """A formula for docstrings, comments and explain, in the spec's syntax (the parser
    reads it back: the Python API writes SymPy expressions with it)."""
    return _SpecText().doprint(expr)


def shorten(text: str) -> str:
    """``text`` cut to :data:`FORMULA_MAX_CHARS` characters, ``...`` marking the cut."""
    return text if len(text) <= FORMULA_MAX_CHARS else text[: FORMULA_MAX_CHARS - 3] + "..."


def node_text(node: TensorNode, args: list[str]) -> str:
    """How a node reads in docs: ``a @ b``, ``sum(x, axis=[1])``, ``log(det(s))``..."""
    if node.op == "elementwise":
        return node.name_hint
    if node.op == "matmul":
        return f"{args[0]} @ {args[1]}"
    if node.op == "logdet":
        return f"log(det({args[0]}))"
    if node.op in ("sum", "mean", "max", "min", "logsumexp"):
        keep = ", keepdims=True" if node.param("keepdims") else ""
        op = "logmeanexp" if dict(node.params).get("count") else node.op
        return f"{op}({args[0]}, axis={list(node.param('axes'))}{keep})"
    if node.op in ("softmax", "log_softmax"):
        return f"{node.op}({args[0]}, axis={list(node.param('axes'))})"
    if node.op == "einsum":
        inputs, out = node.param("subscripts")
        return f"einsum('{','.join(inputs)}->{out}', {', '.join(args)})"
    return f"{node.op}({', '.join(args)})"  # transpose, inverse, det, trace...


def describe_node(node: TensorNode) -> str:
    """A node with its operands written out: ``sum((x - m)**2, axis=[1])``."""
    args = [spec_str(a) if a.is_Atom else f"({spec_str(a)})" for a in node.args]
    return shorten(node_text(node, args))


class Display:
    """Formulas of one op for display: `where` names in place of their expressions,
    node symbols (renamed to their locals by lowering) as their operations.

    Args:
        program: the parsed op.
        rename: parsed node symbol -> its local's symbol.
    """

    def __init__(self, program: Program, rename: dict):
        self.p = program
        self.inverse_rename = {new: old for old, new in rename.items()}

    def shown(self, expr, upto: int | None = None):
        """``expr`` for display: ``where`` names in place of their expressions (the
        first ``upto`` of them), node symbols as their operations."""
        where = self.p.where[:upto]  # (all of them for upto None)
        mapping = {}
        for name, term in reversed(where):
            mapping[term.expr] = sympy.Symbol(name)
            mapping[stable.rewrite(term.expr)[0]] = sympy.Symbol(name)
        return expr.xreplace(self.inverse_rename).xreplace(mapping).xreplace(self._display_map)

    def show(self, expr, upto: int | None = None) -> str:
        """Formula text for docs and comments (see :meth:`shown`)."""
        # a ratio of powers as the user wrote it: (sigma/r)**6, not sigma**6/r**6
        shown = guards.bottom_up(self.shown(expr, upto), ratio_powers)
        indicators = {
            p: sympy.Symbol(f"[{spec_str(p.args[0].cond)}]")
            for p in shown.atoms(sympy.Piecewise)
            if len(p.args) == 2 and p.args[0].expr == 1 and p.args[1].expr == 0
        }
        return shorten(spec_str(shown.xreplace(indicators)))

    @functools.cached_property
    def _display_map(self) -> dict:
        mapping: dict = {}
        # an operand that is a `where` intermediate is shown by its name
        symbols = {n.symbol for n in self.p.nodes}
        named = {t.expr: sympy.Symbol(name) for name, t in self.p.where if t.expr in symbols}
        for n in self.p.nodes:
            args = [spec_str(a.xreplace({**mapping, **named})) for a in n.args]
            text = node_text(n, args)
            mapping[n.symbol] = sympy.Symbol(f"({text})" if n.op == "matmul" else text)
        return mapping

    def forward_text(self, outputs, out_locals) -> tuple[str, ...]:
        """The forward as formulas, one ``name = formula`` per `where` and output."""
        lines = []
        for i, (name, term) in enumerate(self.p.where):
            lines.append(f"{name} = {self.show(term.expr, upto=i)}")
        for o, _ in outputs:
            lines.append(f"{out_locals[o.name]} = {self.show(o.term.expr)}")
        return tuple(lines)

    def forward_exprs(self, out_locals) -> tuple:
        """``(name, expression)`` pairs of the same, for ``explain``."""
        pairs = [(name, self.shown(term.expr, upto=i)) for i, (name, term) in
                 enumerate(self.p.where)]
        pairs += [(out_locals[o.name], self.shown(o.term.expr)) for o in self.p.outputs]
        return tuple(pairs)
