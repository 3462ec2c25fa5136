r"""Hyperbolic functions: log(cosh), sinh/cosh, 1 - tanh².

| rule | identity | domain | fails at (as written) | source |
| --- | --- | --- | --- | --- |
| `log_cosh` | log(cosh(u)) = logcosh(u) | real u | cosh overflows for \|u\| > 89 in float32 | identity log cosh u = \|u\| + log1p(e^(−2\|u\|)) − log 2 |
| `tanh_ratio` | sinh(u) / cosh(u) = tanh(u) | real or complex u | two transcendentals where one suffices; cosh overflows first | identity |
| `sech_squared` | c − c·tanh(u)² = c·(1 − tanh u)(1 + tanh u) for \|u\| < 1, c / cosh(u)² beyond | real u | tanh's derivative 1 − tanh(u)² is 0 for \|u\| > 9 in float32 (tanh rounds to 1; the value is 4e^(−2\|u\|), normal to \|u\| = 44), so every bit is lost | DLMF 4.35.19 (sech² = 1 − tanh²); TF `TanhGrad` computes 1 − y² (math_grad.py) |

Each rule is a :class:`~gradgen.stability.rule.Rule`; :data:`RULES` lists this family's
rules in the order the engine tries them.
"""

from __future__ import annotations

import sympy

from ...functions import logcosh
from ..rule import Rule


def _log_cosh(expr):
    # log(cosh(u)) = logcosh(u), computed without overflow
    if isinstance(expr, sympy.log) and len(expr.args) == 1:
        if isinstance(expr.args[0], sympy.cosh):
            return logcosh(expr.args[0].args[0])
    return None


def _tanh_ratio(expr):
    # sinh(u) / cosh(u) = tanh(u): one transcendental instead of two and a division
    if isinstance(expr, sympy.Mul):
        factors = list(expr.args)
        for f in factors:
            if isinstance(f, sympy.sinh):
                u = f.args[0]
                inverse = sympy.Pow(sympy.cosh(u), -1)
                if inverse in factors:
                    rest = [g for g in factors if g is not f and g != inverse]
                    return sympy.Mul(sympy.tanh(u), *rest)
    return None


def _sech_squared(expr):
    # c - c*tanh(u)**2 = c / cosh(u)**2 (tanh's derivative) for |u| >= 1: no cancellation where
    # tanh(u) rounds to +-1, and 1/inf = 0 where cosh(u)**2 overflows (the value is
    # below the smallest normal number there)
    if not isinstance(expr, sympy.Add) or len(expr.args) != 2:
        return None
    c, term = expr.as_coeff_Add()
    k, rest = term.as_coeff_Mul()
    if (
        c.is_zero is False
        and (c + k).is_zero
        and isinstance(rest, sympy.Pow)
        and rest.exp == 2
        and isinstance(rest.base, sympy.tanh)
    ):
        u = rest.base.args[0]
        t = sympy.tanh(u)
        # (1 - t)*(1 + t) where tanh is not near +-1 (as accurate as 1 - t**2 there, and
        # the tanh value is the forward's); 1/cosh(u)**2 beyond
        return c * sympy.Piecewise(
            ((1 - t) * (1 + t), sympy.Abs(u) < 1), (sympy.Pow(sympy.cosh(u), -2), True)
        )
    return None


RULES: tuple[Rule, ...] = (
    Rule(
        "log_cosh",
        "log(cosh(u)) = logcosh(u) = |u| + softplus(-2|u|) - log(2); "
        "log1p(e**2 / (2 + 2e)), e = expm1(|u|), for |u| < 1",
        "cosh(u) overflows for |u| > 89 in float32 (the result is about |u| - log(2))",
        _log_cosh,
    ),
    Rule(
        "tanh_ratio",
        "sinh(u) / cosh(u) = tanh(u)",
        "two transcendentals and a division where one suffices; cosh overflows first",
        _tanh_ratio,
        complex_ok=True,
    ),
    Rule(
        "sech_squared",
        "c - c*tanh(u)**2 = c*(1 - tanh(u))*(1 + tanh(u)) for |u| < 1, c / cosh(u)**2 beyond",
        "1 - tanh(u)**2 (tanh's derivative) is 0 for |u| > 9 in float32, where the value "
        "is 4*exp(-2|u|): every bit lost",
        _sech_squared,
    ),
)
