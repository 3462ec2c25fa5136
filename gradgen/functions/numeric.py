"""Float64 NumPy implementations and mpmath references of the functions in the registry.

:mod:`gradgen.functions.declarations` names one of each per function: build-time
verification (:mod:`gradgen.verify`) evaluates derived statements with the NumPy ones,
the accuracy audit's reference (:mod:`gradgen.stability.audit.reference`) evaluates the
forward as written with the mpmath ones, and the audit's stand-in for TensorFlow
(:mod:`gradgen.stability.audit.mirror`) rounds the NumPy kernels to a dtype, refined by
the mpmath ones. NumPy's own functions (``np.exp``...) and mpmath's (``mpmath.sin``...)
are named directly in the declarations; only what neither library has is here.

Each NumPy function takes and returns float64 (or complex128) arrays and follows the
TensorFlow op it stands for at its special points (``xlogy(0, 0) = 0``); none warns.
"""

from __future__ import annotations

import math
import sys
from functools import reduce

import mpmath
import numpy as np

# ------------------------------------------------------------------ NumPy (float64)


def np_guard(u, cond, safe):
    return np.where(cond, u, safe)


def np_log1mexp(x):
    # log(1 - exp(x)), x <= 0: Maechler's two branches, as the printed _log1mexp
    with np.errstate(divide="ignore", invalid="ignore"):
        near = x > -math.log(2.0)
        return np.where(
            near,
            np.log(-np.expm1(np.where(near, x, -1.0))),
            np.log1p(-np.exp(np.where(near, -1.0, x))),
        )


def np_sigmoid(x):
    # exp of minus |x| (of -x where Re x >= 0, else x): never overflows, so no inf/inf
    right = np.real(x) >= 0
    e = np.exp(np.where(right, -x, x))
    return np.where(right, 1 / (1 + e), e / (1 + e))


def np_xlogy(x, y):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x == 0, 0.0 * x, x * np.log(np.where(x == 0, 1.0, y)))


def np_xlog1py(x, y):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x == 0, 0.0 * x, x * np.log1p(np.where(x == 0, 0.0, y)))


def np_xdivy(x, y):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x == 0, 0.0 * x, x / np.where(x == 0, 1.0, y))


def np_mul_no_nan(x, y):
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(y == 0, 0.0, x * y)


# erfcx(x) is 2 exp(x**2) in float64 below -26.6, past float64's range below this
_ERFCX_OVERFLOW = -math.sqrt(math.log(sys.float_info.max / 2))
# x**2 is past float64's range above this
_SQUARE_OVERFLOW = math.sqrt(sys.float_info.max)


def _erfcx_scalar(x):
    # exp(x**2) * erfc(x); the asymptotic series (DLMF 7.12.1) from x = 10, as the
    # generated helper does in float64. No step overflows (NumPy warns of any that does).
    x = float(x)
    if math.isnan(x):  # before any comparison (one with NaN raises the invalid flag)
        return x
    if x < _ERFCX_OVERFLOW:
        return math.inf
    if x < 10.0:
        return math.exp(x * x) * math.erfc(x)
    return _erfcx_series(x) / x / math.sqrt(math.pi)


# (-1)**n (2n - 1)!!, n = 1..12: the asymptotic series' coefficients after the first
_ERFCX_COEFFS = tuple((-1) ** n * math.prod(range(1, 2 * n, 2)) for n in range(1, 13))


def _erfcx_series(x):
    """x sqrt(pi) erfcx(x) for x >= 10: 12 terms of the asymptotic series."""
    r = 0.5 / x / x
    return 1.0 + r * _erfcx_tail_over_r(r)


def _erfcx_tail_over_r(r):
    """The same series less its first term, 1, over ``r = 1 / (2 x**2)`` (Horner):
    about -1, with no cancellation and no underflow where r does."""
    total = 0.0
    for c in reversed(_ERFCX_COEFFS):
        total = c + r * total
    return total


def _erfcx_recip_scalar(x):
    # 1 / erfcx(x): x sqrt(pi) / series from x = 10, as the generated helper does
    x = float(x)
    if math.isnan(x) or x < 10.0:
        return 1.0 / _erfcx_scalar(x)
    with np.errstate(over="ignore"):
        return float(np.float64(x) * math.sqrt(math.pi) / _erfcx_series(x))


def _erfcx_recip_excess_scalar(x):
    # 1 / (sqrt(pi) erfcx(x)) - x: -x T / (1 + T) from x = 10 (T: the series' terms
    # after the first), the difference below, as the generated helper does
    x = float(x)
    if math.isnan(x) or x < 10.0:
        return _erfcx_recip_scalar(x) / math.sqrt(math.pi) - x
    r = 0.5 / x / x
    scaled = _erfcx_tail_over_r(r)
    return -(0.5 / x) * scaled / (1.0 + r * scaled)


def _erfcx_recip_slope_scalar(x):
    # 2 r (r / sqrt(pi) - x), r = erfcx_recip(x), in float64, as the generated helper does
    with np.errstate(over="ignore", invalid="ignore"):
        return float(2.0 * np.float64(_erfcx_recip_scalar(x))
                     * np.float64(_erfcx_recip_excess_scalar(x)))


def _log_erfc_scalar(x):
    x = float(x)
    if math.isnan(x):
        return x
    if x < 10.0:
        return math.log(math.erfc(x))
    if x > _SQUARE_OVERFLOW:  # -x**2 is past float64's range (and erfcx(inf) is 0)
        return -math.inf
    return -x * x + math.log(_erfcx_scalar(x))


np_erfcx = np.vectorize(_erfcx_scalar, otypes=[float])
np_erfcx_recip = np.vectorize(_erfcx_recip_scalar, otypes=[float])
np_erfcx_recip_slope = np.vectorize(_erfcx_recip_slope_scalar, otypes=[float])
np_log_erfc = np.vectorize(_log_erfc_scalar, otypes=[float])


def np_softplus(x):
    return np.logaddexp(0.0, x)


def np_logsumexp(*args):
    return reduce(np.logaddexp, args)


def np_maximum(*args):
    return reduce(np.maximum, args)


def np_minimum(*args):
    return reduce(np.minimum, args)


def np_square(x):
    return x * x


def np_finite_or(value, scaled):
    return np.where(np.isfinite(value), value, scaled)


def np_log_abs(x):
    with np.errstate(divide="ignore"):
        return np.log(np.abs(x))


def np_recip(x):
    return 1 / x


def np_ratio(a, b):
    return a / b


def np_logcosh(x):
    return np.logaddexp(x, -x) - math.log(2.0)


def np_nan_outside(value, cond):
    return np.where(cond, value, np.nan)


def np_hypot(*args):
    return reduce(np.hypot, args)


np_erf = np.vectorize(math.erf, otypes=[float])
np_erfc = np.vectorize(math.erfc, otypes=[float])


# ------------------------------------------------------------------ mpmath (any precision)


def mp_sigmoid(x):
    return 1 / (1 + mpmath.exp(-x))


def mp_softplus(x):
    return mpmath.log1p(mpmath.exp(x))


# From here on erfc is its asymptotic series: mpmath's own erfc raises OverflowError
# there with its pure-Python backend (erfc_check_series squares an int past float's
# range) but not with gmpy2's, so the audit, and the docstring line it writes, depended
# on whether gmpy2 was installed. The series' first omitted term, (2K + 1)!!/(2x**2)**(K
# + 1) relative with K = 12 terms, is below 2**-1600 for x >= 2**64.
_ERFC_SERIES_FROM = mpmath.mpf(2) ** 64
_ERFC_TERMS = 12


def mp_erfc(x):
    """erfc(x) at mpmath's working precision, the same with either mpmath backend."""
    if x < _ERFC_SERIES_FROM:
        return mpmath.erfc(x)
    inverse = 1 / (2 * x * x)
    term, total = mpmath.mpf(1), mpmath.mpf(1)
    for k in range(1, _ERFC_TERMS):
        term *= -(2 * k - 1) * inverse
        total += term
    return mpmath.exp(-x * x) / (x * mpmath.sqrt(mpmath.pi)) * total
