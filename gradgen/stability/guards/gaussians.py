"""Gaussians: a weight times its exponential, ``b**n * exp(k*g*b**n)``, and the same
with a scale input ``s`` (``exp(-x**2/(2*s**2))``'s partials), computed so that no power
of ``b`` or ``1/s`` overflows where the product is finite (:func:`split_gaussians`).

Receives: a real elementwise value or partial, ready to print. Returns: the expression
and the guard's name (``split_gaussian``) where it applied.
"""

from __future__ import annotations

import sympy
from sympy import S

from ...functions import Ratio, mul_no_nan, squarings
from .walk import each_product


def split_gaussians(expr) -> tuple[sympy.Basic, tuple[str, ...]]:
    """``b**n * exp(k*g*b**n) * c`` -> ``c * (b * exp(k*(g*b)*b**(n-1)/n))**n`` (``n >= 2``
    an integer, ``k`` a number, ``g`` free of ``b``; ``g * b`` as ``mul_no_nan(b, g)``,
    ``b`` times the exponential as ``mul_no_nan(b, exp(...))``): a Gaussian's weight
    times its exponential, each factor of the power taking its share of the
    exponential. ``b**n`` overflows where the product need not: the derivative of
    ``exp(-gamma*(x - c)**2)`` in gamma, ``-(x - c)**2 * exp(-gamma*(x - c)**2)``, was
    inf * 0 = NaN at x = -3.4e38, c = 0, gamma = 1 in float32 (exact -0; 33 of 128 audit
    points), and is 7.6e-13 at x - c = 1e20, gamma = 1.2e-38, where ``b**2`` is inf. The
    exponent is computed as ``(g*b)*b**(n-1)`` so that it is finite there too; where
    the exponential is 0 the factor is 0 even where ``b`` overflowed (``x - c`` at x =
    -c = 3.4e38: its true size, 6.8e38, times ``exp(u/2)`` with ``u`` at most ``-g *
    4.6e77``, is 0 for every normal ``g``).

    Args:
        expr: a real elementwise value or partial, ready to print.

    Returns:
        The expression and the guard's name (``split_gaussian``) where it applied.
    """
    def fix(e):
        for power in e.args:
            if not (isinstance(power, sympy.Pow) and power.exp.is_Integer
                    and power.exp >= 2 and not power.base.is_number):
                continue
            b, n = power.base, int(power.exp)
            for f in e.args:
                if not isinstance(f, sympy.exp):
                    continue
                k, g = _gaussian_exponent(f.args[0], power)
                if k is None:
                    continue
                rest = [a for a in e.args if a is not power and a is not f]
                scale = _scale_of(g, n, rest)
                if scale is not None:  # b**n * s**-m: (b/s)**n * s**(n - m)
                    rest = _scale_taken(rest, scale, n)
                    b, g = Ratio(b, scale), S.One
                scaled = k * mul_no_nan(b, g) * b ** (n - 1) / n if g != 1 \
                    else k * b ** n / n
                weighted = squarings(mul_no_nan(b, sympy.exp(scaled)), n)
                if scale is not None:  # 0 at s = 0 (x != 0), where 1/s is inf
                    return mul_no_nan(sympy.Mul(*rest), weighted)
                return sympy.Mul(*rest, weighted)
        return _scaled_slope(e)

    return each_product(expr, fix, "split_gaussian")


def _scaled_slope(e):
    """``x * s**-m * exp(k*x**n*s**-n) * c`` (inputs ``x``, ``s``; ``m >= n >= 2``: a
    scaled Gaussian's slope in x, ``-x/s**2 * exp(-x**2/(2*s**2))``) as
    ``mul_no_nan(c * s**(1 - m), mul_no_nan(x/s, exp(k*(x/s)**n)))``: the ratio's
    weight is bounded, and 0 where the exponential is (at s = 0, where ``1/s`` is
    inf). ``1/s**2`` overflowed at x = s = 1.2e-38 in float32 (exact -5.2e37). None
    where ``e`` is no such product."""
    for f in e.args:
        if not isinstance(f, sympy.exp):
            continue
        for b in e.args:
            if not isinstance(b, sympy.Symbol):
                continue
            power = f.args[0].as_independent(b, as_Add=False)[1]  # b**n
            n = power.as_base_exp()[1]
            if not (n.is_Integer and n >= 2 and power.as_base_exp()[0] == b):
                continue
            k, g = _gaussian_exponent(f.args[0], power)
            rest = [a for a in e.args if a is not f and a is not b]
            scale = None if k is None else _scale_of(g, int(n), rest)
            if scale is None:
                continue
            u = Ratio(b, scale)
            return mul_no_nan(sympy.Mul(*_scale_taken(rest, scale, 1)),
                              mul_no_nan(u, sympy.exp(k * u**n)))
    return None


def _scale_taken(rest: list, scale, j: int) -> list:
    """The factors ``rest`` with their ``scale**-m`` as ``scale**(j - m)``: ``j`` powers
    of the scale taken into the ratio ``(x/s)**j``."""
    inverse = next(a for a in rest if a.as_base_exp()[0] == scale)
    return [a for a in rest if a is not inverse] + [scale ** (inverse.as_base_exp()[1] + j)]


def _scale_of(g, n: int, rest):
    """``s`` where the exponent's ``g`` is ``s**-n`` and the product's other factors
    hold ``s**-m``, ``m >= n`` (``exp(-x**2/(2*s**2))``'s slope in s, ``x**2 * s**-3 *
    exp(...)``): the weight is then ``(x/s)**n / s**(m - n)``, whose ratio neither
    overflows nor underflows where ``x**2 * (1/s**2)`` does (NaN at x = s = 1.2e-38 in
    float32, exact 5.2e37). Else None."""
    base, exp = g.as_base_exp()
    if exp != -n or base.is_number or not isinstance(base, sympy.Symbol):
        return None
    for a in rest:
        b, m = a.as_base_exp()
        if b == base and m.is_Integer and m <= -n:
            return base
    return None


def _gaussian_exponent(u, power):
    """``(k, g)`` where ``u = k * g * power``, ``k`` a number and ``g`` free of the
    power's base; ``(None, None)`` otherwise."""
    ratio = u / power
    if ratio.has(power.base) or ratio == 0:
        return None, None
    k, g = ratio.as_coeff_Mul()
    return (k, g) if k.is_number else (None, None)
