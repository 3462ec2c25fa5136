"""SymPy functions for the numerically stable primitives that TensorFlow provides.

SymPy has no ``sigmoid`` or ``softplus``; :mod:`sympy.codegen.cfunctions` has ``log1p``
and ``expm1``. Each function here knows its derivative (``fdiff``) in terms of stable
primitives, so differentiating a stable forward form gives a stable backward form:
``softplus' = sigmoid`` and ``sigmoid' = sigmoid * (1 - sigmoid)``. Each also evaluates
numerically at any precision (``evalf`` through its defining formula), which the
high-precision reference in the tests relies on.

Definitions (as in ``tf.math.sigmoid`` and ``tf.math.softplus``):
    sigmoid(x) = 1 / (1 + exp(-x))
    softplus(x) = log(1 + exp(x))
"""

from __future__ import annotations

import sympy
from sympy import S
from sympy.codegen.cfunctions import expm1, log1p

__all__ = ["sigmoid", "softplus", "log1p", "expm1"]


class sigmoid(sympy.Function):
    """Logistic function ``1 / (1 + exp(-x))``; real for real ``x``, values in (0, 1)."""

    nargs = 1

    @classmethod
    def eval(cls, arg):
        if arg.is_zero:
            return S.Half

    def fdiff(self, argindex=1):
        s = sigmoid(self.args[0])
        return s * (1 - s)

    def _eval_rewrite_as_exp(self, arg, **kwargs):
        return 1 / (1 + sympy.exp(-arg))

    def _eval_evalf(self, prec):
        return self.rewrite(sympy.exp)._eval_evalf(prec)

    def _eval_conjugate(self):
        return sigmoid(self.args[0].conjugate())

    def _eval_is_real(self):
        return self.args[0].is_real

    def _eval_is_positive(self):
        return self.args[0].is_real or None

    def _eval_is_finite(self):
        return self.args[0].is_real or None


class softplus(sympy.Function):
    """``log(1 + exp(x))``, computed without overflow; real and positive for real ``x``."""

    nargs = 1

    @classmethod
    def eval(cls, arg):
        if arg.is_zero:
            return sympy.log(2)

    def fdiff(self, argindex=1):
        return sigmoid(self.args[0])

    def _eval_rewrite_as_exp(self, arg, **kwargs):
        return sympy.log(1 + sympy.exp(arg))

    _eval_rewrite_as_log = _eval_rewrite_as_exp

    def _eval_evalf(self, prec):
        return self.rewrite(sympy.exp)._eval_evalf(prec)

    def _eval_conjugate(self):
        return softplus(self.args[0].conjugate())

    def _eval_is_real(self):
        return self.args[0].is_real

    def _eval_is_positive(self):
        return self.args[0].is_real or None

    def _eval_is_finite(self):
        return self.args[0].is_real or None
