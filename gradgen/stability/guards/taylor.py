"""Taylor plans: how :mod:`.singularities` fills in a removable singularity at ``v = 0``,
with a Taylor polynomial on an interval scaled to the formula.

Receives: an expression with a pole in a real input ``v`` and a finite limit as
``v -> 0``, the polynomial's degree and the op's dtype. Returns:
:func:`taylor_polynomial`, the expression's Taylor polynomial at ``v = 0`` in Horner
form (None where a coefficient is infinite, imaginary, or singular in another input);
:func:`taylor_plan`, ``(h, w, polynomial)``: that polynomial, used where
``|v * w| <= h`` (None where no interval is right); :func:`unit_interval`, the
interval's half-width ``h0`` for a function of unit scale.

The formulas: ``h0 = eps**(1/(m + 1 + k))`` (``m`` the degree, ``k`` the pole's order,
``eps`` the dtype's unit roundoff, :data:`EPSILON`) balances the polynomial's truncation
error against the formula's cancellation, both about ``eps**((m + 1)/(m + 1 + k))``
relative; :func:`taylor_plan` scales it by the series' own ratios and halves it until
the next :data:`TAIL_TERMS` terms of the series are below that error.
"""

from __future__ import annotations

import sympy
from sympy import S

from ...functions import squarings
from .. import formats
from .constants import EPSILON, TAIL_TERMS
from .walk import SYMPY_CANNOT, standard


def _pole_order(expr, v) -> int:
    orders = [
        -p.exp for p in expr.atoms(sympy.Pow) if p.base == v and p.exp.is_negative
    ]
    return int(sympy.ceiling(max(orders))) if orders else 0


def _series(expr, v, order: int):
    """``expr``'s Taylor coefficients at v = 0 up to ``v**(order - 1)`` as {power: c}
    (powers with c = 0 left out), or None where SymPy cannot expand it."""
    try:
        series = sympy.series(standard(expr), v, 0, order).removeO()
        return {m[0]: c for m, c in sympy.Poly(series, v).terms()}
    except SYMPY_CANNOT:
        return None


def _scale_variable(ratios: dict, r: int):
    """``w`` (an expression in the other inputs, or 1) with every ratio ``rho_j`` a
    number times ``w**(j - r)``, and those numbers; or None.

    ``sin(x*y)/x`` = ``y (1 - (x y)**2/6 + ...)``: the ratios ``-y**2/6, y**4/120, ...``
    are numbers times powers of ``w = y``, so the function is ``y`` times a function of
    ``u = x*y``, whose series has number coefficients."""
    nonzero = sorted(j for j, rho in ratios.items() if rho != 0)
    if not nonzero:
        return S.One, {}
    j1 = nonzero[0]
    _, rest = sympy.factor(ratios[j1]).as_coeff_Mul()
    if rest == 1:
        w = S.One
    else:
        # a candidate (the sign of a root is free: the check below decides); it must
        # be real for every real value of the inputs (sqrt(y) is not: ratios -y/6,
        # y**2/120 would make the polynomial NaN for y < 0)
        w = sympy.powdenest(rest ** sympy.Rational(1, j1 - r), force=True)
        if not w.free_symbols or w.is_real is not True:
            return None
    numbers = {}
    for j, rho in ratios.items():
        q = sympy.simplify(rho / w ** (j - r))
        if not q.is_number or q.is_real is not True:
            return None
        numbers[j] = q
    return w, numbers


def _horner_in(coefficients: dict, u):
    """``1 + sum_i c_i u**i`` (i >= 1, numbers c_i) in Horner form in ``u``, its powers
    as squarings (:func:`gradgen.functions.squarings`: a power of the product ``u =
    x*y`` would be distributed into ``x**n * y**n``, which overflows where ``u`` is small
    and ``y`` large)."""
    powers = sorted((i for i, c in coefficients.items() if c != 0), reverse=True)
    if not powers:
        return S.One
    result = coefficients[powers[0]]
    for high, low in zip(powers, powers[1:]):
        result = result * squarings(u, high - low) + coefficients[low]
    return 1 + result * squarings(u, powers[-1])


def _function_of_product(expr, v, w, r: int, leading) -> bool:
    """Whether ``expr`` is exactly ``leading * v**r * F(v * w)`` (``w`` 1: always): the
    series' first terms can fit that form while the formula does not
    (``sin(x*y + x**21)/x``: its polynomial in ``x*y`` was used at x = 1 when y = 0,
    0 for 0.84). Substituting ``v = u / w`` must leave a function of ``u`` alone."""
    if w == 1:
        return True
    u = sympy.Dummy("u", real=True)
    try:
        rest = sympy.simplify(standard(expr).xreplace({v: u / w}) * (w / u) ** r / leading)
    except (ValueError, TypeError, NotImplementedError, RecursionError):
        return False
    return not (rest.free_symbols - {u})


def _grown_plan(expr, v, degree: int, dtype: str, coefficients: dict, r: int, polynomial):
    """The plan (see :func:`taylor_plan`) of a series with no one scale
    (``sin(x)/x + y*(1 - cos(x))/x**2``, ``sin(x*y)*cos(x)/x``'s derivative): the
    polynomial in v (coefficients in the other inputs) on ``|v| * w <= h0``, ``w`` the
    product of ``(1 + |g|)**a`` over the other inputs ``g`` whose degree in the
    coefficients grows by ``a`` per power of v (1 for ``sin(x*y)``; none for a bounded
    scale, where the interval is ``h0`` itself). None where a coefficient is not a
    polynomial in the other inputs."""
    growth = []
    for g in sorted(expr.free_symbols - {v}, key=sympy.default_sort_key):
        try:
            first = sympy.degree(coefficients[r], g)
            rate = max([S.Zero] + [sympy.Rational(sympy.degree(c, g) - first, j - r)
                                   for j, c in coefficients.items() if j > r])
        except (sympy.PolynomialError, ValueError, TypeError):
            return None
        if rate > 0:
            growth.append((1 + sympy.Abs(g)) ** rate)
    h = sympy.Float(f"{unit_interval(expr, v, degree, dtype):.2g}")
    return h, sympy.Mul(*growth), polynomial


def unit_interval(expr, v, degree: int, dtype: str) -> float:
    """``h0 = eps**(1/(m + 1 + k))``: the half-width of the polynomial's interval for a
    function of unit scale in v, where truncation and cancellation balance (``m`` the
    degree, ``k`` the pole's order, ``eps`` the dtype's unit roundoff)."""
    return EPSILON[dtype] ** (1.0 / (degree + 1 + _pole_order(expr, v)))


def taylor_plan(expr, v, degree: int, dtype: str, polynomial):
    """How :func:`.singularities.removable_singularities` fills in ``expr``'s removable
    singularity at v = 0: ``(h, w, polynomial)``, the Taylor polynomial of ``degree``
    used where ``|v * w| <= h`` (``w`` 1, or an expression in the other inputs), with
    ``h`` a 2-digit SymPy Float; or None where no such interval is right.

    ``h0 = eps**(1/(m + 1 + k))`` (``m`` the degree, ``k`` the pole's order, ``eps`` the
    dtype's unit roundoff) balances truncation against the formula's cancellation for a
    function of unit scale in v (``sin(x)/x``). Write the series as
    ``c_r v**r (1 + sum_j q_j (v w)**(j - r))`` (``c_r v**r`` its first term, ``q_j``
    numbers; :func:`_scale_variable`): a function of ``s * v * w`` has both errors of the
    unit-scale function at ``s * v * w``, so the interval is ``|v w| <= h0 / s``, ``s``
    the largest ``|q_j|**(1/(j - r))``, at least 1 (never wider than ``h0``).
    ``sin(100*x)/x`` has s = 100/sqrt(6), so h = 0.0034 in float32 (h0 = 0.14 gave -13075
    for -5.44 at x = 0.1); ``sin(x*y)/x`` is used where ``|x y| <= 0.14`` (a fixed
    interval in x gave -2.45e11 for 18.6 at x = 0.04, y = 1000 in float64). Then ``h``
    is halved until the tail ``sum_j |q_j| h**(j - r)`` over the next
    :data:`TAIL_TERMS` terms, the relative truncation error, is at most
    ``eps**((m + 1)/(m + 1 + k))``. Where ``w`` is not 1 the polynomial is
    ``c_r v**r Q(v w)``, ``Q`` in Horner form with number coefficients (its
    coefficients in ``y``, ``y**7/5040``, would overflow for large ``y``).

    Where the ratios are not numbers times powers of one expression, or the formula is
    not a function of ``v w`` beyond the terms checked (:func:`_function_of_product`),
    :func:`_grown_plan`. None where neither fits, or a coefficient ``q_j`` of the
    polynomial is above the square root of the dtype's largest number (it would
    overflow).
    ``polynomial``: ``expr``'s Taylor polynomial in v (:func:`taylor_polynomial`), Horner
    form.
    """
    coefficients = _series(expr, v, degree + 1 + TAIL_TERMS)
    if not coefficients:
        return None
    r = min(coefficients)
    ratios = {j: sympy.simplify(c / coefficients[r])
              for j, c in coefficients.items() if j > r}
    found = _scale_variable(ratios, r)
    if found is not None and not _function_of_product(expr, v, found[0], r,
                                                      coefficients[r]):
        found = None  # the first terms fit c_r v**r Q(v w), but not the whole formula
    if found is None:
        return _grown_plan(expr, v, degree, dtype, coefficients, r, polynomial)
    w, numbers = found
    magnitude = {j: abs(float(q)) for j, q in numbers.items()}
    if any(q > formats.get(dtype).largest ** 0.5 for j, q in magnitude.items() if j <= degree):
        return None
    eps = EPSILON[dtype]
    k = _pole_order(expr, v)
    scale = max([1.0] + [q ** (1.0 / (j - r)) for j, q in magnitude.items()
                         if j <= degree + 1 and q > 0])
    target = eps ** ((degree + 1.0) / (degree + 1 + k))
    h = sympy.Float(f"{unit_interval(expr, v, degree, dtype) / scale:.2g}")
    for _ in range(60):
        tail = sum(q * float(h) ** (j - r) for j, q in magnitude.items() if j > degree)
        if tail <= target:
            break
        h = sympy.Float(f"{float(h) / 2:.2g}")
    else:
        return None
    if w != 1:
        q_of_u = {j - r: q for j, q in numbers.items() if j <= degree}
        polynomial = coefficients[r] * v**r * _horner_in(q_of_u, v * w)
    return h, w, polynomial


def taylor_polynomial(expr, v, degree: int):
    """Taylor polynomial of ``degree`` at v = 0 in Horner form, or None."""
    try:
        series = sympy.series(standard(expr), v, 0, degree + 1).removeO()
        poly = sympy.Poly(series, v)
        # (removeO took the Order; a series with no expansion at 0 is nan: Lennard-
        # Jones' second derivative, which has a pole there)
        if any(c.has(sympy.oo, -sympy.oo, sympy.zoo, sympy.nan) for c in poly.coeffs()):
            return None
        # a function real only on one side of 0 (acos(-1 - 2/x)'s derivative, real for
        # x <= -1) has imaginary coefficients: no polynomial (it printed 1j into float
        # code, a TypeError when the gradient ran)
        if any(c.has(sympy.I) for c in poly.coeffs()):
            return None
        # coefficients must be finite for every value of the other inputs: the series
        # of d**2*(sqrt(1 + r**2/d**2) - 1) in d has 1/|r| and 1/r**2 in its
        # coefficients, so its polynomial would be inf/NaN at r = 0 (where the formula
        # itself is fine)
        if any(_singular_in_others(c) for c in poly.coeffs()):
            return None
        # coefficients in other inputs may hold 1/Abs(r)... that Horner's own Poly
        # refuses as generators (pseudo-Huber d**2*(sqrt(1 + (r/d)**2) - 1))
        return sympy.horner(poly.as_expr(), wrt=v)
    except SYMPY_CANNOT:
        return None


def _singular_in_others(coefficient) -> bool:
    """Whether a Taylor coefficient divides by (or takes a negative power of) something
    that depends on another input."""
    return any(
        p.exp.is_negative and p.base.free_symbols for p in coefficient.atoms(sympy.Pow)
    ) or coefficient.has(sympy.Abs)  # (an Abs left by SymPy holds a symbol: |r|)
