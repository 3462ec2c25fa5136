"""One op of a spec into a :class:`~gradgen.graph.Program`.

Receives: a validated spec document and the index of one of its ops. Returns: the op's
inputs (symbols, declared shapes, dtypes), its ``where`` intermediates and outputs
parsed in order by one :class:`~gradgen.expr.parser._Parser`, and the tensor nodes they
made, as a :class:`Program`; or raises :class:`~gradgen.errors.SpecError`.
"""

from __future__ import annotations

import sympy

from .. import shapes as sh
from ..errors import Diagnostic, SpecError
from ..graph import InputVar, Output, Program, Term, expanded_size
from ..spec import (
    BATCH,
    COMPLEX_DTYPES,
    FLOAT_DTYPES,
    INT_DTYPES,
    Loc,
    OpSpec,
    SpecDocument,
)
from .parser import _Parser

WHERE_INLINE_MAX = 60  # tree size above which a `where` intermediate is its own step


def _dim(d, factory: sh.DimFactory) -> sh.Dim:
    if d == BATCH:
        return factory.batch()
    return factory.unknown() if d is None else d


def _compute_dtype(op: OpSpec, default) -> str:
    """The one float/complex dtype of the op's non-integer inputs (``default``, the op's
    dtype, when every input is an integer; float32 where that is not one dtype).

    Raises:
        ValueError: inputs of different float or complex dtypes (the message says so).
    """
    dtypes = sorted({s.dtype for s in op.inputs.values() if s.dtype not in INT_DTYPES})
    if len(dtypes) > 1:
        listing = ", ".join(f"{n}: {s.dtype}" for n, s in op.inputs.items())
        raise ValueError(
            f"inputs have different dtypes ({listing}); an op computes in one float or "
            "complex dtype (integer inputs are cast to it)"
        )
    if dtypes:
        return dtypes[0]
    return default if default in FLOAT_DTYPES + COMPLEX_DTYPES else "float32"


def _input_vars(op: OpSpec, base: Loc, factory: sh.DimFactory) -> list[InputVar]:
    """The op's inputs in declaration order: symbols (integer, complex or real by
    dtype) and declared shapes (``null`` and ``...`` dims fresh from ``factory``)."""
    inputs = []
    for name, spec in op.inputs.items():
        if spec.dtype in INT_DTYPES:
            symbol = sympy.Symbol(name, integer=True)
        elif spec.dtype in COMPLEX_DTYPES:
            symbol = sympy.Symbol(name, complex=True)
        else:
            symbol = sympy.Symbol(name, real=True)
        shape = tuple(_dim(d, factory) for d in spec.shape)
        inputs.append(
            InputVar(
                name=name,
                symbol=symbol,
                shape=shape,
                declared=tuple(... if d == BATCH else d for d in spec.shape),
                dtype=spec.dtype,
                differentiable=bool(spec.differentiable),
                key=base + ("inputs", name),
                domain=spec.domain,
            )
        )
    return inputs


def parse_op(doc: SpecDocument, index: int) -> Program:
    """Parse every expression of ``doc.model.ops[index]`` into a :class:`Program`.

    Raises:
        SpecError: an unknown name or function, a construct outside the allow-list,
            shapes that do not broadcast, an oversized or non-finite constant; the
            diagnostic points into the expression where the AST allows.
    """
    op = doc.model.ops[index]
    base: Loc = ("ops", index)
    factory = sh.DimFactory()
    try:
        dtype = _compute_dtype(op, op.dtype)
    except ValueError as e:
        raise SpecError(_diag(doc, op.name, base + ("inputs",), str(e))) from None
    is_complex = dtype in COMPLEX_DTYPES

    inputs = _input_vars(op, base, factory)
    parser = _Parser(doc, op.name, factory, is_complex, dtype)
    for var in inputs:
        parser.names[var.name] = Term(var.symbol, var.shape, frozenset([var.symbol]))
        parser.shape_of[var.symbol] = var.shape

    where = []
    for name, text in op.where.items():
        key = base + ("where", name)
        term = parser.parse(text, key, name_hint=name)
        if not term.is_condition and expanded_size(term.expr) > WHERE_INLINE_MAX:
            # A large intermediate (typically the end of a chain of them) is computed as
            # its own step: substituting it into later expressions would grow them
            # exponentially, and so would their derivatives.
            term = parser.materialize(term, key, name)
        parser.names[name] = term
        where.append((name, term))

    outputs = []
    if op.output is not None:
        key = base + ("output",)
        outputs.append(Output("out", parser.parse(op.output, key), key))
    else:
        for name, text in op.outputs.items():
            key = base + ("outputs", name)
            outputs.append(Output(name, parser.parse(text, key, name_hint=name), key))

    return Program(
        name=op.name,
        doc=op.doc,
        inputs=tuple(inputs),
        nodes=tuple(parser.nodes),
        where=tuple(where),
        outputs=tuple(outputs),
        single=op.output is not None,
        dtype=dtype,
        key=base,
        memory=op.memory,  # spec/resolve.py filled in both
        fuse=op.fuse,
        order=op.order,
        shape_of=parser.shape_of,
        factory=factory,
    )


def _diag(doc: SpecDocument, op: str, loc: Loc, message: str) -> Diagnostic:
    from ..spec import format_key_path

    return Diagnostic(doc.location(loc), message, op, format_key_path(loc[2:]))
