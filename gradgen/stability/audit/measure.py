"""Compare computed values with exact ones: error in ulps and bits, as Herbie does.

Consumes: values the mirror computed (float64 vectors holding numbers of the format),
exact values and their classes (:mod:`.reference`), and the format. Guarantees:
:func:`compare` returns a :class:`Measure` with

* ``nonfinite``: indices of the points where the exact value is a finite number within
  the format's range but the computed one is NaN or infinite: the failures;
* ``bits``: the error at each point, ``log2(1 + ulps)`` with ``ulps`` the distance in
  ordinals between the computed value and the exact one rounded to the format
  (Herbie's ``ulps->bits``); the format's full width where the computed value is not
  finite; 0 where both the exact and the computed value are below the smallest normal
  number (values there carry no relative precision, and flushing them is the
  convention); NaN where the point does not count (exact value undefined, or beyond the
  format's range).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..formats import Format
from .reference import FINITE


@dataclass(frozen=True)
class Measure:
    counted: np.ndarray  # bool: the exact value is a finite number in range
    nonfinite: np.ndarray  # indices
    bits: np.ndarray  # float64, NaN where not counted


def compare(fmt: Format, got: np.ndarray, exact: np.ndarray, kinds: np.ndarray) -> Measure:
    # a constant output (`output: '1'`) is one value for every point
    got = np.broadcast_to(np.asarray(got, dtype=np.float64), np.shape(exact))
    counted = kinds == FINITE
    rounded = np.where(counted, exact, 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        target = fmt.round(rounded).astype(np.float64)
        in_range = np.isfinite(target)
    counted &= in_range
    finite = np.isfinite(got)
    nonfinite = np.flatnonzero(counted & ~finite)
    bits = np.full(got.shape, np.nan)
    ok = counted & finite
    if ok.any():
        a = fmt.ordinal(np.where(ok, got, 0.0))
        b = fmt.ordinal(np.where(ok, target, 0.0))
        ulps = np.abs(a.astype(np.float64) - b.astype(np.float64))
        both_tiny = (np.abs(got) < fmt.tiny) & (np.abs(exact) < fmt.tiny)
        ulps = np.where(both_tiny, 0.0, ulps)
        bits[ok] = np.log2(1.0 + ulps[ok])
    bits[counted & ~finite] = fmt.width
    return Measure(counted, nonfinite, bits)
