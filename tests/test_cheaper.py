"""Cheaper forms whose extra error is bounded in the op's dtype (gradgen.stability.cheaper).

The table says where ``c + w*sigmoid(-u)`` becomes ``c + w*(1 - sigmoid(u))`` and where
it is left alone; the end-to-end test measures swish's generated gradient against a
50-digit reference on a dense grid, in every float dtype, and checks the bound the
rule claims.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import sympy

from gradgen.functions import mul_no_nan, sigmoid
from gradgen.stability.cheaper import MAX_EXTRA_EPS, absorbed_complements

x = sympy.Symbol("x", real=True)
y = sympy.Symbol("y", real=True)
s, sm = sigmoid(x), sigmoid(-x)
sqrt2 = sympy.sqrt(2)

ABSORBED = [
    # swish's gradient, and swish with beta: the complement is added to 1 with the sign
    # of 1 where it is inaccurate (x > 0), and x * min(eps, exp(-x)) peaks at 15.9 eps
    # in float32 (36 eps in float64: left alone)
    (s * (x * sm + 1), {"float32", "float16", "bfloat16"}),
    (sigmoid(2 * x) * (2 * x * sigmoid(-2 * x) + 1), {"float32", "float16", "bfloat16"}),
    (x + s * (x * sm + 1), {"float32", "float16", "bfloat16"}),
    # w / c smaller: the bound is smaller (x/4 peaks at 4 eps: float64 too)
    (s * (x * sm / 4 + 1), {"float32", "float16", "bfloat16", "float64"}),
    # a w that can overflow, guarded by vanishing_product: the guard is kept
    (sigmoid(2 * x) * (mul_no_nan(2 * x, sigmoid(-2 * x)) + 1),
     {"float32", "float16", "bfloat16"}),
    (s * (mul_no_nan(2 * x, sm) + 1), {"float16", "bfloat16"}),  # 31.8 eps in float32
    # irrational coefficients (the 50-digit check crashed on sqrt(2): "cannot create
    # mpf from sqrt(2)")
    (sigmoid(sqrt2 * x) * (sqrt2 * x * sigmoid(-sqrt2 * x) + 1),
     {"float32", "float16", "bfloat16"}),
    (sigmoid(x / sqrt2) * (x * sigmoid(-x / sqrt2) / sqrt2 + 1),
     {"float32", "float16", "bfloat16"}),
    # a quadratic w: max of u**2/64 on (0, 15.9] is 4 (float32); u + 3 reaches 18.9 at
    # u = 15.9 in float32, 9.9 at 6.9 in float16 (the bound is checked at the ends and
    # where the derivative is 0, not on a grid)
    (s * (x**2 * sm / 64 + 1), {"float32", "float16", "bfloat16"}),
    (s * ((x + 3) * sm + 1), {"float16", "bfloat16"}),
    # u not linear: left alone (u > 0 only in a window around x = 100 that a grid of
    # points missed, and the bound there is 100 eps)
    (sigmoid(15 - 1000 * (x - 100) ** 2) * (1 + x * sigmoid(1000 * (x - 100) ** 2 - 15)),
     set()),
    # a faster-growing w: x**3 * min(eps, exp(-x)) peaks at 4000 eps in float32
    (s * (x**3 * sm + 1), set()),
    # where the complement is inaccurate (x > 0) the term cancels against c
    (s * (x * sm - 1), set()),
    (s * (1 - x * sm), set()),
    # w changes sign where u > 0 (w = x - 3 at x = 3)
    (s * ((x - 3) * sm + 1), set()),
    # sigmoid(x) is not computed anyway: the complement would not save a sigmoid
    (x * sm + 1, set()),
    # w is not a polynomial, or a constant (2 + sigmoid(-x) is not a sum c + w*(...)
    # that this bound covers), or there are two inputs
    (s * (sympy.sin(x) * sm + 1), set()),
    (s * (2 * sm + 1), set()),
    (sigmoid(x + y) * ((x + y) * sigmoid(-x - y) + 1), set()),
]

DTYPES = ["float16", "bfloat16", "float32", "float64"]


@pytest.mark.parametrize("expr, applies_in", ABSORBED,
                         ids=lambda v: str(sorted(v)) if isinstance(v, set) else str(v))
@pytest.mark.parametrize("dtype", DTYPES)
def test_absorbed_complements(expr, applies_in, dtype):
    out, used = absorbed_complements(expr, dtype)
    if dtype in applies_in:
        assert used == ("absorbed_complement",)
        assert not out.has(sm) and out.has(mul_no_nan) == expr.has(mul_no_nan)
        plain = lambda e: e.replace(mul_no_nan, lambda a, b: a * b)  # noqa: E731
        assert sympy.simplify((plain(out) - plain(expr)).rewrite(sympy.exp)) == 0
    else:
        assert (out, used) == (expr, ())


def test_an_irrational_coefficient_builds(tmp_path):
    """x * sigmoid(sqrt(2) * x) was a traceback (exit 123) from the bound's check."""
    from gradgen.emit import generate

    path = tmp_path / "s.yaml"
    path.write_text(SWISH_SPEC.format(dtype="float32").replace(
        "x * sigmoid(x)", "x * sigmoid(sqrt(2) * x)"))
    text = generate([str(path)], str(tmp_path))["cheap_float32.py"]
    assert "absorbed_complement" in text
    # sqrt(2) * x overflows where sigmoid(-sqrt(2) * x) is 0: the guard stays
    assert "tf.math.multiply_no_nan(t, 1.0 - sigmoid_t)" in text, text


SWISH_SPEC = """
version: 1
module: cheap_{dtype}
dtype: {dtype}
ops:
  - name: swish
    inputs: {{x: [null]}}
    output: x * sigmoid(x)
  - name: swish2
    doc: swish with beta = 2, whose 2x can overflow (vanishing_product guards it)
    inputs: {{x: [null]}}
    output: x * sigmoid(2 * x)
"""

EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7, "float32": 2.0**-23, "float64": 2.0**-52}


def _grid(dtype):
    top = {"float16": 11.0, "bfloat16": 80.0, "float32": 88.0, "float64": 700.0}[dtype]
    v = np.concatenate([np.linspace(-8, 8, 2001), np.geomspace(1e-3, top, 3000)])
    return np.concatenate([v, -v[-3000:]])


@pytest.mark.parametrize("beta", [1, 2])
@pytest.mark.parametrize("dtype", DTYPES)
def test_swish_gradient_within_the_rule_bound_of_a_50_digit_reference(tf, build, dtype,
                                                                      beta):
    """The generated gradient's relative error, away from swish's minimum at
    x = -1.2785 / beta (where any form loses digits to the condition number), stays
    within the stable form's error plus the bound: (MAX_EXTRA_EPS + 4) eps; and it is
    finite up to the dtype's largest number (beta = 2: 2x overflows)."""
    module = build(SWISH_SPEC.format(dtype=dtype), audit=False)
    src = open(module.__file__).read()
    assert ("(1.0 - sigmoid_x)" in src) == (dtype != "float64"), src
    top = float(tf.as_dtype(dtype).max)
    # (not -top with beta = 2: there sigmoid(2x) * (2x + 1) is 0 * -inf, the nested
    # product that vanishing_product leaves alone: a known failure, NaN where it is 0)
    points = np.concatenate([_grid(dtype) / beta, [-top / beta, -top / 3, top / 3, top]])
    xs = tf.cast(tf.constant(points), dtype)
    with tf.GradientTape() as tape:
        tape.watch(xs)
        out = (module.swish if beta == 1 else module.swish2)(xs)
    got = tape.gradient(out, xs).numpy().astype(np.float64)
    at = xs.numpy().astype(np.float64)
    mpmath.mp.dps = 50

    def exact(v):
        v = mpmath.mpf(v)
        sv = 1 / (1 + mpmath.exp(-beta * v))
        return float(sv * (1 + beta * v * (1 - sv)))

    want = np.array([exact(v) for v in at])
    keep = (np.abs(at + 1.2785 / beta) > 0.1 / beta)
    keep &= np.abs(want) > np.finfo(np.float32).tiny * 1e4
    keep &= np.abs(want) > {"float16": 1e-4, "bfloat16": 1e-30}.get(dtype, 1e-300)
    rel = np.abs(got[keep] - want[keep]) / np.abs(want[keep])
    assert np.isfinite(got).all()
    assert rel.max() <= (MAX_EXTRA_EPS + 4) * EPS[dtype], (rel.max() / EPS[dtype],
                                                          at[keep][np.argmax(rel)])
