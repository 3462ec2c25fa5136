"""Build-time verification: every derived VJP is checked numerically before rendering.

Consumes: an :class:`gradgen.ir.OpIR`. Guarantees: :func:`verify_op` evaluates the
op's forward and backward statements with NumPy in float64 (complex128 for complex ops)
at random inputs of the declared shapes (unknown and named dims instantiated with small
sizes that broadcast), and compares, for each differentiable input ``x`` and a random
direction ``e``, the derived directional derivative ``<grad_x, e>`` with the central
difference ``<upstream, (f(x + h e) - f(x - h e)) / 2h>``. A mismatch raises
:class:`VerificationError` (exit status 3) naming the op, the input and the size of the
error. This guards against wrong symbolic results (a rule with a sign error, an
unbroadcast over the wrong axes) whatever produced them. TensorFlow is not imported.

Random inputs are drawn from a few ranges in turn ((0.5, 1.5) first, then ones that
reach other parts of a domain) until the forward and backward values are finite; an op
finite nowhere in those ranges, or whose declared sizes exceed :data:`MAX_ELEMENTS`
elements per input (or any of whose values would exceed :data:`MAX_RESULT_ELEMENTS`:
``[65536, 1] * [65536]``), is not checked (:func:`verify_op` returns None and the
command line says so). Inputs are seeded from the op's name, so a build is deterministic.
"""

from __future__ import annotations

import math
import warnings
import zlib
from functools import reduce

import numpy as np
import sympy
from sympy.printing.numpy import NumPyPrinter

from . import functions as fn
from .functions import declarations as fns
from . import ir
from .errors import EXIT_VERIFY_FAILED, GradgenError
from .pinned import LAMBDIFY_SETTINGS, Pinned
from .spec import COMPLEX_DTYPES, INT_DTYPES

RANGES = ((0.5, 1.5), (0.1, 0.9), (1.5, 3.0), (-1.5, -0.5), (-0.9, 0.9), (-3.0, 3.0))
MAX_ELEMENTS = 1 << 16  # per input: larger declared shapes are not evaluated
MAX_RESULT_ELEMENTS = 1 << 20  # per value computed: 8 MiB of float64
STEP = 1e-6
RTOL = 1e-5
ATOL = 1e-8
NOISE_ULPS = 4  # rounding errors of f's evaluation, in units of eps * |f|


class VerificationError(GradgenError):
    """A derived gradient disagrees with finite differences. Exit status 3.

    Attributes:
        op: the op's name.
        input: the input whose gradient is wrong.
        abs_error, rel_error: size of the disagreement.
    """

    exit_code = EXIT_VERIFY_FAILED

    def __init__(
        self, op: str, input_name: str, abs_error: float, rel_error: float, detail: str = ""
    ):
        self.op, self.input = op, input_name
        self.abs_error, self.rel_error = abs_error, rel_error
        what = detail or (
            f"does not match finite differences (error {abs_error:.3g}, relative "
            f"{rel_error:.3g})"
        )
        super().__init__(
            f"op '{op}': the derived gradient for input '{input_name}' {what}; this is a "
            "gradgen bug, please report it with the spec"
        )


# ------------------------------------------------------------------ NumPy functions


def _cofactor(call, a):
    """det(a) * inverse(a)^T from the minors (finite for singular a)."""
    a = np.asarray(a)
    n = a.shape[-1]
    out = np.ones_like(a)
    if n > 1:
        for i in range(n):
            for j in range(n):
                minor = np.delete(np.delete(a, i, axis=-2), j, axis=-1)
                out[..., i, j] = (-1) ** (i + j) * np.linalg.det(minor)
    return np.conj(out) if call.param("conjugate") else out


# Each declared function with a NumPy implementation, by the name it is evaluated
# under (lambdify calls an unknown function by its name in the first module).
_NUMPY = {f"_{f.name}": f.numpy for f in fns.with_numpy()}
_REPLACE = {cls: f"_{f.name}" for f in fns.with_numpy() for cls in f.classes}


class _BroadcastingPrinter(Pinned, NumPyPrinter):
    """NumPy code in which ``And``/``Or`` broadcast their operands, as TensorFlow's
    ``logical_and`` does (NumPyPrinter's ``logical_and.reduce((a, b))`` first stacks
    them into one array, which fails for a [2, 3] mask and a [1, 3] comparison)."""

    def _logical(self, expr, name):
        args = [self._print(a) for a in expr.args]
        return reduce(lambda a, b: f"{name}({a}, {b})", args)

    def _print_And(self, expr):
        return self._logical(expr, "logical_and")

    def _print_Or(self, expr):
        return self._logical(expr, "logical_or")

    def _print_overflowed(self, expr):
        return f"isinf({self._print(expr.args[0])})"

    def _print_ITE(self, expr):
        # NumPyPrinter's select(..., default=nan) makes a boolean if-then-else a float
        # array, which select() then refuses as a condition (a where() whose condition
        # holds a where(): where(where(x < 0, 0.5, -1.5) >= x, 3, x))
        return "where({}, {}, {})".format(*(self._print(a) for a in expr.args))

    def _print_Integer(self, expr):
        # a Python int beyond float64's exact range would make NumPy build an object
        # array (np.sin(10**20) fails): evaluation is in float64 anyway
        if abs(expr.p) <= 2**53:
            return super()._print_Integer(expr)
        return self._float(expr)

    def _print_Rational(self, expr):
        if max(abs(expr.p), expr.q) <= 2**53:
            return super()._print_Rational(expr)
        return self._float(expr)

    @staticmethod
    def _float(expr) -> str:
        try:
            return repr(float(expr))
        except OverflowError:
            return "inf" if expr > 0 else "(-inf)"


class _TooLarge(Exception):
    """A value would have more than :data:`MAX_RESULT_ELEMENTS` elements."""


def _bound(shape) -> None:
    if math.prod(shape) > MAX_RESULT_ELEMENTS:
        raise _TooLarge()


class _Evaluator:
    """Evaluates IR values with NumPy, given a {local name: array} environment."""

    def __init__(self):
        self._compiled: dict = {}

    def expr(self, expr, env):
        if expr not in self._compiled:
            e = expr.xreplace({c: c.value for c in expr.atoms(fn.Const)})
            for cls, name in _REPLACE.items():
                e = e.replace(cls, sympy.Function(name))
            symbols = sorted(e.free_symbols, key=lambda s: s.name)
            # evaluated under gradgen's own argument names: an input called `select`,
            # `arctan2` or `e` would otherwise shadow the NumPy name lambdify prints
            internal = [sympy.Symbol(f"_arg{i}", **s.assumptions0)
                        for i, s in enumerate(symbols)]
            e = e.xreplace(dict(zip(symbols, internal)))
            f = sympy.lambdify(
                internal, e, modules=[_NUMPY, "numpy"],
                printer=_BroadcastingPrinter({**LAMBDIFY_SETTINGS, "user_functions": {}}),
            )
            self._compiled[expr] = (f, [s.name for s in symbols])
        f, names = self._compiled[expr]
        args = [env[n] for n in names]
        _bound(np.broadcast_shapes(*(np.shape(a) for a in args)))  # before computing
        return np.asarray(f(*args))

    def value(self, value, env):
        if not isinstance(value, ir.Call):
            return self.expr(value, env)
        args = [self.value(a, env) for a in value.args]
        return _CALLS[value.fn](value, *args)


def _swap(a):
    return np.swapaxes(a, -1, -2)


def _matmul(call, a, b):
    if call.param("transpose_a") or call.param("adjoint_a"):
        a = _swap(np.conj(a) if call.param("adjoint_a") else a)
    if call.param("transpose_b") or call.param("adjoint_b"):
        b = _swap(np.conj(b) if call.param("adjoint_b") else b)
    if a.ndim >= 2 and b.ndim >= 2:
        _bound((*np.broadcast_shapes(a.shape[:-2], b.shape[:-2]), a.shape[-2], b.shape[-1]))
    return np.matmul(a, b)


def _unbroadcast(call, g, like):
    extra = g.ndim - like.ndim
    g = g.sum(axis=tuple(range(extra))) if extra else g
    axes = tuple(i for i, (d, s) in enumerate(zip(like.shape, g.shape)) if d == 1 and s != 1)
    return g.sum(axis=axes, keepdims=True).reshape(like.shape) if axes else g.reshape(like.shape)


def _unreduce(call, g, like):
    if not call.param("keepdims"):
        for axis in call.param("axes"):
            g = np.expand_dims(g, axis)
    return np.broadcast_to(g, like.shape)


def _broadcast_to(call, x, shape=None):
    target = tuple(call.param("shape")) if shape is None else tuple(shape)
    return np.broadcast_to(x, target)


def _cast(call, x):
    return x.astype(np.complex128 if "complex" in call.param("dtype") else np.float64)


def _axis_keep(call):
    return tuple(call.param("axis")), bool(call.param("keepdims"))


def _lse_parts(x, axis):
    # the printed _lse_parts: m + log1p(sum of the other terms' exp(x - m) + ties - 1)
    m = np.max(x, axis=axis, keepdims=True)
    finite = np.isfinite(m)
    m_safe = np.where(finite, m, 0.0)
    top = x == m
    rest = np.sum(np.where(top, 0.0, np.exp(x - m_safe)), axis=axis, keepdims=True)
    rest = rest + (np.sum(top, axis=axis, keepdims=True) - 1.0)
    return m_safe, np.log1p(rest), finite, m


def _reduce_logsumexp(call, x):
    axis, keepdims = _axis_keep(call)
    m_safe, log1p_rest, finite, m = _lse_parts(x, axis)
    if call.param("count"):
        total = np.sum(np.expm1(x - m_safe), axis=axis, keepdims=True)
        log1p_rest = np.log1p(total / call.param("count"))
    out = np.where(finite, m_safe + log1p_rest, m)
    return out if keepdims else np.squeeze(out, axis=axis)


def _log_softmax(call, x):
    axis = tuple(call.param("axis"))
    m_safe, log1p_rest, finite, m = _lse_parts(x, axis)
    return np.where(finite, (x - m_safe) - log1p_rest, x - m)


def _softmax(call, x):
    axis = tuple(call.param("axis"))
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(m), m, 0.0))
    return e / np.sum(e, axis=axis, keepdims=True)


def _extremum_grad(call, g, x, y):
    axis, keepdims = _axis_keep(call)
    if not keepdims:
        for a in axis:
            g, y = np.expand_dims(g, a), np.expand_dims(y, a)
    mask = (x == y).astype(np.result_type(g, np.float64))
    return g * mask / np.sum(mask, axis=axis, keepdims=True)


def _softmax_grad(call, g, y):
    # the printed _softmax_grad: y * (d - sum(y * d)), d = g - g at the largest y
    axis = tuple(call.param("axis"))
    top = (y == np.max(y, axis=axis, keepdims=True)).astype(y.dtype)
    c = np.sum(g * top, axis=axis, keepdims=True) / np.sum(top, axis=axis, keepdims=True)
    d = g - c
    return y * (d - np.sum(y * d, axis=axis, keepdims=True))


def _log_softmax_grad(call, g, y):
    # the printed _log_softmax_grad: g - exp(y) * sum(g), via expm1 at the largest y
    axis = tuple(call.param("axis"))
    g = np.broadcast_to(g, y.shape)
    top = y == np.max(y, axis=axis, keepdims=True)
    p = np.exp(y)
    total = np.sum(g, axis=axis, keepdims=True)
    others = np.sum(np.where(top, 0.0, g), axis=axis, keepdims=True) + (
        np.sum(np.where(top, g, 0.0), axis=axis, keepdims=True) - g
    )
    return np.where(top, -g * np.expm1(y) - p * others, g - p * total)


_CALLS = {
    "add": lambda call, *a: reduce(np.add, a),
    "mul": lambda call, *a: reduce(np.multiply, a),
    "div": lambda call, a, b: a / b,
    "matmul": _matmul,
    "transpose": lambda call, a: _swap(a),
    "reduce_sum": lambda call, a: np.sum(
        a, axis=tuple(call.param("axis")), keepdims=bool(call.param("keepdims"))
    ),
    "reduce_mean": lambda call, a: np.mean(
        a, axis=tuple(call.param("axis")), keepdims=bool(call.param("keepdims"))
    ),
    "unbroadcast": _unbroadcast,
    "zeros_like": lambda call, x: np.zeros_like(x),
    "broadcast_to": _broadcast_to,
    "broadcast_shape": lambda call, *xs: np.array(np.broadcast_shapes(*(x.shape for x in xs))),
    "cast": _cast,
    "inverse": lambda call, a: np.linalg.inv(np.conj(_swap(a)) if call.param("adjoint") else a),
    "det": lambda call, a: np.linalg.det(a),
    "logdet": lambda call, a: np.linalg.slogdet(a)[1],
    "cofactor": _cofactor,
    "trace": lambda call, a: np.trace(a, axis1=-2, axis2=-1),
    "einsum": lambda call, *a: np.einsum(call.param("subscripts"), *a),
    "expand_matrix": lambda call, x: np.asarray(x)[..., None, None],
    "eye": lambda call, a: np.eye(a.shape[-1]),
    "unreduce": _unreduce,
    "count": lambda call, a: float(np.prod([a.shape[i] for i in call.param("axes")])),
    "reduce_max": lambda call, a: np.max(a, axis=_axis_keep(call)[0], keepdims=_axis_keep(call)[1]),
    "reduce_min": lambda call, a: np.min(a, axis=_axis_keep(call)[0], keepdims=_axis_keep(call)[1]),
    "reduce_logsumexp": _reduce_logsumexp,
    "softmax": _softmax,
    "log_softmax": _log_softmax,
    "extremum_grad": _extremum_grad,
    "softmax_grad": _softmax_grad,
    "log_softmax_grad": _log_softmax_grad,
}
assert set(_CALLS) == ir.CALL_FUNCTIONS


# ------------------------------------------------------------------ the check


def _run(op: ir.OpIR, evaluator: _Evaluator, inputs: dict, upstreams=None):
    env = dict(inputs)
    with np.errstate(all="ignore"):
        for stmt in op.forward:
            env[stmt.target] = evaluator.value(stmt.value, env)
        outputs = [np.broadcast_to(env[o.name], env[o.name].shape) for o in op.outputs]
        if upstreams is None:
            return outputs, None
        for name, u in zip(op.upstreams, upstreams):
            env[name] = u
        for stmt in op.recomputed + op.backward:  # recomputed: the same values again
            env[stmt.target] = evaluator.value(stmt.value, env)
    grads = {i.name: env[i.grad] for i in op.inputs if i.grad}
    return outputs, grads


def _finite(arrays) -> bool:
    return all(np.all(np.isfinite(a)) for a in arrays)


def verify_op(op: ir.OpIR) -> tuple[float, float] | None:
    """Check every derived gradient of ``op`` against central differences.

    Returns:
        The input range (low, high) where the check ran (emitted tests sample from it),
        or None when no tried range gives finite values (nothing was checked).

    Raises:
        VerificationError: a gradient disagrees at two different random points.
    """
    # NumPy warns, besides errstate's floating-point flags, of a mean over an empty axis
    # ([0, 3] inputs): the check's business, never the user's terminal
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            return _verify(op)
        except _TooLarge:  # a value at these sizes: not checked, as for large inputs
            return None


def _verify(op: ir.OpIR) -> tuple[float, float] | None:
    if not any(i.grad for i in op.inputs):
        return RANGES[0]
    configs = [
        shapes for shapes in op.example_shapes
        if all(math.prod(shape) <= MAX_ELEMENTS for shape in shapes)
    ]
    if not configs:
        return None  # declared sizes too large to evaluate here
    evaluator = _Evaluator()
    rng = np.random.default_rng(zlib.crc32(op.name.encode()))
    complex_op = op.dtype in COMPLEX_DTYPES
    failures: dict = {}
    checked = []
    # One point per shape variant, and at least two points: a wrong rule fails at both,
    # an unlucky point near a kink fails at one.
    wanted = max(2, len(configs))
    for shapes in configs * 2:
        if len(checked) >= wanted:
            break
        for low, high in RANGES:
            inputs = {}
            for spec, shape in zip(op.inputs, shapes):
                if spec.dtype in INT_DTYPES:
                    lo, hi = (math.ceil(spec.domain[0]), math.floor(spec.domain[1])) if (
                        spec.domain) else (1, 3)
                    inputs[spec.name] = rng.integers(lo, hi + 1, shape).astype(np.float64)
                    continue
                # a declared domain, else the range tried now
                value = rng.uniform(*(spec.domain or (low, high)), shape)
                if complex_op:
                    value = value + 1j * rng.uniform(-0.3, 0.3, shape)
                inputs[spec.name] = value
            try:
                outputs, _ = _run(op, evaluator, inputs)
            except (ValueError, np.linalg.LinAlgError, _TooLarge):
                break  # these sizes do not broadcast, or too large: the next shapes
            if not _finite(outputs):
                continue
            upstreams = [_random_like(rng, o, complex_op) for o in outputs]
            _, grads = _run(op, evaluator, inputs, upstreams)
            if not _finite(grads.values()):
                continue
            for name, grad in grads.items():
                if np.shape(grad) != np.shape(inputs[name]):
                    raise VerificationError(
                        op.name, name, math.inf, math.inf,
                        f"has shape {list(np.shape(grad))}, not the input's "
                        f"{list(np.shape(inputs[name]))}",
                    )
                error = _directional_error(op, evaluator, inputs, upstreams, name, grad, rng)
                if error is None:
                    continue
                failures.setdefault(name, []).append(error)
                if len(failures[name]) >= 2:
                    abs_error, rel_error = failures[name][-1]
                    raise VerificationError(op.name, name, abs_error, rel_error)
            checked.append((low, high))
            break
    return checked[0] if checked else None


def _random_like(rng, array, complex_op):
    value = rng.normal(size=np.shape(array))
    if complex_op:
        value = value + 1j * rng.normal(size=np.shape(array))
    return value


def _directional_error(op, evaluator, inputs, upstreams, name, grad, rng):
    """(abs, rel) error of the derived directional derivative, or None if it agrees."""
    x = inputs[name]
    e = rng.normal(size=np.shape(x))
    h = STEP * max(1.0, float(np.max(np.abs(x))) if np.size(x) else 1.0)
    plus = dict(inputs, **{name: x + h * e})
    minus = dict(inputs, **{name: x - h * e})
    f_plus, _ = _run(op, evaluator, plus)
    f_minus, _ = _run(op, evaluator, minus)
    numeric = sum(
        np.sum(np.conj(u) * (p - m)) / (2 * h)
        for u, p, m in zip(upstreams, f_plus, f_minus)
    )
    derived = np.sum(np.conj(grad) * e)
    scale = float(np.sum(np.abs(np.conj(grad) * e))) + abs(numeric)
    error = abs(numeric - derived)
    # the difference quotient's own rounding: each value of f is off by about
    # eps * |f|, divided by 2h (1e8 * x + y: |f| ~ 1e8 leaves y's quotient 2e-3 of
    # noise, which no finite difference resolves)
    noise = NOISE_ULPS * np.finfo(np.float64).eps / (2 * h) * sum(
        float(np.sum(np.abs(u) * (np.abs(p) + np.abs(m))))
        for u, p, m in zip(upstreams, f_plus, f_minus)
    )
    if not np.isfinite(numeric) or error <= RTOL * scale + ATOL + noise:
        return None
    return float(error), float(error / max(scale, 1e-300))
