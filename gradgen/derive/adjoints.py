"""VJPs of the operations only VJPs hold, so that a VJP, as an op of its own
(:mod:`.vjp_op`), can be derived again.

Each rule receives the derivation, a node, its cotangent ``H`` (a symbol) and the
operands as the forward computes them, and returns an
:class:`~gradgen.derive.cotangents.OperandVJP` per differentiable operand, as the rules
of :mod:`.matrix` and :mod:`.reductions` do. The operations, as ``ir.Call`` s print them
(``Y`` the node's value):

* ``Y = unreduce(G, like; axes)``: ``G`` broadcast back over the summed ``axes``:
  ``dG = sum(H, axes)`` (the adjoint of a broadcast is a sum);
* ``Y = broadcast(A)``, ``Y = unbroadcast(A, like)``: each other's adjoint (the sum over
  the broadcast axes, :func:`gradgen.derive.unbroadcast.unbroadcast`, and the broadcast
  back to ``A``'s shape);
* ``Y = expand_matrix(G)`` (``G[..., None, None]``): ``dG = sum(H, last two axes)``;
* ``Y = eye(like)``, ``Y = count(like; axes)``: constants (no operand VJP);
* ``Y = cofactor(A) = det(A) inverse(A)^T``: ``dA = det(A) (<H, A^-T> A^-T - A^-T H^T
  A^-T)`` (the differential of the adjugate, ``d det = det tr(A^-1 dA)`` and ``d A^-1 =
  -A^-1 dA A^-1``; Magnus and Neudecker, *Matrix Differential Calculus*, ch. 8); VJP ops
  are real (:func:`~gradgen.derive.vjp_op.vjp_program`); infinite where ``A`` is singular
  (the first-order cofactor is finite there);
* ``Y = softmax_grad(G, P) = P (G - s)``, ``s = sum(G P, axes)``: the Jacobian in ``G``
  is symmetric, so ``dG = softmax_grad(H, P)``; ``dP = H (G - s) - G sum(H P, axes)``;
* ``Y = log_softmax_grad(G, L) = G - exp(L) sum(G, axes)``: ``dG = H - sum(H exp(L),
  axes)``; ``dL = -H exp(L) sum(G, axes)``.
"""

from __future__ import annotations

import sympy

from .. import ir
from .. import shapes as sh
from ..graph import TensorNode
from .context import Derivation
from .cotangents import OperandVJP
from .unbroadcast import unbroadcast as summed_back

_MINUS = sympy.Integer(-1)


def _sum(value, axes, keepdims: bool = True) -> ir.Call:
    return ir.Call("reduce_sum", (value,), (("axis", tuple(axes)), ("keepdims", keepdims)))


def _minus(value: ir.Call) -> ir.Call:
    return ir.Call("mul", (_MINUS, value))


def unreduce(d: Derivation, node: TensorNode, h, args) -> list[OperandVJP]:
    """``Y = unreduce(G, like; axes)``: ``dG = sum(H, axes)``."""
    axes, keepdims = node.param("axes"), node.param("keepdims")
    return [OperandVJP(node.args[0], _sum(h, axes, keepdims), node.arg_shapes[0],
                       f"sum({h.name}, axis={list(axes)})")]


def broadcast(d: Derivation, node: TensorNode, h, args) -> list[OperandVJP]:
    """``Y = broadcast(A)``: ``dA`` is ``H`` summed back to ``A``'s shape."""
    shape = node.arg_shapes[0]
    plan = sh.reduction_plan(shape, node.shape)
    return [OperandVJP(node.args[0], summed_back(h, plan, args[0]), shape,
                       f"{h.name} summed to the shape of {node.args[0]}")]


def unbroadcast(d: Derivation, node: TensorNode, h, args) -> list[OperandVJP]:
    """``Y = unbroadcast(A, like)``: ``dA`` is ``H`` broadcast back to ``A``'s shape."""
    # (a VJP unbroadcasts at run time only where the declared shapes leave the axes
    # undecided, so the shape to broadcast back to is a run-time one too)
    value = ir.Call("broadcast_to", (h, ir.Call("broadcast_shape", (args[0],))))
    return [OperandVJP(node.args[0], value, node.arg_shapes[0], f"{h.name} broadcast back")]


def expand_matrix(d: Derivation, node: TensorNode, h, args) -> list[OperandVJP]:
    """``Y = G[..., None, None]``: ``dG = sum(H, last two axes)``."""
    return [OperandVJP(node.args[0], _sum(h, last_two_axes(node.shape), False),
                       node.arg_shapes[0], f"sum({h.name}, axis=[-2, -1])")]


def last_two_axes(shape: sh.Shape) -> tuple[int, ...]:
    """The last two axes of ``shape``, normalized (negative after a ``...``)."""
    return sh.normalize_axes((-2, -1), sh.core_rank(shape), sh.has_batch(shape))


def constant(d: Derivation, node: TensorNode, h, args) -> list[OperandVJP]:
    """``eye(like)``, ``count(like)``: no operand VJP (the operand only gives a shape)."""
    return []  # eye(), count(): the operand only gives the shape


def cofactor(d: Derivation, node: TensorNode, h, args) -> list[OperandVJP]:
    """``Y = cofactor(A)``: ``dA = det(A) (<H, A^-T> A^-T - A^-T H^T A^-T)``."""
    a = args[0]  # (real: vjp_program refuses complex ops, whose cofactor is conjugated)
    inv_t = ir.Call("inverse", (a,), (("adjoint", True),))
    axes = last_two_axes(node.shape)
    inner = _sum(ir.Call("mul", (h, inv_t)), axes, False)
    term = ir.Call("matmul", (ir.Call("matmul", (inv_t, h), (("transpose_b", True),)), inv_t))
    value = ir.Call("mul", (
        ir.Call("expand_matrix", (ir.Call("det", (a,)),)),
        ir.Call("add", (ir.Call("mul", (ir.Call("expand_matrix", (inner,)), inv_t)),
                        _minus(term))),
    ))
    return [OperandVJP(node.args[0], value, node.arg_shapes[0],
                       f"det * (<{h.name}, A^-T> A^-T - A^-T {h.name}^T A^-T)")]


def softmax_grad(d: Derivation, node: TensorNode, h, args) -> list[OperandVJP]:
    """``Y = P (G - sum(G P))``: ``dG = softmax_grad(H, P)``, ``dP = H (G - s) - G sum(H P)``."""
    axes = node.param("axis")
    g, p = args
    s = _sum(ir.Call("mul", (g, p)), axes)
    dg = ir.Call("softmax_grad", (h, p), (("axis", axes),))
    dp = ir.Call("add", (ir.Call("mul", (h, ir.Call("add", (g, _minus(s))))),
                         _minus(ir.Call("mul", (g, _sum(ir.Call("mul", (h, p)), axes))))))
    (g_shape, p_shape) = node.arg_shapes
    return [OperandVJP(node.args[0], dg, g_shape, f"softmax_grad({h.name}, probs)"),
            OperandVJP(node.args[1], dp, p_shape,
                       f"{h.name} (g - sum(g probs)) - g sum({h.name} probs)")]


def log_softmax_grad(d: Derivation, node: TensorNode, h, args) -> list[OperandVJP]:
    """``Y = G - exp(L) sum(G)``: ``dG = H - sum(H exp(L))``, ``dL = -H exp(L) sum(G)``."""
    axes = node.param("axis")
    g = args[0]
    p = sympy.exp(node.args[1])  # exp of the log-softmax, a node's symbol
    dg = ir.Call("add", (h, _minus(_sum(ir.Call("mul", (h, p)), axes))))
    dl = _minus(ir.Call("mul", (h, p, _sum(g, axes))))
    (g_shape, l_shape) = node.arg_shapes
    return [OperandVJP(node.args[0], dg, g_shape, f"{h.name} - sum({h.name} exp(y))"),
            OperandVJP(node.args[1], dl, l_shape, f"-{h.name} exp(y) sum(g)")]


RULES = {
    "unreduce": unreduce,
    "broadcast": broadcast,
    "unbroadcast": unbroadcast,
    "expand_matrix": expand_matrix,
    "eye": constant,
    "count": constant,
    "cofactor": cofactor,
    "softmax_grad": softmax_grad,
    "log_softmax_grad": log_softmax_grad,
}
