"""Zero subgradients: 0 where a partial has a ``sqrt``-type or squared-norm singular
factor at 0.

Receives: a partial derivative after :mod:`gradgen.stability`, a real elementwise SymPy
expression ready to print. Returns (:func:`zero_subgradients`): the partial with a
factor ``s**(-1/2)`` (from the derivative of ``sqrt(s)``), and a factor ``s**(-n)``
where ``s >= 0`` is a compound expression that can be 0 (a squared norm, e.g. in the
derivatives of ``sqrt(x**2 + y**2)`` and ``atan2(y, x)``), replaced by 0 where
``s = 0``: the subgradient 0 of norms at the origin. Elsewhere the value is unchanged.
A factor in a Piecewise branch whose condition, or the earlier branches' points
(``Eq(x, 1)``: :func:`~.limits.singular_limits` fills them), exclude the zeros of ``s``
is left alone. Also the names of the guards used (``sqrt_zero``, ``norm_zero``).

:func:`rational_zeros` (the real zeros of a low-degree polynomial ``s``, if all are
rational) is shared with :mod:`.limits`.
"""

from __future__ import annotations

import sympy
from sympy import S

from ...functions import Ratio, hypot
from ..families.norms import root_of_square
from .conditions import bound_of, relations_of


def _nonzero_under(cond) -> set:
    """Expressions that ``cond`` proves nonzero (``u > 0``, ``u < -1``, ``u != 0``...)."""
    out = set()
    for rel in relations_of(cond) or []:
        b = bound_of(rel)
        if b is None or not b[2].is_number:
            continue
        u, kind, value = b
        strict = isinstance(rel, (sympy.StrictGreaterThan, sympy.StrictLessThan))
        if (
            (kind == "lower" and (value > 0 or (value == 0 and strict)))
            or (kind == "upper" and (value < 0 or (value == 0 and strict)))
            or (kind == "not" and value == 0)
            or (kind == "point" and value != 0)
        ):
            out.add(u)
    return out


# Polynomials of higher degree are not solved for their zeros.
MAX_DEGREE = 4


def rational_zeros(s, v) -> list | None:
    """The real zeros of ``s``, a polynomial (or the absolute value of one) in ``v`` of
    degree 1 to :data:`MAX_DEGREE` with rational coefficients, sorted, if all are
    rationals of denominator at most 10**6; else None."""
    poly = s.replace(sympy.Abs, lambda a: a)
    if not poly.is_polynomial(v):
        return None
    p = sympy.Poly(poly, v)
    if not 0 < p.degree() <= MAX_DEGREE or not all(c.is_Rational for c in p.coeffs()):
        return None
    zeros = sympy.real_roots(p)
    if not all(z.is_Rational and abs(z.q) <= 10**6 for z in zeros):
        return None
    return sorted(set(zeros))


def singular_factor(e, known, excluded=frozenset()) -> str | None:
    """The guard a factor ``e`` needs: "sqrt_zero" for ``s**(-1/2)``, "norm_zero" for
    ``s**(-n)`` of a compound ``s >= 0``, where ``s`` may be 0 (it is not a number, not
    positive, not in ``known``, and not a function of one input whose zeros are all
    among the points ``excluded``, ``(v, r)`` pairs); else None."""
    if not isinstance(e, sympy.Pow) or not (e.exp.is_Rational and e.exp.is_negative):
        return None
    s = e.base
    if s.is_positive or s.is_number or s in known or _zeros_excluded(s, excluded):
        return None
    if e.exp == -S.Half:
        return "sqrt_zero"
    if s.is_nonnegative and not s.is_Atom:
        return "norm_zero"
    return None


def _zeros_excluded(s, excluded) -> bool:
    if not excluded or len(s.free_symbols) != 1:
        return False
    (v,) = s.free_symbols
    zeros = rational_zeros(s, v)
    return zeros is not None and all((v, z) in excluded for z in zeros)


def _points(cond) -> set:
    """The points ``(v, r)`` that ``cond`` (``Eq(v, r)``, or an ``Or`` of them) selects."""
    out = set()
    for rel in cond.args if isinstance(cond, sympy.Or) else (cond,):
        b = bound_of(rel) if isinstance(rel, sympy.Eq) else None
        if b and b[1] == "point" and b[2].is_number:
            out.add((b[0], b[2]))
    return out


def _unit_components(e, known, excluded, used):
    """A product ``x * hypot(x, y, ...)**-1 * rest`` as ``where(h != 0, x / h, 0) *
    rest`` (a :class:`~gradgen.functions.Ratio`: the unit vector's component, bounded
    by 1), so that its derivatives pair each ``x`` with an ``h`` (``(x/h)*(y/h)/h``, not
    ``x*y/h**3``, whose ``h**3`` overflows or underflows first: the Hessian of a norm
    at 1e-20 in float32). Likewise ``x * s**-1`` for a squared norm ``s = x**2 + ...``:
    the derivative of ``x/s`` is ``1/s - 2*(x/s)*x/s``, not ``1/s - 4*x**2*(1/s)**2``,
    whose ``(1/s)**2`` underflows first (``log(x**2 + y**2)``'s second derivative at x
    = 1e10 in float32: 1/s**2 = 1e-40 is subnormal, and the result had the wrong
    sign); and ``x*y*s**-2`` as ``(x/s)*(y/s)``, one component per power (the
    derivative of ``x/(x**2 + y**2)`` in y was 0 * inf = NaN at x = 0, y = 1e-10 in
    float32, where ``(1/s)**2`` overflows). A product ``A * s**-1`` with no component
    of ``s``, a sum, is ``Ratio(A, s)``, 0 only where every root of ``s`` is 0."""
    factors = list(e.args)
    for f in factors:
        if not (isinstance(f, sympy.Pow) and f.exp.is_Integer and f.exp < 0
                and isinstance(f.base, (hypot, sympy.Add))
                and singular_factor(f, known, excluded) == "norm_zero"):
            continue
        # one component per power of s (x*y/s**2 as (x/s)*(y/s); x**2/s**2 as (x/s)**2)
        ratios, rest = [], [a for a in factors if a is not f]
        for a in list(rest):
            base, k = a.as_base_exp()
            if not (_component(base, f.base) and k.is_Integer and k > 0):
                continue
            take = min(int(k), -int(f.exp) - len(ratios))
            ratios += [Ratio(base, f.base)] * take
            rest.remove(a)
            rest.append(base ** (k - take))
            if len(ratios) == -f.exp:
                break
        if not ratios:
            if f.exp != -1 or not isinstance(f.base, sympy.Add) or not rest:
                continue
            # no component: the rest over s as a Ratio, which norm_quotients computes
            # with the norm out of range ((1 - 2*x*(x/s))/s, the derivative of x/s in
            # x, was 0 at x = 1.05e-19, y = 0 in float32, where s underflows to 0 and
            # the exact value is -9e37)
            used.add("norm_zero")
            return sympy.Piecewise((Ratio(sympy.Mul(*rest), f.base), _nonzero(f.base)),
                                   (0, True))
        used.add("norm_zero")
        # the powers left divided one at a time: x*h**-3 as ((x/h)/h)/h, never beyond
        # the value in range ((x/h)*(1/h)**2 was inf at x = 8e-31, y = 2.5e-22 in
        # float32, where (1/h)**2 overflows and the value is 5.4e34)
        unit = sympy.Mul(*ratios)
        for _ in range(-int(f.exp) - len(ratios)):
            unit = Ratio(unit, f.base)
        return sympy.Mul(sympy.Piecewise((unit, _nonzero(f.base)), (0, True)), *rest)
    return e


def _nonzero(s):
    """``s != 0`` for a norm or squared norm ``s``; for a sum of squares, where one of
    its roots is not 0 (``x**2 + y**2`` underflows to 0 at x = y = 1e-20 in float32,
    where the unit component is 1e20 and the norm_quotient guard computes it with the
    norm)."""
    roots = [root_of_square(t) for t in s.args] if isinstance(s, sympy.Add) else [None]
    if any(r is None or r.is_number for r in roots):
        return sympy.Ne(s, 0)
    return sympy.Or(*[sympy.Ne(r, 0) for r in roots])


def _component(x, s) -> bool:
    """Whether ``x`` is an argument of the norm ``s = hypot(x, ...)``, or ``x**2`` (times
    a positive number) a term of the squared norm ``s = x**2 + ...``."""
    if isinstance(s, hypot):
        return x in s.args
    return not x.is_number and any(
        (t / x**2).is_number and (t / x**2).is_positive for t in s.args)


def zero_subgradients(expr) -> tuple[sympy.Basic, tuple[str, ...]]:
    """Use 0 where a partial has a ``sqrt``-type or squared-norm singular factor at 0.

    A factor inside a Piecewise branch whose condition already excludes 0 (``x > 0``),
    or after branches for every zero of its base (``Eq(x, 0)``), is left alone.
    """
    used = set()

    def fix(e, known, excluded):
        if isinstance(e, sympy.Piecewise):
            pairs = []
            for v, c in e.args:
                pairs.append((fix(v, known | _nonzero_under(c), excluded), c))
                excluded = excluded | _points(c)
            return sympy.Piecewise(*pairs)
        if isinstance(e, sympy.Mul):
            e = _unit_components(e, known, excluded, used)
        if e.args:  # (atoms have none)
            args = tuple(fix(a, known, excluded) for a in e.args)
            if args != e.args:
                e = e.func(*args)
        guard = singular_factor(e, known, excluded)
        if guard is None:
            return e
        used.add(guard)
        return sympy.Piecewise((e, sympy.Ne(e.base, 0)), (0, True))

    out = fix(expr, frozenset(), frozenset())
    return out, tuple(sorted(used))
