"""Tensor nodes: the non-elementwise ops of an expression.

Receives: the operands' :class:`Term` s (and, for reductions, softmax and einsum, the
call's ast node for its axes, ``keepdims`` or subscripts). Returns: a :class:`Term` for a
fresh node symbol, its :class:`~gradgen.graph.TensorNode` appended to the parser's nodes
(the same op on the same operands is one node): ``@``, ``transpose``, the square-matrix
ops (``inverse``, ``det``, ``trace``, ``log(det())``), ``sum``/``mean``/``max``/``min``/
``logsumexp`` over axes, ``softmax``/``log_softmax`` along axes and ``einsum``; also an
intermediate made its own step (:meth:`_Tensors.materialize`). Raises
:class:`_ExprError` for shapes that do not fit the op. A mixin of
:class:`~gradgen.expr.parser._Parser`.
"""

from __future__ import annotations

import ast

import sympy

from .. import shapes as sh
from ..functions import declarations as fns
from ..graph import NODE_NAMES, Term, TensorNode, node_assumptions
from ..spec import Loc
from .syntax import SOFTMAXES, _ExprError

# TensorFlow kernels (forward and VJP) a matrix function prints as, and the float
# dtypes they lack (TF 2.21 CPU and GPU registrations): the VJP of det() uses an SVD,
# that of log(det()) a QR and an inverse.
NO_KERNEL = {f.name: f.no_kernel for f in fns.FUNCTIONS if f.no_kernel}


class _Tensors:
    """Builders of tensor nodes (a mixin of the parser)."""

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

    def materialize(self, term: Term, key: Loc, name: str) -> Term:
        """``term`` as an elementwise node: computed once, differentiated by the chain
        rule through its symbol."""
        self.key, self.name_hint, self._root = key, name, None
        return self._node(None, "elementwise", [term], term.shape)

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
