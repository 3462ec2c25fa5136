"""Statement values as TensorFlow source: :func:`print_value`.

Receives: a :data:`gradgen.ir.Value` (a SymPy expression, printed by
:class:`~gradgen.printer.expressions.TFPrinter`, or an :class:`gradgen.ir.Call` of a
non-elementwise operation: matrix products, reductions, unbroadcasting, casts...) and the
op's printer. Returns: the value's Python expression; a call of a runtime helper
(``_unbroadcast``, ``_reduce_logsumexp``, ``_cofactor``...) records the helper's name in
the printer's :attr:`~gradgen.printer.expressions.TFPrinter.helpers`.

One function per kind of call (:data:`_CALLS`), each given the printer, the call and
its arguments already printed.
"""

from __future__ import annotations

import sympy

from .. import ir
from .expressions import TFPrinter

# Reductions and their VJPs printed as calls of runtime helpers (gradgen.runtime).
_REDUCTION_HELPERS = {
    "reduce_logsumexp": "_reduce_logsumexp",
    "softmax": "_softmax",
    "log_softmax": "_log_softmax",
    "extremum_grad": "_extremum_grad",
    "softmax_grad": "_softmax_grad",
    "log_softmax_grad": "_log_softmax_grad",
}


def print_value(printer: TFPrinter, value: ir.Value) -> str:
    """Print a statement value: a SymPy expression or an :class:`~gradgen.ir.Call`."""
    if not isinstance(value, ir.Call):
        return printer.value(value)
    args = [print_value(printer, a) for a in value.args]
    call = _CALLS.get(value.fn)
    if call is None:
        raise AssertionError(value.fn)  # ir.Call validates fn
    return call(printer, value, args)


def _operand(text: str, value) -> str:
    """``text`` parenthesized unless it is a name, a call or a subscript."""
    if isinstance(value, ir.Call) and value.fn not in ("add", "mul", "div"):
        return text
    if isinstance(value, sympy.Basic) and (value.is_Atom or isinstance(value, sympy.Function)):
        return text
    return f"({text})"


# ------------------------------------------------------------------ arithmetic


def _add(printer, value, args):
    return " + ".join(args)


def _mul(printer, value, args):
    return " * ".join(_operand(a, v) for a, v in zip(args, value.args))


def _div(printer, value, args):
    return f"{_operand(args[0], value.args[0])} / {_operand(args[1], value.args[1])}"


def _cast(printer, value, args):
    return f"tf.cast({args[0]}, tf.{value.param('dtype')})"


# ------------------------------------------------------------------ matrices


def _matmul(printer, value, args):
    flags = "".join(f", {name}=True" for name, on in value.params if on)
    return f"tf.linalg.matmul({args[0]}, {args[1]}{flags})"


def _transpose(printer, value, args):
    return f"tf.linalg.matrix_transpose({args[0]})"


def _inverse(printer, value, args):
    adjoint = ", adjoint=True" if value.param("adjoint") else ""
    return f"tf.linalg.inv({args[0]}{adjoint})"


def _det(printer, value, args):
    if printer.dtype.startswith("complex"):  # TF's own det gradient lacks a conj
        return f"{printer.use_helper('_complex_det')}({args[0]})"
    return f"tf.linalg.det({args[0]})"


def _cofactor(printer, value, args):
    printer.use_helper("_cofactor")
    if value.param("conjugate"):
        return f"tf.math.conj(_cofactor({args[0]}))"
    return f"_cofactor({args[0]})"


def _logdet(printer, value, args):
    return f"{printer.use_helper('_logabsdet')}({args[0]})"


def _trace(printer, value, args):
    return f"tf.linalg.trace({args[0]})"


def _einsum(printer, value, args):
    return f"tf.einsum({value.param('subscripts')!r}, {', '.join(args)})"


def _expand_matrix(printer, value, args):
    return f"{_operand(args[0], value.args[0])}[..., tf.newaxis, tf.newaxis]"


def _eye(printer, value, args):
    n = value.param("n")
    size = n if n is not None else f"tf.shape({args[0]})[-1]"
    return f"tf.eye({size}, dtype=tf.{printer.dtype})"


# ------------------------------------------------------------------ reductions


def _reduce(printer, value, args):
    axis = list(value.required("axis"))
    keep = ", keepdims=True" if value.required("keepdims") else ""
    return f"tf.{value.fn}({args[0]}, axis={axis}{keep})"


def _reduction_helper(printer, value, args):
    helper = printer.use_helper(_REDUCTION_HELPERS[value.fn])
    axis = list(value.param("axis"))
    keep = ", keepdims=True" if value.param("keepdims") else ""
    keep += f", count={int(value.param('count'))}" if value.param("count") else ""
    return f"{helper}({', '.join(args)}, axis={axis}{keep})"


def _unreduce(printer, value, args):
    out = args[0]
    if not value.required("keepdims"):
        for axis in value.required("axes"):
            out = f"tf.expand_dims({out}, {axis})"
    shape = value.param("shape")
    target = list(shape) if shape is not None else f"tf.shape({args[1]})"
    return f"tf.broadcast_to({out}, {target})"


def _count(printer, value, args):
    dtype = f"tf.{printer.dtype}"
    axes = value.param("axes")
    if all(a < 0 for a in axes):  # a shape with `...`: tf.gather takes no index < 0
        dims = " * ".join(f"tf.shape({args[0]})[{a}]" for a in axes)
        return f"tf.cast({dims}, {dtype})"
    dims = f"tf.gather(tf.shape({args[0]}), {list(axes)})"
    return f"tf.cast(tf.reduce_prod({dims}), {dtype})"


# ------------------------------------------------------------------ shapes


def _unbroadcast(printer, value, args):
    return f"{printer.use_helper('_unbroadcast')}({args[0]}, {args[1]})"


def _zeros_like(printer, value, args):
    return f"tf.zeros_like({args[0]})"


def _broadcast_to(printer, value, args):
    if len(args) == 2:
        return f"tf.broadcast_to({args[0]}, {args[1]})"
    return f"tf.broadcast_to({args[0]}, {list(value.param('shape'))})"


def _broadcast_shape(printer, value, args):
    out = f"tf.shape({args[0]})"
    for arg in args[1:]:
        out = f"tf.broadcast_dynamic_shape({out}, tf.shape({arg}))"
    return out


_CALLS = {
    "add": _add,
    "mul": _mul,
    "div": _div,
    "cast": _cast,
    "matmul": _matmul,
    "transpose": _transpose,
    "inverse": _inverse,
    "det": _det,
    "cofactor": _cofactor,
    "logdet": _logdet,
    "trace": _trace,
    "einsum": _einsum,
    "expand_matrix": _expand_matrix,
    "eye": _eye,
    **{fn: _reduce for fn in ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min")},
    **{fn: _reduction_helper for fn in _REDUCTION_HELPERS},
    "unreduce": _unreduce,
    "count": _count,
    "unbroadcast": _unbroadcast,
    "zeros_like": _zeros_like,
    "broadcast_to": _broadcast_to,
    "broadcast_shape": _broadcast_shape,
}
assert set(_CALLS) == ir.CALL_FUNCTIONS  # every call of the IR prints
