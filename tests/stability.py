"""The stability suite's cases, its 50-digit reference, and the README table.

Every op of ``examples/stability.yaml`` is checked at extreme points (|x| up to 1e4,
values near 0, subnormals) in float16, bfloat16, float32 and float64 against the
derivative of the op's expression *as written*, evaluated by SymPy/mpmath at 50 digits
at the input rounded to the dtype (the limit where the formula itself is 0/0). Where the
true gradient is not defined (a norm at the origin) the case names gradgen's documented
convention instead.

Run ``python tests/stability.py`` to print the README's table: TensorFlow's autodiff of
the plain forward next to gradgen's gradient, at the points where they differ.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import sympy

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "examples" / "stability.yaml"

DTYPES = ("float16", "bfloat16", "float32", "float64")
# Relative tolerance per dtype; absolute differences below the smallest normal number
# are accepted (subnormal and underflowing values carry no relative precision).
RTOL = {"float16": 4e-3, "bfloat16": 3e-2, "float32": 1e-5, "float64": 1e-12}
SMALLEST_NORMAL = {
    "float16": 6.103515625e-05,
    "bfloat16": 1.1754943508222875e-38,
    "float32": 1.1754943508222875e-38,
    "float64": 2.2250738585072014e-308,
}
LARGEST = {"float16": 65504.0, "bfloat16": 3.3895e38, "float32": 3.4028e38, "float64": 1.79e308}

SIGMOID_POINTS = [-1e4, -100.0, -20.0, -1.0, -1e-3, 0.0, 1e-30, 1e-3, 1.0, 12.0, 20.0, 100.0, 1e4]
PAIR_POINTS = [
    (0.0, 0.0), (1.0, 2.0), (1e4, 0.0), (-1e4, 0.0), (1e4, 1e4), (-1e4, -1e4),
    (100.0, -100.0), (-1e4, 1e4), (3.0, 3.0),
]


@dataclass
class Family:
    """One op of the stability spec and where to check it.

    Attributes:
        op: the op's name in examples/stability.yaml.
        points: input tuples (float64; rounded to each dtype before use).
        plain: the same forward in plain TensorFlow (for TF autodiff), from ``tf``.
        conventions: {point: gradients} where the true gradient is undefined and the
            README documents gradgen's value.
    """

    op: str
    points: list
    plain: object
    conventions: dict = field(default_factory=dict)


def families(tf):
    """The checked families; ``tf`` is the tensorflow module (for the plain forwards)."""
    exp, log, sqrt = tf.math.exp, tf.math.log, tf.math.sqrt

    def single(values):
        return [(v,) for v in values]

    return [
        Family("softplus_naive", single(SIGMOID_POINTS), lambda x: log(1 + exp(x))),
        Family("sigmoid_naive", single(SIGMOID_POINTS), lambda x: 1 / (1 + exp(-x))),
        Family("logistic_ratio", single(SIGMOID_POINTS), lambda x: exp(x) / (1 + exp(x))),
        Family("swish", single(SIGMOID_POINTS), lambda x: x / (1 + exp(-x))),
        Family(
            "log1p_naive",
            single([-0.999, -0.5, -1e-3, -1e-20, 0.0, 1e-30, 1e-3, 1.0, 1e3, 1e4]),
            lambda x: log(1 + x),
        ),
        Family(
            "expm1_naive",
            single([-1e4, -100.0, -1.0, -1e-20, 0.0, 1e-30, 1e-3, 1.0, 10.0, 80.0, 700.0]),
            lambda x: exp(x) - 1,
        ),
        Family(
            "entropy",
            single([0.0, 1e-30, 1e-3, 0.1, 0.5, 0.9, 1.0, 10.0]),
            lambda p: -p * log(p),
        ),
        Family(
            "cross_entropy",
            [(0.0, 0.0), (0.0, 0.5), (0.5, 0.0), (0.3, 0.7), (1.0, 1e-30), (1e-3, 1.0)],
            lambda p, q: -p * log(q),
            # f(0, q) = 0 for every q, so d/dq = 0 at p = 0 (also at q = 0).
            conventions={(0.0, 0.0): (math.inf, 0.0)},
        ),
        Family("log_sigmoid", single(SIGMOID_POINTS), lambda x: log(1 / (1 + exp(-x)))),
        Family(
            "log_one_minus_sigmoid",
            single(SIGMOID_POINTS),
            lambda x: log(1 - 1 / (1 + exp(-x))),
        ),
        Family("logaddexp", PAIR_POINTS, lambda a, b: log(exp(a) + exp(b))),
        Family("softmax2", PAIR_POINTS, lambda a, b: exp(a) / (exp(a) + exp(b))),
        Family("log_softmax2", PAIR_POINTS, lambda a, b: log(exp(a) / (exp(a) + exp(b)))),
        Family(
            "power",
            [(0.0, 2.0), (0.0, 1.0), (0.0, 3.5), (2.0, 3.0), (0.5, 10.0), (3.0, 0.5),
             (1e-3, 2.0), (10.0, -2.0)],
            lambda x, y: x**y,
            # At x = 0 (y > 0), 0**y = 0 for every y, so d/dy = 0 (the formula
            # x**y * log(x) is 0 * -inf there); d/dx = y * 0**(y - 1).
            conventions={(0.0, 2.0): (0.0, 0.0), (0.0, 1.0): (1.0, 0.0),
                         (0.0, 3.5): (0.0, 0.0)},
        ),
        # The squares must be normal numbers in float16: 0.008 < |x| < 256.
        Family(
            "norm",
            [(0.0, 0.0), (3.0, 4.0), (0.01, -0.02), (100.0, 100.0), (-5.0, 0.0), (0.0, 0.05)],
            lambda x, y: sqrt(x * x + y * y),
            conventions={(0.0, 0.0): (0.0, 0.0)},  # the subgradient 0 at the origin
        ),
        Family(
            "angle",
            [(0.0, 0.0), (1.0, 1.0), (-1.0, 0.01), (100.0, -100.0), (0.0, 2.0)],
            lambda x, y: tf.math.atan2(y, x),
            conventions={(0.0, 0.0): (0.0, 0.0)},
        ),
        Family(
            "sinc",
            single([0.0, 1e-20, -1e-3, 1.0, 10.0, -3.0, 1e4]),
            lambda x: tf.math.sin(x) / x,
        ),
        Family(
            "expm1_ratio",
            single([0.0, 1e-20, -1e-20, 1e-3, 1.0, 10.0, -10.0, -100.0]),
            lambda x: (exp(x) - 1) / x,
        ),
        Family(
            "sqrt_relu",
            single([-1.0, 0.0, 1e-30, 4.0, 1e4]),
            lambda x: tf.where(x > 0, sqrt(x), tf.zeros_like(x)),
        ),
        Family(
            "elu",
            single([-1e4, -100.0, -1.0, 0.0, 1.0, 1e4]),
            lambda x: tf.where(x > 0, x, exp(x) - 1),
        ),
        Family(
            "log_cosh",
            single([-1e4, -100.0, -20.0, -1.0, 0.0, 1e-3, 1.0, 20.0, 100.0, 1e4]),
            lambda x: log(tf.math.cosh(x)),
        ),
        # r**-12 underflows below float16's smallest normal (6e-5) for r > 2.2
        Family(
            "inverse_power",
            single([0.5, 0.9, 1.0, 1.1, 2.0]),
            lambda r: r**-12,
        ),
    ]


# ------------------------------------------------------------------ the reference


def raw_expressions():
    """{op: (SymPy expression as written, input symbols)}, parsed by gradgen (no eval)."""
    from gradgen.expr import parse_op
    from gradgen.spec import load_spec

    doc = load_spec(SPEC)
    out = {}
    for i, op in enumerate(doc.model.ops):
        program = parse_op(doc, i)
        out[op.name] = (program.outputs[0].term.expr, [v.symbol for v in program.inputs])
    return out


def reference_gradient(expr, symbols, point, order=1):
    """Exact gradient (or, with order=2, the diagonal of the Hessian) at ``point``.

    The derivative of the expression as written is evaluated with mpmath at 60 digits,
    then at more digits (up to 6000) until two results agree to 40 digits: naive forms
    cancel catastrophically (the derivative of exp(x)/(1 + exp(x)) at x = 1e4 is a
    difference of two numbers near 1 that is exp(-1e4)). Where the formula is 0/0 the
    limit (SymPy) is used. Returns floats; ``math.nan`` where no limit exists.
    """
    out = []
    for s in symbols:
        d = sympy.diff(expr, s, order)
        value = _evaluate(d, symbols, point)
        if value is None:
            value = _limit(d, symbols, point, s)
        out.append(float(value) if value is not None else math.nan)
    return tuple(out)


def _evaluate(d, symbols, point):
    import mpmath

    f = sympy.lambdify(symbols, d, modules="mpmath")
    previous = None
    for dps in (60, 250, 1200, 6000):
        with mpmath.workdps(dps):
            try:
                value = f(*(mpmath.mpf(float(v)) for v in point))
            except (ZeroDivisionError, ValueError):
                value = None  # 0/0 at this precision: more digits, or the limit
            if value is not None and (isinstance(value, mpmath.mpc) or mpmath.isnan(value)):
                value = None
            if value is not None and previous is not None and (
                value == previous
                or abs(value - previous) <= mpmath.mpf(10) ** -40 * abs(value)
            ):
                return value
            previous = value
    return previous


def _limit(d, symbols, point, s):
    """The limit of ``d`` at ``point`` along ``s`` (others fixed), if it exists."""
    others = {t: sympy.nsimplify(v) for t, v in zip(symbols, point) if t != s}
    target = sympy.nsimplify([v for t, v in zip(symbols, point) if t == s][0])
    expr = d.subs(others)
    try:
        value = sympy.limit(expr, s, target, "+-")
    except (ValueError, NotImplementedError):
        return None  # one-sided limits differ: undefined
    if value == sympy.zoo:  # infinite with a sign that depends on the side: take the
        value = sympy.limit(expr, s, target, "+")  # side inside log's and sqrt's domain
    if value == sympy.oo:
        return math.inf
    if value == -sympy.oo:
        return -math.inf
    return value.evalf(50) if value.is_real else None


def rounded(values, dtype):
    """``values`` rounded to ``dtype`` and back to float64 (the inputs TF sees)."""
    import tensorflow as tf

    return [float(tf.cast(tf.constant(v, tf.float64), dtype).numpy().astype(np.float64))
            for v in values]


# ------------------------------------------------------------------ the README table


def gradients(tf, fn, point, dtype):
    """d fn / d input at one point (inputs of shape [1])."""
    args = [tf.constant([v], dtype=dtype) for v in point]
    with tf.GradientTape() as tape:
        for a in args:
            tape.watch(a)
        out = fn(*args)
    return [np.float64(g.numpy()[0]) if g is not None else 0.0 for g in tape.gradient(out, args)]


def table(tf, module) -> str:
    """Markdown rows: where float32 TF autodiff differs from the reference and gradgen."""
    raw = raw_expressions()
    rows = [
        "| op | expression | input | TF autodiff | gradgen | exact |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for family in families(tf):
        expr, symbols = raw[family.op]
        for point in family.points:
            point = tuple(rounded(point, "float32"))
            exact = family.conventions.get(point) or reference_gradient(expr, symbols, point)
            ours = gradients(tf, getattr(module, family.op), point, "float32")
            theirs = gradients(tf, family.plain, point, "float32")
            if all(_close(t, e) or (math.isnan(e) and math.isnan(t)) for t, e in zip(theirs, exact)):
                continue
            rows.append(
                f"| `{family.op}` | `{sympy.sstr(expr)}` | {_fmt_point(point)} | "
                f"{_fmt(theirs)} | {_fmt(ours)} | {_fmt(exact)} |"
            )
    return "\n".join(rows)


def _close(got, want, dtype="float32"):
    """``got`` is ``want`` rounded to ``dtype`` (overflowing values are signed inf)."""
    if math.isnan(want):
        return False
    if math.isinf(want) or abs(want) > LARGEST[dtype]:
        return math.isinf(got) and got * want > 0
    return abs(got - want) <= RTOL[dtype] * abs(want) + SMALLEST_NORMAL[dtype]


def _fmt(values):
    return ", ".join(f"{v:.6g}" for v in values)


def _fmt_point(point):
    return ", ".join(f"{v:g}" for v in point)


if __name__ == "__main__":
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.path.insert(0, str(ROOT))
    import importlib.util

    import tensorflow as tf

    spec = importlib.util.spec_from_file_location("stability", ROOT / "generated" / "stability.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    print(table(tf, module))
