"""Derivation: a parsed op -> its VJP, with unbroadcasting, stable forms and CSE.

Receives a :class:`gradgen.graph.Program` (the parser runs first: see
:func:`gradgen.pipeline.derive_op`). Returns an :class:`gradgen.ir.OpIR` whose backward
statements compute, for every differentiable input ``x``,

    grad_x = sum over outputs k of unbroadcast_x(upstream_k * conj(d out_k / d x))

reduced back to the input's declared shape (see :func:`gradgen.shapes.reduction_plan`),
with ``conj`` the identity for real dtypes (TensorFlow's convention for complex inputs
is the conjugate of the derivative times the upstream value).

The passes, in the order :func:`derive` runs them (each module's docstring says what it
receives and returns):

1. stable reductions (:func:`gradgen.stability.reductions.stabilize_reductions`):
   naive log-sum-exp and softmax written with ``sum`` become stable nodes;
2. :mod:`.lower`: locals named, node symbols renamed, the forward in stable forms
   (:mod:`.stabilize`); what a complex op or ``fuse: xla`` cannot compute is refused
   (:mod:`.plans`);
3. :mod:`.forward`: each node's and output's value, finalized with guards;
4. :mod:`.reverse`: reverse mode over the tensor nodes, with symbolic partials for the
   elementwise parts between them (:mod:`.elementwise`), each node's VJP rule
   (:mod:`.reductions`, :mod:`.matrix`), and contributions unbroadcast per output shape
   before they are added (:mod:`.unbroadcast`);
5. :mod:`.cse`: one common-subexpression elimination over forward and backward
   together, with cheaper forms (:mod:`.forms`);
6. :mod:`.plans`: what ``memory: recompute`` computes again;
7. :mod:`.assemble`: the :class:`~gradgen.ir.OpIR`.

:mod:`.text` writes the formulas docstrings and comments show. All passes share one
:class:`~gradgen.derive.context.Derivation`.

The VJP is itself an op in the same IR: :func:`vjp_op` returns it as a
:class:`~gradgen.graph.Program` (inputs: the op's inputs and its upstream gradients;
outputs: the input gradients; :mod:`.vjp_op`), and :func:`derive` of that is the op's
second-order VJP, derived with the same passes (:mod:`.adjoints` holds the VJP rules of
the tensor nodes only VJPs have).
"""

from __future__ import annotations

import dataclasses

from .. import ir
from ..errors import SpecError
from ..graph import Program
from ..spec import SpecDocument
from ..stability.reductions import stabilize_reductions
from . import assemble, cse, forward, lower, plans, reverse
from .context import Derivation
from .reductions import OPS as REDUCTION_OPS
from .stabilize import simplify_partial
from .text import FORMULA_MAX_CHARS, shorten, spec_str
from .vjp_op import vjp_program

__all__ = ["derive", "vjp_op", "simplify_partial", "spec_str", "shorten",
           "FORMULA_MAX_CHARS", "REDUCTION_OPS"]


def _reverse_mode(program: Program, doc: SpecDocument, guarded: bool = True):
    """Passes 1-4: ``(derivation, lowered op, forward values, backward pass)``; with
    ``guarded`` False, products in SymPy's order (:class:`Derivation`)."""
    program, used = stabilize_reductions(program)
    d = Derivation.start(program, doc, guarded)
    d.rules_used.update(used)
    lowered = lower.lower(d)
    lower.check_complex(d, lowered)
    plans.check_fusion(d)
    forward_values = forward.forward_values(d, lowered)
    return d, lowered, forward_values, reverse.reverse(d, lowered)


def vjp_op(program: Program, doc: SpecDocument) -> Program:
    """The VJP of ``program``, an op of ``doc``, as an op of its own (see
    :mod:`.vjp_op`): ``derive(vjp_op(p, doc), doc)`` is its second-order VJP.

    Raises:
        SpecError: as :func:`derive`; or the op is complex.
    """
    return _next_order(program, doc)


def _next_order(program: Program, doc: SpecDocument) -> Program:
    """The VJP op of ``program`` for the next order, from a reverse pass of its own
    whose products keep SymPy's order (no ``mul_no_nan`` orderings: the next order's
    partials, derived from them, multiplied wide-range factors in an order of their
    own; Lennard-Jones' second derivatives were 0 * inf = NaN at sigma = 0, eps =
    3.4e38). The next order orders its own products."""
    d, lowered, _, backward = _reverse_mode(program, doc, guarded=False)
    return vjp_program(d, lowered, backward)


def derive(program: Program, doc: SpecDocument) -> ir.OpIR:
    """The VJP of ``program``, an op of ``doc``, as printable IR; with ``order`` k > 1,
    also its gradient functions' own VJPs up to order k (``levels``: the VJP of the
    VJP op, :func:`vjp_op`, derived with the same passes, and so on).

    Raises:
        SpecError: a derivative cannot be expressed with TensorFlow ops, is too large,
            or the op uses what its dtype or fusion cannot compute (the message names
            the op and the expression).

    A complex op (whose VJP holds conjugates, not holomorphic) and a fused one (whose
    VJP is one XLA kernel) get no levels: beyond first order, TensorFlow differentiates
    their VJP.
    """
    # (the VJP op is built from the same reverse pass as the IR, before CSE)
    why_not = _no_levels(program)
    op, vjp = _derive_one(program, doc, why_not is None and program.order > 1)
    if vjp is None:
        return dataclasses.replace(op, level_note=why_not or "")
    try:
        levels = _levels(program, vjp, doc)
    except (SpecError, RecursionError) as e:
        # (a time budget running out is the op's error, as at first order: the output
        # never depends on the machine's speed)
        reason = ("nested too deeply" if isinstance(e, RecursionError)
                  else e.diagnostics[0].message)
        return dataclasses.replace(op, level_note=reason)
    return dataclasses.replace(op, levels=levels)


def _no_levels(program: Program) -> str | None:
    """Why ``program``'s higher orders are TensorFlow's autodiff of its VJP, or None."""
    if program.order == 1:
        return None
    if program.fuse == "xla":
        return "fuse: xla (the VJP is one XLA kernel)"
    if program.is_complex:
        return "a complex op (its VJP holds conjugates, which are not holomorphic)"
    if any(n.op == "det" for n in program.nodes):
        # the cofactor's derived VJP holds inverse(A): infinite (an error in eager) at
        # singular A, where TensorFlow's differentiation of the cofactor is finite
        return "det (the cofactor's derived VJP is infinite at singular matrices)"
    return None


def _levels(program: Program, vjp: Program, doc: SpecDocument) -> tuple:
    """The derived VJPs of orders 2 to ``program.order`` (``vjp``: the first one's op)."""
    levels, name = [], program.name
    while vjp is not None:
        name = f"{name}_grad"
        op, vjp = _derive_one(dataclasses.replace(vjp, name=name), doc,
                              len(levels) + 2 < program.order)
        levels.append(op)
    return tuple(levels)


def _derive_one(program: Program, doc: SpecDocument, with_vjp: bool):
    """``(the VJP of program as IR, the VJP as an op, or None without with_vjp)``
    (see :func:`derive`)."""
    d, lowered, forward_values, backward = _reverse_mode(program, doc)
    vjp = _next_order(program, doc) if with_vjp else None
    # integer inputs compute as floats under their own local names
    floats = assemble.float_locals(d)

    def to_float(values):
        return [(t, ir.map_value(v, lambda e: e.xreplace(floats)), c) for t, v, c in values]

    fwd, bwd = cse.share(d, to_float(forward_values), to_float(backward.statements),
                         lowered.where_exprs)
    cast = assemble.casts(d, floats, fwd + bwd)
    fwd = cast + fwd
    recomputed = plans.recomputed(fwd, bwd) if d.program.memory == "recompute" else ()
    return assemble.op_ir(d, lowered, backward, fwd, bwd, recomputed, floats, cast), vjp
