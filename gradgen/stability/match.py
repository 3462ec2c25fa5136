"""Matching helpers shared by the rule families."""

from __future__ import annotations

import sympy
from sympy import S


def _one_plus(expr: sympy.Basic) -> sympy.Basic | None:
    """``u`` if ``expr`` is ``1 + u`` (u not a number), else None."""
    if isinstance(expr, sympy.Add) and S.One in expr.args:
        rest = expr - 1
        if not rest.is_number:
            return rest
    return None


def _exp_terms(expr) -> list | None:
    """``[u1, ..., un]`` if ``expr`` is ``exp(u1) + ... + exp(un)`` (n >= 2), where a
    positive constant c counts as exp(log(c)) and c*exp(u) as exp(u + log(c))."""
    if not isinstance(expr, sympy.Add):  # (an Add has two terms or more)
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


def _base(f):
    return f.base if isinstance(f, sympy.Pow) else f
