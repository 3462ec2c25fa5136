"""Cheaper forms whose extra rounding error is bounded in the op's dtype.

Consumes: a real elementwise SymPy expression ready to print (a partial derivative after
:mod:`gradgen.stability` and :mod:`.guards`) and the op's dtype. Guarantees: each
function returns an expression equal to its input as a real function, and applies a
cheaper form only where a bound, checked in the op's dtype, says it adds at most
:data:`MAX_EXTRA_EPS` times the dtype's epsilon of relative error; plus the names of
what it did (for the op's docstring).

A stable rewrite can cost more than the naive form where its accuracy is not needed:
``sigmoid(-u)`` is ``1 - sigmoid(u)`` without the cancellation that loses every digit of
a small complement, but where ``sigmoid(u)`` is computed anyway and the complement is
added to a constant that dominates it, the cancellation's error is absorbed by the
constant, and ``1 - sigmoid(u)`` saves a transcendental (swish's gradient under XLA:
0.85x of TensorFlow's ``silu`` with ``sigmoid(-x)``, 1.0x with ``1 - sigmoid(x)``).
This is Herbie's trade of accuracy for cost, made only where it is provably small.
"""

from __future__ import annotations

import mpmath
import sympy

from ..functions import mul_no_nan, sigmoid
from . import formats
from .guards import as_polynomial, bottom_up

# The extra error a cheaper form may add, relative to the value, in units of the
# dtype's epsilon (spacing of floats at 1): 16 is at most 4 bits.
MAX_EXTRA_EPS = 16

CHEAPER = {
    "absorbed_complement": "c + w*sigmoid(-u) = c + w*(1 - sigmoid(u)) where sigmoid(u) is "
    "computed anyway and c absorbs the complement's rounding (at most "
    f"{MAX_EXTRA_EPS} eps more)",
}


def _polynomial(e, v):
    """``e`` as a :class:`sympy.Poly` in ``v`` alone (numeric coefficients), or None."""
    poly = as_polynomial(e, v)
    return poly if poly is not None and poly.free_symbols == {v} else None


def _mpf(a) -> mpmath.mpf:
    """A real SymPy number (``sqrt(2)``, ``pi/4``, ``3/1000``) at 60 digits; ValueError
    or TypeError where it is not one."""
    value = sympy.N(a, 60)
    if not value.is_real:
        raise ValueError(f"{a} is not real")
    return mpmath.mpf(str(value))


def _candidates(coeffs, lo, hi=None) -> list:
    """The real parts of the roots of the polynomial ``coeffs`` (highest first), clipped
    into ``[lo, hi]``: a superset of the points inside where it is 0 (a complex root's
    real part is one more point to try, never one fewer)."""
    if len(coeffs) < 2:
        return []
    roots = mpmath.polyroots(coeffs, maxsteps=200, extraprec=200)
    out = []
    for r in roots:
        x = max(mpmath.re(r), lo)
        out.append(x if hi is None else min(x, hi))
    return out


def _absorbed(c, w, u, fmt) -> bool:
    """Whether, in ``fmt``, ``c + w * (1 - s)`` with ``s = sigmoid(u)`` (``w`` a
    polynomial in ``v``, ``u = a v + b`` linear) is within :data:`MAX_EXTRA_EPS`
    epsilons of ``c + w * sigmoid(-u)`` relative to the value wherever ``u > 0``.

    Where ``u > 0``, ``1 - s`` is exact (Sterbenz) but carries ``s``'s rounding error,
    at most ``min(eps, exp(-u))`` absolutely (``s`` rounds to 1 once ``exp(-u)`` is
    below ``eps / 2``), so the extra error is at most ``|w| * min(eps, exp(-u))``; where
    ``w`` has the sign of ``c`` the value is at least ``|c|`` in magnitude, so the
    extra relative error is at most ``|w| * min(eps, exp(-u)) / |c|``. With ``W(u) =
    w(v)`` and ``L = log(1/eps)`` this is proved, not sampled: ``W`` has no root in ``u >
    0`` and the sign of ``c`` at ``u = 1``; ``max |W| <= 16 |c|`` on ``(0, L]`` (at
    the ends and the roots of ``W'``) and ``max |W| exp(-u) <= 16 |c| eps`` on ``[L,
    inf)`` (at ``L`` and the roots of ``W' - W``), at 50 digits. (Where ``u <= 0``,
    ``s <= 1/2`` and ``1 - s`` has relative error about ``eps``, as ``sigmoid(-u)`` does;
    near a zero of the sum both forms lose digits to its condition number.) False
    where a number is not real or a root finder does not converge.
    """
    with mpmath.workdps(50):
        eps = mpmath.mpf(2) ** (1 - fmt.precision)
        big_l = -mpmath.log(eps)
        t = sympy.Dummy("u")
        (v,) = u.gens
        a, b = u.all_coeffs()
        poly_w = sympy.Poly(w.as_expr().subs(v, (t - b) / a), t)
        try:
            big_w, dw, w_minus = ([_mpf(k) for k in q.all_coeffs()]
                                  for q in (poly_w, poly_w.diff(t), poly_w.diff(t) - poly_w))
            cc = abs(_mpf(c))
            zeros = _candidates(big_w, mpmath.mpf(0))
            near = [mpmath.mpf(0), big_l] + _candidates(dw, mpmath.mpf(0), big_l)
            far = [big_l] + _candidates(w_minus, big_l)  # W' - W: where W exp(-u) peaks
        except (ValueError, TypeError, mpmath.libmp.NoConvergence):
            return False
        value = lambda x: mpmath.polyval(big_w, x)  # noqa: E731
        scale = lambda x: mpmath.polyval([abs(k) for k in big_w], abs(x))  # noqa: E731
        if any(z > 0 and abs(value(z)) <= mpmath.mpf(10) ** -30 * scale(z) for z in zeros):
            return False  # a (near) root where u > 0: w changes sign or vanishes there
        if (value(mpmath.mpf(1)) > 0) != bool(c > 0):
            return False
        if max(abs(value(x)) for x in near) > MAX_EXTRA_EPS * cc:
            return False
        return max(abs(value(x)) * mpmath.exp(-x) for x in far) <= MAX_EXTRA_EPS * cc * eps


def absorbed_complements(expr, dtype: str) -> tuple[sympy.Basic, tuple[str, ...]]:
    """``c + w * sigmoid(-u)`` -> ``c + w * (1 - sigmoid(u))`` in one input ``v``, where
    ``sigmoid(u)`` also occurs in ``expr`` (so the complement costs one subtraction, not
    a second sigmoid), ``c`` is a nonzero number, ``w`` is a polynomial in ``v`` (not
    constant) and ``u`` a linear one, and :func:`_absorbed` proves the bound in
    ``dtype``; also ``c + mul_no_nan(w, sigmoid(-u))`` (where :func:`.guards.
    vanishing_products` guarded a ``w`` that can overflow: ``x * sigmoid(2 * x)``'s
    ``2 x``) -> ``c + mul_no_nan(w, 1 - sigmoid(u))``.

    Swish's gradient ``sigmoid(x) * (x * sigmoid(-x) + 1)`` becomes ``sigmoid(x) * (x *
    (1 - sigmoid(x)) + 1)`` in float32 (at most 15.9 eps more, at x = 15.9; 7.5 eps worst
    against 50 digits in tests/test_cheaper.py) and bfloat16/float16; in float64 the
    bound is 36 eps (at x = 36) and ``sigmoid(-x)`` stays. The same form as TensorFlow's
    own ``silu`` gradient (``nn_impl.swish``). The bound is relative to the sum it
    replaces where ``u > 0``; where ``u <= 0`` the complement is as accurate as
    ``sigmoid(-u)`` (about ``eps`` relative), but near a zero of the sum (swish's
    minimum at x = -1.2785) either error is amplified by its condition number: there the
    absolute error measured 3.8e-7 against 1.3e-7 with ``sigmoid(-x)`` (float32, a
    review's 4001 points in [-1.5, -1]). Elsewhere the expression is unchanged.
    """
    fmt = formats.get(dtype)
    if fmt is None:
        return expr, ()
    present = {f.args[0] for f in expr.atoms(sigmoid)}
    used = set()

    def fix(e):
        if not isinstance(e, sympy.Add) or len(e.args) != 2 or len(e.free_symbols) != 1:
            return None
        c, t = e.as_coeff_Add()
        if not c.is_Number or c == 0:
            return None
        guarded = isinstance(t, mul_no_nan)  # mul_no_nan(w, sigmoid(-u)): vanishing_product
        if guarded:
            w_expr, sig = t.args
            if not isinstance(sig, sigmoid) or -sig.args[0] not in present:
                return None
        elif isinstance(t, sympy.Mul):
            sigmoids = [f for f in t.args if isinstance(f, sigmoid) and -f.args[0] in present]
            if len(sigmoids) != 1:
                return None
            sig = sigmoids[0]
            w_expr = t / sig
        else:
            return None
        (v,) = e.free_symbols
        u = -sig.args[0]
        w, u_poly = _polynomial(w_expr, v), _polynomial(u, v)
        if w is None or u_poly is None or w.degree() < 1 or u_poly.degree() != 1:
            return None
        if not _absorbed(c, w, u_poly, fmt):
            return None
        used.add("absorbed_complement")
        # guarded: 1 - sigmoid(u) is 0 wherever sigmoid(-u) underflowed to 0 (s rounds to
        # 1 once exp(-u) < eps / 2), so the guard still gives 0 where w overflows
        complement = 1 - sigmoid(u)
        return c + (mul_no_nan(w_expr, complement) if guarded else w_expr * complement)

    out = bottom_up(expr, fix)
    return out, tuple(sorted(used))
