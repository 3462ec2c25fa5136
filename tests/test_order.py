"""Symbolic higher orders (`order`): each gradient function up to the declared order is
a tf.custom_gradient whose VJP gradgen derived, with the same stable forms and guards.

Checked against 50-digit references at points where TensorFlow's autodiff of the VJP
fails, and in each TensorFlow mode a Hessian is taken in (eager nested tapes,
tf.function with None dims, XLA, TF1 graphs, forward-over-reverse, batch_jacobian).
"""

from __future__ import annotations

import re

import mpmath
import numpy as np
import pytest
import sympy

from tfmodes import second_partials

SPEC = """\
version: 1
module: orders
dtype: [float32, float64]
order: 2
ops:
  - name: softplus
    inputs: {x: [null]}
    output: log(1 + exp(x))
  - name: softplus3
    order: 3
    inputs: {x: [null]}
    output: log(1 + exp(x))
  - name: first_only
    order: 1
    inputs: {x: [null]}
    output: log(1 + exp(x))
  - name: norm
    inputs: {x: [null], y: [null]}
    output: sqrt(x**2 + y**2)
  - name: inv_norm
    dtype: float32
    inputs: {x: [null], y: [null]}
    output: 1/sqrt(x**2 + y**2)
  - name: angle
    dtype: float32
    inputs: {x: [null], y: [null]}
    output: atan2(y, x)
  - name: masked_log
    inputs: {x: [null], a: [null]}
    output: where(x >= 0, a*log(x), 0)
  - name: entropy
    dtype: float32
    inputs: {p: [null]}
    output: -p*log(p)
  - name: acos_sq
    dtype: float64
    inputs: {x: [null]}
    output: acos(x)**2
  - name: log_erfc
    dtype: float32
    inputs: {u: [null]}
    output: log(erfc(u))
  - name: expm1_ratio
    dtype: float32
    inputs: {x: [null]}
    output: (exp(x) - 1)/x
  - name: asinh_scaled
    dtype: float64
    inputs: {x: [null], s: [null]}
    output: asinh(x / s)
  - name: log_cdf
    inputs: {x: [null]}
    output: log(erfc(-x / sqrt(2)) / 2)
  - name: bernoulli
    inputs: {x: [null]}
    output: where(x == 0, 1, x / expm1(x))
  - name: lennard_jones
    dtype: float64
    inputs: {r: [null], sigma: [], eps: []}
    output: 4 * eps * ((sigma / r)**12 - (sigma / r)**6)
  - name: lj32
    dtype: float32
    inputs: {r: [null], sigma: [null], eps: [null]}
    output: 4 * eps * ((sigma / r)**12 - (sigma / r)**6)
  - name: morse32
    dtype: float32
    inputs: {r: [null], r0: [null], depth: [null], width: [null]}
    output: depth * (1 - exp(-width * (r - r0)))**2
  - name: pow15
    inputs: {x: [null]}
    output: x**1.5
  - name: scaled_tanh
    inputs: {x: [null, 3], b: [3], k: {shape: [], differentiable: false}, n: {shape: [], dtype: int32}}
    outputs:
      value: k*tanh(x*b)*n
      square: (x*b)**2
"""


@pytest.fixture(scope="module")
def orders(build):
    return build(SPEC, audit=False)


# Forms whose derived orders were wrong in their tails (each fix also has a fast test
# of its rule or guard in test_guards.py / test_rules_*.py); built by the slow run only
TAILS_SPEC = """\
version: 1
module: order_tails
order: 3
ops:
  - name: gauss_dip
    dtype: float32
    inputs: {x: [null]}
    output: expm1(-x**2)
  - name: logistic_density
    dtype: float64
    inputs: {x: [null]}
    output: sigmoid(x) * (1 - sigmoid(x))
  - name: log1p_square
    dtype: float32
    inputs: {x: [null]}
    output: log(1 + x**2)
  - name: atan_square
    dtype: float32
    inputs: {x: [null]}
    output: atan(x)**2
"""


@pytest.fixture(scope="module")
def tails(build):
    return build(TAILS_SPEC, audit=False)


def _sigmoid(v):
    return 1 / (1 + mpmath.exp(-v))


def _derivatives(tf, fn, x, n):
    """``fn``'s first ``n`` derivatives at ``x`` (elementwise ``fn``), nested tapes."""
    tapes = [tf.GradientTape() for _ in range(n)]
    for t in tapes:
        t.__enter__()
        t.watch(x)
    value = fn(x)
    out = []
    for t in reversed(tapes):
        t.__exit__(None, None, None)
        value = t.gradient(value, x)
        out.append(value)
    return [v.numpy() for v in out]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softplus_second_and_third_derivatives_are_exact_in_the_tails(tf, orders, dtype):
    """softplus'' = s*(1 - s) as TF's sigmoid gradient computes it is 0 at x = 20 in
    float32 (60 in float64); the derived one is sigmoid(x)*sigmoid(-x): 2.1e-9."""
    points = [-30.0, -1.0, 0.0, 2.0, 20.0, 60.0]
    x = tf.constant(points, dtype)
    _, second, third = _derivatives(tf, orders.softplus3, x, 3)
    with mpmath.workdps(50):
        s = [_sigmoid(mpmath.mpf(p)) for p in points]
        want2 = [float(v * (1 - v)) for v in s]
        want3 = [float(v * (1 - v) * (1 - 2 * v)) for v in s]
    rtol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(second, want2, rtol=rtol)
    np.testing.assert_allclose(third, want3, rtol=rtol * 10, atol=1e-300)
    (_, plain2) = _derivatives(tf, orders.first_only, x, 2)
    assert plain2[4] == 0 or dtype == "float64"  # what TF's autodiff of the VJP gives


def test_forward_mode_takes_the_derived_orders_in_every_mode(tf, orders):
    """TensorFlow's forward mode ignores a custom gradient: over a tape (a
    Hessian-vector product forward-over-reverse) it differentiated the first-order code,
    so softplus'' was 0 at x = 20 in float32. `_with_jvp` takes the JVPs from the
    derived VJPs: eagerly, in tf.function with None dims and under XLA."""
    x = tf.constant([-30.0, 0.0, 2.0, 20.0], tf.float32)
    with mpmath.workdps(50):
        s = [_sigmoid(mpmath.mpf(float(p))) for p in x.numpy()]
        want = {"first": [float(v) for v in s], "second": [float(v * (1 - v)) for v in s]}

    def jvps(x_):
        with tf.autodiff.ForwardAccumulator(x_, tf.ones_like(x_)) as acc:
            with tf.GradientTape() as tape:
                tape.watch(x_)
                y = orders.softplus3(x_)
            g = tape.gradient(y, x_)
        return acc.jvp(y), acc.jvp(g)

    spec = [tf.TensorSpec([None], tf.float32)]
    for mode, fn in (("eager", jvps),
                     ("tf.function", tf.function(jvps, input_signature=spec)),
                     ("xla", tf.function(jvps, jit_compile=True))):
        first, second = fn(x)
        np.testing.assert_allclose(first.numpy(), want["first"], rtol=1e-6, err_msg=mode)
        np.testing.assert_allclose(second.numpy(), want["second"], rtol=1e-5, err_msg=mode)


def test_forward_mode_is_never_nan_where_it_was_finite_nor_counts_twice(tf, orders):
    """Found by an independent check of `_with_jvp`: (1) a JVP's tangent carried
    J's own tangent times 0, NaN where TensorFlow's forward mode of J's code is inf
    (x**1.5's JVP at 0: exact 0); (2) under nested
    accumulators the tangent d carried both, so forward-over-forward counted the cross
    term twice; (3) a non-differentiable input's tangent reached the JVP only when no
    other input was watched (its gradient is None: it contributes nothing)."""
    x = tf.constant([0.0, 1e-30, 4.0], tf.float32)
    with tf.autodiff.ForwardAccumulator(x, tf.ones_like(x)) as acc:
        y = orders.pow15(x)
    np.testing.assert_allclose(acc.jvp(y).numpy(), [0.0, 1.5e-15, 3.0], rtol=1e-6)
    z = tf.constant([0.3, -1.0], tf.float64)
    with tf.autodiff.ForwardAccumulator(z, 3 * tf.ones_like(z)) as outer:
        with tf.autodiff.ForwardAccumulator(z, 2 * tf.ones_like(z)) as inner:
            y = orders.softplus(z)
        first = inner.jvp(y)
    s = 1 / (1 + np.exp(-z.numpy()))
    np.testing.assert_allclose(outer.jvp(first).numpy(), 6 * s * (1 - s), rtol=1e-12)
    xs, b = tf.constant([[0.5, -1.0, 2.0]], tf.float64), tf.constant([1.0, 2.0, 0.5], tf.float64)
    k, n = tf.constant(1.5, tf.float64), tf.constant(2, tf.int32)
    for watched, tangents in (([k], [1.0]), ([b, k], [0.0, 1.0])):
        with tf.autodiff.ForwardAccumulator(
                watched, [tf.ones_like(w) * t for w, t in zip(watched, tangents)]) as acc:
            value, _ = orders.scaled_tanh(xs, b, k, n)
        np.testing.assert_array_equal(acc.jvp(value, tf.UnconnectedGradients.ZERO).numpy(), 0)


def test_the_hessian_of_a_norm_near_the_origin_is_finite(tf, orders):
    """d2/dx2 sqrt(x**2 + y**2) = y**2/h**3 is 3.5e19 at x = y = 1e-20: computed from
    the unit vector's components (x/h)(y/h)/h, not x*y/h**3 (-inf or NaN in float32)."""
    x = tf.constant([1e-20, 3.0, 0.0], tf.float32)
    y = tf.constant([1e-20, 4.0, 0.0], tf.float32)
    (dxx, dxy), _ = second_partials(tf, orders.norm, x, y)
    h = np.hypot(np.float64([1e-20, 3.0]), np.float64([1e-20, 4.0]))
    yy, xx = np.float64([1e-20, 4.0]), np.float64([1e-20, 3.0])
    np.testing.assert_allclose(dxx[:2], yy**2 / h**3, rtol=1e-6)
    np.testing.assert_allclose(dxy[:2], -xx * yy / h**3, rtol=1e-6)
    assert np.all(np.isfinite(dxx)) and np.all(np.isfinite(dxy))


@pytest.mark.parametrize("dtype, y", [("float32", 1e-3), ("float64", 1e-10)])
def test_the_hessian_of_a_norm_holds_where_one_component_dominates(tf, orders, dtype, y):
    """d2/dx2 sqrt(x**2 + y**2) = y**2/h**3 at x = 1: computed as ``(y/h)**2/h``
    (Pythagoras), not ``(1 - (x/h)**2)/h``, which cancels (4.6% off at y = 1e-3 in
    float32; 0 at y = 1e-10 in float64, where the exact value is 1e-20)."""
    x, y = tf.constant([1.0, -1.0], dtype), tf.constant([y, y], dtype)
    (dxx, dxy), (_, dyy) = second_partials(tf, orders.norm, x, y)
    with mpmath.workdps(50):
        h = mpmath.hypot(1, mpmath.mpf(float(y[0])))
        want = [float(y[0].numpy()) ** 2 / h**3, -float(y[0].numpy()) / h**3, 1 / h**3]
    for got, exact in zip((dxx, dxy, dyy), want):
        np.testing.assert_allclose(abs(got), abs(float(exact)), rtol=4 * np.finfo(dtype).eps)
    # (y/h)*((y/h)/h), not (y/h)**2/h, whose (y/h)**2 = 1e-40 underflows: 0 at x = 1e-5,
    # y = 1e-25 in float32, where the exact value is 1e-35
    (dxx, _), _ = second_partials(tf, orders.norm, tf.constant([-1e-5], "float32"),
                                  tf.constant([-1e-25], "float32"))
    np.testing.assert_allclose(dxx, [1e-35], rtol=1e-5)


def test_an_inverse_norm_and_an_angle_divide_by_the_norm_in_turn(tf, orders):
    """``-x/h**3`` (d/dx of 1/sqrt(x**2 + y**2)) as ``((x/h)/h)/h``: ``(x/h)*(1/h)**2``
    was inf at x = -8e-31, y = -2.45e-22 in float32, where the value is 5.4e34; and
    atan2's second derivatives as ``(...)/h/h`` with the difference of squares
    factored: its mixed partial ``(x**2 - y**2)/h**4`` was inf (then NaN) at x = y =
    1.2e-38, where it is 0, and d2/dx2 = 2xy/h**4 inf at x = -1.7e-22, y = 5.6e-35
    (exact -3.3e31)."""
    x = tf.constant([-7.9613e-31], tf.float32)
    y = tf.constant([-2.45058e-22], tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(x)
        value = orders.inv_norm(x, y)
    exact = -float(x[0]) / np.hypot(float(x[0]), float(y[0])) ** 3
    np.testing.assert_allclose(tape.gradient(value, x).numpy(), [exact], rtol=1e-5)
    tiny = float(np.finfo(np.float32).tiny)
    x = tf.constant([tiny, -1.71982e-22], tf.float32)
    y = tf.constant([tiny, 5.6369e-35], tf.float32)
    (dxx, dxy), _ = second_partials(tf, orders.angle, x, y)
    assert dxy[0] == 0
    xx, yy = (float(v) for v in (x[1], y[1]))
    np.testing.assert_allclose(dxx[1], 2 * xx * yy / np.hypot(xx, yy) ** 4, rtol=1e-5)


def test_masked_branches_contribute_exactly_zero_at_second_order(tf, orders):
    x = tf.constant([-2.0, 0.5, 3.0], tf.float32)
    a = tf.constant([1.5, -1.0, 2.0], tf.float32)
    (dxx, dxa), (dax, _) = second_partials(tf, orders.masked_log, x, a)
    np.testing.assert_allclose(dxa, [0.0, 2.0, 1 / 3], rtol=1e-6)
    np.testing.assert_allclose(dax, [0.0, 2.0, 1 / 3], rtol=1e-6)
    np.testing.assert_allclose(dxx, [0.0, 4.0, -2 / 9], rtol=1e-6)


def test_entropy_second_derivative_is_minus_one_over_p_where_p_squared_underflows(tf, orders):
    """d2/dp2 (-p log p) = -1/p: the derivative of xlogy(p, p)'s d/dp, log(p) + xdivy(p, p),
    was xdivy(-p, p*p) + 2/p, +inf where p*p underflows; xdivy's common factor cancels."""
    p = tf.constant([1e-20, 1e-3, 0.5], tf.float32)
    first, second = _derivatives(tf, orders.entropy, p, 2)
    want = np.float64([1e-20, 1e-3, 0.5])
    np.testing.assert_allclose(first, -(np.log(want) + 1), rtol=1e-6)
    np.testing.assert_allclose(second, -1 / want, rtol=1e-6)


def test_lennard_jones_second_derivatives_with_its_scales(tf, orders):
    """Lennard-Jones with eps and sigma at order 2 did not build: a removable-singularity
    check took the pole at r = 0 of its second derivative for a fill (SymPy's limit
    zoo*sigma**6*sign(sigma**6), whose series is nan: "NaN has no TensorFlow form").
    Its Hessian in r, and the mixed partial in eps, against the exact ones."""
    points = [0.9, 1.0, 1.5, 1e-3]
    r = tf.constant(points, tf.float64)
    sigma, eps = tf.constant(1.0, tf.float64), tf.constant(0.5, tf.float64)
    with tf.GradientTape(persistent=True) as outer:
        outer.watch([r, eps])
        with tf.GradientTape() as inner:
            inner.watch(r)
            value = orders.lennard_jones(r, sigma, eps)
        first = inner.gradient(value, r)
    second, mixed = outer.gradient(first, r), outer.gradient(first, eps)
    with mpmath.workdps(50):
        v = [mpmath.mpf(p) for p in points]
        want2 = [float(2 * (156 * q**-14 - 42 * q**-8)) for q in v]
        want_mixed = float(sum(4 * (-12 * q**-13 + 6 * q**-7) for q in v))
    np.testing.assert_allclose(second.numpy(), want2, rtol=1e-12)
    np.testing.assert_allclose(mixed.numpy(), want_mixed, rtol=1e-12)


# (op, exact forward, points) where a second partial was NaN or inf in float32 and the
# exact one is finite: factors of wide range multiplied before the one that brings the
# product back (Lennard-Jones' (sigma/r)**6 / r**2 at r = 4.8e-26; Morse's width**2
# beside an exp(-u) that underflows; eps * upstream at eps = 3.4e38)
_R, _S, _E, _R0, _W = sympy.symbols("r s e r0 w", real=True)
WIDE_PRODUCTS = [
    ("lj32", 4 * _E * ((_S / _R)**12 - (_S / _R)**6), (_R, _S, _E),
     [(4.81256e-26, -2.2144e-27, -1.53093e-34), (-1.59581e33, 2.81406e38, -1.40464e23),
      (3.40282e38, 3.40282e38, 3.40282e38), (0.5, 1.17549e-38, 3.40282e38)]),
    ("morse32", _E * (1 - sympy.exp(-_W * (_R - _R0)))**2, (_R, _R0, _E, _W),
     [(2.0, 0.5, 1.17549e-38, 3.40282e38), (1.0, 0.0, -3.40282e38, 3.40282e38),
      (-3.40282e38, 0.0, 1.0, -1.0)]),
]


@pytest.mark.parametrize("name, exact, symbols, points", WIDE_PRODUCTS,
                         ids=[w[0] for w in WIDE_PRODUCTS])
def test_second_partials_of_wide_range_products_are_finite_where_exact_ones_are(
        tf, orders, name, exact, symbols, points):
    """Every second partial of Lennard-Jones and Morse in float32 at points where one was
    NaN or inf (the derived order is the math's, guarded afresh: zero_factor's run-time
    order and log_product); where the exact value is finite the computed one is, within
    1e-4 relative (or 1e-30 absolute, below which float32 keeps few digits)."""
    args = [tf.constant(np.float32(column)) for column in zip(*points)]
    hessian = second_partials(tf, getattr(orders, name), *args)
    for k, point in enumerate(points):
        at = {v: sympy.Float(float(np.float32(p)), 60) for v, p in zip(symbols, point)}
        for i, vi in enumerate(symbols):
            for j, vj in enumerate(symbols):
                want = float(sympy.diff(exact, vi, vj).evalf(50, subs=at))
                got = float(hessian[i][j][k])
                if abs(want) < 3e38:
                    assert np.isfinite(got), (name, point, i, j, got, want)
                    assert abs(got - want) <= 1e-4 * abs(want) + 1e-30, (
                        name, point, i, j, got, want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_log_of_the_normal_cdf_holds_in_its_tail(tf, orders, dtype):
    """log(erfc(-x/sqrt(2))/2): the /2 kept the log-erfc rule from firing (log_mul
    did not know erfc is positive), so the slope was NaN from x = -14 in float32 and
    -38 in float64 (exact 14.07, 38.03); now log_erfc(-x/sqrt(2)) - log(2)."""
    points = [-90.0, -38.0, -14.0, 0.0, 2.0]
    x = tf.constant(points, dtype)
    first, second = _derivatives(tf, orders.log_cdf, x, 2)
    with mpmath.workdps(60):
        f = lambda v: mpmath.log(mpmath.erfc(-v / mpmath.sqrt(2)) / 2)
        want = [[float(mpmath.diff(f, mpmath.mpf(p), k)) for p in points] for k in (1, 2)]
    rtol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(first, want[0], rtol=rtol)
    np.testing.assert_allclose(second, want[1], rtol=rtol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_pole_of_a_function_that_vanishes_is_filled(tf, orders, dtype):
    """x/expm1(x) (the Bernoulli generating function; written with its value at 0):
    its slope's pole is expm1(x)**-1, not a power of x, and was not seen: NaN at 0
    (exact -1/2), 0 at 1e-30; its second derivative 0 at 1e-10 in float64 (exact 1/6).
    Near 0 both are now the formula's Taylor polynomial."""
    points = [0.0, 1e-30, -1e-10, 1e-3, 0.5, -3.0]
    x = tf.constant(points, dtype)
    first, second = _derivatives(tf, orders.bernoulli, x, 2)
    with mpmath.workdps(60):
        f = lambda v: v / mpmath.expm1(v) if v != 0 else mpmath.mpf(1)
        want = [[float(mpmath.diff(f, mpmath.mpf(p), k)) if p != 0 else (-0.5, 1 / 6)[k - 1]
                 for p in points] for k in (1, 2)]
    rtol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(first, want[0], rtol=rtol)
    np.testing.assert_allclose(second, want[1], rtol=rtol)


def test_a_guarded_derived_order_builds_and_holds(tf, orders):
    """asinh(x/s) at order 2 crashed the build: the removable-singularity check asked
    SymPy whether a part holding a Guard's condition (s != 0) is rational in s. (At
    large x/s the mixed partial cancels: 7e-12 relative at x/s = -333, and at -3e9 its
    -3e-30 is lost; not checked here.)"""
    xs, ss = [-30.0, -2.0, 0.0, 1e-20, 0.5, 3e3], [3.0, 0.5, 2.0, 1e-20, -4.0, 1e5]
    x, s = tf.constant(xs, tf.float64), tf.constant(ss, tf.float64)
    (dxx, dxs), _ = second_partials(tf, orders.asinh_scaled, x, s)
    with mpmath.workdps(50):
        f = lambda a, b: mpmath.asinh(a / b)
        want_xx = [float(mpmath.diff(f, (mpmath.mpf(a), mpmath.mpf(b)), (2, 0)))
                   for a, b in zip(xs, ss)]
        want_xs = [float(mpmath.diff(f, (mpmath.mpf(a), mpmath.mpf(b)), (1, 1)))
                   for a, b in zip(xs, ss)]
    np.testing.assert_allclose(dxx, want_xx, rtol=1e-12)
    np.testing.assert_allclose(dxs, want_xs, rtol=1e-12)


def test_a_filled_limit_has_the_limit_of_its_derivative_at_second_order(tf, orders):
    """acos(x)**2: the slope is -2 at 1 (singular_limit's fill); the second derivative
    there is the limit 2/3 of the formula's, not the fill's constant 0."""
    x = tf.constant([1.0, 0.5], tf.float64)
    first, second = _derivatives(tf, orders.acos_sq, x, 2)
    with mpmath.workdps(50):
        f = lambda v: mpmath.acos(v)**2
        want = [float(mpmath.diff(f, mpmath.mpf("0.5"), k)) for k in (1, 2)]
    np.testing.assert_allclose(first, [-2.0, want[0]], rtol=1e-12)
    np.testing.assert_allclose(second, [2 / 3, want[1]], rtol=1e-12)


def test_expm1_ratio_is_finite_where_exp_overflows_at_every_order(tf, orders):
    """(exp(x) - 1)/x is finite up to x = 93.2 in float32, exp(x) only to 88.7: the
    value and its first and second derivatives were inf or NaN between (split
    exponentials: exp(x/2) times the rest computed with the other half)."""
    points = np.float32([85.0, 88.5, 90.0, 92.5])
    x = tf.constant(points, tf.float32)
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            value = orders.expm1_ratio(x)
        first = inner.gradient(value, x)
    second = outer.gradient(first, x)
    f = lambda v: mpmath.expm1(v) / v
    for k, got in enumerate((value, first, second)):
        with mpmath.workdps(50):
            want = [float(mpmath.diff(f, mpmath.mpf(float(p)), k)) for p in points]
        np.testing.assert_allclose(got.numpy(), want, rtol=4e-7)


@pytest.mark.slow
def test_a_vanishing_product_with_an_upstream_factor_is_guarded_at_every_order(tf, tails):
    """expm1(-x**2)'' = upstream * (4x**2 - 2) * exp(-x**2): the guard of 0 * inf
    (mul_no_nan) applied to products in one input only, and a derived order's products
    hold its upstream too; the second and third derivatives were NaN from x = 1.9e19 in
    float32 (x**2 inf, exp(-x**2) 0; exact 0)."""
    points = np.float32([0.5, 3.0, 1e19, 1e30, -3e38])
    got = _derivatives(tf, tails.gauss_dip, tf.constant(points), 3)
    f = lambda v: mpmath.expm1(-v**2)
    for k, values in enumerate(got, start=1):
        with mpmath.workdps(50):
            want = [float(mpmath.diff(f, mpmath.mpf(float(p)), k)) for p in points]
        np.testing.assert_allclose(values, want, rtol=1e-5, atol=1e-30)


@pytest.mark.slow
def test_a_sigmoid_difference_with_a_common_factor_is_a_tanh_at_third_order(tf, tails):
    """sigmoid(x)*(1 - sigmoid(x))''' holds ``A*sigmoid(-x)/2 - A*sigmoid(x)/2`` with ``A`` a
    sum: the pair, written with A distributed in one term, was not seen as
    ``A*tanh(x/2)/2`` and cancelled to 0 near 0, leaving the value 4x off at x = 1e-30
    (and 1e-10 in float32)."""
    points = np.float64([1e-30, -1e-10, 0.3, 20.0])
    third = _derivatives(tf, tails.logistic_density, tf.constant(points), 3)[2]
    f = lambda v: _sigmoid(v) * (1 - _sigmoid(v))
    with mpmath.workdps(50):
        want = [float(mpmath.diff(f, mpmath.mpf(float(p)), 3)) for p in points]
    np.testing.assert_allclose(third, want, rtol=1e-12)


@pytest.mark.slow
def test_a_quotient_by_a_sum_meets_the_term_it_grows_with_first(tf, tails):
    """log(1 + x**2)''' = 4x(x**2 - 3)/(1 + x**2)**3 holds x**2 * (...)/(1 + x**2)**2
    products: (1 + x**2)**2 overflows from x = 1.8e19 in float32 and its quotients
    underflow from x = 1e10, where the third derivative is 4e-30 and was 0
    (paired_quotient: x**2/(1 + x**2) first)."""
    points = np.float32([0.5, -3.0, 1e10, -3e12])
    got = _derivatives(tf, tails.log1p_square, tf.constant(points), 3)
    f = lambda v: mpmath.log(1 + v**2)
    for k, values in enumerate(got, start=1):
        with mpmath.workdps(50):
            want = [float(mpmath.diff(f, mpmath.mpf(float(p)), k)) for p in points]
        np.testing.assert_allclose(values, want, rtol=1e-5, err_msg=f"order {k}")


@pytest.mark.slow
def test_a_square_of_a_sum_in_a_denominator_is_divided_by_in_turn(tf, tails):
    """atan(x)**2'' = 2*(1 - 2x*atan(x))/(1 + x**2)**2: (1 + x**2)**2 overflows from x =
    4.3e9 in float32, where the second derivative is -6.3e-30 at 1e10 and was -0
    (paired_quotient: the rest divided by 1 + x**2 twice)."""
    points = np.float32([0.5, -3.0, 1e10, -2e12])
    got = _derivatives(tf, tails.atan_square, tf.constant(points), 2)
    f = lambda v: mpmath.atan(v) ** 2
    for k, values in enumerate(got, start=1):
        with mpmath.workdps(50):
            want = [float(mpmath.diff(f, mpmath.mpf(float(p)), k)) for p in points]
        np.testing.assert_allclose(values, want, rtol=1e-5, err_msg=f"order {k}")


def test_log_erfc_second_derivative_holds_where_the_quotient_rule_cancels(tf, orders):
    """d2/du2 log(erfc(u)) = -2 erfcx_recip'(u) / sqrt(pi) -> -2: the quotient rule's
    2 r**2 / sqrt(pi) - 2 u r (r = 1/erfcx(u)) lost every digit from u = 1e4 in float32
    and was inf or NaN where r overflows (u > 1.9e38)."""
    points = [-3.0, 0.5, 5.0, 1e4, 1e10, 3e38]
    u = tf.constant(points, tf.float32)
    _, second = _derivatives(tf, orders.log_erfc, u, 2)
    with mpmath.workdps(60):
        f = lambda v: mpmath.log(mpmath.erfc(v))
        want = [float(mpmath.diff(f, mpmath.mpf(p), 2)) for p in points[:3]]
    np.testing.assert_allclose(second, want + [-2.0, -2.0, -2.0], rtol=2e-6)


def _scaled_tanh_plain(tf, x, b, k, n):
    t = x * b
    return k * tf.tanh(t) * tf.cast(n, x.dtype), t * t


def _hessian_vector(tf, fn, x, b, v):
    """d/db of <grad_b(sum of both outputs), v>: a Hessian-vector product in b."""
    with tf.GradientTape() as outer:
        outer.watch(b)
        with tf.GradientTape() as inner:
            inner.watch(b)
            value, square = fn(x, b)
            total = tf.reduce_sum(value) + tf.reduce_sum(square)
        g = inner.gradient(total, b)
        product = tf.reduce_sum(g * v)
    return outer.gradient(product, b)


def test_hessians_in_every_mode_match_autodiff_of_the_plain_forward(tf, orders):
    """Multi-output, broadcast batch of unknown size, a non-differentiable and an
    integer input: Hessian-vector products eagerly, in tf.function with None dims, under
    XLA, and in a TF1 graph; forward-over-reverse; batch_jacobian of the gradient."""
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(4, 3))
    k, n = tf.constant(1.5, tf.float64), tf.constant(2, tf.int32)
    x, b = tf.constant(xs), tf.constant([0.5, -1.0, 2.0], tf.float64)
    v = tf.constant([1.0, 0.25, -0.5], tf.float64)

    def ours(x_, b_):
        return orders.scaled_tanh(x_, b_, k, n)

    def plain(x_, b_):
        return _scaled_tanh_plain(tf, x_, b_, k, n)

    want = _hessian_vector(tf, plain, x, b, v).numpy()
    got = {"eager": _hessian_vector(tf, ours, x, b, v).numpy()}
    spec = [tf.TensorSpec([None, 3], tf.float64), tf.TensorSpec([3], tf.float64)]
    hvp = tf.function(lambda x_, b_: _hessian_vector(tf, ours, x_, b_, v),
                      input_signature=spec)
    got["tf.function"] = hvp(x, b).numpy()
    xla = tf.function(lambda x_, b_: _hessian_vector(tf, ours, x_, b_, v), jit_compile=True)
    got["xla"] = xla(x, b).numpy()
    with tf.Graph().as_default():
        gx = tf.compat.v1.placeholder(tf.float64, [None, 3])
        gb = tf.compat.v1.placeholder(tf.float64, [3])
        value, square = orders.scaled_tanh(gx, gb, tf.constant(1.5, tf.float64),
                                           tf.constant(2, tf.int32))
        (g,) = tf.compat.v1.gradients(tf.reduce_sum(value) + tf.reduce_sum(square), [gb])
        (h,) = tf.compat.v1.gradients(tf.reduce_sum(g * v.numpy()), [gb])
        with tf.compat.v1.Session() as session:
            got["tf1 graph"] = session.run(h, {gx: xs, gb: b.numpy()})
    with tf.autodiff.ForwardAccumulator(b, v) as acc:
        with tf.GradientTape() as tape:
            tape.watch(b)
            value, square = ours(x, b)
            total = tf.reduce_sum(value) + tf.reduce_sum(square)
        g = tape.gradient(total, b)
    got["forward-over-reverse"] = acc.jvp(g).numpy()
    for mode, value in got.items():
        np.testing.assert_allclose(value, want, rtol=1e-10, err_msg=mode)
    # the Hessian in x row by row (batch_jacobian of the gradient)
    def rows(fn):
        with tf.GradientTape() as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                value, _ = fn(x, b)
            gx = inner.gradient(value, x)
        return outer.batch_jacobian(gx, x).numpy()

    np.testing.assert_allclose(rows(ours), rows(plain), rtol=1e-10)


def test_each_op_derives_up_to_its_order_and_says_so(orders):
    import inspect

    source = inspect.getsource(orders)
    assert "_softplus_grad_vjp" in source and "_softplus3_grad_grad_vjp" in source
    assert "_first_only_grad_vjp" not in source and "_softplus_grad_grad_vjp" not in source
    assert "Higher orders: derived to order 3" in orders.softplus3.__doc__
    assert "Higher orders" not in orders.first_only.__doc__


def test_fused_complex_and_det_ops_say_why_their_higher_orders_are_autodiff(tmp_path):
    from gradgen.emit import generate

    spec = tmp_path / "notderived.yaml"
    spec.write_text(
        "version: 1\nmodule: notderived\norder: 2\nops:\n"
        "  - name: fused\n    fuse: xla\n    inputs: {x: [null]}\n    output: exp(x)\n"
        "  - name: holo\n    dtype: complex64\n    inputs: {z: [null]}\n    output: exp(z)\n"
        "  - name: volume\n    dtype: float64\n    inputs: {A: [3, 3]}\n    output: det(A)\n"
    )
    text = generate([str(spec)], str(tmp_path), audit=False)["notderived.py"]
    assert "_grad_vjp" not in text
    for why in ("fuse: xla", "a complex op", "det (the cofactor"):
        assert f"Higher orders: TensorFlow's autodiff of this VJP (order 2 not derived: {why}" \
            in " ".join(text.split()), why
    from gradgen.explain import explain_spec

    assert ("higher orders: TensorFlow's autodiff of the VJP (order 2 not derived: fuse: "
            "xla (the VJP is one XLA kernel))") in explain_spec(str(spec), "fused")


def test_each_derived_order_is_audited_and_explained(tmp_path):
    from gradgen.emit import generate
    from gradgen.explain import explain_spec

    spec = tmp_path / "audited.yaml"
    spec.write_text("version: 1\nmodule: audited\nops:\n  - name: softplus\n"
                    "    order: 2\n    inputs: {x: [null]}\n    output: log(1 + exp(x))\n")
    text = " ".join(generate([str(spec)], str(tmp_path))["audited.py"].split())
    assert re.search(r"Accuracy audit of order 2 \(float32, \d+ points\): the gradient is "
                     "finite wherever the exact one is", text)
    shown = explain_spec(str(spec))
    assert "order 2: derived (softplus_grad: 2 partial derivatives" in shown
    assert "accuracy audit of order 2:" in shown


def test_explain_lists_the_limits_filled_at_each_derived_order(tmp_path):
    """acos(x)**2: its first partial is filled with -2 at 1 (singular_limit), so its
    second is the limit of the formula's derivative there, 2/3: explain says so under
    order 2, as it does for order 1's points."""
    from gradgen.explain import explain_spec

    spec = tmp_path / "limits.yaml"
    spec.write_text("version: 1\nmodule: limits\ndtype: float64\nops:\n  - name: acos_sq\n"
                    "    order: 2\n    inputs: {x: [null]}\n    output: acos(x)**2\n")
    shown = explain_spec(str(spec))
    order2 = shown[shown.index("order 2: derived"):]
    assert "d(grad_x)/d(x):" in order2
    assert "at x = 1: 2*upstream/3" in order2 and "at x = -1: oo*upstream" in order2

