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

from .functions import (
    expm1,
    log1p,
    logcosh,
    logsumexp,
    sigmoid,
    softmax_weight,
    softplus,
    xlogy,
)


@dataclass(frozen=True)
class Rule:
    """A local rewrite applied at every node of an expression tree.

    Attributes:
        name: stable identifier (used in docs, tests and ``gradgen explain``).
        identity: the identity it applies, e.g. ``log(1 + exp(u)) = softplus(u)``.
        why: what goes wrong without it.
        apply: returns the rewritten node, or None when the rule does not match.
        complex_ok: the result is holomorphic and TensorFlow supports it for complex
            dtypes (softplus, logsumexp and xlogy's zero convention are real-only).
    """

    name: str
    identity: str
    why: str
    apply: Callable[[sympy.Basic], sympy.Basic | None]
    complex_ok: bool = False


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


def _exp_terms(expr) -> list | None:
    """``[u1, ..., un]`` if ``expr`` is ``exp(u1) + ... + exp(un)`` (n >= 2), where a
    positive constant c counts as exp(log(c)) and c*exp(u) as exp(u + log(c))."""
    if not isinstance(expr, sympy.Add) or len(expr.args) < 2:
        return None
    out = []
    for term in expr.args:
        coeff, rest = term.as_coeff_Mul()
        if rest == 1 and coeff.is_positive:
            out.append(sympy.log(coeff))
        elif isinstance(rest, sympy.exp) and coeff.is_positive:
            out.append(rest.args[0] + sympy.log(coeff))
        else:
            return None
    if sum(1 for u in out if not u.is_number) == 0:
        return None
    return out


def _logsumexp(expr):
    # log(exp(a) + exp(b) + ...) = logsumexp(a, b, ...); 1 + exp(u) is softplus's case
    if isinstance(expr, sympy.log) and len(expr.args) == 1:
        terms = _exp_terms(expr.args[0])
        if terms is not None and not (len(terms) == 2 and S.Zero in terms):
            return logsumexp(*terms)
    return None


def _softmax(expr):
    # (exp(a) + exp(b) + ...)**-n = exp(-n * logsumexp(a, b, ...))
    if isinstance(expr, sympy.Pow) and expr.exp.is_negative and expr.exp.is_Rational:
        terms = _exp_terms(expr.base)
        if terms is not None and not (len(terms) == 2 and S.Zero in terms):
            return sympy.exp(expr.exp * logsumexp(*terms))
    return None


def _exp_mul(expr):
    # exp(a) * exp(b) = exp(a + b): lets exp(a) * exp(-logsumexp(...)) become a softmax
    if isinstance(expr, sympy.Mul):
        exps = [f for f in expr.args if isinstance(f, sympy.exp)]
        if len(exps) >= 2 and any(f.has(logsumexp) for f in exps):
            rest = [f for f in expr.args if not isinstance(f, sympy.exp)]
            return sympy.Mul(sympy.exp(sympy.Add(*(f.args[0] for f in exps))), *rest)
    return None


def _split_logsumexp(total):
    """For ``total = r - logsumexp(us)``: (r - ui, ui, others) for the ui that leaves the
    simplest remainder, or None."""
    terms = sympy.Add.make_args(total)
    lses = [t for t in terms if isinstance(-t, logsumexp)]
    if len(lses) != 1:
        return None
    us = list((-lses[0]).args)
    r = total - lses[0]

    def weight(e):
        return 0 if e == 0 else sympy.count_ops(e) + 1

    best = None
    for i, u in enumerate(us):
        rest = r - u
        key = (weight(rest), sympy.default_sort_key(rest))
        if best is None or key < best[0]:
            best = (key, rest, u, us[:i] + us[i + 1:])
    _, rest, u, others = best
    if weight(rest) >= weight(r):
        return None  # no term of the logsumexp appears in r
    return rest, u, others


def _softmax_exp(expr):
    # exp(ui - logsumexp(u)) = 1 / (1 + sum(exp(uj - ui))): no large-magnitude subtraction
    if isinstance(expr, sympy.exp):
        split = _split_logsumexp(expr.args[0])
        if split is not None:
            rest, u, others = split
            return sympy.exp(rest) * softmax_weight(u, others)
    return None


def _log_softmax(expr):
    # ui - logsumexp(u) = -logsumexp(0, uj - ui for j != i)  (= -softplus(uj - ui) for two)
    if isinstance(expr, sympy.Add):
        split = _split_logsumexp(expr)
        if split is not None:
            rest, u, others = split
            return rest - logsumexp(S.Zero, *(o - u for o in others))
    return None


def _log_mul(expr):
    # log(a * b / c) = log(a) + log(b) - log(c) when every factor is positive
    if isinstance(expr, sympy.log) and len(expr.args) == 1:
        arg = expr.args[0]
        if isinstance(arg, sympy.Mul) and all(f.is_positive for f in arg.args):
            if any(isinstance(f, (sympy.exp, sigmoid)) or _exp_terms(_base(f)) for f in arg.args):
                return sympy.Add(*(sympy.expand_log(sympy.log(f), force=False) for f in arg.args))
    return None


def _base(f):
    return f.base if isinstance(f, sympy.Pow) else f


def _log_sigmoid(expr):
    # log(sigmoid(u)) = -softplus(-u)
    if isinstance(expr, sympy.log) and isinstance(expr.args[0], sigmoid):
        return -softplus(-expr.args[0].args[0])
    return None


def _sigmoid_complement(expr):
    # 1 - sigmoid(u) = sigmoid(-u)
    if isinstance(expr, sympy.Add) and S.One in expr.args:
        for term in expr.args:
            if isinstance(-term, sigmoid):
                return sigmoid(-(-term).args[0]) + (expr - 1 - term)
    return None


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
        if len(exponents) > 1 and any(not e.is_Rational for e in exponents) and not (
            base.is_number
        ):
            rest = [f for f in expr.args if (f.base if isinstance(f, sympy.Pow) else f) != base]
            return sympy.Mul(sympy.Pow(base, sympy.Add(*exponents)), *rest)
    return None


def _log_cosh(expr):
    # log(cosh(u)) = logcosh(u), computed without overflow
    if isinstance(expr, sympy.log) and len(expr.args) == 1:
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
        "logsumexp",
        "log(exp(a) + exp(b) + ...) = logsumexp(a, b, ...)",
        "the exponentials overflow (or all underflow to 0, giving log(0) = -inf)",
        _logsumexp,
    ),
    Rule(
        "log_mul",
        "log(a * b / c) = log(a) + log(b) - log(c) for positive factors",
        "splits log-softmax and log-sigmoid forms so the rules below apply",
        _log_mul,
    ),
    Rule(
        "log_sigmoid",
        "log(sigmoid(u)) = -softplus(-u)",
        "sigmoid(u) underflows to 0 for u < -88 in float32, and log(0) = -inf",
        _log_sigmoid,
    ),
    Rule(
        "log1p",
        "log(1 + u) = log1p(u)",
        "1 + u rounds to 1 for tiny u, losing all digits of u",
        _log1p,
        complex_ok=True,
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
    Rule(
        "softmax",
        "(exp(a) + exp(b) + ...)**-n = exp(-n * logsumexp(a, b, ...))",
        "exp(a) / (exp(a) + exp(b)) is inf/inf = NaN when the exponentials overflow",
        _softmax,
    ),
    Rule(
        "exp_mul",
        "exp(a) * exp(b) = exp(a + b) (next to a logsumexp)",
        "exp(a) overflows where exp(a - logsumexp(...)) does not",
        _exp_mul,
    ),
    Rule(
        "softmax_weight",
        "exp(ui - logsumexp(u)) = 1 / (1 + sum(exp(uj - ui))) (sigmoid(ui - uj) for two)",
        "ui - logsumexp(u) loses digits when the terms are large (5e-4 at 1e4 in float32)",
        _softmax_exp,
    ),
    Rule(
        "log_softmax",
        "ui - logsumexp(u) = -logsumexp(0, uj - ui for j != i) (-softplus(uj - ui) for two)",
        "the subtraction loses digits when the terms are large",
        _log_softmax,
    ),
    Rule(
        "power_product",
        "x**a * x**b = x**(a + b) for a symbolic or irrational exponent (x**y / x = x**(y - 1))",
        "the derivative of x**y, written x**y * y / x, is 0/0 = NaN at x = 0",
        _power_product,
        complex_ok=True,
    ),
    Rule(
        "xlogy",
        "x * log(y) = xlogy(x, y), which is 0 where x = 0",
        "0 * log(0) = 0 * -inf = NaN (entropy terms, powers with base 0)",
        _xlogy,
    ),
    Rule(
        "log_cosh",
        "log(cosh(u)) = logcosh(u) = |u| + softplus(-2|u|) - log(2); "
        "log1p(e**2 / (2 + 2e)), e = expm1(|u|), for |u| < 1",
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
    Rule(
        "expm1",
        "exp(u) - 1 = expm1(u)",
        "exp(u) - 1 cancels catastrophically for small u",
        _expm1,
        complex_ok=True,
    ),
)
COMPLEX_RULES = tuple(rule for rule in RULES if rule.complex_ok)

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
