"""The op graph: what parsing an op produces and derivation consumes.

Consumes: nothing (a leaf: SymPy, :mod:`gradgen.shapes` and the dtype names of
:mod:`gradgen.spec`). Provides: :class:`Program`, the forward computation of one op, and
its parts (:class:`InputVar`, :class:`Term`, :class:`TensorNode`, :class:`Output`), the
node kinds (:data:`NODE_OPS`, with their default local names :data:`NODE_NAMES`), the
assumptions of a node's symbol (:func:`node_assumptions`) and :func:`expanded_size`.
:func:`gradgen.expr.parse_op` builds a Program from a spec; derivation reads it (and
rewrites it, :mod:`gradgen.stability.reductions`).

A :class:`Program` separates two kinds of computation:

* elementwise expressions: SymPy expressions over input symbols and node symbols, with
  NumPy broadcasting;
* :class:`TensorNode` s: non-elementwise ops (``@``, ``transpose``...), each with a fresh
  symbol that stands for its result in later elementwise expressions.

Every term carries its declared :data:`~gradgen.shapes.Shape` (computed from the
expression *as written*, before SymPy simplifies anything away) and the set of leaf
symbols written in it, so that an output like ``x - x + y`` keeps the broadcast shape
of ``x`` and ``y``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sympy

from . import shapes as sh
from .spec import COMPLEX_DTYPES, INT_DTYPES, Loc


@dataclass(frozen=True)
class Term:
    """A parsed (sub)expression.

    Attributes:
        expr: the SymPy expression (a relational or boolean for conditions).
        shape: declared shape of the value as written.
        leaves: input and node symbols written in it (even ones SymPy simplified away).
        is_condition: True for comparisons and their boolean combinations.
    """

    expr: Any
    shape: sh.Shape
    leaves: frozenset = frozenset()
    is_condition: bool = False


@dataclass(frozen=True)
class InputVar:
    """An op input: its symbol, declared shape and dtype.

    Attributes:
        name: the user's name (also the generated parameter name).
        symbol: SymPy symbol, declared real for real dtypes.
        shape: declared shape (``null`` dims are :class:`~gradgen.shapes.Unknown`, a
            leading ``...`` a :class:`~gradgen.shapes.Batch`).
        declared: the dims as written in the spec (ints, names, None; ``Ellipsis`` for
            a leading ``...``).
        dtype: TF dtype name.
        differentiable: whether a gradient is returned.
        key: spec key path of the input.
        domain: ``(low, high)`` declared for tests and verification, or None.
        upstream: an upstream gradient of a derived order's VJP op
            (:mod:`gradgen.derive.vjp_op`), in which that op is linear.
    """

    name: str
    symbol: sympy.Symbol
    shape: sh.Shape
    declared: tuple
    dtype: str
    differentiable: bool
    key: Loc
    domain: tuple | None = None
    upstream: bool = False

    @property
    def is_integer(self) -> bool:
        return self.dtype in INT_DTYPES


@dataclass(frozen=True)
class TensorNode:
    """A non-elementwise op of the forward program.

    Attributes:
        symbol: stands for the result in later expressions.
        op: one of :data:`NODE_OPS`.
        args: operand expressions (elementwise SymPy expressions).
        arg_shapes: declared shapes of the operands.
        shape: declared shape of the result.
        key: spec key path of the expression it appears in.
        name_hint: preferred local name (a ``where`` name when the node is one).
        arg_leaves: per operand, the leaf symbols written in it (even ones SymPy
            simplified away: ``sum(x - x)`` still has the shape of ``x``).
        params: op parameters as sorted (name, value) pairs: ``axes`` and ``keepdims``
            for sum/mean (axes normalized by :func:`~gradgen.shapes.normalize_axes`:
            non-negative, or counted from the end for a shape with ``...``), ``subscripts`` (the operands'
            and the output's index strings) for einsum.
    """

    symbol: sympy.Symbol
    op: str
    args: tuple
    arg_shapes: tuple
    shape: sh.Shape
    key: Loc
    name_hint: str
    params: tuple = ()
    arg_leaves: tuple = ()

    def param(self, name: str):
        return dict(self.params)[name]


@dataclass(frozen=True)
class Output:
    """One output: its name, term and spec key path."""

    name: str
    term: Term
    key: Loc


@dataclass(frozen=True)
class Program:
    """An op's forward computation, ready for derivation.

    Attributes:
        name: the op's name.
        doc: the op's doc text, or None.
        inputs: in declaration order.
        nodes: non-elementwise ops in evaluation order.
        where: named intermediates in order (name, term).
        outputs: in order; ``single`` says the op returns one tensor, not a tuple.
        dtype: the compute dtype (the float/complex dtype of the non-integer inputs).
        key: spec key path of the op.
        memory, fuse: the op's memory policy and fusion (the spec's, resolved).
        order: the highest derivative order derived symbolically (the spec's).
        level: 1 for an op of the spec; k + 1 for the VJP op of a level-k op
            (:mod:`gradgen.derive.vjp_op`).
        regimes: partials computed as written on part of an input's range, where the
            accuracy audit found the stable form less accurate there
            (:mod:`gradgen.stability.regimes`; set by :mod:`gradgen.emit`).
    """

    name: str
    doc: str | None
    inputs: tuple[InputVar, ...]
    nodes: tuple[TensorNode, ...]
    where: tuple[tuple[str, Term], ...]
    outputs: tuple[Output, ...]
    single: bool
    dtype: str
    key: Loc
    memory: str = "save"
    fuse: str = "none"
    order: int = 1
    level: int = 1
    regimes: tuple = ()
    shape_of: dict = field(default_factory=dict, compare=False, repr=False)
    factory: sh.DimFactory = field(default_factory=sh.DimFactory, compare=False, repr=False)

    @property
    def is_complex(self) -> bool:
        return self.dtype in COMPLEX_DTYPES


# Local names for node results in generated code, unless a `where` or output names them.
NODE_NAMES = {
    "elementwise": "value",
    "matmul": "product",
    "transpose": "transposed",
    "inverse": "inv",
    "det": "det",
    "logdet": "logdet",
    "trace": "trace",
    "sum": "total",
    "mean": "average",
    "einsum": "contraction",
    "max": "largest",
    "min": "smallest",
    "logsumexp": "lse",
    "softmax": "probs",
    "log_softmax": "log_probs",
    # what only VJPs hold (gradgen.derive.vjp_op: the VJP of an op as an op)
    "unreduce": "spread",
    "broadcast": "broadcast",
    "unbroadcast": "summed",
    "expand_matrix": "expanded",
    "eye": "identity",
    "count": "count",
    "cofactor": "cofactor",
    "softmax_grad": "grad_probs",
    "log_softmax_grad": "grad_log_probs",
}
NODE_OPS = tuple(NODE_NAMES)


def node_assumptions(op: str, arg, is_complex: bool) -> dict:
    """SymPy assumptions for the symbol standing for a node's result: real for real
    dtypes, >= 0 for a sum/mean/max/min of something >= 0 (so d/ds sqrt(s + eps) needs
    no zero guard), > 0 for a softmax (so its log may split), <= 0 for a log-softmax."""
    if is_complex:
        return {}
    assumptions = {"real": True}
    if op in ("sum", "mean", "max", "min") and arg.is_nonnegative:
        assumptions["nonnegative"] = True
    if op == "softmax":
        assumptions["positive"] = True
    if op == "log_softmax":
        assumptions["nonpositive"] = True
    return assumptions


def expanded_size(expr, limit: int = 10**9) -> int:
    """Size of ``expr`` as a tree (shared subexpressions counted each time they occur),
    computed on the DAG in linear time."""
    sizes: dict = {}

    def size(e):
        if e not in sizes:
            sizes[e] = min(limit, 1 + sum(size(a) for a in e.args))
        return sizes[e]

    return size(expr)
