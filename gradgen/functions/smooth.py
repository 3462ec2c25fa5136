"""Smooth functions computed in stable forms: sigmoid, softplus, logsumexp, logcosh,
log1mexp, erfc kept as written, erfcx, log_erfc and hypot.

Each knows its derivative (``fdiff``) in stable primitives, so differentiating a stable
forward gives a stable backward (``softplus' = sigmoid``), and evaluates at any
precision through its defining formula (``_eval_evalf``).
"""

from __future__ import annotations

import sympy
from sympy import S
from sympy.codegen.cfunctions import expm1

from .base import RealUnary
from .internal import nan_outside
from .nan_safe import xdivy


class sigmoid(RealUnary):
    """Logistic function ``1 / (1 + exp(-x))``; real for real ``x``, values in (0, 1)."""

    at_zero = S.Half
    defined_by = sympy.exp

    def fdiff(self, argindex=1):
        # sigmoid(x) * (1 - sigmoid(x)), written without the cancellation in 1 - s
        # that loses every digit for x > 17 in float32.
        x = self.args[0]
        return sigmoid(x) * sigmoid(-x)

    def _eval_rewrite_as_exp(self, arg, **kwargs):
        return 1 / (1 + sympy.exp(-arg))

    def _eval_conjugate(self):
        return sigmoid(self.args[0].conjugate())

    def _eval_is_positive(self):
        return self.args[0].is_real or None

    def _eval_is_finite(self):
        return self.args[0].is_real or None


class softplus(RealUnary):
    """``log(1 + exp(x))``, computed without overflow; real and positive for real ``x``."""

    at_zero = sympy.log(2)
    defined_by = sympy.exp

    def fdiff(self, argindex=1):
        return sigmoid(self.args[0])

    def _eval_rewrite_as_exp(self, arg, **kwargs):
        return sympy.log(1 + sympy.exp(arg))

    _eval_rewrite_as_log = _eval_rewrite_as_exp

    def _eval_conjugate(self):
        return softplus(self.args[0].conjugate())

    def _eval_is_positive(self):
        return self.args[0].is_real or None

    def _eval_is_finite(self):
        return self.args[0].is_real or None


class logsumexp(sympy.Function):
    """``log(exp(u1) + ... + exp(un))``, computed as ``m + log(sum(exp(ui - m)))`` with
    ``m`` the largest ``ui``, so it neither overflows nor underflows to ``-inf``.
    ``logsumexp(0, w)`` is ``softplus(w)``.

    Partials: d/dui = 1 / (1 + sum over j != i of exp(uj - ui)), the softmax weight of
    ui written with differences of inputs only (for two terms: ``sigmoid(ui - uj)``);
    ``exp(ui - logsumexp(u))`` would lose the digits of ``ui - logsumexp(u)`` when the
    terms are large (|u| = 1e4 in float32: an error of 5e-4).
    """

    @classmethod
    def eval(cls, *args):
        if len(args) == 1:
            return args[0]
        if len(args) == 2 and S.Zero in args:
            return softplus(args[0] if args[1] == 0 else args[1])
        ordered = tuple(sorted(args, key=sympy.default_sort_key))
        if ordered != tuple(args):  # canonical order, so equal sums are equal (CSE)
            return cls(*ordered)

    def fdiff(self, argindex=1):
        mine = self.args[argindex - 1]
        others = [a for i, a in enumerate(self.args) if i != argindex - 1]
        return softmax_weight(mine, others)

    def _eval_rewrite_as_exp(self, *args, **kwargs):
        return sympy.log(sympy.Add(*(sympy.exp(a) for a in args)))

    def _eval_evalf(self, prec):
        return self.rewrite(sympy.exp)._eval_evalf(prec)

    def _eval_is_real(self):
        return all(a.is_real for a in self.args) or None


def softmax_weight(mine, others):
    """``exp(mine) / (exp(mine) + sum(exp(o) for o in others))`` in its stable form
    ``1 / (1 + sum(exp(o - mine)))`` (``sigmoid(mine - o)`` for one other term)."""
    if len(others) == 1:
        return sigmoid(mine - others[0])
    return 1 / (1 + sympy.Add(*(sympy.exp(o - mine) for o in others)))


class logcosh(RealUnary):
    """``log(cosh(x))``, computed as ``|x| + softplus(-2|x|) - log(2)`` (no overflow of
    cosh for |x| > 89 in float32) and as ``-log1p(-tanh(x)**2) / 2`` for |x| < 1
    (``cosh(x) - 1`` without cancellation near 0); derivative ``tanh(x)``."""

    at_zero = S.Zero
    defined_by = sympy.log

    def fdiff(self, argindex=1):
        return sympy.tanh(self.args[0])

    def _eval_rewrite_as_log(self, arg, **kwargs):
        return sympy.log(sympy.cosh(arg))

    def _eval_is_nonnegative(self):
        return self.args[0].is_real or None


class log1mexp(sympy.Function):
    """``log(1 - exp(x))`` for ``x <= 0`` (PyTensor's convention; JAX's ``log1mexp(a)`` is
    this at ``x = -a``): -inf at 0, NaN for x > 0 as written, real for x < 0.

    Computed as in Maechler (2012), "Accurately computing log(1 - exp(-|a|))", Rmpfr
    vignette (https://cran.r-project.org/package=Rmpfr/vignettes/log1mexp-note.pdf):
    ``log(-expm1(x))`` for x > -log(2) (near 0, where 1 - exp(x) cancels) and
    ``log1p(-exp(x))`` below (where -expm1(x) is near 1 and its log would lose the
    digits of exp(x)). ``log1p(-exp(x))`` alone is -inf at x = -1e-10 in float32
    (the value is -23.03); ``log(-expm1(x))`` alone is 0 at x = -40 in float32 (the
    value is -4.2e-18).

    Derivative: ``exp(x) / expm1(x)`` (= -exp(x) / (1 - exp(x))): no cancellation, 0
    (not inf/inf) for x -> -inf, and its own derivative is finite there too; NaN for
    x > 0, as the value.
    """

    nargs = 1

    @classmethod
    def eval(cls, arg):
        if arg.is_zero:
            return S.NegativeInfinity

    def fdiff(self, argindex=1):
        # NaN for x > 0, where the value is NaN too (exp(x) / expm1(x) alone is finite
        # there: a gradient outside the domain would hide the error)
        x = self.args[0]
        return nan_outside(sympy.exp(x) / expm1(x), sympy.Le(x, 0))

    def _eval_rewrite_as_log(self, arg, **kwargs):
        return sympy.log(1 - sympy.exp(arg))

    _eval_rewrite_as_exp = _eval_rewrite_as_log

    def _eval_evalf(self, prec):
        return self.rewrite(sympy.log)._eval_evalf(prec)

    def _eval_is_real(self):
        return self.args[0].is_negative or None

    def _eval_is_negative(self):
        return self.args[0].is_negative or None

    def _eval_is_finite(self):
        return self.args[0].is_negative or None


class erfc(sympy.erfc):
    """``erfc(x) = 1 - erf(x)`` kept as written: SymPy's own ``erfc(-x)`` evaluates to
    ``2 - erfc(x)``, which cancels to 0 for x < -6 in float64 (erfc(-x) is 2e-17 there).
    Printed as ``tf.math.erfc``; derivative ``-2 exp(-x**2) / sqrt(pi)`` (SymPy's)."""

    @classmethod
    def eval(cls, arg):
        if arg.is_Number:
            return sympy.erfc(arg)


class erfcx(RealUnary):
    """Scaled complementary error function ``exp(x**2) * erfc(x)``; positive for real x,
    about ``1 / (x sqrt(pi))`` for large x, where ``exp(x**2)`` overflows and ``erfc(x)``
    underflows (x > 9.3 in float32). Computed by the ``_erfcx`` helper.

    Derivative: ``2 x erfcx(x) - 2 / sqrt(pi)`` (exact; it cancels for large x, where it
    is about ``-1 / (sqrt(pi) x**2)``, so second derivatives of ``log_erfc`` there come
    from TensorFlow's autodiff of the helper's asymptotic series instead).
    """

    at_zero = S.One
    defined_by = sympy.exp

    def fdiff(self, argindex=1):
        x = self.args[0]
        return 2 * x * erfcx(x) - 2 / sympy.sqrt(sympy.pi)

    def _eval_rewrite_as_exp(self, arg, **kwargs):
        return sympy.exp(arg**2) * sympy.erfc(arg)

    def _eval_is_positive(self):
        return self.args[0].is_real or None


class erfcx_recip(RealUnary):
    """``1 / erfcx(x) = exp(-x**2) / erfc(x)``, about ``x sqrt(pi)`` for large x, where
    erfcx(x) is subnormal (x > 4.8e37 in float32: 0 under flush-to-zero, so 1 / erfcx(x)
    would be inf where the value is finite). Computed by the ``_erfcx_recip`` helper:
    ``x sqrt(pi)`` over erfcx's asymptotic series (DLMF 7.12.1) from x = 10.

    Derivative: ``erfcx_recip_slope(x)``: the quotient rule with erfcx's derivative,
    ``(2 / sqrt(pi)) erfcx_recip(x)**2 - 2 x erfcx_recip(x)``, cancels for large x
    (about ``sqrt(pi)`` from terms about ``2 pi x**2``: all digits lost at x = 1e4 in
    float32).
    """

    at_zero = S.One
    defined_by = sympy.exp

    def fdiff(self, argindex=1):
        return erfcx_recip_slope(self.args[0])

    def _eval_rewrite_as_exp(self, arg, **kwargs):
        return sympy.exp(-arg**2) / sympy.erfc(arg)

    def _eval_is_positive(self):
        return self.args[0].is_real or None


class erfcx_recip_slope(RealUnary):
    """The derivative of ``erfcx_recip``, ``2 r(x) m(x)`` with ``r = erfcx_recip`` and
    ``m(x) = r(x) / sqrt(pi) - x`` (about ``1 / (2x)`` for large x, where that
    difference cancels: the normal distribution's inverse Mills ratio less its
    argument, in ``x = z / sqrt(2)``). Bounded: 0 as x -> -inf, ``sqrt(pi)`` as x ->
    inf. Computed in float64 by the ``_erfcx_recip_slope`` helper, ``m`` from erfcx's
    asymptotic series without its first term from x = 10 (DLMF 7.12.1), so that neither
    the cancellation nor ``r``'s overflow (beyond x = 1.9e38 in float32) nor ``m``'s
    underflow reaches it. ``log(erfc(u))``'s second derivative is
    ``-2 erfcx_recip_slope(u) / sqrt(pi)``.

    Derivative: ``2 xdivy(s**2, r) + 2 x s - 2 r`` with ``s = erfcx_recip_slope(x)``
    (the product rule with ``m = s / (2r)``; 0 where s underflows with r). Its last two
    terms cancel for large x: third derivatives of ``log(erfc(u))`` lose digits there.
    """

    at_zero = 2 / sympy.sqrt(sympy.pi)
    defined_by = sympy.exp

    def fdiff(self, argindex=1):
        x = self.args[0]
        r = erfcx_recip(x)
        return 2 * xdivy(self**2, r) + 2 * x * self - 2 * r

    def _eval_rewrite_as_exp(self, arg, **kwargs):
        r = sympy.exp(-arg**2) / sympy.erfc(arg)
        return 2 * r * (r / sympy.sqrt(sympy.pi) - arg)

    def _eval_is_positive(self):
        return self.args[0].is_real or None


class log_erfc(RealUnary):
    """``log(erfc(x))`` without the underflow of erfc (to 0 for x > 9.2 in float32,
    x > 26.6 in float64, so log gives -inf and the derivative 0/0): for large x it is
    ``-x**2 + log(erfcx(x))``. Computed by the ``_log_erfc`` helper.

    Derivative: ``-2 erfcx_recip(x) / sqrt(pi)``, that is ``-2 exp(-x**2) / (sqrt(pi)
    erfc(x))`` without the 0/0 (about ``-2x`` for large x), and without the inf of
    ``1 / erfcx(x)`` where erfcx is subnormal (x > 4.8e37 in float32).
    """

    at_zero = S.Zero
    defined_by = sympy.log

    def fdiff(self, argindex=1):
        return -2 * erfcx_recip(self.args[0]) / sympy.sqrt(sympy.pi)

    def _eval_rewrite_as_log(self, arg, **kwargs):
        return sympy.log(sympy.erfc(arg))


class hypot(sympy.Function):
    """``sqrt(t1**2 + t2**2 + ...)`` computed as ``m * sqrt(sum((ti / m)**2))`` with
    ``m = max |ti|``, so it neither overflows (|t| > 1.8e19 in float32) nor underflows
    (|t| < 1e-19) where the result is representable. Real and nonnegative for real
    arguments; the arguments are kept in canonical order (equal norms are equal).

    Partials: d/dti = ti / hypot(t), 0/0 at the origin, where gradgen's ``norm_zero``
    guard gives the subgradient 0.
    """

    @classmethod
    def eval(cls, *args):
        if not args:
            raise ValueError("hypot needs at least one argument")
        if len(args) == 1:
            return sympy.Abs(args[0])
        ordered = tuple(sorted(args, key=sympy.default_sort_key))
        if ordered != tuple(args):
            return cls(*ordered)

    def fdiff(self, argindex=1):
        return self.args[argindex - 1] / self

    def _eval_rewrite_as_sqrt(self, *args, **kwargs):
        return sympy.sqrt(sympy.Add(*(a**2 for a in args)))

    def _eval_evalf(self, prec):
        return self.rewrite(sympy.sqrt)._eval_evalf(prec)

    def _eval_is_real(self):
        return all(a.is_real for a in self.args) or None

    def _eval_is_nonnegative(self):
        return all(a.is_real for a in self.args) or None

    def _eval_is_positive(self):
        # hypot(1, x) is never 0: no guard against dividing by it
        if all(a.is_real for a in self.args) and any(a.is_zero is False for a in self.args):
            return True
        return None
