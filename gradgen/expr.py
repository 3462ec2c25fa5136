"""Safe parsing of spec expressions into SymPy, with shapes.

Consumes: one validated op (:class:`gradgen.spec.OpSpec`) and its document (for
positions). Guarantees: :func:`parse_op` returns a :class:`Program`, or raises
:class:`~gradgen.errors.SpecError` pointing at the offending part of the expression.

Spec text is never given to ``eval``, ``sympify`` or ``parse_expr``. It is parsed with
Python's :mod:`ast` in ``eval`` mode, every node is checked against an allow-list
(numbers, names of inputs and intermediates, ``+ - * / ** @``, unary minus, comparisons
and boolean operators inside conditions, calls of the functions in :data:`FUNCTIONS`),
and the SymPy objects are built here, node by node. Sizes are bounded: text length,
AST node count and depth, literal magnitudes, and numeric powers (``10**10**10`` is
refused, not evaluated).

A :class:`Program` separates two kinds of computation:

* elementwise expressions: SymPy expressions over input symbols and node symbols, with
  NumPy broadcasting;
* :class:`TensorNode` s: non-elementwise ops (``@``, ``transpose``...), each with a fresh
  symbol that stands for its result in later elementwise expressions.

Every term carries its declared :data:`~gradgen.shapes.Shape` (computed from the
expression *as written*, before SymPy simplifies anything away) and the set of leaf
symbols written in it, so that an output like ``x - x + y`` keeps the broadcast shape
of ``x`` and ``y``.
"""

from __future__ import annotations

import ast
import difflib
import math
from typing import Callable

import sympy

from . import shapes as sh
from .errors import Diagnostic, SpecError
from .functions import declarations as fns
from .functions.registry import ELEMENTWISE, FORM, MATRIX, REAL, REDUCTION, SOFTMAX
from .graph import (
    NODE_NAMES,
    InputVar,
    Output,
    Program,
    Term,
    TensorNode,
    expanded_size,
    node_assumptions,
)
from .naming import EXPRESSION_NAMES
from .spec import (
    BATCH,
    COMPLEX_DTYPES,
    FLOAT_DTYPES,
    INT_DTYPES,
    Loc,
    OpSpec,
    SpecDocument,
    default_memory,
)

MAX_AST_NODES = 2000
WHERE_INLINE_MAX = 60  # tree size above which a `where` intermediate is its own step
MAX_AST_DEPTH = 64
MAX_INT_LITERAL = 2**53
MAX_CONSTANT_LOG10 = 300
MAX_CONSTANT_BITS = 1100  # a rational's numerator or denominator: about 330 digits


class _ExprError(Exception):
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
# TensorFlow kernels (forward and VJP) a matrix function prints as, and the float
# dtypes they lack (TF 2.21 CPU and GPU registrations): the VJP of det() uses an SVD,
# that of log(det()) a QR and an inverse.
NO_KERNEL = {f.name: f.no_kernel for f in fns.FUNCTIONS if f.no_kernel}
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


def _dim(d, factory: sh.DimFactory) -> sh.Dim:
    if d == BATCH:
        return factory.batch()
    return factory.unknown() if d is None else d


def _compute_dtype(op: OpSpec, default: str) -> str:
    """The one float/complex dtype of the op's non-integer inputs (the module's default,
    or float32, when every input is an integer).

    Raises:
        ValueError: inputs of different float or complex dtypes (the message says so).
    """
    dtypes = sorted({s.dtype for s in op.inputs.values() if s.dtype not in INT_DTYPES})
    if len(dtypes) > 1:
        listing = ", ".join(f"{n}: {s.dtype}" for n, s in op.inputs.items())
        raise ValueError(
            f"inputs have different dtypes ({listing}); an op computes in one float or "
            "complex dtype (integer inputs are cast to it)"
        )
    if dtypes:
        return dtypes[0]
    return default if default in FLOAT_DTYPES + COMPLEX_DTYPES else "float32"


def parse_op(doc: SpecDocument, index: int) -> Program:
    """Parse every expression of ``doc.model.ops[index]`` into a :class:`Program`.

    Raises:
        SpecError: an unknown name or function, a construct outside the allow-list,
            shapes that do not broadcast, an oversized or non-finite constant; the
            diagnostic points into the expression where the AST allows.
    """
    op = doc.model.ops[index]
    base: Loc = ("ops", index)
    factory = sh.DimFactory()
    try:
        dtype = _compute_dtype(op, op.dtype if isinstance(op.dtype, str) else "float32")
    except ValueError as e:
        raise SpecError(_diag(doc, op.name, base + ("inputs",), str(e))) from None
    is_complex = dtype in COMPLEX_DTYPES

    inputs = []
    for name, spec in op.inputs.items():
        if spec.dtype in INT_DTYPES:
            symbol = sympy.Symbol(name, integer=True)
        elif spec.dtype in COMPLEX_DTYPES:
            symbol = sympy.Symbol(name, complex=True)
        else:
            symbol = sympy.Symbol(name, real=True)
        shape = tuple(_dim(d, factory) for d in spec.shape)
        inputs.append(
            InputVar(
                name=name,
                symbol=symbol,
                shape=shape,
                declared=tuple(... if d == BATCH else d for d in spec.shape),
                dtype=spec.dtype,
                differentiable=bool(spec.differentiable),
                key=base + ("inputs", name),
                domain=spec.domain,
            )
        )
    parser = _Parser(doc, op.name, factory, is_complex, dtype)
    for var in inputs:
        parser.names[var.name] = Term(var.symbol, var.shape, frozenset([var.symbol]))
        parser.shape_of[var.symbol] = var.shape

    where = []
    for name, text in op.where.items():
        key = base + ("where", name)
        term = parser.parse(text, key, name_hint=name)
        if not term.is_condition and expanded_size(term.expr) > WHERE_INLINE_MAX:
            # A large intermediate (typically the end of a chain of them) is computed as
            # its own step: substituting it into later expressions would grow them
            # exponentially, and so would their derivatives.
            term = parser.materialize(term, key, name)
        parser.names[name] = term
        where.append((name, term))

    outputs = []
    if op.output is not None:
        key = base + ("output",)
        outputs.append(Output("out", parser.parse(op.output, key), key))
    else:
        for name, text in op.outputs.items():
            key = base + ("outputs", name)
            outputs.append(Output(name, parser.parse(text, key, name_hint=name), key))

    return Program(
        name=op.name,
        doc=op.doc,
        inputs=tuple(inputs),
        nodes=tuple(parser.nodes),
        where=tuple(where),
        outputs=tuple(outputs),
        single=op.output is not None,
        dtype=dtype,
        key=base,
        memory=op.memory or default_memory(op.fuse or "none"),
        fuse=op.fuse or "none",
        shape_of=parser.shape_of,
        factory=factory,
    )


def _diag(doc: SpecDocument, op: str, loc: Loc, message: str) -> Diagnostic:
    from .spec import format_key_path

    return Diagnostic(doc.location(loc), message, op, format_key_path(loc[2:]))


class _Parser:
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
            tree = self._ast(text)
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
        from .spec import format_key_path

        return Diagnostic(location, message, self.op, format_key_path(self.key[2:]))

    def _ast(self, text: str) -> ast.Expression:
        for i, ch in enumerate(text):
            if ch == "#":
                raise _ExprError(None, "comments ('#') are not allowed in an expression")
            if not (32 <= ord(ch) < 127 or ch in "\n\t"):
                raise _ExprError(
                    None, f"expressions are ASCII; found {ch!r} at character {i + 1}"
                )
        text = text.strip()
        self._lines = text.split("\n")
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
        return tree

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
        except (TypeError, ValueError, ZeroDivisionError, NotImplementedError) as e:
            # SymPy refuses the combination (e.g. comparing an infinite constant)
            raise _ExprError(node, f"this expression cannot be built: {e}") from None
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

    def visit_Call(self, node: ast.Call) -> Term:
        if not isinstance(node.func, ast.Name):
            self.visit(node.func)  # reports the attribute access, lambda... it is
            raise _ExprError(node, "only calls of allowed functions by name, like exp(x)")
        name = node.func.id
        if name in self.names:
            raise _ExprError(node, f"'{name}' is a value, not a function")
        if name not in FUNCTIONS:
            hint = difflib.get_close_matches(name, FUNCTIONS, n=1)
            msg = f"unknown function '{name}'"
            msg += f"; did you mean '{hint[0]}'?" if hint else ""
            raise _ExprError(node, msg + f" (allowed: {', '.join(FUNCTIONS)})")
        if name in REDUCTIONS or name in SOFTMAXES:
            return self._reduction(node, name)
        if node.keywords:
            raise _ExprError(node, f"{name}() takes no keyword arguments")
        if name == "Piecewise":
            return self._piecewise(node)
        if name == "einsum":
            return self._einsum(node)
        if (
            name == "log"
            and len(node.args) == 1
            and isinstance(node.args[0], ast.Call)
            and isinstance(node.args[0].func, ast.Name)
            and node.args[0].func.id == "det"
            and len(node.args[0].args) == 1
            and not node.args[0].keywords
        ):
            # log(det(S)) in its stable form: log|det(S)| from slogdet
            (matrix,) = [self.visit(a) for a in node.args[0].args]
            self._need_value(node.args[0].args[0], matrix)
            return self._square_node(node, "logdet", matrix)
        args = [self.visit(a) for a in node.args]
        if name == "where":
            self._arity(node, name, args, 3)
            self._need_condition(node.args[0], args[0])
            self._need_value(node.args[1], args[1])
            self._need_value(node.args[2], args[2])
            expr = sympy.Piecewise((args[1].expr, args[0].expr), (args[2].expr, True))
            return self._elementwise(node, expr, args)
        for child, arg in zip(node.args, args):
            self._need_value(child, arg)
        function = fns.spelled(name)
        self._check_arity(node, name, args, function.arity)
        if function.kind == ELEMENTWISE:
            for i, (child, a) in enumerate(zip(node.args, args)):
                if function.arg_kind(i) == REAL:
                    self._need_real(child, a.expr, f"{name}()")
            return self._elementwise(node, function.build(*(a.expr for a in args)), args)
        if name == "transpose":
            return self._transpose(node, args[0])
        if name in ("inverse", "det", "trace"):
            return self._square_node(node, name, args[0])
        raise AssertionError(name)  # every allowed function is handled above

    # -------------------------------------------------------------------- helpers

    def _piecewise(self, node: ast.Call) -> Term:
        if not node.args:
            raise _ExprError(node, "Piecewise() needs (value, condition) pairs")
        pairs, terms = [], []
        for arg in node.args:
            if not isinstance(arg, ast.Tuple) or len(arg.elts) != 2:
                raise _ExprError(arg, "each Piecewise argument is a (value, condition) pair")
            value, cond = self.visit(arg.elts[0]), self.visit(arg.elts[1])
            self._need_value(arg.elts[0], value)
            self._need_condition(arg.elts[1], cond)
            pairs.append((value.expr, cond.expr))
            terms += [value, cond]
        if pairs[-1][1] is not sympy.true:
            raise _ExprError(
                node.args[-1],
                "the last Piecewise pair must have the condition True (the value "
                "everywhere else), so the result is defined for every input",
            )
        return self._elementwise(node, sympy.Piecewise(*pairs), terms)

    def _elementwise(self, node: ast.AST, expr, args: list[Term]) -> Term:
        shape = self._broadcast(node, args)
        leaves = frozenset().union(*(a.leaves for a in args))
        return Term(expr, shape, leaves)

    def _broadcast(self, node: ast.AST, terms: list[Term]) -> sh.Shape:
        try:
            return sh.broadcast_all([t.shape for t in terms], self.factory)
        except sh.ShapeError as e:
            raise _ExprError(node, str(e)) from None

    def _arity(self, node: ast.AST, name: str, args: list, n: int) -> None:
        self._check_arity(node, name, args, (n, n))

    def _check_arity(self, node: ast.AST, name: str, args: list, arity: tuple) -> None:
        """Refuse a call of ``name`` with a number of arguments outside ``arity`` (the
        fewest and most, most None for any number above)."""
        least, most = arity
        if most is None and len(args) < least:
            raise _ExprError(node, f"{name}() takes two or more arguments")
        if most is not None and not least <= len(args) <= most:
            plural = "argument" if least == 1 else "arguments"
            raise _ExprError(node, f"{name}() takes {least} {plural}, got {len(args)}")

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
                    value = complex(part.evalf(20))
                    if value.imag != 0:
                        raise _ExprError(
                            node,
                            f"the constant {sympy.sstr(part)} is complex "
                            f"({value.real:g}{value.imag:+g}j); complex values need "
                            "complex inputs",
                        )

    def _node(
        self, node: ast.AST, op: str, args: list[Term], shape: sh.Shape, params: tuple = ()
    ) -> Term:
        for existing in self.nodes:  # the same operation written twice is computed once
            if (existing.op, existing.args, existing.params) == (
                op, tuple(a.expr for a in args), params
            ):
                return Term(existing.symbol, existing.shape, frozenset([existing.symbol]))
        index = len(self.nodes)
        hint = self.name_hint if node is None or self._is_whole(node) else ""
        assumptions = node_assumptions(op, args[0].expr, self.is_complex)
        symbol = sympy.Symbol(f"_node{index}", **assumptions)
        self.nodes.append(
            TensorNode(
                symbol=symbol,
                op=op,
                args=tuple(a.expr for a in args),
                arg_shapes=tuple(a.shape for a in args),
                shape=shape,
                key=self.key,
                name_hint=hint or NODE_NAMES[op],
                params=params,
                arg_leaves=tuple(a.leaves for a in args),
            )
        )
        self.shape_of[symbol] = shape
        return Term(symbol, shape, frozenset([symbol]))

    def _is_whole(self, node: ast.AST) -> bool:
        return self._root is node

    def _matmul(self, node: ast.AST, left: Term, right: Term) -> Term:
        try:
            shape = sh.matmul_shape(left.shape, right.shape, self.factory)
        except sh.ShapeError as e:
            raise _ExprError(node, str(e)) from None
        return self._node(node, "matmul", [left, right], shape)

    def _transpose(self, node: ast.AST, arg: Term) -> Term:
        if sh.core_rank(arg.shape) < 2:
            raise _ExprError(
                node, f"transpose() needs rank >= 2 (swaps the last two axes); got "
                f"{sh.format_shape(arg.shape)}"
            )
        shape = arg.shape[:-2] + (arg.shape[-1], arg.shape[-2])
        return self._node(node, "transpose", [arg], shape)

    def materialize(self, term: Term, key: Loc, name: str) -> Term:
        """``term`` as an elementwise node: computed once, differentiated by the chain
        rule through its symbol."""
        self.key, self.name_hint, self._root = key, name, None
        return self._node(None, "elementwise", [term], term.shape)

    def _square_node(self, node: ast.AST, op: str, arg: Term) -> Term:
        what = "log(det())" if op == "logdet" else f"{op}()"
        kernels, lacking = NO_KERNEL.get(op, ("", ()))
        if self.dtype in lacking:
            raise _ExprError(
                node, f"{what} cannot compute in {self.dtype}: TensorFlow has no "
                f"{' or '.join(lacking)} kernel for {kernels}; generate this op for "
                "other dtypes, e.g. dtype: [float32, float64]"
            )
        try:
            shape = sh.square_shape(arg.shape, self.factory, what)
        except sh.ShapeError as e:
            raise _ExprError(node, str(e)) from None
        result = shape if op == "inverse" else shape[:-2]
        return self._node(node, op, [arg], result)

    def _reduction(self, node: ast.Call, name: str) -> Term:
        """``sum``/``mean``/``max``/``min``/``logsumexp`` over axes (all when omitted),
        and ``softmax``/``log_softmax`` along axes (the last when omitted)."""
        softmax = name in SOFTMAXES
        keywords = ("axis",) if softmax else ("axis", "keepdims")
        if not node.args or len(node.args) > 2:
            raise _ExprError(node, f"{name}() takes a tensor and optionally an axis")
        if name in ("max", "min") and len(node.args) == 2 and not self._is_axis(node.args[1]):
            raise _ExprError(
                node.args[1],
                f"{name}(x, axis=...) reduces over axes; the elementwise "
                f"{'maximum' if name == 'max' else 'minimum'} of several values is "
                f"{name.capitalize()}(a, b, ...)",
            )
        arg = self.visit(node.args[0])
        self._need_value(node.args[0], arg)
        axis_node = node.args[1] if len(node.args) == 2 else None
        keepdims = False
        for kw in node.keywords:
            if kw.arg == "axis" and axis_node is None:
                axis_node = kw.value
            elif kw.arg == "keepdims" and not softmax:
                if not (isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, bool)):
                    raise _ExprError(kw.value, "keepdims is True or False")
                keepdims = kw.value.value
            else:
                raise _ExprError(
                    node, f"{name}() takes the keyword{'s' * (len(keywords) > 1)} "
                    + " and ".join(keywords)
                )
        rank, batched = sh.core_rank(arg.shape), sh.has_batch(arg.shape)
        if axis_node is not None:
            axes = self._axes(axis_node)
        elif batched and not softmax:
            raise _ExprError(
                node, f"{name}() of a shape starting with '...' needs its axes, counted "
                f"from the end (axis=-1): the batch dims of {sh.format_shape(arg.shape)} "
                "are not reduced inside an op (reduce its output instead)"
            )
        else:
            axes = (-1,) if softmax and rank else tuple(range(rank))
        try:
            axes = sh.normalize_axes(axes, rank, batched)
        except sh.ShapeError as e:
            raise _ExprError(axis_node or node, str(e)) from None
        if softmax:
            if not axes:
                raise _ExprError(node, f"{name}() needs an input of rank >= 1")
            return self._node(node, name, [arg], arg.shape, (("axes", axes),))
        shape = sh.reduce_shape(arg.shape, axes, keepdims)
        params = (("axes", axes), ("keepdims", keepdims))
        return self._node(node, name, [arg], shape, params)

    @staticmethod
    def _is_axis(node: ast.AST) -> bool:
        """Whether ``node`` is written like an axis: an int literal, -int, or a list."""
        if isinstance(node, (ast.List, ast.Tuple)):
            return True
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            node = node.operand
        return isinstance(node, ast.Constant) and type(node.value) is int

    def _axes(self, node: ast.AST) -> tuple[int, ...]:
        items = node.elts if isinstance(node, (ast.List, ast.Tuple)) else [node]
        out = []
        for item in items:
            value = item
            sign = 1
            if isinstance(item, ast.UnaryOp) and isinstance(item.op, ast.USub):
                value, sign = item.operand, -1
            if not (isinstance(value, ast.Constant) and type(value.value) is int):
                raise _ExprError(item, "an axis is an integer literal, like 1 or -1")
            out.append(sign * value.value)
        return tuple(out)

    def _einsum(self, node: ast.Call) -> Term:
        if not node.args or not (
            isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
        ):
            raise _ExprError(node, "einsum() takes a subscript string first, like 'ij,jk->ik'")
        if len(node.args[0].value) > 64:
            raise _ExprError(node.args[0], "einsum subscripts are longer than 64 characters")
        operands = [self.visit(a) for a in node.args[1:]]
        for child, term in zip(node.args[1:], operands):
            self._need_value(child, term)
        try:
            shape, inputs, out = sh.einsum_shape(
                node.args[0].value, [t.shape for t in operands], self.factory
            )
        except sh.ShapeError as e:
            raise _ExprError(node, str(e)) from None
        params = (("subscripts", (tuple(inputs), out)),)
        return self._node(node, "einsum", operands, shape, params)
