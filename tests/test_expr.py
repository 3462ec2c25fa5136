"""Safe parsing: the allow-list, positions, shapes, and refusal of code."""

from __future__ import annotations

import builtins

import pytest
import sympy
import yaml

from gradgen.errors import SpecError
from gradgen.expr import parse_op
from gradgen import functions as fn
from gradgen.functions import sigmoid, softplus
from gradgen.spec import parse_spec


def program(output, inputs=None, where=None, dtype="float32"):
    op = {"name": "f", "inputs": inputs or {"x": [3], "y": [3]}}
    if where:
        op["where"] = where
    op["outputs" if isinstance(output, dict) else "output"] = output
    text = yaml.safe_dump(
        {"version": 1, "module": "m", "dtype": dtype, "ops": [op]}, sort_keys=False
    )
    return parse_op(parse_spec(text.encode(), "s.yaml"), 0)


def refused(output, **kw) -> str:
    with pytest.raises(SpecError) as info:
        program(output, **kw)
    (diagnostic,) = info.value.diagnostics
    return diagnostic.message


X, Y = sympy.Symbol("x", real=True), sympy.Symbol("y", real=True)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("x * y + 2", X * Y + 2),
        ("x / y - x ** 2", X / Y - X**2),
        ("-x", -X),
        ("exp(x) + log(y) + sqrt(x)", sympy.exp(X) + sympy.log(Y) + sympy.sqrt(X)),
        ("sigmoid(x) * softplus(y)", sigmoid(X) * softplus(Y)),
        ("abs(x) + Abs(y)", sympy.Abs(X) + sympy.Abs(Y)),
        ("Max(x, y, 0)", fn.Max(X, Y, 0)),
        ("atan2(y, x)", sympy.atan2(Y, X)),
        ("where(x > 0, x, y)", sympy.Piecewise((X, X > 0), (Y, True))),
        ("Piecewise((x, x < 1), (y, True))", sympy.Piecewise((X, X < 1), (Y, True))),
        ("where(0 < x < 1, x, 0)", sympy.Piecewise((X, (X > 0) & (X < 1)), (0, True))),
        ("x * pi + E", X * sympy.pi + sympy.E),
        ("log(x, 2)", sympy.log(X) / sympy.log(2)),
        ("x ** 2.0", X**2),  # a float literal equal to an integer is that integer
    ],
)
def test_parses_to_sympy(text, expected):
    p = program(text)
    assert p.outputs[0].term.expr == expected


def test_inputs_are_real_symbols_and_ints_are_integers():
    p = program("n * x", inputs={"x": [3], "n": {"shape": [3], "dtype": "int32"}})
    x, n = (v.symbol for v in p.inputs)
    assert x.is_real and n.is_integer


def test_where_names_are_substituted_and_shapes_broadcast():
    p = program("s * 2", inputs={"x": [4, 1], "y": [3]}, where={"s": "x + y"})
    assert p.outputs[0].term.expr == 2 * (X + Y)
    assert p.outputs[0].term.shape == (4, 3)
    assert p.where[0][0] == "s"


def test_simplified_away_operands_keep_the_written_shape():
    p = program("x - x + y", inputs={"x": [4, 1], "y": [3]})
    term = p.outputs[0].term
    assert term.expr == Y and term.shape == (4, 3)
    assert {s.name for s in term.leaves} == {"x", "y"}


def test_matmul_creates_a_node():
    p = program("a @ b + 1", inputs={"a": [2, 3], "b": [3, 4]})
    (node,) = p.nodes
    assert node.op == "matmul" and node.shape == (2, 4)
    assert p.outputs[0].term.expr == node.symbol + 1


# A corpus of hostile expressions: every one must be refused without running anything.
ATTACKS = [
    "__import__('os').system('touch /tmp/gradgen-pwned')",
    "x.__class__",
    "x.__class__.__bases__[0].__subclasses__()",
    "().__class__",
    "exp.__globals__",
    "(lambda: 1)()",
    "[c for c in 'ab']",
    "{k: 1 for k in 'ab'}",
    "f'{x}'",
    "eval('1')",
    "exec('1')",
    "open('/etc/passwd')",
    "getattr(x, 'real')",
    "globals()",
    "x if x else y",
    "(y := 2)",
    "x[0]",
    "x[:1]",
    "*x",
    "{'a': 1}",
    "{1, 2}",
    "x // y",
    "x % y",
    "x ^ y",
    "x | y",
    "~x",
    "not x",
    "'a' + 'b'",
    "x is y",
    "x in y",
    "await x",
    "sympify('x')",
    "exp(x, y=1)",
    "exp(*x)",
    "10 ** 10 ** 10",
    "2 ** 4000 * x",
    "1e400 * x",
    "x / 0",
    "(" * 300 + "x" + ")" * 300,
    "-" * 5000 + "x",
    "+".join(["x"] * 5000),
    "x\x00",
    "import os",
    "x; y",
]


@pytest.mark.parametrize("text", ATTACKS)
def test_attacks_are_refused_without_running_anything(text, monkeypatch, tmp_path):
    def forbidden(*args, **kwargs):
        raise AssertionError("spec text reached eval/exec/sympify")

    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(builtins, "exec", forbidden)
    monkeypatch.setattr(sympy, "sympify", forbidden)
    monkeypatch.setattr(sympy.parsing.sympy_parser, "parse_expr", forbidden)
    message = refused(text)
    assert message
    assert not (tmp_path / "gradgen-pwned").exists()


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("foo(x)", "unknown function 'foo'"),
        ("exq(x)", "did you mean 'exp'"),
        ("z * x", "unknown name 'z'"),
        ("exp", "is a function"),
        ("exp(x, y)", "exp() takes 1 argument, got 2"),
        ("Max(x)", "two or more"),
        ("x > 0", "a condition is not a value"),
        ("where(x, x, y)", "expected a condition"),
        ("Piecewise((x, x > 0))", "last Piecewise pair must have the condition True"),
        ("Piecewise(x)", "(value, condition) pair"),
        ("x @ y", "rank >= 2"),
        ("transpose(x)", "rank >= 2"),
        ("sum(x, axis=3)", "axis 3 is out of range for rank 1"),
        ("sum(x, axis=[0, 0])", "axis 0 is repeated"),
        ("sum(x, keepdims=1)", "keepdims is True or False"),
        ("einsum('ij->i', x)", "rank 2, but its shape is [3]"),
        ("einsum(x, y)", "subscript string first"),
        ("einsum('i,i', x, y)", "explicit subscripts"),
        ("einsum('i...->i', x)", "ellipsis"),
        ("einsum('ii->i', x)", "repeated within"),
        ("det(x)", "needs a matrix"),
        ("where(1/0 > 0, x, y)", "infinite or undefined"),  # found by the fuzzer
        ("2j * x", "complex literals need complex inputs"),
        ("I * x", "imaginary unit"),
    ],
)
def test_errors_say_what_was_expected(text, fragment):
    assert fragment in refused(text)


def test_error_positions_point_into_the_expression():
    text = "version: 1\nmodule: m\nops:\n  - name: f\n    inputs: {x: [3]}\n    output: exp(x) + foo(x)\n"
    with pytest.raises(SpecError) as info:
        parse_op(parse_spec(text.encode(), "s.yaml"), 0)
    d = info.value.diagnostics[0]
    assert (d.location.line, d.location.col) == (6, 22)  # the 'f' of foo
    assert d.format() == (
        "s.yaml:6:22: error: op 'f', field 'output': unknown function 'foo'; did you "
        "mean 'floor'? (allowed: Abs, Heaviside, Max, Min, Piecewise, abs, acos, acosh, "
        "asin, asinh, atan, atan2, atanh, ceiling, cos, cosh, det, einsum, erf, erfc, "
        "exp, expm1, floor, inverse, log, log1p, log_softmax, logsumexp, max, mean, "
        "min, sigmoid, sign, sin, sinh, softmax, softplus, sqrt, sum, tan, tanh, trace, "
        "transpose, where)"
    )


def test_multiline_block_expressions_keep_line_positions():
    text = (
        "version: 1\nmodule: m\nops:\n  - name: f\n    inputs: {x: [3]}\n"
        "    output: |\n      exp(x)\n        + bad(x)\n"
    )
    with pytest.raises(SpecError) as info:
        parse_op(parse_spec(text.encode(), "s.yaml"), 0)
    d = info.value.diagnostics[0]
    assert (d.location.line, d.location.col) == (8, 11)
