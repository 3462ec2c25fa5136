"""Floating-point formats as the guards and the audit see them: precision, range,
ordinals, rounding.

Consumes: a TensorFlow float dtype name. Guarantees: :func:`get` returns a
:class:`Format` that rounds float64 values to the dtype exactly as a cast does
(round to nearest even, overflow to inf), flushes subnormals to zero where TensorFlow's
CPU kernels do, and numbers the finite values by *ordinal* so that the distance between
two values is a count of representable numbers (Herbie's ``repr-ulps``).

Subnormals: TensorFlow runs CPU kernels with flush-to-zero and denormals-are-zero set
(``port::ScopedFlushDenormal``), so float32, float64 and bfloat16 (computed in float32)
never see a subnormal: a subnormal result is 0 and a subnormal input reads as 0.
float16 is computed in float32 and rounded back, and float16 subnormals are normal
float32 numbers, so they survive. Under flush-to-zero the ordinals skip the subnormal
range: 0 and the smallest normal number are one ulp apart.

bfloat16 is emulated: values are held in float32 and rounded to bfloat16 (the top 16
bits, to nearest even) after every operation, as TensorFlow's bfloat16 kernels do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Format:
    """One float format.

    Attributes:
        name: TensorFlow dtype name.
        storage: NumPy dtype holding values (float32 for emulated bfloat16).
        precision: significand bits, the implicit one included.
        width: total bits (a NaN or inf scores this many bits of error, as in Herbie).
        tiny: smallest normal number.
        largest: largest finite number.
        ftz: subnormals flush to zero (inputs and results).
    """

    name: str
    storage: type
    precision: int
    width: int
    tiny: float
    largest: float
    ftz: bool

    @property
    def emulated(self) -> bool:
        return self.name == "bfloat16"

    # ------------------------------------------------------------------ rounding

    def round(self, values) -> np.ndarray:
        """float64 (or any float) values rounded to this format, in ``storage``."""
        a = np.asarray(values)
        with np.errstate(over="ignore", invalid="ignore"):
            if self.emulated:
                a = _round_bfloat16(a.astype(np.float32))
            else:
                a = a.astype(self.storage)
        return self.flush(a)

    def flush(self, a: np.ndarray) -> np.ndarray:
        """Subnormals to (signed) zero where this format's kernels flush them."""
        if not self.ftz or a.dtype.kind != "f":
            return a
        small = np.abs(a) < self.tiny
        if small.any():
            a = np.where(small, np.copysign(np.zeros_like(a), a), a)
        return a

    # ------------------------------------------------------------------ ordinals

    def ordinal(self, values) -> np.ndarray:
        """Signed ordinal of each finite value, as int64 (zeros are 0)."""
        a = self.round(values)
        sign = np.signbit(a)
        raw = self._magnitude_bits(np.abs(a))
        if self.ftz:
            tiny = self._magnitude_bits([self.tiny])[0]
            raw = np.where(raw >= tiny, raw - tiny + 1, 0)
        return np.where(sign, -raw, raw)

    def _magnitude_bits(self, magnitude) -> np.ndarray:
        """The bit pattern of each non-negative value (any float; converted to
        ``storage``, exactly for values of this format), as int64."""
        m = np.ascontiguousarray(magnitude, dtype=self.storage)
        if self.emulated:
            return (m.view(np.uint32) >> np.uint32(16)).astype(np.int64)
        unsigned = {2: np.uint16, 4: np.uint32, 8: np.uint64}[m.dtype.itemsize]
        return m.view(unsigned).astype(np.int64)

    def from_magnitude_bits(self, bits: np.ndarray) -> np.ndarray:
        """Non-negative values from magnitude bit patterns (inverse of the above)."""
        bits = np.asarray(bits)
        if self.emulated:
            return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)
        unsigned = {2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(self.storage).itemsize]
        return bits.astype(unsigned).view(self.storage)

    def neighbours(self, value: float) -> tuple[float, float]:
        """The representable numbers just below and just above ``value`` (rounded),
        past the flushed subnormal range where this format flushes it."""
        v = self.round([value])
        if self.ftz and v[0] == 0:
            return -self.tiny, self.tiny
        if self.emulated:  # one step of the bfloat16 bit pattern (sign bit included)
            bits = int(v.view(np.uint32)[0] >> 16)
            steps = [bits - 1, bits + 1] if v[0] > 0 else [bits + 1, bits - 1]
            near = (np.asarray(steps, dtype=np.uint32) << np.uint32(16)).view(np.float32)
        else:
            x = v.astype(self.storage)[0]
            with np.errstate(over="ignore"):  # above the largest number is inf
                near = np.asarray([np.nextafter(x, self.storage(-np.inf)),
                                   np.nextafter(x, self.storage(np.inf))])
        lo, hi = self.flush(near)
        return float(lo), float(hi)


def _round_bfloat16(a: np.ndarray) -> np.ndarray:
    """float32 -> nearest bfloat16 (ties to even), returned as float32."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    out = rounded.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(a), a, out).astype(np.float32)


_FORMATS = {
    "float16": Format("float16", np.float16, 11, 16, 2.0**-14, 65504.0, False),
    "bfloat16": Format("bfloat16", np.float32, 8, 16, 2.0**-126,
                       float((2 - 2.0**-7) * 2.0**127), True),
    "float32": Format("float32", np.float32, 24, 32, 2.0**-126,
                      float(np.finfo(np.float32).max), True),
    "float64": Format("float64", np.float64, 53, 64, 2.0**-1022,
                      float(np.finfo(np.float64).max), True),
}


def get(dtype: str) -> Format | None:
    """The format of a TensorFlow float dtype name, or None (complex, integer)."""
    return _FORMATS.get(dtype)
