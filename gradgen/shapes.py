"""Declared shapes, broadcasting, and the reduction axes of unbroadcasting.

Consumes: shapes as declared in a spec (ints, ``null``, dim names). Guarantees, as pure
functions without SymPy or TensorFlow:

* :func:`broadcast` follows NumPy/TensorFlow broadcasting on *declared* shapes and raises
  :class:`ShapeError` only when the shapes can never broadcast (two different known sizes,
  neither 1; or two different dim names);
* :func:`reduction_plan` says how to turn a cotangent of the broadcast shape back into an
  input's shape. It returns a :class:`StaticReduction` (literal axes: sum over the leading
  axes that broadcasting added, and, keeping dims, over the axes where the input has a
  literal 1) whenever the declared shapes decide those axes, and :data:`DYNAMIC` otherwise
  (some axis may or may not have been broadcast depending on run-time sizes). This is the
  split TensorFlow's ``math_grad.SmartBroadcastGradientArgs`` makes between static axes
  and ``BroadcastGradientArgs`` on run-time shapes.

Dims are ``int`` (a known size), ``str`` (a named dim: one unknown size shared wherever the
name appears) or :class:`Unknown` (``null``, or the result of broadcasting dims whose
relation is only known at run time). A shape may start with a :class:`Batch` (``...`` in
a spec): any number of leading batch dims, so its rank is only known at trace time. Its
dims after the ``...`` are its *core*; axes of such a shape count from the end. Two ``Unknown`` dims are equal only if they are the
same dim (same token), which is what lets ``x * 2`` on a ``[null]`` input keep a static
plan while ``[null, 3]`` against ``[null, 3]`` needs a dynamic one.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Union


@dataclass(frozen=True)
class Unknown:
    """A dim whose size is only known at run time.

    Attributes:
        token: identity; unknown dims are equal only when their tokens are.
        label: how the dim is described in messages (``None`` for a declared ``null``).
    """

    token: int
    label: str = "None"

    def __str__(self) -> str:
        return self.label


@dataclass(frozen=True)
class Batch:
    """``...`` as the first entry of a shape: zero or more leading batch dims.

    Batch dims broadcast across inputs as NumPy's do; two batches are the same (at run
    time too) only if their tokens are, as for :class:`Unknown`.

    Attributes:
        token: identity (one per input's ``...``, and one per broadcast of two).
    """

    token: int

    def __str__(self) -> str:
        return "..."


Dim = Union[int, str, Unknown, Batch]
Shape = tuple[Dim, ...]


class ShapeError(ValueError):
    """Shapes that can never be combined; the message names the axis and both dims."""


class DimFactory:
    """Creates :class:`Unknown` dims with deterministic tokens (one factory per op).

    Broadcasting the same two dims twice gives the same result dim, so two outputs
    computed from the same operands are known to have the same shape.
    """

    def __init__(self) -> None:
        self._counter = itertools.count()
        self._joint: dict = {}
        self.sizes: dict = {}

    def unknown(self, label: str = "None") -> Unknown:
        return Unknown(next(self._counter), label)

    def batch(self) -> Batch:
        """A fresh ``...`` (an input's own batch dims)."""
        return Batch(next(self._counter))

    def hint(self, dim: Dim, size: int) -> None:
        """Record that an unknown or named ``dim`` must be ``size`` (or 1) at run time;
        :meth:`concrete` uses it to pick sizes that broadcast (for build-time checks)."""
        if not is_known(dim) and size != 1:
            self.sizes.setdefault(dim, size)

    def concrete(self, dim: Dim, default: int) -> int:
        """A run-time size for ``dim`` consistent with every recorded hint."""
        if is_known(dim):
            return dim
        return self.sizes.get(dim, default)

    def joint(self, a: Dim, b: Dim) -> Unknown | Batch:
        """The (memoized) unknown result of broadcasting ``a`` with ``b`` (a
        :class:`Batch` for two batches)."""
        key = frozenset([a, b])
        if key not in self._joint:
            self._joint[key] = self.batch() if isinstance(a, Batch) else self.unknown()
        return self._joint[key]


def is_known(dim: Dim) -> bool:
    """True for a literal size."""
    return isinstance(dim, int)


def has_batch(shape: Shape) -> bool:
    """True when ``shape`` starts with ``...`` (its rank is only known at trace time)."""
    return bool(shape) and isinstance(shape[0], Batch)


def core(shape: Shape) -> Shape:
    """The dims after a leading ``...`` (all of them when there is none)."""
    return tuple(shape[1:]) if has_batch(shape) else tuple(shape)


def core_rank(shape: Shape) -> int:
    """The number of dims after a leading ``...``: the rank, when there is none."""
    return len(core(shape))


def format_dim(dim: Dim) -> str:
    return str(dim)  # an Unknown reads as its label, "None"


def format_shape(shape: Shape) -> str:
    """``[10, 1]``, ``[batch, None, 3]``, ``[]`` for a scalar."""
    return "[" + ", ".join(format_dim(d) for d in shape) + "]"


def is_static(shape: Shape) -> bool:
    """True when every dim is a literal size."""
    return all(is_known(d) for d in shape)


def broadcast_dims(a: Dim, b: Dim, factory: DimFactory) -> Dim:
    """Broadcast two dims; raise :class:`ShapeError` if they can never match."""
    if a == b:
        return a
    if a == 1:
        return b
    if b == 1:
        return a
    if is_known(a) and is_known(b):
        raise ShapeError(f"sizes {a} and {b} differ and neither is 1")
    if isinstance(a, str) and isinstance(b, str):
        raise ShapeError(f"dims '{a}' and '{b}' have different names")
    # A known size n != 1 against an unknown one: the result is n (the other must be 1
    # or n at run time). Otherwise the result is only known at run time.
    known = _known_of(a, b, factory)
    return known if known is not None else factory.joint(a, b)


def _known_of(a: Dim, b: Dim, factory: DimFactory) -> int | None:
    """The known size of the pair, recording it as the other dim's size; None if neither
    is known."""
    if is_known(a):
        factory.hint(b, a)
        return a
    if is_known(b):
        factory.hint(a, b)
        return b
    return None


def broadcast(a: Shape, b: Shape, factory: DimFactory) -> Shape:
    """The broadcast of two declared shapes (aligned on the right, NumPy rules).

    A shape with ``...`` broadcasts with one that has no more dims than its core, or
    with another ``...`` shape of the same core rank: ``[..., 3]`` with ``[3]`` or
    ``[..., 1]`` is ``[..., 3]``; the batch dims of two ``...`` shapes broadcast too.

    Raises:
        ShapeError: naming the axis (counted from the right as a negative index) and the
            two dims when they can never broadcast; shapes whose alignment depends on
            the number of batch dims (``[..., 3]`` with ``[2, 3]``, or with
            ``[..., n, 3]``).
    """
    if has_batch(a) or has_batch(b):
        return _broadcast_batched(a, b, factory)
    rank = max(len(a), len(b))
    pa = (1,) * (rank - len(a)) + tuple(a)
    pb = (1,) * (rank - len(b)) + tuple(b)
    out = []
    for i, (da, db) in enumerate(zip(pa, pb)):
        try:
            out.append(broadcast_dims(da, db, factory))
        except ShapeError as e:
            raise ShapeError(
                f"shapes {format_shape(a)} and {format_shape(b)} do not broadcast at "
                f"axis {i - rank}: {e}"
            ) from None
    return tuple(out)


def _broadcast_batched(a: Shape, b: Shape, factory: DimFactory) -> Shape:
    if has_batch(a) and has_batch(b):
        if core_rank(a) != core_rank(b):
            raise ShapeError(
                f"shapes {format_shape(a)} and {format_shape(b)} do not broadcast: both "
                "start with '...' (any number of batch dims) but have different numbers "
                "of dims after it, so which dims meet depends on the batch ranks"
            )
        batch = a[0] if a[0] == b[0] else factory.joint(a[0], b[0])
    else:
        batched, fixed = (a, b) if has_batch(a) else (b, a)
        if len(fixed) > core_rank(batched):
            raise ShapeError(
                f"shapes {format_shape(a)} and {format_shape(b)} do not broadcast: "
                f"{format_shape(fixed)} has more dims than {format_shape(batched)} has "
                "after '...', so its leading dims would meet the batch dims; start it "
                "with '...' too"
            )
        batch = batched[0]
    try:
        return (batch,) + broadcast(core(a), core(b), factory)
    except ShapeError as e:
        raise ShapeError(
            f"shapes {format_shape(a)} and {format_shape(b)} do not broadcast: {e}"
        ) from None


def broadcast_all(shapes: list[Shape], factory: DimFactory) -> Shape:
    """Broadcast any number of shapes (``[]`` for none)."""
    out: Shape = ()
    for s in shapes:
        out = broadcast(out, s, factory)
    return out


def same_shape(a: Shape, b: Shape) -> bool:
    """True when the two shapes are provably the same at run time."""
    return len(a) == len(b) and all(x == y for x, y in zip(a, b))


@dataclass(frozen=True)
class StaticReduction:
    """Unbroadcast with literal axes.

    Attributes:
        drop_axes: leading axes of the cotangent that broadcasting added (the input has
            lower rank); summed without keeping dims.
        keep_axes: axes (numbered *after* dropping ``drop_axes``, i.e. in the input's own
            axis numbering) where the input has size 1 and the output may not; summed
            keeping dims.
    """

    drop_axes: tuple[int, ...] = ()
    keep_axes: tuple[int, ...] = ()

    @property
    def is_identity(self) -> bool:
        return not self.drop_axes and not self.keep_axes


class DynamicReduction:
    """Unbroadcast on run-time shapes (``BroadcastGradientArgs`` + reshape)."""

    def __repr__(self) -> str:
        return "DYNAMIC"


DYNAMIC = DynamicReduction()
ReductionPlan = Union[StaticReduction, DynamicReduction]


def reduction_plan(input_shape: Shape, output_shape: Shape) -> ReductionPlan:
    """How to reduce a cotangent of ``output_shape`` to ``input_shape``.

    ``output_shape`` must be the broadcast of ``input_shape`` with other shapes (so its
    rank is at least the input's).

    Returns:
        A :class:`StaticReduction` when the declared dims decide every axis, else
        :data:`DYNAMIC`.

    Examples (from the table tests):
        ``[10, 1]`` to ``[10, 5]`` gives keep_axes ``(1,)``; ``[5]`` to ``[10, 5]`` gives
        drop_axes ``(0,)``; ``[null, 3]`` to a fresh ``[None, 3]`` is dynamic.
    """
    if has_batch(input_shape) or has_batch(output_shape):
        return _batched_plan(input_shape, output_shape)
    extra = len(output_shape) - len(input_shape)
    if extra < 0:
        raise ValueError(
            f"output shape {format_shape(output_shape)} has lower rank than input "
            f"shape {format_shape(input_shape)}"
        )
    drop = tuple(range(extra))
    keep = []
    for i, (din, dout) in enumerate(zip(input_shape, output_shape[extra:])):
        if din == dout:
            continue
        if din == 1:
            keep.append(i)
            continue
        if is_known(din):
            # A known size other than 1 is never broadcast: the output's dim equals it.
            continue
        return DYNAMIC
    return StaticReduction(drop, tuple(keep))


def _batched_plan(input_shape: Shape, output_shape: Shape) -> ReductionPlan:
    """Static only when the input has the output's very batch (the same ``...``) and
    core rank: then only the core's size-1 dims are summed, at axes counted from the
    end. Otherwise the batch dims to sum depend on run-time ranks and sizes."""
    if not (
        has_batch(input_shape)
        and has_batch(output_shape)
        and input_shape[0] == output_shape[0]
        and core_rank(input_shape) == core_rank(output_shape)
    ):
        return DYNAMIC
    plan = reduction_plan(core(input_shape), core(output_shape))
    if isinstance(plan, DynamicReduction):
        return plan
    n = core_rank(input_shape)
    return StaticReduction((), tuple(sorted((a - n for a in plan.keep_axes), reverse=True)))


def describe_reduction(
    plan: ReductionPlan, input_shape: Shape, output_shape: Shape
) -> str:
    """One line for a code comment: which axes are summed and why."""
    src = f"{format_shape(input_shape)} from {format_shape(output_shape)}"
    if isinstance(plan, DynamicReduction):
        if has_batch(output_shape):  # the two '...' may differ at run time
            return f"unbroadcast {src}: batch dims and axes from run-time shapes"
        return f"unbroadcast {src}: axes from run-time shapes"
    parts = []
    if plan.drop_axes:
        parts.append(f"sum leading axes {list(plan.drop_axes)} (rank extension)")
    if plan.keep_axes:
        parts.append(f"sum axes {list(plan.keep_axes)} keeping dims (size-1 dims)")
    if not parts:
        return f"no unbroadcast needed: {src}"
    return f"unbroadcast {src}: " + ", then ".join(parts)


def unify(a: Dim, b: Dim, factory: DimFactory, what: str) -> Dim:
    """Two dims that must be equal (a contraction, a square matrix, an einsum index).

    Raises:
        ShapeError: two known sizes or two names that differ.
    """
    if a == b:
        return a
    if isinstance(a, Unknown) or isinstance(b, Unknown) or (is_known(a) != is_known(b)):
        known = _known_of(a, b, factory)
        if known is not None:
            return known
        return b if isinstance(a, Unknown) else a
    raise ShapeError(f"{what}: {format_dim(a)} and {format_dim(b)} differ")


def normalize_axes(axes, rank: int, batched: bool = False) -> tuple[int, ...]:
    """Axes for a tensor of ``rank`` in expansion order: sorted non-negative axes
    (negative ones count from the end). For a shape with ``...`` (``batched``; ``rank``
    is its core rank), axes count from the end and stay negative, sorted from the last
    (``(-1, -3)``): expanding dims back in that order puts each where it was.

    Raises:
        ShapeError: an axis out of range, or repeated; a non-negative axis of a
            ``batched`` shape.
    """
    if batched:
        for axis in axes:
            if axis >= 0:
                raise ShapeError(
                    f"axis {axis} of a shape starting with '...' depends on the number "
                    f"of batch dims; count axes from the end (axis={axis - rank} is "
                    "the same axis when there are no batch dims)"
                    if axis < rank else
                    f"axis {axis} of a shape starting with '...' depends on the number "
                    "of batch dims; count axes from the end (-1 is the last)"
                )
        out = []
        for axis in axes:
            if axis < -rank:
                raise ShapeError(
                    f"axis {axis} is out of range for the {rank} dims after '...'"
                )
            if axis in out:
                raise ShapeError(f"axis {axis} is repeated")
            out.append(axis)
        return tuple(sorted(out, reverse=True))
    out = []
    for axis in axes:
        if not -rank <= axis < rank:
            raise ShapeError(f"axis {axis} is out of range for rank {rank}")
        axis %= rank  # rank > 0: with rank 0 no axis is in range
        if axis in out:
            raise ShapeError(f"axis {axis} is repeated")
        out.append(axis)
    return tuple(sorted(out))


def reduce_shape(shape: Shape, axes: tuple[int, ...], keepdims: bool) -> Shape:
    """Shape after summing ``shape`` over normalized ``axes`` (negative for a shape
    with ``...``: those count within its core)."""
    if has_batch(shape):
        n = core_rank(shape)
        axes = tuple(a + n for a in axes)
        return shape[:1] + reduce_shape(core(shape), axes, keepdims)
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def square_shape(shape: Shape, factory: DimFactory, what: str) -> Shape:
    """Check that the last two dims are equal (a batch of square matrices).

    Raises:
        ShapeError: rank < 2, or the last two dims are known to differ.
    """
    if core_rank(shape) < 2:
        raise ShapeError(f"{what} needs a matrix (rank >= 2); got {format_shape(shape)}")
    n = unify(shape[-2], shape[-1], factory, f"{what} needs square matrices")
    return shape[:-2] + (n, n)


def einsum_shape(
    subscripts: str, shapes: list[Shape], factory: DimFactory
) -> tuple[Shape, list[str], str]:
    """Validate an explicit einsum and return (output shape, input subscripts, output).

    Only explicit subscripts (``"ij,jk->ik"``) of letters are accepted: no ``...``, and
    no index repeated within one operand (diagonals).

    Raises:
        ShapeError: a malformed subscript string, a rank mismatch, or an index whose
            sizes differ between operands.
    """
    text = subscripts.replace(" ", "")
    if "->" not in text or text.count("->") != 1:
        raise ShapeError("einsum needs explicit subscripts with '->', like 'ij,jk->ik'")
    if "." in text:
        raise ShapeError("einsum ellipsis '...' is not supported; name every axis")
    for shape in shapes:
        if has_batch(shape):
            raise ShapeError(
                f"einsum of an operand of shape {format_shape(shape)} is not supported: "
                "its rank depends on the batch dims ('...'); use '@', sum() and "
                "transpose(), or declare its rank"
            )
    lhs, out = text.split("->")
    inputs = lhs.split(",")
    for sub in inputs + [out]:
        if not all(c.isalpha() and c.isascii() for c in sub):
            raise ShapeError(f"einsum subscripts are letters; got {sub!r}")
        if len(set(sub)) != len(sub):
            raise ShapeError(f"einsum index repeated within {sub!r} is not supported")
    if len(inputs) != len(shapes):
        raise ShapeError(
            f"einsum subscripts name {len(inputs)} operands, got {len(shapes)}"
        )
    sizes: dict[str, Dim] = {}
    for sub, shape in zip(inputs, shapes):
        if len(sub) != len(shape):
            raise ShapeError(
                f"einsum operand {sub!r} has rank {len(sub)}, but its shape is "
                f"{format_shape(shape)}"
            )
        for c, d in zip(sub, shape):
            sizes[c] = unify(sizes[c], d, factory, f"einsum index {c!r}") if c in sizes else d
    missing = [c for c in out if c not in sizes]
    if missing:
        raise ShapeError(f"einsum output index {missing[0]!r} is not in any operand")
    return tuple(sizes[c] for c in out), inputs, out


def matmul_shape(a: Shape, b: Shape, factory: DimFactory) -> Shape:
    """Shape of ``a @ b``: batch axes broadcast, ``[..., n, k] @ [..., k, m] -> [..., n, m]``.

    Raises:
        ShapeError: an operand has rank < 2, or the contracted dims are known to differ
            (different sizes or different names; a name and a size may be equal).
    """
    if core_rank(a) < 2 or core_rank(b) < 2:
        raise ShapeError(
            f"'@' needs operands of rank >= 2 (matrices over the last two axes); got "
            f"{format_shape(a)} @ {format_shape(b)}"
        )
    ka, kb = a[-1], b[-2]
    try:  # a named dim may be contracted with a size (TF checks it at run time)
        unify(ka, kb, factory, "contracted dims")
    except ShapeError:
        raise ShapeError(
            f"contracted dims differ: {format_shape(a)} @ {format_shape(b)} contracts "
            f"{format_dim(ka)} with {format_dim(kb)}"
        ) from None
    try:
        batch = broadcast(a[:-2], b[:-2], factory)
    except ShapeError as e:
        raise ShapeError(
            f"batch dims of {format_shape(a)} @ {format_shape(b)} do not broadcast: {e}"
        ) from None
    return batch + (a[-2], b[-1])
