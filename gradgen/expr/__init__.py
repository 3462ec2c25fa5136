"""Safe parsing of spec expressions into SymPy, with shapes.

Consumes: one validated op (:class:`gradgen.spec.OpSpec`) and its document (for
positions). Guarantees: :func:`parse_op` returns a :class:`~gradgen.graph.Program`, or
raises :class:`~gradgen.errors.SpecError` pointing at the offending part of the
expression.

Spec text is never given to ``eval``, ``sympify`` or ``parse_expr``. It is parsed with
Python's :mod:`ast` in ``eval`` mode, every node is checked against an allow-list
(numbers, names of inputs and intermediates, ``+ - * / ** @``, unary minus, comparisons
and boolean operators inside conditions, calls of the functions in :data:`FUNCTIONS`),
and the SymPy objects are built here, node by node. Sizes are bounded: text length,
AST node count and depth, literal magnitudes, and numeric powers (``10**10**10`` is
refused, not evaluated). What a Program holds is described in :mod:`gradgen.graph`.

The modules: :mod:`~gradgen.expr.syntax` (the allow-list, text into a bounded tree),
:mod:`~gradgen.expr.parse` (an op's inputs, ``where`` and outputs into a Program),
:mod:`~gradgen.expr.parser` (the core visitor: names, constants, operators,
comparisons), :mod:`~gradgen.expr.calls` (function calls) and
:mod:`~gradgen.expr.tensors` (tensor nodes: matmul, matrix ops, reductions, einsum).
"""

from .parse import parse_op
from .syntax import FUNCTIONS, MAX_AST_NODES, UNARY

__all__ = ["FUNCTIONS", "MAX_AST_NODES", "UNARY", "parse_op"]
