"""Numerically stable rewrites of SymPy expressions.

Consumes: elementwise SymPy expressions (forward outputs before differentiation, partial
derivatives after). Guarantees: :func:`rewrite` returns an expression equal to its
input as a real function wherever the input is finite, built from TensorFlow's stable
primitives where a rule applies, plus the names of the rules it used. Rewriting the
forward *before* differentiating matters: the derivative of ``softplus`` is ``sigmoid``,
while the derivative of ``log(1 + exp(x))`` is ``exp(x)/(1 + exp(x))``, which is inf/inf
(NaN) for x > 88 in float32.

Each rule is a :class:`Rule` with a name, the identity it uses, and why; the README's
table and the unit tests (one per rule) are keyed by these names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import sympy
from sympy import S

from .functions import expm1, log1p, sigmoid, softplus


@dataclass(frozen=True)
class Rule:
    """A local rewrite applied at every node of an expression tree.

    Attributes:
        name: stable identifier (used in docs, tests and ``gradgen explain``).
        identity: the identity it applies, e.g. ``log(1 + exp(u)) = softplus(u)``.
        why: what goes wrong without it.
        apply: returns the rewritten node, or None when the rule does not match.
    """

    name: str
    identity: str
    why: str
    apply: Callable[[sympy.Basic], sympy.Basic | None]


def _one_plus(expr: sympy.Basic) -> sympy.Basic | None:
    """``u`` if ``expr`` is ``1 + u`` (u not a number), else None."""
    if isinstance(expr, sympy.Add) and S.One in expr.args:
        rest = expr - 1
        if not rest.is_number:
            return rest
    return None


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
            if isinstance(base, sigmoid) and base.args[0] == -u and power.is_Integer and power > 0:
                rest = [h for k, h in enumerate(factors) if k not in (i, j)]
                return sympy.Mul(sigmoid(u), base ** (power - 1), *rest)
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
    ),
    Rule(
        "sigmoid_pow",
        "(1 + exp(w))**-n = sigmoid(-w)**n",
        "exp(w) overflows for large w, giving 1/inf = 0 where the value is not 0, "
        "or inf/inf = NaN in a product",
        _sigmoid_pow,
    ),
    Rule(
        "sigmoid_mul",
        "exp(u) * sigmoid(-u) = exp(u) / (1 + exp(u)) = sigmoid(u)",
        "exp(u) / (1 + exp(u)) is inf/inf = NaN for large u",
        _sigmoid_mul,
    ),
    Rule(
        "expm1",
        "exp(u) - 1 = expm1(u)",
        "exp(u) - 1 cancels catastrophically for small u",
        _expm1,
    ),
)

RULES_BY_NAME = {rule.name: rule for rule in RULES}
MAX_PASSES = 8


def rewrite(expr: sympy.Basic, rules: tuple[Rule, ...] = RULES) -> tuple[sympy.Basic, tuple[str, ...]]:
    """Apply ``rules`` bottom-up until nothing changes (at most :data:`MAX_PASSES` passes).

    Args:
        expr: a SymPy expression (elementwise; relationals and Piecewise allowed).
        rules: the rules to use, tried in order at each node.

    Returns:
        The rewritten expression and the sorted names of the rules that fired.
    """
    used: set[str] = set()
    for _ in range(MAX_PASSES):
        memo: dict = {}
        new = _walk(expr, rules, used, memo)
        if new == expr:
            break
        expr = new
    return expr, tuple(sorted(used))


def _walk(expr, rules, used, memo):
    if expr in memo:
        return memo[expr]
    out = expr
    if expr.args and not expr.is_Atom:
        args = tuple(_walk(a, rules, used, memo) for a in expr.args)
        if args != expr.args:
            out = expr.func(*args)
    for rule in rules:
        if not isinstance(out, sympy.Basic):
            break
        new = rule.apply(out)
        if new is not None and new != out:
            used.add(rule.name)
            out = new
    memo[expr] = out
    return out
