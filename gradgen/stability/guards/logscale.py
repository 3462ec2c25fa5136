"""Products of wide-range factors, from the sum of their logarithms where the product
as computed is not finite.

Receives: a real elementwise SymPy expression ready to print (a derived order's
partial). Returns (:func:`log_products`): the expression with each of its top-level
products (a product, or each term of a sum, each branch of a Piecewise, each term of a
product's one sum) that holds an exponential or a power of degree 2 or more (or -2 or
less) and two or more other factors that are not numbers written as ``finite_or(p,
sign * exp(log|f1| + log|f2| + ...))`` (the runtime helper ``_finite_or``: ``p`` where
it is finite), and the guard's name (``log_product``) where it applied.

Why: a derived order multiplies more factors of wide range than the first; Morse's
second derivative ``2*depth*width**2*exp(-u)*(2*exp(-u) - 1)`` is inf * 0 = NaN where
``width**2`` overflows and ``exp(-u)`` underflows to 0, though the product is finite
(or 0), and Lennard-Jones' ``eps*(sigma/r)**6/r**2`` overflowed at r = 4.8e-26,
sigma/r = -0.046, eps = 1.5e-34 in float32 (``(sigma/r)**6/r/r`` first); no fixed order
of four factors keeps every intermediate in range. The logarithms are in range
wherever the factors are (a factor that overflows on its own still does): ``exp``'s
logarithm is its argument, a power's is its exponent times the base's, and ``exp`` of
the sum is the product, 0 where it is far below the range. Where the product as
computed is finite it is kept (the sum of logarithms loses ``|log p|`` ulps, as ``exp``
does); where a factor is NaN, or the product has no value (0 * inf of a 0 and a pole:
``-inf + inf``), the result is NaN as before. Source: the identity ``prod |f_i| =
exp(sum log|f_i|)``, the log-domain arithmetic that log-sum-exp and SciPy's
``special`` functions (``xlogy``, ``gammaln`` ratios) use to keep products of
wide-range factors in range.
"""

from __future__ import annotations

import sympy

from ...functions import LogAbs, finite_or

# A product is guarded where it has more factors that are not numbers than this: with
# two, nothing meets first.
_OTHERS = 2


def log_products(expr) -> tuple[sympy.Basic, tuple[str, ...]]:
    """``expr`` with its top-level products of wide-range factors computed from their
    logarithms where they are not finite (see the module docstring); ``(expr, ())``
    where none is one.

    Args:
        expr: a real elementwise expression, ready to print.

    Returns:
        The expression and ``("log_product",)`` where it applied.
    """
    out = _top(expr)
    return (out, ("log_product",)) if out != expr else (expr, ())


def _top(e):
    """``e`` with each top-level product guarded: through sums and Piecewise values,
    and over the terms of a product's one sum (``depth*exp(-u)*(w*t*exp(-u) + ...)``,
    whose terms overflow and underflow inside the sum)."""
    if isinstance(e, sympy.Add):
        return sympy.Add(*(_top(t) for t in e.args))
    if isinstance(e, sympy.Piecewise):
        return sympy.Piecewise(*((_top(v), c) for v, c in e.args))
    if not isinstance(e, sympy.Mul):
        return e
    sums = [f for f in e.args if isinstance(f, sympy.Add)]
    if len(sums) == 1 and any(_wide(f) for f in e.args):
        rest = sympy.Mul(*[f for f in e.args if f is not sums[0]])
        terms = [_guarded(rest * t) for t in sums[0].args]
        if any(isinstance(t, finite_or) for t in terms):
            return sympy.Add(*terms)
    return _guarded(e)


def _guarded(p):
    """``finite_or(p, sign * exp(sum of logs))``, or ``p`` where it holds no wide
    factor (:func:`_wide`) or fewer than three factors that are not numbers."""
    if not isinstance(p, sympy.Mul):
        return p
    factors = [f for f in p.args if not f.is_number]
    if len(factors) <= _OTHERS or not any(_wide(f) for f in factors):
        return p
    found = _log_sign(p)
    if found is None:
        return p
    log, signs = found
    return finite_or(p, sympy.Mul(*signs) * sympy.exp(log))


def _log_sign(f) -> tuple | None:
    """``(log|f|, signs)``: ``f``'s logarithm as a sum that cannot overflow where the
    factors are finite (an exponential's argument; a power's exponent times its base's;
    a product's and a Piecewise's parts'), and the factors whose product is ``f``'s
    sign (none for an exponential or an even power); None where a part is the number 0
    (a Piecewise's 0 branch: no finite logarithm)."""
    u = _exponent(f)
    if u is not None:
        return u, []
    if f.is_number:
        if f.is_zero is not False:
            return None
        return sympy.log(abs(f)), ([sympy.sign(f)] if f.is_negative else [])
    if isinstance(f, sympy.Pow) and f.exp.is_Integer:
        found = _log_sign(f.base)
        return found and (f.exp * found[0], found[1] if f.exp % 2 else [])
    if isinstance(f, sympy.Mul):
        parts = [_log_sign(a) for a in f.args]
        if any(part is None for part in parts):
            return None
        return sympy.Add(*(log for log, _ in parts)), [s for _, ss in parts for s in ss]
    if isinstance(f, sympy.Piecewise):
        parts = [(_log_sign(v), c) for v, c in f.args]
        if any(part is None for part, _ in parts):
            return None
        log = sympy.Piecewise(*((log, c) for (log, _), c in parts))
        sign = sympy.Piecewise(*((sympy.Mul(*signs), c) for (_, signs), c in parts))
        return log, [sign]
    return LogAbs(f), [sympy.sign(f)]


def _wide(f) -> bool:
    """Whether ``f`` can overflow or underflow where its base is in range: an
    exponential, or a power of degree 2 or more (or -2 or less)."""
    return _exponent(f) is not None or (
        isinstance(f, sympy.Pow) and f.exp.is_Integer and abs(f.exp) >= 2
        and not f.base.is_number)


def _exponent(f):
    """The logarithm of ``f`` where ``f`` is ``exp(u)`` or an integer power of one
    (``u`` times the power), else None."""
    if isinstance(f, sympy.exp):
        return f.args[0]
    if isinstance(f, sympy.Pow) and f.exp.is_Integer and isinstance(f.base, sympy.exp):
        return f.exp * f.base.args[0]
    return None
