"""Products with a logarithm: xlogy, xlog1py.

| rule | identity | domain | fails at (as written) | source |
| --- | --- | --- | --- | --- |
| `xlogy` | x·log(y) = xlogy(x, y), 0 where x = 0 (also where x is exp(… + xlogy(k, y)), which SymPy takes as never 0 but is exp(−inf) = 0 at y = 0) | y > 0, or x = 0 | 0·log(0) = 0·(−inf) = NaN (entropy, powers with base 0) | TF `tf.math.xlogy`; SciPy `special.xlogy`; JAX `xlogy` |
| `xlog1py` | x·log1p(y) = xlog1py(x, y), 0 where x = 0 | y > −1, or x = 0 | 0·log1p(−1) = NaN: the cross-entropy term (1 − t)·log(1 − p) at t = p = 1 | TF `tf.math.xlog1py`; SciPy `special.xlog1py` |

Each rule is a :class:`~gradgen.stability.rule.Rule`; :data:`RULES` lists this family's
rules in the order the engine tries them.
"""

from __future__ import annotations

import sympy

from ...functions import log1p, xlog1py, xlogy
from ..rule import Rule


def _xlogy(expr):
    # x * log(y) = xlogy(x, y), which is 0 where x = 0 (0 * log(0) would be NaN)
    if not isinstance(expr, sympy.Mul):
        return None
    logs = [f for f in expr.args if isinstance(f, sympy.log)]
    if len(logs) != 1 or logs[0].args[0].is_number:  # log(2) * x: no log(0) to fear
        return None
    coeff, others = expr.as_coeff_mul()
    others = [f for f in others if f is not logs[0]]
    x, y = sympy.Mul(*others), logs[0].args[0]
    if not others or x.has(sympy.log):
        return None
    if x.is_zero is False and not _underflows_at_zero(others, y):
        return None
    return coeff * xlogy(x, y)


def _underflows_at_zero(factors, y) -> bool:
    """Whether a factor is ``exp(... + xlogy(k, y) + ...)``: never 0 for SymPy, but
    exp(-inf) = 0 where y = 0 and k > 0 (``x**p * exp(-b)`` kept as one exponential, whose
    p-derivative times log(x) is 0 * -inf at x = 0)."""
    return any(
        isinstance(f, sympy.exp)
        and any(isinstance(g, xlogy) and g.args[1] == y for g in f.args[0].atoms(xlogy))
        for f in factors
    )


def _xlog1py(expr):
    # x * log1p(y) = xlog1py(x, y), which is 0 where x = 0 (0 * log1p(-1) would be NaN)
    if not isinstance(expr, sympy.Mul):
        return None
    logs = [f for f in expr.args if isinstance(f, log1p)]
    if len(logs) != 1 or logs[0].args[0].is_number:
        return None
    coeff, others = expr.as_coeff_mul()
    others = [f for f in others if f is not logs[0]]
    x = sympy.Mul(*others)
    if not others or x.is_zero is False or x.has(sympy.log, log1p):
        return None
    return coeff * xlog1py(x, logs[0].args[0])


RULES: tuple[Rule, ...] = (
    Rule(
        "xlogy",
        "x * log(y) = xlogy(x, y), which is 0 where x = 0",
        "0 * log(0) = 0 * -inf = NaN (entropy terms, powers with base 0)",
        _xlogy,
    ),
    Rule(
        "xlog1py",
        "x * log1p(y) = xlog1py(x, y), which is 0 where x = 0",
        "0 * log1p(-1) = 0 * -inf = NaN (the cross-entropy term (1 - t) * log(1 - p) "
        "at t = p = 1)",
        _xlog1py,
    ),
)
