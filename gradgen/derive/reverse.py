"""Reverse mode: from each output's upstream gradient back to every input.

Receives the lowered op. Walks the outputs (their elementwise partials,
:mod:`.elementwise`), then the tensor nodes from last to first (each node's
contributions summed into its cotangent, then its VJP rule, :mod:`.reductions`,
:mod:`.matrix` or :mod:`.adjoints`, and the partials of compound operands), then the inputs (their
contributions unbroadcast to the declared shape, :mod:`.unbroadcast`). Returns a
:class:`Backward`: the gradient function's parameters and statements (before CSE), each
input's gradient local, and the docstring's partials, VJP rules and reductions.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from .. import ir
from .. import shapes as sh
from ..graph import TensorNode
from . import adjoints, matrix, reductions
from .context import Derivation
from .cotangents import Contribution, Cotangents, OperandVJP
from .elementwise import elementwise_vjp
from .lower import Lowered
from .regimes import of_output
from .text import shorten, spec_str
from .unbroadcast import accumulate

RULES = {**matrix.RULES, **reductions.RULES, **adjoints.RULES}


@dataclass(frozen=True)
class Backward:
    """The gradient function, before CSE.

    Attributes:
        grad_fn: its name.
        upstreams: its parameters (one upstream gradient symbol per output).
        statements: ``(local, value, comments)`` in order.
        shapes: local -> the declared shape of its value.
        grads: input name -> the local holding its gradient (differentiable inputs).
        reductions: (input, how its gradient is unbroadcast) pairs.
        partials: every partial derivative, for the docstring.
        vjp_text: the VJP rules of matrix nodes used.
        reduction_vjp_text: the VJP rules of reduction nodes used.
    """

    grad_fn: str
    upstreams: tuple
    statements: list
    shapes: dict
    grads: dict
    reductions: tuple
    partials: tuple
    vjp_text: tuple
    reduction_vjp_text: tuple


def reverse(d: Derivation, lowered: Lowered) -> Backward:
    """Every differentiable input's gradient: the sum over outputs of
    ``unbroadcast(upstream * conj(d out / d input))``, by reverse mode."""
    p = d.program
    grad_fn = d.scope.claim("grad")
    upstreams = []
    for o, _ in lowered.outputs:
        base = "upstream" if p.single else f"upstream_{o.name}"
        upstreams.append(d.symbol(d.scope.claim(base)))
        d.cotangent_shape[upstreams[-1]] = o.term.shape
    state = Cotangents()
    partials: list[ir.PartialIR] = []
    vjp_text: list[str] = []
    reduction_text: list[str] = []
    for (o, expr), u in zip(lowered.outputs, upstreams):
        elementwise_vjp(d, state, expr, u, o.term.shape, lowered.out_locals[o.name], o.key,
                        partials, regimes=of_output(d, o.name))
    for node in reversed(d.nodes):
        contributions = state.contributions.pop(node.symbol, [])
        if not contributions:
            continue
        name = lowered.node_targets[node.symbol]
        value, comments = accumulate(d, contributions, node.symbol, node.shape)
        if isinstance(value, sympy.Symbol):
            g = value  # the cotangent is already a local (e.g. the upstream)
        else:
            g = d.symbol(d.scope.claim(f"grad_{name}"))
            state.local(g.name, value, comments, node.shape)
        texts = _node_vjp(d, state, node, g, name, partials)
        (reduction_text if node.op in reductions.OPS else vjp_text).extend(texts)
    grads, unbroadcasts = _input_gradients(d, state, partials)
    return Backward(grad_fn, tuple(upstreams), state.backward, state.shapes, grads, unbroadcasts,
                    tuple(partials), tuple(vjp_text), tuple(reduction_text))


def _input_gradients(d: Derivation, state: Cotangents, partials: list):
    """Each differentiable input's gradient statement (its contributions summed and
    unbroadcast, or zeros), appended to ``state.backward``.

    Returns:
        ``(grads, reductions)``: input name -> local, and (input, how unbroadcast).
    """
    grads, unbroadcasts = {}, []
    for v in d.program.inputs:
        if not v.differentiable:
            continue
        contributions = state.contributions.pop(v.symbol, [])
        plans = [
            sh.describe_reduction(sh.reduction_plan(v.shape, c.shape), v.shape, c.shape)
            for c in contributions if c.wide is None
        ]
        unbroadcasts.append((v.name, tuple(dict.fromkeys(plans))))
        target = d.scope.claim(f"grad_{v.name}")
        grads[v.name] = target
        if contributions:
            value, comments = accumulate(d, contributions, v.symbol, v.shape)
        else:
            value = ir.Call("zeros_like", (v.symbol,))
            appears = any(v.name == doc.wrt for doc in partials)
            comments = (
                f"every partial derivative with respect to {v.name} is 0"
                if appears else f"{v.name} does not affect any output",
            )
        state.local(target, value, comments, v.shape)
    return grads, tuple(unbroadcasts)


def _node_vjp(d: Derivation, state: Cotangents, node: TensorNode, g, name, docs) -> list[str]:
    """Contributions of a node's VJP (its rule in :data:`RULES`; an elementwise node's
    is the chain rule) to the symbols in its operands; returns the rules' formulas."""
    if node.op == "elementwise":  # a materialized `where` intermediate: chain rule
        elementwise_vjp(d, state, node.args[0], g, node.shape, name, node.key, docs)
        return []
    rules = RULES[node.op](d, node, g, d.node_args[node.symbol])
    sides = ["lhs", "rhs"] if node.op == "matmul" else [
        f"arg{i}" if len(rules) > 1 else "arg" for i in range(len(rules))
    ]
    texts = []
    for side, rule in zip(sides, rules):
        if not rule.operand.free_symbols & d.diff_symbols:
            continue
        texts.append(f"VJP of {name} w.r.t. {spec_str(rule.operand)}: {rule.text}")
        comment = shorten(f"VJP of {name} ({node.op}): {rule.text}  ({d.key(node.key)})")
        _operand_vjp(d, state, node, rule, f"grad_{name}_{side}", name, comment, docs)
    return texts


def _operand_vjp(d: Derivation, state: Cotangents, node: TensorNode, rule: OperandVJP,
                 local: str, name: str, comment: str, docs) -> None:
    """A node's VJP with respect to one operand, handed on: to the operand's symbol, or
    (a compound operand) through a local holding it to the operand's own partials."""
    arg, narrow = rule.operand, rule.narrow
    if arg.is_Symbol:
        # a narrow cotangent stands for the wide one only where the symbol has the
        # operand's shape as written: simplification may leave a smaller one
        # (sum(x - x + y, keepdims=True) is sum(y broadcast)), whose sum back it needs
        if narrow is None or not sh.same_shape(d.shape_of.get(arg, ()), rule.shape):
            state.add(arg, Contribution(rule.value, rule.shape, (comment,)))
        else:
            state.add(arg, Contribution(narrow.value, narrow.shape, (comment,),
                                        wide=rule.value))
        return
    # A compound operand: materialize its cotangent, then differentiate it.
    what = f"{name} operand"
    if narrow is None:
        ga = d.symbol(d.scope.claim(local))
        state.local(ga.name, rule.value, (comment,), rule.shape)
        elementwise_vjp(d, state, arg, ga, rule.shape, what, node.key, docs)
        return
    if isinstance(narrow.value, sympy.Symbol):
        ga = narrow.value  # the cotangent is already a local (e.g. the upstream)
    else:
        ga = d.symbol(d.scope.claim(local))
        state.local(ga.name, narrow.value, (comment,), narrow.shape)
    d.cotangent_shape[ga] = narrow.shape
    wide = []  # the broadcast cotangent, made once where a partial needs it

    def widened():
        if not wide:
            wide.append(d.symbol(d.scope.claim(f"{ga.name}_wide")))
            state.local(wide[0].name, narrow.widen(ga), (), rule.shape)
        return wide[0]

    elementwise_vjp(d, state, arg, ga, rule.shape, what, node.key, docs,
                    narrow=(narrow.shape, widened))
