"""Regression tests for defects found by a fresh-user review (each would have failed)."""

from __future__ import annotations

import math
import os
import re
import stat
import time
from pathlib import Path

import mpmath
import numpy as np
import pytest
from click.testing import CliRunner

from gradgen.cli import main
from gradgen.errors import SpecError
from gradgen.spec import parse_spec
from gradgen.emit import generate


def run_cli(tmp_path, text, *args):
    (tmp_path / "s.yaml").write_text(text, encoding="utf-8")
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        return CliRunner().invoke(main, ["build", "s.yaml", *args])
    finally:
        os.chdir(old)


def spec(ops: str) -> str:
    return "version: 1\nmodule: m\nops:\n" + ops


def test_user_names_equal_to_generated_names(tf, build):
    module = build(spec(
        "  - name: f\n    inputs: {upstream: [3], grad: [3]}\n    output: upstream * grad\n"
        "  - name: g\n    inputs: {x: [3]}\n    outputs: {grad: x * 2, y: x * 3}\n"
        "  - name: h\n    inputs: {x: [3]}\n    where: {grad: exp(x)}\n    output: grad * x\n"
    ).replace("module: m", "module: names"))
    a, b = tf.constant([1.0, 2.0, 3.0]), tf.constant([4.0, 5.0, 6.0])
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([a, b])
        f = module.f(a, b)
        g1, g2 = module.g(a)
        h = module.h(a)
    np.testing.assert_allclose(tape.gradient(f, a), b)
    np.testing.assert_allclose(tape.gradient([g1, g2], a), [5.0] * 3)
    np.testing.assert_allclose(tape.gradient(h, a), np.exp(a) * (1 + a.numpy()), rtol=1e-6)


def test_a_long_chain_of_intermediates_builds_fast_and_right(tf, build):
    lines = ["  - name: f", "    inputs: {x: [3]}", "    where:"]
    previous = "x"
    for i in range(40):
        lines.append(f"      a{i}: tanh({previous}) + {previous} / 2")
        previous = f"a{i}"
    lines.append(f"    output: {previous} * 2")
    started = time.monotonic()
    module = build(spec("\n".join(lines) + "\n").replace("module: m", "module: chain"))
    assert time.monotonic() - started < 30
    x = tf.constant([0.3, -0.7, 1.2])
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = module.f(x)
        a = x
        for _ in range(40):
            a = tf.tanh(a) + a / 2
        ref = a * 2
    np.testing.assert_allclose(tape.gradient(y, x), tape.gradient(ref, x), rtol=1e-5)


@pytest.mark.parametrize("output", ["acosh(0) * x", "sqrt(-1) * x", "log(-1) * x",
                                    "asin(2) * x", "(-1)**0.5 * x", "log(x, -1)"])
def test_complex_constants_in_real_ops_are_refused(output, tmp_path):
    result = run_cli(tmp_path, spec(f"  - name: f\n    inputs: {{x: [3]}}\n    output: {output}\n"))
    assert result.exit_code == 2
    assert "complex values need complex inputs" in result.stderr


@pytest.mark.parametrize("doc", ["\\ud800", "a\\u202eb", "zero\\u200bwidth", "\\x1b[31m"])
def test_invisible_characters_in_docs_are_refused(doc, tmp_path):
    text = spec(f'  - name: f\n    doc: "{doc}"\n    inputs: {{x: [3]}}\n    output: x\n')
    result = run_cli(tmp_path, text)
    assert result.exit_code == 2, result.stderr
    assert "invisible or control character" in result.stderr
    assert "Traceback" not in result.stderr


def test_output_folder_that_is_a_file_is_a_usage_error(tmp_path):
    (tmp_path / "afile").write_text("x")
    result = run_cli(tmp_path, spec("  - name: f\n    inputs: {x: [3]}\n    output: x\n"),
                     "-o", "afile")
    assert result.exit_code == 2 and "is not a folder" in result.stderr
    result = run_cli(tmp_path, spec("  - name: f\n    inputs: {x: [3]}\n    output: x\n"),
                     "-o", "afile/sub")
    assert result.exit_code == 2 and "cannot create output folder" in result.stderr


def test_written_files_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        result = run_cli(tmp_path, spec("  - name: f\n    inputs: {x: [3]}\n    output: x\n"))
    finally:
        os.umask(old)
    assert result.exit_code == 0
    mode = stat.S_IMODE((tmp_path / "generated" / "m.py").stat().st_mode)
    assert mode == 0o644


@pytest.mark.parametrize("dims, message", [
    ("[class]", "dim name 'class' is not allowed"),
    ("[010]", "a dim name must be an identifier like 'batch'; got '010'"),
    ("[1:30]", "got '1:30'"),
])
def test_dims_are_checked_as_written(dims, message, tmp_path):
    result = run_cli(tmp_path, spec(f"  - name: f\n    inputs: {{x: {dims}}}\n    output: x\n"))
    assert result.exit_code == 2 and message in result.stderr, result.stderr


def test_plain_scalar_keys_are_names(tmp_path):
    # YAML 1.1 reads a plain `on` as true; as a key it is the name "on"
    text = spec("  - name: f\n    inputs: {on: [3], 'off': [3]}\n    output: on * off\n")
    result = run_cli(tmp_path, text)
    assert result.exit_code == 0, result.stderr
    assert "def f(on, off):" in (tmp_path / "generated" / "m.py").read_text()


@pytest.mark.parametrize("text, message", [
    ('version: "1"\nmodule: m\nops: []\n', "expected the integer 1; got '1'"),
    (spec('  - name: f\n    inputs: {x: "3"}\n    output: x\n'),
     "expected a shape list like [3, null] or a mapping"),
])
def test_clearer_messages(text, message, tmp_path):
    result = run_cli(tmp_path, text)
    assert result.exit_code == 2 and message in result.stderr, result.stderr


def test_non_utf8_position(tmp_path):
    (tmp_path / "s.yaml").write_bytes(b"version: 1\nmodule: \xff\n")
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        result = CliRunner().invoke(main, ["build", "s.yaml"])
    finally:
        os.chdir(old)
    assert result.stderr.startswith("s.yaml:2:9: error: spec is not UTF-8")


def test_error_output_is_capped(tmp_path):
    ops = "".join(f"  - name: f{i}\n    inputs: {{x: [3]}}\n    output: nope{i}\n"
                  for i in range(80))
    result = run_cli(tmp_path, spec(ops))
    assert result.exit_code == 2
    assert result.stderr.count(": error: ") == 50
    assert "80 errors (30 not shown)" in result.stderr


def test_symlinked_spec_gives_the_same_output(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "s.yaml").write_text(spec("  - name: f\n    inputs: {x: [3]}\n"
                                                   "    output: x\n"))
    os.symlink(tmp_path / "real", tmp_path / "link")
    direct = generate([str(tmp_path / "real" / "s.yaml")], str(tmp_path / "out"))
    linked = generate([str(tmp_path / "link" / "s.yaml")], str(tmp_path / "out"))
    assert direct == linked


def test_docs_formulas_do_not_mention_internal_names(tmp_path):
    text = generate([_write(tmp_path, spec(
        "  - name: f\n    inputs: {a: [2, 2], b: [2, 2]}\n    output: 2 * (a @ b)\n"))],
        str(tmp_path))["m.py"]
    docstring = text.split('def f(a, b):\n    """')[1].split('"""')[0]
    assert "product" not in docstring.split("Vector-Jacobian")[0]


def _write(tmp_path, text):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return str(path)


# A second review (of the performance work) found these.


@pytest.mark.parametrize("output, shape", [
    ("sqrt(sum(x**2))", [3]),
    ("sqrt(mean(x**2, axis=1))", [2, 3]),
    ("sqrt(sum(Abs(x)))", [3]),
])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_norm_of_a_reduction_near_zero(tf, build, output, shape, dtype):
    # sums known >= 0 once made the guarded 1/sqrt(s) look like a removable singularity:
    # the gradient was 0 wherever the sum was below 0.14 (float32), not x/|x|
    module = build(spec(f"  - name: f\n    inputs: {{x: {shape}}}\n    output: {output}\n")
                   .replace("module: m", f"module: norm_{dtype}")
                   .replace("ops:", f"dtype: {dtype}\nops:"))
    plain = {
        "sqrt(sum(x**2))": lambda x: tf.sqrt(tf.reduce_sum(x**2)),
        "sqrt(mean(x**2, axis=1))": lambda x: tf.sqrt(tf.reduce_mean(x**2, axis=1)),
        "sqrt(sum(Abs(x)))": lambda x: tf.sqrt(tf.reduce_sum(tf.abs(x))),
    }[output]
    rng = np.random.default_rng(0)
    for scale in (1.0, 0.1, 1e-3, 1e-15):
        x = tf.constant(rng.normal(size=shape) * scale, dtype=dtype)
        grads = []
        for fn in (module.f, plain):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = fn(x)
            grads.append(tape.gradient(y, x).numpy())
        np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5 if dtype == "float32" else 1e-12)
    x = tf.zeros(shape, dtype)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = module.f(x)
    assert np.all(np.isfinite(tape.gradient(y, x).numpy()))  # the subgradient 0, not NaN


def test_half_precision_negative_powers_do_not_overflow(tf, build):
    # 1 / (x * x * x) overflowed to 1/inf = 0 at x = 45 in float16 (x**-3 is 1.1e-5)
    module = build(spec("  - name: f\n    inputs: {x: [null]}\n    output: x**-3\n"
                        "  - name: lj\n    inputs: {r: [null]}\n    output: 4 * (r**-12 - r**-6)\n")
                   .replace("module: m", "module: half_powers\ndtype: float16"))
    for fn, plain, points in [(module.f, lambda x: x**-3, [16.0, 45.0, 0.5]),
                              (module.lj, lambda r: 4 * (r**-12 - r**-6), [1.5, 3.0, 7.0])]:
        x = tf.constant(points, tf.float16)
        results = []
        for g in (fn, plain):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = g(x)
            results.append((y.numpy().astype(float), tape.gradient(y, x).numpy().astype(float)))
        (value, grad), (want_value, want_grad) = results
        assert np.all(value != 0) and np.all(grad != 0)
        np.testing.assert_allclose(value, want_value, rtol=4e-3)
        np.testing.assert_allclose(grad, want_grad, rtol=1e-2)


@pytest.mark.parametrize("output", ["x**pi", "x**sqrt(2)", "sqrt(x)**E"])
def test_irrational_powers_have_a_finite_gradient_at_zero(tf, build, output):
    # the derivative x**pi * pi / x was 0/0 = NaN at x = 0
    module = build(spec(f"  - name: f\n    inputs: {{x: [null]}}\n    output: {output}\n")
                   .replace("module: m", "module: irrational\ndtype: float64"))
    plain = {"x**pi": lambda x: x**np.pi, "x**sqrt(2)": lambda x: x**np.sqrt(2),
             "sqrt(x)**E": lambda x: tf.sqrt(x)**np.e}[output]
    x = tf.constant([0.0, 0.5, 2.0], tf.float64)
    grads = []
    for fn in (module.f, plain):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        grads.append(tape.gradient(y, x).numpy())
    assert grads[0][0] == 0.0
    np.testing.assert_allclose(grads[0][1:], grads[1][1:], rtol=1e-12)


def test_float_exponents_that_are_exact_fractions_are_fractions(tf, build):
    # (x**2 + y**2)**0.5 had no zero guard (sqrt(...) had): NaN at the origin
    module = build(spec("  - name: f\n    inputs: {x: [null], y: [null]}\n"
                        "    output: (x**2 + y**2)**0.5\n").replace("module: m", "module: half_exp"))
    x, y = tf.constant([0.0, 3.0]), tf.constant([0.0, 4.0])
    with tf.GradientTape() as tape:
        tape.watch([x, y])
        out = module.f(x, y)
    gx, gy = tape.gradient(out, [x, y])
    np.testing.assert_allclose(gx.numpy(), [0.0, 0.6], rtol=1e-6)
    np.testing.assert_allclose(gy.numpy(), [0.0, 0.8], rtol=1e-6)


def test_recompute_without_reused_values_still_waits_for_the_upstream(tmp_path):
    # a complex op's gradient reuses no forward value (it uses conj(x)); the control
    # dependency was left out, so nothing stopped TF from computing it early
    (tmp_path / "s.yaml").write_text(spec(
        "  - name: f\n    memory: recompute\n    inputs: {x: [null]}\n"
        "    output: sinh(x) / cosh(2 * x)\n").replace("ops:", "dtype: complex128\nops:"))
    text = generate([str(tmp_path / "s.yaml")], str(tmp_path))["m.py"]
    assert "with tf.control_dependencies([upstream]):" in text


def test_an_output_that_is_a_reduction_broadcast_by_a_dropped_operand(tf, build):
    """sum(a, axis=1, keepdims=True) + x - x is the sum broadcast to [2, 3]: the op
    returned the [2, 1] sum itself (its node was named after the output), found by
    mutation testing. Forward and gradient as TF autodiff of the same forward."""
    module = build(spec(
        "  - name: f\n    inputs: {a: [2, 3], x: [3]}\n"
        "    output: sum(a, axis=1, keepdims=True) + x - x\n"
        "  - name: g\n    inputs: {a: [2, 3], x: [3]}\n"
        "    output: log(sum(exp(a), axis=1, keepdims=True)) + x - x\n"
    ).replace("module: m", "module: dropped"))
    a = tf.constant([[1.0, -2.0, 0.5], [3.0, 0.25, -1.0]])
    x = tf.constant([0.5, 1.5, -2.0])
    upstream = tf.constant([[1.0, 2.0, 3.0], [-1.0, 0.5, 4.0]])
    plain = {
        "f": lambda a, x: tf.reduce_sum(a, axis=1, keepdims=True) + x - x,
        "g": lambda a, x: tf.reduce_logsumexp(a, axis=1, keepdims=True) + x - x,
    }
    for name, reference in plain.items():
        results = []
        for fn in (getattr(module, name), reference):
            with tf.GradientTape() as tape:
                tape.watch([a, x])
                out = fn(a, x)
            results.append((out, tape.gradient(out, [a, x], output_gradients=upstream)))
        (got, (ga, gx)), (want, (wa, wx)) = results
        assert got.shape == want.shape == (2, 3), name
        np.testing.assert_allclose(got, want, rtol=1e-6)
        np.testing.assert_allclose(ga, wa, rtol=1e-6)
        np.testing.assert_allclose(gx if gx is not None else 0.0, wx if wx is not None else 0.0)


def test_removable_singularities_in_two_inputs_of_one_product(tf, build):
    """sin(x)*sin(y)/(x*y): the pole in y was left as 0/0 once x's was filled in (the
    other factors were visited one by one, so sin(y) and 1/y never met). Found by
    mutation testing."""
    module = build(spec(
        "  - name: f\n    inputs: {x: [null], y: [null]}\n"
        "    output: sin(x) * sin(y) / (x * y)\n"
    ).replace("module: m", "module: two_poles\ndtype: float64"), audit=False)
    x = tf.constant([0.5, 0.0, 0.0, 1e-30], tf.float64)
    y = tf.constant([0.0, 0.5, 0.0, 2.0], tf.float64)
    with tf.GradientTape() as tape:
        tape.watch([x, y])
        out = module.f(x, y)
    gx, gy = tape.gradient(out, [x, y])

    def sinc(t):
        return np.where(t == 0, 1.0, np.sin(t) / np.where(t == 0, 1.0, t))

    def dsinc(t):
        safe = np.where(t == 0, 1.0, t)
        return np.where(t == 0, 0.0, (safe * np.cos(safe) - np.sin(safe)) / safe**2)

    xv, yv = x.numpy(), y.numpy()
    np.testing.assert_allclose(out, sinc(xv) * sinc(yv), rtol=1e-14)
    np.testing.assert_allclose(gx, dsinc(xv) * sinc(yv), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(gy, sinc(xv) * dsinc(yv), rtol=1e-12, atol=1e-15)


def test_ops_named_after_what_they_compute(tf, build):
    # Op names never appear in expressions: `softplus`, `sigmoid`, `exp`, `where` and
    # `det` are op names here while the expressions call the functions of those names.
    module = build(spec(
        "  - name: softplus\n    inputs: {x: [null]}\n    output: log(1 + exp(x))\n"
        "  - name: sigmoid\n    inputs: {x: [null]}\n    output: 1 / (1 + exp(-x))\n"
        "  - name: exp\n    inputs: {x: [3]}\n    output: exp(x) * softplus(x)\n"
        "  - name: where\n    inputs: {x: [3]}\n    output: where(x > 0, x, sigmoid(x))\n"
        "  - name: det\n    inputs: {a: [2, 2]}\n    output: log(det(a @ transpose(a)))\n"
    ).replace("module: m", "module: named_ops"))
    x = tf.constant([-100.0, 0.5, 100.0])
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        values = [module.softplus(x), module.sigmoid(x), module.exp(x), module.where(x)]
    sig = 1 / (1 + np.exp(-x.numpy().astype(np.float64)))
    np.testing.assert_allclose(tape.gradient(values[0], x), sig, rtol=1e-6, atol=1e-30)
    np.testing.assert_allclose(tape.gradient(values[1], x), sig * (1 - sig), rtol=1e-5,
                               atol=1e-30)
    np.testing.assert_allclose(tape.gradient(values[3], x), [sig[0] * (1 - sig[0]), 1, 1],
                               rtol=1e-5, atol=1e-30)
    a = tf.constant([[2.0, 1.0], [0.0, 3.0]])
    with tf.GradientTape() as tape:
        tape.watch(a)
        y = module.det(a)
    np.testing.assert_allclose(tape.gradient(y, a), 2 * np.linalg.inv(a.numpy()).T,
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name, reason", [
    ("tf", "a name the generated module uses"), ("math", "a name the generated module uses"),
    ("lambda", "a Python keyword"), ("match", "a Python keyword"),
    ("sum", "a Python builtin that the generated module calls"),
    ("len", "a Python builtin that the generated module calls")])
def test_op_names_the_module_needs_are_refused(tmp_path, name, reason):
    result = run_cli(tmp_path, spec(f"  - name: {name}\n    inputs: {{x: [3]}}\n    output: x\n"))
    assert result.exit_code == 2
    assert f"op name '{name}' is not allowed: {reason}" in result.stderr


def test_module_builtins_cover_every_builtin_generated_code_calls():
    # An op may take any builtin's name but those in MODULE_BUILTINS; a generated module
    # that called another builtin could be broken by an op of that name.
    import ast
    import builtins

    from gradgen.naming import MODULE_BUILTINS

    root = Path(__file__).resolve().parent.parent
    used = set()
    for path in sorted(root.glob("generated/*.py")) + sorted(
            root.glob("tests/generated/*.py")):
        if path.name.startswith("test_"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Name) and hasattr(builtins, node.id):
                used.add(node.id)
    # `_` is not a builtin (an interactive session's display hook, or a doctest's, sets
    # builtins._ to the last value shown); `__package__` is the module's own (the import
    # system sets it), read to import the runtime module
    used -= {"None", "True", "False", "_", "__package__"}
    assert used <= MODULE_BUILTINS, used - MODULE_BUILTINS


# op -> (dtype, its value as an mpmath function, points where a Taylor polynomial on a
# fixed interval |x| <= h was used far outside its accuracy)
_SCALED_SINGULARITIES = {
    "sinc_k": ("float32", "sin(100*x) / x", lambda x: mpmath.sin(100 * x) / x,
               [(0.1,), (0.05,), (0.01,), (0.003,), (1e-3,), (1e-7,)]),
    "sinc_xy": ("float64", "sin(x*y) / x", lambda x, y: mpmath.sin(x * y) / x,
                [(0.04, 1000.0), (0.04, 100.0), (1e-9, 3.0), (1e-3, 100.0), (3.0, 1e-9),
                 (1e-20, 1e15), (-0.02, 7.0)]),
    "log1p_ratio": ("float64", "log1p(x*y) / x", lambda x, y: mpmath.log1p(x * y) / x,
                    [(0.04, 24.0), (1e-9, 3.0), (1e-3, 100.0), (0.01, -50.0)]),
    # a function of x*(y + 2), the series' scale found by factoring (y + 2)**2
    "one_minus_cos": ("float64", "(1 - cos(x*(y + 2))) / x**2",
                      lambda x, y: (1 - mpmath.cos(x * (y + 2))) / x**2,
                      [(0.04, 998.0), (1e-6, 1.0), (0.003, -30.0), (2e-8, 1e6)]),
    # no one scale: the polynomial in x on |x| (1 + |y|) <= h (y's degree grows by one
    # per power of x), the formula beyond
    "two_scales": ("float64", "sin(x) / x + sin(x*y) / x",
                   lambda x, y: mpmath.sin(x) / x + mpmath.sin(x * y) / x,
                   [(0.04, 1000.0), (0.5, 3.0), (-0.3, 20.0), (1e-4, 3.0), (1e-9, 0.5)]),
    # a bounded scale in x (y's degree does not grow): the interval |x| <= h; filling
    # x = 0 alone left the formula's cancellation (value 1.0 for 1.5, d/dx 1e4 for -4e-5
    # at x = 1e-4). Found by a second review helper
    "bounded_scale": ("float32", "sin(x) / x + y*(1 - cos(x)) / x**2",
                      lambda x, y: mpmath.sin(x) / x + y * (1 - mpmath.cos(x)) / x**2,
                      [(1e-4, 1.0), (0.05, -3.0), (2.0, 2.0)]),
    # a sum with no plan as a whole (exp(y) is no polynomial in y): each term with its
    # own scale, where x = 0 alone was filled in
    "sum_of_scales": ("float64", "sin(x) / x + sin(x*exp(y)) / x",
                      lambda x, y: mpmath.sin(x) / x + mpmath.sin(x * mpmath.exp(y)) / x,
                      [(1e-7, 3.0), (1e-3, 5.0), (0.5, -2.0)]),
    # the first terms of the series fit a function of x*y, the formula does not: its
    # polynomial in x*y was used at x = 1 when y = 0 (0 for 0.84)
    "not_of_a_product": ("float64", "sin(x*y + x**21) / x",
                         lambda x, y: mpmath.sin(x * y + x**21) / x,
                         [(1.0, 0.0), (1.2, 1e-6), (1e-3, 2.0)]),
}


@pytest.mark.parametrize("name", sorted(_SCALED_SINGULARITIES))
def test_removable_singularities_of_scaled_arguments(tf, build, name):
    """The Taylor polynomial at a removable singularity was used on |x| <= 0.14 (float32)
    or 0.05 (float64) whatever the scale of x in the formula: sin(100*x)/x was -13075
    at x = 0.1 (exact -5.44), sin(x*y)/x -2.45e11 at x = 0.04, y = 1000 (exact 18.6),
    log1p(x*y)/x 17.50 at x = 0.04, y = 24 (exact 16.82). Found by a fresh-user review.
    Values and gradients against 50 digits."""
    dtype, text, reference, points = _SCALED_SINGULARITIES[name]
    inputs = "{x: [null]}" if "y" not in text else "{x: [null], y: [null]}"
    module = build(spec(f"  - name: {name}\n    dtype: {dtype}\n    inputs: {inputs}\n"
                        f"    output: {text}\n").replace("module: m", f"module: {name}"),
                   audit=False)
    # (the formula just outside the interval keeps its cancellation: 1.3e-11 for the
    # gradient of (1 - cos(u))/x**2 at u = 0.084 in float64)
    tol = 2e-6 if dtype == "float32" else 1e-10
    for point in points:
        args = [tf.constant([p], getattr(tf, dtype)) for p in point]
        with tf.GradientTape() as tape:
            tape.watch(args)
            out = getattr(module, name)(*args)
        grads = tape.gradient(out, args)
        with mpmath.workdps(50):
            at = [mpmath.mpf(p) for p in point]
            exact = reference(*at)
            partials = [mpmath.diff(reference, at, tuple(int(i == j) for i in range(len(at))))
                        for j in range(len(at))]
        assert abs(float(out[0]) - float(exact)) <= tol * abs(float(exact)), point
        for got, want in zip(grads, partials):
            assert abs(float(got[0]) - float(want)) <= tol * abs(float(want)) + 1e-300, point
    if name == "two_scales":  # at x = 0 itself: the limit 1 + y, and no NaN
        args = [tf.constant([0.0], tf.float64), tf.constant([3.0], tf.float64)]
        with tf.GradientTape() as tape:
            tape.watch(args)
            out = module.two_scales(*args)
        assert float(out[0]) == 4.0
        assert all(np.isfinite(g.numpy()).all() for g in tape.gradient(out, args))


# real only on one side of a point where SymPy sees a removable singularity: its Taylor
# polynomial there is imaginary; op -> (expression, its mpmath form, valid points)
_ONE_SIDED = {
    "acos_branch": ("acos(-1 - 2/x)", lambda x: mpmath.acos(-1 - 2 / x), [-3.0, -1.5, -50.0]),
    "asin_branch": ("asin(1 + 1/x)", lambda x: mpmath.asin(1 + 1 / x), [-0.6, -3.0, -40.0]),
    "where_branch": ("where(x < -1, acos(-1 - 2/x), asin(x/2))",
                     lambda x: mpmath.acos(-1 - 2 / x) if x < -1 else mpmath.asin(x / 2),
                     [-3.0, 0.5, -0.9]),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(_ONE_SIDED))
def test_no_complex_constant_in_real_code(tf, build, name, dtype):
    """acos(-1 - 2/x) printed (0.24609375j) * x ... into its float32 gradient (the Taylor
    polynomial of its derivative at x = 0, where it is not real): every gradient call
    was a TypeError. Found by a fresh-user review."""
    import inspect

    text, reference, points = _ONE_SIDED[name]
    module = build(spec(f"  - name: {name}\n    dtype: {dtype}\n    inputs: {{x: [null]}}\n"
                        f"    output: '{text}'\n").replace("module: m", f"module: {name}"))
    source = inspect.getsource(module)
    assert not re.search(r"\d(\.\d*)?j\b", source)
    x = tf.constant(points, getattr(tf, dtype))
    with tf.GradientTape() as tape:
        tape.watch(x)
        out = getattr(module, name)(x)
    grad = tape.gradient(out, x).numpy()
    with mpmath.workdps(50):
        want = [float(mpmath.diff(reference, mpmath.mpf(p))) for p in points]
    np.testing.assert_allclose(grad, want, rtol=1e-5 if dtype == "float32" else 1e-12)


def test_a_power_times_an_exponential_stays_one_exponential(tf, build):
    """exp(p*log(x) - b) was generated as exp(-b) * pow(x, p): inf in float32 at
    x = 1e10, p = 4, b = 60 (exact 8.76e13) and NaN for a gamma-like density at large x.
    Now exp(xlogy(p, x) - b), whose x-derivative at x = 0 is finite (exp_power). Found
    by a fresh-user review."""
    module = build(spec(
        "  - name: pw\n    inputs: {x: [null], p: [null], b: [null]}\n"
        "    output: exp(p*log(x) - b)\n"
        "  - name: gamma_like\n    inputs: {x: [null], k: [null]}\n"
        "    output: exp((k - 1)*log(x) - x)\n"
    ).replace("module: m", "module: power_exp"), audit=False)

    def run(fn, *values):
        args = [tf.constant([v], tf.float32) for v in values]
        with tf.GradientTape() as tape:
            tape.watch(args)
            out = fn(*args)
        return float(out[0]), [float(g[0]) for g in tape.gradient(out, args)]

    def exact(f, *values):
        with mpmath.workdps(50):
            at = [mpmath.mpf(v) for v in values]
            return float(f(*at)), [
                float(mpmath.diff(f, at, tuple(int(i == j) for i in range(len(at)))))
                for j in range(len(at))]

    pw = lambda x, p, b: mpmath.exp(p * mpmath.log(x) - b)  # noqa: E731
    gamma_like = lambda x, k: mpmath.exp((k - 1) * mpmath.log(x) - x)  # noqa: E731
    for fn, ref, point in [(module.pw, pw, (1e10, 4.0, 60.0)), (module.pw, pw, (3.0, 2.5, -1.0)),
                           (module.gamma_like, gamma_like, (150.0, 20.0)),
                           (module.gamma_like, gamma_like, (0.5, 3.0))]:
        (got, grads), (want, partials) = run(fn, *point), exact(ref, *point)
        # exp of a large argument: the argument's rounding, ~1e-7 * 150, in the value
        assert got == pytest.approx(want, rel=3e-5), point
        assert grads == pytest.approx(partials, rel=3e-5), point
    # at x = 0: the value x**(k - 1) and its x-derivative (k - 1) x**(k - 2) are finite
    assert run(module.gamma_like, 0.0, 3.0) == (0.0, [0.0, 0.0])
    value, (dx, dk) = run(module.gamma_like, 0.0, 2.0)
    assert (value, dx) == (0.0, 1.0) and dk == 0.0


@pytest.mark.parametrize("fuse", ["none", "xla"])
def test_two_ops_never_define_the_same_function(tmp_path, fuse):
    """Op `scaled` generated for float32 and float64 and an op `scaled_float32` both
    defined _scaled_float32_vjp (and, fused, _scaled_float32_forward): the later
    definition replaced the earlier, so scaled(x, n) in float32 returned x + n. Now a
    spec error at the second op's name, and nothing written. Found by a review helper."""
    text = (
        f"version: 1\nmodule: clash\nfuse: {fuse}\nops:\n"
        "  - name: scaled\n    dtype: [float32, float64]\n"
        "    inputs: {x: [null], n: {shape: [], dtype: int32}}\n    output: x * n\n"
        "  - name: scaled_float32\n"
        "    inputs: {x: [null], n: {shape: [], dtype: int32}}\n    output: x + n\n"
    )
    result = run_cli(tmp_path, text, "-o", "out")
    assert result.exit_code == 2, result.output
    assert "s.yaml:9:11: error: op 'scaled_float32', field 'name'" in result.output
    assert "_scaled_float32_" in result.output and "1 error;" in result.output
    assert not (tmp_path / "out").exists()
    # another name for the second op: both build
    result = run_cli(tmp_path, text.replace("scaled_float32", "scaled_plus"), "-o", "out")
    assert result.exit_code == 0, result.output


def test_valid_specs_that_crashed_the_build(tf, build):
    """Each was a traceback (exit 123) from a valid spec: a constant of a function the
    math module lacks (softplus(2): PrintMethodNotImplementedError), a where() whose
    condition holds a where() (NumPy's select refused the float if-then-else the
    verifier printed), and atan2 of a complex value in the audit's reference
    (AttributeError: 'mpc' object has no attribute '_mpf_'). Found by a review helper
    (12 of 300 random ops crashed)."""
    module = build(spec(
        "  - name: shifted\n    inputs: {x: [null]}\n"
        "    output: x + softplus(2) + sigmoid(1)\n"
        "  - name: nested_where\n    inputs: {x: [null]}\n"
        "    output: where(where(x < 0, 0.5, -1.5) >= x, 3, x)\n"
        "  - name: nested_atan2\n    inputs: {y: [null]}\n"
        "    output: atan2(atan2(3 / y, log(y)), y)\n"
    ).replace("module: m", "module: crashed"))
    x = tf.constant([-2.0, -1.6, -1.0, 0.2, 0.5, 0.7])
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        shifted, nested = module.shifted(x), module.nested_where(x)
    constant = math.log1p(math.exp(2.0)) + 1 / (1 + math.exp(-1.0))
    np.testing.assert_allclose(shifted, x.numpy() + constant, rtol=1e-6)
    np.testing.assert_allclose(tape.gradient(shifted, x), np.ones(6))
    xv = x.numpy()
    np.testing.assert_array_equal(nested, np.where(np.where(xv < 0, 0.5, -1.5) >= xv, 3, xv))
    np.testing.assert_array_equal(tape.gradient(nested, x), [0, 0, 0, 1, 1, 1])
    y = tf.constant([0.5, 2.0])
    with mpmath.workdps(30):
        want = [float(mpmath.atan2(mpmath.atan2(3 / mpmath.mpf(v), mpmath.log(v)), v))
                for v in (0.5, 2.0)]
    np.testing.assert_allclose(module.nested_atan2(y), want, rtol=1e-6)


def test_non_real_values_compared_are_a_located_error(tmp_path):
    """Max(log(-1.5, 2), 2), and Max of log(t, 3) for a t = sign(log_softmax(...)) that is
    never positive, were tracebacks (TypeError: Invalid comparison of non-real) from
    SymPy's comparison. Found by a review helper's random ops."""
    for output, col in (("Max(log(-1.5, 2), 2)", 18), ("where(log(-x**2 - 1) > 0, x, 1)", 20)):
        result = run_cli(tmp_path, spec(f"  - name: f\n    inputs: {{x: [null]}}\n"
                                        f"    output: '{output}'\n"), "-o", "out")
        assert result.exit_code == 2, result.output
        assert f"s.yaml:6:{col}: error: op 'f', field 'output'" in result.output
        assert "is not real for any input" in result.output


def test_the_audit_bounds_its_work_on_huge_intermediates(tmp_path):
    """floor(y**sinh(y)) made the audit's 50-digit reference raise MemoryError (mpmath's
    exact integer power shifted an int by 1.4e38 bits at y = 1e38), and sin(exp(exp(x)))
    or exp(exp(exp(x))) ran past the op's time budget. Arguments beyond 2**2048 are not
    evaluated now (the point is not counted). Built in a process limited to 3 GB of
    address space, each in seconds."""
    import resource
    import subprocess
    import sys

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    for dtype, output in (("[float32, float64]", "floor(y**sinh(y))"),
                          ("float64", "sin(exp(exp(x))) + y"),
                          ("float64", "exp(exp(exp(x))) + y")):
        (tmp_path / "s.yaml").write_text(
            f"version: 1\nmodule: m\ndtype: {dtype}\nops:\n  - name: f\n"
            f"    inputs: {{x: [null], y: [null]}}\n    output: '{output}'\n")
        started = time.monotonic()
        run = subprocess.run(
            [sys.executable, "-m", "gradgen", "build", "s.yaml", "-o", "out", "-q"],
            cwd=tmp_path, capture_output=True, text=True, timeout=120, preexec_fn=limit,
            env=dict(os.environ, GRADGEN_CACHE="0"),
        )
        assert run.returncode == 0, (output, run.stderr[-2000:])
        assert time.monotonic() - started < 25, output
        text = (tmp_path / "out" / "m.py").read_text()
        assert "out of the per-op time budget" not in text, output


def test_a_build_leaks_no_library_warnings(tmp_path):
    """mean(x, axis=0) of an x: [0, 3] printed NumPy's 'RuntimeWarning: Mean of empty
    slice' (with a source line) on the build's stderr. Found by a fresh-user review."""
    import warnings

    path = tmp_path / "s.yaml"
    path.write_text(spec("  - name: f\n    inputs: {x: [0, 3]}\n    output: mean(x, axis=0)\n"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        generate([str(path)], str(tmp_path))
    assert [str(w.message) for w in caught] == []


def test_check_says_a_foreign_file_is_in_the_way(tmp_path):
    """A hand-written out/m.py where the spec's module goes: check reported 'stale
    generated code ...; run: gradgen build' (exit 1), and that build then refused with
    exit 2. Now check refuses as build does. Found by a fresh-user review."""
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "m.py").write_text("print('mine')\n")
    (tmp_path / "s.yaml").write_text(spec("  - name: f\n    inputs: {x: [null]}\n"
                                          "    output: x * 2\n"))
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        for command in ("check", "build"):
            result = CliRunner().invoke(main, [command, "s.yaml", "-o", "out"])
            assert result.exit_code == 2, (command, result.output)
            assert "out/m.py exists and was not generated by gradgen" in result.output
    finally:
        os.chdir(old)
    assert (tmp_path / "out" / "m.py").read_text() == "print('mine')\n"


def test_second_order_of_a_power_in_an_exponent_is_exact_at_whole_exponents(tf, build):
    """exp((k - 1)*log(x) - x/t) kept as one exponential printed xlogy(k - 1, x), whose
    TensorFlow gradient in k is 0 at k = 1 (not log(x)): the Hessian's d2/dx dk was 0.914
    for 0.374 at (0.5, 2, 2) and d2/dk2 0 for 0.374 at k = 1. Found by a review helper.
    Hessians against 50 digits, float64."""
    module = build(spec(
        "  - name: gamma_like\n    dtype: float64\n    inputs: {x: [null], k: [null], t: [null]}\n"
        "    output: exp((k - 1)*log(x) - x/t)\n"
    ).replace("module: m", "module: gamma_like"), audit=False)
    f = lambda x, k, t: mpmath.exp((k - 1) * mpmath.log(x) - x / t)  # noqa: E731
    for point in [(0.5, 2.0, 2.0), (0.5, 1.0, 2.0), (3.0, 1.0, 0.7), (150.0, 20.0, 1.0)]:
        hessian = _hessian(tf, module.gamma_like, point, tf.float64)
        with mpmath.workdps(50):
            at = [mpmath.mpf(v) for v in point]
            for i in range(3):
                for j in range(3):
                    want = float(mpmath.diff(f, at, tuple((i == q) + (j == q) for q in range(3))))
                    assert hessian[i][j] == pytest.approx(want, rel=1e-12, abs=1e-300), (
                        point, i, j)


def _hessian(tf, fn, point, dtype):
    """The second derivatives d2 fn / d(arg i) d(arg j) at ``point`` (one element each),
    from two nested tapes."""
    args = [tf.constant([v], dtype) for v in point]
    with tf.GradientTape(persistent=True) as outer:
        outer.watch(args)
        with tf.GradientTape() as inner:
            inner.watch(args)
            out = fn(*args)
        grads = inner.gradient(out, args)
    return [[float(outer.gradient(g, a)[0]) for a in args] for g in grads]


def test_second_order_near_a_scaled_removable_singularity_is_finite(tf, build):
    """expm1(x*y)/x: inside the polynomial's interval the formula (the branch not taken)
    was evaluated at x = 0.14, where expm1(0.14 * 1000) overflows in float32, so the
    second derivative d2/dx dy was NaN at (1e-5, 1000) (exact 1010.05). The formula's
    point is now h / max(|y|, 1), on the interval's edge. Found by a review helper."""
    module = build(spec("  - name: f\n    inputs: {x: [null], y: [null]}\n"
                        "    output: expm1(x*y) / x\n").replace("module: m", "module: edge"),
                   audit=False)
    f = lambda x, y: mpmath.expm1(x * y) / x  # noqa: E731
    for point in [(1e-5, 1000.0), (1e-3, -7.0)]:
        got = _hessian(tf, module.f, point, tf.float32)[0][1]
        with mpmath.workdps(50):
            at = [mpmath.mpf(float(np.float32(v))) for v in point]
            want = float(mpmath.diff(f, at, (1, 1)))
        assert got == pytest.approx(want, rel=1e-4), point
