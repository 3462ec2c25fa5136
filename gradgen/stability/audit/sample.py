"""Sample points over a float format's whole range, as Herbie does, plus the edges.

Consumes: an op's IR (its inputs, and the thresholds in its conditions), a
:class:`~.formats.Format` and a seed. Guarantees: :func:`sample` returns, for each input,
a float64 vector of values that are exactly representable in the format (never
subnormal where the format flushes them), all vectors of one length:

* **edge points** first: 0, ±1, ±2, ±0.5, ± the smallest normal number, ± the largest
  finite number, and each threshold ``c`` that a condition of the forward as written or
  of the generated code compares an input (or ``|input|``) with, or where a function of
  the forward as written reaches a declared singular point or an end of its real domain
  (:mod:`gradgen.functions`: ``log1p(x)`` at -1, ``log(x - 2)`` at 2), together with its
  neighbours one ulp below and above (the guard's switch point ±1 ulp); with several
  inputs, each edge value is combined with the others' edge values along five shifted
  diagonals (so ``(0, 0)``, ``(0, 1)``, ``(1, 0)``... occur), at most
  :data:`MAX_EDGE_POINTS` rows;
* then **random points** drawn as uniform ordinals: a uniform integer among the bit
  patterns of the finite normal numbers of one sign, and a random sign, so every binade
  (every exponent) is equally likely (Herbie's ``random-generate``); zero and subnormals
  come only from the edges.

An upstream gradient of a derived order's VJP op is not drawn so: the op is linear in
it, and it takes magnitudes from 1 to 2 (:func:`upstream_values`).

Deterministic: the generator is seeded from a SHA-256 of the seed text, never from
Python's ``hash``; integer inputs are drawn from small integers.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import sympy

from ... import functions as fn
from ... import ir
from ...functions.declarations import of_class
from ..formats import Format

RANDOM_POINTS = 128
# float64's exponents reach ±1022: the exact values there need mpmath at 1000-2000 bits
# (exp(1e300)...), about 20 times the cost of a float32 point, so fewer are drawn.
RANDOM_POINTS_BY_DTYPE = {"float64": 32}
MAX_EDGE_POINTS = 80
BASE_EDGES = (0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5)
# Integer inputs take integers in [-INTEGER_RANGE, INTEGER_RANGE]: edges rounded (0
# beyond it) and uniform draws.
INTEGER_RANGE = 2048
# An upstream gradient's edge values (:func:`upstream_values`).
UPSTREAM_EDGES = (1.0, -1.0, 1.5, -2.0, 1.25)


def rng_for(seed_text: str) -> np.random.Generator:
    digest = hashlib.sha256(seed_text.encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:16], "little"))


def thresholds(op: ir.OpIR) -> list[float]:
    """Numbers an input (or its absolute value) is compared with in a condition of the
    forward as written or of the generated statements, and the input values where a
    function of the forward as written reaches a singular point or an end of its domain
    (:func:`declared_points`), sorted."""
    names = {i.name for i in op.inputs}
    found: set[float] = set()
    for stmt in op.reference + op.forward + op.recomputed + op.backward:
        for expr in ir.value_exprs(stmt.value):
            if not isinstance(expr, sympy.Basic):
                continue
            for rel in expr.atoms(sympy.core.relational.Relational):
                for side, other in ((rel.lhs, rel.rhs), (rel.rhs, rel.lhs)):
                    if isinstance(side, sympy.Abs):
                        side = side.args[0]
                    value = _number(other)
                    if isinstance(side, sympy.Symbol) and side.name in names and value is not None:
                        found.update((value, -value))
    for stmt in op.reference:  # the forward as written: the functions the user wrote
        for expr in ir.value_exprs(stmt.value):
            if isinstance(expr, sympy.Basic):
                found.update(declared_points(expr, names))
    return sorted(found)


def declared_points(expr, names) -> set[float]:
    """The values of an input where a function in ``expr`` reaches one of its declared
    singular points or a finite end of its declared real domain
    (:class:`gradgen.functions.Function`'s ``singular`` and ``domain``), for each
    argument that is ``a*v + b`` in one input ``v`` of ``names`` (numbers ``a != 0``,
    ``b``): ``(s - b) / a``. Where the function changes its nature, as Herbie samples
    where the exact value does."""
    found: set[float] = set()
    for f in expr.atoms(sympy.Function):
        declared = of_class(type(f))
        if declared is None or not f.args:
            continue
        ends = (declared.domain.inf, declared.domain.sup)
        points = [*declared.singular, *(e for e in ends if e.is_finite)]
        arg = f.args[0]
        (v, *others) = sorted(arg.free_symbols, key=sympy.default_sort_key) or [None]
        if not points or v is None or others or v.name not in names:
            continue
        a, b = arg.diff(v), arg.subs(v, 0)
        if a.is_number and b.is_number and a.is_real and a != 0 and b.is_real:
            found.update(float((s - b) / a) for s in points)
    return found


def _number(expr) -> float | None:
    """The value of a real number (a printed constant's too); an inf where it is past
    float64 (edge_values leaves out whatever is past the format); None otherwise."""
    if isinstance(expr, fn.Const):
        expr = expr.value
    if isinstance(expr, sympy.Expr) and expr.is_number and expr.is_real:
        return float(expr)
    return None


def edge_values(fmt: Format, cuts: list[float]) -> list[float]:
    """The edge values of one input, rounded to ``fmt``, finite, without duplicates (a
    threshold past the format's range, or the inf above its largest number, is left
    out)."""
    values = list(BASE_EDGES) + [fmt.tiny, -fmt.tiny, fmt.largest, -fmt.largest]
    for c in cuts:
        rounded = float(fmt.round([c])[0])
        values.append(rounded)
        values.extend(fmt.neighbours(rounded))
    out: list[float] = []
    for v in values:
        v = float(fmt.round([v])[0])
        if math.isfinite(v) and v not in out:
            out.append(v)
    return out


def random_values(fmt: Format, rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` values uniform over the ordinals of the normal finite numbers, random sign."""
    # float16 keeps its subnormals: start at the smallest one
    lo = int(fmt._magnitude_bits([fmt.tiny])[0]) if fmt.ftz else 1
    hi = int(fmt._magnitude_bits([fmt.largest])[0])
    bits = rng.integers(lo, hi, size=n, endpoint=True)
    values = fmt.from_magnitude_bits(bits).astype(np.float64)
    signs = rng.integers(0, 2, size=n)
    return np.where(signs == 1, -values, values)


def sample(op: ir.OpIR, fmt: Format, seed_text: str,
           random_points: int | None = None) -> dict[str, np.ndarray]:
    """{input name: float64 values}, edge points first, then random points (by default
    :data:`RANDOM_POINTS`, or the dtype's entry in :data:`RANDOM_POINTS_BY_DTYPE`).
    Upstream gradients of a derived order's VJP op take :func:`upstream_values`."""
    if random_points is None:
        random_points = RANDOM_POINTS_BY_DTYPE.get(fmt.name, RANDOM_POINTS)
    rng = rng_for(seed_text)
    edges = edge_values(fmt, thresholds(op))
    names = [i.name for i in op.inputs if not i.upstream]
    integer = {i.name for i in op.inputs if i.is_integer}
    k = len(names)
    rows: list[tuple] = []
    for shift in (0, 1, -1, 2, -2):  # one input: each shift gives the same rows
        for j in range(len(edges)):
            row = tuple(edges[(j + shift * i) % len(edges)] for i in range(k))
            if row not in rows:
                rows.append(row)
    rows = rows[:MAX_EDGE_POINTS]
    columns = {name: [row[i] for row in rows] for i, name in enumerate(names)}
    out = {}
    for name in names:
        if name in integer:
            edge = [float(round(v)) if abs(v) <= INTEGER_RANGE else 0.0
                    for v in columns[name]]
            drawn = rng.integers(-INTEGER_RANGE, INTEGER_RANGE, size=random_points,
                                 endpoint=True)
            out[name] = np.concatenate([edge, drawn.astype(np.float64)])
        else:
            out[name] = np.concatenate([columns[name], random_values(fmt, rng, random_points)])
    for i, u in enumerate(i for i in op.inputs if i.upstream):
        out[u.name] = upstream_values(fmt, rng, len(rows), random_points, shift=i)
    return {i.name: out[i.name] for i in op.inputs}


def upstream_values(fmt: Format, rng: np.random.Generator, edges: int, n: int,
                    shift: int = 0) -> np.ndarray:
    """An upstream gradient's values: :data:`UPSTREAM_EDGES` in turn (starting at
    ``shift``) beside the ``edges`` edge rows, then ``n`` values of random sign and
    magnitude uniform in [1, 2].

    A derived order's VJP op is linear in its upstream gradients (``upstream *
    d(out)/d(x)``), so their size only scales its partials: the audit of order 1
    measures the partials at upstream 1, and an order's audit likewise at magnitudes
    from 1 to 2, several upstreams at unequal values (where their terms could cancel).
    Below 1 (or at 0) the exact product is finite (or 0) where the partial alone
    overflows (0 * inf), and the product is the one every VJP forms, at order 1 too
    (TensorFlow's own): that is the upstream's size, not the op's error."""
    edge = [UPSTREAM_EDGES[(j + shift) % len(UPSTREAM_EDGES)] for j in range(edges)]
    magnitudes = rng.uniform(1.0, 2.0, size=n)
    signs = np.where(rng.integers(0, 2, size=n) == 1, -1.0, 1.0)
    return np.concatenate([edge, fmt.round(signs * magnitudes).astype(np.float64)])
