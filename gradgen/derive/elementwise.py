"""Partials and VJPs of elementwise expressions.

Receives an elementwise expression (an output, an intermediate node's value, a compound
operand of a tensor node), the cotangent ``g`` that flows into it and its declared
shape. Adds to the :class:`~gradgen.derive.cotangents.Cotangents`, for every symbol
``v`` a gradient flows to, the contribution ``g * conj(d expr / d v)`` (``conj`` the
identity for real ops: TensorFlow's convention for complex inputs), the partial
differentiated symbolically (SymPy), simplified in stable forms and finalized with
guards; and lists each partial for the docstring (:class:`gradgen.ir.PartialIR`).
"""

from __future__ import annotations

import sympy

from .. import functions as fns
from .. import ir
from .. import shapes as sh
from ..stability import guards
from .context import Derivation
from .cotangents import Contribution, Cotangents
from .regimes import branched, regime_comment, regime_text
from .stabilize import finalize, simplify_partial
from .text import shorten, spec_str

MAX_PARTIAL_OPS = 5000
# SymPy objects a derivative may hold that have no TensorFlow form.
_UNPRINTABLE = (
    sympy.Derivative,
    sympy.Subs,
    sympy.Integral,
    sympy.DiracDelta,
    sympy.Heaviside,
    sympy.re,
    sympy.im,
)


def check_printable(d: Derivation, expr, key, what: str) -> None:
    """Refuse a derived expression the printer cannot write as TensorFlow code.

    Raises:
        SpecError: an imaginary part in a real op, or a SymPy object with no
            TensorFlow form (an unevaluated derivative, a Dirac delta...).
    """
    if not d.program.is_complex and expr.has(sympy.I):
        # SymPy takes sqrt(-1 - x**2) as I*sqrt(x**2 + 1) for real x: a real op
        # whose derivative is imaginary would print a complex constant into float
        # code (TypeError when the gradient runs)
        raise d.error(
            key,
            f"the {what} is not real ({shorten(spec_str(expr))}): SymPy finds "
            "part of the expression imaginary for every real input (as "
            "sqrt(-1 - x**2) = I*sqrt(1 + x**2)); declare a complex dtype, or "
            "rewrite it",
        )
    for cls in _UNPRINTABLE:
        found = expr.atoms(cls)
        if found:
            name = cls.__name__
            raise d.error(
                key,
                f"the {what} contains {name}, which has no TensorFlow form "
                f"(from {shorten(spec_str(sorted(found, key=sympy.default_sort_key)[0]))}); "
                "rewrite the expression",
            )


def partial(d: Derivation, expr, wrt, key, label, filled: list | None = None):
    """``d expr / d wrt``, simplified in stable forms. A point a Piecewise of ``expr``
    fills with a limit (a derived order's ``acos(x)**2`` slope, -2 at 1) has that
    formula's derivative's limit there (2/3), not the constant's 0
    (:func:`guards.derivative`; ``filled`` receives each such point).

    Raises:
        SpecError: it has more than :data:`MAX_PARTIAL_OPS` operations, or no
            TensorFlow form (:func:`check_printable`).
    """
    result = d.applied(simplify_partial(guards.derivative(expr, wrt, filled), d.rules))
    if sympy.count_ops(result) > MAX_PARTIAL_OPS:
        raise d.error(
            key,
            f"the derivative {label} has more than {MAX_PARTIAL_OPS} operations; "
            "split the expression into `where` intermediates",
        )
    check_printable(d, result, key, f"derivative {label}")
    return result


def elementwise_vjp(d: Derivation, state: Cotangents, expr, g, shape, out_name, key, docs,
                    narrow=None, regimes=None) -> None:
    """Contributions of ``g * conj(d expr/d v)`` to every differentiable symbol ``v``.

    ``narrow``: ``(g's shape, widened)`` where ``g`` is smaller than ``shape`` (a
    keepdims reduction's cotangent); ``widened()`` gives ``g`` broadcast to
    ``shape``, used for the partials whose product with ``g`` would not have it.
    ``regimes``: input name -> the :class:`gradgen.stability.regimes.Regime` of its
    partial, where ``expr`` is an output of an op with no tensor nodes.
    """
    key_text = d.key(key)
    show = d.display.show
    for v in sorted(expr.free_symbols & d.diff_symbols, key=str):
        if expr == v:  # the output is this value itself: the cotangent passes through
            passed = g if narrow is None else narrow[1]()
            state.add(v, Contribution(passed, shape))
            continue
        label = f"d({out_name})/d({v.name})"
        derived: list = []
        p = partial(d, expr, v, key, label, derived)
        filled, points = _limits(d, p, derived)
        regime = (regimes or {}).get(v.name)
        docs.append(ir.PartialIR(out_name, v.name, show(p), d.display.shown(p), points,
                                 regime_text(regime)))
        if p == 0:
            continue
        code = finalize(d, filled, partial=True)
        if not d.program.is_complex:
            code = _pull_sign(code)
        if regime is not None and d.guarded:
            code = branched(d, regime, code)
        g_v = g
        if narrow is not None and not _covers(d, code, narrow[0], shape):
            g_v = narrow[1]()
        if d.program.is_complex:
            term = g_v * sympy.conjugate(code)
        elif (d.guarded and d.program.level > 1 and len(d.program.outputs) > 1
              and not code.is_number):
            # a VJP op's outputs are the gradients of each input; a Hessian row asks for
            # one, and TensorFlow passes a 0 upstream for the others: 0 * inf = NaN where
            # this partial is infinite, as exp(a + b)'s at a = 1e4. An unasked output's
            # contribution is exactly 0
            term = fns.mul_no_nan(code, g_v)
        else:
            term = g_v * code
        # no provenance for a constant partial or a single value: the code says it
        comments = () if p.is_number or p.is_Symbol else (
            shorten(f"{label} = {show(p)}  ({key_text})"),)
        if regime is not None:
            comments += (regime_comment(regime),)
        state.add(v, Contribution(term, shape, comments))


def _limits(d: Derivation, p, derived=()) -> tuple[sympy.Basic, tuple[str, ...]]:
    """``p`` with its singular points filled by its limits
    (:func:`gradgen.stability.guards.singular_limits`; real ops), and each filled point,
    those ``derived`` (the limits of the derivative at points the differentiated value
    filled: :func:`gradgen.stability.guards.derivative`) first, as shown: ``at x = 1:
    -2, the limit from below``."""
    if d.program.is_complex:
        return p, ()
    filled, used, points = guards.singular_limits(p, {v.symbol for v in d.program.inputs})
    d.rules_used.update(used)
    filled = guards.polynomials_beside(filled, derived, d.program.dtype)
    show = d.display.show
    return filled, tuple(f"at {show(v)} = {show(r)}: {show(value)}, the limit {how}"
                         for v, r, value, how in [*derived, *points])


def _covers(d: Derivation, expr, g_shape: sh.Shape, shape: sh.Shape) -> bool:
    """Whether ``g * expr`` has ``shape`` by broadcasting, for a ``g`` of ``g_shape``
    (every symbol of ``expr`` of known shape)."""
    symbols = expr.free_symbols
    if any(s not in d.shape_of for s in symbols):
        return False
    factory = sh.DimFactory()
    actual = sh.broadcast_all([g_shape] + [d.shape_of[s] for s in symbols], factory)
    return sh.same_shape(actual, shape)


def _pull_sign(expr):
    """``expr`` with each Piecewise whose branches are all negated written as the
    negation of one: ``where(c, -r, -sign(r)) = -where(c, r, sign(r))``, so that CSE
    shares the product with the upstream between the partials of ``f(a - b)`` with
    respect to ``a`` and ``b`` (one ``where`` and one product, not two of each)."""
    def negated(value):
        return value.is_zero or value.could_extract_minus_sign()

    def matches(e):
        return (isinstance(e, sympy.Piecewise) and all(negated(v) for v, _ in e.args)
                and not all(v.is_zero for v, _ in e.args))

    return expr.replace(
        matches, lambda e: -sympy.Piecewise(*[(-v, c) for v, c in e.args], evaluate=False))
