"""Defects a new-user pass found (fresh venv, README only), each with the test that
would have failed:

* a `fuse: xla` op with `log(det(...))`, called eagerly under a tape at a second
  shape, raised "QrGrad not implemented with dynamic shapes" (the kernel is then
  traced for relaxed shapes, and TensorFlow builds the gradient of its QR);
* the emitted tests of a float32 op with an integer input failed: the float64
  reference cast the integer input to float32.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import run_python

LOG_DET = """\
version: 1
module: ld
dtype: float64
ops:
  - name: ld_fused
    fuse: xla
    inputs: {s: [..., n, n]}
    output: log(det(s))
  - name: ld_scaled
    fuse: xla
    inputs: {s: [..., n, n], w: [...]}
    output: w * log(det(s))
"""


def _spd(rng, n):
    a = rng.normal(size=(n, n))
    return a @ a.T + n * np.eye(n)


@pytest.mark.parametrize("mode", ["eager", "xla"])
def test_fused_log_det_at_several_shapes(build, tf, mode):
    module = build(LOG_DET, audit=False)
    rng = np.random.default_rng(0)
    fn = module.ld_fused
    if mode == "xla":
        fn = tf.function(fn, jit_compile=True, reduce_retracing=True)
    for n in (4, 5, 3):
        s = tf.constant(_spd(rng, n))
        with tf.GradientTape() as tape:
            tape.watch(s)
            out = fn(s)
        grad = tape.gradient(out, s)
        np.testing.assert_allclose(out.numpy(), tf.linalg.slogdet(s)[1].numpy(), rtol=1e-12)
        np.testing.assert_allclose(grad.numpy(), np.linalg.inv(s.numpy()).T, rtol=1e-10)


def test_fused_log_det_second_order_through_the_value(build, tf):
    """d/ds of (d/dw of w * log|det s|) = inverse(s)^T: the QR helper's own VJP."""
    module = build(LOG_DET, audit=False)
    rng = np.random.default_rng(1)
    for n in (4, 5):
        s, w = tf.constant(_spd(rng, n)), tf.constant(0.5, tf.float64)
        with tf.GradientTape() as outer:
            outer.watch(s)
            with tf.GradientTape() as inner:
                inner.watch(w)
                out = module.ld_scaled(s, w)
            dw = inner.gradient(out, w)
        np.testing.assert_allclose(outer.gradient(dw, s).numpy(), np.linalg.inv(s.numpy()).T,
                                   rtol=1e-10)


def test_emitted_tests_of_an_integer_input_pass(tmp_path):
    """The emitted tests (against the float64 reference) of a float32 op with an int32
    input pass; they failed with "expected to be a float tensor but is a double"."""
    spec = tmp_path / "intin.yaml"
    spec.write_text("version: 1\nmodule: intin\ndtype: float32\nops:\n"
                    "  - name: scaled\n    inputs: {x: [null], k: {shape: [null], "
                    "dtype: int32}}\n    output: x * k + x**2\n")
    build = run_python("-m", "gradgen", "build", str(spec), "-o", str(tmp_path / "out"),
                       "--emit-tests", str(tmp_path / "tests"), "-q",
                       capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert build.returncode == 0, build.stderr
    (emitted,) = (tmp_path / "tests").glob("test_*.py")
    run = run_python("-m", "pytest", "-q", "-p", "no:cacheprovider", str(emitted),
                     capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:]
