"""Hyperbolic functions: log(cosh), asinh written as a logarithm, sinh/cosh and
cosh/sinh, tanh's derivative sech**2.

Each rule is a :class:`~gradgen.stability.rule.Rule`; :data:`RULES` lists this family's
rules in the order the engine tries them.
"""

from __future__ import annotations

import sympy

from ...functions import hypot, logcosh
from ..rule import Rule


def _log_cosh(expr):
    # log(cosh(u)) = logcosh(u), computed without overflow
    if isinstance(expr, sympy.log):  # (one argument: SymPy divides log(x, b))
        if isinstance(expr.args[0], sympy.cosh):
            return logcosh(expr.args[0].args[0])
    return None


# The constants c for which log(u + sqrt(u**2 + c)) is asinh(u/sqrt(c)) + log(c)/2: far
# from 1 the sum cancels where u >> sqrt(c) (asinh(1e25*x) - 57.6 for c = 1e-50 lost 71
# ulps at x = 0.3 in float32, and 1e25*x overflows), and 1/sqrt(c) is a constant of
# their derivatives that can overflow (1e45 in the second derivative of c = 1e-30).
ASINH_CONSTANTS = (0.25, 4.0)


def _radicand_constant(root, u):
    """``c`` where ``root`` is ``sqrt(u**2 + c)`` (or ``hypot(a, u)``, ``c = a**2``) with
    ``c`` a number in :data:`ASINH_CONSTANTS`; else None."""
    c = _constant(root, u)
    low, high = ASINH_CONSTANTS
    return c if c is not None and low <= c <= high else None


def _constant(root, u):
    if isinstance(root, hypot) and len(root.args) == 2:
        a, b = root.args if root.args[0].is_number else root.args[::-1]
        if a.is_number and a.is_positive and b**2 == u**2:
            return a**2
        return None
    if isinstance(root, sympy.Pow) and root.exp == sympy.S.Half:
        c = sympy.expand(root.base - u**2)
        if c.is_number and c.is_positive:
            return c
    return None


def _log_asinh(expr):
    # log(u + sqrt(u**2 + c)) = asinh(u / sqrt(c)) + log(c)/2: the sum cancels for
    # u < 0 (log(-747 + sqrt(747**2 + 1)) was 1% off in float32, and -inf, its
    # gradient NaN, below -1.8e19)
    if not (isinstance(expr, sympy.log) and isinstance(expr.args[0], sympy.Add)):
        return None
    arg = expr.args[0]
    for root in arg.args:
        u = arg - root
        c = _radicand_constant(root, u)
        if c is not None and not u.is_number:
            return sympy.asinh(u / sympy.sqrt(c)) + sympy.log(c) / 2
    return None


def _over_power(expr, top, bottom, rewritten):
    """``top(u) * bottom(u)**-n * rest`` as ``rewritten(u, n) * rest`` (``n`` a positive
    integer), or None where ``expr`` is no such product."""
    if isinstance(expr, sympy.Mul):
        factors = list(expr.args)
        for f in factors:
            if isinstance(f, top):
                u = f.args[0]
                for g in factors:
                    if (isinstance(g, sympy.Pow) and g.base == bottom(u)
                            and g.exp.is_Integer and g.exp < 0):
                        rest = [h for h in factors if h is not f and h is not g]
                        return sympy.Mul(rewritten(u, -g.exp), *rest)
    return None


def _tanh_ratio(expr):
    # sinh(u) / cosh(u)**n = tanh(u) / cosh(u)**(n - 1): one transcendental fewer, and
    # no inf / inf where both overflow (sech(u)**2's derivative -2 sinh(u) / cosh(u)**3)
    return _over_power(expr, sympy.sinh, sympy.cosh,
                       lambda u, n: sympy.tanh(u) * sympy.cosh(u) ** (1 - n))


def _coth_ratio(expr):
    # cosh(u) / sinh(u)**n = sinh(u)**(1 - n) / tanh(u): no 0 * inf where both overflow
    # (x/sinh(x)'s slope (1 - x*cosh(x)/sinh(x))/sinh(x) was NaN from x = 100 in float32)
    return _over_power(expr, sympy.cosh, sympy.sinh,
                       lambda u, n: sympy.tanh(u) ** -1 * sympy.sinh(u) ** (1 - n))


# Where sech(u)**2 switches from (1 - t)*(1 + t) to (1/cosh(u))**2: measured against 50
# digits on 800 points per interval, (1 - t)*(1 + t) is the more accurate below (at most
# 3.4 ulps in float32 on [0.75, 1], 1.5 below 0.75; (1/cosh)**2 up to 5), and above it
# loses what 1 - t loses (7 ulps on [1, 1.5], 680 on [2, 4]; (1/cosh)**2 at most 5.3).
SECH_SQUARED_SWITCH = 1


def _sech_squared(expr):
    # c - c*tanh(u)**2: 0 for |u| > 9 in float32 (tanh rounds to 1), 19 in float64,
    # where sech(u)**2 is 4e-8 and 1e-16
    if isinstance(expr, sympy.Add) and len(expr.args) == 2:
        c, rest = expr.as_coeff_Add()
        k, square = rest.as_coeff_Mul()
        if (c.is_Number and c != 0 and k == -c and isinstance(square, sympy.Pow)
                and square.exp == 2 and isinstance(square.base, sympy.tanh)):
            t = square.base
            u = t.args[0]
            return c * sympy.Piecewise(
                ((1 - t) * (1 + t), sympy.Abs(u) < SECH_SQUARED_SWITCH),
                (sympy.cosh(u) ** -2, True))
    return None


RULES: tuple[Rule, ...] = (
    Rule(
        "log_cosh",
        "log(cosh(u)) = logcosh(u) = log1p(e**2 / (2 + 2*e)), e = expm1(|u|); "
        "|u| - log(2) from |u| = 10 (float64: 20)",
        "cosh(u) overflows for |u| > 89 in float32 (the result is about |u| - log(2))",
        _log_cosh,
    ),
    Rule(
        "log_asinh",
        "log(u + sqrt(u**2 + c)) = asinh(u/sqrt(c)) + log(c)/2, 1/4 <= c <= 4 (also with "
        "hypot(sqrt(c), u))",
        "u + sqrt(u**2 + c) cancels for u < 0: log(x + sqrt(x**2 + 1)) is 1% off at "
        "x = -747 in float32, -inf (its gradient NaN) below -1.8e19",
        _log_asinh,
    ),
    Rule(
        "tanh_ratio",
        "sinh(u) / cosh(u)**n = tanh(u) / cosh(u)**(n - 1)",
        "two transcendentals and a division where one suffices; sinh and cosh overflow "
        "for |u| > 89 in float32 (inf / inf)",
        _tanh_ratio,
        complex_ok=True,
    ),
    Rule(
        "coth_ratio",
        "cosh(u) / sinh(u)**n = sinh(u)**(1 - n) / tanh(u)",
        "sinh and cosh overflow for |u| > 89 in float32: x*cosh(x)/sinh(x) is inf / inf "
        "= NaN, or inf * 0 where 1/sinh(x) is 0 (x/sinh(x)'s slope from x = 100)",
        _coth_ratio,
        complex_ok=True,
    ),
    Rule(
        "sech_squared",
        "c - c*tanh(u)**2 = c*(1 - tanh(u))*(1 + tanh(u)) for |u| < 1, c / cosh(u)**2 "
        "from there (tanh's derivative, sech(u)**2)",
        "1 - tanh(u)**2 (and (1 - tanh(u))*(1 + tanh(u))) is 0 for |u| > 9 in float32, "
        "19 in float64, where tanh rounds to 1: the derivative is 4e-8 and 1e-16 there; "
        "each form is used where it is the more accurate (SECH_SQUARED_SWITCH); "
        "TensorFlow's TanhGrad and JAX's tanh JVP use 1 - y**2 everywhere",
        _sech_squared,
    ),
)
