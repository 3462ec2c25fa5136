"""Non-smooth functions with gradgen's subgradient conventions (README, "Kinks").

sign, floor, ceiling, Heaviside: derivative 0 everywhere (TensorFlow's convention for
sign, floor and ceil; the Dirac delta at the jump is dropped). Max, Min: at a tie the
derivative is split equally between the tied arguments, so the weights always sum to 1
(as ``tf.reduce_max``'s gradient does). Heaviside(0) = 1/2 (SymPy's default).
"""

from __future__ import annotations

import sympy
from sympy import S

from .base import RealUnary


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


class Heaviside(RealUnary):
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
