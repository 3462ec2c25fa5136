"""The Hessian suite: second and third derivatives of derived higher orders (`order: 3`)
against 50-digit references (mpmath), in float32 and float64, at ordinary points and in
the tails where TensorFlow's autodiff of a first-order VJP loses them.

Each form: its spec text, its mpmath forward, its inputs' points. Second derivatives
are every entry of the Hessian (nested tapes; mixed partials for two inputs); third
derivatives the first input's. Forward mode (`tf.autodiff.ForwardAccumulator`) is
checked beside them: each first derivative (a JVP) and the Hessian again,
forward-over-reverse. The default run takes a few forms (one module); the rest are
marked slow (`python3 -m pytest -m slow`).

Reductions and matrix ops (:data:`TENSOR_FORMS`) are checked the same way over the
entries of their first input: the whole Hessian (``jacobian`` of the gradient, and
forward-over-reverse) and the third derivatives ``d3 f / dx0 dx0 dxk``. Exact values below the dtype's smallest normal
number are not compared: TensorFlow flushes subnormal results to 0 on CPU.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

mp = mpmath
SQRT2PI = "sqrt(2 / pi)"

# name: (output, mpmath forward, points: one tuple of input values each)
FORMS = {
    "softplus": ("log(1 + exp(x))", lambda x: mp.log1p(mp.exp(x)),
                 [(-3.0,), (0.5,), (20.0,), (-40.0,)]),
    "sigmoid": ("1 / (1 + exp(-x))", lambda x: 1 / (1 + mp.exp(-x)),
                [(-2.0,), (1.0,), (25.0,), (-25.0,)]),
    "norm": ("sqrt(x**2 + y**2)", lambda x, y: mp.sqrt(x**2 + y**2),
             [(3.0, 4.0), (-1.5, 0.25), (1e-20, 1e-20)]),
    "masked_log": ("where(x >= 0, a*log(x), 0)",
                   lambda x, a: a * mp.log(x) if x >= 0 else mp.mpf(0),
                   [(0.5, 1.5), (3.0, -2.0), (-2.0, 1.0)]),
    "tanh": ("tanh(x)", mp.tanh, [(-1.0,), (0.3,), (8.0,)]),
    "log_sigmoid": ("-log(1 + exp(-x))", lambda x: -mp.log1p(mp.exp(-x)),
                    [(-30.0,), (0.0,), (2.0,), (30.0,)]),
    "swish": ("x / (1 + exp(-x))", lambda x: x / (1 + mp.exp(-x)),
              [(-5.0,), (0.7,), (30.0,)]),
    "gelu_tanh": (f"0.5 * x * (1 + tanh({SQRT2PI} * (x + 0.044715 * x**3)))",
                  lambda x: x / 2 * (1 + mp.tanh(mp.sqrt(2 / mp.pi)
                                                  * (x + mp.mpf("0.044715") * x**3))),
                  [(-2.0,), (0.5,), (3.0,)]),
    "gelu_erf": ("x * (1 + erf(x / sqrt(2))) / 2",
                 lambda x: x * (1 + mp.erf(x / mp.sqrt(2))) / 2, [(-3.0,), (0.25,), (2.0,)]),
    "elu": ("where(x > 0, x, exp(x) - 1)", lambda x: x if x > 0 else mp.expm1(x),
            [(-2.0,), (-1e-3,), (1.5,)]),
    "mish": ("x * tanh(log(1 + exp(x)))", lambda x: x * mp.tanh(mp.log1p(mp.exp(x))),
             [(-3.0,), (0.5,), (4.0,)]),
    "log_cosh": ("log(cosh(x))", lambda x: mp.log(mp.cosh(x)), [(-2.0,), (0.1,), (40.0,)]),
    "softsign": ("x / (1 + Abs(x))", lambda x: x / (1 + abs(x)), [(-2.0,), (0.5,), (30.0,)]),
    "logit": ("log(x / (1 - x))", lambda x: mp.log(x / (1 - x)),
              [(0.2,), (0.5,), (0.9,)]),
    "bce_logits": ("-(y*log(1/(1 + exp(-x))) + (1 - y)*log(1 - 1/(1 + exp(-x))))",
                   lambda x, y: -(y * mp.log(1 / (1 + mp.exp(-x)))
                                  + (1 - y) * mp.log(1 - 1 / (1 + mp.exp(-x)))),
                   [(0.5, 0.3), (-3.0, 0.9), (20.0, 0.1)]),
    "huber": ("where(Abs(r) <= 1, r**2 / 2, Abs(r) - 1/2)",
              lambda r: r**2 / 2 if abs(r) <= 1 else abs(r) - mp.mpf(1) / 2,
              [(-3.0,), (0.4,), (2.0,)]),
    "pseudo_huber": ("sqrt(1 + x**2) - 1", lambda x: mp.sqrt(1 + x**2) - 1,
                     [(-2.0,), (1e-3,), (50.0,)]),
    "atan2": ("atan2(y, x)", lambda x, y: mp.atan2(y, x), [(1.0, 2.0), (-3.0, 0.5)]),
    "lennard_jones": ("4 * ((1 / r)**12 - (1 / r)**6)",
                      lambda r: 4 * (r**-12 - r**-6), [(0.9,), (1.2,), (3.0,)]),
    "morse": ("(1 - exp(-(r - 1)))**2", lambda r: (1 - mp.exp(-(r - 1)))**2,
              [(0.5,), (1.0,), (4.0,)]),
    "coulomb": ("1 / r", lambda r: 1 / r, [(0.5,), (3.0,), (-2.0,)]),
    "sinc": ("sin(x) / x", lambda x: mp.sin(x) / x if x != 0 else mp.mpf(1),
             [(1e-3,), (0.7,), (5.0,)]),
    "expm1_ratio": ("(exp(x) - 1) / x", lambda x: mp.expm1(x) / x if x != 0 else mp.mpf(1),
                    [(-2.0,), (1e-4,), (3.0,)]),
    "log1p_ratio": ("log(1 + x) / x", lambda x: mp.log1p(x) / x if x != 0 else mp.mpf(1),
                    [(-0.5,), (1e-4,), (2.0,)]),
    "xlogx": ("x * log(x)", lambda x: x * mp.log(x), [(1e-20,), (0.01,), (1.0,), (20.0,)]),
    "masked_xlogx": ("where(x > 0, x*log(x), 0)",
                     lambda x: x * mp.log(x) if x > 0 else mp.mpf(0),
                     [(1e-20,), (0.3,), (-2.0,)]),
    "sqrt_relu": ("Piecewise((sqrt(x), x > 0), (0, True))",
                  lambda x: mp.sqrt(x) if x > 0 else mp.mpf(0), [(-1.0,), (0.25,), (4.0,)]),
    "gamma_like": ("exp((k - 1)*log(x) - x)", lambda x, k: mp.exp((k - 1) * mp.log(x) - x),
                   [(0.5, 3.0), (4.0, 2.5), (30.0, 20.0)]),
    "power": ("x**y", lambda x, y: x**y, [(2.0, 1.5), (0.5, 3.0)]),
    "logaddexp": ("log(exp(x) + exp(y))", lambda x, y: mp.log(mp.exp(x) + mp.exp(y)),
                  [(0.5, -1.0), (30.0, -30.0), (-50.0, -49.0)]),
    "log_erfc": ("log(erfc(x))", lambda x: mp.log(mp.erfc(x)), [(-1.0,), (0.5,), (5.0,)]),
    "cross_entropy": ("-p * log(q)", lambda p, q: -p * mp.log(q), [(0.3, 0.5), (1.0, 1e-3)]),
    "exp_product": ("exp(a) * exp(b)", lambda a, b: mp.exp(a) * mp.exp(b),
                    [(0.5, -1.0), (10.0, -12.0)]),
    "kl_term": ("t * log(t / q)", lambda t, q: t * mp.log(t / q), [(0.5, 0.25), (2.0, 3.0)]),
    # found by an independent check: log(x**2 + y**2)'' had the wrong sign at x = 1e10
    # in float32 ((1/s)**2 is subnormal); x**(2y)'' was NaN at x = 1e-20 (-0 * inf)
    "log_norm_sq": ("log(x**2 + y**2)", lambda x, y: mp.log(x**2 + y**2),
                    [(1e10, 1e-3), (0.5, 2.0), (1e-3, 1e10)]),
    "power_2y": ("x**(2*y)", lambda x, y: x**(2 * y), [(1e-20, 1.5), (0.5, 2.0)]),
    "scaled_hypot": ("sqrt(1 + x**2) * y", lambda x, y: mp.sqrt(1 + x**2) * y,
                     [(1e5, 2.0), (0.5, 1.0)]),
    # a Gaussian's weight: x**4 * exp(-a*x**2) (the second derivative in a) overflows
    # its x**4 at x = 1e10 in float32, where the product is 4.5e35 (split_gaussian)
    "gauss_weight": ("exp(-a * x**2)", lambda x, a: mp.exp(-a * x**2),
                     [(0.5, 2.0), (1e10, 1e-19), (-3.0, 0.25)]),
    # beside a point filled with a limit the derivative's formula cancels (acos(x)**2's
    # third derivative was 15% off at 0.999 in float32): its Taylor polynomial there
    "acos_sq": ("acos(x)**2", lambda x: mp.acos(x)**2,
                [(1 - 2.0**-11,), (0.5,), (-1 + 2.0**-13,)]),
    # a norm's derivatives from the unit vector's components: -x/h**3 was inf at x =
    # -8e-31, y = -2.45e-22 in float32 ((1/h)**2 overflowed)
    "inv_norm": ("1 / sqrt(x**2 + y**2)", lambda x, y: 1 / mp.sqrt(x**2 + y**2),
                 [(3.0, 4.0), (-7.9613e-31, -2.45058e-22), (1.0, 1e-3)]),
    # a Gaussian with a scale input: its partials divide by s in turn (1/s**2 overflowed
    # at x = s = 1.2e-38 in float32)
    "gauss_scale": ("exp(-x**2 / (2 * s**2))", lambda x, s: mp.exp(-x**2 / (2 * s**2)),
                    [(0.5, 2.0), (1e-19, 1e-19), (-3.0, 0.7)]),
    "log_ratio": ("where(x == 1, 1, log(x) / (x - 1))",
                  lambda x: mp.log(x) / (x - 1) if x != 1 else mp.mpf(1),
                  [(1.0,), (1 - 2.0**-10,), (1.5,)]),
}
# Real findings, kept visible as expected failures until the forms are fixed (each
# checked by hand against the derived code); any other failure fails.
KNOWN = {
    "pseudo_huber": "the first order's cancellation-free form x**2/(hypot(1, x) + 1), "
    "differentiated twice, is a sum of terms that cancel: 5e-4 relative at x = 50 in "
    "float32 (the exact (1 + x**2)**(-3/2) has no difference)",
    "power_2y": "the third derivative in x at x = 1e-20 is 0 in float32 (exact 6): the "
    "derived orders divide x**(2*y - 1) = 1e-40, which the CPU flushes to 0, by x",
    "log_ratio": "the third derivative at the filled point x = 1 itself is 0: the "
    "second order's fill there (2/3, found) is not found again by the third, whose "
    "formula holds the second order's Taylor polynomial and guards (beside 1 it holds)",
}
# the default run's forms (one module); the others are slow
DEFAULT = ("sigmoid", "log_sigmoid")  # (softplus, norm, masked_log: test_order.py)
INPUTS = {1: ("x",), 2: ("x", "y")}
NAMES = {"masked_log": ("x", "a"), "lennard_jones": ("r",), "morse": ("r",),
         "coulomb": ("r",), "huber": ("r",), "gamma_like": ("x", "k"),
         "cross_entropy": ("p", "q"), "exp_product": ("a", "b"), "kl_term": ("t", "q"),
         "gauss_weight": ("x", "a"), "gauss_scale": ("x", "s")}


def _names(name):
    return NAMES.get(name, INPUTS[len(FORMS[name][2][0])])


def _spec(names) -> str:
    ops = "".join(
        f"  - name: {n}\n    inputs: {{{', '.join(f'{v}: [null]' for v in _names(n))}}}\n"
        f"    output: {FORMS[n][0]}\n" for n in names)
    module = "hessians_" + ("default" if set(names) == set(DEFAULT) else "all")
    return (f"version: 1\nmodule: {module}\ndtype: [float32, float64]\norder: 3\nops:\n"
            + ops)


@pytest.fixture(scope="module")
def default_module(build):
    return build(_spec(DEFAULT), audit=False)


@pytest.fixture(scope="module")
def all_module(build):
    return build(_spec(list(FORMS)), audit=False)


def _exact(f, point, orders):
    with mp.workdps(50):
        return float(mp.diff(f, tuple(mp.mpf(v) for v in point), orders))


def _derivatives(tf, fn, point, dtype):
    """{orders tuple: value}: every second derivative, and the first input's third."""
    args = [tf.constant([v], dtype) for v in point]
    n = len(args)
    with tf.GradientTape(persistent=True) as t3:
        t3.watch(args)
        with tf.GradientTape(persistent=True) as t2:
            t2.watch(args)
            with tf.GradientTape() as t1:
                t1.watch(args)
                y = fn(*args)
            grads = t1.gradient(y, args)
        hess = [[t2.gradient(g, a) for a in args] for g in grads]
    third = t3.gradient(hess[0][0], args[0])
    out = {}
    for i in range(n):
        for j in range(n):
            orders = tuple(sum(1 for k in (i, j) if k == m) for m in range(n))
            value = hess[i][j]
            out[orders] = 0.0 if value is None else float(value.numpy()[0])
    first = tuple(3 if m == 0 else 0 for m in range(n))
    out[first] = 0.0 if third is None else float(third.numpy()[0])
    return out


def _forward_derivatives(tf, fn, point, dtype):
    """{orders tuple: value}: the first derivatives (a JVP per input) and every second
    derivative (forward-over-reverse: a JVP of the gradient per input), each input's
    direction in turn under `tf.autodiff.ForwardAccumulator`."""
    args = [tf.constant([v], dtype) for v in point]
    n = len(args)
    out = {}
    for j in range(n):
        tangents = [tf.ones_like(a) if k == j else tf.zeros_like(a) for k, a in enumerate(args)]
        with tf.autodiff.ForwardAccumulator(args, tangents) as acc:
            with tf.GradientTape() as tape:
                tape.watch(args)
                y = fn(*args)
            grads = tape.gradient(y, args)
        values = [acc.jvp(y)] + [acc.jvp(g) for g in grads]
        for i, value in enumerate(values):  # i = 0: the JVP of y; i > 0: of grads[i - 1]
            orders = tuple(sum(1 for k in (i - 1, j) if k == m) for m in range(n))
            out[orders] = 0.0 if value is None else float(value.numpy()[0])
    return out


def _check(tf, module, name, dtype):
    """Every second derivative and the first input's third by nested tapes, and the
    first and second derivatives by forward mode, against mpmath at the form's points."""
    fn = getattr(module, name)
    f = FORMS[name][1]
    rtol = 2e-4 if dtype == "float32" else 1e-8
    limit = float(np.finfo(dtype).max)
    problems = []
    for point in FORMS[name][2]:
        nested = _derivatives(tf, fn, point, dtype)
        forward = _forward_derivatives(tf, fn, point, dtype)
        want = {o: _exact(f, point, o) for o in {**nested, **forward}}
        # the scale of the higher derivatives; a first derivative's is every one's
        scale = {True: max(abs(w) for o, w in want.items() if sum(o) > 1),
                 False: max(abs(w) for w in want.values())}
        for mode, got in (("nested tapes", nested), ("forward mode", forward)):
            for orders, g in got.items():
                w, tol = want[orders], 1e-3 * scale[sum(orders) > 1]
                if abs(w) > limit / 4:
                    continue  # beyond the dtype's range: an inf is right
                if not math.isfinite(g) or abs(g - w) > rtol * max(abs(w), tol):
                    problems.append(f"{name}{point} d{orders} ({mode}): got {g:.6g}, "
                                    f"exact {w:.6g}")
    if problems and name in KNOWN:
        pytest.xfail(KNOWN[name])
    assert not problems, "\n".join(problems)


def _lse(v):
    return mp.log(mp.fsum(mp.exp(a) for a in v))


WEIGHTS = [0.1, 0.2, 0.3, 0.4]
TARGET = [0.5, -2.0, 1e3]
LOGITS = [[0.5, -1.0, 2.0, 0.1], [100.0, 0.0, -100.0, 3.0], [-80.0, -80.5, -200.0, -79.0]]
MATRIX = [2.0, 0.5, 0.1, 0.3, 1.5, -0.2, 0.0, 0.4, 3.0]


def _det3(v):
    return mp.det(mp.matrix([v[0:3], v[3:6], v[6:9]]))


# name: (inputs, output, mpmath forward of the first input's entries, its points, the
# other inputs' values). The first input is differentiated; a batch of one row.
TENSOR_FORMS = {
    "softmax_cross_entropy": (
        "{x: [null, 4], y: [null, 4]}", "logsumexp(x, axis=-1) - sum(y*x, axis=-1)",
        lambda *v: _lse(v) - mp.fsum(a * b for a, b in zip(WEIGHTS, v)), LOGITS, [WEIGHTS]),
    "log_softmax_cross_entropy": (
        "{x: [null, 4], y: [null, 4]}", "-sum(y*log_softmax(x, axis=-1), axis=-1)",
        lambda *v: _lse(v) - mp.fsum(a * b for a, b in zip(WEIGHTS, v)), LOGITS, [WEIGHTS]),
    "softmax_mean": (
        "{x: [null, 4], y: [null, 4]}", "sum(y*softmax(x, axis=-1), axis=-1)",
        lambda *v: mp.fsum(b * mp.exp(a - _lse(v)) for a, b in zip(v, WEIGHTS)),
        [[0.5, -1.0, 2.0, 0.1], [30.0, 0.0, -30.0, 3.0], [-80.0, -80.5, -200.0, -79.0]],
        [WEIGHTS]),
    "l2_norm": (
        "{x: [null, 3]}", "sqrt(sum(x**2, axis=-1))",
        lambda *v: mp.sqrt(mp.fsum(a * a for a in v)),
        [[3.0, 4.0, 12.0], [1e-15, 2e-15, -1e-16], [1e15, 3e14, -2e15]], []),
    "mean_squared_error": (
        "{x: [null, 3], y: [null, 3]}", "mean((x - y)**2, axis=-1)",
        lambda *v: mp.fsum((a - b)**2 for a, b in zip(v, TARGET)) / 3,
        [[3.0, 4.0, 12.0], [1e-3, -2.0, 1e3]], [TARGET]),
    "log_det": (
        "{a: [3, 3]}", "log(det(a))", lambda *v: mp.log(_det3(v)),
        [MATRIX, [1.0, 0.999, 0.0, 0.999, 1.0, 0.0, 0.0, 0.0, 1e-3]], None),
    "trace_inverse": (
        "{a: [3, 3]}", "trace(inverse(a))",
        lambda *v: mp.fsum(mp.inverse(mp.matrix([v[0:3], v[3:6], v[6:9]]))[i, i]
                           for i in range(3)), [MATRIX], None),
}
TENSOR_KNOWN = {
    ("l2_norm", "float32"): "the derived orders compute sum(x**2)**(-3/2) as one value, "
    "which overflows (|x| = 1e-15) or underflows (1e15) in float32 where the Hessian's "
    "entries x_i*x_j/|x|**3 are 1e14 and 1e-15: a norm scaled by its largest entry "
    "would keep |x|'s powers apart (not built yet)",
}


TENSOR_DEFAULT = "softmax_cross_entropy"  # the default run's form (one op)


def _tensor_spec(names) -> str:
    ops = "".join(f"  - name: {n}\n    inputs: {TENSOR_FORMS[n][0]}\n"
                  f"    output: {TENSOR_FORMS[n][1]}\n" for n in names)
    return ("version: 1\nmodule: hessians_tensor\ndtype: [float32, float64]\norder: 3\n"
            f"ops:\n{ops}")


@pytest.fixture(scope="module")
def tensor_default(build):
    return build(_tensor_spec([TENSOR_DEFAULT]), audit=False)


@pytest.fixture(scope="module")
def tensor_module(build):
    return build(_tensor_spec(list(TENSOR_FORMS)), audit=False)


def _tensor_derivatives(tf, fn, x, others):
    """The Hessian of ``sum(fn(x, *others))`` in ``x``'s entries (n x n) and the third
    derivatives d3/dx0 dx0 dxk (n), nested tapes."""
    with tf.GradientTape() as t3:
        t3.watch(x)
        with tf.GradientTape(persistent=True) as t2:
            t2.watch(x)
            with tf.GradientTape() as t1:
                t1.watch(x)
                y = tf.reduce_sum(fn(x, *others))
            g = t1.gradient(y, x)
        hess = t2.jacobian(g, x, experimental_use_pfor=False)
        h00 = tf.reshape(hess, [-1])[0]
    n = int(np.prod(x.shape))
    return np.reshape(hess.numpy(), (n, n)), np.reshape(t3.gradient(h00, x).numpy(), n)


def _tensor_forward_hessian(tf, fn, x, others):
    """The Hessian of ``sum(fn(x, *others))`` in ``x``'s entries (n x n), a column per
    entry: forward-over-reverse (`tf.autodiff.ForwardAccumulator` over a tape)."""
    n = int(np.prod(x.shape))
    columns = []
    for k in range(n):
        tangent = tf.reshape(tf.one_hot(k, n, dtype=x.dtype), x.shape)
        with tf.autodiff.ForwardAccumulator(x, tangent) as acc:
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = tf.reduce_sum(fn(x, *others))
            g = tape.gradient(y, x)
        columns.append(np.reshape(acc.jvp(g).numpy(), n))
    return np.stack(columns, axis=1)


def _tensor_exact(f, point):
    n = len(point)
    unit = lambda *ks: tuple(sum(1 for k in ks if k == m) for m in range(n))  # noqa: E731
    with mp.workdps(50):
        p = [mp.mpf(v) for v in point]
        # (addprec: the default step is too coarse for entries of size 1e15)
        d = lambda orders: float(mp.diff(f, p, orders, addprec=100))  # noqa: E731
        hess = np.array([[d(unit(i, j)) for j in range(n)] for i in range(n)])
        third = np.array([d(unit(0, 0, k)) for k in range(n)])
    return hess, third


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", DEFAULT)
def test_second_and_third_derivatives(tf, default_module, name, dtype):
    _check(tf, default_module, name, dtype)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", [n for n in FORMS if n not in DEFAULT])
def test_second_and_third_derivatives_of_every_form(tf, all_module, name, dtype):
    _check(tf, all_module, name, dtype)


def _check_tensor(tf, module, name, dtype):
    shapes, _, f, points, others = TENSOR_FORMS[name]
    fn = getattr(module, name)
    rtol = 2e-4 if dtype == "float32" else 1e-8
    info = np.finfo(dtype)
    problems = []
    for point in points:
        if others is None:  # a 3 x 3 matrix
            x, rest = tf.constant(np.reshape(point, (3, 3)), dtype), []
        else:
            x, rest = tf.constant([point], dtype), [tf.constant([o], dtype) for o in others]
        hess, third = _tensor_derivatives(tf, fn, x, rest)
        got = (hess, third, _tensor_forward_hessian(tf, fn, x, rest))
        want = _tensor_exact(f, point)
        want = want + want[:1]
        # the reference's own noise (a third derivative that is 0 comes out 1e-197)
        noise = 1e-150 * np.max(np.abs(want[0]))
        for label, g, w in zip(("d2", "d3", "d2 (forward mode)"), got, want):
            w = np.where(np.abs(w) < noise, 0.0, w)
            scale = np.max(np.abs(w))
            for k, (gk, wk) in enumerate(zip(g.ravel(), w.ravel())):
                if 0 < abs(wk) < info.tiny or abs(wk) > info.max / 4:
                    continue  # flushed to 0, or beyond the range: 0 or inf is right
                if not math.isfinite(gk) or abs(gk - wk) > rtol * max(abs(wk), 1e-3 * scale):
                    problems.append(f"{name}{point} {label}[{k}]: got {gk:.6g}, exact {wk:.6g}")
    if problems and (name, dtype) in TENSOR_KNOWN:
        pytest.xfail(TENSOR_KNOWN[name, dtype])
    assert not problems, "\n".join(problems[:10])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_second_and_third_derivatives_of_a_softmax_cross_entropy(tf, tensor_default, dtype):
    _check_tensor(tf, tensor_default, TENSOR_DEFAULT, dtype)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", [n for n in TENSOR_FORMS if n != TENSOR_DEFAULT])
def test_second_and_third_derivatives_of_reductions_and_matrix_ops(tf, tensor_module, name,
                                                                    dtype):
    _check_tensor(tf, tensor_module, name, dtype)
