"""Expression helpers the guards share (:mod:`gradgen.derive` and
:mod:`gradgen.stability.cheaper` call the first two).

* :func:`bottom_up`: receives an expression and a function of one node; returns the
  expression rebuilt from its leaves up, each node replaced by the function's value
  (None keeps the node).
* :func:`each_product`: the same walk over products only, with the guard's name where
  it changed one.
* :func:`as_polynomial`: receives an expression and a symbol; returns the expression
  as a :class:`sympy.Poly` in that symbol, or None.
* :func:`standard`: receives an expression; returns it with gradgen's stable
  primitives written in SymPy's own functions (each one's declared meaning: ``log1p(x)``
  is ``log(1 + x)``), for SymPy's ``limit`` and ``series`` and for mpmath.
"""

from __future__ import annotations

import sympy

from ...functions.declarations import as_meaning


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


def each_node(expr, fix, name: str, kind=sympy.Basic) -> tuple[sympy.Basic, tuple[str, ...]]:
    """``expr`` with ``fix`` applied to each node of type ``kind``, innermost first
    (``fix`` gives the replacement, or None to keep it), and ``(name,)`` where it
    replaced one, else ``()``: the walk of the guards."""
    fired = []

    def on_node(e):
        out = fix(e) if isinstance(e, kind) else None
        if out is not None:
            fired.append(name)
        return out

    out = bottom_up(expr, on_node)
    return out, (name,) if fired else ()


def each_product(expr, fix, name: str) -> tuple[sympy.Basic, tuple[str, ...]]:
    """:func:`each_node` of the products: the walk of the guards of products and
    quotients."""
    return each_node(expr, fix, name, sympy.Mul)


def as_polynomial(e, v):
    """``e`` as a polynomial in ``v`` (a :class:`sympy.Poly`, whose coefficients may
    hold other symbols but not ``v``), or None where it is not one (``sin(v) * v``)."""
    try:
        return sympy.Poly(e, v)
    except (sympy.PolynomialError, sympy.GeneratorsNeeded):
        return None


# What SymPy's limit and series raise where they cannot take one (hypot(0, x)/x
# recurses in limit; a relation inside a guard of a second-order VJP has no leading
# term, no limit method): the guard that asked fills nothing, and the build goes on.
SYMPY_CANNOT = (ValueError, NotImplementedError, TypeError, AttributeError,
                ZeroDivisionError, sympy.PolynomialError, RecursionError)


def standard(expr):
    """``expr`` with gradgen's functions written in SymPy's (for ``limit``): each
    declared function's meaning (:func:`gradgen.functions.declarations.as_meaning`)."""
    return as_meaning(expr)
