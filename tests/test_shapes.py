"""Table tests for declared shapes: dims, broadcasting, unbroadcasting, and the shape
rules of reductions, square matrices, einsum and matmul.

Results and error messages are pinned exactly (a message is what a spec author reads).
"""

import pytest

from gradgen import shapes as sh

F = sh.DimFactory()
N1, N2 = F.unknown(), F.unknown()  # two independent `null` dims (tokens 0 and 1)
B = F.joint(N1, N2)  # broadcast of two different null dims (token 2)
J = sh.Unknown(2)  # the first joint dim a `fresh()` factory makes (equal to B)

S = sh.StaticReduction
DYN = sh.DYNAMIC


def fresh() -> sh.DimFactory:
    """A new factory whose first two unknown dims are N1 and N2, so that the dims it
    makes next (tokens 2, 3, ...) are distinct from them."""
    f = sh.DimFactory()
    assert (f.unknown(), f.unknown()) == (N1, N2)
    return f


def shape_error(fn, *args) -> str:
    with pytest.raises(sh.ShapeError) as excinfo:
        fn(*args)
    return str(excinfo.value)


# --- DimFactory and Unknown ------------------------------------------------------------


def test_unknown_defaults_to_label_none():
    assert sh.Unknown(7).label == "None"
    assert str(sh.Unknown(7)) == "None"
    assert sh.Unknown(7) == sh.Unknown(7) and sh.Unknown(7) != sh.Unknown(8)


def test_factory_unknown_counts_tokens_and_keeps_labels():
    f = sh.DimFactory()
    first, second, third = f.unknown(), f.unknown("batch"), f.unknown()
    assert first == sh.Unknown(0, "None") and str(first) == "None"
    assert second == sh.Unknown(1, "batch") and str(second) == "batch"
    assert third.token == 2 and third.label == "None"


def test_factory_joint_is_memoized_per_unordered_pair():
    f = sh.DimFactory()
    a, b, c = f.unknown(), f.unknown(), f.unknown()
    ab = f.joint(a, b)
    assert ab == sh.Unknown(3)  # a new dim, numbered after those already made
    assert f.joint(b, a) is ab  # argument order does not matter
    assert f.joint(a, c) == sh.Unknown(4)  # a different pair gives a different dim
    assert f.joint(a, "n") == sh.Unknown(5)  # names take part like unknown dims
    assert f.joint("n", a) == sh.Unknown(5)
    assert f.joint(a, b) is ab  # still memoized after other pairs
    assert f.unknown() == sh.Unknown(6)  # joints and unknowns share one counter
    assert f.sizes == {}  # joint() records no sizes


@pytest.mark.parametrize(
    "hints, sizes",
    [
        ([(N1, 3)], {N1: 3}),  # an unknown dim must be 3 (or 1)
        ([(N1, 2)], {N1: 2}),
        ([(N1, 0)], {N1: 0}),  # 0 is a size like any other
        ([("n", 5)], {"n": 5}),  # named dims are hinted too
        ([(N1, 1)], {}),  # size 1 says nothing
        ([(4, 3)], {}),  # a known dim needs no hint
        ([(N1, 3), (N1, 4)], {N1: 3}),  # the first hint wins
        ([(N1, 3), ("n", 4), (N2, 1)], {N1: 3, "n": 4}),
    ],
)
def test_factory_hint(hints, sizes):
    f = fresh()
    for dim, size in hints:
        f.hint(dim, size)
    assert f.sizes == sizes


@pytest.mark.parametrize(
    "dim, expected",
    [
        (7, 7),  # a known size is itself, hint or not
        (N1, 3),  # hinted
        ("n", 5),  # hinted
        (N2, 9),  # not hinted: the default
        ("m", 9),
    ],
)
def test_factory_concrete(dim, expected):
    f = fresh()
    f.hint(N1, 3)
    f.hint("n", 5)
    f.hint(7, 2)  # ignored
    assert f.concrete(dim, 9) == expected


# --- dims and shapes -------------------------------------------------------------------


@pytest.mark.parametrize(
    "dim, known, text",
    [
        (3, True, "3"),
        (0, True, "0"),
        (1, True, "1"),
        ("batch", False, "batch"),
        (N1, False, "None"),
        (B, False, "None"),
    ],
)
def test_is_known_and_format_dim(dim, known, text):
    assert sh.is_known(dim) is known
    assert sh.format_dim(dim) == text


@pytest.mark.parametrize(
    "shape, text, static",
    [
        ((), "[]", True),  # a scalar
        ((3,), "[3]", True),
        ((10, 1), "[10, 1]", True),
        ((0, 2), "[0, 2]", True),
        (("batch", N1, 3), "[batch, None, 3]", False),
        ((2, "n"), "[2, n]", False),
        ((N1,), "[None]", False),
        ((N1, N2), "[None, None]", False),
    ],
)
def test_format_shape_and_is_static(shape, text, static):
    assert sh.format_shape(shape) == text
    assert sh.is_static(shape) is static


@pytest.mark.parametrize(
    "a, b, same",
    [
        ((), (), True),
        ((2, 3), (2, 3), True),
        ((2, 3), (2, 4), False),
        ((2, 3), (3, 2), False),
        ((1,), (1, 2), False),  # a prefix is not the same shape
        ((1, 2), (1,), False),
        (("n", 3), ("n", 3), True),
        (("n",), ("m",), False),
        ((N1,), (N1,), True),  # the same null dim
        ((N1,), (N2,), False),  # two null dims may differ at run time
        ((N1,), (1,), False),
    ],
)
def test_same_shape(a, b, same):
    assert sh.same_shape(a, b) is same


# --- broadcasting ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "a, b, expected, sizes",
    [
        # equal dims
        (3, 3, 3, {}),
        (1, 1, 1, {}),
        ("n", "n", "n", {}),
        (N1, N1, N1, {}),
        # 1 against anything gives the other, and says nothing about it
        (1, 5, 5, {}),
        (5, 1, 5, {}),
        (1, 0, 0, {}),
        (0, 1, 0, {}),
        (1, "n", "n", {}),
        ("n", 1, "n", {}),
        (1, N1, N1, {}),
        (N1, 1, N1, {}),
        # a known size against an unknown or named dim: the size, hinted on the other
        (5, N1, 5, {N1: 5}),
        (N1, 5, 5, {N1: 5}),
        (2, N1, 2, {N1: 2}),
        (N1, 2, 2, {N1: 2}),
        (0, N1, 0, {N1: 0}),
        ("n", 5, 5, {"n": 5}),
        (5, "n", 5, {"n": 5}),
        # neither known: a fresh joint dim
        (N1, N2, J, {}),
        (N2, N1, J, {}),
        (N1, "n", J, {}),
        ("n", N1, J, {}),
    ],
)
def test_broadcast_dims(a, b, expected, sizes):
    f = fresh()
    assert sh.broadcast_dims(a, b, f) == expected
    assert f.sizes == sizes


@pytest.mark.parametrize(
    "a, b, message",
    [
        (3, 4, "sizes 3 and 4 differ and neither is 1"),
        (4, 3, "sizes 4 and 3 differ and neither is 1"),
        (0, 2, "sizes 0 and 2 differ and neither is 1"),  # 0 broadcasts only with 1
        ("n", "m", "dims 'n' and 'm' have different names"),
    ],
)
def test_broadcast_dims_errors(a, b, message):
    assert shape_error(sh.broadcast_dims, a, b, fresh()) == message


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ((10, 1), (5,), (10, 5)),
        ((), (), ()),
        ((), (3,), (3,)),
        ((2, 3), (), (2, 3)),
        ((2, 3), (2, 3), (2, 3)),
        # rank extension on either side, with and without size-1 dims
        ((3,), (4, 3), (4, 3)),
        ((4, 3), (3,), (4, 3)),
        ((3,), (4, 1), (4, 3)),
        ((4, 1), (3,), (4, 3)),
        ((4, 1, 3), (2, 1), (4, 2, 3)),
        ((2, 1), (4, 1, 3), (4, 2, 3)),
        ((1, 1), (1,), (1, 1)),
        # empty dims
        ((0,), (1,), (0,)),
        ((1,), (0,), (0,)),
        ((0,), (N1,), (0,)),
        # named and null dims
        (("batch", 3), ("batch", 1), ("batch", 3)),
        (("n", 1), (1, "m"), ("n", "m")),
        ((N1, 3), (1,), (N1, 3)),
        ((N1, 3), (5, 1), (5, 3)),  # null against 5: must be 1 or 5 at run time
        ((N1, "n"), (N2, "n"), (J, "n")),
    ],
)
def test_broadcast(a, b, expected):
    assert sh.broadcast(a, b, fresh()) == expected


def test_broadcast_records_hints():
    f = fresh()
    assert sh.broadcast((N1, "n", 1), (4, 5, N2), f) == (4, 5, N2)
    assert f.sizes == {N1: 4, "n": 5}


def test_broadcast_unknowns_is_memoized_and_fresh():
    f = sh.DimFactory()
    a, b = f.unknown(), f.unknown()
    out1 = sh.broadcast((a,), (b,), f)
    out2 = sh.broadcast((b,), (a,), f)
    assert out1 == out2  # same operands, same (unknown) result dim
    assert out1[0] not in (a, b)


@pytest.mark.parametrize(
    "a, b, message",
    [
        ((3,), (4,), "shapes [3] and [4] do not broadcast at axis -1: "
                     "sizes 3 and 4 differ and neither is 1"),
        # the first failing axis, counted from the right, after rank extension
        ((2, 3), (3, 3, 2), "shapes [2, 3] and [3, 3, 2] do not broadcast at axis -2: "
                            "sizes 2 and 3 differ and neither is 1"),
        ((2, 1, 5), (3, 1, 5), "shapes [2, 1, 5] and [3, 1, 5] do not broadcast at "
                               "axis -3: sizes 2 and 3 differ and neither is 1"),
        (("n", 1), ("m", 1), "shapes [n, 1] and [m, 1] do not broadcast at axis -2: "
                             "dims 'n' and 'm' have different names"),
        ((N1, "n"), (3, "m"), "shapes [None, n] and [3, m] do not broadcast at axis -1: "
                              "dims 'n' and 'm' have different names"),
    ],
)
def test_broadcast_errors(a, b, message):
    assert shape_error(sh.broadcast, a, b, fresh()) == message


@pytest.mark.parametrize(
    "shapes, expected",
    [
        ([], ()),  # nothing to broadcast: a scalar
        ([(3,)], (3,)),
        ([(2, 1), (3,), (1, 1, 1)], (1, 2, 3)),
        ([(N1,), (N2,)], (J,)),
        ([(N1, 1), (5, 1), (1, 2)], (5, 2)),
    ],
)
def test_broadcast_all(shapes, expected):
    assert sh.broadcast_all(shapes, fresh()) == expected


def test_broadcast_all_error_names_the_running_result():
    message = shape_error(sh.broadcast_all, [(2,), (1,), (3,)], fresh())
    assert message == (
        "shapes [2] and [3] do not broadcast at axis -1: sizes 2 and 3 differ and neither is 1"
    )


# --- unbroadcasting --------------------------------------------------------------------


@pytest.mark.parametrize(
    "plan, identity",
    [
        (S(), True),
        (S((0,), ()), False),
        (S((), (1,)), False),
        (S((0,), (1,)), False),
    ],
)
def test_static_reduction_is_identity(plan, identity):
    assert plan.is_identity is identity


def test_dynamic_repr():
    assert repr(DYN) == "DYNAMIC"


@pytest.mark.parametrize(
    "input_shape, output_shape, plan",
    [
        # the seed example: x [10, 1], y [5] -> [10, 5]
        ((10, 1), (10, 5), S((), (1,))),
        ((5,), (10, 5), S((0,), ())),
        # scalars and identity
        ((), (), S()),
        ((), (3, 4), S((0, 1), ())),
        ((), (N1,), S((0,), ())),
        ((3, 4), (3, 4), S()),
        # rank extension and size-1 dims together; keep axes in the input's numbering
        ((4, 1), (3, 4, 5), S((0,), (1,))),
        ((1,), (2, 3, 4), S((0, 1), (0,))),
        ((1, 1), (2, 3), S((), (0, 1))),
        ((1, 3, 1), (2, 3, 4), S((), (0, 2))),
        ((3, 1), (3, 5), S((), (1,))),  # an equal axis, then a size-1 one
        # size-1 against size-1: nothing to sum
        ((1,), (1,), S()),
        ((1, 3), (1, 3), S()),
        # empty batches
        ((0, 3), (0, 3), S()),
        ((1, 3), (0, 3), S((), (0,))),
        # named dims: equal wherever the name appears
        (("batch", 1), ("batch", 7), S((), (1,))),
        (("batch",), (2, "batch"), S((0,), ())),
        ((1,), ("batch",), S((), (0,))),
        # the same null dim (x * 2 on [null]) stays static
        ((N1, 3), (N1, 3), S()),
        ((N1, 1), (N1, 5), S((), (1,))),
        ((1, 3), (N1, 3), S((), (0,))),
        ((1,), (B,), S((), (0,))),
        # [null, 3] against [null, 3]: either may be 1 at run time
        ((N1, 3), (B, 3), DYN),
        ((N1,), (5,), DYN),
        (("batch",), (B,), DYN),
        (("n", 1), (5, 3), DYN),  # n may be 1 or 5
        ((1, N1), (3, B), DYN),  # a static axis does not make the plan static
        ((2, N1), (2, B), DYN),
        # a known size other than 1 is never summed, whatever the output's dim says
        ((3,), (B,), S()),
        ((4, 1), (B, 5), S((), (1,))),
    ],
)
def test_reduction_plan(input_shape, output_shape, plan):
    assert sh.reduction_plan(input_shape, output_shape) == plan


def test_reduction_plan_rejects_lower_rank_output():
    with pytest.raises(ValueError) as excinfo:
        sh.reduction_plan((2, 3), (3,))
    assert str(excinfo.value) == "output shape [3] has lower rank than input shape [2, 3]"


@pytest.mark.parametrize(
    "plan, input_shape, output_shape, text",
    [
        (DYN, (N1, 3), (B, 3),
         "unbroadcast [None, 3] from [None, 3]: axes from run-time shapes"),
        (S(), (3,), (3,), "no unbroadcast needed: [3] from [3]"),
        (S((0,), ()), (5,), (10, 5),
         "unbroadcast [5] from [10, 5]: sum leading axes [0] (rank extension)"),
        (S((), (1,)), (10, 1), (10, 5),
         "unbroadcast [10, 1] from [10, 5]: sum axes [1] keeping dims (size-1 dims)"),
        (S((0,), (1,)), (4, 1), (3, 4, 5),
         "unbroadcast [4, 1] from [3, 4, 5]: sum leading axes [0] (rank extension), "
         "then sum axes [1] keeping dims (size-1 dims)"),
        (S((0, 1), (0, 2)), (1, "n", 1), (2, 3, 4, "n", 5),
         "unbroadcast [1, n, 1] from [2, 3, 4, n, 5]: sum leading axes [0, 1] "
         "(rank extension), then sum axes [0, 2] keeping dims (size-1 dims)"),
    ],
)
def test_describe_reduction(plan, input_shape, output_shape, text):
    assert sh.describe_reduction(plan, input_shape, output_shape) == text


# --- dims that must be equal -----------------------------------------------------------

UNCHECKED = object()  # the hints a row does not pin


@pytest.mark.parametrize(
    "a, b, expected, sizes",
    [
        (3, 3, 3, {}),
        ("n", "n", "n", {}),
        (N1, N1, N1, {}),
        # a known size wins, and is recorded for the other dim
        (N1, 3, 3, {N1: 3}),
        (3, N1, 3, {N1: 3}),
        ("n", 3, 3, {"n": 3}),
        (3, "n", 3, {"n": 3}),
        (N1, 1, 1, UNCHECKED),
        ("n", 1, 1, UNCHECKED),
        # an unknown dim against a name: the name
        (N1, "n", "n", UNCHECKED),
        ("n", N1, "n", UNCHECKED),
    ],
)
def test_unify(a, b, expected, sizes):
    f = fresh()
    assert sh.unify(a, b, f, "what") == expected
    if sizes is not UNCHECKED:
        assert f.sizes == sizes


@pytest.mark.parametrize(
    "a, b, message",
    [
        (3, 4, "the thing: 3 and 4 differ"),
        (1, 4, "the thing: 1 and 4 differ"),  # no broadcasting here: 1 is not special
        ("n", "m", "the thing: n and m differ"),
    ],
)
def test_unify_errors(a, b, message):
    assert shape_error(sh.unify, a, b, fresh(), "the thing") == message


# --- reductions --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "axes, rank, expected",
    [
        ((), 2, ()),
        ((), 0, ()),  # a scalar with no axes
        ((0,), 1, (0,)),
        ((2,), 3, (2,)),  # the last axis
        ((1, 0), 2, (0, 1)),  # sorted
        ((-1,), 3, (2,)),  # negative axes count from the end
        ((-3,), 3, (0,)),  # the first axis, from the end
        ((-1, 0), 2, (0, 1)),
        ((2, -3), 4, (1, 2)),
    ],
)
def test_normalize_axes(axes, rank, expected):
    assert sh.normalize_axes(axes, rank) == expected


@pytest.mark.parametrize(
    "axes, rank, message",
    [
        ((3,), 3, "axis 3 is out of range for rank 3"),
        ((-4,), 3, "axis -4 is out of range for rank 3"),
        ((0,), 0, "axis 0 is out of range for rank 0"),  # a scalar has no axes
        ((0, 5), 2, "axis 5 is out of range for rank 2"),
        ((1, 1), 2, "axis 1 is repeated"),
        ((1, -1), 2, "axis 1 is repeated"),  # the same axis, written two ways
    ],
)
def test_normalize_axes_errors(axes, rank, message):
    assert shape_error(sh.normalize_axes, axes, rank) == message


@pytest.mark.parametrize(
    "shape, axes, dropped, kept",
    [
        ((2, 3, 4), (), (2, 3, 4), (2, 3, 4)),
        ((2, 3, 4), (1,), (2, 4), (2, 1, 4)),
        ((2, 3, 4), (0, 2), (3,), (1, 3, 1)),
        ((2, 3), (0, 1), (), (1, 1)),
        (("n", N1, 5), (1,), ("n", 5), ("n", 1, 5)),
        ((), (), (), ()),
    ],
)
def test_reduce_shape(shape, axes, dropped, kept):
    assert sh.reduce_shape(shape, axes, keepdims=False) == dropped
    assert sh.reduce_shape(shape, axes, keepdims=True) == kept


# --- square matrices ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, expected, sizes",
    [
        ((3, 3), (3, 3), {}),
        ((4, 3, 3), (4, 3, 3), {}),  # batch dims are kept
        (("n", "n"), ("n", "n"), {}),
        ((N1, N1), (N1, N1), {}),
        ((4, N1, 3), (4, 3, 3), {N1: 3}),  # null must be 3
        ((2, 5, 3, N1), (2, 5, 3, 3), {N1: 3}),
        ((N1, "n"), ("n", "n"), UNCHECKED),
    ],
)
def test_square_shape(shape, expected, sizes):
    f = fresh()
    assert sh.square_shape(shape, f, "inverse()") == expected
    if sizes is not UNCHECKED:
        assert f.sizes == sizes


@pytest.mark.parametrize(
    "shape, what, message",
    [
        ((3,), "inverse()", "inverse() needs a matrix (rank >= 2); got [3]"),
        ((), "log(det())", "log(det()) needs a matrix (rank >= 2); got []"),
        ((2, 3), "log(det())", "log(det()) needs square matrices: 2 and 3 differ"),
        ((5, 2, 3), "det()", "det() needs square matrices: 2 and 3 differ"),
        ((2, 3, 3, 4), "det()", "det() needs square matrices: 3 and 4 differ"),
        (("n", "m"), "inverse()", "inverse() needs square matrices: n and m differ"),
    ],
)
def test_square_shape_errors(shape, what, message):
    assert shape_error(sh.square_shape, shape, fresh(), what) == message


# --- einsum ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "subscripts, shapes, expected, inputs, out",
    [
        ("ij,jk->ik", [(2, 3), (3, 4)], (2, 4), ["ij", "jk"], "ik"),
        ("ij, jk -> ik", [(2, 3), (3, 4)], (2, 4), ["ij", "jk"], "ik"),  # spaces dropped
        ("ij->ji", [(2, 3)], (3, 2), ["ij"], "ji"),
        ("i->", [(3,)], (), ["i"], ""),  # sum to a scalar
        (",i->i", [(), (3,)], (3,), ["", "i"], "i"),  # a scalar operand
        ("->", [()], (), [""], ""),
        ("iJ,Jk->ik", [(2, 3), (3, 4)], (2, 4), ["iJ", "Jk"], "ik"),  # upper case
        ("ij,jk,kl->li", [(2, 3), (3, 4), (4, 5)], (5, 2), ["ij", "jk", "kl"], "li"),
        ("bij,bjk->bik", [("b", 2, 3), ("b", 3, 4)], ("b", 2, 4), ["bij", "bjk"], "bik"),
    ],
)
def test_einsum_shape(subscripts, shapes, expected, inputs, out):
    assert sh.einsum_shape(subscripts, shapes, fresh()) == (expected, inputs, out)


@pytest.mark.parametrize(
    "shapes, expected, sizes",
    [
        ([(N1,), (3,)], (3,), {N1: 3}),  # a known size wins, either order
        ([(3,), (N1,)], (3,), {N1: 3}),
        ([("n",), (4,)], (4,), {"n": 4}),
        ([(N1,), (N1,)], (N1,), {}),
        ([(N1,), ("n",)], ("n",), UNCHECKED),
    ],
)
def test_einsum_shape_unifies_each_index(shapes, expected, sizes):
    f = fresh()
    assert sh.einsum_shape("i,i->i", shapes, f) == (expected, ["i", "i"], "i")
    if sizes is not UNCHECKED:
        assert f.sizes == sizes


ARROW = "einsum needs explicit subscripts with '->', like 'ij,jk->ik'"
ELLIPSIS = "einsum ellipsis '...' is not supported; name every axis"


@pytest.mark.parametrize(
    "subscripts, shapes, message",
    [
        # implicit output (no '->') is not supported; nor is more than one '->'
        ("ij", [(2, 3)], ARROW),
        ("", [()], ARROW),
        ("ij->ij->ij", [(2, 3)], ARROW),
        ("...ij", [(2, 3)], ARROW),  # the '->' check comes first
        ("i.j->ij", [(2, 3)], ELLIPSIS),
        ("...ij->ij", [(2, 3)], ELLIPSIS),
        ("ij->...", [(2, 3)], ELLIPSIS),
        # letters only (ASCII), in operands and output
        ("i1->i", [(2, 2)], "einsum subscripts are letters; got 'i1'"),
        ("ié->i", [(2, 2)], "einsum subscripts are letters; got 'ié'"),
        ("i->i_", [(2,)], "einsum subscripts are letters; got 'i_'"),
        ("i,j1->i", [(2,), (2, 2)], "einsum subscripts are letters; got 'j1'"),
        # no diagonals, and no index twice in the output
        ("ii->i", [(2, 2)], "einsum index repeated within 'ii' is not supported"),
        ("ij->jj", [(2, 3)], "einsum index repeated within 'jj' is not supported"),
        # operands against subscripts
        ("ij,jk->ik", [(2, 3)], "einsum subscripts name 2 operands, got 1"),
        ("ij->ij", [(2, 3), (3, 4)], "einsum subscripts name 1 operands, got 2"),
        ("ij->i", [(2,)], "einsum operand 'ij' has rank 2, but its shape is [2]"),
        ("i,jk->i", [(2,), (3,)], "einsum operand 'jk' has rank 2, but its shape is [3]"),
        ("i->i", [(N1, 2)], "einsum operand 'i' has rank 1, but its shape is [None, 2]"),
        # sizes of one index differ between operands
        ("ij,jk->ik", [(2, 3), (4, 5)], "einsum index 'j': 3 and 4 differ"),
        ("i,i->i", [("n",), ("m",)], "einsum index 'i': n and m differ"),
        # an output index must come from an operand
        ("i->j", [(2,)], "einsum output index 'j' is not in any operand"),
        ("i->ijk", [(2,)], "einsum output index 'j' is not in any operand"),
    ],
)
def test_einsum_shape_errors(subscripts, shapes, message):
    assert shape_error(sh.einsum_shape, subscripts, shapes, fresh()) == message


# --- matmul ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ((2, 2), (2, 3), (2, 3)),
        ((2, 3), (3, 4), (2, 4)),
        # batch axes broadcast, on either side
        ((4, 3, 3), (3, 2), (4, 3, 2)),
        ((5, 2, 3), (3, 4), (5, 2, 4)),
        ((2, 3), (5, 3, 4), (5, 2, 4)),
        ((4, 3, 2), (2, 5), (4, 3, 5)),
        ((4, 1, 3, 5), (2, 5, 6), (4, 2, 3, 6)),
        ((1, 2, 3), (7, 3, 4), (7, 2, 4)),
        # named and null dims
        (("batch", "n", "k"), ("k", "m"), ("batch", "n", "m")),
        ((N1, 3), (3, 2), (N1, 2)),
        ((N1, 2, 3), (N2, 3, 4), (J, 2, 4)),
    ],
)
def test_matmul_shape(a, b, expected):
    assert sh.matmul_shape(a, b, fresh()) == expected


@pytest.mark.parametrize(
    "a, b, expected, sizes",
    [
        ((2, N1), (3, 4), (2, 4), {N1: 3}),  # a null contracted dim must be 3
        ((2, 3), (N1, 4), (2, 4), {N1: 3}),
        ((2, N1), (N2, 4), (2, 4), {}),
        ((2, N1), (N1, 4), (2, 4), {}),
        # a named contracted dim may equal a size (TF's matmul checks it at run time);
        # this was refused as "contracts k with 3"
        (("n", "k"), (3, 2), ("n", 2), {"k": 3}),
        ((2, 3), ("k", "m"), (2, "m"), {"k": 3}),
    ],
)
def test_matmul_shape_unifies_contracted_dims(a, b, expected, sizes):
    f = fresh()
    assert sh.matmul_shape(a, b, f) == expected
    assert f.sizes == sizes


RANK = "'@' needs operands of rank >= 2 (matrices over the last two axes); got "


@pytest.mark.parametrize(
    "a, b, message",
    [
        # '@' on tensors is tf.linalg.matmul: no rank-1 operands (unlike NumPy)
        ((3,), (3, 2), RANK + "[3] @ [3, 2]"),
        ((2, 3), (3,), RANK + "[2, 3] @ [3]"),
        ((), (), RANK + "[] @ []"),
        ((2, 3), (4, 5), "contracted dims differ: [2, 3] @ [4, 5] contracts 3 with 4"),
        ((5, 2, 3), (2, 3), "contracted dims differ: [5, 2, 3] @ [2, 3] contracts 3 with 2"),
        (("n", "k"), ("j", "m"), "contracted dims differ: [n, k] @ [j, m] contracts k with j"),
    ],
)
def test_matmul_shape_errors(a, b, message):
    assert shape_error(sh.matmul_shape, a, b, fresh()) == message


def test_matmul_shape_batch_error():
    message = shape_error(sh.matmul_shape, (2, 2, 3), (3, 3, 4), fresh())
    assert message.endswith("do not broadcast at axis -1: sizes 2 and 3 differ and neither is 1")


# --- the batch wildcard `...` -------------------------------------------------------------

BA, BC = sh.Batch(100), sh.Batch(101)  # two inputs' own `...`


def test_batch_dims_read_as_the_ellipsis():
    assert sh.format_shape((BA, "n", 3)) == "[..., n, 3]"
    assert sh.has_batch((BA,)) and not sh.has_batch((3,)) and not sh.has_batch(())
    assert sh.core((BA, "n", 3)) == ("n", 3) and sh.core((2, 3)) == (2, 3)
    assert sh.core_rank((BA,)) == 0
    assert not sh.is_static((BA, 3))


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ((BA, 3), (3,), (BA, 3)),
        ((BA, 3), (), (BA, 3)),
        ((3,), (BA, 1), (BA, 3)),
        ((BA,), (), (BA,)),
        ((BA, 1, 3), (4, 1), (BA, 4, 3)),
        ((BA, 3), (BA, 3), (BA, 3)),  # the same `...`: the same batch
    ],
)
def test_broadcast_with_batch(a, b, expected):
    assert sh.broadcast(a, b, sh.DimFactory()) == expected


def test_broadcast_of_two_batches_is_a_new_memoized_batch():
    f = sh.DimFactory()
    joint = sh.broadcast((BA, 3), (BC, 1), f)
    assert isinstance(joint[0], sh.Batch) and joint[0] not in (BA, BC)
    assert joint[1:] == (3,)
    assert sh.broadcast((BC, 3), (BA, 3), f) == joint
    # each input's `...` from the factory is its own; unknown core dims of two batched
    # shapes broadcast with the factory's joint dims too
    f = fresh()
    a, b = f.batch(), f.batch()
    assert a != b
    n1, n2 = f.unknown(), f.unknown()
    out = sh.broadcast((a, n1), (b, n2), f)
    assert out[0] not in (a, b) and out[1] == f.joint(n1, n2)


@pytest.mark.parametrize(
    "a, b, message",
    [
        ((BA, 3), (2, 3), "shapes [..., 3] and [2, 3] do not broadcast: [2, 3] has more "
         "dims than [..., 3] has after '...', so its leading dims would meet the batch "
         "dims; start it with '...' too"),
        ((2, 3), (BA, 3), "shapes [2, 3] and [..., 3] do not broadcast: [2, 3] has more "
         "dims than [..., 3] has after '...', so its leading dims would meet the batch "
         "dims; start it with '...' too"),  # the batch in either operand
        ((BA, 3), (BC, 2, 3), "shapes [..., 3] and [..., 2, 3] do not broadcast: both "
         "start with '...' (any number of batch dims) but have different numbers of dims "
         "after it, so which dims meet depends on the batch ranks"),
        ((BA, 3), (4,), "shapes [..., 3] and [4] do not broadcast: shapes [3] and [4] do "
         "not broadcast at axis -1: sizes 3 and 4 differ and neither is 1"),
    ],
)
def test_broadcast_with_batch_errors(a, b, message):
    assert shape_error(sh.broadcast, a, b, sh.DimFactory()) == message


@pytest.mark.parametrize(
    "input_shape, output_shape, plan",
    [
        ((BA, 3), (BA, 3), S()),
        ((BA, 1, 3), (BA, 4, 3), S((), (-2,))),
        ((BA, 1, 1), (BA, 4, 3), S((), (-1, -2))),  # from the last: expansion order
        ((BA, 3), (BC, 3), DYN),  # another batch: it may have been broadcast
        ((3,), (BA, 3), DYN),  # the batch's rank is only known at trace time
        ((), (BA,), DYN),
        ((BA, "n"), (BA, N1), DYN),
    ],
)
def test_reduction_plan_with_batch(input_shape, output_shape, plan):
    assert sh.reduction_plan(input_shape, output_shape) == plan


def test_describe_reduction_with_batch():
    assert sh.describe_reduction(DYN, (3,), (BA, 3)) == (
        "unbroadcast [3] from [..., 3]: batch dims and axes from run-time shapes"
    )
    assert sh.describe_reduction(S((), (-2,)), (BA, 1, 3), (BA, 4, 3)) == (
        "unbroadcast [..., 1, 3] from [..., 4, 3]: sum axes [-2] keeping dims (size-1 dims)"
    )


@pytest.mark.parametrize(
    "axes, rank, expected",
    [((-1,), 1, (-1,)), ((-3, -1), 3, (-1, -3)), ((-1, -2), 2, (-1, -2)), ((), 0, ())],
)
def test_normalize_axes_with_batch_count_from_the_end(axes, rank, expected):
    assert sh.normalize_axes(axes, rank, batched=True) == expected


@pytest.mark.parametrize(
    "axes, rank, message",
    [
        ((0,), 2, "axis 0 of a shape starting with '...' depends on the number of batch "
         "dims; count axes from the end (axis=-2 is the same axis when there are no batch "
         "dims)"),
        ((5,), 2, "axis 5 of a shape starting with '...' depends on the number of batch "
         "dims; count axes from the end (-1 is the last)"),
        ((-3,), 2, "axis -3 is out of range for the 2 dims after '...'"),
        ((-1, -1), 2, "axis -1 is repeated"),
    ],
)
def test_normalize_axes_with_batch_errors(axes, rank, message):
    assert shape_error(sh.normalize_axes, axes, rank, True) == message


def test_reduce_shape_with_batch():
    assert sh.reduce_shape((BA, 2, 3), (-1,), False) == (BA, 2)
    assert sh.reduce_shape((BA, 2, 3), (-1, -2), True) == (BA, 1, 1)


def test_matrix_shapes_with_batch():
    f = sh.DimFactory()
    assert sh.square_shape((BA, "n", "n"), f, "det()") == (BA, "n", "n")
    assert sh.matmul_shape((BA, 2, 3), (3, 4), f) == (BA, 2, 4)
    assert shape_error(sh.square_shape, (BA, 3), f, "det()") == (
        "det() needs a matrix (rank >= 2); got [..., 3]"
    )
    assert "its rank depends on the batch dims" in shape_error(
        sh.einsum_shape, "ij->i", [(BA, 2, 2)], f
    )
