"""Lowering: the parsed op as the graph the derivation works on.

Receives the :class:`~gradgen.derive.context.Derivation` of a parsed op. Returns a
:class:`Lowered` op: every output and node has the local name it gets in generated code
(an output's or `where` intermediate's name when the node is all of it), node symbols
are renamed to those locals, and the forward expressions (node operands, outputs,
`where` values) are in stable forms (:func:`gradgen.derive.stabilize.rewritten`). It
also refuses what a complex op cannot compute (:func:`check_complex`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import sympy

from .. import shapes as sh
from ..functions.declarations import declared, holomorphic_classes
from .context import Derivation
from .stabilize import rewritten


@dataclass(frozen=True)
class Lowered:
    """The op with its locals named.

    Attributes:
        out_locals: output name -> its local in the forward function.
        node_targets: renamed node symbol -> its local.
        outputs: (output, its expression in stable forms), in order.
        where_exprs: (name, expression in stable forms) of the `where` intermediates.
    """

    out_locals: dict
    node_targets: dict
    outputs: list
    where_exprs: list


def lower(d: Derivation) -> Lowered:
    """Name the op's outputs and nodes, rename the node symbols and rewrite the forward
    in stable forms; ``d`` gets the renamed nodes, their shapes, and the symbols a
    gradient flows to."""
    p = d.program
    out_locals = {
        o.name: (d.scope.claim("out") if p.single else o.name) for o in p.outputs
    }
    where_names = {n for n, _ in p.where}
    node_targets: dict = {}
    for node in p.nodes:
        # (not when simplification dropped an operand that broadcast the output:
        # sum(a, axis=1, keepdims=True) + x - x is the sum broadcast to a's shape)
        whole_output = [o for o in p.outputs if o.term.expr == node.symbol
                        and sh.same_shape(o.term.shape, node.shape)]
        if whole_output:
            name = out_locals[whole_output[0].name]
        elif node.name_hint in where_names:
            name = node.name_hint
        else:
            name = d.scope.claim(node.name_hint)
        new = sympy.Symbol(name, **node.symbol.assumptions0)  # keeps e.g. >= 0
        d.rename[node.symbol] = new
        node_targets[new] = name
        d.shape_of[new] = node.shape
    d.nodes = [
        dataclasses.replace(
            n, symbol=d.rename[n.symbol], args=tuple(rewritten(d, a) for a in n.args)
        )
        for n in p.nodes
    ]
    outputs = [(o, rewritten(d, o.term.expr)) for o in p.outputs]
    where_exprs = [(name, rewritten(d, term.expr)) for name, term in p.where]
    d.diff_symbols = {v.symbol for v in p.inputs if v.differentiable} | {
        n.symbol for n in d.nodes
    }
    d.leaf_symbols = {v.symbol for v in p.inputs} | {n.symbol for n in d.nodes}
    return Lowered(out_locals, node_targets, outputs, where_exprs)


def check_complex(d: Derivation, lowered: Lowered) -> None:
    """Refuse, in a complex op, functions that are not holomorphic (or lack complex
    TensorFlow kernels) and the reductions defined for real dtypes only.

    Raises:
        SpecError: at the expression that uses it.
    """
    p = d.program
    if p.is_complex:
        for n in d.nodes:
            refusal = _real_only(n.op)
            if refusal:
                raise d.error(n.key, refusal)
            for a in n.args:
                _check_holomorphic(d, a, n.key)
        for o, expr in lowered.outputs:
            _check_holomorphic(d, expr, o.key)


def _real_only(op: str) -> str:
    """Why complex ops cannot use the tensor function of node kind ``op`` (its
    declaration's ``real_only``); "" if they can, or if ``op`` is no declared function
    (an elementwise node, matmul, the nodes only VJPs hold)."""
    try:
        return declared(op).real_only
    except KeyError:
        return ""


def _check_holomorphic(d: Derivation, expr, key) -> None:
    allowed = holomorphic_classes()
    for f in sorted(expr.atoms(sympy.Function), key=sympy.default_sort_key):
        if not isinstance(f, allowed):
            raise d.error(
                key,
                f"{type(f).__name__} is not holomorphic (or has no complex TensorFlow "
                "kernel); a complex op must be holomorphic, since its gradient is "
                "upstream * conj(f'(z)). Allowed for complex inputs: arithmetic, @, "
                "transpose and " + ", ".join(sorted(c.__name__ for c in allowed)),
            )
