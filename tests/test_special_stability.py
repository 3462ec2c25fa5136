"""End-to-end checks of examples/special.yaml: error-function complements, log(erfc),
scaled norms, data powers, determinants at singular matrices and filled-in removable
singularities, at extreme points in float16, bfloat16, float32 and float64 against the
50-digit reference of tests/stability.py (same tolerances)."""

from __future__ import annotations

import math
from pathlib import Path

import mpmath
import numpy as np
import pytest
import sympy
import yaml

from stability import (
    DTYPES,
    LARGEST,
    RTOL,
    SMALLEST_NORMAL,
    raw_expressions,
    reference_gradient,
    rounded,
    trace_in_a_graph,
)
from test_stability import _check, _check_second_order, _grads

SPEC = Path(__file__).resolve().parent.parent / "examples" / "special.yaml"

ERF_POINTS = [
    -1e4,
    -30.0,
    -5.0,
    -1.0,
    -1e-3,
    0.0,
    1e-30,
    1e-3,
    1.0,
    3.0,
    5.0,
    9.0,
    10.5,
    20.0,
    30.0,
    1e4,
]
LOG_ERFC_POINTS = [
    -1e4,
    -30.0,
    -5.0,
    -1.0,
    0.0,
    1e-30,
    1.0,
    3.0,
    5.0,
    9.0,
    9.9,
    10.0,
    10.5,
    20.0,
    26.0,
    27.0,
    30.0,
    100.0,
    1e4,
    1e10,
    1e30,
]
POWER_POINTS = [
    (0.0, 2.0),
    (0.0, 1.0),
    (0.0, 3.5),
    (0.0, 0.0),
    (0.0, 0.5),
    (2.0, 0.0),
    (0.5, 10.0),
    (3.0, 0.5),
    (1e-3, 2.0),
    (10.0, -2.0),
    (1e-30, 0.5),
    (7.0, 1.0),
]
# At base 0: 0**p = 0 for p > 0, so d/dp = 0 (the formula x**p * log(x) is 0 * -inf);
# d/dx = p * 0**(p - 1); x**0 = 1 for every x, so d/dx = 0 at p = 0 (0 * inf as written),
# and d/dp there is log(0) = -inf (0**p jumps from 1 to 0).
POWER_CONVENTIONS = {
    (0.0, 2.0): (0.0, 0.0),
    (0.0, 1.0): (1.0, 0.0),
    (0.0, 3.5): (0.0, 0.0),
    (0.0, 0.0): (0.0, -math.inf),
    (0.0, 0.5): (math.inf, 0.0),
}
NORM_CONVENTIONS = {(0.0, 0.0): (0.0, 0.0), (0.0, 0.0, 0.0): (0.0, 0.0, 0.0)}
FILL_POINTS = [0.0, 1e-20, -1e-20, 1e-3, -1e-3, 0.1, 1.0, -3.0, 10.0]

# op: (points, reference expression (None: as written), conventions)
CASES = {
    "one_minus_erf": (ERF_POINTS, None, {}),
    "erf_minus_one": (ERF_POINTS, None, {}),
    "one_minus_erfc": (ERF_POINTS, None, {}),
    "erfc_neg_minus_one": (ERF_POINTS, None, {}),
    "erfc_neg": (ERF_POINTS, None, {}),
    "log_erfc": (LOG_ERFC_POINTS, None, {}),
    # 1 - erf(u) is erfc(u): mpmath resolves erfc(1e4) = 1e-43429450 directly, while
    # 1 - erf(1e4) would need 43 million digits (the reference would have no value)
    "log_one_minus_erf": (LOG_ERFC_POINTS, "log(erfc(u))", {}),
    "hypot2": (
        [
            (0.0, 0.0),
            (1e-30, 0.0),
            (1e-20, 0.0),
            (0.0, -1e-20),
            (3.0, 4.0),
            (1e30, 1e30),
            (-1e30, 1e-30),
            (1e19, 1e19),
            (1e-20, 1e-20),
            (100.0, -100.0),
            (1e-3, 2e-3),
        ],
        None,
        NORM_CONVENTIONS,
    ),
    "hypot3": (
        [
            (0.0, 0.0, 0.0),
            (1e-30, 0.0, 0.0),
            (1.0, 2.0, 2.0),
            (1e30, -1e30, 1e30),
            (1e-20, 1e-20, -1e-20),
            (0.0, 3.0, 4.0),
        ],
        None,
        NORM_CONVENTIONS,
    ),
    "data_power": (POWER_POINTS, None, POWER_CONVENTIONS),
    "exp_log_power": (POWER_POINTS, None, POWER_CONVENTIONS),
    # the smooth function that the fill-in completes: its derivatives at 0 are limits
    "sinc_filled": (FILL_POINTS, "sin(x)/x", {}),
    "sinc_where": (FILL_POINTS, "sin(x)/x", {}),
    "expm1_ratio_filled": (FILL_POINTS + [-100.0], "(exp(x) - 1)/x", {}),
    "sinc_far_branch": ([0.0, 1e-20, 1e-3, 1.0, 4.9, 5.5, 10.0, -3.0], None, {}),
}
ELEMENTWISE = sorted(CASES)


@pytest.fixture(scope="module")
def modules(build):
    spec = yaml.safe_load(SPEC.read_text())
    # TensorFlow has no half-precision det kernel: the det ops are refused in those
    # dtypes (tests/test_matrix.py), and checked here in float32 and float64
    half = [op for op in spec["ops"] if op["name"] not in ("det3", "det_batch", "det_any")]
    return {
        dtype: build(
            yaml.safe_dump(
                dict(spec, dtype=dtype, module=f"special_{dtype}",
                     ops=half if dtype in ("float16", "bfloat16") else spec["ops"]),
                sort_keys=False,
            ),
            audit=False,
        )
        for dtype in DTYPES
    }


@pytest.fixture(scope="module")
def raw():
    """{op: (expression as written, input symbols)}, parsed by SymPy (not gradgen)."""
    return raw_expressions(SPEC)


def _reference(raw, op):
    expr, symbols = raw[op]
    smooth = CASES[op][1]
    if smooth is not None:
        expr = sympy.sympify(smooth, locals={s.name: s for s in symbols})
    return expr, symbols


def _points(op, dtype):
    out = []
    for p in CASES[op][0]:
        p = tuple(rounded(p if isinstance(p, tuple) else (p,), dtype))
        if all(math.isfinite(v) for v in p) and p not in out:
            out.append(p)
    return out


def test_every_special_op_is_checked(raw):
    assert sorted(raw) == sorted(ELEMENTWISE + ["det3", "det_batch", "det_any"])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ELEMENTWISE)
def test_gradient_matches_50_digit_reference(tf, modules, raw, op, dtype):
    expr, symbols = _reference(raw, op)
    conventions = CASES[op][2]
    points = _points(op, dtype)
    got = _grads(tf, getattr(modules[dtype], op), list(zip(*points)), dtype)
    for i, point in enumerate(points):
        want = conventions.get(point) or reference_gradient(expr, symbols, point)
        for k, w in enumerate(want):
            g = got[k][i]
            label = f"{op}{point} d/d{symbols[k]} ({dtype})"
            assert not math.isnan(g), f"{label}: NaN"
            if point in conventions:
                assert g == w, f"{label}: {g} != {w}"
                continue
            _check(g, w, dtype, label)


# Base-0 powers: the second derivative through TF's pow kernel is 0 * inf there (as for
# tests/test_stability.py's `power`); elsewhere second derivatives are finite and, in
# float64, match the reference.
SECOND_ORDER_SKIP = {
    "data_power": {p for p in POWER_POINTS if p[0] == 0.0},
    "exp_log_power": {p for p in POWER_POINTS if p[0] == 0.0},
}


@pytest.mark.parametrize("op", ELEMENTWISE)
def test_second_order_matches_reference_float64(tf, modules, raw, op):
    expr, symbols = _reference(raw, op)
    conventions = CASES[op][2]
    points = [
        p for p in _points(op, "float64") if p not in SECOND_ORDER_SKIP.get(op, ())
    ]
    got = _grads(
        tf, getattr(modules["float64"], op), list(zip(*points)), "float64", order=2
    )
    _check_second_order(got, points, conventions, expr, symbols, op)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    "op,want",
    [
        ("expm1_ratio_filled", (0.5, 1 / 3)),
        ("sinc_filled", (0.0, -1 / 3)),
        ("sinc_where", (0.0, -1 / 3)),
    ],
)
def test_filled_singularity_derivatives_at_zero(tf, modules, op, want, dtype):
    """The derivatives of the smooth function at the filled-in point, not the constant
    branch's 0: expm1(x)/x has derivative 1/2 and second derivative 1/3 at 0."""
    x = [0.0, 1e-30, -1e-30]
    first = _grads(tf, getattr(modules[dtype], op), [x], dtype)[0]
    second = _grads(tf, getattr(modules[dtype], op), [x], dtype, order=2)[0]
    tol = 1e-6 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(first, want[0], atol=tol)
    np.testing.assert_allclose(second, want[1], rtol=10 * tol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_values_are_accurate(tf, modules, dtype):
    """The rewritten forwards themselves: log_erfc beyond erfc's underflow, erfc(-u) for
    u < -4, erf where TensorFlow's float64 kernel is NaN, and hypot beyond the squares'
    overflow and underflow."""
    mpmath.mp.dps = 60
    cases = [
        (
            "log_erfc",
            [[-5.0, 0.0, 1.0, 9.0, 10.5, 20.0, 100.0, 200.0]],
            lambda u: mpmath.log(mpmath.erfc(u)),
        ),
        ("one_minus_erf", [[-3.0, 0.5, 3.0, 5.0, 9.0]], lambda u: mpmath.erfc(u)),
        ("erfc_neg", [[-9.0, -5.0, -3.0, 0.5, 3.0]], lambda u: mpmath.erfc(-u)),
        # (1e200 and -1e300: TensorFlow's float64 erf is NaN from |u| = 1e155)
        ("one_minus_erfc", [[1e-30, 1e-8, -1e-3, 0.5, 1e200, -1e300]],
         lambda u: mpmath.erf(u)),
        (
            "hypot2",
            [[1e-30, 3e30, 0.0, 3.0], [1e-30, 4e30, 0.0, 4.0]],
            lambda x, y: mpmath.sqrt(x * x + y * y),
        ),
    ]
    for op, columns, exact in cases:
        args = [tf.cast(tf.constant(c, tf.float64), dtype) for c in columns]
        got = getattr(modules[dtype], op)(*args).numpy().astype(np.float64)
        for i, value in enumerate(got):
            point = [float(a.numpy().astype(np.float64)[i]) for a in args]
            want = float(exact(*(mpmath.mpf(v) for v in point)))
            if not math.isfinite(sum(point)) or abs(want) > LARGEST[dtype]:
                continue
            assert math.isfinite(value), (op, dtype, point, value)
            tol = 2 * RTOL[dtype] * abs(want) + SMALLEST_NORMAL[dtype]
            assert abs(value - want) <= tol, (op, dtype, point, value, want)


# ------------------------------------------------------------------ determinants


def _cofactor(a):
    """The cofactor matrix det(a) * inverse(a)^T from the minors, at 50 digits."""
    a = np.asarray(a)
    out = np.zeros(a.shape, dtype=a.dtype)
    n = a.shape[-1]
    for index in np.ndindex(*a.shape[:-2]):
        m = mpmath.matrix(a[index].tolist())
        for i in range(n):
            for j in range(n):
                rows = [r for r in range(n) if r != i]
                cols = [c for c in range(n) if c != j]
                minor = mpmath.matrix([[m[r, c] for c in cols] for r in rows])
                out[index + (i, j)] = (-1) ** (i + j) * (
                    mpmath.det(minor) if n > 1 else 1
                )
    return out


SINGULAR3 = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])  # rank 2
RANK1 = np.outer([1.0, -2.0, 0.5], [3.0, 1.0, -1.0])
BATCH3 = np.stack(
    [
        SINGULAR3,
        RANK1,
        np.zeros((3, 3)),
        np.eye(3),
        np.array([[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]]),
    ]
)


def _det_grad(tf, fn, a, dtype, upstream=None):
    x = tf.constant(a, dtype=dtype)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
    g = tape.gradient(y, x, output_gradients=upstream)
    return y.numpy(), g.numpy().astype(np.float64)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_det_gradient_at_singular_matrix_is_the_cofactor(tf, modules, dtype):
    value, grad = _det_grad(tf, modules[dtype].det3, SINGULAR3, dtype)
    assert abs(float(value)) <= 1e-5
    np.testing.assert_allclose(grad, _cofactor(SINGULAR3), rtol=RTOL[dtype], atol=1e-5)
    assert np.abs(grad).max() > 1  # the adjugate of a rank-2 matrix is not 0


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", ["det_batch", "det_any"])
def test_det_gradient_for_rank_deficient_batch(tf, modules, dtype, op):
    upstream = tf.constant([1.0, -2.0, 0.5, 3.0, 1.5], dtype=dtype)
    _, grad = _det_grad(tf, getattr(modules[dtype], op), BATCH3, dtype, upstream)
    want = _cofactor(BATCH3) * upstream.numpy().astype(np.float64)[:, None, None]
    np.testing.assert_allclose(grad, want, rtol=10 * RTOL[dtype], atol=1e-4)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_det_gradient_of_unknown_size_uses_no_inverse_at_singular(tf, modules, dtype):
    """4x4 matrices of ranks 4, 3, 2 and 0 in one batch, through tf.function with None
    dims: the adjugate (0 for rank <= n - 2)."""
    rng = np.random.default_rng(3)
    b = rng.normal(size=(4, 4))
    rank3 = b @ np.diag([1.0, 2.0, 0.5, 0.0]) @ rng.normal(size=(4, 4))
    rank2 = b @ np.diag([1.0, 2.0, 0.0, 0.0]) @ b.T
    batch = np.stack([b, rank3, rank2, np.zeros((4, 4))])
    fn = tf.function(
        modules[dtype].det_any,
        input_signature=[tf.TensorSpec([None, None, None], dtype)],
    )
    _, grad = _det_grad(tf, fn, batch, dtype)
    want = _cofactor(batch)
    scale = np.abs(want).max(axis=(-2, -1), keepdims=True) + 1.0
    tol = {"float32": 2e-4, "float64": 1e-10}[dtype]
    assert np.all(np.abs(grad - want) <= tol * scale), (grad, want)
    assert np.abs(want[1]).max() > 1e-2  # rank n - 1: a nonzero adjugate


@pytest.mark.parametrize("op", ["det3", "det_batch", "det_any"])
def test_det_second_order_is_finite_at_singular(tf, modules, op):
    """The Hessian-vector product of det (through the generated gradient function) at
    singular matrices: finite, and for the polynomial 3x3 path equal to the numerical
    derivative of the cofactor."""
    a = BATCH3 if op != "det3" else SINGULAR3
    x = tf.constant(a, tf.float64)
    direction = tf.constant(np.random.default_rng(5).normal(size=a.shape))
    fn = getattr(modules["float64"], op)

    def first(m):
        with tf.GradientTape() as tape:
            tape.watch(m)
            y = tf.reduce_sum(fn(m))
        return tape.gradient(y, m)

    with tf.GradientTape() as tape:
        tape.watch(x)
        g = first(x)
        inner = tf.reduce_sum(g * direction)
    hv = tape.gradient(inner, x).numpy()
    assert np.all(np.isfinite(hv)), hv
    if op != "det_any":
        # <hv, D> is the second directional derivative d/dt <cof(A + tD), D> at t = 0
        h = 1e-6
        d = direction.numpy()
        numeric = (_cofactor(a + h * d) - _cofactor(a - h * d)) / (2 * h)
        want = float(np.sum(numeric * d))
        got = float(np.sum(hv * d))
        assert abs(got - want) <= 1e-6 * (1 + abs(want)), (got, want)


def test_det_gradient_complex_conjugates(tf, build):
    """complex det: the gradient is upstream * conj(cofactor(A)) (TensorFlow's convention),
    also for a singular A."""
    spec = {
        "version": 1,
        "module": "special_complex",
        "dtype": "complex128",
        "ops": [
            {"name": "det2", "inputs": {"A": [None, 2, 2]}, "output": "det(A)"},
            {"name": "det4", "inputs": {"A": [None, 4, 4]}, "output": "det(A)"},
        ],
    }
    module = build(yaml.safe_dump(spec, sort_keys=False))
    rng = np.random.default_rng(9)
    for op, n in (("det2", 2), ("det4", 4)):
        z = rng.normal(size=(n, n)) + 1j * rng.normal(size=(n, n))
        singular = z.copy()
        singular[-1] = (1 - 2j) * singular[0]  # rank n - 1
        a = np.stack([z, singular])
        x = tf.constant(a)
        upstream = tf.constant([1.0 + 0.5j, -0.3 + 2j])
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = getattr(module, op)(x)
        got = tape.gradient(y, x, output_gradients=upstream).numpy()
        want = upstream.numpy()[:, None, None] * np.conj(_cofactor(a))
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def test_readme_table_is_current(tf):
    """The README's table for this spec is what `python tests/stability.py` prints."""
    from conftest import GENERATED, ROOT, import_source
    from stability import special_table

    module = import_source("generated_special", GENERATED / "special.py")
    assert special_table(tf, module) in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_op_traces_in_a_graph(tf, modules, raw, dtype):
    """Every op and its gradient trace with unknown sizes (see trace_in_a_graph)."""
    for op in ELEMENTWISE:
        signature = [tf.TensorSpec([None], getattr(tf, dtype))] * len(raw[op][1])
        trace_in_a_graph(tf, getattr(modules[dtype], op), signature)
