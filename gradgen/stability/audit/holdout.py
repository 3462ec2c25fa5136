"""Held-out points: a branched op checked against the form it replaces.

Regime inference (:mod:`gradgen.stability.regimes`) chooses its intervals from the
audit's sample, so a regime can fit those points and lose elsewhere: ``p*x**p/x`` is
more accurate than ``xdivy(p, x**(1 - p))`` at every sampled x > 0 of one op's sample,
but 0 at x = 1e-30, p = 1.5 in float32, where ``x**p`` underflows and the exact value
is 1.5e-15. Herbie measures its result on points it did not train on; so does
:func:`no_worse`, on points of its own: a new random sample, and a grid of ordinary and
extreme magnitudes in every combination (:data:`GRID`), where such bands lie.

Consumes: the op as derived before and after (IR and printed views; the same forward as
written). Guarantees: :func:`no_worse` returns None where, at every held-out point, each
output and gradient of the new op is within :data:`~gradgen.stability.regimes.TIE_BITS`
of the old one's accuracy, and NaN only where the old one is (inside the domain); else
an example point where it is not (``input`` None for an output's value).
Deterministic (seeded from the op).
"""

from __future__ import annotations

import itertools

import numpy as np

from ... import ir
from .. import formats
from ..formats import Format
from ..regimes import TIE_BITS
from .measure import compare
from .mirror import MirrorError, Program
from .reference import Reference
from .sample import rng_for, sample

HOLDOUT_POINTS = 512
# Magnitudes combined across the inputs: where one input's power underflows at an
# ordinary value of another.
GRID = (0.0, 1e-30, 1e-10, 1e-3, 0.3, 1.0, 1.5, 3.0, 10.0, 1e3, 1e10, 1e30)
MAX_GRID_POINTS = 1500
# One input: every eighth of a binade from 2**-40 to 2**40 (a rewrite's error and the
# form as written's vary within a binade: log-cosh as written is 33 ulps off at
# x = -0.054 in float32, its stable form 1).
DENSE_GRID = (0.0,) + tuple(2.0 ** (j / 8) for j in range(-320, 321))


def no_worse(before: tuple, after: tuple, seed_text: str) -> dict | None:
    """None where the op ``after`` (``(op IR, views)``) is nowhere less accurate than
    ``before`` at the held-out points (see the module docstring); else
    ``{"input", "point", "before", "after", "exact"}`` of the first point where it is.
    """
    op, views = after
    fmt = formats.get(op.dtype)
    points = _points(op, fmt, seed_text)
    try:
        old = Program(before[1]).run(fmt, points)
        new = Program(views).run(fmt, points)
    except MirrorError:  # pragma: no cover - both ran at the audit's points
        return {"input": None, "point": None, "before": None, "after": None, "exact": None}
    reference = Reference(op)
    exact = reference.evaluate(fmt, points)
    for t, (k, name, _) in enumerate(reference.targets):
        values, kinds = exact[t]
        was, now = ((old[0][k], new[0][k]) if name is None
                    else (old[1][k][name], new[1][k][name]))
        lost = compare(fmt, now, values, kinds).bits > compare(fmt, was, values, kinds).bits \
            + TIE_BITS
        lost |= reference.defined(exact, k) & np.isnan(_full(now, values)) & ~np.isnan(_full(was, values))
        if lost.any():
            j = int(np.flatnonzero(lost)[0])
            return {"input": name, "point": {n: float(v[j]) for n, v in points.items()},
                    "before": float(_full(was, values)[j]),
                    "after": float(_full(now, values)[j]), "exact": float(values[j])}
    return None


def _full(values, like) -> np.ndarray:
    return np.broadcast_to(np.asarray(values, dtype=np.float64), np.shape(like))


def _points(op: ir.OpIR, fmt: Format, seed_text: str) -> dict:
    """A fresh random sample (:func:`.sample.sample`, another seed) and the grid."""
    points = sample(op, fmt, seed_text + "|held out", HOLDOUT_POINTS)
    names = [i.name for i in op.inputs if not i.upstream]
    grid = GRID if len(names) > 1 else DENSE_GRID
    magnitudes = sorted({float(v) for m in grid for v in fmt.round([m, -m])
                         if np.isfinite(v) and (v == 0 or abs(v) >= fmt.tiny)})
    rows = list(itertools.product(magnitudes, repeat=len(names)))
    if len(rows) > MAX_GRID_POINTS:
        rng = rng_for(seed_text + "|grid")
        rows = [rows[j] for j in sorted(rng.choice(len(rows), MAX_GRID_POINTS, replace=False))]
    integer = {i.name for i in op.inputs if i.is_integer}
    for i, name in enumerate(names):
        column = np.array([row[i] for row in rows], dtype=np.float64)
        if name in integer:
            column = np.round(column).clip(-2048, 2048)
        points[name] = np.concatenate([points[name], column])
    for i in op.inputs:  # the grid at upstream 1 (sample.upstream_values)
        if i.upstream:
            points[i.name] = np.concatenate([points[i.name], np.ones(len(rows))])
    return points
