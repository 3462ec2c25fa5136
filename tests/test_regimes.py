"""Regime inference (gradgen.stability.regimes): where the stable form and the form as
written each win on part of one input's range, the cheapest split (Herbie's regimes),
table-tested on errors in bits; the build's use of it is in test_audit."""

from __future__ import annotations

import numpy as np
import pytest
import sympy

from gradgen.stability import formats
from gradgen.stability.regimes import STABLE, WRITTEN, _boundary, _from_ordinals, infer

F32 = formats.get("float32")
X = np.array([-3.0, -1.0, 0.0, 1e-30, 1e-3, 1.0, 5.0, 1e10])


def _infer(stable, written, points=None):
    return infer(F32, points or {"x": X}, np.array(stable, float), np.array(written, float),
                 ("out", "x"), sympy.Symbol("w"))


@pytest.mark.parametrize("stable, written, bounds, forms", [
    # written NaN (32 bits) at 0, a few bits better above: as written where x > 0
    ([0, 0, 0, 5, 4, 3, 0, 0], [0, 0, 32, 0, 0, 0, 0, 0], ((0.0, True),), (STABLE, WRITTEN)),
    # better in the middle, worse at the top: two intervals (the ties below cost less
    # than a second split)
    ([0, 0, 0, 6, 6, 6, 0, 0], [0, 0, 0, 0, 0, 0, 9, 9], ((2.0, False),), (WRITTEN, STABLE)),
    # better in the middle only, much worse at both ends: three intervals
    ([9, 9, 0, 6, 6, 6, 0, 0], [20, 20, 0, 0, 0, 0, 9, 9], ((0.0, False), (2.0, False)),
     (STABLE, WRITTEN, STABLE)),
    # errors within TIE_BITS of each other are ties: the split is as without them
    ([0, 0, 0, 5, 4, 3, 0, 0], [1, 1, 32, 0, 0, 0, 0, 0], ((0.0, True),), (STABLE, WRITTEN)),
    # better everywhere it differs: as written throughout (the rewrite reverted)
    ([3, 0, 5, 0, 0, 0, 0, 4], [0, 0, 0, 0, 0, 0, 0, 0], (), (WRITTEN,)),
])
def test_the_cheapest_split_picks_each_form_where_it_wins(stable, written, bounds, forms):
    regime = _infer(stable, written)
    assert regime is not None and regime.variable == "x"
    assert regime.forms == forms
    assert [b[1] for b in regime.bounds] == [b[1] for b in bounds]
    for (got, _), (want, _) in zip(regime.bounds, bounds):
        assert got == pytest.approx(want, rel=0.5) or got == want


@pytest.mark.parametrize("stable, written", [
    ([0, 0, 0, 1, 1, 1, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0]),  # within a tie: no split
    ([0, 0, 0, 3, 0, 0, 0, 0], [9, 9, 9, 0, 9, 9, 9, 9]),  # one point: a split costs more
    ([0, 0, 0, 9, 9, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0]),  # two points: the sample, not
    # a regime (MIN_WINS)
    ([np.nan] * 8, [0] * 8),  # nothing counted
])
def test_no_regime_where_the_stable_form_is_as_good(stable, written):
    assert _infer(stable, written) is None


def test_the_variable_that_separates_the_points_is_chosen():
    """Errors that depend on y, not on x: the split is on y."""
    y = np.array([5.0, -2.0, 7.0, -1.0, 3.0, -4.0, 1.0, -6.0])
    stable = np.where(y > 0, 6.0, 0.0)
    written = np.where(y > 0, 0.0, 32.0)
    regime = _infer(stable, written, {"x": X, "y": y})
    assert regime.variable == "y" and regime.forms == (STABLE, WRITTEN)
    assert regime.bounds == ((0.0, False),)
    (condition,) = regime.conditions(sympy.Symbol("y"))
    assert condition == sympy.Lt(sympy.Symbol("y"), 0)
    assert regime.describe() == "as written where y >= 0, the stable form elsewhere"


@pytest.mark.parametrize("a, b, bound", [
    (-1.0, 2.0, (0.0, False)),   # 0 between: x < 0
    (-1.0, 0.0, (0.0, False)),
    (0.0, 1e-30, (0.0, True)),   # x <= 0
    (1e-30, 1e-20, (1e-25, False)),  # one digit, near the middle in ordinals
    (-1e-20, -1e-30, (-1e-25, False)),
    (2.0, float("inf"), (2.0, True)),
])
def test_each_bound_is_the_simplest_number_between_the_samples(a, b, bound):
    value, inclusive = _boundary(F32, a, b)
    assert inclusive == bound[1]
    assert value == pytest.approx(bound[0], rel=0.9)
    rounded = float(F32.round([value])[0])
    assert (a <= rounded < b) if inclusive else (a < rounded <= b)


def test_a_bound_is_never_a_number_the_format_flushes():
    """Between 0's neighbour and the smallest normal number float32 has no number of
    one digit: the bound is a normal number of the format, never a subnormal that
    reads as 0 (x < 1e-38 would be x < 0 under flush-to-zero)."""
    value, _ = _boundary(F32, 1.1754944e-38, 1.2e-38)
    assert abs(float(F32.round([value])[0])) >= F32.tiny


def test_a_bound_is_refined_between_the_samples_around_it():
    """The samples say only that the forms cross between 1e-3 and 1; the refinement
    measures between them and puts the bound beside the crossing (0.3)."""
    def errors(x):
        return np.where(x > 0.3, 6.0, 0.0), np.where(x > 0.3, 0.0, 9.0)

    def measure(trial):
        return errors(trial["x"])

    stable, written = errors(X)
    regime = infer(F32, {"x": X}, stable, written, ("out", "x"), sympy.Symbol("w"), measure)
    assert regime.forms == (STABLE, WRITTEN)
    (value, inclusive), = regime.bounds
    assert 0.25 < value <= 0.35 and not inclusive
    # without the refinement: anywhere between the samples
    (coarse, _), = infer(F32, {"x": X}, stable, written, ("out", "x"), sympy.Symbol("w")).bounds
    assert coarse == 0.03


def test_ordinals_invert():
    values = np.array([-F32.largest, -1.5, -F32.tiny, 0.0, F32.tiny, 1e-30, 1.0, 3e38])
    ordinals = F32.ordinal(values)
    back = _from_ordinals(F32, ordinals)
    assert np.array_equal(back, F32.round(values).astype(np.float64))
