"""Limits, not conventions: a partial's value where its ``sqrt``-type factor is singular.

Receives: a partial derivative after :mod:`gradgen.stability`, a real elementwise SymPy
expression, before :func:`~.subgradients.zero_subgradients`. Returns
(:func:`singular_limits`): where every singular factor of the partial (the factors
:func:`~.subgradients.singular_factor` names: ``s**(-1/2)`` from the derivative of
``sqrt(s)``, ``s**(-n)`` of a compound ``s >= 0``) is a function of one input ``v`` of the op
whose real zeros are rational points ``r``, the partial written as
``Piecewise((L_1, Eq(v, r_1)), ..., (partial, True))``: ``L_i`` the partial's limit as
``v -> r_i`` from the sides where every such ``s`` is positive (where the forward is
real), computed by SymPy at build time, finite or +-inf. ``acos(x)**2``: -2 at x = 1
(the limit from below), -inf at x = -1; ``sqrt(x)``: +inf at 0; ``sign(x)*sqrt(|x|)``:
+inf at 0 (from both sides). Where two sides' limits differ (a true kink: ``|x|`` as
``sqrt(x**2)``), where SymPy finds no limit, or where the singular factors hold several
inputs (a norm at the origin, whose limit depends on the direction), the point keeps
the subgradient 0 of :func:`~.subgradients.zero_subgradients`.

Also the guard's name (``singular_limit``) where it filled a point, and each filled
point, ``(v, r, value, "from below")``, for ``explain`` and the docstring.
"""

from __future__ import annotations

import sympy
from sympy import S

from ...functions import Guard
from .constants import LIMIT_MAX_OPS, TAYLOR_DEGREE
from .subgradients import rational_zeros, singular_factor
from .taylor import taylor_plan, taylor_polynomial
from .walk import SYMPY_CANNOT, bottom_up, standard

# How far beside a zero the sign of ``s`` is read (zeros are rational, of height at
# most 10**6, so no two are this close).
_BESIDE = sympy.Rational(1, 10**9)
_SIDES = {"+": "from above", "-": "from below"}


def singular_limits(expr, inputs) -> tuple[sympy.Basic, tuple[str, ...], tuple[tuple, ...]]:
    """``expr`` with its value at the zeros of its singular factors filled by its
    one-sided limits there (see the module docstring).

    Args:
        expr: a real partial derivative (SymPy), elementwise.
        inputs: the op's input symbols. A singular factor of an intermediate (a `where`
            name, a reduction: ``sqrt(s)``, ``s = sum(x**2)``) is left alone: the chain
            rule multiplies its partial by more (``2*x``), and inf * 0 is NaN where the
            norm's subgradient 0 is the value.

    Returns:
        (the expression, the guard names used, the filled points: ``(v, r, value,
        sides)``, ``sides`` "from below", "from above" or "from both sides"). ``expr``
        itself, with no names and no points, where nothing is filled.
    """
    if expr.has(sympy.Piecewise) or sympy.count_ops(expr) > LIMIT_MAX_OPS:
        return expr, (), ()
    bases = _singular_bases(expr)
    symbols = set().union(*(s.free_symbols for s in bases)) if bases else set()
    if len(symbols) != 1 or not symbols <= set(inputs):
        return expr, (), ()
    (v,) = symbols
    zeros = _rational_zeros(bases, v)
    coeff, rest = expr.as_independent(v, as_Add=False)
    pieces, points = [], []
    for r in zeros:
        found = _limit(rest, v, r, bases)
        if found is None:
            continue
        value, sides = found
        pieces.append((_times(coeff, value), sympy.Eq(v, r)))
        points.append((v, r, coeff * value, sides))
    if not pieces:
        return expr, (), ()
    return sympy.Piecewise(*pieces, (expr, True)), ("singular_limit",), tuple(points)


def _singular_bases(expr) -> set:
    """The bases ``s`` of the singular factors of ``expr`` (outside Piecewise: there
    are none here)."""
    return {e.base for e in sympy.preorder_traversal(expr) if singular_factor(e, ())}


def _rational_zeros(bases, v) -> list:
    """The real zeros of every base (:func:`~.subgradients.rational_zeros`) if all are
    rational; else none."""
    zeros = set()
    for s in bases:
        found = rational_zeros(s, v)
        if found is None:
            return []
        zeros.update(found)
    return sorted(zeros)


def _limit(rest, v, r, bases):
    """(the limit of ``rest`` as ``v -> r``, "from below"/"from above"/"from both
    sides") from the sides where every base vanishing at ``r`` is positive; None where
    a side's limit is not found, is not real, or two sides differ."""
    sides = [d for d in _SIDES if _real_beside(bases, v, r, d)]
    values = []
    meaning = standard(rest)
    if meaning.has(sympy.Piecewise):  # (SymPy's limit fails on relations in it)
        return None
    for d in sides:
        value = _real_limit(meaning, v, r, d)
        if value is None:
            return None
        values.append(value)
    if not values or any(value != values[0] for value in values):
        return None
    how = "from both sides" if len(values) == 2 else _SIDES[sides[0]]
    return values[0], how


def _real_limit(expr, v, r, side):
    """SymPy's limit of ``expr`` (no Piecewise) as ``v -> r`` from ``side``: a real
    number or +-inf; None where it finds none, or another value."""
    try:
        value = sympy.limit(expr, v, r, side)
    except SYMPY_CANNOT:
        return None
    if value not in (S.Infinity, S.NegativeInfinity) and (
        value.is_real is not True or value.has(v, sympy.AccumBounds)
    ):
        return None
    return value


def _beside(r, side):
    """The point just beside ``r`` on ``side`` ("+" above, "-" below)."""
    return r + _BESIDE if side == "+" else r - _BESIDE


def _real_beside(bases, v, r, direction) -> bool:
    """Whether every base that is 0 at ``v = r`` is positive just beside it on the
    side ``direction`` ("+" above, "-" below)."""
    point = _beside(r, direction)
    for s in bases:
        if s.subs(v, r) != 0:
            continue
        beside = s.subs(v, point)
        if not (beside.is_number and beside.is_positive):
            return False
    return True


def _times(coeff, value):
    """``coeff * value``; where ``value`` is +-inf and ``coeff`` holds other inputs,
    0 where ``coeff`` is 0 (the partial is 0 for every ``v`` there) and ``coeff * inf``
    elsewhere."""
    if value.is_finite or coeff.is_number:
        return coeff * value
    return sympy.Piecewise((0, sympy.Eq(coeff, 0)), (coeff * value, True))


def filled_points_smoothed(expr, found: list | None = None):
    """``expr`` with each point its Piecewise fills with a limit (``Piecewise((L_1,
    Eq(v, r_1)), ..., (f, True))``, as :func:`singular_limits` writes it, or ``(f,
    Ne(v, r)), (L, True)``), ``L_i`` a one-sided limit of ``f`` at ``r_i``, written as
    ``f`` alone: a derivative there is the limit of ``f``'s (:func:`derivative`), where
    differentiating branch by branch gives the constant's 0 (``(exp(x) - 1)/x`` filled
    with 1 at 0 has derivative 1/2 there). A fill that is no side's limit (a jump)
    stays: the function has no derivative there. ``found`` (a list) receives each
    point removed, ``(v, r, side)``.

    Used by the derivation (:func:`derivative`) and by the accuracy audit's exact
    reference."""
    found = [] if found is None else found

    def smooth(e):
        if not isinstance(e, sympy.Piecewise):
            return None
        (first, cond), *_ = e.args
        if len(e.args) == 2 and isinstance(cond, sympy.Ne) and e.args[1][1] is sympy.true:
            f, points = first, [(e.args[1][0], sympy.Eq(*cond.args))]
        else:
            *points, (f, last) = e.args
            if last is not sympy.true or not points:
                return None
        kept = []
        for g, c in points:
            # (SymPy merges the points of one value: Eq(x, -1) | Eq(x, 1) -> oo)
            each = c.args if isinstance(c, sympy.Or) else (c,)
            sides = [_limit_side(f, g, e) for e in each]
            if None in sides:
                kept.append((g, c))
            else:
                found.extend((*_point(e), side) for e, side in zip(each, sides))
        if len(kept) == len(points):
            return None
        return sympy.Piecewise(*kept, (f, True)) if kept else f

    return bottom_up(expr, smooth)


def derivative(expr, v, filled: list | None = None):
    """``d expr / d v`` where each point a Piecewise of ``expr`` fills with a limit
    (:func:`filled_points_smoothed`) is differentiated as the formula it fills, and the
    derivative there is that formula's derivative's limit from the same side (SymPy,
    at build time): ``where(x == 1, 1, log(x)/(x - 1))`` has the derivative -1/2 at 1;
    ``acos(x)**2``'s derivative, filled with -2 at 1 by :func:`singular_limits`, has
    the second derivative 2/3 there. Branch by branch, both are the constant's 0. Where
    a limit is not found (or the formula is too large for SymPy's ``limit``), the
    derivative branch by branch.

    ``filled`` (a list) receives each point so filled, ``(v, r, value, sides)`` as
    :func:`singular_limits` gives them.

    Source: a function continuous at a point with a derivative on both sides near it
    has there the limit of that derivative, where the limit exists (the mean value
    theorem)."""
    if not any(isinstance(c, (sympy.Eq, sympy.Or)) and v in c.free_symbols
               for p in expr.atoms(sympy.Piecewise) for _, c in p.args):
        return sympy.diff(expr, v)  # no point of v is filled: nothing to smooth
    points: list = []
    smooth = filled_points_smoothed(expr, points)
    d = sympy.diff(smooth, v)
    if not points:
        return d
    pieces, shown = [], []
    for u, r, side in points:
        coeff, rest = sympy.factor_terms(d).as_independent(u, as_Add=False)
        # the side the fill was found from first (a formula real on both sides of a
        # point matches from either), then the other
        value, how = next(((found, s) for s in sorted(_SIDES, key=lambda s: s != side)
                           if (found := _derivative_limit(rest, u, r, s)) is not None),
                          (None, None))
        if value is None:
            return sympy.diff(expr, v)
        pieces.append((_times(coeff, value), sympy.Eq(u, r)))
        shown.append((u, r, coeff * value, _SIDES[how]))
    if filled is not None:
        filled.extend(shown)
    return sympy.Piecewise(*pieces, (d, True))


def polynomials_beside(expr, points, dtype: str):
    """``expr`` with each point ``(v, r, value, sides)`` of ``points`` (as
    :func:`derivative` gives them) that a Piecewise of ``expr`` fills with a finite
    value (``Eq(v, r)``) also computed, beside it on the side its limit came from (both
    where the formula is real on both), as its formula's Taylor polynomial in ``v - r``
    (:func:`_polynomial_beside`): the formula's terms cancel there. ``acos(x)**2``'s
    second derivative, ``2*(1 - x*acos(x)/sqrt(1 - x**2))/(1 - x**2)``, lost every
    digit at x = 1 - 2**-53 in float64, and its third was 15% off at 0.999 in float32;
    ``where(x == 1, 1, log(x)/(x - 1))``'s derivative cancels near 1 likewise. For the
    code only: the partial shown keeps the formula."""
    wanted = {(v, r): side for v, r, value, side in points
              if not value.has(S.Infinity, S.NegativeInfinity, S.ComplexInfinity)}
    if not wanted or dtype not in TAYLOR_DEGREE:
        return expr

    def beside(e):
        if not isinstance(e, sympy.Piecewise) or e.args[-1][1] is not sympy.true:
            return None
        *points_, (f, last) = e.args
        extra = []
        for u, r in (_point(c) for _, c in points_ if isinstance(c, sympy.Eq)):
            side = wanted.get((u, r))
            if side is None:
                continue
            coeff, rest = sympy.factor_terms(f).as_independent(u, as_Add=False)
            near = _polynomial_beside(rest, u, r, _SIDE_OF[side], dtype)
            if near is not None:
                extra.append((coeff * near[0], near[1]))
        if not extra:
            return None
        return sympy.Piecewise(*points_, *extra, (f, last), evaluate=False)

    return bottom_up(expr, beside)


_SIDE_OF = {text: side for side, text in _SIDES.items()}  # derived points' sides


def _polynomial_beside(rest, v, r, side, dtype):
    """``(P, condition)``: ``rest``'s Taylor polynomial in ``v - r`` (Horner form; degree
    :data:`TAYLOR_DEGREE` of ``dtype``) and where it is used, ``0 < ±(v - r) <= h`` on
    ``side`` (``h`` from :func:`.taylor.taylor_plan`); None where the series has no
    polynomial (a half-integer power, an imaginary or infinite coefficient), no plan,
    or is too large to ask. ``v - r`` is exact near ``r`` (Sterbenz)."""
    meaning = _branches_beside(rest, v, r, side)
    if meaning.has(sympy.Piecewise) or sympy.count_ops(meaning) > LIMIT_MAX_OPS:
        return None
    other = "-" if side == "+" else "+"
    # real on both sides (log(x)/(x - 1) at 1): one polynomial in v - r for both
    both = _real_near(meaning, v, r, other) and _real_near(meaning, v, r, side)
    sign = 1 if side == "+" or both else -1
    t = sympy.Symbol("t_beside", real=True) if both else \
        sympy.Symbol("t_beside", positive=True)
    shifted = meaning.xreplace({v: r + sign * t})
    degree = TAYLOR_DEGREE[dtype]
    polynomial = taylor_polynomial(shifted, t, degree)
    if polynomial is None:
        return None
    plan = taylor_plan(shifted, t, degree, dtype, polynomial)
    if plan is None or plan[1] != 1:
        return None
    h, _, polynomial = plan
    distance = sign * (v - r)
    near = sympy.Abs(distance) <= h if both else sympy.And(distance > 0, distance <= h)
    return polynomial.xreplace({t: distance}), near


def _derivative_limit(rest, v, r, side):
    """The limit of ``rest`` as ``v -> r`` from ``side``: a real number or +-inf; None
    where SymPy finds none, or the formula is too large to ask. A polynomial beside
    the point (a Taylor polynomial :func:`polynomials_beside` placed there) is its
    value at the point, however large."""
    rest = _branches_beside(rest, v, r, side)
    if rest.has(sympy.Piecewise):
        return None
    meaning = standard(rest)
    if meaning.is_polynomial(v):
        value = meaning.subs(v, r)
        return value if value.is_real else None
    if sympy.count_ops(rest) > LIMIT_MAX_OPS:
        return None
    return _real_limit(meaning, v, r, side)


def _branches_beside(expr, v, r, side):
    """``expr`` with each Piecewise replaced by its branch selected just beside ``v = r``
    on ``side``, and each Guard by the input it guards (SymPy's ``limit`` and ``series``
    cannot read relations; a derived order's formula holds the guards of the order
    below, whose safe values stand where a branch is not selected: its math is the
    input); a Piecewise whose selected branch there depends on other symbols stays."""
    point = _beside(r, side)

    def branch(e):
        if isinstance(e, Guard):
            return e.args[0]
        if not isinstance(e, sympy.Piecewise):
            return None
        for value, cond in e.args:
            holds = cond.subs(v, point)
            if holds is sympy.true:
                return value
            if holds is not sympy.false:
                return None
        return None

    return bottom_up(expr, branch)


def _real_near(f, v, r, side) -> bool:
    """Whether ``f`` and each function and root in it are real just beside ``v = r`` on
    ``side`` (other symbols taken as 1): the side to ask SymPy's limit first (the
    formula's own, where it is the forward's real domain). Each part, not only the
    value: ``acos(x)/sqrt(1 - x**2)`` is real above 1 too (i/i), where acos is not."""
    meaning = standard(f)
    at = {s: 1 for s in meaning.free_symbols if s != v}
    at[v] = _beside(r, side)
    parts = [meaning] + [e for e in sympy.preorder_traversal(meaning)
                         if isinstance(e, sympy.Function)
                         or isinstance(e, sympy.Pow) and not e.exp.is_Integer]
    for part in parts:
        try:
            value = complex(part.subs(at).evalf(15))
        except (TypeError, ValueError, ZeroDivisionError):
            return False
        if value.imag != 0:
            return False
    return True


def _point(cond) -> tuple:
    """``(v, r)`` of ``Eq(v, r)`` or ``Eq(r, v)``."""
    return cond.args if cond.args[0].is_Symbol else cond.args[::-1]


def _limit_side(f, g, cond) -> str | None:
    """The side ("+" or "-") from which ``g`` is ``f``'s limit at the point ``cond``
    (``Eq(v, r)``, ``v`` a symbol, ``r`` a number): a number equal to it, or an
    infinite fill (``oo``, or :func:`_times`'s ``coeff * oo``) where that limit is
    infinite; None where neither side's is."""
    infinite = g.has(S.Infinity, S.NegativeInfinity)
    if not isinstance(cond, sympy.Eq):
        return None
    v, r = _point(cond)
    # a number, or (a derived order's fill) a number times other inputs: 2*upstream/3
    if not (v.is_Symbol and r.is_number) or g.has(v) or g.has(sympy.Piecewise):
        return None
    for side in sorted(_SIDES, key=lambda d: not _real_near(f, v, r, d)):
        # the branch selected beside the point (where(x > 0, log(x)/(x - 1), 0) at 1)
        beside = _branches_beside(f, v, r, side)
        if beside.has(sympy.Piecewise) or sympy.count_ops(beside) > LIMIT_MAX_OPS:
            continue
        try:
            value = sympy.limit(standard(beside), v, r, side)
        except SYMPY_CANNOT:
            continue
        if value == g or (infinite and value.has(S.Infinity, S.NegativeInfinity)):
            return side
    return None
