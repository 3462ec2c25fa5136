"""What reverse mode accumulates: cotangent contributions per symbol, the backward
statements written so far, and what a tensor node's VJP rule returns.

Receives nothing; the VJP passes (:mod:`.elementwise`, :mod:`.reductions`,
:mod:`.matrix`, driven by :mod:`.reverse`) add to one :class:`Cotangents`, and
:mod:`.unbroadcast` sums each symbol's contributions into one value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .. import ir
from .. import shapes as sh


@dataclass
class Contribution:
    """A cotangent contribution to one symbol: a value of the given declared shape.

    ``wide``: where ``value`` is a keepdims reduction's cotangent, smaller than the
    symbol (``shape`` is then its own), the value broadcast to the symbol's shape; the
    sum uses ``value`` where other contributions broadcast it, else ``wide``.
    """

    value: ir.Value
    shape: sh.Shape
    comments: tuple = ()
    wide: ir.Value | None = None


@dataclass
class Cotangents:
    """Reverse mode in progress.

    Attributes:
        contributions: symbol -> its :class:`Contribution` s so far.
        backward: ``(local, value, comments)`` statements of the gradient function, in
            order.
        shapes: local -> the declared shape of its value.
    """

    contributions: dict = field(default_factory=dict)
    backward: list = field(default_factory=list)
    shapes: dict = field(default_factory=dict)

    def local(self, name: str, value: ir.Value, comments: tuple, shape: sh.Shape) -> None:
        """Append the statement ``name = value`` (a value of ``shape``)."""
        self.backward.append((name, value, comments))
        self.shapes[name] = shape

    def add(self, symbol, contribution: Contribution) -> None:
        """Record a contribution to ``symbol``'s cotangent."""
        self.contributions.setdefault(symbol, []).append(contribution)


@dataclass(frozen=True)
class Narrow:
    """A keepdims reduction's cotangent before it is broadcast back over the reduced
    axes: a compound operand's partials that have the operand's shape broadcast it in
    their product, with no ``broadcast_to`` pass.

    Attributes:
        value: the cotangent (the node's, divided by the count for a mean).
        shape: its declared shape (the node's).
        widen: a value -> that value broadcast back to the operand's shape.
    """

    value: ir.Value
    shape: tuple
    widen: Callable


@dataclass(frozen=True)
class OperandVJP:
    """The VJP of a tensor node with respect to one operand.

    Attributes:
        operand: the operand's expression (a symbol, or an elementwise expression whose
            own partials carry the cotangent on).
        value: the VJP, a value of the operand's shape (or ``shape``).
        shape: the declared shape of ``value``.
        text: the formula, for the docstring and the comment above it.
        narrow: for a keepdims sum or mean, the cotangent before it is broadcast back.
    """

    operand: object
    value: ir.Value
    shape: tuple
    text: str
    narrow: Narrow | None = None
