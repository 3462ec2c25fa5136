"""Matrix, reduction and einsum ops (examples/matrix.yaml) against TF autodiff and
numerical Jacobians, in every mode, with batch axes unbroadcast."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from conftest import EXAMPLES, GENERATED, import_source
from tfmodes import MODES, run

SIZES = {"batch": 4, "a": 3, "b": 2, "n": 3, "tq": 2, "tk": 5, "d": 3, None: 4}


def plain(tf):
    mm, t = tf.linalg.matmul, tf.linalg.matrix_transpose
    return {
        "sandwich": lambda A, X, B: mm(mm(A, X), B),
        "sandwich_any_batch": lambda A, X, B: mm(mm(A, X), B),
        "quadratic_form": lambda x, W: tf.reduce_sum(x * mm(x, t(W)), axis=-1),
        "log_det": lambda S: tf.linalg.slogdet(S)[1],  # (no XLA kernel: compared eagerly)
        "attention_scores": lambda q, k, s: tf.einsum("bqd,bkd->bqk", q, k) * s,
        "layer": lambda x, w, b: (
            tf.tanh(mm(x, w) + b),
            tf.reduce_mean(tf.tanh(mm(x, w) + b), axis=1, keepdims=True),
        ),
        "inverse_trace": lambda M: tf.linalg.trace(tf.linalg.inv(M)) + tf.linalg.det(M),
    }


@pytest.fixture(scope="module")
def spec():
    return yaml.safe_load((EXAMPLES / "matrix.yaml").read_text())


@pytest.fixture(scope="module")
def matrix(tf):
    return import_source("generated_matrix", GENERATED / "matrix.py")


def _inputs(op, dtype, rng):
    arrays, declared, frozen = [], [], []
    for value in op["inputs"].values():
        shape = value if isinstance(value, list) else value["shape"]
        concrete = [d if isinstance(d, int) else SIZES[d] for d in shape]
        x = rng.uniform(-1, 1, concrete)
        if len(concrete) >= 2 and concrete[-1] == concrete[-2]:
            x = 0.3 * x + np.eye(concrete[-1])  # well conditioned for inverse/det
        arrays.append(x.astype(dtype))
        declared.append([d if isinstance(d, int) else None for d in shape])
        frozen.append(isinstance(value, dict) and value.get("differentiable") is False)
    return arrays, declared, frozen


def _op(spec, name):
    return next(o for o in spec["ops"] if o["name"] == name)


NAMES = ["sandwich", "sandwich_any_batch", "quadratic_form", "log_det",
         "attention_scores", "layer", "inverse_trace"]


@pytest.mark.parametrize("mode", MODES + ("xla",))
@pytest.mark.parametrize("name", NAMES)
def test_matches_autodiff(tf, matrix, spec, name, mode):
    if mode == "xla" and name == "inverse_trace":
        pytest.skip("TensorFlow has no XLA kernel for det (MatrixDeterminant)")
    rng = np.random.default_rng(7)
    inputs, declared, frozen = _inputs(_op(spec, name), np.float32, rng)
    fn = plain(tf)[name]
    ref = fn(*[tf.constant(x) for x in inputs])
    ref = ref if isinstance(ref, tuple) else (ref,)
    upstreams = [rng.normal(size=r.shape).astype(np.float32) for r in ref]
    outs, grads = run(tf, getattr(matrix, name), inputs, upstreams, mode, declared)
    ref_outs, ref_grads = run(tf, fn, inputs, upstreams, "eager")
    for got, want in zip(outs, ref_outs):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    for x, got, want, skip in zip(inputs, grads, ref_grads, frozen):
        if skip:
            assert got is None
            continue
        assert got.shape == x.shape and got.dtype == x.dtype
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)


def test_sandwich_shapes_and_batch_sum(tf, matrix):
    rng = np.random.default_rng(0)
    A = rng.normal(size=(4, 3, 3)).astype(np.float32)
    X = rng.normal(size=(3, 2)).astype(np.float32)
    B = rng.normal(size=(4, 2, 2)).astype(np.float32)
    outs, (gA, gX, gB) = run(tf, matrix.sandwich, [A, X, B], [np.ones((4, 3, 2), np.float32)],
                             "eager")
    assert outs[0].shape == (4, 3, 2)
    assert gA.shape == (4, 3, 3) and gX.shape == (3, 2) and gB.shape == (4, 2, 2)
    # grad_X is the sum over the batch of A^T @ G @ B^T
    expected = sum(A[i].T @ np.ones((3, 2)) @ B[i].T for i in range(4))
    np.testing.assert_allclose(gX, expected, rtol=1e-5)


@pytest.fixture(scope="module")
def matrix64(build, spec):
    return build(yaml.safe_dump(dict(spec, dtype="float64", module="matrix64"), sort_keys=False))


@pytest.mark.parametrize("name", NAMES)
def test_matches_numerical_jacobian_float64(tf, matrix64, spec, name):
    rng = np.random.default_rng(11)
    inputs, _, frozen = _inputs(_op(spec, name), np.float64, rng)
    fn = getattr(matrix64, name)
    n_out = 2 if name == "layer" else 1
    for k in range(n_out):
        for i, skip in enumerate(frozen):
            if skip:
                continue

            def single(xi, k=k, i=i):
                args = [tf.constant(x) for x in inputs]
                args[i] = xi
                out = fn(*args)
                return out[k] if n_out > 1 else out

            # a small delta: the default (1e-3) leaves O(1e-6) truncation error here
            theoretical, numerical = tf.test.compute_gradient(single, [inputs[i]], delta=1e-6)
            np.testing.assert_allclose(theoretical[0], numerical[0], rtol=1e-6, atol=1e-7)


def test_code_is_matrix_level():
    text = (GENERATED / "matrix.py").read_text()
    for call in ("tf.linalg.matmul(", "transpose_a=True", "transpose_b=True",
                 "tf.linalg.matrix_transpose(", "tf.einsum(", "_logabsdet(",
                 "tf.linalg.inv(", "tf.linalg.trace(", "tf.linalg.det("):
        assert call in text, call
    assert "for " not in text.split("def sandwich(")[1].split("def ")[0]  # no loops


@pytest.mark.parametrize(
    "output, dtype, kernel",
    [
        ("inverse(A)", "bfloat16", "no bfloat16 kernel for MatrixInverse"),
        ("det(A)", "float16", "no float16 or bfloat16 kernel for MatrixDeterminant and Svd"),
        ("det(A)", "bfloat16", "no float16 or bfloat16 kernel for MatrixDeterminant and Svd"),
        ("log(det(A))", "bfloat16", "no bfloat16 kernel for Qr and MatrixInverse"),
    ],
)
def test_matrix_functions_without_a_kernel_in_the_dtype_are_refused(
    tmp_path, output, dtype, kernel
):
    """TensorFlow would raise "Value for attr 'T' of bfloat16 is not in the list of
    allowed values" when the op is called; the build says so first, at the function."""
    from gradgen.emit import generate
    from gradgen.errors import SpecError

    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "version: 1\nmodule: m\ndtype: [float32, " + dtype + "]\nops:\n  - name: f\n"
        "    inputs: {A: [..., 3, 3]}\n    output: " + output + "\n"
    )
    with pytest.raises(SpecError) as e:
        generate([str(spec)], str(tmp_path), verify=False)
    assert str(e.value).startswith(f"{spec}:7:13: error: op 'f', field 'output': ")
    assert f"cannot compute in {dtype}: TensorFlow has {kernel}" in str(e.value)


def test_inverse_in_float16_runs(tf, build):
    module = build("version: 1\nmodule: inv16\ndtype: [float16, float32]\nops:\n"
                   "  - name: f\n    inputs: {A: [..., 2, 2]}\n    output: inverse(A)\n")
    a = tf.constant([[2.0, 0.0], [1.0, 4.0]], tf.float16)
    with tf.GradientTape() as tape:
        tape.watch(a)
        y = module.f(a)
    assert y.dtype == tape.gradient(y, a).dtype == tf.float16
