"""Stable reductions: logsumexp, softmax, log_softmax, max and min, and the naive forms
written with sum/mean that gradgen recognises (gradgen/stability/reductions.py).

Rule tests (which forms fire, which must not) run on parsed programs without
TensorFlow. The end-to-end tests build examples/reductions.yaml in float16, bfloat16,
float32 and float64 and compare forwards, gradients and (float64) Hessians at extreme
logits with a 50-digit mpmath reference of the expression as written, per row.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
import yaml

from conftest import EXAMPLES
from stability import (
    DTYPES,
    ILL_CONDITIONED_FORWARD,
    LABELS,
    LARGEST,
    REDUCTION_OPS as OPS,
    RTOL,
    ROWS,
    SMALLEST_NORMAL,
    WEIGHTS,
    reduction_call,
    reference,
    trace_in_a_graph,
)

from gradgen.errors import SpecError
from gradgen.expr import parse_op
from gradgen.spec import parse_spec
from gradgen.stability.reductions import stabilize_reductions

SPEC = EXAMPLES / "reductions.yaml"  # the cases and their reference: tests/stability.py


def _program(output: str, shape="[null, 3]", extra_inputs=""):
    text = (
        "version: 1\nmodule: m\nops:\n  - name: f\n"
        f"    inputs: {{x: {shape}{extra_inputs}}}\n    output: {output}\n"
    )
    return parse_op(parse_spec(text.encode(), "s.yaml"), 0)


def _ops(output, **kw):
    program, used = stabilize_reductions(_program(output, **kw))
    return sorted(n.op for n in program.nodes), used


# ------------------------------------------------------------------ rule tables

# (written form, node ops after the rewrite, rules used)
VARIANTS = [
    ("log(sum(exp(x), axis=-1))", ["logsumexp"], ("logsumexp_reduce",)),
    ("log(sum(exp(x), axis=1, keepdims=True))", ["logsumexp"], ("logsumexp_reduce",)),
    ("log(sum(exp(x)))", ["logsumexp"], ("logsumexp_reduce",)),
    ("log(sum(2*exp(x), axis=-1))", ["logsumexp"], ("logsumexp_reduce",)),
    ("log(sum(exp(x - 1), axis=[0, 1]))", ["logsumexp"], ("logsumexp_reduce",)),
    ("log(mean(exp(x), axis=-1))", ["logsumexp"], ("logsumexp_reduce",)),
    ("exp(x) / sum(exp(x), axis=-1, keepdims=True)", ["softmax"],
     ("log_softmax_reduce", "logsumexp_reduce", "softmax_reduce")),
    ("exp(x - log(sum(exp(x), axis=-1, keepdims=True)))", ["softmax"],
     ("log_softmax_reduce", "logsumexp_reduce", "softmax_reduce")),
    ("x - log(sum(exp(x), axis=-1, keepdims=True))", ["log_softmax"],
     ("log_softmax_reduce", "logsumexp_reduce")),
    ("log(exp(x) / sum(exp(x), axis=-1, keepdims=True))", ["log_softmax"],
     ("log_softmax_reduce", "logsumexp_reduce")),
    ("2*(x - log(sum(exp(x), axis=-1, keepdims=True)))", ["log_softmax"],
     ("log_softmax_reduce", "logsumexp_reduce")),
    ("-(log(sum(exp(x), axis=-1, keepdims=True)) - x)", ["log_softmax"],
     ("log_softmax_reduce", "logsumexp_reduce")),
    ("x - logsumexp(x, axis=-1, keepdims=True)", ["log_softmax"], ("log_softmax_reduce",)),
    ("exp(x - logsumexp(x, axis=-1, keepdims=True))", ["softmax"],
     ("log_softmax_reduce", "softmax_reduce")),
    # the leading axis reduced without keepdims still broadcasts back
    ("x - log(sum(exp(x), axis=0))", ["log_softmax"],
     ("log_softmax_reduce", "logsumexp_reduce")),
    # cross-entropy: the log-softmax sits inside another sum
    ("-sum(x * (x - log(sum(exp(x), axis=-1, keepdims=True))), axis=-1)",
     ["log_softmax", "sum"], ("log_softmax_reduce", "logsumexp_reduce")),
]

# (written form, node ops that must stay): near misses
NEAR_MISSES = [
    ("sum(exp(x), axis=-1)", ["sum"]),  # no log, no division: the sum is the value
    ("2 * sum(exp(x), axis=-1)", ["sum"]),
    ("log(sum(exp(x) + 1, axis=-1))", ["sum"]),  # not a sum of exponentials
    ("log(sum(x * exp(x), axis=-1))", ["sum"]),  # weights of unknown sign
    ("log(sum(-exp(x), axis=-1))", ["sum"]),  # a negative coefficient
    ("log(sum(exp(x), axis=-1))", ["sum"]),  # complex: see test_complex_is_left_alone
]


@pytest.mark.parametrize("written, ops, used", VARIANTS)
def test_naive_form_is_recognised(written, ops, used):
    assert _ops(written) == (ops, used)


@pytest.mark.parametrize("written, ops", NEAR_MISSES[:-1])
def test_near_miss_is_left_alone(written, ops):
    assert _ops(written) == (ops, ())


def test_complex_is_left_alone():
    text = (
        "version: 1\nmodule: m\ndtype: complex64\nops:\n  - name: f\n"
        "    inputs: {x: [3]}\n    output: log(sum(exp(x)))\n"
    )
    program = parse_op(parse_spec(text.encode(), "s.yaml"), 0)
    assert stabilize_reductions(program) == (program, ())


def test_mean_with_unknown_count_is_left_alone():
    assert _ops("log(mean(exp(x), axis=0))") == (["mean"], ())


def test_different_arguments_give_no_log_softmax():
    ops, used = _ops("y - log(sum(exp(x), axis=-1, keepdims=True))",
                     extra_inputs=", y: [null, 3]")
    assert ops == ["logsumexp"] and used == ("logsumexp_reduce",)


def test_log_softmax_needs_the_reduced_axes_to_broadcast_back():
    # sum over the last axis without keepdims broadcasts against the *last* axis of x
    ops, _ = _ops("x - log(sum(exp(x), axis=1))", shape="[3, 3]")
    assert ops == ["logsumexp"]


# ------------------------------------------------------------------- the parser


def _error(output, shape="[null, 3]", inputs=""):
    with pytest.raises(SpecError) as info:
        _program(output, shape, inputs)
    return info.value.diagnostics[0].message


def test_max_with_a_value_for_axis_points_to_elementwise_max():
    message = _error("max(x, y)", inputs=", y: [null, 3]")
    assert "Max(a, b, ...)" in message and "axis" in message


def test_softmax_takes_no_keepdims():
    assert "keyword axis" in _error("softmax(x, axis=-1, keepdims=True)")


def test_reduction_shapes():
    program = _program("max(x, axis=-1, keepdims=True) + softmax(x, axis=0) + "
                       "log_softmax(x) + logsumexp(x, axis=[0, 1], keepdims=True)")
    shapes = {n.op: n.shape for n in program.nodes}
    assert [str(d) for d in shapes["max"]][1:] == ["1"]
    assert len(shapes["softmax"]) == 2 and len(shapes["log_softmax"]) == 2
    assert [str(d) for d in shapes["logsumexp"]] == ["1", "1"]


def test_values_named_like_new_functions_stay_valid():
    """A version-1 spec may name an input `softmax`: the value wins."""
    text = (
        "version: 1\nmodule: m\nops:\n  - name: f\n"
        "    inputs: {softmax: [3], logsumexp: [3]}\n    output: softmax * logsumexp\n"
    )
    program = parse_op(parse_spec(text.encode(), "s.yaml"), 0)
    assert {v.name for v in program.inputs} == {"softmax", "logsumexp"}
    text = text.replace("softmax * logsumexp", "softmax(logsumexp)")
    with pytest.raises(SpecError, match="is a value, not a function"):
        parse_op(parse_spec(text.encode(), "s.yaml"), 0)


# ------------------------------------------------------- end to end, 50 digits

REFERENCE_CACHE = functools.lru_cache(maxsize=None)(lambda op, row: reference(op, row))


@pytest.fixture(scope="module")
def modules(build):
    spec = yaml.safe_load(SPEC.read_text())
    return {
        dtype: build(yaml.safe_dump(dict(spec, dtype=dtype, module=f"red_{dtype}"),
                                    sort_keys=False), audit=False)
        for dtype in DTYPES
    }


def test_every_example_op_is_checked():
    spec = yaml.safe_load(SPEC.read_text())
    assert sorted(op["name"] for op in spec["ops"]) == OPS


def _call(tf, module, op, x):
    return reduction_call(tf, module, op, x)


def _weighted(tf, out, dtype):
    w = tf.constant(WEIGHTS[: out.shape[-1]], dtype)
    return tf.reduce_sum(tf.cast(out, dtype) * w, axis=-1)


def _representable(row, dtype):
    return all(abs(v) <= LARGEST[dtype] for v in row)


def _rounded(rows, dtype, tf):
    x = tf.cast(tf.constant(rows, tf.float64), getattr(tf, dtype))
    return x, tf.cast(x, tf.float64).numpy().tolist()


def _close(got, want, dtype, label, scale=0.0):
    """Relative error at most RTOL[dtype] (of the value, or of the scale of the terms a
    VJP adds up where that is larger), plus the smallest normal number."""
    assert math.isfinite(got), f"{label}: got {got}, exact {want}"
    tolerance = RTOL[dtype] * max(abs(want), scale) + SMALLEST_NORMAL[dtype]
    assert abs(got - want) <= tolerance, f"{label}: got {got!r}, exact {want!r}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_forward_and_gradient_match_50_digit_reference(tf, modules, op, dtype):
    rows = [r for r in ROWS if _representable(r, dtype)]
    x, exact_rows = _rounded(rows, dtype, tf)
    with tf.GradientTape() as tape:
        tape.watch(x)
        out = _call(tf, modules[dtype], op, x)
        loss = tf.reduce_sum(_weighted(tf, out, out.dtype))
    grad = tape.gradient(loss, x).numpy().astype(np.float64)
    out = out.numpy().astype(np.float64)
    for i, row in enumerate(exact_rows):
        forward, want_grad, scale, _ = REFERENCE_CACHE(op, tuple(row))
        for k, want in enumerate(forward):
            if (op, tuple(row)) in ILL_CONDITIONED_FORWARD:
                continue
            if abs(want) <= LARGEST[dtype]:
                _close(out[i][k], want, dtype, f"{op}{tuple(row)} out[{k}] ({dtype})")
        for k, want in enumerate(want_grad):
            _close(grad[i][k], want, dtype, f"{op}{tuple(row)} d/dx[{k}] ({dtype})",
                   scale[k])


@pytest.mark.parametrize("op", OPS)
def test_hessian_matches_50_digit_reference(tf, modules, op):
    """Second order (float64): TensorFlow's autodiff of the generated gradient."""
    rows = [r for r in ROWS if r != (1e4, 1e4, 1e4) or op != "max_margin"]
    x, exact_rows = _rounded(rows, "float64", tf)
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            loss = tf.reduce_sum(_weighted(tf, _call(tf, modules["float64"], op, x),
                                           tf.float64))
        grad = inner.gradient(loss, x)
    hessian = outer.batch_jacobian(grad, x).numpy()
    for i, row in enumerate(exact_rows):
        want = REFERENCE_CACHE(op, tuple(row))[3]
        for j in range(3):
            for k in range(3):
                got = hessian[i][j][k]
                assert math.isfinite(got), f"{op}{tuple(row)} H[{j},{k}]: {got}"
                # Hessian entries are differences of products of softmax weights:
                # relative to the largest entry of the row
                scale = max(abs(v) for r in want for v in r) or 1.0
                assert abs(got - want[j][k]) <= 1e-10 * scale + 1e-300, (
                    f"{op}{tuple(row)} H[{j},{k}]: got {got!r}, exact {want[j][k]!r}"
                )


def test_tensorflow_autodiff_fails_on_the_naive_cross_entropy(tf):
    """The witness from issue 10: TF's autodiff of the plain forward gives NaN."""
    logits = tf.constant([[100.0, 0.0, -100.0]])
    labels = tf.constant([LABELS])
    with tf.GradientTape() as tape:
        tape.watch(logits)
        lse = tf.math.log(tf.reduce_sum(tf.math.exp(logits), axis=-1, keepdims=True))
        loss = -tf.reduce_sum(labels * (logits - lse), axis=-1)
    assert np.isnan(tape.gradient(loss, logits).numpy()).any()


def test_max_ties_share_the_gradient(tf, modules):
    x = tf.constant([[2.0, 2.0, 1.0], [5.0, 5.0, 5.0]])
    with tf.GradientTape() as tape:
        tape.watch(x)
        out = modules["float32"].max_margin(x)
    grad = tape.gradient(out, x).numpy()
    np.testing.assert_allclose(grad[0], [0.5, 0.5, -1.0])
    np.testing.assert_allclose(grad[1], [0.0, 0.0, 0.0], atol=1e-7)  # max and min tie


@pytest.mark.parametrize("written", ["max(x)", "logsumexp(x)", "softmax(x)",
                                     "log_softmax(x)", "min(x, axis=0)"])
def test_complex_ops_refuse_real_only_reductions(written):
    from gradgen.pipeline import derive_op

    text = (
        "version: 1\nmodule: m\ndtype: complex64\nops:\n  - name: f\n"
        f"    inputs: {{x: [3]}}\n    output: {written}\n"
    )
    with pytest.raises(SpecError, match="real dtypes only"):
        derive_op(parse_spec(text.encode(), "s.yaml"), 0)


def test_readme_table_is_current(tf):
    """The README's reductions table is what `python tests/stability.py` prints now."""
    from conftest import GENERATED, ROOT, import_source
    from stability import reduction_table

    module = import_source("generated_reductions", GENERATED / "reductions.py")
    assert reduction_table(tf, module) in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_op_traces_in_a_graph(tf, modules, dtype):
    """Every op and its gradient trace with unknown sizes (see trace_in_a_graph)."""
    for op in OPS:
        signature = [tf.TensorSpec([None, 3], getattr(tf, dtype))]
        trace_in_a_graph(tf, lambda x, op=op: _call(tf, modules[dtype], op, x), signature)


def test_two_naive_forms_in_one_op(build, tf):
    """Each naive sum is rewritten, also when one op holds several (the second used to
    be left dangling: a KeyError in verification, a NameError in the module)."""
    module = build(
        "version: 1\nmodule: two\ndtype: float64\nops:\n"
        "  - name: f\n    inputs: {x: [3]}\n"
        "    output: log(sum(exp(x))) + log(sum(exp(-x)))\n"
        "  - name: h\n    inputs: {x: [null, 3], y: [null, 3]}\n"
        "    where:\n"
        "      p: exp(x) / sum(exp(x), axis=1, keepdims=True)\n"
        "      q: exp(y) / sum(exp(y), axis=1, keepdims=True)\n"
        "    outputs:\n      a: p * q\n"
        "      b: x - log(sum(exp(x), axis=1, keepdims=True)) + y - log(sum(exp(y), axis=1, keepdims=True))\n",
        audit=False,
    )
    x = tf.constant([1000.0, 999.0, -5.0], tf.float64)
    with tf.GradientTape() as tape:
        tape.watch(x)
        out = module.f(x)
    lse = tf.reduce_logsumexp
    np.testing.assert_allclose(out.numpy(), (lse(x) + lse(-x)).numpy(), rtol=1e-15)
    want = tf.nn.softmax(x) - tf.nn.softmax(-x)
    np.testing.assert_allclose(tape.gradient(out, x).numpy(), want.numpy(), atol=1e-15)
    xs = tf.constant([[100.0, 0.0, -100.0]], tf.float64)
    ys = tf.constant([[3.0, 3.0, 1.0]], tf.float64)
    a, b = module.h(xs, ys)
    np.testing.assert_allclose(a.numpy(), (tf.nn.softmax(xs) * tf.nn.softmax(ys)).numpy(),
                               rtol=1e-13)
    np.testing.assert_allclose(
        b.numpy(), (tf.nn.log_softmax(xs) + tf.nn.log_softmax(ys)).numpy(), rtol=1e-14)


def test_log_mean_exp_with_an_empty_batch(tf, modules):
    """The count of a log-mean-exp is static: a batch of 0 rows works (it divided by
    the size of the empty result)."""
    out = modules["float32"].log_mean_exp(tf.zeros([3, 0]))
    assert out.shape == (0,)


def _keepdims_ops(tf):
    """name: (output, reference in TensorFlow, whether a partial broadcasts the
    cotangent so that the gradient needs no broadcast_to)."""
    mean, total = tf.reduce_mean, tf.reduce_sum
    return {
        "normalized": ("x - mean(x, axis=-1, keepdims=True)",
                       lambda x, y: x - mean(x, -1, True), False),
        "centered_square": ("(x - mean(x, axis=-1, keepdims=True))**2",
                            lambda x, y: (x - mean(x, -1, True)) ** 2, True),
        "scaled_sum": ("sum(2 * x + y, axis=-1, keepdims=True)",
                       lambda x, y: total(2 * x + y, -1, True), False),
        "weighted_sum": ("sum(x * y, axis=-1, keepdims=True)",
                         lambda x, y: total(x * y, -1, True), True),
        "plain_mean": ("mean(x, axis=[0, 1], keepdims=True) * y",
                       lambda x, y: mean(x, [0, 1], True) * y, False),
    }


@pytest.mark.parametrize("name", ["normalized", "centered_square", "scaled_sum",
                                  "weighted_sum", "plain_mean"])
@pytest.mark.parametrize("mode", ["eager", "none_dims"])
def test_keepdims_cotangent_broadcasts_only_where_needed(build, tf, name, mode):
    """A keepdims sum/mean's cotangent is used at its reduced shape where a partial of
    the operand's shape broadcasts it in the product (layer norm: no broadcast_to pass
    over the whole tensor), and broadcast explicitly where nothing else gives the
    gradient its input's shape (a constant partial, a cotangent passed straight through)."""
    output, plain, no_broadcast = _keepdims_ops(tf)[name]
    module = build(
        "version: 1\nmodule: keep\ndtype: float64\nops:\n"
        f"  - name: {name}\n    inputs: {{x: [null, 4], y: [4]}}\n"
        f"    output: {output}\n", audit=False)
    source = open(module.__file__).read()
    body = source[source.index(f"def _{name}_vjp("):]
    grad_body = body[body.index("def grad("):body.index("\n    return ")]
    rng = np.random.default_rng(5)
    x, y = tf.constant(rng.normal(size=(3, 4))), tf.constant(rng.normal(size=4))
    fn = getattr(module, name)
    if mode == "none_dims":
        fn = tf.function(fn, input_signature=[tf.TensorSpec([None, None], tf.float64),
                                              tf.TensorSpec([None], tf.float64)])
    upstream = tf.constant(rng.normal(size=plain(x, y).shape))
    results = []
    for f in (fn, plain):
        with tf.GradientTape() as tape:
            tape.watch([x, y])
            out = f(x, y)
        results.append((out, tape.gradient(out, [x, y], output_gradients=upstream)))
    (out, got), (want_out, want) = results
    np.testing.assert_allclose(out.numpy(), want_out.numpy(), rtol=1e-13)
    for g, w, v in zip(got, want, (x, y)):
        assert g.shape == v.shape
        w = np.zeros(v.shape) if w is None else w.numpy()  # (y unused: autodiff's None)
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-12, atol=1e-13)
    if no_broadcast:
        assert "broadcast_to" not in grad_body, grad_body
