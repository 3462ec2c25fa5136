"""Regimes in the derivation: a value computed as written on part of an input's range.

Receives the :class:`~gradgen.stability.regimes.Regime` records that
:mod:`gradgen.emit` passes in (``Program.regimes``, inferred by the accuracy audit) and
the finalized form of an output's value or of a partial. Returns (:func:`branched`) the
Piecewise that takes the form as written on the regime's intervals and the stable form
elsewhere, and (:func:`regime_text`) the sentence ``explain`` shows.
"""

from __future__ import annotations

import sympy

from ..stability import guards
from ..stability.regimes import WRITTEN
from .context import Derivation
from .text import shorten, spec_str


# Why a form as written is used where a regime picks it (code comments, explain).
MORE_ACCURATE = "the accuracy audit found it more accurate there"


def regime_comment(regime) -> str:
    """The code comment of a value or partial computed in ``regime``."""
    return f"{regime.describe()}: {MORE_ACCURATE}"


def of_output(d: Derivation, output: str) -> dict:
    """``{input name or None (the value): regime}`` of ``output``; none for an op with
    tensor nodes (its partials are not of the output in the inputs alone)."""
    if d.nodes:
        return {}
    return {r.input: r for r in d.program.regimes if r.output == output}


def regime_text(regime) -> str:
    """``as written (p*x**p/x) where x > 0, the stable form elsewhere``, or empty."""
    if regime is None:
        return ""
    shown = shorten(spec_str(regime.written))
    return regime.describe().replace("as written", f"as written ({shown})", 1)


def branched(d: Derivation, regime, code):
    """``code`` (a finalized value or partial) where ``regime`` picks the stable form,
    the form as written (the forward as the spec wrote it, or SymPy's derivative of
    it, unrewritten) where it picks that. The written form is evaluated at safe inputs
    outside its interval (``double_where``), so that the next order is finite wherever
    the selected form is; the stable form is left as it was everywhere."""
    by_name = {v.symbol.name: v.symbol for v in d.program.inputs}
    written = regime.written.xreplace({s: by_name[s.name] for s in regime.written.free_symbols
                                       if s.name in by_name})
    written = guards.kinks_to_piecewise(written)
    conditions = regime.conditions(by_name[regime.variable]) + [sympy.true]
    pairs, before = [], sympy.false
    for form, condition in zip(regime.forms, conditions):
        value = code
        if form == WRITTEN:
            inside = sympy.And(sympy.Not(before), condition)
            guarded = d.applied(guards.guard_branches(
                sympy.Piecewise((written, inside), (0, True))))
            value = guarded.args[0][0] if isinstance(guarded, sympy.Piecewise) else written
        pairs.append((value, condition))
        before = sympy.Or(before, condition)
    d.rules_used.add("regimes")
    return sympy.Piecewise(*pairs)
