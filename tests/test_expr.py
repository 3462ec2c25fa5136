"""Safe parsing: the allow-list, positions, shapes, and refusal of code."""

from __future__ import annotations

import builtins
import re

import pytest
import sympy
import yaml

from gradgen.errors import SpecError
from gradgen.expr import parse_op
from gradgen import functions as fn
from gradgen.functions import sigmoid, softplus
from gradgen.spec import parse_spec
from regen_golden import bad_specs, golden_path, parsed_stderr


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


# A corpus of hostile expressions, each with the refusal it must get: every one is refused
# by the allow-list (naming the construct) without running anything. SENTINEL is
# replaced by a file in the test's own folder: where the first attack would write if
# the text ever reached eval.
UNKNOWN = "unknown function '{}' (allowed: "
ATTACKS = [
    ("__import__('os').system('touch SENTINEL')", "attribute access ('.') is not allowed"),
    ("open('SENTINEL', 'w').write('x')", "attribute access ('.') is not allowed"),
    ("open('SENTINEL', 'w')", UNKNOWN.format("open")),
    ("x.__class__", "attribute access ('.') is not allowed"),
    ("x.__class__.__bases__[0].__subclasses__()", "attribute access ('.') is not allowed"),
    ("().__class__", "attribute access ('.') is not allowed"),
    ("exp.__globals__", "attribute access ('.') is not allowed"),
    ("(lambda: 1)()", "lambdas are not allowed"),
    ("[c for c in 'ab']", "comprehensions are not allowed"),
    ("{k: 1 for k in 'ab'}", "comprehensions are not allowed"),
    ("f'{x}'", "f-strings are not allowed"),
    ("eval('1')", UNKNOWN.format("eval")),
    ("exec('1')", UNKNOWN.format("exec")),
    ("open('/etc/passwd')", UNKNOWN.format("open")),
    ("getattr(x, 'real')", UNKNOWN.format("getattr")),
    ("globals()", UNKNOWN.format("globals")),
    ("x if x else y", "'a if c else b' is not allowed; use where(c, a, b) or Piecewise"),
    ("(y := 2)", "assignment expressions (':=') are not allowed"),
    ("x[0]", "indexing ('[...]') is not allowed"),
    ("x[:1]", "indexing ('[...]') is not allowed"),
    ("*x", "invalid expression syntax"),
    ("{'a': 1}", "dict literals are not allowed"),
    ("{1, 2}", "set literals are not allowed"),
    ("x // y", "operator '//' is not allowed; use floor(a / b)"),
    ("x % y", "operator '%' is not allowed"),
    ("x ^ y", "operator '^' is not allowed; use '**' for a power"),
    ("x | y", "operator '|' is not allowed; use 'or' to combine conditions"),
    ("where((x > 0) & (y > 0), x, y)", "operator '&' is not allowed; use 'and' to combine"),
    ("~x", "operator '~' is not allowed; use 'not' for a condition"),
    ("not x", "expected a condition such as x > 0"),
    ("'a' + 'b'", "strings are only allowed as einsum subscripts"),
    ("x is y", "only < <= > >= == != comparisons are allowed"),
    ("x in y", "only < <= > >= == != comparisons are allowed"),
    ("await x", "'await' is not allowed"),
    ("sympify('x')", UNKNOWN.format("sympify")),
    ("exp(x, y=1)", "exp() takes no keyword arguments"),
    ("exp(*x)", "'*' unpacking is not allowed"),
    ("10 ** 10 ** 10", "constant power is too large to represent"),
    ("2 ** 4000 * x", "constant power is too large to represent"),
    ("pi ** 1000000 * x", "constant power is too large to represent"),  # not only integers
    ("1e400 * x", "literal is not finite (overflows float64)"),
    ("x / 0", "expression is infinite or undefined (e.g. 1/0)"),
    ("(" * 300 + "x" + ")" * 300, "too many nested parentheses"),
    ("-" * 5000 + "x", "longer than 4000 characters"),
    ("+".join(["x"] * 5000), "longer than 4000 characters"),
    ("x\x00", "expressions are ASCII; found '\\x00' at character 2"),
    ("import os", "invalid expression syntax"),
    ("x; y", "invalid expression syntax"),
]


@pytest.mark.parametrize("text, fragment", ATTACKS, ids=[str(i) for i in range(len(ATTACKS))])
def test_attacks_are_refused_without_running_anything(text, fragment, monkeypatch, tmp_path):
    def forbidden(*args, **kwargs):
        raise AssertionError("spec text reached eval/exec/sympify")

    sentinel = tmp_path / "gradgen-pwned"
    monkeypatch.chdir(tmp_path)  # a relative path written by an attack lands here too
    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(builtins, "exec", forbidden)
    monkeypatch.setattr(sympy, "sympify", forbidden)
    monkeypatch.setattr(sympy.parsing.sympy_parser, "parse_expr", forbidden)
    message = refused(text.replace("SENTINEL", str(sentinel)))
    assert fragment in message, (text[:60], message)
    assert not sentinel.exists()


@pytest.mark.parametrize("name", bad_specs())
def test_bad_spec_messages_are_recorded(name):
    """Every refusal's full message, located, as the command line prints it: what reading
    and parsing each bad spec (tests/specs/bad) report equals its recorded stderr, which
    test_cli.py compares the command's output with. The refused_*.yaml specs hold one op
    per refusal of gradgen/expr and gradgen/shapes.py (every message, each variant of a
    message); `python tests/regen_golden.py` rewrites the records."""
    assert parsed_stderr(name) == golden_path(name).read_text()


@pytest.mark.parametrize("text", [
    "x * erfc(1e300)",  # mpmath's series test overflows a float
    "x / softplus(sinh(1e300))",
])
def test_a_constant_mpmath_overflows_on_is_refused_not_a_traceback(text):
    """A function of a huge constant whose evaluation overflows in mpmath (OverflowError,
    which the visitor did not catch) was an internal error; it is refused like the other
    values SymPy cannot build (the rest of the message is mpmath's own)."""
    assert refused(text).startswith("this expression cannot be built: ")


@pytest.mark.parametrize("text, constant", [
    ("Heaviside(acos(1e300)) * x", "Heaviside("),  # SymPy compares a complex number with 0
    ("Min(softplus(acos(1e300)), 2.5) + x", "Min("),
    ("Heaviside(exp(acos(1e300))) * x", "Heaviside(exp("),  # cannot convert to float
])
def test_a_constant_sympy_cannot_evaluate_is_refused_not_a_traceback(text, constant):
    """A constant whose evaluation raised TypeError in the check for complex constants
    was an internal error; it is refused, naming the constant and SymPy's reason."""
    message = refused(text)
    assert message.startswith("the constant " + constant)
    reason = re.fullmatch(r"the constant .+ cannot be evaluated \((.+)\); "
                          r"an op with real inputs needs real constants", message)
    assert reason and " " in reason.group(1)  # SymPy's words, not only the error's type


def test_the_bound_on_a_folded_constant_is_1100_bits():
    """SymPy folds a product of constants into one (2**900 * 2**199 is one Integer,
    each power below the power's own bound): 1100 bits are built (the printer refuses
    them later as not finite), 1101 are refused here."""
    assert program("x * 2**900 * 2**199")
    assert refused("x * 2**900 * 2**200") == ("a constant here has more than 300 digits, "
                                              "beyond any floating-point type")


def test_an_evaluation_error_without_words_is_named_by_its_type():
    """Where SymPy's error carries no message, the refusal names the error's type (an
    empty pair of parentheses says nothing)."""
    from gradgen.expr.parser import _Core
    from gradgen.expr.syntax import _ExprError

    class Unevaluable(sympy.Symbol):  # a constant whose evaluation raises OverflowError()
        is_extended_real = None

        def evalf(self, *args, **kwargs):
            raise OverflowError()

    with pytest.raises(_ExprError) as info:
        _Core._constant_value(None, Unevaluable("c"))
    assert info.value.message == ("the constant c cannot be evaluated (OverflowError); an "
                                  "op with real inputs needs real constants")


def test_a_real_constant_sympy_knows_is_real_is_not_evaluated():
    """log1p(1e-300) is real (and 1/log1p(1e-300) is 1e300): the check for complex
    constants does not evaluate it, where 20 digits made it 0 and 1/0 an internal
    error."""
    assert program("x / log1p(1e-300)")


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


def _ast_parts(text: str) -> int:
    import ast

    return sum(1 for _ in ast.walk(ast.parse(text, mode="eval").body))


def test_the_size_bound_counts_every_part_of_the_tree():
    from gradgen.expr import MAX_AST_NODES

    # Max(x, ..., x, 1): the Call, its Name and Load, 2 per x (a Name and its Load), 1
    at_bound = "Max(" + "x, " * ((MAX_AST_NODES - 4) // 2) + "1)"
    assert _ast_parts(at_bound) == MAX_AST_NODES
    assert program(at_bound).outputs[0].term.expr.has(X)  # exactly at the bound: accepted
    over = at_bound[:-1] + ", 1)"
    assert _ast_parts(over) == MAX_AST_NODES + 1
    assert refused(over) == f"expression has more than {MAX_AST_NODES} parts"


def test_a_tree_python_cannot_build_is_refused_not_a_traceback():
    from gradgen.spec import MAX_EXPRESSION_CHARS

    text = "-" * (MAX_EXPRESSION_CHARS - 1) + "x"  # Python's parser runs out of stack
    with pytest.raises(SpecError) as info:
        program(text)
    (d,) = info.value.diagnostics
    assert (d.message, d.field) == ("expression is nested too deeply or too large", "output")


def test_running_out_of_stack_while_building_is_a_diagnostic(monkeypatch):
    from gradgen.expr.parser import _Parser

    def deep(self, node):
        raise RecursionError

    monkeypatch.setattr(_Parser, "visit_BinOp", deep)
    with pytest.raises(SpecError) as info:
        program("x * 2")
    (d,) = info.value.diagnostics
    assert (d.message, d.field) == ("expression is nested too deeply", "output")


def test_a_node_type_without_a_visitor_is_refused_by_name():
    """A node type a later Python adds (3.14's template strings) is refused, named."""
    import ast

    from gradgen.expr.parser import _Parser

    class TemplateStr(ast.expr):
        _fields = ()

    node = ast.BinOp(ast.Name("x", ast.Load()), ast.Add(), TemplateStr())
    text = yaml.safe_dump({"version": 1, "module": "m", "ops": [
        {"name": "f", "inputs": {"x": [3]}, "output": "x"}]})
    parser = _Parser(parse_spec(text.encode(), "s.yaml"), "f", None, False)
    parser.names["x"] = program("x").outputs[0].term
    with pytest.raises(Exception) as info:
        parser.visit(node)
    assert info.value.message == "'TemplateStr' is not allowed in an expression"
    assert info.value.node is node.right
