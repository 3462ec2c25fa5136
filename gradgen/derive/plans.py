"""Fusion and memory plans: what ``fuse: xla`` can compile, and what ``memory:
recompute`` computes again in the gradient function.

Receives the derivation (its renamed nodes) or the op's statements after CSE. Returns
nothing or raises (:func:`check_fusion`), and the forward statements the gradient
function runs again (:func:`recomputed`).
"""

from __future__ import annotations

from .. import ir
from .context import Derivation


def check_fusion(d: Derivation) -> None:
    """Refuse, in an op with ``fuse: xla``, a matrix function XLA has no kernel for.

    Raises:
        SpecError: at the expression that uses ``det()`` or a complex ``inverse()``.
    """
    p = d.program
    if p.fuse != "xla":
        return
    for n in d.nodes:
        if n.op == "det" or (n.op == "inverse" and p.is_complex):
            what = "det()" if n.op == "det" else "a complex inverse()"
            raise d.error(
                n.key, f"fuse: xla cannot compile {what}: TensorFlow has no XLA "
                "kernel for it (MatrixDeterminant, complex MatrixInverse); use "
                "fuse: none for this op" + (", or log(det(...))" if n.op == "det"
                                            else "")
            )


def recomputed(forward: tuple, backward: tuple) -> tuple:
    """The forward statements the backward statements need (directly or through each
    other), in forward order, for ``memory: recompute``: the gradient function computes
    them again from the inputs instead of keeping them alive from the forward pass."""
    defined = {stmt.target: stmt for stmt in forward}
    needed: set = set()
    stack = [s.name for stmt in backward for e in ir.value_exprs(stmt.value)
             for s in e.free_symbols if s.name in defined]
    while stack:
        name = stack.pop()
        if name in needed:
            continue
        needed.add(name)
        stack += [s.name for e in ir.value_exprs(defined[name].value) for s in e.free_symbols
                  if s.name in defined]
    return tuple(ir.Statement(s.target, s.value) for s in forward if s.target in needed)
