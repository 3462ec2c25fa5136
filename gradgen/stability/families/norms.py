r"""Norms: square roots of sums of squares, computed scaled (hypot).

| rule | identity | domain | fails at | source |
| --- | --- | --- | --- | --- |
| `unit_complement` | k·h⁻ⁿ − k·a²·h⁻ⁿ⁻² = k·(b² + ...)·h⁻ⁿ⁻² for h = hypot(a, b, ...) (1 − (a/h)² is the other components' squares) | real a, b, ... | 1 − (x/h)² cancels to 0 for \|x\| > 4096·\|b\| in float32: x/sqrt(1 + x²)'s slope was 0 from x = 4096 (exact (1 + x²)^(−3/2)), a norm's Hessian entry 1/h − x²/h³ 0 at (1e10, 1) | Pythagoras: h² − a² = b² + ... |
| `hypot` | (t1² + t2² + ...)^(k/2) = hypot(t1, t2, ...)^k, k odd; c·t² counts as (√c·t)², a constant c > 0 as (√c)² | real tᵢ | naive: \|t\| > 1.8e19 in float32 (t² overflows: the norm is inf), \|t\| < 1e-19 (t² underflows: the gradient at (1e-20, 0) is 0/0, guarded to 0, instead of 1) | C99 `hypot`; Herbie `hypot` spec (src/platforms/c.rkt); LAPACK `dnrm2` scaling (Blue 1978, Anderson 2017) |

hypot(t) is computed as ``m * sqrt(sum((ti / m)**2))`` with ``m = max |ti|`` held
constant for autodiff (its derivative cancels exactly, as logsumexp's shift does); its
partials are ``ti / hypot(t)``, with the ``norm_zero`` guard's subgradient 0 at the
origin (gradgen's convention for norms, unchanged by this rule).
"""

from __future__ import annotations

import sympy

from ...functions import hypot
from ..rule import Rule


def root_of_square(term):
    """A real ``r`` with ``r**2 == term`` read off the term's form, or None."""
    if term.is_number:
        return sympy.sqrt(term) if term.is_positive else None
    factors = sympy.Mul.make_args(term)
    out = []
    for f in factors:
        if f.is_number:
            if not f.is_positive:
                return None
            out.append(sympy.sqrt(f))
        elif (
            isinstance(f, sympy.Pow)
            and f.exp.is_Integer
            and f.exp > 0
            and f.exp % 2 == 0
            and f.base.is_real
        ):
            out.append(f.base ** (f.exp // 2))
        else:
            return None
    return sympy.Mul(*out)


def _hypot(expr):
    # sqrt(x**2 + y**2) = hypot(x, y): x**2 overflows for |x| > 1.8e19 in float32
    if not isinstance(expr, sympy.Pow) or not isinstance(expr.base, sympy.Add):
        return None
    k = expr.exp
    if not (k.is_Rational and k.q == 2):
        return None
    roots = [root_of_square(t) for t in expr.base.args]
    if any(r is None for r in roots) or sum(1 for r in roots if not r.is_number) == 0:
        return None
    return hypot(*roots) ** int(k.p)


def _hypot_power(term):
    """``(h, m)`` for a term with a factor ``hypot(...)**-m`` (m an integer), else None."""
    for f in sympy.Mul.make_args(term):
        if isinstance(f, sympy.Pow) and isinstance(f.base, hypot) and f.exp.is_Integer:
            return f.base, -int(f.exp)
    return None


def _unit_complement(expr):
    # k/h**n - k*a**2/h**(n + 2) = k*(b**2 + ...)/h**(n + 2) for h = hypot(a, b, ...)
    if not isinstance(expr, sympy.Add):
        return None
    for term in expr.args:
        found = _hypot_power(term)
        if found is None or found[1] < 2:
            continue
        h, m = found
        for a in h.args:
            partner = -term * h**2 / a**2  # k*h**-(m - 2), if term is -k*a**2*h**-m
            if not a.is_number and partner in expr.args:
                rest = sympy.Add(*(b**2 for b in h.args if b != a))
                return partner * rest / h**2 + (expr - term - partner)
    return None


RULES: tuple[Rule, ...] = (
    Rule(
        "unit_complement",
        "k/h**n - k*a**2/h**(n + 2) = k*(b**2 + ...)/h**(n + 2), h = hypot(a, b, ...)",
        "1 - (a/h)**2 cancels to 0 where |a| is far above the other components (x / "
        "sqrt(1 + x**2)'s slope was 0 from x = 4096 in float32)",
        _unit_complement,
    ),
    Rule(
        "hypot",
        "(t1**2 + t2**2 + ...)**(k/2) = hypot(t1, t2, ...)**k, hypot computed as "
        "m*sqrt(sum((ti/m)**2)), m = max|ti|",
        "the squares overflow for |t| > 1.8e19 in float32 (the norm is inf) and underflow "
        "for |t| < 1e-19 (the gradient at (1e-20, 0) is 0 instead of 1)",
        _hypot,
    ),
)
