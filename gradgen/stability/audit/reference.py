"""The exact values the audit compares with: the op's expression *as written*, and its
derivatives, evaluated with mpmath at rising precision.

Consumes: an op's IR. Its ``reference`` statements hold the forward as the spec wrote it
(no stable rewrites, no guards, no common subexpressions); :class:`Reference`
substitutes them into one expression per output and differentiates each with SymPy.
Guarantees: :meth:`Reference.evaluate` returns, per point, the exact value rounded to
float64 and a class:

* ``FINITE``: two working precisions agree at the format's resolution (to 2**-(p + 8)
  relatively, or both below its smallest normal number, or both beyond its largest
  finite number, then ``OVERFLOW``). The first precision is the largest binary exponent
  among the inputs + 96 bits (at least 128), so that ``1 + x`` is exact for every input
  ``x``; each next one is twice the last, up to :data:`MAX_PREC` bits.
* ``OVERFLOW``: finite, but beyond the format's largest number: an inf is right there.
* ``UNDEFINED``: outside the real domain (a complex or NaN value), no agreement by
  :data:`MAX_PREC` bits, or 0/0 at the point with no common limit. Where the formula is
  0/0 (``sin(x)/x`` at 0), the value is the limit when the expression evaluated a tiny
  step away along a few directions (far below the format's resolution) agrees.

Undefined points are left out of the audit: a NaN there is never reported. A partial
derivative is undefined wherever its output is (outside the real domain of the forward
as written, its derivative's formula may still be real: ``-exp(x)/(1 - exp(x))``).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import sympy
from sympy.printing.pycode import MpmathPrinter

from ... import ir
from ...functions import declarations as fns
from ...pinned import LAMBDIFY_SETTINGS, Pinned
from ..formats import Format
from .mirror import UNBROADCAST_CALLS
from ..guards.limits import filled_points_smoothed

FINITE, OVERFLOW, UNDEFINED = 1, 2, 0
MAX_PREC = 1 << 14
AGREE_BITS = 8  # two precisions agree to 2**-(precision + AGREE_BITS) relatively


class _Unbounded(Exception):
    """An argument so large that mpmath's work (and memory) would be unbounded."""


# Arguments of magnitude beyond 2**MAX_MAGNITUDE_BITS are not evaluated (the point is
# not counted): float64's largest number is 2**1024 and its square fits, but an
# expression such as floor(y**sinh(y)) or sin(exp(exp(x))) goes far beyond at a float
# input, and there mpmath's exp, sin and integer powers take time and memory that grow
# with the magnitude's number of bits (y**sinh(y) at y = 1e38 shifted an int by 1.4e38
# bits: MemoryError; sin(exp(1e7)) ran for minutes; exp and sin at magnitude 2**16384
# take 10 s at 4096 bits of precision, at 2**2048 under 0.1 s).
MAX_MAGNITUDE_BITS = 2048


def _bounded(function):
    """``function`` refusing (:class:`_Unbounded`) an argument beyond the magnitude, real
    or complex (sin of a complex number with a huge real part took 11 s)."""

    def call(*args):
        if any(mpmath.mag(a) > MAX_MAGNITUDE_BITS for a in args
               if isinstance(a, (mpmath.mpf, mpmath.mpc)) and mpmath.isfinite(a)):
            raise _Unbounded()
        return function(*args)

    return call


def _pow(base, exponent):
    """``base**exponent``; an integer-valued exponent past 2**64 by exp and log, where
    mpmath's exact integer power would build an int of that many bits."""
    if (isinstance(exponent, mpmath.mpf) and mpmath.isfinite(exponent)
            and mpmath.mag(exponent) > 64 and mpmath.isint(exponent)
            and isinstance(base, mpmath.mpf) and mpmath.isfinite(base) and base != 0):
        magnitude = _exp(exponent * mpmath.log(abs(base)))
        # mpmath keeps an odd mantissa: the integer is odd when nothing is shifted in
        _, mantissa, shift, _ = exponent._mpf_
        odd = shift == 0 and mantissa & 1
        return -magnitude if base < 0 and odd else magnitude
    return base**exponent


_exp = _bounded(mpmath.exp)

# How the functions of the expression language evaluate (by printed name), from their
# declarations (gradgen.functions), mpmath's functions whose work grows with their
# argument's magnitude bounded. The forward as written holds no other gradgen function
# (xlogy, logsumexp, Square... are what rewrites and the printer introduce); one that
# appeared would fall back to :func:`_evalf_function`.
_NAMESPACE = {
    "_pow": _pow,
    **{cls.__name__: _bounded(f.mpmath) if f.grows else f.mpmath
       for f in fns.FUNCTIONS if f.mpmath is not None for cls in f.classes},
}


class _ReferencePrinter(Pinned, MpmathPrinter):
    """SymPy's mpmath printer, with a power whose exponent is not a number as
    :func:`_pow` (a number's power, x**2 or sqrt, prints as before), and ``overflowed``
    (a guard's condition, in a derived order's reference) as False: exact values do not
    overflow, and the guard's forms are equal."""

    def _print_Pow(self, expr, rational=False):
        if expr.exp.is_number:
            return super()._print_Pow(expr, rational=rational)
        return f"_pow({self._print(expr.base)}, {self._print(expr.exp)})"

    def _print_overflowed(self, expr):
        return "False"


def _evalf_function(cls):
    """Fallback for a function the namespace lacks: SymPy's evalf at the working
    precision (slow, but exact; every gradgen function evaluates through evalf). A
    condition argument (a Guard's, in a derived order's reference) is a Python bool."""

    def call(*args):
        prec = mpmath.mp.prec
        value = cls(*(sympy.true if a is True else sympy.false if a is False
                      else sympy.Float(a, precision=prec) for a in args)).evalf(
            n=int(prec / 3.32) + 5
        )
        if not value.is_real:
            return mpmath.nan
        return mpmath.mpf(value._to_mpmath(prec))

    return call


def _tree_size(expr, sizes: dict) -> int:
    """Nodes of ``expr`` as a tree, a symbol named in ``sizes`` counting as its size."""
    if isinstance(expr, sympy.Symbol):
        return sizes.get(expr.name, 1)
    return 1 + sum(_tree_size(a, sizes) for a in expr.args)


def _outputs(op: ir.OpIR) -> list[sympy.Expr]:
    """Each output of the forward as written, in the input symbols.

    A derived order's VJP op (its forward the first-order VJP) unbroadcasts gradients
    and broadcasts them back: over sample points of one shape these are the identity
    (:data:`.mirror.UNBROADCAST_CALLS`; :func:`.mirror.elementwise_reason` lets them
    through for such ops only).

    Raises:
        NotImplementedError: the forward as written holds a call other than an integer
            input's cast or an unbroadcast (a tensor operation: such ops are not
            elementwise), an output is not written in the inputs, or the tree is too
            large to audit.
    """
    values: dict = {}
    for stmt in op.reference:
        value = stmt.value
        while isinstance(value, ir.Call):
            if value.fn != "cast" and value.fn not in UNBROADCAST_CALLS:
                raise NotImplementedError(f"{value.fn} in the forward as written")
            value = value.args[0]
        values[stmt.target] = value
    # Tree sizes with earlier targets written out, bounded before anything is built:
    # a chain of intermediates each used twice doubles at every step.
    sizes: dict = {}
    for target, value in values.items():
        sizes[target] = _tree_size(value, sizes)
        if sizes[target] > MAX_REFERENCE_SIZE:
            raise NotImplementedError(
                f"the expression as written has more than {MAX_REFERENCE_SIZE} nodes "
                "when its intermediates are written out"
            )
    # earlier targets by name (their symbols may carry assumptions: real, nonnegative)
    by_name: dict = {}
    for target, value in values.items():
        swap = {s: by_name[s.name] for s in value.free_symbols if s.name in by_name}
        by_name[target] = value.xreplace(swap) if swap else value
    inputs = {i.name for i in op.inputs}
    out = []
    for o in op.outputs:
        value = sympy.sympify(by_name.get(o.name, sympy.Symbol(o.name)))
        unknown = sorted(s.name for s in value.free_symbols if s.name not in inputs)
        if unknown:
            raise NotImplementedError(
                f"output {o.name} is not written in the inputs ({', '.join(unknown)})")
        out.append(value)
    return out


# Largest tree (intermediates substituted, shared parts counted each time) audited.
MAX_REFERENCE_SIZE = 3000


class Reference:
    """The forward as written and its partial derivatives, ready to evaluate.

    Attributes:
        symbols: the input symbols, in input order.
        targets: ``(output index, input name or None, expression)``: None is the output
            itself; an input name, the output's partial derivative by that input.
    """

    def __init__(self, op: ir.OpIR):
        self.symbols = [sympy.Symbol(i.name, real=True) for i in op.inputs]
        by_name = {s.name: s for s in self.symbols}
        differentiable = [i.name for i in op.inputs if i.grad]
        self.targets = []
        for k, expr in enumerate(_outputs(op)):
            # symbols equal by name: reference symbols may carry assumptions
            expr = expr.xreplace({s: by_name[s.name] for s in expr.free_symbols
                                  if s.name in by_name})
            self.targets.append((k, None, expr))
            smooth = filled_points_smoothed(expr)
            for name in differentiable:
                self.targets.append((k, name, sympy.diff(smooth, by_name[name])))
        self._functions = [self._compile(e) for _, _, e in self.targets]
        self._together = self._compile([e for _, _, e in self.targets], cse=True)

    def _compile(self, expr, cse=False):
        namespace = dict(_NAMESPACE)
        for f in (sympy.Tuple(*expr) if cse else expr).atoms(sympy.Function):
            name = type(f).__name__
            # Piecewise: the mpmath printer writes it as a conditional expression
            if name not in namespace and name != "Piecewise" and not hasattr(mpmath, name):
                namespace[name] = _evalf_function(type(f))
        # lambdify's own printer settings for these modules, with powers as _pow
        printer = _ReferencePrinter({**LAMBDIFY_SETTINGS,
                                     "user_functions": {k: k for k in namespace}})
        return sympy.lambdify(self.symbols, expr, modules=[namespace, "mpmath"], cse=cse,
                              printer=printer)

    # ------------------------------------------------------------------ evaluation

    def defined(self, exact: list, k: int) -> np.ndarray:
        """Where output ``k`` as written is defined (its class in ``exact``, what
        :meth:`evaluate` returned, not UNDEFINED): inside the real domain, a pole of a
        partial included."""
        t = next(t for t, (j, name, _) in enumerate(self.targets) if j == k and name is None)
        return exact[t][1] != UNDEFINED

    def evaluate(self, fmt: Format, points: dict) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per target, (exact values as float64, classes) at every point."""
        columns = [np.asarray(points[s.name], dtype=np.float64) for s in self.symbols]
        n = len(columns[0]) if columns else 1
        results = [(np.full(n, np.nan), np.zeros(n, dtype=np.int8)) for _ in self.targets]
        for j in range(n):
            point = [float(c[j]) for c in columns]
            for t, (value, kind) in enumerate(self._exact(point, fmt)):
                results[t][0][j] = value
                results[t][1][j] = kind
        # A derivative counts only where its output is a real number: outside the
        # domain (log(1 - exp(x)) for x > 0) the derivative's formula may still be real.
        forward = {k: results[t][1] for t, (k, name, _) in enumerate(self.targets)
                   if name is None}
        for t, (k, name, _) in enumerate(self.targets):
            if name is not None:
                undefined = forward[k] == UNDEFINED
                results[t][1][undefined] = UNDEFINED
                results[t][0][undefined] = np.nan
        return results

    def _values(self, point, prec) -> list:
        """Every target at ``point`` with ``prec`` bits (see :func:`_call`): all at once
        (their common subexpressions computed once), or one by one where that fails."""
        together = _call(self._together, point, prec, many=True)
        if together is not None:
            return together
        return [_call(f, point, prec) for f in self._functions]

    def _exact(self, point, fmt: Format) -> list[tuple[float, int]]:
        prec = _start_prec(point)
        previous = self._values(point, prec)
        out: list = [None] * len(self.targets)
        for t, v in enumerate(previous):
            if v is _DOMAIN:
                out[t] = (math.nan, UNDEFINED)
        while prec < MAX_PREC and any(o is None for o in out):
            prec = min(prec * 2, MAX_PREC)
            values = self._values(point, prec)
            for t, value in enumerate(values):
                if out[t] is not None:
                    continue
                if value is _DOMAIN:
                    out[t] = (math.nan, UNDEFINED)
                    continue
                agree, kind = _classify(previous[t], value, fmt)
                if agree:
                    out[t] = (_limit(self._functions[t], point, fmt) if kind == UNDEFINED
                              else (float(value), kind))
            previous = values
        return [o if o is not None else (math.nan, UNDEFINED) for o in out]


def _start_prec(point) -> int:
    exponent = max((abs(math.frexp(v)[1]) for v in point if v != 0), default=0)
    return max(exponent + 96, 128)


_DOMAIN = "domain"  # a complex value: the point is outside the real domain


def _call(f, point, prec, many=False):
    """The value at ``point`` with ``prec`` bits; None where it is 0/0 or NaN (a limit
    may exist), :data:`_DOMAIN` where it is complex or an argument is beyond
    :data:`MAX_MAGNITUDE_BITS` (not counted). With ``many``, ``f`` returns a sequence:
    the list of those, or None if ``f`` raised."""
    with mpmath.workprec(prec):
        try:
            value = f(*(mpmath.mpf(v) for v in point))
        except (ZeroDivisionError, OverflowError):
            return None
        # a complex value met where mpmath takes only reals: compared in a condition
        # (TypeError), or in atan2 (AttributeError: 'mpc' object has no attribute
        # '_mpf_', atan2(atan2(3/y, log(y)), y) at y < 0)
        except (ValueError, TypeError, AttributeError):
            return None if many else _DOMAIN
        except _Unbounded:  # not evaluated: the point is not counted
            return None if many else _DOMAIN
        if many:
            return [_real(v) for v in value]
        return _real(value)


# mpmath's lazy constants (mpmath.pi, mpmath.e: what lambdify prints for pi and E, as a
# partial such as d(pi*x)/dx = pi is) are not mpf instances until evaluated.
_CONSTANT = type(mpmath.pi)


def _real(value):
    """``value`` as an mpf at the working precision; :data:`_DOMAIN` where it is
    complex; None where it is NaN or not a number."""
    if isinstance(value, (int, float, _CONSTANT)):
        value = mpmath.mpf(value)
    if isinstance(value, mpmath.mpc):
        return _DOMAIN
    if not isinstance(value, mpmath.mpf) or mpmath.isnan(value):
        return None
    return value


def _classify(a, b, fmt: Format):
    """(agree, kind) for two evaluations at different precisions."""
    if a is None or b is None:
        return (a is None and b is None), UNDEFINED
    if mpmath.isinf(a) or mpmath.isinf(b):
        return a == b, OVERFLOW
    limit = fmt.largest * (1 + 2.0 ** -fmt.precision)
    if abs(a) > limit and abs(b) > limit:
        return (a > 0) == (b > 0), OVERFLOW
    if abs(a) < fmt.tiny and abs(b) < fmt.tiny:
        return True, FINITE
    tolerance = mpmath.ldexp(max(abs(a), abs(b)), -(fmt.precision + AGREE_BITS))
    return abs(a - b) <= tolerance, FINITE


# Directions of approach for a 0/0 point: along all inputs, against, and mixed.
_DIRECTIONS = ((1.0, 0.625, 0.375, 0.8125), (-1.0, -0.5625, -0.6875, -0.3125),
               (0.75, -1.0, 0.5, -0.875))


_SLOWER = 2.0 ** -16


def _limit(f, point, fmt: Format) -> tuple[float, int]:
    """The common value a tiny step away from ``point`` along each direction (with
    several inputs, also with each input in turn moving :data:`_SLOWER` times as far),
    if the steps agree and a step as many bits smaller again gives the same value (a removable
    singularity such as sin(x)/x at 0); else UNDEFINED (no limit, or a pole: 1/sqrt(x)
    at 0 is 8e31 a step of 2**-88 times float32's smallest normal away, and grows).

    A coordinate ``v`` moves by ``|v| * 2**-(p + 64)`` (``p`` the format's precision),
    and 0 by the smallest normal number times that: far below the format's resolution,
    so the value there is the limit rounded to the format. The formula cancels there:
    ``(exp(x) - 1 - x) / x**2`` loses twice the step's binary exponent in bits, its
    derivative four times, so each value is evaluated from four times the exponent's
    bits up until two precisions agree (:func:`_converged`); a fixed precision gave 0
    for limits of 1/2.
    """
    step_bits = fmt.precision + 64
    directions = _DIRECTIONS if len(point) > 1 else _DIRECTIONS[:2]
    steps = [(step_bits, d) for d in directions] + [(2 * step_bits, directions[0])]
    if len(point) > 1:
        # each input in turn moving far less than the others: a 0/0 of two inputs
        # (sigma/r at r = sigma = 0) has no limit, though along every ray through the
        # point 4*eps*((sigma/r)**12 - (sigma/r)**6) at 0, 0, 0 tends to 0
        first = [_DIRECTIONS[0][i % len(_DIRECTIONS[0])] for i in range(len(point))]
        steps += [(step_bits, tuple(_SLOWER if j == i else d for j, d in enumerate(first)))
                  for i in range(len(point))]
    first_value, kind = None, FINITE
    for bits, direction in steps:  # the first disagreement ends it
        value = _stepped(f, point, fmt, bits, direction)
        if value is None:
            return math.nan, UNDEFINED
        if first_value is None:
            first_value = value
            continue
        agree, kind = _classify(first_value, value, fmt)
        if not agree:
            return math.nan, UNDEFINED
    if kind == OVERFLOW:
        return math.nan, UNDEFINED  # a pole: infinite, not a number to compare with
    return float(first_value), FINITE


def _stepped(f, point, fmt: Format, step_bits: int, direction):
    """``f`` a step of ``2**-step_bits`` (relative; for 0, times the smallest normal)
    from ``point`` along ``direction`` (:func:`_converged`)."""
    # the moved point is exact at this precision (at 53 bits, 1 + 2**-117 is 1)
    point_prec = 2 * (_start_prec(point) + step_bits) + 128
    with mpmath.workprec(point_prec):
        moved = []
        for i, v in enumerate(point):
            scale = abs(v) if v != 0 else fmt.tiny
            d = direction[i % len(direction)]
            moved.append(mpmath.mpf(v) + mpmath.ldexp(mpmath.mpf(scale), -step_bits) * d)
    exponent = max(abs(int(mpmath.frexp(m)[1])) for m in moved if m != 0)
    prec = min(4 * (exponent + step_bits) + 128, MAX_PREC // 2)
    return _converged(f, moved, prec, fmt)


def _converged(f, point, prec, fmt: Format):
    """``f`` at ``point`` once two precisions from ``prec`` up (doubling, at most
    :data:`MAX_PREC` bits) agree at the format's resolution; None where it is not a
    real number or does not settle."""
    previous = _call(f, point, prec)
    if previous is None or previous is _DOMAIN:
        return None
    while prec < MAX_PREC:
        prec = min(prec * 2, MAX_PREC)
        value = _call(f, point, prec)
        if value is None or value is _DOMAIN:
            return None
        agree, _ = _classify(previous, value, fmt)
        if agree:
            return value
        previous = value
    return None
