"""Every declaration of the function registry (gradgen.functions.declarations) is
checked here, so a function added by one declaration is tested without new tests of
these kinds: its spellings parse, its class prints as its TensorFlow spelling (which
TensorFlow has), its NumPy implementation, mpmath reference, SymPy derivative and
declared meaning agree at points of its domain, and its SymPy class finds it again."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import sympy
import yaml

from gradgen.functions import declarations as fns
from gradgen.functions.registry import ELEMENTWISE, INTERNAL
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


@pytest.mark.parametrize("f", UNARY, ids=lambda f: f.name)
def test_numpy_mpmath_derivative_and_meaning_agree(f):
    """NumPy (float64) against the mpmath reference at 30 digits; SymPy's derivative of
    the class against mpmath's numerical derivative of the reference; the meaning, where
    declared, against the reference."""
    cls = f.classes[0]
    derivative = sympy.lambdify(X, sympy.diff(cls(X), X), "mpmath")
    for p in _inside(f):
        with mpmath.workdps(30):
            exact = f.mpmath(mpmath.mpf(p))
            assert math.isclose(float(f.numpy(np.float64(p))), float(exact),
                                rel_tol=1e-13, abs_tol=1e-300), (f.name, p)
            slope = mpmath.diff(f.mpmath, mpmath.mpf(p))
            if f.exact and slope == 0:  # floor, sign...: 0 a.e., as declared
                assert derivative(mpmath.mpf(p)) == 0
                continue
            assert mpmath.almosteq(derivative(mpmath.mpf(p)), slope, 1e-20), (f.name, p)
            if f.meaning is not None:
                meaning = sympy.lambdify(X, f.meaning(X), "mpmath")
                assert mpmath.almosteq(meaning(mpmath.mpf(p)), exact, 1e-25), (f.name, p)


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

