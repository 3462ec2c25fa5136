"""Rule tables for the special-function, norm, power and Piecewise families
(gradgen/stability/families/{erf,norms,powers,piecewise}.py).

Per rule: VARIANTS (written forms that fire, each checked equal to its rewrite at 50
digits at sampled points), NEAR_MISSES (forms that must not fire) and WITNESSES (a point
where the form as written, evaluated by TensorFlow in a dtype, is NaN, inf or inaccurate
and the rewrite, printed by gradgen and evaluated in the same dtype, is right; or, for a
rule that changes derivatives, where the derivative as written is wrong)."""

from __future__ import annotations

import math

import pytest
import sympy

from gradgen import stability as stable
from gradgen.expr import UNARY
from gradgen.functions import Max, expm1

from stability import RTOL, SMALLEST_NORMAL

SYMBOLS = {n: sympy.Symbol(n, real=True) for n in ("u", "x", "y", "z", "p", "q")}
NAMES = {
    **SYMBOLS,
    **{k: v for k, v in UNARY.items()},
    "expm1": expm1,
    "Max": Max,
    "Piecewise": sympy.Piecewise,
    "Ne": sympy.Ne,
    "Eq": sympy.Eq,
    "log": sympy.log,
}


def parse(text):
    return sympy.sympify(text, locals=NAMES)


# rule: (variants, near misses, sample points {symbol: values})
TABLES = {
    "erf_complement": (
        [
            "1 - erf(u)",
            "-erf(u) + 1",
            "1 + (-erf(u))",
            "-1.0*erf(u) + 1",
            "erf(u) - 1",
            "2 - 2*erf(u)",
            "y + 1 - erf(u)",
            "1 - erf(x*y)",
        ],
        [
            "2 - erf(u)",
            "1 - erf(u)**2",
            "1 - 2*erf(u)",
            "1 + erf(u)",
            "1 - erfc(u)",
            "1.5 - erf(u)",
        ],
        {"u": [-3.0, -0.5, 0.0, 0.7, 4.0, 12.0], "x": [0.5, 2.0], "y": [1.5, -3.0]},
    ),
    "erfc_complement": (
        [
            "1 - erfc(u)",
            "erfc(u) - 1",
            "erfc(-u) - 1",
            "-erfc(u) + 1.0",
            "3*erfc(u) - 3",
        ],
        ["2 - erfc(u)*2 + 1", "1 - erfc(u)**2", "1 - erf(u)", "erfc(u) - 2"],
        {"u": [-3.0, -1e-3, 1e-8, 0.5, 2.0]},
    ),
    "erfc_reflection": (
        [
            "1 + erf(u)",
            "erf(u) + 1",
            "erfc(-u)",
            "2 - erfc(u)",
            "2 + 2*erf(u)",
            "log(erfc(-u))",
        ],
        ["2 + erf(u)", "1 - erf(u)", "erfc(u)", "1 - erfc(u)"],
        {"u": [-12.0, -4.0, -0.5, 0.0, 3.0]},
    ),
    "log_erfc": (
        [
            "log(erfc(u))",
            "log(1 - erf(u))",
            "log(erfc(-u))",
            "log(2 - erfc(u))",
            "log(erfc(x*y))",
        ],
        ["log(erf(u))", "log(1 + erfc(u))", "log(2*erfc(u))", "erfc(log(u))"],
        {
            "u": [-20.0, -1.0, 0.0, 2.0, 9.5, 12.0, 30.0, 1e3],
            "x": [2.0, 5.0],
            "y": [3.0, 10.0],
        },
    ),
    "hypot": (
        [
            "sqrt(x**2 + y**2)",
            "sqrt(x*x + y*y)",
            "sqrt(x**2 + y**2 + z**2)",
            "1/sqrt(x**2 + y**2)",
            "(x**2 + y**2)**(3/2)",
            "sqrt(4*x**2 + y**2)",
            "sqrt(x**2 + 1)",
            "sqrt((x - y)**2 + z**2)",
            "sqrt(x**4 + y**2)",
        ],
        [
            "sqrt(x**2 - y**2)",
            "sqrt(x**2 + y)",
            "x**2 + y**2",
            "(x**2 + y**2)**2",
            "sqrt(x**2)",
            "sqrt(x**2 - 1)",
            "sqrt(x**3 + y**2)",
        ],
        {"x": [-3.0, 1e-20, 0.5, 1e30], "y": [4.0, -1e-25, 2.0], "z": [0.0, 7.0]},
    ),
    "unit_complement": (
        [
            "1/sqrt(x**2 + y**2) - x**2/(x**2 + y**2)**(3/2)",  # d/dx x/|(x, y)|
            "1/sqrt(1 + x**2) - x**2/(1 + x**2)**(3/2)",  # d/dx x/sqrt(1 + x**2)
            "3*x**3/(1 + x**2)**(5/2) - 3*x/(1 + x**2)**(3/2)",  # its second
            "y/(x**2 + y**2 + z**2)**(3/2) - y*z**2/(x**2 + y**2 + z**2)**(5/2)",
        ],
        [
            "1/sqrt(x**2 + y**2) - 2*x**2/(x**2 + y**2)**(3/2)",
            "1/sqrt(x**2 + y**2) - x/(x**2 + y**2)**(3/2)",
            "1/sqrt(x**2 + y**2) + x**2/(x**2 + y**2)**(3/2)",
            "1/sqrt(x**2 + y**2) - x**2/(x**2 + y**2)",
        ],
        {"x": [-3.0, 1e-20, 0.5, 1e30], "y": [4.0, -1e-25, 2.0], "z": [0.0, 7.0]},
    ),
    "exp_log_power": (
        [
            "exp(p*log(x))",
            "exp(-p*q*log(x))",
            "exp(log(x)*(p + 1))",
        ],
        # exp(p*log(x) + y) stays one exponential: x**p * exp(y) overflows apart
        ["exp(log(2)*p)", "exp(p)*log(x)", "exp(p*log(x)*log(y))", "exp(p + log(2))",
         "exp(p*log(x) + y)"],
        {
            "x": [0.5, 3.0, 1e-3],
            "p": [0.0, 0.7, 2.0, -1.5],
            "q": [1.0, 2.0],
            "y": [0.5],
        },
    ),
    "exp_power": (
        ["p*exp(p*log(x) - y)/x", "exp(p*log(x) + y)*x**2", "exp(p*log(x) + y)*x**q"],
        ["exp(p*log(x) - y)/z", "exp(p - y)/x", "exp(p*log(x) + y)*y**2"],
        {
            "x": [0.5, 3.0, 1e-3],
            "p": [0.0, 0.7, 2.0, -1.5],
            "q": [1.0, 2.0],
            "y": [0.5, -3.0],
            "z": [2.0],
        },
    ),
    "power_zero_coefficient": (
        ["p*x**(p - 1)", "2*p*x**(p - 1)*y", "(p + 1)*x**p", "(q - 2)*x**(q - 3)"],
        ["p*x**(p + 1)", "p*x**2", "y*x**(p - 1)", "p*x**(q - 1)", "x**(p - 1)"],
        {
            "x": [0.5, 3.0, 1e-3],
            "p": [0.3, 2.0, -1.5],
            "q": [2.5, 4.0],
            "y": [0.5, 2.0],
        },
    ),
    "removable_fill": (
        [
            "Piecewise((sin(x)/x, Ne(x, 0)), (1, True))",
            "Piecewise((1, Eq(x, 0)), (sin(x)/x, True))",
            "Piecewise((expm1(x)/x, Ne(x, 0)), (1, True))",
            "Piecewise(((exp(x) - 1)/x, Ne(x, 0)), (1, True))",
            "Piecewise(((1 - cos(x))/x**2, Ne(x, 0)), (1/2, True))",
        ],
        [
            "Piecewise((sin(x)/x, Ne(x, 0)), (0, True))",
            "Piecewise((sin(x)/x, x > 0), (1, True))",
            "Piecewise((x, Ne(x, 0)), (0, True))",
            "Piecewise((1/x, Ne(x, 0)), (0, True))",
            "Piecewise((sin(x)/x, Ne(x, 1)), (1, True))",
        ],
        {"x": [-3.0, -1e-3, 1e-20, 0.5, 10.0]},
    ),
}
# (rule, form as written, {symbol: value}, dtype, exact value): the form as written is
# NaN, inf or off by more than the dtype's tolerance there; the rewrite is right.
# exact None: the form's own value at 50 digits.
WITNESSES = [
    ("erf_complement", "1 - erf(u)", {"u": 5.0}, "float32", None),
    ("erf_complement", "erf(u) - 1", {"u": 10.0}, "float64", None),
    ("erfc_complement", "1 - erfc(u)", {"u": 1e-9}, "float32", None),
    ("erfc_reflection", "1 + erf(u)", {"u": -5.0}, "float32", None),
    ("erfc_reflection", "2 - erfc(u)", {"u": -7.0}, "float64", None),
    ("log_erfc", "log(erfc(u))", {"u": 11.0}, "float32", None),
    ("log_erfc", "log(erfc(u))", {"u": 30.0}, "float64", None),
    ("log_erfc", "log(1 - erf(u))", {"u": 5.0}, "float32", None),
    ("hypot", "sqrt(x**2 + y**2)", {"x": 3e19, "y": 4e19}, "float32", None),
    ("hypot", "sqrt(x**2 + y**2)", {"x": 1e-20, "y": 0.0}, "float32", None),
    (
        "hypot",
        "sqrt(x**2 + y**2 + z**2)",
        {"x": 1e200, "y": 1e200, "z": 0.0},
        "float64",
        None,
    ),
    # 1 - (x/h)**2 is 0 from x = 4096 in float32: x/sqrt(1 + x**2)'s slope
    ("unit_complement", "1/sqrt(1 + x**2) - x**2/(1 + x**2)**(3/2)", {"x": 1e5},
     "float32", None),
    ("exp_log_power", "exp(p*log(x))", {"x": 0.0, "p": 0.0}, "float32", 1.0),
    # the derivative of exp(p*log(x) - y) in x at x = 0: 0 for p > 1 (0/0 as written)
    ("exp_power", "p*exp(p*log(x) - y)/x", {"x": 0.0, "p": 2.0, "y": 1.0}, "float32", 0.0),
    ("exp_power", "p*exp(p*log(x) - y)/x", {"x": 0.0, "p": 1.0, "y": 1.0}, "float64",
     math.exp(-1.0)),
    # d(x**p)/dx at p = 0: x**0 = 1, the derivative is 0 (0 * inf as written)
    ("power_zero_coefficient", "p*x**(p - 1)", {"x": 0.0, "p": 0.0}, "float32", 0.0),
]
# (rule, form, symbol, point, exact derivative): the derivative as written is wrong
DERIVATIVE_WITNESSES = [
    ("removable_fill", "Piecewise((expm1(x)/x, Ne(x, 0)), (1, True))", "x", 0, "1/2"),
    (
        "removable_fill",
        "Piecewise((1, Eq(x, 0)), ((exp(x) - 1)/x, True))",
        "x",
        0,
        "1/2",
    ),
]


def test_every_new_rule_has_a_table():
    families = ("erf", "norms", "piecewise")
    import importlib

    names = {
        r.name
        for f in families
        for r in importlib.import_module(f"gradgen.stability.families.{f}").RULES
    }
    names |= {"exp_log_power", "exp_power", "power_zero_coefficient"}
    assert names == set(TABLES)
    assert names <= set(stable.RULES_BY_NAME)


def _cases(kind):
    out = []
    for rule, (variants, misses, _) in TABLES.items():
        for text in variants if kind == "variant" else misses:
            out.append(pytest.param(rule, text, id=f"{rule}:{text}"))
    return out


def _samples(expr, points):
    symbols = sorted(expr.free_symbols, key=lambda s: s.name)
    columns = [points[s.name] for s in symbols]
    n = max(len(c) for c in columns) if columns else 1
    for i in range(n):
        yield {s: sympy.Float(c[i % len(c)], 60) for s, c in zip(symbols, columns)}


def _value(expr, at):
    """``expr`` at ``at`` to 40 digits: evaluated at 60, 250, 1200 digits until two agree
    (forms as written cancel: 1 - erf(30) needs 400 digits)."""
    previous = None
    for digits in (60, 250, 1200):
        value = expr.evalf(
            digits, subs={s: sympy.Float(v, digits) for s, v in at.items()}
        )
        if value.has(sympy.zoo, sympy.nan) or not value.is_number:
            return None
        value = complex(value)
        if previous is not None and abs(value - previous) <= 1e-40 * abs(value):
            return value
        previous = value
    return None  # no agreement: the form cancels beyond 1200 digits (1 - erf(1000))


@pytest.mark.parametrize("rule,text", _cases("variant"))
def test_variant_fires_and_keeps_the_value(rule, text):
    expr = parse(text)
    out, used = stable.rewrite(expr)
    assert rule in used, f"{text}: {rule} did not fire ({out}, {used})"
    checked = 0
    for at in _samples(expr, TABLES[rule][2]):
        want, got = _value(expr, at), _value(out, at)
        if want is None or not math.isfinite(abs(want)):
            continue
        assert got is not None, (text, at)
        assert abs(got - want) <= 1e-40 * max(abs(want), 1e-300) + 1e-300, (
            text,
            at,
            got,
            want,
        )
        checked += 1
    assert checked >= 2, f"{text}: too few finite sample points"


@pytest.mark.parametrize("rule,text", _cases("near_miss"))
def test_near_miss_does_not_fire(rule, text):
    # the rule alone: other rules may make a near miss match after their own rewrite
    # (1 - erf(u)**2 = (1 - erf(u))*(1 + erf(u)) by difference_of_squares, then erfc)
    _, used = stable.rewrite(parse(text), (stable.RULES_BY_NAME[rule],))
    assert rule not in used, f"{text}: {rule} fired"


@pytest.fixture(scope="module")
def helpers_namespace(tf):
    """The runtime helpers these functions print as, executed with TensorFlow."""
    from gradgen.render import render_helpers

    source = render_helpers(["_erf", "_erfcx", "_log_erfc", "_hypot", "_logsumexp", "_logcosh"])
    namespace = {"tf": tf, "math": math}
    exec(compile(source, "helpers.py", "exec"), namespace)
    return namespace


def _tf_value(tf, namespace, expr, at, dtype, printed: bool):
    """``expr`` evaluated by TensorFlow in ``dtype``: printed by gradgen's printer (after
    its guards) or, as written, by SymPy's TensorFlow printer."""
    from gradgen.printer import TFPrinter
    from gradgen.stability import guards

    env = {name: tf.constant(v, dtype=dtype) for name, v in at.items()}
    if printed:
        expr, _ = guards.removable_singularities(expr, dtype)
        expr, _ = guards.guard_branches(expr)
    code = TFPrinter(dtype).value(expr)
    return float(tf.cast(eval(code, dict(namespace), env), tf.float64).numpy())


def _right(got, want, dtype):
    if math.isnan(got):
        return False
    return abs(got - want) <= RTOL[dtype] * abs(want) + SMALLEST_NORMAL[dtype]


@pytest.mark.parametrize(
    "rule,text,point,dtype,exact",
    WITNESSES,
    ids=[f"{w[0]}:{w[1]}:{w[3]}" for w in WITNESSES],
)
def test_witness(tf, helpers_namespace, rule, text, point, dtype, exact):
    expr = parse(text)
    out, used = stable.rewrite(expr)
    assert rule in used
    if exact is None:
        exact = _value(expr, {SYMBOLS[k]: v for k, v in point.items()}).real
    naive = _tf_value(tf, helpers_namespace, expr, point, dtype, printed=False)
    ours = _tf_value(tf, helpers_namespace, out, point, dtype, printed=True)
    assert not _right(naive, exact, dtype), f"{text} as written is right: {naive}"
    assert _right(ours, exact, dtype), f"{text} rewritten: {ours}, exact {exact}"


@pytest.mark.parametrize("rule,text,symbol,point,exact", DERIVATIVE_WITNESSES)
def test_derivative_witness(rule, text, symbol, point, exact):
    expr = parse(text)
    v = SYMBOLS[symbol]
    out, used = stable.rewrite(expr)
    assert rule in used
    naive = sympy.diff(expr, v).subs(v, point)
    ours = sympy.limit(sympy.diff(out.rewrite(sympy.exp), v), v, point)
    assert naive != sympy.sympify(exact)
    assert sympy.simplify(ours - sympy.sympify(exact)) == 0
