"""Guards, reduction rewrites and normal forms, without TensorFlow.

Tables of inputs -> exact SymPy outputs for the public functions that
:mod:`gradgen.derive` calls (``guards.zero_subgradients``,
``guards.removable_singularities``, ``guards.guard_branches``,
``reductions.stabilize_reductions``) and for ``normalize.scaled_exp``, plus 50-digit value
checks where a rewrite must keep the value. A few private helpers are tested directly
where no public input reaches the branch; each such test says why.
"""

from __future__ import annotations

import mpmath
import pytest
import sympy
from sympy import S, And, Eq, Ne, Piecewise, Rational, oo

from gradgen.expr import parse_op
from gradgen.functions import Guard, expm1, xlogy
from gradgen.spec import parse_spec
from gradgen.stability import guards
from gradgen.stability.normalize import scaled_exp
from gradgen.stability.reductions import stabilize_reductions

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
    assert (out, used) == (x * Piecewise((1 / s, Ne(s, 0)), (0, True)), ("norm_zero",))
    # elsewhere the value is unchanged
    point = {x: Rational(3, 7), y: Rational(-2, 5)}
    assert (out.subs(point) - (x / s).subs(point)) == 0
    assert out.subs({x: 0, y: 0}) == 0


# ------------------------------------------------------------ guard_branches

# condition of the branch 1/x -> the safe value of x where the branch is not selected
# (None: no single safe value is known, the branch is left as is)
SAFE_VALUES = [
    (x > 0, 1),
    (x >= 0, 1),
    (x > 2, 3),
    (x >= 1, 2),
    (x < 0, -1),
    (x <= 0, -1),
    (x <= -1, -2),
    (x < 5, 4),
    (Ne(x, 0), 1),
    (Ne(x, 1), 2),
    (Eq(x, 2), 2),
    (Eq(x, 1), 1),
    (And(x > 0, x < 4), 2),
    (x > y, y + 1),
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
    written = Piecewise((1 / x, x > 0), (1 / (x - 3), x <= 0), evaluate=False)
    out, _ = guards.guard_branches(written)
    assert [c for _, c in out.args] == [x > 0, x <= 0]
    assert out.args[1][0] == 1 / (Guard(x, x <= 0, -1) - 3)


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


SINC_10 = [S(1), 0, Rational(-1, 6), 0, Rational(1, 120), 0, Rational(-1, 5040), 0,
           Rational(1, 362880), 0, Rational(-1, 39916800)]

# written -> (expected, used): limit finite (Taylor), limit infinite and Taylor fallback
REMOVABLE = [
    (sin(x) / x, _filled(sin(x) / x, _horner(SINC_10), "0.05")),
    # only the pole with the factor that vanishes is expanded
    (exp(x) * sin(x) / x, exp(x) * _filled(sin(x) / x, _horner(SINC_10), "0.05")),
    # a coefficient in another input: Horner form in x
    (sin(x * y) / x, _filled(
        sin(x * y) / x,
        _horner([c * y ** (k + 1) for k, c in enumerate(SINC_10)]),
        "0.05")),
    # a pole in y: Horner form in y, though SymPy would order the generators (x, y)
    (sin(x * y) / y, _filled(
        sin(x * y) / y, _horner([c * x ** (k + 1) for k, c in enumerate(SINC_10)], y),
        "0.05", y)),
    # pole of order 2: h = eps**(1/13)
    ((x * cos(x) - sin(x)) / x**2, _filled(
        (x * cos(x) - sin(x)) / x**2,
        _horner([0, Rational(-1, 3), 0, Rational(1, 30), 0, Rational(-1, 840), 0,
                 Rational(1, 45360), 0, Rational(-1, 3991680)]),
        "0.062")),
    # gradgen's xlogy read as x*log(y) for the limit
    (xlogy(y, 1 + x) / x, _filled(
        xlogy(y, 1 + x) / x, _horner([y * (-1) ** k / (k + 1) for k in range(11)]),
        "0.05")),
    # a factor that has the pole and vanishes at 0 is a pole, not a zero
    (exp(y) * sin(x) / x / (1 + 1 / x), exp(y) * _filled(
        sin(x) / x / (1 + 1 / x),
        _horner([0, 1, -1, Rational(5, 6), Rational(-5, 6), Rational(101, 120),
                 Rational(-101, 120), Rational(4241, 5040), Rational(-4241, 5040),
                 Rational(305353, 362880), Rational(-305353, 362880)]),
        "0.05")),
    # a jump, not a removable singularity (the one-sided series would be 1, or sinc)
    (sympy.Abs(x) / x, None),
    (sympy.Abs(x) * sin(x) / x**2, None),
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


# ----------------------------------------------- private helpers of the filling

# Private: `_limit` decides "finite limit or not" and removable_singularities only
# shows its answer combined with `_taylor`, which also fails for these (a pole has no
# Taylor polynomial), so the infinite cases are checked here directly.
LIMITS = [
    (sin(x) / x, S(1)),
    (exp(-1 / x**2) / x, S(0)),
    (1 / x, None),  # zoo
    (x**-2, None),  # oo
    (-(x**-2), None),  # -oo
    (y / x**2, None),  # oo*sign(y)
    (-y / x**2, None),  # -oo*sign(y)
    (sin(1 / x), None),  # AccumBounds(-1, 1)
    (sympy.Function("f")(x) / x, None),  # unevaluated Limit
]


@pytest.mark.parametrize("expr, limit", LIMITS, ids=str)
def test_private_limit(expr, limit):
    assert guards._limit(expr, x) == limit


def test_private_taylor_refuses_infinite_coefficients():
    # Private: an infinite coefficient with a finite limit at 0 is not reachable from
    # removable_singularities (its `_limit` rejects such expressions first).
    assert guards._taylor(sin(x) / x + oo * y, x, 4) is None
    assert guards._taylor(sin(x) / x + y, x, 4) == _horner(
        [1 + y, 0, Rational(-1, 6), 0, Rational(1, 120)])


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
        (sympy.log(x + 3) / (x + 1), x < 0, -2),
        (1 / (x - 2) / (x - 3) + sympy.log(x), x > 1, 4),
        # finiteness unknown (another symbol): the first candidate stands
        (y / x**2, x > 0, 1),
    ],
)
def test_guard_branches_safe_value_keeps_the_branch_finite(branch, cond, safe):
    out, used = guards.guard_branches(Piecewise((branch, cond), (0, True)))
    assert used == ("double_where",)
    guard = Guard(x, cond, safe)
    assert out == Piecewise((branch.xreplace({x: guard}), cond), (0, True), evaluate=False)
