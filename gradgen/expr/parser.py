"""The core visitor: one expression's ast nodes into :class:`~gradgen.graph.Term` s.

Receives: the tree :func:`~gradgen.expr.syntax.read_expression` read, and the names in
scope (inputs and earlier ``where`` intermediates). Returns: a :class:`Term` per node
(SymPy expression, declared shape, leaves), or raises :class:`_ExprError`, which
:meth:`_Core.parse` turns into a located :class:`~gradgen.errors.SpecError`. Here:
names, constants, operators, comparisons and boolean operators, and the checks on every
built value (finite, bounded constants, real where the op is real). Calls are
:class:`~gradgen.expr.calls._Calls`, tensor nodes :class:`~gradgen.expr.tensors._Tensors`;
:class:`_Parser` is the three together.
"""

from __future__ import annotations

import ast
import difflib
import math

import sympy

from .. import shapes as sh
from ..errors import EVALUATION_ERRORS, Diagnostic, SpecError, error_text, short
from ..graph import Term, TensorNode
from ..pinned import sstr
from ..spec import Loc, SpecDocument
from .calls import _Calls
from .syntax import (
    FUNCTIONS,
    MAX_CONSTANT_BITS,
    MAX_CONSTANT_LOG10,
    MAX_INT_LITERAL,
    _COMPARE,
    _FORBIDDEN,
    _OPERATOR_HINTS,
    _OPERATORS,
    _ExprError,
    read_expression,
)
from .tensors import _Tensors


class _Core:
    """Parses the expressions of one op, in order, sharing its names and nodes."""

    def __init__(
        self, doc: SpecDocument, op: str, factory: sh.DimFactory, is_complex: bool,
        dtype: str = "float32",
    ):
        self.dtype = dtype
        self.doc = doc
        self.op = op
        self.factory = factory
        self.is_complex = is_complex
        self.names: dict[str, Term] = {}
        self.nodes: list[TensorNode] = []
        self.shape_of: dict[sympy.Symbol, sh.Shape] = {}
        self.key: Loc = ()
        self.name_hint = ""
        self._root: ast.AST | None = None
        self._lines: list[str] = []

    # ----------------------------------------------------------------- entry point

    def parse(self, text: str, key: Loc, name_hint: str = "") -> Term:
        self.key = key
        self.name_hint = name_hint
        try:
            tree, self._lines = read_expression(text)
            self._root = tree.body
            term = self.visit(tree.body)
            if term.is_condition:
                raise _ExprError(tree.body, "a condition is not a value; use it in where()")
            self._check_real_constants(tree.body, term.expr)
            return term
        except _ExprError as e:
            raise SpecError(self._diagnostic(e.node, e.message)) from None
        except RecursionError:
            raise SpecError(self._diagnostic(None, "expression is nested too deeply")) from None

    def _diagnostic(self, node: ast.AST | None, message: str) -> Diagnostic:
        location = self.doc.location(self.key)
        anchor = self.doc.anchor(self.key)
        if node is not None and anchor is not None and hasattr(node, "lineno"):
            line, col = anchor.position(node.lineno, node.col_offset)
            location = type(location)(location.path, line, col)
        from ..spec import format_key_path

        return Diagnostic(location, message, self.op, format_key_path(self.key[2:]))

    def _operator(self, node: ast.BinOp, symbol: str) -> ast.AST:
        """A node placed at ``node``'s operator token (the first ``symbol`` after its left
        operand, past closing parentheses and line breaks), for error positions; ``node``
        itself where the text does not show it."""
        line, col = node.left.end_lineno, node.left.end_col_offset
        while line is not None and col is not None and line <= len(self._lines):
            found = self._lines[line - 1].find(symbol, col)
            if found >= 0:
                place = ast.Constant(0)
                place.lineno, place.col_offset = line, found
                return place
            line, col = line + 1, 0
        return node

    # -------------------------------------------------------------------- visitors

    def visit(self, node: ast.AST) -> Term:
        for kind, message in _FORBIDDEN.items():
            if isinstance(node, kind):
                raise _ExprError(node, message)
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is None:
            raise _ExprError(node, f"'{type(node).__name__}' is not allowed in an expression")
        try:
            term = method(node)
        except (*EVALUATION_ERRORS, NotImplementedError) as e:
            # SymPy refuses the combination (e.g. comparing an infinite constant), or
            # mpmath overflows evaluating a function of a huge constant (erfc(1e300))
            raise _ExprError(node, f"this expression cannot be built: {error_text(e)}") from None
        if isinstance(term.expr, sympy.Basic) and term.expr.has(
            sympy.zoo, sympy.nan, sympy.oo, -sympy.oo
        ):
            raise _ExprError(node, "expression is infinite or undefined (e.g. 1/0)")
        if isinstance(term.expr, sympy.Basic) and any(
            max(abs(r.p), r.q).bit_length() > MAX_CONSTANT_BITS
            for r in term.expr.atoms(sympy.Rational)
        ):  # SymPy folded constants into one (10**300 * 10**300, (2*x)**1000)
            raise _ExprError(node, f"a constant here has more than {MAX_CONSTANT_LOG10} "
                             "digits, beyond any floating-point type")
        return term

    def visit_Constant(self, node: ast.Constant) -> Term:
        value = node.value
        if isinstance(value, bool):
            return Term(sympy.true if value else sympy.false, (), is_condition=True)
        if isinstance(value, int):
            if abs(value) > MAX_INT_LITERAL:
                raise _ExprError(node, f"integer literal larger than 2**53: {value}")
            return Term(sympy.Integer(value), ())
        if isinstance(value, float):
            if not math.isfinite(value):
                raise _ExprError(node, "literal is not finite (overflows float64)")
            if value.is_integer() and abs(value) <= MAX_INT_LITERAL:
                return Term(sympy.Integer(int(value)), ())  # 2.0 -> 2: x**2.0 is x*x
            return Term(sympy.Float(repr(value), 17), ())
        if isinstance(value, complex):
            if not self.is_complex:
                raise _ExprError(node, "complex literals need complex inputs")
            if not (math.isfinite(value.real) and math.isfinite(value.imag)):
                raise _ExprError(node, "literal is not finite")
            return Term(sympy.Float(value.real) + sympy.I * sympy.Float(value.imag), ())
        if isinstance(value, str):
            raise _ExprError(node, "strings are only allowed as einsum subscripts")
        raise _ExprError(node, f"literal {value!r} is not allowed")

    def visit_Name(self, node: ast.Name) -> Term:
        name = node.id
        if name in self.names:
            return self.names[name]
        if name == "pi":
            return Term(sympy.pi, ())
        if name == "E":
            return Term(sympy.E, ())
        if name == "I":
            if not self.is_complex:
                raise _ExprError(node, "the imaginary unit I needs complex inputs")
            return Term(sympy.I, ())
        if name in FUNCTIONS:
            raise _ExprError(node, f"'{name}' is a function; call it like {name}(...)")
        known = sorted(self.names)
        hint = difflib.get_close_matches(name, known + ["pi", "E"], n=1)
        msg = f"unknown name '{name}'"
        if hint:
            msg += f"; did you mean '{hint[0]}'?"
        msg += f" (defined here: {', '.join(known)})"  # an op has at least one input
        raise _ExprError(node, msg)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Term:
        operand = self.visit(node.operand)
        if isinstance(node.op, ast.Not):
            self._need_condition(node.operand, operand)
            return Term(sympy.Not(operand.expr), operand.shape, operand.leaves, True)
        self._need_value(node.operand, operand)
        if isinstance(node.op, ast.USub):
            return Term(-operand.expr, operand.shape, operand.leaves)
        if isinstance(node.op, ast.UAdd):
            return operand
        raise _ExprError(node, "operator '~' is not allowed; use 'not' for a condition")

    def visit_BinOp(self, node: ast.BinOp) -> Term:
        symbol = _OPERATORS[type(node.op)]  # every ast.operator type is listed
        if symbol not in ("+", "-", "*", "/", "**", "@"):
            raise _ExprError(self._operator(node, symbol), f"operator '{symbol}' is not "
                             "allowed" + _OPERATOR_HINTS.get(symbol, ""))
        left, right = self.visit(node.left), self.visit(node.right)
        self._need_value(node.left, left)
        self._need_value(node.right, right)
        if symbol == "@":
            return self._matmul(node, left, right)
        shape = self._broadcast(node, [left, right])
        a, b = left.expr, right.expr
        if symbol == "+":
            expr = a + b
        elif symbol == "-":
            expr = a - b
        elif symbol == "*":
            expr = a * b
        elif symbol == "/":
            expr = a / b
        else:
            expr = self._pow(node, a, b)
        return Term(expr, shape, left.leaves | right.leaves)

    def _pow(self, node: ast.AST, base, exponent):
        if exponent.is_number:
            # SymPy evaluates a numeric power at once, and distributes one over a
            # product's numeric factor ((2*x)**n is 2**n * x**n): bound that number
            # before SymPy computes it
            coeff = base if base.is_number else base.as_coeff_Mul()[0]
            try:
                magnitude = abs(float(exponent)) * abs(math.log10(abs(float(coeff)) or 1.0))
            except (TypeError, ValueError, OverflowError):
                magnitude = math.inf
            if magnitude > MAX_CONSTANT_LOG10:
                raise _ExprError(node, "constant power is too large to represent")
        if exponent.is_Float and float(exponent * 4).is_integer():
            # x**0.5 is x**(1/2) exactly (also 2.0, 1.5, 0.25): the same derivative,
            # guards and code as sqrt(x), not pow(x, 0.5) with 1.0 * ... factors
            exponent = sympy.Rational(int(exponent * 4), 4)
        return base**exponent

    def visit_Compare(self, node: ast.Compare) -> Term:
        terms = [self.visit(node.left)] + [self.visit(c) for c in node.comparators]
        for child, term in zip([node.left] + node.comparators, terms):
            self._need_value(child, term)
            if self.is_complex:
                raise _ExprError(node, "complex values cannot be compared")
        for child, term in zip([node.left] + node.comparators, terms):
            self._need_real(child, term.expr, "a comparison")
        parts = []
        for op, a, b in zip(node.ops, terms, terms[1:]):
            cls = _COMPARE.get(type(op))
            if cls is None:
                raise _ExprError(node, "only < <= > >= == != comparisons are allowed")
            parts.append(cls(a.expr, b.expr))
        expr = sympy.And(*parts) if len(parts) > 1 else parts[0]
        leaves = frozenset().union(*(t.leaves for t in terms))
        return Term(expr, self._broadcast(node, terms), leaves, True)

    def visit_BoolOp(self, node: ast.BoolOp) -> Term:
        terms = [self.visit(v) for v in node.values]
        for child, term in zip(node.values, terms):
            self._need_condition(child, term)
        combine = sympy.And if isinstance(node.op, ast.And) else sympy.Or
        expr = combine(*(t.expr for t in terms))
        leaves = frozenset().union(*(t.leaves for t in terms))
        return Term(expr, self._broadcast(node, terms), leaves, True)

    def visit_Tuple(self, node: ast.Tuple) -> Term:
        raise _ExprError(node, "tuples are only allowed as Piecewise((value, condition), ...)")

    def visit_List(self, node: ast.List) -> Term:
        raise _ExprError(node, "lists are not allowed here")

    # -------------------------------------------------------------------- helpers

    def _broadcast(self, node: ast.AST, terms: list[Term]) -> sh.Shape:
        try:
            return sh.broadcast_all([t.shape for t in terms], self.factory)
        except sh.ShapeError as e:
            raise _ExprError(node, str(e)) from None

    def _need_value(self, node: ast.AST, term: Term) -> None:
        if term.is_condition:
            raise _ExprError(node, "a condition is not a value here")

    def _need_condition(self, node: ast.AST, term: Term) -> None:
        if not term.is_condition:
            raise _ExprError(node, "expected a condition such as x > 0")

    def _need_real(self, node: ast.AST, expr, where: str) -> None:
        """Refuse, in an op with real inputs, a value SymPy knows is never real where it
        is compared (``Max(log(-1.5, 2), 2)``, ``log(t, 3)`` of a ``t = sign(...)`` that is
        at most 0): SymPy's comparison raised TypeError, a traceback."""
        if not self.is_complex and expr.is_extended_real is False:
            raise _ExprError(
                node,
                f"{where} needs real values, but this one is not real for any input (a "
                "logarithm or root of a number that is never positive?)",
            )

    def _check_real_constants(self, node: ast.AST, expr) -> None:
        """Refuse a complex constant (``sqrt(-2)``) in an op with real inputs. (Infinite
        and undefined constants are refused where they appear, by :meth:`visit`.)"""
        if not self.is_complex:
            for part in sympy.preorder_traversal(expr):
                if isinstance(part, sympy.Expr) and part.is_number and not part.is_Atom or (
                    part is sympy.I
                ):
                    value = self._constant_value(node, part)
                    if value.imag != 0:
                        raise _ExprError(
                            node,
                            f"the constant {sstr(part)} is complex "
                            f"({value.real:g}{value.imag:+g}j); complex values need "
                            "complex inputs",
                        )

    @staticmethod
    def _constant_value(node: ast.AST, part) -> complex:
        """``part``, a constant: 0 where SymPy knows it is real (``log1p(1e-300)``, which
        20 digits would round to 0), else its value to 20 digits.

        Raises:
            _ExprError: SymPy cannot evaluate it (``Heaviside(acos(1e300))`` compares a
                complex number with 0; a huge argument overflows mpmath).
        """
        try:
            return 0j if part.is_extended_real else complex(part.evalf(20))
        except EVALUATION_ERRORS as e:
            raise _ExprError(
                node, f"the constant {short(part)} cannot be evaluated "
                f"({error_text(e)}); an op with real inputs needs real constants",
            ) from None


class _Parser(_Calls, _Tensors, _Core):
    """The parser of one op: the core visitor with calls and tensor nodes."""
