"""The base class of gradgen's real functions of one argument."""

from __future__ import annotations

import sympy


class RealUnary(sympy.Function):
    """A function of one argument that is real where its argument is real."""

    nargs = 1

    def _eval_is_real(self):
        return self.args[0].is_real
