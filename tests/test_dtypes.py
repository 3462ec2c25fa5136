"""Ops generated for several float dtypes (`dtype: floating` or a list): one public
function that follows its arguments' dtype like a TensorFlow op.

The stability suite (test_stability.py) builds its spec this way and checks every op at
its extreme points in each dtype against a 50-digit reference; here: dtypes of outputs
and gradients, values against TF's autodiff of the plain forward in that dtype, the
errors, Keras variables and mixed precision, and the TF modes.
"""

from __future__ import annotations

import numpy as np
import pytest

from gradgen.cli import main

DTYPES = ("float16", "bfloat16", "float32", "float64")
RTOL = {"float16": 2e-3, "bfloat16": 2e-2, "float32": 1e-5, "float64": 1e-12}

SPEC = """\
version: 1
module: generic
dtype: floating
ops:
  - name: softplus
    inputs: {x: [...]}
    output: log(1 + exp(x))
  - name: scaled
    inputs: {x: [batch, 3], w: [3], n: {shape: [], dtype: int32}}
    where: {z: x * w}
    output: n * tanh(z) + z**2 / 2
  - name: half_only
    dtype: [float16, bfloat16]
    inputs: {x: [2]}
    output: exp(x) - 1
  - name: one_dtype
    dtype: float64
    inputs: {x: [2]}
    output: exp(x) - 1
"""


@pytest.fixture(scope="module")
def generic(build):
    return build(SPEC)


def _plain_scaled(tf, x, w, n):
    z = x * w
    return tf.cast(n, x.dtype) * tf.tanh(z) + z**2 / 2


@pytest.mark.parametrize("dtype", DTYPES)
def test_outputs_and_gradients_follow_the_arguments_dtype(tf, generic, dtype):
    rng = np.random.default_rng(0)
    x = tf.cast(tf.constant(rng.uniform(-2, 2, (4, 3))), dtype)
    w = tf.cast(tf.constant(rng.uniform(-2, 2, 3)), dtype)
    n = tf.constant(3)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([x, w])
        got = generic.scaled(x, w, n)
        want = _plain_scaled(tf, x, w, n)
        flat = tf.reshape(x, [-1])
        soft = generic.softplus(flat)
        soft_want = tf.math.log(1 + tf.exp(flat))
    assert got.dtype == soft.dtype == tf.as_dtype(dtype)
    pairs = [(got, want, x), (got, want, w), (soft, soft_want, x)]
    for out, ref, arg in pairs:
        g, r = tape.gradient(out, arg), tape.gradient(ref, arg)
        assert g.dtype == arg.dtype and g.shape == arg.shape
        np.testing.assert_allclose(g.numpy().astype(np.float64), r.numpy().astype(np.float64),
                                   rtol=RTOL[dtype] * 4, atol=RTOL[dtype] * 4)
    np.testing.assert_allclose(got.numpy().astype(np.float64),
                               want.numpy().astype(np.float64), rtol=RTOL[dtype] * 4,
                               atol=RTOL[dtype] * 4)


@pytest.mark.parametrize("dtype", DTYPES)
def test_stable_form_per_dtype_where_autodiff_is_nan(tf, generic, dtype):
    x = tf.constant([-30.0, 0.0, 30.0, 80.0], dtype)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = generic.softplus(x)
    grad = tape.gradient(y, x).numpy().astype(np.float64)
    assert np.all(np.isfinite(y.numpy().astype(np.float64))) and np.all(np.isfinite(grad))
    np.testing.assert_allclose(grad[1:], [0.5, 1.0, 1.0], rtol=RTOL[dtype] * 4)


def test_host_values_take_the_default_or_their_numpy_float_dtype(tf, generic):
    assert generic.softplus([1.0, 2.0]).dtype == tf.float32
    assert generic.softplus(np.array([1.0])).dtype == tf.float64  # like a tensor
    assert generic.softplus(np.array([1.0], np.float16)).dtype == tf.float16
    assert generic.softplus(np.array([1, 2])).dtype == tf.float32  # integers convert
    assert generic.half_only([1.0, 2.0]).dtype == tf.float16  # no float32: the widest
    x = tf.constant([[1.0, 2.0, 3.0]], tf.float64)
    assert generic.scaled(x, [1.0, 2.0, 3.0], 2).dtype == tf.float64  # numbers follow x


def test_mixed_and_unsupported_dtypes_are_the_ops_type_errors(tf, generic):
    import keras

    x, w = tf.ones([2, 3]), tf.ones([3], tf.float64)
    with pytest.raises(TypeError, match=r"scaled: inputs 'x' \(float32\) and 'w' "
                                        r"\(float64\) have different dtypes"):
        generic.scaled(x, w, 1)
    with pytest.raises(TypeError, match=r"half_only: input 'x' has dtype float32; "
                                        r"half_only takes float16, bfloat16"):
        generic.half_only(tf.ones([2]))
    with pytest.raises(TypeError, match=r"softplus: input 'x' has dtype int32"):
        generic.softplus(tf.constant([1, 2]))
    with pytest.raises(TypeError, match=r"softplus: input 'x' has dtype complex64"):
        generic.softplus(keras.Variable(np.ones(3, np.complex64)))
    # a one-dtype op refuses a Keras variable of another dtype with its own message
    with pytest.raises(TypeError, match=r"one_dtype: input 'x' must have dtype float64, "
                                        r"got float16"):
        generic.one_dtype(keras.Variable(np.ones(2, np.float16)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_tf_function_with_none_dims_and_xla(tf, generic, dtype):
    signature = [tf.TensorSpec([None, 3], dtype), tf.TensorSpec([3], dtype),
                 tf.TensorSpec([], tf.int32)]

    def step(x, w, n):
        with tf.GradientTape() as tape:
            tape.watch(w)
            y = generic.scaled(x, w, n)
        return y, tape.gradient(y, w)

    x = tf.cast(tf.reshape(tf.range(6), [2, 3]) / 6, dtype)
    w = tf.cast(tf.constant([0.5, -1.0, 2.0]), dtype)
    eager = step(x, w, 2)
    for jit in (False, True):
        graph = tf.function(step, input_signature=signature, jit_compile=jit)(x, w, 2)
        for a, b in zip(eager, graph):
            assert a.dtype == b.dtype == tf.as_dtype(dtype)
            np.testing.assert_allclose(a.numpy().astype(np.float64),
                                       b.numpy().astype(np.float64), rtol=RTOL[dtype] * 8)


def test_keras_mixed_float16_trains_without_casts(tf, generic):
    import keras

    class Scaled(keras.layers.Layer):
        def build(self, shape):
            self.w = self.add_weight(shape=(3,), initializer="ones")

        def call(self, x):
            return generic.scaled(x, self.w, 2)  # x float16, w read as float16

    old = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        layer = Scaled()
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(3), layer,
                                  keras.layers.Dense(1, dtype="float32")])
        model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
        rng = np.random.default_rng(0)
        x, y = rng.normal(size=(64, 3)).astype("float32"), rng.normal(size=(64, 1))
        before = layer.w.numpy().copy()
        history = model.fit(x, y, epochs=2, batch_size=16, verbose=0)
        assert layer.w.dtype == "float32" and layer.compute_dtype == "float16"
        assert np.all(np.isfinite(history.history["loss"]))
        assert not np.allclose(layer.w.numpy(), before)  # the op's gradient reached w
    finally:
        keras.mixed_precision.set_global_policy(old)


def test_keras_mixed_bfloat16_runs(tf, generic):
    import keras

    old = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(3),
                                  keras.layers.Lambda(
                                      lambda t: generic.scaled(t, [1.0, 0.5, 2.0], 2)),
                                  keras.layers.Dense(1, dtype="float32")])
        model.compile(optimizer="sgd", loss="mse")
        history = model.fit(np.ones((8, 3), "float32"), np.ones((8, 1)), verbose=0)
        assert np.all(np.isfinite(history.history["loss"]))
    finally:
        keras.mixed_precision.set_global_policy(old)


def test_generated_code_shares_a_function_between_dtypes_with_the_same_code(tmp_path):
    from click.testing import CliRunner

    (tmp_path / "s.yaml").write_text(SPEC.replace("[...]", "[null]"))
    result = CliRunner().invoke(main, ["build", str(tmp_path / "s.yaml"), "-o",
                                       str(tmp_path / "out")])
    assert result.exit_code == 0, result.stderr
    text = (tmp_path / "out" / "generic.py").read_text()
    # softplus prints no dtype: one function; scaled casts n to the dtype: one each
    assert "def _softplus_vjp(x):" in text and "_softplus_float16_vjp" not in text
    for dtype in DTYPES:
        assert f"def _scaled_{dtype}_vjp(x, w, n):" in text
        assert f"Accuracy audit ({dtype}," in text


@pytest.mark.parametrize("text, message", [
    ("dtype: floating\n", None),
    ("dtype: [float32, complex64]\n", "dtype"),
    ("dtype: []\n", "dtype"),
])
def test_dtype_sets_in_the_spec(tmp_path, text, message):
    from click.testing import CliRunner

    spec = ("version: 1\nmodule: m\n" + text +
            "ops:\n  - name: f\n    inputs: {x: [2]}\n    output: exp(x)\n")
    (tmp_path / "s.yaml").write_text(spec)
    result = CliRunner().invoke(main, ["build", str(tmp_path / "s.yaml"), "-o",
                                       str(tmp_path / "out")])
    if message is None:
        assert result.exit_code == 0, result.stderr
    else:
        assert result.exit_code == 2 and "s.yaml:3:" in result.stderr, result.stderr


def test_an_input_of_a_generic_op_cannot_fix_a_float_dtype(tmp_path):
    from click.testing import CliRunner

    spec = ("version: 1\nmodule: m\nops:\n  - name: f\n    dtype: floating\n"
            "    inputs: {x: [2], y: {shape: [2], dtype: float32}}\n    output: x * y\n")
    (tmp_path / "s.yaml").write_text(spec)
    result = CliRunner().invoke(main, ["build", str(tmp_path / "s.yaml"), "-o",
                                       str(tmp_path / "out")])
    assert result.exit_code == 2
    assert ("op 'f', field 'inputs.y.dtype': input 'y' declares dtype float32, but the op "
            "is generated for float16, bfloat16, float32, float64") in result.stderr


def test_a_float_dtype_on_the_only_input_of_a_generic_op_is_refused(tmp_path):
    """It made the op silently one-dtype (float64 only) where the spec said floating."""
    from gradgen.errors import SpecError
    from gradgen.spec import parse_spec

    text = ("version: 1\nmodule: m\ndtype: floating\nops:\n  - name: f\n"
            "    inputs: {a: {shape: [3], dtype: float64}}\n    output: a\n")
    with pytest.raises(SpecError, match="input 'a' declares dtype float64, but the op is "
                       "generated for float16, bfloat16, float32, float64"):
        parse_spec(text.encode(), "s.yaml")
    ints = text.replace("dtype: float64", "dtype: int32")  # integer inputs only: one dtype
    assert parse_spec(ints.encode(), "s.yaml").model.ops[0].dtype == "float32"
