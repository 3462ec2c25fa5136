"""Powers with symbolic or irrational exponents.

Each rule is a :class:`~gradgen.stability.rule.Rule`; :data:`RULES` lists this family's
rules in the order the engine tries them.
"""

from __future__ import annotations

import sympy
from sympy import S

from ..rule import Rule


def _power_product(expr):
    # x**y / x = x**(y - 1): finite at x = 0 (where x**y * y / x is 0/0 = NaN); y symbolic
    # or an irrational constant
    if not isinstance(expr, sympy.Mul):
        return None
    powers: dict = {}
    for f in expr.args:
        base, exponent = (f.base, f.exp) if isinstance(f, sympy.Pow) else (f, S.One)
        powers.setdefault(base, []).append(exponent)
    for base, exponents in powers.items():
        # SymPy merges rational exponents itself; symbolic and irrational ones (y, pi,
        # sqrt(2)) it leaves apart: x**pi / x
        if (
            len(exponents) > 1
            and any(not e.is_Rational for e in exponents)
            and not (base.is_number)
        ):
            rest = [
                f
                for f in expr.args
                if (f.base if isinstance(f, sympy.Pow) else f) != base
            ]
            return sympy.Mul(sympy.Pow(base, sympy.Add(*exponents)), *rest)
    return None


RULES: tuple[Rule, ...] = (
    Rule(
        "power_product",
        "x**a * x**b = x**(a + b) for a symbolic or irrational exponent (x**y / x = x**(y - 1))",
        "the derivative of x**y, written x**y * y / x, is 0/0 = NaN at x = 0",
        _power_product,
        complex_ok=True,
    ),
)
