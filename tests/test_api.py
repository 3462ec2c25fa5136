"""The Python API (gradgen.api): specs built in Python, with expressions as text or SymPy
objects, checked like YAML specs; generated source; ops loaded without a file."""

from __future__ import annotations

import inspect
import subprocess
import sys

import numpy as np
import pytest
import sympy

import gradgen
from gradgen.api import expression_text
from gradgen.errors import SpecError

x, y = sympy.symbols("x y", real=True)


@pytest.mark.parametrize(
    "value, text",
    [
        ("log(1 + exp(x))", "log(1 + exp(x))"),  # text is passed through
        (sympy.log(1 + sympy.exp(x)), "log(exp(x) + 1)"),
        (3, "3"),
        (0.5, "0.5"),
        (sympy.Piecewise((x**2, x > 0), (sympy.sin(x), True)), "where(x > 0, x**2, sin(x))"),
        (sympy.Piecewise((1, x > 1), (x, x > 0), (0, True)), "where(x > 1, 1, where(x > 0, x, 0))"),
        (sympy.Piecewise((x, (x > 0) & (y > 0)), (0, True)),
         "where(x > 0 and y > 0, x, 0)"),
        (sympy.Piecewise((x, sympy.Eq(x, 1) | sympy.Ne(y, 2)), (y, True)),
         "where(Eq(x, 1) or Ne(y, 2), x, y)".replace("Eq(x, 1)", "x == 1").replace(
             "Ne(y, 2)", "y != 2")),
        (sympy.Max(x, y) + sympy.Abs(x), "Abs(x) + Max(x, y)"),
        (np.float64(0.25), "0.25"),
        (np.int64(2), "2"),
    ],
)
def test_expression_text(value, text):
    assert expression_text(value) == text


@pytest.mark.parametrize("value", [True, np.ones(2), [1, 2], None])
def test_expression_text_refuses_other_types(value):
    with pytest.raises(TypeError, match="must be a string in the spec's syntax"):
        expression_text(value, "f: output")


def _ops():
    s = sympy.Symbol("s")
    return [
        gradgen.OpDef("softplus", {"x": [...]}, sympy.log(1 + sympy.exp(x)), dtype="floating"),
        gradgen.OpDef(
            "scaled", {"x": [None, 3], "w": {"shape": [3], "differentiable": False}},
            outputs={"out": "t * w", "total": s}, where={"t": sympy.tanh(x), "s": "sum(t)"},
            doc="two outputs",
        ),
    ]


def test_generated_source_is_what_build_writes_for_the_same_yaml(tmp_path):
    from gradgen.emit import generate

    source = gradgen.generate_source(_ops(), module="mine", audit=False)
    spec = tmp_path / "spec.yaml"
    spec.write_text(gradgen.spec_text(_ops(), module="mine"))
    built = generate([str(spec)], str(tmp_path), audit=False)["mine.py"]
    header = lambda text: text.split("\n", 1)  # noqa: E731  the spec's path differs
    assert header(source)[1] == header(built)[1]
    assert header(source)[0].endswith("from <python spec>. DO NOT EDIT.")


def test_the_spec_is_validated_like_yaml():
    doc = gradgen.build_spec(_ops(), module="mine")
    assert doc.path == "<python spec>"
    assert [op.name for op in doc.model.ops] == ["softplus", "scaled"]
    assert doc.model.ops[0].inputs["x"].shape == ["..."]


@pytest.mark.parametrize(
    "op, message",
    [
        (gradgen.OpDef("f", {"x": [3]}, sympy.gamma(x)), "unknown function 'gamma'"),
        (gradgen.OpDef("f", {"x": [3], "y": [4]}, x + y), "shapes [3] and [4] do not broadcast"),
        (gradgen.OpDef("_f", {"x": [3]}, x), "field 'name': expected an identifier"),
        (gradgen.OpDef("f", {"x": [3, ...]}, x), "may only be a shape's first entry"),
        (gradgen.OpDef("f", {"x": [3]}, x, dtype="float8"),
         "op 'f', field 'dtype': expected a dtype"),
        (gradgen.OpDef("f", {"x": [3]}, "x +"), "field 'output'"),
    ],
)
def test_errors_are_spec_errors_naming_the_op_and_field(op, message):
    with pytest.raises(SpecError) as e:
        gradgen.generate_source([op], verify=False, audit=False)
    assert message in str(e.value)
    assert str(e.value).startswith("<python spec>:")


def test_a_shape_must_be_a_list():
    with pytest.raises(TypeError, match="input 'x': a shape is a list"):
        gradgen.OpDef("f", {"x": "3"}, x).data()


def test_op_loads_and_runs_with_its_source(tf):
    softplus = gradgen.op("softplus", sympy.log(1 + sympy.exp(x)), inputs={"x": [...]},
                          dtype=["float32", "float64"], audit=False)
    v = tf.constant([[-100.0, 0.0, 100.0]], tf.float64)
    with tf.GradientTape() as tape:
        tape.watch(v)
        out = softplus(v)
    assert out.dtype == tf.float64
    np.testing.assert_allclose(tape.gradient(out, v).numpy(), [[0.0, 0.5, 1.0]], atol=1e-15)
    assert softplus.fn.__name__ == "softplus" and "def softplus(x):" in softplus.source
    assert inspect.getsource(softplus.fn).startswith("def softplus(x):")
    assert repr(softplus) == "GeneratedOp(name='softplus')"


def test_load_imports_the_whole_module(tf):
    module = gradgen.load(_ops(), module="mine", audit=False)
    out, total = module.scaled(np.ones((2, 3)), np.ones(3))
    assert out.shape == (2, 3) and total.shape == ()
    assert module.__all__ == ["softplus", "scaled"]


def test_importing_gradgen_imports_neither_sympy_nor_tensorflow():
    code = "import sys, gradgen; print('sympy' in sys.modules, 'tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["False", "False"]


def test_fuse_from_python():
    source = gradgen.generate_source(
        [gradgen.OpDef("f", {"x": [...]}, sympy.exp(x) - 1, fuse="xla")], verify=False,
        audit=False)
    assert "@tf.function(jit_compile=True, reduce_retracing=True)\ndef _f_forward(x):" in source
