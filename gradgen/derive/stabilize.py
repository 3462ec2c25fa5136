"""Stable rewrites and guards, as the derivation applies them (the rules themselves are
:mod:`gradgen.stability`'s).

* :func:`rewritten`: a forward expression in stable forms (``log(1 + exp(u))`` is
  ``softplus(u)``), before it is differentiated, so that its derivative is stable too;
* :func:`simplify_partial`: a partial derivative in stable forms, the simpler of two
  equal candidates;
* :func:`finalize`: the printable form of a forward value or partial: kinks as
  Piecewise, guards where the formula is 0/0, inf * 0 or outside its domain, and
  cheaper forms whose extra error is bounded in the op's dtype.

Each receives SymPy expressions and returns SymPy expressions of the same value,
recording the rules used in the :class:`~gradgen.derive.context.Derivation`.
"""

from __future__ import annotations

import sympy
from sympy import S

from .. import stability as stable
from ..stability import guards
from ..stability.cheaper import absorbed_complements
from .context import Derivation


def rewritten(d: Derivation, expr):
    """``expr`` (a parsed forward expression) with node symbols renamed to their
    locals, in stable forms."""
    return d.applied(stable.rewrite(expr.xreplace(d.rename), d.rules))


def factored(expr):
    """``factor_terms(expr)`` (common factors pulled out of sums) where that is Horner's
    rule (:func:`_horner`) and costs at most one operation more than ``expr`` as SymPy
    counts them (it counts a quotient where the sum had a power); else ``expr``.

    A common factor taken out is applied once, to the sum, after the scale that
    multiplies the sum: ``4*eps*(s**2 - s)`` is ``4*eps*s*(s - 1)``, which the CSE computes
    as ``eps * s`` first, so that neither ``s**2`` (inf where ``s`` > 1.8e19 in float32)
    nor ``eps * s`` of the written form's order overflows where the value is finite; its
    derivative ``24*eps*s*(1 - 2*s)/r`` keeps ``eps * s`` too (Lennard-Jones' gradient
    at r = sigma = eps = 1.2e-38 is -24, where ``12*(sigma/r)**12/r`` as differentiated
    overflows)."""
    if expr.is_Atom:
        return expr
    pulled = sympy.factor_terms(expr)
    if not _horner(pulled):
        return expr
    return pulled if sympy.count_ops(pulled) <= sympy.count_ops(expr) + 1 else expr


def _horner(pulled) -> bool:
    """Whether each sum that ``factor_terms`` left in the product ``pulled`` holds, in
    every term but numbers, a base of the factors pulled out of it (``s*(s - 1)`` from
    ``s**2 - s``: Horner's rule, whose sum overflows only where the powers it came from
    do). Not ``a*(b + c)`` from ``a*b + a*c``: ``b + c`` overflows at b = c = 3e38
    where ``a*b + a*c`` is 6e8 (a = 1e-30)."""
    if not isinstance(pulled, sympy.Mul):
        return False
    sums = [f for f in pulled.args if isinstance(f, sympy.Add)]
    outside = {f.as_base_exp()[0] for f in pulled.args if not isinstance(f, sympy.Add)}
    bases = set().union(*(b.free_symbols for b in outside if not b.is_number))
    return bool(sums) and all(
        t.is_number or t.free_symbols & bases for s in sums for t in s.args)


def simplify_partial(
    expr: sympy.Basic, rules: tuple[stable.Rule, ...] = stable.RULES
) -> tuple[sympy.Basic, tuple[str, ...]]:
    """A simpler equal form of ``expr``, after stable rewrites.

    SymPy's ``simplify`` is not used: its run time is unbounded (minutes on a ten-term
    partial) and it tends to combine terms over a common denominator, which is slower
    and less stable to evaluate. Instead the candidates are the expression as
    differentiated (SymPy already cancels and collects while building it) and
    ``factor_terms`` of it (common factors pulled out), and the one with the fewest
    operations wins; a tie goes to the factored form where it is Horner's rule
    (:func:`_horner`), else to the form as differentiated, then to SymPy's canonical sort
    key, so the choice is deterministic.

    Returns:
        The chosen expression and the names of the stable rules it used.
    """
    expr, used = stable.rewrite(expr, rules)
    if expr.is_Atom:
        return expr, used
    pulled, also = stable.rewrite(sympy.factor_terms(expr), rules)
    # ties go to the factored form where it is Horner's rule (its common factor is
    # applied once, after the sum; not a*(b + c), whose sum may overflow)
    horner = _horner(pulled)
    expr = min(pulled, expr, key=lambda c: (sympy.count_ops(c), (c is pulled) != horner,
                                            sympy.default_sort_key(c)))
    if expr is pulled:
        used = tuple(sorted(set(used) | set(also)))
    expr = guards.bottom_up(expr, _root_quotients)
    return guards.bottom_up(expr, _cancelled_powers), used


def _root_quotients(e):
    """``sqrt(a*b) * a**-1 * b**-1`` as ``(a*b)**(-1/2)``: SymPy distributes a power -1
    over a product but not a square root, so the derivative of ``sqrt((1 - x)*(1 + x))``
    is ``-x * sqrt((1 - x)*(1 + x)) / ((1 - x)*(1 + x))``, 0/0 at x = +-1, where the
    singular factor ``s**(-1/2)`` is the one whose limit (+-inf) ``singular_limits``
    fills. Equal wherever ``a*b > 0``. None where no square root's factors all divide."""
    if not isinstance(e, sympy.Mul):
        return None
    for root in e.args:
        if not (isinstance(root, sympy.Pow) and root.exp == S.Half
                and isinstance(root.base, sympy.Mul)):
            continue
        parts = sympy.Mul.make_args(root.base)
        inverses = [sympy.Pow(p, -1) for p in parts]
        if all(i in e.args for i in inverses):
            rest = [a for a in e.args if a is not root and a not in inverses]
            return sympy.Mul(*rest) / sympy.sqrt(root.base)
    return None


def _cancelled_powers(e):
    """``(a + f*b) * f**-n`` as ``a*f**-n + b*f**(1 - n)``: the quotient rule's form
    (``(2/sqrt(pi) - erfcx(u)*u) / erfcx(u)**2``, log_erfc's second derivative) is inf * 0
    = NaN where ``f`` overflows (erfcx(-1e4)) or 0 * inf where it underflows, though
    each term is finite. None where no term of a sum holds ``f``."""
    if not isinstance(e, sympy.Mul):
        return None
    for p in e.args:
        if not (isinstance(p, sympy.Pow) and p.exp.is_Integer and p.exp < 0
                and not p.base.is_number):
            continue
        for s in e.args:
            if isinstance(s, sympy.Add) and any(p.base in sympy.Mul.make_args(t)
                                                for t in s.args):
                rest = [a for a in e.args if a is not p and a is not s]
                return sympy.Mul(*rest, sympy.Add(*(t * p for t in s.args)))
    return None


def finalize(d: Derivation, expr, partial: bool = False):
    """The printable form of a forward value or partial: kinks as Piecewise, guards
    where the formula is 0/0, inf * 0 or outside its domain, and cheaper forms whose
    extra error is bounded in the op's dtype (real ops; complex ones are returned as
    they are). A ``partial`` first gets the zero subgradients of its kinks. Where
    ``d`` is not ``guarded`` (the VJP op the next order derives), the guards that order
    a product's factors (``log_product``, ``vanishing_product``, ``split_gaussian``,
    ``zero_factor``) are left out: the next order orders its own products."""
    if d.program.is_complex:
        return expr
    dtype = d.program.dtype
    if partial:
        expr = d.applied(guards.zero_subgradients(expr))
    else:
        expr = factored(expr)
    expr = d.applied(guards.removable_singularities(expr, dtype))
    expr = d.applied(guards.split_exponentials(expr, dtype))
    expr = d.applied(guards.norm_logs(expr, dtype))
    expr = d.applied(guards.guard_branches(guards.kinks_to_piecewise(expr)))
    if d.guarded:  # (the orderings of products; derived orders multiply more factors)
        if d.program.level > 1:
            expr = d.applied(guards.log_products(expr))
        expr = d.applied(guards.vanishing_products(expr, dtype))
    inputs = {v.symbol for v in d.program.inputs}
    if d.guarded:
        expr = d.applied(guards.split_gaussians(expr))
    expr = d.applied(guards.split_differences(expr, inputs))
    expr = d.applied(guards.norm_quotients(expr, dtype))
    expr = d.applied(guards.paired_quotients(expr))
    expr = d.applied(guards.power_quotients(expr))
    if d.guarded:
        upstreams = {v.symbol for v in d.program.inputs if v.upstream}
        expr = d.applied(guards.zero_factors(expr, inputs, upstreams))
    expr = d.applied(absorbed_complements(expr, dtype))
    return d.applied(guards.exponent_logs(expr))
