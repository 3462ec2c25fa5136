"""Branch guards, the "double where": each Piecewise branch evaluated at safe inputs
where it is not selected.

Receives: a real elementwise SymPy expression ready to print, its kinks already
Piecewise (:mod:`.kinks`); forward and backward expressions alike, so first- and
second-order gradients stay finite. Returns (:func:`guard_branches`): the expression
with each branch's inputs replaced, where the branch is not selected, by a safe value
inside its condition (``x > 0`` -> ``where(x > 0, x, 1)``), and the names of the guards
used (``double_where``). ``tf.where`` evaluates both branches, and a NaN or inf in the
branch that is not selected poisons the gradient (its cotangent is 0, and 0 * inf =
NaN); guarded, both branches, and their derivatives, are finite wherever the selected
one is. Where a one-sided bound's branch and its derivative are finite at the bound,
the bound is the safe value, a clamp (``x <= 0`` -> ``minimum(x, 0)``, see
:func:`clamp_of`, which the printer reads).
"""

from __future__ import annotations

import sympy

from ...functions import Guard
from ...functions.declarations import of_class
from .conditions import bound_of, relations_of
from .walk import as_polynomial, bottom_up, standard


def _safe_values(cond, branch=sympy.S.Zero) -> dict:
    """{u: a value of u that satisfies ``cond`` (away from its boundary)} at which
    ``branch`` is not known to be infinite or NaN (``log(x) / (x - 1)`` under ``x > 0``:
    2, not 1)."""
    relations = relations_of(cond)
    if not relations:
        return {}
    bounds: dict = {}
    for rel in relations:
        b = bound_of(rel)
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
    relations = relations_of(cond)
    if not relations or len(relations) != 1:
        return None
    bound = bound_of(relations[0])
    if bound is None or bound[0] != u or bound[2] != safe:
        return None
    kind = {"upper": "minimum", "lower": "maximum"}.get(bound[1])
    return None if kind is None else (kind, u, safe)


def _finite_at(expr, u, c) -> bool:
    """False when ``expr`` at ``u = c`` is infinite or NaN (0/0 is NaN; SymPy leaves NaN's
    finiteness unknown); True when finite or unknown (other symbols remain). gradgen's
    functions are read as their meaning (``xlogy(a, x)`` as ``a*log(x)``: infinite at
    x = 0 for a != 0, as its derivatives in ``a`` are, though ``xlogy(0, 0)`` is 0)."""
    at = standard(expr).subs(u, c)
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


def _bounded_in(value, u) -> bool:
    """True where ``value`` is built from numbers, sums, products, positive powers,
    ``cosh(a)**-n`` and functions declared bounded over the reals (tanh, sigmoid, erf:
    :class:`gradgen.functions.Function`'s ``bound``), each of an argument linear in
    ``u``: then it and its derivatives in ``u`` are finite for every real ``u``, and its
    branch needs no safe input (sech_squared's ``(1 - t)*(1 + t)`` and
    ``cosh(u)**-2``)."""
    if value.is_number:
        return True
    if isinstance(value, (sympy.Add, sympy.Mul)):
        return all(_bounded_in(a, u) for a in value.args)
    if isinstance(value, sympy.Pow) and value.exp.is_Integer:
        if value.exp > 0:
            return _bounded_in(value.base, u)
        return isinstance(value.base, sympy.cosh) and _linear_in(value.base.args[0], u)
    declared = of_class(type(value))
    return (declared is not None and declared.bound is not None and len(value.args) == 1
            and _linear_in(value.args[0], u))


def _linear_in(a, u) -> bool:
    poly = as_polynomial(a, u)
    return poly is not None and poly.degree() <= 1 and all(
        c.is_number for c in poly.all_coeffs())


def guard_branches(expr) -> tuple[sympy.Basic, tuple[str, ...]]:
    """Evaluate each Piecewise branch at safe inputs where it is not selected."""
    used = set()

    def fix(e):
        if not isinstance(e, sympy.Piecewise):
            return None
        pairs = list(e.args)
        new_pairs, earlier, effectives = [], [], []
        changed, bounded = False, True
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
            bounded = bounded and all(_bounded_in(value, u) for u in mapping)
            if mapping:
                value = value.xreplace(mapping)
                changed = True
            new_pairs.append((value, cond))
        if not changed:
            return None
        alone = _clamped_branch_alone(new_pairs, effectives)
        if alone is not None:
            used.add("double_where")
            return alone
        if bounded:  # every guarded branch is finite everywhere: no safe input needed
            return None
        used.add("double_where")
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
