"""The rewrite engine: every family's rules, bottom-up, to a fixpoint.

Rules are tried in :data:`RULES` order at each node, children first, so the most
specific, most accurate form is listed first and a weaker rule that could fire on the
same node comes later (PyTensor's "chains instead of priorities": where a weaker
rewrite's output is the stronger rule's input, both orders end in the strong form).
"""

from __future__ import annotations

import sympy

from .families import (
    cancellation,
    erf,
    hyperbolic,
    logexp,
    logsumexp,
    norms,
    piecewise,
    powers,
    sigmoid,
    xlogy,
)
from .rule import Rule

_BY_NAME = {
    rule.name: rule
    for family in (
        logexp, logsumexp, sigmoid, xlogy, powers, hyperbolic, erf, norms, piecewise,
        cancellation,
    )
    for rule in family.RULES
}
# The order rules are tried in at each node (see the module docstring).
ORDER = (
    "removable_fill",
    "erf_complement",
    "erfc_complement",
    "erfc_reflection",
    "log_erfc",
    "hypot",
    "unit_complement",
    "sqrt_conjugate",  # after hypot: reads hypot(c, t) - c too
    "fraction_complement",
    "softplus",
    "log1mexp",  # before log1p, and reads log1p(-exp(u)) too: the stronger rule wins
    "logdiffexp",
    "logsumexp",
    "log_mul",
    "log_sigmoid",
    "log1m_sigmoid",
    "log1p",
    "sigmoid_pow",
    "sigmoid_mul",
    "sigmoid_complement",
    "sigmoid_tanh",
    "sigmoid_difference",
    "sigmoid_ratio",
    "logit_sigmoid",
    "sigmoid_logit",
    "softmax",
    "exp_mul",
    "softmax_weight",
    "log_softmax",
    "power_product",
    "power_zero_coefficient",
    "exp_log_power",
    "xlogy",
    "exp_power",  # after xlogy: reads the exponential's xlogy(k, x)
    "xlog1py",
    "log_cosh",
    "log_asinh",
    "tanh_ratio",
    "coth_ratio",
    "sech_squared",
    "expm1",
    "log1p_expm1",
    "exp_log1p",
    "expm1_log1p",
    "difference_of_squares",  # last: the more specific forms match first
)
assert set(ORDER) == set(_BY_NAME), "every rule is ordered exactly once"
RULES: tuple[Rule, ...] = tuple(_BY_NAME[name] for name in ORDER)
COMPLEX_RULES = tuple(rule for rule in RULES if rule.complex_ok)
RULES_BY_NAME = {rule.name: rule for rule in RULES}
MAX_PASSES = 8


def rewrite(
    expr: sympy.Basic, rules: tuple[Rule, ...] = RULES
) -> tuple[sympy.Basic, tuple[str, ...]]:
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
    if expr.args:  # (atoms have none)
        args = tuple(_walk(a, rules, used, memo) for a in expr.args)
        if args != expr.args:
            out = expr.func(*args)
    for rule in rules:  # (each returns a SymPy expression or None)
        new = rule.apply(out)
        if new is not None and new != out:
            used.add(rule.name)
            out = new
    memo[expr] = out
    return out
