"""Logarithms and exponentials: softplus, log1p, expm1.

Each rule is a :class:`~gradgen.stability.rule.Rule`; :data:`RULES` lists this family's
rules in the order the engine tries them.
"""

from __future__ import annotations

import sympy
from sympy import S

from ...functions import expm1, log1p, softplus
from ..match import _one_plus
from ..rule import Rule


def _softplus(expr):
    if isinstance(expr, sympy.log) and len(expr.args) == 1:
        u = _one_plus(expr.args[0])
        if isinstance(u, sympy.exp):
            return softplus(u.args[0])
    return None


def _log1p(expr):
    if isinstance(expr, sympy.log) and len(expr.args) == 1:
        u = _one_plus(expr.args[0])
        if u is not None and not isinstance(u, sympy.exp):
            return log1p(u)
    return None


def _expm1(expr):
    # exp(u) - 1 = expm1(u)
    if isinstance(expr, sympy.Add) and S.NegativeOne in expr.args:
        for term in expr.args:
            if isinstance(term, sympy.exp):
                return expm1(term.args[0]) + (expr - term + 1)
    return None


RULES: tuple[Rule, ...] = (
    Rule(
        "softplus",
        "log(1 + exp(u)) = softplus(u)",
        "exp(u) overflows for large u (u > 88 in float32, u > 11 in float16)",
        _softplus,
    ),
    Rule(
        "log1p",
        "log(1 + u) = log1p(u)",
        "1 + u rounds to 1 for tiny u, losing all digits of u",
        _log1p,
        complex_ok=True,
    ),
    Rule(
        "expm1",
        "exp(u) - 1 = expm1(u)",
        "exp(u) - 1 cancels catastrophically for small u",
        _expm1,
        complex_ok=True,
    ),
)
