"""Hyperbolic functions: log(cosh), sinh/cosh, 1 ± tanh.

Each rule is a :class:`~gradgen.stability.rule.Rule`; :data:`RULES` lists this family's
rules in the order the engine tries them.
"""

from __future__ import annotations

import sympy

from ...functions import logcosh, sigmoid
from ..rule import Rule


def _log_cosh(expr):
    # log(cosh(u)) = logcosh(u), computed without overflow
    if isinstance(expr, sympy.log):  # (one argument: SymPy divides log(x, b))
        if isinstance(expr.args[0], sympy.cosh):
            return logcosh(expr.args[0].args[0])
    return None


def _tanh_ratio(expr):
    # sinh(u) / cosh(u) = tanh(u): one transcendental instead of two and a division
    if isinstance(expr, sympy.Mul):
        factors = list(expr.args)
        for f in factors:
            if isinstance(f, sympy.sinh):
                u = f.args[0]
                inverse = sympy.Pow(sympy.cosh(u), -1)
                if inverse in factors:
                    rest = [g for g in factors if g is not f and g != inverse]
                    return sympy.Mul(sympy.tanh(u), *rest)
    return None


def _complement_sign(f):
    """(+1 | -1, u) when ``f`` is ``1 + tanh(u)`` or ``1 - tanh(u)``, else None."""
    if isinstance(f, sympy.Add) and len(f.args) == 2 and sympy.S.One in f.args:
        rest = f - 1
        if isinstance(rest, sympy.tanh):
            return 1, rest.args[0]
        if isinstance(-rest, sympy.tanh):
            return -1, (-rest).args[0]
    return None


def _tanh_complement(expr):
    # 1 +- tanh(u) = 2 sigmoid(+-2u), for a factor whose complement is not beside it
    if not isinstance(expr, sympy.Mul):
        return None
    found = {}
    for f in expr.args:
        base, power = (f.base, f.exp) if isinstance(f, sympy.Pow) else (f, sympy.S.One)
        sign = _complement_sign(base)
        if sign is not None and power.is_Integer and power > 0:
            found[f] = (sign, power)
    replaced = {}
    for f, ((sign, u), power) in found.items():
        # (1 - t)(1 + t) = 1 - tanh(u)**2 is left to the forms that keep its tanh
        if any(s == (-sign, u) for s, _ in found.values()):
            continue
        replaced[f] = (2 * sigmoid(2 * sign * u)) ** power
    if not replaced:
        return None
    return sympy.Mul(*(replaced.get(f, f) for f in expr.args))


RULES: tuple[Rule, ...] = (
    Rule(
        "log_cosh",
        "log(cosh(u)) = logcosh(u) = log1p(e**2 / (2 + 2*e)), e = expm1(|u|); "
        "|u| - log(2) from |u| = 10 (float64: 20)",
        "cosh(u) overflows for |u| > 89 in float32 (the result is about |u| - log(2))",
        _log_cosh,
    ),
    Rule(
        "tanh_complement",
        "1 + tanh(u) = 2 * sigmoid(2*u), 1 - tanh(u) = 2 * sigmoid(-2*u) (a factor of a "
        "product without its complement)",
        "1 + tanh(u) cancels for u < -4 in float32 and is 0 from u = -8 (tanh-GELU's value "
        "and gradient for x < -4.8), where 2 sigmoid(2u) is exact to an ulp",
        _tanh_complement,
    ),
    Rule(
        "tanh_ratio",
        "sinh(u) / cosh(u) = tanh(u)",
        "two transcendentals and a division where one suffices; cosh overflows first",
        _tanh_ratio,
        complex_ok=True,
    ),
)
