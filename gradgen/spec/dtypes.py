"""The dtypes a spec may name, and how a ``dtype`` field that names several is read.

Receives: a ``dtype`` field's value (one dtype name, ``floating`` or a list of float
dtypes), as :mod:`.fields` validated it.
Returns: the dtype names by kind (:data:`FLOAT_DTYPES`, :data:`HALF_DTYPES`,
:data:`COMPLEX_DTYPES`, :data:`INT_DTYPES`, all of them :data:`DTYPES`) and their
``Literal`` types; :func:`dtype_set` (the float dtypes a field names, None for one
dtype) and :func:`default_dtype` (the one a generic op computes in for Python numbers).
"""

from __future__ import annotations

from typing import Any, Literal

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
# Every product rounds to 8 or 11 bits here: powers stay single pow calls (one rounding).
HALF_DTYPES = ("float16", "bfloat16")
COMPLEX_DTYPES = ("complex64", "complex128")
INT_DTYPES = ("int32", "int64")
DTYPES = FLOAT_DTYPES + COMPLEX_DTYPES + INT_DTYPES
DType = Literal[
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128", "int32", "int64"
]

FloatDType = Literal["float16", "bfloat16", "float32", "float64"]
# `dtype: floating` (or a list of float dtypes): an op generated for each, following its
# inputs' dtype like a TensorFlow op. Python numbers take the default (float32).
FLOATING = "floating"


def dtype_set(value: Any) -> tuple[str, ...] | None:
    """The float dtypes of a ``dtype`` field that names several (a list or ``floating``),
    in the order of :data:`FLOAT_DTYPES`; None for one dtype (a string)."""
    if value == FLOATING:
        return FLOAT_DTYPES
    if isinstance(value, (list, tuple)):
        return tuple(d for d in FLOAT_DTYPES if d in value)
    return None


def default_dtype(dtypes: tuple[str, ...]) -> str:
    """The dtype a generic op computes in when every argument is a Python number or
    list: the first declared of float32, float64, float16, bfloat16 (TensorFlow's
    default float, then the most precise)."""
    return next(d for d in ("float32", "float64", "float16", "bfloat16") if d in dtypes)
