"""The op's IR: the derivation's results as the frozen :class:`gradgen.ir.OpIR` the
printer and templates read.

Receives the derivation, the lowered op, the backward pass and the statements after
CSE. Returns the :class:`~gradgen.ir.OpIR`, adding what is computed from the op alone:
the casts of integer inputs to the compute dtype, the forward as written (for the
emitted tests), the names of the rewrites and guards used with their identities, the
named dims shared between inputs, and concrete input shapes for verification.
"""

from __future__ import annotations

from .. import ir
from .. import shapes as sh
from .. import stability as stable
from ..stability import guards
from ..stability.cheaper import CHEAPER
from ..stability.reductions import RULES as REDUCTION_RULES
from .context import Derivation
from .regimes import of_output, regime_text
from .forward import reference
from .lower import Lowered
from .reverse import Backward


def float_locals(d: Derivation) -> dict:
    """Integer input symbol -> the local of its value in the compute dtype."""
    return {
        v.symbol: d.symbol(d.scope.claim(f"{v.name}_float"))
        for v in d.program.inputs if v.is_integer
    }


def casts(d: Derivation, floats: dict, statements: tuple) -> tuple:
    """An integer input's cast to the compute dtype, where ``statements`` use it."""
    p = d.program
    used = {
        s.name
        for stmt in statements
        for e in ir.value_exprs(stmt.value)
        for s in e.free_symbols
    }
    return tuple(
        ir.Statement(
            floats[v.symbol].name,
            ir.Call("cast", (v.symbol,), (("dtype", p.dtype),)),
            (f"integer input {v.name} ({v.dtype}) computes in {p.dtype}",),
        )
        for v in p.inputs
        if v.is_integer and floats[v.symbol].name in used
    )


def op_ir(d: Derivation, lowered: Lowered, backward: Backward, forward: tuple,
          statements: tuple, recomputed: tuple, floats: dict, cast: tuple) -> ir.OpIR:
    """The op's IR: ``forward`` and ``statements`` (the gradient function's) after CSE,
    the integer inputs' ``cast`` first in the forward."""
    p = d.program
    out_locals = lowered.out_locals
    return ir.OpIR(
        name=p.name,
        impl=f"_{p.name}_vjp",
        doc=p.doc,
        dtype=p.dtype,
        inputs=tuple(
            ir.InputIR(
                name=v.name,
                dtype=v.dtype,
                declared=v.declared,
                shape_text=sh.format_shape(v.shape),
                differentiable=v.differentiable,
                is_integer=v.is_integer,
                grad=backward.grads.get(v.name),
                domain=v.domain,
                upstream=v.upstream,
            )
            for v in p.inputs
        ),
        outputs=tuple(
            ir.OutputIR(name=out_locals[o.name], shape_text=sh.format_shape(o.term.shape))
            for o, _ in lowered.outputs
        ),
        single=p.single,
        forward=forward,
        reference=cast + reference(d, lowered, floats),
        memory=p.memory,
        fuse=p.fuse,
        recomputed=recomputed,
        upstreams=tuple(u.name for u in backward.upstreams),
        grad_fn=backward.grad_fn,
        backward=statements,
        forward_text=d.display.forward_text(lowered.outputs, out_locals),
        forward_exprs=d.display.forward_exprs(out_locals),
        reductions=backward.reductions,
        partials=backward.partials,
        vjp_text=backward.vjp_text,
        reduction_vjp_text=backward.reduction_vjp_text,
        named_dims=named_dims(p),
        example_shapes=example_shapes(p),
        solves=any(n.op in ("inverse", "det", "logdet") for n in p.nodes),
        rewrites=tuple(f"{name}: {identity(name)}" for name in sorted(d.rules_used)),
        value_regimes=tuple(f"{out_locals[o.name]}: {regime_text(r)}" for o, _ in lowered.outputs
                            if (r := of_output(d, o.name).get(None)) is not None),
    )


def identity(name: str) -> str:
    """The identity a stable rule, reduction rule, guard or cheaper form applies."""
    if name in stable.RULES_BY_NAME:
        return stable.RULES_BY_NAME[name].identity
    return REDUCTION_RULES.get(name) or guards.GUARDS.get(name) or CHEAPER[name]


def example_shapes(p) -> tuple:
    """Concrete input shapes for verification: named dims distinct (4, 5, ...) and
    null dims 3; then all unknown dims 3; then all 1 (sizes the shapes require win).
    A ``...`` is batch dims ``[2]``, then ``[2, 3]``, then none."""
    names = sorted({d for v in p.inputs for d in v.shape if isinstance(d, str)})
    configs = []
    batches = ((2,), (2, 3), ())
    for (default, distinct), batch in zip(((3, True), (3, False), (1, False)), batches):
        sizes = {n: default + (i + 1 if distinct else 0) for i, n in enumerate(names)}
        shapes = tuple(
            (batch if sh.has_batch(v.shape) else ())
            + tuple(p.factory.concrete(d, sizes.get(d, default)) for d in sh.core(v.shape))
            for v in p.inputs
        )
        if shapes not in configs:
            configs.append(shapes)
    return tuple(configs)


def named_dims(p) -> tuple:
    """(dim name, ((input, axis), ...)) for each dim name several inputs declare (axes
    after a ``...`` counted from the end)."""
    uses: dict[str, list] = {}
    for v in p.inputs:
        offset = len(v.declared) if v.declared[:1] == (...,) else 0
        for axis, d in enumerate(v.declared):
            if isinstance(d, str):
                uses.setdefault(d, []).append((v.name, axis - offset))
    return tuple((d, tuple(places)) for d, places in sorted(uses.items())
                 if len(places) > 1)
