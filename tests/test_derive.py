"""Derivation without TensorFlow: what the generated code contains."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import sympy
import yaml

import gradgen.derive
import gradgen.derive.elementwise
import gradgen.pipeline
from gradgen.emit import generate
from gradgen.errors import SpecError


def source(output, inputs, tmp_path, where=None, name="f"):
    op = {"name": name, "inputs": inputs}
    if where:
        op["where"] = where
    op["outputs" if isinstance(output, dict) else "output"] = output
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"version": 1, "module": "m", "ops": [op]}, sort_keys=False))
    files = generate([str(spec)], str(tmp_path))
    (tmp_path / "_gradgen_runtime.py").write_text(files["_gradgen_runtime.py"])
    return files["m.py"]


def body(text, start):
    return text[text.index(start):]


def test_static_axes_are_literal(tmp_path):
    text = body(source("x * y", {"x": [10, 1], "y": [5]}, tmp_path), "def _f_vjp")
    assert "tf.reduce_sum(upstream * y, axis=[1], keepdims=True)" in text
    assert "tf.reduce_sum(upstream * x, axis=[0])" in text
    assert "tf.shape" not in text and "_unbroadcast" not in text


def test_undecidable_axes_use_run_time_shapes(tmp_path):
    text = source("a + b", {"a": [None, 3], "b": [None, 3]}, tmp_path)
    assert "grad_a = _unbroadcast(upstream, a)" in text
    assert "\n_check_input = _runtime._check_input\n_unbroadcast = _runtime._unbroadcast\n" in text
    assert "BroadcastGradientArgs" in (tmp_path / "_gradgen_runtime.py").read_text()


def test_backward_reuses_forward_values(tmp_path):
    text = source("tanh(x) * exp(y)", {"x": [3], "y": [3]}, tmp_path)
    forward = body(text, "def _f_vjp")
    grad_fn = body(forward, "def grad(")
    # tanh and exp are computed once, in the forward pass, and used by the gradient
    assert forward.count("tf.math.tanh") == 1 and "tf.math.tanh" not in grad_fn
    assert forward.count("tf.math.exp") == 1 and "tf.math.exp" not in grad_fn


def test_where_names_name_the_shared_values(tmp_path):
    text = source({"r": "sqrt(r2)", "theta": "atan2(y, x)"}, {"x": [3], "y": [3]},
                  tmp_path, where={"r2": "x**2 + y**2"})
    assert "    r2 = x * x + y * y\n" in text
    # sqrt(r2) of a sum of squares is the scaled norm (the `hypot` rule), not sqrt(r2)
    assert "    r = _hypot(x, y)\n" in text


def test_generated_code_has_no_autodiff_calls(tmp_path):
    text = source("softplus(x) * tanh(y) + x**3", {"x": [3], "y": [3]}, tmp_path)
    for forbidden in ("tf.gradients", "GradientTape", "Derivative", "sympy", "import gradgen",
                      "from gradgen"):
        assert forbidden not in text


@pytest.mark.parametrize(
    "partial, expected",
    [
        (sympy.Heaviside, "Heaviside"),  # caught when derived
        (sympy.gamma, "gamma has no TensorFlow form"),  # caught when printed
    ],
)
def test_unprintable_partial_is_a_spec_error_naming_op_and_function(
    tmp_path, monkeypatch, partial, expected
):
    monkeypatch.setattr(
        gradgen.derive.elementwise, "simplify_partial", lambda e, rules=(): (partial(e), ())
    )
    with pytest.raises(SpecError) as info:
        source("x * y", {"x": [3], "y": [3]}, tmp_path, name="odd")
    message = info.value.diagnostics[0].format()
    assert "s.yaml:" in message and "op 'odd'" in message and expected in message


def _vjp_text(output, inputs, tmp_path, dtype=None, where=None):
    op = {"name": "f", "inputs": inputs, "output": output}
    if where:
        op["where"] = where
    spec = {"version": 1, "module": "m", "ops": [op]}
    if dtype:
        spec["dtype"] = dtype
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return body(generate([str(path)], str(tmp_path))["m.py"], "def _f_vjp")


def test_integer_powers_are_squaring_chains_not_pow(tmp_path):
    text = _vjp_text("4 * (r**-12 - r**-6)", {"r": [None]}, tmp_path)
    assert "pow" not in text
    assert "inv_r = 1.0 / r" in text and "inv_r * inv_r" in text
    # the backward reuses the forward's chain instead of computing r**-13 afresh
    assert text.count("1.0 / r\n") == 1


def test_half_precision_keeps_pow_for_accuracy(tmp_path):
    # each product rounds in bfloat16; one pow call rounds once
    text = _vjp_text("r**-12", {"r": [None]}, tmp_path, dtype="bfloat16")
    assert "out = tf.math.pow(r, -12.0)" in text  # 1 / r**12 would overflow first
    assert "inv_r" not in text


def test_numeric_constants_stay_inline(tmp_path):
    text = _vjp_text("0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))",
                     {"x": [None]}, tmp_path)
    assert "(math.sqrt(2) / math.sqrt(math.pi)) * (" in text
    assert "t = math" not in text  # no temporary holding just a constant


def test_mean_of_squares_plus_eps_needs_no_zero_guard(tmp_path):
    text = _vjp_text("d / sqrt(mean(d**2, axis=-1, keepdims=True) + 1e-5)",
                     {"x": [None, 8]}, tmp_path, where={"d": "x - mean(x, axis=-1, keepdims=True)"})
    assert "not_equal" not in text and "tf.where" not in text
    assert "tf.math.rsqrt(t)" in text


def test_a_derivative_over_the_size_bound_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(gradgen.derive.elementwise, "MAX_PARTIAL_OPS", 3)
    with pytest.raises(SpecError) as info:
        source("exp(sin(x) * cos(y))", {"x": [3], "y": [3]}, tmp_path)
    (d,) = info.value.diagnostics
    assert d.message == (
        "the derivative d(out)/d(x) has more than 3 operations; "
        "split the expression into `where` intermediates"
    )
    assert d.field == "output"


@pytest.mark.parametrize("length, shown", [(240, "a" * 240), (241, "a" * 237 + "...")])
def test_long_formulas_are_shortened_to_the_limit(length, shown):
    assert gradgen.derive.FORMULA_MAX_CHARS == 240
    assert gradgen.derive.shorten("a" * length) == shown


_DEEP = "version: 1\nmodule: m\nops:\n  - name: g\n    inputs: {x: [3]}\n    output: exp(x)\n"


@pytest.mark.parametrize(
    "raised, reason",
    [
        (None, "deriving this op took longer than 0.25 s"),  # runs out of its budget
        (RecursionError(), "this op's expressions are nested too deeply"),
    ],
)
def test_a_runaway_derivation_is_a_spec_error_at_the_op(monkeypatch, raised, reason):
    from gradgen.spec import parse_spec

    def runaway(*args):
        if raised is None:
            time.sleep(5)  # the 0.25 s budget interrupts it
        raise raised

    monkeypatch.setenv("GRADGEN_OP_TIMEOUT", "0.25")
    monkeypatch.setattr(gradgen.pipeline, "derive", runaway)
    with pytest.raises(SpecError) as info:
        gradgen.pipeline.derive_op(parse_spec(_DEEP.encode(), "s.yaml"), 0)
    (d,) = info.value.diagnostics
    assert d.format() == (
        f"s.yaml:4:5: error: op 'g': {reason}; simplify the expression, or split it into "
        "`where` intermediates"
    )


def _op(output, inputs, where=None):
    from gradgen.spec import parse_spec

    op = {"name": "f", "inputs": inputs, **({"where": where} if where else {}), "output": output}
    doc = parse_spec(yaml.safe_dump({"version": 1, "module": "m", "ops": [op]},
                                    sort_keys=False).encode(), "s.yaml")
    return doc, gradgen.pipeline.derive_op(doc, 0)


def test_partials_carry_their_sympy_form_for_explain():
    # explain's markdown prints p.expr as LaTeX; p.formula is the same, as text
    _, op = _op("exp(x) * sin(y)", {"x": [3], "y": [3]})
    x, y = sympy.symbols("x y", real=True)
    assert [(p.wrt, p.formula, p.expr) for p in op.partials] == [
        ("x", "exp(x)*sin(y)", sympy.exp(x) * sympy.sin(y)),
        ("y", "exp(x)*cos(y)", sympy.exp(x) * sympy.cos(y)),
    ]


def test_the_partial_size_bound_is_inclusive(monkeypatch):
    from gradgen.spec import parse_spec

    text = yaml.safe_dump({"version": 1, "module": "m", "ops": [{
        "name": "f", "inputs": {"x": [3], "y": [3]}, "output": "exp(sin(x) * cos(y))"}]})
    op = gradgen.pipeline.derive_op(parse_spec(text.encode(), "s.yaml"), 0)
    largest = max(sympy.count_ops(p.expr) for p in op.partials)
    monkeypatch.setattr(gradgen.derive.elementwise, "MAX_PARTIAL_OPS", largest)
    gradgen.pipeline.derive_op(parse_spec(text.encode(), "s.yaml"), 0)  # at the bound: kept
    monkeypatch.setattr(gradgen.derive.elementwise, "MAX_PARTIAL_OPS", largest - 1)
    with pytest.raises(SpecError):
        gradgen.pipeline.derive_op(parse_spec(text.encode(), "s.yaml"), 0)


def test_an_unprintable_function_in_a_derivative_is_named():
    # Private: no expression of the language differentiates to these (Heaviside, sign and
    # floor are turned into Piecewise or 0 first), so the check is called directly.
    from gradgen.spec import parse_spec

    text = yaml.safe_dump({"version": 1, "module": "m", "ops": [{
        "name": "f", "inputs": {"x": [3]}, "output": "exp(x)"}]})
    doc = parse_spec(text.encode(), "s.yaml")
    from gradgen.expr import parse_op

    from gradgen.derive.context import Derivation
    from gradgen.derive.elementwise import check_printable

    derivation = Derivation.start(parse_op(doc, 0), doc)
    x, y = sympy.symbols("x y", real=True)
    expr = sympy.DiracDelta(y) + sympy.DiracDelta(x) * sympy.Heaviside(x)
    with pytest.raises(SpecError) as info:
        check_printable(derivation, expr, ("ops", 0, "output"), "derivative d(out)/d(x)")
    (diag,) = info.value.diagnostics
    assert diag.message == (
        "the derivative d(out)/d(x) contains DiracDelta, which has no TensorFlow form "
        "(from DiracDelta(x)); rewrite the expression"
    )
    check_printable(derivation, sympy.exp(x), ("ops", 0, "output"), "value")  # printable


@pytest.mark.parametrize("output", ["sqrt(-1 - x * x)", "acos(2 + x * x)"])
def test_a_real_op_whose_derivative_is_imaginary_is_refused(output):
    """SymPy takes sqrt(-1 - x**2) as I*sqrt(1 + x**2) for real x: the derivative printed
    `1j * upstream * ...` into float32 code (a TypeError when the gradient ran)."""
    from gradgen.spec import parse_spec

    text = yaml.safe_dump({"version": 1, "module": "m", "ops": [{
        "name": "f", "inputs": {"x": [None]}, "output": output}]})
    with pytest.raises(SpecError) as info:
        gradgen.pipeline.derive_op(parse_spec(text.encode(), "s.yaml"), 0)
    (diag,) = info.value.diagnostics
    assert diag.message.startswith("the derivative d(out)/d(x) is not real (")
    assert "I" in diag.message and "declare a complex dtype" in diag.message
    assert (diag.op, diag.field) == ("f", "output")


def test_forward_exprs_show_earlier_intermediates_by_name():
    # explain's Forward section: each `where` step with the names of the steps before it,
    # never its own; then the output
    _, op = _op("t * cos(y)", {"x": [3], "y": [3]},
                where={"s": "exp(x) * y", "t": "s + sin(x)"})
    got = [(name, sympy.sstr(e)) for name, e in op.forward_exprs]
    assert got == [("s", "y*exp(x)"), ("t", "s + sin(x)"), ("out", "t*cos(y)")]


def test_a_budget_cannot_interrupt_lambdify_loading_its_namespace():
    """SymPy's lambdify fills a module's namespace on first use and then takes it as
    loaded: an alarm in that first call (a tiny GRADGEN_OP_TIMEOUT) left it with one or
    two names, and every later lambdify in the process failed with NameError (exit 123
    with a traceback, about 6% of builds at GRADGEN_OP_TIMEOUT=0.03). Entering a budget
    loads the namespaces first; checked in a fresh interpreter, where none is loaded.
    Found by a review helper."""
    script = (
        "import importlib\n"
        "from gradgen.budget import time_budget\n"
        "L = importlib.import_module('sympy.utilities.lambdify')\n"
        "with time_budget(30):\n"
        "    loaded = [name for name in ('numpy', 'mpmath', 'math')\n"
        "              if L.MODULES[name][0] != L.MODULES[name][1]]\n"
        "print(loaded)\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "['numpy', 'mpmath', 'math']"


def test_budgets_nest_and_each_reports_its_own():
    """An inner budget never outlasts an enclosing one, and the exception names the
    budget that ran out, so an op's handler does not report the build's budget."""
    from gradgen.budget import BudgetExceeded, time_budget

    with pytest.raises(BudgetExceeded) as info:
        with time_budget(0.05, "build") as outer:
            with time_budget(10.0, "op"):
                time.sleep(2)
    assert info.value.budget is outer and info.value.budget.label == "build"
    with pytest.raises(BudgetExceeded) as info:
        with time_budget(10.0, "build"):
            with time_budget(0.05, "op") as inner:
                time.sleep(2)
    assert info.value.budget is inner
    with time_budget(0.2, "build"):  # the outer timer is re-armed after an inner one
        with time_budget(10.0, "op"):
            pass
        with pytest.raises(BudgetExceeded):
            time.sleep(2)
