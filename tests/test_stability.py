"""The stability suite: gradients at extreme points against a 50-digit reference, in
float16, bfloat16, float32 and float64 (see tests/stability.py for the cases)."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import yaml

from conftest import GENERATED, import_source
from stability import (
    DTYPES,
    LARGEST,
    RTOL,
    SMALLEST_NORMAL,
    SPEC,
    families,
    raw_expressions,
    reference_gradient,
    rounded,
    trace_in_a_graph,
)


@pytest.fixture(scope="module")
def modules(build):
    """The stability spec built once, for every float dtype (``dtype: floating``): each
    op follows its arguments' dtype, with that dtype's guards and forms."""
    spec = yaml.safe_load(SPEC.read_text())
    module = build(yaml.safe_dump(dict(spec, dtype="floating", module="stab_floating"),
                                  sort_keys=False), audit=False)
    return {dtype: module for dtype in DTYPES}


@pytest.fixture(scope="module")
def raw():
    return raw_expressions()


@pytest.fixture(scope="module")
def cases(tf):
    return {f.op: f for f in families(tf)}


def _grads(tf, fn, columns, dtype, order=1):
    """Gradients (order 1) or Hessian diagonals (order 2) at each row of ``columns``."""
    args = [tf.constant(np.array(c, np.float64), dtype=tf.float64) for c in columns]
    args = [tf.cast(a, dtype) for a in args]
    with tf.GradientTape(persistent=True) as outer:
        outer.watch(args)
        with tf.GradientTape() as inner:
            inner.watch(args)
            out = fn(*args)
        first = inner.gradient(out, args)
    if order == 1:
        result = first
    else:
        result = [outer.gradient(g, a) for g, a in zip(first, args)]
    for a, g in zip(args, result):
        assert g is None or g.dtype == a.dtype
    return [
        np.zeros(len(columns[0])) if g is None else g.numpy().astype(np.float64)
        for g in result
    ]


def _check(got, want, dtype, label):
    """``got`` against the exact ``want`` in ``dtype``.

    * ``want`` NaN (no limit, or the reference could not resolve it): an error of the
      suite; a point where the gradient is undefined names gradgen's documented value in
      its family's conventions instead. ``got`` is never NaN.
    * ``want`` infinite: the same infinity.
    * ``want`` finite beyond the dtype's largest finite value: it rounds to an infinity
      of its sign, so ``got`` is that infinity, or a finite value of the same sign that
      is within RTOL of the largest (a computation as accurate as elsewhere, saturated).
    * otherwise within RTOL (absolute differences below the smallest normal number are
      accepted: subnormal results carry no relative precision).
    """
    assert not math.isnan(got), f"{label}: got NaN, exact {want}"
    assert not math.isnan(want), (
        f"{label}: the reference has no value here (got {got!r}); list the documented "
        "value as a convention, or give the reference a form it can evaluate"
    )
    if math.isinf(want):
        assert got == want, f"{label}: got {got!r}, exact {want!r}"
        return
    if abs(want) > LARGEST[dtype]:
        assert math.copysign(1.0, got) == math.copysign(1.0, want) and (
            math.isinf(got) or abs(got) >= LARGEST[dtype] * (1 - RTOL[dtype])
        ), f"{label}: got {got!r}, exact {want!r} overflows {dtype} (largest {LARGEST[dtype]})"
        return
    assert math.isfinite(got), f"{label}: got {got}, exact {want}"
    tolerance = RTOL[dtype] * abs(want) + SMALLEST_NORMAL[dtype]
    assert abs(got - want) <= tolerance, f"{label}: got {got!r}, exact {want!r}"


OPS = [
    "softplus_naive", "sigmoid_naive", "logistic_ratio", "swish", "log1p_naive",
    "expm1_naive", "entropy", "cross_entropy", "log_sigmoid", "log_one_minus_sigmoid",
    "logaddexp", "softmax2", "log_softmax2", "power", "norm", "angle", "sinc",
    "expm1_ratio", "sqrt_relu", "elu", "log_cosh", "cauchy", "asinh_log",
    "inverse_power",
    # logexp and sigmoid families
    "log1mexp_naive", "log1mexp_expm1", "log1mexp_log1p", "log1mexp_negated",
    "logdiffexp", "log_expm1", "softplus_log1p", "log1p_expm1", "exp_log1p",
    "expm1_log1p", "exp_product", "log1m_sigmoid", "log_recip_sigmoid", "odds",
    "log_odds", "sigmoid_logit",
]


def test_every_stability_op_is_checked(raw):
    assert sorted(raw) == sorted(OPS)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_gradient_matches_50_digit_reference(tf, modules, raw, cases, op, dtype):
    family = cases[op]
    expr, symbols = raw[op]
    # a point whose input overflows the dtype (1e20 in float16) is not one of its points
    points = [tuple(rounded(p, dtype)) for p in family.points]
    points = [p for p in points if all(math.isfinite(v) for v in p)]
    columns = list(zip(*points))
    got = _grads(tf, getattr(modules[dtype], op), columns, dtype)
    for i, point in enumerate(points):
        want = family.conventions.get(point) or reference_gradient(expr, symbols, point)
        for k, w in enumerate(want):
            g = got[k][i]
            assert not math.isnan(g), f"{op}{point} d/d{symbols[k]}: NaN"
            if point in family.conventions:
                assert g == w, f"{op}{point}: {g} != {w}"  # the documented convention
                continue
            _check(g, w, dtype, f"{op}{point} d/d{symbols[k]} ({dtype})")


# Second derivatives come from TF's autodiff of the generated gradient function, so at
# points where a TF kernel's own gradient is 0 * inf (pow(x, y - 1) at x = 0) they are
# as TF makes them; those points are left out. Elsewhere they must be finite and, in
# float64, agree with the reference (to 1e-6 relative, or 1e-12 absolute: TF's sigmoid
# and tanh kernels compute y * (1 - y), which loses the tail values' relative digits,
# and a zero entry comes out as rounding noise of the other terms).
SECOND_ORDER_SKIP = {"power": {(0.0, 1.0), (0.0, 2.0), (0.0, 3.5)}}


@pytest.mark.parametrize("op", OPS)
def test_second_order_is_finite_where_exact_is(tf, modules, raw, cases, op):
    family = cases[op]
    expr, symbols = raw[op]
    points = [
        tuple(rounded(p, "float64"))
        for p in family.points
        if tuple(p) not in SECOND_ORDER_SKIP.get(op, ())
    ]
    got = _grads(tf, getattr(modules["float64"], op), list(zip(*points)), "float64", order=2)
    _check_second_order(got, points, family.conventions, expr, symbols, op)


def _check_second_order(got, points, conventions, expr, symbols, op):
    """Hessian diagonals ``got`` (per input, per point) against the reference: never
    NaN, finite where the exact value is, within 1e-6 relative (1e-12 absolute)."""
    for i, point in enumerate(points):
        if point in conventions:
            assert all(not math.isnan(g[i]) for g in got), f"{op}{point}: NaN"
            continue
        want = reference_gradient(expr, symbols, point, order=2)
        for k, w in enumerate(want):
            g = got[k][i]
            assert not math.isnan(g), f"{op}{point} d2/d{symbols[k]}2: NaN"
            if math.isfinite(w) and abs(w) < 1e300:
                assert math.isfinite(g), f"{op}{point} d2/d{symbols[k]}2: {g}, exact {w}"
                assert abs(g - w) <= 1e-6 * abs(w) + 1e-12, f"{op}{point}: {g} vs {w}"


def test_readme_table_is_current(tf):
    """The README's table is what `python tests/stability.py` prints now."""
    from stability import table

    from conftest import ROOT

    module = import_source("generated_stability", GENERATED / "stability.py")
    assert table(tf, module) in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("dtype", DTYPES)
def test_log_cosh_value_is_accurate_near_zero_and_far(tf, modules, dtype):
    """The forward of the log_cosh rewrite: |x| + softplus(-2|x|) - log(2) alone cancels
    near 0 (it was negative there, -6e-8 in float32, and 10x off in float16)."""
    points = [1e-3, 0.01, 0.03, 0.3, 0.99, 1.0, 3.0, 20.0, 100.0, 1e4, -0.5, -50.0]
    x = tf.constant(points, dtype=dtype)
    got = modules[dtype].log_cosh(x).numpy().astype(float)
    mpmath.mp.dps = 60
    for g, xv in zip(got, x.numpy().astype(float)):
        want = float(mpmath.log(mpmath.cosh(mpmath.mpf(xv))))
        assert g >= 0
        if want >= SMALLEST_NORMAL[dtype]:
            assert abs(g - want) <= 2 * RTOL[dtype] * want, (dtype, xv, g, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_op_traces_in_a_graph(tf, modules, raw, dtype):
    """Every op and its gradient trace with unknown sizes (see trace_in_a_graph)."""
    for op in OPS:
        signature = [tf.TensorSpec([None], getattr(tf, dtype))] * len(raw[op][1])
        trace_in_a_graph(tf, getattr(modules[dtype], op), signature)
