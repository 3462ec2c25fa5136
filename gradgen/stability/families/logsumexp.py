"""Sums of exponentials written elementwise: logsumexp, softmax, log-softmax.

| rule | identity | domain | fails at (as written) | source |
| --- | --- | --- | --- | --- |
| `logsumexp` | log(exp(a) + exp(b) + ...) = logsumexp(a, b, ...); c·exp(u) counts as exp(u + log c) | all real | the exponentials overflow (a > 88 in float32), or all underflow: log(0) = −inf | SciPy `logsumexp` (Blanchard, Higham & Higham 2021); PyTensor `local_log_sum_exp` |
| `log_mul` | log(a·b/c) = log(a) + log(b) − log(c), log(1/a) = −log(a), for positive factors | positive factors | exposes the log-softmax and log-sigmoid forms below | log identities over the positive reals |
| `softmax` | (exp(a) + exp(b) + ...)^−n = exp(−n·logsumexp(a, b, ...)) | all real | inf/inf = NaN when the exponentials overflow | JAX `softmax` (shift by the max) |
| `exp_mul` | exp(a)·exp(b) = exp(a + b) | all | exp(a) overflows where exp(a + b) does not | exponent law; PyTensor `local_exp_mul` |
| `softmax_weight` | exp(uᵢ − logsumexp(u)) = 1 / (1 + Σⱼ exp(uⱼ − uᵢ)); sigmoid(uᵢ − uⱼ) for two | all real | uᵢ − logsumexp(u) loses digits for large terms (5e−4 at 1e4 in float32) | TF `nn_impl` softmax; JAX `softmax` |
| `log_softmax` | uᵢ − logsumexp(u) = −logsumexp(0, uⱼ − uᵢ, ...); −softplus(uⱼ − uᵢ) for two | all real | the same subtraction | PyTensor `local_log_softmax_from_logsumexp` |

These work on elementwise expressions of a few terms (``log(exp(a) + exp(b))``); naive
forms written with ``sum``/``mean`` over an axis are recognised on the whole program by
:mod:`gradgen.stability.reductions`.

Each rule is a :class:`~gradgen.stability.rule.Rule`; :data:`RULES` lists this family's
rules in the order the engine tries them.
"""

from __future__ import annotations

import sympy
from sympy import S

from ...functions import logsumexp, sigmoid, softmax_weight, softplus
from ..match import _base, _exp_terms
from ..normalize import positive_factors
from ..rule import Rule


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
            best = (key, rest, u, us[:i] + us[i + 1 :])
    _, rest, u, others = best
    if weight(rest) >= weight(r):
        return None  # no term of the logsumexp appears in r
    return rest, u, others


def _logsumexp(expr):
    # log(exp(a) + exp(b) + ...) = logsumexp(a, b, ...); 1 + exp(u) is softplus's case
    if isinstance(expr, sympy.log):  # (one argument: SymPy divides log(x, b))
        terms = _exp_terms(expr.args[0])
        if terms is not None and not (len(terms) == 2 and S.Zero in terms):
            return logsumexp(*terms)
    return None


def _log_mul(expr):
    # log(a * b / c) = log(a) + log(b) - log(c) when every factor is positive, and
    # log(1 / a) = -log(a); only where a factor is an exponential, a sigmoid, a softplus,
    # a logsumexp or a sum of exponentials (the forms other rules continue from)
    # (or an erfc of a real argument: log(erfc(u)/2), the log of a normal CDF, reaches
    # log_erfc as log(erfc(u)) - log(2))
    if isinstance(expr, sympy.log):  # (one argument: SymPy divides log(x, b))
        arg = expr.args[0]
        if isinstance(arg, (sympy.Mul, sympy.Pow)):
            factors = positive_factors(arg)
            if factors is not None and any(
                isinstance(_base(f), (sympy.exp, sigmoid, softplus, logsumexp, sympy.erfc))
                or _exp_terms(_base(f))
                for f in factors
            ):
                return sympy.Add(*(_log_of(f) for f in factors))
    return None


def _log_of(f):
    """``log(f)`` for a positive factor, a power's exponent taken out (also of an erfc,
    whose positivity SymPy does not know)."""
    if f.is_Pow and isinstance(f.base, sympy.erfc):
        return f.exp * sympy.log(f.base)
    return sympy.expand_log(sympy.log(f), force=False)


def _softmax(expr):
    # (exp(a) + exp(b) + ...)**-n = exp(-n * logsumexp(a, b, ...))
    if isinstance(expr, sympy.Pow) and expr.exp.is_negative and expr.exp.is_Rational:
        terms = _exp_terms(expr.base)
        if terms is not None and not (len(terms) == 2 and S.Zero in terms):
            return sympy.exp(expr.exp * logsumexp(*terms))
    return None


def _exp_mul(expr):
    # exp(a) * exp(b) = exp(a + b) everywhere (SymPy merges only exp(a) * exp(a), and
    # exp(a) * exp(-a) = 1): no overflow of one factor where the product is finite, and
    # exp(a) * exp(-logsumexp(...)) becomes a softmax weight
    if isinstance(expr, sympy.Mul):
        exps = [f for f in expr.args if isinstance(f, sympy.exp)]
        if len(exps) >= 2:
            rest = [f for f in expr.args if not isinstance(f, sympy.exp)]
            return sympy.Mul(sympy.exp(sympy.Add(*(f.args[0] for f in exps))), *rest)
    return None


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


RULES: tuple[Rule, ...] = (
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
        "softmax",
        "(exp(a) + exp(b) + ...)**-n = exp(-n * logsumexp(a, b, ...))",
        "exp(a) / (exp(a) + exp(b)) is inf/inf = NaN when the exponentials overflow",
        _softmax,
    ),
    Rule(
        "exp_mul",
        "exp(a) * exp(b) = exp(a + b)",
        "exp(a) overflows where exp(a + b) does not (exp(100) * exp(-100) is inf * 0 = "
        "NaN in float32), and exp(a - logsumexp(...)) is a softmax weight",
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
)
