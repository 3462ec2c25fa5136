"""Golden records that tests compare with and ``tests/regen_golden.py`` rewrites.

Two records besides the bad specs' error output (``regen_golden.bad_spec_result``):

* ``tests/golden/expressions.txt``: for each expression of :data:`EXPRESSIONS`, what
  :func:`gradgen.expr.parse_op` makes of it: the SymPy trees (``srepr``, so assumptions
  and exact numbers show), shapes, leaves and tensor nodes; or the whole diagnostic, with
  its file:line:col, for a refused one.
* ``tests/golden/views/<spec>.json``: for each op of each example spec (and of the specs in
  ``tests/specs/views/``, written for printing paths the examples miss), the printed
  statements and docstring that the templates receive (:func:`gradgen.views.op_views`),
  before the accuracy audit's sentence is added (the audit is measured, and tested, in
  test_audit.py; here only derivation and printing are pinned).

Both are reviewed as diffs: a change to parsing, derivation, the stable rewrites or the
printer shows up here as a readable change of the record, and must be meant.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
EXPRESSIONS_GOLDEN = GOLDEN / "expressions.txt"
VIEWS_GOLDEN = GOLDEN / "views"
EXAMPLES = ROOT / "examples"
# The example specs, and test specs written for printing paths the examples do not reach.
VIEW_SPECS = (EXAMPLES, ROOT / "tests" / "specs" / "views")

V3 = {"x": [3], "y": [3]}
MAT = {"a": [2, 3], "b": [3, 4], "s": [3, 3], "x": [3], "c": [], "t": [2, 3, 4]}
NAMED = {"p": ["batch", 3], "q": ["batch", 1], "r": [None, 3], "u": [None], "v": [None],
         "m": [None, None]}
CPLX = {"z": {"shape": [2, 2], "dtype": "complex64"}, "w": {"shape": [2], "dtype": "complex64"}}
INTS = {"x": [3], "n": {"shape": [3], "dtype": "int32"}}

# (expression, inputs, where): every construct the parser accepts and every refusal it
# makes, each once. `where` maps intermediate names to expressions (None: no `where`).
_CASES: list[tuple] = [
    # operators and literals
    ("x + y", V3), ("x - y", V3), ("x * y", V3), ("x / y", V3), ("x ** y", V3),
    ("+x - -y", V3), ("x ** 2.0", V3), ("x ** 0.5", V3), ("x ** -0.5", V3),
    ("x ** 1.5", V3), ("x ** 0.3", V3), ("x ** 0.25", V3), ("x * 0.1 + 1e-300", V3),
    ("x * 1e20", V3), ("x * 9007199254740992", V3), ("x * 9007199254740993", V3),
    ("x * 2.0 ** 3", V3), ("x * 2 ** -3", V3), ("x * 10 ** 300", V3), ("x * 10 ** 301", V3),
    ("x * 2.5 ** 1000", V3), ("x * 0.5 ** 1000", V3), ("x * 1 ** 100000", V3),
    ("x * 0 ** 5", V3), ("x * pi + E", V3), ("x * (1 - 1)", V3), ("1e400 * x", V3),
    ("x * 1.5e308 * 10.0", V3), ("2", V3), ("pi", V3),
    # every function of the language
    *((f"{name}(x)", V3) for name in (
        "exp", "sqrt", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
        "tanh", "asinh", "acosh", "atanh", "erf", "erfc", "Abs", "abs", "sign", "floor",
        "ceiling", "Heaviside", "log1p", "expm1", "sigmoid", "softplus", "log",
    )),
    ("log(x, 2)", V3), ("log(x, y)", V3), ("log(x, y, 2)", V3), ("log()", V3),
    ("atan2(y, x)", V3), ("atan2(x)", V3), ("Max(x, y)", V3), ("Min(x, y, 0)", V3),
    ("Max(x)", V3), ("Min()", V3), ("exp()", V3), ("exp(x, y)", V3), ("exp(x, y=1)", V3),
    # conditions
    *((f"where(x {op} y, x, y)", V3) for op in ("<", "<=", ">", ">=", "==", "!=")),
    ("where(0 < x < 1, x, 0)", V3), ("where(x > 0 and y > 0, x, y)", V3),
    ("where(x > 0 or y > 0, x, y)", V3), ("where(not x > 0, x, y)", V3),
    ("where(True, x, y)", V3), ("where(False, x, y)", V3),
    ("where(x > 0, x)", V3), ("where(x, x, y)", V3), ("where(x > 0, x > 0, y)", V3),
    ("where(x > 0, x, y > 0)", V3), ("where(x and y, x, y)", V3),
    ("where(x > 0 and y, x, y)", V3), ("where(not x, x, y)", V3), ("-(x > 0)", V3),
    ("(x > 0) + 1", V3), ("1 + (x > 0)", V3), ("where((x > 0) > 0, x, y)", V3),
    ("where(x > (y > 0), x, y)", V3), ("x > 0", V3), ("True", V3), ("x is y", V3),
    ("x in y", V3), ("x is not y", V3),
    ("Piecewise((x, x < 0), (y, True))", V3),
    ("Piecewise((x, x < 0), (0, x < 1), (y, True))", V3),
    ("Piecewise()", V3), ("Piecewise(x)", V3), ("Piecewise((x,))", V3),
    ("Piecewise((x, x, y))", V3), ("Piecewise((x, x > 0))", V3),
    ("Piecewise((x > 0, True))", V3), ("Piecewise((x, x))", V3),
    ("Piecewise((x, True), z=1)", V3),
    # tensor functions
    ("a @ b", MAT), ("a @ b + 1", MAT), ("a @ a", MAT), ("x @ x", MAT), ("(x > 0) @ s", MAT),
    ("s @ (x > 0)", MAT), ("transpose(a)", MAT), ("transpose(x)", MAT),
    ("transpose(a, b)", MAT), ("inverse(s)", MAT), ("inverse(a)", MAT), ("inverse(x)", MAT),
    ("det(s)", MAT), ("det(a)", MAT), ("det(s, s)", MAT), ("trace(s)", MAT), ("trace(x)", MAT),
    ("log(det(s))", MAT), ("log(det(a))", MAT), ("log(det(s > 0))", MAT),
    ("log(det(s, s))", MAT), ("log(det(s), 2)", MAT), ("log(det(s=1))", MAT),
    ("log(det(s)) + det(s) + inverse(s)[0]", MAT), ("det(s) + det(s)", MAT),
    ("det(s) + det(transpose(s))", MAT), ("transpose(t)", MAT), ("softmax(t)", MAT),
    ("log_softmax(t)", MAT), ("t @ transpose(t)", MAT), ("x + 0 ** 1000", MAT),
    ("einsum('" + "i" * 64 + "', a)", MAT),
    ("sum(a)", MAT), ("sum(a, 0)", MAT), ("sum(a, -1)", MAT), ("sum(a, axis=1)", MAT),
    ("sum(a, axis=[0, 1])", MAT), ("sum(a, axis=(1, 0))", MAT),
    ("sum(a, axis=-1, keepdims=True)", MAT), ("sum(a, keepdims=False)", MAT),
    ("sum(a, 0, keepdims=True)", MAT), ("sum(a, 0, axis=1)", MAT), ("sum(a, foo=1)", MAT),
    ("sum(a, axis=3)", MAT), ("sum(a, axis=-3)", MAT), ("sum(a, axis=[0, -2])", MAT),
    ("sum(a, axis=x)", MAT), ("sum(a, axis=[0, x])", MAT), ("sum(a, axis=1.0)", MAT),
    ("sum(a, axis=True)", MAT), ("sum(a, keepdims=1)", MAT), ("sum(a, keepdims=x)", MAT),
    ("sum()", MAT), ("sum(a, 0, 1)", MAT), ("sum(a > 0)", MAT), ("sum(c)", MAT),
    ("sum(c, axis=0)", MAT), ("sum(x * x)", MAT), ("sum(exp(x))", MAT), ("sum(x - x)", MAT),
    ("mean(a, axis=0)", MAT), ("mean(a)", MAT), ("max(a, axis=1)", MAT), ("max(a, 1)", MAT),
    ("max(a, -1)", MAT), ("max(a, [0])", MAT), ("max(a, x)", MAT), ("min(a, b)", MAT),
    ("min(abs(a), 0)", MAT), ("max(exp(a))", MAT), ("max(a)", MAT), ("min(-exp(a), 0)", MAT),
    ("logsumexp(a, axis=-1)", MAT), ("logsumexp(a, axis=1, keepdims=True)", MAT),
    ("softmax(a)", MAT), ("softmax(a, 0)", MAT), ("softmax(a, axis=[0, 1])", MAT),
    ("softmax(a, keepdims=True)", MAT), ("softmax(c)", MAT), ("log_softmax(a, -2)", MAT),
    ("log_softmax(a)", MAT), ("log(softmax(a))", MAT), ("sum(softmax(a)) + sum(a)", MAT),
    ("sum(a) * sum(a)", MAT), ("sum(a, 0) + sum(a, axis=0)", MAT),
    ("sum(a, 0) + sum(a, 0, keepdims=True)", MAT),
    ("einsum('ij,jk->ik', a, b)", MAT), ("einsum('ij->', a)", MAT),
    ("einsum('ij->ji', a)", MAT), ("einsum('ii->', s)", MAT), ("einsum('ij,ij->i', a, a)", MAT),
    ("einsum('i,i->', x, x)", MAT), ("einsum('ij,jk', a, b)", MAT),
    ("einsum('ij,jk->ik', a)", MAT), ("einsum('ij,jk->ik', a, a)", MAT),
    ("einsum('ij->k', a)", MAT), ("einsum('ij->ii', a)", MAT), ("einsum('ii->i', s)", MAT),
    ("einsum('i...->i', a)", MAT), ("einsum('ijk->i', a)", MAT), ("einsum('i j->i', a)", MAT),
    ("einsum('iJ->i', a)", MAT), ("einsum('i,j->ij', x, x)", MAT), ("einsum(a, b)", MAT),
    ("einsum()", MAT), ("einsum(1, a)", MAT), ("einsum('" + "i" * 65 + "', a)", MAT),
    ("einsum('ij->i', a > 0)", MAT), ("einsum('ij->i', a, keepdims=True)", MAT),
    # names, functions and calls
    ("z * x", V3), ("xx * y", V3), ("Pi * x", V3), ("exp", V3), ("sum", V3), ("x(1)", V3),
    ("(x + 1)(2)", V3), ("foo(x)", V3), ("exq(x)", V3), ("exp.real", V3), ("x.T", V3),
    ("I * x", V3), ("2j * x", V3),
    # forbidden constructs
    ("lambda: x", V3), ("[c for c in x]", V3), ("{c for c in x}", V3), ("{c: 1 for c in x}", V3),
    ("sum(c for c in x)", V3), ("f'{x}'", V3), ("x if y else x", V3), ("(y := x)", V3),
    ("x[0]", V3), ("{'a': 1}", V3), ("{1}", V3), ("exp(*x)", V3), ("exp(**x)", V3),
    ("(x, y)", V3), ("[x, y]", V3), ("...", V3), ("b'x'", V3), ("'a'", V3), ("None", V3),
    ("x // y", V3), ("x % y", V3), ("x << y", V3), ("x >> y", V3), ("x & y", V3),
    ("x | y", V3), ("x ^ y", V3), ("~x", V3), ("not x", V3), ("await x", V3),
    ("x # a comment", V3), ("x + \u00e9", V3), ("x\ty", V3), ("x +", V3), ("x + + ", V3),
    ("(x", V3), ("x)", V3), ("x y", V3), ("import os", V3), ("x; y", V3),
    ("(" * 70 + "x" + ")" * 70, V3), ("-" * 70 + "x", V3),
    ("+".join(["x"] * 1001), V3), ("where(" + "<".join(["x"] * 1001) + ", x, y)", V3),
    ("-" * 4001 + "x", V3),
    # values that are not finite, real or representable
    ("x / 0", V3), ("x * (1 / 0)", V3), ("x + 0 / 0", V3), ("log(0) * x", V3),
    ("where(1 / 0 > 0, x, y)", V3), ("sqrt(-1) * x", V3), ("log(-1) + x", V3),
    ("x * (-8) ** 0.5", V3), ("acos(2) + x", V3), ("x * exp(1000)", V3),
    # broadcasting and named dims
    ("x + y", {"x": [3], "y": [4]}), ("x + y", {"x": [4, 1], "y": [3]}),
    ("p * q", NAMED), ("p * r", NAMED), ("u * 2", NAMED), ("p + u", NAMED),
    ("p @ transpose(p)", NAMED), ("sum(p, 0) * r", NAMED), ("p + x", {**NAMED, "x": ["n", 3]}),
    ("einsum('bi,bi->b', p, r)", NAMED), ("einsum('i,i->', u, v)", NAMED), ("det(m)", NAMED),
    ("inverse(m) @ m", NAMED), ("m @ transpose(m)", NAMED),
    # dtypes
    ("n * x", INTS), ("n * 2", {"n": {"shape": [3], "dtype": "int32"}}),
    ("x * y", {"x": [3], "y": {"shape": [3], "dtype": "float64"}}),
    ("z @ z + 2j", CPLX), ("z * (1 + 2j) + I", CPLX), ("w * 1e400j", CPLX),
    ("where(w > 0, w, w)", CPLX), ("w * 2 ** 1j", CPLX), ("det(z) * conj", CPLX), ("sum(z) + trace(z)", CPLX),
    ("sum(abs(z))", CPLX), ("softmax(z, 0)", CPLX),
    # the edges of the checks: a float literal at 2**53 (an integer) and past it (a float),
    # a control character next to the printable range, a complex constant in a
    # parenthesised expression (its column is the expression's, not the value's), names
    # close to pi and E, infinities that only one sign of reaches
    ("x * 9007199254740992.0", V3), ("x * 9007199254740994.0", V3), ("x + \x7f", V3),
    ("(x * sqrt(-2))", V3), ("pii * x", V3), ("EE * x", V3), ("atanh(1) + x", V3),
    ("atanh(-1) + x", V3), ("det(q)", {"q": [2, 3, 3]}),
    # a known size meeting an unknown one: the size is recorded for the build-time checks
    ("m @ k", {"m": [None, None], "k": [5, 2]}),
    ("einsum('ij,jk->ik', m, k)", {"m": [None, None], "k": [5, 2]}),
    ("det(r) + inverse(r)", {"r": [None, 5]}), ("trace(m) * 2", NAMED),
    # the safe value of a branch after where(x == 1, ...) avoids x = 1
    ("where(x == 1, 1, where(x > 0, log(x) / (x - 1), 0))", V3),
]
# Derivation: complex functions (holomorphic or refused), the reductions' stable rewrites.
_CASES += [
    *((f"{name}(w)", CPLX) for name in (
        "exp", "log", "sqrt", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
        "tanh", "asinh", "acosh", "atanh", "abs", "sign", "floor", "erf", "sigmoid",
        "softplus", "expm1", "log1p",
    )),
    ("w ** 2 + 1 / w - w ** 0.5", CPLX), ("inverse(z) @ z + transpose(z)", CPLX),
    ("det(z) * trace(z)", CPLX), ("log(det(z))", CPLX), ("einsum('ij,jk->ik', z, z)", CPLX),
    # two refused functions: the first in SymPy's sort order is named; an operand reduced
    # to a broadcast one is conjugated inside its broadcast
    ("sign(w) + abs(w)", CPLX), ("einsum('ij,jk->ik', z - z + w, z)", CPLX),
    ("a - logsumexp(a, axis=1, keepdims=True)", MAT), ("log(softmax(a, axis=0))", MAT),
    ("log(sum(exp(a)))", MAT), ("log(mean(exp(a), axis=1))", MAT),
    ("log(sum(exp(a), axis=1, keepdims=True))", MAT), ("log(sum(exp(t), axis=[0, 2]))", MAT),
    ("log(sum(exp(t), axis=[1, 2]))", MAT), ("log(sum(exp(a - 1), axis=0))", MAT),
    ("log(sum(2 * exp(a), axis=0))", MAT), ("log(sum(exp(a) / 2, axis=0))", MAT),
    ("exp(a) / sum(exp(a), axis=1, keepdims=True)", MAT), ("log(sum(exp(c)))", MAT),
    ("sum(a * log_softmax(a, axis=1), axis=1)", MAT), ("log_softmax(t, axis=[1, 2])", MAT),
    ("logsumexp(t, axis=[0, 2]) + mean(t, axis=1)", MAT), ("sum(log(softmax(t)), axis=2)", MAT),
    ("max(a, axis=0) + min(a, axis=1)", MAT), ("max(t, axis=[0, 2], keepdims=True)", MAT),
    ("log(sum(exp(u)))", NAMED), ("softmax(r, axis=0) * r", NAMED), ("mean(m, axis=1)", NAMED),
    ("log(1 + exp(x))", V3), ("log(exp(x) + exp(y))", V3), ("sqrt(x ** 2 + y ** 2)", V3),
    ("x ** -13 - x ** -7", V3), ("1 / (1 + exp(-x))", V3), ("log(1 - exp(-abs(x)) + y)", V3),
    ("(exp(x) - 1) / x", V3), ("x * y - x * y + exp(x) * 0", V3), ("Heaviside(x) * x", V3),
    ("sign(x) * floor(y) + ceiling(x)", V3), ("abs(x) + Max(x, y) + Min(x, 0)", V3),
]
# where: named intermediates; the output uses them.
_WHERE_CASES: list[tuple] = [
    ("s * 2", {"x": [4, 1], "y": [3]}, {"s": "x + y"}),
    ("t + 1", MAT, {"t": "sum(a)"}),
    ("t + 1", MAT, {"t": "sum(a) + 1"}),
    ("inv @ b", MAT, {"inv": "inverse(s) @ s"}),
    ("big * 2", V3, {"big": " + ".join(f"exp({k} * x) * sin(y)" for k in range(1, 8))}),
    ("big * 2", V3, {"big": " + ".join(f"exp({k} * x) * sin(y)" for k in range(1, 13))}),
    ("c * 2", V3, {"c": "x > 0"}),
    ("where(c, x, y)", V3, {"c": "x > 0"}),
    ("d + 1", V3, {"d": "e + 1", "e": "x"}),
    ("x + 1", V3, {"d": "foo(x)"}),
    ("det(s) + 1", MAT, {"w": "det(s) * 2"}),  # the node computed once; its leaves kept
    ("w + 1", MAT, {"w": "det(s) * 2"}),
    ("w + 1", MAT, {"w": "softmax(a) * 2"}),
    ("w + 1", MAT, {"w": "einsum('ij->', a) * 2"}),
    ("w + 1", MAT, {"w": "inverse(s) * 2"}),
    ("w + 1", MAT, {"w": "logsumexp(a) * 2"}),
    ("w + 1", MAT, {"w": "a @ b * 2"}),
    ("w + 1", MAT, {"w": "transpose(a) * 2"}),
    # at the size where an intermediate becomes its own step (60: inlined; 62: a step)
    ("big * 2", V3, {"big": " + ".join(f"exp({k} * x) * sin(y)" for k in range(1, 9))
                     + " + sin(x) * sin(y)"}),
    ("big * 2", V3, {"big": " + ".join(f"exp({k} * x) * sin(y)" for k in range(1, 9))
                     + " + sin(x) * sin(2 * y)"}),
]
# Refusals of a part of an expression: each is written inside a larger one, so that the
# diagnostic's column shows which part it points at.
_INNER = [
    "~x", "x is b", "(x, b)", "Piecewise()", "Piecewise((x, x > 0), (x, x < 0))",
    "x @ x", "a @ a", "transpose(x)", "inverse(a)", "det(x)", "log(det(a))", "sum()",
    "sum(a, foo=1)", "softmax(c)", "einsum(a)", "einsum('ij->k', a)", "where(x > 0, x)",
    "exp(x, c)", "Max(x)", "foo(x)", "z", "exp", "x(1)", "2j", "I", "1 / 0", "x // x",
    "[x]", "'a'", "None", "x if x else x", "where(c > 0, x, t)", "where(x > 0 or c, x, x)",
    "log(-1)", "10 ** 400", "where(x > 0, c > 0, x)", "max(a, b)", "einsum('ij->i', a, a)",
    "a + b", "where(a > 0 and b > 0, x, x)", "where(a > b, x, x)", "exp(x > 0)",
    "Piecewise((a, c > 0), (b, True))", "sqrt(x, x)", "log(x, x, x)", "log(a, b)",
    "atan2(a, b)", "Max(a, b)", "transpose(a, a)", "det(s, s)", "exp(x)(2)",
    "where(sqrt(-1) > 0, x, x)", "atanh(1)", "atanh(-1)",
]


def _spec_text(output: str, inputs: dict, where: dict | None, dtype: str = "float32") -> str:
    op: dict = {"name": "f", "inputs": inputs}
    if where:
        op["where"] = where
    op["output"] = output
    doc = {"version": 1, "module": "m", "dtype": dtype, "ops": [op]}
    return yaml.safe_dump(doc, sort_keys=False, width=10**6, default_flow_style=None)


# Hand-written spec texts: positions inside quoted, folded and block scalars.
_TEXTS = [
    "version: 1\nmodule: m\nops:\n  - name: f\n    inputs: {x: [3]}\n"
    "    output: |\n      exp(x)\n        + bad(x)\n",
    "version: 1\nmodule: m\nops:\n  - name: f\n    inputs: {x: [3]}\n"
    "    output: \"exp(x) + bad(x)\"\n",
    "version: 1\nmodule: m\nops:\n  - name: f\n    inputs: {x: [3]}\n"
    "    output: 'exp(x) + bad(x)'\n",
    "version: 1\nmodule: m\nops:\n  - name: f\n    inputs: {x: [3]}\n"
    "    output: >-\n      exp(x)\n      + bad(x)\n",
    "version: 1\nmodule: m\nops:\n  - name: f\n    inputs: {x: [3]}\n"
    "    output: |\n      (exp(x)\n",
    "version: 1\nmodule: m\nops:\n  - name: f\n    inputs: {x: [3]}\n"
    "    outputs:\n      first: exp(x)\n      second: x @ x\n",
    "version: 1\nmodule: m\ndtype: float64\nops:\n  - name: f\n    inputs: {n: {shape: [3], dtype: int32}}\n"
    "    output: n * 2\n",
    "version: 1\nmodule: m\ndtype: complex128\nops:\n  - name: f\n    inputs: {n: {shape: [3], dtype: int64}}\n"
    "    output: n * 2\n",
]


# Multi-line expressions (block scalars) with brackets and quotes in strings: such a text
# is parsed as if in parentheses only when its brackets balance outside strings.
_BLOCK = "version: 1\nmodule: m\nops:\n  - name: f\n    inputs: {x: [3]}\n    output: |\n"
_TEXTS += [
    _BLOCK + "      x\n      + einsum(')', x)\n",
    _BLOCK + "      x\n      + einsum('(', x)\n",
    _BLOCK + "      x\n      + einsum(\"]\", x)\n",
    _BLOCK + "      x\n      + einsum(\"'(\", x)\n",
    _BLOCK + "      x\n      + einsum('\"]', x)\n",
    _BLOCK + "      x\n      + ((x))\n      + [x]\n",
    _BLOCK + "      x\n      + x)\n",
    _BLOCK + "      x)\n      + (x\n",
    _BLOCK + "      (x\n      + x\n",
    _BLOCK + "      {x\n      + x}\n",
    # an input named X (a letter next to no bracket or quote) in multi-line texts
    _BLOCK.replace("{x: [3]}", "{X: [3]}") + "      X\n      + X\n",
    _BLOCK.replace("{x: [3]}", "{X: [3]}") + "      X + (\n      2 * X\n",
    # no float input: the module's dtype when it is a float one, else float32
    "version: 1\nmodule: m\ndtype: int32\nops:\n  - name: f\n    inputs: {n: [3]}\n"
    "    output: n * 2\n",
    # outputs named like their whole expressions' steps; the op's doc and memory policy
    "version: 1\nmodule: m\nops:\n  - name: f\n    doc: Two views of s.\n"
    "    memory: recompute\n    inputs: {s: [3, 3]}\n"
    "    outputs:\n      ld: log(det(s))\n      inv: inverse(s) * 2\n",
]


# The same expressions in each float dtype: guard thresholds, Taylor degrees and the
# half-precision power policy are chosen per dtype.
_DTYPE_CASES = [
    "log(1 + exp(x))", "sqrt(x ** 2 + y ** 2)", "(exp(x) - 1) / x", "sin(x) / x",
    "x ** -13 - x ** -7 + x ** -2", "log(1 - exp(-abs(x)) + y)", "sqrt(x) * log(x)",
    "x * log(x) + y * log1p(-y)", "log(cosh(x))", "erfc(x) * exp(x ** 2)",
    "tanh(x) * sigmoid(-x)", "log(sum(exp(x)))", "x / sqrt(x ** 2 + 1)",
]


# Cases added later, kept last so that the numbers of the cases above stay as they are.
# Derivation: the VJPs' shapes and names (trace's identity size in a batch of matrices,
# a mean over a size-1 axis, compound operands of @, einsum and det materialized as
# named cotangents, a first operand that is not differentiated), and a `where`
# intermediate shown by its name after its expression was rewritten.
_LATER: list[tuple] = [
    ("trace(q) * 2", {"q": [2, 3, 4, 4]}, None),
    ("trace(s) * 2", {"s": [None, 4]}, None),
    ("mean(k, axis=1)", {"k": [3, 1]}, None),
    ("exp(a) @ (b * 2)", MAT, None),
    ("einsum('ij,jk->ik', exp(a), b * 2)", MAT, None),
    ("einsum('ij->i', exp(a))", MAT, None),
    ("det(exp(s))", MAT, None),
    ("c @ b", {"c": {"shape": [2, 3], "differentiable": False}, "b": [3, 4]}, None),
    ("s * y", V3, {"s": "log(1 + exp(x))"}),
    # the stable reductions: a mean with a run-time count (left alone); log-softmax
    # forms at each rank and axis choice, with a mean's log(n); the softmax node's
    # assumptions (positive: its abs goes); a second reduction beside a rewritten one;
    # a node after the new one that uses it; factors beside the merged exponentials;
    # a rewritten reduction inside a `where` step
    ("log(mean(exp(m), axis=1))", NAMED, None),
    ("c - logsumexp(c)", MAT, None),
    ("a - log(mean(exp(a), axis=1, keepdims=True))", MAT, None),
    ("k - logsumexp(k, axis=1)", {"k": [3, 1]}, None),
    ("t - logsumexp(t, axis=0)", MAT, None),
    ("x - logsumexp(x)", MAT, None),
    ("abs(exp(a) / sum(exp(a), axis=1, keepdims=True))", MAT, None),
    ("log(sum(exp(a), axis=1)) + sum(a)", MAT, None),
    ("sum(a - logsumexp(a, axis=1, keepdims=True), axis=1)", MAT, None),
    ("log(sum(exp(a), axis=0)) * exp(x) * exp(c)", MAT, None),
    ("2 * exp(a) / sum(exp(a), axis=1, keepdims=True)", MAT, None),
    ("w * 2", MAT, {"w": "log(sum(exp(a), axis=1)) + "
                    + " + ".join(f"exp({k} * c) * sin({k} * c)" for k in range(1, 9))}),
]
# Operands that simplification drops (x - x): the value is broadcast back to its shape as
# written, statically or from the run-time shapes of what was written; complex ops with
# the real-only reductions, and a rule that is real-only (softplus) left out for them
_LATER += [
    ("p - p + q", NAMED, None), ("u - u + v", NAMED, None), ("r * 0 + 1", NAMED, None),
    ("m - m", NAMED, None), ("x - x + c", MAT, None), ("c - c + 1", MAT, None),
    ("a * 0 + x", MAT, None), ("exp(p) - exp(p) + exp(q)", NAMED, None),
    *((f"{op}(z)", CPLX, None) for op in ("max", "min", "logsumexp")),
    ("softmax(z, axis=0)", CPLX, None), ("log_softmax(z, axis=0)", CPLX, None),
    ("x * 2 + 1e400", MAT, None),  # the column of a literal that overflows float64
    ("x * 2 + atan2(x)", MAT, None),  # the column of a wrong number of arguments
    # an input named `out` (the output's local takes another name), a named dim used
    # once (nothing to compare it with), half-integer powers by squaring chains
    ("out * 2", {"out": [3]}, None), ("p * x", {"p": ["n", 3], "x": [3]}, None),
    ("x ** 2.5 + y ** -2.5 + x ** 1.5", V3, None),
    # inputs named as SymPy's own CSE would name its temporaries (x0, x1)
    ("exp(x0) * x1 + exp(x0) * sin(x1)", {"x0": [3], "x1": [3]}, None),
    # dropped operands beside two run-time dims, beside a node (its renamed leaf); a
    # node no output depends on (no cotangent), before and after one that is used; a
    # node's cotangent unbroadcast at run time
    ("u + v + m - m", NAMED, None), ("sum(a, axis=0) + x - x", MAT, None),
    ("x + 0 * det(s)", MAT, None), ("trace(s) + x + 0 * det(s)", MAT, None),
    ("sum(m, axis=1) + u", NAMED, None),
    # a complex program's reductions are not rewritten (logsumexp is real-only)
    ("log(sum(exp(z)))", CPLX, None),
    # a softmax node inside a square root (positive: no zero guard); logs beside a
    # rewritten logsumexp that are not of its exponentials
    ("sqrt(exp(a) / sum(exp(a), axis=1, keepdims=True) + 1)", MAT, None),
    ("log(sum(exp(a), axis=0)) + log(2 * exp(x)) + log(x ** 2 + 1)", MAT, None),
    # reductions rewritten in a `where` intermediate, beside an operand dropped by
    # simplification (the leaves of each rewritten expression keep x: its broadcast), in
    # a node's operand, and a log-softmax beside a logsumexp still used
    ("l * 2", MAT, {"l": "log(sum(exp(a), axis=1))"}),
    ("log(sum(exp(a), axis=1, keepdims=True)) + x - x", MAT, None),
    ("l * 2", MAT, {"l": "log(sum(exp(a), axis=1, keepdims=True)) + x - x"}),
    ("sum(log(sum(exp(a), axis=1, keepdims=True)) + x - x, axis=0)", MAT, None),
    ("a - logsumexp(a, axis=1, keepdims=True) + x - x", MAT, None),
    ("(a - logsumexp(a, axis=1, keepdims=True)) * logsumexp(a, axis=1, keepdims=True)",
     MAT, None),
    # a softmax node is positive: its square root needs no zero guard
    ("sqrt(exp(a) / sum(exp(a), axis=1, keepdims=True))", MAT, None),
    ("log(1 + exp(w))", CPLX, None), ("w * log(1 + exp(w))", CPLX, None),
    # a complex operand reduced to a broadcast one, with a run-time shape: conjugated
    # inside the broadcast, which keeps its shape argument
    ("einsum('ij,jk->ik', d - d + w, z)",
     {**CPLX, "d": {"shape": [None, 2], "dtype": "complex64"}}, None),
]
# memory: recompute, where the gradient needs forward steps that need each other
_LATER_TEXTS = [
    "version: 1\nmodule: m\nops:\n  - name: f\n    memory: recompute\n"
    "    inputs: {x: [3], y: [3], z: [3]}\n"
    "    output: exp(x) * y + log(y) * exp(x) + tanh(z) * x\n",
    "version: 1\nmodule: m\nops:\n  - name: f\n    memory: recompute\n"
    "    inputs: {s: [3, 3]}\n    output: log(det(s)) + sum(inverse(s) @ s)\n",
    # several outputs, and an input named as gradgen would name a step (exp_x): the step
    # takes another name
    "version: 1\nmodule: m\nops:\n  - name: f\n    inputs: {x: [3], exp_x: [3]}\n"
    "    outputs:\n      first: exp(x) * exp_x\n      second: exp(x) * 3\n",
    # an output that is a step a node's operand already needed (emitted before it, the
    # output's comment added), then another output
    "version: 1\nmodule: m\nops:\n  - name: f\n    inputs: {x: [3], y: [3]}\n"
    "    outputs:\n      first: exp(x) * y\n      second: sum(exp(x) * y) * 2\n",
]


def expression_cases() -> list[str]:
    """The spec texts of the expression record, in order."""
    texts = [_spec_text(text, inputs, None) for text, inputs in _CASES]
    texts += [_spec_text(text, V3, None, dtype) for dtype in ("float16", "bfloat16", "float64")
              for text in _DTYPE_CASES]
    texts += [_spec_text(text, inputs, where) for text, inputs, where in _WHERE_CASES]
    texts += [_spec_text(f"x * 2 + ({text})", MAT, None) for text in _INNER]
    texts += _TEXTS + [_spec_text(text, inputs, where) for text, inputs, where in _LATER]
    return texts + _LATER_TEXTS


def describe_expression(spec_text: str) -> str:
    """What gradgen.expr makes of the one op in ``spec_text``: its program, or the
    diagnostics of its refusal."""
    import sympy

    from gradgen.errors import SpecError
    from gradgen.expr import parse_op
    from gradgen.shapes import format_shape
    from gradgen.spec import parse_spec

    try:
        doc = parse_spec(spec_text.encode(), "s.yaml")
        program = parse_op(doc, 0)
    except SpecError as e:
        return "\n".join("refused: " + d.format() for d in e.diagnostics)

    def term(t) -> str:
        leaves = ", ".join(sorted(s.name for s in t.leaves))
        kind = "condition" if t.is_condition else "value"
        return (f"{sympy.srepr(t.expr)}\n    {kind} of shape {format_shape(t.shape)}, "
                f"leaves [{leaves}]")

    lines = [f"op {program.name} key {list(program.key)} doc {program.doc!r} memory "
             f"{program.memory}", f"dtype {program.dtype}, single {program.single}"]
    for v in program.inputs:
        lines.append(f"input {v.name}: {sympy.srepr(v.symbol)} {format_shape(v.shape)} "
                     f"declared {list(v.declared)} {v.dtype} key {list(v.key)}")
    for n in program.nodes:
        args = "; ".join(sympy.srepr(a) for a in n.args)
        shapes = ", ".join(format_shape(s) for s in n.arg_shapes)
        leaves = "; ".join(", ".join(sorted(s.name for s in ls)) for ls in n.arg_leaves)
        lines.append(
            f"node {sympy.srepr(n.symbol)} = {n.op}({args})\n    shape "
            f"{format_shape(n.shape)} from {shapes}, params {n.params!r}, hint "
            f"{n.name_hint!r}, leaves [{leaves}], key {list(n.key)}"
        )
    for symbol, shape in program.shape_of.items():
        lines.append(f"shape of {symbol.name}: {format_shape(shape)}")
    for name, t in program.where:
        lines.append(f"where {name} = {term(t)}")
    for o in program.outputs:
        lines.append(f"output {o.name} = {term(o.term)}\n    key {list(o.key)}")
    return "\n".join(lines + _derived(doc))


def _derived(doc) -> list[str]:
    """The code gradgen derives and prints for the op of ``doc`` (statements with their
    comments), or the refusal."""
    from gradgen.pipeline import derive_op
    from gradgen.errors import SpecError
    from gradgen.views import RenderError, op_views

    try:
        op = derive_op(doc, 0)
        views = op_views(op).to_json()
    except SpecError as e:
        return ["derive refused: " + d.format() for d in e.diagnostics]
    except RenderError as e:
        return [f"print refused: {e}"]
    module = views["module"]
    lines = [f"helpers {views['helpers']}, math {views['uses_math']}, "
             f"recompute {module['recompute']}"]
    for part in ("forward", "recomputed", "backward"):
        for statement in module[part]:
            lines += [f"  # {c}" for c in statement["comments"]]
            lines.append(f"  {part}: {statement['code']}")
    lines.append(f"  returns {module['returns']}; gradients {module['grad_returns']}")
    # what else the templates receive: the signature, the input checks, the docstring
    # (partials, VJPs, unbroadcasts, rewrites, shapes), and the emitted test's reference
    # forward and cases
    lines.append(f"  def {module['name']}({module['params']}) -> {module['impl']}, "
                 f"grad {module['grad_fn']}({module['upstreams']})")
    lines += [f"  check: {c}" for c in module["checks"]]
    lines += ["  doc: " + line if line else "  doc:" for line in
              module["docstring"].strip('"').strip("\n").splitlines()]
    test = views["test"]
    lines += [f"  test reference: {r['code']}" for r in test["reference"]]
    lines.append(f"  test returns {test['returns']}; cases {json.dumps(views['cases'])}")
    lines += [f"  unbroadcast {name}: {'; '.join(plans)}" for name, plans in op.reductions]
    return lines


def expressions_record() -> str:
    """The whole expression record: each case's output expression, then what it became."""
    import yaml as _yaml

    parts = []
    for i, text in enumerate(expression_cases()):
        op = _yaml.safe_load(text)["ops"][0]
        shown = op.get("output") or op.get("outputs")
        where = f" where {op['where']}" if op.get("where") else ""
        shown = shown if len(repr(shown)) <= 200 else repr(shown)[:200] + "..."
        parts.append(f"## {i}: {shown!r}{where}\n{describe_expression(text)}\n")
    return "\n".join(parts)


# Specs recorded again in other dtypes (module dtype replaced): guard thresholds, Taylor
# degrees and the half-precision power policy are chosen per dtype.
DTYPE_VARIANTS = {"stability.yaml": ("float16", "bfloat16", "float64"),
                  "special.yaml": ("float16", "bfloat16", "float64")}


def example_ops() -> list[tuple[str, int, str]]:
    """(record, op index, op name) for every op of every spec in VIEW_SPECS, where a
    record is a spec file name, or ``name@dtype`` for a DTYPE_VARIANTS copy."""
    out = []
    for folder in VIEW_SPECS:
        for path in sorted(folder.glob("*.yaml")):
            ops = yaml.safe_load(path.read_text())["ops"]
            for record in [path.name] + [f"{path.name}@{d}" for d in DTYPE_VARIANTS.get(path.name, ())]:
                out += [(record, index, op["name"]) for index, op in enumerate(ops)]
    return out


def _spec_path(example: str) -> Path:
    (path,) = [folder / example for folder in VIEW_SPECS if (folder / example).exists()]
    return path


def op_views_json(record: str, index: int) -> dict:
    """The views of one op of a record (derived and printed now), as JSON data."""
    from gradgen.pipeline import derive_op
    from gradgen.errors import SpecError
    from gradgen.spec import parse_spec
    from gradgen.views import op_views

    example, _, dtype = record.partition("@")
    path = _spec_path(example)
    text = path.read_text()
    if dtype:
        text = yaml.safe_dump(dict(yaml.safe_load(text), dtype=dtype), sort_keys=False)
    doc = parse_spec(text.encode(), str(path.relative_to(ROOT)))
    try:
        return op_views(derive_op(doc, index)).to_json()
    except SpecError as e:  # a function without a kernel in this dtype: the refusal
        return {"refused": str(e)}


def views_golden_path(record: str) -> Path:
    example, _, dtype = record.partition("@")
    return VIEWS_GOLDEN / (example[: -len(".yaml")] + (f".{dtype}" if dtype else "") + ".json")


def views_record(example: str) -> str:
    """The views record of one example spec: {op name: views}, as stable JSON text."""
    ops = {name: op_views_json(example, index)
           for ex, index, name in example_ops() if ex == example}
    return json.dumps(ops, indent=1, sort_keys=True, ensure_ascii=True) + "\n"
