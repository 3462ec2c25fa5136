"""The declaration of a function of the spec language, and the lookups its readers use.

A :class:`Function` says everything gradgen needs to know about one function, in one
place (as SymPy's ``Function`` classes and JAX's primitive registrations do): how a spec
spells it and what SymPy class it parses to, its arguments, its TensorFlow spelling or
the runtime helper the printer writes instead, its float64 NumPy implementation (build
verification, the audit's TensorFlow stand-in) and its mpmath reference (the accuracy
audit), its real domain and singular points, and whether complex ops may use it. Its
derivatives are the SymPy class's own (``fdiff``, :mod:`gradgen.functions.smooth`...).

The declarations themselves are in :mod:`gradgen.functions.declarations`; the parser
(:mod:`gradgen.expr`), the printer, verification, the audit and derivation read them
through the functions here and keep no table of functions of their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import sympy

# What a call of the function becomes in the parsed op.
ELEMENTWISE = "elementwise"  # an elementwise SymPy expression
FORM = "form"  # elementwise, with a syntax of its own (Piecewise pairs, where's condition)
REDUCTION = "reduction"  # a TensorNode over axes (axis=, keepdims=)
SOFTMAX = "softmax"  # a TensorNode over one axis (axis=)
MATRIX = "matrix"  # a TensorNode over the last two axes (or einsum's subscripts)
INTERNAL = "internal"  # built by rewrites, guards and the derivation; no spelling
KINDS = (ELEMENTWISE, FORM, REDUCTION, SOFTMAX, MATRIX, INTERNAL)

# Argument kinds: any value, or a value that must be real (it is compared).
VALUE, REAL = "value", "real"


@dataclass(frozen=True)
class Function:
    """One function gradgen can parse, derive, print, verify and audit.

    Attributes:
        name: the canonical spelling (the SymPy class name for internal functions).
        kind: one of :data:`KINDS`.
        spellings: every name a spec may call it by (empty for internal functions).
        build: what the parser calls with the arguments' SymPy expressions (elementwise
            functions); None where the parser has a form of its own.
        classes: the SymPy classes an expression holds for it; the printer dispatches on
            them (and their subclasses), verification and the audit replace them.
        arity: (fewest, most) arguments; most None for any number.
        args: the kind of each argument (:data:`VALUE` or :data:`REAL`), the last one
            repeated for the rest.
        tf: the TensorFlow function it prints as (``tf.math.exp``), or None; with a
            ``helper``, the TensorFlow kernel that helper wraps (``_erf``: ``tf.math.erf``).
        helper: the generated runtime helper it prints as (``_logcosh``), or None.
        numpy: float64 NumPy implementation (takes and returns arrays), or None.
        exact: ``numpy`` is exact (correctly rounded in every dtype: abs, floor...), so
            the audit's stand-in uses it without an mpmath refinement.
        mpmath: the reference at any precision, or None where SymPy's mpmath printer
            knows the function (or it is evaluated through its ``evalf``).
        grows: mpmath's work grows with the argument's magnitude (exp, sin...): the audit
            refuses arguments past its bound.
        domain: the real arguments it is defined (and real) at, as a SymPy set of the
            first argument.
        singular: points of ``domain`` where the derivative is infinite or undefined (for
            a periodic function, those of the period around 0); with the ends of
            ``domain``, the accuracy audit samples each (``log1p(x)`` at -1).
        bound: an integer bound of ``|f(x)|`` over every real ``x`` (sin: 1), or None if
            unbounded: a factor the guards' overflow analysis counts as a constant.
        holomorphic: complex ops may use it (holomorphic, and TensorFlow has complex
            kernels for it).
        real_only: for a tensor function complex ops cannot use, why (the refusal's
            message); elementwise ones are refused with one message for all.
        no_kernel: (the TensorFlow kernels it needs, the float dtypes that lack them).
        meaning: for a stable primitive, its formula in SymPy's own functions, of the
            arguments (Herbie's ``#:spec``: ``log1p(x)`` means ``log(1 + x)``): what
            limits and series through it are taken of; None for the others.
        source: where the definition and its derivative come from.
    """

    name: str
    kind: str
    spellings: tuple[str, ...] = ()
    build: Callable | None = None
    classes: tuple[type, ...] = ()
    arity: tuple[int, int | None] = (1, 1)
    args: tuple[str, ...] = (VALUE,)
    tf: str | None = None
    helper: str | None = None
    numpy: Callable | None = None
    exact: bool = False
    mpmath: Callable | None = None
    grows: bool = False
    domain: sympy.Set = sympy.S.Reals
    singular: tuple = ()
    bound: int | None = None
    holomorphic: bool = False
    real_only: str = ""
    no_kernel: tuple[str, tuple[str, ...]] | None = None
    meaning: Callable | None = None
    source: str = ""

    def __post_init__(self):
        assert self.kind in KINDS, self.kind
        assert bool(self.spellings) == (self.kind != INTERNAL), self.name
        if self.kind in (MATRIX, REDUCTION, SOFTMAX):  # refused with their own reason
            assert self.holomorphic != bool(self.real_only), self.name

    @property
    def tf_name(self) -> str | None:
        """The name inside ``tf.math`` (``exp`` for ``tf.math.exp``), or None."""
        if self.tf is None or not self.tf.startswith("tf.math."):
            return None
        return self.tf[len("tf.math."):]

    def arg_kind(self, i: int) -> str:
        """The kind of argument ``i`` (0-based)."""
        return self.args[min(i, len(self.args) - 1)]
