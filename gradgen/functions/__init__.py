"""The functions gradgen knows: SymPy classes for TensorFlow's stable primitives and
gradgen's kink conventions, and the registry that declares each function once.

Read in this order:

* :mod:`.base`, :mod:`.internal`, :mod:`.nan_safe`, :mod:`.smooth`, :mod:`.kinks`: the
  SymPy classes SymPy lacks (``sigmoid``, ``softplus``, ``xlogy``, ``logsumexp``...).
  Each knows its derivative (``fdiff``) in terms of stable primitives, so differentiating
  a stable forward form gives a stable backward form (``softplus' = sigmoid``), and
  evaluates numerically at any precision (``evalf`` through its defining formula);
* :mod:`.registry`: :class:`Function`, the declaration of one function (spellings,
  arguments, TensorFlow spelling or runtime helper, NumPy and mpmath implementations,
  domain, singular points);
* :mod:`.numeric`: the NumPy and mpmath implementations the declarations name;
* :mod:`.declarations`: every declaration, and the lookups the parser, printer,
  verification and audit use.

Definitions (as TensorFlow's ``tf.math`` functions of the same names):
    sigmoid(x) = 1 / (1 + exp(-x))
    softplus(x) = log(1 + exp(x))
    xlogy(x, y) = x * log(y), and 0 where x = 0 (also when y = 0)
    xdivy(x, y) = x / y, and 0 where x = 0 (also when y = 0)
    xlog1py(x, y) = x * log1p(y), and 0 where x = 0 (also when y = -1)
    mul_no_nan(x, y) = x * y, and 0 where y = 0 (also when x is inf or NaN)
    logsumexp(u1, ..., un) = log(exp(u1) + ... + exp(un))
    log1mexp(x) = log(1 - exp(x)), x <= 0 (no TensorFlow kernel: a runtime helper)
    nan_outside(v, cond) = v where cond holds, else NaN (keeps a written form's domain)
    overflowed(u) = whether u as computed is +-inf (a condition: tf.math.is_inf)
    finite_or(v, s) = v where finite as computed, else s (the same value; _finite_or)
    LogAbs(x) = log(|x|), opaque to SymPy (tf.math.log(tf.math.abs(x)))

Non-smooth functions carry gradgen's subgradient conventions (README, "Kinks"):
    sign, floor, ceiling, Heaviside: derivative 0 everywhere (TensorFlow's convention
        for sign, floor and ceil; the Dirac delta at the jump is dropped);
    Max, Min: at a tie the derivative is split equally between the tied arguments, so
        the weights always sum to 1 (as ``tf.reduce_max``'s gradient does);
    Heaviside(0) = 1/2 (SymPy's default).
"""

from __future__ import annotations

from sympy.codegen.cfunctions import expm1, log1p

from .internal import (
    Const, Guard, LogAbs, Ratio, Recip, Square, finite_or, nan_outside, overflowed, squarings,
)
from .kinks import Heaviside, Max, Min, ceiling, floor, indicator, sign
from .nan_safe import mul_no_nan, xdivy, xlog1py, xlogy
from .registry import Function
from .smooth import (
    erfc, erfcx, erfcx_recip, erfcx_recip_slope, hypot, log1mexp, log_erfc, logcosh, logsumexp, sigmoid, softmax_weight,
    softplus,
)

__all__ = [
    "sigmoid",
    "softplus",
    "log1p",
    "expm1",
    "xlogy",
    "xdivy",
    "xlog1py",
    "mul_no_nan",
    "logsumexp",
    "sign",
    "floor",
    "ceiling",
    "Heaviside",
    "Max",
    "Min",
    "Guard",
    "Square",
    "Recip",
    "Ratio",
    "logcosh",
    "log1mexp",
    "nan_outside",
    "overflowed",
    "finite_or",
    "LogAbs",
    "erfc",
    "erfcx",
    "erfcx_recip",
    "erfcx_recip_slope",
    "log_erfc",
    "hypot",
    "Const",
    "Function",
    "indicator",
    "softmax_weight",
    "squarings",
]
