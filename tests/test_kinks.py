"""Kinks, steps and ties: TF-matching gradients away from kinks, documented values at them,
and the specific cases of the stability issue's checklist."""

from __future__ import annotations

import re

import numpy as np
import pytest

from conftest import GENERATED, import_source
from tfmodes import second_partials, two_orders


@pytest.fixture(scope="module")
def kinks(tf):
    return import_source("generated_kinks", GENERATED / "kinks.py")


@pytest.fixture(scope="module")
def stab(tf):
    return import_source("generated_stability", GENERATED / "stability.py")


def grads(tf, fn, *values, dtype="float32"):
    args = [tf.constant(v, dtype=dtype) for v in values]
    with tf.GradientTape() as tape:
        for a in args:
            tape.watch(a)
        out = fn(*args)
    return [None if g is None else g.numpy() for g in tape.gradient(out, args)]


PLAIN = {
    "abs_diff": lambda tf: lambda x, y: tf.abs(x - y),
    "signed_square": lambda tf: lambda x: tf.sign(x) * x**2,
    "floor_mix": lambda tf: lambda x, y: tf.floor(x) * y + x,
    "ceiling_mix": lambda tf: lambda x, y: tf.math.ceil(x) * y - x,
    "maximum": lambda tf: lambda x, y: tf.maximum(x, y),
    "minimum3": lambda tf: lambda x, y, z: tf.minimum(tf.minimum(x, y), z),
    "clip01": lambda tf: lambda x: tf.minimum(tf.maximum(x, 0.0), 1.0),
    "step_gate": lambda tf: lambda x, y: tf.cast(x > 0, x.dtype) * y,
    "relu": lambda tf: lambda x: tf.nn.relu(x),
    "huber": lambda tf: lambda r: tf.where(tf.abs(r) <= 1, r**2 / 2, tf.abs(r) - 0.5),
}
ARITY = {"abs_diff": 2, "signed_square": 1, "floor_mix": 2, "ceiling_mix": 2, "maximum": 2,
         "minimum3": 3, "clip01": 1, "step_gate": 2, "relu": 1, "huber": 1}


@pytest.mark.parametrize("name", sorted(PLAIN))
def test_away_from_kinks_matches_tf(tf, kinks, name):
    rng = np.random.default_rng(0)
    # random points, nudged off integers, ties and the kink points 0, 1, -1
    values = [rng.uniform(-3, 3, 50).astype(np.float32) + 0.0123 * (i + 1)
              for i in range(ARITY[name])]
    got = grads(tf, getattr(kinks, name), *values)
    want = grads(tf, PLAIN[name](tf), *values)
    for g, w in zip(got, want):
        w = np.zeros_like(g) if w is None else w
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(
    "name, point, expected",
    [
        ("abs_diff", (1.5, 1.5), (0.0, 0.0)),  # sign(0) = 0, as TF
        ("signed_square", (0.0,), (0.0,)),
        ("floor_mix", (2.0, 5.0), (1.0, 2.0)),  # floor' = 0 at the jump too
        ("ceiling_mix", (2.0, 5.0), (-1.0, 2.0)),
        ("maximum", (0.7, 0.7), (0.5, 0.5)),  # a tie: equal split, weights sum to 1
        ("maximum", (0.8, 0.7), (1.0, 0.0)),
        ("minimum3", (0.2, 0.2, 0.2), (1 / 3, 1 / 3, 1 / 3)),
        ("minimum3", (0.2, 0.2, 0.9), (0.5, 0.5, 0.0)),
        ("clip01", (0.0,), (0.5,)),
        ("clip01", (1.0,), (0.5,)),
        ("clip01", (0.5,), (1.0,)),
        ("step_gate", (0.0, 3.0), (0.0, 0.5)),  # Heaviside(0) = 1/2, derivative 0
        ("step_gate", (-1.0, 3.0), (0.0, 0.0)),
        ("relu", (0.0,), (0.0,)),  # the Piecewise picks its branch at the boundary
        ("huber", (1.0,), (1.0,)),
        ("huber", (-2.0,), (-1.0,)),
    ],
)
def test_documented_values_at_kinks(tf, kinks, name, point, expected):
    got = grads(tf, getattr(kinks, name), *[[v] for v in point])
    np.testing.assert_allclose([g[0] for g in got], expected, rtol=1e-6)


def test_no_unprintable_functions_in_generated_code():
    for name in ("kinks.py", "stability.py", "seeds.py"):
        text = (GENERATED / name).read_text()
        code = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#"))
        body = code.split('"""')  # docstrings are text; look at code only
        code_only = "".join(body[::2])
        for pattern in (r"Heaviside", r"DiracDelta", r"Derivative", r"\bre\(", r"\bim\(",
                        r"tf\.gradients"):
            assert not re.search(pattern, code_only), (name, pattern)


# -------------------------------------------- the stability issue's checklist, by value


def test_softplus_float16_saturates_to_exactly_one(tf, build):
    module = build(
        "version: 1\nmodule: sp16\ndtype: float16\nops:\n  - name: soft\n"
        "    inputs: {x: [null]}\n    output: log(1 + exp(x))\n"
    )
    (g,) = grads(tf, module.soft, [12.0, 20.0], dtype="float16")
    assert g.dtype == np.float16
    np.testing.assert_array_equal(g, np.array([1.0, 1.0], np.float16))


def test_swish_is_finite_at_plus_minus_100(tf, stab):
    (g,) = grads(tf, stab.swish, [-100.0, 100.0])
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(g, [0.0, 1.0], atol=1e-30)
    (naive,) = grads(tf, lambda x: x / (1 + tf.exp(-x)), [-100.0, 100.0])
    assert not np.all(np.isfinite(naive))  # what TF autodiff gives


def test_norm_at_origin_and_at_3_4(tf, stab):
    gx, gy = grads(tf, stab.norm, [0.0, 3.0], [0.0, 4.0])
    np.testing.assert_allclose(gx, [0.0, 0.6], rtol=1e-6)
    np.testing.assert_allclose(gy, [0.0, 0.8], rtol=1e-6)


def first_and_second(tf, fn, values):
    """The first and second derivatives of an elementwise ``fn`` at ``values``."""
    return two_orders(tf, fn, tf.constant(values))[1:]


def test_sqrt_piecewise_first_and_second_order(tf, stab):
    g, h = first_and_second(tf, stab.sqrt_relu, [-1.0, 0.0, 4.0])
    np.testing.assert_allclose(g.numpy(), [0.0, 0.0, 0.25])
    assert np.all(np.isfinite(h.numpy()))
    np.testing.assert_allclose(h.numpy(), [0.0, 0.0, -1 / 32])


def test_piecewise_with_integer_constants_gives_a_float_gradient(tf, kinks):
    x = tf.constant([-1.0, 2.0])
    (g,) = grads(tf, kinks.relu, [-1.0, 2.0])
    assert g.dtype == np.float32
    np.testing.assert_array_equal(g, [0.0, 1.0])
    assert kinks.relu(x).dtype == tf.float32


def test_a_branch_after_an_equality_is_guarded_where_it_is_finite(tf, build):
    """where(x == 1, 1, where(x > 0, log(x)/(x - 1), 0)): where not selected, the branch is
    evaluated at x = 2 (it was x = 1, its 0/0, which the outer where masked); first and
    second order are finite and right."""
    module = build(
        "version: 1\nmodule: eqbranch\nops:\n  - name: f\n    inputs: {x: [null]}\n"
        "    output: where(x == 1, 1, where(x > 0, log(x) / (x - 1), 0))\n",
        audit=False,
    )
    g, h = first_and_second(tf, module.f, [-2.0, 0.0, 0.5, 1.0, 3.0])
    assert np.all(np.isfinite(g.numpy())) and np.all(np.isfinite(h.numpy()))
    # d/dx log(x)/(x-1) = (1/x - log(x)/(x-1)) / (x-1); at 0.5: (2 + 2 log 0.5) / -0.5;
    # at 1, where the user filled the limit 1, the derivative's limit -1/2 (was 0)
    want = [0.0, 0.0, (2 - 2 * np.log(2)) / -0.5, -0.5, (1 / 3 - np.log(3) / 2) / 2]
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-5, atol=1e-7)


def test_a_singular_point_gets_the_limit_not_a_convention(tf, build):
    """Where a sqrt-type factor of one input is singular, the gradient is the one-sided
    limit toward where the forward is real (it was the subgradient 0 everywhere):
    acos(x)**2 -> -2 at 1, -inf at -1; sqrt: +inf at 0; sign(x)*sqrt(|x|): +inf at 0;
    y*sqrt(x): y*inf, and 0 where y = 0; sqrt(1 - x**2): +-inf at -+1. sqrt(|x|) keeps
    0: its sides differ."""
    module = build(
        "version: 1\nmodule: limits\ndtype: [float32, float64]\nops:\n"
        "  - name: acos2\n    inputs: {x: [null]}\n    output: acos(x)**2\n"
        "  - name: signed_root\n    inputs: {x: [null]}\n    output: sign(x)*sqrt(Abs(x))\n"
        "  - name: scaled_root\n    inputs: {x: [null], y: [null]}\n    output: y*sqrt(x)\n"
        "  - name: abs_root\n    inputs: {x: [null]}\n    output: sqrt(Abs(x))\n"
        "  - name: semicircle\n    inputs: {x: [null]}\n    output: sqrt(1 - x**2)\n",
        audit=False,
    )
    inf = np.inf
    for dtype in ("float32", "float64"):
        # -x*sqrt(s)/((1 - x)*(1 + x)) was 0/0 = NaN at +-1: -x/sqrt(s), the limits +-inf
        (g,) = grads(tf, module.semicircle, [-1.0, 0.6, 1.0], dtype=dtype)
        np.testing.assert_allclose(g, [inf, -0.75, -inf], rtol=1e-6)
        (g,) = grads(tf, module.acos2, [-1.0, 0.0, 1.0], dtype=dtype)
        np.testing.assert_allclose(g, [-inf, -np.pi, -2.0], rtol=1e-6)
        (g,) = grads(tf, module.signed_root, [0.0, 0.25], dtype=dtype)
        np.testing.assert_array_equal(g, [inf, 1.0])
        gx, gy = grads(tf, module.scaled_root, [0.0, 0.0, 0.0, 4.0], [0.0, -1.0, 2.0, 1.0],
                       dtype=dtype)
        np.testing.assert_array_equal(gx, [0.0, -inf, inf, 0.25])
        (g,) = grads(tf, module.abs_root, [0.0], dtype=dtype)
        np.testing.assert_array_equal(g, [0.0])


def test_a_masked_log_has_finite_mixed_second_partials(tf, build):
    """d/da d/dx and d2/dx2 of where(x >= 0, a*log(x), 0) are 0 where x < 0 (the masked
    branch was evaluated at x = 0, where a*log(x) and its derivatives are infinite: NaN
    in float32 and float64), and exact where x > 0."""
    module = build(
        "version: 1\nmodule: maskedlog\ndtype: [float32, float64]\nops:\n  - name: f\n"
        "    inputs: {x: [null], a: [null]}\n    output: where(x >= 0, a*log(x), 0)\n",
        audit=False,
    )
    for dtype in ("float32", "float64"):
        x = tf.constant([-2.0, -1e-30, 0.5, 3.0], dtype)
        a = tf.constant([1.5, 2.0, -1.0, 2.0], dtype)
        (dxx, dxa), (dax, _) = second_partials(tf, module.f, x, a)
        xs, as_ = x.numpy(), a.numpy()
        inside = xs > 0
        xs = np.where(inside, xs, 1.0)  # (the reference's masked values: no 1/0)
        np.testing.assert_allclose(dxa, np.where(inside, 1 / xs, 0), rtol=1e-6)
        np.testing.assert_allclose(dax, np.where(inside, 1 / xs, 0), rtol=1e-6)
        np.testing.assert_allclose(dxx, np.where(inside, -as_ / xs**2, 0), rtol=1e-6)
