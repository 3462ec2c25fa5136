"""The SymPy -> TensorFlow printer."""

from __future__ import annotations

import sympy
import pytest

from gradgen import ir
from gradgen.functions import expm1, log1p, sigmoid, softplus
from gradgen.printer import PrintError, TFPrinter, print_value

x, y, u = sympy.symbols("x y upstream", real=True)


@pytest.mark.parametrize(
    "expr, text",
    [
        (x * y, "x * y"),
        (x**2, "x * x"),
        (x**3, "x * x * x"),
        ((x + y) ** 2, "tf.math.square(x + y)"),
        (x ** -1, "1.0 / x"),
        (x ** -2, "1.0 / (x * x)"),
        (u * x / y**2, "upstream * x / (y * y)"),
        (x / (x + y), "x / (x + y)"),
        (sympy.sqrt(x), "tf.math.sqrt(x)"),
        (1 / sympy.sqrt(x), "tf.math.rsqrt(x)"),
        (x**2.5, "tf.math.pow(x, 2.5)"),
        (x / 2, "0.5 * x"),
        (x / 3, "x / 3.0"),
        (2 * x / 3, "2.0 * x / 3.0"),
        (-x, "-x"),
        (x - 2 * y, "x - 2.0 * y"),
        (sympy.pi * x, "math.pi * x"),
        (sympy.log(2) * x, "math.log(2) * x"),
        (2 * sympy.exp(-x) / sympy.sqrt(sympy.pi), "(2/math.sqrt(math.pi)) * tf.math.exp(-x)"),
        (sympy.exp(x), "tf.math.exp(x)"),
        (sigmoid(x) * softplus(y), "tf.math.sigmoid(x) * tf.math.softplus(y)"),
        (log1p(x) + expm1(y), "tf.math.expm1(y) + tf.math.log1p(x)"),
        (sympy.Abs(x) * sympy.sign(y), "tf.math.abs(x) * tf.math.sign(y)"),
        (sympy.floor(x) + sympy.ceiling(y), "tf.math.ceil(y) + tf.math.floor(x)"),
        (sympy.atan2(y, x), "tf.math.atan2(y, x)"),
        (sympy.Max(x, 0), "tf.math.maximum(x, 0.0)"),
        (sympy.Min(x, y, 1), "tf.math.minimum(tf.math.minimum(x, y), 1.0)"),
    ],
)
def test_expressions(expr, text):
    assert TFPrinter("float32").value(expr) == text


def test_numbers_never_change_dtype():
    p = TFPrinter("float16")
    # alone or first in a call: typed constant; after a tensor: a literal TF converts
    assert p.value(sympy.Integer(3)) == "tf.constant(3.0, dtype=tf.float16)"
    assert p.value(sympy.Piecewise((x, x > 0), (0, True))) == "tf.where(x > 0.0, x, 0.0)"
    assert p.value(sympy.Piecewise((1, x > 0), (x, True))) == (
        "tf.where(x > 0.0, tf.constant(1.0, dtype=tf.float16), x)"
    )
    assert p.value(sympy.Piecewise((1, x > 0), (2, x < -1), (0, True))) == (
        "tf.where(x > 0.0, tf.constant(1.0, dtype=tf.float16), "
        "tf.where(x < -1.0, tf.constant(2.0, dtype=tf.float16), "
        "tf.constant(0.0, dtype=tf.float16)))"
    )
    assert "tf.constant(2.0" not in p.value(2 * x)  # Python float * tensor keeps dtype
    assert p.value(sympy.Eq(x, 1)) == "tf.math.equal(x, 1.0)"


def test_math_constants_are_tracked():
    p = TFPrinter("float64")
    assert not p.uses_math
    p.value(sympy.pi * x)
    assert p.uses_math


@pytest.mark.parametrize(
    "expr, name",
    [
        (sympy.Derivative(sympy.Function("f")(x), x), "Derivative"),
        (sympy.Heaviside(x), "Heaviside"),
        (sympy.DiracDelta(x), "DiracDelta"),
        (sympy.re(sympy.Symbol("z")), "re"),
        (sympy.Function("mystery")(x), "mystery"),
        (sympy.gamma(x), "gamma"),
    ],
)
def test_unprintable_expressions_raise(expr, name):
    with pytest.raises(PrintError) as info:
        TFPrinter("float32").value(expr)
    assert info.value.function == name


def test_non_finite_constants_are_refused():
    with pytest.raises(PrintError):
        TFPrinter("float32").value(sympy.exp(1000) * x)


def test_calls():
    p = TFPrinter("float32")
    g = sympy.Symbol("grad_out", real=True)
    assert print_value(p, ir.Call("matmul", (g, y), (("transpose_b", True),))) == (
        "tf.linalg.matmul(grad_out, y, transpose_b=True)"
    )
    reduce = ir.Call("reduce_sum", (u * x,), (("axis", (1,)), ("keepdims", True)))
    assert print_value(p, reduce) == "tf.reduce_sum(upstream * x, axis=[1], keepdims=True)"
    assert print_value(p, ir.Call("unbroadcast", (u, x))) == "_unbroadcast(upstream, x)"
    shape = ir.Call("broadcast_shape", (x, y))
    assert print_value(p, ir.Call("broadcast_to", (x, shape))) == (
        "tf.broadcast_to(x, tf.broadcast_dynamic_shape(tf.shape(x), tf.shape(y)))"
    )
    with pytest.raises(ValueError):
        ir.Call("gradients", (x,))


def test_never_prints_tf_gradients():
    # SymPy's own TensorFlow printer turns Derivative into tf.gradients; ours refuses.
    with pytest.raises(PrintError):
        TFPrinter("float32").value(sympy.Derivative(x**2, x, evaluate=False))
