"""The logistic sigmoid: its log, powers, products and complement.

Each rule is a :class:`~gradgen.stability.rule.Rule`; :data:`RULES` lists this family's
rules in the order the engine tries them.
"""

from __future__ import annotations

import sympy
from sympy import S

from ...functions import sigmoid, softplus
from ..match import _one_plus
from ..rule import Rule


def _log_sigmoid(expr):
    # log(sigmoid(u)) = -softplus(-u)
    if isinstance(expr, sympy.log) and isinstance(expr.args[0], sigmoid):
        return -softplus(-expr.args[0].args[0])
    return None


def _sigmoid_pow(expr):
    # (1 + exp(w))**-n = sigmoid(-w)**n
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and expr.exp < 0:
        u = _one_plus(expr.base)
        if isinstance(u, sympy.exp):
            return sigmoid(-u.args[0]) ** (-expr.exp)
    return None


def _sigmoid_mul(expr):
    # exp(u) * sigmoid(-u) = exp(u) / (1 + exp(u)) = sigmoid(u)
    if not isinstance(expr, sympy.Mul):
        return None
    factors = list(expr.args)
    for i, f in enumerate(factors):
        if not isinstance(f, sympy.exp):
            continue
        u = f.args[0]
        for j, g in enumerate(factors):
            base, power = (g.base, g.exp) if isinstance(g, sympy.Pow) else (g, S.One)
            if (
                isinstance(base, sigmoid)
                and base.args[0] == -u
                and power.is_Integer
                and power > 0
            ):
                rest = [h for k, h in enumerate(factors) if k not in (i, j)]
                return sympy.Mul(sigmoid(u), base ** (power - 1), *rest)
    return None


def _sigmoid_complement(expr):
    # 1 - sigmoid(u) = sigmoid(-u)
    if isinstance(expr, sympy.Add) and S.One in expr.args:
        for term in expr.args:
            if isinstance(-term, sigmoid):
                return sigmoid(-(-term).args[0]) + (expr - 1 - term)
    return None


RULES: tuple[Rule, ...] = (
    Rule(
        "log_sigmoid",
        "log(sigmoid(u)) = -softplus(-u)",
        "sigmoid(u) underflows to 0 for u < -88 in float32, and log(0) = -inf",
        _log_sigmoid,
    ),
    Rule(
        "sigmoid_pow",
        "(1 + exp(w))**-n = sigmoid(-w)**n",
        "exp(w) overflows for large w, giving 1/inf = 0 where the value is not 0, "
        "or inf/inf = NaN in a product",
        _sigmoid_pow,
        complex_ok=True,
    ),
    Rule(
        "sigmoid_mul",
        "exp(u) * sigmoid(-u) = exp(u) / (1 + exp(u)) = sigmoid(u)",
        "exp(u) / (1 + exp(u)) is inf/inf = NaN for large u",
        _sigmoid_mul,
        complex_ok=True,
    ),
    Rule(
        "sigmoid_complement",
        "1 - sigmoid(u) = sigmoid(-u)",
        "1 - sigmoid(u) cancels to 0 for u > 17 in float32",
        _sigmoid_complement,
    ),
)
