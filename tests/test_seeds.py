"""The checked-in generated/seeds.py: the issue's worked examples, in every mode."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from conftest import EXAMPLES
from tfmodes import MODES, run

ALL_MODES = MODES + ("xla",)


@pytest.mark.parametrize("mode", ALL_MODES)
def test_broadcasting_product_unbroadcasts(tf, seeds, mode):
    x, y = np.ones((10, 1), np.float32), np.ones(5, np.float32)
    outs, (gx, gy) = run(
        tf, seeds.bar, [x, y], [np.ones((10, 5), np.float32)], mode, [[10, 1], [5]]
    )
    assert outs[0].shape == (10, 5)
    assert gx.shape == (10, 1) and gx.dtype == np.float32
    assert gy.shape == (5,) and gy.dtype == np.float32
    np.testing.assert_array_equal(gx, np.full((10, 1), 5.0))
    np.testing.assert_array_equal(gy, np.full(5, 10.0))


A = np.array([[1, 2], [3, 4]], np.float32)
B = np.array([[6, 7, 8], [9, 10, 11]], np.float32)


@pytest.mark.parametrize("mode", ALL_MODES)
def test_matrix_product_with_ones_upstream(tf, seeds, mode):
    _, (ga, gb) = run(tf, seeds.matmul, [A, B], [np.ones((2, 3), np.float32)], mode)
    np.testing.assert_array_equal(ga, [[21, 30], [21, 30]])
    np.testing.assert_array_equal(gb, [[4, 4, 4], [6, 6, 6]])


@pytest.mark.parametrize("mode", ALL_MODES)
def test_matrix_product_with_product_upstream(tf, seeds, mode):
    c = A @ B
    _, (ga, gb) = run(tf, seeds.matmul, [A, B], [c], mode)
    np.testing.assert_array_equal(ga, [[573, 816], [1295, 1844]])
    # grad_b = a^T @ c, checked against TF's own MatMul gradient
    _, (_, gb_tf) = run(tf, tf.linalg.matmul, [A, B], [c], "eager")
    np.testing.assert_array_equal(gb, gb_tf)
    np.testing.assert_array_equal(gb, A.T @ c)


@pytest.mark.parametrize("mode", ALL_MODES)
def test_softplus_is_finite_at_extremes(tf, seeds, mode):
    x = np.array([-100, 0, 100], np.float32)
    outs, (gx,) = run(tf, seeds.softplus_op, [x], [np.ones(3, np.float32)], mode)
    assert np.all(np.isfinite(outs[0])) and np.all(np.isfinite(gx))
    np.testing.assert_allclose(gx, [0.0, 0.5, 1.0], atol=1e-30)
    np.testing.assert_allclose(outs[0], [0.0, np.log(2.0), 100.0], rtol=1e-6, atol=1e-30)
    # TF's autodiff of the same forward gives NaN at 100: the reason to generate it.
    _, (naive,) = run(
        tf, lambda v: tf.math.log(1 + tf.math.exp(v)), [x], [np.ones(3, np.float32)], "eager"
    )
    assert np.isnan(naive[2])


def plain_forwards(tf):
    """Each example op written in plain TF, for autodiff to compare against."""
    return {
        "bar": lambda x, y: x * y,
        "matmul": lambda a, b: tf.linalg.matmul(a, b),
        "softplus_op": lambda x: tf.math.log(1 + tf.math.exp(x)),
        "polar": lambda x, y: (tf.sqrt(x * x + y * y), tf.math.atan2(y, x)),
        "scaled_sum": lambda a, b, scale: scale * (a + b) ** 2,
    }


# Random inputs per op: run-time shapes, including size-1 batches for the
# [null, 3]-against-[null, 3] op (one input is broadcast at run time).
CASES = [
    ("bar", [(10, 1), (5,)]),
    ("matmul", [(2, 2), (2, 3)]),
    ("softplus_op", [(7,)]),
    ("softplus_op", [(0,)]),
    ("polar", [(6,), (6,)]),
    ("polar", [(1,), (4,)]),
    ("scaled_sum", [(4, 3), (4, 3), ()]),
    ("scaled_sum", [(1, 3), (5, 3), ()]),
    ("scaled_sum", [(5, 3), (1, 3), ()]),
    ("scaled_sum", [(0, 3), (1, 3), ()]),
]


def _declared(module_spec, op_name):
    op = next(o for o in module_spec["ops"] if o["name"] == op_name)
    out = []
    for value in op["inputs"].values():
        shape = value if isinstance(value, list) else value["shape"]
        out.append([d if isinstance(d, int) else None for d in shape])
    return out


@pytest.fixture(scope="module")
def seeds_spec():
    return yaml.safe_load((EXAMPLES / "seeds.yaml").read_text())


def _random_case(tf, module, name, shapes, dtype, seed):
    rng = np.random.default_rng(seed)
    inputs = [rng.uniform(0.5, 2.0, s).astype(dtype) for s in shapes]
    plain = plain_forwards(tf)[name]
    outs = plain(*[tf.constant(x) for x in inputs])
    outs = outs if isinstance(outs, tuple) else (outs,)
    upstreams = [rng.normal(size=o.shape).astype(dtype) for o in outs]
    return inputs, upstreams, plain


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("name, shapes", CASES)
def test_examples_match_autodiff(tf, seeds, seeds_spec, name, shapes, mode):
    inputs, upstreams, plain = _random_case(tf, seeds, name, shapes, np.float32, 0)
    declared = _declared(seeds_spec, name)
    outs, grads = run(tf, getattr(seeds, name), inputs, upstreams, mode, declared)
    ref_outs, ref_grads = run(tf, plain, inputs, upstreams, "eager")
    for got, want in zip(outs, ref_outs):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    spec_inputs = next(o for o in seeds_spec["ops"] if o["name"] == name)["inputs"]
    for (input_name, value), x, got, want in zip(spec_inputs.items(), inputs, grads, ref_grads):
        if isinstance(value, dict) and value.get("differentiable") is False:
            assert got is None
            continue
        assert got.shape == x.shape and got.dtype == x.dtype, input_name
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=input_name)


@pytest.fixture(scope="module")
def seeds64(build, seeds_spec):
    """The example spec with every input in float64."""
    spec = dict(seeds_spec, dtype="float64", module="seeds64")
    ops = []
    for op in spec["ops"]:
        inputs = {
            k: (v if isinstance(v, list) else {kk: vv for kk, vv in v.items() if kk != "dtype"})
            for k, v in op["inputs"].items()
        }
        ops.append(dict(op, inputs=inputs))
    spec["ops"] = ops
    return build(yaml.safe_dump(spec, sort_keys=False))


@pytest.mark.parametrize("traced", [False, True], ids=["eager", "function"])
@pytest.mark.parametrize("name, shapes", [c for c in CASES if 0 not in sum(c[1], ())])
def test_examples_match_numerical_jacobian_float64(
    tf, seeds64, seeds_spec, name, shapes, traced
):
    inputs, upstreams, _ = _random_case(tf, seeds64, name, shapes, np.float64, 1)
    fn = getattr(seeds64, name)
    if traced:
        fn = tf.function(fn)
    spec_inputs = next(o for o in seeds_spec["ops"] if o["name"] == name)["inputs"]
    diff = [
        i for i, v in enumerate(spec_inputs.values())
        if not (isinstance(v, dict) and v.get("differentiable") is False)
    ]
    n_out = len(upstreams)
    for k in range(n_out):
        for i in diff:
            def single(xi, k=k, i=i):
                args = [tf.constant(x) for x in inputs]
                args[i] = xi
                out = fn(*args)
                return out[k] if n_out > 1 else out

            theoretical, numerical = tf.test.compute_gradient(single, [inputs[i]])
            np.testing.assert_allclose(theoretical[0], numerical[0], rtol=1e-6, atol=1e-7)
