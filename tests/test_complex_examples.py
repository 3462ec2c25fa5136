"""The complex128 ops of examples/complex.yaml (generated/complex_ops.py): for each op,
the gradient of a real loss L = sum(Re(conj(c) * out)) (TensorFlow's convention: the
gradient of a real L w.r.t. z is dL/dRe(z) + i dL/dIm(z)) against

* TensorFlow's autodiff of the same forward written here in plain TensorFlow (not
  gradgen's code), and
* central differences of L in the real and the imaginary part of each input element,

at random well-conditioned points. tests/test_complex.py covers elementwise ops built
from an inline spec in complex64 and complex128; this file covers the checked-in example,
the matrix VJPs (matmul with batch broadcasting, inverse, det, einsum, transpose, trace,
sum and mean) included.

TensorFlow's own gradient of tf.linalg.det is wrong for complex matrices (2.21: it
returns g * det * inv(A)^H where g * conj(det) * inv(A)^H is due; see
test_tf_det_gradient_reference), so the plain forwards here compute det by cofactor
expansion, whose autodiff is right.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import EXAMPLES, GENERATED, import_source

RNG_SEED = 20240611
AUTODIFF_RTOL = 1e-10
NUMERICAL_RTOL = 1e-6
STEP = 1e-6

# Concrete shapes of each op's inputs (null and named dims set to small sizes).
SHAPES = {
    "holomorphic": {"z": [5], "w": [5]},
    "broadcast_product": {"a": [4, 1], "b": [3]},
    "batched_matmul": {"a": [2, 1, 3, 4], "b": [5, 4, 2]},
    "inverse_product": {"M": [2, 3, 3], "v": [3, 2]},
    "det_small": {"A": [2, 2, 2], "B": [3, 3], "s": [2]},
    "det_large": {"M": [2, 4, 4]},
    "einsum_contract": {"x": [2, 3], "W": [3, 4, 5], "y": [2, 4]},
    "transpose_trace": {"A": [2, 3, 3], "B": [3, 3]},
}


def _det(tf, a):
    """det over the last two axes by cofactor expansion along the first row: only
    products and sums, so TensorFlow's autodiff of it is right for complex matrices."""
    n = a.shape[-1]
    if n == 1:
        return a[..., 0, 0]
    total = 0
    for j in range(n):
        minor = tf.concat([a[..., 1:, :j], a[..., 1:, j + 1:]], axis=-1)
        total += (-1) ** j * a[..., 0, j] * _det(tf, minor)
    return total


def plain(tf):
    """Each op's forward, written independently in plain TensorFlow."""
    mm, t = tf.linalg.matmul, tf.linalg.matrix_transpose

    def transpose_trace(A, B):
        C = mm(t(A), B)
        return (
            tf.linalg.trace(mm(C, C)),
            tf.reduce_sum(C * t(B), axis=-1, keepdims=True)
            + tf.reduce_mean(A, axis=[1, 2], keepdims=True),
        )

    def broadcast_product(a, b):
        p = a * b
        return p * tf.exp(-p), tf.exp(2.5 * tf.math.log(1 + a)) * b * b * b

    return {
        "holomorphic": lambda z, w: (
            tf.exp(z) * tf.sin(w) + tf.math.log(z) * z * z * z
            - (z * z + 1) / (w * w + 2 * z + 3)
        ),
        "broadcast_product": broadcast_product,
        "batched_matmul": lambda a, b: mm(a, b),
        "inverse_product": lambda M, v: mm(tf.linalg.inv(M), v),
        "det_small": lambda A, B, s: _det(tf, A) * s + _det(tf, B),
        "det_large": lambda M: _det(tf, M),
        "einsum_contract": lambda x, W, y: tf.einsum("bi,ijk,bj->bk", x, W, y),
        "transpose_trace": transpose_trace,
    }


@pytest.fixture(scope="module")
def cx(build):
    """examples/complex.yaml built now (not the checked-in copy: a change to gradgen is
    tested by what the ops compute, not by a diff of generated/)."""
    return build((EXAMPLES / "complex.yaml").read_text(), audit=False)


def _random(rng, shape):
    return rng.normal(size=shape) + 1j * rng.normal(size=shape)


def _point(name, seed=RNG_SEED):
    """Inputs (numpy complex128) and the loss weights' generator for op `name`."""
    rng = np.random.default_rng([seed, sorted(SHAPES).index(name)])
    inputs = []
    for shape in SHAPES[name].values():
        if len(shape) >= 2 and shape[-1] == shape[-2]:
            # well conditioned: 3 I + a random complex matrix with entries of size 0.3
            x = 3 * np.eye(shape[-1]) + 0.3 * _random(rng, shape)
        else:
            # Re in [0.5, 1.5], Im in [-0.5, 0.5]: away from log's and the power's cut
            x = rng.uniform(0.5, 1.5, shape) + 1j * rng.uniform(-0.5, 0.5, shape)
        inputs.append(x.astype(np.complex128))
    return inputs, rng


def _outputs(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


def _loss(tf, fn, args, weights):
    """L = sum_k sum(Re(conj(c_k) * out_k)): real, so its gradient is dL/dRe + i dL/dIm."""
    outs = _outputs(fn(*args))
    assert len(outs) == len(weights)
    return sum(tf.reduce_sum(tf.math.real(tf.math.conj(c) * o)) for c, o in zip(weights, outs))


def _weights(tf, fn, inputs, rng):
    outs = _outputs(fn(*[tf.constant(x) for x in inputs]))
    return [tf.constant(_random(rng, o.shape).astype(np.complex128)) for o in outs]


def _gradient(tf, fn, inputs, weights):
    args = [tf.constant(x) for x in inputs]
    with tf.GradientTape() as tape:
        tape.watch(args)
        loss = _loss(tf, fn, args, weights)
    grads = tape.gradient(loss, args)
    for x, g in zip(args, grads):
        assert g is not None and g.dtype == tf.complex128 and g.shape == x.shape
    return [g.numpy() for g in grads]


def _central_differences(tf, fn, inputs, weights, step=STEP):
    """dL/dRe(x_j) + i dL/dIm(x_j) for every element x_j of every input."""

    def loss(values):
        return float(_loss(tf, fn, [tf.constant(v) for v in values], weights))

    out = []
    for i, x in enumerate(inputs):
        grad = np.zeros(x.shape, np.complex128)
        for j in np.ndindex(x.shape):
            parts = []
            for direction in (step, 1j * step):
                values = list(inputs)
                plus, minus = x.copy(), x.copy()
                plus[j] += direction
                minus[j] -= direction
                values[i] = plus
                up = loss(values)
                values[i] = minus
                parts.append((up - loss(values)) / (2 * step))
            grad[j] = parts[0] + 1j * parts[1]
        out.append(grad)
    return out


def _close(got, want, rtol, what):
    scale = max(1.0, float(np.max(np.abs(want))))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, err_msg=what)


def check_against_autodiff(tf, module, name, seed=RNG_SEED):
    inputs, rng = _point(name, seed)
    reference = plain(tf)[name]
    generated = getattr(module, name)
    weights = _weights(tf, reference, inputs, rng)
    outs = _outputs(generated(*[tf.constant(x) for x in inputs]))
    want_outs = _outputs(reference(*[tf.constant(x) for x in inputs]))
    for got, want in zip(outs, want_outs):
        assert got.dtype == tf.complex128
        _close(got.numpy(), want.numpy(), AUTODIFF_RTOL, f"{name}: forward")
    got = _gradient(tf, generated, inputs, weights)
    want = _gradient(tf, reference, inputs, weights)
    for arg, g, w in zip(SHAPES[name], got, want):
        _close(g, w, AUTODIFF_RTOL, f"{name}: gradient of {arg} against autodiff")


def check_against_differences(tf, module, name, seed=RNG_SEED, inputs=None):
    point, rng = _point(name, seed)
    inputs = point if inputs is None else inputs
    generated = getattr(module, name)
    weights = _weights(tf, generated, inputs, rng)
    got = _gradient(tf, generated, inputs, weights)
    want = _central_differences(tf, generated, inputs, weights)
    for arg, g, w in zip(SHAPES[name], got, want):
        _close(g, w, NUMERICAL_RTOL, f"{name}: gradient of {arg} against differences")


def test_every_op_is_covered(cx):
    public = {n for n in dir(cx) if not n.startswith("_") and callable(getattr(cx, n))}
    assert public - {"tf", "math"} == set(SHAPES)


def test_tf_complex_gradient_convention(tf):
    """TensorFlow's gradient of a real L w.r.t. complex z is dL/dRe(z) + i dL/dIm(z):
    for L = Re(conj(c) z^2) that is c * conj(2 z)."""
    z0, c = 0.7 + 0.4j, 0.3 - 1.1j
    z = tf.constant(z0, tf.complex128)
    with tf.GradientTape() as tape:
        tape.watch(z)
        loss = tf.math.real(tf.math.conj(tf.constant(c, tf.complex128)) * z * z)
    got = tape.gradient(loss, z).numpy()

    def f(v):
        return (np.conj(c) * v * v).real

    h = 1e-6
    differences = (f(z0 + h) - f(z0 - h)) / (2 * h) + 1j * (f(z0 + 1j * h) - f(z0 - 1j * h)) / (2 * h)
    np.testing.assert_allclose(got, c * np.conj(2 * z0), rtol=1e-14)
    np.testing.assert_allclose(got, differences, rtol=1e-8)


def test_tf_det_gradient_reference(tf):
    """The cofactor-expansion det used as the reference has the right gradient,
    c * conj(det(A) inv(A)^T), where TensorFlow's tf.linalg.det gradient (2.21) lacks the
    conjugate of det. (If TensorFlow fixes it, the last assertion here says so and the
    reference may use tf.linalg.det again.)"""
    inputs, rng = _point("det_large")
    a = inputs[0]
    c = _random(rng, a.shape[:-2])
    cofactor = np.linalg.det(a)[:, None, None] * np.linalg.inv(a).transpose(0, 2, 1)
    expected = c[:, None, None] * np.conj(cofactor)
    weights = [tf.constant(c)]
    (ours,) = _gradient(tf, lambda m: _det(tf, m), [a], weights)
    np.testing.assert_allclose(ours, expected, rtol=1e-12)
    (tfs,) = _gradient(tf, tf.linalg.det, [a], weights)
    assert not np.allclose(tfs, expected, rtol=1e-6), "TensorFlow's complex det gradient is right now"


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_matches_autodiff_of_plain_forward(tf, cx, name):
    check_against_autodiff(tf, cx, name)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_matches_central_differences(tf, cx, name):
    check_against_differences(tf, cx, name)


def test_det_at_singular_matrices_matches_differences(tf, cx):
    """At a rank-deficient 4x4 complex matrix the cofactor comes from the SVD adjugate
    (phases det(U) conj(det(V))); det is a polynomial, so differences are exact there."""
    rng = np.random.default_rng(RNG_SEED)
    a = _random(rng, (2, 4, 4))
    a[0, :, 3] = a[0, :, 0] * (0.5 - 0.25j) + a[0, :, 1]  # rank 3
    a[1, 2] = 0.0  # a zero row: rank 3
    check_against_differences(tf, cx, "det_large", inputs=[a])
    grad = _gradient(tf, cx.det_large, [a], [tf.constant(_random(rng, (2,)))])[0]
    assert np.all(np.isfinite(grad)) and np.max(np.abs(grad)) > 1e-3


@pytest.mark.parametrize("name", ["det_small", "det_large"])
def test_a_det_vjp_without_the_conjugate_fails(tf, tmp_path, name):
    """The checks above catch a complex det VJP without its conjugate
    (grad * cofactor(A) instead of grad * conj(cofactor(A)))."""
    source = (GENERATED / "complex_ops.py").read_text()
    assert "tf.math.conj(_cofactor(" in source
    path = tmp_path / "complex_ops_no_conj.py"
    path.write_text(source.replace("tf.math.conj(_cofactor(", "(_cofactor("))
    runtime = (GENERATED / "_gradgen_runtime.py").read_text()
    (tmp_path / "_gradgen_runtime.py").write_text(runtime)
    broken = import_source(f"complex_ops_no_conj_{name}", path)
    with pytest.raises(AssertionError, match="against autodiff"):
        check_against_autodiff(tf, broken, name)
    with pytest.raises(AssertionError, match="against differences"):
        check_against_differences(tf, broken, name)


@pytest.mark.parametrize("name", ["det_small", "det_large"])
def test_second_order_matches_central_differences(tf, cx, name):
    """Second derivatives of ops that reuse det: the VJP's conj(det) depends on the input
    again, and TensorFlow's own det gradient (no conjugate for complex) made det_small's
    Hessian-vector products wrong; gradgen's _complex_det carries the right gradient."""
    inputs, rng = _point(name)
    fn = getattr(cx, name)
    weights = _weights(tf, fn, inputs, rng)

    def first_order(*args):
        with tf.GradientTape() as tape:
            tape.watch(args)
            loss = _loss(tf, fn, args, weights)
        return tuple(tape.gradient(loss, args))

    outer = _weights(tf, first_order, inputs, rng)
    got = _gradient(tf, first_order, inputs, outer)
    want = _central_differences(tf, first_order, inputs, outer)
    for i, (g, w) in enumerate(zip(got, want)):
        _close(g, w, 1e-6, f"{name} second order, input {i}")
