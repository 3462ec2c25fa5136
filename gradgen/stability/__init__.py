"""The stability system: stable rewrites, guards, and (soon) the accuracy audit.

Consumes: elementwise SymPy expressions (forward outputs before differentiation, partial
derivatives after). Guarantees: :func:`rewrite` returns an expression equal to its
input as a real function wherever the input is finite, built from TensorFlow's stable
primitives where a rule applies, plus the names of the rules it used. Rewriting the
forward *before* differentiating matters: the derivative of ``softplus`` is ``sigmoid``,
while the derivative of ``log(1 + exp(x))`` is ``exp(x)/(1 + exp(x))``, which is inf/inf
(NaN) for x > 88 in float32.

Layout:

* :mod:`.rule`: the :class:`Rule` record (name, identity, why, apply).
* :mod:`.families`: a module per family of identities, each with its rules.
* :mod:`.engine`: the order rules are tried in and the fixpoint walk.
* :mod:`.guards`: what cannot be rewritten away is guarded after differentiation
  (zero subgradients, removable singularities, double where, vanishing products).
* :mod:`.cheaper`: cheaper forms whose extra error is bounded in the op's dtype
  (a complement absorbed by the constant it is added to).

The README's tables and the unit tests are keyed by rule and guard names.
"""

from __future__ import annotations

from .engine import COMPLEX_RULES, MAX_PASSES, RULES, RULES_BY_NAME, rewrite
from .rule import Rule

__all__ = ["COMPLEX_RULES", "MAX_PASSES", "RULES", "RULES_BY_NAME", "Rule", "rewrite"]
