"""The intermediate representation between derivation and rendering.

Consumes nothing; :mod:`gradgen.derive` builds it, :mod:`gradgen.render` reads it.
Guarantees: everything is a frozen dataclass or an immutable SymPy object, so an IR can
be hashed, compared and cached, and the templates see only what is here.

A statement's value is a :data:`Value`: either a SymPy expression (elementwise, printed
by :class:`gradgen.printer.TFPrinter`) or a :class:`Call` of a non-elementwise TensorFlow
operation whose arguments are again values. Every symbol in a value is named exactly as
the local variable that holds it in generated code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

import sympy

# Call functions and what they print as (see gradgen.printer.print_value):
CALL_FUNCTIONS = frozenset(
    {
        "add",  # a + b (sum of cotangent contributions)
        "matmul",  # tf.linalg.matmul(a, b, transpose_a=..., adjoint_b=...)
        "transpose",  # tf.linalg.matrix_transpose(a)
        "reduce_sum",  # tf.reduce_sum(a, axis=[...], keepdims=...)
        "unbroadcast",  # _unbroadcast(g, like): axes from run-time shapes
        "zeros_like",  # tf.zeros_like(x)
        "broadcast_to",  # tf.broadcast_to(v, shape)
        "broadcast_shape",  # tf.broadcast_dynamic_shape(tf.shape(a), tf.shape(b), ...)
        "cast",  # tf.cast(x, dtype)
        "inverse",  # tf.linalg.inv(a, adjoint=...)
        "det",  # tf.linalg.det(a)
        "cofactor",  # _cofactor(a): det(a) * inverse(a)^T without inverting (conjugate=...)
        "logdet",  # _logabsdet(a): log|det(a)| (from QR, XLA-compatible)
        "trace",  # tf.linalg.trace(a)
        "reduce_mean",  # tf.reduce_mean(a, axis=[...], keepdims=...)
        "einsum",  # tf.einsum("ij,jk->ik", a, b)
        "mul",  # a * b (elementwise, broadcasting)
        "div",  # a / b (elementwise, broadcasting)
        "expand_matrix",  # x[..., tf.newaxis, tf.newaxis]
        "eye",  # tf.eye(n, dtype=...): n static, or the last dim of the argument
        "unreduce",  # g broadcast back over summed axes to the shape of `like`
        "count",  # number of elements summed over `axes` of the argument (as dtype)
        "reduce_max",  # tf.reduce_max(a, axis=[...], keepdims=...)
        "reduce_min",  # tf.reduce_min(a, axis=[...], keepdims=...)
        "reduce_logsumexp",  # _reduce_logsumexp(a, axis=[...], keepdims=...)
        "softmax",  # _softmax(a, axis=[...])
        "log_softmax",  # _log_softmax(a, axis=[...])
        "extremum_grad",  # _extremum_grad(g, x, y, axis, keepdims): ties share g
        "softmax_grad",  # _softmax_grad(g, y, axis): y * (g - sum(g * y))
        "log_softmax_grad",  # _log_softmax_grad(g, y, axis): g - exp(y) * sum(g)
    }
)


@dataclass(frozen=True)
class Call:
    """A non-elementwise TensorFlow call.

    Attributes:
        fn: one of :data:`CALL_FUNCTIONS`.
        args: positional arguments, each a :data:`Value`.
        params: keyword parameters as sorted ``(name, value)`` pairs of plain Python
            values (ints, bools, tuples, strings).
    """

    fn: str
    args: tuple = ()
    params: tuple = ()

    def __post_init__(self):
        if self.fn not in CALL_FUNCTIONS:
            raise ValueError(f"unknown call {self.fn!r}")

    def param(self, name: str, default: Any = None) -> Any:
        return dict(self.params).get(name, default)

    def required(self, name: str) -> Any:
        """The parameter ``name``; KeyError when the call lacks it (no silent default)."""
        return dict(self.params)[name]

    def exprs(self):
        """Every SymPy expression inside this call, depth first."""
        for arg in self.args:
            if isinstance(arg, Call):
                yield from arg.exprs()
            else:
                yield arg

    def map_exprs(self, fn) -> "Call":
        """A copy with ``fn`` applied to every SymPy expression inside."""
        return Call(
            self.fn,
            tuple(a.map_exprs(fn) if isinstance(a, Call) else fn(a) for a in self.args),
            self.params,
        )


Value = Union[sympy.Basic, Call]


def value_exprs(value: Value):
    """The SymPy expressions in a value."""
    if isinstance(value, Call):
        yield from value.exprs()
    else:
        yield value


def map_value(value: Value, fn) -> Value:
    return value.map_exprs(fn) if isinstance(value, Call) else fn(value)


@dataclass(frozen=True)
class Statement:
    """``target = value`` in generated code, with comment lines above it.

    Attributes:
        target: local variable name.
        value: what is assigned.
        comments: provenance lines (formula, spec key path, reduction axes and why).
    """

    target: str
    value: Value
    comments: tuple[str, ...] = ()


@dataclass(frozen=True)
class InputIR:
    """One argument of a generated op.

    Attributes:
        name: parameter name.
        dtype: TF dtype name, e.g. ``float32``.
        declared: dims as declared: ints, dim names, None.
        shape_text: e.g. ``[batch, None, 3]``.
        differentiable: whether a gradient is returned.
        is_integer: integer dtype (cast to the op's dtype where used).
        grad: local name of its gradient in the backward function, or None.
        domain: ``(low, high)`` where tests and verification draw its values (declared
            in the spec), or None for their default ranges.
        upstream: an upstream gradient of a derived order's VJP op, in which that op
            is linear (the accuracy audit samples it at magnitudes from 1 to 2).
    """

    name: str
    dtype: str
    declared: tuple
    shape_text: str
    differentiable: bool
    is_integer: bool
    grad: str | None
    domain: tuple | None = None
    upstream: bool = False


@dataclass(frozen=True)
class OutputIR:
    """One output: its local name in the forward function and its declared shape."""

    name: str
    shape_text: str


@dataclass(frozen=True)
class PartialIR:
    """A partial derivative: d(output)/d(wrt) = formula (text) = expr (SymPy, with
    ``where`` names and node operations shown as symbols, for ``gradgen explain``);
    ``limits``: the points where its value is a limit computed at build time
    (``at x = 1: -2, the limit from below``); ``regime``: where the code computes it as
    written instead (:mod:`gradgen.stability.regimes`), or empty."""

    output: str
    wrt: str
    formula: str
    expr: Any = None
    limits: tuple[str, ...] = ()
    regime: str = ""


@dataclass(frozen=True)
class OpIR:
    """Everything the templates need for one op.

    Attributes:
        name: public function name.
        impl: name of the ``tf.custom_gradient`` function it calls.
        doc: the user's doc text (untrusted; escaped when rendered), or None.
        dtype: compute dtype.
        inputs, outputs: in spec order.
        single: True when the op returns one tensor rather than a tuple.
        forward: statements of the forward pass (in the custom-gradient function).
        reference: the forward as written, without stable rewrites or guards (emitted
            tests differentiate it with TensorFlow's autodiff).
        memory: "save" (the gradient function uses forward values kept alive from the
            forward pass) or "recompute" (it computes them again from the inputs).
        upstreams: parameter names of the gradient function, one per output.
        grad_fn: the gradient function's name (``grad`` unless a user name takes it).
        backward: statements of the gradient function.
        recomputed: with ``memory: recompute``, the forward statements the gradient
            function runs again first (under a control dependency on the upstream
            gradients, so that graph optimizers cannot merge them with the forward
            pass's and keep those values alive after all); else empty.
        forward_text: the forward computation as formulas, for the docstring.
        forward_exprs: (name, SymPy expression) pairs of the same, for ``explain``.
        value_regimes: ``out: as written where ...`` per output whose value the code
            computes as written on part of an input's range
            (:mod:`gradgen.stability.regimes`), for ``explain``.
        reductions: (input, how its gradient is unbroadcast) pairs.
        partials: partial derivatives, for the docstring.
        vjp_text: VJP rules of the matrix operations (``@``, transpose, inverse, det,
            log(det), trace, einsum), for the docstring.
        reduction_vjp_text: VJP rules of the reductions (sum, mean, max, min,
            logsumexp, softmax, log_softmax), listed apart.
        fuse: ``xla``: the forward and the VJP are each one XLA-compiled function
            (``tf.function(jit_compile=True)``); ``none``: plain TensorFlow ops.
        named_dims: (dim name, ((input, axis), ...)) for dims shared by several inputs.
        rewrites: the stable rewrites used (``name: identity``), for the docstring.
        example_shapes: concrete input shapes that broadcast as declared (unknown and
            named dims instantiated), for build-time verification; several variants.
        solves: the op inverts matrices (inverse, det, log(det)): tests should use
            well-conditioned square inputs.
        levels: with ``order`` k > 1, the gradient function's own VJP op (inputs: the
            op's inputs and upstreams; outputs: its input gradients), derived, then
            that one's, up to order k: each a ``tf.custom_gradient`` function the one
            before calls.
        level_note: why an op of ``order`` > 1 has no levels (its higher orders are
            TensorFlow's autodiff of the VJP), or "".
    """

    name: str
    impl: str
    doc: str | None
    dtype: str
    inputs: tuple[InputIR, ...]
    outputs: tuple[OutputIR, ...]
    single: bool
    forward: tuple[Statement, ...]
    reference: tuple[Statement, ...]
    memory: str
    upstreams: tuple[str, ...]
    grad_fn: str
    backward: tuple[Statement, ...]
    recomputed: tuple[Statement, ...]
    forward_text: tuple[str, ...]
    forward_exprs: tuple
    reductions: tuple
    partials: tuple[PartialIR, ...]
    vjp_text: tuple[str, ...]
    named_dims: tuple
    rewrites: tuple[str, ...]
    example_shapes: tuple
    solves: bool
    reduction_vjp_text: tuple[str, ...] = ()
    fuse: str = "none"
    levels: tuple["OpIR", ...] = ()
    level_note: str = ""
    value_regimes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ModuleIR:
    """One generated module.

    Attributes:
        name: module name (the file is ``<name>.py``).
        doc: the spec's doc text, or None.
        ops: in spec order.
        spec_path: path of the spec relative to the output file's folder, with '/'.
        spec_sha256: hex digest of the spec's bytes.
        gradgen_version: version string written into the header.
    """

    name: str
    doc: str | None
    ops: tuple[OpIR, ...]
    spec_path: str
    spec_sha256: str
    gradgen_version: str
