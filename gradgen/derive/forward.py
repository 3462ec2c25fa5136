"""The forward pass: each node's and output's value as the generated forward computes it.

Receives the lowered op (:class:`~gradgen.derive.lower.Lowered`). Returns ``(local,
value, comments)`` triples in evaluation order (:func:`forward_values`): node values as
TensorFlow calls (:func:`forward_call`) of their operands, outputs as elementwise
expressions, each finalized (kinks, guards, cheaper forms) and broadcast to the shape it
has as written where simplification dropped an operand (:func:`as_written`).
:func:`reference` gives the forward as written (no rewrites, guards or CSE), which the
emitted tests differentiate with TensorFlow's autodiff.
"""

from __future__ import annotations

from .. import ir
from .. import shapes as sh
from ..graph import TensorNode
from ..stability import guards
from .context import Derivation
from .lower import Lowered
from .regimes import branched, of_output, regime_comment
from .stabilize import finalize
from .text import describe_node


def as_written(d: Derivation, expr, shape: sh.Shape, leaves: frozenset) -> ir.Value:
    """``expr`` broadcast to the shape it has as written.

    Simplification may drop operands (``x - x + y`` is ``y``), and the result must
    still have the broadcast shape of everything written.
    """
    leaves = frozenset(d.rename.get(s, s) for s in leaves)
    present = sorted(expr.free_symbols & d.leaf_symbols, key=str)
    missing = sorted(leaves - set(present), key=str)
    factory = sh.DimFactory()
    actual = sh.broadcast_all([d.shape_of[s] for s in present], factory)
    if all(
        sh.same_shape(sh.broadcast(actual, d.shape_of[s], factory), actual)
        for s in missing
    ) and (present or not shape):
        # every operand as written is still there, or the dropped ones could not
        # have changed the shape (a constant left alone needs its shape, though)
        return expr
    if sh.is_static(shape):
        return ir.Call("broadcast_to", (expr,), (("shape", tuple(shape)),))
    sources = tuple(sorted(leaves, key=str))
    return ir.Call("broadcast_to", (expr, ir.Call("broadcast_shape", sources)))


def forward_call(node: TensorNode, args: tuple) -> ir.Value:
    """The TensorFlow call that computes a node in the forward pass (an elementwise
    node's value is its expression)."""
    if node.op in ("sum", "mean", "max", "min", "logsumexp"):
        params = (("axis", node.param("axes")), ("keepdims", node.param("keepdims")))
        if dict(node.params).get("count"):  # log-mean-exp over `count` terms
            params += (("count", node.param("count")),)
        return ir.Call(f"reduce_{node.op}", args, params)
    if node.op in ("softmax", "log_softmax"):
        return ir.Call(node.op, args, (("axis", node.param("axes")),))
    if node.op == "einsum":
        inputs, out = node.param("subscripts")
        return ir.Call("einsum", args, (("subscripts", f"{','.join(inputs)}->{out}"),))
    if node.op == "elementwise":
        return args[0]
    if node.op == "broadcast":  # to a static shape, or to the sources' broadcast shape
        if node.params:
            return ir.Call("broadcast_to", args[:1], node.params)
        return ir.Call("broadcast_to", (args[0], ir.Call("broadcast_shape", args[1:])))
    # transpose, inverse, det, logdet, trace; the kinds only VJPs hold keep the call's
    # parameters (gradgen.derive.vjp_op)
    return ir.Call(node.op, args, node.params)


def forward_values(d: Derivation, lowered: Lowered) -> list:
    """``(local, value, comments)`` of every node and output, in evaluation order; the
    operands each node computes from are recorded in ``d.node_args`` (its VJP reuses
    them)."""
    values = []
    for orig, n in zip(d.program.nodes, d.nodes):
        args = tuple(
            as_written(d, finalize(d, a), shape, leaves)
            for a, shape, leaves in zip(n.args, n.arg_shapes, orig.arg_leaves)
        )
        d.node_args[n.symbol] = args
        comment = d.key(n.key) + (
            "" if n.op == "elementwise" else f": {describe_node(n)}"
        )
        values.append((lowered.node_targets[n.symbol], forward_call(n, args), (comment,)))
    for o, expr in lowered.outputs:
        if _named_by_node(lowered, o, expr):
            continue  # the output is a node's result, already named after the output
        value = finalize(d, expr)
        regime = of_output(d, o.name).get(None) if d.guarded else None
        comments = (d.key(o.key),)
        if regime is not None:
            value = branched(d, regime, value)
            comments += (regime_comment(regime),)
        value = as_written(d, value, o.term.shape, o.term.leaves)
        values.append((lowered.out_locals[o.name], value, comments))
    return values


def _named_by_node(lowered: Lowered, output, expr) -> bool:
    """Whether ``output`` is a node's result whose local already has the output's name."""
    targets = lowered.node_targets
    return expr in targets and targets[expr] == lowered.out_locals[output.name]


def reference(d: Derivation, lowered: Lowered, floats: dict) -> tuple:
    """The forward as written (no stable rewrites, no guards, no CSE), for tests that
    compare the generated gradient with TensorFlow's autodiff of this forward; integer
    inputs as their ``floats`` locals."""
    out = []
    rename = {**d.rename, **floats}
    for n in d.program.nodes:
        new = d.rename[n.symbol]
        args = tuple(
            as_written(d, guards.kinks_to_piecewise(a.xreplace(rename)), shape, leaves)
            for a, shape, leaves in zip(n.args, n.arg_shapes, n.arg_leaves)
        )
        out.append(ir.Statement(lowered.node_targets[new], forward_call(n, args)))
    for o in d.program.outputs:
        expr = guards.kinks_to_piecewise(o.term.expr.xreplace(rename))
        if _named_by_node(lowered, o, expr):
            continue
        value = as_written(d, expr, o.term.shape, o.term.leaves)
        out.append(ir.Statement(lowered.out_locals[o.name], value))
    return tuple(out)
