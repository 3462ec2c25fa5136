"""The guards' names and the numbers they are tuned by, in one place.

:data:`GUARDS`: each guard's name -> the identity it applies, as an op's docstring and
``explain`` list it (:mod:`gradgen.derive` looks the names up here). The numbers: the
largest expression whose limit SymPy is asked for (:data:`LIMIT_MAX_OPS`), each
dtype's unit roundoff (:data:`EPSILON`) and Taylor degree (:data:`TAYLOR_DEGREE`), the
terms of a series that bound a Taylor polynomial's truncation error
(:data:`TAIL_TERMS`), and the points where a vanishing product's 0 is checked
(:data:`SOUNDNESS_POINTS`).
"""

from __future__ import annotations

# SymPy's limit is asked for only where the expression has at most this many operations
# (sympy.count_ops).
LIMIT_MAX_OPS = 30

# Unit roundoff of each dtype, for the threshold of the Taylor branch.
EPSILON = {
    "float16": 2.0**-10,
    "bfloat16": 2.0**-7,
    "float32": 2.0**-23,
    "float64": 2.0**-52,
}
# Degree of the Taylor polynomial per dtype: enough that the balanced error (.taylor) is
# under the stability suite's tolerance (float32: eps**(7/9) = 4e-6 for a pole of order 2).
TAYLOR_DEGREE = {"float16": 6, "bfloat16": 6, "float32": 6, "float64": 10}

# Terms of the series past the polynomial's degree that bound its truncation error.
TAIL_TERMS = 6

# Points checked between where the rest's bound first overflows and the dtype's largest
# number, in each direction (geometrically spaced).
SOUNDNESS_POINTS = 40

# Each guard's name -> the identity it applies (an op's docstring lists those it used).
GUARDS = {
    "sqrt_zero": "d sqrt(s) = 0 where s = 0 and no one limit fills it (a kink, or s of "
    "several inputs: the subgradient 0; TF gives inf, or NaN)",
    "singular_limit": "where a sqrt-type factor of one input is singular, the partial's "
    "one-sided limit there, toward where it is real (finite or +-inf)",
    "norm_zero": "1/s**n = 0 where a squared norm s is 0 (norm and atan2 at the origin)",
    "removable_singularity": "a Taylor polynomial near v = 0 where a formula has a "
    "removable 0/0 there",
    "exponent_logs": "k*log(x) in an exponent as multiply_no_nan(log(x), k): 0 where k = "
    "0, with an exact second derivative in k",
    "split_exponential": "exp(u) = exp(u/2)**2, each half meeting the rest, where exp(u) "
    "overflows but the value does not (expm1(x)/x for 88.7 < x < 93.2 in float32)",
    "zero_factor": "mul_no_nan(R, a): 0 where the input factors a are 0 and the rest R "
    "overflows (0 * inf, exactly 0); a meets R's powers first; as written at R's poles",
    "split_gaussian": "b**n * exp(k*g*b**n) as (b * exp(k*(g*b)*b**(n-1)/n))**n: each "
    "factor of the power takes its share of the exponential (b**n may overflow)",
    "split_difference": "w*(a - b) as w*(a/2 - b/2)*2 where |a - b| > 1 (a - b may "
    "overflow, the halves cannot)",
    "norm_quotient": "A/(c + x**2 + ...)**m as A divided 2m times by h = hypot(sqrt(c), "
    "x, ...), A's factors in x first: 2*x/(1 + x**2) = 2*(x/h)/h (x**2 overflows)",
    "norm_log": "log1p(x**2 + ...) = 2*log(h), h = hypot(1, x, ...), where h >= 1024 "
    "(128 in float16), and log(x**2 + y**2 + ...) = 2*log(hypot(x, y, ...)) out of "
    "range: the sum of squares overflows or underflows where the log does not",
    "paired_quotient": "g*A/(c + g) as (g/(c + g))*A: the ratio lies in [0, 1] where "
    "(c + g)**2 or A/(c + g) alone would overflow or underflow",
    "power_quotient": "xdivy(x**a, x**b) as x**(a - b) where x**a overflows, or "
    "underflows to 0 at an x that is not 0 (a symbolic)",
    "regimes": "a partial as written on the interval of an input where the accuracy audit "
    "measured it more accurate than the stable form, the stable form elsewhere (Herbie's "
    "regime inference)",
    "double_where": "where() branches evaluated at safe inputs where not selected",
    "log_product": "p = c * exp(u) * f * g... as sign(p) * exp(u + log|f| + log|g| + ...) "
    "where p as computed is not finite (derived orders: its factors overflow and "
    "underflow before they meet)",
    "vanishing_product": "mul_no_nan(R, D): 0 where a decaying factor D underflows to "
    "0 and the polynomial R overflows (0 * inf, exactly 0)",
}
