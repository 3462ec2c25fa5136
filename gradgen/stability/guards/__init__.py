"""Guards for points where a formula is 0/0, inf * 0 or outside its domain.

Consumes: real elementwise SymPy expressions that are ready to print (a forward value
or a partial derivative after :mod:`gradgen.stability`). Guarantees, for each function:

* :func:`singular_limits` (partials only): where a partial's ``sqrt``-type factors are
  of one input and singular at rational points, its value there is its one-sided limit
  toward where it is real (SymPy, at build time): finite, or +-inf where it diverges.
* :func:`zero_subgradients` (partials only): a factor ``s**(-1/2)`` (from the
  derivative of ``sqrt(s)``), and a factor ``s**(-n)`` where ``s >= 0`` is a compound
  expression that can be 0 (a squared norm, e.g. in the derivatives of ``sqrt(x**2 +
  y**2)`` and ``atan2(y, x)``), is replaced by 0 where ``s = 0``: the subgradient 0 of
  norms at the origin. Elsewhere the value is unchanged.
* :func:`polynomials_beside` (derived orders): beside a point a value filled with a
  limit (``acos(x)**2``'s slope at 1), the derivative's Taylor polynomial in ``v - r``,
  where its formula cancels.
* :func:`removable_singularities`: where a value has a pole factor ``v**(-n)`` in a real
  input ``v`` but a finite limit as ``v -> 0`` (``sin(x)/x``, ``expm1(x)/x`` and their
  derivatives), its Taylor polynomial is used near ``v = 0``, on an interval scaled to
  the formula (``sin(100*x)/x``, ``sin(x*y)/x``: :func:`taylor_plan`); where no interval
  fits every value of the other inputs, the limit (computed by SymPy) at ``v = 0``.
* :func:`split_exponentials`: in one input, where every exponential is ``exp(u)`` (or
  ``expm1(u)``) of one linear ``u`` and the value grows more slowly, beyond where
  ``exp(u)`` overflows the value is ``exp(u/2) * R``, ``R`` computed with the other half
  (``expm1(x)/x``: finite up to x = 93.2 in float32, was inf from 88.7).
* :func:`kinks_to_piecewise`: ``Heaviside`` becomes a Piecewise (printable).
* :func:`guard_branches`: the "double where". ``tf.where`` evaluates both branches,
  and a NaN or inf in the branch that is not selected poisons the gradient (its
  cotangent is 0, and 0 * inf = NaN). Each Piecewise branch is evaluated at inputs
  replaced, where the branch is not selected, by a safe value inside its condition
  (``x > 0`` -> ``where(x > 0, x, 1)``), so both branches, and their derivatives, are
  finite wherever the selected one is. Where a one-sided bound's branch and its
  derivative are finite at the bound, the bound is the safe value, a clamp
  (``x <= 0`` -> ``minimum(x, 0)``, see :func:`clamp_of`). This is applied to forward
  and backward expressions, so first- and second-order gradients stay finite.
* :func:`log_products` (derived orders): a product of an exponential or an integer
  power of degree 2 or more and two or more other factors, where it is not finite as
  computed, from the sum of its factors' logarithms (Morse's second derivative
  ``depth*width**2*exp(-u)*...``: inf * 0 = NaN where ``width**2`` overflows and
  ``exp(-u)`` underflows).
* :func:`vanishing_products`: in one input, a product of factors that decay
  exponentially and underflow to exactly 0 (``exp(u)``, ``sigmoid(u)``, ``1 ± tanh(u)``,
  ``cosh(u)**-n`` of a polynomial ``u``) and a rest that grows like a polynomial that
  overflows for large inputs (``x**3 * exp(-x**2)``; tanh-GELU's derivative) is
  ``mul_no_nan(rest, decaying)``: 0 where the decaying factor is 0, where the product
  as written is 0 * inf = NaN and its exact value is 0.
* :func:`split_gaussians`: ``b**n * exp(k*g*b**n)`` is ``(b * exp(k*(g*b)*b**(n-1)/n))**n``:
  each factor of the power takes its share of the exponential (a Gaussian kernel's
  derivative in its width was inf * 0 = NaN where ``(x - c)**2`` overflows).
* :func:`split_differences`: ``w * (a - b)`` of inputs is ``w * (a/2 - b/2) * 2``
  where ``|a - b| > 1``: ``a - b`` can overflow, the halves cannot (Morse's ``-width *
  (r - r0)`` at r = -r0 = -3.4e38, width = 1.2e-38: was -inf).
* :func:`zero_factors`: a product of input factors ``a`` and a rest that can overflow
  (with poles only where an input is 0) is ``mul_no_nan(Q, mul_no_nan(P, a))``, ``P``
  the rest's powers and ``Q`` its other factors: 0 where ``a`` is 0 (``depth *
  expm1(-width*(r - r0))**2`` at depth = 0 and an overflowing rest: was NaN), and as
  written at a pole, where 0 * inf has no value.
* :func:`norm_quotients`: a product with ``(c + x**2 + ...)**-m`` divided by the norm
  ``hypot(√c, x, ...)`` 2m times, its factors that grow with it first (``2*x/(1 +
  x**2)`` as ``2*(x/h)/h``: ``x**2`` overflows); :func:`norm_logs`: ``log1p(x**2 +
  ...)`` as ``2*log(hypot(1, x, ...))`` where that is at least 1024;
* :func:`paired_quotients`: ``g * A / (c + g)`` is ``Ratio(g, c + g) * A``: the ratio
  lies in [0, 1] where the quotient alone underflows or overflows (Cauchy's loss's
  second derivative at x = 1e10 in float32: ``c**2/(1 + t)/(1 + t)`` was 0, and the sign
  wrong); :func:`power_quotients`: ``xdivy(x**a, x**b)`` as ``x**(a - b)`` where
  ``x**a`` overflows (``x**p * log(x)``'s second derivative at x = 5.2e18 in float32).
* :func:`exponent_logs`: ``xlogy(k, x)`` in an exponential's argument is
  ``mul_no_nan(log(x), k)``: the same value, with a second derivative in ``k`` that is
  right in TensorFlow.

Every transformation returns an expression equal to its input wherever the input is
finite, plus the names of what it did (for the op's docstring).

Layout: a module per family of guard, in the order :mod:`gradgen.derive` applies them
(:mod:`.limits`, :mod:`.subgradients`; :mod:`.singularities`, with its Taylor plans in
:mod:`.taylor`; :mod:`.exponentials`; :mod:`.kinks`; :mod:`.branches`; :mod:`.products`;
:mod:`.quotients`; :mod:`.exponents`), the helpers they share (:mod:`.walk`: expression
walks; :mod:`.conditions`: a condition's bounds), and :mod:`.constants`: the
:data:`GUARDS` table (guard name -> identity) and the numbers the guards are tuned by
(:data:`EPSILON`, :data:`TAYLOR_DEGREE`...).
"""

from __future__ import annotations

from .branches import clamp_of, guard_branches
from .constants import (
    EPSILON,
    GUARDS,
    LIMIT_MAX_OPS,
    SOUNDNESS_POINTS,
    TAIL_TERMS,
    TAYLOR_DEGREE,
)
from .exponentials import split_exponentials
from .exponents import exponent_logs
from .kinks import kinks_to_piecewise
from .limits import derivative, filled_points_smoothed, polynomials_beside, singular_limits
from .logscale import log_products
from .gaussians import split_gaussians
from .products import split_differences, vanishing_products, zero_factors
from .norms import norm_logs, norm_quotients
from .quotients import paired_quotients, power_quotients
from .singularities import limit_at_zero, removable_singularities
from .subgradients import zero_subgradients
from .taylor import taylor_plan
from .walk import as_polynomial, bottom_up

__all__ = [
    "EPSILON",
    "GUARDS",
    "LIMIT_MAX_OPS",
    "SOUNDNESS_POINTS",
    "TAIL_TERMS",
    "TAYLOR_DEGREE",
    "as_polynomial",
    "bottom_up",
    "clamp_of",
    "exponent_logs",
    "guard_branches",
    "kinks_to_piecewise",
    "limit_at_zero",
    "log_products",
    "paired_quotients",
    "power_quotients",
    "norm_quotients",
    "norm_logs",
    "removable_singularities",
    "singular_limits",
    "split_exponentials",
    "filled_points_smoothed",
    "derivative",
    "polynomials_beside",
    "taylor_plan",
    "vanishing_products",
    "split_differences",
    "split_gaussians",
    "zero_factors",
    "zero_subgradients",
]
