"""Every declaration of the function registry (gradgen.functions.declarations) is
checked here, so a function added by one declaration is tested without new tests of
these kinds: its spellings parse, its class prints as its TensorFlow spelling (which
TensorFlow has), and its SymPy class finds it again; its NumPy implementation, its
SymPy class's evalf and derivatives, and its declared meaning agree with its reference
(mpmath's, or its definition here) at points of its domain, for any number of
arguments. Then the points each function defines (xlogy(0, 0) = 0, erfcx's switch to
its series), the SymPy classes' exact values, ordering and assumptions, and the
registry's own lookups and checks."""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import math

import mpmath
import numpy as np
import pytest
import sympy
import yaml
from sympy import S

from gradgen.functions import declarations as fns
from gradgen.functions import internal, kinks, nan_safe, smooth
from gradgen.functions import numeric as num
from gradgen.functions.registry import (
    ELEMENTWISE,
    INTERNAL,
    MATRIX,
    REAL,
    VALUE,
    Function,
)
from gradgen.spec import parse_spec

X = sympy.Symbol("x", real=True)
# points in each function's domain (the ends of a closed domain excluded: a derivative
# may be infinite there)
POINTS = (-2.5, -0.7, -0.2, 0.3, 0.9, 1.7, 3.1)
UNARY = [f for f in fns.FUNCTIONS if f.kind in (ELEMENTWISE, INTERNAL)
         and f.arity == (1, 1) and f.mpmath is not None and f.numpy is not None]


def _inside(f) -> list[float]:
    return [p for p in POINTS if f.domain.contains(p) is sympy.true
            and p not in (f.domain.inf, f.domain.sup)]


def test_spellings_and_classes_name_one_function_each():
    spelled = [s for f in fns.FUNCTIONS for s in f.spellings]
    assert len(spelled) == len(set(spelled))
    for f in fns.FUNCTIONS:
        for cls in f.classes:
            assert fns.of_class(cls) is f, (f.name, cls)
        assert fns.declared(f.name).name == f.name  # (logsumexp: a reduction and a
        # function of several terms, the one a spec spells first)
        assert (f.kind == INTERNAL) == (not f.spellings)


@pytest.mark.parametrize("f", [f for f in fns.FUNCTIONS if f.kind == ELEMENTWISE],
                         ids=lambda f: f.name)
def test_every_elementwise_spelling_parses(f):
    from gradgen.expr import parse_op

    args = ", ".join(["x"] + ["y"] * (f.arity[0] - 1))
    for spelling in f.spellings:
        text = yaml.safe_dump({"version": 1, "module": "m", "ops": [{
            "name": "g", "inputs": {"x": [3], "y": [3]},
            "output": f"{spelling}({args}) + x"}]})
        doc = parse_spec(text.encode(), "s.yaml")
        expr = parse_op(doc, 0).outputs[0].term.expr
        assert expr.atoms(*f.classes) or f.name in ("log", "sqrt"), (spelling, expr)


# ------------------------------------------------------------------ values and derivatives

# The argument of a function that is a condition (what its tf.where selects on): the
# checks below pass ``u > 0`` for it, with u = 1 or -1.
CONDITIONS = {"Guard": 1, "nan_outside": 1}
# The reference of each function declared with neither an mpmath reference nor a meaning
# that SymPy's mpmath printer cannot write (a function added without one fails the
# checks below until it has an entry here): its definition, in mpmath.
DEFINITIONS = {
    "Heaviside": lambda x: mpmath.mpf(1 if x > 0 else 0 if x < 0 else 0.5),
    "mul_no_nan": lambda x, y: mpmath.mpf(0) if y == 0 else x * y,
    "logcosh": lambda x: mpmath.log(mpmath.cosh(x)),
    "log1mexp": lambda x: mpmath.log1p(-mpmath.exp(x)),
    "erfcx": lambda x: mpmath.exp(x * x) * num.mp_erfc(x),
    "erfcx_recip": lambda x: mpmath.exp(-x * x) / num.mp_erfc(x),
    "erfcx_recip_slope": lambda x: mpmath.diff(lambda t: mpmath.exp(-t * t) / num.mp_erfc(t), x),
    "log_erfc": lambda x: mpmath.log(num.mp_erfc(x)),
    "hypot": lambda *t: mpmath.sqrt(mpmath.fsum(v * v for v in t)),
    "Guard": lambda u, cond, safe: u if cond else safe,
    "Square": lambda x: x * x,
    "LogAbs": lambda x: mpmath.log(abs(x)),
    "Recip": lambda x: 1 / x,
    "Ratio": lambda a, b: a / b,
    "nan_outside": lambda value, cond: value if cond else mpmath.nan,
}
ELEMENTWISE_CLASSES = [f for f in fns.FUNCTIONS
                       if f.kind in (ELEMENTWISE, INTERNAL) and f.classes]
OWN_CLASSES = [f for f in ELEMENTWISE_CLASSES  # evaluated by gradgen's own _eval_evalf
               if f.classes[0].__module__.startswith("gradgen.")]


def _counts(f) -> list[int]:
    """The argument counts ``f`` is checked with: those its class keeps a call of
    (``hypot(x)`` is ``Abs(x)``, ``log(x, b)`` is ``log(x)/log(b)``), the first two
    for a function of any number."""
    lo, hi = f.arity
    cls = f.classes[0]
    kept = [n for n in range(lo, (lo + 2 if hi is None else hi) + 1)
            if isinstance(cls(*sympy.symbols(f"a:{n}")), cls)]
    return kept[:2]


def _points(f, n: int) -> list[tuple]:
    """Argument tuples: the first argument at POINTS inside the domain, the others at
    every other point of POINTS (positive and negative), a condition at 1 and -1."""
    axes = [(1.0, -1.0) if i == CONDITIONS.get(f.name)
            else _inside(f) if i == 0 else POINTS[::2] for i in range(n)]
    return list(itertools.product(*axes))


def _reference(f, n: int):
    """``f`` of ``n`` mpmath numbers (a condition as its u): the declared mpmath
    reference, else the meaning, else DEFINITIONS, else what SymPy's mpmath printer
    writes for the class (sqrt, conjugate)."""
    if f.mpmath is not None:
        fn = f.mpmath
    elif f.meaning is not None:
        syms = sympy.symbols(f"a:{n}")
        fn = sympy.lambdify(syms, f.meaning(*syms), "mpmath")
    elif f.name in DEFINITIONS:
        fn = DEFINITIONS[f.name]
    else:
        syms = sympy.symbols(f"a:{n}")
        fn = sympy.lambdify(syms, f.classes[0](*syms), "mpmath")
    c = CONDITIONS.get(f.name)
    return lambda *a: fn(*(v > 0 if i == c else v for i, v in enumerate(a)))


def _real(v) -> bool:
    """``v`` (mpmath) is a finite real number."""
    return isinstance(v, mpmath.mpf) and mpmath.isfinite(v)


def _numpy(f, args):
    """``f``'s NumPy implementation at float64 ``args`` (a condition as u > 0), raising
    on any floating-point warning but underflow."""
    c = CONDITIONS.get(f.name)
    values = [np.float64(v) > 0 if i == c else np.float64(v) for i, v in enumerate(args)]
    with np.errstate(divide="raise", over="raise", invalid="raise"):
        return f.numpy(*values)


def _sympy_args(f, args, prec: int = 30):
    """``args`` as SymPy Floats of ``prec`` digits (a condition as true or false)."""
    c = CONDITIONS.get(f.name)
    return [sympy.true if i == c and v > 0 else sympy.false if i == c
            else sympy.Float(v, prec) for i, v in enumerate(args)]


@pytest.mark.parametrize("f", fns.with_numpy(), ids=lambda f: f.name)
def test_numpy_agrees_with_the_reference(f):
    """Float64 NumPy against the 30-digit reference at points of the domain (of any
    number of arguments): within 1e-13 where the reference is real, NaN where it is not
    (xlogy(x, -1), log1mexp(0.3)), and without a floating-point warning."""
    for n in _counts(f):
        reference = _reference(f, n)
        for args in _points(f, n):
            with mpmath.workdps(30):
                want = reference(*map(mpmath.mpf, args))
            got = float(_numpy(f, args))
            if _real(want):
                assert math.isclose(got, float(want), rel_tol=1e-13, abs_tol=1e-300), (
                    f.name, args, got, want)
            else:
                assert math.isnan(got), (f.name, args, got, want)


@pytest.mark.parametrize("f", OWN_CLASSES, ids=lambda f: f.name)
def test_classes_evaluate_to_the_reference(f):
    """The SymPy class's own evalf, of a call kept unevaluated, at 30 digits: the
    reference's value, complex where it is (xlogy(x, -1)), NaN where it is."""
    cls = f.classes[0]
    for n in _counts(f):
        reference = _reference(f, n)
        for args in _points(f, n):
            with mpmath.workdps(30):
                want = reference(*map(mpmath.mpf, args))
            got = cls(*_sympy_args(f, args), evaluate=False).evalf(30)
            if isinstance(want, mpmath.mpf) and mpmath.isnan(want):
                assert got is sympy.nan, (f.name, args, got)
                continue
            assert got.is_number and not got.has(cls), (f.name, args, got)
            with mpmath.workdps(30):
                assert mpmath.almosteq(got._to_mpmath(100), want, 1e-25), (
                    f.name, args, got, want)


@pytest.mark.parametrize("f", ELEMENTWISE_CLASSES, ids=lambda f: f.name)
def test_derivatives_agree_with_numerical_ones(f):
    """Each partial of the SymPy class (its fdiff, or the derivative of a guard)
    against mpmath's numerical derivative of the reference, at 30 digits, wherever the
    reference is real and no two arguments are equal (a tie of Max splits the derivative,
    test_ties_split_the_derivative): a condition's partial is 0."""
    cls = f.classes[0]
    for n in _counts(f):
        reference = _reference(f, n)
        syms = sympy.symbols(f"x:{n}", real=True)
        c = CONDITIONS.get(f.name)
        expr = cls(*(sympy.Gt(s, 0) if i == c else s for i, s in enumerate(syms)))
        partials = [sympy.diff(expr, s) for s in syms]
        for args in _points(f, n):
            at = {s: sympy.Float(v, 30) for s, v in zip(syms, args)}
            with mpmath.workdps(30):
                point = [mpmath.mpf(v) for v in args]
                if not _real(reference(*point)) or len(set(args)) < n:
                    continue
                for i, partial in enumerate(partials):
                    def along(t, i=i, point=point, reference=reference):
                        return reference(*point[:i], t, *point[i + 1:])
                    slope = mpmath.diff(along, point[i])
                    got = partial.xreplace(at).evalf(30)
                    assert got.is_number, (f.name, args, i, got)
                    assert mpmath.almosteq(got._to_mpmath(100), slope, 1e-20), (
                        f.name, args, i, got, slope)


@pytest.mark.parametrize("f", [f for f in ELEMENTWISE_CLASSES
                               if f.meaning is not None and f.mpmath is not None],
                         ids=lambda f: f.name)
def test_meanings_agree_with_the_reference(f):
    """A meaning declared besides an mpmath reference is the same function."""
    for n in _counts(f):
        syms = sympy.symbols(f"a:{n}")
        meaning = sympy.lambdify(syms, f.meaning(*syms), "mpmath")
        for args in _points(f, n):
            with mpmath.workdps(30):
                point = [mpmath.mpf(v) for v in args]
                assert mpmath.almosteq(meaning(*point), f.mpmath(*point), 1e-25), (
                    f.name, args)


def test_meanings_are_what_limits_see():
    """as_meaning writes every stable primitive in SymPy's functions (outermost first)."""
    y = sympy.Symbol("y", real=True)
    expr = fns.declared("sigmoid").build(X) + fns.declared("xlogy").classes[0](X, y)
    assert fns.as_meaning(expr) == 1 / (1 + sympy.exp(-X)) + X * sympy.log(y)


def test_tensorflow_has_every_declared_spelling():
    import tensorflow as tf

    for f in fns.FUNCTIONS:
        if f.tf is None:
            continue
        module, name = f.tf.rsplit(".", 1)
        assert module == "tf.math" and callable(getattr(tf.math, name)), f.name


@pytest.mark.parametrize("f", [f for f in UNARY if f.bound is not None or f.singular],
                         ids=lambda f: f.name)
def test_bounds_and_singular_points_hold(f):
    """A declared ``bound`` holds over the reals (at points up to 1e6 and at the
    mpmath reference's maxima); each declared singular point lies in the domain's
    closure, and the derivative there is infinite or jumps (a kink), or the function
    itself jumps (its derivative is undefined)."""
    cls = f.classes[0]
    if f.bound is not None:
        for p in np.concatenate([np.linspace(-50, 50, 2001), [-1e6, 1e6, 1e-300]]):
            assert abs(float(f.mpmath(mpmath.mpf(float(p))))) <= f.bound, (f.name, p)
    derivative = sympy.diff(cls(X), X)
    for s in f.singular:
        assert sympy.Interval(f.domain.inf, f.domain.sup).contains(s) is sympy.true
        left = sympy.limit(derivative, X, s, "-") if f.domain.inf < s else None
        right = sympy.limit(derivative, X, s, "+") if s < f.domain.sup else None
        sides = [v for v in (left, right) if v is not None]
        jumps = len(sides) == 2 and (sympy.limit(cls(X), X, s, "-")
                                     != sympy.limit(cls(X), X, s, "+"))  # sign at 0
        assert any(not v.is_finite for v in sides) or left != right or jumps, (
            f.name, s, sides)


# ------------------------------------------------------------------ special points

INF, NAN = math.inf, math.nan
REFERENCE = None  # the expected value is the 30-digit reference's
SPECIAL = [
    # TensorFlow's NaN-safe products: 0 where the factor is 0, whatever the other
    ("xlogy", (0.0, 0.0), 0.0), ("xlogy", (0.0, -1.0), 0.0), ("xlogy", (0.0, INF), 0.0),
    ("xlogy", (0.0, NAN), 0.0), ("xlogy", (1.0, 0.0), -INF), ("xlogy", (1.0, -1.0), NAN),
    ("xlogy", (1.0, 2.0), math.log(2.0)),
    ("xdivy", (0.0, 0.0), 0.0), ("xdivy", (0.0, NAN), 0.0), ("xdivy", (1.0, 0.0), INF),
    ("xdivy", (-1.0, 0.0), -INF), ("xdivy", (1.0, 2.0), 0.5), ("xdivy", (INF, INF), NAN),
    ("xlog1py", (0.0, -1.0), 0.0), ("xlog1py", (0.0, -2.0), 0.0),
    ("xlog1py", (1.0, -1.0), -INF), ("xlog1py", (1.0, -2.0), NAN),
    ("xlog1py", (1.0, 1.0), math.log(2.0)), ("xlog1py", (3.0, 0.0), 0.0),
    ("mul_no_nan", (INF, 0.0), 0.0), ("mul_no_nan", (NAN, 0.0), 0.0),
    ("mul_no_nan", (0.0, INF), NAN), ("mul_no_nan", (INF, 2.0), INF),
    ("mul_no_nan", (3.0, 1.0), 3.0), ("mul_no_nan", (1e200, 1e200), INF),
    # log1mexp: -inf at 0, NaN above; each branch where the other loses every digit
    ("log1mexp", (0.0,), -INF), ("log1mexp", (0.5,), NAN), ("log1mexp", (-INF,), 0.0),
    ("log1mexp", (-1e-10,), REFERENCE), ("log1mexp", (-40.0,), REFERENCE),
    ("log1mexp", (-math.log(2.0),), REFERENCE),
    # no overflow or cancellation at large arguments
    ("sigmoid", (-1000.0,), 0.0), ("sigmoid", (0.0,), 0.5), ("sigmoid", (-40.0,), REFERENCE),
    ("sigmoid", (1000.0,), 1.0),
    ("softplus", (1000.0,), 1000.0), ("softplus", (-1000.0,), 0.0),
    ("logcosh", (1000.0,), 1000.0 - math.log(2.0)), ("logcosh", (-1000.0,), REFERENCE),
    ("logcosh", (0.0,), 0.0),
    ("logsumexp", (1000.0, 1000.0), 1000.0 + math.log(2.0)), ("logsumexp", (-INF, 0.0), 0.0),
    ("hypot", (1e300, 1e300), REFERENCE), ("hypot", (1e-300, 1e-300), REFERENCE),
    ("hypot", (3.0, 4.0, 12.0), 13.0),
    # erfcx: exp(x**2) erfc(x) below 10, the asymptotic series from 10 (10.7285: where
    # exp(x*x) is 7e-15 off), inf where exp(x**2) overflows
    ("erfcx", (0.0,), 1.0), ("erfcx", (-5.0,), REFERENCE), ("erfcx", (10.0,), REFERENCE),
    ("erfcx", (10.7285,), REFERENCE), ("erfcx", (30.0,), REFERENCE),
    ("erfcx", (1e10,), REFERENCE), ("erfcx", (1e150,), REFERENCE), ("erfcx", (INF,), 0.0),
    ("erfcx", (1e200,), REFERENCE),
    ("erfcx", (-26.8,), INF), ("erfcx", (-INF,), INF),
    # exp(x**2) carries x**2's rounding (up to 5.7e-14 relative at x**2 = 709)
    ("erfcx", (-26.0,), REFERENCE, 1e-13), ("erfcx", (-26.3,), REFERENCE, 1e-13),
    ("erfcx", (-26.6,), REFERENCE, 1e-13), ("erfcx", (-26.628,), REFERENCE, 1e-13),
    ("erfcx", (-26.62873571375149,), REFERENCE, 1e-13),  # the last finite value
    ("erfcx", (-26.63,), INF), ("erfcx", (NAN,), NAN),
    # 1 / erfcx: x sqrt(pi) over the series from 10, finite where erfcx is subnormal
    ("erfcx_recip", (0.0,), 1.0), ("erfcx_recip", (-5.0,), REFERENCE),
    ("erfcx_recip", (9.99,), REFERENCE, 1e-13), ("erfcx_recip", (10.0,), REFERENCE),
    ("erfcx_recip", (1e10,), REFERENCE), ("erfcx_recip", (5.95e37,), REFERENCE),
    ("erfcx_recip", (-30.0,), REFERENCE), ("erfcx_recip", (NAN,), NAN),
    # no cancellation for large x (sqrt(pi) from terms about 2 pi x**2), no overflow
    ("erfcx_recip_slope", (1e4,), REFERENCE), ("erfcx_recip_slope", (3e38,), math.sqrt(math.pi)),
    ("erfcx_recip_slope", (-3.0,), REFERENCE), ("erfcx_recip_slope", (0.5,), REFERENCE),
    ("log_erfc", (0.0,), 0.0), ("log_erfc", (10.0,), REFERENCE),
    ("log_erfc", (30.0,), REFERENCE), ("log_erfc", (1e10,), REFERENCE),
    ("log_erfc", (-30.0,), math.log(2.0)), ("log_erfc", (-INF,), math.log(2.0)),
    ("log_erfc", (NAN,), NAN), ("log_erfc", (INF,), -INF),
    ("log_erfc", (1e154,), REFERENCE), ("log_erfc", (1e155,), -INF),  # -x**2 overflows
    ("log_erfc", (1.3407807929942596e154,), REFERENCE),  # the last finite value
]


def _special() -> list:
    """SPECIAL's rows as parameters (a row's relative tolerance is 1e-15 unless it
    gives one), named by the call. (np_erfcx was inf from x <= -26 where the value is
    finite down to -26.6, np_log_erfc(inf) raised ValueError, np_sigmoid warned past
    x = 709 and np_erfcx past 1.3e154: found by these tests, fixed.)"""
    return [pytest.param(name, args, expected, (*tol, 1e-15)[0], id=f"{name}{args}")
            for name, args, expected, *tol in SPECIAL]


@pytest.mark.parametrize("name, args, expected, rel_tol", _special())
def test_numpy_at_special_points(name, args, expected, rel_tol):
    """Each NumPy implementation at the points its TensorFlow op or helper defines,
    to 1e-15 unless the row says (NaN and infinities exactly)."""
    f = next(f for f in fns.with_numpy() if f.name == name)
    if expected is REFERENCE:
        with mpmath.workdps(30):
            expected = float(_reference(f, len(args))(*map(mpmath.mpf, args)))
    with np.errstate(all="ignore"):
        got = float(f.numpy(*map(np.float64, args)))
    if math.isnan(expected):
        assert math.isnan(got), got
    elif math.isinf(expected):
        assert got == expected
    else:
        assert math.isclose(got, expected, rel_tol=rel_tol, abs_tol=1e-300), (got, expected)


@pytest.mark.parametrize("name, args, expected, rel_tol", _special())
def test_numpy_does_not_warn_at_special_points(name, args, expected, rel_tol):
    """No floating-point warning (but underflow) at those points: NumPy's own
    warnings of a division by 0 or an invalid operation are the implementation's to
    silence, as TensorFlow raises none."""
    f = next(f for f in fns.with_numpy() if f.name == name)
    try:
        _numpy(f, args)
    except FloatingPointError as e:
        pytest.fail(f"{name}{args}: {e}")
    except ValueError:  # a wrong value, the test above's
        pass


def test_erfc_reference_is_its_asymptotic_series_from_2_to_the_64():
    """mp_erfc at huge arguments is the series (mpmath's own erfc is not called there,
    so the value is the same with either mpmath backend), accurate to the series' first
    omitted term (2**-1509 relative at 2**64), and mpmath's erfc below."""
    def erfc(x):  # erfc through the incomplete gamma function
        return mpmath.gammainc(0.5, x * x) / mpmath.sqrt(mpmath.pi)

    with mpmath.workprec(2000):
        for x in (mpmath.mpf(2) ** 64, 3 * mpmath.mpf(2) ** 64, mpmath.mpf(2) ** 80):
            assert abs(num.mp_erfc(x) / erfc(x) - 1) < mpmath.mpf(2) ** -1500, x
        assert num.mp_erfc(mpmath.mpf(3)) == mpmath.erfc(3)


def test_erfc_reference_switches_at_2_to_the_64(monkeypatch):
    """mpmath's erfc is called below 2**64 only."""
    calls = []
    monkeypatch.setattr(mpmath, "erfc", lambda x: calls.append(x) or mpmath.mpf(0))
    num.mp_erfc(mpmath.mpf(2) ** 64)
    assert calls == []
    with mpmath.workprec(100):
        below = mpmath.mpf(2) ** 64 - 1
        num.mp_erfc(below)
    assert calls == [below]


# ------------------------------------------------------------------ the SymPy classes

Y, Z = sympy.Symbol("y", real=True), sympy.Symbol("z", real=True)
P, N = sympy.Symbol("p", positive=True), sympy.Symbol("n", negative=True)
W = sympy.Symbol("w")  # possibly complex
C = sympy.Gt(Z, 0)


def _fresh(build):
    """``build()`` with SymPy's cache cleared: a call built at import, or cached from an
    earlier test, would not reach its class's ``eval`` and ``_eval_is_*`` in this test
    (and a test that does not call them is not run against their mutants)."""
    sympy.core.cache.clear_cache()
    return build()


@pytest.mark.parametrize("expr, value", [
    (lambda: smooth.sigmoid(0), S.Half), (lambda: smooth.softplus(0), sympy.log(2)),
    (lambda: smooth.logcosh(0), 0), (lambda: smooth.log1mexp(0), -sympy.oo), (lambda: smooth.erfcx(0), 1),
    (lambda: smooth.log_erfc(0), 0), (lambda: smooth.erfc(2), sympy.erfc(2)),
    (lambda: smooth.hypot(X), sympy.Abs(X)), (lambda: smooth.logsumexp(X), X),
    (lambda: smooth.logsumexp(0, X), smooth.softplus(X)), (lambda: smooth.logsumexp(X, 0), smooth.softplus(X)),
    (lambda: nan_safe.xlogy(0, Y), 0), (lambda: nan_safe.xlogy(X, 1), 0), (lambda: nan_safe.xlog1py(0, Y), 0),
    (lambda: nan_safe.xlog1py(X, 0), 0), (lambda: nan_safe.xdivy(0, Y), 0), (lambda: nan_safe.mul_no_nan(X, 0), 0),
    (lambda: nan_safe.xdivy(X, X), 1), (lambda: nan_safe.xdivy(-X, X**2), -1 / X),
    (lambda: nan_safe.xdivy(2 * X * Y, X**3), nan_safe.xdivy(2 * Y, X**2)), (lambda: nan_safe.xdivy(3, Y), 3 / Y),
    (lambda: nan_safe.xdivy(Y, X**(1 - Y)), nan_safe.xdivy(Y, X**(1 - Y))),
    (lambda: internal.Guard(X, sympy.true, Y), X), (lambda: internal.Guard(X, sympy.false, Y), Y),
    (lambda: internal.nan_outside(X, sympy.true), X), (lambda: internal.nan_outside(X, sympy.false), S.NaN),
    (lambda: internal.Square(3), 9), (lambda: internal.Recip(4), S(1) / 4), (lambda: internal.Ratio(3, 2), S(3) / 2),
    (lambda: kinks.Heaviside(2), 1), (lambda: kinks.Heaviside(-2), 0), (lambda: kinks.Heaviside(0), S.Half),
    (lambda: kinks.Max(1, 3, 2), 3), (lambda: kinks.Min(2, 1, 3), 1), (lambda: kinks.Max(X, X), X),
    (lambda: kinks.Max(3, X, 1), kinks.Max(3, X)), (lambda: kinks.Min(3, X, 1), kinks.Min(1, X)),
])
def test_exact_values(expr, value):
    assert _fresh(expr) == value


@pytest.mark.parametrize("cls, args", [
    (smooth.erfc, (-X,)), (smooth.sigmoid, (X,)), (nan_safe.xlogy, (X, 2)),
    (nan_safe.mul_no_nan, (0, X)), (internal.Guard, (X, C, Y)), (internal.nan_outside, (X, C)),
    (internal.Square, (X,)), (internal.Ratio, (X, 2)), (internal.Ratio, (2, X)),
    (kinks.Heaviside, (X,)),
], ids=str)
def test_symbolic_calls_stay_as_written(cls, args):
    """What would change a printed form stays the call it is (erfc(-x) is not 2 -
    erfc(x); a Ratio of a symbol is not a quotient SymPy would merge)."""
    expr = cls(*args)
    assert type(expr) is cls and expr.args == args, expr


def test_a_ratio_is_a_quotient_only_of_two_numbers():
    """Ratio(a, b) is the number a / b where both are numbers; where either holds a
    symbol it stays the one division it prints as (``(sigma / r)**12``). Fresh symbols
    and numbers (SymPy caches calls, and a cached call never reaches ``eval``)."""
    a = sympy.Dummy("a", real=True)
    for args in ((a, 7), (7, a), (a, S(2) / 9), (sympy.sqrt(11), a)):
        ratio = internal.Ratio(*args)
        assert type(ratio) is internal.Ratio and ratio.args == tuple(map(S, args)), ratio
    assert internal.Ratio(17, 4) == S(17) / 4
    assert internal.Ratio(sympy.sqrt(13), 5) == sympy.sqrt(13) / 5
    assert internal.Ratio(a, 7).subs(a, 3) == S(3) / 7


def test_calls_are_kept_in_one_order():
    """Arguments of the symmetric functions are sorted (equal calls are equal) and
    nested Max and Min are flattened."""
    assert smooth.logsumexp(Y, X).args == (X, Y)
    assert smooth.hypot(Y, X).args == (X, Y)
    assert kinks.Max(kinks.Max(Z, Y), X).args == (X, Y, Z)
    assert kinks.Min(Z, kinks.Min(Y, X)).args == (X, Y, Z)


@pytest.mark.parametrize("cls, message", [
    (smooth.hypot, "hypot needs at least one argument"),
    (kinks.Max, "Max needs at least one argument"),
    (kinks.Min, "Min needs at least one argument"),
])
def test_calls_without_arguments_are_refused(cls, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        cls()


@pytest.mark.parametrize("expr, facts", [
    (lambda: smooth.sigmoid(X), {"real": True, "positive": True, "finite": True}),
    (lambda: smooth.sigmoid(W), {"positive": None}),
    (lambda: smooth.softplus(X), {"real": True, "positive": True, "finite": True}),
    (lambda: smooth.softplus(W), {"positive": None}),
    (lambda: smooth.logcosh(X), {"nonnegative": True}), (lambda: smooth.logcosh(W), {"nonnegative": None}),
    (lambda: smooth.log1mexp(N), {"real": True, "negative": True, "finite": True}),
    (lambda: smooth.log1mexp(X), {"real": None, "negative": None, "finite": None}),
    (lambda: smooth.erfcx(X), {"positive": True}), (lambda: smooth.erfcx(W), {"positive": None}),
    (lambda: smooth.log_erfc(X), {"real": True}),
    (lambda: smooth.hypot(X, Y), {"real": True, "nonnegative": True}),
    (lambda: smooth.hypot(X, W), {"real": None, "nonnegative": None}),
    (lambda: smooth.logsumexp(X, Y), {"real": True}), (lambda: smooth.logsumexp(X, W), {"real": None}),
    (lambda: kinks.Max(X, Y), {"real": True}), (lambda: kinks.Max(X, W), {"real": None}),
    (lambda: internal.Square(X), {"nonnegative": True}), (lambda: internal.Square(W), {"nonnegative": None}),
    (lambda: internal.Ratio(X, P), {"real": True}), (lambda: internal.Ratio(X, Y), {"real": None}),
    (lambda: internal.Ratio(W, P), {"real": None}),
    (lambda: internal.Guard(X, C, Y), {"real": True}), (lambda: internal.Guard(X, C, W), {"real": None}),
    (lambda: internal.Guard(W, C, X), {"real": None}),
    (lambda: internal.nan_outside(X, C), {"real": None}),
    (lambda: nan_safe.xlogy(X, P), {"real": True}), (lambda: nan_safe.xlogy(X, Y), {"real": None}),
    (lambda: nan_safe.xlogy(W, P), {"real": None}),
    (lambda: nan_safe.xlog1py(X, P), {"real": True}), (lambda: nan_safe.xlog1py(X, Y), {"real": None}),
    (lambda: nan_safe.xlog1py(X, P - S(3) / 2), {"real": None}),
    (lambda: nan_safe.xlog1py(W, P), {"real": None}),
    (lambda: nan_safe.xdivy(X, Y), {"real": True}), (lambda: nan_safe.xdivy(X, W), {"real": None}),
    (lambda: nan_safe.xdivy(W, X), {"real": None}),
    (lambda: nan_safe.mul_no_nan(X, Y), {"real": True}), (lambda: nan_safe.mul_no_nan(X, W), {"real": None}),
    (lambda: nan_safe.mul_no_nan(W, X), {"real": None}),
])
def test_assumptions(expr, facts):
    """What SymPy may assume of a call (the stability rules and guards read these):
    known for real arguments where the function is real there, unknown otherwise."""
    expr = _fresh(expr)
    for fact, value in facts.items():
        assert getattr(expr, f"is_{fact}") is value, (expr, fact)


def test_conjugates_are_taken_of_the_argument():
    assert sympy.conjugate(smooth.sigmoid(W)) == smooth.sigmoid(sympy.conjugate(W))
    assert sympy.conjugate(smooth.softplus(W)) == smooth.softplus(sympy.conjugate(W))


def test_every_derivative_defaults_to_the_first_argument():
    """fdiff() is the partial in the first argument, as SymPy's Function.fdiff."""
    for f in ELEMENTWISE_CLASSES:
        for cls in f.classes:
            argindex = inspect.signature(cls.fdiff).parameters["argindex"]
            assert argindex.default in (1, inspect.Parameter.empty), cls


def test_guards_derivatives_of_what_they_do_not_hold_are_zero():
    """A guard's derivative is the guard of its branches' derivatives, and exactly 0
    (not a guard of zeros) where both are 0."""
    assert internal.Guard(X**2, C, Y).diff(X) == internal.Guard(2 * X, C, 0)
    assert internal.Guard(Y, C, X).diff(X) == internal.Guard(0, C, 1)
    assert internal.Guard(Y, X > 0, 1).diff(X) is S.Zero  # X only in the condition
    assert internal.nan_outside(X**2, C).diff(X) == internal.nan_outside(2 * X, C)
    assert internal.nan_outside(Y, X > 0).diff(X) is S.Zero


def test_quotients_divide_twice_rather_than_by_a_square():
    """d/dy x/y is -(x/y)/y for Ratio and xdivy alike: y**2 overflows (y > 1.8e19 in
    float32) or underflows where (x/y)/y is finite; xdivy keeps its 0 where x is 0."""
    assert internal.Ratio(X, Y).diff(Y) == -internal.Ratio(X, Y) * internal.Recip(Y)
    assert nan_safe.xdivy(X, Y).diff(Y) == nan_safe.xdivy(-nan_safe.xdivy(X, Y), Y)
    assert nan_safe.xdivy(-X, X).diff(X) == 0  # (-1, a number: its derivative is 0)


def test_log1mexp_derivative_is_nan_where_log1mexp_is():
    """For x > 0 log(1 - exp(x)) is NaN, and so is its derivative (exp(x) / expm1(x)
    alone is finite there)."""
    derivative = smooth.log1mexp(X).diff(X)
    for x in (S(1) / 1000, S.Half, S.One, S(3)):
        assert derivative.subs(X, x) is S.NaN, x
    assert derivative.subs(X, -1).evalf(30) == (sympy.exp(-1) / (sympy.exp(-1) - 1)).evalf(30)


def test_ties_split_the_derivative():
    """At a tie of Max or Min each tied argument gets an equal share."""
    for cls in (kinks.Max, kinks.Min):
        two = cls(X, Y)
        assert [two.diff(v).subs({X: 1, Y: 1}) for v in (X, Y)] == [S.Half, S.Half]
        three = cls(X, Y, Z)
        at = {X: 1, Y: 1, Z: 1}
        assert [three.diff(v).subs(at) for v in (X, Y, Z)] == [S(1) / 3] * 3


def test_unresolved_conditions_leave_a_guard_unevaluated():
    """A guard whose condition evalf cannot decide stays a guard (of numbers)."""
    for expr in (internal.Guard(sympy.Float(1), C, sympy.Float(2)),
                 internal.nan_outside(sympy.Float(1), C)):
        assert expr.evalf(30).func is expr.func


def test_squarings_build_powers_by_repeated_squaring():
    assert internal.squarings(X, 12) == (internal.Square(internal.Square(internal.Square(X)))
                                        * internal.Square(internal.Square(X)))
    assert internal.squarings(X, 1) == X
    for n in range(1, 20):
        expr = internal.squarings(X, n)
        assert expr.replace(internal.Square, lambda a: a**2) == X**n, n
        assert len(expr.atoms(internal.Square)) == n.bit_length() - 1, n


# ------------------------------------------------------------------ declarations


def test_functions_check_their_declaration():
    """A declaration of an unknown kind, with spellings for an internal function or none
    for a spec one, or holomorphic and refused for complex ops at once, is refused. (A
    helper may wrap a TensorFlow kernel: erf prints as _erf, which calls tf.math.erf.)"""
    Function("f", ELEMENTWISE, ("f",), tf="tf.math.f")
    Function("f", INTERNAL, helper="_f")
    Function("f", MATRIX, ("f",), real_only="no")
    assert fns.declared("erf").tf == "tf.math.erf" and fns.declared("erf").helper == "_erf"
    for bad in ({"kind": "bogus"}, {"kind": INTERNAL}, {"spellings": ()},
                {"kind": MATRIX, "holomorphic": True, "real_only": "no"}, {"kind": MATRIX}):
        fields = {"name": "f", "kind": ELEMENTWISE, "spellings": ("f",), **bad}
        with pytest.raises(AssertionError):
            Function(**fields)


def test_argument_kinds_repeat_the_last():
    f = Function("f", ELEMENTWISE, ("f",), arity=(1, None), args=(VALUE, REAL))
    assert [f.arg_kind(i) for i in range(4)] == [VALUE, REAL, REAL, REAL]
    assert fns.declared("Max").arg_kind(5) == REAL
    assert fns.declared("exp").arg_kind(0) == VALUE


def test_tf_name_is_the_name_inside_tf_math():
    assert fns.declared("ceiling").tf_name == "ceil"
    assert fns.declared("mul_no_nan").tf_name == "multiply_no_nan"
    assert fns.declared("logcosh").tf_name is None  # a helper
    assert Function("f", ELEMENTWISE, ("f",), tf="tf.nn.f").tf_name is None


def test_unary_declarations_are_what_unary_builds():
    """_unary: spelled as named, its class first and the ``also`` classes after,
    printed as tf.math.<name> unless told otherwise, the other fields passed through."""
    passed = ("name", "kind", "spellings", "build", "classes", "numpy", "mpmath", "tf")
    checked = 0
    for f in fns.FUNCTIONS:
        if (f.kind == ELEMENTWISE and f.spellings == (f.name,) and f.arity == (1, 1)
                and f.build is f.classes[0]):
            rest = {k.name: getattr(f, k.name) for k in dataclasses.fields(f)
                    if k.name not in passed}
            assert fns._unary(f.name, f.build, f.numpy, f.mpmath, also=f.classes[1:],
                              tf=f.tf, **rest) == f, f.name
            checked += 1
    assert checked >= 20
    f = fns._unary("exp", sympy.exp, np.exp, mpmath.exp, grows=True)
    assert (f.name, f.kind, f.spellings, f.build, f.classes, f.tf, f.numpy, f.mpmath,
            f.grows) == ("exp", ELEMENTWISE, ("exp",), sympy.exp, (sympy.exp,),
                         "tf.math.exp", np.exp, mpmath.exp, True)
    f = fns._unary("ceiling", kinks.ceiling, np.ceil, None, tf="tf.math.ceil",
                   also=(sympy.ceiling,))
    assert (f.tf, f.classes, f.mpmath) == ("tf.math.ceil", (kinks.ceiling, sympy.ceiling), None)


def test_lookups():
    assert fns.spelled("abs") is fns.spelled("Abs") is fns.declared("Abs")
    assert fns.spelled("xlogy") is None and fns.spelled("nope") is None
    with pytest.raises(KeyError, match="nope"):
        fns.declared("nope")
    assert fns.of_class(smooth.erfc) is fns.declared("erfc")  # through its base class
    assert fns.of_class(sympy.Symbol) is None
    elementwise = fns.spellings(ELEMENTWISE)
    assert {"exp", "abs", "Abs", "Max", "atan2"} <= set(elementwise)
    assert not {"sum", "det", "where"} & set(elementwise)
    assert "log(det(...))" not in fns.spellings(MATRIX) and "det" in fns.spellings(MATRIX)
    assert fns.spellings() == ()
    assert fns.with_numpy() == tuple(f for f in fns.FUNCTIONS if f.numpy is not None)
    assert fns.declared("xlogy") in fns.with_numpy()
    assert fns.declared("Heaviside") not in fns.with_numpy()
    holomorphic = fns.holomorphic_classes()
    assert {sympy.exp, sympy.log, smooth.sigmoid, sympy.conjugate} - {
        c for c in holomorphic} == {sympy.conjugate}
    assert kinks.sign not in holomorphic and kinks.Max not in holomorphic


def test_as_declared_puts_back_the_spec_classes():
    """SymPy's sign (the derivative of |x|) becomes the spec's, whose derivative is 0."""
    expr = fns.as_declared(sympy.sign(X) + sympy.exp(sympy.floor(Y)))
    assert expr == kinks.sign(X) + sympy.exp(kinks.floor(Y))
    assert expr.diff(X) == 0
    assert fns.as_declared(X + 1) == X + 1
