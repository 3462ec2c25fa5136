"""One op from its spec to its IR: parse, then derive, within the op's time budget.

Receives a loaded spec document and an op's index. Returns the op's
:class:`gradgen.ir.OpIR` (:func:`derive_op`). The parser (:mod:`gradgen.expr`) turns the
op's expressions into a :class:`~gradgen.graph.Program`; derivation
(:mod:`gradgen.derive`) turns that into the forward and VJP statements. Printing,
verification and the accuracy audit follow in :mod:`gradgen.emit`.
"""

from __future__ import annotations

import dataclasses

import sympy

from . import ir
from .budget import BudgetExceeded, op_seconds, time_budget
from .derive import derive
from .errors import Diagnostic, SpecError
from .expr import parse_op
from .spec import SpecDocument


def derive_op(doc: SpecDocument, index: int, regimes: tuple = ()) -> ir.OpIR:
    """Parse and derive ``doc.model.ops[index]``; ``regimes``: partials to compute as
    written on part of an input's range (:mod:`gradgen.stability.regimes`).

    Raises:
        SpecError: from parsing, or when a derivative cannot be expressed with
            TensorFlow ops (the message names the op and the function); or when the
            op takes longer than its time budget or nests too deeply.
    """
    order = doc.model.ops[index].order or 1
    seconds = op_seconds(order)
    # SymPy memoizes constructions and assumption queries process-wide; which equal
    # form a later construction returns can depend on what was built before (a long
    # test session, several specs in one build). Each op starts from an empty cache,
    # so its output depends on its spec alone.
    sympy.core.cache.clear_cache()
    budget = None
    try:
        with time_budget(seconds) as budget:
            program = parse_op(doc, index)
            if regimes:
                program = dataclasses.replace(program, regimes=tuple(regimes))
            return derive(program, doc)
    except (BudgetExceeded, RecursionError) as e:
        if isinstance(e, BudgetExceeded) and e.budget is not budget:
            raise  # an enclosing budget (the op's, the build's) ran out: it reports
        loc = ("ops", index)
        reason = (
            f"deriving this op took longer than {seconds:g} s"
            + (f" (with its derived VJPs up to order {order}; `order: 1` derives the "
               "first only)" if order > 1 else "")
            if isinstance(e, BudgetExceeded) else "this op's expressions are nested too deeply"
        )
        raise SpecError(
            Diagnostic(
                doc.location(loc),
                f"{reason}; simplify the expression, or split it into `where` "
                "intermediates",
                doc.model.ops[index].name,
                None,
            )
        ) from None
