"""Every function of the spec language, and every function the derivation introduces,
declared once (:class:`gradgen.functions.registry.Function`).

Adding a function: write its SymPy class (with ``fdiff`` and ``_eval_evalf``) in the
module of its family unless SymPy has one, add its declaration below, add a helper to
``templates/runtime/`` if TensorFlow has no kernel for it, and add its tests (the
declaration checks in tests/test_registry.py run on every declaration). A function added
after version 1 of the spec format is not reserved (:data:`gradgen.naming.EXPRESSION_NAMES`
is that version's list), so specs that use its name for a value stay valid.

The lookups at the end are what the parser, printer, verification and audit read.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable

import mpmath
import numpy as np
import sympy
from sympy import Interval, oo
from sympy.codegen.cfunctions import Sqrt, expm1, log1p

from . import internal, kinks, nan_safe, numeric as num, smooth
from .registry import (
    ELEMENTWISE, FORM, INTERNAL, MATRIX, REAL, REDUCTION, SOFTMAX, Function,
)

_POSITIVE = Interval.open(0, oo)
_NONNEGATIVE = Interval(0, oo)
_UNIT = Interval(-1, 1)


def _unary(name, cls, numpy, mpmath=None, **kw) -> Function:
    """An elementwise function of one argument, spelled ``name``, of SymPy class ``cls``
    (and of the SymPy classes ``also``, which simplification may bring back)."""
    classes = (cls, *kw.pop("also", ()))
    return Function(name, ELEMENTWISE, (name,), build=cls, classes=classes,
                    tf=kw.pop("tf", f"tf.math.{name}"), numpy=numpy, mpmath=mpmath, **kw)


def _log(x, base=None):
    """``log(x)``, or ``log(x, base) = log(x) / log(base)`` (SymPy's two-argument log)."""
    return sympy.log(x) if base is None else sympy.log(x) / sympy.log(base)


_TRANSCENDENTAL = tuple(
    _unary(name, getattr(sympy, name), getattr(np, npname), getattr(mpmath, name),
           grows=name in ("sin", "cos", "tan", "sinh", "cosh"), holomorphic=True, **kw)
    for name, npname, kw in (
        ("sin", "sin", {"bound": 1}),
        ("cos", "cos", {"bound": 1}),
        ("tan", "tan", {"singular": (-sympy.pi / 2, sympy.pi / 2)}),  # and k*pi from them
        ("asin", "arcsin", {"domain": _UNIT, "singular": (-1, 1)}),
        ("acos", "arccos", {"domain": _UNIT, "singular": (-1, 1)}),
        ("atan", "arctan", {"bound": 2}),  # pi/2
        ("sinh", "sinh", {}),
        ("cosh", "cosh", {}),
        ("tanh", "tanh", {"bound": 1}),
        ("asinh", "arcsinh", {}),
        ("acosh", "arccosh", {"domain": Interval(1, oo), "singular": (1,)}),
        ("atanh", "arctanh", {"domain": Interval.open(-1, 1)}),
    )
)

# In the order of README's function table: spec functions first, then internal ones.
FUNCTIONS: tuple[Function, ...] = (
    _unary("exp", sympy.exp, np.exp, mpmath.exp, grows=True, holomorphic=True),
    Function("log", ELEMENTWISE, ("log",), build=_log, classes=(sympy.log,), arity=(1, 2),
             tf="tf.math.log", numpy=np.log, mpmath=mpmath.log, domain=_POSITIVE,
             singular=(0,), holomorphic=True,
             source="log(x, b) = log(x) / log(b), as SymPy's log"),
    Function("sqrt", ELEMENTWISE, ("sqrt",), build=sympy.sqrt, classes=(Sqrt,),
             tf="tf.math.sqrt", numpy=np.sqrt, exact=True, domain=_NONNEGATIVE,
             singular=(0,), source="x**(1/2): SymPy's sqrt is a power"),
    *_TRANSCENDENTAL,
    _unary("erf", sympy.erf, num.np_erf, mpmath.erf, grows=True, bound=1, helper="_erf"),
    Function("erfc", ELEMENTWISE, ("erfc",), build=sympy.erfc, classes=(sympy.erfc,),
             tf="tf.math.erfc", numpy=num.np_erfc, mpmath=num.mp_erfc, grows=True,
             source="1 - erf(x); gradgen.functions.smooth.erfc keeps erfc(-x) as written"),
    Function("Abs", ELEMENTWISE, ("Abs", "abs"), build=sympy.Abs, classes=(sympy.Abs,),
             tf="tf.math.abs", numpy=np.abs, exact=True, mpmath=mpmath.fabs,
             singular=(0,), source="README, Kinks: d|x|/dx = sign(x), 0 at 0"),
    _unary("sign", kinks.sign, np.sign, mpmath.sign, exact=True, singular=(0,),
           also=(sympy.sign,)),
    _unary("floor", kinks.floor, np.floor, mpmath.floor, exact=True, also=(sympy.floor,)),
    _unary("ceiling", kinks.ceiling, np.ceil, mpmath.ceil, exact=True, tf="tf.math.ceil",
           also=(sympy.ceiling,)),
    Function("Heaviside", ELEMENTWISE, ("Heaviside",), build=kinks.Heaviside,
             classes=(kinks.Heaviside,), singular=(0,),
             source="printed as indicators: [u > 0] + [u = 0]/2"),
    _unary("log1p", log1p, np.log1p, mpmath.log1p, domain=Interval.open(-1, oo),
           singular=(-1,), holomorphic=True, meaning=lambda x: sympy.log(1 + x)),
    _unary("expm1", expm1, np.expm1, mpmath.expm1, grows=True, holomorphic=True,
           meaning=lambda x: sympy.exp(x) - 1),
    _unary("sigmoid", smooth.sigmoid, num.np_sigmoid, num.mp_sigmoid, grows=True,
           holomorphic=True, bound=1, source="tf.math.sigmoid; derivative sigmoid(x)*sigmoid(-x)",
           meaning=lambda x: 1 / (1 + sympy.exp(-x))),
    _unary("softplus", smooth.softplus, num.np_softplus, num.mp_softplus, grows=True,
           source="tf.math.softplus; derivative sigmoid(x)",
           meaning=lambda x: sympy.log(1 + sympy.exp(x))),
    Function("atan2", ELEMENTWISE, ("atan2",), build=sympy.atan2, classes=(sympy.atan2,),
             arity=(2, 2), tf="tf.math.atan2", numpy=np.arctan2, mpmath=mpmath.atan2),
    *(Function(name, ELEMENTWISE, (name,), build=cls, classes=(cls, getattr(sympy, name)),
               arity=(2, None), args=(REAL,), tf=f"tf.math.{tf}", numpy=numpy,
               mpmath=ref, source="README, Kinks: ties split the derivative equally")
      for name, cls, tf, numpy, ref in (
          ("Max", kinks.Max, "maximum", num.np_maximum, max),
          ("Min", kinks.Min, "minimum", num.np_minimum, min),
      )),
    Function("Piecewise", FORM, ("Piecewise",), classes=(sympy.Piecewise,), arity=(1, None)),
    Function("where", FORM, ("where",), arity=(3, 3), source="Piecewise((a, c), (b, True))"),
    # tensor functions: each call is a TensorNode (gradgen.expr)
    Function("transpose", MATRIX, ("transpose",), holomorphic=True),
    Function("inverse", MATRIX, ("inverse",), holomorphic=True,
             no_kernel=("MatrixInverse", ("bfloat16",))),
    Function("det", MATRIX, ("det",), holomorphic=True,
             no_kernel=("MatrixDeterminant and Svd", ("float16", "bfloat16"))),
    Function("logdet", MATRIX, ("log(det(...))",),
             no_kernel=("Qr and MatrixInverse", ("bfloat16",)),
             real_only="log(det()) is computed as log|det| (slogdet), which is not "
             "holomorphic; complex ops cannot use it"),
    Function("trace", MATRIX, ("trace",), holomorphic=True),
    Function("einsum", MATRIX, ("einsum",), arity=(2, None), holomorphic=True),
    *(Function(name, REDUCTION, (name,), holomorphic=True) for name in ("sum", "mean")),
    *(Function(name, kind, (name,), real_only=f"{name}() compares or shifts by the largest "
               "real part; it is defined for real dtypes only")
      for name, kind in (("max", REDUCTION), ("min", REDUCTION), ("logsumexp", REDUCTION),
                         ("softmax", SOFTMAX), ("log_softmax", SOFTMAX))),
    # introduced by rewrites, guards and the derivation
    Function("conjugate", INTERNAL, classes=(sympy.conjugate,), tf="tf.math.conj",
             numpy=np.conj),
    *(Function(cls.__name__, INTERNAL, classes=(cls,), arity=(2, 2), tf=tf, numpy=numpy,
               meaning=meaning)
      for cls, tf, numpy, meaning in (
          (nan_safe.xlogy, "tf.math.xlogy", num.np_xlogy, lambda x, y: x * sympy.log(y)),
          (nan_safe.xdivy, "tf.math.xdivy", num.np_xdivy, lambda x, y: x / y),
          (nan_safe.xlog1py, "tf.math.xlog1py", num.np_xlog1py,
           lambda x, y: x * sympy.log(1 + y)),
          (nan_safe.mul_no_nan, "tf.math.multiply_no_nan", num.np_mul_no_nan, None),
      )),
    *(Function(cls.__name__, INTERNAL, classes=(cls,), arity=arity, helper=helper,
               numpy=numpy, meaning=meaning)
      for cls, arity, helper, numpy, meaning in (
          (smooth.logsumexp, (2, None), "_logsumexp", num.np_logsumexp,
           lambda *a: sympy.log(sympy.Add(*(sympy.exp(u) for u in a)))),
          (smooth.logcosh, (1, 1), "_logcosh", num.np_logcosh, None),
          (smooth.log1mexp, (1, 1), "_log1mexp", num.np_log1mexp, None),
          (smooth.erfcx, (1, 1), "_erfcx", num.np_erfcx, None),
          (smooth.erfcx_recip, (1, 1), "_erfcx_recip", num.np_erfcx_recip, None),
          (smooth.erfcx_recip_slope, (1, 1), "_erfcx_recip_slope", num.np_erfcx_recip_slope,
           None),
          (smooth.log_erfc, (1, 1), "_log_erfc", num.np_log_erfc, None),
          (smooth.hypot, (1, None), "_hypot", num.np_hypot, None),
          (internal.finite_or, (2, 2), "_finite_or", num.np_finite_or, lambda v, s: v),
      )),
    # printed by TFPrinter._print_<Class>
    Function("Guard", INTERNAL, classes=(internal.Guard,), arity=(3, 3), numpy=num.np_guard),
    Function("Square", INTERNAL, classes=(internal.Square,), numpy=num.np_square),
    Function("LogAbs", INTERNAL, classes=(internal.LogAbs,), numpy=num.np_log_abs),
    Function("Recip", INTERNAL, classes=(internal.Recip,), numpy=num.np_recip),
    Function("Ratio", INTERNAL, classes=(internal.Ratio,), arity=(2, 2), numpy=num.np_ratio),
    Function("nan_outside", INTERNAL, classes=(internal.nan_outside,), arity=(2, 2),
             numpy=num.np_nan_outside),
)


# ------------------------------------------------------------------ lookups


@lru_cache(maxsize=None)
def _by_spelling() -> dict[str, Function]:
    out = {}
    for f in FUNCTIONS:
        for spelling in f.spellings:
            assert spelling not in out, spelling
            out[spelling] = f
    return out


def spelled(name: str) -> Function | None:
    """The function a spec calls ``name``, or None."""
    return _by_spelling().get(name)


def spellings(*kinds: str) -> tuple[str, ...]:
    """Every callable spelling of the functions of ``kinds``, in declaration order.

    ``log(det(...))`` is a form of ``log`` (the parser recognises it), not a spelling."""
    return tuple(s for f in FUNCTIONS if f.kind in kinds for s in f.spellings
                 if s.isidentifier())


def declared(name: str) -> Function:
    """The function declared as ``name`` (KeyError if none)."""
    for f in FUNCTIONS:
        if f.name == name:
            return f
    raise KeyError(name)


@lru_cache(maxsize=None)
def _by_class() -> dict[type, Function]:
    return {cls: f for f in FUNCTIONS for cls in f.classes}


def of_class(cls: type) -> Function | None:
    """The function of SymPy class ``cls``: its own declaration, else that of the nearest
    declared base class (``gradgen.functions.erfc`` is printed as ``sympy.erfc``)."""
    table = _by_class()
    for klass in cls.__mro__:
        if klass in table:
            return table[klass]
    return None


def with_numpy() -> tuple[Function, ...]:
    """The functions with a NumPy implementation."""
    return tuple(f for f in FUNCTIONS if f.numpy is not None)


def holomorphic_classes() -> tuple[type, ...]:
    """The SymPy classes a complex op may hold."""
    return tuple(cls for f in FUNCTIONS if f.holomorphic for cls in f.classes)


@lru_cache(maxsize=None)
def _own_classes() -> dict[type, type]:
    """SymPy class -> the spec function's own class, for the classes a declaration
    lists besides its own (``sympy.sign`` for ``sign``: SymPy builds it, as ``|x|'``)."""
    return {other: f.classes[0] for f in FUNCTIONS if f.kind == ELEMENTWISE
            for other in f.classes[1:] if other is not f.classes[0]}


def as_declared(expr):
    """``expr`` with SymPy's classes for the spec's functions replaced by the spec's own
    (``sympy.sign(x)``, which differentiation gives for ``|x|``, by ``sign(x)``, whose
    derivative is gradgen's 0, not SymPy's Dirac delta): an expression that is
    differentiated again keeps the kink conventions."""
    table = _own_classes()
    return expr.replace(lambda e: type(e) in table, lambda e: table[type(e)](*e.args))


@lru_cache(maxsize=None)
def _meanings() -> dict[type, Callable]:
    return {f.classes[0]: f.meaning for f in FUNCTIONS if f.meaning is not None}


def as_meaning(expr):
    """``expr`` with each stable primitive written as its meaning in SymPy's own
    functions (``log1p(x)`` as ``log(1 + x)``; the outermost of nested ones), for SymPy's
    ``limit`` and ``series``, which know SymPy's functions only."""
    table = _meanings()
    mapping = {f: table[type(f)](*f.args) for f in expr.atoms(*table)}
    return expr.xreplace(mapping)
