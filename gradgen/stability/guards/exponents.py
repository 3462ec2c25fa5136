"""Logarithms in exponents: ``xlogy(k, x)`` in an exponential's argument as
``mul_no_nan(log(x), k)``, whose second derivative in ``k`` is right.

Receives: a real elementwise SymPy expression ready to print. Returns
(:func:`exponent_logs`): the expression with each ``xlogy`` inside an ``exp`` replaced
(the same value, ``k*log(x)``, 0 where k = 0), and ``("exponent_logs",)`` where one was.
Source: TensorFlow's gradients of ``xlogy`` and ``multiply_no_nan`` (math_grad.py
``_XLogyGrad``, ``_MulNoNanGrad``).
"""

from __future__ import annotations

import sympy

from ...functions import mul_no_nan, xlogy


def exponent_logs(expr) -> tuple[sympy.Basic, tuple[str, ...]]:
    """``xlogy(k, x)`` in an exponential's argument as ``mul_no_nan(log(x), k)``: the
    same value (``k*log(x)``, 0 where k = 0, also at x = 0), but second order right.

    ``exp(k*log(x) + b)`` stays one exponential (``exp_log_power``), so its ``xlogy``
    reaches the gradient code, which TensorFlow differentiates for second order; and
    TensorFlow's gradient of ``xlogy`` in its first argument is 0 where that argument
    is 0 (math_grad.py ``_XLogyGrad``), not ``log(x)``: d2/dx dk of a gamma density
    ``exp((k - 1)*log(x) - x/t)`` was 0.914 for 0.374 at k = 2. ``multiply_no_nan``'s
    gradient in its second argument is exact (``_MulNoNanGrad``).
    """
    found = [e for e in expr.atoms(sympy.exp) if e.args[0].has(xlogy)]
    if not found:
        return expr, ()
    mapping = {}
    for e in found:
        arg = e.args[0].replace(xlogy, lambda k, x: mul_no_nan(sympy.log(x), k))
        mapping[e] = sympy.exp(arg)
    return expr.xreplace(mapping), ("exponent_logs",)
