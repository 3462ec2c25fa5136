"""Guards, reduction rewrites and normal forms, without TensorFlow.

Tables of inputs -> exact SymPy outputs for the public functions that
:mod:`gradgen.derive` calls (``guards.zero_subgradients``,
``guards.removable_singularities``, ``guards.guard_branches``,
``reductions.stabilize_reductions``) and for ``normalize.scaled_exp``, plus 50-digit value
checks where a rewrite must keep the value. A few private helpers are tested directly
where no public input reaches the branch; each such test says why.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import sympy
from sympy import S, And, Eq, Ne, Piecewise, Rational, oo

from gradgen.expr import parse_op
from gradgen.functions import (
    Guard, LogAbs, Ratio, Recip, Square, expm1, finite_or, hypot, log1p, logsumexp,
    mul_no_nan, nan_outside, overflowed, sigmoid, softplus, xdivy, xlog1py, xlogy,
)
from gradgen.spec import parse_spec
from gradgen.stability import guards
from gradgen.stability.guards import (
    branches, conditions, norms, products, singularities, subgradients, taylor, walk,
)
from gradgen.stability.families.powers import _zero_of
from gradgen.stability.match import _exp_terms
from gradgen.stability.normalize import scaled_exp
from gradgen.stability.reductions import stabilize_reductions
from tfmodes import second_partials, two_orders

x, y, r, d = sympy.symbols("x y r d", real=True)
sin, cos, exp, log, sqrt = sympy.sin, sympy.cos, sympy.exp, sympy.log, sympy.sqrt

DIGITS = 50


# ------------------------------------------------------------ zero_subgradients

# condition on the branch of x**(-1/2) -> whether it proves x != 0 (then the factor is
# left alone; else it gets its subgradient-0 Piecewise)
NONZERO_CONDITIONS = [
    (x > 0, True),
    (x >= 0, False),  # x = 0 is allowed
    (x >= 1, True),
    (x > 2, True),
    (x < 0, True),
    (x <= -1, True),
    (x <= 0, False),
    (x < 5, False),  # an upper bound above 0 does not exclude 0
    (Ne(x, 0), True),
    (Ne(x, 1), False),
    (Eq(x, 1), True),
    (Eq(x, 2), True),
    (Eq(x, 0), False),
    (And(x > 0, x < 4), True),
    (x > y, False),  # not a numeric bound
]


@pytest.mark.parametrize("cond, proves_nonzero", NONZERO_CONDITIONS, ids=str)
def test_zero_subgradients_trusts_conditions_that_exclude_zero(cond, proves_nonzero):
    written = Piecewise((x ** -S.Half, cond), (0, True))
    out, used = guards.zero_subgradients(written)
    if proves_nonzero:
        assert (out, used) == (written, ())
    else:
        inner = Piecewise((x ** -S.Half, Ne(x, 0)), (0, True))
        assert (out, used) == (Piecewise((inner, cond), (0, True)), ("sqrt_zero",))


def test_zero_subgradients_norm_factor():
    s = x**2 + y**2
    out, used = guards.zero_subgradients(x / s)
    # x, a component of the squared norm, is paired with it: x/s's derivative is then
    # 1/s - 2*(x/s)*x/s, not 1/s - 4*x**2*(1/s)**2 ((1/s)**2 underflows at x = 1e10)
    # and 0 only at the origin, not where s underflows to 0 (x = y = 1e-20 in float32)
    nonzero = sympy.Or(Ne(x, 0), Ne(y, 0))
    assert (out, used) == (Piecewise((Ratio(x, s), nonzero), (0, True)), ("norm_zero",))
    # elsewhere the value is unchanged
    point = {x: Rational(3, 7), y: Rational(-2, 5)}
    assert (out.subs(point).replace(Ratio, lambda a, b: a / b) - (x / s).subs(point)) == 0
    assert out.subs({x: 0, y: 0}) == 0
    # a factor that is not a component is divided by s as a ratio too (norm_quotient
    # computes it with the norm where s underflows), 0 only at the origin
    out, _ = guards.zero_subgradients(sympy.sin(x) / s)
    assert out == Piecewise((Ratio(sympy.sin(x), s), nonzero), (0, True))


# ------------------------------------------------------------ guard_branches

# condition of the branch 1/x -> the safe value of x where the branch is not selected
# (None: no single safe value is known, the branch is left as is); a one-sided bound
# where 1/x is finite is the safe value itself (a clamp), else a point inside
SAFE_VALUES = [
    (x > 0, 1),
    (x >= 0, 1),
    (x > 2, 2),
    (x >= 1, 1),
    (x < 0, -1),
    (x <= 0, -1),
    (x <= -1, -1),
    (x < 5, 5),
    (Ne(x, 0), 1),
    (Ne(x, 1), 2),
    (Eq(x, 2), 2),
    (Eq(x, 1), 1),
    (And(x > 0, x < 4), 2),
    (x > y, y),
    (And(x > 0, x > 1), None),  # two lower bounds
    (And(x < -1, x < 0), None),  # two upper bounds
    (And(Ne(x, 0), Ne(x, 1)), None),
    # a != bound with other bounds: the value must avoid it (the branch after a
    # where(x == 1, ...) was evaluated at x = 1 itself)
    (And(x > 0, Ne(x, 1)), 2),
    (And(x > 0, Ne(x, 1), Ne(x, 2)), 3),
    (And(x < 0, Ne(x, -1)), -2),
    (And(x > 0, x < 4, Ne(x, 2)), Rational(3, 2)),
    (And(Eq(x, 2), Ne(x, 2)), None),
]


@pytest.mark.parametrize("cond, safe", SAFE_VALUES, ids=str)
def test_guard_branches_safe_value_per_condition(cond, safe):
    written = Piecewise((1 / x, cond), (0, True))
    out, used = guards.guard_branches(written)
    if safe is None:
        assert (out, used) == (written, ())
        return
    expected = Piecewise((1 / Guard(x, cond, safe), cond), (0, True), evaluate=False)
    assert (out, used) == (expected, ("double_where",))
    # the selected branch keeps its value, the other one is finite
    for point in (-3, -1, Rational(1, 2), 1, 2, 3, 7):
        if y in cond.free_symbols:
            continue
        holds = cond.subs(x, point)
        value = out.args[0][0].subs(x, point)
        if holds is sympy.true:
            assert value == 1 / S(point)
        else:
            assert value.is_finite, (point, value)


def test_guard_branches_later_branch_is_guarded_by_negated_earlier_conditions():
    out, used = guards.guard_branches(Piecewise((0, x > 0), (1 / x, True)))
    assert out == Piecewise((0, x > 0), (1 / Guard(x, x <= 0, -1), True))
    assert used == ("double_where",)


def test_guard_branches_linear_branches_need_no_guard():
    written = Piecewise((x, x > 0), (2 * x + 1, True))
    assert guards.guard_branches(written) == (written, ())


def test_guard_branches_keeps_the_conditions_as_given():
    # an unevaluated Piecewise (as removable_singularities makes) keeps its conditions:
    # evaluating it would turn `x <= 0` (the negation of the first) into True
    written = Piecewise((1 / x, x > 0), (1 / (x * (x - 3)), x <= 0), evaluate=False)
    out, _ = guards.guard_branches(written)
    assert [c for _, c in out.args] == [x > 0, x <= 0]
    assert out.args[1][0] == 1 / (Guard(x, x <= 0, -1) * (Guard(x, x <= 0, -1) - 3))


# ------------------------------------------------------- removable_singularities


def _horner(coefficients, v=x):
    """sum(c_k * v**k) in Horner form in v."""
    return sympy.horner(sum(c * v**k for k, c in enumerate(coefficients)), wrt=v)


def _filled(formula, polynomial, h: str, v=x):
    """The formula for |v| > h (at v replaced by h inside), else the polynomial."""
    h = sympy.Float(h)
    outside = sympy.Abs(v) > h
    return Piecewise(
        (formula.xreplace({v: Guard(v, outside, h)}), outside), (polynomial, True),
        evaluate=False,
    )


def _point_filled(formula, limit, h: str, v=x):
    """The formula where v != 0 (at v replaced by h there inside), else its limit."""
    nonzero = sympy.Ne(v, 0)
    return Piecewise(
        (formula.xreplace({v: Guard(v, nonzero, sympy.Float(h))}), nonzero), (limit, True),
        evaluate=False,
    )


def _filled_in_product(formula, factor, coefficients, h: str, v=x):
    """``formula`` = ``factor * Q(v * w)`` (w the other symbol), with Q's polynomial
    (``coefficients``, Q(0) = 1) in Horner form in squarings of ``v * w`` used where
    ``|v * w| <= h``."""
    (w,) = formula.free_symbols - {v}
    square = Square(v * w)
    q = sympy.Integer(0)
    for c in reversed(coefficients[2::2]):
        q = (q * square + c) if q != 0 else c
    polynomial = factor * (1 + q * square)
    return _filled_on(formula, polynomial, w, h, v)


def _filled_on(formula, polynomial, w, h: str, v=x):
    """The formula where |v * w| > h (at v replaced there by h / max(|w|, 1) inside),
    else the polynomial."""
    h = sympy.Float(h)
    outside = sympy.Abs(v * w) > h
    safe = h / sympy.Max(sympy.Abs(w), 1)
    return Piecewise(
        (formula.xreplace({v: Guard(v, outside, safe)}), outside), (polynomial, True),
        evaluate=False,
    )


SINC_10 = [S(1), 0, Rational(-1, 6), 0, Rational(1, 120), 0, Rational(-1, 5040), 0,
           Rational(1, 362880), 0, Rational(-1, 39916800)]

# written -> (expected, used): limit finite (Taylor), limit infinite and Taylor fallback
REMOVABLE = [
    (sin(x) / x, _filled(sin(x) / x, _horner(SINC_10), "0.05")),
    # only the pole with the factor that vanishes is expanded
    (exp(x) * sin(x) / x, exp(x) * _filled(sin(x) / x, _horner(SINC_10), "0.05")),
    # a function of 100*x: the interval shrinks by its scale, 100/sqrt(6) (at 0.05 the
    # polynomial gave 18% off at x = 0.05)
    (sin(100 * x) / x, _filled(
        sin(100 * x) / x, _horner([c * 100 ** (k + 1) for k, c in enumerate(SINC_10)]),
        "0.0012")),
    # a function of x*y: the polynomial is used where |x*y| <= h, in powers of x*y (a
    # fixed interval |x| <= 0.05 gave -2.45e11 for 18.6 at x = 0.04, y = 1000, and
    # coefficients y**11/39916800 overflow); the pole in y likewise
    (sin(x * y) / x, _filled_in_product(sin(x * y) / x, y, SINC_10, "0.05")),
    (sin(x * y) / y, _filled_in_product(sin(x * y) / y, x, SINC_10, "0.05", y)),
    # no one scale (x and x*y): v = 0 alone is filled in with the limit
    (sin(x) / x + sin(x * y) / x, _filled_on(
        sin(x) / x + sin(x * y) / x,
        _horner([c * (1 + y ** (k + 1)) for k, c in enumerate(SINC_10)]), 1 + abs(y), "0.05")),
    # ... with two other inputs whose coefficients grow: the interval shrinks by both
    # (symbols have no order of their own: they are sorted by SymPy's sort key)
    (sin(x) / x + sin(x * y) / x + sin(x * r) / x, _filled_on(
        sin(x) / x + sin(x * y) / x + sin(x * r) / x,
        _horner([c * (1 + y ** (k + 1) + r ** (k + 1)) for k, c in enumerate(SINC_10)]),
        (1 + abs(y)) * (1 + abs(r)), "0.05")),
    # ... the growth is the rise of the coefficients' degree in y per power of x from
    # the first term's: 2 for (1 + y**2) - (1 + y**6) x**2/6 + ... (a function of x
    # and x*y**2), 1 for (1 + y**2) x/2 - (1 + y**4) x**3/24 + ... (a series that
    # starts at x**1)
    (sin(x) / x + sin(x * y**2) / x, _filled_on(
        sin(x) / x + sin(x * y**2) / x,
        _horner([c * (1 + y ** (2 * k + 2)) for k, c in enumerate(SINC_10)]),
        (1 + abs(y)) ** 2, "0.05")),
    ((1 - cos(x)) / x + (1 - cos(x * y)) / x, _filled_on(
        (1 - cos(x)) / x + (1 - cos(x * y)) / x,
        sympy.horner(sympy.series((1 - cos(x)) / x + (1 - cos(x * y)) / x, x, 0, 11)
                     .removeO(), wrt=x),
        1 + abs(y), "0.05")),
    # a sum with no plan (cos(y) is no polynomial in y): each term with its own scale
    (sin(x * y) / x + cos(y) * sin(x) / x,
     _filled_in_product(sin(x * y) / x, y, SINC_10, "0.05")
     + cos(y) * _filled(sin(x) / x, _horner(SINC_10), "0.05")),
    # one term with no one scale whose coefficients are no polynomials in y: x = 0
    # alone is filled in, with the limit
    (sin(x) * sin(x * exp(y)) / x**2, _point_filled(
        sin(x) * sin(x * exp(y)) / x**2, exp(y), "0.062")),
    # pole of order 2: h = eps**(1/13)
    ((x * cos(x) - sin(x)) / x**2, _filled(
        (x * cos(x) - sin(x)) / x**2,
        _horner([0, Rational(-1, 3), 0, Rational(1, 30), 0, Rational(-1, 840), 0,
                 Rational(1, 45360), 0, Rational(-1, 3991680)]),
        "0.062")),
    # gradgen's xlogy read as x*log(y) for the limit; y a factor of every coefficient:
    # the scale is 1
    (xlogy(y, 1 + x) / x, _filled(
        xlogy(y, 1 + x) / x, _horner([y * (-1) ** k / (k + 1) for k in range(11)]),
        "0.05")),
    # a factor that has the pole and vanishes at 0 is a pole, not a zero; the series
    # starts at x (r = 1), so the relative truncation error at h is 0.84 h**10, 8e-14 at
    # 0.05 (above float64's eps**(11/12) = 4e-15): the interval is halved
    (exp(y) * sin(x) / x / (1 + 1 / x), exp(y) * _filled(
        sin(x) / x / (1 + 1 / x),
        _horner([0, 1, -1, Rational(5, 6), Rational(-5, 6), Rational(101, 120),
                 Rational(-101, 120), Rational(4241, 5040), Rational(-4241, 5040),
                 Rational(305353, 362880), Rational(-305353, 362880)]),
        "0.025")),
    # a jump, not a removable singularity (the one-sided series would be 1, or sinc)
    (sympy.Abs(x) / x, None),
    (sympy.Abs(x) * sin(x) / x**2, None),
    # a sum: only the terms with the pole are filled in (one, or several whose sum has
    # the limit), the other terms kept beside
    (sin(x) / x + y, _filled(sin(x) / x, _horner(SINC_10), "0.05") + y),
    (sin(x) / x**2 - 1 / x + y, _filled(
        sin(x) / x**2 - 1 / x,
        sympy.horner(sympy.series(sin(x) / x**2 - 1 / x, x, 0, 11).removeO(), wrt=x),
        "0.062") + y),
    # poles in two inputs: each filled in (the one in y was left as 0/0 at y = 0)
    (sin(x) / x * sin(y) / y, _filled(sin(x) / x, _horner(SINC_10), "0.05")
     * _filled(sin(y) / y, _horner(SINC_10, y), "0.05", y)),
    # limits that are infinite: left alone
    (1 / x, None),
    (y / x**2, None),
    (-y / x**2, None),
    # finite limit but no Taylor polynomial: its coefficients divide by |r|
    (d**2 * (sqrt(1 + r**2 / d**2) - 1), None),
]


@pytest.mark.parametrize("written, expected", REMOVABLE, ids=str)
def test_removable_singularities(written, expected):
    out, used = guards.removable_singularities(written)
    if expected is None:
        assert (out, used) == (written, ())
    else:
        assert (out, used) == (expected, ("removable_singularity",))


def test_removable_singularities_float32_degree_and_threshold():
    out, used = guards.removable_singularities(sin(x) / x, "float32")
    assert out == _filled(sin(x) / x, _horner(SINC_10[:7]), "0.14")
    assert used == ("removable_singularity",)


# written -> its value at x as an mpmath function (50 digits)
VALUES = [
    (sin(x) / x, lambda t: mpmath.sin(t) / t),
    ((x * cos(x) - sin(x)) / x**2, lambda t: (t * mpmath.cos(t) - mpmath.sin(t)) / t**2),
    (exp(x) * sin(x) / x, lambda t: mpmath.exp(t) * mpmath.sin(t) / t),
]


@pytest.mark.parametrize("written, reference", VALUES, ids=[str(w) for w, _ in VALUES])
def test_removable_singularities_keep_the_value(written, reference):
    out, _ = guards.removable_singularities(written)
    with mpmath.workdps(DIGITS):
        for t in (Rational(1, 10**12), Rational(-1, 1000), Rational(1, 50), Rational(3, 100),
                  Rational(1, 10), Rational(-7, 10), S(2)):
            got = out.subs(x, t).evalf(DIGITS)
            want = reference(mpmath.mpf(t.p) / t.q)
            # the polynomial near 0 (truncation error below 1e-15), the formula outside
            assert abs(mpmath.mpf(str(got)) - want) <= 1e-15 * abs(want), t
        assert out.subs(x, 0) == sympy.limit(written, x, 0)


def test_a_group_with_a_pole_leaves_the_other_groups_filled():
    """(sin(x*y)/x + z/x)' in x: the terms in y have a finite limit at x = 0, -z/x**2 has
    none. The y group is filled and -z/x**2 kept as written: the rule was recorded but
    nothing filled, and at z = 0 the sum cancelled to 0 at x = 1e-9 (exact -9e-9)."""
    z = sympy.Symbol("z", real=True)
    written = sympy.diff(sin(x * y) / x + z / x, x)
    out, used = guards.removable_singularities(written)
    assert used == ("removable_singularity",)
    assert -z / x**2 in out.args and any(isinstance(a, Piecewise) for a in out.args)
    with mpmath.workdps(DIGITS):
        for t in (Rational(1, 10**9), Rational(-1, 10**6), Rational(1, 10)):
            got = out.subs({x: t, y: 3, z: 0}).evalf(DIGITS)
            a = mpmath.mpf(t.p) / t.q
            want = 3 * mpmath.cos(3 * a) / a - mpmath.sin(3 * a) / a**2
            assert abs(mpmath.mpf(str(got)) - want) <= 1e-15 * abs(want), t


def test_a_product_with_an_interval_is_filled_whole_not_by_groups():
    """A pole times a sum is split into groups of inputs only where the whole has no
    interval: (sin(x) + y*sin(x))/x has one (its ratios are numbers), so it is one fill."""
    out, used = guards.removable_singularities((sin(x) + y * sin(x)) / x)
    assert used == ("removable_singularity",)
    assert isinstance(out, Piecewise) and len(out.atoms(Piecewise)) == 1, out


def test_removable_singularities_keep_the_conditions_as_given():
    """Each branch of an unevaluated Piecewise is filled with its conditions as they
    are: evaluating it again would write `2*x > 1` as `x > 1/2` and `x <= 1` (the
    negation of the first) as True."""
    written = Piecewise((0, x > 1), (sin(x) / x, x <= 1), (2 * x, 2 * x > 1), (1, True),
                        evaluate=False)
    out, _ = guards.removable_singularities(written)
    assert [c for _, c in out.args] == [x > 1, x <= 1, 2 * x > 1, S.true]
    assert isinstance(out.args[1][0], Piecewise)


def test_terms_left_as_written_still_have_their_own_singularities_filled():
    """The terms a fill in x leaves alone are visited for singularities in the other
    inputs: a term without the pole in x (sin(z)/z beside sin(x)/x), and a group of
    terms whose pole in x is a true one (sin(z)/(z*x) beside a filled group in x, y)."""
    z = sympy.Symbol("z", real=True)
    for written in (sin(x) / x + sin(z) / z,
                    sympy.diff(sin(x * y) / x, x) + sin(z) / (z * x)):
        out, used = guards.removable_singularities(written)
        filled = {frozenset(p.free_symbols - {y}) for p in out.atoms(Piecewise)}
        assert used == ("removable_singularity",)
        assert filled >= {frozenset({x}), frozenset({z})}, out


# ----------------------------------------------- private helpers of the filling

# `limit_at_zero` decides "finite limit or not" and removable_singularities only shows
# its answer combined with `taylor_polynomial`, which also fails for these (a pole has
# no Taylor polynomial), so the infinite cases are checked here directly.
LIMITS = [
    (sin(x) / x, S(1)),
    (exp(-1 / x**2) / x, S(0)),
    (1 / x, None),  # zoo
    (x**-2, None),  # oo
    (-(x**-2), None),  # -oo
    (y / x**2, None),  # oo*sign(y)
    (-y / x**2, None),  # -oo*sign(y)
    # zoo*y**6*sign(y**6): Lennard-Jones' second derivative at r = 0
    (y**6 * (24 - 48 * y**6 / x**6) * Recip(x) / x**6, None),
    (sin(1 / x), None),  # AccumBounds(-1, 1)
    (sympy.Function("f")(x) / x, None),  # unevaluated Limit
]


@pytest.mark.parametrize("expr, limit", LIMITS, ids=str)
def test_private_limit(expr, limit):
    assert guards.limit_at_zero(expr, x) == limit


def test_private_taylor_refuses_infinite_coefficients():
    # Private: an infinite coefficient with a finite limit at 0 is not reachable from
    # removable_singularities (its `limit_at_zero` rejects such expressions first).
    assert taylor.taylor_polynomial(sin(x) / x + oo * y, x, 4) is None
    # a pole's series is nan (Lennard-Jones' second derivative in r)
    assert taylor.taylor_polynomial(y**6 * (24 - 48 * y**6 / x**6) / x**7, x, 4) is None
    assert taylor.taylor_polynomial(sin(x) / x + y, x, 4) == _horner(
        [1 + y, 0, Rational(-1, 6), 0, Rational(1, 120)])


# taylor_plan: (h, w) of the polynomial's interval |x * w| <= h. h0 = eps**(1/(m + 1 + k))
# (float32, degree m = 4, pole order k = 1: 2**(-23/6) = 0.070), divided by the scale
# s = max |q_j|**(1/(j - r)) over j <= m + 1, then halved (2 digits) until the tail
# sum_j |q_j| h**(j - r) over j = m + 1 .. m + TAIL_TERMS is at most eps**((m + 1)/(m + 1 + k)).
# A number whose float is the float16 largest's square root exactly: not above it.
_AT_FLOAT16_BOUND = Rational(65504**0.5)
# a tail exactly at float32's target eps**(5/5) for h = h0 = 2**(-23/5) = 0.041
_TAIL_AT_TARGET = Rational(2.0**-23 / 0.041**6)

TAYLOR_PLANS = [
    # unit scale: h0 itself (its tail, x**6/5040 at 0.07, is far below 1.7e-6)
    (sin(x) / x, 4, "float32", (0.07, 1)),
    # s = 100/sqrt(6) from q_2: h0 / s = 0.0017
    (sin(100 * x) / x, 4, "float32", (0.0017, 1)),
    # a leading power r = 1: 5000 x (1 - 10**4 x**2/12 + ...), s = 100/sqrt(12) from
    # (q_3)**(1/(3 - r)): h0 / s = 0.0012
    ((1 - cos(100 * x)) / x, 4, "float32", (0.0012, 1)),
    # a large coefficient at m + 1 sets the scale: s = (10**6)**(1/5)
    ((sin(x) + 10**6 * x**6) / x, 4, "float32", (0.0044, 1)),
    # at m + 2 it is only in the tail: 0.07 halved until 10**6 h**6 <= 1.7e-6 (0.009)
    ((sin(x) + 10**6 * x**7) / x, 4, "float32", (0.009, 1)),
    # the tail ends at m + TAIL_TERMS (x**10 in the series): counted; x**11 is not
    ((sin(x) + 10**8 * x**11) / x, 4, "float32", (0.035, 1)),
    ((sin(x) + 10**8 * x**12) / x, 4, "float32", (0.07, 1)),
    # a tail equal to the target is small enough; 100 x**6 is not (halved to 0.021)
    (1 + _TAIL_AT_TARGET * x**6, 4, "float32", (0.041, 1)),
    (1 + 100 * x**6, 4, "float32", (0.021, 1)),
    # sixty halvings at most: 10**109 x**6 needs all of them (float64, h0 = 0.00074)
    (1 + 10**109 * x**6, 4, "float64", (1.4e-21, 1)),
    (1 + 10**110 * x**6, 4, "float64", None),
    # a coefficient up to m above the square root of the dtype's largest: no plan
    (1 + 1000 * x**4, 4, "float16", None),
    (1 + _AT_FLOAT16_BOUND * x**4, 4, "float16", (0.063, 1)),
    # a function of x*y: w = y, h0 (float64: 2**(-52/6))
    (sin(x * y) / x, 4, "float64", (0.0025, y)),
    # an irrational scale is no w (pi has no free symbol): the grown plan, h0 and w = 1
    (sin(sympy.pi * x) / x, 4, "float32", (0.07, 1)),
]


@pytest.mark.parametrize("expr, degree, dtype, plan", TAYLOR_PLANS, ids=str)
def test_taylor_plan_interval(expr, degree, dtype, plan):
    polynomial = taylor.taylor_polynomial(expr, x, degree)
    got = taylor.taylor_plan(expr, x, degree, dtype, polynomial)
    if plan is None:
        assert got is None
    else:
        assert got is not None and (float(got[0]), got[1]) == plan


# _scale_variable: (w, {j: q_j}) with every ratio rho_j = q_j * w**(j - r), or None
SCALE_VARIABLES = [
    ({2: -y**2 / 6, 4: y**4 / 120}, 0, (y, {2: Rational(-1, 6), 4: Rational(1, 120)})),
    ({2: -y**2 / 6}, 0, (y, {2: Rational(-1, 6)})),  # one ratio
    ({1: S.One, 2: S.One}, 0, (S.One, {1: S.One, 2: S.One})),  # ratios of exactly 1
    ({3: y**2 / 12}, 1, (y, {3: Rational(1, 12)})),  # w**(j - r)
    ({2: -y / 6, 4: y**2 / 120}, 0, None),  # w = sqrt(y): not real for y < 0
    ({2: sympy.pi**2 / 6}, 0, None),  # w = pi: no free symbol
    ({1: S(2), 2: y}, 0, None),  # w = 1, but q_2 = y is no number
    ({}, 0, (S.One, {})),
]


@pytest.mark.parametrize("ratios, r, found", SCALE_VARIABLES, ids=str)
def test_private_scale_variable(ratios, r, found):
    assert taylor._scale_variable(ratios, r) == found


def test_private_taylor_polynomial_is_horner_in_the_variable():
    """Horner in v itself, whatever the names: SymPy's own choice of generator would put
    the other input x first for a pole in t."""
    t = sympy.Symbol("t", real=True)
    got = taylor.taylor_polynomial(sin(t) / t + x * (1 - cos(t)) / t**2, t, 4)
    assert got == sympy.horner(
        (1 + x / 2) + (-Rational(1, 6) - x / 24) * t**2
        + (Rational(1, 120) + x / 720) * t**4, wrt=t)
    assert got.as_poly(t).all_coeffs()[-1] == 1 + x / 2

# The guards' private helpers, one table each: the public functions show their answers
# only combined (a limit and a Taylor polynomial, a bound and a safe value), so a wrong
# answer of one is often hidden by another.

# standard: gradgen's functions in SymPy's own terms, for limit and series
STANDARD = [
    (sigmoid(x), 1 / (1 + exp(-x))),
    (softplus(x), log(exp(x) + 1)),
    (logsumexp(x, y), log(exp(x) + exp(y))),
    (expm1(x), exp(x) - 1),
    (log1p(x), log(x + 1)),
    (xlogy(x, y), x * log(y)),
    (xdivy(x, y), x / y),
    (xlog1py(x, y), x * log(y + 1)),
    (sigmoid(x) * log1p(y) + xdivy(y, x), log(y + 1) / (1 + exp(-x)) + y / x),
]


@pytest.mark.parametrize("written, standard", STANDARD, ids=str)
def test_private_standard(written, standard):
    assert walk.standard(written) == standard


def test_private_limit_bounds_the_size_of_what_it_tries():
    assert guards.LIMIT_MAX_OPS == 30
    at_bound = sin(x) / x + sum(y**k for k in range(2, 16))  # 30 operations
    assert sympy.count_ops(at_bound) == 30
    assert guards.limit_at_zero(at_bound, x) == 1 + sum(y**k for k in range(2, 16))
    over = at_bound + y
    assert sympy.count_ops(over) == 31 and guards.limit_at_zero(over, x) is None


def test_private_limit_refuses_nan_and_complex_values():
    assert guards.limit_at_zero(sympy.nan * x + sin(x) / x, x) is None
    assert guards.limit_at_zero(sqrt(x - 1), x) is None  # I
    assert guards.limit_at_zero(sqrt(x + 1), x) == 1


# _pole_order: the order of the worst pole in v (other bases' powers do not count)
POLE_ORDERS = [
    (sin(x) / x, 1), (1 / x**2 + 1 / x, 2), (x ** Rational(-3, 2), 2),
    (1 / (x * y**3), 1), (sin(x), 0), (y**-2, 0),
]


@pytest.mark.parametrize("expr, order", POLE_ORDERS, ids=str)
def test_private_pole_order(expr, order):
    assert taylor._pole_order(expr, x) == order


# _singular_in_others: a Taylor coefficient that divides by another input (or holds |r|)
SINGULAR = [
    (1 / y, True), (y**-2 + 1, True), (1 / sympy.Abs(y), True), (sympy.Abs(y), True),
    (y**2 + 3, False), (sqrt(y), False), (sympy.Abs(2) * y, False), (S(5), False),
]


@pytest.mark.parametrize("coefficient, singular", SINGULAR, ids=str)
def test_private_singular_in_others(coefficient, singular):
    assert taylor._singular_in_others(coefficient) is singular


def test_private_function_of_product_and_horner_in():
    """``leading * v**r * F(v*w)``: with w = 1 always; with a leading power r (the
    series of (1 - cos(x*y))/x starts at x*y**2/2) and with a term that is not a function
    of x*y; Horner's polynomial keeps a coefficient of 1 and skips zeros."""
    fp = taylor._function_of_product
    assert fp(sin(x) / x + y, x, S.One, 0, S.One)
    assert fp((1 - cos(x * y)) / x, x, y, 1, y**2 / 2)
    assert not fp(sin(x * y + x**21) / x, x, y, 0, y)
    # where SymPy raises (a relation times a number) the formula is not taken as one
    assert not fp(sympy.Gt(x, y), x, y, 0, S.One)
    u = sympy.Symbol("u", real=True)
    got = taylor._horner_in({1: S.One, 2: S.Zero, 3: Rational(1, 3)}, u)
    assert sympy.expand(got.replace(Square, lambda a: a**2)) == 1 + u + u**3 / 3


def test_private_has_pole_and_vanishes():
    has_pole = singularities._has_pole
    assert has_pole(sin(x) / x, x) and not has_pole(sin(x) / y, x)
    assert not has_pole(Piecewise((1 / x, Ne(x, 0)), (0, True)), x)  # guarded
    assert singularities._vanishes(sin(x) * y, x) and not singularities._vanishes(cos(x), x)


# _nonzero_under: the expressions a condition proves nonzero; bounds in other symbols
# prove nothing, whichever comes first in the condition
NONZERO = [
    (And(x > y, r > 0), {r}), (And(r > y, x > 0), {x}), (And(x > 1, r < -2), {x, r}),
    (x >= 0, set()), (x > 0, {x}), (x < 0, {x}), (x <= 0, set()), (Ne(x, 0), {x}),
    (Eq(x, 0), set()), (Eq(x, 3), {x}),
]


@pytest.mark.parametrize("cond, nonzero", NONZERO,
                         ids=lambda v: str(sorted(v, key=str)) if isinstance(v, set) else str(v))
def test_private_nonzero_under(cond, nonzero):
    assert subgradients._nonzero_under(cond) == nonzero


def test_zero_subgradients_leaves_positive_and_irrational_powers():
    for expr in ((x**2 + y**2) ** 2, (x**2 + y**2) ** -sqrt(2), x**Rational(3, 2)):
        assert guards.zero_subgradients(expr) == (expr, ())


# bound_of: (u, kind, value) of one relation, whichever side u is written on
BOUNDS = [
    (sympy.StrictLessThan(2, x, evaluate=False), (x, "lower", 2)),
    (sympy.GreaterThan(2, x, evaluate=False), (x, "upper", 2)),
    (sympy.Eq(2, x, evaluate=False), (x, "point", 2)),
    (x > y, (x, "lower", y)),
    (x + 1 > y, (y, "upper", x + 1)),
    (x + 1 > y + 1, None),
    (x + y > 1, (x + y, "lower", 1)),
]


@pytest.mark.parametrize("rel, bound", BOUNDS, ids=str)
def test_private_bound(rel, bound):
    assert conditions.bound_of(rel) == bound


# _safe_values: the candidates are tried in order until the branch is finite there
_MIDDLE = (5, 4, 6, 3, 7, 2, 8)  # 1 < x < 9: 1 + 8k/8 for k = 4, 3, 5, 2, 6, 1, 7
SAFE_IN_ORDER = [
    *((And(x > 1, x < 9), 1 / sympy.Mul(*(x - c for c in _MIDDLE[:k])), {x: _MIDDLE[k]})
      for k in range(7)),
    (And(x > 1, x < 9), 1 / sympy.Mul(*(x - c for c in _MIDDLE)), {}),
    # (a pole at the bound too, or the bound itself would be used: a clamp)
    (x > 0, 1 / (x * (x - 1) * (x - 2)), {x: 3}),
    (x > 0, 1 / (x * (x - 1) * (x - 2) * (x - 3)), {}),
    (x < 0, 1 / (x * (x + 1) * (x + 2)), {x: -3}),
    (x < 0, 1 / (x * (x + 1) * (x + 2) * (x + 3)), {}),
    (x > 0, 1 / ((x - 1) * (x - 2)), {x: 0}),
    # a point: only that value
    (Eq(x, 2), 1 / (x - 2), {}),
    (And(Eq(x, 2), Eq(x, 3)), 1 / (x - 2), {}),
    # two lower (or upper) bounds with one of the other kind: no value; other symbols
    # are still given theirs
    (And(x > 0, x > 1, x < 4), S.One, {}),
    (And(x > 0, x < 4, x < 3), S.One, {}),
    (And(x > 0, x > 1, x < 4, r > 0), S.One, {r: 0}),
    (And(r > 0, r > 1, r < 4, x > 0), S.One, {x: 0}),
    # only != bounds: one is avoided, two are not tried
    (Ne(x, 0), S.One, {x: 1}),
    (And(Ne(x, 0), Ne(x, 5)), S.One, {}),
]


@pytest.mark.parametrize("cond, branch, safe", SAFE_IN_ORDER, ids=str)
def test_private_safe_values_in_order(cond, branch, safe):
    assert branches._safe_values(cond, branch) == safe


# _finite_at: whether a branch is known infinite or NaN at u = c
FINITE_AT = [
    (y / (x - 1), False),  # zoo*y
    (y * sympy.atanh(x), False),  # oo*y
    (-y * sympy.atanh(x), False),  # -oo*y: Mul(-1, oo, y)
    (-sympy.atanh(x), False),  # -oo
    (sympy.atanh(x), False),  # oo
    (log(x) / (x - 1), False),  # 0/0: nan
    (y / x, True),
    (y * log(x + 1), True),
]


@pytest.mark.parametrize("branch, finite", FINITE_AT, ids=str)
def test_private_finite_at(branch, finite):
    assert branches._finite_at(branch, x, 1) is finite


NEEDS_GUARD = [
    (x**2, True), (1 / x, True), (sin(x), True), (2 * x + y, False), (x * y + sin(y), False),
    (y, False), (2 * Guard(x, x > 0, 1), False),
    # a guard of an inner where: still a guard needed for this branch
    (sin(Guard(x, x > 0, 1)), True),
]


@pytest.mark.parametrize("value, needs", NEEDS_GUARD, ids=str)
def test_private_needs_guard(value, needs):
    assert branches._needs_guard(value, x) is needs


# ------------------------------------------------------------ scaled_exp

# (expr, sign) -> (c, w) with expr = c * (1 + sign * exp(w)), or None
SCALED = [
    (1 + exp(x), 1, (S(1), x)),
    (2 + exp(x), 1, (S(2), x - log(2))),
    (2 * exp(x) + 2, 1, (S(2), x)),
    (2 + 3 * exp(2 * x), 1, (S(2), 2 * x + log(Rational(3, 2)))),
    (expm1(x) + 2, 1, (S(1), x)),
    (1 - exp(x), -1, (S(1), x)),
    (3 - 6 * exp(x), -1, (S(3), x + log(2))),
    (-expm1(x), -1, (S(1), x)),
    (exp(x) - 1, 1, None),
    (2 + exp(x), -1, None),
    (exp(x) + exp(y), 1, None),
    # a constant of two numbers SymPy keeps apart: both are the constant
    (1 + sqrt(2) + exp(x), 1, (1 + sqrt(2), x + log(1 / (1 + sqrt(2))))),
]


@pytest.mark.parametrize("expr, sign, expected", SCALED, ids=str)
def test_scaled_exp(expr, sign, expected):
    got = scaled_exp(expr, sign)
    assert got == expected
    if got is None:
        return
    c, w = got
    for t in (Rational(-3, 2), Rational(1, 3), 2):
        reading = (c * (1 + sign * exp(w))).subs(x, t).evalf(DIGITS)
        written = sympy.sympify(expr).rewrite(sympy.exp).subs(x, t).evalf(DIGITS)
        assert abs(reading - written) <= sympy.Float(10) ** -45 * abs(written)


# match._exp_terms: the exponents of a sum of exponentials (a constant c is exp(log(c)))
EXP_TERMS = [
    (2 * exp(x) + exp(y), [x + log(2), y]),
    (1 + exp(x), [0, x]),
    (2 * exp(x), None),  # one term, not a sum
    (1 + sqrt(2), None),  # numbers only
    (exp(x) - exp(y), None),  # a negative coefficient
]


@pytest.mark.parametrize("expr, terms", EXP_TERMS, ids=str)
def test_private_exp_terms(expr, terms):
    assert _exp_terms(expr) == terms


# powers._zero_of: where a coefficient is 0, as (symbol, value)
ZEROS = [(x, (x, 0)), (x + 2, (x, -2)), (2 * x, None), (x + y, None), (x + y + 1, None)]


@pytest.mark.parametrize("k, zero", ZEROS, ids=str)
def test_private_zero_of(k, zero):
    assert _zero_of(k) == zero


# ------------------------------------------------------------ reductions


def _program(output: str, shape="[null, 3]"):
    text = (
        "version: 1\nmodule: m\nops:\n  - name: f\n"
        f"    inputs: {{x: {shape}}}\n    output: {output}\n"
    )
    return parse_op(parse_spec(text.encode(), "s.yaml"), 0)


# written -> {op: name_hint} of the nodes after the rewrite, rules used
REDUCTIONS = [
    ("log(sum(exp(x), axis=-1))", {"logsumexp": "lse"}, ("logsumexp_reduce",)),
    ("exp(x) / sum(exp(x), axis=-1, keepdims=True)", {"softmax": "probs"},
     ("log_softmax_reduce", "logsumexp_reduce", "softmax_reduce")),
    ("x - log(sum(exp(x), axis=-1, keepdims=True))", {"log_softmax": "log_probs"},
     ("log_softmax_reduce", "logsumexp_reduce")),
    ("x - logsumexp(x, axis=-1, keepdims=True)", {"log_softmax": "log_probs"},
     ("log_softmax_reduce",)),
    ("exp(x - logsumexp(x, axis=-1, keepdims=True))", {"softmax": "probs"},
     ("log_softmax_reduce", "softmax_reduce")),
    # log_probs only inside exp(...), in a product: softmax
    ("2 * exp(x) / sum(exp(x), axis=-1, keepdims=True)", {"softmax": "probs"},
     ("log_softmax_reduce", "logsumexp_reduce", "softmax_reduce")),
    # log_probs also used bare, or as exp(2*log_probs): the log-softmax stays
    ("exp(x - log(sum(exp(x), axis=-1, keepdims=True))) + x"
     " - log(sum(exp(x), axis=-1, keepdims=True))", {"log_softmax": "log_probs"},
     ("log_softmax_reduce", "logsumexp_reduce")),
    ("exp(2*(x - logsumexp(x, axis=-1, keepdims=True)))", {"log_softmax": "log_probs"},
     ("log_softmax_reduce",)),
]


@pytest.mark.parametrize("written, nodes, rules", REDUCTIONS)
def test_stabilize_reductions_program_is_consistent(written, nodes, rules):
    before = _program(written)
    program, used = stabilize_reductions(before)
    assert used == rules
    assert {n.op: n.name_hint for n in program.nodes} == nodes
    inputs = set(before.shape_of) - {n.symbol for n in before.nodes}
    known = inputs | {n.symbol for n in program.nodes}
    for n in program.nodes:
        assert program.shape_of[n.symbol] == n.shape
    for o in program.outputs:
        # every value the output is built from is a live node or an input
        assert o.term.expr.free_symbols <= o.term.leaves <= known
        assert o.term.expr.free_symbols & {n.symbol for n in program.nodes}


@pytest.mark.parametrize(
    "branch, cond, safe",
    [
        # the first candidate is where the branch is 0/0 or a pole: the next one is used
        (sympy.log(x) / (x - 1), x > 0, 2),
        (sympy.log(x + 3) / (x * (x + 1)), x < 0, -2),
        (1 / (x - 2) / (x - 3) + 1 / (x - 1), x > 1, 4),
        # finiteness unknown (another symbol): the first candidate stands
        (y / x**2, x > 0, 1),
    ],
)
def test_guard_branches_safe_value_keeps_the_branch_finite(branch, cond, safe):
    out, used = guards.guard_branches(Piecewise((branch, cond), (0, True)))
    assert used == ("double_where",)
    guard = Guard(x, cond, safe)
    assert out == Piecewise((branch.xreplace({x: guard}), cond), (0, True), evaluate=False)


# ------------------------------------------------------------------ clamps


@pytest.mark.parametrize("written, cond, safe, clamp", [
    # finite at the bound, with its derivative: the bound itself (a clamp)
    (Piecewise((x, x > 0), (sympy.exp(x), True)), x <= 0, 0, "minimum"),
    (Piecewise((sympy.exp(-x), x > 2), (0, True)), x > 2, 2, "maximum"),
    # infinite at the bound (1/x at 0), or its derivative is (sqrt(x) at 0): inside
    (Piecewise((1 / (x - 1), x > 1), (0, True)), x > 1, 2, None),
    (Piecewise((sympy.sqrt(x) * sympy.exp(x), x > 0), (0, True)), x > 0, 1, None),
    # the same at an upper bound: sqrt(-x) at 0
    (Piecewise((sympy.sqrt(-x) * sympy.exp(x), x < 0), (0, True)), x < 0, -1, None),
    # the derivative of |x| at 0 is sign(0) = 0 for a real x (the bound itself)
    (Piecewise((sympy.exp(-sympy.Abs(x)), x > 0), (0, True)), x > 0, 0, "maximum"),
    # the derivative in x of a branch in x and y
    (Piecewise((sympy.exp(-x * y), x > 2), (0, True)), x > 2, 2, "maximum"),
])
def test_guard_branches_clamp_at_a_bound_where_the_branch_is_finite(
    written, cond, safe, clamp
):
    out, used = guards.guard_branches(written)
    assert used == ("double_where",)
    (guard,) = out.atoms(Guard)
    assert guard == Guard(x, cond, safe)
    assert (guards.clamp_of(guard) or [None])[0] == clamp


@pytest.mark.parametrize("written, expected", [
    # the constant branch is the clamped branch's value at a bound of 0: the clamp alone
    (Piecewise((1, x > 0), (exp(x), True)), exp(Guard(x, x <= 0, 0))),
    (Piecewise((exp(x), x <= 0), (1, True)), exp(Guard(x, x <= 0, 0))),
    (Piecewise((0, x > 0), (expm1(x), True)), expm1(Guard(x, x <= 0, 0))),
    # kept: another constant, a branch that is not constant, a guard that is no clamp
    (Piecewise((2, x > 0), (exp(x), True)),
     Piecewise((2, x > 0), (exp(Guard(x, x <= 0, 0)), True))),
    (Piecewise((x, x > 0), (exp(x), True)),
     Piecewise((x, x > 0), (exp(Guard(x, x <= 0, 0)), True))),
], ids=str)
def test_guard_branches_drop_the_where_the_clamp_makes_redundant(written, expected):
    out, used = guards.guard_branches(written)
    assert out == expected
    assert used == ("double_where",)


@pytest.mark.parametrize("written", [
    # cos(pi/2) is 0, but TensorFlow's cos(fl(pi/2)) is -4.4e-8: no clamp; and cos is
    # finite everywhere, with its derivatives: no safe input either
    Piecewise((0, x > sympy.pi / 2), (cos(x), True)),
    # sech_squared's two forms of sech(u)**2
    Piecewise(((1 - sympy.tanh(x - y)) * (1 + sympy.tanh(x - y)), sympy.Abs(x - y) < 1),
              (sympy.cosh(x - y)**-2, True)),
], ids=str)
def test_guard_branches_leave_branches_finite_everywhere(written):
    assert guards.guard_branches(written) == (written, ())


def test_private_clamped_branch_alone_only_for_a_number_and_clamps_at_zero():
    """The collapse needs the other branch to be a number and every guard a clamp at 0
    on the branch's own condition; where either fails the where is kept, even where
    the values would agree (y*exp(0) is y; exp at the point x = 1's safe 0 is 1)."""
    alone = branches._clamped_branch_alone
    clamped = exp(Guard(x, x <= 0, 0))
    assert alone([(S.One, x > 0), (clamped, True)], [x > 0, x <= 0]) == clamped
    assert alone([(y, x > 0), (y * clamped, True)], [x > 0, x <= 0]) is None
    no_clamp = exp(Guard(x, Ne(x, 1), 0))
    assert guards.clamp_of(no_clamp.args[0]) is None
    assert alone([(S.One, Eq(x, 1)), (no_clamp, True)], [Eq(x, 1), Ne(x, 1)]) is None


def test_clamp_of_reads_one_bound_on_the_guarded_value():
    """A guard is a clamp only where its condition bounds the guarded value itself, from
    one side, at its safe value: not a bound on another input, not a point."""
    assert guards.clamp_of(Guard(x, x <= 0, 0)) == ("minimum", x, 0)
    assert guards.clamp_of(Guard(x, y <= 0, 0)) is None
    assert guards.clamp_of(Guard(x, Eq(x, 0), 0)) is None
    assert guards.clamp_of(Guard(x, x <= 0, -1)) is None


def test_clamp_guards_print_as_minimum_and_maximum():
    from gradgen.printer import TFPrinter

    printer = TFPrinter(dtype="float32")
    assert printer.doprint(Guard(x, x <= 0, 0)) == "tf.math.minimum(x, 0.0)"
    assert printer.doprint(Guard(x, x > 2, 2)) == "tf.math.maximum(x, 2.0)"
    assert printer.doprint(Guard(x, x <= 0, -1)).startswith("tf.where(")


ELU_SPEC = """
version: 1
module: clamped
dtype: {dtype}
ops:
  - name: elu
    inputs: {{x: [null]}}
    output: where(x > 0, x, exp(x) - 1)
"""


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_clamped_guard_keeps_nan_and_finite_first_and_second_order(tf, build, dtype):
    """where(x <= 0, x, -1) turned a NaN input into -1 (elu(NaN) was expm1(-1));
    minimum(x, 0) keeps it NaN, and both orders stay finite on either side of the clamp."""
    module = build(ELU_SPEC.format(dtype=dtype), audit=False)
    src = open(module.__file__).read()
    assert "tf.math.minimum(x, 0.0)" in src and "tf.where(x <= 0.0" not in src
    assert "grad_x = upstream * tf.math.exp(x_safe)" in src  # (no where: exp(0) = 1)
    big = 1e30 if dtype == "float32" else 1e300
    x = tf.constant([float("nan"), -big, -30.0, -1e-8, 0.0, 1e-8, 30.0, big], dtype)
    y, g, h = two_orders(tf, module.elu, x)
    assert math.isnan(y.numpy()[0])
    assert all(map(math.isfinite, y.numpy()[1:-1])) and y.numpy()[-1] == big
    exact = [math.exp(min(v, 0.0)) for v in x.numpy()[1:]]
    np.testing.assert_allclose(g.numpy()[1:], exact, rtol=1e-6)
    second = [math.exp(v) if v <= 0 else 0.0 for v in x.numpy()[1:]]
    np.testing.assert_allclose(h.numpy()[1:], second, rtol=1e-6, atol=0)


# ------------------------------------------------------------ vanishing_products

tanh = sympy.tanh
VANISHING = [
    # in one input: a decaying factor of a polynomial u(x) times a polynomial that can
    # overflow: mul_no_nan(R, D)
    (x**3 * exp(-x**2), mul_no_nan(x**3, exp(-x**2))),
    (-2 * x * exp(-x**2), mul_no_nan(-2 * x, exp(-x**2))),
    (x**2 * sigmoid(x), mul_no_nan(x**2, sigmoid(x))),
    (x**2 * (1 - tanh(x)) * (1 + tanh(x)), mul_no_nan(x**2, (1 - tanh(x)) * (1 + tanh(x)))),
    (x**2 * (1 - tanh(x) ** 2), mul_no_nan(x**2, 1 - tanh(x) ** 2)),
    (x**2 / sympy.cosh(x) ** 2, mul_no_nan(x**2, sympy.cosh(x) ** -2)),
    # a positive power of a decaying factor decays
    (x**2 * sigmoid(x) ** 2, mul_no_nan(x**2, sigmoid(x) ** 2)),
    (sin(x) + 3 * x**2 * exp(-x), sin(x) + mul_no_nan(3 * x**2, exp(-x))),
    # R may hold bounded factors
    (x**2 * sin(x) * exp(-x), mul_no_nan(x**2 * sin(x), exp(-x))),
    # ... but where a guarded product's rest is computed as inf (x**3 at x = -7e12),
    # the outer product is not 0 on the other side (about 1): left as written
    ((x**3 * sigmoid(-x) + 1) * sigmoid(x),
     (mul_no_nan(x**3, sigmoid(-x)) + 1) * sigmoid(x)),
    # factors free of the decaying input stay outside (an upstream gradient of a derived
    # order: expm1(-x**2)'' times y was NaN at x = 1e30 in float32)
    (y * (4 * x**2 - 2) * exp(-x**2), y * mul_no_nan(4 * x**2 - 2, exp(-x**2))),
    (y * r * x**3 * sigmoid(x), y * r * mul_no_nan(x**3, sigmoid(x))),
    # left alone: R cannot overflow where x is finite (x, -x/2); R grows faster than a
    # polynomial; two inputs (exp(-(x - y)) x**2 is not 0 at x = y = 1e30); the decaying
    # factor's argument is not a polynomial; nothing decays
    (x * exp(-x), x * exp(-x)),
    (-x / 2 * sigmoid(x), -x / 2 * sigmoid(x)),
    # ... the numeric factors are one coefficient, as printed: (sqrt(2) / (2 sqrt(pi))) x
    # is 0.4 x (GELU's gradient), not sqrt(2) * x times 1 / sqrt(pi)
    (sqrt(2) * x * exp(-x**2 / 2) / (2 * sqrt(sympy.pi)),
     sqrt(2) * x * exp(-x**2 / 2) / (2 * sqrt(sympy.pi))),
    (sqrt(2) * sqrt(3) * x * exp(-x), mul_no_nan(sqrt(6) * x, exp(-x))),
    (3 * x * exp(-x) / 1000, mul_no_nan(3 * x / 1000, exp(-x))),
    # at the rest's first overflow the exact product is a hair below the largest float
    # (10**30 * x against the printed 1e30 * x): it rounds to the largest or to inf
    (10**30 * x * sigmoid(-(10**30) * x), mul_no_nan(10**30 * x, sigmoid(-(10**30) * x))),
    (exp(x) * exp(x), exp(2 * x)),
    (x**2 * sympy.cosh(x) * exp(-x), x**2 * sympy.cosh(x) * exp(-x)),
    (x * y * exp(x + y), x * y * exp(x + y)),
    (y**2 * exp(-x), y**2 * exp(-x)),
    (x**2 * exp(-sqrt(x)), x**2 * exp(-sqrt(x))),
    (x**2 * tanh(x), x**2 * tanh(x)),
    (x**2 * (2 - tanh(x)), x**2 * (2 - tanh(x))),
    (3 * exp(-x), 3 * exp(-x)),
    # polynomials in 1/x: exp(-1/x**2)'s slope, 0 * inf = NaN for |x| < 5e-20 (float32)
    (2 * exp(-1 / x**2) / x**3, mul_no_nan(2 / x**3, exp(-1 / x**2))),
]


@pytest.mark.parametrize("written, expected", VANISHING, ids=str)
def test_vanishing_products(written, expected):
    out, used = guards.vanishing_products(written)
    assert out == expected
    assert used == (("vanishing_product",) if out != written else ())


@pytest.mark.parametrize("written, dtype, guarded", [
    # the rest overflows where the exact product is neither below the smallest normal
    # number nor above the largest: multiply_no_nan(x**20, exp(-x)) was inf at x = 86 in
    # float32, where x**20 * exp(-x) is 21.9; x**5 / cosh(x) in float16 is 0 at x = 12
    # where cosh overflows (exact 3.06)
    (x**30 * exp(-x), "float32", False),
    (x**20 * exp(-x), "float32", False),
    (x**20 * exp(-x), "float64", True),
    (x**4 * exp(-x), "float16", False),
    (1000 * x**2 * exp(-x), "float16", False),
    (x**5 * sigmoid(-x), "float16", False),
    # decaying toward -inf only: checked on the negative side too (x**4 * sigmoid(x) is
    # 0.007 at x = -16, where x**4 overflows float16; on the positive side the product
    # itself overflows, which would pass)
    (x**4 * sigmoid(x), "float16", False),
    (x**5 / sympy.cosh(x) ** 1, "float16", False),
    (x**5 / sympy.cosh(x), "float32", True),
    (x**3 * exp(-x**2), "float16", True),
    (x**3 * exp(-x**2), "bfloat16", True),
    # terms of the rest do not cancel in its bound: 1 - sin(x) is bounded by 2, not 0
    (x**2 * (1 - sin(x)) * exp(-x**2), "float32", True),
    # tanh(u) - 1 and tanh(u)**2 - 1 decay too
    (x**2 * (tanh(x) - 1), "float32", True),
    (x**2 * (tanh(x) ** 2 - 1), "float32", True),
    (x**2 * (tanh(x) ** 2 + 1), "float32", False),
    # a coefficient below 1 does not lower where the rest overflows: x*x*x*x / 1000
    # overflows from x = 4.3e9, where x**4 exp(-x/1e8) / 1000 is 2.9e16
    (x**4 * exp(-x / 10**8) / 1000, "float32", False),
    (x**6 * exp(-x) / 10000, "float16", False),
    (x**4 / 1000 * (1 - tanh(x / 4)), "float16", False),
    # the rest (x + 1)**2 - x**2 is inf - inf from 1.3e19, where the product is 2386
    (((x + 1) ** 2 - x**2) * (1 - tanh(x / 10**18)), "float32", False),
    # the rest overflows from x = 0.66, below 1, where the product is 45000: the check
    # starts there, not at 1
    (10**5 * x * exp(-2 * x**4), "float16", False),
    # the product is moderate only at the top of the range (5e26 at x = 3.4e38, where
    # x**2 is inf and exp(-x**2 / 1e75) is 0): the check reaches the largest number
    (x**2 * exp(-x**2 / 10**75), "float32", False),
], ids=str)
def test_vanishing_products_only_where_zero_is_right_in_the_dtype(written, dtype, guarded):
    out, used = guards.vanishing_products(written, dtype)
    assert out.has(mul_no_nan) == guarded
    assert used == (("vanishing_product",) if guarded else ())


cosh = sympy.cosh


@pytest.mark.parametrize("rest, bound", [
    # numbers count as at least 1; a Mul's numbers as one coefficient (a rational p/q
    # as p, since the printer divides by q last); terms and factors do not cancel
    (x**2 + 5, x**2 + 5),
    (x**2 + S.Half, x**2 + 1),
    (x**2 + 1, x**2 + 1),
    (3 * x / 1000, 3 * x),
    (sqrt(2) * x**2 / 4, x**2),
    (x**2 + x, x**2 + x),
    (x**2 * sin(x), x**2),
    (x**2 / cosh(x), x**2),
    (x**3 * mul_no_nan(x, sin(x)), x**4),
    # not polynomially bounded, or not real
    (x**-2, None),
    ((x + exp(x)) ** 2, None),
    (sympy.Function("g")(x) * x, None),
    (x**2 + sympy.I, None),
    (sympy.I * x**2, None),
], ids=str)
def test_private_polynomial_bound_of_the_rest(rest, bound):
    """Private: the bound that decides where a vanishing product's rest overflows."""
    got = products._polynomial_bound(rest, x)
    if bound is None:
        assert got is None
    else:
        assert sympy.expand(got - bound) == 0


def test_private_which_bounds_overflow_and_which_arguments_decay():
    assert [products._overflows(b, x) for b in (x**2, 2 * x, x, -x / 2, exp(x), x**2 * y)] == [
        True, True, False, False, False, False]
    assert [products._polynomial_in(u, x) for u in (-x**2, S(3), x * y, sqrt(x))] == [
        True, False, False, False]


@pytest.mark.parametrize("rest, decaying, dtype, right", [
    (x, exp(-x), "complex64", False),  # no format: not checked, not guarded
    (x / 2, exp(-x), "float32", False),  # the rest never overflows: nothing to guard
    (x, exp(-x), "float32", True),  # the rest overflows only at the largest number
    # at the rest's first overflow the product is within the last rounding of the
    # largest number (1e-9 below it, float32 keeps 7e-8): it overflows
    (2 * x, 1 - Rational(1, 10**9), "float32", True),
    (2 * x, 1 - Rational(1, 10**6), "float32", False),
], ids=str)
def test_private_zero_is_right_at_the_ends_of_the_range(rest, decaying, dtype, right):
    assert products._zero_is_right(rest, decaying, rest, x, dtype) is right


def test_private_zero_is_right_needs_every_50_digit_product():
    """A product that cannot be evaluated at a checked point is not known to be right:
    mpmath's erfc raises OverflowError past 1e300 (float64's points), so the guard stays
    off where without that factor it is on."""
    assert products._zero_is_right(x**40, exp(-x), x**40, x, "float64") is True
    assert products._zero_is_right(x**40 * sympy.erfc(x), exp(-x), x**40, x,
                                   "float64") is False


def test_private_decaying_factors_are_evaluated_without_cancellation():
    """Private: the check of test_vanishing_products_only_where_zero_is_right_in_the_dtype
    evaluates the product at 50 digits from the rest's first overflow on, where
    ``1 - tanh(u)`` is far below 1e-50, after ``_without_cancellation`` writes each
    ``±1 ± tanh(u)`` and ``±(1 - tanh(u)**2)`` as ratios of exponentials (and
    ``mul_no_nan`` as a product). A wrong rewrite changes the verdict only for a product
    near the dtype's smallest or largest number, so its value is checked here: at 50
    digits, against the formula as written at 400 digits, at u = -1/2 and 3/4 and at
    u = ±120, where the decaying factors are below 1e-100 on one side."""
    u = 3 * x / 2
    cosh = sympy.cosh
    factors = [1 - tanh(u), 1 + tanh(u), tanh(u) - 1, -1 - tanh(u), 1 - tanh(u) ** 2,
               tanh(u) ** 2 - 1, (1 - tanh(u)) * (1 + tanh(u)), (1 - tanh(u)) ** 2,
               cosh(u) ** -2, exp(-u**2)]
    for f in factors:
        for written in (((x + 1) ** 2 + 3) * f, mul_no_nan(x**2 + 1, f)):
            rewritten = walk.standard(products._without_cancellation(written))
            as_written = sympy.lambdify(x, walk.standard(written.replace(
                mul_no_nan, lambda a, b: a * b)), "mpmath")
            fast = sympy.lambdify(x, rewritten, "mpmath")
            for t in (S(-80), Rational(-1, 3), Rational(1, 2), S(80)):
                with mpmath.workdps(400):
                    want = as_written(mpmath.mpf(t.p) / t.q)
                with mpmath.workdps(DIGITS):
                    got = fast(mpmath.mpf(t.p) / t.q)
                assert abs(got - want) <= 1e-40 * abs(want), (written, t, got, want)


def test_mul_no_nan_is_the_product_with_zero_where_its_second_argument_is():
    assert mul_no_nan(x, 0) == 0
    assert sympy.diff(mul_no_nan(x**2, exp(x)), x) == 2 * x * exp(x) + x**2 * exp(x)
    assert float(mul_no_nan(sympy.Float(3), sympy.Float(2)).evalf()) == 6.0
    from gradgen.printer import TFPrinter

    printed = TFPrinter(dtype="float32").doprint(mul_no_nan(x**2, exp(-x)))
    assert printed == "tf.math.multiply_no_nan(x * x, tf.math.exp(-x))"


VANISHING_SPEC = """
version: 1
module: vanishing
dtype: {dtype}
ops:
  - name: gelu_tanh
    inputs: {{x: [null]}}
    output: 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))
  - name: bump
    inputs: {{x: [null]}}
    output: x**3 * exp(-x**2)
  - name: tail
    inputs: {{x: [null]}}
    output: x**20 * exp(-x)
"""


def _exact_gradients(name, points):
    """The derivatives, written out, at 50 digits (mpmath has no overflow)."""
    mpmath.mp.dps = DIGITS
    c, k = mpmath.sqrt(2 / mpmath.pi), mpmath.mpf("0.044715")

    def gelu(v):
        t = mpmath.tanh(c * (v + k * v**3))
        return (1 + t) / 2 + v * (1 - t**2) * c * (1 + 3 * k * v**2) / 2

    forms = {"gelu_tanh": gelu, "bump": lambda v: (3 * v**2 - 2 * v**4) * mpmath.exp(-v**2)}
    return [float(forms[name](mpmath.mpf(float(v)))) for v in points]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "xla"])
def test_vanishing_products_keep_gradients_finite_at_large_inputs(tf, build, dtype, jit):
    """tanh-GELU's derivative is 0.5 (1 + t) + x (1 - t)(1 + t) (c + 3 c k x**2) / 2:
    for |x| > 1.8e19 in float32, x**2 is inf while (1 - t)(1 + t) is 0, and the product
    was NaN where the exact derivative is 1 (x > 0) or 0 (x < 0). Same for the bump
    x**3 exp(-x**2) once x**3 overflows. Checked against a 50-digit reference."""
    module = build(VANISHING_SPEC.format(dtype=dtype), audit=False)
    src = open(module.__file__).read()
    assert src.count("tf.math.multiply_no_nan(") >= 2
    top = float(np.finfo(dtype).max)
    points = [-top, -1e30, -1e19, -7e12, -20.0, -3.0, -0.5, 0.0, 0.5, 3.0, 20.0,
              7e12, 1e19, 1e30, top]
    points = [v for v in points if abs(v) <= top]
    for name in ("gelu_tanh", "bump"):
        op = getattr(module, name)
        x = tf.constant(points, dtype)

        def gradient(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = op(x)
            return tape.gradient(y, x)

        g = (tf.function(gradient, jit_compile=True) if jit else gradient)(x).numpy()
        assert np.isfinite(g).all(), (name, dict(zip(points, g)))
        exact = _exact_gradients(name, points)
        np.testing.assert_allclose(g, exact, rtol=1e-5 if dtype == "float32" else 1e-12,
                                   atol=1e-6 if dtype == "float32" else 1e-14,
                                   err_msg=name)


def test_a_product_whose_rest_overflows_where_it_is_finite_is_left_as_written(tf, build):
    """x**20 * exp(-x) in float32: x**20 overflows from x = 84, where the product is
    still 22; multiply_no_nan(x**20, exp(-x)) was inf there (SymPy's own order of the
    product keeps it finite)."""
    module = build(VANISHING_SPEC.format(dtype="float32"), audit=False)
    x = tf.constant([20.0, 50.0, 86.0])  # (exp(-100) is subnormal: flushed to 0)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = module.tail(x)
    g = tape.gradient(y, x).numpy()
    mpmath.mp.dps = DIGITS
    points = [mpmath.mpf(float(v)) for v in x.numpy()]
    np.testing.assert_allclose(y.numpy(), [float(v**20 * mpmath.exp(-v)) for v in points],
                               rtol=1e-5)
    np.testing.assert_allclose(
        g, [float((20 * v**19 - v**20) * mpmath.exp(-v)) for v in points], rtol=1e-5)


def test_vanishing_product_second_order_stays_finite_at_moderate_inputs(tf, build):
    """TensorFlow's MulNoNan gradient keeps the gradient function differentiable."""
    module = build(VANISHING_SPEC.format(dtype="float64"), audit=False)
    x = tf.constant([-20.0, -3.0, -0.5, 0.0, 0.5, 3.0, 20.0], tf.float64)
    h = two_orders(tf, module.bump, x)[2].numpy()
    mpmath.mp.dps = DIGITS
    exact = [float((6 * v - 14 * v**3 + 4 * v**5) * mpmath.exp(-v**2))
             for v in map(mpmath.mpf, x.numpy())]
    np.testing.assert_allclose(h, exact, rtol=1e-12, atol=1e-14)


# ------------------------------------------------------------ paired_quotients

T = Ratio(x, y) ** 2
PAIRED = [
    # g * A / (c + g): the ratio g/(c + g) first (Cauchy's second derivative: t * (c**2
    # / (1 + t)) / (1 + t), whose quotient underflowed at x = 1e10 in float32)
    (T * xdivy(-xdivy(y**2, T + 1), T + 1),
     mul_no_nan(Ratio(T, T + 1), -xdivy(y**2, T + 1))),
    (x**2 * r * (x**2 + 3) ** -2, r * Ratio(x**2, x**2 + 3) / (x**2 + 3)),
    # g's coefficient is the product's: 2 x**2 / (1 + 2 x**2) = Ratio(2 x**2, ...)
    (x**2 * Ratio(y, 2 * x**2 + 1), Ratio(2 * x**2, 2 * x**2 + 1) * y / 2),
    # no factor of g: the rest divided by q twice (atan(x)**2's second derivative,
    # 2*(1 - 2*x*atan(x))/(1 + x**2)**2, was -0 at x = 1e10 in float32: (1 + x**2)**2 is
    # inf; exact -6.3e-30)
    (y * (x**2 + 1) ** -2, Ratio(Ratio(y, x**2 + 1), x**2 + 1)),
    (y * r * (x**2 + 1) ** -3, Ratio(Ratio(Ratio(r * y, x**2 + 1), x**2 + 1), x**2 + 1)),
    # left alone: a number over q**2 (no rest to divide); q has no number in it; q is
    # not a sum
    (3 * (x**2 + 1) ** -2, 3 * (x**2 + 1) ** -2),
    (x * (x + y) ** -2, x * (x + y) ** -2),
    (x * y**-2, x * y**-2),
]


@pytest.mark.parametrize("written, expected", PAIRED, ids=str)
def test_paired_quotients(written, expected):
    out, used = guards.paired_quotients(written)
    assert out == expected
    assert used == (("paired_quotient",) if out != written else ())


# ------------------------------------------------------------ norm_quotients

NORMS = [
    # log(1 + x**2)'s slope: 2*(x/h)/h, no square
    (2 * x * (x**2 + 1) ** -1, Ratio(2 * Ratio(x, hypot(1, x)), hypot(1, x))),
    # x**2 meets the norm twice ((x/h)**2 lies in [0, 1]), the rest the other two
    (y * x**2 * (x**2 + 4) ** -2,
     Ratio(Ratio(y * Ratio(x, hypot(2, x)) ** 2, hypot(2, x)), hypot(2, x))),
    # a sum as the rest: divided by the norm twice (x/(1 + x**2)'s slope)
    ((1 - x**2) * (x**2 + 1) ** -2,
     Ratio(Ratio(Ratio(Ratio(1 - x**2, hypot(1, x)), hypot(1, x)), hypot(1, x)),
           hypot(1, x))),
    # two components: each over the norm, the highest power first
    (y * x**2 * (x**2 + y**2) ** -1, y * Ratio(x, hypot(x, y)) ** 2),
    (x * (x**2 + 4 * y**2) ** -1, Ratio(Ratio(x, hypot(x, 2 * y)), hypot(x, 2 * y))),
    # left alone: not a sum of squares (a negative term, an input coefficient), a power
    # not negative, a number over the sum
    (x * (x**2 - 1) ** -1, x * (x**2 - 1) ** -1),
    (x * (x**2 * y + 1) ** -1, x * (x**2 * y + 1) ** -1),
    (x * (x**2 + 1) ** 2, x * (x**2 + 1) ** 2),
    (3 * (x**2 + 1) ** -1 * y**0, 3 * (x**2 + 1) ** -1),
]


@pytest.mark.parametrize("written, expected", NORMS, ids=str)
def test_quotients_by_the_norm(written, expected):
    out, _ = walk.each_product(written, norms._over_norm, "norm_quotient")
    assert out == expected


def test_norm_quotients_keep_the_form_as_written_where_the_squares_are_finite():
    """Near |x| = 1 the quotient as written is the more accurate (1 - 2x**2/(1 + x**2)
    cancels, and (x/h)**2 rounds h: 800 ulps at x = 1.001 in float32 against 76): the
    norm's form only beyond 1e18 (float32; 1e153 in float64), where x**2 overflows."""
    written = 2 * x * (x**2 + 1) ** -1
    out, used = guards.norm_quotients(written, "float32")
    assert used == ("norm_quotient",)
    assert out == Piecewise((written, sympy.Abs(x) < sympy.Float("1e18")),
                            (Ratio(2 * Ratio(x, hypot(1, x)), hypot(1, x)), True))
    out64, _ = guards.norm_quotients(written, "float64")
    assert out64.args[0][1] == (sympy.Abs(x) < sympy.Float("1e153"))
    # two components: as written where both are below the switch and one above its
    # reciprocal (with no number in the sum, the squares can underflow too)
    both = x * (x**2 + 4 * y**2) ** -1
    out, _ = guards.norm_quotients(both, "float32")
    value, inside = out.args[0]
    assert value == both
    assert inside.subs({x: 1, y: -3}) is sympy.true
    for beyond in ({x: 2e18, y: 1}, {x: 1, y: 1e18}, {x: 1e-19, y: -1e-19}):
        assert inside.subs(beyond) is sympy.false, beyond


def test_unit_components_of_a_squared_norm_use_the_norm_out_of_range():
    """atan2's partial -y/(x**2 + y**2), the norm_zero guard's Ratio(y, s): 0 from
    x = 1.8e19 in float32 (s overflows) and at x = y = 1e-20 (s underflows to 0), where
    the exact value is near 1/(2x); its second derivative NaN at x = y = 3.4e38. As
    written where s**2 is in range (1e-9 to 1e9 in float32), (y/h)/h beyond, each
    branch finite where the other is chosen."""
    s = x**2 + y**2
    h = hypot(x, y)
    out, used = guards.norm_quotients(Ratio(y, s), "float32")
    assert used == ("norm_quotient",)
    inside = sympy.And(sympy.Abs(x) < sympy.Float("1e9"), sympy.Abs(y) < sympy.Float("1e9"),
                       sympy.Or(sympy.Abs(x) >= sympy.Float("1e-9"),
                                sympy.Abs(y) >= sympy.Float("1e-9")))
    safe_h = Guard(h, Ne(h, 0), 1)
    assert out == Piecewise((Ratio(y, Guard(s, inside, 1)), inside),
                            (Ratio(Ratio(y, safe_h), safe_h), True))
    # a sum with a number, or one root, is not a unit component's: left alone
    assert guards.norm_quotients(Ratio(y, x**2 + 1), "float32") == (Ratio(y, x**2 + 1), ())


def test_the_log_of_a_sum_of_squares_uses_the_norm_out_of_range():
    """log(x**2 + y**2) was -inf at x = y = 1e-30 in float32 (the sum underflows),
    where it is -137.5, and inf from 1.8e19: 2*log(hypot(x, y)) out of range (82 of
    182 audit points were not finite, 4 are: where hypot itself overflows)."""
    written = log(x**2 + y**2)
    out, used = guards.norm_logs(written, "float32")
    assert used == ("norm_log",)
    (value, inside), (beyond, _) = out.args
    assert value == written
    assert beyond == 2 * log(Guard(hypot(x, y), sympy.Not(inside), 1))
    assert inside.subs({x: 1, y: -3}) is sympy.true
    assert inside.subs({x: 1e-20, y: 1e-20}) is sympy.false
    # one root, or a number in the sum (log1p's case): left to the other forms
    assert guards.norm_logs(log(x**2), "float32") == (log(x**2), ())


# ------------------------------------------------------------ power_quotients


def test_power_quotients_use_the_merged_power_only_where_the_numerator_overflows():
    """xdivy(x**p, x), x**p * log(x)'s second derivative in x, was inf at x = 5.2e18,
    p = 2.17 in float32 (x**p overflows) where x**(p - 1) is 1e22; elsewhere as written
    (x**(p - 1) rounds p - 1). The merged power's base is 1 where it is not chosen."""
    written = xdivy(x**y, x)
    out, used = guards.power_quotients(written)
    assert used == ("power_quotient",)
    # (or where it underflows to 0 at an x that is not 0: x = 1e-30, p = 1.5)
    beyond = sympy.Or(overflowed(x**y), sympy.And(sympy.Eq(x**y, 0), Ne(x, 0)))
    assert out == Piecewise((Guard(x, beyond, 1) ** (y - 1), beyond), (written, True))
    # numeric exponents (SymPy merges those itself), other bases: left alone
    for alone in (xdivy(x**2, x), xdivy(x**y, r), xdivy(y, x**(1 - y))):
        assert guards.power_quotients(alone) == (alone, ())


# ------------------------------------------------------------ exponent_logs

EXPONENT_LOGS = [
    # a gamma density, exp((k - 1) log x - x/t): xlogy(k - 1, x) as
    # mul_no_nan(log(x), k - 1) (TensorFlow's gradient of xlogy in k is 0 where k = 0)
    (exp(xlogy(y - 1, x) - x / r), exp(mul_no_nan(log(x), y - 1) - x / r)),
    # every xlogy of an exponent, in every exponential (nested ones too); an xlogy
    # outside an exponential stays
    (xlogy(y, x) + exp(xlogy(y, x) + xlogy(r, d)) * exp(xlogy(d, x) - 1),
     xlogy(y, x) + exp(mul_no_nan(log(x), y) + mul_no_nan(log(d), r))
     * exp(mul_no_nan(log(x), d) - 1)),
    (exp(2 + exp(xlogy(y, x))), exp(2 + exp(mul_no_nan(log(x), y)))),
    # nothing to do: no xlogy in an exponent
    (xlogy(y, x) * exp(-x), xlogy(y, x) * exp(-x)),
    (exp(y * log(x)) + log(x), exp(y * log(x)) + log(x)),
]


@pytest.mark.parametrize("written, expected", EXPONENT_LOGS, ids=str)
def test_exponent_logs(written, expected):
    out, used = guards.exponent_logs(written)
    assert out == expected
    assert used == (("exponent_logs",) if out != written else ())


def test_exponent_logs_keep_the_value_also_where_k_is_0():
    """exp(xlogy(k, x) - x) is exp(k log(x) - x), and exp(-x) where k = 0 (also at
    x = 0): mul_no_nan(log(x), k) is 0 there, as xlogy(0, x) is. At 50 digits against
    mpmath."""
    (out, _) = guards.exponent_logs(exp(xlogy(y, x) - x))

    def reference(k, v):
        return mpmath.exp((0 if k == 0 else k * mpmath.log(v)) - v)

    with mpmath.workdps(DIGITS):
        for k, v in ((0, 0), (0, Rational(1, 3)), (Rational(5, 2), 3),
                     (Rational(-3, 2), Rational(1, 5)), (1, Rational(7, 2))):
            k, v = S(k), S(v)
            got = out.subs({y: k, x: v}).evalf(DIGITS)
            want = reference(mpmath.mpf(k.p) / k.q, mpmath.mpf(v.p) / v.q)
            assert got.is_number and abs(mpmath.mpf(str(got)) - want) <= 1e-45 * want, (k, v)


# singular_limits: partial -> the points it fills, (input, point, value, sides).
_SIGN_SQRT = sympy.diff(sympy.sign(x) * sqrt(sympy.Abs(x)), x)
SINGULAR_LIMITS = [
    # acos(x)**2: the limit -2 at 1 (from below: acos is real for x <= 1), -inf at -1
    (-2 * sympy.acos(x) / sqrt((1 - x) * (x + 1)),
     [(x, -1, -oo, "from above"), (x, 1, -2, "from below")]),
    (1 / (2 * sqrt(x)), [(x, 0, oo, "from above")]),  # sqrt(x) at 0: +inf
    (_SIGN_SQRT, [(x, 0, oo, "from both sides")]),  # sign(x)*sqrt(|x|): +inf both sides
    (y / (2 * sqrt(x)), [(x, 0, oo * y, "from above")]),  # the other input scales it
]
# Left as they are (the subgradient 0 stays): a kink whose sides differ, a norm of two
# inputs (the limit depends on the direction), irrational zeros, no singular factor.
NO_LIMITS = [
    sympy.diff(sqrt(sympy.Abs(x)), x),  # -inf from below, +inf from above
    x / sqrt(x**2 + y**2),
    x / sqrt(x**2 - 2),
    sympy.cos(x),
]


@pytest.mark.parametrize("partial, points", SINGULAR_LIMITS, ids=str)
def test_singular_limits_fill_each_zero_with_the_one_sided_limit(partial, points):
    out, used, found = guards.singular_limits(partial, {x, y})
    assert used == ("singular_limit",) and list(found) == points
    # the formula elsewhere, the limit at each point
    assert out.args[-1] == (partial, True)
    for (v, r, value, _), (filled, cond) in zip(points, out.args):
        assert cond == Eq(v, r)
        if sympy.sympify(value).has(y):  # 0 where the other input is 0 (the partial is 0 for every x)
            assert filled == Piecewise((0, Eq(y / 2, 0)), (value / 2, True))
        else:
            assert filled == value


@pytest.mark.parametrize("partial", NO_LIMITS, ids=str)
def test_singular_limits_leave_kinks_norms_and_irrational_zeros(partial):
    assert guards.singular_limits(partial, {x, y}) == (partial, (), ())


def test_singular_limits_leave_an_intermediate_alone():
    """sqrt(s), s = sum(x**2): 1/(2*sqrt(s)) is multiplied by 2*x after; inf*0 is NaN."""
    s = sympy.Symbol("s", real=True)
    assert guards.singular_limits(1 / (2 * sqrt(s)), {x}) == (1 / (2 * sqrt(s)), (), ())


def test_the_audit_does_not_take_a_slow_pole_for_a_limit():
    """1/(2*sqrt(x)) is 8e31 a step of 2**-88 from 0 in float32: no limit (was taken as
    the exact value, so a build giving +inf there reported a NaN/inf finding)."""
    from gradgen.stability import formats
    from gradgen.stability.audit.reference import UNDEFINED, _limit

    f32 = formats.get("float32")
    assert _limit(lambda v: 1 / (2 * mpmath.sqrt(v)), (0.0,), f32)[1] == UNDEFINED
    value, kind = _limit(lambda v: mpmath.sin(v) / v, (0.0,), f32)
    assert (value, kind != UNDEFINED) == (1.0, True)


def test_a_series_or_limit_sympy_cannot_take_is_no_fill_not_a_crash():
    """A relation inside a pole's expression (a guard's, as t*log(t/q) at order 3 had):
    SymPy's series and limit raise AttributeError ('StrictGreaterThan' has no
    as_leading_term), which was an internal error of the build."""
    for e in (Guard(x, x > y, 1) / x, nan_outside(x, x > y) / x):
        assert taylor.taylor_polynomial(e, x, 4) is None
        assert singularities.limit_at_zero(e, x) is None
    assert guards.singular_limits(1 / sqrt(Guard(x, x > y, 1)), {x}) == (
        1 / sqrt(Guard(x, x > y, 1)), (), ())


# derivative: a point filled with a limit has the limit of the formula's derivative.
_ACOS_SLOPE = -2 * sympy.acos(x) / sqrt((1 - x) * (x + 1))
FILLED_DERIVATIVES = [
    # a removable singularity the user filled, inside another where
    (Piecewise((1, Eq(x, 1)), (Piecewise((sympy.log(x) / (x - 1), x > 0), (0, True)), True)),
     {1: -S.Half}),
    # singular_limits' fills of acos(x)**2's slope: the second derivative's limits
    (Piecewise((-2, Eq(x, 1)), (-oo, Eq(x, -1)), (_ACOS_SLOPE, True)),
     {1: S(2) / 3, -1: oo}),
    # the other input scales it
    (y * Piecewise((-2, Eq(x, 1)), (_ACOS_SLOPE, True)), {1: 2 * y / 3}),
    # acos(x)'s slope: SymPy merges the two points of one value into one condition
    (Piecewise((-oo, Eq(x, -1) | Eq(x, 1)), (-1 / sqrt((1 - x) * (x + 1)), True)),
     {1: -oo, -1: oo}),
]


@pytest.mark.parametrize("expr, limits", FILLED_DERIVATIVES, ids=str)
def test_a_filled_point_has_the_limit_of_the_derivative(expr, limits):
    """Branch by branch, the derivative at each filled point is the constant's 0."""
    got = guards.derivative(expr, x)
    assert isinstance(got, Piecewise)
    pieces = {cond.args[1] if cond.args[0] == x else cond.args[0]: value
              for value, cond in got.args[:-1]}
    for r, value in limits.items():
        found = pieces[r]
        if isinstance(found, Piecewise):  # _times: 0 where the coefficient is 0
            found = found.args[-1][0]
        assert sympy.simplify(found - value) == 0 or found == value, (r, found)


def test_a_jump_keeps_the_derivative_branch_by_branch():
    jump = Piecewise((5, Eq(x, 1)), (x**2, True))
    assert guards.derivative(jump, x) == sympy.diff(jump, x)


# split_exponentials: where exp(u) overflows but the value does not.
def _split_value(expr, point, dtype):
    """The split form's value at ``point``, computed in ``dtype`` (NumPy)."""
    out, used = guards.split_exponentials(expr, dtype)
    assert used == ("split_exponential",)
    (scaled, cond), (written, _) = out.args
    assert cond.subs(x, point) is sympy.true and written == expr
    f = sympy.lambdify(x, scaled, modules=[{"Ratio": lambda a, b: a / b}, "numpy"])
    return f(np.asarray(point, dtype))


@pytest.mark.parametrize("expr", [
    expm1(x) / x,  # the value and its derivative: finite to x = 93.2 in float32
    (sympy.exp(x) - expm1(x) / x) / x,
    sympy.exp(x) / (x**2 + 1),
], ids=str)
def test_split_exponentials_keep_the_value_finite_where_exp_overflows(expr):
    for dtype, point in (("float32", 90.0), ("float64", 712.0)):
        with np.errstate(over="raise"):
            got = float(_split_value(expr, point, dtype))
        with mpmath.workdps(50):
            want = float(sympy.lambdify(x, expr, "mpmath")(mpmath.mpf(point)))
        assert math.isclose(got, want, rel_tol=8 * float(np.finfo(dtype).eps)), dtype


@pytest.mark.parametrize("expr", [
    sympy.exp(x),  # the value overflows with the exponential
    x * sympy.exp(x),  # and sooner
    expm1(x)**2 / x,  # a half would still be squared
    sympy.exp(x) / x + sympy.exp(y),  # two inputs
    sympy.exp(x) / x + sympy.exp(x**2),  # two exponents
    sympy.sin(x) / x,  # none
], ids=str)
def test_split_exponentials_leave_what_does_not_outlive_its_exponential(expr):
    assert guards.split_exponentials(expr, "float32") == (expr, ())


# zero_factors: an input factor that is 0 makes the product 0 where the rest overflows.
ZERO_FACTORS = [
    (y * sympy.exp(x), mul_no_nan(sympy.exp(x), y)),
    (y * expm1(-d * (x - r))**2, mul_no_nan(expm1(-d * (x - r))**2, y)),
    # d also inside the rest: only y is the zero factor; y meets d first where |y| and
    # |d| straddle 1 (y*d between them), else d meets the exponential first
    (2 * y * d * sympy.exp(-d * x), sympy.Piecewise(
        (mul_no_nan(2 * sympy.exp(-d * x), mul_no_nan(d, y)),
         (abs(y) - 1) * (abs(d) - 1) <= 0),
        (mul_no_nan(2 * d * sympy.exp(-d * x), y), True))),
    # a sum of inputs pairs alike (Morse's partial in its width)
    (y * (x - r) * sympy.exp(d * x), sympy.Piecewise(
        (mul_no_nan(sympy.exp(d * x), mul_no_nan(x - r, y)),
         (abs(y) - 1) * (abs(x - r) - 1) <= 0),
        (mul_no_nan((x - r) * sympy.exp(d * x), y), True))),
    (y * (x + r)**2, mul_no_nan((x + r)**2, y)),
    # y meets the powers first, the sum last
    (y * x**3 * sympy.exp(x), mul_no_nan(sympy.exp(x), mul_no_nan(x**3, y))),
    # a pole where an input is 0: computed as written there (0 * inf has no value)
    (y * sympy.exp(x) / x, sympy.Piecewise(
        (y * sympy.exp(x) / x, sympy.Eq(x, 0)),
        (mul_no_nan(sympy.exp(x), mul_no_nan(1 / x, y)), True))),
    # Lennard-Jones: 4*eps*s*(s - 1), s = (sigma/r)**6
    (4 * y * (d / r)**6 * ((d / r)**6 - 1), sympy.Piecewise(
        (4 * y * (d / r)**6 * ((d / r)**6 - 1), sympy.Eq(r, 0)),
        (4 * mul_no_nan((d / r)**6 - 1, mul_no_nan((d / r)**6, y)), True))),
    # its slope, y*d**6/r**7: the powers meet y first where they straddle 1, else the
    # leftover division first
    (y * d**6 / r**7, sympy.Piecewise(
        (y * d**6 / r**7, sympy.Eq(r, 0)),
        (sympy.Piecewise(
            (mul_no_nan(Ratio((d / r)**6, r), y),
             (Square((d / r)**6) - 1) * (Square(y) - 1) > 0),
            (Ratio(mul_no_nan((d / r)**6, y), r), True)), True))),
]
NO_ZERO_FACTORS = [
    y * d / r,  # a pole alone does not overflow where the inputs are normal
    y * sympy.exp(x) / (x - r),  # a pole that is not an input's zero: no value there
    y * sympy.floor(x),  # cannot overflow
    y * sigmoid(x) * sigmoid(-x),  # bounded
    y * sympy.log(x),  # log has a singular point
    x * sympy.exp(x),  # the factor is in the rest
    y * sympy.Symbol("t", real=True)**2,  # an intermediate may stand for a pole (1/x)
]


@pytest.mark.parametrize("expr, want", ZERO_FACTORS, ids=str)
def test_zero_factors(expr, want):
    got, used = guards.zero_factors(expr, {x, y, d, r})
    assert used == ("zero_factor",) and got == want


# log_products (derived orders): a product of an exponential or a power of degree 2 or
# more and two other factors, where it is not finite, from its factors' logarithms.
LOG_PRODUCTS = [
    (2 * y * d**2 * sympy.exp(x), finite_or(
        2 * y * d**2 * sympy.exp(x),
        2 * sympy.sign(y) * sympy.exp(x + 2 * LogAbs(d) + LogAbs(y)))),
    # a power's sign is its base's where the power is odd; a negative power subtracts
    (y * d**6 * x / r**3, finite_or(
        y * d**6 * x / r**3,
        sympy.sign(x) * sympy.sign(y) * sympy.sign(r)
        * sympy.exp(6 * LogAbs(d) - 3 * LogAbs(r) + LogAbs(x) + LogAbs(y)))),
    # over the terms of a product's one sum: only the term with three factors
    (y * sympy.exp(x) * (d**2 * x + 1), y * sympy.exp(x) + finite_or(
        d**2 * x * y * sympy.exp(x),
        sympy.sign(x) * sympy.sign(y) * sympy.exp(x + 2 * LogAbs(d) + LogAbs(x) + LogAbs(y)))),
]


@pytest.mark.parametrize("expr, want", LOG_PRODUCTS, ids=str)
def test_log_products(expr, want):
    got, used = guards.log_products(expr)
    assert used == ("log_product",) and got == want


@pytest.mark.parametrize("expr", [
    y * sympy.exp(x),  # two factors: one product, nothing meets first
    x * y * d,  # no factor wider than its inputs
    y * d**2 * sympy.Piecewise((x, x > 0), (0, True)),  # a 0 branch has no logarithm
], ids=str)
def test_log_products_leave_short_narrow_and_zero_products(expr):
    assert guards.log_products(expr) == (expr, ())


def test_zero_factors_multiply_upstreams_last():
    """A derived order's upstream gradient is never part of the zero factor: it meets
    the guarded product last (u * eps first overflowed at eps = 3.4e38)."""
    u = sympy.Symbol("u", real=True)
    got, used = guards.zero_factors(u * y * x**3 * sympy.exp(x), {x, y, u}, {u})
    assert used == ("zero_factor",)
    assert got == u * mul_no_nan(sympy.exp(x), mul_no_nan(x**3, y))


@pytest.mark.parametrize("expr", NO_ZERO_FACTORS, ids=str)
def test_zero_factors_leave_poles_bounded_rests_and_dependent_factors(expr):
    assert guards.zero_factors(expr, {x, y, d, r}) == (expr, ())


def test_split_differences_halve_a_scaled_difference_of_inputs():
    """-d*(x - r) (Morse's exponent): where x - r overflowed (tf.math.is_inf) it is
    -2*d*(x/2 - r/2), whose halves cannot overflow; only there (the halves' product is
    subnormal where d*(x - r) is just above the smallest normal number); a difference
    with no input scale, or of non-inputs, stays."""
    got, used = guards.split_differences(-d * (x - r), {x, y, d, r})
    assert used == ("split_difference",)
    assert got == sympy.Piecewise((-2 * d * (x / 2 - r / 2), overflowed(x - r)),
                                  (-d * (x - r), True))
    for same in (x - r, 2 * (x - r), d * (x**2 - r), d * (x - 1)):
        assert guards.split_differences(same, {x, y, d, r}) == (same, ())


def test_split_gaussians_give_each_factor_of_the_power_its_share():
    """(x - r)**2 * exp(-y*(x - r)**2) (a Gaussian kernel's derivative in its width y):
    each x - r takes half the exponential, and the exponent is (y*(x - r))*(x - r)."""
    b = x - r
    got, used = guards.split_gaussians(-b**2 * sympy.exp(-y * b**2))
    assert used == ("split_gaussian",)
    half = sympy.exp(-mul_no_nan(b, y) * b / 2)
    assert got == -Square(mul_no_nan(b, half))
    # an exponent that is not a multiple of the power, or a first power: left alone
    for other in (b**2 * sympy.exp(-y * b), b * sympy.exp(-y * b), b**2 * sympy.exp(y)):
        assert guards.split_gaussians(other) == (other, ())


def test_a_scaled_gaussian_weighs_the_ratio_and_is_zero_where_its_exponential_is(tf, build):
    """exp(-x**2/(2*s**2))'s partials divide by s in turn: x**2*s**-3*exp(...) (in s)
    as mul_no_nan(1/s, ((x/s)*exp(-(x/s)**2/4))**2), -x*s**-2*exp(...) (in x) as
    mul_no_nan(1/s, (x/s)*exp(-(x/s)**2/2)). Both were NaN or inf at x = s = 1.2e-38 in
    float32 (1/s**2 overflows; exact -+5.2e37: 47 and 71 of 182 audit points) and NaN
    at s = 0, x != 0 (inf * 0; the limit is 0)."""
    s = sympy.Symbol("s", real=True)
    got, used = guards.split_gaussians(x**2 * s**-3 * sympy.exp(-x**2 * s**-2 / 2))
    assert used == ("split_gaussian",)
    ratio = Ratio(x, s)
    assert got == mul_no_nan(s**-1, Square(mul_no_nan(ratio, sympy.exp(-ratio**2 / 4))))
    got, _ = guards.split_gaussians(-x * s**-2 * sympy.exp(-x**2 * s**-2 / 2))
    assert got == mul_no_nan(-s**-1, mul_no_nan(ratio, sympy.exp(-ratio**2 / 2)))
    module = build("version: 1\nmodule: scaled_gauss\nops:\n  - name: g\n"
                   "    inputs: {x: [null], s: [null]}\n    output: exp(-x**2/(2*s**2))\n")
    tiny = float(np.finfo(np.float32).tiny)
    xs, ss = tf.constant([tiny, 2.0], tf.float32), tf.constant([tiny, 0.0], tf.float32)
    with tf.GradientTape() as tape:
        tape.watch([xs, ss])
        value = module.g(xs, ss)
    dx, ds = (g.numpy() for g in tape.gradient(value, [xs, ss]))
    edge = float(np.exp(-0.5) / np.float64(tiny))  # at x = s: -+exp(-1/2)/s
    np.testing.assert_allclose([dx[0], ds[0]], [-edge, edge], rtol=1e-5)
    assert dx[1] == 0 and ds[1] == 0


def test_an_inverse_multiquadric_pairs_its_norm_component_first(tf, build):
    """1/sqrt(1 + (e*r)**2)'s slope in r, -e**2*r/h**3, as -(1/h)*(e*r/h)*(e/h): it
    was -inf at r = 1e-35, e = 1e20 in float32 ((e/h)**2 overflowed; exact -1e5), and
    is 0 where e*r overflows (e = r = 3.4e38; exact -2.5e-116), not inf/inf = NaN."""
    module = build("version: 1\nmodule: imq\nops:\n  - name: imq\n"
                   "    inputs: {r: [null], e: [null]}\n    output: 1/sqrt(1 + (e*r)**2)\n")
    big = float(np.finfo(np.float32).max)
    r, e = tf.constant([1e-35, big], tf.float32), tf.constant([1e20, big], tf.float32)
    with tf.GradientTape() as tape:
        tape.watch([r, e])
        value = module.imq(r, e)
    dr, de = (g.numpy() for g in tape.gradient(value, [r, e]))
    np.testing.assert_allclose(dr[0], -1e5, rtol=1e-5)
    assert de[0] == 0  # (exact -1e-50: below float32's range)
    assert dr[1] == 0 and de[1] == 0


def test_potentials_are_finite_where_products_and_differences_overflow(tf, build):
    """Lennard-Jones and Morse where an intermediate overflows but the value does not:
    4*eps*(s**2 - s) is computed as (eps*s)*(4*s - 4) with eps = 0 a zero factor (was
    NaN at r = 1.2e-38, sigma = 3.4e38, eps = 0, and its gradient at r = sigma = eps =
    1.2e-38 was NaN, exact -24); at r = 0 with eps = 0 it has no value and stays NaN.
    Morse's -width*(r - r0) halves the difference (was -inf at r = -r0 = -3.4e38)."""
    module = build(
        "version: 1\nmodule: potentials_edge\nops:\n  - name: lj\n"
        "    inputs: {r: [null], sigma: [], eps: []}\n"
        "    where: {s6: (sigma / r)**6}\n"
        "    output: 4 * eps * (s6**2 - s6)\n"
        "  - name: morse\n    inputs: {r: [null], r0: [], depth: [], width: []}\n"
        "    output: depth * (1 - exp(-width * (r - r0)))**2\n"
        "  - name: rbf\n    inputs: {x: [null], c: [], gamma: []}\n"
        "    output: exp(-gamma * (x - c)**2)\n", audit=False)
    tiny, top = np.finfo(np.float32).tiny, np.finfo(np.float32).max

    def value_and_grads(f, *args):
        args = [tf.constant(a, tf.float32) for a in args]
        with tf.GradientTape() as tape:
            tape.watch(args)
            value = f(*args)
        return [value.numpy()] + [g.numpy() for g in tape.gradient(value, args)]

    value, gr, gs, _ = value_and_grads(module.lj, [tiny, tiny, 0.0], top, 0.0)
    assert value.tolist()[:2] == [0.0, 0.0] and np.isnan(value[2])  # no value at r = 0
    assert gr.tolist()[:2] == [0.0, 0.0] and np.isnan(gr[2])
    assert np.isnan(gs)  # the sum over r holds the r = 0 element's NaN
    value, gr, gs, ge = value_and_grads(module.lj, [tiny], tiny, tiny)
    np.testing.assert_allclose([value[0], gr[0], gs, ge], [0.0, -24.0, 24.0, 0.0],
                               rtol=1e-6, atol=1e-30)
    # Morse at r = -r0 = -3.4e38, width = depth = 1.2e-38: u = -width*(r - r0) = 8
    value, _, _, gd, gw = value_and_grads(module.morse, [-top], top, tiny, tiny)
    np.testing.assert_allclose([value[0] / tiny, gd], [np.expm1(8.0)**2] * 2, rtol=1e-5)
    # its partial in width there, 2*depth*(r0 - r)*exp(8)*expm1(8): depth meets r0 - r
    # first (the three factors in an order that stays in range; was -inf)
    with mpmath.workdps(30):
        u, scale = mpmath.mpf(8), 2 * mpmath.mpf(float(tiny)) * 2 * mpmath.mpf(float(top))
        exact_w = float(scale * mpmath.exp(u) * mpmath.expm1(u))
    np.testing.assert_allclose(gw, exact_w, rtol=1e-5)
    # and its partial in r at depth = -7e26, width = 2e-33: depth meets width first
    # (width times the exponentials was subnormal, flushed to 0; exact 2.0e-12)
    _, g_r, _, _, _ = value_and_grads(module.morse, [-3.55327e26], 5.3e-23, -7.12794e26,
                                      2.00178e-33)
    with mpmath.workdps(30):
        d, w, t = (mpmath.mpf(float(np.float32(v))) for v in (-7.12794e26, 2.00178e-33,
                                                               -3.55327e26))
        exact_r = float(-2 * d * w * mpmath.exp(-w * t) * mpmath.expm1(-w * t))
    np.testing.assert_allclose(g_r[0], exact_r, rtol=1e-5)
    # the kernel's derivative in gamma, -(x - c)**2 * exp(-gamma*(x - c)**2): -0 where
    # (x - c)**2 is inf and the exponential 0 (was NaN); -7.6e-13 at x - c = 1e20,
    # gamma = 1.2e-38, where (x - c)**2 overflows and the exponent is -120
    _, _, _, gg = value_and_grads(module.rbf, [-top, 1e20], 0.0, 1.0)
    assert gg == 0.0
    _, _, _, gg = value_and_grads(module.rbf, [1e20], 0.0, float(tiny))
    with mpmath.workdps(30):
        b, g = mpmath.mpf(1e20), mpmath.mpf(float(tiny))
        exact = float(-b**2 * mpmath.exp(-g * b**2))
    np.testing.assert_allclose(gg, exact, rtol=1e-4)


def test_a_zero_weight_makes_an_overflowing_product_zero_at_every_order(tf, build):
    """depth * (1 - exp(-(r - 1)))**2 (Morse) at depth = 0 where the exponential
    overflows: the value and each derivative with the factor depth are exactly 0 (were
    NaN: 0 * inf)."""
    module = build(
        "version: 1\nmodule: zero_weight\norder: 2\nops:\n  - name: morse\n"
        "    inputs: {r: [null], depth: [null]}\n"
        "    output: depth * (1 - exp(-(r - 1)))**2\n", audit=False)
    r = tf.constant([-200.0, 0.5], tf.float32)
    depth = tf.constant([0.0, 2.0], tf.float32)
    (drr, drd), (ddr, ddd) = second_partials(tf, module.morse, r, depth)
    with tf.GradientTape() as tape:
        tape.watch([r, depth])
        value = module.morse(r, depth)
    gr, gd = tape.gradient(value, [r, depth])
    e = np.exp(0.5)  # at r = 0.5: t = expm1(0.5), f = depth * t**2
    t = np.expm1(0.5)
    np.testing.assert_allclose(value.numpy(), [0.0, 2 * t * t], rtol=1e-6)
    np.testing.assert_allclose(gr.numpy(), [0.0, -4 * t * e], rtol=1e-6)
    assert gd.numpy()[0] == np.inf  # expm1(201)**2 itself: inf is right
    np.testing.assert_allclose(drr, [0.0, 4 * e * (t + e)], rtol=1e-5)
    # the mixed partials hold no depth factor: 2*(1 - exp(201))*exp(201) is -inf
    for h in (drd, ddr):
        np.testing.assert_allclose(h, [-np.inf, -2 * t * e], rtol=1e-5)
    assert ddd[0] == 0.0


def test_a_rational_pole_that_cancels_is_cancelled_not_expanded():
    """atan(x/y)'s derivatives hold -2*x/(y**3*(x**2/y**2 + 1)**2): NaN at y = 0 (0 * inf)
    though it is -2*x*y/(x**2 + y**2)**2, 0 there. Cancelled, with no Taylor polynomial
    (SymPy's series of it, inside a third-order VJP, took 30 s: the op timed out)."""
    import time

    written = -2 * x / (y**3 * (x**2 / y**2 + 1)**2)
    start = time.perf_counter()
    out, used = guards.removable_singularities(written)
    assert time.perf_counter() - start < 5
    assert sympy.simplify(out - written) == 0 and out.subs(y, 0) == 0
    assert not out.has(Piecewise)
    # a pole inside mul_no_nan is filled inside it: the product keeps its 0
    g = sympy.Symbol("g", real=True)
    out, _ = guards.removable_singularities(mul_no_nan(sin(x) / x, g))
    assert isinstance(out, mul_no_nan) and out.args[1] == g and out.args[0].has(Piecewise)


def test_a_derived_fill_has_the_formulas_taylor_polynomial_beside_it():
    """acos(x)**2's second derivative, filled with 2/3 at 1: beside 1, on the side the
    limit came from (below: acos is not real above), its Taylor polynomial in 1 - x,
    whose value tends to the fill; where(x == 1, 1, log(x)/(x - 1))'s derivative, real
    on both sides, has one on both."""
    found = []
    d = guards.derivative(Piecewise((-2, Eq(x, 1)), (_ACOS_SLOPE, True)), x, found)
    code = guards.polynomials_beside(d, found, "float64")
    (pieces,) = [p for p in code.atoms(Piecewise) if len(p.args) == 3]
    (fill, at), (polynomial, near), _ = pieces.args
    assert (fill, at) == (S(2) / 3, Eq(x, 1))
    assert polynomial.is_polynomial(x) and near.subs(x, 0.999) and not near.subs(x, 1.001)
    assert abs(polynomial.subs(x, 1) - S(2) / 3) < 1e-12
    found = []
    d = guards.derivative(Piecewise((1, Eq(x, 1)), (sympy.log(x) / (x - 1), True)), x, found)
    code = guards.polynomials_beside(d, found, "float32")
    (_, (polynomial, near), _) = code.args
    assert near.subs(x, 0.99) and near.subs(x, 1.01) and not near.subs(x, 1.5)


def test_x_over_sinh_has_a_finite_slope_where_sinh_overflows(tf, build):
    """x/sinh(x)'s slope (1 - x*cosh(x)/sinh(x))/sinh(x) was NaN from x = 100 in float32
    (1/sinh(x) = 0 times cosh(x) = inf): the rule coth_ratio computes x/tanh(x)."""
    module = build("version: 1\nmodule: xsinh\nops:\n"
                   "  - name: xsinh\n    inputs: {x: [null]}\n    output: x/sinh(x)\n",
                   audit=False)
    points = [3.0, 20.0, 100.0, -700.0, 3e38]
    x = tf.constant(points, tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(x)
        value = module.xsinh(x)
    got = tape.gradient(value, x).numpy()
    exact = [float((1 - p * mpmath.coth(p)) / mpmath.sinh(p))
             for p in (mpmath.mpf(float(np.float32(v))) for v in points)]
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, exact, rtol=1e-5, atol=1e-37)


def test_a_flat_function_is_not_replaced_by_its_zero_taylor_polynomial(tf, build):
    """exp(-1/x**2) is flat at 0: every Taylor coefficient is 0. Its slope was the
    polynomial 0 for |x| < 0.2 in float32 (0.076 in float64), where it is 3.5e-9 at 0.2;
    only x = 0 takes the limit now, and the formula holds elsewhere, 0 (not 0 * inf)
    where exp(-1/x**2) underflows."""
    module = build("version: 1\nmodule: flat\ndtype: [float32, float64]\nops:\n"
                   "  - name: flat\n    inputs: {x: [null]}\n    output: exp(-1/x**2)\n",
                   audit=False)
    for dtype, points in ((tf.float32, [0.2, 0.15, 1e-20, 0.0]), (tf.float64, [0.07, 0.0])):
        x = tf.constant(points, dtype)
        with tf.GradientTape() as tape:
            tape.watch(x)
            value = module.flat(x)
        v = [mpmath.mpf(float(np.array(p, dtype.as_numpy_dtype))) for p in points]
        exact = [float(2 * mpmath.exp(-1 / p**2) / p**3) if p else 0.0 for p in v]
        np.testing.assert_allclose(tape.gradient(value, x).numpy(), exact, rtol=1e-5)


def test_quotients_by_an_underflowing_sum_of_squares_use_the_norm(tf, build):
    """x**2 + y**2 (+ z**2) underflows to 0 where a quotient by it is finite (float32):
    the partial of x/(x**2 + y**2) in x, (1 - 2*x*(x/s))/s, was 0 at x = 1.05e-19
    (norm_zero's fill took the underflow for the origin; exact -9.1e37), and the value
    1/(x**2 + y**2 + z**2) was inf at (0, 0, 1e-19) (exact 1e38). Both are now divided
    by the norm twice out of range; the origin keeps its subgradient 0."""
    module = build(
        "version: 1\nmodule: underflow\nops:\n"
        "  - name: unit\n    inputs: {x: [null], y: [null]}\n    output: x / (x**2 + y**2)\n"
        "  - name: inv3\n    inputs: {x: [null], y: [null], z: [null]}\n"
        "    output: 1 / (x**2 + y**2 + z**2)\n", audit=False)
    x = tf.constant([1.05e-19, 0.0, 0.5], tf.float32)
    y = tf.constant([0.0, 0.0, 2.0], tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(x)
        value = module.unit(x, y)
    exact = [-1 / float(np.float32(1.05e-19))**2, 0.0, (4 - 0.25) / (0.25 + 4)**2]
    np.testing.assert_allclose(tape.gradient(value, x).numpy(), exact, rtol=1e-5)
    z = tf.constant([1e-19, 3.0], tf.float32)
    got = module.inv3(tf.constant([0.0, 1.0]), tf.constant([0.0, 2.0]), z).numpy()
    np.testing.assert_allclose(got, [1 / float(np.float32(1e-19))**2, 1 / 14], rtol=1e-5)


def test_products_hold_where_autodiff_of_the_form_as_written_does(tf, build):
    """Points an independent check found where gradgen's products were worse than
    TensorFlow's autodiff of the expression as written (float32): a common factor pulled
    out of a sum (a*(b + c) overflowed where a*b + a*c is 6e8); Lennard-Jones' slope
    with eps meeting (sigma/r)**6 before the leftover 1/r (0 where it is -24 at r =
    sigma = eps = 3.4e38); x/y's partial -x/y**2 as (x/y)/y (0 * inf = NaN at x = 0,
    y = 1e-20); x*y/s**2 of a squared norm as (x/s)*(y/s) (NaN at x = 0); a scaled
    difference halved only where it overflowed (0 where w*(a - b) is 1.8e-38)."""
    module = build(
        "version: 1\nmodule: as_written\nops:\n"
        "  - name: common\n    inputs: {a: [null], b: [null], c: [null]}\n"
        "    output: a*b + a*c\n"
        "  - name: lj\n    inputs: {r: [null], s: [null], eps: [null]}\n"
        "    output: 4*eps*((s/r)**12 - (s/r)**6)\n"
        "  - name: quotient\n    inputs: {x: [null], y: [null]}\n    output: x / y\n"
        "  - name: ratio\n    inputs: {x: [null], y: [null]}\n"
        "    output: x / (x**2 + y**2)\n"
        "  - name: scaled\n    inputs: {w: [null], a: [null], b: [null]}\n"
        "    output: w * (a - b)\n", audit=False)
    top, tiny = float(np.finfo(np.float32).max), float(np.finfo(np.float32).tiny)

    def run(f, *args):
        args = [tf.constant([v], tf.float32) for v in args]
        with tf.GradientTape() as tape:
            tape.watch(args)
            value = f(*args)
        return [float(value.numpy()[0])] + [float(g.numpy()[0])
                                            for g in tape.gradient(value, args)]

    np.testing.assert_allclose(run(module.common, 1e-30, 3e38, 3e38)[0], 6e8, rtol=1e-6)
    _, gr, gs, _ = run(module.lj, 3e38, 3e38, 3e38)
    np.testing.assert_allclose([gr, gs], [-24.0, 24.0], rtol=1e-5)
    # eps * (s/r)**6 overflows where the slope is finite (s/r = -46, eps = 1.2e37):
    # the powers meet the division first there; 48 * (s/r)**6 overflows at s/r = 2e6
    # (the constant multiplies last)
    for point in [(-1.05078e23, 4.8238e24, 1.15553e37), (-2.57453e28, 5.78365e34, 3.15508e-18)]:
        r_, s_, e_ = (mpmath.mpf(float(np.float32(v))) for v in point)
        exact = float(24 * e_ * (1 - 2 * (s_ / r_)**6) * (s_ / r_)**6 / r_)
        np.testing.assert_allclose(run(module.lj, *map(float, (r_, s_, e_)))[1], exact,
                                   rtol=1e-5)
    assert run(module.quotient, 0.0, 1e-20)[2] == 0.0
    _, _, gy = run(module.ratio, 0.0, 1e-10)
    assert gy == 0.0
    np.testing.assert_allclose(run(module.ratio, 1.2e-38, 0.5)[2], -1.92e-37, rtol=1e-5)
    np.testing.assert_allclose(run(module.scaled, tiny, 1.5, 0.0)[0], 1.5 * tiny, rtol=1e-6)
    assert top  # (the dtype's edges above)
