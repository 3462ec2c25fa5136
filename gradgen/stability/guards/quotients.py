"""Quotients by a sum ``q = c + g`` beside the term ``g`` it grows with
(:func:`paired_quotients`), and quotients of powers of one base whose numerator
overflows (:func:`power_quotients`).

Receives: a real elementwise SymPy expression ready to print. Returns: the expression
with each product ``g * A / q`` (``q`` a sum of a nonzero number ``c`` and a term
``g``, the quotient written as a negative power of ``q``, ``xdivy(A, q)`` or
``Ratio(A, q)``, and every factor of ``g`` also a factor of the product) computed as
``Ratio(g, q) * A``: ``g / (c + g)`` lies between 0 and 1 where ``g`` and ``c`` have
one sign, so it cannot overflow or underflow where ``g`` and ``q`` do. Also the names
of the guards used (``paired_quotient``).

Derivatives of ``log(c + g)`` and ``1/(c + g)`` bring such products:
Cauchy's loss ``c**2/2 * log(1 + t)`` (``t = (x/c)**2``) has the second derivative
``1/(1 + t) - 2 * t * (c**2/(1 + t))/(1 + t)`` in its second term, whose ``c**2 / (1 +
t) / (1 + t)`` underflows (1e-40 at x = 1e10, c = 1 in float32: 0, flushed) where the
product with ``t`` is -2e-20, and the second derivative took the wrong sign. Source:
the balanced order of a product of powers (zero_factor's ``(sigma/r)**6``), applied to
a sum and the term it grows with.
"""

from __future__ import annotations

import sympy

from ...functions import Guard, Ratio, mul_no_nan, overflowed, xdivy
from .walk import each_node, each_product


def _over(f):
    """``(q, A, kind)`` for a factor that divides ``A`` by a sum ``q`` with a nonzero
    number in it: ``q**-m`` (``A = q**(1 - m)``), ``xdivy(A, q)`` or ``Ratio(A, q)``;
    else None."""
    if isinstance(f, sympy.Pow) and f.exp.is_Integer and f.exp < 0:
        q, rest = f.base, f.base ** (f.exp + 1)
    elif isinstance(f, (xdivy, Ratio)):
        rest, q = f.args
    else:
        return None
    if not isinstance(q, sympy.Add) or q.as_coeff_Add()[0] == 0:
        return None
    return q, rest, type(f)


def _taken(args, factors):
    """``args`` without one of each of ``factors`` (a product's factors); None where
    one is missing."""
    left = list(args)
    for f in factors:
        if f not in left:
            return None
        left.remove(f)
    return left


def _paired(e):
    """``e`` (a product) with its first quotient by ``q = c + g`` paired with ``g``'s
    factors (:func:`paired_quotients`); None where none is."""
    for f in e.args:
        found = _over(f)
        if found is None:
            continue
        q, inner, kind = found
        g = q - q.as_coeff_Add()[0]
        k, g_rest = g.as_coeff_Mul()
        left = _taken([a for a in e.args if a is not f], sympy.Mul.make_args(g_rest))
        if left is None or g_rest == 1:
            continue
        ratio = Ratio(g, q) / k
        if kind is xdivy:  # 0 where A is 0, as xdivy(A, q) is for every q
            return sympy.Mul(*left, mul_no_nan(ratio, inner))
        return sympy.Mul(*left, ratio, inner)
    return _divided_in_turn(e)


def _divided_in_turn(e):
    """``e`` (a product) with a factor ``q**-m`` (``q`` a sum with a nonzero number in
    it, ``m >= 2``) as the rest divided by ``q`` ``m`` times: between the rest and the
    result, each quotient is in range where both are (``q**2`` overflows from |q| =
    1.8e19 in float32, where ``-2x/(1 + x**2)**2`` is -2e-30 at x = 1e10); None where no
    factor is one."""
    for f in e.args:
        found = _over(f)
        if found is None or found[2] is not sympy.Pow or f.exp > -2:
            continue
        q = found[0]
        rest = sympy.Mul(*[a for a in e.args if a is not f])
        if rest.is_number:
            continue  # (c/q**2: no rest to divide; 1/q first is no better)
        for _ in range(-int(f.exp)):
            rest = Ratio(rest, q)
        return rest
    return None


def paired_quotients(expr) -> tuple[sympy.Basic, tuple[str, ...]]:
    """``g * A / (c + g)`` -> ``Ratio(g, c + g) * A`` in every product (see the module
    docstring); ``mul_no_nan(Ratio(g, q), A)`` where the quotient was ``xdivy(A, q)``
    (0 where ``A`` is 0). A product with ``(c + g)**-m`` (m >= 2) and no factor of
    ``g`` is its rest divided by ``c + g`` m times (:func:`_divided_in_turn`).

    The value is unchanged wherever the product as written is finite (up to rounding:
    one division for a multiplication and a division). Where ``q`` is 0 (``g = -c``),
    ``g / q`` is inf as ``1 / q`` was.

    Args:
        expr: a real elementwise SymPy expression.

    Returns:
        The expression and ``("paired_quotient",)`` where it changed, else ``()``.
    """
    return each_product(expr, _paired, "paired_quotient")


def _power_quotient(e):
    """``xdivy(x**a, x**b)`` (``a`` symbolic) as ``x**(a - b)`` where ``x**a``
    overflows, or underflows to 0 at an ``x`` that is not, and as written elsewhere;
    else None."""
    if not isinstance(e, xdivy):
        return None
    top, below = e.args
    base, a = top.as_base_exp()
    bottom, b = below.as_base_exp()
    if not isinstance(top, sympy.Pow) or base != bottom or base.is_number or a.is_number:
        return None
    beyond = sympy.Or(overflowed(top), sympy.And(sympy.Eq(top, 0), sympy.Ne(base, 0)))
    return sympy.Piecewise((Guard(base, beyond, 1) ** (a - b), beyond), (e, True))


def power_quotients(expr) -> tuple[sympy.Basic, tuple[str, ...]]:
    """Each ``xdivy(x**a, x**b)`` with a symbolic exponent ``a`` as ``x**(a - b)``
    where ``x**a`` overflows, or underflows to 0 at an ``x`` that is not 0, and as
    written elsewhere, where ``x**(a - b)`` would round ``a - b`` (5 bits at x = 3e-32,
    p = -3e-7 in float32, where ``x**p / x`` is within one). ``xdivy(x**p, x)``, the
    derivative of ``xlogy(x**p, x)`` in its second argument (``x**p * log(x)``'s second
    derivative in x), was inf at x = 5.2e18, p = 2.17 in float32, where the exact value
    is 1e22, and 0 at x = 1e-30, p = 1.5 (``x**p`` underflows), which left the
    second derivative 1% off (``x**(p - 1)*p*log(x)`` without its ``x**(p - 1)``). At
    x = 0 xdivy's 0 stays. Where it is not chosen the power is taken at 1: finite, and
    so is its derivative.

    Args:
        expr: a real elementwise SymPy expression.

    Returns:
        The expression and ``("power_quotient",)`` where it changed, else ``()``.
    """
    return each_node(expr, _power_quotient, "power_quotient", xdivy)
