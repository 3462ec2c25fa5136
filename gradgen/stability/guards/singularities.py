"""Removable singularities: a Taylor polynomial near ``v = 0`` where a value has a pole
in a real input ``v`` but a finite limit there.

Receives: a real elementwise SymPy expression ready to print (a forward value or a
partial derivative after :mod:`gradgen.stability`) and the op's dtype. Returns
(:func:`removable_singularities`): the expression with the smallest part around each
pole factor ``v**(-n)`` that has a finite limit as ``v -> 0`` (``sin(x)/x``,
``expm1(x)/x`` and their derivatives) replaced near ``v = 0`` by its Taylor polynomial,
on an interval scaled to the formula (``sin(100*x)/x``, ``sin(x*y)/x``:
:func:`.taylor.taylor_plan`, which also gives the interval's formulas); where no
interval fits every value of the other inputs, by the limit (computed by SymPy:
:func:`limit_at_zero`) at ``v = 0``. Also the names of the guards used
(``removable_singularity``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy
from sympy.core.relational import Relational
from sympy.logic.boolalg import BooleanFunction

from ...functions import Guard, mul_no_nan
from .constants import LIMIT_MAX_OPS, TAYLOR_DEGREE
from .taylor import taylor_plan, taylor_polynomial, unit_interval
from .walk import SYMPY_CANNOT, standard


def _open_powers(expr) -> set:
    """The powers in ``expr`` outside Piecewise branches. A pole inside a Piecewise is
    already guarded (``1/sqrt(s)`` where ``s != 0``, else 0): a limit taken through the
    Piecewise sees only its value at the point (0), not the pole beside it."""
    found = set()

    def walk(e):
        if isinstance(e, sympy.Piecewise):
            return
        if isinstance(e, sympy.Pow):
            found.add(e)
        for a in e.args:
            walk(a)

    walk(expr)
    return found


def _pole_in(p) -> sympy.Symbol | None:
    """``v`` where the power ``p`` has a pole at ``v = 0``: ``v**(-n)`` for a real
    symbol ``v``, or ``g(v)**(-n)`` for a function ``g`` of ``v`` alone that is 0 there
    (``expm1(x)``, ``sin(x)``: the Bernoulli generating function ``x/expm1(x)``'s slope
    was NaN at 0, exact -1/2); else None."""
    if not p.exp.is_negative:
        return None
    base = p.base
    if base.is_Symbol:
        return base if base.is_real else None
    if isinstance(base, sympy.Function) and not isinstance(base, sympy.Piecewise) \
            and len(base.free_symbols) == 1:
        (v,) = base.free_symbols
        if v.is_real and _vanishes(base, v):
            return v
    return None


def _poles(expr) -> list[sympy.Symbol]:
    """Real symbols v with a factor v**(-n), or a function of v that is 0 at v = 0 to a
    negative power, somewhere in ``expr`` (outside Piecewise)."""
    found = {v for p in _open_powers(expr) if (v := _pole_in(p)) is not None}
    return sorted(found, key=sympy.default_sort_key)


def limit_at_zero(expr, v):
    """The limit of ``expr`` as ``v -> 0`` (from both sides) where SymPy finds it real and
    finite; else None, also where ``expr`` has more than :data:`LIMIT_MAX_OPS`
    operations."""
    if sympy.count_ops(expr) > LIMIT_MAX_OPS:
        return None
    meaning = standard(expr)
    if any(a.args[0] == v for a in meaning.atoms(sympy.log)):
        # a pole beside log(v) (x**(k - 1)/x as exp((k - 1)*log(x))/x, in a gamma
        # density's derivatives): no finite limit but where the other inputs allow one,
        # and SymPy takes seconds to find that out
        return None
    try:
        value = sympy.limit(meaning, v, 0, "+-")
    except SYMPY_CANNOT:  # SymPy cannot find it: no fill, not a crash
        return None
    # not finite and real: +-oo and complex values are not real; +-oo*sign(y) and
    # zoo*sigma**6*sign(sigma**6) (Lennard-Jones' second derivative at r = 0) are of
    # unknown reality (so they are looked for); an unevaluated Limit still holds v
    if value.is_real is False or value.has(v, sympy.oo, -sympy.oo, sympy.zoo,
                                           sympy.nan, sympy.AccumBounds):
        return None
    return value


def _has_pole(expr, v) -> bool:
    return any(_pole_in(p) == v for p in _open_powers(expr))


def _vanishes(expr, v) -> bool:
    try:
        return bool(expr.subs(v, 0) == 0)
    except (TypeError, ValueError, ZeroDivisionError):
        return False


def removable_singularities(
    expr, dtype: str = "float64"
) -> tuple[sympy.Basic, tuple[str, ...]]:
    """Use a Taylor polynomial near ``v = 0`` where part of ``expr`` has a pole in a real
    input ``v`` but a finite limit there.

    Near a removable singularity the formula is 0/0 at ``v = 0`` and cancels
    catastrophically close to it (``(x*cos(x) - sin(x))/x**2`` at x = 1e-20 is 0 in any
    precision, not -x/3). For ``|v| <= h`` a Taylor polynomial (degree ``m`` by dtype,
    :data:`TAYLOR_DEGREE`) is used instead; ``h = eps**(1/(m + 1 + k))`` for a pole of
    order ``k`` balances the polynomial's truncation error against the formula's
    cancellation error (both about ``eps**((m + 1)/(m + 1 + k))`` relative, ``eps`` the
    dtype's unit roundoff). The formula is evaluated at ``v`` replaced by ``h`` inside the
    polynomial's range (double where).

    The interval is scaled to the formula by :func:`taylor_plan` (``|100 x| / sqrt(6)``
    small for ``sin(100*x)/x``, ``|x y|`` for ``sin(x*y)/x``, ``|x| (1 + |y|)`` where
    the scale grows with y but is no one expression). A sum it finds none for is taken
    term by term; for a single term without one, only ``v = 0`` is filled in, with the
    limit: the formula is used everywhere else, as written (accurate but for its
    cancellation near 0).

    Only the smallest part with the pole is expanded: in a sum, the terms with the pole
    (whose sum may have a limit though each alone does not); in a product, the pole with
    the factors that vanish at 0 (``sin(x)/x`` in ``exp(x) * sin(x)/x``).
    """
    run = _Run(dtype, TAYLOR_DEGREE[dtype])
    out = _visit(run, expr)
    return out, tuple(sorted(run.used))


@dataclass
class _Run:
    """One run of :func:`removable_singularities`: the dtype, its Taylor degree, and the
    names of the guards used so far."""

    dtype: str
    degree: int
    used: set = field(default_factory=set)


def _visit(run: _Run, e):
    """``e`` with the smallest part around each pole filled in (see
    :func:`removable_singularities`), else its arguments visited."""
    if isinstance(e, sympy.Piecewise):
        return _visit_branches(run, e)
    if not e.args:
        return e
    for v in _poles(e):
        if isinstance(e, sympy.Add):
            guarded = _fill_terms(run, e, v)
            if guarded is not None:
                return guarded
        elif isinstance(e, sympy.Mul):
            guarded = _fill_factors(run, e, v)
            if guarded is not None:
                return guarded
        guarded = _fill(run, e, v)
        if guarded is not None:
            return guarded
    if isinstance(e, (sympy.Add, sympy.Mul)) or isinstance(e, sympy.Function):
        return e.func(*(_visit(run, a) for a in e.args))
    return e


def _visit_branches(run: _Run, e):
    """Each branch of the Piecewise ``e`` on its own (a limit through the Piecewise would
    see only the selected branch at the point): `where(x > 5, 1, sin(x)/x)` at x = 0."""
    pairs = [(_visit(run, v), c) for v, c in e.args]
    if all(p[0] is v for p, (v, _) in zip(pairs, e.args)):
        return e
    return sympy.Piecewise(*pairs, evaluate=False)


def _fill_terms(run: _Run, e, v):
    """The sum ``e`` with its terms with the pole in ``v`` filled in together (whose sum
    may have a limit though each alone does not), or by groups of the inputs they hold
    (:func:`_by_inputs`); the other terms visited. None where neither fills them."""
    with_pole = [t for t in e.args if _has_pole(t, v)]
    rest = [t for t in e.args if not _has_pole(t, v)]
    part = sympy.Add(*with_pole)
    guarded = _fill(run, part, v) if len(with_pole) > 1 or rest else None
    if guarded is None and len(with_pole) > 1:
        guarded = _by_inputs(run, with_pole, v)
    if guarded is not None:
        return sympy.Add(guarded, *(_visit(run, t) for t in rest))
    return None


def _fill_factors(run: _Run, e, v):
    """The product ``e`` with its pole in ``v`` filled in together with the factors that
    vanish at 0 (``sin(x)/x`` in ``exp(x) * sin(x)/x``); the other factors visited. None
    where there are no others, or no fill."""
    poles = [f for f in e.args if _has_pole(f, v)]
    zeros = [f for f in e.args if not _has_pole(f, v) and _vanishes(f, v)]
    others = [f for f in e.args if f not in poles and f not in zeros]
    if others and poles:
        guarded = _fill(run, sympy.Mul(*poles, *zeros), v)
        if guarded is not None:
            # the others as one product: sin(y)/y is filled in too
            return sympy.Mul(guarded, _visit(run, sympy.Mul(*others)))
    return None


def _fill(run: _Run, part, v):
    """``part`` with its removable singularity at v = 0 filled in: its Taylor polynomial
    on the interval of :func:`taylor_plan`, else its limit at v = 0 alone; None where it
    has no finite limit, no polynomial, or (a sum) no plan."""
    if isinstance(part, sympy.Function) or part.has(mul_no_nan):
        # its arguments are visited, a pole inside is filled there (a Taylor polynomial
        # of mul_no_nan(a, g) would drop its 0 where g is 0; SymPy's series of such sums
        # in a third-order VJP took minutes)
        return None
    cancelled = _cancelled_rational(part, v)
    if cancelled is not None:
        return cancelled
    limit = limit_at_zero(part, v)
    if limit is None:
        return None
    polynomial = taylor_polynomial(part, v, run.degree)
    if polynomial is None:
        return None
    # a polynomial that is 0 has no relative accuracy where the part is not: a flat
    # part (2*exp(-1/x**2)/x**3, exp(-1/x**2)'s slope, was 0 for |x| < 0.2 in float32
    # where it is 3.5e-9 at 0.2) or one of higher order than the degree; only v = 0
    # is filled, the formula is used elsewhere
    plan = None if polynomial == 0 else taylor_plan(part, v, run.degree, run.dtype,
                                                    polynomial)
    if plan is None and isinstance(part, sympy.Mul):
        grouped = _pole_times_sum(run, part, v)
        if grouped is not None:
            return grouped
    if plan is None and isinstance(part, sympy.Add):
        return None  # each term on its own, with its own scale (_visit)
    run.used.add("removable_singularity")
    if plan is None:  # no interval fits every value of the other inputs: fill v = 0
        return _fill_point(run, part, v, limit)
    return _polynomial_near_zero(part, v, plan)


def _cancelled_rational(part, v):
    """``part`` with its common factors cancelled where it is a ratio of polynomials in
    ``v`` whose pole at ``v = 0`` cancels (``-2*x/(y**3*(x**2/y**2 + 1)**2)`` from
    atan(x/y)'s derivatives is ``-2*x*y/(x**2 + y**2)**2``): the same value, finite at 0,
    with no Taylor polynomial (SymPy's series took 30 s on that one). None where it is not
    rational in ``v`` (a Guard's condition inside, from a derived order: asinh(x/s)'s
    second derivative), too large, or its pole stays."""
    if sympy.count_ops(part) > LIMIT_MAX_OPS or part.atoms(Relational, BooleanFunction) \
            or not part.is_rational_function(v):
        return None
    try:
        cancelled = sympy.cancel(part)
    except SYMPY_CANNOT:
        return None
    _, denominator = sympy.fraction(cancelled)
    if sympy.expand(denominator.subs(v, 0)) == 0:
        return None  # (x**4 at y = 0 is 0 only where x is too: a pole at the origin)
    return cancelled


def _pole_times_sum(run: _Run, part, v):
    """A pole times a sum, (1/x) * (exp(y)*cos(x*exp(y)) - ... + cos(x)): the sum's terms
    multiplied out, by the inputs they hold (:func:`_by_inputs`); else None."""
    sums = [f for f in part.args if isinstance(f, sympy.Add)]
    if len(sums) == 1:
        rest = [f for f in part.args if f is not sums[0]]
        return _by_inputs(run, [sympy.Mul(t, *rest) for t in sums[0].args], v)
    return None


def _fill_point(run: _Run, part, v, limit):
    """``part`` with only ``v = 0`` filled in, by its limit; the formula, evaluated at the
    unit interval's ``h0`` where ``v`` is 0, everywhere else."""
    h0 = sympy.Float(f"{unit_interval(part, v, run.degree, run.dtype):.2g}")
    nonzero = sympy.Ne(v, 0)
    formula = part.xreplace({v: Guard(v, nonzero, h0)})
    return sympy.Piecewise((formula, nonzero), (limit, True), evaluate=False)


def _by_inputs(run: _Run, terms, v):
    """The terms with the pole as groups by the other inputs they hold, each group filled
    in on its own (with its own scale), where the whole has no plan: sin(x)/x +
    sin(x*exp(y))/x's derivative, whose terms alone have no finite limit but whose terms
    in y, and those without, do. A group with no finite limit (z/x in sin(x*y)/x + z/x)
    keeps its terms, each visited alone, and the others are still filled: at z = 0 the
    gradient in x is then the filled group's, not its cancellation (it was 0 at
    x = 1e-9, exact -9e-9). None where there are not two groups or none fills."""
    groups: dict = {}
    for t in terms:
        groups.setdefault(frozenset(t.free_symbols - {v}), []).append(t)
    if len(groups) < 2:
        return None
    filled = [(_fill(run, sympy.Add(*group), v), group) for group in groups.values()]
    if all(f is None for f, _ in filled):
        return None
    return sympy.Add(*(f if f is not None else sympy.Add(*(_visit(run, t) for t in group))
                       for f, group in filled))


def _polynomial_near_zero(part, v, plan):
    """``part`` as its Taylor polynomial where ``|v * w| <= h`` (``plan``, from
    :func:`taylor_plan`), else as written."""
    h, w, polynomial = plan
    outside = sympy.Abs(v * w) > h
    # the formula, where the polynomial is used, at v = h / max(|w|, 1): not 0 (its
    # pole), and where |w| > 1 on the interval's edge (expm1(x*y)/x at x = 0.14 and
    # y = 1000 overflowed in the branch not taken: NaN second derivatives)
    safe = h / sympy.Max(sympy.Abs(w), 1)
    formula = part.xreplace({v: Guard(v, outside, safe)})
    return sympy.Piecewise((formula, outside), (polynomial, True), evaluate=False)
