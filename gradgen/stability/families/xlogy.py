"""Products with a logarithm: xlogy.

Each rule is a :class:`~gradgen.stability.rule.Rule`; :data:`RULES` lists this family's
rules in the order the engine tries them.
"""

from __future__ import annotations

import sympy

from ...functions import xlogy
from ..rule import Rule


def _xlogy(expr):
    # x * log(y) = xlogy(x, y), which is 0 where x = 0 (0 * log(0) would be NaN)
    if not isinstance(expr, sympy.Mul):
        return None
    logs = [f for f in expr.args if isinstance(f, sympy.log) and len(f.args) == 1]
    if len(logs) != 1 or logs[0].args[0].is_number:  # log(2) * x: no log(0) to fear
        return None
    coeff, others = expr.as_coeff_mul()
    others = [f for f in others if f is not logs[0]]
    x = sympy.Mul(*others)
    if not others or x.is_zero is False or x.has(sympy.log):
        return None
    return coeff * xlogy(x, logs[0].args[0])


RULES: tuple[Rule, ...] = (
    Rule(
        "xlogy",
        "x * log(y) = xlogy(x, y), which is 0 where x = 0",
        "0 * log(0) = 0 * -inf = NaN (entropy terms, powers with base 0)",
        _xlogy,
    ),
)
