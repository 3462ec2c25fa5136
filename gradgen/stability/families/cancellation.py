r"""Differences of nearly equal square roots and of squares, rewritten without the
cancellation.

| rule | identity | domain | fails at (as written) | source |
| --- | --- | --- | --- | --- |
| `sqrt_conjugate` | k·√a − k·√b = k·(a − b) / (√a + √b) where a − b is a nonzero number; k·√a − k·c = k·(a − c²) / (√a + c) for c > 0 where c² cancels a term of a; hypot(c, t, ...) − c likewise | a, b ≥ 0 (the denominator is positive: a ≠ b, or c > 0) | √(x + 1) − √x is 0 for x > 1.7e7 in float32 (the value is 1.2e-4); √(1 + t) − 1 is 0 for \|t\| < 1.2e-7 (pseudo-Huber at r/d = 1e-18: 0 instead of 5e-37) | Herbie's `difference-of-sqrt` rewrites (src/core/rules.rkt, `flip--`); Hamming, "Numerical Methods for Scientists and Engineers", §3.1 |
| `difference_of_squares` | c + k·u² = k·(u − s)·(u + s), s = √(−c/k) rational (1 − x² = (1 − x)·(1 + x)) | real u; c·k < 0 | 1 − x² for x near ±1 loses the digits of x² (asin, acos and atanh's derivatives in float32: 3e-6 relative at x = 0.999, all at 1 − 2⁻²⁴); each factor of the product is exact or within half an ulp | Goldberg, "What every computer scientist should know about floating-point arithmetic" (1991), §1.4 (x² − y² = (x − y)(x + y)); Herbie's `difference-of-squares` rule |

``sqrt_conjugate`` only fires where the rewritten denominator cannot be 0 (``a − b`` a
nonzero number, or a positive constant ``c``), so no 0/0 appears where the difference
is 0. Not done: differences whose conjugate would cancel in turn (``x + sqrt(x**2 +
4)`` for x > 0 needs a branch on the sign of x, as Herbie's regimes choose).
"""

from __future__ import annotations

import sympy
from sympy import S

from ...functions import hypot
from ..rule import Rule


def _root(rest):
    """(radicand, root) if ``rest`` is ``sqrt(a)`` or ``hypot(t1, ...)`` (radicand
    ``t1**2 + ...``), else None."""
    if isinstance(rest, sympy.Pow) and rest.exp == S.Half:
        return rest.base, rest
    if isinstance(rest, hypot):
        return sympy.Add(*(t**2 for t in rest.args)), rest
    return None


def _sqrt_conjugate(expr):
    # k*sqrt(a) - k*sqrt(b) = k*(a - b) / (sqrt(a) + sqrt(b)); k*sqrt(a) - k*c likewise
    if not isinstance(expr, sympy.Add):
        return None
    terms = list(expr.args)
    for i, term in enumerate(terms):
        k, rest = term.as_coeff_Mul()
        found = _root(rest)
        if found is None:
            continue
        a, root = found
        for j, other in enumerate(terms):
            if j == i:
                continue
            new = None
            if other.is_number:
                c = -other / k
                if c.is_positive:
                    diff = a - c**2
                    # c**2 cancels a constant term of a (1 + t - 1 = t)
                    if len(sympy.Add.make_args(diff)) < len(sympy.Add.make_args(a)):
                        new = k * diff / (root + c)
            else:
                k2, rest2 = other.as_coeff_Mul()
                found2 = _root(rest2)
                if found2 is not None and (k + k2).is_zero:
                    diff = a - found2[0]
                    if diff.is_number and not diff.is_zero:
                        new = k * diff / (root + found2[1])
            if new is not None:
                others = [t for n, t in enumerate(terms) if n not in (i, j)]
                return sympy.Add(new, *others)
    return None


def _difference_of_squares(expr):
    # c + k*u**2 = k*(u - s)*(u + s) with s = sqrt(-c/k) rational: 1 - x**2 = (1 - x)*(1 + x)
    if not isinstance(expr, sympy.Add) or len(expr.args) != 2:
        return None
    c, term = expr.as_coeff_Add()
    k, rest = term.as_coeff_Mul()
    if not (isinstance(rest, sympy.Pow) and rest.exp == 2) or c.is_zero is not False:
        return None
    ratio = -c / k
    if not ratio.is_positive:
        return None
    s = sympy.sqrt(ratio)
    if not s.is_Rational:  # (nor is it for a Float ratio)
        return None
    u = rest.base
    # (for k = -1 SymPy makes this (s - u)*(s + u): 1 - x**2 = (1 - x)*(x + 1))
    return k * (u - s) * (u + s)


def _magnitudes(expr):
    """``expr`` with each ``a*sign(a)`` in a product as ``|a|`` (real ``a``)."""
    if not isinstance(expr, sympy.Mul):
        return expr
    factors = list(expr.args)
    for f in expr.args:
        if isinstance(f, sympy.sign) and f.args[0].is_real and f.args[0] in factors:
            factors.remove(f)
            factors.remove(f.args[0])
            factors.append(sympy.Abs(f.args[0]))
    return sympy.Mul(*factors)


def _fraction_complement(expr):
    # k - k*u/(c + u) = k*c/(c + u): 1 - |x|/(1 + |x|) (softsign's slope) is 1/(1 + |x|)
    if not isinstance(expr, sympy.Add):
        return None
    for term in expr.args:
        k, rest = term.as_coeff_Mul()
        if -k not in expr.args:
            continue
        factors = sympy.Mul.make_args(rest)
        for d in factors:
            if not (isinstance(d, sympy.Pow) and d.exp == -1 and isinstance(d.base, sympy.Add)):
                continue
            c, u = d.base.as_coeff_Add()
            numerator = sympy.Mul(*(f for f in factors if f is not d))
            if c.is_zero is False and _magnitudes(numerator) == _magnitudes(u):
                return expr - term + k - k * c / d.base
    return None


RULES: tuple[Rule, ...] = (
    Rule(
        "sqrt_conjugate",
        "k*sqrt(a) - k*sqrt(b) = k*(a - b) / (sqrt(a) + sqrt(b)) where a - b is a "
        "nonzero number; k*sqrt(a) - k*c = k*(a - c**2) / (sqrt(a) + c) for c > 0",
        "the difference of nearly equal roots cancels: sqrt(x + 1) - sqrt(x) is 0 for "
        "x > 1.7e7 in float32, sqrt(1 + t) - 1 is 0 for |t| < 1.2e-7",
        _sqrt_conjugate,
    ),
    Rule(
        "fraction_complement",
        "k - k*u/(c + u) = k*c/(c + u), c a nonzero number (x*sign(x) read as |x|)",
        "1 - u/(c + u) cancels to 0 where |u| is far above |c|: softsign's slope (1 - "
        "|x|/(1 + |x|))/(1 + |x|) was 0 from |x| = 1.7e7 in float32 (exact 1/x**2)",
        _fraction_complement,
    ),
    Rule(
        "difference_of_squares",
        "c + k*u**2 = k*(u - s)*(u + s), s = sqrt(-c/k) rational (1 - x**2 = (1 - x)*(1 + x))",
        "1 - x**2 near x = +-1 loses the digits of x**2: asin, acos and atanh's "
        "derivatives lose 5 bits in float32 at x = 0.999",
        _difference_of_squares,
    ),
)
