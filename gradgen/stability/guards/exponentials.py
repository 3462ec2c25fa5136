"""Overflowing exponentials: ``exp(u)`` that overflows inside a value that does not.

Receives: a real elementwise SymPy expression ready to print (a forward value or a
partial) and the op's dtype. Returns (:func:`split_exponentials`): where the expression
is in one input ``v``, every exponential in it is ``exp(u)`` or ``expm1(u)`` of the same
``u = a*v + b``, and it grows more slowly than ``exp(u)`` (``expm1(x)/x``, whose value
is finite up to x = 93.2 in float32 where ``exp(x)`` is inf from 88.7), the expression
as ``Piecewise((h * R, u > U), (expression, True))``: ``h = exp(u/2)``, ``R`` the
expression divided by ``h`` with ``exp(u) = h**2`` and ``expm1(u) = h**2 - 1``
(``expm1(x)/x = h * (h/x - 1/(x*h))``), and ``U`` a little below where ``exp(u)``
overflows in the dtype, so that the form as written is used wherever it is finite.
Both factors are finite wherever the value is (``h`` overflows only where ``u`` is
twice the overflow point); ``h`` is computed once, so the branch costs one exponential.
Where ``R`` would hold ``h`` to a power above 1 (``exp(2u)``) nothing is done.

Also the guard's name (``split_exponential``) where it applied.
"""

from __future__ import annotations

import math

import sympy
from sympy.codegen.cfunctions import expm1

from ...functions import Guard, Ratio
from .. import formats
from .constants import LIMIT_MAX_OPS
from .walk import as_polynomial

# How far below the overflow point of exp(u) the scaled branch starts: the form as
# written multiplies exp(u) by small numbers (2*exp(u)) before it meets its divisor.
MARGIN = 4


def split_exponentials(expr, dtype: str = "float32") -> tuple[sympy.Basic, tuple[str, ...]]:
    """``expr`` with its overflowing exponentials split in halves (see the module
    docstring), each branch of a Piecewise on its own; ``(expr, ())`` where nothing
    applies. Source: the identity ``exp(u) = exp(u/2)**2``, as ``exprel``-type
    functions scale (SciPy's ``special.exprel``)."""
    fmt = formats.get(dtype)
    if fmt is None:
        return expr, ()
    bound = sympy.Integer(math.floor(math.log(fmt.largest)) - MARGIN)
    if isinstance(expr, sympy.Piecewise):
        pieces = [(_split(e, bound) or e, c) for e, c in expr.args]
        out = sympy.Piecewise(*pieces)
    else:
        out = _split(expr, bound) or expr
    return (out, ("split_exponential",)) if out != expr else (expr, ())


def _split(expr, bound):
    """The split form of ``expr`` (one branch), or None. An input read through one
    :class:`~gradgen.functions.Guard` (a branch's safe input) counts as the input."""
    guarded = expr.atoms(Guard)
    if len(guarded) == 1:
        (g,) = guarded
        w = sympy.Dummy("w", real=True)
        inner = expr.xreplace({g: w})
        if inner.free_symbols != {w}:
            return None
        found = _split(inner, bound)
        return None if found is None else found.xreplace({w: g})
    if guarded or len(expr.free_symbols) != 1 or sympy.count_ops(expr) > LIMIT_MAX_OPS:
        return None
    (v,) = expr.free_symbols
    found = expr.atoms(sympy.exp, expm1)
    arguments = {f.args[0] for f in found}
    if len(arguments) != 1:
        return None
    (u,) = arguments
    a, b = u.diff(v), u.subs(v, 0)
    if not (a.is_number and a.is_nonzero and b.is_number and (u - a * v - b) == 0):
        return None
    h = sympy.Dummy("h", positive=True)
    halved = expr.xreplace({sympy.exp(u): h**2, expm1(u): h**2 - 1})
    rest = sympy.expand(halved / h)
    if rest.has(sympy.exp, expm1) or any(
        p.exp > 1 for p in rest.atoms(sympy.Pow) if p.base == h
    ) or not _slower(rest, h, v):
        return None
    half = sympy.exp(u / 2)
    terms = [_ratio(t, h).xreplace({h: half}) for t in sympy.Add.make_args(rest)]
    return sympy.Piecewise((half * sympy.Add(*terms), u > bound), (expr, True))


def _ratio(term, h):
    """A term ``h * n / d`` of the halved expression as ``Ratio(h * n, d)``: one step
    SymPy does not merge with the outer ``h`` (``exp(u/2) * exp(u/2)`` is ``exp(u)``
    again), computed before it meets the outer factor."""
    n, d = sympy.fraction(term / h)
    if term.has(h) and not n.has(h) and not d.has(h) and d != 1:
        return Ratio(h * n, d)
    return term


def _slower(rest, h, v) -> bool:
    """Whether the value outlives its exponential: the coefficient of ``h`` in ``rest``
    (the value divided by ``h = exp(u/2)``, in which ``h`` has no power above 1), the
    limit of value / exp(u) as ``u`` grows, is a ratio of polynomials in ``v`` whose
    denominator has the higher degree (``1/x`` in ``expm1(x)/x``). Anything else
    (``x`` in ``x*exp(x)``, a logarithm) is left alone."""
    numerator, denominator = sympy.fraction(sympy.cancel(rest.coeff(h, 1)))
    top, bottom = as_polynomial(numerator, v), as_polynomial(denominator, v)
    if top is None or bottom is None or not (top.free_symbols | bottom.free_symbols) <= {v}:
        return False
    return top.is_zero or top.degree() < bottom.degree()
