"""Guards for points where a formula is 0/0, inf * 0 or outside its domain.

Consumes: real elementwise SymPy expressions that are ready to print (a forward value
or a partial derivative after :mod:`gradgen.stability`). Guarantees, for each function:

* :func:`zero_subgradients` (partials only): a factor ``s**(-1/2)`` (from the
  derivative of ``sqrt(s)``), and a factor ``s**(-n)`` where ``s >= 0`` is a compound
  expression that can be 0 (a squared norm, e.g. in the derivatives of ``sqrt(x**2 +
  y**2)`` and ``atan2(y, x)``), is replaced by 0 where ``s = 0``: the subgradient 0 of
  norms at the origin. Elsewhere the value is unchanged.
* :func:`removable_singularities`: where a value has a pole factor ``v**(-n)`` in a real
  input ``v`` but a finite limit as ``v -> 0`` (``sin(x)/x``, ``expm1(x)/x`` and their
  derivatives), its Taylor polynomial is used near ``v = 0``, on an interval scaled to
  the formula (``sin(100*x)/x``, ``sin(x*y)/x``: :func:`taylor_plan`); where no interval
  fits every value of the other inputs, the limit (computed by SymPy) at ``v = 0``.
* :func:`kinks_to_piecewise`: ``Heaviside`` becomes a Piecewise (printable).
* :func:`guard_branches`: the "double where". ``tf.where`` evaluates both branches,
  and a NaN or inf in the branch that is not selected poisons the gradient (its
  cotangent is 0, and 0 * inf = NaN). Each Piecewise branch is evaluated at inputs
  replaced, where the branch is not selected, by a safe value inside its condition
  (``x > 0`` -> ``where(x > 0, x, 1)``), so both branches, and their derivatives, are
  finite wherever the selected one is. Where a one-sided bound's branch and its
  derivative are finite at the bound, the bound is the safe value, a clamp
  (``x <= 0`` -> ``minimum(x, 0)``, see :func:`clamp_of`). This is applied to forward
  and backward expressions, so first- and second-order gradients stay finite.
* :func:`vanishing_products`: in one input, a product of factors that decay
  exponentially and underflow to exactly 0 (``exp(u)``, ``sigmoid(u)``, ``1 ± tanh(u)``,
  ``cosh(u)**-n`` of a polynomial ``u``) and a rest that grows like a polynomial that
  overflows for large inputs (``x**3 * exp(-x**2)``; tanh-GELU's derivative) is
  ``mul_no_nan(rest, decaying)``: 0 where the decaying factor is 0, where the product
  as written is 0 * inf = NaN and its exact value is 0.

Every transformation returns an expression equal to its input wherever the input is
finite, plus the names of what it did (for the op's docstring).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import mpmath
import sympy
from sympy import S

from ..functions import (
    Guard,
    Heaviside,
    expm1,
    log1p,
    logsumexp,
    mul_no_nan,
    sigmoid,
    softplus,
    squarings,
    xdivy,
    xlog1py,
    xlogy,
)
from .audit import formats

LIMIT_MAX_OPS = 30
_RELATIONS = (
    sympy.StrictGreaterThan,
    sympy.GreaterThan,
    sympy.StrictLessThan,
    sympy.LessThan,
    sympy.Eq,
    sympy.Ne,
)


def bottom_up(expr, fn):
    """``expr`` rebuilt from its leaves up: each node with its arguments rebuilt, then
    ``fn`` of it (None keeps the node). A repeated subexpression is rebuilt once."""
    memo: dict = {}

    def walk(e):
        if e in memo:
            return memo[e]
        out = e
        if e.args:  # (atoms have none)
            args = tuple(walk(a) for a in e.args)
            if args != e.args:
                out = e.func(*args)
        new = fn(out)
        memo[e] = out if new is None else new
        return memo[e]

    return walk(expr)


# ------------------------------------------------------------------ subgradient 0


def _nonzero_under(cond) -> set:
    """Expressions that ``cond`` proves nonzero (``u > 0``, ``u < -1``, ``u != 0``...)."""
    out = set()
    for rel in _relations(cond) or []:
        b = _bound(rel)
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


def zero_subgradients(expr) -> tuple[sympy.Basic, tuple[str, ...]]:
    """Use 0 where a partial has a ``sqrt``-type or squared-norm singular factor at 0.

    A factor inside a Piecewise branch whose condition already excludes 0 (``x > 0``)
    is left alone.
    """
    used = set()

    def fix(e, known):
        if isinstance(e, sympy.Piecewise):
            pairs = [(fix(v, known | _nonzero_under(c)), c) for v, c in e.args]
            return sympy.Piecewise(*pairs)
        if e.args:  # (atoms have none)
            args = tuple(fix(a, known) for a in e.args)
            if args != e.args:
                e = e.func(*args)
        if not isinstance(e, sympy.Pow) or not (
            e.exp.is_Rational and e.exp.is_negative
        ):
            return e
        s = e.base
        if s.is_positive or s.is_number or s in known:
            return e
        if e.exp == -S.Half:
            used.add("sqrt_zero")
        elif s.is_nonnegative and not s.is_Atom:
            used.add("norm_zero")
        else:
            return e
        return sympy.Piecewise((e, sympy.Ne(s, 0)), (0, True))

    out = fix(expr, frozenset())
    return out, tuple(sorted(used))


# ------------------------------------------------------- removable singularities


def _standard(expr):
    """``expr`` with gradgen's functions written in SymPy's (for ``limit``)."""
    mapping = {}
    for f in expr.atoms(sigmoid, softplus, logsumexp, expm1, log1p):
        mapping[f] = (
            f.rewrite(sympy.exp)
            if not isinstance(f, log1p)
            else sympy.log(1 + f.args[0])
        )
    for f in expr.atoms(xlogy):
        mapping[f] = f.args[0] * sympy.log(f.args[1])
    for f in expr.atoms(xdivy):
        mapping[f] = f.args[0] / f.args[1]
    for f in expr.atoms(xlog1py):
        mapping[f] = f.args[0] * sympy.log(1 + f.args[1])
    return expr.xreplace(mapping)


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


def _poles(expr) -> list[sympy.Symbol]:
    """Real symbols v with a factor v**(-n) somewhere in ``expr`` (outside Piecewise)."""
    found = {
        p.base
        for p in _open_powers(expr)
        if p.base.is_Symbol and p.base.is_real and p.exp.is_negative
    }
    return sorted(found, key=sympy.default_sort_key)


def limit_at_zero(expr, v):
    """The limit of ``expr`` as ``v -> 0`` (from both sides) where SymPy finds it real and
    finite; else None, also where ``expr`` has more than :data:`LIMIT_MAX_OPS`
    operations."""
    if sympy.count_ops(expr) > LIMIT_MAX_OPS:
        return None
    try:
        value = sympy.limit(_standard(expr), v, 0, "+-")
    except (ValueError, NotImplementedError, TypeError, ZeroDivisionError, RecursionError):
        # SymPy cannot find it (hypot(0, x) / x recurses in limit): no fill, not a crash
        return None
    # not finite and real: zoo, +-oo and complex values are not real; +-oo*sign(y) are
    # of unknown reality (so they are looked for); an unevaluated Limit still holds v
    if value.is_real is False or value.has(v, sympy.oo, -sympy.oo, sympy.nan,
                                           sympy.AccumBounds):
        return None
    return value


# Unit roundoff of each dtype, for the threshold of the Taylor branch.
EPSILON = {
    "float16": 2.0**-10,
    "bfloat16": 2.0**-7,
    "float32": 2.0**-23,
    "float64": 2.0**-52,
}
# Degree of the Taylor polynomial per dtype: enough that the balanced error (below) is
# under the stability suite's tolerance (float32: eps**(7/9) = 4e-6 for a pole of order 2).
TAYLOR_DEGREE = {"float16": 6, "bfloat16": 6, "float32": 6, "float64": 10}


def _pole_order(expr, v) -> int:
    orders = [
        -p.exp for p in expr.atoms(sympy.Pow) if p.base == v and p.exp.is_negative
    ]
    return int(sympy.ceiling(max(orders))) if orders else 0


def _series(expr, v, order: int):
    """``expr``'s Taylor coefficients at v = 0 up to ``v**(order - 1)`` as {power: c}
    (powers with c = 0 left out), or None where SymPy cannot expand it."""
    try:
        series = sympy.series(_standard(expr), v, 0, order).removeO()
        return {m[0]: c for m, c in sympy.Poly(series, v).terms()}
    except (ValueError, NotImplementedError, TypeError, sympy.PolynomialError,
            RecursionError):
        return None


# Terms of the series past the polynomial's degree that bound its truncation error.
TAIL_TERMS = 6


def _scale_variable(ratios: dict, r: int):
    """``w`` (an expression in the other inputs, or 1) with every ratio ``rho_j`` a
    number times ``w**(j - r)``, and those numbers; or None.

    ``sin(x*y)/x`` = ``y (1 - (x y)**2/6 + ...)``: the ratios ``-y**2/6, y**4/120, ...``
    are numbers times powers of ``w = y``, so the function is ``y`` times a function of
    ``u = x*y``, whose series has number coefficients."""
    nonzero = sorted(j for j, rho in ratios.items() if rho != 0)
    if not nonzero:
        return S.One, {}
    j1 = nonzero[0]
    _, rest = sympy.factor(ratios[j1]).as_coeff_Mul()
    if rest == 1:
        w = S.One
    else:
        # a candidate (the sign of a root is free: the check below decides); it must
        # be real for every real value of the inputs (sqrt(y) is not: ratios -y/6,
        # y**2/120 would make the polynomial NaN for y < 0)
        w = sympy.powdenest(rest ** sympy.Rational(1, j1 - r), force=True)
        if not w.free_symbols or w.is_real is not True:
            return None
    numbers = {}
    for j, rho in ratios.items():
        q = sympy.simplify(rho / w ** (j - r))
        if not q.is_number or q.is_real is not True:
            return None
        numbers[j] = q
    return w, numbers


def _horner_in(coefficients: dict, u):
    """``1 + sum_i c_i u**i`` (i >= 1, numbers c_i) in Horner form in ``u``, its powers
    as squarings (:func:`gradgen.functions.squarings`: a power of the product ``u =
    x*y`` would be distributed into ``x**n * y**n``, which overflows where ``u`` is small
    and ``y`` large)."""
    powers = sorted((i for i, c in coefficients.items() if c != 0), reverse=True)
    if not powers:
        return S.One
    result = coefficients[powers[0]]
    for high, low in zip(powers, powers[1:]):
        result = result * squarings(u, high - low) + coefficients[low]
    return 1 + result * squarings(u, powers[-1])


def _function_of_product(expr, v, w, r: int, leading) -> bool:
    """Whether ``expr`` is exactly ``leading * v**r * F(v * w)`` (``w`` 1: always): the
    series' first terms can fit that form while the formula does not
    (``sin(x*y + x**21)/x``: its polynomial in ``x*y`` was used at x = 1 when y = 0,
    0 for 0.84). Substituting ``v = u / w`` must leave a function of ``u`` alone."""
    if w == 1:
        return True
    u = sympy.Dummy("u", real=True)
    try:
        rest = sympy.simplify(_standard(expr).xreplace({v: u / w}) * (w / u) ** r / leading)
    except (ValueError, TypeError, NotImplementedError, RecursionError):
        return False
    return not (rest.free_symbols - {u})


def _grown_plan(expr, v, degree: int, dtype: str, coefficients: dict, r: int, polynomial):
    """The plan (see :func:`taylor_plan`) of a series with no one scale
    (``sin(x)/x + y*(1 - cos(x))/x**2``, ``sin(x*y)*cos(x)/x``'s derivative): the
    polynomial in v (coefficients in the other inputs) on ``|v| * w <= h0``, ``w`` the
    product of ``(1 + |g|)**a`` over the other inputs ``g`` whose degree in the
    coefficients grows by ``a`` per power of v (1 for ``sin(x*y)``; none for a bounded
    scale, where the interval is ``h0`` itself). None where a coefficient is not a
    polynomial in the other inputs."""
    growth = []
    for g in sorted(expr.free_symbols - {v}, key=sympy.default_sort_key):
        try:
            first = sympy.degree(coefficients[r], g)
            rate = max([S.Zero] + [sympy.Rational(sympy.degree(c, g) - first, j - r)
                                   for j, c in coefficients.items() if j > r])
        except (sympy.PolynomialError, ValueError, TypeError):
            return None
        if rate > 0:
            growth.append((1 + sympy.Abs(g)) ** rate)
    h = sympy.Float(f"{_unit_interval(expr, v, degree, dtype):.2g}")
    return h, sympy.Mul(*growth), polynomial


def _unit_interval(expr, v, degree: int, dtype: str) -> float:
    """``h0 = eps**(1/(m + 1 + k))``: the half-width of the polynomial's interval for a
    function of unit scale in v, where truncation and cancellation balance (``m`` the
    degree, ``k`` the pole's order, ``eps`` the dtype's unit roundoff)."""
    return EPSILON[dtype] ** (1.0 / (degree + 1 + _pole_order(expr, v)))


def taylor_plan(expr, v, degree: int, dtype: str, polynomial):
    """How :func:`removable_singularities` fills in ``expr``'s removable singularity at
    v = 0: ``(h, w, polynomial)``, the Taylor polynomial of ``degree`` used where
    ``|v * w| <= h`` (``w`` 1, or an expression in the other inputs), with ``h`` a
    2-digit SymPy Float; or None where no such interval is right.

    ``h0 = eps**(1/(m + 1 + k))`` (``m`` the degree, ``k`` the pole's order, ``eps`` the
    dtype's unit roundoff) balances truncation against the formula's cancellation for a
    function of unit scale in v (``sin(x)/x``). Write the series as
    ``c_r v**r (1 + sum_j q_j (v w)**(j - r))`` (``c_r v**r`` its first term, ``q_j``
    numbers; :func:`_scale_variable`): a function of ``s * v * w`` has both errors of the
    unit-scale function at ``s * v * w``, so the interval is ``|v w| <= h0 / s``, ``s``
    the largest ``|q_j|**(1/(j - r))``, at least 1 (never wider than ``h0``).
    ``sin(100*x)/x`` has s = 100/sqrt(6), so h = 0.0034 in float32 (h0 = 0.14 gave -13075
    for -5.44 at x = 0.1); ``sin(x*y)/x`` is used where ``|x y| <= 0.14`` (a fixed
    interval in x gave -2.45e11 for 18.6 at x = 0.04, y = 1000 in float64). Then ``h``
    is halved until the tail ``sum_j |q_j| h**(j - r)`` over the next
    :data:`TAIL_TERMS` terms, the relative truncation error, is at most
    ``eps**((m + 1)/(m + 1 + k))``. Where ``w`` is not 1 the polynomial is
    ``c_r v**r Q(v w)``, ``Q`` in Horner form with number coefficients (its
    coefficients in ``y``, ``y**7/5040``, would overflow for large ``y``).

    Where the ratios are not numbers times powers of one expression, or the formula is
    not a function of ``v w`` beyond the terms checked (:func:`_function_of_product`),
    :func:`_grown_plan`. None where neither fits, or a coefficient ``q_j`` of the
    polynomial is above the square root of the dtype's largest number (it would
    overflow).
    ``polynomial``: ``expr``'s Taylor polynomial in v (:func:`_taylor`), Horner form.
    """
    coefficients = _series(expr, v, degree + 1 + TAIL_TERMS)
    if not coefficients:
        return None
    r = min(coefficients)
    ratios = {j: sympy.simplify(c / coefficients[r])
              for j, c in coefficients.items() if j > r}
    found = _scale_variable(ratios, r)
    if found is not None and not _function_of_product(expr, v, found[0], r,
                                                      coefficients[r]):
        found = None  # the first terms fit c_r v**r Q(v w), but not the whole formula
    if found is None:
        return _grown_plan(expr, v, degree, dtype, coefficients, r, polynomial)
    w, numbers = found
    magnitude = {j: abs(float(q)) for j, q in numbers.items()}
    if any(q > formats.get(dtype).largest ** 0.5 for j, q in magnitude.items() if j <= degree):
        return None
    eps = EPSILON[dtype]
    k = _pole_order(expr, v)
    scale = max([1.0] + [q ** (1.0 / (j - r)) for j, q in magnitude.items()
                         if j <= degree + 1 and q > 0])
    target = eps ** ((degree + 1.0) / (degree + 1 + k))
    h = sympy.Float(f"{_unit_interval(expr, v, degree, dtype) / scale:.2g}")
    for _ in range(60):
        tail = sum(q * float(h) ** (j - r) for j, q in magnitude.items() if j > degree)
        if tail <= target:
            break
        h = sympy.Float(f"{float(h) / 2:.2g}")
    else:
        return None
    if w != 1:
        q_of_u = {j - r: q for j, q in numbers.items() if j <= degree}
        polynomial = coefficients[r] * v**r * _horner_in(q_of_u, v * w)
    return h, w, polynomial


def _taylor(expr, v, degree: int):
    """Taylor polynomial of ``degree`` at v = 0 in Horner form, or None."""
    try:
        series = sympy.series(_standard(expr), v, 0, degree + 1).removeO()
        poly = sympy.Poly(series, v)
        # (zoo and nan make Poly or the checks below fail; removeO took the Order)
        if any(c.has(sympy.oo) for c in poly.coeffs()):
            return None
        # a function real only on one side of 0 (acos(-1 - 2/x)'s derivative, real for
        # x <= -1) has imaginary coefficients: no polynomial (it printed 1j into float
        # code, a TypeError when the gradient ran)
        if any(c.has(sympy.I) for c in poly.coeffs()):
            return None
        # coefficients must be finite for every value of the other inputs: the series
        # of d**2*(sqrt(1 + r**2/d**2) - 1) in d has 1/|r| and 1/r**2 in its
        # coefficients, so its polynomial would be inf/NaN at r = 0 (where the formula
        # itself is fine)
        if any(_singular_in_others(c) for c in poly.coeffs()):
            return None
        # coefficients in other inputs may hold 1/Abs(r)... that Horner's own Poly
        # refuses as generators (pseudo-Huber d**2*(sqrt(1 + (r/d)**2) - 1))
        return sympy.horner(poly.as_expr(), wrt=v)
    except (ValueError, NotImplementedError, TypeError, sympy.PolynomialError, RecursionError):
        return None


def _singular_in_others(coefficient) -> bool:
    """Whether a Taylor coefficient divides by (or takes a negative power of) something
    that depends on another input."""
    return any(
        p.exp.is_negative and p.base.free_symbols for p in coefficient.atoms(sympy.Pow)
    ) or coefficient.has(sympy.Abs)  # (an Abs left by SymPy holds a symbol: |r|)


def _has_pole(expr, v) -> bool:
    return any(p.base == v and p.exp.is_negative for p in _open_powers(expr))


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
    limit = limit_at_zero(part, v)
    if limit is None:
        return None
    polynomial = _taylor(part, v, run.degree)
    if polynomial is None:
        return None
    plan = taylor_plan(part, v, run.degree, run.dtype, polynomial)
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
    h0 = sympy.Float(f"{_unit_interval(part, v, run.degree, run.dtype):.2g}")
    nonzero = sympy.Ne(v, 0)
    formula = part.xreplace({v: Guard(v, nonzero, h0)})
    return sympy.Piecewise((formula, nonzero), (limit, True), evaluate=False)


def _by_inputs(run: _Run, terms, v):
    """The terms with the pole as groups by the other inputs they hold, each group filled
    in on its own (with its own scale), where the whole has no plan: sin(x)/x +
    sin(x*exp(y))/x's derivative, whose terms alone have no finite limit but whose terms
    in y, and those without, do; else None."""
    groups: dict = {}
    for t in terms:
        groups.setdefault(frozenset(t.free_symbols - {v}), []).append(t)
    if len(groups) < 2:
        return None
    filled = [_fill(run, sympy.Add(*group), v) for group in groups.values()]
    return None if any(f is None for f in filled) else sympy.Add(*filled)


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


# ------------------------------------------------------- logarithms in exponents


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


# ------------------------------------------------------------------ kinks


def kinks_to_piecewise(expr):
    """``Heaviside(u)`` -> ``Piecewise((1, u > 0), (0, u < 0), (1/2, True))``."""
    return expr.xreplace({h: h.as_piecewise() for h in expr.atoms(Heaviside)})


# ------------------------------------------------------------- vanishing products


def _decay_argument(f):
    """``u`` when ``f`` tends to 0 exponentially fast in ``u`` and so underflows to
    exactly 0 in floating point: ``exp(u)`` and ``sigmoid(u)`` as ``u -> -inf``,
    ``±1 ± tanh(u)`` and ``±(1 - tanh(u)**2)`` as ``|u| -> inf`` in one direction or
    both, ``cosh(u)**-n``, and positive integer powers of these; else None."""
    if isinstance(f, sympy.Pow) and f.exp.is_Integer:
        if f.exp > 0:
            return _decay_argument(f.base)
        return f.base.args[0] if isinstance(f.base, sympy.cosh) else None
    if isinstance(f, (sympy.exp, sigmoid)):
        return f.args[0]
    if isinstance(f, sympy.Add) and len(f.args) == 2:
        one = next((a for a in f.args if a in (S.One, S.NegativeOne)), None)
        if one is None:
            return None
        other = f - one
        if isinstance(other, sympy.tanh) or isinstance(-other, sympy.tanh):
            return (other if isinstance(other, sympy.tanh) else -other).args[0]
        square = -other / one  # tanh(u)**2 in 1 - tanh(u)**2 and in -1 + tanh(u)**2
        if isinstance(square, sympy.Pow) and square.exp == 2 and isinstance(
            square.base, sympy.tanh
        ):
            return square.base.args[0]
    return None


# Functions bounded for real arguments, with a bound of their magnitude: a factor of
# the "polynomial" side of a product that cannot make it grow.
_BOUNDED = {sigmoid: 1, sympy.tanh: 1, sympy.sin: 1, sympy.cos: 1, sympy.erf: 1,
            sympy.atan: 2}


def _polynomial_bound(e, v):
    """A polynomial in ``t = |v|`` with coefficients of at least 1 that bounds ``|e|``
    and every value computed on the way to it (for ``t >= 1``), for ``e`` built from
    numbers, ``v``, ``+``, ``*``, positive integer powers, bounded functions
    (:data:`_BOUNDED`, ``cosh(u)**-n``) and ``mul_no_nan`` of such; else None. Terms
    never cancel (``x**2 * (1 - sin(x))`` is bounded by ``2 t**2``), and a coefficient
    below 1 counts as 1: ``x**4 / 1000`` is computed as ``x*x*x*x / 1000``, which
    overflows where ``x**4`` does. A Mul's numeric factors count as the one coefficient
    the printer writes (``sqrt(2) * x / sqrt(pi)`` is bounded by ``t``, not
    ``sqrt(2) * t``)."""
    if e.is_number:
        return sympy.Max(abs(e), 1) if e.is_real else None
    if e == v:
        return v
    if type(e) in _BOUNDED:
        return sympy.Integer(_BOUNDED[type(e)])
    if isinstance(e, sympy.Pow) and e.exp.is_Integer:
        if e.exp < 0:
            return S.One if isinstance(e.base, sympy.cosh) else None
        base = _polynomial_bound(e.base, v)
        return None if base is None else base**e.exp
    if isinstance(e, sympy.Mul) and any(a.is_number for a in e.args):
        # the printer writes a Mul's numeric factors as one coefficient, a Python float
        # (``(0.5 * math.sqrt(2) / math.sqrt(math.pi)) * x``), except that a rational
        # p/q multiplies by p first and divides by q last (``3.0 * x * x / 1000``)
        coeff = sympy.Mul(*[a for a in e.args if a.is_number])
        rest = _polynomial_bound(sympy.Mul(*[a for a in e.args if not a.is_number]), v)
        if rest is None or not coeff.is_real:
            return None
        scale = abs(coeff.p) if coeff.is_Rational else abs(coeff)
        return sympy.Max(scale, 1) * rest
    if isinstance(e, (sympy.Add, sympy.Mul, mul_no_nan)):
        parts = [_polynomial_bound(a, v) for a in e.args]
        if any(p is None for p in parts):
            return None
        return sympy.Add(*parts) if isinstance(e, sympy.Add) else sympy.Mul(*parts)
    return None


def as_polynomial(e, v):
    """``e`` as a polynomial in ``v`` (a :class:`sympy.Poly`, whose coefficients may
    hold other symbols but not ``v``), or None where it is not one (``sin(v) * v``)."""
    try:
        return sympy.Poly(e, v)
    except (sympy.PolynomialError, sympy.GeneratorsNeeded):
        return None


def _overflows(bound, v) -> bool:
    """Whether the polynomial ``bound`` in ``v`` alone can overflow where ``v`` is
    finite: of degree 2 or more, or with a coefficient larger than 1 in magnitude
    (``x**3``, ``2*x``; not ``x`` or ``-x/2``)."""
    poly = as_polynomial(bound, v)
    if poly is None or poly.free_symbols != {v}:
        return False
    return poly.degree() > 1 or any(abs(c) > 1 for c in poly.coeffs())


def _polynomial_in(u, v) -> bool:
    """Whether ``u`` is a nonconstant polynomial in ``v`` alone."""
    poly = as_polynomial(u, v)
    return poly is not None and poly.free_symbols == {v} and poly.degree() > 0


def _without_cancellation(e):
    """``e`` with ``±1 ± tanh(u)`` and ``±(1 - tanh(u)**2)`` written as ratios of
    exponentials (1 - tanh(u) = 2 / (1 + exp(2u)), 1 - tanh(u)**2 = cosh(u)**-2) and
    ``mul_no_nan`` as a product, so that 50 digits evaluate them where they are far
    below 1e-50."""

    def stable(f):
        u = _decay_argument(f)
        one = next(a for a in f.args if a in (S.One, S.NegativeOne))
        other = f - one
        if other == sympy.tanh(u) or other == -sympy.tanh(u):
            sign = 1 if other == sympy.tanh(u) else -1  # f = one + sign * tanh(u)
            return one * 2 / (1 + sympy.exp(-2 * u * sign * one))
        return one * sympy.cosh(u) ** -2  # one - one * tanh(u)**2

    e = e.replace(mul_no_nan, lambda a, b: a * b)
    return e.replace(
        lambda f: isinstance(f, sympy.Add) and len(f.args) == 2
        and _decay_argument(f) is not None,
        stable,
    )


# Points checked between where the rest's bound first overflows and the dtype's largest
# number, in each direction (geometrically spaced).
SOUNDNESS_POINTS = 40


def _zero_is_right(rest, decaying, bound, v, dtype: str) -> bool:
    """Whether, in ``dtype``, wherever the rest's bound ``bound(|v|)`` reaches the
    largest finite number (the rest may be inf there, or NaN: inf - inf), the exact
    ``|rest * decaying|`` is below the smallest normal number (so the 0 that mul_no_nan
    gives where ``decaying`` rounds to 0 is right, and ``rest`` is finite wherever
    ``decaying`` is not 0) or above the largest (the product overflows however it is
    computed). Checked at 50 digits at the first overflow and :data:`SOUNDNESS_POINTS`
    points beyond it on both sides of 0.

    ``x**30 * exp(-x)`` fails in float32 (``x**30`` overflows at x = 19.4, where the
    product is 1e30), ``x**5 / cosh(x)`` in float16 (x = 9.2, product 13); tanh-GELU's
    derivative holds in every dtype (its rest overflows where ``|u|`` is 1e38 in
    float32).
    """
    fmt = formats.get(dtype)
    if fmt is None:
        return False
    top, tiny = mpmath.mpf(fmt.largest), mpmath.mpf(fmt.tiny)
    # at least the largest finite number once rounded: the bound's coefficients are the
    # printed floats, so at its first overflow the exact product can be a hair below
    # (10**30 * x against 1e30 * x), and there it rounds to the largest or to inf anyway
    edge = top * (1 - mpmath.mpf(2) ** -fmt.precision)
    coeffs = [abs(mpmath.mpf(float(c))) for c in sympy.Poly(bound, v).all_coeffs()]
    size = lambda t: mpmath.polyval(coeffs, t)  # noqa: E731 - increasing in t >= 0
    with mpmath.workdps(50):
        if size(top) < top:
            return False
        lo, hi = mpmath.mpf(0), mpmath.log(top)  # bisect log(t)
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if size(mpmath.exp(mid)) >= top else (mid, hi)
        first = mpmath.exp(hi)
        product = sympy.lambdify(
            v, _standard(_without_cancellation(rest * decaying)), "mpmath")
        for k in range(SOUNDNESS_POINTS + 1):
            t = first * (top / first) ** (mpmath.mpf(k) / SOUNDNESS_POINTS)
            for x in (t, -t):
                try:
                    value = abs(product(x))
                except (OverflowError, ZeroDivisionError, ValueError, TypeError):
                    return False
                if not (value < tiny or value >= edge):
                    return False
    return True


def vanishing_products(expr, dtype: str = "float32") -> tuple[sympy.Basic, tuple[str, ...]]:
    """``D * R`` -> ``mul_no_nan(R, D)`` in one input ``v``, where ``D`` (the factors
    that decay exponentially in a polynomial ``u(v)``: exp(u), sigmoid(u), 1 ± tanh(u),
    sech(u)**n) underflows to 0 and ``R`` (the others) grows like a polynomial in ``v``
    that can overflow, and :func:`_zero_is_right` in ``dtype``.

    The value is unchanged wherever ``R`` is finite. Where ``D`` is 0, the product as
    written is 0 where ``R`` is finite and NaN where it overflowed; the check makes sure
    ``R`` overflows only where the exact product is below the dtype's smallest normal
    number (0 is right) or above its largest. One input only: with two
    (``exp(-(x - y)) * x**2``), ``u`` can be moderate where ``R`` overflows (x = y =
    1e30). A NaN input makes ``D`` NaN, so NaN still propagates. Source: TensorFlow's
    ``tf.math.multiply_no_nan`` (``MulNoNan``), made for such 0 * inf products.
    """
    used = set()

    def fix(e):
        if not isinstance(e, sympy.Mul) or len(e.free_symbols) != 1:
            return None
        (v,) = e.free_symbols
        decaying = [f for f in e.args if _decay_argument(f) is not None]
        rest = [f for f in e.args if _decay_argument(f) is None]
        if not decaying or not rest:
            return None
        if not all(_polynomial_in(_decay_argument(f), v) for f in decaying):
            return None
        d, r = sympy.Mul(*decaying), sympy.Mul(*rest)
        bound = _polynomial_bound(r, v)
        if bound is None or not _overflows(bound, v):
            return None
        if not _zero_is_right(r, d, bound, v, dtype):
            return None
        used.add("vanishing_product")
        return mul_no_nan(r, d)

    out = bottom_up(expr, fix)
    return out, tuple(sorted(used))


# ------------------------------------------------------------------ double where


def _bound(rel):
    """(u, kind, value): ``u > value`` is ("lower", value), ``u == value`` ("point"...)."""
    lhs, rhs = rel.lhs, rel.rhs
    if lhs.is_number and not rhs.is_number:
        rel = rel.reversed
        lhs, rhs = rel.lhs, rel.rhs
    if lhs.is_number:
        return None
    if not rhs.is_number and not lhs.is_Symbol:
        if rhs.is_Symbol:
            rel = rel.reversed
            lhs, rhs = rel.lhs, rel.rhs
        else:
            return None
    if isinstance(rel, (sympy.StrictGreaterThan, sympy.GreaterThan)):
        return lhs, "lower", rhs
    if isinstance(rel, (sympy.StrictLessThan, sympy.LessThan)):
        return lhs, "upper", rhs
    if isinstance(rel, sympy.Eq):
        return lhs, "point", rhs
    if isinstance(rel, sympy.Ne):
        return lhs, "not", rhs
    return None


def _relations(cond) -> list | None:
    if isinstance(cond, _RELATIONS):
        return [cond]
    if isinstance(cond, sympy.And):
        out = []
        for arg in cond.args:
            sub = _relations(arg)
            if sub is None:
                return None
            out += sub
        return out
    return None


def _safe_values(cond, branch=sympy.S.Zero) -> dict:
    """{u: a value of u that satisfies ``cond`` (away from its boundary)} at which
    ``branch`` is not known to be infinite or NaN (``log(x) / (x - 1)`` under ``x > 0``:
    2, not 1)."""
    relations = _relations(cond)
    if not relations:
        return {}
    bounds: dict = {}
    for rel in relations:
        b = _bound(rel)
        if b is None:
            return {}
        u, kind, value = b
        bounds.setdefault(u, []).append((kind, value))
    out = {}
    for u, items in bounds.items():
        lows = [v for k, v in items if k == "lower"]
        highs = [v for k, v in items if k == "upper"]
        points = [v for k, v in items if k == "point"]
        nots = [v for k, v in items if k == "not"]
        # candidates in order of preference; the first that no != bound excludes and
        # that keeps the branch finite wins (x > 0 and x != 1: 2, not 1)
        if points:
            candidates = points[:1]
        elif lows and highs:
            if len(lows) > 1 or len(highs) > 1:
                continue
            lo, hi = lows[0], highs[0]
            candidates = [lo + (hi - lo) * k / 8 for k in (4, 3, 5, 2, 6, 1, 7)]
        elif lows:
            candidates = _one_sided(branch, u, lows, 1)
        elif highs:
            candidates = _one_sided(branch, u, highs, -1)
        else:  # only != bounds
            candidates = [nots[0] + 1] if len(nots) == 1 else []
        safe = next((c for c in candidates if c not in nots and _finite_at(branch, u, c)),
                    None)
        if safe is not None:
            out[u] = safe
    return out


def _one_sided(branch, u, bounds, inward) -> list:
    """Candidates for one bound ``c`` (``inward``: +1 for a lower bound, -1 for an
    upper): ``c`` itself when the branch's derivative in ``u`` is finite there (the
    guarded partial's own derivative, for second order; the caller checks the value),
    so the guard is a clamp, ``minimum(u, c)`` for ``u <= c`` (one kernel, not a
    comparison and a select; NaN stays NaN), equal to ``where(u <= c, u, c)``; then
    ``c + 1, c + 2, c + 3`` inward. [] for two or more bounds of one kind."""
    if len(bounds) != 1:
        return []
    c = bounds[0]
    inside = [c + inward * k for k in (1, 2, 3)]
    if not c.is_real:
        return inside
    v = sympy.Dummy("v", real=True)  # u may be compound (|r| <= 1)
    try:
        slope = sympy.diff(branch.xreplace({u: v}), v)
    except (AttributeError, TypeError, ValueError):  # SymPy cannot differentiate
        return inside  # a relation or an opaque function in it: keep the where
    return ([c] if _finite_at(slope, v, c) else []) + inside


def clamp_of(guard) -> tuple[str, sympy.Basic, sympy.Basic] | None:
    """("minimum" | "maximum", u, c) when ``guard`` (a :class:`Guard`) is a clamp: its
    condition is one bound ``u <= c``, ``u < c`` (minimum) or ``u >= c``, ``u > c``
    (maximum) and its safe value is ``c``, so ``where(cond, u, c)`` equals the clamp
    wherever ``u`` is not NaN. Else None."""
    u, cond, safe = guard.args
    relations = _relations(cond)
    if not relations or len(relations) != 1:
        return None
    bound = _bound(relations[0])
    if bound is None or bound[0] != u or bound[2] != safe:
        return None
    kind = {"upper": "minimum", "lower": "maximum"}.get(bound[1])
    return None if kind is None else (kind, u, safe)


def _finite_at(expr, u, c) -> bool:
    """False when ``expr`` at ``u = c`` is infinite or NaN (0/0 is NaN; SymPy leaves NaN's
    finiteness unknown); True when finite or unknown (other symbols remain)."""
    at = expr.subs(u, c)
    return not at.has(sympy.nan, sympy.zoo, sympy.oo, -sympy.oo)


def _needs_guard(value, u) -> bool:
    """True unless ``value`` is at most linear in ``u`` (then it is finite with u). A
    ``u`` inside a :class:`Guard` counts: an inner where's guard keeps its own branch
    finite, not this one's."""
    value = value.xreplace({g: g.args[0] for g in value.atoms(Guard)})
    if not value.has(u):
        return False
    poly = as_polynomial(value, u)
    return poly is None or poly.degree() > 1


def guard_branches(expr) -> tuple[sympy.Basic, tuple[str, ...]]:
    """Evaluate each Piecewise branch at safe inputs where it is not selected."""
    used = set()

    def fix(e):
        if not isinstance(e, sympy.Piecewise):
            return None
        pairs = list(e.args)
        new_pairs, earlier, effectives = [], [], []
        changed = False
        for value, cond in pairs:
            effective = sympy.And(
                *([cond] if cond is not sympy.true else []),
                *(sympy.Not(c) for c in earlier),
            )
            earlier.append(cond)
            effectives.append(effective)
            safe = _safe_values(effective, value) if effective is not sympy.true else {}
            mapping = {
                u: Guard(u, effective, v)
                for u, v in safe.items()
                if _needs_guard(value, u)
            }
            if mapping:
                value = value.xreplace(mapping)
                changed = True
            new_pairs.append((value, cond))
        if not changed:
            return None
        used.add("double_where")
        alone = _clamped_branch_alone(new_pairs, effectives)
        if alone is not None:
            return alone
        return sympy.Piecewise(*new_pairs, evaluate=False)

    out = bottom_up(expr, fix)
    return out, tuple(sorted(used))


def _clamped_branch_alone(pairs, effectives):
    """The clamped branch of a two-branch Piecewise whose other branch is the constant
    that the clamped one takes where it is not selected, else None.

    A clamp is its bound wherever its condition fails, so there the clamped branch is
    its value at the bound: ``where(x > 0, 1, exp(minimum(x, 0)))`` is
    ``exp(minimum(x, 0))`` everywhere (exp(0) = 1), one select fewer, and the condition's
    mask need not be kept for the gradient (ELU's derivative). A NaN input gives NaN
    (``minimum`` propagates it), as the where form does when the clamped branch is the
    one a false condition selects (``where(NaN > 0, 1, ...)``); with the branches the
    other way round the where form gave the constant for NaN."""
    if len(pairs) != 2:
        return None
    for k in (0, 1):
        value, other = pairs[k][0], pairs[1 - k][0]
        guards = value.atoms(Guard)
        if not other.is_number or not guards:
            continue
        # at a bound of 0 the kernels are exact (exp(0) = 1, expm1(0) = sin(0) = 0);
        # at pi/2, cos(pi/2) is 0 but cos(fl(pi/2)) is -4.4e-8 in float32
        if any(clamp_of(g) is None or g.args[1] != effectives[k] or g.args[2] != 0
               for g in guards):
            continue
        if value.xreplace({g: g.args[2] for g in guards}) == other:
            return value
    return None


GUARDS = {
    "sqrt_zero": "d sqrt(s) = 0 where s = 0 (the subgradient 0; TF gives inf, or NaN)",
    "norm_zero": "1/s**n = 0 where a squared norm s is 0 (norm and atan2 at the origin)",
    "removable_singularity": "a Taylor polynomial near v = 0 where a formula has a "
    "removable 0/0 there",
    "exponent_logs": "k*log(x) in an exponent as multiply_no_nan(log(x), k): 0 where k = "
    "0, with an exact second derivative in k",
    "double_where": "where() branches evaluated at safe inputs where not selected",
    "vanishing_product": "mul_no_nan(R, D): 0 where a decaying factor D underflows to "
    "0 and the polynomial R overflows (0 * inf, exactly 0)",
}
