"""Sums of squares computed as the square of their norm: quotients by them and their
logarithms (:func:`norm_quotients`, :func:`norm_logs`).

Receives: a real elementwise SymPy expression ready to print (and, for the logarithms,
the op's dtype). Returns: the expression with each sum of squares ``q = c + x**2 + ...``
(``c >= 0`` a number, the coefficients positive numbers: the ``hypot`` rule's
``root_of_square`` reads the roots) that would be computed as a sum, and overflow where
the value does not, computed from the norm ``h = hypot(√c, x, ...)`` (``h**2 = q``,
computed scaled: :func:`gradgen.functions.hypot`), and the names of the guards used
(``norm_quotient``, ``norm_log``). Source: LAPACK's scaled norms (``dnrm2``; Blue 1978),
as the ``hypot`` rule; Cauchy's and Student-t's losses, ``log(1 + (x/c)**2)``, are the
forms users write.
"""

from __future__ import annotations

import math

import sympy

from ...functions import Guard, Ratio, hypot, log1p
from ..families.norms import root_of_square
from .branches import guard_branches
from .walk import each_node, each_product

# The norm h = sqrt(1 + q) from which log1p(q) of a sum of squares is 2*log(h): below it
# q is under 2**20 (2**14 in float16, whose largest number is 65504), finite in every
# dtype, and above it log(h) is accurate to its last digits (it is at least 6.9 and
# 4.8, far from the cancellation of log near 1).
NORM_LOG_SWITCH = {"float16": 2.0**7}
# Each dtype's largest binary exponent: a quotient by (c + r**2)**m is computed as written
# where |r| is below the power of 10 under 2**(MAX_EXPONENT/(2m) - 2) (1e18 in float32),
# where (c + r**2)**m is finite.
MAX_EXPONENT = {"float16": 16, "bfloat16": 128, "float32": 128, "float64": 1024}
NORM_LOG_SWITCH_DEFAULT = 2.0**10


def _square_sum(q):
    """``hypot(r1, r2, ...)`` whose square is ``q``, a sum of squares (``c + x**2``,
    ``x**2 + 4*y**2``: numbers positive, at least one term not a number); else None."""
    if not isinstance(q, sympy.Add):
        return None
    roots = [root_of_square(t) for t in q.args]
    if any(r is None for r in roots) or all(r.is_number for r in roots):
        return None
    return hypot(*roots)


def _roots_norm(q):
    """``hypot(x, y, ...)`` for ``q`` a sum of squares of two or more roots and no
    number (:func:`_square_sum`), whose squares can overflow and underflow; else None."""
    h = _square_sum(q)
    if h is None or len(h.args) < 2 or any(r.is_number for r in h.args):
        return None
    return h


def _over_norm(e):
    """``e`` (a product) with a factor ``q**-m`` (``q`` a sum of squares, ``h**2``,
    :func:`_square_sum`) as the rest divided by ``h`` 2m times, each of the rest's
    factors that grows with ``h`` (a power of a root of ``q``) divided first, the highest
    powers first: ``x**2*y/(x**2 + y**2)`` is ``(x/h)**2*y``; none of it overflows
    (``x**2`` is inf from 1.8e19 in float32) or underflows where the value does not,
    and TensorFlow's derivative of it is finite at 0 (``2/(x + 1/x)``, which needs no
    norm, is NaN there). None where no factor is such a power."""
    for f in e.args:
        if not (isinstance(f, sympy.Pow) and f.exp.is_Integer and f.exp < 0):
            continue
        h = _square_sum(f.base)
        if h is None:
            continue
        grows = set().union(*(r.free_symbols for r in h.args))
        divisions = -2 * int(f.exp)
        paired, rest = [], []
        for a in sorted((a for a in e.args if a is not f), key=lambda a: -_growth(a, grows)):
            k = _growth(a, grows)
            base = a.as_base_exp()[0]
            powers = min(k, divisions)
            if not powers:
                rest.append(a)
                continue
            paired.append(Ratio(base, h) ** powers)
            rest.append(base ** (k - powers))
            divisions -= powers
        value = sympy.Mul(*rest, *paired)
        if not paired and value.is_number:
            continue  # (c/q, as paired_quotients leaves it: readable, and 0 only where
            # c/q is below c/largest)
        for _ in range(divisions):
            value = Ratio(value, h)
        return value
    return None


def _growth(factor, grows) -> int:
    """``k`` for a factor ``base**k`` (``k`` a positive integer) whose base is a function
    of the symbols in ``grows`` (a root of the sum); else 0."""
    base, k = factor.as_base_exp()
    if k.is_Integer and k > 0 and not base.is_number and base.free_symbols <= grows:
        return int(k)
    return 0


def _in_range(h, m: int, dtype: str):
    """Where ``q**m``, ``q = h**2`` a sum of squares, is finite and normal as written:
    its roots below the switch (the power of 10 under ``2**(MAX_EXPONENT/(2m) - 2)``:
    1e18 in float32 for m = 1) and, with no number in the sum, one of them above the
    switch's reciprocal."""
    roots = [r for r in h.args if not r.is_number]
    exponent = MAX_EXPONENT.get(dtype, MAX_EXPONENT["float32"]) // (2 * m) - 2
    switch = sympy.Float(f"1e{math.floor(exponent * math.log10(2))}")  # (a power of 10)
    inside = [sympy.Abs(r) < switch for r in roots]
    if len(roots) == len(h.args):  # no number beside the squares: they can underflow
        inside.append(sympy.Or(*[sympy.Abs(r) >= 1 / switch for r in roots]))
    return sympy.And(*inside)


def _beyond_squares(e, dtype):
    """``e`` (a product) as written where its sum of squares is in range
    (:func:`_in_range`), and divided by the norm (:func:`_over_norm`) beyond: near |r|
    = 1 the quotient as written is the more accurate (``1 - 2*x**2/(1 + x**2)`` cancels
    there, and ``(x/h)**2`` rounds ``h``: 800 ulps at x = 1.001 in float32 against
    76). None where ``e`` has no such quotient."""
    normed = _over_norm(e)
    if normed is None:
        return None
    f = next(f for f in e.args if isinstance(f, sympy.Pow) and f.exp.is_Integer
             and f.exp < 0 and _square_sum(f.base) is not None)
    inside = _in_range(_square_sum(f.base), -int(f.exp), dtype)
    branched, _ = guard_branches(sympy.Piecewise((e, inside), (normed, True)))
    return branched


def _norm_ratio(e, dtype):
    """``Ratio(b, q)`` (the ``norm_zero`` guard's unit component ``b/q``) for ``q`` a
    sum of squares of two or more roots and no number, as written where ``q**2`` is in
    range (:func:`_in_range`) and ``(b/h)/h`` beyond; else None."""
    if not isinstance(e, Ratio):
        return None
    b, q = e.args
    h = _roots_norm(q)
    if h is None:
        return None
    # (q**2 in range: the quotient's derivative, -2*x*(b/q)/q, divides by q again)
    inside = _in_range(h, 2, dtype)
    # each branch finite where the other is chosen (the double where; guard_branches
    # reads no bound of one input from a condition in several): q is 1 outside the
    # range, h is 1 at the origin
    safe_h = Guard(h, sympy.Ne(h, 0), 1)
    return sympy.Piecewise((Ratio(b, Guard(q, inside, 1)), inside),
                           (Ratio(Ratio(b, safe_h), safe_h), True))


def norm_quotients(expr, dtype: str = "float32") -> tuple[sympy.Basic, tuple[str, ...]]:
    """Each product with ``(c + x**2 + ...)**-m``, and each unit component ``b/(x**2 +
    y**2 + ...)`` of the ``norm_zero`` guard, computed, where the sum of squares would
    overflow or underflow, with the norm ``h = hypot(√c, x, ...)`` in place of the sum,
    ``h**2``: the factors that grow with ``h`` each divided by it, then the rest
    (:func:`_over_norm`); as written in range (:func:`_in_range`). ``log(1 + x**2)``'s
    slope ``2*x/(1 + x**2)`` is NaN at x = 3.4e38 in float32 (inf/inf) and 0 from
    1.8e19 (x**2 overflows) where the exact value is 2/x; ``x/(1 + x**2)``'s slope
    ``(1 - x**2)/(1 + x**2)**2`` likewise; ``atan2``'s partial ``-y/(x**2 + y**2)`` was
    0 from x = 1.8e19 and at x = y = 1e-20 (the sum underflows), and its second
    derivative NaN at x = y = 3.4e38 (``2*x`` is inf beside a quotient that is 0). The
    quotient is divided in turn as
    :func:`gradgen.stability.guards.quotients.paired_quotients` does.

    Args:
        expr: a real elementwise SymPy expression.
        dtype: the op's dtype (where its squares overflow).

    Returns:
        The expression and ``("norm_quotient",)`` where it changed, else ``()``.
    """
    expr, used = each_product(expr, lambda e: _beyond_squares(e, dtype), "norm_quotient")
    expr = _bare_reciprocals(expr)
    expr, ratios = each_node(expr, lambda e: _norm_ratio(e, dtype), "norm_quotient", Ratio)
    return expr, used or ratios


def _bare_reciprocals(e):
    """``e`` with each ``1/q`` that is no factor of a product, ``q`` a sum of squares of
    two or more roots and no number, as ``Ratio(1, q)`` (:func:`_norm_ratio` computes it
    with the norm out of range: ``1/(x**2 + y**2 + z**2)`` was inf at (0, 0, 1e-19) in
    float32, where the sum underflows and the value is 1e38). Products are left to
    :func:`_beyond_squares`."""
    if isinstance(e, sympy.Pow) and e.exp == -1 and _roots_norm(e.base) is not None:
        return Ratio(sympy.S.One, e.base)
    if isinstance(e, sympy.Mul) or not e.args or isinstance(e, sympy.Pow):
        return e
    args = tuple(_bare_reciprocals(a) for a in e.args)
    return e if args == e.args else e.func(*args)


def _norm_log(e, dtype):
    """``log1p(q)`` for ``q`` a sum of squares with no number in it: ``log1p(q)`` where
    ``h = hypot(1, roots)`` is below the switch, ``2*log(h)`` above it; ``log(q)`` of
    two or more roots: as written where ``q`` is in range (:func:`_in_range`),
    ``2*log(hypot(roots))`` beyond; else None."""
    if isinstance(e, sympy.log):
        h = _roots_norm(e.args[0])
        if h is None:
            return None
        inside = _in_range(h, 1, dtype)
        return sympy.Piecewise((e, inside), (2 * sympy.log(Guard(h, sympy.Not(inside), 1)),
                                             True))
    if not isinstance(e, log1p):
        return None
    q = e.args[0]
    terms = sympy.Add.make_args(q)
    roots = [root_of_square(t) for t in terms]
    if any(r is None or r.is_number for r in roots):
        return None
    h = hypot(1, *roots)
    switch = NORM_LOG_SWITCH.get(dtype, NORM_LOG_SWITCH_DEFAULT)
    return sympy.Piecewise((e, h < switch), (2 * sympy.log(h), True))


def norm_logs(expr, dtype: str) -> tuple[sympy.Basic, tuple[str, ...]]:
    """``log1p(x**2 + ...)`` (what ``log(1 + x**2)`` becomes) as ``2*log(h)``, ``h =
    hypot(1, x, ...)``, where ``h`` is at least :data:`NORM_LOG_SWITCH` (the sum of
    squares overflows from |x| = 1.8e19 in float32, where Cauchy's loss is 88: it was
    inf), and as written below it (where ``log(h)`` would lose the digits of ``x**2``
    beside 1). ``log(x**2 + y**2 + ...)`` likewise as ``2*log(hypot(x, y, ...))`` where
    the sum overflows or underflows (it was -inf at x = y = 1e-30 in float32, where it
    is -137.5).

    Args:
        expr: a real elementwise SymPy expression.
        dtype: the op's dtype (float16 switches lower: its squares overflow from 256).

    Returns:
        The expression and ``("norm_log",)`` where it changed, else ``()``.
    """
    return each_node(expr, lambda e: _norm_log(e, dtype), "norm_log", (log1p, sympy.log))
