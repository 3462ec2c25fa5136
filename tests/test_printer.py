"""The SymPy -> TensorFlow printer."""

from __future__ import annotations

import sympy
import pytest

from gradgen import ir
from gradgen.functions import expm1, log1p, sigmoid, softplus, xdivy
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
        # with two or more tensor factors the constant comes last: 2.0 * s overflows
        # (s > 1.7e38 in float32) before a t of 0 makes the product 0
        (2 * x * y, "x * y * 2.0"),
        (2 * x / y, "x * 2.0 / y"),
        (-3 * x * y, "-x * y * 3.0"),
        # a factor whose 0 is exact first: (y - 1) * upstream overflows (y = 3.4e38)
        # before xdivy's 0 makes the product 0 (x**y's second derivative at x = -1e-38)
        ((y - 1) * u * xdivy(x, y), "tf.math.xdivy(x, y) * upstream * (y - 1.0)"),
        (u * xdivy(x, y), "upstream * tf.math.xdivy(x, y)"),
        (2 * x * y / (3 * sympy.sqrt(sympy.pi)), "x * y * ((2/3)/math.sqrt(math.pi))"),
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
    # a number branch beside a tensor comes after it, under the negated condition
    assert p.value(sympy.Piecewise((1, x > 0), (x, True))) == "tf.where(x <= 0.0, x, 1.0)"
    assert p.value(sympy.Piecewise((1, x > 0), (2, x < -1), (0, True))) == (
        "tf.where(x <= 0.0, tf.where(x < -1.0, tf.constant(2.0, dtype=tf.float16), "
        "tf.constant(0.0, dtype=tf.float16)), 1.0)"
    )
    assert "tf.constant(2.0" not in p.value(2 * x)  # Python float * tensor keeps dtype
    assert p.value(sympy.Eq(x, 1)) == "tf.math.equal(x, 1.0)"


def test_math_constants_are_tracked():
    p = TFPrinter("float64")
    assert p.value(softplus(2) * x) == "2.1269280110429727 * x"  # math has no softplus
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


n = sympy.Symbol("n", negative=True)
z = sympy.Symbol("z", real=True)


@pytest.mark.parametrize(
    "dtype, expr, text",
    [
        # numbers alone: typed constants; rationals exact in binary as decimals
        ("float32", sympy.Rational(3, 8), "tf.constant(0.375, dtype=tf.float32)"),
        ("float32", sympy.Rational(2, 3), "tf.constant((2.0 / 3.0), dtype=tf.float32)"),
        ("float32", sympy.Rational(-2, 3), "tf.constant(-(2.0 / 3.0), dtype=tf.float32)"),
        ("float32", sympy.Rational(-3, 4), "tf.constant(-0.75, dtype=tf.float32)"),
        ("float32", sympy.Rational(1, 12), "tf.constant((1.0 / 12.0), dtype=tf.float32)"),
        ("complex64", 1 + 2 * sympy.I, "tf.constant((1+2j), dtype=tf.complex64)"),
        ("complex64", sympy.I * x, "1j * x"),
        ("float64", sympy.sqrt(2), "tf.constant(math.sqrt(2), dtype=tf.float64)"),
        # powers: products up to the 4th, square of a non-atom, pow beyond
        ("float32", x**4, "x * x * x * x"),
        ("float32", x**5, "tf.math.pow(x, 5.0)"),
        ("float32", (x + 1) ** -3, "1.0 / tf.math.pow(x + 1.0, 3.0)"),
        # half precision keeps x**-n (n > 1) as one pow; x**-1 is still a division
        ("float16", x**-1, "1.0 / x"),
        ("float16", x**-2, "tf.math.pow(x, -2.0)"),
        ("float16", x**-3 * y, "tf.math.pow(x, -3.0) * y"),
        ("bfloat16", x**-2, "tf.math.pow(x, -2.0)"),
        ("float32", x**-3, "1.0 / (x * x * x)"),
        ("float16", x ** sympy.Rational(-1, 4), "tf.math.pow(x, -0.25)"),
        # products: signs, several denominators, negative symbols need no parentheses
        ("float32", x / (3 * y * z), "x / (3.0 * y * z)"),
        ("float32", x * n, "n * x"),
        ("float32", x * (n + 1), "x * (n + 1.0)"),
        # (a coefficient that is not an atom or a call is parenthesized: redundant here)
        ("float32", -sympy.sqrt(2) * x, "-(math.sqrt(2)) * x"),
        ("float32", sympy.sqrt(2) * x, "(math.sqrt(2)) * x"),
        ("float32", -sympy.sqrt(2) * sympy.pi * x, "-(math.sqrt(2)*math.pi) * x"),
        ("float32", x / (y + 1) ** 2, "x / tf.math.square(y + 1.0)"),
        ("float32", x / y**sympy.Rational(3, 2), "x / tf.math.pow(y, 1.5)"),
        ("float32", x / sympy.sqrt(y), "x * tf.math.rsqrt(y)"),
        # indicators: a * [c]
        ("float32", sympy.Piecewise((3, x > 0), (0, True)), "3.0 * tf.cast(x > 0.0, tf.float32)"),
        ("float64", sympy.Piecewise((1, x > 0), (0, True)), "tf.cast(x > 0.0, tf.float64)"),
        ("float32", sympy.Piecewise((x, x > 0), (y, x < -1), (0, True)),
         "tf.where(x > 0.0, x, tf.where(x < -1.0, y, 0.0))"),
        # conditions
        ("float32", sympy.Piecewise((x, sympy.Ne(1, x)), (0, True)),
         "tf.where(tf.math.not_equal(x, 1.0), x, 0.0)"),
        ("float32", sympy.Piecewise((x, sympy.Not(x > 0)), (0, True)),
         "tf.where(x <= 0.0, x, 0.0)"),
        ("float32", sympy.Piecewise((x, (x > 0) & (y > 0) & (z > 0)), (0, True)),
         "tf.where(tf.math.logical_and(tf.math.logical_and(x > 0.0, y > 0.0), z > 0.0), x, 0.0)"),
        ("float32", sympy.Piecewise((x, (x > 0) | (y > 0)), (0, True)),
         "tf.where(tf.math.logical_or(x > 0.0, y > 0.0), x, 0.0)"),
        ("float32", sympy.Max(y, x, 2), "tf.math.maximum(tf.math.maximum(x, y), 2.0)"),
        ("float32", sympy.Min(2, x), "tf.math.minimum(x, 2.0)"),
    ],
)
def test_expressions_by_dtype(dtype, expr, text):
    assert TFPrinter(dtype).value(expr) == text


def test_opaque_steps():
    from gradgen import functions as fn

    p = TFPrinter("float32")
    assert p.value(fn.Square(x)) == "x * x"
    assert p.value(fn.Square(x + 1)) == "tf.math.square(x + 1.0)"
    assert p.value(fn.Recip(x + 1)) == "(1.0 / (x + 1.0))"
    assert p.value(fn.Square(fn.Recip(x + 1))) == "tf.math.square(1.0 / (x + 1.0))"
    # a square written as a product is parenthesized as a divisor (was x / x * x)
    assert p.value(fn.Ratio(x, fn.Square(x))) == "(x / (x * x))"
    assert p.value(fn.Recip(fn.Square(x))) == "(1.0 / (x * x))"
    assert p.value(sympy.erf(fn.Recip(x + 1))) == "_erf(1.0 / (x + 1.0))"
    # a ratio kept as written: the numerator parenthesized unless it is a name, a call
    # or a power
    assert [p.value(fn.Ratio(a, b)) for a, b in ((x + 1, y), (x, y), (sympy.exp(x), y + 1),
                                                 (x**2, y), (2 * x, y))] == [
        "((x + 1.0) / y)", "(x / y)", "(tf.math.exp(x) / (y + 1.0))", "(x * x / y)",
        "((2.0 * x) / y)"]
    assert p.value(fn.Guard(x, x > 0, 1)) == "tf.where(x > 0.0, x, 1.0)"
    assert p.value(fn.nan_outside(x + 1, x >= -1)) == (
        "tf.where(x >= -1.0, x + 1.0, tf.constant(math.nan, dtype=tf.float32))"
    )
    assert p.uses_math
    # a constant held as an atom: c/q as (c / q); other constants parenthesized when compound
    assert p.value(fn.Const(sympy.sqrt(2) / 2) * x) == "(math.sqrt(2) / 2) * x"
    assert p.value(fn.Const(-sympy.sqrt(2) / 2) * x) == "(-math.sqrt(2) / 2) * x"
    assert p.value(fn.Const(3 * sympy.sqrt(2) / 2) * x) == "((3/2)*math.sqrt(2)) * x"
    assert p.value(fn.Const(sympy.sqrt(2)) * x) == "(math.sqrt(2)) * x"
    assert p.value(fn.Const(sympy.pi) * x) == "math.pi * x"
    assert p.value(fn.Const(sympy.Rational(1, 3)) * x) == "(1.0 / 3.0) * x"


class _Odd(sympy.StrictGreaterThan):
    pass


def test_print_errors_name_the_function():
    from gradgen.functions import Const

    cases = [
        (sympy.exp(1000) * x, "constant", "constant exp(1000) is not finite in float64"),
        # mpmath's own exponent overflows: an internal error until it was caught
        (Const(sympy.exp(sympy.exp(sympy.exp(1000)))) * x, "constant",
         "constant exp(exp(exp(1000))) cannot be evaluated (int too large to convert to "
         "float); it is not finite in float64"),
        (sympy.Piecewise((x, x > 0)), "Piecewise", "a Piecewise without a final True branch"),
        (sympy.Function("mystery")(x), "mystery", "mystery has no TensorFlow form"),
        (sympy.Heaviside(x), "Heaviside", "Heaviside has no TensorFlow form"),
        # a constant condition (the parser and SymPy fold where(True, ...) away first)
        (sympy.true, "True", "a constant condition"),
        # a relation the printer does not know (every SymPy one is known: a subclass)
        (_Odd(x, y), "_Odd", "_Odd has no TensorFlow form"),
    ]
    for expr, function, message in cases:
        with pytest.raises(PrintError) as info:
            TFPrinter("float32").value(expr)
        assert (info.value.function, str(info.value)) == (function, message)


def test_call_operands_are_parenthesized_unless_atomic():
    p = TFPrinter("float32")
    add, mul, div = (ir.Call(name, (x, y)) for name in ("add", "mul", "div"))
    cases = [
        # add, mul and div calls are operators: parenthesized as operands
        (ir.Call("mul", (add, u)), "(x + y) * upstream"),
        (ir.Call("mul", (mul, u)), "(x * y) * upstream"),
        (ir.Call("div", (u, div)), "upstream / (x / y)"),
        # other calls are function calls: not parenthesized
        (ir.Call("mul", (ir.Call("transpose", (x,)), u)),
         "tf.linalg.matrix_transpose(x) * upstream"),
        # a SymPy operand: parenthesized unless an atom or a function
        (ir.Call("mul", (x + y, u)), "(x + y) * upstream"),
        (ir.Call("div", (x + y, u)), "(x + y) / upstream"),
        (ir.Call("div", (u, x + y)), "upstream / (x + y)"),
        (ir.Call("div", (sympy.exp(x), y)), "tf.math.exp(x) / y"),
    ]
    for value, text in cases:
        assert print_value(p, value) == text


def test_matmul_and_eye_calls():
    p = TFPrinter("float32")
    both = ir.Call("matmul", (x, y), (("transpose_a", True), ("transpose_b", True)))
    assert print_value(p, both) == "tf.linalg.matmul(x, y, transpose_a=True, transpose_b=True)"
    assert print_value(p, ir.Call("eye", (x,), (("n", 3),))) == "tf.eye(3, dtype=tf.float32)"
    # an unknown size: the last dim of the argument, at run time
    assert print_value(p, ir.Call("eye", (x,), (("n", None),))) == (
        "tf.eye(tf.shape(x)[-1], dtype=tf.float32)"
    )


@pytest.mark.parametrize("dtype, axes, text", [
    # axes counted from the end (of a shape starting with `...`): the product of those
    # dims, read one by one (tf.gather takes no index < 0)
    ("float32", (-1,), "tf.cast(tf.shape(x)[-1], tf.float32)"),
    ("float64", (-3, -1), "tf.cast(tf.shape(x)[-3] * tf.shape(x)[-1], tf.float64)"),
    # axes from the start, axis 0 included: gathered, then multiplied
    ("float32", (0,), "tf.cast(tf.reduce_prod(tf.gather(tf.shape(x), [0])), tf.float32)"),
    ("float16", (0, 2), "tf.cast(tf.reduce_prod(tf.gather(tf.shape(x), [0, 2])), tf.float16)"),
    ("float32", (1,), "tf.cast(tf.reduce_prod(tf.gather(tf.shape(x), [1])), tf.float32)"),
])
def test_count_calls(dtype, axes, text):
    """The number of elements a mean divides by where the reduced dims are not known
    when the op is built, in the op's dtype (the mean's cotangent)."""
    assert print_value(TFPrinter(dtype), ir.Call("count", (x,), (("axes", axes),))) == text


@pytest.mark.parametrize(
    "expr, text",
    [
        # an empty numerator is 1.0
        (1 / (x * y), "1.0 / (x * y)"),
        (sympy.Rational(1, 3) / (x * y), "1.0 / (3.0 * x * y)"),
        # tensors first in a maximum, in SymPy's sort order; numbers last
        (sympy.Max(y, x**2), "tf.math.maximum(x * x, y)"),
        # a compound constant inside an expression is a literal, not a tf call
        (sympy.Max(x, sympy.sqrt(2)), "tf.math.maximum(x, math.sqrt(2))"),
        # an unevaluated E**x is an exponential
        (sympy.Pow(sympy.E, x, evaluate=False), "tf.math.exp(x)"),
        # equality with the number first: the tensor comes first
        (sympy.Eq(1, x), "tf.math.equal(x, 1.0)"),
        # `not` of a condition SymPy cannot negate (from a spec's `not (a and b)`)
        (sympy.Piecewise((x, sympy.Not((x > 0) & (y > 0))), (y, True)),
         "tf.where(tf.math.logical_not(tf.math.logical_and(x > 0.0, y > 0.0)), x, y)"),
    ],
)
def test_more_expressions(expr, text):
    assert TFPrinter("float32").value(expr) == text


def test_non_real_constants_are_complex_literals():
    # even when the imaginary part underflows in float64
    assert TFPrinter("complex128").value(1 + sympy.I * sympy.exp(-800)) == (
        "tf.constant((1+0j), dtype=tf.complex128)"
    )


def test_a_piecewise_whose_last_condition_is_not_true_is_refused():
    with pytest.raises(PrintError) as info:
        TFPrinter("float32").value(sympy.Piecewise((x, x > 0), (y, x < 0)))
    assert (info.value.function, str(info.value)) == (
        "Piecewise", "a Piecewise without a final True branch"
    )


def test_every_helper_the_printer_and_the_function_registry_name_is_declared():
    """The function registry's ``helper`` field and the printer's helper calls name
    entries of the runtime registry (gradgen/runtime.py); an undeclared name is refused."""
    from gradgen import runtime
    from gradgen.functions import declarations
    from gradgen.printer.calls import _REDUCTION_HELPERS

    named = {f.helper for f in declarations.FUNCTIONS if f.helper}
    assert named and named <= set(runtime.BY_NAME)
    assert set(_REDUCTION_HELPERS.values()) <= set(runtime.BY_NAME)
    with pytest.raises(KeyError):
        TFPrinter("float32").use_helper("_not_a_helper")
    for helper in runtime.HELPERS:
        assert set(helper.calls) <= set(runtime.BY_NAME), helper.name


class _Unevaluable:
    """A value SymPy cannot evaluate, with a long text."""

    def __str__(self):
        return "c" * 50

    def _sympy_(self):
        raise ValueError("not a number")


def test_a_number_in_a_message_is_short():
    """As written up to 40 characters; else 6 significant digits; else, where SymPy
    cannot evaluate it, its first 20 characters and its length."""
    from gradgen.errors import short

    assert short(sympy.Rational(1, 3)) == "1/3"
    assert short(sympy.Integer(10) ** 1200 + 7) == "1.00000e+1200"
    assert short(_Unevaluable()) == "c" * 20 + "... (50 characters)"
