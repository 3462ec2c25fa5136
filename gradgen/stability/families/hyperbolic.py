"""Hyperbolic functions: log(cosh), sinh/cosh.

Each rule is a :class:`~gradgen.stability.rule.Rule`; :data:`RULES` lists this family's
rules in the order the engine tries them.
"""

from __future__ import annotations

import sympy

from ...functions import logcosh
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


RULES: tuple[Rule, ...] = (
    Rule(
        "log_cosh",
        "log(cosh(u)) = logcosh(u) = log1p(e**2 / (2 + 2*e)), e = expm1(|u|); "
        "|u| - log(2) from |u| = 10 (float64: 20)",
        "cosh(u) overflows for |u| > 89 in float32 (the result is about |u| - log(2))",
        _log_cosh,
    ),
    Rule(
        "tanh_ratio",
        "sinh(u) / cosh(u) = tanh(u)",
        "two transcendentals and a division where one suffices; cosh overflows first",
        _tanh_ratio,
        complex_ok=True,
    ),
)
