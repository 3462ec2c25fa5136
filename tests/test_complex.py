"""Complex inputs: holomorphic expressions with TF's gradient convention
(upstream * conj(f'(z))), and a clear refusal of non-holomorphic ones."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from gradgen.emit import generate
from gradgen.errors import SpecError

OPS = {
    "square": ({"z": [None]}, "z * z + 2 * z", lambda tf, z: z * z + 2 * z),
    "mixed": (
        {"z": [None], "w": [None]},
        "exp(z) * sin(w) + log1p(z * w) - tanh(z) / (1 + w)",
        lambda tf, z, w: tf.exp(z) * tf.sin(w) + tf.math.log1p(z * w) - tf.tanh(z) / (1 + w),
    ),
    "sig": ({"z": [None]}, "1 / (1 + exp(-z)) + sqrt(z)", lambda tf, z: tf.sigmoid(z) + tf.sqrt(z)),
    "matrix": (
        {"a": [2, 3], "b": [3, 2]},
        "exp(a) @ b",
        lambda tf, a, b: tf.linalg.matmul(tf.exp(a), b),
    ),
    # an operand that simplification reduces to a broadcast one (a - a + b is b, broadcast
    # to a's shape as written): its VJP conjugates it inside the broadcast (it was left
    # unconjugated, and the build refused the op as a gradgen bug)
    "einsum_broadcast": (
        {"a": [3, 4], "b": [1, 4], "c": [4, 2]},
        "einsum('ij,jk->ik', a - a + b, c)",
        lambda tf, a, b, c: tf.einsum("ij,jk->ik", a - a + b, c),
    ),
    "einsum_broadcast_dynamic": (  # the broadcast's shape known at run time only
        {"a": [None, 4], "b": [1, 4], "c": [4, 2]},
        "einsum('ij,jk->ik', a - a + b, c)",
        lambda tf, a, b, c: tf.einsum("ij,jk->ik", a - a + b, c),
    ),
    "with_int": (
        {"z": [None], "n": {"shape": [None], "dtype": "int32"}},
        "z ** 2 * n",
        lambda tf, z, n: z**2 * tf.cast(n, z.dtype),
    ),
}


@pytest.fixture(scope="module", params=["complex64", "complex128"])
def case(request, build):
    ops = [{"name": name, "inputs": inputs, "output": output}
           for name, (inputs, output, _) in OPS.items()]
    spec = {"version": 1, "module": f"cplx_{request.param}", "dtype": request.param, "ops": ops}
    return request.param, build(yaml.safe_dump(spec, sort_keys=False))


@pytest.mark.parametrize("name", sorted(OPS))
def test_matches_tf_autodiff(tf, case, name):
    dtype, module = case
    inputs, _, plain = OPS[name]
    rng = np.random.default_rng(1)
    real = np.float32 if dtype == "complex64" else np.float64
    args = []
    for spec in inputs.values():
        shape = spec["shape"] if isinstance(spec, dict) else spec
        shape = [d if isinstance(d, int) else 4 for d in shape]
        if isinstance(spec, dict) and spec.get("dtype") == "int32":
            args.append(tf.constant(rng.integers(1, 4, shape), tf.int32))
        else:
            values = rng.uniform(0.2, 1.0, shape) + 1j * rng.uniform(-0.5, 0.5, shape)
            args.append(tf.constant(values.astype(dtype)))
    shape = plain(tf, *args).shape
    upstream = tf.constant((rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(dtype))
    results = []
    for fn in (getattr(module, name), lambda *a: plain(tf, *a)):
        with tf.GradientTape() as tape:
            for a in args:
                if not a.dtype.is_integer:
                    tape.watch(a)
            out = fn(*args)
            loss = tf.reduce_sum(out * upstream)
        results.append((out, tape.gradient(loss, args)))
    (out, grads), (ref_out, ref_grads) = results
    rtol = 1e-4 if real is np.float32 else 1e-10
    np.testing.assert_allclose(out.numpy(), ref_out.numpy(), rtol=rtol)
    for a, g, r in zip(args, grads, ref_grads):
        if a.dtype.is_integer:
            assert g is None
            continue
        assert g.dtype == a.dtype and g.shape == a.shape
        np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=rtol, atol=rtol)


@pytest.mark.parametrize(
    "output, function",
    [("Abs(z)", "Abs"), ("floor(z) * z", "floor"), ("softplus(z)", "softplus"),
     ("erf(z)", "erf"), ("Max(z, w)", "Max")],
)
def test_non_holomorphic_expressions_are_refused(tmp_path, output, function):
    spec = tmp_path / "c.yaml"
    spec.write_text(yaml.safe_dump({
        "version": 1, "module": "c", "dtype": "complex64",
        "ops": [{"name": "f", "inputs": {"z": [3], "w": [3]}, "output": output}],
    }, sort_keys=False))
    with pytest.raises(SpecError) as info:
        generate([str(spec)], str(tmp_path))
    message = info.value.diagnostics[0].format()
    assert f"{function} is not holomorphic" in message and "op 'f'" in message


def test_complex_comparisons_are_refused(tmp_path):
    spec = tmp_path / "c.yaml"
    spec.write_text(
        "version: 1\nmodule: c\ndtype: complex64\nops:\n  - name: f\n"
        "    inputs: {z: [3]}\n    output: where(z > 0, z, 0)\n"
    )
    with pytest.raises(SpecError, match="complex values cannot be compared"):
        generate([str(spec)], str(tmp_path))


def test_complex_literals_keep_their_value(tf, build):
    """A complex literal is re + im*i (an outside mutation run turned it into re + i/im
    unnoticed): forward and gradient against numbers written here."""
    module = build("version: 1\nmodule: literal\ndtype: complex128\nops:\n"
                   "  - name: scaled\n    inputs: {z: [2]}\n    output: z * (1.5 + 2j) + 0.25j\n",
                   audit=False)
    z = tf.constant([1.0 + 1.0j, -2.0 + 0.5j], tf.complex128)
    with tf.GradientTape() as tape:
        tape.watch(z)
        out = module.scaled(z)
    grad = tape.gradient(out, z, output_gradients=tf.ones_like(z))
    want = [(1.0 + 1.0j) * (1.5 + 2j) + 0.25j, (-2.0 + 0.5j) * (1.5 + 2j) + 0.25j]
    assert out.numpy().tolist() == pytest.approx(want, rel=1e-15)
    # TF's convention for complex gradients: upstream times the conjugate derivative
    assert grad.numpy().tolist() == pytest.approx([1.5 - 2j, 1.5 - 2j], rel=1e-15)
