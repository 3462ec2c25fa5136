r"""Norms: square roots of sums of squares, computed scaled (hypot).

| rule | identity | domain | fails at | source |
| --- | --- | --- | --- | --- |
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


def _root(term):
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
    roots = [_root(t) for t in expr.base.args]
    if any(r is None for r in roots) or sum(1 for r in roots if not r.is_number) == 0:
        return None
    return hypot(*roots) ** int(k.p)


RULES: tuple[Rule, ...] = (
    Rule(
        "hypot",
        "(t1**2 + t2**2 + ...)**(k/2) = hypot(t1, t2, ...)**k, hypot computed as "
        "m*sqrt(sum((ti/m)**2)), m = max|ti|",
        "the squares overflow for |t| > 1.8e19 in float32 (the norm is inf) and underflow "
        "for |t| < 1e-19 (the gradient at (1e-20, 0) is 0 instead of 1)",
        _hypot,
    ),
)
