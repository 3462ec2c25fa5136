"""Logarithms and exponentials: softplus, log1mexp, logdiffexp, log1p, expm1, inverse pairs.

| rule | identity | domain | fails at (as written) | source |
| --- | --- | --- | --- | --- |
| `softplus` | log(c + c·exp(u)) = log(c) + softplus(u); also log1p(exp(u)) | all real u | exp(u) overflows: u > 88 (float32), u > 11 (float16) | TF `tf.math.softplus`; Mächler (2012) |
| `log1mexp` | log(c − c·exp(u)) = log(−c·expm1(u)) = log(c) + log1mexp(u); also log1p(−exp(u)) | u ≤ 0 (−inf at 0, NaN above, as written) | log1p(−exp(u)) is −inf at u = −1e−10 (float32; value −23.03); log(−expm1(u)) is 0 at u = −40 (value −4.2e−18) | Mächler (2012), "Accurately computing log(1 − exp(−\\|a\\|))"; PyTensor `local_log1p_plusminus_exp`, `logmexpm1_to_log1mexp` |
| `logdiffexp` | log(exp(a) − exp(b)) = a + log1mexp(b − a); log(c·expm1(u)) = log(c) + u + log1mexp(−u) | a ≥ b, u ≥ 0 (NaN elsewhere, as written) | exp(a) overflows for a > 88 (float32), and exp(a) − exp(b) cancels for a near b | PyTensor `logdiffexp_to_log1mexpdiff` |
| `log1p` | log(1 + u) = log1p(u) | u ≥ −1 | 1 + u rounds to 1 for \\|u\\| < eps | C99 `log1p`; Herbie `#:spec` |
| `expm1` | c·exp(u) − c = c·expm1(u), in every spelling (1 − exp(u), 2·exp(u) − 2) | all u | cancellation for small u: exp(1e−10) − 1 is 0 in float32 | C99 `expm1`; Herbie `#:spec` |
| `log1p_expm1` | log1p(expm1(u)) = u | all real u | expm1(u) overflows for u > 88 (float32), then inf | inverse pair |
| `exp_log1p` | exp(log1p(u)) = 1 + u, NaN for u < −1 as written | u ≥ −1 | the gradient exp(log1p(u)) / (1 + u) is 0/0 = NaN at u = −1 (value 1) | inverse pair; PyTensor `local_exp_log_nan_switch` |
| `expm1_log1p` | expm1(log1p(u)) = u, NaN for u < −1 as written | u ≥ −1 | two roundings, and the gradient is 0·inf at u = −1 | inverse pair; PyTensor `local_exp_log_nan_switch` |

c is a positive number; rules read their forms through :mod:`..normalize` (log1p(w) as
log(1 + w), −c·expm1(u) as c·(1 − exp(u))). ``log1mexp`` is listed before ``log1p`` in
the engine's order, and also reads ``log1p(−exp(u))``, so the stronger rule wins in
either order (the weaker rule's output is the stronger rule's input).

Each rule is a :class:`~gradgen.stability.rule.Rule`; :data:`RULES` lists this family's
rules.
"""

from __future__ import annotations

import sympy
from sympy import S

from ...functions import expm1, log1mexp, log1p, nan_outside, softplus
from ..match import _one_plus
from ..normalize import constant_plus_exp, expm1_term, log_argument, scaled_exp
from ..rule import Rule


def _softplus(expr):
    # log(c + c*exp(u)) = log(c) + softplus(u)
    arg = log_argument(expr)
    if arg is None:
        return None
    found = scaled_exp(arg, +1)
    if found is None:
        return None
    c, u = found
    return sympy.log(c) + softplus(u)


def _log1mexp(expr):
    # log(c - c*exp(u)) = log(c) + log1mexp(u), read through expm1 and log1p
    arg = log_argument(expr)
    if arg is None:
        return None
    found = scaled_exp(arg, -1)
    if found is None:
        return None
    c, u = found
    return sympy.log(c) + log1mexp(u)


def _logdiffexp(expr):
    # log(exp(a) - exp(b)) = a + log1mexp(b - a); log(c*expm1(u)) = log(c) + u + log1mexp(-u)
    arg = log_argument(expr)
    if arg is None or not isinstance(expr, sympy.log):
        return None
    parsed = constant_plus_exp(arg)
    if parsed is not None:
        a, k, u = parsed
        if (a + k).is_zero and k.is_positive:  # k*(exp(u) - 1), k*expm1(u): b = 0
            return sympy.log(k) + u + log1mexp(-u)
        return None  # a constant other than -k is not an exponential (near miss)
    if not isinstance(arg, sympy.Add):
        return None
    plus, minus = [], []  # exactly one of each below
    for term in arg.args:
        k, rest = term.as_coeff_Mul()
        if not isinstance(rest, sympy.exp) or rest.args[0].is_number:
            return None
        (plus if k.is_positive else minus).append(rest.args[0] + sympy.log(abs(k)))
    if len(plus) != 1 or len(minus) != 1:
        return None
    a, b = plus[0], minus[0]
    return a + log1mexp(b - a)


def _log1p(expr):
    # log(1 + u) = log1p(u); 1 + exp(u) is softplus's, 1 - exp(u) is log1mexp's
    if isinstance(expr, sympy.log):  # (one argument: SymPy divides log(x, b))
        u = _one_plus(expr.args[0])
        if u is not None and not isinstance(u, sympy.exp):
            return log1p(u)
    return None


def _expm1(expr):
    # c*exp(u) - c = c*expm1(u), whatever the sign of c and the other terms
    found = expm1_term(expr)
    if found is None:
        return None
    k, u, others = found
    return k * expm1(u) + others


def _log1p_expm1(expr):
    # log1p(expm1(u)) = u; log(1 + expm1(u)) becomes log1p(expm1(u)) first
    if isinstance(expr, log1p) and isinstance(expr.args[0], expm1):
        return expr.args[0].args[0]
    return None


def _exp_log1p(expr):
    # exp(log1p(u)) = 1 + u for u >= -1; NaN below, as written
    if isinstance(expr, sympy.exp) and isinstance(expr.args[0], log1p):
        u = expr.args[0].args[0]
        return nan_outside(1 + u, u >= -1)
    return None


def _expm1_log1p(expr):
    # expm1(log1p(u)) = u for u >= -1; NaN below, as written
    if isinstance(expr, expm1) and isinstance(expr.args[0], log1p):
        u = expr.args[0].args[0]
        return nan_outside(u, u >= -1)
    if isinstance(expr, sympy.Add):
        # exp(log1p(u)) - 1, after exp_log1p: nan_outside(1 + u, c) - 1 = nan_outside(u, c)
        domains = [t for t in expr.args if isinstance(t, nan_outside)]
        numbers = [t for t in expr.args if t.is_number]
        if (
            len(domains) == 1
            and len(expr.args) == 2
            and sympy.Add(*numbers) == -1
            and isinstance(domains[0].args[0], sympy.Add)
            and S.One in domains[0].args[0].args
        ):
            value, cond = domains[0].args
            return nan_outside(value + sympy.Add(*numbers), cond)
    return None


RULES: tuple[Rule, ...] = (
    Rule(
        "softplus",
        "log(1 + exp(u)) = softplus(u) (also log1p(exp(u)), log(c + c*exp(u)))",
        "exp(u) overflows for large u (u > 88 in float32, u > 11 in float16)",
        _softplus,
    ),
    Rule(
        "log1mexp",
        "log(1 - exp(u)) = log(-expm1(u)) = log1p(-exp(u)) = log1mexp(u)",
        "log1p(-exp(u)) is -inf at u = -1e-10 in float32 (value -23.03); log(-expm1(u)) "
        "is 0 at u = -40 (value -4.2e-18); Maechler (2012) switches at -log(2)",
        _log1mexp,
    ),
    Rule(
        "logdiffexp",
        "log(exp(a) - exp(b)) = a + log1mexp(b - a); log(expm1(u)) = u + log1mexp(-u)",
        "exp(a) overflows for a > 88 in float32, and exp(a) - exp(b) cancels for a near b",
        _logdiffexp,
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
        "exp(u) - 1 = expm1(u) (also 1 - exp(u) = -expm1(u), c*exp(u) - c = c*expm1(u))",
        "exp(u) - 1 cancels catastrophically for small u",
        _expm1,
        complex_ok=True,
    ),
    Rule(
        "log1p_expm1",
        "log1p(expm1(u)) = u",
        "expm1(u) overflows for u > 88 in float32 (log1p(inf) = inf), and two roundings",
        _log1p_expm1,
    ),
    Rule(
        "exp_log1p",
        "exp(log1p(u)) = 1 + u for u >= -1 (NaN below, as written)",
        "the gradient exp(log1p(u)) / (1 + u) is 0/0 = NaN at u = -1 (value 1)",
        _exp_log1p,
    ),
    Rule(
        "expm1_log1p",
        "expm1(log1p(u)) = u for u >= -1 (NaN below, as written)",
        "two roundings; the gradient is 0 * inf = NaN at u = -1",
        _expm1_log1p,
    ),
)
