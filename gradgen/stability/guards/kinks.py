"""Kinks as Piecewise: ``Heaviside(u)`` becomes a Piecewise (printable), which
:mod:`.branches` then guards.

Receives: a SymPy expression. Returns (:func:`kinks_to_piecewise`): the expression with
each ``Heaviside(u)`` as ``Piecewise((1, u > 0), (0, u < 0), (1/2, True))`` (SymPy's
``as_piecewise``), and no names (a form, not a guard).
"""

from __future__ import annotations

from ...functions import Heaviside


def kinks_to_piecewise(expr):
    """``Heaviside(u)`` -> ``Piecewise((1, u > 0), (0, u < 0), (1/2, True))``."""
    return expr.xreplace({h: h.as_piecewise() for h in expr.atoms(Heaviside)})
