"""VJPs of the matrix operations: ``@``, ``transpose``, ``inverse``, ``det``,
``log(det())``, ``trace`` and ``einsum``.

Each rule receives the derivation, a node, its cotangent ``G`` (a symbol) and the
operands as the forward computes them, and returns one :class:`~gradgen.derive.cotangents.OperandVJP` per operand:
the operand's expression, its VJP (a :class:`gradgen.ir.Call`), the declared shape of
that VJP and the formula for the docstring. ``^H`` is the transpose, the conjugate
transpose for complex dtypes; ``Y`` is the node's value. Formulas as TensorFlow's
``math_grad.py`` and ``linalg_grad.py`` write them:

* ``Y = A @ B``: ``dA = G @ B^H``, ``dB = A^H @ G`` (batch axes unbroadcast);
* ``Y = transpose(A)``: ``dA = transpose(G)``;
* ``Y = inverse(A)``: ``dA = -Y^H @ G @ Y^H``;
* ``Y = det(A)``: ``dA = G * conj(cofactor(A))`` (Jacobi's formula; the cofactor
  matrix det(A) * inverse(A)^T = adj(A)^T is computed without inverting, so it is
  finite, the adjugate, at a singular A);
* ``Y = log|det(A)|``: ``dA = G * inverse(A)^H`` (infinite at a singular A, where the
  forward is -inf: TensorFlow's inverse raises there);
* ``Y = trace(A)``: ``dA = G * I``;
* ``Y = einsum(s1,...,sn->o)``: ``dAi = einsum(o,s1..(not i)..sn->si)`` of ``G`` and
  the other operands (conjugated), broadcast over indices only ``si`` has.
"""

from __future__ import annotations

import sympy

from .. import ir
from .. import shapes as sh
from ..graph import TensorNode
from .context import Derivation
from .cotangents import OperandVJP
from .text import spec_str


def static(shape: sh.Shape):
    """``shape`` as a tuple of ints where every dim is known, else None."""
    return tuple(shape) if sh.is_static(shape) else None


def _adj(d: Derivation) -> str:
    return "adjoint" if d.program.is_complex else "transpose"


def matmul(d: Derivation, node: TensorNode, g, args) -> list[OperandVJP]:
    """``Y = A @ B``: ``dA = G @ B^H``, ``dB = A^H @ G``, batch axes unbroadcast later
    (TensorFlow's ``math_grad._BatchMatMulV2``)."""
    (a, b), batch, shapes, adj = node.args, node.shape[:-2], node.arg_shapes, _adj(d)
    return [
        OperandVJP(a, ir.Call("matmul", (g, args[1]), ((f"{adj}_b", True),)),
                   batch + tuple(shapes[0][-2:]), f"{g.name} @ {adj}({spec_str(b)})"),
        OperandVJP(b, ir.Call("matmul", (args[0], g), ((f"{adj}_a", True),)),
                   batch + tuple(shapes[1][-2:]), f"{adj}({spec_str(a)}) @ {g.name}"),
    ]


def transpose(d: Derivation, node: TensorNode, g, args) -> list[OperandVJP]:
    """``Y = transpose(A)`` (last two axes): ``dA = transpose(G)``."""
    return [OperandVJP(node.args[0], ir.Call("transpose", (g,)), node.arg_shapes[0],
                       f"transpose({g.name})")]


def inverse(d: Derivation, node: TensorNode, g, args) -> list[OperandVJP]:
    """``Y = inverse(A)``: ``dA = -Y^H @ G @ Y^H`` (``linalg_grad._MatrixInverseGrad``)."""
    y, adj = node.symbol, _adj(d)
    inner = ir.Call("matmul", (-y, g), ((f"{adj}_a", True),))
    value = ir.Call("matmul", (inner, y), ((f"{adj}_b", True),))
    return [OperandVJP(node.args[0], value, node.arg_shapes[0],
                       f"-{adj}({y.name}) @ {g.name} @ {adj}({y.name})")]


def det(d: Derivation, node: TensorNode, g, args) -> list[OperandVJP]:
    """``Y = det(A)``: ``dA = G * conj(cofactor(A))`` (Jacobi's formula), the cofactor
    computed without inverting, so finite at a singular ``A``."""
    # Jacobi's formula with the cofactor matrix det(A) * inverse(A)^T computed
    # without inverting: finite (the adjugate) where A is singular
    cplx = d.program.is_complex
    cof = ir.Call("cofactor", (args[0],), (("conjugate", cplx),))
    value = ir.Call("mul", (ir.Call("expand_matrix", (g,)), cof))
    what = "conj(cofactor" if cplx else "cofactor"
    text = f"{g.name} * {what}({spec_str(node.args[0])}){')' if cplx else ''}"
    return [OperandVJP(node.args[0], value, node.arg_shapes[0], text)]


def logdet(d: Derivation, node: TensorNode, g, args) -> list[OperandVJP]:
    """``Y = log|det(A)|``: ``dA = G * inverse(A)^H``, reusing an ``inverse(A)`` the
    forward computes (real ops)."""
    # inverse(A)^T: genuinely infinite where A is singular (log|det| is -inf
    # there); tf.linalg.inv raises "Input is not invertible" at such A. An
    # inverse(A) the forward computes is reused, not computed again.
    forward_inv = next((n.symbol for n in d.nodes if n.op == "inverse"
                        and n.args[0] == node.args[0]), None)
    if forward_inv is not None and not d.program.is_complex:
        inv_h = ir.Call("transpose", (forward_inv,))
    else:
        inv_h = ir.Call("inverse", (args[0],), (("adjoint", True),))
    value = ir.Call("mul", (ir.Call("expand_matrix", (g,)), inv_h))
    text = f"{spec_str(g)} * {_adj(d)}(inverse({spec_str(node.args[0])}))"
    return [OperandVJP(node.args[0], value, node.arg_shapes[0], text)]


def trace(d: Derivation, node: TensorNode, g, args) -> list[OperandVJP]:
    """``Y = trace(A)``: ``dA = G * I`` (an identity of ``A``'s last dim)."""
    n = node.arg_shapes[0][-1]
    eye = ir.Call("eye", (args[0],), (("n", n if sh.is_known(n) else None),))
    value = ir.Call("mul", (ir.Call("expand_matrix", (g,)), eye))
    return [OperandVJP(node.args[0], value, node.arg_shapes[0], f"{g.name} * I")]


def einsum(d: Derivation, node: TensorNode, g, args) -> list[OperandVJP]:
    """``Y = einsum(s1,...,sn->o)``: ``dAi = einsum(o,s1..(not i)..sn->si)`` of ``G`` and
    the other operands (conjugated for complex ops), broadcast back over the indices only
    ``si`` has (``unreduce``)."""
    inputs, out = node.param("subscripts")
    cplx, shapes, rules = d.program.is_complex, node.arg_shapes, []
    for i, sub in enumerate(inputs):
        others = [s for j, s in enumerate(inputs) if j != i]
        present = set(out).union(*others)
        missing = [k for k, c in enumerate(sub) if c not in present]
        keep = "".join(c for c in sub if c in present)
        spec = ",".join([out] + others) + "->" + keep
        operands = (g,) + tuple(_conj(a) if cplx else a for j, a in enumerate(args) if j != i)
        value = ir.Call("einsum", operands, (("subscripts", spec),))
        if missing:
            value = ir.Call(
                "unreduce", (value, args[i]),
                (("axes", tuple(missing)), ("keepdims", False), ("shape", static(shapes[i]))),
            )
        rules.append(OperandVJP(node.args[i], value, shapes[i], f"einsum({spec!r}, ...)"))
    return rules


def _conj(v):
    """The conjugate of an operand as the forward computes it."""
    if isinstance(v, ir.Call):  # an operand broadcast to its shape as written
        assert v.fn == "broadcast_to", v.fn  # (the only Call as_written makes)
        return ir.Call(v.fn, (sympy.conjugate(v.args[0]),) + v.args[1:], v.params)
    return sympy.conjugate(v)


RULES = {
    "matmul": matmul,
    "transpose": transpose,
    "inverse": inverse,
    "det": det,
    "logdet": logdet,
    "trace": trace,
    "einsum": einsum,
}
