"""Run an op's *printed* TensorFlow code with NumPy, in the op's dtype.

Consumes: an op's views (:class:`gradgen.render.OpViews`: the exact statements the
generated module contains) and input arrays. Guarantees: :func:`run` executes the
forward statements, then (per output, with that output's upstream gradient 1 and the
others 0) the recomputed and backward statements, against :data:`tf`, a small NumPy
stand-in for the ``tf`` functions generated code calls, and the module's helper
functions rendered from their templates (:mod:`gradgen.runtime`) against the same
stand-in. Every
operation computes in the op's format (:mod:`.formats`): NumPy's float16 and float32
loops for those dtypes, float32 rounded to bfloat16 after each operation for bfloat16,
and subnormal results flushed to zero where TensorFlow's CPU kernels flush them.
Python numbers in arithmetic take the tensor's dtype, as TensorFlow converts them.

Because it runs the printed statements, the mirror follows the generated code's
operation order exactly (``1.0 / (x * x)``, not ``x**-2``); what it cannot reproduce is
TensorFlow's own kernels for transcendental functions: each is taken as correctly
rounded (its mpmath value rounded once to the dtype, as Herbie takes them), which
differs from TensorFlow's by a few ulps, not a NaN, and is the same on every machine.

Elementwise only: every input is a vector of sample points, so the reductions that
unbroadcast a gradient (``tf.reduce_sum`` over broadcast axes, ``_unbroadcast``) sum
over nothing and are the identity. :func:`elementwise_reason` says why an op is not
elementwise (it has tensor operations) and then the audit does not run it.
"""

from __future__ import annotations

import math
from functools import cache, lru_cache
from types import SimpleNamespace

import mpmath
import numpy as np

from ... import ir
from ...functions import declarations as fns
from ...runtime import BY_NAME
from ..formats import Format

# IR calls that an elementwise op's statements may contain: arithmetic, casts, and the
# unbroadcasting of gradients (identity when every input has the same shape).
ELEMENTWISE_CALLS = frozenset(
    {"add", "mul", "div", "cast", "reduce_sum", "unbroadcast", "zeros_like",
     "broadcast_to", "broadcast_shape"}
)


class MirrorError(Exception):
    """The printed code uses something the NumPy mirror does not have."""


# A derived order's VJP op of an elementwise op: its forward is the first-order VJP,
# whose reductions unbroadcast gradients, and its gradient broadcasts them back
# (``unreduce``); over sample points of one shape both are the identity.
UNBROADCAST_CALLS = frozenset({"reduce_sum", "unbroadcast", "unreduce", "broadcast_to"})
LEVEL_CALLS = ELEMENTWISE_CALLS | UNBROADCAST_CALLS


def elementwise_reason(op: ir.OpIR, level: bool = False) -> str | None:
    """None when ``op`` is elementwise (the audit can run it), else why not. ``level``:
    ``op`` is a derived order's VJP op of an elementwise op (:data:`LEVEL_CALLS`)."""
    allowed = LEVEL_CALLS if level else ELEMENTWISE_CALLS
    forward_calls = {
        c.fn for s in op.forward + op.reference for c in _calls(s.value)
    } - {"cast"} - (LEVEL_CALLS if level else frozenset())
    if forward_calls:
        return "tensor operations (" + ", ".join(sorted(forward_calls)) + ")"
    backward_calls = {c.fn for s in op.backward + op.recomputed for c in _calls(s.value)}
    other = backward_calls - allowed
    if other:
        return "tensor operations in the gradient (" + ", ".join(sorted(other)) + ")"
    return None


def _calls(value):
    if isinstance(value, ir.Call):
        yield value
        for a in value.args:
            yield from _calls(a)


# ------------------------------------------------------------------ values


class _Array(np.ndarray):
    """An array whose every NumPy operation rounds to ``fmt`` (set on subclasses)."""

    fmt: Format

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        fmt = type(self).fmt
        plain = [_operand(fmt, x) for x in inputs]
        with np.errstate(all="ignore"):
            result = getattr(ufunc, method)(*plain, **kwargs)
        return _result(fmt, result)


@cache
def _array_type(fmt: Format):
    return type(f"_Array_{fmt.name}", (_Array,), {"fmt": fmt})


def _operand(fmt: Format, x):
    """A ufunc operand: our arrays as plain arrays, Python numbers in the dtype."""
    if isinstance(x, _Array):
        return x.view(np.ndarray)
    _refuse_complex(x)
    if isinstance(x, (bool, np.bool_)):
        return x
    if isinstance(x, (int, float)) or (isinstance(x, np.ndarray) and x.dtype.kind in "fi"
                                       and x.ndim == 0):
        return fmt.round(np.float64(x))[()]
    return x


def _refuse_complex(x):
    """A complex number in a real op's code is gradgen's error, never the audit's
    input: NumPy would drop its imaginary part (with only a ComplexWarning)."""
    if isinstance(x, complex) or np.iscomplexobj(x):
        raise MirrorError("a complex number in a real op's code")


def _result(fmt: Format, result):
    """A NumPy result as an array of ``fmt`` (floats rounded or flushed); bools and
    integers as they are."""
    result = np.asarray(result)
    if result.dtype.kind == "f":
        if result.dtype != fmt.storage or fmt.emulated:
            result = fmt.round(result)
        else:
            result = fmt.flush(result)
        return result.view(_array_type(fmt))
    return result


# ------------------------------------------------------------------ the tf stand-in


class _TF:
    """What generated elementwise code calls, for one format and point count."""

    def __init__(self, fmt: Format, n: int):
        self.fmt, self.n = fmt, n
        f, k = self._unary, self._kernel
        # the declared functions TensorFlow has kernels for (gradgen.functions; a helper
        # that wraps one, _erf, calls it): exact ones as they are, the others rounded
        # once from mpmath
        math_ns = {
            d.tf_name: f(d.numpy) if d.exact else k(d.numpy, d.mpmath)
            for d in fns.FUNCTIONS
            if d.tf_name and d.numpy is not None and (d.exact or d.mpmath is not None)
        }
        # what the printer writes besides them, and TensorFlow's NaN-safe products and
        # extrema, emulated op by op
        math_ns.update({
            "rsqrt": lambda x: 1.0 / np.sqrt(self._t(x)),
            "square": lambda x: self._t(x) * self._t(x),
            "pow": k(np.power, mpmath.power),
            "xlogy": self._xlogy, "xdivy": self._xdivy, "xlog1py": self._xlog1py,
            "multiply_no_nan": self._multiply_no_nan,
            "maximum": lambda a, b: np.maximum(self._t(a), self._t(b)),
            "minimum": lambda a, b: np.minimum(self._t(a), self._t(b)),
            "equal": lambda a, b: np.equal(self._t(a), self._t(b)).view(np.ndarray),
            "not_equal": lambda a, b: np.not_equal(self._t(a), self._t(b)).view(np.ndarray),
            "logical_and": lambda a, b: np.logical_and(a, b),
            "logical_or": lambda a, b: np.logical_or(a, b),
            "logical_not": lambda a: np.logical_not(a),
            "is_finite": lambda x: np.isfinite(np.asarray(x)),
            "is_inf": lambda x: np.isinf(np.asarray(x)),
        })
        self.math = SimpleNamespace(**math_ns)
        self.newaxis = None
        for name in ("float16", "bfloat16", "float32", "float64", "int32", "int64", "bool"):
            setattr(self, name, name)

    # values

    def _t(self, x):
        """``x`` as an array of this format (numbers and bool arrays converted)."""
        if isinstance(x, _Array):
            return x
        _refuse_complex(x)
        return _result(self.fmt, self.fmt.round(np.asarray(x, dtype=np.float64)))

    def _unary(self, function):
        return lambda x: function(self._t(x))

    def _kernel(self, special, exact):
        """A transcendental kernel, rounded once to the dtype from ``exact`` (an mpmath
        function) where ``special`` (its NumPy float64 counterpart) gives a finite
        number, and ``special``'s NaN, inf and domain errors elsewhere.

        Deterministic: NumPy's and libm's transcendental functions differ in the last
        bits between CPUs and library builds (SIMD and FMA variants), which moved
        worst-error figures, and so the generated docstrings, between machines; mpmath
        is the same everywhere. As Herbie does, each kernel is taken as correctly
        rounded in the dtype.
        """
        def apply(*args):
            values = np.broadcast_arrays(
                *(np.asarray(self._t(a), dtype=np.float64) for a in args))
            with np.errstate(all="ignore"):
                value = np.array(special(*values), dtype=np.float64)
            _refine(value, values, exact)
            return _result(self.fmt, value)
        return apply

    def _xlogy(self, x, y):
        x, y = self._t(x), self._t(y)
        return self.where(np.equal(x, 0).view(np.ndarray), 0.0 * x, x * np.log(y))

    def _xlog1py(self, x, y):
        x, y = self._t(x), self._t(y)
        return self.where(np.equal(x, 0).view(np.ndarray), 0.0 * x, x * np.log1p(y))

    def _xdivy(self, x, y):
        x, y = self._t(x), self._t(y)
        return self.where(np.equal(x, 0).view(np.ndarray), 0.0 * x, x / y)

    def _multiply_no_nan(self, x, y):
        x, y = self._t(x), self._t(y)
        return self.where(np.equal(y, 0).view(np.ndarray), 0.0, x * y)

    # tf.*

    def constant(self, value, dtype=None):
        return self._t(np.float64(value))

    def cast(self, x, dtype):
        return self._t(np.asarray(x))

    def where(self, cond, a, b):
        cond = np.asarray(cond)
        return _result(self.fmt, np.where(cond, np.asarray(self._t(a)),
                                          np.asarray(self._t(b))))

    def zeros_like(self, x):
        return self._t(np.zeros(np.shape(x)))

    def ones_like(self, x):
        return self._t(np.ones(np.shape(x)))

    def stop_gradient(self, x):
        return x

    def identity(self, x):
        return x

    # Unbroadcasting sums over broadcast axes; every input here has the points' shape,
    # so there are none (see the module docstring).

    def reduce_sum(self, x, axis=None, keepdims=False):
        return self._point_shaped(x)

    def shape(self, x):
        return (self.n,)

    def broadcast_dynamic_shape(self, a, b):
        return (self.n,)

    def broadcast_to(self, x, shape):
        return self._point_shaped(x)

    def expand_dims(self, x, axis):  # before broadcast_to, in a gradient's unreduce
        return x

    def _point_shaped(self, x):
        t = self._t(x)
        return np.broadcast_to(np.asarray(t), (self.n,)).view(type(t))


def _unbroadcast_identity(tf_):
    return lambda grad, like: tf_.broadcast_to(grad, None)


# mpmath's working precision for the kernels: past float64's 53 bits, so that rounding
# to float64 and then to the dtype is almost always rounding the exact value once.
KERNEL_BITS = 80


def _refine(value: np.ndarray, args: list, exact) -> None:
    """Replace each finite element of ``value`` whose arguments are finite by ``exact``
    at :data:`KERNEL_BITS` (C's special cases, such as ``pow(1, nan) = 1``, stay).

    Where mpmath cannot evaluate a finite argument (``erfc(1e300)`` raises
    OverflowError in mpmath 1.3's series check), C's value stays: such arguments are
    far past where the function saturates, so C's value is the rounded one.
    """
    flat = value.reshape(-1)
    columns = [a.reshape(-1) for a in args]
    finite = np.isfinite(flat)
    for c in columns:
        finite &= np.isfinite(c)
    with mpmath.workprec(KERNEL_BITS):
        for i in np.flatnonzero(finite):
            try:
                result = exact(*(mpmath.mpf(float(c[i])) for c in columns))
            except (OverflowError, ZeroDivisionError, ValueError):
                continue
            if isinstance(result, mpmath.mpf):  # an mpc: outside the real domain
                flat[i] = float(result)


# ------------------------------------------------------------------ running


@lru_cache(maxsize=64)
def _helper_source(helpers: tuple) -> str:
    from ...render import render_helpers

    return render_helpers({"_check_input", *helpers})


# The only builtins the printed code and helpers run with: no import, open, eval,
# getattr... (defense in depth: the statements are printed by gradgen from the IR,
# never from spec text, but the audit runs them at build time, on a spec from a pull
# request; names outside this set are a MirrorError, and the op is reported not run).
_BUILTINS = {
    name: getattr(__builtins__, name) if hasattr(__builtins__, name) else __builtins__[name]
    for name in (
        "abs", "all", "any", "bool", "dict", "enumerate", "float", "int", "isinstance",
        "len", "list", "max", "min", "range", "reversed", "sorted", "str", "sum",
        "tuple", "zip", "ValueError", "TypeError", "ArithmeticError",
    )
}


def environment(fmt: Format, n: int, helpers: tuple, inputs: dict) -> tuple:
    """``(tf stand-in, globals)`` for running printed code on ``n`` points of ``fmt``:
    the restricted builtins, ``math``, the runtime ``helpers`` and each input of
    ``inputs`` ({name: float64 values}) as an array of the format.

    Raises:
        MirrorError: a helper's source does not run here.
    """
    tf_ = _TF(fmt, n)
    env: dict = {"__builtins__": _BUILTINS, "tf": tf_, "math": math}
    try:
        exec(_helper_source(helpers), env)  # noqa: S102 - gradgen's own template
    except (SyntaxError, NameError, AttributeError, TypeError) as e:  # pragma: no cover
        raise MirrorError(f"helpers: {type(e).__name__}: {e}") from None
    for d in fns.FUNCTIONS:
        if fmt.name != "float64" and d.helper in env and d.numpy is not None \
                and _widens(env[d.helper]):
            env[d.helper] = _in_float64(tf_, d.numpy)
    for name, values in inputs.items():
        env[name] = tf_._t(values)
    return tf_, env


def _widens(helper) -> bool:
    """Whether a runtime helper computes in float64 for narrower dtypes (its code casts
    its argument to float64; ``_erf`` and ``_logcosh`` only compare the dtype with it,
    and run as written): the stand-in has one format, so such a helper is run as
    its declared float64 NumPy implementation instead, rounded once to the format."""
    code = getattr(helper, "__code__", None)
    return code is not None and {"cast", "float64"} <= set(code.co_names)


def _in_float64(tf_, numpy):
    def apply(x):
        with np.errstate(all="ignore"):
            return tf_._t(numpy(np.asarray(tf_._t(x), dtype=np.float64)))
    return apply


class Program:
    """An op's printed statements, compiled once, runnable in any format."""

    def __init__(self, views):
        module = views.module
        self.params = [p.strip() for p in module["params"].split(",") if p.strip()]
        self.upstreams = [u.strip() for u in module["upstreams"].split(",") if u.strip()]
        self.grads = [g.strip() for g in module["grad_returns"].split(",")]
        returns = module["returns"].removeprefix("(").removesuffix(")")
        self.outputs = [r.strip() for r in returns.split(",") if r.strip()]
        self.helpers = tuple(h for h in views.helpers if not BY_NAME[h].wraps)
        forward = "\n".join(s["code"] for s in module["forward"])
        backward = "\n".join(s["code"] for s in module["recomputed"] + module["backward"])
        self._forward = compile(forward, f"<{module['name']} forward>", "exec")
        self._backward = compile(backward, f"<{module['name']} gradient>", "exec")

    def run(self, fmt: Format, inputs: dict) -> tuple[list, list]:
        """(outputs, gradients): ``outputs[k]`` is output k's values; ``gradients[k]``
        maps each differentiable input to its gradient when output k's upstream is 1 and
        the others' 0. Every array has the points' shape.

        Raises:
            MirrorError: the code calls something the mirror does not have.
        """
        n = len(next(iter(inputs.values())))
        tf_, env = environment(fmt, n, self.helpers, {p: inputs[p] for p in self.params})
        env["_unbroadcast"] = _unbroadcast_identity(tf_)
        try:
            exec(self._forward, env)  # noqa: S102 - printed by gradgen from the IR
            outputs = [np.asarray(env[o], dtype=np.float64) for o in self.outputs]
            gradients = []
            for k in range(len(self.upstreams)):
                local = dict(env)
                for j, name in enumerate(self.upstreams):
                    local[name] = tf_._t(np.full(n, 1.0 if j == k else 0.0))
                exec(self._backward, local)  # noqa: S102
                gradients.append({
                    param: np.broadcast_to(np.asarray(local[g], dtype=np.float64), (n,))
                    for param, g in zip(self.params, self.grads) if g != "None"
                })
        except (AttributeError, NameError, TypeError) as e:
            raise MirrorError(f"{type(e).__name__}: {e}") from None
        return outputs, gradients
