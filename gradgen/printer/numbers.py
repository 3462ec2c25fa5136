"""Numeric constants as Python source.

Receives: a SymPy number (an Integer, Rational, Float, a number symbol such as ``pi``, or
a constant expression such as ``sqrt(2)/2``, or SymPy's ``oo``/``-oo``, from a limit)
and the plain Python printer that spells
``math`` expressions. Returns: :func:`number_literal`'s text, a Python literal
(``2.0``, ``0.5``, ``(1.0 / 3.0)``, ``(1+2j)``) or a ``math`` expression
(``math.sqrt(2)/2``, ``math.inf``), and whether that text uses the ``math`` module. Any
other constant that is not finite in float64 raises :class:`~gradgen.printer.errors.PrintError`.
"""

from __future__ import annotations

import math

import sympy
from sympy.printing.codeprinter import PrintMethodNotImplementedError

from ..errors import EVALUATION_ERRORS, error_text, short
from .errors import PrintError


def number_literal(expr, constants) -> tuple[str, bool]:
    """(``expr`` as a Python literal or a ``math`` expression, whether it uses ``math``).

    Args:
        expr: a SymPy number.
        constants: a SymPy ``PythonCodePrinter`` (spells ``math.pi``, ``math.log(2)``).

    Raises:
        PrintError: the constant is not finite in float64, or mpmath cannot evaluate it
            (``exp(exp(exp(1000)))`` overflows mpmath's own exponent).
    """
    if expr in (sympy.oo, -sympy.oo):  # a limit (the spec language has no infinity)
        return ("math.inf" if expr is sympy.oo else "-math.inf"), True
    try:
        value = complex(expr.evalf(30))
    except EVALUATION_ERRORS as e:
        raise PrintError("constant", f"constant {short(expr)} cannot be evaluated "
                         f"({error_text(e)}); it is not finite in float64") from None
    if not (math.isfinite(value.real) and math.isfinite(value.imag)):
        raise PrintError("constant", f"constant {short(expr)} is not finite in float64")
    if expr.is_Integer:
        return f"{int(expr)}.0", False
    if expr.is_Rational:
        p, q = int(expr.p), int(expr.q)
        if q & (q - 1) == 0:  # exact in binary
            return repr(p / q), False
        return (f"-({-p}.0 / {q}.0)" if p < 0 else f"({p}.0 / {q}.0)"), False
    if expr.is_Float:
        return repr(float(expr)), False
    if expr.is_real is False or value.imag != 0:
        return repr(value), False
    try:
        text = constants.doprint(expr)
    except PrintMethodNotImplementedError:
        # a constant of a function the math module lacks (softplus(2), sigmoid(1)):
        # its value, correctly rounded from 30 digits
        return repr(value.real), False
    return text, "math." in text
