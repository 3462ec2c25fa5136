"""Piecewise and ``where``: a branch that only fills in a removable singularity.

| rule | identity | domain | fails at | source |
| --- | --- | --- | --- | --- |
| `removable_fill` | Piecewise((f, v ≠ 0), (L, True)) = f, and where(v == 0, L, f) = f, when L = lim_{v→0} f (so f, continued by its limit, is smooth at 0) | real symbol v, L a number | naive: the derivative at v = 0 is the constant branch's (0), not f's: Piecewise((expm1(x)/x, x ≠ 0), (1, True)) has derivative 1/2 and second derivative 1/3 at 0 | the removable-singularity theorem; gradgen's `removable_singularity` guard then evaluates f by its Taylor polynomial near 0 |

With the branch gone, ``f`` is differentiated as one smooth function, and the
``removable_singularity`` guard (:mod:`gradgen.stability.guards`) gives its value and
every derivative near ``v = 0``, to first and second order. A fill-in value that is not
the limit (``Piecewise((sin(x)/x, x != 0), (0, True))``) is a real jump and stays.
"""

from __future__ import annotations

import sympy

from ..guards import limit_at_zero
from ..rule import Rule


def _fill(cond, value, other):
    """(v, f) if (value where cond, else other) fills f's removable singularity at v = 0."""
    if isinstance(cond, sympy.Eq):
        point, f = value, other
    elif isinstance(cond, sympy.Ne):
        point, f = other, value
    else:
        return None
    lhs, rhs = cond.args
    v = lhs if rhs == 0 else rhs if lhs == 0 else None
    if v is None or not (v.is_Symbol and v.is_real) or not point.is_number:
        return None
    if f.has(sympy.Piecewise):  # (an f free of v is finite at 0, or has no limit = L)
        return None
    try:
        if f.subs(v, 0) is not sympy.nan and f.subs(v, 0).is_finite:
            return None  # f is defined at 0: nothing to fill in
    except (TypeError, ValueError, ZeroDivisionError):
        pass
    limit = limit_at_zero(f, v)
    if limit is None or sympy.simplify(limit - point) != 0:
        return None
    return f


def _removable_fill(expr):
    # Piecewise((f, Ne(v, 0)), (lim f, True)) = f: the same function, smooth at v = 0
    if not isinstance(expr, sympy.Piecewise) or len(expr.args) != 2:
        return None
    (value, cond), (other, last) = expr.args
    if last is not sympy.true:
        return None
    return _fill(cond, value, other)


RULES: tuple[Rule, ...] = (
    Rule(
        "removable_fill",
        "Piecewise((f, v != 0), (lim_{v->0} f, True)) = f (also where(v == 0, L, f))",
        "the derivative at v = 0 would be the constant branch's (0) instead of f's "
        "(1/2 for expm1(x)/x), and the second derivative too",
        _removable_fill,
    ),
)
