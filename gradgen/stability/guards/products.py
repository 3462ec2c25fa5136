"""Products and differences that overflow into NaN or inf where the value is finite:
:func:`vanishing_products` (below), :func:`zero_factors` (an input factor that is 0
beside an overflowing rest), :func:`split_differences` (``w * (a - b)`` where ``a -
b`` overflows); Gaussians are :mod:`.gaussians`'s.

Vanishing products: ``mul_no_nan(rest, decaying)`` where a factor that decays
exponentially underflows to 0 and the rest overflows.

Receives: a real elementwise SymPy expression ready to print and the op's dtype. Returns
(:func:`vanishing_products`): the expression with each product, in one input, of
factors that decay exponentially and underflow to exactly 0 (``exp(u)``,
``sigmoid(u)``, ``1 ± tanh(u)``, ``cosh(u)**-n`` of a polynomial ``u``) and a rest that
grows like a polynomial that overflows for large inputs (``x**3 * exp(-x**2)``;
tanh-GELU's derivative) as ``mul_no_nan(rest, decaying)``: 0 where the decaying factor
is 0, where the product as written is 0 * inf = NaN and its exact value is 0, where a
50-digit check in the dtype says so (:func:`_zero_is_right`). Also the names of the
guards used (``vanishing_product``). Source: TensorFlow's ``tf.math.multiply_no_nan``
(``MulNoNan``), made for such 0 * inf products.
"""

from __future__ import annotations

import mpmath
import sympy
from sympy import S

from ...functions import (
    Ratio, Recip, Square, expm1, mul_no_nan, nan_outside, overflowed, sigmoid,
    xdivy,
)
from ...functions.declarations import of_class
from ...pinned import mpmath_printer
from .. import formats
from .constants import SOUNDNESS_POINTS
from .walk import as_polynomial, each_product, standard


def _decay_argument(f):
    """``u`` when ``f`` tends to 0 exponentially fast in ``u`` and so underflows to
    exactly 0 in floating point: ``exp(u)`` and ``sigmoid(u)`` as ``u -> -inf``,
    ``±1 ± tanh(u)`` and ``±(1 - tanh(u)**2)`` as ``|u| -> inf`` in one direction or
    both, ``cosh(u)**-n``, positive integer powers of these, and a Piecewise whose
    every branch is a product of these in the same ``u``; else None."""
    if isinstance(f, sympy.Pow) and f.exp.is_Integer:
        if f.exp > 0:
            return _decay_argument(f.base)
        return f.base.args[0] if isinstance(f.base, sympy.cosh) else None
    if isinstance(f, (sympy.exp, sigmoid)):
        return f.args[0]
    if isinstance(f, sympy.Piecewise):  # sech_squared's forms of one value, by region
        found = {_decay_argument(g) for e, _ in f.args for g in sympy.Mul.make_args(e)}
        return found.pop() if len(found) == 1 else None
    if isinstance(f, sympy.Add) and len(f.args) == 2:
        one = next((a for a in f.args if a in (S.One, S.NegativeOne)), None)
        if one is None:
            return None
        other = f - one
        if isinstance(other, sympy.tanh) or isinstance(-other, sympy.tanh):
            return (other if isinstance(other, sympy.tanh) else -other).args[0]
        square = -other / one  # tanh(u)**2 in 1 - tanh(u)**2 and in -1 + tanh(u)**2
        if isinstance(square, sympy.Pow) and square.exp == 2 and isinstance(
            square.base, sympy.tanh
        ):
            return square.base.args[0]
    return None


def _bound(e) -> int | None:
    """The declared bound of ``|f|`` over the reals of the function ``e`` calls."""
    declared = of_class(type(e))
    return None if declared is None else declared.bound


def _polynomial_bound(e, v):
    """A polynomial in ``t = |v|`` with coefficients of at least 1 that bounds ``|e|``
    and every value computed on the way to it (for ``t >= 1``), for ``e`` built from
    numbers, ``v``, ``+``, ``*``, positive integer powers, bounded functions
    (a declared ``bound``: :mod:`gradgen.functions`; ``cosh(u)**-n``) and ``mul_no_nan`` of such; else None. Terms
    never cancel (``x**2 * (1 - sin(x))`` is bounded by ``2 t**2``), and a coefficient
    below 1 counts as 1: ``x**4 / 1000`` is computed as ``x*x*x*x / 1000``, which
    overflows where ``x**4`` does. A Mul's numeric factors count as the one coefficient
    the printer writes (``sqrt(2) * x / sqrt(pi)`` is bounded by ``t``, not
    ``sqrt(2) * t``)."""
    if e.is_number:
        return sympy.Max(abs(e), 1) if e.is_real else None
    if e == v:
        return v
    bound = _bound(e) if isinstance(e, sympy.Function) else None
    if bound is not None:
        return sympy.Integer(bound)
    if isinstance(e, sympy.Pow) and e.exp.is_Integer:
        if e.exp < 0:
            return S.One if isinstance(e.base, sympy.cosh) else None
        base = _polynomial_bound(e.base, v)
        return None if base is None else base**e.exp
    if isinstance(e, sympy.Mul) and any(a.is_number for a in e.args):
        # the printer writes a Mul's numeric factors as one coefficient, a Python float
        # (``(0.5 * math.sqrt(2) / math.sqrt(math.pi)) * x``), except that a rational
        # p/q multiplies by p first and divides by q last (``3.0 * x * x / 1000``)
        coeff = sympy.Mul(*[a for a in e.args if a.is_number])
        rest = _polynomial_bound(sympy.Mul(*[a for a in e.args if not a.is_number]), v)
        if rest is None or not coeff.is_real:
            return None
        scale = abs(coeff.p) if coeff.is_Rational else abs(coeff)
        return sympy.Max(scale, 1) * rest
    if isinstance(e, (sympy.Add, sympy.Mul, mul_no_nan)):
        parts = [_polynomial_bound(a, v) for a in e.args]
        if any(p is None for p in parts):
            return None
        return sympy.Add(*parts) if isinstance(e, sympy.Add) else sympy.Mul(*parts)
    return None


def _overflows(bound, v) -> bool:
    """Whether the polynomial ``bound`` in ``v`` alone can overflow where ``v`` is
    finite: of degree 2 or more, or with a coefficient larger than 1 in magnitude
    (``x**3``, ``2*x``; not ``x`` or ``-x/2``)."""
    poly = as_polynomial(bound, v)
    if poly is None or poly.free_symbols != {v}:
        return False
    return poly.degree() > 1 or any(abs(c) > 1 for c in poly.coeffs())


def _polynomial_in(u, v) -> bool:
    """Whether ``u`` is a nonconstant polynomial in ``v`` alone."""
    poly = as_polynomial(u, v)
    return poly is not None and poly.free_symbols == {v} and poly.degree() > 0


def _without_cancellation(e):
    """``e`` with ``±1 ± tanh(u)`` and ``±(1 - tanh(u)**2)`` written as ratios of
    exponentials (1 - tanh(u) = 2 / (1 + exp(2u)), 1 - tanh(u)**2 = cosh(u)**-2) and
    ``mul_no_nan`` as a product, so that 50 digits evaluate them where they are far
    below 1e-50."""

    def stable(f):
        u = _decay_argument(f)
        one = next(a for a in f.args if a in (S.One, S.NegativeOne))
        other = f - one
        if other == sympy.tanh(u) or other == -sympy.tanh(u):
            sign = 1 if other == sympy.tanh(u) else -1  # f = one + sign * tanh(u)
            return one * 2 / (1 + sympy.exp(-2 * u * sign * one))
        return one * sympy.cosh(u) ** -2  # one - one * tanh(u)**2

    e = e.replace(mul_no_nan, lambda a, b: a * b)
    return e.replace(
        lambda f: isinstance(f, sympy.Add) and len(f.args) == 2
        and _decay_argument(f) is not None,
        stable,
    )


def _zero_is_right(rest, decaying, bound, v, dtype: str) -> bool:
    """Whether, in ``dtype``, wherever the rest's bound ``bound(|v|)`` reaches the
    largest finite number (the rest may be inf there, or NaN: inf - inf), the exact
    ``|rest * decaying|`` is below the smallest normal number (so the 0 that mul_no_nan
    gives where ``decaying`` rounds to 0 is right, and ``rest`` is finite wherever
    ``decaying`` is not 0) or above the largest (the product overflows however it is
    computed). Checked at 50 digits at the first overflow and :data:`SOUNDNESS_POINTS`
    points beyond it on both sides of 0.

    ``x**30 * exp(-x)`` fails in float32 (``x**30`` overflows at x = 19.4, where the
    product is 1e30), ``x**5 / cosh(x)`` in float16 (x = 9.2, product 13); tanh-GELU's
    derivative holds in every dtype (its rest overflows where ``|u|`` is 1e38 in
    float32).
    """
    fmt = formats.get(dtype)
    if fmt is None:
        return False
    top, tiny = mpmath.mpf(fmt.largest), mpmath.mpf(fmt.tiny)
    # at least the largest finite number once rounded: the bound's coefficients are the
    # printed floats, so at its first overflow the exact product can be a hair below
    # (10**30 * x against 1e30 * x), and there it rounds to the largest or to inf anyway
    edge = top * (1 - mpmath.mpf(2) ** -fmt.precision)
    coeffs = [abs(mpmath.mpf(float(c))) for c in sympy.Poly(bound, v).all_coeffs()]
    size = lambda t: mpmath.polyval(coeffs, t)  # noqa: E731 - increasing in t >= 0
    with mpmath.workdps(50):
        if size(top) < top:
            return False
        lo, hi = mpmath.mpf(0), mpmath.log(top)  # bisect log(t)
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if size(mpmath.exp(mid)) >= top else (mid, hi)
        first = mpmath.exp(hi)
        product = sympy.lambdify(v, standard(_without_cancellation(rest * decaying)),
                                 "mpmath", printer=mpmath_printer())
        for k in range(SOUNDNESS_POINTS + 1):
            t = first * (top / first) ** (mpmath.mpf(k) / SOUNDNESS_POINTS)
            for x in (t, -t):
                try:
                    value = abs(product(x))
                except (OverflowError, ZeroDivisionError, ValueError, TypeError):
                    return False
                if not (value < tiny or value >= edge):
                    return False
    return True


def vanishing_products(expr, dtype: str = "float32") -> tuple[sympy.Basic, tuple[str, ...]]:
    """``D * R`` -> ``mul_no_nan(R, D)`` in one input ``v``, where ``D`` (the factors
    that decay exponentially in a polynomial ``u(v)``: exp(u), sigmoid(u), 1 ± tanh(u),
    sech(u)**n) underflows to 0 and ``R`` (the others) grows like a polynomial in ``v``
    that can overflow, and :func:`_zero_is_right` in ``dtype``.

    The value is unchanged wherever ``R`` is finite. Where ``D`` is 0, the product as
    written is 0 where ``R`` is finite and NaN where it overflowed; the check makes sure
    ``R`` overflows only where the exact product is below the dtype's smallest normal
    number (0 is right) or above its largest. ``D`` and ``R`` are in one input: with two
    (``exp(-(x - y)) * x**2``), ``u`` can be moderate where ``R`` overflows (x = y =
    1e30). Factors free of ``v`` stay outside, ``mul_no_nan(R, D) * w``: the upstream
    gradient of a derived order (``upstream * (4*x**2 - 2) * exp(-x**2)``, the second
    derivative of ``expm1(-x**2)``, NaN at x = 1e30 in float32). A NaN input makes
    ``D`` NaN, so NaN still propagates. Source: TensorFlow's ``tf.math.multiply_no_nan``
    (``MulNoNan``), made for such 0 * inf products.
    """
    def fix(e):
        for v in sorted(e.free_symbols, key=sympy.default_sort_key):
            if any(v in f.free_symbols and len(f.free_symbols) > 1 for f in e.args):
                continue  # a factor in v and another input: u need not decay there
            guarded = _in_one_input([f for f in e.args if f.free_symbols <= {v}], v, dtype)
            if guarded is not None:
                return sympy.Mul(guarded, *[f for f in e.args if not f.free_symbols <= {v}])
        return None

    return each_product(expr, fix, "vanishing_product")


def _in_one_input(factors, v, dtype: str):
    """``mul_no_nan(R, D)`` for the product of ``factors`` (numbers and functions of
    ``v`` alone), split into the decaying ``D`` and the rest ``R``, where
    :func:`vanishing_products` applies in ``v``, or in ``w = 1/v`` (``u`` and ``R``
    polynomials in ``1/v``: ``exp(-1/x**2)``'s slope ``2*x**-3*exp(-x**-2)`` was 0 * inf
    = NaN for |x| < 5e-20 in float32, where the exact value is 0); else None."""
    found = _decaying_times_rest(factors, v, dtype)
    if found is not None:
        return found
    w = sympy.Dummy("w", positive=True)
    found = _decaying_times_rest([f.subs(v, 1 / w) for f in factors], w, dtype)
    return None if found is None else found.subs(w, 1 / v)


def _decaying_times_rest(factors, v, dtype: str):
    """:func:`_in_one_input` in ``v`` itself."""
    decaying = [f for f in factors if _decay_argument(f) is not None]
    rest = [f for f in factors if _decay_argument(f) is None]
    if not decaying or not rest:
        return None
    if not all(_polynomial_in(_decay_argument(f), v) for f in decaying):
        return None
    d, r = sympy.Mul(*decaying), sympy.Mul(*rest)
    bound = _polynomial_bound(r, v)
    if bound is None or not _overflows(bound, v):
        return None
    if not _zero_is_right(r, d, bound, v, dtype):
        return None
    return mul_no_nan(r, d)


def zero_factors(expr, inputs, last=frozenset()) -> tuple[sympy.Basic, tuple[str, ...]]:
    """``a * P * Q`` -> ``mul_no_nan(Q, mul_no_nan(P, a))`` where ``a`` is the product
    of the factors that are inputs of the op and that the rest does not otherwise hold
    (``depth``, not ``width``, in ``depth * width * exp(-width * t)``), ``P`` the powers
    in the rest (its monomial part: ``(sigma/r)**6``), ``Q`` its other factors (sums,
    functions, inputs, the constant), and the rest can overflow where the inputs are
    finite (:func:`_can_overflow`): where ``a`` is 0 the exact product is 0, where the
    rest as computed may be inf (``depth * expm1(-width * (r - r0))**2`` at depth = 0,
    width = 3.4e38: 0 * inf = NaN). With no power (or nothing else), ``mul_no_nan(rest,
    a)``.

    The order is part of the guard. ``a`` meets the powers first and the sums last: in
    Lennard-Jones' ``4*eps*s*(s - 1)`` with ``s = (sigma/r)**6``, ``eps * s`` is finite
    where ``s - 1`` is inf (eps = 0, r = 1.2e-38, sigma = 3.4e38), and brings a large
    ``s`` back before ``s - 1`` multiplies it. An input in the rest meets ``a`` last:
    ``depth * (2 * width * exp(t) * expm1(t))`` is 2.3e4 at depth = 3.4e38, width =
    -1.2e-38, where depth times the exponentials overflowed. (Multiplying the inputs
    first, ``depth * width``, was measured worse: inf * 0 = NaN at depth = width =
    3.4e38, r = r0, 11 of 133 points in the Morse audit, where ``width * (...)``
    underflows at 1 point.)

    The rest may have poles where an input is 0 (``r**-6``), and nowhere else
    (:func:`_poles`). At a pole the product has no value where ``a`` is 0 (0 * inf), so
    there it is computed as written, NaN (``tf.where(tf.equal(r, 0.0), ...)``). A pole
    alone does not count as overflow (a reciprocal overflows only at subnormal inputs):
    ``eps * sigma / r`` is left as it is.

    Args:
        expr: a real elementwise value or partial, ready to print.
        inputs: the op's input symbols.
        last: inputs that are never part of ``a`` but meet the product last, as its
            other factors: a derived order's upstream gradients (the VJP is linear in
            them; ``eps * upstream`` first overflowed at eps = 3.4e38 where
            Lennard-Jones' slope is 30).

    Returns:
        The expression and the guard's name (``zero_factor``) where it applied.
    """
    def fix(e):
        lasts = [f for f in e.args if f in last]
        if lasts:
            rest = sympy.Mul(*[f for f in e.args if f not in last])
            guarded = fix(rest) if isinstance(rest, sympy.Mul) else None
            return None if guarded is None else sympy.Mul(*lasts) * guarded
        free = [a for a in e.args if a not in inputs]
        scale = [f for f in e.args if f in inputs and not sympy.Mul(*free).has(f)]
        rest = sympy.Mul(*[a for a in e.args if a not in scale])
        if not scale or rest.is_number:
            return None
        poles = _poles(rest, inputs)
        if poles is None or not _can_overflow(_without_poles(rest, poles)):
            return None
        quotient = _repeated_quotient(rest, sympy.Mul(*scale), poles)
        if quotient is not None:
            return quotient
        guarded = _scaled_last(rest, sympy.Mul(*scale))
        if not poles:
            return guarded
        at_pole = sympy.Or(*[sympy.Eq(p, 0) for p in sorted(poles, key=str)])
        return sympy.Piecewise((e, at_pole), (guarded, True))

    return each_product(expr, fix, "zero_factor")


def _repeated_quotient(rest, a, poles):
    """``c * a * r**-n`` (``c`` a number, ``r`` a pole input) as ``c * (a/r/.../r)``,
    ``a`` divided by ``r`` ``n`` times: 0 where ``a`` is 0 and ``r`` is not, NaN at
    ``a = r = 0`` (no value), and ``a/r`` first where ``1/r**n`` alone overflows (``x /
    y``'s partial in y, ``-x/y**2``, was 0 * inf = NaN at x = 0, y = 1e-20 in float32).
    None for another rest."""
    coeff, power = rest.as_coeff_Mul()
    if not (isinstance(power, sympy.Pow) and power.base in poles
            and power.exp.is_Integer and power.exp < 0):
        return None
    return coeff * _divided(a, power.base, -int(power.exp))


def _divided(a, r, n: int):
    """``a / r / ... / r`` (``n`` divisions, each a :class:`Ratio`): never ``1/r`` on
    its own, which overflows or underflows where the quotient need not."""
    for _ in range(n):
        a = Ratio(a, r)
    return a


def _scaled_last(rest, a):
    """``mul_no_nan(Q, mul_no_nan(P, a) / r**k)`` for the powers ``P`` of ``rest`` (its
    one negative base's beyond the positive powers' degree, ``r**-k``, apart: divisions
    after) and its other factors ``Q``; ``mul_no_nan(rest, a)`` where either is only
    numbers.

    ``a`` meets the balanced powers first and a leftover reciprocal after: in
    ``eps*sigma**6*r**-7`` (Lennard-Jones' slope), ``eps * (sigma/r)**6`` first, then
    ``/ r``: ``(sigma/r)**6 / r`` underflows to 0 at r = sigma = 3.4e38 where the
    gradient is -24 with eps = 3.4e38, and overflows at r = 1e-38, sigma = 1e10 in
    float64 where eps = 1e-38 brings it back. Where ``P`` and ``a`` lie on one side of
    1, ``P`` meets the divisions first (:func:`_straddled`): ``eps * (sigma/r)**6``
    overflowed at eps = 1.2e37, sigma/r = -46 in float32 where the slope is 8e35."""
    factors = sympy.Mul.make_args(rest)
    powers = [f for f in factors if isinstance(f, sympy.Pow) and not f.base.is_number]
    others = [f for f in factors if f not in powers]
    if not powers:
        paired = _paired_across_one(others, a)
        return mul_no_nan(rest, a) if paired is None else paired
    balanced, leftover = _balanced(powers)
    if all(f.is_number for f in others) and leftover == 1:
        return mul_no_nan(rest, a)
    inner = mul_no_nan(balanced, a)
    if leftover != 1:  # divided by (not times a reciprocal, 0 in float32 at r = 3e38)
        inner = _straddled(balanced, a, leftover.base, -int(leftover.exp))
    if all(f.is_number for f in others):
        return sympy.Mul(*others) * inner
    constant, rest = _constant_apart(others)
    return constant * mul_no_nan(sympy.Mul(*rest), inner)


def _constant_apart(factors) -> tuple:
    """``(c, rest)``: the numbers of ``factors`` and the contents of their sums (``24``
    of ``48*s - 24``) as one constant, and the other factors with each sum primitive
    (``2*s - 1``), so that the constant multiplies last. SymPy distributes a number
    over a sum, and ``48*s`` overflowed at s = (sigma/r)**6 = 1.2e38 in float32 where
    Lennard-Jones' slope is 1.1e32 (eps = 3.2e-18)."""
    constant, rest = S.One, []
    for f in factors:
        if f.is_number:
            constant *= f
        elif isinstance(f, sympy.Add):
            content, primitive = f.as_content_primitive()
            constant, rest = constant * content, rest + [primitive]
        else:
            rest.append(f)
    return constant, rest


def _straddled(p, a, r, k: int):
    """``p * a / r**k`` in the order whose every intermediate lies between two of its
    factors or beside the result: ``p * a`` first where ``|p|`` and ``|a|`` lie on
    opposite sides of 1 (the product lies between them; the divisions then move it
    one way, toward the result), else ``p / r ... / r`` first, then times ``a``
    (where ``p`` and ``a`` are both large, ``p/r`` lies between ``p`` and ``1/r`` or
    every factor is large; where both are small, likewise). So with one division
    (``k = 1``) nothing overflows, or underflows to 0, where the result and ``1/r``
    are finite and normal. With more, ``p / r / r`` may still leave the range where
    ``a`` would bring it back (``(sigma/r)**6 / r**2`` at r = 4.8e-26, sigma/r =
    -0.046, eps = 1.5e-34 in float32, a second derivative of Lennard-Jones): no fixed
    order of four factors holds everywhere. Source: the three-factor argument of
    :func:`_paired_across_one`. The sides are read from the squares
    (SymPy splits ``Abs`` of a product of powers into its factors' powers, which
    underflow where ``p`` does not); where a square overflows or underflows its side
    is still right, and the test is NaN (inf * 0) only where ``|p|`` or ``|a|`` is 1
    (their product first: ``(sigma/r)**6 = 1`` at r = sigma = eps = 3.4e38, where
    ``1/r`` first is 0 in float32)."""
    one_side = (Square(p) - 1) * (Square(a) - 1) > 0
    return sympy.Piecewise((mul_no_nan(_divided(p, r, k), a), one_side),
                           (_divided(mul_no_nan(p, a), r, k), True))


def _paired_across_one(others, a):
    """``a * x * E`` for the one factor ``x`` of ``others`` that is an input or a sum of
    inputs (``E``: the other factors, not only numbers), in the order whose one
    intermediate product lies between its factors or beside the result:
    ``mul_no_nan(E, mul_no_nan(x, a))`` where ``|a|`` and ``|x|`` lie on opposite
    sides of 1 (``(|a| - 1) * (|x| - 1) <= 0``), else ``mul_no_nan(x * E, a)``; None
    for other factors.

    Where ``a`` and ``x`` straddle 1, ``a * x`` lies between them and cannot overflow or
    underflow; where they do not, either ``x * E`` lies between ``x`` and ``E`` or all
    three are on one side of 1 and ``x * E`` lies between ``x`` and the result. So no
    intermediate overflows (or underflows to 0) where the result is finite (and
    normal). No fixed order does this: Morse's ``depth * width * exp(u) * expm1(u)``
    needs ``depth * width`` first at depth = -7e26, width = 2e-33 (width times the
    exponentials underflows to 0: exact 2.0e-12), and ``width * (...)`` first at depth
    = width = 3.4e38, r = r0 (inf * 0). Source: the order of a product of three
    factors that keeps every partial product in range, as in scaled products
    (LAPACK's ``dnrm2`` keeps its sum in range by scaling)."""
    plain = [f for f in others if not f.is_number and _linear_in_inputs(f)]
    rest = [f for f in others if f not in plain]
    if len(plain) != 1 or all(f.is_number for f in rest):
        return None
    (x,) = plain
    e = sympy.Mul(*rest)
    apart = (sympy.Abs(a) - 1) * (sympy.Abs(x) - 1) <= 0
    return sympy.Piecewise((mul_no_nan(e, mul_no_nan(x, a)), apart),
                           (mul_no_nan(x * e, a), True))


def _linear_in_inputs(f) -> bool:
    """Whether ``f`` is a symbol or a sum of numbers times symbols (``r0/2 - r/2``)."""
    terms = sympy.Add.make_args(f)
    return all(t.as_coeff_Mul()[1].is_Symbol for t in terms if not t.is_number)


def _balanced(powers) -> tuple:
    """``(P, L)``: the product of ``powers`` as the powers whose degrees balance (as
    many of the one negative base's as the positive powers have) and the leftover
    negative power; ``(product, 1)`` where they do not split so."""
    negative = [p for p in powers if p.exp.is_Integer and p.exp < 0]
    positive = [p for p in powers if p.exp.is_Integer and p.exp > 0]
    if len(negative) != 1 or not positive or len(positive) + 1 != len(powers):
        return sympy.Mul(*powers), S.One
    (low,) = negative
    up = sum(int(p.exp) for p in positive)
    if -low.exp <= up:
        return sympy.Mul(*powers), S.One
    return sympy.Mul(*positive, low.base ** -up), low.base ** (low.exp + up)


# Declared functions of the whole real line that are not finite everywhere on it.
_POLES = (Recip, Ratio, xdivy, nan_outside)


def _poles(e, inputs) -> frozenset | None:
    """The inputs at whose zero ``e`` has a pole (``r`` in ``sigma**6 * r**-6``), where
    ``e`` is finite wherever the op's ``inputs`` are finite and not those zeros:
    numbers, inputs, sums, products, integer powers (negative ones of an input alone),
    and functions declared on the whole real line with no singular point, of such;
    None for anything else. Another symbol (a `where` name, a node) may stand for a pole
    (``t = 1/x``): None."""
    if e.is_Atom:
        if e.is_Symbol:
            return frozenset() if e in inputs else None
        return frozenset() if e.is_finite is not False else None
    if isinstance(e, sympy.Pow):
        if not e.exp.is_Integer:
            return None
        if e.exp < 0:
            return frozenset([e.base]) if e.base in inputs else None
        return _poles(e.base, inputs)
    if isinstance(e, sympy.Piecewise):
        parts = [v for v, _ in e.args]
    elif isinstance(e, (sympy.Add, sympy.Mul)):
        parts = e.args
    elif isinstance(e, sympy.Function) and not isinstance(e, _POLES):
        declared = of_class(type(e))
        if declared is None or declared.domain != S.Reals or declared.singular:
            return None
        parts = e.args
    else:
        return None
    found = [_poles(a, inputs) for a in parts]
    return None if any(f is None for f in found) else frozenset().union(*found)


def _without_poles(e, poles):
    """``e`` with each reciprocal of an input in ``poles`` replaced by 1, and each
    higher negative power by the positive one, which overflows alike (``r**-2`` at r =
    1e-20 in float32, where ``q1*q2/r**2`` is 0 at q1 = 0); a reciprocal alone
    overflows only at subnormal inputs."""
    if not poles:
        return e
    return e.replace(lambda f: isinstance(f, sympy.Pow) and f.base in poles
                     and f.exp.is_negative,
                     lambda f: S.One if f.exp == -1 else f.base ** -f.exp)


# Functions that overflow at finite arguments (faster than any polynomial).
_EXPONENTIAL = (sympy.exp, expm1, sympy.sinh, sympy.cosh)


def _can_overflow(e) -> bool:
    """Whether ``e`` (entire) can be inf where its inputs are finite: a product of two
    or more unbounded factors, a power of 2 or more of an unbounded base, or an
    exponential-type function (``exp``, ``expm1``, ``sinh``, ``cosh``); not an input
    alone, ``floor(x)``, a bounded function (``sigmoid(x) * sigmoid(-x)``) or a sum of
    such."""
    if e.is_Atom:
        return False
    if isinstance(e, sympy.Mul):
        return sum(_unbounded(a) for a in e.args) >= 2 or any(
            _can_overflow(a) for a in e.args)
    if isinstance(e, sympy.Pow):
        return e.exp >= 2 and _unbounded(e.base)
    if isinstance(e, _EXPONENTIAL):
        return True
    if isinstance(e, sympy.Function) and _bound(e) is not None:
        return False
    return any(_can_overflow(a) for a in e.args)


def _unbounded(e) -> bool:
    """Whether ``e`` can be as large as its inputs (or larger): not a number or a
    bounded function."""
    if e.is_number:
        return False
    if isinstance(e, sympy.Function) and not isinstance(e, sympy.Piecewise):
        return _bound(e) is None
    return True


def split_differences(expr, inputs) -> tuple[sympy.Basic, tuple[str, ...]]:
    """``w * (a - b) * c`` -> ``Piecewise((w*(a/2 - b/2)*c*2, overflowed(a - b)),
    (w*(a - b)*c, True))`` for inputs ``a``, ``b`` and ``w`` (``c``: the other factors;
    ``overflowed``: ``tf.math.is_inf``): ``r - r0`` at r = -3.4e38, r0 = 3.4e38 in
    float32 is inf though ``w * (a - b)`` is finite (width = 1.2e-38 in Morse's ``-width
    * (r - r0)``: -8). The halves cannot overflow, and the 2 comes last: it overflows
    only where the exact product does. There both are above a quarter of the largest
    number, where halving is exact. Only there: ``w * (a/2 - b/2)`` is subnormal, and
    flushed to 0 on CPUs, where ``w * (a - b)`` is just above the smallest normal
    number (w = 1.2e-38, a - b = 1.5). ``w`` is an input factor that neither ``a`` nor
    ``b`` is, and stays a factor (for :func:`zero_factors`). Source: the scaling of
    LAPACK's ``dlapy2``/``hypot``, by a power of 2 that is exact.

    Args:
        expr: a real elementwise value or partial, ready to print.
        inputs: the op's input symbols.

    Returns:
        The expression and the guard's name (``split_difference``) where it applied.
    """
    def fix(e):
        for s in e.args:
            pair = _input_difference(s, inputs)
            if pair is None or not any(f in inputs and f not in pair for f in e.args):
                continue
            a, b = pair
            rest = [f for f in e.args if f is not s]
            # a number times a sum alone would be distributed (2*(a/2 - b/2) is a - b);
            # the input w keeps the product a product
            return sympy.Piecewise((sympy.Mul(2, *rest, a / 2 - b / 2), overflowed(a - b)),
                                   (e, True))
        return None

    return each_product(expr, fix, "split_difference")


def _input_difference(s, inputs):
    """``(a, b)`` where ``s`` is ``a - b`` for two inputs ``a`` and ``b``; else None."""
    if not (isinstance(s, sympy.Add) and len(s.args) == 2):
        return None
    plus = [t for t in s.args if t in inputs]
    minus = [-t for t in s.args if -t in inputs]
    if len(plus) == 1 and len(minus) == 1:
        return plus[0], minus[0]
    return None
