"""The logistic sigmoid: its log, powers, products, complement, logit and odds.

| rule | identity | domain | fails at (as written) | source |
| --- | --- | --- | --- | --- |
| `log_sigmoid` | log(sigmoid(u)) = −softplus(−u) | all real u | sigmoid(u) underflows to 0 for u < −88 (float32): log(0) = −inf | JAX `log_sigmoid`; PyTensor `local_log_sigm_to_softplus` |
| `log1m_sigmoid` | log1p(−sigmoid(u)) = log(1 − sigmoid(u)) = −softplus(u) | all real u | 1 − sigmoid(u) is 0 for u > 17 (float32): −inf; the value is −u | PyTensor `local_log1p_neg_sigmoid` (witness u = 37) |
| `sigmoid_pow` | (c + c·exp(w))^−n = c^−n · sigmoid(−w)^n | all real w | exp(w) overflows: 1/inf = 0 where the value is not 0, inf/inf in a product | logistic function definition |
| `sigmoid_mul` | exp(u) · sigmoid(−u) = sigmoid(u) | all real u | exp(u)/(1 + exp(u)) is inf/inf = NaN for u > 88 (float32) | logistic function definition |
| `sigmoid_complement` | 1 − sigmoid(u) = sigmoid(−u) | all real u | cancels to 0 for u > 17 (float32) | PyTensor `local_1msigmoid` |
| `sigmoid_tanh` | σ(u) − σ(−u) = 2σ(u) − 1 = tanh(u/2) (times k; also k·σ(u) − k/2) | all real u | both near 1/2 cancel for small u: sigmoid(x)·sigmoid(−x)'s derivative was 0 at x = 1e-30 | σ(u) − σ(−u) = (e^(u/2) − e^(−u/2))/(e^(u/2) + e^(−u/2)) |
| `sigmoid_difference` | σ(a) − σ(b) = σ(a)·σ(−b) − σ(b)·σ(−a) (both sigmoids with one coefficient; not b = −a) | all real a, b | both near 1 cancel: σ(x) − σ(x − 1) is 0 from x = 17 (float32), where it is 3.5e-9 at x = 20; both tails are small terms in the new form | σ(a)(1 − σ(b)) − σ(b)(1 − σ(a)) |
| `sigmoid_ratio` | sigmoid(u)^n / sigmoid(−u)^n = exp(n·u) (the odds) | all real u | sigmoid(−u) underflows to 0 for u > 88 (float32): x/0 = inf where exp(u) is finite up to 88.7 | sigmoid(u) / sigmoid(−u) = exp(u)·(1 + exp(−u))/(1 + exp(−u)) |
| `logit_sigmoid` | softplus(u) − softplus(−u) = u (log(s / (1 − s)) for s = sigmoid(u), split) | all real u | softplus(u) − softplus(−u) cancels to 0 for \\|u\\| < eps·softplus(0) and loses digits of u below 1 | softplus(u) − softplus(−u) = log(exp(u)) |
| `sigmoid_logit` | sigmoid(log(p / (1 − p))) = p, NaN outside [0, 1] as written | 0 ≤ p ≤ 1 | p/(1 − p) overflows or rounds near p = 1; gradient 0·inf at p = 0 | logit is sigmoid's inverse; PyTensor `local_exp_log_nan_switch` for keeping the NaN |

Forms are read after SymPy's canonicalisation and the engine's bottom-up walk (see
:mod:`..normalize`): ``1 - 1/(1 + exp(-u))`` reaches ``log_sigmoid`` as
``sigmoid(-u)``, and ``log(s / (1 - s))`` reaches ``sigmoid_ratio`` as
``log(sigmoid(u) / sigmoid(-u))``, which becomes ``log(exp(u)) = u``.

Each rule is a :class:`~gradgen.stability.rule.Rule`; :data:`RULES` lists this family's
rules.
"""

from __future__ import annotations

import sympy
from sympy import S

from ...functions import log1p, nan_outside, sigmoid, softplus
from ..normalize import log_argument, scaled_exp
from ..rule import Rule


def _log_sigmoid(expr):
    # log(sigmoid(u)) = -softplus(-u)
    if isinstance(expr, sympy.log) and isinstance(expr.args[0], sigmoid):
        return -softplus(-expr.args[0].args[0])
    return None


def _log1m_sigmoid(expr):
    # log(1 - sigmoid(u)) = log1p(-sigmoid(u)) = -softplus(u)
    arg = log_argument(expr)
    if isinstance(arg, sympy.Add) and S.One in arg.args:
        term = arg - 1  # -sigmoid(u) exactly when arg is 1 - sigmoid(u)
        if isinstance(-term, sigmoid):
            return -softplus((-term).args[0])
    return None


def _sigmoid_pow(expr):
    # (c + c*exp(w))**-n = c**-n * sigmoid(-w)**n
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and expr.exp < 0:
        found = scaled_exp(expr.base, +1)
        if found is not None:
            c, w = found
            return c**expr.exp * sigmoid(-w) ** (-expr.exp)
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


def _sigmoid_difference(expr):
    # k*sigmoid(a) - k*sigmoid(b) = k*(sigmoid(a)*sigmoid(-b) - sigmoid(b)*sigmoid(-a))
    if not isinstance(expr, sympy.Add):
        return None
    terms = {}
    for term in expr.args:
        k, f = term.as_independent(sigmoid, as_Add=False)
        if isinstance(f, sigmoid):
            terms.setdefault(k, []).append((term, f.args[0]))
    for k, found in sorted(terms.items(), key=lambda kv: sympy.default_sort_key(kv[0])):
        partners = terms.get(-k, [])
        if found and partners:
            (t1, a), (t2, b) = found[0], partners[0]
            if a == -b:
                continue  # sigmoid(u) - sigmoid(-u) is 2*sigmoid(u) - 1: no two tails
            difference = sigmoid(a) * sigmoid(-b) - sigmoid(b) * sigmoid(-a)
            return k * difference + (expr - t1 - t2)
    return None


def _sigmoid_tanh(expr):
    # k*sigmoid(u) - k*sigmoid(-u) = k*tanh(u/2); k*sigmoid(u) - k/2 = (k/2)*tanh(u/2)
    if not isinstance(expr, sympy.Add):
        return None
    constant = expr.as_coeff_Add()[0]
    split = [(term, *term.as_independent(sigmoid, as_Add=False)) for term in expr.args]
    for term, k, f in split:
        if not isinstance(f, sigmoid):
            continue
        u = f.args[0]
        for partner, j, g in split:
            # (-k distributes a number over a sum, (P - 2t)/2 as P/2 - t: compared
            # expanded, as a derived order writes them)
            if g == sigmoid(-u) and (j == -k or sympy.expand(j + k) == 0):
                return k * sympy.tanh(u / 2) + (expr - term - partner)
        if k.is_number and constant != 0 and constant == -k / 2:
            return k / 2 * sympy.tanh(u / 2) + (expr - term - constant)
    return None


def _sigmoid_ratio(expr):
    # sigmoid(u)**n * sigmoid(-u)**-n = exp(n*u): the odds
    if not isinstance(expr, sympy.Mul):
        return None
    powers = {}
    for f in expr.args:
        base, power = (f.base, f.exp) if isinstance(f, sympy.Pow) else (f, S.One)
        if isinstance(base, sigmoid) and power.is_Integer:
            powers[base.args[0]] = (f, power)
    for u, (f, n) in powers.items():
        # (either of the pair: sigmoid(-u)**-n * sigmoid(u)**n is exp(-n * -u) too)
        if -u in powers and powers[-u][1] == -n:
            g = powers[-u][0]
            rest = [h for h in expr.args if h is not f and h is not g]
            return sympy.Mul(sympy.exp(n * u), *rest)
    return None


def _logit_sigmoid(expr):
    # softplus(u) - softplus(-u) = u
    if not isinstance(expr, sympy.Add):
        return None
    for term in expr.args:
        if isinstance(term, softplus):
            u = term.args[0]
            partner = -softplus(-u)
            if partner in expr.args:
                return u + (expr - term - partner)
    return None


def _odds_of(x):
    """``p`` if ``x`` is ``p / (1 - p)`` (p itself may be a product), else None."""
    factors = sympy.Mul.make_args(x)
    for q in factors:
        if isinstance(q, sympy.Pow) and q.exp == -1:
            p = 1 - q.base
            if sympy.Mul(*(f for f in factors if f is not q)) == p:
                return p
    return None


def _logit_argument(arg):
    """``p`` if ``arg`` is the logit ``log(p / (1 - p))`` in one of its spellings:
    ``log(p / (1 - p))``, ``-log((1 - p) / p)``, ``log(p) - log1p(-p)``,
    ``log(p) - log(1 - p)``."""
    if isinstance(arg, sympy.log):
        return _odds_of(arg.args[0])
    if isinstance(arg, sympy.Mul) and len(arg.args) == 2 and arg.args[0] == -1:
        if isinstance(arg.args[1], sympy.log):
            return _odds_of(1 / arg.args[1].args[0])
        return None
    if isinstance(arg, sympy.Add) and len(arg.args) == 2:
        for f, g in (arg.args, arg.args[::-1]):
            if isinstance(f, sympy.log):
                p = f.args[0]
                if g in (-log1p(-p), -sympy.log(1 - p)):
                    return p
    return None


def _sigmoid_logit(expr):
    # sigmoid(log(p / (1 - p))) = p for 0 <= p <= 1; NaN outside, as written
    if isinstance(expr, sigmoid):
        p = _logit_argument(expr.args[0])
        if p is not None and not p.is_number:
            return nan_outside(p, sympy.And(p >= 0, p <= 1))
    return None


RULES: tuple[Rule, ...] = (
    Rule(
        "log_sigmoid",
        "log(sigmoid(u)) = -softplus(-u)",
        "sigmoid(u) underflows to 0 for u < -88 in float32, and log(0) = -inf",
        _log_sigmoid,
    ),
    Rule(
        "log1m_sigmoid",
        "log1p(-sigmoid(u)) = log(1 - sigmoid(u)) = -softplus(u)",
        "1 - sigmoid(u) is 0 for u > 17 in float32, and log(0) = -inf (the value is -u)",
        _log1m_sigmoid,
    ),
    Rule(
        "sigmoid_pow",
        "(1 + exp(w))**-n = sigmoid(-w)**n (also (c + c*exp(w))**-n = c**-n * ...)",
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
        "sigmoid_tanh",
        "sigmoid(u) - sigmoid(-u) = 2*sigmoid(u) - 1 = tanh(u/2)",
        "two values near 1/2 cancel for small u: the derivative of sigmoid(x)*sigmoid(-x), "
        "sigmoid(x)*sigmoid(-x)*(sigmoid(-x) - sigmoid(x)), was 0 at x = 1e-30 "
        "(exact -6.25e-32)",
        _sigmoid_tanh,
    ),
    Rule(
        "sigmoid_difference",
        "sigmoid(a) - sigmoid(b) = sigmoid(a)*sigmoid(-b) - sigmoid(b)*sigmoid(-a)",
        "two values near 1 cancel: sigmoid(x) - sigmoid(x - 1) (softplus(x) - softplus(x - "
        "1)'s derivative) is 0 from x = 17 in float32, where it is 3.5e-9 at x = 20",
        _sigmoid_difference,
    ),
    Rule(
        "sigmoid_ratio",
        "sigmoid(u) / sigmoid(-u) = exp(u) (the odds; log(s / (1 - s)) = u follows)",
        "sigmoid(-u) underflows to 0 for u > 88 in float32 (x/0), and two roundings",
        _sigmoid_ratio,
    ),
    Rule(
        "logit_sigmoid",
        "softplus(u) - softplus(-u) = u (log(s) - log(1 - s) for s = sigmoid(u))",
        "the difference of two softplus values cancels for small u and rounds for large u",
        _logit_sigmoid,
    ),
    Rule(
        "sigmoid_logit",
        "sigmoid(log(p / (1 - p))) = p for 0 <= p <= 1 (NaN outside, as written)",
        "p / (1 - p) overflows near p = 1, and the gradient is 0 * inf at p = 0",
        _sigmoid_logit,
    ),
)
