"""`fuse: xla` (examples/fused.yaml): each op's forward and gradient are one
XLA-compiled function. Every mode of the emitted tests' matrix (eager, tf.function,
None dims, TF1 graph + Session, XLA, second order) runs on them in
tests/test_mode_matrix.py; here: jacobians, Keras, SavedModel, MirroredStrategy, the
input checks, the stable forms, what the code looks like, and the build's refusals.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from gradgen.loading import runtime_of

from conftest import GENERATED, ROOT, import_source, run_python


@pytest.fixture(scope="module")
def fused(tf):
    """examples/fused.yaml's module, its XLA kernels used at every size (these tests'
    tensors are small: by default those run without XLA, see test_small_static_shapes_
    run_the_kernels_code_without_xla)."""
    module = import_source("fuse_fused", GENERATED / "fused.py")
    runtime_of(module)._FUSE_FROM = 0  # this copy's runtime: by_size has its own
    return module


@pytest.fixture(scope="module")
def by_size(tf):
    """The same module with its default size threshold."""
    return import_source("fuse_by_size", GENERATED / "fused.py")


def test_each_op_is_two_xla_kernels():
    source = (GENERATED / "fused.py").read_text()
    for name in ("softplus", "gelu_tanh", "mish", "huber", "layer_norm", "dense", "polar"):
        for kernel in ("forward", "backward"):
            assert (f"@tf.function(jit_compile=True, reduce_retracing=True)\n"
                    f"def _{name}_{kernel}(") in source
    # memory: recompute (the default with fuse): the backward kernel takes the inputs
    # and the upstream only
    assert "def _mish_backward(x, upstream):" in source
    # memory: save: the values the backward uses come from the forward kernel
    assert "out, r, mask = forward(pred, target)" in source
    assert ("forward, backward = _fused_kernels(_huber_forward, _huber_backward, pred, "
            "target)") in source


def _value_and_gradient(tf, op, x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = op(x)
    return y.numpy(), tape.gradient(y, x).numpy()


def test_small_static_shapes_run_the_kernels_code_without_xla(tf, by_size, fused):
    """Below _FUSE_FROM elements of known shape the kernels are not called (nor
    compiled); at or above it, and wherever a dim is unknown while tracing, they are.
    Both paths run the same statements; XLA's CPU tanh rounds differently from
    TensorFlow's (1 - tanh(u) is 0 from u = 8.0 in one, 7.9 in the other: gelu_tanh's
    gradient near x = -4.9 is 0 or -3.7e-6), so they agree to 1e-5."""
    threshold = runtime_of(by_size)._FUSE_FROM
    small = tf.linspace(-30.0, 30.0, threshold - 1)
    large = tf.linspace(-30.0, 30.0, threshold)
    counts = lambda: (by_size._gelu_tanh_forward.experimental_get_tracing_count(),
                      by_size._gelu_tanh_backward.experimental_get_tracing_count())
    before = counts()
    plain = _value_and_gradient(tf, by_size.gelu_tanh, small)
    assert counts() == before
    kernels = _value_and_gradient(tf, fused.gelu_tanh, small)
    for got, want in zip(plain, kernels):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    _value_and_gradient(tf, by_size.gelu_tanh, large)
    assert counts() == (before[0] + 1, before[1] + 1)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def unknown(x):
        return tf.gradients(by_size.gelu_tanh(x), x)[0]

    traced = counts()
    unknown.get_concrete_function()
    assert counts()[0] > traced[0]


@pytest.mark.parametrize("pfor", [True, False])
def test_jacobian(tf, fused, pfor):
    x = tf.constant([-2.0, 0.0, 3.0])
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = fused.gelu_tanh(x)
    jacobian = tape.jacobian(y, x, experimental_use_pfor=pfor).numpy()
    with tf.GradientTape() as tape:
        tape.watch(x)
        plain = 0.5 * x * (1 + tf.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    want = tape.gradient(plain, x).numpy()
    np.testing.assert_allclose(np.diag(jacobian), want, rtol=1e-5)
    assert np.count_nonzero(jacobian - np.diag(np.diag(jacobian))) == 0


@pytest.mark.parametrize("mode", ["eager", "compiled", "xla"])
def test_keras_model_trains(tf, fused, mode):
    keras = tf.keras

    class FusedDense(keras.layers.Layer):
        def build(self, input_shape):
            self.w = self.add_weight(shape=(4, 3), initializer="glorot_uniform", name="w")
            self.b = self.add_weight(shape=(3,), initializer="zeros", name="b")

        def call(self, x):
            return fused.gelu_tanh(fused.dense(x, self.w, self.b))

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), FusedDense(), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse",
                  run_eagerly=mode == "eager", jit_compile=mode == "xla")
    rng = np.random.default_rng(1)
    x = rng.normal(size=(64, 4)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5], [0.0]])).astype(np.float32)
    losses = model.fit(x, y, epochs=15, batch_size=16, verbose=0).history["loss"]
    assert all(np.isfinite(losses)) and losses[-1] < 0.5 * losses[0]


def test_saved_model_keeps_the_fused_gradient(tf, fused, tmp_path):
    class Module(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
        def __call__(self, x):
            return fused.softplus(x)

    path = str(tmp_path / "saved")
    tf.saved_model.save(
        Module(), path, options=tf.saved_model.SaveOptions(experimental_custom_gradients=True)
    )
    loaded = tf.saved_model.load(path)
    x = tf.constant([100.0, 0.0, -100.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = loaded(x)
    # the custom gradient (sigmoid), not autodiff of log(1 + exp(x)), NaN at 100
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), [1.0, 0.5, 0.0], atol=1e-30)


def test_mirrored_strategy_matches_a_single_device(tf):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    run = run_python(str(ROOT / "tests" / "distributed_step.py"), "fused",
                     capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert "replicas: 2" in run.stdout and "match: True" in run.stdout


def test_input_checks_and_stable_forms_are_kept(tf, fused):
    with pytest.raises(ValueError, match=r"input 'x' must have shape \[\.\.\., 16\]"):
        fused.layer_norm(np.ones((2, 8), np.float32))
    with pytest.raises(TypeError, match="must have dtype float32"):
        fused.softplus(tf.ones([2], tf.float64))
    x = tf.constant([-100.0, 0.0, 100.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fused.softplus(x)
    assert np.all(np.isfinite(y.numpy()))
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), [0.0, 0.5, 1.0], atol=1e-30)


def test_every_new_shape_compiles_once(tf, fused):
    """XLA compiles per shape; reduce_retracing keeps one trace of each kernel."""
    for n in (5, 6, 7):
        x = tf.ones([n])
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fused.mish(x)
        assert tape.gradient(y, x).shape == (n,)
    assert fused._mish_forward.experimental_get_tracing_count() <= 2


@pytest.mark.parametrize("output, message", [
    ("det(A)", "fuse: xla cannot compile det()"),
])
def test_ops_xla_cannot_compile_are_refused(tmp_path, output, message):
    from gradgen.emit import generate
    from gradgen.errors import SpecError

    spec = tmp_path / "spec.yaml"
    spec.write_text("version: 1\nmodule: m\nfuse: xla\nops:\n  - name: f\n"
                    f"    inputs: {{A: [3, 3]}}\n    output: {output}\n")
    with pytest.raises(SpecError, match=message):
        generate([str(spec)], str(tmp_path), verify=False)


def test_fuse_none_on_an_op_overrides_the_module(tmp_path):
    from gradgen.emit import generate

    spec = tmp_path / "spec.yaml"
    spec.write_text("version: 1\nmodule: m\nfuse: xla\nops:\n  - name: f\n    fuse: none\n"
                    "    inputs: {A: [3, 3]}\n    output: det(A)\n")
    text = generate([str(spec)], str(tmp_path), audit=False)["m.py"]
    assert "jit_compile" not in text
