"""Every function of the expression language against an independent reference.

The tables below are written by hand: for each function the README lists (and each
stable primitive the stability rules print), the spec expression, its value in mpmath
(50 digits) and the TensorFlow function a person would call. Nothing here comes from
gradgen's printer. For each entry an op is built, the generated module imported, and
forward and gradient compared at points across the function's domain (negative, near 0,
large, near the domain's edges) in float32 and float64, eagerly and in `tf.function`:

* forward against mpmath at the dtype-rounded point, and against the TF function;
* gradient (of ``sum(c * out)`` for a fixed upstream ``c``) against mpmath's 50-digit
  numerical derivative of the same reference (``mpmath.diff``), or against the
  convention written next to the entry (0 for steps, as TensorFlow).

Tolerances (rtol 1e-6 in float32, 1e-13 in float64, relative to the largest reference
value of the output) catch a wrong constant or a function printed as another one: a
mutant printing ``atanh`` as ``tf.math.asinh`` changes atanh(0.5) from 0.549 to 0.481.
"""

from __future__ import annotations

import functools
import inspect
import math
import operator
from dataclasses import dataclass

import mpmath as mp
import numpy as np
import pytest
import yaml

mp.mp.dps = 50

DTYPES = ("float32", "float64")
RTOL = {"float32": 1e-6, "float64": 1e-13}
TINY = {"float32": 1e-37, "float64": 1e-300}
DIFF_NOISE = 1e-40  # mpmath.diff's own error at 50 digits (a derivative of 0 reads 1e-108)


def _step(x):
    return mp.mpf(1) if x > 0 else mp.mpf(0) if x < 0 else mp.mpf(0.5)


def _sign(x):
    return mp.mpf(1) if x > 0 else mp.mpf(-1) if x < 0 else mp.mpf(0)


def _flat(*point):
    return [0] * len(point)


def _branches(condition):
    """where(condition, 2x, 3x): its value, and its derivative (the selected branch's,
    at the boundary too)."""
    return (lambda x: 2 * x if condition(x) else 3 * x,
            lambda x: [2 if condition(x) else 3])


def _where(condition, text):
    value, derivative = _branches(condition)
    return Entry(f"where({text}, 2 * x, 3 * x)", value, (-2.0, 0.5, 1.0, 1.5),
                 derivative=derivative)


def _logistic(x):
    return 1 / (1 + mp.exp(-x))


@dataclass(frozen=True)
class Entry:
    """One function: ``expr`` over ``inputs``, ``value`` its mpmath reference,
    ``tf_call`` the TensorFlow function a person would call (None where the function
    is a language construct), ``points`` rows of input values; ``derivative`` the
    partials by hand where the numerical derivative does not apply (steps: 0, as
    TensorFlow; ``where`` at its boundary: the selected branch's); ``calls`` helpers or
    TF functions the generated op must call (the stable primitives the entry covers);
    ``gradient_scale`` an absolute scale for the gradient's error where the derivative
    as computed cancels (tolerance rtol * (|exact| + scale))."""

    expr: str
    value: object
    points: tuple
    tf_call: str | None = None
    inputs: tuple = ("x",)
    derivative: object = None
    calls: tuple = ()
    gradient_scale: float = 0.0


SYMMETRIC = (-10.0, -1.0, -1e-4, 0.0, 1e-4, 0.5, 3.0, 10.0)
UNIT = (-0.999, -0.5, -1e-4, 0.0, 1e-4, 0.5, 0.999)
WIDE = (-1e6, -10.0, -1.0, -1e-4, 0.0, 1e-4, 1.0, 10.0, 1e6)
PAIRS = ((1.0, 2.0), (-3.0, -5.0), (2.0, -1e-6), (-0.5, 0.25), (1e6, 3.0), (-7.0, 7.5))

ELEMENTWISE = {
    "exp": Entry("exp(x)", mp.exp, (-80.0, -10.0, -1.0, -1e-6, 0.0, 1e-6, 0.5, 3.0, 20.0, 80.0),
                 "math.exp"),
    "log": Entry("log(x)", mp.log, (1e-30, 1e-6, 0.3, 0.9, 1.0, 1.1, 2.0, 1e6, 1e30),
                 "math.log"),
    "sqrt": Entry("sqrt(x)", mp.sqrt, (1e-30, 1e-6, 0.25, 2.0, 1e6, 1e30), "math.sqrt"),
    "sin": Entry("sin(x)", mp.sin, SYMMETRIC, "math.sin"),
    "cos": Entry("cos(x)", mp.cos, SYMMETRIC, "math.cos"),
    "tan": Entry("tan(x)", mp.tan, (-1.5, -1.0, -1e-4, 0.0, 1e-4, 0.5, 1.5), "math.tan"),
    "asin": Entry("asin(x)", mp.asin, UNIT, "math.asin"),
    "acos": Entry("acos(x)", mp.acos, UNIT, "math.acos"),
    "atan": Entry("atan(x)", mp.atan, WIDE, "math.atan"),
    "sinh": Entry("sinh(x)", mp.sinh, (-20.0, -1.0, -1e-4, 0.0, 1e-4, 1.0, 20.0, 80.0),
                  "math.sinh"),
    "cosh": Entry("cosh(x)", mp.cosh, (-20.0, -1.0, -1e-4, 0.0, 1e-4, 1.0, 20.0, 80.0),
                  "math.cosh"),
    # tanh's derivative sech(x)**2: 1 - tanh(x)**2 (TF's TanhGrad) is 0 from x = 9 in
    # float32, 19 in float64, and loses digits from |x| = 1 (sech_squared)
    "tanh": Entry("tanh(x)", mp.tanh,
                  (-20.0, -3.0, -1.0, -1e-4, 0.0, 1e-4, 0.5, 0.99, 3.0, 9.5, 20.0),
                  "math.tanh"),
    "asinh": Entry("asinh(x)", mp.asinh, WIDE, "math.asinh"),
    "acosh": Entry("acosh(x)", mp.acosh, (1.001, 1.5, 2.0, 10.0, 1e6), "math.acosh"),
    "atanh": Entry("atanh(x)", mp.atanh, UNIT, "math.atanh"),
    "erf": Entry("erf(x)", mp.erf, (-5.0, -1.0, -1e-4, 0.0, 1e-4, 0.5, 2.0, 5.0), "math.erf"),
    "erfc": Entry("erfc(x)", mp.erfc, (-5.0, -1.0, 0.0, 0.5, 2.0, 5.0, 9.0), "math.erfc"),
    "Abs": Entry("Abs(x)", mp.fabs, (-1e30, -2.0, -1e-6, 1e-6, 3.0, 1e30), "math.abs"),
    "abs": Entry("abs(x)", mp.fabs, (-1e30, -2.0, -1e-6, 1e-6, 3.0, 1e30), "math.abs"),
    "sign": Entry("sign(x)", _sign, (-5.0, -1e-6, 0.0, 1e-6, 5.0), "math.sign", derivative=_flat),
    "floor": Entry("floor(x)", mp.floor, (-2.5, -1.0, -0.3, 0.0, 0.3, 1.7, 1e6 + 0.5),
                   "math.floor", derivative=_flat),
    "ceiling": Entry("ceiling(x)", mp.ceil, (-2.5, -1.0, -0.3, 0.0, 0.3, 1.7, 1e6 + 0.5),
                     "math.ceil", derivative=_flat),
    "Heaviside": Entry("Heaviside(x)", _step, (-3.0, -1e-6, 0.0, 1e-6, 3.0),
                       derivative=_flat),
    "log1p": Entry("log1p(x)", mp.log1p, (-0.999, -0.5, -1e-8, 0.0, 1e-8, 1.0, 1e6, 1e30),
                   "math.log1p"),
    "expm1": Entry("expm1(x)", mp.expm1, (-50.0, -1.0, -1e-8, 0.0, 1e-8, 1.0, 20.0, 80.0),
                   "math.expm1"),
    "sigmoid": Entry("sigmoid(x)", _logistic, (-80.0, -20.0, -1.0, 0.0, 1.0, 20.0, 80.0),
                     "math.sigmoid"),
    "softplus": Entry("softplus(x)", lambda x: mp.log1p(mp.exp(x)),
                      (-80.0, -20.0, -1.0, 0.0, 1.0, 20.0, 80.0), "math.softplus"),
    # two arguments
    "atan2": Entry("atan2(y, x)", mp.atan2,
                   ((1.0, 1.0), (-1.0, 1.0), (-1.0, -1.0), (1.0, -1.0), (1.0, 0.0),
                    (-1.0, 1e-6), (1e-6, 3.0), (5.0, -2.0)),
                   "math.atan2", inputs=("y", "x")),
    "Max": Entry("Max(x, y)", lambda x, y: max(x, y), PAIRS, "math.maximum",
                 inputs=("x", "y")),
    "Min": Entry("Min(x, y)", lambda x, y: min(x, y), PAIRS, "math.minimum",
                 inputs=("x", "y")),
    "log_base": Entry("log(x, b)", lambda x, b: mp.log(x) / mp.log(b),
                      ((2.0, 10.0), (0.5, 2.0), (100.0, 3.0), (1e-6, 0.5), (7.0, 1.5)),
                      inputs=("x", "b")),
    "power": Entry("x**y", lambda x, y: mp.power(x, y),
                   ((2.0, 3.0), (0.5, -1.5), (3.0, 0.5), (10.0, 0.0), (1e-3, 2.5),
                    (1.5, -7.0), (0.0, 2.5)),
                   "math.pow", inputs=("x", "y"),
                   derivative=lambda x, y: [y * x**(y - 1), x**y * mp.log(x) if x else 0],
                   calls=("tf.math.xdivy(", "tf.math.xlogy(")),
    # operators and constants
    "add": Entry("x + y", operator.add, PAIRS, "math.add", inputs=("x", "y")),
    "subtract": Entry("x - y", operator.sub, PAIRS, "math.subtract", inputs=("x", "y")),
    "multiply": Entry("x * y", operator.mul, PAIRS, "math.multiply", inputs=("x", "y")),
    "divide": Entry("x / y", operator.truediv, PAIRS, "math.divide", inputs=("x", "y")),
    "negative": Entry("-x", operator.neg, SYMMETRIC, "math.negative"),
    "square": Entry("x**2", lambda x: x * x, SYMMETRIC, "math.square"),
    "cube": Entry("x**3", lambda x: x**3, SYMMETRIC),
    "reciprocal_sqrt": Entry("x**-0.5", lambda x: 1 / mp.sqrt(x), (1e-6, 0.25, 2.0, 1e6),
                             "math.rsqrt"),
    "constants": Entry("pi * x + E", lambda x: mp.pi * x + mp.e, SYMMETRIC),
    # conditions: each comparison, and/or/not, where and Piecewise (branches differ in
    # value and slope, and the points include the boundary x = 1 itself)
    "where_less": _where(lambda x: x < 1, "x < 1"),
    "where_less_equal": _where(lambda x: x <= 1, "x <= 1"),
    "where_greater": _where(lambda x: x > 1, "x > 1"),
    "where_greater_equal": _where(lambda x: x >= 1, "x >= 1"),
    "where_equal": _where(lambda x: x == 1, "x == 1"),
    "where_not_equal": _where(lambda x: x != 1, "x != 1"),
    "where_and": _where(lambda x: 0 < x < 1, "(x > 0) and (x < 1)"),
    "where_chained": _where(lambda x: 0 < x < 1, "0 < x < 1"),
    "where_or": _where(lambda x: x < 0 or x > 1, "(x < 0) or (x > 1)"),
    "where_not": _where(lambda x: not x > 1, "not (x > 1)"),
    "piecewise": Entry("Piecewise((x**2, x < 1), (2 * x - 1 + sin(x - 1), True))",
                       lambda x: x * x if x < 1 else 2 * x - 1 + mp.sin(x - 1),
                       (-2.0, 0.5, 1.5, 3.0)),
    # stable primitives the rules print (the generated op must call the primitive)
    "logaddexp": Entry("log(exp(x) + exp(y))", lambda x, y: mp.log(mp.exp(x) + mp.exp(y)),
                       PAIRS + ((80.0, 81.0), (-100.0, -101.0)), inputs=("x", "y"),
                       calls=("_logsumexp(",)),
    "logcosh": Entry("log(cosh(x))", lambda x: mp.log(mp.cosh(x)),
                     (-100.0, -3.0, -1e-4, 0.0, 1e-4, 0.5, 3.0, 100.0), calls=("_logcosh(",)),
    "log1mexp": Entry("log(1 - exp(-x))", lambda x: mp.log(1 - mp.exp(-x)),
                      (1e-6, 0.1, 0.69, 0.7, 2.0, 30.0), calls=("_log1mexp(",)),
    "log_erfc": Entry("log(erfc(x))", lambda x: mp.log(mp.erfc(x)),
                      (-5.0, -1.0, 0.0, 0.5, 3.0, 9.0, 11.0, 30.0, 100.0),
                      calls=("_log_erfc(", "_erfcx_recip(")),
    "hypot": Entry("sqrt(x**2 + y**2)", lambda x, y: mp.sqrt(x * x + y * y),
                   PAIRS + ((1e30, 2e30), (-1e-30, 3e-30)), inputs=("x", "y"),
                   calls=("_hypot(",)),
    "xlogy": Entry("x * log(y)", lambda x, y: x * mp.log(y),
                   ((0.5, 2.0), (-3.0, 1e-6), (2.0, 1e6), (1e-6, 0.5)), inputs=("x", "y"),
                   calls=("tf.math.xlogy(",)),
    "xlog1py": Entry("x * log1p(y)", lambda x, y: x * mp.log1p(y),
                     ((0.5, 2.0), (-3.0, -0.999), (2.0, 1e-8), (1e-6, 0.5)), inputs=("x", "y"),
                     calls=("tf.math.xlog1py(",)),
}


def _spec(dtype: str) -> str:
    ops = [
        {"name": f"f_{name}", "inputs": {i: ["n"] for i in entry.inputs},
         "output": entry.expr}
        for name, entry in ELEMENTWISE.items()
    ] + [
        {"name": f"m_{name}", "inputs": {n: list(shape) for n, shape in entry.inputs},
         "output": entry.expr}
        for name, entry in MATRIX.items()
    ]
    return yaml.safe_dump({"version": 1, "module": f"reference_{dtype}", "dtype": dtype,
                           "ops": ops}, sort_keys=False)


# ---------------------------------------------------------------------------- matrices
A = ((2.0, 0.5, -0.3), (0.1, 1.5, 0.4), (-0.2, 0.3, 1.8))  # det 5.2: well conditioned
B = ((0.7, -1.2, 0.4), (1.1, 0.3, -0.5), (0.2, 0.9, 1.3))  # det -2.2
SQUARE = {"A": [3, 3]}
PAIR = {"A": [3, 3], "B": [3, 3]}


def _mat(rows):
    return mp.matrix([[mp.mpf(v) for v in row] for row in rows])


def _rows(m):
    return [[m[i, j] for j in range(m.cols)] for i in range(m.rows)]


def _lse(values):
    top = max(values)
    return top + mp.log(sum(mp.exp(v - top) for v in values))


def _softmax(values):
    total = _lse(values)
    return [mp.exp(v - total) for v in values]


def _columns(rows):
    return [list(c) for c in zip(*rows)]


@dataclass(frozen=True)
class MatrixEntry:
    """A matrix or reduction function: ``value`` maps nested lists of mpf (one per
    input) to a nested list (or a number); ``tf_call`` computes the same with the TF
    function a person would call."""

    expr: str
    inputs: tuple
    value: object
    tf_call: object
    calls: tuple = ()


MATRIX = {
    "matmul": MatrixEntry("A @ B", tuple(PAIR.items()),
                          lambda a, b: _rows(_mat(a) * _mat(b)),
                          lambda tf, a, b: tf.linalg.matmul(a, b)),
    "einsum": MatrixEntry('einsum("ij,kj->ik", A, B)', tuple(PAIR.items()),
                          lambda a, b: _rows(_mat(a) * _mat(b).T),
                          lambda tf, a, b: tf.einsum("ij,kj->ik", a, b)),
    "transpose": MatrixEntry("transpose(A) * B", tuple(PAIR.items()),
                             lambda a, b: [[a[j][i] * b[i][j] for j in range(3)]
                                           for i in range(3)],
                             lambda tf, a, b: tf.linalg.matrix_transpose(a) * b),
    "inverse": MatrixEntry("inverse(A)", tuple(SQUARE.items()),
                           lambda a: _rows(mp.inverse(_mat(a))),
                           lambda tf, a: tf.linalg.inv(a)),
    "inverse_negative_det": MatrixEntry("inverse(B)", (("B", [3, 3]),),
                                        lambda b: _rows(mp.inverse(_mat(b))),
                                        lambda tf, b: tf.linalg.inv(b)),
    "det": MatrixEntry("det(B)", (("B", [3, 3]),), lambda b: mp.det(_mat(b)),
                       lambda tf, b: tf.linalg.det(b), calls=("_cofactor(",)),
    "log_det": MatrixEntry("log(det(A))", tuple(SQUARE.items()),
                           lambda a: mp.log(mp.det(_mat(a))),
                           lambda tf, a: tf.linalg.slogdet(a)[1]),
    "trace": MatrixEntry("trace(A) * A", tuple(SQUARE.items()),
                         lambda a: [[(a[0][0] + a[1][1] + a[2][2]) * v for v in row]
                                    for row in a],
                         lambda tf, a: tf.linalg.trace(a) * a),
    "sum_axis0": MatrixEntry("sum(A**2, axis=0)", tuple(SQUARE.items()),
                             lambda a: [sum(v * v for v in col) for col in _columns(a)],
                             lambda tf, a: tf.reduce_sum(a**2, axis=0)),
    "sum_all": MatrixEntry("sum(A * B)", tuple(PAIR.items()),
                           lambda a, b: sum(x * y for ra, rb in zip(a, b)
                                            for x, y in zip(ra, rb)),
                           lambda tf, a, b: tf.reduce_sum(a * b)),
    "mean_keepdims": MatrixEntry("mean(A**3, axis=-1, keepdims=True)", tuple(SQUARE.items()),
                                 lambda a: [[sum(v**3 for v in row) / 3] for row in a],
                                 lambda tf, a: tf.reduce_mean(a**3, axis=-1, keepdims=True)),
    "logsumexp": MatrixEntry("logsumexp(A, axis=-1)", tuple(SQUARE.items()),
                             lambda a: [_lse(row) for row in a],
                             lambda tf, a: tf.reduce_logsumexp(a, axis=-1),
                             calls=("_reduce_logsumexp(",)),
    "max": MatrixEntry("max(A, axis=0)", tuple(SQUARE.items()),
                       lambda a: [max(col) for col in _columns(a)],
                       lambda tf, a: tf.reduce_max(a, axis=0)),
    "min": MatrixEntry("min(A, axis=1, keepdims=True)", tuple(SQUARE.items()),
                       lambda a: [[min(row)] for row in a],
                       lambda tf, a: tf.reduce_min(a, axis=1, keepdims=True)),
    "softmax": MatrixEntry("softmax(A, axis=-1)", tuple(SQUARE.items()),
                           lambda a: [_softmax(row) for row in a],
                           lambda tf, a: tf.nn.softmax(a, axis=-1), calls=("_softmax(",)),
    "softmax_axis0": MatrixEntry("softmax(A, axis=0)", tuple(SQUARE.items()),
                                 lambda a: _columns([_softmax(c) for c in _columns(a)]),
                                 lambda tf, a: tf.nn.softmax(a, axis=0)),
    "log_softmax": MatrixEntry("log_softmax(A * 30, axis=-1)", tuple(SQUARE.items()),
                               lambda a: [[v - _lse(r) for v in r]
                                          for r in ([30 * v for v in row] for row in a)],
                               lambda tf, a: tf.nn.log_softmax(a * 30, axis=-1),
                               calls=("_log_softmax(",)),
}
MATRIX_VALUES = {"A": A, "B": B}


# ---------------------------------------------------------------------------- fixtures
MODES = ("eager", "tf_function")


def _rounded(values, dtype):
    """The points as the dtype holds them (the reference is taken at these)."""
    return np.asarray(values, dtype=np.float64).astype(dtype).astype(np.float64)


@functools.lru_cache(maxsize=None)
def _cases(dtype):
    """{op name: (input values, upstream)} for every entry, in ``dtype``."""
    cases = {}
    for name, entry in ELEMENTWISE.items():
        rows = [p if isinstance(p, tuple) else (p,) for p in entry.points]
        columns = [_rounded(c, dtype) for c in zip(*rows)]
        cases[f"f_{name}"] = (columns, np.ones_like(columns[0]))
    for name, entry in MATRIX.items():
        values = [_rounded(MATRIX_VALUES[n], dtype) for n, _ in entry.inputs]
        with mp.workdps(50):
            shape = np.asarray(entry.value(*_exact(values)), dtype=object).shape
        cases[f"m_{name}"] = (values, np.linspace(-1.0, 1.5, math.prod(shape)).reshape(shape))
    return cases


def _exact(values):
    return [[[mp.mpf(float(x)) for x in row] for row in v] for v in values]


@pytest.fixture(scope="module")
def results(tf, build):
    """{(dtype, mode): {op name: (module, forward, gradients)}}: every op run eagerly,
    and all ops of a dtype in one `tf.function` (traced once)."""
    out = {}
    for dtype in DTYPES:
        module = build(_spec(dtype), audit=False)
        cases = _cases(dtype)

        def run(inputs, module=module):
            got = {}
            for op, (args, upstream) in inputs.items():
                with tf.GradientTape() as tape:
                    tape.watch(args)
                    value = getattr(module, op)(*args)
                got[op] = (value, tape.gradient(value, args, output_gradients=upstream))
            return got

        tensors = {op: ([tf.constant(a, dtype=dtype) for a in args],
                        tf.constant(upstream, dtype=dtype))
                   for op, (args, upstream) in cases.items()}
        for mode, runner in (("eager", run), ("tf_function", tf.function(run, autograph=False))):
            got = runner(tensors)
            out[dtype, mode] = {
                op: (module, value.numpy(), [g.numpy() for g in grads])
                for op, (value, grads) in got.items()
            }
    return out


def _close(got, want, rtol, scale, label):
    """|got - want| <= rtol * scale (scale: the largest reference value it is part of)."""
    got, want = float(got), float(want)
    assert np.isfinite(got), f"{label}: got {got}, exact {want}"
    assert abs(got - want) <= rtol * scale, f"{label}: got {got!r}, exact {want!r}"


def _derivatives(value, point):
    """The 50-digit partial derivatives of ``value`` at ``point``."""
    point = [mp.mpf(v) for v in point]
    out = []
    for k in range(len(point)):
        def along(t, k=k):
            return value(*point[:k], t, *point[k + 1:])

        out.append(mp.diff(along, point[k]))
    return out


def _exact_at(entry, point):
    """(value, partials) of an elementwise entry at ``point``, at 50 digits."""
    with mp.workdps(50):
        args = [mp.mpf(v) for v in point]
        derivative = entry.derivative or (lambda *p: _derivatives(entry.value, p))
        return entry.value(*args), derivative(*args)


def _calls(module, op, calls):
    source = inspect.getsource(getattr(module, f"_{op}_vjp"))
    for call in calls:  # the rules still print the primitive this entry covers
        assert call in source, f"{op}: the generated op no longer calls {call}"


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
@pytest.mark.parametrize("dtype", DTYPES)
def test_elementwise_function(tf, results, name, dtype):
    entry, op = ELEMENTWISE[name], f"f_{name}"
    rtol, tiny = RTOL[dtype], TINY[dtype]
    columns, _ = _cases(dtype)[op]
    module = results[dtype, "eager"][op][0]
    _calls(module, op, entry.calls)
    args = [tf.constant(c, dtype=dtype) for c in columns]
    person = operator.attrgetter(entry.tf_call)(tf)(*args).numpy() if entry.tf_call else None
    for i, point in enumerate(zip(*columns)):
        want, partials = _exact_at(entry, point)
        for mode in MODES:
            _, out, grads = results[dtype, mode][op]
            label = f"{name}{point} {dtype} {mode}"
            _close(out[i], want, rtol, abs(want) + tiny, label)
            if person is not None:  # the TF function a person calls gives the same value
                _close(out[i], person[i], rtol, abs(want) + tiny, f"{label} vs tf.{entry.tf_call}")
            for k, w in enumerate(partials):
                _close(grads[k][i], w, rtol, abs(w) + tiny + DIFF_NOISE + entry.gradient_scale,
                       f"{label} d/d{entry.inputs[k]}")


@pytest.mark.parametrize("name", sorted(MATRIX))
@pytest.mark.parametrize("dtype", DTYPES)
def test_matrix_function(tf, results, name, dtype):
    entry, op = MATRIX[name], f"m_{name}"
    names = [n for n, _ in entry.inputs]
    values, upstream = _cases(dtype)[op]
    module = results[dtype, "eager"][op][0]
    _calls(module, op, entry.calls)
    exact_inputs = _exact(values)
    with mp.workdps(50):
        want = np.asarray(entry.value(*exact_inputs), dtype=object)
    rtol = RTOL[dtype]
    scale = max(abs(w) for w in want.flat) + TINY[dtype]
    person = entry.tf_call(tf, *(tf.constant(v, dtype=dtype) for v in values)).numpy()

    def loss(*flat):
        ins = [[list(flat[k * 9 + 3 * i: k * 9 + 3 * i + 3]) for i in range(3)]
               for k in range(len(names))]
        result = np.asarray(entry.value(*ins), dtype=object)
        return sum(u * r for u, r in zip(upstream.flat, result.flat))

    flat = [v for m in exact_inputs for row in m for v in row]
    with mp.workdps(50):
        partials = _derivatives(loss, flat)
    gscale = max(abs(p) for p in partials) + TINY[dtype]
    for mode in MODES:
        _, out, grads = results[dtype, mode][op]
        assert out.shape == want.shape == person.shape, name
        for index, w in np.ndenumerate(want):
            _close(out[index], w, rtol, scale, f"{name}{index} {dtype} {mode}")
            _close(out[index], person[index], rtol, scale, f"{name}{index} {dtype} vs TF")
        for k, n in enumerate(names):
            for i in range(3):
                for j in range(3):
                    _close(grads[k][i, j], partials[k * 9 + 3 * i + j], rtol, gscale,
                           f"{name} {dtype} {mode} d/d{n}[{i},{j}]")


def test_every_readme_function_is_in_the_table():
    """The tables cover every function the README lists: a new function in the language
    needs an independent reference here."""
    from gradgen.expr import FUNCTIONS

    expressions = " ".join(e.expr for e in (*ELEMENTWISE.values(), *MATRIX.values()))
    missing = {f for f in FUNCTIONS if f"{f}(" not in expressions}
    assert not missing, f"no independent reference for {sorted(missing)}"


def _mismatches(tf, module, dtype):
    """How many (op, point) values of ``module``'s elementwise ops differ from the table."""
    count = 0
    cases = _cases(dtype)
    for name, entry in ELEMENTWISE.items():
        op = f"f_{name}"
        if not hasattr(module, op):
            continue
        columns, _ = cases[op]
        args = [tf.constant(c, dtype=dtype) for c in columns]
        with tf.GradientTape() as tape:
            tape.watch(args)
            out = getattr(module, op)(*args)
        grads = tape.gradient(out, args)
        for i, point in enumerate(zip(*columns)):
            want, partials = _exact_at(entry, point)
            try:
                _close(out.numpy()[i], want, RTOL[dtype], abs(want) + TINY[dtype], op)
                for k, w in enumerate(partials):
                    _close(grads[k].numpy()[i], w, RTOL[dtype],
                           abs(w) + TINY[dtype] + DIFF_NOISE + entry.gradient_scale, op)
            except AssertionError:
                count += 1
    return count


@pytest.mark.slow
def test_printing_any_function_as_another_is_caught(tf, tmp_path, monkeypatch):
    """Mutation check of the table itself: declare each function the printer writes as a
    ``tf.math`` call as another ``tf.math`` function (gradgen.functions.declarations);
    the table must notice every one the expression language reaches."""
    import dataclasses

    from gradgen.emit import generate
    from gradgen.functions import declarations as fns

    from conftest import import_source

    def declare(table):
        monkeypatch.setattr(fns, "FUNCTIONS", table)
        fns._by_class.cache_clear()

    printed = [f for f in fns.FUNCTIONS if f.tf and f.tf.startswith("tf.math.")]
    names = sorted({f.tf for f in printed})
    original_table = fns.FUNCTIONS
    checked, unused = [], []
    for f in printed:
        spelled = f.spellings + (f.classes[0].__name__,)
        users = {n: e for n, e in ELEMENTWISE.items()
                 if any(f"{s}(" in e.expr for s in spelled) or f"{f.tf}(" in e.calls}
        if not users:
            continue
        other = names[(names.index(f.tf) + 1) % len(names)]
        spec = yaml.safe_load(_spec("float64"))
        spec["ops"] = [o for o in spec["ops"] if o["name"][2:] in users]
        spec["module"] = f"mutant_{f.name}"
        path = tmp_path / f"{spec['module']}.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        original = generate([str(path)], str(tmp_path), verify=False, audit=False)
        declare(tuple(dataclasses.replace(g, tf=other) if g is f else g
                      for g in original_table))
        try:
            mutated = generate([str(path)], str(tmp_path), verify=False, audit=False)
        finally:
            declare(original_table)
        if mutated == original:
            unused.append(f.name)
            continue
        for rel, text in mutated.items():  # the module and its runtime
            (tmp_path / rel).write_text(text)
        module = import_source(spec["module"], tmp_path / f"{spec['module']}.py")
        assert _mismatches(tf, module, "float64"), (
            f"{f.name} printed as {other} was not noticed")
        checked.append(f.name)
    # sqrt(x) is x**0.5, printed by the power printer, not as its declaration says
    assert unused == ["sqrt"], unused
    assert len(checked) >= 30, sorted(checked)
