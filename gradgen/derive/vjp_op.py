"""The VJP of an op, as an op in the same IR (:class:`gradgen.graph.Program`), so that
derivation applies to its own output.

Receives the derivation of an op after reverse mode: its lowered tensor nodes and the
gradient function's statements before CSE (:class:`~gradgen.derive.reverse.Backward`).
Returns a Program (:func:`vjp_program`):

* inputs: the op's inputs, then one upstream gradient per output (named as the gradient
  function's parameters, of the outputs' shapes);
* nodes: the op's tensor nodes, then one node per backward statement, named after the
  statement's local; the calls in a statement become tensor nodes of their own
  (``reduce_sum`` a ``sum``, a transposed ``matmul`` a ``transpose`` and a ``matmul``,
  ``extremum_grad`` a mask divided by its ``sum`` over the axes, broadcasts and sums
  back the kinds :mod:`.adjoints` gives VJP rules);
* outputs: the gradients of the differentiable inputs, in order.

:func:`gradgen.derive.derive` of that Program is the op's second-order VJP: with
upstream gradients ``u`` and a cotangent ``w_j`` for each input gradient ``g_j``, the
gradient with respect to an input ``x`` is ``sum_j <w_j, d g_j / d x>`` (with ``u`` the
first-order upstream, a Hessian-vector product) and with respect to ``u_k`` is
``sum_j <w_j, d g_j / d u_k>`` (a Jacobian-vector product of the op). Complex ops are
refused (their VJPs hold conjugates, which are not holomorphic).
"""

from __future__ import annotations

import dataclasses

import sympy

from .. import ir
from .. import shapes as sh
from ..functions.declarations import as_declared
from ..graph import NODE_NAMES, InputVar, Output, Program, TensorNode, Term
from .context import Derivation
from .lower import Lowered
from .matrix import static
from .reverse import Backward

# Reductions a VJP may recompute (as a forward would), by call and node kind.
_REDUCTIONS = {"reduce_sum": "sum", "reduce_mean": "mean", "reduce_max": "max",
               "reduce_min": "min", "reduce_logsumexp": "logsumexp"}
# Calls of one square-matrix operand that are node kinds of the same name.
_MATRIX = ("det", "logdet", "trace")
# Calls that become nodes of their own kind with the call's parameters (:mod:`.adjoints`
# has their VJP rules; :func:`gradgen.derive.forward.forward_call` prints them back).
CALL_NODES = ("unreduce", "unbroadcast", "expand_matrix", "eye", "count", "cofactor",
              "softmax_grad", "log_softmax_grad")


def vjp_program(d: Derivation, lowered: Lowered, backward: Backward) -> Program:
    """The VJP of ``d``'s op as a Program (see the module docstring).

    Raises:
        SpecError: the op is complex.
    """
    p = d.program
    if p.is_complex:
        raise d.error(p.outputs[0].key, "the VJP of a complex op is not differentiated "
                      "again (it holds conjugates, which are not holomorphic)")
    lowering = _Lowering(d, lowered)
    for target, value, _ in backward.statements:
        lowering.statement(target, value, backward.shapes[target])
    upstreams = tuple(
        InputVar(name=u.name, symbol=u, shape=o.term.shape, declared=declared(o.term.shape),
                 dtype=p.dtype, differentiable=True, key=o.key, upstream=True)
        for u, (o, _) in zip(backward.upstreams, lowered.outputs)
    )
    outputs = tuple(
        Output(backward.grads[v.name],
               Term(d.symbol(backward.grads[v.name]), v.shape,
                    frozenset([d.symbol(backward.grads[v.name])])), lowering.key)
        for v in p.inputs if v.name in backward.grads
    )
    return Program(
        name=p.name, doc=None, inputs=p.inputs + upstreams,
        nodes=_used(lowering.nodes, set().union(*(o.term.expr.free_symbols for o in outputs))),
        where=(), outputs=outputs, single=False, dtype=p.dtype, key=p.key,
        memory=p.memory, fuse=p.fuse, level=p.level + 1, shape_of=lowering.shape_of,
        factory=p.factory,
    )


def _used(nodes: list, wanted: set) -> tuple:
    """The nodes the ``wanted`` symbols depend on, in order: the op's own outputs, and
    forward values only they use (``log(det(S))`` in ``log_det``'s VJP), are not
    computed again."""
    needed, kept = set(wanted), []
    for node in reversed(nodes):
        if node.symbol in needed:
            kept.append(node)
            for arg, leaves in zip(node.args, node.arg_leaves or ((),) * len(node.args)):
                needed |= getattr(arg, "free_symbols", set()) | set(leaves)
    return tuple(reversed(kept))


def declared(shape: sh.Shape) -> tuple:
    """Dims as a spec declares them (ints, names, None; ``...`` for batch dims)."""
    return tuple(... if isinstance(dim, sh.Batch) else dim if isinstance(dim, (int, str))
                 else None for dim in shape)


class _Lowering:
    """Backward statements as tensor nodes: each call a node, each statement a node
    named after its local."""

    def __init__(self, d: Derivation, lowered: Lowered):
        self.d, self.factory = d, d.program.factory
        # the op's tensor nodes as lowering renamed them (their leaves too)
        self.nodes: list[TensorNode] = [
            dataclasses.replace(n, arg_leaves=tuple(
                frozenset(d.rename.get(s, s) for s in leaves) for leaves in n.arg_leaves))
            for n in d.nodes
        ]
        self.shape_of = {v.symbol: v.shape for v in d.program.inputs}
        self.shape_of.update({n.symbol: n.shape for n in self.nodes})
        self.shape_of.update(d.cotangent_shape)
        self.key = lowered.outputs[0][0].key  # the VJP's nodes are its outputs'
        self.count = 0

    # ------------------------------------------------------------------ building

    def statement(self, target: str, value: ir.Value, shape: sh.Shape) -> None:
        """``target = value`` as a node whose symbol is ``target``'s."""
        start = len(self.nodes)
        expr, leaves = self.value(value)
        symbol = self.d.symbol(target)
        last = self.nodes[-1] if len(self.nodes) > start else None
        if last is not None and expr == last.symbol and sh.same_shape(last.shape, shape):
            # the statement is its last call's node: that node takes the local's name
            self.nodes[-1] = TensorNode(symbol, last.op, last.args, last.arg_shapes,
                                        last.shape, last.key, target, last.params,
                                        last.arg_leaves)
            del self.shape_of[last.symbol]
        else:
            self.nodes.append(TensorNode(symbol, "elementwise", (expr,), (shape,), shape,
                                         self.key, target, (), (frozenset(leaves),)))
        self.shape_of[symbol] = shape

    def node(self, op: str, operands: list, shape: sh.Shape, params: tuple = (),
             hint: str | None = None):
        """A new node of ``op`` over ``operands`` (``(expr, leaves)`` pairs): its symbol
        and leaves."""
        self.count += 1
        symbol = sympy.Symbol(f"_vjp_node{self.count}", real=True)
        self.nodes.append(TensorNode(
            symbol, op, tuple(e for e, _ in operands),
            tuple(self.shape(leaves) for _, leaves in operands), shape, self.key,
            hint or NODE_NAMES[op], params, tuple(frozenset(l) for _, l in operands),
        ))
        self.shape_of[symbol] = shape
        return symbol, frozenset([symbol])

    def shape(self, leaves) -> sh.Shape:
        """The broadcast shape of the leaves of an expression."""
        return sh.broadcast_all([self.shape_of[s] for s in sorted(leaves, key=str)],
                                self.factory)

    def value(self, value: ir.Value):
        """``(elementwise expression, leaves)`` of a statement value, its calls lowered
        to nodes."""
        if not isinstance(value, ir.Call):
            # SymPy's kinks (sign, from |x|') as the spec's, whose derivative is 0
            return as_declared(value), frozenset(value.free_symbols & self.shape_of.keys())
        if value.fn in _REDUCTIONS:
            return self._reduction(value)
        if value.fn in _MATRIX:
            (a, la), = [self.value(v) for v in value.args]
            shape = self.shape(la)
            return self.node(value.fn, [(a, la)], shape[:-2] if value.fn != "trace"
                             else shape[:-2])
        return getattr(self, f"_{value.fn}")(value)

    # ------------------------------------------------------------- elementwise

    def _add(self, call):
        parts = [self.value(a) for a in call.args]
        return sympy.Add(*(e for e, _ in parts)), frozenset().union(*(l for _, l in parts))

    def _mul(self, call):
        parts = [self.value(a) for a in call.args]
        return sympy.Mul(*(e for e, _ in parts)), frozenset().union(*(l for _, l in parts))

    def _div(self, call):
        (a, la), (b, lb) = [self.value(v) for v in call.args]
        return a / b, la | lb

    def _zeros_like(self, call):
        _, leaves = self.value(call.args[0])
        return sympy.Integer(0), leaves

    # ------------------------------------------------------------------ tensors

    def _reduction(self, call):
        (a, la), = [self.value(v) for v in call.args]
        shape = self.shape(la)
        axes = sh.normalize_axes(call.required("axis"), sh.core_rank(shape),
                                 sh.has_batch(shape))
        keepdims = bool(call.required("keepdims"))
        params = (("axes", axes), ("keepdims", keepdims))
        if call.param("count"):
            params += (("count", call.param("count")),)
        return self.node(_REDUCTIONS[call.fn], [(a, la)],
                         sh.reduce_shape(shape, axes, keepdims), params)

    def _transposed(self, operand):
        e, leaves = operand
        shape = self.shape(leaves)
        return self.node("transpose", [(e, leaves)], shape[:-2] + (shape[-1], shape[-2]))

    def _transpose(self, call):
        return self._transposed(self.value(call.args[0]))

    def _matmul(self, call):
        a, b = [self.value(v) for v in call.args]
        if call.param("transpose_a"):
            a = self._transposed(a)
        if call.param("transpose_b"):
            b = self._transposed(b)
        shape = sh.matmul_shape(self.shape(a[1]), self.shape(b[1]), self.factory)
        return self.node("matmul", [a, b], shape)

    def _inverse(self, call):
        a = self.value(call.args[0])
        inv = self.node("inverse", [a], self.shape(a[1]))
        return self._transposed(inv) if call.param("adjoint") else inv

    def _einsum(self, call):
        operands = [self.value(v) for v in call.args]
        spec = call.required("subscripts")
        shape, inputs, out = sh.einsum_shape(spec, [self.shape(l) for _, l in operands],
                                             self.factory)
        return self.node("einsum", operands, shape, (("subscripts", (tuple(inputs), out)),))

    def _softmax(self, call):
        a = self.value(call.args[0])
        return self.node("softmax", [a], self.shape(a[1]), (("axes", call.required("axis")),))

    def _log_softmax(self, call):
        a = self.value(call.args[0])
        return self.node("log_softmax", [a], self.shape(a[1]),
                         (("axes", call.required("axis")),))

    # ------------------------------------------------- what only VJPs hold

    def _broadcast_to(self, call):
        if len(call.args) == 1:  # to a static shape
            shape = tuple(call.required("shape"))
            return self.node("broadcast", [self.value(call.args[0])], shape, call.params)
        sources = [self.value(s) for s in call.args[1].args]
        shape = self.shape(frozenset().union(*(l for _, l in sources)))
        return self.node("broadcast", [self.value(call.args[0])] + sources, shape)

    def _call_node(self, call, shape_of_operand: int = -1, shape=None):
        operands = [self.value(v) for v in call.args]
        if shape is None:
            shape = self.shape(operands[shape_of_operand][1])
        return self.node(call.fn, operands, shape, call.params)

    def _unreduce(self, call):
        static_shape = call.param("shape")
        return self._call_node(call, 1, tuple(static_shape) if static_shape else None)

    def _unbroadcast(self, call):
        return self._call_node(call, 1)

    def _cofactor(self, call):
        return self._call_node(call, 0)

    def _softmax_grad(self, call):
        operands = [self.value(v) for v in call.args]
        shape = self.shape(frozenset().union(*(l for _, l in operands)))
        return self.node(call.fn, operands, shape, call.params)

    _log_softmax_grad = _softmax_grad

    def _expand_matrix(self, call):
        a = self.value(call.args[0])
        return self.node("expand_matrix", [a], self.shape(a[1]) + (1, 1), call.params)

    def _eye(self, call):
        a = self.value(call.args[0])
        n = self.shape(a[1])[-1]
        return self.node("eye", [a], (n, n), call.params)

    def _count(self, call):
        return self._call_node(call, shape=())

    def _extremum_grad(self, call):
        """``g`` to the extreme elements of ``x``, shared among ties: ``g * mask /
        sum(mask)`` with ``mask = [x == y]`` (``g`` and ``y`` broadcast back first)."""
        (g, lg), (x, lx), (y, ly) = [self.value(v) for v in call.args]
        axes, keepdims = tuple(call.required("axis")), call.required("keepdims")
        x_shape = self.shape(lx)
        if not keepdims:
            params = (("axes", axes), ("keepdims", False), ("shape", static(x_shape)))
            y, ly = self.node("unreduce", [(y, ly), (x, lx)], x_shape, params, "largest")
            g, lg = self.node("unreduce", [(g, lg), (x, lx)], x_shape, params)
        mask = sympy.Piecewise((1, sympy.Eq(x, y)), (0, True))
        ties, lt = self.node("sum", [(mask, lx | ly)], sh.reduce_shape(x_shape, axes, True),
                             (("axes", axes), ("keepdims", True)), "ties")
        return g * mask / ties, lg | lx | ly | lt
