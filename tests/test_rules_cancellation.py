"""The sqrt_conjugate rule (gradgen/stability/families/cancellation.py): written forms
that fire, near misses that must not, and witnesses where the naive form cancels."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import sympy

from gradgen.functions import hypot
from gradgen.stability import RULES_BY_NAME

x, y, t = sympy.symbols("x y t", real=True)
sqrt = sympy.sqrt
RULE = RULES_BY_NAME["sqrt_conjugate"]

# (written, rewritten)
VARIANTS = [
    (sqrt(x + 1) - sqrt(x), 1 / (sqrt(x) + sqrt(x + 1))),
    (sqrt(1 + t) - 1, t / (sqrt(t + 1) + 1)),
    (1 - sqrt(1 - t), t / (sqrt(1 - t) + 1)),
    (2 * sqrt(x + 3) - 2 * sqrt(x), 6 / (sqrt(x) + sqrt(x + 3))),
    (sqrt(4 + t) - 2 + y, t / (sqrt(t + 4) + 2) + y),
    (hypot(1, t) - 1, t**2 / (hypot(1, t) + 1)),
]
NEAR_MISSES = [
    sqrt(x) - 2,  # x - 4 is not simpler than x: no cancellation to remove
    sqrt(x) - sqrt(y),  # x - y is not a number: the denominator may be 0
    sqrt(x + 1) + sqrt(x),  # a sum: nothing cancels
    x + sqrt(x**2 + 4),  # the conjugate would cancel for x > 0
    sqrt(1 + t) + 1,
    sqrt(1 + t) - sqrt(2 + t) * 2,  # different coefficients
]


@pytest.mark.parametrize("written, rewritten", VARIANTS)
def test_fires_on_every_written_form(written, rewritten):
    got = RULE.apply(written)
    assert got is not None and sympy.simplify(got - rewritten) == 0, got


@pytest.mark.parametrize("written", NEAR_MISSES)
def test_near_miss_does_not_fire(written):
    assert RULE.apply(written) is None


@pytest.mark.parametrize("written, _", VARIANTS)
def test_both_sides_agree_at_50_digits(written, _):
    rewritten = RULE.apply(written)
    symbols = sorted(written.free_symbols, key=str)
    f = sympy.lambdify(symbols, written.rewrite(sympy.sqrt).subs(
        {h: sqrt(sum(a**2 for a in h.args)) for h in written.atoms(hypot)}), "mpmath")
    g = sympy.lambdify(symbols, rewritten.subs(
        {h: sqrt(sum(a**2 for a in h.args)) for h in rewritten.atoms(hypot)}), "mpmath")
    rng = np.random.default_rng(0)
    with mpmath.workdps(50):
        for _ in range(20):
            point = [mpmath.mpf(float(v)) for v in rng.uniform(0.01, 0.9, len(symbols))]
            assert abs(f(*point) - g(*point)) <= mpmath.mpf(10) ** -45


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_witness_large_x(dtype):
    """sqrt(x + 1) - sqrt(x) at x = 1e8: the naive form is 0 in float32 (0.5 ulp off
    in float64 at 1e16), the conjugate 1 / (sqrt(x + 1) + sqrt(x)) is right."""
    value = dtype(1e8) if dtype is np.float32 else dtype(1e16)
    naive = np.sqrt(value + dtype(1)) - np.sqrt(value)
    stable = dtype(1) / (np.sqrt(value + dtype(1)) + np.sqrt(value))
    with mpmath.workdps(50):
        exact = float(mpmath.sqrt(mpmath.mpf(float(value)) + 1) - mpmath.sqrt(float(value)))
    assert abs(naive - exact) > 0.1 * exact
    assert abs(stable - exact) <= 2 * np.finfo(dtype).eps * exact


def test_witness_pseudo_huber_small_ratio(build, tf):
    """d**2 * (sqrt(1 + (r/d)**2) - 1) at r/d = 1e-18 (SciPy's test): 5e-37, not 0."""
    module = build(
        "version: 1\nmodule: ph\ndtype: float64\nops:\n  - name: pseudo_huber\n"
        "    inputs: {d: [null], r: [null]}\n    output: d**2*(sqrt(1 + (r/d)**2) - 1)\n"
    )
    d, r = tf.constant([1.0], tf.float64), tf.constant([1e-18], tf.float64)
    with tf.GradientTape() as tape:
        tape.watch([d, r])
        out = module.pseudo_huber(d, r)
    grad_d, grad_r = tape.gradient(out, [d, r])
    assert abs(out.numpy()[0] - 5e-37) <= 1e-15 * 5e-37
    assert abs(grad_r.numpy()[0] - 1e-18) <= 1e-15 * 1e-18


def test_no_taylor_guard_whose_coefficients_are_singular_in_another_input(build, tf):
    """The removable-singularity guard expanded pseudo-Huber in d around 0, with 1/|r| and
    1/r**2 in the coefficients: NaN at r = 0 for |d| below the switch point (0.58 in
    bfloat16, where the formula itself is 0). Such a series is not used any more."""
    module = build(
        "version: 1\nmodule: ph32\nops:\n  - name: pseudo_huber\n"
        "    inputs: {d: [null], r: [null]}\n    output: d**2*(sqrt(1 + (r/d)**2) - 1)\n"
    )
    d, r = tf.constant([0.5, 0.01, 2.0]), tf.constant([0.0, 0.0, 0.0])
    with tf.GradientTape() as tape:
        tape.watch([d, r])
        out = module.pseudo_huber(d, r)
    grads = tape.gradient(out, [d, r])
    np.testing.assert_array_equal(out.numpy(), [0.0, 0.0, 0.0])
    for g in grads:
        np.testing.assert_array_equal(g.numpy(), [0.0, 0.0, 0.0])
