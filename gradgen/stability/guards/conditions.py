"""Conditions of Piecewise branches read as bounds, for the guards that need them
(:mod:`.subgradients`: what a condition proves nonzero; :mod:`.branches`: a safe value
inside a condition, and whether a guard is a clamp).

* :func:`relations_of`: receives a condition; returns its relations (the condition
  itself, or the relations of an ``And`` of them), or None for any other condition.
* :func:`bound_of`: receives one relation; returns ``(u, kind, value)``, ``kind`` one of
  "lower" (``u > value``, ``u >= value``), "upper", "point" (``u == value``) and "not"
  (``u != value``), ``u`` the side that is not a number (where neither is, the side
  that is a symbol); or None.
"""

from __future__ import annotations

import sympy

_RELATIONS = (
    sympy.StrictGreaterThan,
    sympy.GreaterThan,
    sympy.StrictLessThan,
    sympy.LessThan,
    sympy.Eq,
    sympy.Ne,
)


def bound_of(rel):
    """(u, kind, value): ``u > value`` is ("lower", value), ``u == value`` ("point"...)."""
    lhs, rhs = rel.lhs, rel.rhs
    if lhs.is_number and not rhs.is_number:
        rel = rel.reversed
        lhs, rhs = rel.lhs, rel.rhs
    if lhs.is_number:
        return None
    if not rhs.is_number and not lhs.is_Symbol:
        if rhs.is_Symbol:
            rel = rel.reversed
            lhs, rhs = rel.lhs, rel.rhs
        else:
            return None
    if isinstance(rel, (sympy.StrictGreaterThan, sympy.GreaterThan)):
        return lhs, "lower", rhs
    if isinstance(rel, (sympy.StrictLessThan, sympy.LessThan)):
        return lhs, "upper", rhs
    if isinstance(rel, sympy.Eq):
        return lhs, "point", rhs
    if isinstance(rel, sympy.Ne):
        return lhs, "not", rhs
    return None


def relations_of(cond) -> list | None:
    """The relations of ``cond``: ``[cond]`` for one relation, those of an ``And`` of
    relations (nested too); else None."""
    if isinstance(cond, _RELATIONS):
        return [cond]
    if isinstance(cond, sympy.And):
        out = []
        for arg in cond.args:
            sub = relations_of(arg)
            if sub is None:
                return None
            out += sub
        return out
    return None
