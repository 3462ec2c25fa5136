"""The stability suite's cases, its 50-digit reference, and the README table.

Every op of ``examples/stability.yaml`` is checked at extreme points (|x| up to 1e4,
values near 0, subnormals) in float16, bfloat16, float32 and float64 against the
derivative of the op's expression *as written*, evaluated by SymPy/mpmath at 50 digits
at the input rounded to the dtype (the limit where the formula itself is 0/0). Where the
true gradient is not defined (a norm at the origin) the case names gradgen's documented
convention instead.

Run ``python tests/stability.py`` to print the README's table: TensorFlow's autodiff of
the plain forward next to gradgen's gradient, at the points where they differ.
"""

from __future__ import annotations

import ast
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import sympy

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "examples" / "stability.yaml"

DTYPES = ("float16", "bfloat16", "float32", "float64")
# Relative tolerance per dtype; absolute differences below the smallest normal number
# are accepted (subnormal and underflowing values carry no relative precision).
RTOL = {"float16": 4e-3, "bfloat16": 3e-2, "float32": 1e-5, "float64": 1e-12}
SMALLEST_NORMAL = {
    "float16": 6.103515625e-05,
    "bfloat16": 1.1754943508222875e-38,
    "float32": 1.1754943508222875e-38,
    "float64": 2.2250738585072014e-308,
}
# the largest finite value of each dtype
LARGEST = {
    "float16": 65504.0,
    "bfloat16": 3.3895313892515355e38,
    "float32": 3.4028234663852886e38,
    "float64": 1.7976931348623157e308,
}

SIGMOID_POINTS = [-1e4, -100.0, -20.0, -1.0, -1e-3, 0.0, 1e-30, 1e-3, 1.0, 12.0, 20.0, 100.0, 1e4]
LOG1MEXP_POINTS = [
    -1e4, -100.0, -20.0, -1.0, -0.6931471805599453, -0.5, -1e-3, -1e-7, -1e-10,
]
PAIR_POINTS = [
    (0.0, 0.0), (1.0, 2.0), (1e4, 0.0), (-1e4, 0.0), (1e4, 1e4), (-1e4, -1e4),
    (100.0, -100.0), (-1e4, 1e4), (3.0, 3.0),
]


@dataclass
class Family:
    """One op of the stability spec and where to check it.

    Attributes:
        op: the op's name in examples/stability.yaml.
        points: input tuples (float64; rounded to each dtype before use).
        plain: the same forward in plain TensorFlow (for TF autodiff), from ``tf``.
        conventions: {point: gradients} where the true gradient is undefined and the
            README documents gradgen's value.
    """

    op: str
    points: list
    plain: object
    conventions: dict = field(default_factory=dict)


def families(tf):
    """The checked families; ``tf`` is the tensorflow module (for the plain forwards)."""
    exp, log, sqrt = tf.math.exp, tf.math.log, tf.math.sqrt

    def single(values):
        return [(v,) for v in values]

    return [
        Family("softplus_naive", single(SIGMOID_POINTS), lambda x: log(1 + exp(x))),
        Family("sigmoid_naive", single(SIGMOID_POINTS), lambda x: 1 / (1 + exp(-x))),
        Family("logistic_ratio", single(SIGMOID_POINTS), lambda x: exp(x) / (1 + exp(x))),
        Family("swish", single(SIGMOID_POINTS), lambda x: x / (1 + exp(-x))),
        Family(
            "log1p_naive",
            single([-0.999, -0.5, -1e-3, -1e-20, 0.0, 1e-30, 1e-3, 1.0, 1e3, 1e4]),
            lambda x: log(1 + x),
        ),
        Family(
            "expm1_naive",
            single([-1e4, -100.0, -1.0, -1e-20, 0.0, 1e-30, 1e-3, 1.0, 10.0, 80.0, 700.0]),
            lambda x: exp(x) - 1,
        ),
        Family(
            "entropy",
            single([0.0, 1e-30, 1e-3, 0.1, 0.5, 0.9, 1.0, 10.0]),
            lambda p: -p * log(p),
        ),
        Family(
            "cross_entropy",
            [(0.0, 0.0), (0.0, 0.5), (0.5, 0.0), (0.3, 0.7), (1.0, 1e-30), (1e-3, 1.0)],
            lambda p, q: -p * log(q),
            # f(0, q) = 0 for every q, so d/dq = 0 at p = 0 (also at q = 0).
            conventions={(0.0, 0.0): (math.inf, 0.0)},
        ),
        Family("log_sigmoid", single(SIGMOID_POINTS), lambda x: log(1 / (1 + exp(-x)))),
        Family(
            "log_one_minus_sigmoid",
            single(SIGMOID_POINTS),
            lambda x: log(1 - 1 / (1 + exp(-x))),
        ),
        Family("logaddexp", PAIR_POINTS, lambda a, b: log(exp(a) + exp(b))),
        Family("softmax2", PAIR_POINTS, lambda a, b: exp(a) / (exp(a) + exp(b))),
        Family("log_softmax2", PAIR_POINTS, lambda a, b: log(exp(a) / (exp(a) + exp(b)))),
        Family(
            "power",
            [(0.0, 2.0), (0.0, 1.0), (0.0, 3.5), (2.0, 3.0), (0.5, 10.0), (3.0, 0.5),
             (1e-3, 2.0), (10.0, -2.0)],
            lambda x, y: x**y,
            # At x = 0 (y > 0), 0**y = 0 for every y, so d/dy = 0 (the formula
            # x**y * log(x) is 0 * -inf there); d/dx = y * 0**(y - 1).
            conventions={(0.0, 2.0): (0.0, 0.0), (0.0, 1.0): (1.0, 0.0),
                         (0.0, 3.5): (0.0, 0.0)},
        ),
        # The squares must be normal numbers in float16: 0.008 < |x| < 256.
        Family(
            "norm",
            [(0.0, 0.0), (3.0, 4.0), (0.01, -0.02), (100.0, 100.0), (-5.0, 0.0), (0.0, 0.05)],
            lambda x, y: sqrt(x * x + y * y),
            conventions={(0.0, 0.0): (0.0, 0.0)},  # the subgradient 0 at the origin
        ),
        Family(
            "angle",
            [(0.0, 0.0), (1.0, 1.0), (-1.0, 0.01), (100.0, -100.0), (0.0, 2.0)],
            lambda x, y: tf.math.atan2(y, x),
            conventions={(0.0, 0.0): (0.0, 0.0)},
        ),
        Family(
            "sinc",
            single([0.0, 1e-20, -1e-3, 1.0, 10.0, -3.0, 1e4]),
            lambda x: tf.math.sin(x) / x,
        ),
        Family(
            "expm1_ratio",
            single([0.0, 1e-20, -1e-20, 1e-3, 1.0, 10.0, -10.0, -100.0]),
            lambda x: (exp(x) - 1) / x,
        ),
        Family(
            "sqrt_relu",
            single([-1.0, 0.0, 1e-30, 4.0, 1e4]),
            lambda x: tf.where(x > 0, sqrt(x), tf.zeros_like(x)),
        ),
        Family(
            "elu",
            single([-1e4, -100.0, -1.0, 0.0, 1.0, 1e4]),
            lambda x: tf.where(x > 0, x, exp(x) - 1),
        ),
        Family(
            "log_cosh",
            single([-1e4, -100.0, -20.0, -1.0, 0.0, 1e-3, 1.0, 20.0, 100.0, 1e4]),
            lambda x: log(tf.math.cosh(x)),
        ),
        Family(
            "cauchy",
            single([-3e38, -1e20, -1e10, -1.0, -1e-20, 0.0, 0.5, 1e19, 3e38]),
            lambda x: log(1 + x**2),
        ),
        Family(
            "asinh_log",
            single([-3e38, -1e20, -747.0, -1.0, -1e-3, 0.0, 1e-3, 1.0, 747.0, 1e20, 3e38]),
            lambda x: log(x + tf.math.sqrt(x**2 + 1)),
        ),
        # r**-12 underflows below float16's smallest normal (6e-5) for r > 2.2
        Family(
            "inverse_power",
            single([0.5, 0.9, 1.0, 1.1, 2.0]),
            lambda r: r**-12,
        ),
        # log(1 - exp(x)) for x < 0 in each spelling (-1e-10 rounds to -0 in float16,
        # where the gradient is -inf, as the reference's limit says)
        Family("log1mexp_naive", single(LOG1MEXP_POINTS), lambda x: log(1 - exp(x))),
        Family(
            "log1mexp_expm1", single(LOG1MEXP_POINTS), lambda x: log(-tf.math.expm1(x))
        ),
        Family(
            "log1mexp_log1p", single(LOG1MEXP_POINTS), lambda x: tf.math.log1p(-exp(x))
        ),
        Family("log1mexp_negated", single(LOG1MEXP_POINTS), lambda x: log(-(exp(x) - 1))),
        Family(
            "logdiffexp",
            [(0.0, -1.0), (1.0, 0.5), (20.0, -20.0), (100.0, 99.0), (1e4, 0.0),
             (1e4, 9000.0), (-100.0, -101.0), (1e-3, 0.0), (0.5, -1e4)],
            lambda a, b: log(exp(a) - exp(b)),
        ),
        Family(
            "log_expm1",
            single([1e-30, 1e-3, 0.5, 1.0, 20.0, 100.0, 1e4]),
            lambda x: log(exp(x) - 1),
        ),
        Family("softplus_log1p", single(SIGMOID_POINTS), lambda x: tf.math.log1p(exp(x))),
        Family(
            "log1p_expm1",
            single(SIGMOID_POINTS),
            lambda x: tf.math.log1p(tf.math.expm1(x)),
        ),
        Family(
            "exp_log1p",
            single([-1.0, -0.5, -1e-3, 0.0, 1e-30, 1.0, 1e4]),
            lambda x: exp(tf.math.log1p(x)),
        ),
        Family(
            "expm1_log1p",
            single([-1.0, -0.5, -1e-3, 0.0, 1e-30, 1.0, 1e4]),
            lambda x: tf.math.expm1(tf.math.log1p(x)),
        ),
        Family("exp_product", PAIR_POINTS, lambda a, b: exp(a) * exp(b)),
        Family(
            "log1m_sigmoid",
            single(SIGMOID_POINTS),
            lambda x: tf.math.log1p(-tf.math.sigmoid(x)),
        ),
        Family(
            "log_recip_sigmoid",
            single(SIGMOID_POINTS),
            lambda x: log(1 / tf.math.sigmoid(x)),
        ),
        Family(
            "odds",
            single(SIGMOID_POINTS),
            lambda x: tf.math.sigmoid(x) / tf.math.sigmoid(-x),
        ),
        Family(
            "log_odds",
            single(SIGMOID_POINTS),
            lambda x: log(tf.math.sigmoid(x) / (1 - tf.math.sigmoid(x))),
        ),
        # p = 0 and p = 1 are left out: the reference's limit there is slow and wrong
        Family(
            "sigmoid_logit",
            single([1e-7, 1e-3, 0.3, 0.5, 0.999]),
            lambda p: tf.math.sigmoid(log(p / (1 - p))),
        ),
    ]


# ------------------------------------------------------------------ the reference


# The spec language's functions that SymPy spells differently, by their definitions.
_SPEC_FUNCTIONS = {
    "where": lambda c, a, b: sympy.Piecewise((a, c), (b, True)),
    "log1p": lambda u: sympy.log(1 + u),
    "expm1": lambda u: sympy.exp(u) - 1,
    "sigmoid": lambda u: 1 / (1 + sympy.exp(-u)),
    "det": sympy.Function("det"),  # matrix ops: only their names are used
}


class _Equalities(ast.NodeTransformer):
    """``a == b`` and ``a != b`` as Eq(a, b) and Ne(a, b) (Python would compare the
    SymPy trees and give a bool)."""

    def visit_Compare(self, node):
        self.generic_visit(node)
        if len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
            name = "Eq" if isinstance(node.ops[0], ast.Eq) else "Ne"
            return ast.Call(ast.Name(name, ast.Load()), [node.left, node.comparators[0]], [])
        return node


def raw_expressions(spec=SPEC):
    """{op: (SymPy expression as written, input symbols)} of a spec (default
    examples/stability.yaml).

    Parsed here by SymPy's own parser (the examples are trusted text), not by gradgen:
    the reference must not share a bug with what it checks. SymPy may simplify the
    expression (log(exp(x)) is x for real x); its values and derivatives are the
    same.
    """
    import yaml
    from sympy.parsing.sympy_parser import parse_expr, standard_transformations

    out = {}
    for op in yaml.safe_load(Path(spec).read_text())["ops"]:
        symbols = [sympy.Symbol(name, real=True) for name in op["inputs"]]
        names = {**{s.name: s for s in symbols}, **_SPEC_FUNCTIONS}
        text = ast.unparse(_Equalities().visit(ast.parse(op["output"].strip(), mode="eval")))
        expr = parse_expr(text, local_dict=names, transformations=standard_transformations)
        out[op["name"]] = (expr, symbols)
    return out


def displayed_expressions(spec=SPEC):
    """{op: the expression as the README's tables show it} (gradgen's parse, printed in
    the spec's syntax, so that it can be copied into a spec: `where(x != 0, ...)`, where
    SymPy's Piecewise((..., Ne(x, 0)), ...) is not the spec language; display only,
    never a reference)."""
    from gradgen.derive import spec_str
    from gradgen.expr import parse_op
    from gradgen.spec import load_spec

    doc = load_spec(spec)
    return {op.name: spec_str(parse_op(doc, i).outputs[0].term.expr)
            for i, op in enumerate(doc.model.ops)}


def reference_gradient(expr, symbols, point, order=1):
    """Exact gradient (or, with order=2, the diagonal of the Hessian) at ``point``.

    The derivative of the expression as written is evaluated with mpmath at 60 digits,
    then at more digits (up to 6000) until two results agree to 40 digits: naive forms
    cancel catastrophically (the derivative of exp(x)/(1 + exp(x)) at x = 1e4 is a
    difference of two numbers near 1 that is exp(-1e4)). Where the formula is 0/0 the
    limit (SymPy) is used. Returns floats; ``math.nan`` where no limit exists.
    """
    out = []
    for s in symbols:
        d = sympy.diff(expr, s, order)
        value = _evaluate(d, symbols, point)
        if value is None:
            value = _limit(d, symbols, point, s)
        out.append(float(value) if value is not None else math.nan)
    return tuple(out)


def _evaluate(d, symbols, point):
    import mpmath

    f = sympy.lambdify(symbols, d, modules="mpmath")
    previous = None
    for dps in (60, 250, 1200, 6000):
        with mpmath.workdps(dps):
            try:
                value = f(*(mpmath.mpf(float(v)) for v in point))
            except (ZeroDivisionError, ValueError):
                value = None  # 0/0 at this precision: more digits, or the limit
            if value is not None and (isinstance(value, mpmath.mpc) or mpmath.isnan(value)):
                value = None
            if value is not None and previous is not None and (
                value == previous
                or abs(value - previous) <= mpmath.mpf(10) ** -40 * abs(value)
            ):
                return value
            previous = value
    return previous


def _limit(d, symbols, point, s):
    """The limit of ``d`` at ``point`` along ``s`` (others fixed), if it exists."""
    others = {t: sympy.nsimplify(v) for t, v in zip(symbols, point) if t != s}
    target = sympy.nsimplify([v for t, v in zip(symbols, point) if t == s][0])
    expr = d.subs(others)
    try:
        value = sympy.limit(expr, s, target, "+-")
    except (ValueError, NotImplementedError):
        return None  # one-sided limits differ: undefined
    if value == sympy.zoo:  # infinite with a sign that depends on the side: take the
        # side a signed zero is on (-1e-10 rounds to -0.0 in float16), else the + side
        # (inside log's and sqrt's domain)
        at = float([v for t, v in zip(symbols, point) if t == s][0])
        below = at == 0 and math.copysign(1.0, at) < 0
        value = sympy.limit(expr, s, target, "-" if below else "+")
    if value == sympy.oo:
        return math.inf
    if value == -sympy.oo:
        return -math.inf
    return value.evalf(50) if value.is_real else None


def rounded(values, dtype):
    """``values`` rounded to ``dtype`` and back to float64 (the inputs TF sees)."""
    import tensorflow as tf

    return [float(tf.cast(tf.constant(v, tf.float64), dtype).numpy().astype(np.float64))
            for v in values]


# ------------------------------------------------------------ reductions (per row)
# examples/reductions.yaml: each op maps a row of three logits to one or three outputs;
# the reference differentiates a weighted sum of the outputs as written.

ROWS = [
    (100.0, 0.0, -100.0),
    (1000.0, 999.0, 0.0),
    (1e4, 1e4, 1e4),  # a three-way tie of huge logits
    (-1e4, 0.0, 1e4),
    (0.0, -20.0, -1e4),  # one term dominates: log1p of the rest
    (0.0, 1e-30, -1e-30),
    (3.0, 3.0, 1.0),
    (-1e4, -1e4, -9999.0),
]
# upstream: a generic direction (ones would cancel), exact in every dtype, so that the
# loss TensorFlow differentiates is the one the reference differentiates
WEIGHTS = (0.25, -0.75, 1.125)
# log(mean(exp(x))) at x = (0, 1e-30, -1e-30) is 3.3e-61, a second-order term of
# inputs 1e-30: its condition number is 1e30, so no float64 evaluation (of any formula)
# can resolve it; gradgen gives 0, within 1e-30 of the value at a neighbouring input.
ILL_CONDITIONED_FORWARD = {("log_mean_exp", (0.0, 1e-30, -1e-30))}
LABELS = (0.25, 0.5, 0.25)
_A, _B, _C = _X = sympy.symbols("a b c", real=True)
_EXPS = [sympy.exp(v) for v in _X]
_TOTAL = sympy.Add(*_EXPS)

# op -> per-row outputs as written (SymPy, over the row's three logits a, b, c)
REFERENCE = {
    "logsumexp_naive": [sympy.log(_TOTAL)],
    "logsumexp_stable": [sympy.log(_TOTAL)],
    "softmax_naive": [e / _TOTAL for e in _EXPS],
    "softmax_stable": [e / _TOTAL for e in _EXPS],
    "softmax_from_log": [sympy.exp(v - sympy.log(_TOTAL)) for v in _X],
    "log_softmax_naive": [v - sympy.log(_TOTAL) for v in _X],
    "log_softmax_stable": [v - sympy.log(_TOTAL) for v in _X],
    "log_of_softmax": [sympy.log(e / _TOTAL) for e in _EXPS],
    "softmax_cross_entropy": [
        -sympy.Add(*(sympy.Rational(lab) * (v - sympy.log(_TOTAL))
                     for lab, v in zip(LABELS, _X)))
    ],
    # log_mean_exp reduces over axis 0 of [3, batch]: a row is one column
    "log_mean_exp": [sympy.log(_TOTAL / 3)],
    "max_margin": None,  # a kink: see _max_margin
}
REDUCTION_OPS = sorted(REFERENCE)


def _exact(expr, row) -> float:
    value = _evaluate(expr, list(_X), row)  # 60 digits, more until two agree
    return float(value)


def _max_margin(row):
    """max - min with tied extremes sharing the gradient (README "Kinks")."""
    top = [float(v == max(row)) for v in row]
    low = [float(v == min(row)) for v in row]
    grad = [WEIGHTS[0] * (t / sum(top) - m / sum(low)) for t, m in zip(top, low)]
    scale = [abs(g) for g in grad]
    return [max(row) - min(row)], grad, scale, [[0.0] * 3 for _ in range(3)]


def reference(op, row):
    """(forward outputs, gradient of the weighted loss, the gradient's scale, Hessian)
    for one row.

    The gradient is a VJP, sum_j w_j * d(out_j)/dx_k; its scale is
    sum_j |w_j * d(out_j)/dx_k|, the size of the terms it adds up: no evaluation of the
    sum in floating point can promise a smaller error than that scale times the unit
    roundoff (e.g. the log-softmax gradient at tied logits, w_k - sum(w) / 3).
    """
    if REFERENCE[op] is None:
        return _max_margin(row)
    outputs = REFERENCE[op]
    weights = [sympy.Rational(w) for w in WEIGHTS]
    loss = sympy.Add(*(w * o for w, o in zip(weights, outputs)))
    forward = [_exact(o, row) for o in outputs]
    grad = [_exact(sympy.diff(loss, v), row) for v in _X]
    scale = [
        sum(abs(float(w) * _exact(sympy.diff(o, v), row)) for w, o in zip(weights, outputs))
        for v in _X
    ]
    hessian = [[_exact(sympy.diff(loss, v, w), row) for w in _X] for v in _X]
    return forward, grad, scale, hessian


# ------------------------------------------------------------------ the README table


def trace_in_a_graph(tf, fn, signature) -> None:
    """Trace ``fn`` and its gradient in a ``tf.function`` with ``signature``.

    Graph mode converts Python numbers by an op's first tensor argument (a
    ``tf.where(c, -1.0, x)`` in a helper is float32 against a float16 ``x`` there, while
    eager mode converts it), so every op is traced in every dtype with unknown sizes.
    """

    def forward_and_gradient(*args):
        with tf.GradientTape() as tape:
            tape.watch(args)
            out = fn(*args)
        return out, tape.gradient(out, args)

    tf.function(forward_and_gradient, input_signature=signature).get_concrete_function()


def gradients(tf, fn, point, dtype):
    """d fn / d input at one point (inputs of shape [1])."""
    args = [tf.constant([v], dtype=dtype) for v in point]
    with tf.GradientTape() as tape:
        for a in args:
            tape.watch(a)
        out = fn(*args)
    return [np.float64(g.numpy()[0]) if g is not None else 0.0 for g in tape.gradient(out, args)]


def table(tf, module) -> str:
    """Markdown rows: where float32 TF autodiff differs from the reference and gradgen."""
    raw = raw_expressions()
    shown = displayed_expressions()
    rows = [
        "| op | expression | input | TF autodiff | gradgen | exact |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for family in families(tf):
        expr, symbols = raw[family.op]
        for point in family.points:
            point = tuple(rounded(point, "float32"))
            exact = family.conventions.get(point) or reference_gradient(expr, symbols, point)
            ours = gradients(tf, getattr(module, family.op), point, "float32")
            theirs = gradients(tf, family.plain, point, "float32")
            if all(_close(t, e) or (math.isnan(e) and math.isnan(t)) for t, e in zip(theirs, exact)):
                continue
            rows.append(
                f"| `{family.op}` | `{shown[family.op]}` | {_fmt_point(point)} | "
                f"{_fmt(theirs)} | {_fmt(ours)} | {_fmt(exact)} |"
            )
    return "\n".join(rows)


def _plain_special(tf):
    """The elementwise ops of examples/special.yaml in plain TensorFlow."""
    m = tf.math

    def filled(x, value, fill):
        return tf.where(x != 0, value, tf.ones_like(x) * fill)

    return {
        "one_minus_erf": lambda u: 1 - m.erf(u),
        "erf_minus_one": lambda u: m.erf(u) - 1,
        "one_minus_erfc": lambda u: 1 - m.erfc(u),
        "erfc_neg_minus_one": lambda u: m.erfc(-u) - 1,
        "erfc_neg": lambda u: m.erfc(-u),
        "log_erfc": lambda u: m.log(m.erfc(u)),
        "log_one_minus_erf": lambda u: m.log(1 - m.erf(u)),
        "hypot2": lambda x, y: m.sqrt(x * x + y * y),
        "hypot3": lambda x, y, z: m.sqrt(x * x + y * y + z * z),
        "data_power": lambda x, p: m.pow(x, p),
        "exp_log_power": lambda x, p: m.exp(p * m.log(x)),
        "sinc_filled": lambda x: filled(x, m.sin(x) / x, 1.0),
        "sinc_where": lambda x: tf.where(x == 0, tf.ones_like(x), m.sin(x) / x),
        "expm1_ratio_filled": lambda x: filled(x, m.expm1(x) / x, 1.0),
        "sinc_far_branch": lambda x: tf.where(x > 5, 1 / x, m.sin(x) / x),
    }


def special_table(tf, module) -> str:
    """Markdown rows for examples/special.yaml, as :func:`table` (at most three rows per
    op: the first points where float32 TF autodiff differs from the reference)."""
    from test_special_stability import CASES, _points, _reference

    raw = raw_expressions(ROOT / "examples" / "special.yaml")
    displayed = displayed_expressions(ROOT / "examples" / "special.yaml")
    rows = [
        "| op | expression | input | TF autodiff | gradgen | exact |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for op, plain in _plain_special(tf).items():
        expr, symbols = _reference(raw, op)
        shown = 0
        for point in _points(op, "float32"):
            conventions = CASES[op][2]
            exact = conventions.get(point) or reference_gradient(expr, symbols, point)
            theirs = gradients(tf, plain, point, "float32")
            if shown == 3 or all(
                _close(t, e) or (math.isnan(e) and math.isnan(t)) for t, e in zip(theirs, exact)
            ):
                continue
            shown += 1
            ours = gradients(tf, getattr(module, op), point, "float32")
            rows.append(
                f"| `{op}` | `{displayed[op]}` | {_fmt_point(point)} | "
                f"{_fmt(theirs)} | {_fmt(ours)} | {_fmt(exact)} |"
            )
    return "\n".join(rows)


def _plain_reductions(tf):
    """The naive reductions of examples/reductions.yaml in plain TensorFlow, per row."""
    exp, log, total = tf.math.exp, tf.math.log, tf.reduce_sum

    def lse(x, keepdims=True):
        return log(total(exp(x), axis=-1, keepdims=keepdims))

    return {
        "softmax_cross_entropy": lambda x: -total(
            tf.constant([LABELS], x.dtype) * (x - lse(x)), axis=-1, keepdims=True),
        "logsumexp_naive": lse,
        "softmax_naive": lambda x: exp(x) / total(exp(x), axis=-1, keepdims=True),
        "log_softmax_naive": lambda x: x - lse(x),
        "log_of_softmax": lambda x: log(exp(x) / total(exp(x), axis=-1, keepdims=True)),
        "softmax_from_log": lambda x: exp(x - lse(x)),
        "log_mean_exp": lambda x: log(tf.reduce_mean(exp(x), axis=-1, keepdims=True)),
    }


def reduction_call(tf, module, op, x):
    """The generated op at rows ``x`` ([rows, 3]) as a [rows, outputs] tensor."""
    fn = getattr(module, op)
    if op == "softmax_cross_entropy":
        labels = tf.broadcast_to(tf.constant([LABELS], x.dtype), tf.shape(x))
        out = fn(labels, x)
    elif op == "log_mean_exp":
        out = fn(tf.transpose(x))  # it reduces over the leading axis
    else:
        out = fn(x)
    return out[:, tf.newaxis] if out.shape.rank == 1 else out


def weighted_gradient(tf, fn, x):
    """Gradient of sum(fn(x) * WEIGHTS) with respect to the rows ``x``."""
    with tf.GradientTape() as tape:
        tape.watch(x)
        out = fn(x)
        w = tf.constant(WEIGHTS[: out.shape[-1]], out.dtype)
        loss = tf.reduce_sum(out * w)
    return tape.gradient(loss, x).numpy().astype(np.float64)


def reduction_table(tf, module) -> str:
    """Markdown rows for the reductions: float32 gradients of a weighted sum of the
    outputs (weights WEIGHTS) where TF's autodiff of the plain forward is wrong."""
    rows = [
        "| op | expression | logits | TF autodiff | gradgen | exact |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    spec = {op["name"]: op["output"] for op in _reduction_spec()["ops"]}
    for op, plain in _plain_reductions(tf).items():
        shown = 0
        x = tf.constant(ROWS, tf.float32)
        exact_rows = tf.cast(x, tf.float64).numpy().tolist()
        theirs = weighted_gradient(tf, plain, x)
        ours = weighted_gradient(tf, lambda v, op=op: reduction_call(tf, module, op, v), x)
        for i, row in enumerate(exact_rows):
            exact = reference(op, tuple(row))[1]
            if all(_close(t, e) for t, e in zip(theirs[i], exact)) or shown == 3:
                continue  # the first three rows of each op where TF is wrong
            shown += 1
            rows.append(
                f"| `{op}` | `{spec[op]}` | {_fmt_point(row)} | {_fmt(theirs[i])} | "
                f"{_fmt(ours[i])} | {_fmt(exact)} |"
            )
    return "\n".join(rows)


def _reduction_spec():
    import yaml

    return yaml.safe_load((ROOT / "examples" / "reductions.yaml").read_text())


def _close(got, want, dtype="float32"):
    """``got`` is ``want`` rounded to ``dtype`` (overflowing values are signed inf)."""
    if math.isnan(want):
        return False
    if math.isinf(want) or abs(want) > LARGEST[dtype]:
        return math.isinf(got) and got * want > 0
    return abs(got - want) <= RTOL[dtype] * abs(want) + SMALLEST_NORMAL[dtype]


def _fmt(values):
    return ", ".join(f"{v:.6g}" for v in values)


def _fmt_point(point):
    return ", ".join(f"{v:g}" for v in point)


if __name__ == "__main__":
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.path.insert(0, str(ROOT))
    import tensorflow as tf

    from gradgen.loading import load_file

    modules = {name: load_file(ROOT / "generated" / f"{name}.py")
               for name in ("stability", "special", "reductions")}
    print(table(tf, modules["stability"]))
    print("\nError functions, norms, data powers and filled-in singularities")
    print("(`examples/special.yaml`, float32, the first three points of each op):\n")
    print(special_table(tf, modules["special"]))
    print("\nReductions (examples/reductions.yaml): gradients of a weighted sum of the outputs")
    print(f"(weights {', '.join(f'{w:g}' for w in WEIGHTS)}; labels {', '.join(f'{v:g}' for v in LABELS)}):\n")
    print(reduction_table(tf, modules["reductions"]))
