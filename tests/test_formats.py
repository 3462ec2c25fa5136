"""stability/formats.py: rounding, flushing, ordinals and neighbours of each float format,
checked against NumPy's own types and ml_dtypes' bfloat16 (TensorFlow's bfloat16 type)."""

import warnings

import ml_dtypes
import numpy as np
import pytest

from gradgen.stability import formats

F16, BF16, F32, F64 = (formats.get(n) for n in ("float16", "bfloat16", "float32", "float64"))
TINY32 = 2.0**-126


@pytest.mark.parametrize(
    "fmt, finfo",
    [(F16, np.finfo(np.float16)), (BF16, ml_dtypes.finfo(ml_dtypes.bfloat16)),
     (F32, np.finfo(np.float32)), (F64, np.finfo(np.float64))],
)
def test_each_format_has_its_types_constants(fmt, finfo):
    assert fmt.precision == finfo.nmant + 1
    assert fmt.width == finfo.bits
    assert fmt.tiny == float(finfo.smallest_normal)
    assert fmt.largest == float(finfo.max)
    assert fmt.emulated == (fmt.name == "bfloat16")
    assert fmt.ftz == (fmt.name != "float16")


def test_only_real_float_dtypes_have_a_format():
    assert [formats.get(n) for n in ("complex64", "int32", "float8")] == [None, None, None]
    assert formats.get("float32").name == "float32"


# value, then what it rounds to in float16, bfloat16, float32 and float64 (None: itself)
ROUNDING = [
    (1 + 2.0**-24, 1.0, 1.0, 1.0, None),  # a tie goes to the even neighbour
    (1 + 3 * 2.0**-24, 1.0, 1.0, 1 + 2.0**-22, None),
    (1 + 3 * 2.0**-8, None, 1 + 2.0**-6, None, None),
    (65519.0, 65504.0, 65536.0, None, None),
    (65520.0, np.inf, 65536.0, None, None),  # float16's overflow edge rounds to inf
    (3.5e38, np.inf, np.inf, np.inf, None),
    (2.0**-24, 2.0**-24, 2.0**-24, None, None),  # a float16 subnormal survives
    (1e-40, 0.0, 0.0, 0.0, None),  # float32 subnormals are flushed
    (1e-310, 0.0, 0.0, 0.0, 0.0),  # and float64 ones
]


@pytest.mark.parametrize("row", ROUNDING, ids=lambda r: repr(r[0]))
def test_round_is_a_cast_to_nearest_even_with_flush_to_zero(row):
    value, *expected = row
    for fmt, want in zip((F16, BF16, F32, F64), expected):
        with warnings.catch_warnings():  # overflow to inf is expected, not warned about
            warnings.simplefilter("error")
            got = fmt.round([value, -value])
        assert got.dtype == fmt.storage, fmt.name
        want = value if want is None else want
        np.testing.assert_array_equal(got.astype(np.float64), [want, -want], err_msg=fmt.name)
        assert list(np.signbit(got)) == [False, True], fmt.name  # zeros keep their sign


def test_round_keeps_nan_and_bfloat16_matches_ml_dtypes_on_every_kind_of_bit_pattern():
    for fmt in (F16, BF16, F32, F64):
        assert np.isnan(fmt.round([np.nan])).all(), fmt.name
    rng = np.random.default_rng(0)
    bits = rng.integers(0x00800000, 0x7F7FFFFF, 20000, dtype=np.uint32)
    bits[:1000] = (bits[:1000] & 0xFFFF0000) | 0x8000  # exact ties, both parities
    bits[1000:2000] = (bits[1000:2000] & 0xFFFF0000) | 0x7FFF
    values = np.concatenate([bits.view(np.float32), -bits.view(np.float32), [np.inf, 3.4e38]])
    want = values.astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(BF16.round(values), want)
    # NaNs whose payload would carry into the exponent or the sign stay NaN
    payloads = np.array([0x7F800001, 0x7FFFFFFF, 0xFFFFFFFF], np.uint32).view(np.float32)
    assert np.isnan(BF16.round(payloads)).all()


def test_flush_leaves_integers_and_float16_alone():
    ints = np.array([0, 1, -3])
    assert F32.flush(ints) is ints
    halves = np.array([2.0**-24, -(2.0**-20)], np.float16)
    np.testing.assert_array_equal(F16.flush(halves), halves)
    flushed = F32.flush(np.array([1e-39, -1e-39, TINY32, -TINY32, 1.0], np.float32))
    np.testing.assert_array_equal(flushed, [0.0, 0.0, TINY32, -TINY32, 1.0])
    assert list(np.signbit(flushed)) == [False, True, False, True, False]


@pytest.mark.parametrize(
    "fmt, one",  # the ordinal of 1.0: its bit pattern, less the flushed subnormals
    [(F32, 0x3F800000 - 0x00800000 + 1), (F64, 0x3FF0000000000000 - 0x0010000000000000 + 1),
     (BF16, 0x3F80 - 0x0080 + 1), (F16, 0x3C00)],
)
def test_ordinals_count_representable_numbers(fmt, one):
    after_one = 1 + 2.0 ** (1 - fmt.precision)  # the next number after 1.0
    values = [0.0, -0.0, fmt.tiny, 1.0, after_one, -1.0, -after_one]
    got = fmt.ordinal(values)
    assert got.dtype == np.int64
    first = 1 if fmt.ftz else 2**(fmt.precision - 1)  # float16's subnormals come first
    assert list(got) == [0, 0, first, one, one + 1, -one, -one - 1]
    if fmt.ftz:  # a subnormal reads as 0, and the smallest normal is one ulp from it
        assert list(fmt.ordinal([fmt.tiny / 4, -fmt.tiny / 4])) == [0, 0]
    else:
        assert list(fmt.ordinal([2.0**-24, -(2.0**-23)])) == [1, -2]
    top = fmt.ordinal([fmt.largest])[0]
    assert fmt.ordinal([fmt.neighbours(fmt.largest)[0]])[0] == top - 1


@pytest.mark.parametrize("fmt", [F16, BF16, F32, F64], ids=lambda f: f.name)
def test_magnitude_bits_round_trip(fmt):
    values = fmt.round([0.0, fmt.tiny, 1.0, 1.5, 3.0e4, fmt.largest])
    bits = fmt._magnitude_bits(values)
    assert bits.dtype == np.int64
    assert list(np.diff(bits) > 0) == [True] * 5
    np.testing.assert_array_equal(fmt.from_magnitude_bits(bits), values)
    assert fmt.from_magnitude_bits(bits).dtype == fmt.storage


NEIGHBOURS = [
    (F32, 1.0, 1 - 2.0**-24, 1 + 2.0**-23),
    (F32, 1 + 2.0**-30, 1 - 2.0**-24, 1 + 2.0**-23),  # the value is rounded first
    (F32, 0.0, -TINY32, TINY32),  # past the flushed subnormals
    (F32, TINY32, 0.0, TINY32 * (1 + 2.0**-23)),  # the subnormal below reads as 0
    (F32, -2.0, -2 - 2.0**-22, -2 + 2.0**-23),
    (F32, F32.largest, F32.largest - 2.0**104, np.inf),  # one ulp below, then inf
    (F64, 1.0, 1 - 2.0**-53, 1 + 2.0**-52),
    (F16, 0.0, -(2.0**-24), 2.0**-24),  # float16 keeps its subnormals
    (F16, 1.0, 1 - 2.0**-11, 1 + 2.0**-10),
    (BF16, 1.0, 1 - 2.0**-8, 1 + 2.0**-7),
    (BF16, -1.0, -1 - 2.0**-7, -1 + 2.0**-8),
    (BF16, 0.0, -(2.0**-126), 2.0**-126),
    (BF16, 3.0, 3 - 2.0**-6, 3 + 2.0**-6),
]


@pytest.mark.parametrize("fmt, value, lo, hi", NEIGHBOURS)
def test_neighbours_are_one_representable_number_away(fmt, value, lo, hi):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = fmt.neighbours(value)
    assert got == (lo, hi)
    assert all(type(v) is float for v in got)
