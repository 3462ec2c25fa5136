"""The base class of gradgen's real functions of one argument."""

from __future__ import annotations

import sympy


class RealUnary(sympy.Function):
    """A function of one argument that is real where its argument is real.

    A subclass may give ``at_zero``, its value at 0 (a SymPy number), and
    ``defined_by``, the SymPy function its ``_eval_rewrite_as_<name>`` writes it with
    (``sympy.exp`` or ``sympy.log``): that form evaluates it to any precision."""

    nargs = 1
    at_zero = None
    defined_by = None

    @classmethod
    def eval(cls, arg):
        if cls.at_zero is not None and arg.is_zero:
            return cls.at_zero

    def _eval_evalf(self, prec):
        if self.defined_by is None:
            return super()._eval_evalf(prec)
        return self.rewrite(self.defined_by)._eval_evalf(prec)

    def _eval_is_real(self):
        return self.args[0].is_real
