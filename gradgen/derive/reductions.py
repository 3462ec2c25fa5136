"""VJPs of the reductions: ``sum``, ``mean``, ``max``, ``min``, ``logsumexp``,
``softmax`` and ``log_softmax`` over axes.

Each rule receives the derivation, a node, its cotangent ``G`` (a symbol) and the
operand as the forward computes it, and returns its
:class:`~gradgen.derive.cotangents.OperandVJP`. ``Y`` is the node's value:

* ``Y = sum(A, axes)``: ``dA = G`` broadcast back over ``axes``; ``mean`` divides by
  the number of elements summed (a keepdims one also hands on the cotangent before it
  is broadcast, :class:`~gradgen.derive.cotangents.Narrow`);
* ``Y = max(A, axes)`` (or min): ``dA = G`` broadcast back, times the indicator of
  ``A == Y`` divided by the number of ties (``tf.reduce_max``'s gradient);
* ``Y = logsumexp(A, axes)``: ``dA = G`` broadcast back times ``softmax(A, axes)``;
* ``Y = softmax(A, axes)``: ``dA = Y * (G - sum(G * Y, axes))``
  (``nn_grad._SoftmaxGrad``);
* ``Y = log_softmax(A, axes)``: ``dA = G - exp(Y) * sum(G, axes)``.
"""

from __future__ import annotations

import sympy

from .. import ir
from .. import shapes as sh
from ..graph import TensorNode
from .context import Derivation
from .cotangents import Narrow, OperandVJP
from .matrix import static
from .text import spec_str

#: the nodes whose VJPs docstrings and explain list as reductions
OPS = ("sum", "mean", "max", "min", "logsumexp", "softmax", "log_softmax")


def sum_or_mean(d: Derivation, node: TensorNode, g, args) -> list[OperandVJP]:
    """``Y = sum(A, axes)`` or ``mean``: ``dA = G`` broadcast back over ``axes`` (divided by
    the count for a mean: a number where the reduced dims are known, else a ``count`` call)."""
    axes, keepdims, shape = node.param("axes"), node.param("keepdims"), node.arg_shapes[0]
    cotangent = g
    if node.op == "mean":
        reduced = [shape[i] for i in axes]
        if all(sh.is_known(n) for n in reduced):
            cotangent = g / sympy.Integer(max(1, int(sympy.prod(reduced))))
        else:
            count = ir.Call("count", (args[0],), (("axes", axes),))
            cotangent = ir.Call("div", (g, count))
    params = (("axes", axes), ("keepdims", keepdims), ("shape", static(shape)))

    def unreduce(cot):
        return ir.Call("unreduce", (cot, args[0]), params)

    what = "broadcast" if node.op == "sum" else "broadcast, divided by the count"
    # a compound operand's partials may broadcast a keepdims cotangent for free
    narrow = Narrow(cotangent, node.shape, unreduce) if keepdims else None
    return [OperandVJP(node.args[0], unreduce(cotangent), shape,
                       f"{g.name} {what} over axes {list(axes)}", narrow)]


def extremum(d: Derivation, node: TensorNode, g, args) -> list[OperandVJP]:
    """``Y = max(A, axes)`` or ``min``: ``G`` to the extreme elements, shared equally
    among ties (``tf.reduce_max``'s gradient)."""
    axes, keepdims = node.param("axes"), node.param("keepdims")
    value = ir.Call(
        "extremum_grad", (g, args[0], node.symbol), (("axis", axes), ("keepdims", keepdims))
    )
    return [OperandVJP(node.args[0], value, node.arg_shapes[0],
                       f"{g.name} to the {node.op}imal elements over axes {list(axes)}, "
                       "shared among ties")]


def logsumexp(d: Derivation, node: TensorNode, g, args) -> list[OperandVJP]:
    """``Y = logsumexp(A, axes)``: ``dA = G`` broadcast back times ``softmax(A, axes)``."""
    axes, keepdims, shape = node.param("axes"), node.param("keepdims"), node.arg_shapes[0]
    back = ir.Call(
        "unreduce", (g, args[0]),
        (("axes", axes), ("keepdims", keepdims), ("shape", static(shape))),
    )
    value = ir.Call("mul", (back, ir.Call("softmax", (args[0],), (("axis", axes),))))
    return [OperandVJP(node.args[0], value, shape,
                       f"{g.name} * softmax({spec_str(node.args[0])}, axis={list(axes)})")]


def softmax(d: Derivation, node: TensorNode, g, args) -> list[OperandVJP]:
    """``Y = softmax(A)``: ``dA = Y * (G - sum(G * Y))`` (``nn_grad._SoftmaxGrad``);
    ``Y = log_softmax(A)``: ``dA = G - exp(Y) * sum(G)``."""
    axes, y = node.param("axes"), node.symbol
    value = ir.Call(f"{node.op}_grad", (g, y), (("axis", axes),))
    text = (
        f"{y.name} * ({g.name} - sum({g.name} * {y.name}, axis={list(axes)}))"
        if node.op == "softmax"
        else f"{g.name} - exp({y.name}) * sum({g.name}, axis={list(axes)})"
    )
    return [OperandVJP(node.args[0], value, node.arg_shapes[0], text)]


RULES = {
    "sum": sum_or_mean,
    "mean": sum_or_mean,
    "max": extremum,
    "min": extremum,
    "logsumexp": logsumexp,
    "softmax": softmax,
    "log_softmax": softmax,
}
