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
    # (atan2's partials divide by r2 where its square is in range: r2 made safe there)
    assert "    r2_safe = tf.where(in_range, x * x + y * y, 1.0)\n" in text
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
    assert "(math.sqrt(2) / math.sqrt(math.pi)) * t" in text
    assert "t = math" not in text  # no temporary holding just a constant


def test_mean_of_squares_plus_eps_needs_no_zero_guard(tmp_path):
    text = _vjp_text("d / sqrt(mean(d**2, axis=-1, keepdims=True) + 1e-5)",
                     {"x": [None, 8]}, tmp_path, where={"d": "x - mean(x, axis=-1, keepdims=True)"})
    assert "not_equal" not in text and "tf.where" not in text
    assert "tf.math.rsqrt(t)" in text


def test_example_shapes_and_named_dims_of_batched_inputs():
    """The emitted tests' shapes: named dims distinct (4, 5) and null dims 3 with batch
    [2], then every unknown dim 3 with batch [2, 3], then 1 without one; and each dim
    name several inputs declare, with its axes (counted from the end after a `...`)."""
    from gradgen.derive.assemble import example_shapes, named_dims
    from gradgen.expr import parse_op
    from gradgen.spec import parse_spec

    text = ("version: 1\nmodule: m\nops:\n  - name: f\n"
            "    inputs: {x: [..., m, n, 3], y: [n, null], z: [..., m, n, 1]}\n"
            "    output: x * y + z\n")
    p = parse_op(parse_spec(text.encode(), "s.yaml"), 0)
    assert example_shapes(p) == (
        ((2, 4, 5, 3), (5, 3), (2, 4, 5, 1)),
        ((2, 3, 3, 3, 3), (3, 3), (2, 3, 3, 3, 1)),
        ((1, 1, 3), (1, 3), (1, 1, 1)),
    )
    assert named_dims(p) == (("m", (("x", -3), ("z", -3))),
                             ("n", (("x", -2), ("y", 0), ("z", -2))))


def test_cse_temporaries_are_named_after_what_they_hold():
    """A temporary of a power, reciprocal, ratio or function of named symbols is named
    after them (a symbol's local name where it has one); anything else is `t`."""
    from gradgen import functions as fn
    from gradgen.derive.cse import temp_name

    x, y = sympy.symbols("x y", real=True)
    names = {y: "scale"}
    cases = [(x**2, "x_sq"), (sympy.sqrt(x), "sqrt_x"), (1 / x, "inv_x"),
             (fn.Square(x), "x_sq"), (fn.Recip(y), "inv_scale"),
             (fn.Ratio(x, y), "x_over_scale"), (fn.Ratio(x + 1, y), "t"),
             (fn.Ratio(x, y + 1), "t"), (sympy.exp(x), "exp_x"), (x * y, "t")]
    assert [temp_name(e, names) for e, _ in cases] == [n for _, n in cases]


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
    "order, raised, reason",
    [
        (1, None, "deriving this op took longer than 0.25 s"),  # runs out of its budget
        # each derived order has the budget again
        (3, None, "deriving this op took longer than 0.75 s (with its derived VJPs up to "
                  "order 3; `order: 1` derives the first only)"),
        (1, RecursionError(), "this op's expressions are nested too deeply"),
    ],
)
def test_a_runaway_derivation_is_a_spec_error_at_the_op(monkeypatch, order, raised, reason):
    from gradgen.spec import parse_spec

    def runaway(*args):
        if raised is None:
            time.sleep(5)  # the 0.25 s budget interrupts it
        raise raised

    monkeypatch.setenv("GRADGEN_OP_TIMEOUT", "0.25")
    monkeypatch.setattr(gradgen.pipeline, "derive", runaway)
    with pytest.raises(SpecError) as info:
        spec = _DEEP + (f"    order: {order}\n" if order > 1 else "")
        gradgen.pipeline.derive_op(parse_spec(spec.encode(), "s.yaml"), 0)
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


@pytest.mark.parametrize("output, partial", [
    ("sqrt(-1 - x * x)", "I*x/hypot(1, x)"),
    ("acos(2 + x * x)", "2*I*x/(hypot(1, x)*hypot(sqrt(3), x))"),
])
def test_a_real_op_whose_derivative_is_imaginary_is_refused(output, partial):
    """SymPy takes sqrt(-1 - x**2) as I*sqrt(1 + x**2) for real x: the derivative printed
    `1j * upstream * ...` into float32 code (a TypeError when the gradient ran)."""
    from gradgen.spec import parse_spec

    text = yaml.safe_dump({"version": 1, "module": "m", "ops": [{
        "name": "f", "inputs": {"x": [None]}, "output": output}]})
    with pytest.raises(SpecError) as info:
        gradgen.pipeline.derive_op(parse_spec(text.encode(), "s.yaml"), 0)
    (diag,) = info.value.diagnostics
    assert diag.message == (
        f"the derivative d(out)/d(x) is not real ({partial}): SymPy finds part of the "
        "expression imaginary for every real input (as sqrt(-1 - x**2) = "
        "I*sqrt(1 + x**2)); declare a complex dtype, or rewrite it")
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


def _grad_lines(text) -> dict:
    """The gradient function's statements, by local (comments and the return left out)."""
    grad_fn = body(text, "def grad(")
    lines = [ln.strip() for ln in grad_fn.splitlines()[1:] if " = " in ln
             and not ln.strip().startswith("#")]
    return dict(ln.split(" = ", 1) for ln in lines)


@pytest.mark.parametrize("x_shape, wide", [
    # upstream [3, 1] times x [None, 4] is [3, 4] by broadcasting (the None must be 3
    # or 1): the keepdims cotangent is used as it is
    ([None, 4], False),
    ([3, 4], False),
    # upstream [3, 1] times x [3, 1] is only [3, 1]: broadcast once, to [3, 4]
    ([3, 1], True),
])
def test_a_keepdims_cotangent_is_broadcast_only_where_the_partial_does_not_widen_it(
        tmp_path, x_shape, wide):
    text = _vjp_text("sum(x * y, axis=-1, keepdims=True)", {"x": x_shape, "y": [3, 4]},
                     tmp_path)
    grads = _grad_lines(text)
    if wide:
        assert grads["upstream_wide"] == "tf.broadcast_to(upstream, [3, 4])"
        assert grads["grad_y"] == "upstream_wide * x"
    else:
        assert "upstream_wide" not in text
        assert grads["grad_y"] == "upstream * x"


def test_the_partials_of_f_of_a_difference_share_one_where_and_one_product(tmp_path):
    # d/db of huber(a - b) is where(|a - b| <= 1, -(a - b), -sign(a - b)): every branch
    # negated, so it is written as minus d/da's where, and the product with the upstream
    # is shared
    text = _vjp_text("Piecewise(((a - b)**2 / 2, Abs(a - b) <= 1), (Abs(a - b) - 1/2, True))",
                     {"a": [3], "b": [3]}, tmp_path)
    grads = _grad_lines(text)
    assert grads["grad_a"] == "upstream * tf.where(mask, t, tf.math.sign(t))"
    assert grads["grad_b"] == "-grad_a"
    assert text.count("tf.where(") == 2  # the forward's and d/da's


def _derive(output, inputs, fuse="xla", dtype="float32", where=None):
    from gradgen.spec import parse_spec

    op = {"name": "f", "inputs": inputs, **({"where": where} if where else {}),
          "output": output}
    text = yaml.safe_dump({"version": 1, "module": "m", "dtype": dtype, "fuse": fuse,
                           "ops": [op]}, sort_keys=False)
    return gradgen.pipeline.derive_op(parse_spec(text.encode(), "s.yaml"), 0)


@pytest.mark.parametrize("dtype, guarded", [("float32", False), ("float64", True)])
def test_a_vanishing_product_is_guarded_in_the_op_dtype(dtype, guarded):
    """x**4 overflows where x**4 exp(-x / 1e8) / 1000 is exactly 0 in float64
    (mul_no_nan keeps it 0, not NaN), but where it is 2.9e16 in float32 (a guard would
    make it 0): derivation decides in the op's dtype."""
    op = _derive("x**4 * exp(-x / 10**8) / 1000", {"x": [3]}, fuse="none", dtype=dtype)
    assert any("mul_no_nan" in str(s.value) for s in op.forward) == guarded


_NO_XLA = ("TensorFlow has no XLA kernel for it (MatrixDeterminant, complex "
           "MatrixInverse); use fuse: none for this op")


@pytest.mark.parametrize("output, where, dtype, field, message", [
    ("log(d**2)", {"d": "det(A)"}, "float32", "where.d",
     f"fuse: xla cannot compile det(): {_NO_XLA}, or log(det(...))"),
    ("inverse(A) @ A", None, "complex64", "output",
     f"fuse: xla cannot compile a complex inverse(): {_NO_XLA}"),
])
def test_fuse_xla_refuses_what_xla_cannot_compile(output, where, dtype, field, message):
    with pytest.raises(SpecError) as info:
        _derive(output, {"A": [3, 3]}, dtype=dtype, where=where)
    (diag,) = info.value.diagnostics
    assert (diag.message, diag.op, diag.field) == (message, "f", field)


@pytest.mark.parametrize("output, fuse, dtype", [
    ("inverse(A)", "xla", "float32"),  # a real inverse compiles
    ("sum(exp(A), axis=-1)", "xla", "complex64"),  # so does a complex op without one
    ("det(A)", "none", "float32"),  # without fusion, det is computed as usual
])
def test_fuse_xla_keeps_what_xla_can_compile(output, fuse, dtype):
    assert _derive(output, {"A": [3, 3]}, fuse=fuse, dtype=dtype).fuse == fuse


def test_spec_str_writes_conditions_and_numbers_in_the_spec_syntax():
    """Conditions print with the spec's words and the parentheses precedence needs (the
    parser reads back those the language allows); a Float prints as the shortest double text only where that
    text is the same number at the Float's precision."""
    x, y = sympy.symbols("x y", real=True)
    cases = {
        sympy.And(sympy.Or(x > 0, y > 0), x < 1): "x < 1 and (x > 0 or y > 0)",
        sympy.Or(sympy.And(x > 0, y > 0), x < -1): "x < -1 or x > 0 and y > 0",
        sympy.Not(sympy.And(x > 0, y > 0)): "not (x > 0 and y > 0)",
        sympy.Eq(x > 0, y > 0, evaluate=False): "(x > 0) == (y > 0)",
        sympy.Ne(x > 0, y > 0, evaluate=False): "(x > 0) != (y > 0)",
        sympy.true: "True",
        sympy.false: "False",
        sympy.Float(0.5): "0.5",
        sympy.Float("0.1", 30): "0.1",
        sympy.Float("0.1000000000000000000001", 30): "0.100000000000000000000100000000",
    }
    assert {e: gradgen.derive.spec_str(e) for e in cases} == cases
    read = _derive("where(not (x > 0 and y > 0), x, y)", {"x": [3], "y": [3]})
    assert read.forward_text == ("out = where(not (x > 0 and y > 0), x, y)",)


def test_a_dropped_operand_beside_a_rewritten_reduction_is_broadcast_from_it(tmp_path):
    """log(sum(exp(x), keepdims)) is rewritten to a logsumexp node inside another
    reduction's operand, and y - y is dropped: the operand is broadcast back to its
    written shape at run time from the new node (the sum node it replaced is not
    computed: a leaf set still naming it stops the build with a KeyError)."""
    text = source("sum(log(sum(exp(x), axis=-1, keepdims=True)) + y - y, axis=-1)",
                  {"x": [None, None], "y": [None, None]}, tmp_path)
    assert ("tf.broadcast_to(lse, tf.broadcast_dynamic_shape(tf.shape(lse), tf.shape(y)))"
            in text)


def test_the_partials_of_a_keepdims_reduction_operand_name_it():
    """A compound operand of a keepdims reduction is differentiated with its narrow
    cotangent; its partials are listed as those of the reduction's operand."""
    op = _derive("mean(x**2 + x, axis=-1, keepdims=True) * x", {"x": [None, 3]})
    assert ("average operand", "x", "2*x + 1") in [
        (p.output, p.wrt, p.formula) for p in op.partials]


def test_a_piecewise_without_an_otherwise_branch_is_written_as_sympy_writes_it():
    """spec_str writes a Piecewise whose last condition is True as nested `where`s, and
    one without such a branch in SymPy's form (which the parser reads, and refuses with
    its reason). It raised AttributeError (StrPrinter has no _print_Piecewise), so the
    Python API failed on such an expression without a located message."""
    x = sympy.Symbol("x", real=True)
    assert gradgen.derive.spec_str(sympy.Piecewise((1, x > 1), (x, x > 0), (0, True))) == (
        "where(x > 1, 1, where(x > 0, x, 0))")
    assert gradgen.derive.spec_str(sympy.Piecewise((x, (x > 0) & (x < 2)), (-x, x < 0))) == (
        "Piecewise((x, x > 0 and x < 2), (-x, x < 0))")

    with pytest.raises(SpecError) as info:
        gradgen.generate_source([gradgen.OpDef("f", {"x": [3]}, sympy.Piecewise(
            (x, x > 0), (-x, x < 0)))], verify=False, audit=False)
    (diag,) = info.value.diagnostics
    assert diag.message.startswith("the last Piecewise pair must have the condition True")


def _comments(text) -> str:
    """The comments of ``text`` as one line (black wraps them)."""
    return " ".join(ln.strip().lstrip("#").strip() for ln in text.splitlines()
                    if ln.strip().startswith("#"))


def test_layer_norm_leaves_out_the_term_whose_sum_is_zero(tmp_path):
    # d(mu) of layer norm holds g_var * (2 mu - 2 x), C * V with V linear in x and 0 at
    # x = mu, the mean of x over the summed axes: its sum is exactly 0, left out
    text = _vjp_text("d / sqrt(mean(d**2, axis=-1, keepdims=True) + 1e-5)",
                     {"x": [None, 8]}, tmp_path,
                     where={"mu": "mean(x, axis=-1, keepdims=True)", "d": "x - mu"})
    assert "over axes [1] is 0, mu being the mean of x there: left out)" in _comments(text)
    grad_mu = _grad_lines(text)["grad_mu"]
    assert "reduce_sum(upstream" in grad_mu and "mu" not in grad_mu, grad_mu


@pytest.mark.parametrize("output, inputs", [
    # V = x, linear with a constant coefficient, but not 0 at x = mu
    ("sum(x * b, axis=-1, keepdims=True) * mean(x, axis=-1, keepdims=True)",
     {"x": [4, 8], "b": [4, 1]}),
    # V = y * (x - mu): 0 at x = mu, but its coefficient y varies along the axis
    ("sum((x - mean(x, axis=-1, keepdims=True)) * y * b, axis=-1, keepdims=True)",
     {"x": [4, 8], "y": [4, 8], "b": [4, 1]}),
    # V = exp(x - mu): not a polynomial in x
    ("sum(exp(x - mean(x, axis=-1, keepdims=True)) * b, axis=-1, keepdims=True)",
     {"x": [4, 8], "b": [4, 1]}),
], ids=["not_zero_at_the_mean", "varying_coefficient", "not_polynomial"])
def test_a_term_whose_sum_is_not_zero_is_kept(tmp_path, output, inputs):
    # (generate verifies the gradient numerically: a term left out would fail it)
    text = _vjp_text(output, inputs, tmp_path)
    assert "left out" not in _comments(text)
    assert _grad_lines(text)["grad_b"].startswith("tf.reduce_sum(")


@pytest.mark.parametrize("output, y_shape, grad_y", [
    # y has the operand's shape: its keepdims cotangent is added as it is (the sum
    # broadcasts it)
    ("y * sum(y, axis=-1, keepdims=True)", [3, 4], "grad_total + total * upstream"),
    # x - x + y is y, of shape [4], where the operand as written is [3, 4]: the cotangent
    # broadcast back to [3, 4] is summed back to y's [4]
    ("sum(x - x + y, axis=-1, keepdims=True)", [4],
     "tf.reduce_sum(tf.broadcast_to(upstream, [3, 4]), axis=[0])"),
    ("x * sum(x - x + y, axis=-1, keepdims=True)", [4],
     "tf.reduce_sum(tf.broadcast_to(grad_total, [3, 4]), axis=[0])"),
])
def test_a_keepdims_cotangent_reaches_an_input_operand_in_its_shape(
        tmp_path, output, y_shape, grad_y):
    """The last two were handed the [3, 4] cotangent as it was, and verification refused
    the op ("the derived gradient for input 'y' has shape [3, 4], not the input's [4];
    this is a gradgen bug")."""
    text = _vjp_text(output, {"x": [3, 4], "y": y_shape}, tmp_path)
    assert _grad_lines(text)["grad_y"] == grad_y


def test_ratio_powers_pair_the_highest_powers_first():
    """a**p * b**-q as Ratio(a, b)**min(p, q) times what is left of each; the highest
    powers pair first (ties in SymPy's sort order), the unpaired ones stay powers."""
    from gradgen.derive.forms import ratio_powers
    from gradgen.functions import hypot as fn_hypot
    from gradgen.functions import internal, overflowed

    a, b, c, s = sympy.symbols("a b c s", real=True)
    ratio = internal.Ratio
    assert ratio_powers(a**6 * b**-6) == ratio(a, b) ** 6
    assert ratio_powers(a**3 * c**2 * b**-2) == ratio(a, b) ** 2 * a * c**2
    assert ratio_powers(c**2 * a**2 * b**-2 * s) == s * ratio(a, b) ** 2 * c**2
    # a tie broken by SymPy's sort order, not by the order of Mul's arguments
    # (cos(s) comes first in the product, sin(a) first in default_sort_key)
    product = sympy.cos(s) ** 2 * sympy.sin(a) ** 2 * b**-2
    bases = [f.as_base_exp()[0] for f in product.args]
    assert bases.index(sympy.cos(s)) < bases.index(sympy.sin(a))
    assert ratio_powers(product) == ratio(sympy.sin(a), b) ** 2 * sympy.cos(s) ** 2
    # ... among the denominators too (the product's order has cos(s) before log(c))
    product = a**2 * sympy.log(c) ** -2 * sympy.cos(s) ** -2
    bases = [f.as_base_exp()[0] for f in product.args]
    assert bases.index(sympy.cos(s)) < bases.index(sympy.log(c))
    assert ratio_powers(product) == ratio(a, sympy.log(c)) ** 2 * sympy.cos(s) ** -2
    assert ratio_powers(a**2 * b**-3 * c**-2) == ratio(a, b) ** 2 * b**-1 * c**-2
    # two pairs: each becomes a ratio
    assert ratio_powers(a**3 * s**2 * b**-3 * c**-2) == ratio(a, b) ** 3 * ratio(s, c) ** 2
    assert ratio_powers(a * b**-1) is None and ratio_powers(a**2 + b) is None
    # an input to the first power pairs with a square: a/b**2 as (a/b)/b, whose 1/b**2
    # overflowed at a = b = 1.2e-38 in float32; a function to the first power does not
    assert ratio_powers(a * b**-2, frozenset({a, b})) == ratio(a, b) * b**-1
    assert ratio_powers(a * b**-2) is None  # (an upstream gradient: not an input)
    assert ratio_powers(sympy.sin(a) * b**-2, frozenset({a, b})) is None
    # a norm's component that is a product pairs first: e**2*r/h**3 as (e*r/h)*(e/h)/h
    # ((e/h)**2 overflowed at e = 1e20, r = 1e-35 in float32), +-1 where e*r overflowed
    h = fn_hypot(1, a * b)
    unit = sympy.Piecewise((sympy.sign(a * b), overflowed(a * b)), (ratio(a * b, h), True))
    assert ratio_powers(a**2 * b * h**-3, frozenset({a, b})) == unit * ratio(a, h) / h
    # a square over one power: Student-t's x**2/n as x * (x/n), finite where x**2 is inf
    # (x = 1e20, n = 1e10 in float32: log(1 + x**2/n) is 69, and was inf)
    assert ratio_powers(a**2 * b**-1) == a * ratio(a, b)


def test_an_input_whose_every_term_sums_to_zero_has_zeros_of_its_shape(tmp_path):
    """b's only partial, x - mean(x) summed over the axis b is broadcast along, sums to
    0: grad_b is zeros of b's shape, not a sum whose value is rounding noise.
    (test_reduced_sums.py's `centred` has two such groups, of different shapes.)"""
    text = source("sum((x - mean(x, axis=-1, keepdims=True)) * b, axis=-1, keepdims=True)",
                  {"x": [4, 3], "b": [4, 1]}, tmp_path)
    assert "grad_b = tf.zeros_like(b)\n" in text


@pytest.mark.parametrize("dtype, real", [("float32", True), ("complex64", None)])
def test_locals_are_real_symbols_in_real_ops_only(dtype, real):
    """The symbols derivation makes (upstreams, CSE temporaries, gradients) carry the
    op's field: real in a real op, so that SymPy simplifies them as it does the inputs
    (sqrt(t**2) is |t|, conjugate(t) is t), and no assumption in a complex op."""
    from gradgen.derive.context import Derivation
    from gradgen.expr import parse_op
    from gradgen.spec import parse_spec

    text = yaml.safe_dump({"version": 1, "module": "m", "dtype": dtype, "ops": [{
        "name": "f", "inputs": {"x": [3]}, "output": "exp(x)"}]})
    doc = parse_spec(text.encode(), "s.yaml")
    t = Derivation.start(parse_op(doc, 0), doc).symbol("t")
    assert (t.name, t.is_real) == ("t", real)
    assert (sympy.sqrt(t**2) == sympy.Abs(t)) is bool(real)
