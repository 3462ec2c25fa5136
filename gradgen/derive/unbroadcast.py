"""Unbroadcasting: cotangent contributions summed back to the shape of what they flow to.

Receives :class:`Contribution` s (a cotangent value and the declared shape it has) for
one symbol, and returns one value of the symbol's declared shape (:func:`accumulate`):
contributions of equal shape are added first, then each group is summed over the
reduction axes :func:`gradgen.shapes.reduction_plan` gives (literal axes where the
declared shapes decide them, ``_unbroadcast`` from run-time shapes where they do not),
so an output that was not broadcast is never summed over another output's broadcast
axes. Where a static reduction keeps dims, a sum made cheaper is exact
(:func:`reduced`: terms that sum to 0 are dropped, a factor constant along the axes is
taken out; where every term of every group sums to 0, the value is exact zeros, not the
rounding noise of those sums). Comment lines say which axes and why.
"""

from __future__ import annotations

import sympy

from .. import ir
from .. import shapes as sh
from ..stability import guards
from .context import Derivation
from .cotangents import Contribution
from .text import shorten


def accumulate(d: Derivation, contributions, target, target_shape):
    """Sum contributions, unbroadcasting each group of equal shape to ``target_shape``.

    Returns:
        ``(value, comment lines)``.
    """
    groups: list[tuple[sh.Shape, list[Contribution]]] = []
    narrow = [c for c in contributions if c.wide is not None]
    for c in contributions:
        if c.wide is not None:
            continue
        for shape, members in groups:
            if sh.same_shape(shape, c.shape):
                members.append(c)
                break
        else:
            groups.append((c.shape, [c]))
    parts, comments = [], []
    for shape, members in groups:
        total = add([m.value for m in members])
        above = [c for m in members for c in m.comments]
        comments.extend(above)
        plan = sh.reduction_plan(target_shape, shape)
        indent = "  " if above else ""  # where it applies to the partials just above
        if not (isinstance(plan, sh.StaticReduction) and plan.is_identity):
            comments.append(indent + sh.describe_reduction(plan, target_shape, shape))
        value, dropped = reduced(d, total, plan, shape, target)
        comments.extend(indent + line for line in dropped)
        if value is not None:
            parts.append(value)
    if not parts and not narrow:  # every group sums to exactly 0: zeros, not rounding noise
        parts = [ir.Call("zeros_like", (target,))]
    for c in narrow:  # a part of the target's shape broadcasts the others in the sum
        parts.append(c.value if parts else c.wide)
    comments.extend(line for c in narrow for line in c.comments)
    return add(parts), tuple(comments)


def _reduced_axes(d: Derivation, total, plan, shape: sh.Shape):
    """``(axes, constant)`` for a static reduction of ``total`` (of ``shape``) that
    only keeps dims, where every symbol's shape is known and of ``shape``'s rank:
    ``constant(e)`` says whether ``e`` is constant (size 1) along the axes. Else
    None."""
    if not (isinstance(total, sympy.Expr) and isinstance(plan, sh.StaticReduction)
            and plan.keep_axes and not plan.drop_axes and not sh.has_batch(shape)):
        return None
    shapes = {}
    for s in total.free_symbols:
        s_shape = d.shape_of.get(s, d.cotangent_shape.get(s))
        if s_shape is None or sh.has_batch(s_shape) or len(s_shape) != len(shape):
            return None
        shapes[s] = s_shape
    axes = tuple(sorted(plan.keep_axes))

    def constant(e) -> bool:
        return all(shapes[s][a] == 1 for s in e.free_symbols for a in axes)

    return axes, constant


def _zero_sum(d: Derivation, term, constant, means):
    """The ``x`` whose mean (a forward local in ``means``) makes ``term``'s sum over the
    axes 0, or None: ``term`` is ``C * V``, ``C`` constant along the axes, ``V`` linear
    in ``x`` with constant coefficients and ``V = 0`` at ``x = mean(x)``."""
    varying = sympy.Mul(*[f for f in sympy.Mul.make_args(term) if not constant(f)])
    xs = [x for x in varying.free_symbols if x in means]
    if len(xs) != 1:
        return None
    poly = guards.as_polynomial(varying, xs[0])
    if poly is None or poly.degree() != 1 or not all(
            constant(c) for c in poly.all_coeffs()):
        return None
    return xs[0] if sympy.expand(varying.subs(xs[0], means[xs[0]])) == 0 else None


def reduced(d: Derivation, total, plan, shape: sh.Shape, target) -> tuple[ir.Value, list]:
    """``unbroadcast(total)`` to ``target``, the sum over the reduced axes made
    cheaper where that is exact, for a static reduction that keeps dims:

    * terms whose sum is exactly 0 are dropped: ``C * V`` with ``C`` constant along
      the axes and ``V`` linear in an ``x`` whose mean over exactly those axes is a
      forward local ``mu`` (keepdims), with ``V = 0`` at ``x = mu`` (the sum is ``C *
      n * V(mu) = 0``, as ``sum(x - mu) = n mu - n mu``). Layer norm's ``d(mu)`` has
      one (``g_var * (2 mu - 2 x)``); as computed, its value is rounding noise. The
      identity behind the hand-written layer-norm gradient ``rstd * (g - mean(g) -
      y * mean(g * y))``;
    * a single term ``C * g``, ``C`` constant along the axes and ``g`` made of
      cotangents only, is ``C * sum(g)``, not ``sum(C * g)``: one pass over the
      tensor less without XLA. (Not where the rest holds forward values: splitting
      ``out * g`` into ``rstd * sum(d * g)`` would keep ``d`` alive for the
      gradient, layer norm's peak memory with ``memory: save`` 473 -> 740 MB.)

    Never every factor (a constant summed over broadcast axes is ``n`` times
    itself). Returns the value, None where every term sums to 0, and a comment line
    per term left out.
    """
    found = _reduced_axes(d, total, plan, shape)
    if found is None:
        return unbroadcast(total, plan, target), []
    axes, constant = found
    means = {
        n.args[0]: n.symbol for n in d.nodes
        if n.op == "mean" and n.param("keepdims") and n.args[0].is_Symbol
        and tuple(sorted(n.param("axes"))) == axes
    }
    terms = sympy.Add.make_args(total)
    zeros = {t: _zero_sum(d, t, constant, means) for t in terms}
    kept = [t for t in terms if zeros[t] is None]
    show = d.display.show
    dropped = [
        shorten(f"(the sum of {show(t)} over axes {list(axes)} is 0, "
                f"{show(means[zeros[t]])} being the mean of "
                f"{show(zeros[t])} there: left out)")
        for t in terms if t not in kept
    ]
    if not kept:
        return None, dropped
    total = sympy.Add(*kept)
    factors = sympy.Mul.make_args(total)
    scale = sympy.Mul(*[f for f in factors if constant(f)])
    rest = sympy.Mul(*[f for f in factors if not constant(f)])
    if (scale == 1 or rest == 1 or scale.is_number
            or not rest.free_symbols <= d.cotangent_shape.keys()):
        return unbroadcast(total, plan, target), dropped
    return ir.Call("mul", (scale, unbroadcast(rest, plan, target))), dropped


def add(values: list) -> ir.Value:
    """The sum of cotangent values: SymPy terms added as one expression, calls after."""
    exprs = [v for v in values if not isinstance(v, ir.Call)]
    calls = [v for v in values if isinstance(v, ir.Call)]
    parts = ([sympy.Add(*exprs)] if exprs else []) + calls
    out = parts[0]
    for part in parts[1:]:
        out = ir.Call("add", (out, part))
    return out


def unbroadcast(value: ir.Value, plan: sh.ReductionPlan, like) -> ir.Value:
    """``value`` summed over a reduction plan's axes: literal ``reduce_sum`` calls for a
    static plan (dropped axes, then kept ones), ``_unbroadcast(value, like)`` for a
    dynamic one."""
    if isinstance(plan, sh.DynamicReduction):
        return ir.Call("unbroadcast", (value, like))
    if plan.drop_axes:
        value = ir.Call("reduce_sum", (value,), (("axis", plan.drop_axes), ("keepdims", False)))
    if plan.keep_axes:
        value = ir.Call("reduce_sum", (value,), (("axis", plan.keep_axes), ("keepdims", True)))
    return value
