"""Powers with symbolic or irrational exponents, and exponents that are data.

| rule | identity | domain | fails at | source |
| --- | --- | --- | --- | --- |
| `power_product` | x^a · x^b = x^(a + b) for a symbolic or irrational exponent; xdivy(k, x^a) · x^b = xdivy(k, x^(a − b)); xdivy(k^m, q) · k^(−n) = xdivy(k^(m − n), q), 1/q where m = n | x > 0; x = 0 where both sides are defined | naive: d(x^y)/dx written x^y · y / x is 0/0 at x = 0; the second derivative of x^(2y) as xdivy(−y, x^(2 − 4y)) · (1 − 2y) · x^(−2y) is −0 · inf at x = 1e-20 in float32 | SymPy `powsimp`; TF `_PowGrad` ("avoid false singularity at x = 0") |
| `exp_log_power` | exp(k · log(x)) = x^k (not with another term b: x^k · exp(b) overflows apart, where exp(k · log(x) + b) is finite) | x > 0 (as written); extends it: x^k is finite for x < 0 with an integer k, and 0^0 = 1 where k · log(0) = 0 · −inf is NaN | naive: the derivative p · exp(p log x) / x is 0/0 at x = 0 | Herbie `exp-to-pow` (src/core/rules.rkt) |
| `exp_power` | exp(k · log(x) + b) · x^m = exp((k + m) · log(x) + b); · xdivy(c, x) = mul_no_nan(exp((k − 1) · log(x) + b), c); a sum beside it with such a term that is inf at 0 multiplied out | x ≥ 0 (as written); at x = 0 the limit, with 0^0 = 1 (xlogy) | naive: the derivative exp(k log x + b) · k / x is 0 · inf at x = 0 | the same identity as `exp_log_power`, kept in log space (`exp_mul`'s reason) |
| `power_zero_coefficient` | k · x^e = xdivy(k, x^(−e)) when e is negative where k = 0 (p · x^(p − 1) = xdivy(p, x^(1 − p))) | real x ≥ 0; equal wherever the left side is finite, and 0 where k = 0 (there x^(e + 1) is x^0 = 1, a constant) | naive: d(x^p)/dx at p = 0, x = 0 is 0 · 0^(−1) = 0 · inf = NaN, but x^0 = 1 has derivative 0 | TF `xdivy`; JAX `xlogy`/`xlog1py` zero conventions |

With a data exponent the partials of x^p are p · x^(p − 1) (→ ``power_zero_coefficient``:
0 at p = 0 for every x, 0 at x = 0 for p > 1, 1 for p = 1) and x^p · log(x) (→ the
``xlogy`` rule: 0 at x = 0 for p > 0, the limit of x^p · log(x)); 0^0 = 1 as in
``tf.math.pow``.
"""

from __future__ import annotations

import sympy
from sympy import S

from ...functions import mul_no_nan, xdivy, xlogy
from ..rule import Rule


def _power_product(expr):
    # x**y / x = x**(y - 1): finite at x = 0 (where x**y * y / x is 0/0 = NaN); y symbolic
    # or an irrational constant
    if not isinstance(expr, sympy.Mul):
        return None
    merged = _xdivy_power_product(expr)
    if merged is not None:
        return merged
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


def _xdivy_power_product(expr):
    """``xdivy(k, x**a) * x**b * ...`` as ``xdivy(k, x**(a - b)) * ...``: the powers of
    one base on both sides of a quotient merged, as SymPy merges them in a plain
    product (it does not look inside ``xdivy``). The quotient rule's form of the
    derivative of ``xdivy(y, x**(1 - 2y))`` (``x**(2y)``'s first partial) is
    ``xdivy(-y, x**(2 - 4y)) * (1 - 2y) * x**(-2y)``: NaN at x = 1e-20, y = 1.5 in
    float32 (``x**-4`` is inf, ``x**-3`` inf: -0 * inf), where the merged
    ``xdivy(-y, x**(2 - 2y))`` is 3e-20. Equal wherever both sides are finite, and 0
    where ``k`` is; None where nothing merges."""
    for f in expr.args:
        if not isinstance(f, xdivy):
            continue
        k, below = f.args
        base, a = below.as_base_exp()
        if base.is_number:
            continue
        same = [g for g in expr.args if g is not f and g.as_base_exp()[0] == base]
        if same:
            b = sympy.Add(*(g.as_base_exp()[1] for g in same))
            rest = [g for g in expr.args if g is not f and g not in same]
            return sympy.Mul(xdivy(k, sympy.Pow(base, a - b)), *rest)
        merged = _numerator_merged(expr, f)
        if merged is not None:
            return merged
    return None


def _numerator_merged(expr, f):
    """``xdivy(k**m, q) * k**-n * ...`` (``k`` not a number) as ``xdivy(k**(m - n), q)
    * ...``, or ``q**-1 * ...`` where ``m = n``: the derivative of Cauchy's loss with a
    scale, ``c**2/2 * xlog1py(...)``'s, is ``x * xdivy(c**2, 1 + (x/c)**2) / c**2``,
    inf/inf = NaN where ``c**2`` overflows (c = 3.4e38 in float32) and 0 * inf where it
    underflows, and ``x / (1 + (x/c)**2)`` is neither. At ``k = 0`` the form as written
    is 0 * inf = NaN. None where no power of ``k`` divides the product."""
    top, q = f.args
    base, m = top.as_base_exp()
    if base.is_number:
        return None
    below = [g for g in expr.args if g is not f and g.as_base_exp()[0] == base
             and (g.as_base_exp()[1]).is_negative]
    if not below:
        return None
    n = -sympy.Add(*(g.as_base_exp()[1] for g in below))
    rest = [g for g in expr.args if g is not f and g not in below]
    merged = sympy.Pow(q, -1) if m == n else xdivy(sympy.Pow(base, m - n), q)
    return sympy.Mul(merged, *rest)


def _log_power_term(term):
    """(x, k) where ``term`` is k*log(x), or c*xlogy(k', x) as the xlogy rule leaves it
    (children are rewritten first: k = c*k'), with x not a number and k free of logs;
    else None."""
    inner = [f for f in sympy.Mul.make_args(term) if isinstance(f, xlogy)]
    if len(inner) == 1 and not (term / inner[0]).has(sympy.log, xlogy):
        return inner[0].args[1], inner[0].args[0] * (term / inner[0])
    logs = [f for f in sympy.Mul.make_args(term) if isinstance(f, sympy.log)]
    if len(logs) != 1 or logs[0].args[0].is_number:
        return None
    k = term / logs[0]
    if k.has(sympy.log):
        return None
    return logs[0].args[0], k


def _exp_log_power(expr):
    # exp(k*log(x)) = x**k: p*exp(p*log(x))/x is 0/0 at x = 0. Only the power alone:
    # exp(k*log(x) + b) as x**k * exp(b) overflowed where the exponential is finite
    # (exp(4*log(x) - 60) at x = 1e10 in float32: inf for 8.8e13), so with a rest b it
    # stays one exponential (exp_mul's reason) and exp_power takes its derivative
    if not isinstance(expr, sympy.exp):
        return None
    found = _log_power_term(expr.args[0])
    if found is None:
        return None
    x, k = found
    return sympy.Pow(x, k)


def _power_of(f, x):
    """(m, c) where ``f`` is x**m (c None) or xdivy(c, x) (m = -1); else None."""
    if isinstance(f, xdivy) and f.args[1] == x:
        return S.NegativeOne, f.args[0]
    if f == x:
        return S.One, None
    if isinstance(f, sympy.Pow) and f.base == x and not f.exp.has(x):
        return f.exp, None
    return None


def _pole_at_zero(f, x) -> bool:
    """Whether ``f`` is xdivy(c, x) or x**m with m < 0: inf at x = 0."""
    power = _power_of(f, x)
    return power is not None and (power[1] is not None or power[0].is_negative is True)


def _exp_power(expr):
    # exp(k*log(x) + b) * x**m = exp((k + m)*log(x) + b), and
    # exp(k*log(x) + b) * xdivy(c, x) = mul_no_nan(exp((k - 1)*log(x) + b), c): the
    # derivative of exp(xlogy(k, x) + b) in x, exp(...) * xdivy(k, x), is 0 * inf = NaN
    # at x = 0 where it is 0 (k > 1), exp(b) (k = 1) or 0 (k = 0); (k + m)*log(x) is
    # printed as xlogy(k + m, x), 0 where k + m = 0. A sum beside the exponential with
    # such a term that is inf at x = 0 (the derivative exp(...) * (xdivy(k, x) - 1) of
    # exp(k*log(x) - x)) is multiplied out, and its terms merge in the next pass.
    if not isinstance(expr, sympy.Mul):
        return None
    factors = list(expr.args)
    for e in factors:
        if not isinstance(e, sympy.exp):
            continue
        for term in sympy.Add.make_args(e.args[0]):
            found = _log_power_term(term)
            if found is None:
                continue
            x, k = found
            for f in factors:
                rest = [g for g in factors if g is not e and g is not f]
                if isinstance(f, sympy.Add) and any(
                    _pole_at_zero(g, x) for t in f.args for g in sympy.Mul.make_args(t)
                ):
                    return sympy.Add(*(sympy.Mul(e, t, *rest) for t in f.args))
                power = _power_of(f, x) if f is not e else None
                if power is None:
                    continue
                m, scale = power
                merged = sympy.exp(e.args[0] - term + xlogy(k + m, x))
                if scale is not None:
                    merged = mul_no_nan(merged, scale)
                return sympy.Mul(merged, *rest)
    return None


def _zero_of(k):
    """(s, s0) with k = 0 exactly where the symbol s = s0 (k = s or k = s + c), or None."""
    if k.is_Symbol:
        return k, S.Zero
    if isinstance(k, sympy.Add):  # s + c: s a symbol, c the (one) number
        c, s = k.as_coeff_Add()
        if c.is_number and s.is_Symbol:
            return s, -c
    return None


def _power_zero_coefficient(expr):
    # p * x**(p - 1) = xdivy(p, x**(1 - p)): at p = 0, x = 0 it is 0, not 0 * inf
    if not isinstance(expr, sympy.Mul):
        return None
    factors = list(expr.args)
    for f in factors:
        if not isinstance(f, sympy.Pow) or f.exp.is_number or f.base.is_number:
            continue
        for k in factors:
            zero = _zero_of(k)  # (None for f itself and for numbers)
            if zero is None or zero[0] not in f.exp.free_symbols:
                continue
            at_zero = f.exp.subs(zero[0], zero[1])
            if at_zero.is_number and at_zero.is_negative:
                rest = [g for g in factors if g is not f and g is not k]
                return sympy.Mul(xdivy(k, sympy.Pow(f.base, -f.exp)), *rest)
    return None


RULES: tuple[Rule, ...] = (
    Rule(
        "power_product",
        "x**a * x**b = x**(a + b) for a symbolic or irrational exponent (x**y / x = x**(y - 1))",
        "the derivative of x**y, written x**y * y / x, is 0/0 = NaN at x = 0",
        _power_product,
        complex_ok=True,
    ),
    Rule(
        "exp_log_power",
        "exp(k*log(x)) = x**k",
        "the derivative p*exp(p*log(x))/x is 0/0 = NaN at x = 0",
        _exp_log_power,
    ),
    Rule(
        "exp_power",
        "exp(k*log(x) + b) * x**m = exp((k + m)*log(x) + b); "
        "exp(k*log(x) + b) * xdivy(c, x) = mul_no_nan(exp((k - 1)*log(x) + b), c)",
        "the derivative of exp(k*log(x) + b), exp(...) * k/x, is 0 * inf = NaN at x = 0",
        _exp_power,
    ),
    Rule(
        "power_zero_coefficient",
        "k * x**e = xdivy(k, x**(-e)) where e < 0 at k = 0 (p*x**(p - 1) = xdivy(p, x**(1 - p)))",
        "d(x**p)/dx = p*x**(p - 1) is 0 * inf = NaN at p = 0, x = 0 (x**0 = 1: the "
        "derivative is 0)",
        _power_zero_coefficient,
    ),
)
