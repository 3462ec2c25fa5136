"""Cheaper equal forms for printed code, applied to values just before CSE.

Receives SymPy expressions (forward values and backward contributions, stable forms and
guards already in place) and returns equal expressions that are cheaper to compute and
read as written: ratios of powers as powers of the ratio, integer and half-integer
powers by repeated squaring, and numeric constants as single atoms (so that CSE keeps
them inline). Nothing here changes a value beyond rounding.
"""

from __future__ import annotations

import sympy
from sympy.functions.elementary.piecewise import ExprCondPair

from .. import functions as fn
from ..stability import guards


def ratio_powers(e, inputs: frozenset = frozenset()):
    """``a**p * b**-q`` (p >= 2, q >= 1) as ``Ratio(a, b)**m *
    a**(p - m) * b**-(q - m)``, ``m = min(p, q)``, pairing the highest powers first:
    the forward as the user wrote it (``(sigma / r)**6``, which SymPy distributes into
    ``sigma**6 * r**-6``), finite where the separate powers would overflow or
    underflow; Student-t's ``x**2/n`` as ``(x/n) * x`` (``x**2`` is inf from x =
    1.8e19 in float32, where x = n = 3.4e38 makes it 3.4e38). A symbol of ``inputs``
    (the op's inputs, not its upstream gradients) to the first power pairs with a
    square or higher power (p = 1, q >= 2). None when nothing pairs."""
    if not isinstance(e, sympy.Mul):
        return None
    pos, neg, rest = [], [], []
    for factor in e.args:
        base, exp = factor.as_base_exp()
        if exp.is_Integer and not base.is_number and (
                exp >= 2 or exp < 0 or (exp == 1 and base in inputs)):
            (pos if exp > 0 else neg).append([base, abs(int(exp))])
        else:
            rest.append(factor)
    # an input to the first power pairs only with a square or higher power: x/s**2 as
    # (x/s)/s (1/s**2 overflows at s = 1e-20 in float32), not x/s as Ratio(x, s)
    if not neg or max(q for _, q in neg) < 2:
        rest += [base for base, k in pos if k == 1]
        pos = [f for f in pos if f[1] >= 2]
    if not pos or not neg:
        return None
    factors = _norm_components(pos, neg)
    pos = [f for f in pos if f[1] > 0]
    neg = [f for f in neg if f[1] > 0]
    if not pos or not neg:
        return sympy.Mul(*rest, *factors, *(b**k for b, k in pos), *(b**-k for b, k in neg))
    pos.sort(key=lambda f: (-f[1], sympy.default_sort_key(f[0])))
    neg.sort(key=lambda f: (-f[1], sympy.default_sort_key(f[0])))
    for (a, p), (b, q) in zip(pos, neg):
        m = min(p, q)
        factors += [fn.Ratio(a, b) ** m, a ** (p - m), b ** (m - q)]
    for base, exp in pos[len(neg):]:
        factors.append(base ** exp)
    for base, exp in neg[len(pos):]:
        factors.append(base ** -exp)
    return sympy.Mul(*rest, *factors)


def _norm_components(pos: list, neg: list) -> list:
    """The unit vector's components ``Ratio(t, h)`` of each norm ``h = hypot(..., t,
    ...)`` among the denominators ``neg`` whose component ``t``, a product, the powers
    ``pos`` hold (both lists ``[base, power]``, taken from in place): ``e**2 * r *
    hypot(1, e*r)**-3`` (the slope of ``1/sqrt(1 + (e*r)**2)`` in r) as ``(e*r/h) *
    e/h**2``, not ``(e/h)**2 * r/h``, whose ``(e/h)**2`` overflowed at e = 1e20, r =
    1e-35 in float32 (exact -1e5); the component is ``sign(t)`` where ``t``
    overflowed."""
    have = {b: p for b, p in pos}
    out = []
    for entry in neg:
        h = entry[0]
        if not isinstance(h, fn.hypot):
            continue
        for t in h.args:
            parts = [f.as_base_exp() for f in sympy.Mul.make_args(t)]
            if t.is_number or len(parts) < 2 or any(not k.is_Integer for _, k in parts):
                continue
            while entry[1] > 0 and all(have.get(b, 0) >= k for b, k in parts):
                for b, k in parts:
                    have[b] -= int(k)
                entry[1] -= 1
                # +-1 where the product overflowed (h is inf too: inf/inf)
                out.append(sympy.Piecewise((sympy.sign(t), fn.overflowed(t)),
                                           (fn.Ratio(t, h), True)))
    for f in pos:
        f[1] = have[f[0]]
    return out


def cheap_forms(expr, chains: bool, inputs: frozenset = frozenset()):
    """Cheaper equal forms for code: ratios of powers as powers of the ratio
    (:func:`ratio_powers`, ``inputs`` the symbols that pair at the first power); with
    ``chains``, integer and half-integer powers by
    repeated squaring (``r**-12`` is 4 products after one division, not a ``pow`` call,
    which costs an exp and a log per element); and non-trivial numeric constants as
    atoms (so CSE keeps them inline)."""

    def fix(e):
        if isinstance(e, sympy.Pow) and e.exp.is_Rational and not e.base.is_number:
            p, q = int(e.exp.p), int(e.exp.q)
            if q == 1 and p >= 2:
                return fn.squarings(e.base, p)
            if q == 1 and p <= -2:
                return fn.squarings(fn.Recip(e.base), -p)
            if q == 2 and abs(p) >= 3:
                half = sympy.Pow(e.base, sympy.Rational(1 if p > 0 else -1, 2))
                base = e.base if p > 0 else fn.Recip(e.base)
                return sympy.Mul(fn.squarings(base, abs(p) // 2), half)
        return None

    expr = guards.bottom_up(expr, lambda e: ratio_powers(e, inputs))
    return constants(guards.bottom_up(expr, fix) if chains else expr)


def constants(expr):
    """Non-trivial numeric constants (``sqrt(2)/sqrt(pi)``) as single ``Const`` atoms,
    the numeric factors of a product merged into one, so that CSE does not hoist them
    into temporaries of their own (``t = math.sqrt(2) * (1 / math.sqrt(math.pi))``); also
    inside a Piecewise's branches and conditions, so a value there is the same atom as
    outside (one tanh, not two)."""
    if not isinstance(expr, sympy.Basic) or expr.is_Atom:
        return expr
    if isinstance(expr, ExprCondPair) and expr.expr.is_number:
        # a number branch stays a number: the printer writes it after the tensor branch
        return ExprCondPair(expr.expr, constants(expr.cond))
    if isinstance(expr, sympy.Expr) and expr.is_number:
        return fn.Const(expr)
    if isinstance(expr, sympy.Mul):
        numbers = [a for a in expr.args if a.is_number]
        rest = [constants(a) for a in expr.args if not a.is_number]
        coeff = sympy.Mul(*numbers)
        if not coeff.is_Atom:
            coeff = fn.Const(coeff)
        return sympy.Mul(coeff, *rest)
    args = tuple(constants(a) for a in expr.args)
    return expr if args == expr.args else expr.func(*args)
