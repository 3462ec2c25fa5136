"""Each stable rewrite rule, one test each: it fires, and the value is unchanged."""

from __future__ import annotations

import mpmath
import pytest
import sympy

from gradgen import stability as stable
from gradgen import functions as fn
from gradgen.functions import (
    expm1,
    log1mexp,
    log1p,
    logcosh,
    logsumexp,
    nan_outside,
    sigmoid,
    softplus,
    xlog1py,
    xlogy,
)

x, y = sympy.symbols("x y", real=True)
exp, log = sympy.exp, sympy.log
cosh, sinh, tanh = sympy.cosh, sympy.sinh, sympy.tanh

# rule -> (input expression, expected rewrite); each rule is tested alone (first in
# order), so the example shows what that rule does by itself.
EXAMPLES = {
    "softplus": (log(1 + exp(x)), softplus(x)),
    "logsumexp": (log(exp(x) + exp(y) + 2), logsumexp(x, y, log(2))),
    "log_mul": (log(exp(x) * sigmoid(y)), x + log(sigmoid(y))),
    "log_sigmoid": (log(sigmoid(x)), -softplus(-x)),
    "log1p": (log(1 + x * y), log1p(x * y)),
    "log_cosh": (log(cosh(x - y)), logcosh(x - y)),
    "tanh_ratio": (y * sinh(x) / cosh(x), y * tanh(x)),
    "difference_of_squares": (1 - x**2, (1 - x) * (1 + x)),
    "sigmoid_pow": (1 / (1 + exp(-x)), sigmoid(x)),
    "sigmoid_mul": (exp(x) * sigmoid(-x), sigmoid(x)),
    "sigmoid_complement": (1 - sigmoid(x) + y, sigmoid(-x) + y),
    "softmax": (1 / (exp(x) + exp(y)), exp(-logsumexp(x, y))),
    "exp_mul": (exp(x) * exp(-logsumexp(x, y)), exp(x - logsumexp(x, y))),
    "softmax_weight": (exp(x - logsumexp(x, y)), sigmoid(x - y)),
    "log_softmax": (x - logsumexp(x, y), -softplus(y - x)),
    "xlogy": (2 * x * log(y), 2 * xlogy(x, y)),
    "xlog1py": ((1 - y) * log1p(-x), xlog1py(1 - y, -x)),
    "sqrt_conjugate": (sympy.sqrt(x + 1) - sympy.sqrt(x), 1 / (sympy.sqrt(x) + sympy.sqrt(x + 1))),
    "power_product": (x**y * y / x, y * x ** (y - 1)),
    "expm1": (exp(x) - 1 + y, expm1(x) + y),
    # special functions, norms, data powers, filled-in singularities (test_rules_special.py)
    "erf_complement": (1 - sympy.erf(x) + y, fn.erfc(x) + y),
    "erfc_complement": (1 - sympy.erfc(x * y), sympy.erf(x * y)),
    "erfc_reflection": (1 + sympy.erf(x), fn.erfc(-x)),
    "log_erfc": (log(sympy.erfc(x)), fn.log_erfc(x)),
    "hypot": (sympy.sqrt(x**2 + y**2), fn.hypot(x, y)),
    "exp_log_power": (exp(y * log(x)), x**y),
    "power_zero_coefficient": (y * x ** (y - 1), fn.xdivy(y, x ** (1 - y))),
    "removable_fill": (
        sympy.Piecewise((sympy.sin(x) / x, sympy.Ne(x, 0)), (1, True)), sympy.sin(x) / x
    ),
    "log1mexp": (log1p(-exp(-x**2 - 1)), log1mexp(-x**2 - 1)),
    "logdiffexp": (log(exp(x + 3) - exp(x - y**2)), x + 3 + log1mexp(-y**2 - 3)),
    "log1p_expm1": (y * log1p(expm1(x)), x * y),
    "exp_log1p": (exp(log1p(x * y / 8)), nan_outside(x * y / 8 + 1, x * y / 8 >= -1)),
    "expm1_log1p": (expm1(log1p(y**2)), y**2),
    "log1m_sigmoid": (log1p(-sigmoid(x)), -softplus(x)),
    "sigmoid_ratio": (y * sigmoid(x) / sigmoid(-x), y * exp(x)),
    "logit_sigmoid": (softplus(x) - softplus(-x) + y, x + y),
    "sigmoid_logit": (
        sigmoid(log(y**2 / (1 + y**2) / (1 - y**2 / (1 + y**2)))),
        nan_outside(y**2 / (1 + y**2), y**2 / (1 + y**2) <= 1),
    ),
}


def test_every_rule_has_an_example():
    assert set(EXAMPLES) == set(stable.RULES_BY_NAME)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_rule(name):
    before, after = EXAMPLES[name]
    rewritten, used = stable.rewrite(before, (stable.RULES_BY_NAME[name],))
    assert rewritten == after
    assert used == (name,)
    # same value at a few points, at 50 digits
    for xv, yv in [(0.3, 0.7), (-2.0, 1.5), (5.0, 0.25)]:
        subs = {x: sympy.Float(xv, 50), y: sympy.Float(yv, 50)}
        a, b = before.evalf(50, subs=subs), after.evalf(50, subs=subs)
        assert abs(a - b) <= 1e-40 * max(1, abs(a))


def test_rules_compose_to_a_fixpoint():
    expr = sympy.exp(x) / (sympy.exp(x) + 1) ** 2  # derivative of -sigmoid(-x)
    rewritten, used = stable.rewrite(expr)
    assert rewritten == sigmoid(x) * sigmoid(-x)
    assert set(used) == {"sigmoid_pow", "sigmoid_mul"}


def test_log_softmax_and_log_sigmoid_compose():
    rewritten, _ = stable.rewrite(log(exp(x) / (exp(x) + exp(y))))
    assert rewritten == -softplus(y - x)
    rewritten, _ = stable.rewrite(exp(x) / (exp(x) + exp(y)))
    assert rewritten == sigmoid(x - y)
    rewritten, _ = stable.rewrite(log(1 - 1 / (1 + exp(-x))))
    assert rewritten == -softplus(x)


# complex points, with imaginary parts past pi (log(exp(z)) != z there)
COMPLEX_POINTS = [(0.3 + 0.4j, 0.7 - 0.2j), (-2.0 + 1.0j, 1.5 + 0.5j), (1.2 - 4.0j, -0.6 + 3.5j)]


def test_complex_rules_are_holomorphic_and_supported():
    """Every rule a complex op may use keeps its example's value at complex points (the
    identity holds off the real line) and rewrites to functions the complex derivation
    accepts (derive.HOLOMORPHIC: holomorphic, with complex TensorFlow kernels)."""
    from gradgen.derive import HOLOMORPHIC

    assert stable.COMPLEX_RULES and set(stable.COMPLEX_RULES) <= set(stable.RULES)
    for rule in stable.COMPLEX_RULES:
        before, after = EXAMPLES[rule.name]
        rewritten, used = stable.rewrite(before, (rule,))
        assert rewritten == after and used == (rule.name,)
        unsupported = [f for f in after.atoms(sympy.Function) if not isinstance(f, HOLOMORPHIC)]
        assert not unsupported, (rule.name, unsupported)
        for xv, yv in COMPLEX_POINTS:
            subs = {x: sympy.Float(xv.real, 50) + sympy.I * sympy.Float(xv.imag, 50),
                    y: sympy.Float(yv.real, 50) + sympy.I * sympy.Float(yv.imag, 50)}
            a, b = complex(before.evalf(50, subs=subs)), complex(after.evalf(50, subs=subs))
            assert abs(a - b) <= 1e-12 * max(1, abs(a)), (rule.name, xv, yv, a, b)


def test_stable_functions_differentiate_to_stable_functions():
    assert sympy.diff(softplus(x), x) == sigmoid(x)
    assert sympy.diff(sigmoid(x), x) == sigmoid(x) * sigmoid(-x)
    assert sympy.diff(logsumexp(x, y), x) == sigmoid(x - y)
    assert sympy.diff(xlogy(x, y), x) == log(y)
    with mpmath.workdps(50):
        assert abs(softplus(sympy.Float(100, 50)).evalf(50) - 100) < 1e-40


def test_xlogy_leaves_constant_logarithms_alone():
    # log(2) * x has no 0 * log(0); xlogy(x, 2) would be a log per element
    rewritten, used = stable.rewrite(log(2) * x)
    assert rewritten == log(2) * x and used == ()
