"""The generated ops' argument checks where the trace cannot decide them, and on values
that conversion would change (`_check_input`, `_check_representable`,
`_check_named_dims` in templates/runtime/):

* a named dim used twice in one input (`s: [batch, n, n]`) is compared with itself;
* named dims unknown while tracing (None in an input signature) are compared when the
  graph runs, in tf.function and in a TF1 graph run in a Session (where nothing but the
  fetched tensors' dependencies runs), and under XLA, which compiles assertions to
  nothing;
* Python numbers, lists and NumPy arrays that the input's dtype cannot represent are
  refused instead of wrapping (int32) or becoming inf (float32, float16).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

SPEC = """\
version: 1
module: runtime_checks
ops:
  - name: logdet
    inputs:
      s: [batch, n, n]
    output: log(det(s))
  - name: pair
    inputs:
      a: [batch, 3]
      b: [batch, 3]
    output: a * b
  - name: scaled
    inputs:
      x: [null]
      k: {shape: [null], dtype: int32}
    output: x * k
"""

HALF_SPEC = """\
version: 1
module: runtime_checks_half
dtype: float16
ops:
  - name: square
    inputs:
      x: [null]
    output: x * x
"""

COMPLEX_SPEC = """\
version: 1
module: runtime_checks_complex
dtype: complex64
ops:
  - name: square
    inputs:
      z: [null]
    output: z * z
"""


@pytest.fixture(scope="module")
def ops(build):
    return build(SPEC, audit=False)


def _message(error) -> str:
    return str(error).replace("\\'", "'")  # TF escapes the quotes of an assert's message


def _wellposed(batch, n):
    return np.eye(n, dtype=np.float32)[None].repeat(batch, 0) * 2.0


# ---------------------------------------------------------------------------------------
# A named dim repeated in one input


def test_repeated_dim_in_one_input_is_compared_eagerly(tf, ops):
    with pytest.raises(ValueError) as info:
        ops.logdet(tf.ones([2, 3, 4]))
    message = str(info.value)
    assert message == "logdet: dim 'n' must have one size, got s: 3 (axis 1), s: 4 (axis 2)"
    assert ops.logdet(_wellposed(2, 3)).shape == (2,)


def test_repeated_dim_in_one_input_is_compared_when_the_graph_runs(tf, ops):
    fn = tf.function(ops.logdet, input_signature=[tf.TensorSpec([None, None, None])])
    np.testing.assert_allclose(fn(_wellposed(2, 3)), np.full(2, 3 * np.log(2.0)), rtol=1e-6)
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        fn(tf.ones([2, 3, 4]))
    message = _message(info.value)
    assert "logdet: dim 'n' must have one size in 's' (axis 1) and 's' (axis 2)" in message
    assert "[3]" in message and "[4]" in message
    assert fn.experimental_get_tracing_count() == 1
    # one size known while tracing: the other is compared with it
    fn = tf.function(ops.logdet, input_signature=[tf.TensorSpec([None, 3, None])])
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        fn(tf.ones([2, 3, 4]))
    assert "in 's' (axis 1) and 's' (axis 2)" in _message(info.value)


# ---------------------------------------------------------------------------------------
# Named dims across inputs, unknown while tracing


def test_named_dims_disagreeing_at_run_time_are_refused(tf, ops):
    """a [1, 3] against b [5, 3] would broadcast silently: the gradient of `a` would have
    b's batch size."""
    fn = tf.function(ops.pair, input_signature=[tf.TensorSpec([None, 3])] * 2)
    a, b = tf.ones([1, 3]), tf.ones([5, 3])
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        with tf.GradientTape() as tape:
            tape.watch(a)
            out = fn(a, b)
        tape.gradient(out, a)
    message = _message(info.value)
    assert "pair: dim 'batch' must have one size in 'a' (axis 0) and 'b' (axis 0)" in message
    assert "[1]" in message and "[5]" in message
    # agreeing sizes pass, and the gradient has the input's shape
    a, b = tf.ones([4, 3]), tf.fill([4, 3], 2.0)
    with tf.GradientTape() as tape:
        tape.watch(a)
        out = fn(a, b)
    np.testing.assert_array_equal(tape.gradient(out, a), b)


def test_named_dims_in_a_tf1_graph(tf, ops):
    """Only what the fetched tensors depend on runs in a Session: the comparisons gate
    the inputs the op computes with."""
    graph = tf.Graph()
    with graph.as_default():
        a = tf.compat.v1.placeholder(tf.float32, [None, 3])
        b = tf.compat.v1.placeholder(tf.float32, [None, 3])
        out = ops.pair(a, b)
        (grad,) = tf.gradients(out, [a])
        s = tf.compat.v1.placeholder(tf.float32, [None, None, None])
        det = ops.logdet(s)
        with tf.compat.v1.Session(graph=graph) as session:
            got = session.run(grad, {a: np.ones([2, 3]), b: np.full([2, 3], 3.0)})
            np.testing.assert_array_equal(got, np.full([2, 3], 3.0))
            for fetch, feed, want in [
                (out, {a: np.ones([1, 3]), b: np.ones([5, 3])},
                 "pair: dim 'batch' must have one size in 'a' (axis 0) and 'b' (axis 0)"),
                (grad, {a: np.ones([1, 3]), b: np.ones([5, 3])}, "dim 'batch'"),
                (det, {s: np.ones([2, 3, 4])},
                 "logdet: dim 'n' must have one size in 's' (axis 1) and 's' (axis 2)"),
            ]:
                with pytest.raises(tf.errors.InvalidArgumentError) as info:
                    session.run(fetch, feed)
                assert want in _message(info.value)


def test_named_dims_under_xla(tf, ops):
    """XLA compiles assertions to nothing; the reshape the check gates the input with
    fails to compile instead. With static shapes the check is Python's, while tracing."""
    pair = tf.function(ops.pair, input_signature=[tf.TensorSpec([None, 3])] * 2,
                       jit_compile=True)
    np.testing.assert_array_equal(pair(tf.ones([2, 3]), tf.fill([2, 3], 2.0)),
                                  np.full([2, 3], 2.0))
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        pair(tf.ones([1, 3]), tf.ones([5, 3]))
    message = str(info.value)
    assert "Input to reshape is a tensor with 15 values, but the requested shape has 3" in (
        message) and "pair_dim_batch" in message, message
    logdet = tf.function(ops.logdet, input_signature=[tf.TensorSpec([None, None, None])],
                         jit_compile=True)
    with pytest.raises(tf.errors.InvalidArgumentError, match="(?s)reshape.*logdet_dim_n"):
        logdet(tf.ones([2, 3, 4]))
    static = tf.function(ops.pair, jit_compile=True)
    with pytest.raises(ValueError, match=re.escape(
            "pair: dim 'batch' must have one size, got a: 1 (axis 0), b: 5 (axis 0)")):
        static(tf.ones([1, 3]), tf.ones([5, 3]))
    # static shapes: no run-time comparison at all in the graph XLA compiles
    graph = static.get_concrete_function(tf.ones([2, 3]), tf.ones([2, 3])).graph
    assert not any(op.type in ("Assert", "Reshape") for op in graph.get_operations())


# ---------------------------------------------------------------------------------------
# Host values that conversion would change


def test_integers_that_would_wrap_are_refused(tf, ops):
    for k in (2**40, [1, 2**40], np.array([2**40]), np.int64(-(2**31) - 1)):
        with pytest.raises(ValueError) as info:
            ops.scaled([1.0, 1.0], k)
        assert str(info.value).startswith("scaled: input 'k' holds "), info.value
        assert "which int32 cannot represent" in str(info.value)
    with pytest.raises(ValueError) as info:
        ops.scaled([1.0], 2**40)
    assert str(info.value) == (
        "scaled: input 'k' holds 1099511627776, which int32 cannot represent "
        "(it would become 0)")
    # fractions and NaN would be truncated
    for k in (np.array([2.5]), np.array([np.nan])):
        with pytest.raises(ValueError, match="int32 cannot represent"):
            ops.scaled([1.0], k)
    # the extremes of int32, and whole floats, pass
    np.testing.assert_array_equal(
        ops.scaled([1.0, 1.0, 1.0], [2**31 - 1, -(2**31), 0]),
        np.float32([2**31 - 1, -(2**31), 0]))
    np.testing.assert_array_equal(ops.scaled([1.0], np.array([3.0])), [3.0])


def test_floats_that_would_become_inf_are_refused(tf, ops, build):
    for x in (1e300, [1.0, 1e300], np.float64(-1e300), np.array([[1e39]])[0]):
        with pytest.raises(ValueError) as info:
            ops.scaled(x, [1])
        assert "scaled: input 'x' holds " in str(info.value)
        assert "which float32 cannot represent (it would become " in str(info.value)
    with pytest.raises(ValueError) as info:
        ops.scaled(1e300, [1])
    assert str(info.value) == (
        "scaled: input 'x' holds 1e+300, which float32 cannot represent "
        "(it would become inf)")
    half = build(HALF_SPEC, audit=False)
    with pytest.raises(ValueError, match=re.escape(
            "square: input 'x' holds 100000.0, which float16 cannot represent "
            "(it would become inf)")):
        half.square([1.0, 1e5])
    # rounding is not refused: 65519 rounds to float16's largest, 65504; 65520 to inf
    assert half.square([65519.0, 2.0]).numpy().tolist() == [np.inf, 4.0]
    with pytest.raises(ValueError, match="holds 65520.0, which float16"):
        half.square([65520.0])
    assert half.square(np.float32([2.0])).dtype == tf.float16
    complex_ops = build(COMPLEX_SPEC, audit=False)
    with pytest.raises(ValueError, match="complex64 cannot represent"):
        complex_ops.square([1e300 + 0j])
    with pytest.raises(ValueError, match="complex64 cannot represent"):
        complex_ops.square(np.array([1j * 1e300]))


def test_imaginary_parts_would_be_dropped(tf, ops):
    with pytest.raises(ValueError, match="float32 cannot represent"):
        ops.scaled(np.array([1 + 2j]), [1])


def test_ordinary_values_pass(tf, ops):
    got = ops.scaled([np.inf, -np.inf, np.nan, -0.0, 1e-30, 3.4e38], [1, 1, 1, 1, 1, 1])
    np.testing.assert_array_equal(got[:3], [np.inf, -np.inf, np.nan])
    assert got[3] == 0.0 and np.signbit(got[3])
    assert got[4] > 0 and got[5] == np.float32(3.4e38)
    assert ops.scaled(np.float64([np.inf, 1.5]), np.int64([2, 2])).numpy().tolist() == [
        np.inf, 3.0]
    # tensors are not inspected: a tensor of the input's dtype passes as it is
    big = tf.constant([3.0e38])
    assert ops.scaled(big, tf.constant([1])).numpy()[0] == np.float32(3.0e38)
    with pytest.raises(TypeError, match="scaled: input 'k' must have dtype int32"):
        ops.scaled(big, tf.constant([2**40], tf.int64))
    # in tf.function, the Python values are checked while tracing
    fn = tf.function(lambda: ops.scaled([1.0], 2**40))
    with pytest.raises(ValueError, match="int32 cannot represent"):
        fn()
    # a list holding a tensor is left to tf.convert_to_tensor
    assert ops.scaled([tf.constant(2.0), 1.0], [1, 1]).numpy().tolist() == [2.0, 1.0]
