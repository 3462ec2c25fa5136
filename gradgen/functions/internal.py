"""Functions the derivation introduces and no spec names: guards, exact squares and
reciprocals, the ratio kept as written, NaN outside a domain, and numeric constants as
atoms.

Receives nothing from a spec (the parser never builds these); the stability rewrites,
guards and CSE build them, and the printer writes each as one TensorFlow form
(``tf.where``, ``tf.math.minimum``, ``x * x``...).
"""

from __future__ import annotations

import hashlib

import sympy
from sympy import S
from sympy.logic.boolalg import BooleanFunction

from ..pinned import srepr
from .base import RealUnary


class Guard(sympy.Function):
    """``u`` where ``cond`` holds, else ``safe`` (a value inside ``cond``'s region).

    The inner ``tf.where`` of the "double where" pattern (see :mod:`gradgen.stability.guards`).
    It is opaque to SymPy on purpose: a Piecewise in its place would be folded into the
    expression around it (``Piecewise((s, c), (1, True))**-1/2`` becomes
    ``Piecewise((s**-1/2, c), (1, True))``), which removes the guard.

    Its derivative is ``Guard(d u, cond, d safe)``: the derivative of the branch chosen
    (a guarded VJP, derived again, keeps its guard).
    """

    nargs = 3

    @classmethod
    def eval(cls, u, cond, safe):
        if cond is sympy.true:
            return u
        if cond is sympy.false:
            return safe

    def _eval_is_real(self):
        u, _, safe = self.args
        return (u.is_real and safe.is_real) or None

    def _eval_is_positive(self):
        # where(u != 0, u, safe) of a nonnegative u and a positive safe value (a norm
        # guarded at the origin): a derived order guards no division by it again
        u, cond, safe = self.args
        if cond == sympy.Ne(u, 0) and u.is_nonnegative and safe.is_positive:
            return True
        return None

    def _eval_derivative(self, s):
        u, cond, safe = self.args
        du, dsafe = u.diff(s), safe.diff(s)
        return S.Zero if du.is_zero and dsafe.is_zero else Guard(du, cond, dsafe)

    def _eval_evalf(self, prec):
        u, cond, safe = self.args
        chosen = cond.subs({}) if not isinstance(cond, sympy.Basic) else cond
        if chosen is sympy.true:
            return u._eval_evalf(prec)
        if chosen is sympy.false:
            return safe._eval_evalf(prec)
        return None


class Square(RealUnary):
    """``x * x``, kept as one opaque step so that powers are built by repeated squaring
    (``x**12 = Square(Square(Square(x))) * Square(Square(x))``) and shared by CSE."""

    @classmethod
    def eval(cls, arg):
        if arg.is_number:
            return arg**2

    def fdiff(self, argindex=1):
        return 2 * self.args[0]

    def _eval_evalf(self, prec):
        return (self.args[0] ** 2)._eval_evalf(prec)

    def _eval_is_nonnegative(self):
        return self.args[0].is_real or None


def squarings(base, n: int):
    """``base**n`` (n >= 1) by repeated squaring: a product of :class:`Square` steps
    (``x**12 = Square(Square(Square(x))) * Square(Square(x))``), which SymPy keeps as
    they are (``(x*y)**2`` would become ``x**2 * y**2``)."""
    factors, square = [], base
    while n:
        if n & 1:
            factors.append(square)
        n >>= 1
        if n:
            square = Square(square)
    return sympy.Mul(*factors)


class Recip(RealUnary):
    """``1 / x`` as one opaque step (SymPy would merge ``1/x`` into neighbouring powers of
    ``x``, undoing the squaring chains built from it)."""

    @classmethod
    def eval(cls, arg):
        if arg.is_number:
            return 1 / arg

    def fdiff(self, argindex=1):
        return -Recip(self.args[0]) ** 2

    def _eval_evalf(self, prec):
        return (1 / self.args[0])._eval_evalf(prec)


class Ratio(sympy.Function):
    """``a / b`` as one opaque step, for ``a**n * b**-n`` computed as ``(a / b)**n``: the
    ratio of two large (or small) numbers stays representable where their powers would
    overflow or underflow (``(sigma / r)**12`` at sigma, r ~ 1e4 in float32, whose
    ``sigma**12`` is inf and ``r**-12`` is 0); and the unit vector's component ``x /
    hypot(x, y)``. Derivatives: ``1/b`` and ``-(a/b)/b``, the ratio first (``-a/b**2``
    overflows where b**2 does: the Hessian of a norm at 1e-20 in float32); by a norm,
    from the unit vector's components (:func:`_norm_quotient_derivative`)."""

    nargs = 2

    @classmethod
    def eval(cls, a, b):
        if a.is_number and b.is_number:
            return a / b

    def fdiff(self, argindex=1):
        a, b = self.args
        return Recip(b) if argindex == 1 else -self * Recip(b)

    def _eval_derivative(self, s):
        normed = _norm_quotient_derivative(self, s)
        return normed if normed is not None else super()._eval_derivative(s)

    def _eval_evalf(self, prec):
        a, b = self.args
        return (a / b)._eval_evalf(prec)

    def _eval_is_real(self):
        a, b = self.args
        return (a.is_real and b.is_real and b.is_nonzero) or None


def _norm_quotient_derivative(ratio: "Ratio", s):
    """The derivative in ``s`` of ``ratio = A/h``, ``h = hypot(c1, c2, ...)`` (or a
    :class:`Guard` of it whose safe value is a number); None for another denominator.

    * A unit component, ``A = k*a`` with ``a`` one of the ``ci``: ``k*sum_c (c/h)*(((c/h)*da
      - (a/h)*dc) / h)`` over the other components ``c``: ``1 - (a/h)**2`` written as
      their squares (Pythagoras: h**2 - a**2 = c1**2 + ...), which does not cancel where
      ``|a|`` is far above them (a norm's second derivative ``(1 - (x/h)**2)/h`` was
      4.6% off at (1, 1e-3) in float32, and 0 at (1, 1e-10) in float64, where the exact
      ``y**2/h**3`` is 1e-20); each share divided by ``h`` before it meets ``c/h``
      again, since ``(y/h)**2`` underflows (0 at x = 1e-5, y = 1e-25 in float32, where
      the exact value is 1e-35).
    * Else the quotient rule with one division: ``(dA - (A/h)*dh) / h``, the difference
      formed before it is divided (each term divided by ``h`` overflows where ``h`` is
      tiny: atan2's mixed partial ``((x/h)**2 - (y/h)**2)/h**2`` was inf - inf at x = y =
      1.2e-38 in float32, where it is 0)."""
    from .smooth import hypot

    a, b = ratio.args
    h = b.args[0] if isinstance(b, Guard) and b.args[2].is_number else b
    if not isinstance(h, hypot):
        return None
    k, component = a.as_coeff_Mul()
    if isinstance(component, Ratio) and component.args[1] == b:
        twice = _twice_divided(component.args[0], b, h, s)
        if twice is not None:
            return k * twice
    if component.is_number or component not in h.args:
        return Ratio(a.diff(s) - ratio * b.diff(s), b)
    others = _others(h, component)
    unit, d_component = Ratio(component, b), component.diff(s)
    terms = [Ratio(c, b) * Ratio(Ratio(c, b) * d_component - unit * c.diff(s), b)
             for c in others]
    return k * sympy.Add(*terms)


def _others(h, component) -> list:
    others = list(h.args)
    others.remove(component)
    return others


def _twice_divided(a, b, h, s):
    """The derivative in ``s`` of ``(a/h)/h`` for ``a`` one of ``h``'s components
    (atan2's partials ``-y/(x**2 + y**2)``): ``((sum_c (c/h)**2 - (a/h)**2)*da -
    2*(a/h)*sum_c (c/h)*dc) / h / h``, with two components the difference of squares
    as ``(c/h - a/h)*(c/h + a/h)``: exactly 0 at |c| = |a| (atan2's mixed partial at x
    = y = 1.2e-38 in float32 was the rounding of two unequal forms of ``0.5/h**2``,
    times ``1/h**2``: inf), divided by ``h`` twice (``1/h**2`` overflows where the
    quotient does not). None where ``a`` is no component."""
    if a.is_number or a not in h.args:
        return None
    others = _others(h, a)
    unit, d_a = Ratio(a, b), a.diff(s)
    units = [Ratio(c, b) for c in others]
    if len(units) == 1:
        own = (units[0] - unit) * (units[0] + unit)
    else:
        own = sympy.Add(*(u**2 for u in units)) - unit**2
    cross = [2 * unit * u * c.diff(s) for u, c in zip(units, others)]
    return Ratio(Ratio(sympy.Add(own * d_a, *(-t for t in cross)), b), b)


class LogAbs(RealUnary):
    """``log(|x|)`` as one opaque step (SymPy would fold ``exp(u + log(|x|))`` back into
    ``|x| * exp(u)``, the product :mod:`gradgen.stability.guards.logscale` computes
    from logarithms because it overflows); -inf at 0."""

    @classmethod
    def eval(cls, arg):
        if arg.is_number and arg.is_nonzero:
            return sympy.log(abs(arg))

    def fdiff(self, argindex=1):
        return 1 / self.args[0]

    def _eval_evalf(self, prec):
        return sympy.log(abs(self.args[0]))._eval_evalf(prec)


class finite_or(sympy.Function):
    """``value`` where it is finite as computed, else ``scaled`` (the runtime helper
    ``_finite_or``): the same value by another computation, used only where the first
    overflowed or underflowed into NaN or inf (:mod:`gradgen.stability.guards.logscale`).
    Exactly ``value``, so its derivative is ``value``'s."""

    nargs = 2

    def _eval_is_real(self):
        return self.args[0].is_real

    def _eval_derivative(self, s):
        return self.args[0].diff(s)

    def _eval_evalf(self, prec):
        return self.args[0]._eval_evalf(prec)


class overflowed(BooleanFunction):
    """Whether ``u`` as computed is +-inf where its inputs are finite
    (``tf.math.is_inf(u)``): the condition of a form that holds only there, printed the
    same for every dtype. SymPy, whose real numbers are finite, never decides it."""

    nargs = 1

    @classmethod
    def eval(cls, u):
        return None


class nan_outside(sympy.Function):
    """``value`` where ``cond`` holds, NaN elsewhere (``tf.where(cond, value, nan)``).

    Keeps the domain of an expression as written after a rewrite that would extend it:
    ``exp(log1p(u))`` is NaN for u < -1, and ``1 + u`` is not, so the rewrite is
    ``nan_outside(1 + u, u >= -1)`` (PyTensor's ``local_exp_log_nan_switch``). The
    derivative is ``nan_outside(d value, cond)``.
    """

    nargs = 2

    @classmethod
    def eval(cls, value, cond):
        if cond is sympy.true:
            return value
        if cond is sympy.false:
            return S.NaN

    def _eval_derivative(self, s):
        value, cond = self.args
        d = value.diff(s)
        return S.Zero if d.is_zero else nan_outside(d, cond)

    def _eval_evalf(self, prec):
        value, cond = self.args
        if cond is sympy.true:
            return value._eval_evalf(prec)
        if cond is sympy.false:
            return S.NaN
        return None

    def _eval_is_real(self):
        return None


class Const(sympy.Symbol):
    """A numeric constant that is not a plain number (``sqrt(2/pi)``), held as an atom so
    that common-subexpression elimination leaves it inline; printed from ``value``."""

    def __new__(cls, value):
        name = "_const_" + hashlib.sha256(srepr(value).encode()).hexdigest()[:12]
        obj = super().__new__(cls, name, real=bool(value.is_real))
        obj.value = value
        return obj

    def __getnewargs__(self):
        return (self.value,)
