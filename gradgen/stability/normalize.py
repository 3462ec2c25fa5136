"""Normal forms: what a subexpression *means*, whatever its spelling.

A rule states its identity once, on meanings, and asks these views whether a node has
that meaning; the views never rewrite, so no rule undoes another and every pass of the
engine stays linear in the size of the tree (no ``simplify``, no search).

SymPy's automatic canonicalisation already removes most spelling differences before a
rule sees a node, so the views do not repeat it:

* signs and subtraction: ``-(b - a)`` is ``a - b``, ``-(exp(u) - 1)`` is
  ``1 - exp(u)``, ``1 / exp(u)`` is ``exp(-u)``, ``exp(u)**n`` is ``exp(n*u)``;
* term and factor order: ``Add`` and ``Mul`` arguments are sorted, so ``exp(u) + 1``
  and ``1 + exp(u)`` are one expression;
* ``log(exp(u))`` is ``u`` and ``exp(log(u))`` is ``u`` for real ``u``.

The engine walks bottom-up, so a node's children are already in their stable forms
when the node is matched: ``exp(u) / (1 + exp(u))`` and ``1 / (1 + exp(-u))`` have both
become ``sigmoid(u)``, and ``1 - exp(u)`` has become ``-expm1(u)``.

What is left, and what the views below read through:

* factored constants: SymPy distributes a number over a sum, so ``2*(1 + exp(u))`` is
  ``2*exp(u) + 2``; :func:`scaled_exp` reads it back as ``2 * (1 + exp(u))``;
* ``expm1`` as its spec: ``-c*expm1(u)`` is ``c * (1 - exp(u))``, ``c*expm1(u) + 2c``
  is ``c * (1 + exp(u))``;
* ``log1p(w)`` as ``log(1 + w)`` (:func:`log_argument`), so a rule on ``log(X)`` also
  fires after the weaker ``log1p`` rule has turned ``log(1 + w)`` into ``log1p(w)``
  (PyTensor's "chains instead of priorities").
"""

from __future__ import annotations

import sympy
from sympy import S

from ..functions import expm1, log1p


def log_argument(expr) -> sympy.Basic | None:
    """``X`` if ``expr`` is ``log(X)``, or ``1 + w`` if it is ``log1p(w)``; else None."""
    if isinstance(expr, sympy.log):  # (one argument: SymPy divides log(x, b))
        return expr.args[0]
    if isinstance(expr, log1p):
        return 1 + expr.args[0]
    return None


def _exp_part(term):
    """(constant, k, u) with ``term = constant + k * exp(u)``, k a nonzero number; None
    unless ``term`` is ``k*exp(u)`` or ``k*expm1(u)`` (= -k + k*exp(u))."""
    k, rest = term.as_coeff_Mul()
    if isinstance(rest, sympy.exp):
        return S.Zero, k, rest.args[0]
    if isinstance(rest, expm1):
        return -k, k, rest.args[0]
    return None


def constant_plus_exp(expr) -> tuple | None:
    """(a, k, u) with ``expr = a + k * exp(u)`` (a, k numbers, k != 0, u not a number),
    read through ``expm1``; None when ``expr`` has other terms or more than one
    exponential."""
    constant, found = S.Zero, None
    for term in sympy.Add.make_args(expr):
        if term.is_number:
            constant += term
            continue
        part = _exp_part(term)
        if part is None or found is not None or part[2].is_number:
            return None
        found = part
    if found is None:
        return None
    a, k, u = found
    return constant + a, k, u


def scaled_exp(expr, sign: int) -> tuple | None:
    """(c, w) with ``expr = c * (1 + sign * exp(w))``, ``c`` a positive number; sign is
    +1 (``1 + exp(w)``) or -1 (``1 - exp(w)``).

    Any positive constant and coefficient are read: ``a + k * exp(u)`` with ``a > 0``
    and ``sign * k > 0`` is ``a * (1 + sign * exp(u + log(|k| / a)))``, so
    ``log(2 + exp(x))`` is ``log(2) + softplus(x - log(2))`` and ``1 + exp(x - 1.5)``
    (which SymPy writes ``1 + exp(-1.5) * exp(x)``) is ``1 + exp(x - 1.5)``.
    """
    parsed = constant_plus_exp(expr)
    if parsed is None:
        return None
    a, k, u = parsed
    if not (a.is_positive and (sign * k).is_positive):
        return None
    return a, u + sympy.log(sign * k / a)  # (log(1) is 0)


def expm1_term(expr) -> tuple | None:
    """(k, u, others) with ``expr = k * (exp(u) - 1) + others`` where the sum spells the
    ``expm1`` with ``exp``: ``exp(u) - 1``, ``1 - exp(u)``, ``2*exp(u) - 2 + y``. The
    numbers in the sum must be exactly ``-k``; the first such exponential (in SymPy's
    order) is taken."""
    if not isinstance(expr, sympy.Add):
        return None
    constant = sympy.Add(*(t for t in expr.args if t.is_number))
    if constant.is_zero:
        return None
    for term in expr.args:
        k, rest = term.as_coeff_Mul()
        if isinstance(rest, sympy.exp) and (k + constant).is_zero:
            others = sympy.Add(*(t for t in expr.args if t is not term and not t.is_number))
            return k, rest.args[0], others
    return None


def positive_factors(expr) -> list | None:
    """The factors of a product or power ``expr`` if each one is positive: as SymPy
    proves, or a real power of an erfc of a real argument (erfc is positive on the
    reals, which SymPy does not know: ``log(erfc(u)/2)``, the log of a normal CDF)."""
    factors = sympy.Mul.make_args(expr)
    if all(f.is_positive or _erfc_power(f) for f in factors):
        return list(factors)
    return None


def _erfc_power(f) -> bool:
    """Whether ``f`` is ``erfc(u)**p`` (``p`` 1 or real) with ``u`` real."""
    base, p = (f.base, f.exp) if isinstance(f, sympy.Pow) else (f, S.One)
    return isinstance(base, sympy.erfc) and bool(base.args[0].is_real) and bool(p.is_real)
