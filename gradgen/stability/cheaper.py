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

from ..functions import sigmoid
from .audit import formats
from .guards import _bottom_up, _poly

# The extra error a cheaper form may add, relative to the value, in units of the
# dtype's epsilon (spacing of floats at 1): 16 is at most 4 bits.
MAX_EXTRA_EPS = 16
GRID_POINTS = 400  # points per decade-spanning side of the bound's check

CHEAPER = {
    "absorbed_complement": "c + w*sigmoid(-u) = c + w*(1 - sigmoid(u)) where sigmoid(u) is "
    "computed anyway and c absorbs the complement's rounding (at most "
    f"{MAX_EXTRA_EPS} eps more)",
}


def _polynomial(e, v):
    """``e`` as a :class:`sympy.Poly` in ``v`` alone (numeric coefficients), or None."""
    poly = _poly(e, v)
    return poly if poly is not None and poly.free_symbols == {v} else None


def _real_roots(coeffs) -> list:
    if len(coeffs) < 2:
        return []
    roots = mpmath.polyroots(coeffs, maxsteps=200, extraprec=100)
    return [mpmath.re(r) for r in roots if abs(mpmath.im(r)) <= 1e-30 * (1 + abs(r))]


def _absorbed(c, w, u, fmt) -> bool:
    """Whether, in ``fmt``, ``c + w * (1 - s)`` with ``s = sigmoid(u)`` (``w``, ``u``
    polynomials in ``v``) is within :data:`MAX_EXTRA_EPS` epsilons of ``c + w *
    sigmoid(-u)`` relative to the value, for every finite ``v``.

    Where ``u <= 0``, ``s <= 1/2`` and ``1 - s`` is as accurate as ``sigmoid(-u)``
    (relative error ``eps``). Where ``u > 0``, ``1 - s`` is exact (Sterbenz) but carries
    ``s``'s rounding error, at most ``min(eps, exp(-u))`` absolutely (``s`` rounds to 1
    once ``exp(-u)`` is below ``eps / 2``). So the extra error is at most ``|w| *
    min(eps, exp(-u))``; where ``w`` has the sign of ``c`` the value is at least
    ``|c|`` in magnitude, so the extra relative error is at most ``|w| * min(eps,
    exp(-u)) / |c|``. Checked at 50 digits on a geometric grid of ``|v|`` from the
    smallest normal number to the largest and at the roots of ``u = log(1/eps)``
    (where ``|w| * min(...)`` of ``w = u`` peaks), on both sides of 0; and ``w`` must
    have no real root where ``u > 0`` (it would change sign there).
    """
    eps = mpmath.mpf(2) ** (1 - fmt.precision)
    with mpmath.workdps(50):
        log_eps = mpmath.log(eps)
        wc = [mpmath.mpf(sympy.Float(a, 60)) for a in w.all_coeffs()]
        uc = [mpmath.mpf(sympy.Float(a, 60)) for a in u.all_coeffs()]
        wf = lambda x: mpmath.polyval(wc, x)  # noqa: E731
        uf = lambda x: mpmath.polyval(uc, x)  # noqa: E731
        try:
            w_roots = _real_roots(wc)
            special = _real_roots(uc[:-1] + [uc[-1] + log_eps])  # u = log(1/eps)
        except mpmath.libmp.NoConvergence:
            return False
        if any(uf(r) > 0 for r in w_roots):
            return False
        lo, hi = mpmath.log(fmt.tiny), mpmath.log(fmt.largest)
        grid = [mpmath.exp(lo + (hi - lo) * k / GRID_POINTS) for k in range(GRID_POINTS + 1)]
        positive = bool(c > 0)
        limit = mpmath.log(MAX_EXTRA_EPS) + mpmath.log(abs(mpmath.mpf(float(c))))
        for t in grid + special:
            for x in {t, -t} if t > 0 else {t}:
                ux = uf(x)
                if ux <= 0:
                    continue
                wx = wf(x)
                if wx == 0:
                    continue
                if (wx > 0) != positive:
                    return False
                if mpmath.log(abs(wx)) + min(log_eps, -ux) - log_eps > limit:
                    return False
    return True


def absorbed_complements(expr, dtype: str) -> tuple[sympy.Basic, tuple[str, ...]]:
    """``c + w * sigmoid(-u)`` -> ``c + w * (1 - sigmoid(u))`` in one input ``v``, where
    ``sigmoid(u)`` also occurs in ``expr`` (so the complement costs one subtraction, not
    a second sigmoid), ``c`` is a nonzero number, ``w`` and ``u`` are polynomials in ``v``
    (``w`` not constant), and :func:`_absorbed` holds in ``dtype``.

    Swish's gradient ``sigmoid(x) * (x * sigmoid(-x) + 1)`` becomes ``sigmoid(x) * (x *
    (1 - sigmoid(x)) + 1)`` in float32 (at most 15.9 eps more, at x = 15.9; 7.5 eps worst
    against 50 digits in tests/test_cheaper.py) and bfloat16/float16; in float64 the
    bound is 36 eps (at x = 36) and ``sigmoid(-x)`` stays. The same form as TensorFlow's
    own ``silu`` gradient (``nn_impl.swish``). The bound is relative to the sum it
    replaces: where that sum cancels against other terms, the extra error grows as the
    stable form's own rounding error does. Elsewhere the expression is unchanged.
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
        if not (c.is_Number and c != 0 and isinstance(t, sympy.Mul)):
            return None
        sigmoids = [f for f in t.args if isinstance(f, sigmoid) and -f.args[0] in present]
        if len(sigmoids) != 1:
            return None
        (v,) = e.free_symbols
        u = -sigmoids[0].args[0]
        w, u_poly = _polynomial(t / sigmoids[0], v), _polynomial(u, v)
        if w is None or u_poly is None or w.degree() < 1 or u_poly.degree() < 1:
            return None
        if not _absorbed(c, w, u_poly, fmt):
            return None
        used.add("absorbed_complement")
        return c + (t / sigmoids[0]) * (1 - sigmoid(u))

    out = _bottom_up(expr, fix)
    return out, tuple(sorted(used))
