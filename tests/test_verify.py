"""Build-time verification: derived VJPs checked against finite differences (NumPy)."""

from __future__ import annotations

import os
import shutil

import pytest
from click.testing import CliRunner

import gradgen.derive.elementwise
import gradgen.shapes
from conftest import EXAMPLES
from gradgen.cli import main
from gradgen.pipeline import derive_op
from gradgen.spec import load_spec, parse_spec
from gradgen.verify import VerificationError, verify_op


@pytest.mark.parametrize("spec", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_every_example_op_verifies(spec):
    doc = load_spec(EXAMPLES / spec)
    for index in range(len(doc.model.ops)):
        assert verify_op(derive_op(doc, index)) is not None, doc.model.ops[index].name


def test_a_wrong_partial_fails_the_build_with_exit_3(tmp_path, monkeypatch):
    original = gradgen.derive.elementwise.partial
    monkeypatch.setattr(gradgen.derive.elementwise, "partial", lambda *a: 2 * original(*a))
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    os.chdir(tmp_path)
    result = CliRunner().invoke(main, ["build", "examples/seeds.yaml", "-o", "out"])
    assert result.exit_code == 3
    assert result.stderr.startswith("examples/seeds.yaml:8:5: error: op 'bar': the derived "
                                    "gradient for input 'x' does not match finite differences")
    assert not (tmp_path / "out").exists()


def _op(output):
    doc = parse_spec(f"version: 1\nmodule: m\ndtype: float64\nops:\n  - name: f\n"
                     f"    inputs: {{x: [3], y: [3]}}\n    output: {output}\n".encode(), "s.yaml")
    return derive_op(doc, 0)


def test_a_large_term_beside_an_input_is_not_a_false_mismatch(monkeypatch):
    """f = 1e8 x + y: each value of f is rounded to about 1e8 * eps, so y's difference
    quotient carries 2e-3 of noise; that is not a wrong gradient (it failed the build
    with "this is a gradgen bug"). A wrong one beside a term of 1e6 is still caught."""
    for output in ("1e8 * x + y", "1e10 * x + y**2"):
        assert verify_op(_op(output)) is not None, output
    original = gradgen.derive.elementwise.partial

    def doubled_for_y(d, expr, v, *rest):
        return original(d, expr, v, *rest) * (2 if v.name == "y" else 1)

    monkeypatch.setattr(gradgen.derive.elementwise, "partial", doubled_for_y)
    with pytest.raises(VerificationError, match="for input 'y'"):
        verify_op(_op("1e6 * x + y"))


def test_a_wrong_unbroadcast_is_caught(monkeypatch):
    original = gradgen.shapes.reduction_plan

    def drop_keep_axes(a, b):
        plan = original(a, b)
        if isinstance(plan, gradgen.shapes.StaticReduction):
            return gradgen.shapes.StaticReduction(plan.drop_axes, ())
        return plan

    monkeypatch.setattr(gradgen.shapes, "reduction_plan", drop_keep_axes)
    doc = load_spec(EXAMPLES / "seeds.yaml")
    with pytest.raises(VerificationError, match=r"has shape \[10, 5\], not the input's"):
        verify_op(derive_op(doc, 0))


def test_an_op_finite_nowhere_is_not_checked():
    doc = parse_spec(
        b"version: 1\nmodule: m\nops:\n  - name: f\n    inputs: {x: [3]}\n"
        b"    output: log(-1 - x**2)\n", "s.yaml",
    )
    assert verify_op(derive_op(doc, 0)) is None


def test_conditions_broadcast_like_tensorflow():
    """And/Or of a [2, 3] mask and a [1, 3] comparison broadcast in the NumPy check, as
    tf.math.logical_and does (SymPy's NumPy printer stacked them: a crash on
    min(Piecewise(...), axis=0, keepdims=True)'s tie mask, found by test_fuzz_values)."""
    import numpy as np
    import sympy

    from gradgen.verify import _Evaluator

    mask, smallest, x = sympy.symbols("mask smallest x", real=True)
    cond = sympy.Or(sympy.And(mask, sympy.Eq(smallest, sympy.pi)),
                    sympy.And(sympy.Not(mask), sympy.Eq(smallest, x)))
    expr = sympy.Piecewise((1, cond), (0, True)) / 2
    env = {"mask": np.array([[True, False, True], [False, True, False]]),
           "smallest": np.array([[np.pi, 1.0, 2.0]]),
           "x": np.array([[0.0, 1.0, 5.0], [3.0, 4.0, 2.0]])}
    got = _Evaluator().expr(expr, env)
    assert got.tolist() == [[0.5, 0.5, 0.0], [0.0, 0.0, 0.5]]
