"""TensorFlow's NaN-safe products: ``xlogy``, ``xlog1py``, ``xdivy`` and ``mul_no_nan``.

Each is 0 where its factor is 0, also where the other factor is infinite or undefined
(``0 * log(0)``), and has exact partials at that point (TensorFlow's own gradient of
``tf.math.xlogy`` in x is 0 at x = 0, which gradgen does not copy).
"""

from __future__ import annotations

import sympy
from sympy import S
from sympy.codegen.cfunctions import log1p


class xlogy(sympy.Function):
    """``x * log(y)``, defined as 0 where ``x = 0`` (``tf.math.xlogy``).

    Partials (exact, also at x = 0: ``xlogy(h, y) = h * log(y)``):
        d/dx = log(y); d/dy = xdivy(x, y).
    TensorFlow's own gradient of ``tf.math.xlogy`` returns 0 for d/dx at x = 0, which is
    wrong unless y = 1; gradgen uses the exact partial.
    """

    nargs = 2

    @classmethod
    def eval(cls, x, y):
        if x.is_zero:
            return S.Zero
        if y == 1:
            return S.Zero

    def fdiff(self, argindex=1):
        x, y = self.args
        return sympy.log(y) if argindex == 1 else xdivy(x, y)

    def _eval_evalf(self, prec):
        x, y = self.args
        if x.is_zero:
            return S.Zero
        return (x * sympy.log(y))._eval_evalf(prec)

    def _eval_is_real(self):
        x, y = self.args
        return (x.is_real and y.is_positive) or None


class xlog1py(sympy.Function):
    """``x * log1p(y)``, defined as 0 where ``x = 0`` (``tf.math.xlog1py``; SciPy's
    ``special.xlog1py``).

    Partials (exact, also at x = 0): d/dx = log1p(y); d/dy = xdivy(x, 1 + y).
    The cross-entropy term ``(1 - t) * log(1 - p)`` becomes ``xlog1py(1 - t, -p)``: 0 at
    t = p = 1, where ``0 * log(0)`` would be NaN.
    """

    nargs = 2

    @classmethod
    def eval(cls, x, y):
        if x.is_zero or y.is_zero:
            return S.Zero

    def fdiff(self, argindex=1):
        x, y = self.args
        return log1p(y) if argindex == 1 else xdivy(x, 1 + y)

    def _eval_evalf(self, prec):
        x, y = self.args
        if x.is_zero:
            return S.Zero
        return (x * sympy.log(1 + y))._eval_evalf(prec)

    def _eval_is_real(self):
        x, y = self.args
        return (x.is_real and (y + 1).is_positive) or None


class xdivy(sympy.Function):
    """``x / y``, defined as 0 where ``x = 0`` (``tf.math.xdivy``).

    Partials: d/dx = 1/y; d/dy = xdivy(-xdivy(x, y), y) (0 where x = 0, where xdivy is
    0 for every y): the quotient first, as :class:`Ratio`'s, since ``y**2`` overflows
    where ``(x/y)/y`` need not (Cauchy's ``c**2/2*log(1 + (x/c)**2)`` holds
    ``xdivy(c**2, 1 + t)``; its second derivative had the wrong sign at x = 1e10 in
    float32, where ``(1 + t)**2`` is inf).

    A factor common to ``x`` and ``y`` cancels (:func:`_cancelled`): where it is 0 the
    quotient's value is its limit, not the convention 0. ``xdivy(p, p)`` is 1 and
    ``xdivy(-p, p**2)`` is ``-1/p``: the derivatives of ``xlogy(p, p)`` (entropy's
    ``p*log(p)``), whose second derivative was ``xdivy(-p, p*p) - 2/p``: +inf where
    ``p*p`` underflows (p = 1e-20 in float32), exactly -1/p. A numerator that is a
    number other than 0 is a plain quotient.
    """

    nargs = 2

    @classmethod
    def eval(cls, x, y):
        if x.is_zero:
            return S.Zero
        if x.is_number and x.is_nonzero:
            return x / y
        return _cancelled(x, y)

    def fdiff(self, argindex=1):
        x, y = self.args
        return 1 / y if argindex == 1 else xdivy(-xdivy(x, y), y)

    def _eval_evalf(self, prec):
        x, y = self.args
        if x.is_zero:
            return S.Zero
        return (x / y)._eval_evalf(prec)

    def _eval_is_real(self):
        x, y = self.args
        return (x.is_real and y.is_real) or None


def _cancelled(x, y):
    """``xdivy(x / g, y / g)`` for the product ``g`` of the powers (positive integer
    exponents) of the same non-numeric bases that are factors of both ``x`` and ``y``;
    None where they share none."""
    top, bottom = _integer_powers(x), _integer_powers(y)
    common = {b: min(e, bottom[b]) for b, e in top.items() if b in bottom}
    if not common:
        return None
    g = sympy.Mul(*(b**e for b, e in common.items()))
    return xdivy(x / g, y / g)


def _integer_powers(e) -> dict:
    """{base: exponent} of the factors of the product ``e`` that are positive integer
    powers of a non-numeric base."""
    out = {}
    for f in sympy.Mul.make_args(e):
        base, exp = f.as_base_exp()
        if exp.is_Integer and exp > 0 and not base.is_number:
            out[base] = int(exp)
    return out


class mul_no_nan(sympy.Function):
    """``x * y``, defined as 0 where ``y = 0``, even where ``x`` is inf or NaN
    (``tf.math.multiply_no_nan``).

    Partials: d/dx = y; d/dy = x (TensorFlow's ``MulNoNan`` gradient takes
    ``mul_no_nan(upstream, y)`` for x, so x's cotangent is 0 where y is).
    """

    nargs = 2

    @classmethod
    def eval(cls, x, y):
        if y.is_zero:
            return S.Zero

    def fdiff(self, argindex=1):
        x, y = self.args
        return y if argindex == 1 else x

    def _eval_evalf(self, prec):
        x, y = self.args
        return (x * y)._eval_evalf(prec)

    def _eval_is_real(self):
        x, y = self.args
        return (x.is_real and y.is_real) or None
