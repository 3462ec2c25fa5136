"""Generated VJPs against TF autodiff of the same forward, over many expression and
shape patterns, in eager, tf.function (static and None dims), XLA and TF1 graphs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from tfmodes import MODES, run

# name: (inputs as in a spec, output(s), plain TF forward, run-time shapes per case)
CASES = {
    "scalar_times_vector": (
        {"a": [], "x": [3]}, "a * x", lambda tf, a, x: a * x, [[(), (3,)]],
    ),
    "rank_extension_and_size1": (
        {"x": [4, 1], "y": [3, 4, 5]}, "x * y + x", lambda tf, x, y: x * y + x,
        [[(4, 1), (3, 4, 5)]],
    ),
    "same_null_dim_static": (
        {"x": [None, 2]}, "2 * x**3 - x", lambda tf, x: 2 * x**3 - x,
        [[(5, 2)], [(1, 2)], [(0, 2)]],
    ),
    "simplified_away_operand": (
        {"x": [3, 1], "y": [4]}, "x - x + y", lambda tf, x, y: x - x + y,
        [[(3, 1), (4,)]],
    ),
    "simplified_away_dynamic": (
        {"x": [None, 1], "y": [None]}, "x * y / y", lambda tf, x, y: x * y / y,
        [[(3, 1), (4,)], [(1, 1), (1,)]],
    ),
    "named_dims_static": (
        {"x": ["batch", 1], "y": ["batch", 5]}, "x * exp(y)",
        lambda tf, x, y: x * tf.exp(y), [[(3, 1), (3, 5)], [(1, 1), (1, 5)]],
    ),
    "null_against_known": (
        {"x": [None], "y": [4]}, "x * y", lambda tf, x, y: x * y, [[(4,), (4,)], [(1,), (4,)]],
    ),
    "empty_batch": (
        {"x": [None, 3], "w": [3]}, "tanh(x) * w", lambda tf, x, w: tf.tanh(x) * w,
        [[(0, 3), (3,)], [(2, 3), (3,)]],
    ),
    "multi_output_different_shapes": (
        {"x": [3, 1], "y": [4]},
        {"p": "x * y", "q": "sin(x)"},
        lambda tf, x, y: (x * y, tf.sin(x)),
        [[(3, 1), (4,)]],
    ),
    "elementwise_functions": (
        {"x": [5], "y": [5]},
        "exp(x) * log(y) + sqrt(y) * tanh(x) + erf(x) + atan(x * y) + asinh(y) "
        "+ cos(x) / cosh(y) + sin(y) ** 2 + erfc(x) + log1p(y) + expm1(x)",
        lambda tf, x, y: tf.exp(x) * tf.math.log(y) + tf.sqrt(y) * tf.tanh(x)
        + tf.math.erf(x) + tf.atan(x * y) + tf.asinh(y) + tf.cos(x) / tf.cosh(y)
        + tf.sin(y) ** 2 + tf.math.erfc(x) + tf.math.log1p(y) + tf.math.expm1(x),
        [[(5,), (5,)]],
    ),
    "where_and_piecewise": (
        {"x": [6]},
        "where(x > 1, x**2, -x) + Piecewise((x**3, x < 0.8), (2*x, True))",
        lambda tf, x: tf.where(x > 1, x**2, -x) + tf.where(x < 0.8, x**3, 2 * x),
        [[(6,)]],
    ),
    "abs_and_sign": (
        {"x": [4], "y": [4]}, "Abs(x - 1) * y", lambda tf, x, y: tf.abs(x - 1) * y,
        [[(4,), (4,)]],
    ),
    "integer_and_frozen_inputs": (
        {"n": {"shape": [3], "dtype": "int32"},
         "s": {"shape": [], "differentiable": False}, "x": [3]},
        "n * x * s + x",
        lambda tf, n, s, x: tf.cast(n, x.dtype) * x * s + x,
        [[(3,), (), (3,)]],
    ),
    "output_is_an_input": ({"x": [3]}, "x", lambda tf, x: tf.identity(x), [[(3,)]]),
    "unused_input": (
        {"x": [3], "y": [2]}, "x * 3", lambda tf, x, y: x * 3 + 0 * tf.reduce_sum(y),
        [[(3,), (2,)]],
    ),
    "matmul_compound_operands": (
        {"a": [2, 3], "b": [3, 4], "bias": [4]},
        "tanh((2 * a) @ exp(b) + bias)",
        lambda tf, a, b, bias: tf.tanh(tf.linalg.matmul(2 * a, tf.exp(b)) + bias),
        [[(2, 3), (3, 4), (4,)]],
    ),
    "matmul_batch_broadcast": (
        {"a": [None, 3, 3], "x": [3, 2]}, "a @ x * 2",
        lambda tf, a, x: tf.linalg.matmul(a, x) * 2,
        [[(4, 3, 3), (3, 2)], [(1, 3, 3), (3, 2)]],
    ),
    "transpose_product": (
        {"a": [3, 2], "b": [3, 4]}, "transpose(a) @ b",
        lambda tf, a, b: tf.linalg.matmul(a, b, transpose_a=True), [[(3, 2), (3, 4)]],
    ),
}


def _spec(dtype: str = "float32") -> str:
    ops = []
    for name, (inputs, output, _, _) in CASES.items():
        op = {"name": name, "inputs": inputs}
        op["outputs" if isinstance(output, dict) else "output"] = output
        ops.append(op)
    return yaml.safe_dump(
        {"version": 1, "module": f"cases_{dtype}", "dtype": dtype, "ops": ops},
        sort_keys=False,
    )


@pytest.fixture(scope="module")
def cases(build):
    return build(_spec())


def _inputs(spec_inputs, shapes, dtype, rng):
    out = []
    for value, shape in zip(spec_inputs.values(), shapes):
        if isinstance(value, dict) and value.get("dtype") == "int32":
            out.append(rng.integers(-3, 4, shape).astype(np.int32))
        else:
            out.append(rng.uniform(0.3, 1.7, shape).astype(dtype))
    return out


def _declared(spec_inputs):
    out = []
    for value in spec_inputs.values():
        shape = value["shape"] if isinstance(value, dict) else value
        out.append([d if isinstance(d, int) else None for d in shape])
    return out


PARAMS = [
    (name, i, mode)
    for name, case in CASES.items()
    for i in range(len(case[3]))
    for mode in MODES + ("xla",)
]


@pytest.mark.parametrize("name, i, mode", PARAMS)
def test_matches_autodiff(tf, cases, name, i, mode):
    spec_inputs, _, plain, shape_list = CASES[name]
    rng = np.random.default_rng(i)
    inputs = _inputs(spec_inputs, shape_list[i], np.float32, rng)
    ref_outs, ref_grads = run(
        tf, lambda *a: plain(tf, *a), inputs,
        [np.ones(np.shape(o), np.float32) for o in
         _as_tuple(plain(tf, *[tf.constant(x) for x in inputs]))], "eager",
    )
    upstreams = [rng.normal(size=np.shape(o)).astype(np.float32) for o in ref_outs]
    ref_outs, ref_grads = run(tf, lambda *a: plain(tf, *a), inputs, upstreams, "eager")
    outs, grads = run(tf, getattr(cases, name), inputs, upstreams, mode, _declared(spec_inputs))
    for got, want in zip(outs, ref_outs):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-5)
    for (input_name, value), x, got, want in zip(spec_inputs.items(), inputs, grads, ref_grads):
        frozen = isinstance(value, dict) and (
            value.get("differentiable") is False or value.get("dtype") == "int32"
        )
        if frozen:
            assert got is None, input_name
            continue
        assert got is not None and got.shape == x.shape and got.dtype == x.dtype, input_name
        want = np.zeros_like(x) if want is None else want
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-5, err_msg=input_name)


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


# Per-dtype tolerance of a gradient of a few roundings (a few units in the last place;
# float64 tight enough to catch a constant printed in float32 precision).
DTYPE_RTOL = {"float16": 4e-3, "bfloat16": 3e-2, "float64": 1e-12}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_dtypes_are_preserved(tf, build, dtype):
    module = build(_spec(dtype))
    values = np.array([-0.5, 0.25, 0.5, 1.0, 1.5, 2.0])
    x = tf.constant(values, dtype=dtype)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = module.where_and_piecewise(x)
    g = tape.gradient(y, x)
    assert y.dtype == x.dtype and g.dtype == x.dtype
    # d/dx of where(x > 1, x**2, -x) + Piecewise((x**3, x < 0.8), (2*x, True)), by hand
    ref = np.where(values > 1, 2 * values, -1.0) + np.where(values < 0.8, 3 * values**2, 2.0)
    np.testing.assert_allclose(g.numpy().astype(np.float64), ref, rtol=DTYPE_RTOL[dtype])


def _elementwise_reference(x, y):
    """Forward and gradient of CASES["elementwise_functions"], written out by hand with
    the math module (not from gradgen, not from TF)."""
    two_over_sqrt_pi = 2 / math.sqrt(math.pi)
    forward = (math.exp(x) * math.log(y) + math.sqrt(y) * math.tanh(x) + math.erf(x)
               + math.atan(x * y) + math.asinh(y) + math.cos(x) / math.cosh(y)
               + math.sin(y) ** 2 + math.erfc(x) + math.log1p(y) + math.expm1(x))
    dx = (math.exp(x) * math.log(y) + math.sqrt(y) * (1 - math.tanh(x) ** 2)
          + two_over_sqrt_pi * math.exp(-x * x) + y / (1 + (x * y) ** 2)
          - math.sin(x) / math.cosh(y) - two_over_sqrt_pi * math.exp(-x * x) + math.exp(x))
    dy = (math.exp(x) / y + math.tanh(x) / (2 * math.sqrt(y)) + x / (1 + (x * y) ** 2)
          + 1 / math.sqrt(1 + y * y) - math.cos(x) * math.sinh(y) / math.cosh(y) ** 2
          + 2 * math.sin(y) * math.cos(y) + 1 / (1 + y))
    return forward, dx, dy


def test_float64_values_and_gradients_match_hand_derived_formulas(tf, build):
    """float64 ops against formulas written here, to 1e-10: a wrong constant, a function
    printed as another, or a float32 intermediate fails."""
    module = build(_spec("float64"))
    # negative x too (the functions' domains allow it; y > 0 for log and sqrt)
    xs = np.array([-1.7, -0.4, 0.3, 0.9, 1.6])
    ys = np.array([0.2, 1.3, 0.7, 2.5, 0.45])
    x, y = tf.constant(xs, tf.float64), tf.constant(ys, tf.float64)
    x4, y4 = x[:4], y[:4]  # abs_and_sign is declared [4]
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([x, y, x4, y4])
        out = module.elementwise_functions(x, y)
        kink = module.abs_and_sign(x4, y4)
    gx, gy = tape.gradient(out, [x, y])
    want = np.array([_elementwise_reference(a, b) for a, b in zip(xs, ys)])
    np.testing.assert_allclose(out.numpy(), want[:, 0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gx.numpy(), want[:, 1], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gy.numpy(), want[:, 2], rtol=1e-10, atol=1e-12)
    # Abs(x - 1) * y: d/dx = sign(x - 1) * y, d/dy = |x - 1| (no point at the kink x = 1)
    kx, ky = tape.gradient(kink, [x4, y4])
    xs, ys = xs[:4], ys[:4]
    np.testing.assert_allclose(kink.numpy(), np.abs(xs - 1) * ys, rtol=1e-14)
    np.testing.assert_allclose(kx.numpy(), np.sign(xs - 1) * ys, rtol=1e-14)
    np.testing.assert_allclose(ky.numpy(), np.abs(xs - 1), rtol=1e-14)


@pytest.mark.parametrize("name", ["elementwise_functions", "abs_and_sign"])
def test_second_order_matches_autodiff(tf, cases, name):
    _, _, plain, shapes = CASES[name]
    rng = np.random.default_rng(3)
    x, y = (tf.constant(rng.uniform(0.3, 1.7, s).astype(np.float32)) for s in shapes[0])
    fn = getattr(cases, name)
    results = []
    for f in (fn, lambda a, b: plain(tf, a, b)):
        with tf.GradientTape(persistent=True) as outer:
            outer.watch([x, y])
            with tf.GradientTape() as inner:
                inner.watch([x, y])
                out = f(x, y)
            gx, gy = inner.gradient(out, [x, y])
        results.append([outer.gradient(gx, x), outer.gradient(gx, y), outer.gradient(gy, y)])
    for got, want in zip(*results):
        got = np.zeros(x.shape) if got is None else got
        want = np.zeros(x.shape) if want is None else want
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_keyword_and_mixed_calls_use_the_custom_gradient(tf, cases):
    x = tf.constant([[1.0], [2.0], [3.0]])
    y = tf.constant([1.0, 2.0, 3.0, 4.0])
    for call in (
        lambda: cases.multi_output_different_shapes(x, y),
        lambda: cases.multi_output_different_shapes(x=x, y=y),
        lambda: cases.multi_output_different_shapes(x, y=y),
    ):
        with tf.GradientTape() as tape:
            tape.watch([x, y])
            p, q = call()
        gx, gy = tape.gradient([p, q], [x, y])
        np.testing.assert_allclose(gx.numpy().ravel(), 10 + np.cos([1.0, 2.0, 3.0]), rtol=1e-6)
        np.testing.assert_allclose(gy, [6.0] * 4)


@pytest.mark.parametrize(
    "op, args, error, message",
    [
        # larger and smaller than a declared dim, in either input
        ("rank_extension_and_size1", ([4, 2], [3, 4, 5]), ValueError,
         r"rank_extension_and_size1: input 'x' must have shape \[4, 1\], got \(4, 2\)"),
        ("rank_extension_and_size1", ([3, 1], [3, 4, 5]), ValueError,
         r"rank_extension_and_size1: input 'x' must have shape \[4, 1\], got \(3, 1\)"),
        ("rank_extension_and_size1", ([4, 1], [3, 4, 4]), ValueError,
         r"rank_extension_and_size1: input 'y' must have shape \[3, 4, 5\], got \(3, 4, 4\)"),
        ("scalar_times_vector", ([], [2]), ValueError,
         r"scalar_times_vector: input 'x' must have shape \[3\], got \(2,\)"),
        # wrong rank: one dim too many, one too few, a scalar for a vector
        ("rank_extension_and_size1", ([1, 4, 1], [3, 4, 5]), ValueError,
         r"rank_extension_and_size1: input 'x' must have shape \[4, 1\], got \(1, 4, 1\)"),
        ("rank_extension_and_size1", ([4, 1], [4, 5]), ValueError,
         r"rank_extension_and_size1: input 'y' must have shape \[3, 4, 5\], got \(4, 5\)"),
        ("scalar_times_vector", ([1], [3]), ValueError,
         r"scalar_times_vector: input 'a' must have shape \[\], got \(1,\)"),
        ("same_null_dim_static", ([5],), ValueError,
         r"same_null_dim_static: input 'x' must have shape \[None, 2\], got \(5,\)"),
        # wrong dtype, in the first and in a later input
        ("output_is_an_input", ((3, "float64"),), TypeError,
         "output_is_an_input: input 'x' must have dtype float32, got float64"),
        ("null_against_known", ([4], (4, "float16")), TypeError,
         "null_against_known: input 'y' must have dtype float32, got float16"),
        ("scalar_times_vector", ((None, "int32"), [3]), TypeError,
         "scalar_times_vector: input 'a' must have dtype float32, got int32"),
    ],
)
def test_input_checks_name_op_input_and_expected_vs_got(tf, cases, op, args, error, message):
    tensors = []
    for arg in args:
        if isinstance(arg, tuple) and len(arg) == 2 and isinstance(arg[1], str):
            shape, dtype = arg
            shape = [] if shape is None else [shape]
            tensors.append(tf.ones(shape, getattr(tf, dtype)))
        else:
            tensors.append(tf.ones(arg))
    with pytest.raises(error, match=message):
        getattr(cases, op)(*tensors)


def test_named_dims_must_agree(tf, cases):
    with pytest.raises(ValueError, match="named_dims_static: .*dim 'batch' must have one size"):
        cases.named_dims_static(tf.ones([2, 1]), tf.ones([3, 5]))
    assert cases.named_dims_static(tf.ones([3, 1]), tf.ones([3, 5])).shape == (3, 5)


def test_second_order_in_tf1_graphs(tf, cases):
    values = np.array([0.3, 0.9, 1.4, 0.2, 1.1], np.float32)
    results = []
    for fn in (cases.elementwise_functions, lambda a, b: CASES["elementwise_functions"][2](tf, a, b)):
        graph = tf.Graph()
        with graph.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [None])
            y = tf.compat.v1.placeholder(tf.float32, [None])
            out = tf.reduce_sum(fn(x, y))
            hessian = tf.hessians(out, [x, y])
            with tf.compat.v1.Session(graph=graph) as session:
                results.append(session.run(hessian, {x: values, y: values[::-1].copy()}))
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_variables_receive_gradients(tf, cases):
    x = tf.Variable([[1.0], [2.0], [3.0]])
    y = tf.Variable([1.0, 2.0, 3.0, 4.0])
    with tf.GradientTape() as tape:
        p, q = cases.multi_output_different_shapes(x, y)
        loss = tf.reduce_sum(p) + tf.reduce_sum(q)
    gx, gy = tape.gradient(loss, [x, y])
    np.testing.assert_allclose(gx.numpy().ravel(), 10 + np.cos([1.0, 2.0, 3.0]), rtol=1e-6)
    np.testing.assert_allclose(gy, [6.0] * 4)
