"""SymPy functions for TensorFlow's stable primitives and gradgen's kink conventions.

SymPy has no ``sigmoid``, ``softplus``, ``xlogy`` or ``logsumexp``;
:mod:`sympy.codegen.cfunctions` has ``log1p`` and ``expm1``. Each function here knows
its derivative (``fdiff``) in terms of stable primitives, so differentiating a stable
forward form gives a stable backward form (``softplus' = sigmoid``), and evaluates
numerically at any precision (``evalf`` through its defining formula), which the
high-precision reference in the tests relies on.

Definitions (as TensorFlow's ``tf.math`` functions of the same names):
    sigmoid(x) = 1 / (1 + exp(-x))
    softplus(x) = log(1 + exp(x))
    xlogy(x, y) = x * log(y), and 0 where x = 0 (also when y = 0)
    xdivy(x, y) = x / y, and 0 where x = 0 (also when y = 0)
    xlog1py(x, y) = x * log1p(y), and 0 where x = 0 (also when y = -1)
    mul_no_nan(x, y) = x * y, and 0 where y = 0 (also when x is inf or NaN)
    logsumexp(u1, ..., un) = log(exp(u1) + ... + exp(un))
    log1mexp(x) = log(1 - exp(x)), x <= 0 (no TensorFlow kernel: a module helper)
    nan_outside(v, cond) = v where cond holds, else NaN (keeps a written form's domain)

Non-smooth functions carry gradgen's subgradient conventions (README, "Kinks"):
    sign, floor, ceiling, Heaviside: derivative 0 everywhere (TensorFlow's convention
        for sign, floor and ceil; the Dirac delta at the jump is dropped);
    Max, Min: at a tie the derivative is split equally between the tied arguments, so
        the weights always sum to 1 (as ``tf.reduce_max``'s gradient does);
    Heaviside(0) = 1/2 (SymPy's default).
"""

from __future__ import annotations

import hashlib

import sympy
from sympy import S
from sympy.codegen.cfunctions import expm1, log1p

__all__ = [
    "sigmoid",
    "softplus",
    "log1p",
    "expm1",
    "xlogy",
    "xdivy",
    "xlog1py",
    "mul_no_nan",
    "logsumexp",
    "sign",
    "floor",
    "ceiling",
    "Heaviside",
    "Max",
    "Min",
    "Guard",
    "Square",
    "Recip",
    "Ratio",
    "logcosh",
    "log1mexp",
    "nan_outside",
    "erfc",
    "erfcx",
    "log_erfc",
    "hypot",
    "Const",
]


class _Unary(sympy.Function):
    """A function of one argument that is real where its argument is real."""

    nargs = 1

    def _eval_is_real(self):
        return self.args[0].is_real


class sigmoid(_Unary):
    """Logistic function ``1 / (1 + exp(-x))``; real for real ``x``, values in (0, 1)."""

    @classmethod
    def eval(cls, arg):
        if arg.is_zero:
            return S.Half

    def fdiff(self, argindex=1):
        # sigmoid(x) * (1 - sigmoid(x)), written without the cancellation in 1 - s
        # that loses every digit for x > 17 in float32.
        x = self.args[0]
        return sigmoid(x) * sigmoid(-x)

    def _eval_rewrite_as_exp(self, arg, **kwargs):
        return 1 / (1 + sympy.exp(-arg))

    def _eval_evalf(self, prec):
        return self.rewrite(sympy.exp)._eval_evalf(prec)

    def _eval_conjugate(self):
        return sigmoid(self.args[0].conjugate())

    def _eval_is_positive(self):
        return self.args[0].is_real or None

    def _eval_is_finite(self):
        return self.args[0].is_real or None


class softplus(_Unary):
    """``log(1 + exp(x))``, computed without overflow; real and positive for real ``x``."""

    @classmethod
    def eval(cls, arg):
        if arg.is_zero:
            return sympy.log(2)

    def fdiff(self, argindex=1):
        return sigmoid(self.args[0])

    def _eval_rewrite_as_exp(self, arg, **kwargs):
        return sympy.log(1 + sympy.exp(arg))

    _eval_rewrite_as_log = _eval_rewrite_as_exp

    def _eval_evalf(self, prec):
        return self.rewrite(sympy.exp)._eval_evalf(prec)

    def _eval_conjugate(self):
        return softplus(self.args[0].conjugate())

    def _eval_is_positive(self):
        return self.args[0].is_real or None

    def _eval_is_finite(self):
        return self.args[0].is_real or None


class xlogy(sympy.Function):
    """``x * log(y)``, defined as 0 where ``x = 0`` (``tf.math.xlogy``).

    Partials (exact, also at x = 0: ``xlogy(h, y) = h * log(y)``):
        d/dx = log(y); d/dy = xdivy(x, y).
    TensorFlow's own gradient of ``tf.math.xlogy`` returns 0 for d/dx at x = 0, which is
    wrong unless y = 1; gradgen uses the exact partial.
    """

    nargs = 2

    @classmethod
    def eval(cls, x, y):
        if x.is_zero:
            return S.Zero
        if y == 1:
            return S.Zero

    def fdiff(self, argindex=1):
        x, y = self.args
        return sympy.log(y) if argindex == 1 else xdivy(x, y)

    def _eval_evalf(self, prec):
        x, y = self.args
        if x.is_zero:
            return S.Zero
        return (x * sympy.log(y))._eval_evalf(prec)

    def _eval_is_real(self):
        x, y = self.args
        return (x.is_real and y.is_positive) or None


class xlog1py(sympy.Function):
    """``x * log1p(y)``, defined as 0 where ``x = 0`` (``tf.math.xlog1py``; SciPy's
    ``special.xlog1py``).

    Partials (exact, also at x = 0): d/dx = log1p(y); d/dy = xdivy(x, 1 + y).
    The cross-entropy term ``(1 - t) * log(1 - p)`` becomes ``xlog1py(1 - t, -p)``: 0 at
    t = p = 1, where ``0 * log(0)`` would be NaN.
    """

    nargs = 2

    @classmethod
    def eval(cls, x, y):
        if x.is_zero or y.is_zero:
            return S.Zero

    def fdiff(self, argindex=1):
        x, y = self.args
        return log1p(y) if argindex == 1 else xdivy(x, 1 + y)

    def _eval_evalf(self, prec):
        x, y = self.args
        if x.is_zero:
            return S.Zero
        return (x * sympy.log(1 + y))._eval_evalf(prec)

    def _eval_is_real(self):
        x, y = self.args
        return (x.is_real and (y + 1).is_positive) or None


class xdivy(sympy.Function):
    """``x / y``, defined as 0 where ``x = 0`` (``tf.math.xdivy``).

    Partials: d/dx = 1/y; d/dy = xdivy(-x, y**2) (0 where x = 0, where xdivy is 0 for
    every y).
    """

    nargs = 2

    @classmethod
    def eval(cls, x, y):
        if x.is_zero:
            return S.Zero

    def fdiff(self, argindex=1):
        x, y = self.args
        return 1 / y if argindex == 1 else xdivy(-x, y**2)

    def _eval_evalf(self, prec):
        x, y = self.args
        if x.is_zero:
            return S.Zero
        return (x / y)._eval_evalf(prec)

    def _eval_is_real(self):
        x, y = self.args
        return (x.is_real and y.is_real) or None


class mul_no_nan(sympy.Function):
    """``x * y``, defined as 0 where ``y = 0``, even where ``x`` is inf or NaN
    (``tf.math.multiply_no_nan``).

    Partials: d/dx = y; d/dy = x (TensorFlow's ``MulNoNan`` gradient takes
    ``mul_no_nan(upstream, y)`` for x, so x's cotangent is 0 where y is).
    """

    nargs = 2

    @classmethod
    def eval(cls, x, y):
        if y.is_zero:
            return S.Zero

    def fdiff(self, argindex=1):
        x, y = self.args
        return y if argindex == 1 else x

    def _eval_evalf(self, prec):
        x, y = self.args
        return (x * y)._eval_evalf(prec)

    def _eval_is_real(self):
        x, y = self.args
        return (x.is_real and y.is_real) or None


class logsumexp(sympy.Function):
    """``log(exp(u1) + ... + exp(un))``, computed as ``m + log(sum(exp(ui - m)))`` with
    ``m`` the largest ``ui``, so it neither overflows nor underflows to ``-inf``.
    ``logsumexp(0, w)`` is ``softplus(w)``.

    Partials: d/dui = 1 / (1 + sum over j != i of exp(uj - ui)), the softmax weight of
    ui written with differences of inputs only (for two terms: ``sigmoid(ui - uj)``);
    ``exp(ui - logsumexp(u))`` would lose the digits of ``ui - logsumexp(u)`` when the
    terms are large (|u| = 1e4 in float32: an error of 5e-4).
    """

    @classmethod
    def eval(cls, *args):
        if len(args) == 1:
            return args[0]
        if len(args) == 2 and S.Zero in args:
            return softplus(args[0] if args[1] == 0 else args[1])
        ordered = tuple(sorted(args, key=sympy.default_sort_key))
        if ordered != tuple(args):  # canonical order, so equal sums are equal (CSE)
            return cls(*ordered)

    def fdiff(self, argindex=1):
        mine = self.args[argindex - 1]
        others = [a for i, a in enumerate(self.args) if i != argindex - 1]
        return softmax_weight(mine, others)

    def _eval_rewrite_as_exp(self, *args, **kwargs):
        return sympy.log(sympy.Add(*(sympy.exp(a) for a in args)))

    def _eval_evalf(self, prec):
        return self.rewrite(sympy.exp)._eval_evalf(prec)

    def _eval_is_real(self):
        return all(a.is_real for a in self.args) or None


def softmax_weight(mine, others):
    """``exp(mine) / (exp(mine) + sum(exp(o) for o in others))`` in its stable form
    ``1 / (1 + sum(exp(o - mine)))`` (``sigmoid(mine - o)`` for one other term)."""
    if len(others) == 1:
        return sigmoid(mine - others[0])
    return 1 / (1 + sympy.Add(*(sympy.exp(o - mine) for o in others)))


class sign(sympy.sign):
    """``sign(x)`` with derivative 0 (TensorFlow's convention; SymPy's is 2*DiracDelta)."""

    def _eval_derivative(self, x):
        return S.Zero

    def fdiff(self, argindex=1):
        return S.Zero


class floor(sympy.floor):
    """``floor(x)`` with derivative 0 (SymPy leaves it unevaluated)."""

    def fdiff(self, argindex=1):
        return S.Zero


class ceiling(sympy.ceiling):
    """``ceiling(x)`` with derivative 0 (SymPy leaves it unevaluated)."""

    def fdiff(self, argindex=1):
        return S.Zero


class Heaviside(_Unary):
    """Unit step: 0 for x < 0, 1/2 at 0, 1 for x > 0; derivative 0."""

    @classmethod
    def eval(cls, arg):
        if arg.is_extended_positive:
            return S.One
        if arg.is_extended_negative:
            return S.Zero
        if arg.is_zero:
            return S.Half

    def fdiff(self, argindex=1):
        return S.Zero

    @property
    def pargs(self):
        """The arguments to print (SymPy's string printer reads this for Heaviside)."""
        return self.args

    def as_piecewise(self):
        """The same function as indicators (how it is printed): [u > 0] + [u = 0]/2."""
        u = self.args[0]
        return indicator(u > 0) + indicator(sympy.Eq(u, 0)) / 2

    def _eval_rewrite_as_Piecewise(self, arg, **kwargs):
        return self.as_piecewise()

    def _eval_evalf(self, prec):
        return self.as_piecewise()._eval_evalf(prec)


def indicator(cond):
    """1 where ``cond`` holds, else 0 (printed as ``tf.cast(cond, dtype)``)."""
    return sympy.Piecewise((1, cond), (0, True))


class _Extremum(sympy.Function):
    """Shared logic of :class:`Max` and :class:`Min` (n-ary, flattened, canonical)."""

    _better = None  # StrictGreaterThan for Max, StrictLessThan for Min
    _pick = None  # max or min of Python numbers

    @classmethod
    def eval(cls, *args):
        if not args:
            raise ValueError(f"{cls.__name__} needs at least one argument")
        flat = []
        for a in args:
            flat.extend(a.args if isinstance(a, cls) else [a])
        numbers = [a for a in flat if a.is_number and a.is_real]
        others = [a for a in flat if not (a.is_number and a.is_real)]
        if numbers:
            best = numbers[0]
            for n in numbers[1:]:
                if cls._better(n, best) == sympy.true:
                    best = n
            others.append(best)
        unique = sorted(set(others), key=sympy.default_sort_key)
        if len(unique) == 1:
            return unique[0]
        if tuple(unique) != tuple(args):
            return cls(*unique)

    def fdiff(self, argindex):
        args = self.args
        mine = args[argindex - 1]
        if len(args) == 2:
            other = args[2 - argindex]
            return indicator(self._better(mine, other)) + indicator(sympy.Eq(mine, other)) / 2
        ties = sympy.Add(*(indicator(sympy.Eq(a, self)) for a in args))
        return indicator(sympy.Eq(mine, self)) / ties

    def _eval_is_real(self):
        return all(a.is_real for a in self.args) or None

    def _eval_evalf(self, prec):
        values = [a._eval_evalf(prec) for a in self.args]
        if any(v is None for v in values):
            return None
        return self._pick(values)


class Max(_Extremum):
    """Largest argument. At a tie each tied argument's derivative weight is 1/(ties)."""

    _better = sympy.StrictGreaterThan
    _pick = staticmethod(max)


class Min(_Extremum):
    """Smallest argument. At a tie each tied argument's derivative weight is 1/(ties)."""

    _better = sympy.StrictLessThan
    _pick = staticmethod(min)


class Guard(sympy.Function):
    """``u`` where ``cond`` holds, else ``safe`` (a value inside ``cond``'s region).

    The inner ``tf.where`` of the "double where" pattern (see :mod:`gradgen.stability.guards`).
    It is opaque to SymPy on purpose: a Piecewise in its place would be folded into the
    expression around it (``Piecewise((s, c), (1, True))**-1/2`` becomes
    ``Piecewise((s**-1/2, c), (1, True))``), which removes the guard.
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

    def _eval_evalf(self, prec):
        u, cond, safe = self.args
        chosen = cond.subs({}) if not isinstance(cond, sympy.Basic) else cond
        if chosen is sympy.true:
            return u._eval_evalf(prec)
        if chosen is sympy.false:
            return safe._eval_evalf(prec)
        return None


class Square(_Unary):
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


class Recip(_Unary):
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
    ``sigma**12`` is inf and ``r**-12`` is 0). Derivatives: ``1/b`` and ``-a/b**2``."""

    nargs = 2

    @classmethod
    def eval(cls, a, b):
        if a.is_number and b.is_number:
            return a / b

    def fdiff(self, argindex=1):
        a, b = self.args
        return Recip(b) if argindex == 1 else -a * Recip(b) ** 2

    def _eval_evalf(self, prec):
        a, b = self.args
        return (a / b)._eval_evalf(prec)

    def _eval_is_real(self):
        a, b = self.args
        return (a.is_real and b.is_real and b.is_nonzero) or None


class logcosh(_Unary):
    """``log(cosh(x))``, computed as ``|x| + softplus(-2|x|) - log(2)`` (no overflow of
    cosh for |x| > 89 in float32) and as ``-log1p(-tanh(x)**2) / 2`` for |x| < 1
    (``cosh(x) - 1`` without cancellation near 0); derivative ``tanh(x)``."""

    @classmethod
    def eval(cls, arg):
        if arg.is_zero:
            return S.Zero

    def fdiff(self, argindex=1):
        return sympy.tanh(self.args[0])

    def _eval_rewrite_as_log(self, arg, **kwargs):
        return sympy.log(sympy.cosh(arg))

    def _eval_evalf(self, prec):
        return self.rewrite(sympy.log)._eval_evalf(prec)

    def _eval_is_nonnegative(self):
        return self.args[0].is_real or None


class log1mexp(sympy.Function):
    """``log(1 - exp(x))`` for ``x <= 0`` (PyTensor's convention; JAX's ``log1mexp(a)`` is
    this at ``x = -a``): -inf at 0, NaN for x > 0 as written, real for x < 0.

    Computed as in Maechler (2012), "Accurately computing log(1 - exp(-|a|))", Rmpfr
    vignette (https://cran.r-project.org/package=Rmpfr/vignettes/log1mexp-note.pdf):
    ``log(-expm1(x))`` for x > -log(2) (near 0, where 1 - exp(x) cancels) and
    ``log1p(-exp(x))`` below (where -expm1(x) is near 1 and its log would lose the
    digits of exp(x)). ``log1p(-exp(x))`` alone is -inf at x = -1e-10 in float32
    (the value is -23.03); ``log(-expm1(x))`` alone is 0 at x = -40 in float32 (the
    value is -4.2e-18).

    Derivative: ``exp(x) / expm1(x)`` (= -exp(x) / (1 - exp(x))): no cancellation, 0
    (not inf/inf) for x -> -inf, and its own derivative is finite there too; NaN for
    x > 0, as the value.
    """

    nargs = 1

    @classmethod
    def eval(cls, arg):
        if arg.is_zero:
            return S.NegativeInfinity

    def fdiff(self, argindex=1):
        # NaN for x > 0, where the value is NaN too (exp(x) / expm1(x) alone is finite
        # there: a gradient outside the domain would hide the error)
        x = self.args[0]
        return nan_outside(sympy.exp(x) / expm1(x), sympy.Le(x, 0))

    def _eval_rewrite_as_log(self, arg, **kwargs):
        return sympy.log(1 - sympy.exp(arg))

    _eval_rewrite_as_exp = _eval_rewrite_as_log

    def _eval_evalf(self, prec):
        return self.rewrite(sympy.log)._eval_evalf(prec)

    def _eval_is_real(self):
        return self.args[0].is_negative or None

    def _eval_is_negative(self):
        return self.args[0].is_negative or None

    def _eval_is_finite(self):
        return self.args[0].is_negative or None


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


class erfc(sympy.erfc):
    """``erfc(x) = 1 - erf(x)`` kept as written: SymPy's own ``erfc(-x)`` evaluates to
    ``2 - erfc(x)``, which cancels to 0 for x < -6 in float64 (erfc(-x) is 2e-17 there).
    Printed as ``tf.math.erfc``; derivative ``-2 exp(-x**2) / sqrt(pi)`` (SymPy's)."""

    @classmethod
    def eval(cls, arg):
        if arg.is_Number:
            return sympy.erfc(arg)


class erfcx(_Unary):
    """Scaled complementary error function ``exp(x**2) * erfc(x)``; positive for real x,
    about ``1 / (x sqrt(pi))`` for large x, where ``exp(x**2)`` overflows and ``erfc(x)``
    underflows (x > 9.3 in float32). Computed by the ``_erfcx`` helper.

    Derivative: ``2 x erfcx(x) - 2 / sqrt(pi)`` (exact; it cancels for large x, where it
    is about ``-1 / (sqrt(pi) x**2)``, so second derivatives of ``log_erfc`` there come
    from TensorFlow's autodiff of the helper's asymptotic series instead).
    """

    @classmethod
    def eval(cls, arg):
        if arg.is_zero:
            return S.One

    def fdiff(self, argindex=1):
        x = self.args[0]
        return 2 * x * erfcx(x) - 2 / sympy.sqrt(sympy.pi)

    def _eval_rewrite_as_exp(self, arg, **kwargs):
        return sympy.exp(arg**2) * sympy.erfc(arg)

    def _eval_evalf(self, prec):
        return self.rewrite(sympy.exp)._eval_evalf(prec)

    def _eval_is_positive(self):
        return self.args[0].is_real or None


class log_erfc(_Unary):
    """``log(erfc(x))`` without the underflow of erfc (to 0 for x > 9.2 in float32,
    x > 26.6 in float64, so log gives -inf and the derivative 0/0): for large x it is
    ``-x**2 + log(erfcx(x))``. Computed by the ``_log_erfc`` helper.

    Derivative: ``-2 / (sqrt(pi) erfcx(x))``, that is ``-2 exp(-x**2) / (sqrt(pi)
    erfc(x))`` without the 0/0 (about ``-2x`` for large x).
    """

    @classmethod
    def eval(cls, arg):
        if arg.is_zero:
            return S.Zero

    def fdiff(self, argindex=1):
        return -2 / (sympy.sqrt(sympy.pi) * erfcx(self.args[0]))

    def _eval_rewrite_as_log(self, arg, **kwargs):
        return sympy.log(sympy.erfc(arg))

    def _eval_evalf(self, prec):
        return self.rewrite(sympy.log)._eval_evalf(prec)


class hypot(sympy.Function):
    """``sqrt(t1**2 + t2**2 + ...)`` computed as ``m * sqrt(sum((ti / m)**2))`` with
    ``m = max |ti|``, so it neither overflows (|t| > 1.8e19 in float32) nor underflows
    (|t| < 1e-19) where the result is representable. Real and nonnegative for real
    arguments; the arguments are kept in canonical order (equal norms are equal).

    Partials: d/dti = ti / hypot(t), 0/0 at the origin, where gradgen's ``norm_zero``
    guard gives the subgradient 0.
    """

    @classmethod
    def eval(cls, *args):
        if not args:
            raise ValueError("hypot needs at least one argument")
        if len(args) == 1:
            return sympy.Abs(args[0])
        ordered = tuple(sorted(args, key=sympy.default_sort_key))
        if ordered != tuple(args):
            return cls(*ordered)

    def fdiff(self, argindex=1):
        return self.args[argindex - 1] / self

    def _eval_rewrite_as_sqrt(self, *args, **kwargs):
        return sympy.sqrt(sympy.Add(*(a**2 for a in args)))

    def _eval_evalf(self, prec):
        return self.rewrite(sympy.sqrt)._eval_evalf(prec)

    def _eval_is_real(self):
        return all(a.is_real for a in self.args) or None

    def _eval_is_nonnegative(self):
        return all(a.is_real for a in self.args) or None


class Const(sympy.Symbol):
    """A numeric constant that is not a plain number (``sqrt(2/pi)``), held as an atom so
    that common-subexpression elimination leaves it inline; printed from ``value``."""

    def __new__(cls, value):
        name = "_const_" + hashlib.sha256(sympy.srepr(value).encode()).hexdigest()[:12]
        obj = super().__new__(cls, name, real=bool(value.is_real))
        obj.value = value
        return obj

    def __getnewargs__(self):
        return (self.value,)
