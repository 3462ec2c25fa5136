"""Function calls: ``Piecewise``, ``where``, the elementwise functions, ``log(det())``.

Receives: an ``ast.Call`` node of an expression. Returns: its :class:`Term`, an
elementwise SymPy expression built by the function's declaration (the function registry,
:mod:`gradgen.functions`), or a tensor node through :class:`~gradgen.expr.tensors._Tensors`
(matrix functions, reductions, softmax, einsum); raises :class:`_ExprError` for an
unknown function, a wrong number or kind of arguments. A mixin of
:class:`~gradgen.expr.parser._Parser`: ``visit``, ``_broadcast`` and the ``_need_*``
checks are the core visitor's.
"""

from __future__ import annotations

import ast
import difflib

import sympy

from ..functions import declarations as fns
from ..functions.registry import ELEMENTWISE, REAL
from ..graph import Term
from .syntax import FUNCTIONS, REDUCTIONS, SOFTMAXES, _ExprError


class _Calls:
    """Calls of the spec language's functions (a mixin of the parser)."""

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

    def _arity(self, node: ast.AST, name: str, args: list, n: int) -> None:
        self._check_arity(node, name, args, (n, n))

    def _check_arity(self, node: ast.AST, name: str, args: list, arity: tuple) -> None:
        """Refuse a call of ``name`` with a number of arguments outside ``arity`` (the
        fewest and most, most None for any number above)."""
        least, most = arity
        if most is None and len(args) < least:
            raise _ExprError(node, f"{name}() takes two or more arguments")
        if most is not None and not least <= len(args) <= most:
            count = f"{least}" if least == most else f"{least} or {most}"
            plural = "argument" if most == 1 else "arguments"
            raise _ExprError(node, f"{name}() takes {count} {plural}, got {len(args)}")
