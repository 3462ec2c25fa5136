"""Direct tests of every runtime helper (gradgen/runtime.py, templates/runtime/).

All helpers are rendered into one standalone module (tests/helpers_module.py) and each
is checked against an independent reference: mpmath at 50 digits (a private context,
so the global mpmath precision is untouched), exact cofactors from minors, or exact
arithmetic in NumPy; never against another helper. Inputs are rounded into the dtype
under test first and the reference is computed at those exact values, so the
tolerances measure only the helper's own error: rtol 1e-6 in float32 and 1e-12 in
float64 unless a row says why not. Known defects are strict xfails, never expected
values.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
mpmath = pytest.importorskip("mpmath")

from helpers_module import HELPERS, import_helpers_module, render_helpers_module

mp = mpmath.MPContext()
mp.dps = 50

FLOATS = ("float32", "float64")
RTOL = {"float32": 1e-6, "float64": 1e-12, "complex64": 1e-6, "complex128": 1e-12}
INF = float("inf")
NAN = float("nan")


@pytest.fixture(scope="module")
def H(tmp_path_factory):
    """The rendered helpers, imported once."""
    path = render_helpers_module(tmp_path_factory.mktemp("helpers"))
    return import_helpers_module(path, "gradgen_helpers_under_test")


# --------------------------------------------------------------------------- references


def mpf(v):
    """The exact value of a float (any width) as a 50-digit mpmath number."""
    return mp.mpc(complex(v)) if np.iscomplexobj(v) else mp.mpf(float(v))


def rounded(values, dtype):
    """Floats (or mpmath numbers) rounded into `dtype`, returned as float64 / complex128
    (overflow gives inf, as the dtype would)."""
    arr = np.asarray(values, dtype=object)
    cplx = np.dtype(dtype).kind == "c"
    flat = [complex(v) if cplx else float(v) for v in arr.ravel()]
    wide = np.array(flat, dtype=np.complex128 if cplx else np.float64).reshape(
        arr.shape
    )
    with np.errstate(over="ignore", under="ignore"):
        return wide.astype(dtype).astype(wide.dtype)


def elementwise(fn, x):
    """fn applied in mpmath to every element of the NumPy array x (object array)."""
    x = np.asarray(x)
    return np.array([fn(mpf(v)) for v in x.ravel()], dtype=object).reshape(x.shape)


def assert_close(actual, want, rtol, atol=0.0):
    """actual (a tensor) equals want (float64/complex128) within rtol; inf, -inf and NaN
    must sit in the same places."""
    got = np.asarray(actual)
    got = got.astype(np.complex128 if np.iscomplexobj(got) else np.float64)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


def assert_within(actual, want, scale, rtol):
    """|actual - want| <= rtol * scale elementwise: the error bound of a sum whose terms
    may cancel, scale being the sum of the terms' absolute values."""
    got = np.asarray(actual).astype(np.float64)
    want = np.asarray(want, dtype=np.float64)
    err = np.abs(got - want)
    bound = rtol * np.asarray(scale, dtype=np.float64)
    assert np.all(err <= bound), f"error {err} above {bound} (got {got}, want {want})"


def naive(fn, v):
    """fn() (a naive formula in v) at 50 digits plus as many as 1 - exp(v) or
    cosh(v) - 1 cancel (about 2 |log10 |v|| for small v, |v| / 2.3 for large -v)."""
    extra = 10
    if mp.isfinite(v) and v != 0:
        extra += int(max(-2 * mp.log10(abs(v)), -v / 2.3, 0))
    with mp.extradps(extra):
        return +fn()


def mp_lse(ts):
    """log(sum(exp(t))) in mpmath, -inf for no mass, inf / NaN as the terms give."""
    if any(mp.isnan(t) for t in ts):
        return mp.nan
    m = max(ts)
    if mp.isinf(m):
        return m
    return m + mp.log(mp.fsum(mp.exp(t - m) for t in ts))


def mp_softmax(ts):
    lse = mp_lse(ts)
    return [mp.exp(t - lse) for t in ts]


def _slices(x, axis):
    """x with the axes in `axis` moved last and flattened: (array (..., k), perm)."""
    axis = sorted(a % x.ndim for a in axis)
    keep = [a for a in range(x.ndim) if a not in axis]
    moved = np.transpose(x, keep + axis)
    return moved.reshape(moved.shape[: len(keep)] + (-1,)), keep + axis, moved.shape


def reduce_ref(x, axis, fn, keepdims=False):
    """fn (a list of mpf -> mpf) over the axes in `axis`, as an object array."""
    flat, _, _ = _slices(np.asarray(x), axis)
    rows = flat.reshape(-1, flat.shape[-1])
    out = np.array([fn([mpf(v) for v in row]) for row in rows], dtype=object)
    out = out.reshape(flat.shape[:-1])
    return np.expand_dims(out, tuple(sorted(axis))) if keepdims else out


def map_ref(x, axis, fn):
    """fn (a list of mpf -> list of mpf) over the axes in `axis`: x's shape."""
    flat, perm, moved_shape = _slices(np.asarray(x), axis)
    rows = flat.reshape(-1, flat.shape[-1])
    out = np.array([fn([mpf(v) for v in row]) for row in rows], dtype=object)
    return np.transpose(out.reshape(moved_shape), np.argsort(perm))


def tape_vjp(fn, x, upstream):
    """The gradient TensorFlow computes for fn at x with the cotangent `upstream`."""
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
    return tape.gradient(y, x, output_gradients=upstream)


# Rows of three terms, reduced along the last axis.
ROWS = np.array(
    [
        [1.0, 2.0, 3.0],  # ordinary
        [0.0, -40.0, -50.0],  # one term dominates: the others add ~4e-18
        [1e4, 1e4 + 1.0, -1e4],  # exp(x) overflows without the shift
        [-1e4, -1e4 - 2.0, -1e4 - 3.0],  # exp(x) underflows without the shift
        [5.0, 5.0, 5.0],  # three-way tie
        [7.0, 7.0, -3.0],  # tie at the top
        [0.0, -INF, 1.0],  # a -inf term has no mass
    ]
)
# Rows where the reduction is not finite: every term -inf (no mass), an inf term.
SPECIAL_ROWS = np.array([[-INF, -INF, -INF], [INF, 0.0, 1.0]])
# Cotangents for the VJPs: of order 1 with spread, different per row.
UPSTREAM = np.array(
    [
        [0.3, -1.2, 2.0],
        [1.5, 0.25, -0.75],
        [-2.0, 0.5, 1.0],
        [0.125, 3.0, -1.0],
        [1.0, -2.0, 0.5],
        [0.7, -0.4, 1.1],
        [2.5, -1.5, 0.5],
    ]
)
RNG = np.random.default_rng(20240611)  # for the tables, drawn at import
_test_rng = None


@pytest.fixture(autouse=True)
def _fresh_test_rng():
    """Each test draws from its own generator: its values do not depend on which tests
    ran before it."""
    global _test_rng
    _test_rng = np.random.default_rng(8)


def rng():
    return _test_rng


CUBE = RNG.normal(size=(2, 3, 4)) * 30.0  # terms spread over ~100: some dominate
# rtol in float32 for CUBE: its differences x - max(x) (up to ~150) are not exact in
# float32, and exp turns their rounding (half an ulp, 4e-6 at 100) into that relative
# error: exp's condition number |x - m|, not the helpers' doing. ROWS' differences are
# exact. float64 keeps 1e-12 (|x - m| * 1.1e-16 < 2e-14).
CUBE_RTOL32 = 1e-5


def rtol_for(dtype, rtol32):
    return rtol32 if dtype == "float32" else RTOL[dtype]


# ------------------------------------------------------------------------ the rendering


def test_every_template_helper_is_rendered(H):
    """Every file of templates/runtime/ is one declared helper's template and defines
    it, and every helper is a function of the rendered module."""
    from gradgen.render import templates_dir
    from gradgen.runtime import HELPERS as DECLARED

    files = {p.name for p in (templates_dir() / "runtime").glob("*")}
    assert sorted(files) == sorted(h.template.removeprefix("runtime/") for h in DECLARED)
    for helper in DECLARED:
        text = (templates_dir() / helper.template).read_text()
        assert re.search(rf"^def {helper.name}\(", text, re.M), helper.name
        assert "{%" not in text and "{{" not in text, helper.template  # plain code
    for name in HELPERS:
        assert callable(getattr(H, name)), name


# ------------------------------------------------------------------------ _check_input

MESSAGE_ERRORS = [
    # (value, dtype, declared, exception, message)
    pytest.param(
        lambda: tf.constant([1.0], tf.float32),
        tf.float64,
        [None],
        TypeError,
        "op: input 'x' must have dtype float64, got float32",
        id="tensor-dtype",
    ),
    pytest.param(
        lambda: tf.Variable([1.0], dtype=tf.float64),
        tf.float32,
        [None],
        TypeError,
        "op: input 'x' must have dtype float32, got float64",
        id="variable-dtype",
    ),
    pytest.param(
        lambda: __import__("keras").Variable(np.ones(2, np.float16)),
        tf.float32,
        [None],
        TypeError,
        "op: input 'x' must have dtype float32, got float16",
        id="keras-variable-dtype",
    ),
    pytest.param(
        lambda: tf.constant([1], tf.int32),
        tf.float32,
        [1],
        TypeError,
        "op: input 'x' must have dtype float32, got int32",
        id="int-tensor",
    ),
    pytest.param(
        lambda: tf.constant([1 + 1j], tf.complex64),
        tf.complex128,
        [1],
        TypeError,
        "op: input 'x' must have dtype complex128, got complex64",
        id="complex-width",
    ),
    pytest.param(
        lambda: [1.0, 2.0],
        tf.float64,
        [2, 1],
        ValueError,
        "op: input 'x' must have shape [2, 1], got (2,)",
        id="rank-low",
    ),
    pytest.param(
        lambda: 3.0,
        tf.float64,
        [None],
        ValueError,
        "op: input 'x' must have shape [None], got ()",
        id="scalar-for-vector",
    ),
    pytest.param(
        lambda: [[1.0, 2.0]],
        tf.float64,
        [2, "n"],
        ValueError,
        "op: input 'x' must have shape [2, n], got (1, 2)",
        id="known-dim-first",
    ),
    pytest.param(
        lambda: np.zeros((2, 3, 5)),
        tf.float64,
        ["batch", 3, 4],
        ValueError,
        "op: input 'x' must have shape [batch, 3, 4], got (2, 3, 5)",
        id="known-dim-last",
    ),
]


@pytest.mark.parametrize("make, dtype, declared, error, message", MESSAGE_ERRORS)
def test_check_input_rejects(H, make, dtype, declared, error, message):
    with pytest.raises(error, match="^" + re.escape(message) + "$"):
        H._check_input("op", "x", make(), dtype, declared)


ACCEPTED = [
    # (value, dtype, declared, expected values)
    pytest.param([1, 2], tf.float64, [None], [1.0, 2.0], id="python-ints-converted"),
    pytest.param(
        np.float32([0.5, 2.0]), tf.float64, [2], [0.5, 2.0], id="numpy-converted"
    ),
    pytest.param(2.5, tf.float32, [], 2.5, id="scalar"),
    pytest.param(
        [[1.0, 2.0, 3.0]], tf.float64, ["batch", 3], [[1.0, 2.0, 3.0]], id="named"
    ),
    pytest.param([[1j], [2.0]], tf.complex128, [None, 1], [[1j], [2.0]], id="complex"),
]


@pytest.mark.parametrize("value, dtype, declared, want", ACCEPTED)
def test_check_input_accepts(H, value, dtype, declared, want):
    out = H._check_input("op", "x", value, dtype, declared)
    assert isinstance(out, tf.Tensor) and out.dtype == dtype
    np.testing.assert_array_equal(out.numpy(), np.asarray(want))


TF_FLOATS = (tf.float16, tf.bfloat16, tf.float32, tf.float64)


@pytest.mark.parametrize("values, want", [
    ({"x": 1.0, "y": [2.0]}, tf.float32),  # host numbers: the default
    ({"x": np.array([1, 2]), "y": 2.0}, tf.float32),  # NumPy integers convert
    ({"x": np.array([1.0])}, tf.float64),  # NumPy floats count like tensors
    ({"x": tf.constant(1.0, tf.bfloat16), "y": 3}, tf.bfloat16),
    ({"x": 1.0, "y": tf.Variable(np.float16(1))}, tf.float16),
])
def test_common_dtype(H, values, want):
    assert H._common_dtype("op", values, TF_FLOATS, tf.float32) == want


@pytest.mark.parametrize("values, message", [
    ({"x": tf.constant(1.0), "y": np.array([1.0])},
     "op: inputs 'x' (float32) and 'y' (float64) have different dtypes; cast one "
     "(tf.cast) so that they agree"),
    ({"x": tf.constant([1])}, "op: input 'x' has dtype int32; op takes float16, bfloat16, "
                              "float32, float64"),
])
def test_common_dtype_refuses(H, values, message):
    with pytest.raises(TypeError, match="^" + re.escape(message) + "$"):
        H._common_dtype("op", values, TF_FLOATS, tf.float32)


def test_check_input_variable_of_the_dtype(H):
    out = H._check_input(
        "op", "v", tf.Variable([1.0, 2.0], dtype=tf.float32), tf.float32, [2]
    )
    assert out.dtype == tf.float32
    np.testing.assert_array_equal(out.numpy(), [1.0, 2.0])


RUNTIME = [
    # (signature shape, declared, good value shape, bad value shape, want static shape)
    pytest.param([None, None], [2, "n"], (2, 5), (3, 5), [2, None], id="dim-unknown"),
    pytest.param([None, 4], ["b", 4], (7, 4), None, [None, 4], id="only-names-unknown"),
    pytest.param(None, [2, None], (2, 1), (2,), [2, None], id="rank-unknown"),
    pytest.param(None, [], (), (1,), [], id="rank-unknown-scalar"),
]


@pytest.mark.parametrize("sig, declared, good, bad, static", RUNTIME)
def test_check_input_run_time(H, sig, declared, good, bad, static):
    """Dims unknown while tracing are checked when the graph runs; the result carries
    the declared dims statically."""
    seen = []

    @tf.function(input_signature=[tf.TensorSpec(sig, tf.float64)])
    def f(x):
        out = H._check_input("op", "x", x, tf.float64, declared)
        seen.append(out.shape.as_list())
        return out

    value = np.arange(np.prod(good), dtype=np.float64).reshape(good)
    np.testing.assert_array_equal(f(value).numpy(), value)
    assert seen == [static]
    if bad is not None:
        with pytest.raises(
            tf.errors.InvalidArgumentError, match="is not compatible with"
        ):
            f(np.zeros(bad))


def test_check_input_static_rank_inside_function(H):
    """A rank known while tracing is checked while tracing (ValueError)."""

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float64)])
    def f(x):
        return H._check_input("op", "x", x, tf.float64, [None, 4])

    message = "op: input 'x' must have shape [None, 4], got (None, 3)"
    with pytest.raises(ValueError, match=re.escape(message)):
        f.get_concrete_function()


def test_check_input_dtype_inside_function(H):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def f(x):
        return H._check_input("op", "x", x, tf.float64, [None])

    with pytest.raises(
        TypeError, match=re.escape("must have dtype float64, got float32")
    ):
        f.get_concrete_function()


# ------------------------------------------------------------------- _check_named_dims


def test_check_named_dims_consistent(H):
    x, w = tf.zeros((2, 3)), tf.zeros((3, 4))
    out = H._check_named_dims("op", {"x": x, "W": w},
                              {"n": [("x", 1), ("W", 0)], "m": [("W", 1)]})
    assert out[0] is x and out[1] is w  # all static: returned as they are


@pytest.mark.parametrize(
    "shapes, uses, message",
    [
        pytest.param(
            {"x": (2, 3), "W": (4, 5)},
            {"n": [("x", 1), ("W", 0)]},
            "op: dim 'n' must have one size, got x: 3 (axis 1), W: 4 (axis 0)",
            id="two-inputs",
        ),
        pytest.param(
            {"x": (2, 3), "W": (3, 5), "b": (6,)},
            {"n": [("x", 1), ("W", 0)], "m": [("W", 1), ("b", 0)]},
            "op: dim 'm' must have one size, got W: 5 (axis 1), b: 6 (axis 0)",
            id="second-dim",
        ),
        pytest.param(
            {"x": (2, 3), "y": (3, 3), "z": (7, 2)},
            {"k": [("x", 1), ("y", 0), ("z", 0)]},
            "op: dim 'k' must have one size, got x: 3 (axis 1), y: 3 (axis 0), z: 7 (axis 0)",
            id="third-input",
        ),
    ],
)
def test_check_named_dims_static_mismatch(H, shapes, uses, message):
    values = {name: tf.zeros(shape) for name, shape in shapes.items()}
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        H._check_named_dims("op", values, uses)


@pytest.mark.parametrize(
    "sig_x, sig_w, bad_w",
    [
        pytest.param([None, None], [None, 4], (5, 4), id="both-unknown"),
        pytest.param([2, 3], [None, 4], (1, 4), id="one-static-size-1-would-broadcast"),
    ],
)
def test_check_named_dims_run_time(H, sig_x, sig_w, bad_w):
    @tf.function(input_signature=[tf.TensorSpec(sig_x), tf.TensorSpec(sig_w)])
    def f(x, w):
        x, w = H._check_named_dims("op", {"x": x, "W": w}, {"n": [("x", 1), ("W", 0)]})
        return tf.reduce_sum(x) + tf.reduce_sum(w)  # nothing here fails on its own

    assert f(tf.zeros((2, 3)), tf.zeros((3, 4))).numpy() == 0.0
    message = "op: dim 'n' must have one size in 'x' (axis 1) and 'W' (axis 0)"
    # a graph's assert message shows the quotes escaped (\\')
    pattern = re.escape(message).replace("'", r"\\?'")
    with pytest.raises(tf.errors.InvalidArgumentError, match=pattern):
        f(tf.zeros((2, 3)), tf.zeros(bad_w))


def test_check_named_dims_static_mismatch_while_tracing(H):
    """Two known sizes differ: a ValueError while tracing, though a third is unknown."""

    @tf.function(
        input_signature=[
            tf.TensorSpec([None, 3]),
            tf.TensorSpec([4, None]),
            tf.TensorSpec([None]),
        ]
    )
    def f(x, w, z):
        H._check_named_dims("op", {"x": x, "W": w, "z": z},
                            {"n": [("x", 1), ("W", 0), ("z", 0)]})
        return x

    with pytest.raises(
        ValueError, match=re.escape("dim 'n' must have one size, got x: 3 (axis 1), W: 4")
    ):
        f.get_concrete_function()


def test_check_named_dims_one_input_two_axes_static(H):
    """W declared [n, n] but not square: the documented static ValueError (sizes were
    once keyed by input name, so one input's two sizes overwrote each other)."""
    w = tf.zeros((3, 4))
    with pytest.raises(ValueError, match="must have one size"):
        H._check_named_dims("op", {"W": w}, {"n": [("W", 0), ("W", 1)]})


# ------------------------------------------------------------------------ _logsumexp

LSE_TERMS = [
    pytest.param((0.0, -20.0), id="dominant"),  # 2.06e-9 above 0, kept by log1p
    pytest.param((1.0, 2.0, 3.0), id="three"),
    pytest.param((1e4, 1e4), id="large-tie"),  # exp overflows
    pytest.param((-1e4, -1e4 - 1.0), id="large-negative"),  # exp underflows
    pytest.param((3e38, 3e38), id="near-max"),  # m + log 2 rounds to m
    pytest.param((-745.0, -745.0), id="tiny-tie"),
    pytest.param((0.0, -1e-10), id="near-tie"),
    pytest.param((0.0, 0.0, 0.0), id="three-way-tie"),  # log 3
    pytest.param((5.0, 5.0, -3.0), id="tie-and-small"),
    pytest.param((-INF, 2.0), id="minus-inf-term"),
    pytest.param((-INF, -INF), id="all-minus-inf"),  # -inf
    pytest.param((INF, 1.0), id="inf-term"),  # inf
    pytest.param((NAN, 1.0), id="nan-term"),
    pytest.param((-5.0, 1e4), id="second-dominant"),  # the maximum over every term
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("terms", LSE_TERMS)
def test_logsumexp_values(H, terms, dtype):
    xs = [rounded(t, dtype) for t in terms]
    out = H._logsumexp(*[tf.constant(x, dtype) for x in xs])
    assert out.dtype == dtype
    assert_close(out, rounded(mp_lse([mpf(x) for x in xs]), dtype), RTOL[dtype])


def test_logsumexp_broadcasts(H):
    a = rng().normal(size=(3, 1)) * 50.0
    b = rng().normal(size=(4,)) * 50.0
    c = np.float64(-1e3)
    out = H._logsumexp(tf.constant(a), tf.constant(b), tf.constant(c))
    want = np.array(
        [
            [float(mp_lse([mpf(a[i, 0]), mpf(b[j]), mpf(c)])) for j in range(4)]
            for i in range(3)
        ]
    )
    assert out.shape == (3, 4)
    assert_close(out, want, 1e-12)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(
    "terms",
    [
        pytest.param((1.0, 2.0, 3.0), id="three"),
        pytest.param((0.0, -20.0), id="dominant"),  # gradient 2.06e-9 on the small term
        pytest.param((1e4, 1e4), id="large-tie"),  # 1/2 each
        pytest.param((5.0, 5.0, -3.0), id="tie-and-small"),
        pytest.param((-INF, 2.0), id="minus-inf-term"),  # 0 and 1
    ],
)
def test_logsumexp_gradient_is_softmax(H, terms, dtype):
    xs = [tf.constant(rounded(t, dtype), dtype) for t in terms]
    with tf.GradientTape() as tape:
        tape.watch(xs)
        y = H._logsumexp(*xs)
    grads = tape.gradient(y, xs)
    want = mp_softmax([mpf(x.numpy()) for x in xs])
    for g, w in zip(grads, want):
        assert_close(g, rounded(w, dtype), RTOL[dtype])


# ------------------------------------------------------------------------ _log1mexp

LOG1MEXP_X = np.array(
    [
        0.0,  # -inf
        -1e-30,  # log(1e-30): 1 - exp(x) cancels completely
        -1e-10,
        -1e-3,
        -0.5,
        -0.6931471805599453,  # -log 2, the switch
        -0.6931472,
        -1.0,
        -5.0,
        -20.0,
        -50.0,  # -exp(x) ~ -2e-22, kept by log1p
        -700.0,
        -1e4,  # -0.0
        -INF,  # 0
        1e-3,  # NaN above 0
        INF,  # NaN
    ]
)


@pytest.mark.parametrize("dtype", FLOATS)
def test_log1mexp_values(H, dtype):
    x = rounded(LOG1MEXP_X, dtype)
    want = elementwise(
        lambda v: naive(lambda: mp.log(1 - mp.exp(v)), v) if v <= 0 else mp.nan, x
    )
    out = H._log1mexp(tf.constant(x, dtype))
    assert out.dtype == dtype
    assert_close(out, rounded(want, dtype), RTOL[dtype])


@pytest.mark.parametrize("dtype", FLOATS)
def test_log1mexp_gradient(H, dtype):
    """d/dx log(1 - exp(x)) = -1 / expm1(-x), finite on both branches."""
    x = rounded([-1e-10, -0.5, -1.0, -20.0, -INF], dtype)
    g = tape_vjp(H._log1mexp, tf.constant(x, dtype), None)
    want = elementwise(lambda v: -1 / mp.expm1(-v) if mp.isfinite(v) else mp.mpf(0), x)
    assert_close(g, rounded(want, dtype), RTOL[dtype])


# ------------------------------------------------------------------------ _lse_parts


@pytest.mark.parametrize("dtype", FLOATS)
def test_lse_parts(H, dtype):
    x = rounded(np.concatenate([ROWS, SPECIAL_ROWS]), dtype)
    m_safe, log1p_rest, finite, m = H._lse_parts(tf.constant(x, dtype), [1])
    top = x.max(axis=1, keepdims=True)
    np.testing.assert_array_equal(m.numpy(), top)  # exact: the largest term
    np.testing.assert_array_equal(finite.numpy(), np.isfinite(top))
    np.testing.assert_array_equal(m_safe.numpy(), np.where(np.isfinite(top), top, 0.0))
    fin = np.isfinite(top[:, 0])
    # log1p_rest = log(sum(exp(x - m))): accurate relative to itself (4e-18 in row 2)
    rest = reduce_ref(x[fin], [1], lambda ts: mp_lse(ts) - max(ts), keepdims=True)
    assert_close(log1p_rest.numpy()[fin], rounded(rest, dtype), RTOL[dtype])


@pytest.mark.parametrize("dtype", FLOATS)
def test_lse_parts_gradient_is_softmax(H, dtype):
    """TensorFlow's gradient of m + log1p_rest is softmax(x), ties included."""
    x = rounded(ROWS, dtype)

    def f(t):
        m_safe, log1p_rest, _, _ = H._lse_parts(t, [1])
        return m_safe + log1p_rest

    g = rounded(UPSTREAM[:, :1], dtype)
    grad = tape_vjp(f, tf.constant(x, dtype), tf.constant(g, dtype))
    want = map_ref(x, [1], mp_softmax) * g
    assert_close(grad, rounded(want, dtype), RTOL[dtype])


# ----------------------------------------------------------------- _reduce_logsumexp

REDUCE_CASES = [
    # (x, axis, keepdims, count)
    pytest.param(np.concatenate([ROWS, SPECIAL_ROWS]), [1], False, 0, id="rows"),
    pytest.param(
        np.concatenate([ROWS, SPECIAL_ROWS]), [1], True, 3, id="rows-mean-keepdims"
    ),
    pytest.param(CUBE, [0, 2], False, 0, id="cube-axes-0-2"),
    pytest.param(CUBE, [1], True, 0, id="cube-axis-1-keepdims"),
    pytest.param(CUBE, [0, 1, 2], False, 24, id="cube-all-mean"),
    # log(mean(exp(x))) of small terms is ~2e-10: relative accuracy needs the count form
    pytest.param(
        np.array([[1e-10, 2e-10, 3e-10], [-1e-3, 0.0, 2e-3]]),
        [1],
        False,
        3,
        id="mean-near-zero",
    ),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("x, axis, keepdims, count", REDUCE_CASES)
def test_reduce_logsumexp_values(H, x, axis, keepdims, count, dtype):
    x = rounded(x, dtype)
    out = H._reduce_logsumexp(
        tf.constant(x, dtype), axis, keepdims=keepdims, count=count
    )
    shift = mp.log(count) if count else 0
    want = reduce_ref(x, axis, lambda ts: mp_lse(ts) - shift, keepdims)
    assert out.dtype == dtype
    assert_close(out, rounded(want, dtype), RTOL[dtype])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(
    "x, axis, keepdims, count, rtol32",
    [
        pytest.param(ROWS, [1], False, 0, 1e-6, id="rows"),
        pytest.param(ROWS, [1], True, 3, 1e-6, id="rows-mean-keepdims"),
        pytest.param(CUBE, [0, 2], False, 0, CUBE_RTOL32, id="cube-axes-0-2"),
        pytest.param(
            CUBE, [0, 1, 2], True, 24, CUBE_RTOL32, id="cube-all-mean-keepdims"
        ),
    ],
)
def test_reduce_logsumexp_gradient(H, x, axis, keepdims, count, rtol32, dtype):
    """VJP: upstream (broadcast back over the reduced axes) * softmax(x)."""
    x = rounded(x, dtype)
    out_shape = np.sum(x, axis=tuple(axis), keepdims=keepdims).shape
    g = rounded(rng().normal(size=out_shape), dtype)
    grad = tape_vjp(
        lambda t: H._reduce_logsumexp(t, axis, keepdims=keepdims, count=count),
        tf.constant(x, dtype),
        tf.constant(g, dtype),
    )
    g_full = g if keepdims else np.expand_dims(g, tuple(axis))
    want = map_ref(x, axis, mp_softmax) * g_full
    assert_close(grad, rounded(want, dtype), rtol_for(dtype, rtol32))


# ------------------------------------------------------- softmax, log_softmax and VJPs

SOFTMAX_CASES = [
    pytest.param(ROWS, [1], 1e-6, id="rows"),
    pytest.param(np.array([[0.0, -800.0, 0.0]]), [1], 1e-6, id="exp-underflows-to-0"),
    pytest.param(CUBE, [0, 2], CUBE_RTOL32, id="cube-axes-0-2"),
    pytest.param(CUBE, [1], CUBE_RTOL32, id="cube-axis-1"),
]


def softmax_vjp_ref(y, g):
    """Exact VJP of softmax, y * (g - sum(g * y)), and its error scale
    y_i * sum_j y_j |g_i - g_j| (the same sum without cancellation, since sum(y) = 1).
    """
    s = mp.fsum(gj * yj for gj, yj in zip(g, y))
    vjp = [yi * (gi - s) for yi, gi in zip(y, g)]
    scale = [
        yi * mp.fsum(yj * abs(gi - gj) for yj, gj in zip(y, g)) for yi, gi in zip(y, g)
    ]
    return vjp, scale


def log_softmax_vjp_ref(y, g):
    """Exact VJP of log_softmax, g - exp(y) * sum(g), and its error scale
    |g_i| (1 - p_i) + p_i sum_{j != i} |g_j|."""
    p = [mp.exp(v) for v in y]
    total = mp.fsum(g)
    vjp = [gi - pi * total for gi, pi in zip(g, p)]
    absum = mp.fsum(abs(gj) for gj in g)
    scale = [abs(gi) * (1 - pi) + pi * (absum - abs(gi)) for gi, pi in zip(g, p)]
    return vjp, scale


def vjp_ref(x, g, axis, forward, vjp):
    """(exact forward values, exact VJP, error scale) over the axes in `axis`, the VJP
    computed from the exact forward values of x (mpmath) and the cotangent g."""
    both = np.stack(
        [np.asarray(x, dtype=np.float64), np.asarray(g, dtype=np.float64)], -1
    )
    flat, perm, moved = _slices(np.moveaxis(both, -1, 0), [a + 1 for a in axis])
    rows_x = flat[0].reshape(-1, flat.shape[-1])
    rows_g = flat[1].reshape(-1, flat.shape[-1])
    ys, vs, ss = [], [], []
    for rx, rg in zip(rows_x, rows_g):
        y = forward([mpf(v) for v in rx])
        v, s = vjp(y, [mpf(v) for v in rg])
        ys.append(y), vs.append(v), ss.append(s)
    inv = np.argsort(perm)[1:] - 1
    shape = moved[1:]
    return tuple(
        np.transpose(np.array(a, dtype=object).reshape(shape), inv)
        for a in (ys, vs, ss)
    )


def mp_log_softmax(ts):
    lse = mp_lse(ts)
    return [t - lse for t in ts]


def upstream_like(x):
    return rng().normal(size=x.shape) if x.shape != ROWS.shape else UPSTREAM


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("x, axis, rtol32", SOFTMAX_CASES)
def test_softmax_values_and_gradient(H, x, axis, rtol32, dtype):
    x = rounded(x, dtype)
    g = rounded(upstream_like(x), dtype)
    y, vjp, scale = vjp_ref(x, g, axis, mp_softmax, softmax_vjp_ref)
    out = H._softmax(tf.constant(x, dtype), axis)
    assert out.dtype == dtype
    rtol = rtol_for(dtype, rtol32)
    assert_close(out, rounded(y, dtype), rtol)  # 1 - 4e-18 and 4e-18 in row 2
    grad = tape_vjp(
        lambda t: H._softmax(t, axis), tf.constant(x, dtype), tf.constant(g, dtype)
    )
    assert_within(grad, rounded(vjp, "float64"), rounded(scale, "float64"), rtol)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("x, axis, rtol32", SOFTMAX_CASES)
def test_log_softmax_values_and_gradient(H, x, axis, rtol32, dtype):
    x = rounded(x, dtype)
    g = rounded(upstream_like(x), dtype)
    y, vjp, scale = vjp_ref(x, g, axis, mp_log_softmax, log_softmax_vjp_ref)
    out = H._log_softmax(tf.constant(x, dtype), axis)
    assert out.dtype == dtype
    rtol = rtol_for(dtype, rtol32)
    assert_close(out, rounded(y, dtype), rtol)  # -4.25e-18 exactly in row 2
    grad = tape_vjp(
        lambda t: H._log_softmax(t, axis), tf.constant(x, dtype), tf.constant(g, dtype)
    )
    assert_within(grad, rounded(vjp, "float64"), rounded(scale, "float64"), rtol)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("x, axis, rtol32", SOFTMAX_CASES)
def test_softmax_grad_direct(H, x, axis, rtol32, dtype):
    """_softmax_grad(g, y) with y the correctly rounded softmax: the VJP to rtol of its
    cancellation-free scale, also at the entry where y ~ 1 (1 - y rounds to 0 there).
    No exp of a rounded shift here, so RTOL also for CUBE (rtol32 unused)."""
    x = rounded(x, dtype)
    g = rounded(upstream_like(x), dtype)
    y, vjp, scale = vjp_ref(x, g, axis, mp_softmax, softmax_vjp_ref)
    out = H._softmax_grad(
        tf.constant(g, dtype), tf.constant(rounded(y, dtype), dtype), axis
    )
    assert out.dtype == dtype
    assert_within(out, rounded(vjp, "float64"), rounded(scale, "float64"), RTOL[dtype])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("x, axis, rtol32", SOFTMAX_CASES)
def test_log_softmax_grad_direct(H, x, axis, rtol32, dtype):
    """_log_softmax_grad(g, y) with y the correctly rounded log_softmax (-inf entries
    pass g through). RTOL also for CUBE, as for _softmax_grad."""
    x = rounded(x, dtype)
    g = rounded(upstream_like(x), dtype)
    y, vjp, scale = vjp_ref(x, g, axis, mp_log_softmax, log_softmax_vjp_ref)
    out = H._log_softmax_grad(
        tf.constant(g, dtype), tf.constant(rounded(y, dtype), dtype), axis
    )
    assert out.dtype == dtype
    assert_within(out, rounded(vjp, "float64"), rounded(scale, "float64"), RTOL[dtype])


# Cotangents that make the top entry's VJP tiny: only there does the cancellation the
# helpers avoid show (with other cotangents of order 1 the top entry is of order 1 too).
SPECIAL_COTANGENTS = [
    # (x row, g row)
    pytest.param(
        [0.0, -40.0, -50.0], [1.0, 0.0, 0.0], id="dominant-g-on-top"
    ),  # ~4e-18
    pytest.param([0.0, -40.0, -50.0], [1.0, 1.0, 1.0], id="dominant-equal-g"),  # VJP ~0
    pytest.param([0.0, -20.0, -INF], [-2.0, 0.0, 3.0], id="dominant-minus-inf"),
    pytest.param([0.0, 0.0, -30.0], [1.0, -3.0, 0.5], id="tie-at-top"),
    pytest.param([-5.0, -5.0, -5.0], [2.0, 0.5, -1.0], id="all-tied"),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("helper", ["softmax", "log_softmax"])
@pytest.mark.parametrize("x, g", SPECIAL_COTANGENTS)
def test_softmax_grads_special_cotangents(H, x, g, helper, dtype):
    """At ties each top entry gets its own share; where one y dominates, the top entry's
    VJP (y_0 sum_j y_j (g_0 - g_j), or g_0 (1 - p_0) - p_0 sum_j g_j) keeps its digits.
    """
    x, g = rounded([x], dtype), rounded([g], dtype)
    if helper == "softmax":
        y, vjp, scale = vjp_ref(x, g, [1], mp_softmax, softmax_vjp_ref)
        grad = H._softmax_grad
    else:
        y, vjp, scale = vjp_ref(x, g, [1], mp_log_softmax, log_softmax_vjp_ref)
        grad = H._log_softmax_grad
    out = grad(tf.constant(g, dtype), tf.constant(rounded(y, dtype), dtype), [1])
    assert_within(out, rounded(vjp, "float64"), rounded(scale, "float64"), RTOL[dtype])


# ------------------------------------------------------------------- _extremum_grad

EXTREMUM_CASES = [
    # (x, axis, keepdims)
    pytest.param(
        np.array(
            [[3.0, 3.0, 1.0], [1.0, 2.0, 3.0], [-INF, -INF, -INF], [4.0, 4.0, 4.0]]
        ),
        [1],
        False,
        id="rows-ties",
    ),
    pytest.param(np.array([[3.0, 3.0, 1.0], [1.0, 2.0, 3.0]]), [0], True, id="columns"),
    pytest.param(np.round(CUBE / 20.0), [0, 2], False, id="cube-axes-0-2-ties"),
    pytest.param(np.round(CUBE / 20.0), [1, 2], True, id="cube-axes-1-2-keepdims"),
]


def test_reduction_helpers_default_to_no_keepdims_and_no_count(H):
    """The printer passes keepdims and count only when they are set: the defaults must
    be keepdims=False and a plain log-sum-exp (no count)."""
    x = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 4.0]])
    out = H._reduce_logsumexp(tf.constant(x), [1])
    want = reduce_ref(x, [1], mp_lse, False)
    assert out.shape == (2,)
    assert_close(out, rounded(want, "float64"), RTOL["float64"])
    y = np.max(x, axis=1)
    g = H._extremum_grad(tf.constant([1.0, 2.0]), tf.constant(x), tf.constant(y), [1])
    np.testing.assert_array_equal(g, [[0.0, 0.0, 1.0], [0.0, 0.0, 2.0]])


def test_log_softmax_of_a_row_with_inf(H):
    # x - max(x) where the row's maximum is inf: the inf entry is NaN (inf - inf), the
    # others -inf, their limit as that entry grows (TensorFlow's log_softmax is NaN
    # throughout)
    x = tf.constant([[INF, 1.0, -2.0]], tf.float64)
    assert_close(H._log_softmax(x, [1]), np.array([[NAN, -INF, -INF]]), 0.0)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("x, axis, keepdims", EXTREMUM_CASES)
def test_extremum_grad(H, x, axis, keepdims, kind, dtype):
    """The cotangent goes to the extreme elements, shared equally among ties."""
    x = rounded(x, dtype)
    reduce = np.max if kind == "max" else np.min
    y = reduce(x, axis=tuple(axis), keepdims=keepdims)
    g = rounded(rng().normal(size=y.shape), dtype)
    out = H._extremum_grad(
        tf.constant(g, dtype),
        tf.constant(x, dtype),
        tf.constant(y, dtype),
        axis,
        keepdims=keepdims,
    )
    y_full = y if keepdims else np.expand_dims(y, tuple(axis))
    g_full = g if keepdims else np.expand_dims(g, tuple(axis))
    mask = x == y_full
    want = np.where(mask, g_full / mask.sum(axis=tuple(axis), keepdims=True), 0.0)
    assert out.dtype == dtype and out.shape == x.shape
    assert_close(out, want.astype(dtype).astype(np.float64), RTOL[dtype])


# ------------------------------------------------------------------------- _logcosh

LOGCOSH_X = np.array(
    [
        0.0,
        1e-150,  # 5e-301 in float64 (0 in float32, where x rounds to 0)
        1e-15,  # x**2 / 2: cosh(x) - 1 is lost in 1 + ...
        1e-3,
        0.5,
        0.999999,
        1.0,
        1.000001,
        2.0,
        9.999,  # either side of the switch to |x| - log(2) at 10 (float64: 20)
        10.0,
        10.001,
        11.5,  # expm1(x) overflows float16 from 11.1 (the small branch is clamped)
        19.99,
        20.0,
        20.01,
        50.0,
        400.0,  # cosh overflows float32
        1e3,  # cosh overflows float64
        1e30,
        1e300,  # inf in float32
        -0.5,
        -1.0,
        -20.0,
        -1e3,
        INF,
        -INF,
        NAN,
    ]
)


@pytest.mark.parametrize("dtype", FLOATS)
def test_logcosh_values(H, dtype):
    x = rounded(LOGCOSH_X, dtype)
    want = elementwise(
        lambda v: naive(lambda: mp.log(mp.cosh(v)), v) if not mp.isnan(v) else mp.nan, x
    )
    out = H._logcosh(tf.constant(x, dtype))
    assert out.dtype == dtype
    assert_close(out, rounded(want, dtype), RTOL[dtype])


@pytest.mark.parametrize("dtype", FLOATS)
def test_logcosh_gradient_is_tanh(H, dtype):
    x = rounded(
        [0.0, 1e-15, 1e-3, 0.5, 1.0, 3.0, -3.0, 9.999, 10.001, 19.99, 20.01, 50.0, -1e3],
        dtype,
    )
    g = tape_vjp(H._logcosh, tf.constant(x, dtype), None)
    assert_close(g, rounded(elementwise(mp.tanh, x), dtype), RTOL[dtype])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_logcosh_half_precision_is_finite_past_expm1_overflow(H, dtype):
    """expm1(|x|) overflows float16 from 11.1: the small branch is clamped at 10."""
    x = [0.0, 0.25, -3.0, 9.99, 10.0, 11.5, 100.0, -60000.0]
    out = H._logcosh(tf.constant(x, dtype)).numpy().astype(np.float64)
    want = [float(mp.log(mp.cosh(mp.mpf(float(tf.cast(tf.constant(v, dtype), tf.float64)
                                               .numpy()))))) for v in x]
    np.testing.assert_allclose(out, want, rtol=1.6e-2 if dtype == "bfloat16" else 4e-3)


# --------------------------------------------------------------- _erfcx and _log_erfc


def mp_erfcx(v):
    if v == INF:
        return mp.mpf(0)
    if v > 1e100:  # mpmath's erfc fails here; DLMF 7.12.1, next term 3/(4x^5) < 1e-400
        return (1 - 1 / (2 * v * v)) / (v * mp.sqrt(mp.pi))
    return mp.exp(v * v) * mp.erfc(v)


ERFCX_X = np.array(
    [
        -INF,  # inf
        -30.0,  # 2 exp(900): inf (below _ERFCX_OVERFLOW_BELOW)
        -26.7,
        -26.5,  # 1e305: finite in float64, inf in float32
        -10.0,
        -5.0,
        -1.0,
        -1e-10,
        0.0,
        1e-10,
        0.5,
        1.0,
        5.0,
        6.0,
        8.0,
        9.2,  # erfc is subnormal in float32 from here
        9.99,  # the direct form, ~100 ulps lost to exp(x**2) (documented)
        10.0,  # the asymptotic series from here
        10.01,
        20.0,
        26.6,  # erfc underflows float64
        27.0,
        100.0,
        1e4,
        1e10,
        1e100,
        1e200,  # x**2 overflows: the series' leading term alone
        1e300,
        INF,  # 0
    ]
)


@pytest.mark.parametrize("dtype", FLOATS)
def test_erfcx_values(H, dtype):
    x = rounded(ERFCX_X, dtype)
    out = H._erfcx(tf.constant(x, dtype))
    assert out.dtype == dtype
    assert_close(out, rounded(elementwise(mp_erfcx, x), dtype), RTOL[dtype])


def test_erfcx_nan(H):
    assert np.isnan(H._erfcx(tf.constant([NAN], tf.float64)).numpy()).all()


@pytest.mark.parametrize("dtype", FLOATS)
def test_erfcx_gradient(H, dtype):
    """d/dx erfcx(x) = 2x erfcx(x) - 2/sqrt(pi). In float64 rtol 1e-10: near x = 10 the
    two terms cancel by ~200x and the direct form's ~100-ulp error is amplified."""
    x = rounded([-5.0, -1.0, 0.0, 0.5, 3.0, 9.99, 10.0, 10.01, 30.0, 1e4], dtype)
    g = tape_vjp(H._erfcx, tf.constant(x, dtype), None)
    want = elementwise(lambda v: 2 * v * mp_erfcx(v) - 2 / mp.sqrt(mp.pi), x)
    assert_close(g, rounded(want, dtype), {"float32": 1e-6, "float64": 1e-10}[dtype])


def mp_log_erfc(v):
    if v > 1e100:  # as mp_erfcx
        return -v * v + mp.log(mp_erfcx(v))
    return mp.log(mp.erfc(v))


LOG_ERFC_X = np.array(
    [
        -INF,  # log 2
        -30.0,
        -5.0,
        -1.0,
        -1e-3,
        0.0,  # 0
        1e-3,
        0.5,
        1.0,
        5.0,
        9.99,
        10.0,  # -x**2 + log(erfcx(x)) from here
        10.05,  # erfc underflows float32
        26.0,
        27.0,  # erfc underflows float64
        100.0,
        1e5,
        1e100,
        1e200,  # -1e400: -inf
        INF,  # -inf
    ]
)


@pytest.mark.parametrize("dtype", FLOATS)
def test_log_erfc_values(H, dtype):
    x = rounded(LOG_ERFC_X, dtype)
    out = H._log_erfc(tf.constant(x, dtype))
    assert out.dtype == dtype
    assert_close(out, rounded(elementwise(mp_log_erfc, x), dtype), RTOL[dtype])


@pytest.mark.xfail(
    strict=True,
    reason="float64 log(erfc(x)) near x = 0: erfc(x) = 1 - 1.13x rounds to 1 + eps, "
    "so the result (~ -1.13x, well conditioned) has relative error ~eps/|x| (4e-7 at "
    "1e-10); log1p(-erf(x)) would keep it",
)
def test_log_erfc_near_zero_float64(H):
    x = np.array([1e-10, -1e-10, 1e-8])
    out = H._log_erfc(tf.constant(x, tf.float64))
    assert_close(out, rounded(elementwise(mp_log_erfc, x), "float64"), RTOL["float64"])


def test_log_erfc_near_zero_float32(H):
    """float32 computes in float64: the loss above (4e-7 at 1e-10) is ~6 float32 ulps,
    within rtol 1e-6."""
    x = rounded([1e-10, -1e-10, 1e-8], "float32")
    out = H._log_erfc(tf.constant(x, tf.float32))
    assert_close(out, rounded(elementwise(mp_log_erfc, x), "float32"), RTOL["float32"])


@pytest.mark.parametrize("dtype", FLOATS)
def test_log_erfc_gradient(H, dtype):
    """d/dx log(erfc(x)) = -2 exp(-x**2) / (sqrt(pi) erfc(x)), -2 / (sqrt(pi) erfcx(x))
    where erfc underflows; rtol 1e-10 in float64 as for _erfcx's gradient (the direct
    form near x = 10)."""
    x = rounded([-5.0, -1.0, 0.0, 0.5, 3.0, 9.99, 10.0, 10.01, 30.0, 1e4], dtype)
    g = tape_vjp(H._log_erfc, tf.constant(x, dtype), None)
    want = elementwise(lambda v: -2 / (mp.sqrt(mp.pi) * mp_erfcx(v)), x)
    assert_close(g, rounded(want, dtype), {"float32": 1e-6, "float64": 1e-10}[dtype])


@pytest.mark.parametrize("dtype", FLOATS)
def test_erfcx_recip_values(H, dtype):
    """1 / erfcx(x), also where erfcx(x) is subnormal in float32 (x > 4.8e37: 0 under
    flush-to-zero, so 1 / _erfcx(x) is inf there) and where it is inf (x < -26.6)."""
    x = rounded([-30.0, -5.0, 0.0, 1.0, 9.99, 10.0, 1e4, 1e10, 5.95e37, 3e38], dtype)
    out = H._erfcx_recip(tf.constant(x, dtype))
    want = elementwise(lambda v: 1 / mp_erfcx(v), x)
    assert_close(out, rounded(want, dtype), {"float32": 1e-6, "float64": 1e-13}[dtype])


# --------------------------------------------------------------------------- _hypot

HYPOT_TERMS = [
    pytest.param((3.0, 4.0), id="3-4-5"),
    pytest.param((-3.0, 4.0), id="negative"),
    pytest.param((1.0, 2.0, 2.0), id="three-terms"),
    pytest.param((0.0, 0.0), id="zeros"),  # 0
    pytest.param((1e30, 1e30), id="squares-overflow-float32"),
    pytest.param((1e-30, 1e-30), id="squares-underflow-float32"),
    pytest.param((1e200, -1e200), id="squares-overflow-float64"),
    pytest.param((1e-200, 1e-200), id="squares-underflow-float64"),
    pytest.param((1e300, 1e-300), id="disparate"),
    pytest.param((3e38, 3e38), id="result-overflows-float32"),
    pytest.param((INF, 1.0), id="inf"),
    pytest.param((0.0, -INF), id="minus-inf"),
]


def mp_hypot(ts):
    if any(mp.isinf(t) for t in ts):
        return mp.inf
    return mp.sqrt(mp.fsum(t * t for t in ts))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("terms", HYPOT_TERMS)
def test_hypot_values(H, terms, dtype):
    xs = [rounded(t, dtype) for t in terms]
    out = H._hypot(*[tf.constant(x, dtype) for x in xs])
    assert out.dtype == dtype
    assert_close(out, rounded(mp_hypot([mpf(x) for x in xs]), dtype), RTOL[dtype])


def test_hypot_broadcasts(H):
    a = rng().normal(size=(3, 1)) * 1e150
    b = rng().normal(size=(4,)) * 1e150
    c = np.float64(-2e-200)
    out = H._hypot(tf.constant(a), tf.constant(b), tf.constant(c))
    want = np.array(
        [
            [float(mp_hypot([mpf(a[i, 0]), mpf(b[j]), mpf(c)])) for j in range(4)]
            for i in range(3)
        ]
    )
    assert_close(out, want, 1e-12)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(
    "terms",
    [
        pytest.param((3.0, 4.0), id="3-4-5"),
        pytest.param((1.0, -2.0, 2.0), id="three-terms"),
        pytest.param((1e30, 1e-30), id="disparate"),
        pytest.param((1e-30, 3e-30), id="tiny"),
    ],
)
def test_hypot_gradient(H, terms, dtype):
    """d hypot / d t_i = t_i / hypot."""
    xs = [tf.constant(rounded(t, dtype), dtype) for t in terms]
    with tf.GradientTape() as tape:
        tape.watch(xs)
        y = H._hypot(*xs)
    grads = tape.gradient(y, xs)
    ts = [mpf(x.numpy()) for x in xs]
    h = mp_hypot(ts)
    for g, t in zip(grads, ts):
        assert_close(g, rounded(t / h, dtype), RTOL[dtype])


@pytest.mark.xfail(
    strict=True,
    reason="the docstring says 'inf where one is inf' (IEEE hypot(inf, nan) = inf); "
    "tf.maximum(|inf|, |nan|) is NaN, so the result is NaN",
)
def test_hypot_inf_with_nan(H):
    out = H._hypot(tf.constant(INF, tf.float64), tf.constant(NAN, tf.float64))
    assert out.numpy() == INF


# ------------------------------------------------- _cofactor, _complex_det, _logabsdet


def mp_det(a):
    """det of a square object array of mpmath numbers by Laplace expansion along the
    first row: exact to 50 digits for the small sizes here, singular or not (mpmath's
    own LU det fails on some singular matrices)."""
    n = a.shape[0]
    if n == 0:
        return mp.mpf(1)
    return mp.fsum(
        (-1) ** j * a[0, j] * mp_det(np.delete(a[1:], j, 1))
        for j in range(n)
        if a[0, j] != 0
    )


def mp_matrix(a):
    return mp.matrix([[mpf(v) for v in row] for row in a])


def mp_cofactor(a):
    """The cofactor matrix of one square matrix from its minors (exact at 50 digits),
    C_ij = (-1)^(i + j) det(a without row i and column j)."""
    n = a.shape[0]
    if n == 1:
        return np.array([[mp.mpf(1)]], dtype=object)
    out = np.empty((n, n), dtype=object)
    for i in range(n):
        for j in range(n):
            minor = np.delete(np.delete(a, i, 0), j, 1)
            out[i, j] = (-1) ** (i + j) * mp_det(as_mp_object(minor))
    return out


def batched(fn, a):
    """fn over the last two axes of a NumPy array (object results)."""
    flat = a.reshape((-1,) + a.shape[-2:])
    outs = [fn(m) for m in flat]
    return np.array(outs, dtype=object).reshape(a.shape[:-2] + np.shape(outs[0]))


def as_mp_object(a):
    return np.vectorize(mpf, otypes=[object])(a)


def random_matrix(n, complex_=False, batch=()):
    a = RNG.normal(size=batch + (n, n))
    if complex_:
        a = a + 1j * RNG.normal(size=batch + (n, n))
    return a + 2.0 * n * np.eye(n)  # diagonally dominant: condition number ~2


def low_rank(n, rank, complex_=False):
    """An integer matrix of exactly `rank` (exact in float32 too)."""
    b = RNG.integers(-3, 4, size=(n, rank)).astype(np.float64)
    c = RNG.integers(-3, 4, size=(rank, n)).astype(np.float64)
    if complex_:
        b = b + 1j * RNG.integers(-3, 4, size=(n, rank))
    a = b @ c
    assert np.linalg.matrix_rank(a) == rank
    return a


MATRICES = {
    "1x1": np.array([[5.0]]),
    "1x1-batched": np.array([[[2.0]], [[-3.0]]]),
    "2x2": random_matrix(2),
    "2x2-singular": np.array([[1.0, 2.0], [2.0, 4.0]]),  # cofactor [[4, -2], [-2, 1]]
    "3x3": random_matrix(3),
    "3x3-rank-2": np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]),
    "3x3-rank-1": low_rank(3, 1),  # every 2x2 minor is 0
    "3x3-batched": random_matrix(3, batch=(2, 3)),
    "4x4": random_matrix(4),  # det * inverse^T
    "4x4-rank-3": low_rank(4, 3),  # the SVD adjugate: rank 1
    "4x4-rank-2": low_rank(4, 2),  # 0
    "5x5": random_matrix(5),
    "4x4-batch-mixed": np.stack([random_matrix(4), low_rank(4, 3), np.zeros((4, 4))]),
    "2x2-complex": random_matrix(2, True),
    "3x3-complex": random_matrix(3, True),
    "4x4-complex": random_matrix(4, True),
    "4x4-complex-rank-3": low_rank(4, 3, True),
    "5x5-complex-batched": random_matrix(5, True, batch=(2,)),
}
# Cofactors are degree n-1 polynomials of the entries: errors are measured against
# ||a||_2^(n-1), which bounds ||adj(a)||_2 (the product of the n-1 largest singular
# values), so zero cofactors of rank-deficient matrices are checked too.
COFACTOR_CASES = [
    pytest.param(name, dtype, id=f"{name}-{dtype}")
    for name, a in MATRICES.items()
    for dtype in (("complex64", "complex128") if np.iscomplexobj(a) else FLOATS)
]


def cofactor_scale(a):
    n = a.shape[-1]
    norm = np.linalg.norm(a.reshape((-1,) + a.shape[-2:]), ord=2, axis=(-2, -1)).max()
    return max(norm, 1.0) ** (n - 1)


@pytest.mark.parametrize("name, dtype", COFACTOR_CASES)
def test_cofactor(H, name, dtype):
    a = rounded(MATRICES[name], dtype)
    out = H._cofactor(tf.constant(a, dtype))
    want = rounded(
        batched(mp_cofactor, a), "complex128" if "complex" in dtype else "float64"
    )
    assert out.dtype == dtype and out.shape == a.shape
    # 10x RTOL of the scale: det * inverse of a matrix of condition ~2, or the SVD
    atol = 10 * RTOL[dtype] * cofactor_scale(a)
    assert_close(out, want, 0.0, atol=atol)
    if np.all(np.abs(np.linalg.det(a)) > 0.1) and a.shape[-1] > 1:  # numpy cross-check
        cross = np.linalg.det(a)[..., None, None] * np.swapaxes(
            np.linalg.inv(a), -1, -2
        )
        assert_close(out, cross, 0.0, atol=atol)


def test_cofactor_float16(H):
    """float16 runs the SVD path in float32 and rounds back (rtol: float16's 1e-3)."""
    a = rounded(np.stack([MATRICES["4x4"], MATRICES["4x4-rank-3"]]), "float16")
    out = H._cofactor(tf.constant(a, tf.float16))
    assert out.dtype == tf.float16
    want = rounded(batched(mp_cofactor, a), "float64")
    assert_close(out, want, 0.0, atol=5e-3 * cofactor_scale(a))


def mp_cofactor_gradient(a, w):
    """d/da sum(w * cofactor(a)), holomorphic, by central differences at 50 digits (the
    function is a polynomial: step 1e-15, truncation error ~1e-30)."""
    h = mp.mpf("1e-15")
    n = a.shape[0]
    base = as_mp_object(a)
    wm = as_mp_object(w)
    out = np.empty((n, n), dtype=object)

    def f(m):
        c = np.empty((n, n), dtype=object)
        for i in range(n):
            for j in range(n):
                minor = np.delete(np.delete(m, i, 0), j, 1)
                c[i, j] = (-1) ** (i + j) * mp_det(minor)
        return mp.fsum((wm * c).ravel())

    for k in range(n):
        for m in range(n):
            up, down = base.copy(), base.copy()
            up[k, m] += h
            down[k, m] -= h
            out[k, m] = (f(up) - f(down)) / (2 * h)
    return out


@pytest.mark.parametrize(
    "name, dtype",
    [
        ("2x2", "float64"),
        ("3x3", "float32"),
        ("3x3-rank-2", "float64"),
        ("4x4", "float64"),
        ("4x4", "float32"),
        ("4x4-rank-3", "float64"),
        ("3x3-complex", "complex128"),
        ("4x4-complex", "complex128"),
        ("4x4-complex", "complex64"),
    ],
)
def test_cofactor_gradient(H, name, dtype):
    """TensorFlow's gradient of sum(w * cofactor(a)): the second derivative of det, on
    the polynomial forms (n <= 3) and det(a) * inverse(a)^T (through _complex_det's VJP
    for complex a). For a holomorphic f TensorFlow returns conj(f'(a))."""
    a = rounded(MATRICES[name], dtype)
    w = rounded(rng().normal(size=a.shape), dtype)
    with tf.GradientTape() as tape:
        at = tf.constant(a, dtype)
        tape.watch(at)
        y = tf.reduce_sum(tf.constant(w, dtype) * H._cofactor(at))
    grad = tape.gradient(y, at)
    want = rounded(mp_cofactor_gradient(a, w), "complex128").conj()
    n = a.shape[-1]
    scale = max(np.linalg.norm(a, ord=2), 1.0) ** (n - 2) * np.abs(w).sum()
    assert_close(grad, want, 0.0, atol=10 * RTOL[dtype] * scale)


@pytest.mark.parametrize(
    "name, dtype",
    [
        ("2x2-complex", "complex128"),
        ("3x3-complex", "complex64"),
        ("4x4-complex", "complex128"),
        ("4x4-complex-rank-3", "complex128"),  # det 0, gradient the SVD adjugate
        ("5x5-complex-batched", "complex128"),
        ("5x5-complex-batched", "complex64"),
    ],
)
def test_complex_det(H, name, dtype):
    """det(a), and the VJP upstream * conj(cofactor(a)) (TensorFlow's convention for a
    holomorphic f: upstream * conj(f'(a)), as for tf.square)."""
    a = rounded(MATRICES[name], dtype)
    g = rounded(
        rng().normal(size=a.shape[:-2]) + 1j * rng().normal(size=a.shape[:-2]), dtype
    )
    with tf.GradientTape() as tape:
        at = tf.constant(a, dtype)
        tape.watch(at)
        det = H._complex_det(at)
    grad = tape.gradient(det, at, output_gradients=tf.constant(g, dtype))
    n = a.shape[-1]
    scale = cofactor_scale(a)
    want_det = rounded(batched(lambda m: mp_det(as_mp_object(m)), a), "complex128")
    assert det.dtype == dtype
    assert_close(
        det, want_det, 0.0, atol=10 * RTOL[dtype] * scale * max(np.abs(a).max(), 1) * n
    )
    want = g[..., None, None] * rounded(batched(mp_cofactor, a), "complex128").conj()
    assert_close(grad, want, 0.0, atol=10 * RTOL[dtype] * scale * np.abs(g).max())


def test_tf_holomorphic_convention():
    """The convention the _complex_det test relies on: z**2 has the VJP g * conj(2z)."""
    z = tf.constant(1.0 + 2.0j, tf.complex128)
    g = tf.constant(0.5 - 1.5j, tf.complex128)
    assert np.isclose(
        tape_vjp(tf.square, z, g).numpy(), (0.5 - 1.5j) * np.conj(2 * (1 + 2j))
    )


def mp_logabsdet(a):
    return mp.log(abs(mp_det(as_mp_object(a))))


def orthogonal_times(diag, batch=(), complex_=False):
    """q diag(d) q2 with q, q2 random orthogonal (unitary): |det| = prod |d|, condition
    max |d| / min |d|."""
    n = len(diag)

    def q():
        m = rng().normal(size=batch + (n, n))
        if complex_:
            m = m + 1j * rng().normal(size=batch + (n, n))
        return np.linalg.qr(m)[0]

    return q() @ (np.asarray(diag)[:, None] * q())


LOGABSDET_CASES = [
    # a function of the real dtype's finfo giving the matrix
    pytest.param(lambda fi: np.array([[-2.0]]), id="1x1-negative"),
    pytest.param(lambda fi: orthogonal_times([1.0, 2.0, 0.5, 1.5]), id="4x4"),
    pytest.param(lambda fi: np.array([[0.0, 2.0], [3.0, 1.0]]), id="needs-pivoting"),
    # det overflows / underflows (entries max**0.3 / tiny**0.3, det their 4th power)
    pytest.param(
        lambda fi: orthogonal_times([1.0, 2.0, 0.5, 1.5]) * fi.max**0.3,
        id="det-overflows",
    ),
    pytest.param(
        lambda fi: orthogonal_times([1.0, 2.0, 0.5, 1.5]) * fi.tiny**0.3,
        id="det-underflows",
    ),
    # entries near sqrt(max): their squares (the QR's column norms) near overflow
    pytest.param(
        lambda fi: orthogonal_times([1.0, 2.0, 0.5, 1.5]) * np.sqrt(fi.max) / 4,
        id="squares-near-max",
    ),
    pytest.param(
        lambda fi: orthogonal_times([1.0, 3.0, 2.0], batch=(2, 3)), id="batched"
    ),
    pytest.param(
        lambda fi: np.array([[1.0, 2.0, 0.0], [3.0, 4.0, 0.0], [5.0, 6.0, 0.0]]),
        id="zero-column-minus-inf",
    ),
]
LOGABSDET_DTYPES = ("float32", "float64", "complex64", "complex128")


def logabsdet_case(make, dtype):
    real = "float32" if dtype in ("float32", "complex64") else "float64"
    a = make(np.finfo(real))
    if dtype.startswith("complex"):
        a = a * np.exp(1j * rng().uniform(0, 2 * np.pi, size=a.shape[:-2] + (1, 1)))
    return rounded(a, dtype), real


def logabsdet_in(H, form):
    """_logabsdet as it runs in ``form``: "eager" (slogdet's LU for float32 and float64,
    QR otherwise) or "xla" (traced inside ``jit_compile=True``: always the QR)."""
    if form == "eager":
        return H._logabsdet
    return tf.function(H._logabsdet, jit_compile=True, reduce_retracing=True)


@pytest.mark.parametrize("form", ("eager", "xla"))
@pytest.mark.parametrize("dtype", LOGABSDET_DTYPES)
@pytest.mark.parametrize("make", LOGABSDET_CASES)
def test_logabsdet(H, make, dtype, form):
    """log|det| from slogdet's LU or a QR. The error on the log is the relative error of
    |det|: a backward-stable factorization gives ~n * eps * condition (condition <= 4
    here), so atol 10 n eps, plus RTOL of the value (log|det| reaches ~1400 in
    float64)."""
    a, real = logabsdet_case(make, dtype)
    out = logabsdet_in(H, form)(tf.constant(a, dtype))
    assert out.dtype == real
    want = rounded(batched(mp_logabsdet, a), "float64")
    assert_close(out, want, RTOL[real], atol=10 * a.shape[-1] * np.finfo(real).eps)


def test_logabsdet_form_per_mode(H):
    """slogdet where TensorFlow runs the graph (faster), the QR under XLA (which has no
    LogMatrixDeterminant kernel), and the QR for dtypes slogdet has no kernel for."""
    def ops_of(fn, dtype):
        graph = tf.function(fn).get_concrete_function(
            tf.TensorSpec([None, 3, 3], dtype)).graph
        return {op.type for op in graph.get_operations()}

    assert "LogMatrixDeterminant" in ops_of(H._logabsdet, tf.float32)
    assert "Qr" in ops_of(H._logabsdet, tf.float16)
    assert "Qr" in ops_of(H._logabsdet, tf.complex64)
    jit = tf.function(H._logabsdet, jit_compile=True)
    jit_ops = {op.type for op in jit.get_concrete_function(
        tf.TensorSpec([None, 3, 3], tf.float32)).graph.get_operations()}
    assert "Qr" in jit_ops and "LogMatrixDeterminant" not in jit_ops


@pytest.mark.xfail(
    strict=True,
    reason="entries near sqrt(tiny): the QR's squared column norms underflow into "
    "subnormals, so log|det| is off by 0.4 to 5 (in 20 random matrices, float32 and "
    "float64 alike), not n * eps (entries near sqrt(max) are fine)",
)
@pytest.mark.parametrize("dtype", LOGABSDET_DTYPES)
def test_logabsdet_squares_near_tiny(H, dtype):
    a, real = logabsdet_case(
        lambda fi: orthogonal_times([1.0, 2.0, 0.5, 1.5]) * np.sqrt(fi.tiny), dtype
    )
    out = logabsdet_in(H, "xla")(tf.constant(a, dtype))
    want = rounded(batched(mp_logabsdet, a), "float64")
    assert_close(out, want, RTOL[real], atol=10 * a.shape[-1] * np.finfo(real).eps)


@pytest.mark.parametrize("dtype", FLOATS)
def test_logabsdet_lu_near_tiny(H, dtype):
    """slogdet's LU does not square the entries: accurate where the QR is not."""
    a, real = logabsdet_case(
        lambda fi: orthogonal_times([1.0, 2.0, 0.5, 1.5]) * np.sqrt(fi.tiny), dtype
    )
    out = logabsdet_in(H, "eager")(tf.constant(a, dtype))
    want = rounded(batched(mp_logabsdet, a), "float64")
    assert_close(out, want, RTOL[real], atol=10 * a.shape[-1] * np.finfo(real).eps)


@pytest.mark.parametrize("form", ("eager", "xla"))
@pytest.mark.parametrize("dtype", FLOATS)
def test_logabsdet_gradient(H, dtype, form):
    """d log|det(a)| / da = inverse(a)^T (TensorFlow's slogdet and QR gradients)."""
    a = rounded(orthogonal_times([1.0, 2.0, 0.5, 1.5]), dtype)
    grad = tape_vjp(logabsdet_in(H, form), tf.constant(a, dtype), None)
    inv_t = np.array((mp_matrix(a) ** -1).T.tolist(), dtype=object)
    # |inverse| <= 2 (smallest singular value 0.5), errors ~ n * condition * eps
    assert_close(grad, rounded(inv_t, "float64"), 0.0, atol=10 * 4 * RTOL[dtype] * 2)


# ---------------------------------------------------------------------- _unbroadcast

UNBROADCAST = [
    # (grad shape, like shape)
    pytest.param((2, 3, 4), (3, 1), id="lead-and-expanded"),
    pytest.param((2, 3, 4), (2, 3, 4), id="same"),
    pytest.param((2, 3, 4), (), id="scalar"),
    pytest.param((2, 3, 4), (1, 1, 4), id="expanded-lead"),
    pytest.param((2, 3, 4), (4,), id="lead-only"),
    pytest.param((5,), (1,), id="vector-to-1"),
    pytest.param((2, 1, 4), (1, 1, 1), id="ones"),
    pytest.param((3, 1), (3, 1), id="kept-1"),
]


def unbroadcast_ref(g, shape):
    """Sum g over the leading axes it has beyond `shape` and over the axes where shape
    is 1 and g is not."""
    g = g.sum(axis=tuple(range(g.ndim - len(shape))))
    axes = tuple(i for i, s in enumerate(shape) if s == 1 and g.shape[i] != 1)
    return g.sum(axis=axes, keepdims=True).reshape(shape)


def integer_valued(shape, dtype):
    """Small whole numbers: every sum is exact, so results compare exactly."""
    values = rng().integers(-5, 6, size=shape).astype(np.float64)
    if dtype.startswith("complex"):
        values = values + 1j * rng().integers(-5, 6, size=shape)
    return values.astype(dtype)


@pytest.mark.parametrize("dtype", ("float32", "float64", "complex128"))
@pytest.mark.parametrize("grad_shape, like_shape", UNBROADCAST)
def test_unbroadcast_static(H, grad_shape, like_shape, dtype):
    g = integer_valued(grad_shape, dtype)
    like = integer_valued(like_shape, dtype)
    out = H._unbroadcast(tf.constant(g), tf.constant(like))
    assert out.dtype == dtype and out.shape == like_shape
    np.testing.assert_array_equal(out.numpy(), unbroadcast_ref(g, like_shape))


@pytest.mark.parametrize(
    "rank_known", [True, False], ids=["dims-unknown", "rank-unknown"]
)
def test_unbroadcast_unknown_dims(H, rank_known):
    """One graph (None dims, or no rank at all) serves every shape pair: the axes to sum
    are found when it runs."""
    specs = {}

    def make(grad_rank, like_rank):
        key = (grad_rank, like_rank) if rank_known else None
        if key not in specs:
            sig = [
                tf.TensorSpec([None] * grad_rank if rank_known else None, tf.float64),
                tf.TensorSpec([None] * like_rank if rank_known else None, tf.float64),
            ]
            specs[key] = tf.function(H._unbroadcast, input_signature=sig)
        return specs[key]

    for grad_shape, like_shape in [p.values for p in UNBROADCAST]:
        g = integer_valued(grad_shape, "float64")
        like = integer_valued(like_shape, "float64")
        out = make(len(grad_shape), len(like_shape))(g, like)
        assert out.shape == like_shape
        np.testing.assert_array_equal(out.numpy(), unbroadcast_ref(g, like_shape))
    assert len(specs) == (6 if rank_known else 1)
