"""The batch wildcard: ``...`` as a shape's first entry means any number of leading
batch dims, broadcast across inputs as NumPy does.

Each op runs with batch ranks 0, 1 and 3 in eager mode, in a ``tf.function`` whose input
signature has only None dims, and under XLA; outputs and gradients are compared with
TensorFlow's autodiff of the plain forward, and every gradient must have exactly its
input's shape (the unbroadcast over batch dims that only exist at trace time).
"""

from __future__ import annotations

import numpy as np
import pytest

import tfmodes
from gradgen.errors import SpecError

SPEC = """\
version: 1
module: batched
dtype: float64
ops:
  - name: act
    inputs: {x: [...]}
    output: log(1 + exp(x)) * x
  - name: affine
    inputs: {x: [..., 3], w: [3], b: []}
    output: log(1 + exp(w * x + b))
  - name: pair
    inputs: {a: [..., 3], c: [..., 3]}
    output: a * c + sin(a)
  - name: quad
    inputs: {s: [..., n, n], v: [..., n, 1]}
    where: {si: inverse(s)}
    output: transpose(v) @ si @ v
  - name: logdet
    inputs: {s: [..., n, n]}
    output: log(det(s))
  - name: rownorm
    inputs: {x: [..., n], w: [n]}
    output: sum(x * x * w, axis=-1, keepdims=True) + mean(x, axis=-1, keepdims=True)
  - name: probs
    inputs: {x: [..., 4]}
    output: softmax(x, axis=-1) * logsumexp(x, axis=-1, keepdims=True)
"""


def _plain(tf, name):
    inv, tr = tf.linalg.inv, tf.linalg.matrix_transpose
    return {
        "act": lambda x: tf.math.log(1 + tf.exp(x)) * x,
        "affine": lambda x, w, b: tf.math.log(1 + tf.exp(w * x + b)),
        "pair": lambda a, c: a * c + tf.sin(a),
        "quad": lambda s, v: tr(v) @ inv(s) @ v,
        "logdet": lambda s: tf.math.log(tf.linalg.det(s)),
        "rownorm": lambda x, w: tf.reduce_sum(x * x * w, -1, keepdims=True)
        + tf.reduce_mean(x, -1, keepdims=True),
        "probs": lambda x: tf.nn.softmax(x, -1) * tf.reduce_logsumexp(x, -1, keepdims=True),
    }[name]


def _spd(rng, batch, n):
    a = rng.normal(size=batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def _inputs(name, batch, rng):
    """NumPy inputs of op ``name`` with batch dims ``batch``."""
    u = lambda *shape: rng.uniform(-1.5, 1.5, shape)  # noqa: E731
    return {
        "act": lambda: [u(*batch)],
        "affine": lambda: [u(*batch, 3), u(3), u()],
        "pair": lambda: [u(*batch, 3), u(*batch, 3)],
        "quad": lambda: [_spd(rng, batch, 3), u(*batch, 3, 1)],
        "logdet": lambda: [_spd(rng, batch, 3)],
        "rownorm": lambda: [u(*batch, 5), u(5)],
        "probs": lambda: [u(*batch, 4)],
    }[name]()


@pytest.fixture(scope="module")
def batched(build):
    return build(SPEC)


def _reference(tf, name, inputs, upstream):
    args = [tf.constant(x) for x in inputs]
    with tf.GradientTape() as tape:
        tape.watch(args)
        out = _plain(tf, name)(*args)
    grads = tape.gradient(out, args, output_gradients=tf.constant(upstream))
    return out.numpy(), [g.numpy() for g in grads]


def _check(tf, batched, name, inputs, mode):
    fn = getattr(batched, name)
    out_shape = np.shape(_plain(tf, name)(*[tf.constant(x) for x in inputs]))
    upstream = np.random.default_rng(1).normal(size=out_shape)
    want_out, want_grads = _reference(tf, name, inputs, upstream)
    (out,), grads = tfmodes.run(tf, fn, inputs, [upstream], mode)
    np.testing.assert_allclose(out, want_out, rtol=1e-10, atol=1e-12)
    for x, got, want in zip(inputs, grads, want_grads):
        assert np.shape(got) == np.shape(x)  # exactly the input's shape
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-11)


OPS = ("act", "affine", "pair", "quad", "logdet", "rownorm", "probs")


@pytest.mark.parametrize("mode", ["eager", "function_none_dims", "xla"])
@pytest.mark.parametrize("batch", [(), (2,), (2, 1, 3)], ids=["rank0", "rank1", "rank3"])
@pytest.mark.parametrize("name", OPS)
def test_batch_ranks_in_every_mode(tf, batched, name, batch, mode):
    _check(tf, batched, name, _inputs(name, batch, np.random.default_rng(0)), mode)


@pytest.mark.parametrize("mode", ["eager", "function_none_dims", "xla"])
def test_batches_of_two_inputs_broadcast(tf, batched, mode):
    rng = np.random.default_rng(2)
    # batch [4, 1] against [5]: out [4, 5, 3]; each gradient summed back to its batch
    _check(tf, batched, "pair", [rng.normal(size=(4, 1, 3)), rng.normal(size=(5, 3))], mode)
    s, v = _spd(rng, (2, 1), 3), rng.normal(size=(4, 3, 1))
    _check(tf, batched, "quad", [s, v], mode)


def test_wrong_core_dims_are_refused(tf, batched):
    with pytest.raises(ValueError, match=r"input 'x' must have shape \[\.\.\., 3\]"):
        batched.affine(np.ones((2, 4)), np.ones(3), 0.0)
    with pytest.raises(ValueError, match=r"input 's' must have shape \[\.\.\., n, n\]"):
        batched.logdet(np.ones(3))  # rank 1 < the 2 dims after '...'


def test_unknown_rank_while_tracing_is_refused(tf, batched):
    step = tf.function(batched.act, input_signature=[tf.TensorSpec(None, tf.float64)])
    with pytest.raises(ValueError, match="needs a rank known while tracing"):
        step.get_concrete_function()


def test_named_dims_after_the_batch_are_checked(tf, batched):
    with pytest.raises(ValueError, match="dim 'n' must have one size"):
        batched.rownorm(np.ones((2, 5)), np.ones(4))


def test_generated_code_shows_the_batch(batched):
    import inspect

    source = inspect.getsource(batched)
    assert '_check_input("affine", "x", x, tf.float64, [..., 3])' in source
    assert "x: float64 tensor of shape [..., 3]." in source
    # the core's reduction axes count from the end
    assert "axis=[-1]" in source


BAD = [
    ("[3, ...]", "x * 2", "'...' (any number of batch dims) may only be a shape's first"),
    ("[..., 3]", "sum(x)", "needs its axes, counted from the end"),
    ("[..., 3]", "sum(x, axis=0)", "count axes from the end (axis=-1 is the same axis"),
    ("[..., 3]", "sum(x, axis=-2)", "axis -2 is out of range for the 1 dims after '...'"),
    ("[..., 3]", "einsum('i,i->', x, x)", "its rank depends on the batch dims"),
    ("[..., 3]", "x * y", "has more dims than [..., 3] has after '...'"),
    ("[..., 2, 3]", "x * z", "have different numbers of dims after it"),
    ("[..., 3]", "x @ x", "'@' needs operands of rank >= 2"),
]


@pytest.mark.parametrize("shape, output, message", BAD)
def test_spec_errors(tmp_path, shape, output, message):
    from gradgen.emit import generate

    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "version: 1\nmodule: m\nops:\n  - name: f\n"
        f"    inputs: {{x: {shape}, y: [2, 3], z: [..., 3]}}\n"
        f"    output: {output}\n"
    )
    with pytest.raises(SpecError) as e:
        generate([str(spec)], str(tmp_path), verify=False)
    assert message in str(e.value)
