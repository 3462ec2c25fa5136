"""Each stable rewrite rule, one test each: it fires, and the value is unchanged."""

from __future__ import annotations

import mpmath
import pytest
import sympy

from gradgen import stable
from gradgen.functions import expm1, log1p, sigmoid, softplus

x, y = sympy.symbols("x y", real=True)

# rule -> (input expression, expected rewrite)
EXAMPLES = {
    "softplus": (sympy.log(1 + sympy.exp(x)), softplus(x)),
    "log1p": (sympy.log(1 + x * y), log1p(x * y)),
    "sigmoid_pow": (1 / (1 + sympy.exp(-x)), sigmoid(x)),
    "sigmoid_mul": (sympy.exp(x) / (1 + sympy.exp(x)), sigmoid(x)),
    "expm1": (sympy.exp(x) - 1 + y, expm1(x) + y),
}


def test_every_rule_has_an_example():
    assert set(EXAMPLES) == set(stable.RULES_BY_NAME)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_rule(name):
    before, after = EXAMPLES[name]
    rewritten, used = stable.rewrite(before, (stable.RULES_BY_NAME[name],) + tuple(
        r for r in stable.RULES if r.name != name))
    assert rewritten == after
    assert name in used
    # same value at a few points, at 50 digits
    for xv, yv in [(0.3, 0.7), (-2.0, 1.5), (5.0, -0.25)]:
        subs = {x: sympy.Float(xv, 50), y: sympy.Float(yv, 50)}
        a, b = before.evalf(50, subs=subs), after.evalf(50, subs=subs)
        assert abs(a - b) <= 1e-40 * max(1, abs(a))


def test_rules_compose_to_a_fixpoint():
    expr = sympy.exp(x) / (sympy.exp(x) + 1) ** 2  # derivative of -sigmoid(-x)
    rewritten, used = stable.rewrite(expr)
    assert rewritten == sigmoid(x) * sigmoid(-x)
    assert set(used) == {"sigmoid_pow", "sigmoid_mul"}


def test_stable_functions_differentiate_to_stable_functions():
    assert sympy.diff(softplus(x), x) == sigmoid(x)
    assert sympy.diff(sigmoid(x), x) == sigmoid(x) * (1 - sigmoid(x))
    with mpmath.workdps(50):
        assert abs(softplus(sympy.Float(100, 50)).evalf(50) - 100) < 1e-40
