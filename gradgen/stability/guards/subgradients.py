"""Zero subgradients: 0 where a partial has a ``sqrt``-type or squared-norm singular
factor at 0.

Receives: a partial derivative after :mod:`gradgen.stability`, a real elementwise SymPy
expression ready to print. Returns (:func:`zero_subgradients`): the partial with a
factor ``s**(-1/2)`` (from the derivative of ``sqrt(s)``), and a factor ``s**(-n)``
where ``s >= 0`` is a compound expression that can be 0 (a squared norm, e.g. in the
derivatives of ``sqrt(x**2 + y**2)`` and ``atan2(y, x)``), replaced by 0 where
``s = 0``: the subgradient 0 of norms at the origin. Elsewhere the value is unchanged.
Also the names of the guards used (``sqrt_zero``, ``norm_zero``).
"""

from __future__ import annotations

import sympy
from sympy import S

from .conditions import bound_of, relations_of


def _nonzero_under(cond) -> set:
    """Expressions that ``cond`` proves nonzero (``u > 0``, ``u < -1``, ``u != 0``...)."""
    out = set()
    for rel in relations_of(cond) or []:
        b = bound_of(rel)
        if b is None or not b[2].is_number:
            continue
        u, kind, value = b
        strict = isinstance(rel, (sympy.StrictGreaterThan, sympy.StrictLessThan))
        if (
            (kind == "lower" and (value > 0 or (value == 0 and strict)))
            or (kind == "upper" and (value < 0 or (value == 0 and strict)))
            or (kind == "not" and value == 0)
            or (kind == "point" and value != 0)
        ):
            out.add(u)
    return out


def zero_subgradients(expr) -> tuple[sympy.Basic, tuple[str, ...]]:
    """Use 0 where a partial has a ``sqrt``-type or squared-norm singular factor at 0.

    A factor inside a Piecewise branch whose condition already excludes 0 (``x > 0``)
    is left alone.
    """
    used = set()

    def fix(e, known):
        if isinstance(e, sympy.Piecewise):
            pairs = [(fix(v, known | _nonzero_under(c)), c) for v, c in e.args]
            return sympy.Piecewise(*pairs)
        if e.args:  # (atoms have none)
            args = tuple(fix(a, known) for a in e.args)
            if args != e.args:
                e = e.func(*args)
        if not isinstance(e, sympy.Pow) or not (
            e.exp.is_Rational and e.exp.is_negative
        ):
            return e
        s = e.base
        if s.is_positive or s.is_number or s in known:
            return e
        if e.exp == -S.Half:
            used.add("sqrt_zero")
        elif s.is_nonnegative and not s.is_Atom:
            used.add("norm_zero")
        else:
            return e
        return sympy.Piecewise((e, sympy.Ne(s, 0)), (0, True))

    out = fix(expr, frozenset())
    return out, tuple(sorted(used))
