"""Common-subexpression elimination over the forward and backward passes together.

Receives the forward's and the gradient function's ``(local, value, comments)``
statements (before CSE) and the `where` intermediates. Returns the two statement lists
as :class:`gradgen.ir.Statement` s, with cheaper forms (:mod:`.forms`) and one SymPy
``cse`` (canonical order) over both: a subexpression both passes need is computed in
the forward function and reaches the gradient function through its closure, so the
backward pass reuses it instead of recomputing it; one that involves a cotangent, or
that only the backward pass needs, stays in the gradient function. Temporaries are
named after a `where` intermediate they equal, the statement they are all of, or what
they compute (``exp_x``, ``x_sq``, ``t``).
"""

from __future__ import annotations

import sympy

from .. import functions as fn
from .. import ir
from ..spec import HALF_DTYPES
from .context import Derivation
from .forms import cheap_forms


def share(d: Derivation, forward_values, backward_values, where_exprs):
    """``(forward statements, backward statements)`` after CSE (see the module
    docstring)."""
    # squaring chains round after every product (r**-12 loses ~3% in bfloat16)
    chains = d.program.dtype not in HALF_DTYPES

    inputs = frozenset(v.symbol for v in d.program.inputs if not v.upstream)

    def cheap(e):
        return cheap_forms(e, chains, inputs)

    forward_values = [(t, ir.map_value(v, cheap), c) for t, v, c in forward_values]
    backward_values = [(t, ir.map_value(v, cheap), c) for t, v, c in backward_values]
    fwd_exprs = [e for _, v, _ in forward_values for e in ir.value_exprs(v)]
    bwd_exprs = [e for _, v, _ in backward_values for e in ir.value_exprs(v)]
    # Temporaries that involve a cotangent can only be used by backward statements,
    # so the forward/backward split below keeps them in the gradient function.
    replacements, reduced = sympy.cse(
        fwd_exprs + bwd_exprs,
        symbols=sympy.numbered_symbols("_cse"),
        order="canonical",
    )
    replacements, reduced = _constants_last(replacements, reduced)
    reduced_iter = iter(reduced)

    def take(_):
        return next(reduced_iter)

    fwd_vals = [(t, ir.map_value(v, take), c) for t, v, c in forward_values]
    bwd_vals = [(t, ir.map_value(v, take), c) for t, v, c in backward_values]
    temps = dict(replacements)
    order = [s for s, _ in replacements]
    forward_temps = _forward_temps(temps, fwd_vals)
    where_names = _where_names(where_exprs, cheap, fwd_exprs + bwd_exprs)
    names, fwd_folded, bwd_folded = _names(d, temps, order, where_names, fwd_vals, bwd_vals,
                                           forward_temps)
    rename = {s: d.symbol(names[s]) for s in order}

    def fix(e):
        return e.xreplace(rename)

    temp_stmts = {rename[s]: ir.Statement(names[s], fix(temps[s])) for s in order}
    emitter = _Emitter(d, temp_stmts, fix)
    forward = emitter.emit(fwd_vals, {rename[s] for s in forward_temps}, fwd_folded)
    backward = emitter.emit(bwd_vals, {rename[s] for s in order if s not in forward_temps},
                            bwd_folded)
    return forward, backward


def _constants_last(replacements, reduced):
    """``(replacements, reduced)`` without temporaries of a number times the rest
    (``t = 4.0 * eps``): the temporary becomes the rest, where that is compound, and the
    number moves into each use, where the printer applies it last. As a temporary,
    ``4.0 * eps`` overflows (eps > 8.5e37 in float32) before a later factor that is 0 or
    small brings the product back into range: ``t * (a - b)`` is NaN where a = b."""
    sub: dict = {}
    kept = []
    for s, e in replacements:
        e = e.xreplace(sub)
        numbers = [f for f in e.args if f.is_number] if isinstance(e, sympy.Mul) else []
        coeff = sympy.Mul(*numbers)
        if not numbers or coeff in (1, -1):
            kept.append((s, e))
            continue
        rest = sympy.Mul(*(f for f in e.args if not f.is_number))
        if rest.is_Atom:
            sub[s] = e
        else:
            kept.append((s, rest))
            sub[s] = coeff * s
    return kept, [r.xreplace(sub) for r in reduced]


def _forward_temps(temps: dict, fwd_vals) -> set:
    """The temporaries the forward statements need, directly or through each other."""
    deps = {s: e.free_symbols & set(temps) for s, e in temps.items()}
    forward_temps: set = set()
    stack = [s for _, v, _ in fwd_vals for e in ir.value_exprs(v) for s in e.free_symbols
             if s in temps]
    while stack:
        s = stack.pop()
        if s not in forward_temps:
            forward_temps.add(s)
            stack.extend(deps[s])
    return forward_temps


def _where_names(where_exprs, cheap, exprs) -> dict:
    """expression -> the `where` intermediate it is (the first of equal ones)."""
    where_names = {cheap(e): n for n, e in reversed(where_exprs)}
    # inside a guarded branch a `where` value is computed from the guarded input
    # (r_safe for r): it keeps its name there too
    guarded = sorted({g for e in exprs for g in e.atoms(fn.Guard)
                      if g.args[0].is_Symbol}, key=sympy.default_sort_key)
    for n, e in where_exprs:
        for g in guarded:
            if g.args[0] in e.free_symbols:
                where_names.setdefault(cheap(e.xreplace({g.args[0]: g})), n)
    # a guarded `where` value (r2 made safe outside a range) is its name, safe
    for g in sorted({g for e in exprs for g in e.atoms(fn.Guard)}, key=sympy.default_sort_key):
        n = where_names.get(cheap(g.args[0]))
        if n is not None:
            where_names.setdefault(cheap(g), f"{n}_safe")
    return where_names


def _names(d: Derivation, temps, order, where_names, fwd_vals, bwd_vals, forward_temps):
    """Each temporary's local: a temp equal to a `where` intermediate takes its name; a
    statement ``target = <temporary>`` is folded, the temporary taking the target's name
    (e.g. an output, or a cotangent that CSE shared with another statement); other
    temps get short descriptive names.

    Returns:
        ``(names, folded forward statement indices, folded backward ones)``.
    """
    names: dict = {}
    expanded: dict = {}
    for s in order:
        expanded[s] = temps[s].xreplace(expanded)
    for s in order:
        name = where_names.get(expanded[s])
        if name is not None and name not in names.values():
            names[s] = name

    def fold(values, section):
        folded = set()
        for i, (t, v, c) in enumerate(values):
            if isinstance(v, sympy.Symbol) and v in temps and v not in names and (
                (v in forward_temps) == section
            ):
                names[v] = t
                folded.add(i)
        return folded

    fwd_folded, bwd_folded = fold(fwd_vals, True), fold(bwd_vals, False)
    for s in order:
        if s not in names:
            names[s] = d.scope.claim(temp_name(temps[s], names))
    return names, fwd_folded, bwd_folded


class _Emitter:
    """Statements in dependency order: each temporary right before its first use."""

    def __init__(self, d: Derivation, temp_stmts: dict, fix):
        self.d, self.temp_stmts, self.fix = d, temp_stmts, fix

    def emit(self, value_list, allowed, skip=()) -> tuple:
        out, done = [], set()

        def need(expr_list):
            for e in expr_list:
                for sym in sorted(e.free_symbols, key=str):
                    if sym in self.temp_stmts and sym in allowed and sym not in done:
                        done.add(sym)
                        need([self.temp_stmts[sym].value])
                        out.append(self.temp_stmts[sym])

        for i, (t, v, c) in enumerate(value_list):
            v = ir.map_value(v, self.fix)
            if i in skip:  # folded: emit the temporary here, with this comment
                target_sym = self.d.symbol(t)
                stmt = self.temp_stmts[target_sym]
                if target_sym in done:
                    index = out.index(stmt)
                    out[index] = ir.Statement(stmt.target, stmt.value, stmt.comments + c)
                    continue
                done.add(target_sym)
                need([stmt.value])
                out.append(ir.Statement(stmt.target, stmt.value, c))
                continue
            need(list(ir.value_exprs(v)))
            out.append(ir.Statement(t, v, c))
        return tuple(out)


def _bounds_a_magnitude(c) -> bool:
    """Whether ``c`` compares a value (``x``, ``|x|``, a temporary) with a number
    (``Abs(x) < 1e18``), or is an Or or And of such (a guard's switch between ranges)."""
    if isinstance(c, (sympy.And, sympy.Or)):
        return all(_bounds_a_magnitude(a) for a in c.args)
    return (isinstance(c, sympy.Rel) and isinstance(c.lhs, (sympy.Abs, sympy.Symbol))
            and c.rhs.is_number)


def temp_name(expr, names: dict) -> str:
    """A short descriptive name for a CSE temporary: ``exp_x``, ``x_sq``, ``t``."""
    def label(e):
        if e.is_Symbol:
            return names.get(e, e.name)
        return None

    if isinstance(expr, sympy.Pow) and label(expr.base):
        if expr.exp == 2:
            return f"{label(expr.base)}_sq"
        if expr.exp == sympy.Rational(1, 2):
            return f"sqrt_{label(expr.base)}"
        if expr.exp == -1:
            return f"inv_{label(expr.base)}"
    if isinstance(expr, fn.Square) and label(expr.args[0]):
        return f"{label(expr.args[0])}_sq"
    if isinstance(expr, fn.Recip) and label(expr.args[0]):
        return f"inv_{label(expr.args[0])}"
    if isinstance(expr, fn.Ratio) and label(expr.args[0]) and label(expr.args[1]):
        return f"{label(expr.args[0])}_over_{label(expr.args[1])}"
    if isinstance(expr, sympy.Function) and len(expr.args) == 1 and label(expr.args[0]):
        return f"{type(expr).__name__.lower()}_{label(expr.args[0])}"
    if isinstance(expr, fn.Guard) and label(expr.args[0]):
        return f"{label(expr.args[0])}_safe"
    if isinstance(expr, sympy.Rel) and label(expr.lhs) and expr.rhs == 0:
        word = {sympy.Ne: "nonzero", sympy.StrictGreaterThan: "positive",
                sympy.StrictLessThan: "negative"}.get(type(expr))
        if word:
            return f"{label(expr.lhs)}_{word}"
    if isinstance(expr, sympy.Or) and all(
            isinstance(a, sympy.Ne) and a.rhs == 0 and label(a.lhs) for a in expr.args):
        return "_or_".join(label(a.lhs) for a in expr.args) + "_nonzero"
    if isinstance(expr, sympy.And) and all(_bounds_a_magnitude(a) for a in expr.args):
        return "in_range"
    if isinstance(expr, (sympy.Rel, sympy.And, sympy.Or, sympy.Not)):
        return "mask"
    return "t"
