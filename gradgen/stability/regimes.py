"""Regime inference: where the stable form and the form as written each win, branch.

Herbie's rule is that a rewrite or guard is kept only where it is at least as accurate
as the expression as written. Where the accuracy audit (:mod:`.audit`) finds sample
points at which the generated form of a partial derivative is less accurate than the
written one, and others at which it is more accurate (usually because the written one
is NaN or inf there), :func:`infer` splits the range of one input into at most
:data:`MAX_SEGMENTS` intervals and picks the more accurate form on each, as Herbie's
regime inference does (Panchekha et al., "Automatically Improving Accuracy for
Floating Point Expressions", PLDI 2015, §4.5: a dynamic program over the sample points
sorted by one variable, a penalty per split, the variable with the lowest total error).

Consumes: per sample point, the inputs' values and each form's error in bits
(:mod:`.audit.measure`). Guarantees: the returned :class:`Regime` never picks the
written form on an interval holding a sample point where it is more than
:data:`TIE_BITS` less accurate than the stable form, nor the stable form where it is
more than that less accurate than the written one, unless a split would cost more
(:data:`SPLIT_BITS`), nor the written form on an interval where it wins at fewer than
:data:`MIN_WINS` points; each boundary is a number of the op's format between the two
sample points around it, the simplest found (0, then one significant digit, then two). Pure: no
SymPy evaluation, no TensorFlow; :meth:`Regime.conditions` gives the SymPy conditions
the derivation branches on (:mod:`gradgen.derive.elementwise`).

Herbie refines each boundary by bisection between the two samples around it;
gradgen does not (a boundary anywhere between them classifies every sample the same),
so between two samples the switch may sit where neither form is best: the audit
afterwards measures the branched form on the same samples, and the build keeps it only
where it is never worse (:mod:`gradgen.emit`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import sympy

from .formats import Format

MAX_SEGMENTS = 3
# Each interval that takes the form as written holds at least this many sample points
# where it wins: a single point is the sample, not a regime (scale*(a + b) underflowing
# at one point of three inputs is no interval of a).
MIN_WINS = 3
# A split must save more than this many bits summed over the samples.
SPLIT_BITS = 2.0
# Errors this close count as a tie (the order of operations alone moves a result by an
# ulp or two; as the audit's WORSE_BITS): the same cost for both forms.
TIE_BITS = 1.6
STABLE, WRITTEN = "stable", "written"


@dataclass(frozen=True)
class Regime:
    """Which form of one partial derivative each interval of one input uses.

    Attributes:
        output, input: the partial d(output)/d(input) (names).
        variable: the input whose value selects the form.
        bounds: the upper end of each interval but the last, ascending:
            ``(value, inclusive)``; an interval is ``variable < value`` (``<=`` where
            inclusive) and above the one before.
        forms: per interval, :data:`STABLE` or :data:`WRITTEN`; neighbours differ.
        written: the partial as written (SymPy, in symbols named as the inputs).
        saved: how many bits the branch saves, summed over the samples.
    """

    output: str
    input: str
    variable: str
    bounds: tuple
    forms: tuple
    written: object
    saved: float

    def conditions(self, symbol) -> list:
        """The SymPy condition of each interval but the last, ``symbol`` standing for
        the variable (a Piecewise takes them in order)."""
        return [sympy.Le(symbol, _number(v)) if inclusive else sympy.Lt(symbol, _number(v))
                for v, inclusive in self.bounds]

    def describe(self) -> str:
        """``as written where x > 0, the stable form elsewhere``."""
        parts = []
        for k, form in enumerate(self.forms):
            if form != WRITTEN:
                continue
            lo = self.bounds[k - 1] if k else None
            hi = self.bounds[k] if k < len(self.bounds) else None
            parts.append(_interval(self.variable, lo, hi))
        return f"as written where {' or '.join(parts)}, the stable form elsewhere"


def _number(value: float):
    return sympy.Integer(int(value)) if float(value).is_integer() else sympy.Float(
        repr(float(value)), 17)


def _interval(name: str, lo, hi) -> str:
    def text(v):
        return f"{v:g}" if v == float(f"{v:g}") else repr(v)

    low = "" if lo is None else f"{name} {'>' if lo[1] else '>='} {text(lo[0])}"
    high = "" if hi is None else f"{name} {'<=' if hi[1] else '<'} {text(hi[0])}"
    if low and high:
        return f"{text(lo[0])} {'<' if lo[1] else '<='} {name} {'<=' if hi[1] else '<'} " \
               f"{text(hi[0])}"
    return low or high or "every input"


def infer(fmt: Format, points: dict, stable_bits, written_bits, key, written,
          measure=None) -> Regime | None:
    """The best :class:`Regime` for one partial, or None where the stable form
    everywhere is best (see the module docstring).

    Args:
        fmt: the op's format; boundaries are its numbers.
        points: input name -> its values at the sample points (float64 vectors).
        stable_bits, written_bits: each form's error in bits per point (NaN where the
            point does not count: the exact value undefined or out of range).
        key: ``(output, input)`` names of the partial.
        written: the partial as written (kept on the regime for the derivation).
        measure: ``points -> (stable_bits, written_bits)`` at other points; given, each
            boundary is refined between the two samples around it (:func:`_refined`).
    """
    costs = _costs(stable_bits, written_bits)
    everywhere_stable = float(costs[0].sum())
    wins = costs[1] < costs[0] - TIE_BITS
    best = None
    for name, values in points.items():
        values = np.asarray(values, dtype=np.float64)
        found = _segments(values, costs)
        if found is None or not _supported(values, wins, *found[1:]):
            continue
        total, cuts, forms = found
        if best is None or total < best[0]:
            best = (total, name, cuts, forms)
    if best is None or best[3] == (0,) or everywhere_stable - best[0] <= 0:
        return None
    total, name, cuts, forms = best
    if measure is not None:
        cuts = [_refined(fmt, points, name, cut, forms[k:k + 2], measure)
                for k, cut in enumerate(cuts)]
    bounds = tuple(_boundary(fmt, a, b) for a, b in cuts)
    return Regime(key[0], key[1], name, bounds, tuple(STABLE if f == 0 else WRITTEN
                                                       for f in forms), written,
                  round(everywhere_stable - total, 1))


def _costs(stable_bits, written_bits) -> np.ndarray:
    """``[stable, written]`` costs per point: the errors in bits, 0 where the point
    does not count, the stable form's for both where they tie (:data:`TIE_BITS`)."""
    stable = np.nan_to_num(np.asarray(stable_bits, dtype=np.float64), nan=0.0)
    other = np.nan_to_num(np.asarray(written_bits, dtype=np.float64), nan=0.0)
    return np.stack([stable, np.where(np.abs(other - stable) <= TIE_BITS, stable, other)])


# Values of the variable tried between the two samples around a boundary.
REFINE_STEPS = 24


def _refined(fmt: Format, points: dict, name: str, cut: tuple, forms: tuple,
             measure) -> tuple:
    """``cut`` (the two sample values of ``name`` around a boundary) narrowed to two
    neighbouring values of :data:`REFINE_STEPS` tried between them (evenly spaced in
    ordinals), the other inputs as at each of the two samples: the split of those
    points of least cost (Herbie refines by bisection; a scan does not assume one
    crossing). ``forms``: the forms below and above, 0 stable, 1 written."""
    a, b = cut
    lo, hi = (int(o) for o in fmt.ordinal([a, b]))
    if hi - lo < 2 or not (math.isfinite(a) and math.isfinite(b)):
        return cut
    steps = np.unique(np.linspace(lo, hi, REFINE_STEPS + 2).round().astype(np.int64))[1:-1]
    values = _from_ordinals(fmt, steps)
    column = np.asarray(points[name], dtype=np.float64)
    bases = [int(np.flatnonzero(column == a)[0]), int(np.flatnonzero(column == b)[0])]
    trial = {n: np.concatenate([np.full(len(values), float(np.asarray(v)[j]))
                                for j in bases]) for n, v in points.items()}
    trial[name] = np.concatenate([values] * len(bases))
    costs = _costs(*measure(trial))
    below, above = costs[forms[0]], costs[forms[1]]
    ladder = np.concatenate([[a], values, [b]])
    tried = trial[name]

    def cost(i):  # the boundary between ladder[i] and ladder[i + 1]
        under = tried < ladder[i + 1]
        return float(below[under].sum() + above[~under].sum()), i

    best = min(range(len(values) + 1), key=cost)
    return float(ladder[best]), float(ladder[best + 1])


def _from_ordinals(fmt: Format, ordinals: np.ndarray) -> np.ndarray:
    """The numbers of ``fmt`` with these ordinals (:meth:`Format.ordinal`'s inverse)."""
    magnitude = np.abs(ordinals)
    if fmt.ftz:
        tiny = int(fmt._magnitude_bits([fmt.tiny])[0])
        magnitude = np.where(magnitude > 0, magnitude - 1 + tiny, 0)
    values = fmt.from_magnitude_bits(magnitude).astype(np.float64)
    return np.where(ordinals < 0, -values, values)


def _supported(values: np.ndarray, wins: np.ndarray, cuts: list, forms: tuple) -> bool:
    """Whether each interval as written holds :data:`MIN_WINS` points where it wins."""
    edges = [-math.inf] + [b for _, b in cuts] + [math.inf]
    return all(
        np.count_nonzero(wins & (values >= lo) & (values < hi)) >= MIN_WINS
        for form, lo, hi in zip(forms, edges, edges[1:]) if form == 1
    )


def _segments(values: np.ndarray, costs: np.ndarray):
    """``(cost, [(a, b) per boundary], forms)`` of the cheapest split of the points
    sorted by ``values`` into at most :data:`MAX_SEGMENTS` runs (equal values in one
    run, NaN values, never sampled, left out), or None where ``values`` is constant."""
    keep = ~np.isnan(values)
    values, costs = values[keep], costs[:, keep]
    order = np.argsort(values, kind="stable")
    values, costs = values[order], costs[:, order]
    groups, starts = np.unique(values, return_index=True)
    if len(groups) < 2:
        return None
    per = np.add.reduceat(costs, starts, axis=1)  # (form, group)
    n = len(groups)
    # best[s][f][i]: groups 0..i in s + 1 runs, the last of form f; how it got there
    inf = math.inf
    best = np.full((MAX_SEGMENTS, 2, n), inf)
    back = np.zeros((MAX_SEGMENTS, 2, n), dtype=np.int64)  # start group of the last run
    prefix = np.concatenate([np.zeros((2, 1)), np.cumsum(per, axis=1)], axis=1)
    for f in (0, 1):
        best[0, f] = prefix[f, 1:]
    for s in range(1, MAX_SEGMENTS):
        for f in (0, 1):
            for i in range(1, n):
                # the last run is groups j..i of form f, after a run of the other form
                j = np.arange(1, i + 1)
                cand = best[s - 1, 1 - f, j - 1] + prefix[f, i + 1] - prefix[f, j] + SPLIT_BITS
                k = int(np.argmin(cand))
                best[s, f, i], back[s, f, i] = cand[k], j[k]
    s, f = np.unravel_index(np.argmin(best[:, :, n - 1]), best.shape[:2])
    total = float(best[s, f, n - 1])
    forms, cuts, i = [int(f)], [], n - 1
    while s > 0:
        j = int(back[s, f, i])
        cuts.append((float(groups[j - 1]), float(groups[j])))
        i, s, f = j - 1, s - 1, 1 - f
        forms.append(int(f))
    return total - SPLIT_BITS * len(cuts), cuts[::-1], tuple(forms[::-1])


def _boundary(fmt: Format, a: float, b: float) -> tuple[float, bool]:
    """``(value, inclusive)`` with ``a`` below it and ``b`` not (``x < value``, or
    ``x <= value`` where inclusive): 0 where it lies between; else ``a`` itself where it
    is 0 or ``b`` is infinite; else the decimal of one significant digit (else two) whose
    value in ``fmt`` is closest to the middle of ``a`` and ``b`` in ordinals; else that
    middle."""
    if a < 0 < b or a < 0 == b:
        return 0.0, False
    if a == 0 or math.isinf(b):
        return a, True
    if math.isinf(a):
        return b, False
    ordinals = fmt.ordinal([a, b])
    middle = (int(ordinals[0]) + int(ordinals[1])) // 2
    low, high = sorted((abs(a), abs(b)))
    sign = 1.0 if a > 0 else -1.0
    exponents = range(math.floor(math.log10(low)) - 2, math.ceil(math.log10(high)) + 2)
    for digits in (range(1, 10), range(10, 100)):  # one significant digit, then two
        candidates = []
        for exponent in exponents:
            for digit in digits:
                c = float(f"{sign * digit}e{exponent}")
                v = float(fmt.round([c])[0])
                if a < v <= b and abs(v) >= fmt.tiny:
                    candidates.append((abs(int(fmt.ordinal([v])[0]) - middle), c))
        if candidates:
            return min(candidates)[1], False
    middle = max(middle, int(ordinals[0]) + 1)  # (a and b one ordinal apart: b itself)
    return float(_from_ordinals(fmt, np.array([middle]))[0]), False
