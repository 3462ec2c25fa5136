"""Table tests for broadcasting and the reduction axes of unbroadcasting."""

import pytest

from gradgen import shapes as sh

F = sh.DimFactory()
N1, N2 = F.unknown(), F.unknown()  # two independent `null` dims


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ((10, 1), (5,), (10, 5)),
        ((), (3,), (3,)),
        ((2, 3), (2, 3), (2, 3)),
        ((4, 1, 3), (2, 1), (4, 2, 3)),
        ((0,), (1,), (0,)),
        ((1,), (0,), (0,)),
        (("batch", 3), ("batch", 1), ("batch", 3)),
        ((N1, 3), (1,), (N1, 3)),
        ((N1, 3), (5, 1), (5, 3)),  # null against 5: must be 1 or 5 at run time
        ((0,), (N1,), (0,)),
    ],
)
def test_broadcast(a, b, expected):
    assert sh.broadcast(a, b, sh.DimFactory()) == expected


def test_broadcast_unknowns_is_memoized_and_fresh():
    f = sh.DimFactory()
    a, b = f.unknown(), f.unknown()
    out1 = sh.broadcast((a,), (b,), f)
    out2 = sh.broadcast((b,), (a,), f)
    assert out1 == out2  # same operands, same (unknown) result dim
    assert out1[0] not in (a, b)


@pytest.mark.parametrize(
    "a, b, fragment",
    [
        ((3,), (4,), "sizes 3 and 4"),
        ((2, 3), (3, 3, 2), "axis -2: sizes 2 and 3"),
        (("n",), ("m",), "different names"),
    ],
)
def test_broadcast_errors(a, b, fragment):
    with pytest.raises(sh.ShapeError, match=fragment):
        sh.broadcast(a, b, sh.DimFactory())


S = sh.StaticReduction
DYN = sh.DYNAMIC
B = F.joint(N1, N2)  # broadcast of two different null dims


@pytest.mark.parametrize(
    "input_shape, output_shape, plan",
    [
        # the seed example: x [10, 1], y [5] -> [10, 5]
        ((10, 1), (10, 5), S((), (1,))),
        ((5,), (10, 5), S((0,), ())),
        # scalars and identity
        ((), (), S()),
        ((), (3, 4), S((0, 1), ())),
        ((3, 4), (3, 4), S()),
        # rank extension and size-1 dims together; keep axes in the input's numbering
        ((4, 1), (3, 4, 5), S((0,), (1,))),
        ((1, 1), (2, 3), S((), (0, 1))),
        # size-1 against size-1: nothing to sum
        ((1,), (1,), S()),
        ((1, 3), (1, 3), S()),
        # empty batches
        ((0, 3), (0, 3), S()),
        ((1, 3), (0, 3), S((), (0,))),
        # named dims: equal wherever the name appears
        (("batch", 1), ("batch", 7), S((), (1,))),
        (("batch",), (2, "batch"), S((0,), ())),
        # the same null dim (x * 2 on [null]) stays static
        ((N1, 3), (N1, 3), S()),
        ((1, 3), (N1, 3), S((), (0,))),
        # [null, 3] against [null, 3]: either may be 1 at run time
        ((N1, 3), (B, 3), DYN),
        ((N1,), (5,), DYN),
        (("batch",), (B,), DYN),
    ],
)
def test_reduction_plan(input_shape, output_shape, plan):
    assert sh.reduction_plan(input_shape, output_shape) == plan


def test_reduction_plan_rejects_lower_rank_output():
    with pytest.raises(ValueError):
        sh.reduction_plan((2, 3), (3,))


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ((2, 2), (2, 3), (2, 3)),
        ((4, 3, 3), (3, 2), (4, 3, 2)),
        ((4, 1, 3, 5), (2, 5, 6), (4, 2, 3, 6)),
        (("batch", "n", "k"), ("k", "m"), ("batch", "n", "m")),
        ((N1, 3), (3, 2), (N1, 2)),
    ],
)
def test_matmul_shape(a, b, expected):
    assert sh.matmul_shape(a, b, sh.DimFactory()) == expected


@pytest.mark.parametrize(
    "a, b, fragment",
    [
        ((2, 3), (4, 5), "contracted dims differ"),
        (("n", "k"), ("j", "m"), "contracts k with j"),
        ((3,), (3, 2), "rank >= 2"),
        ((2, 2, 3), (3, 3, 4), "do not broadcast"),
    ],
)
def test_matmul_shape_errors(a, b, fragment):
    with pytest.raises(sh.ShapeError, match=fragment):
        sh.matmul_shape(a, b, sh.DimFactory())


def test_describe_reduction_names_axes_and_reason():
    text = sh.describe_reduction(S((0,), (1,)), (4, 1), (3, 4, 5))
    assert "leading axes [0]" in text and "axes [1] keeping dims" in text
    assert "run-time" in sh.describe_reduction(DYN, (N1,), (B,))
    assert sh.format_shape(("batch", N1, 3)) == "[batch, None, 3]"
