"""The VJP of an op is an op in the same IR (gradgen.derive.vjp_op), so derivation
applies to its own output: its derived VJP (the op's second-order VJP) and that one's
(third order) are checked numerically like any op (gradgen.verify: directional
derivatives against central differences of the VJP, in float64)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sympy
import yaml

from gradgen import functions as fn
from gradgen.derive import derive, vjp_op
from gradgen.errors import SpecError
from gradgen.expr import parse_op
from gradgen.functions.declarations import as_declared
from gradgen.spec import load_spec, parse_spec
from gradgen.verify import verify_op

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _example(module: str, name: str):
    doc = load_spec(EXAMPLES / f"{module}.yaml")
    return doc, parse_op(doc, [op.name for op in doc.model.ops].index(name))


def test_the_vjp_is_an_op_of_the_primal_inputs_and_the_upstream():
    doc, program = _example("seeds", "bar")  # x: [10, 1], y: [5], x * y
    vjp = vjp_op(program, doc)
    assert [(v.name, v.shape, v.differentiable) for v in vjp.inputs] == [
        ("x", (10, 1), True), ("y", (5,), True), ("upstream", (10, 5), True)]
    assert [(o.name, o.term.shape) for o in vjp.outputs] == [
        ("grad_x", (10, 1)), ("grad_y", (5,))]
    # unbroadcast to [10, 1] and [5]: sums over the broadcast axes, as nodes
    assert [(n.op, dict(n.params)) for n in vjp.nodes if n.op != "elementwise"] == [
        ("sum", {"axes": (1,), "keepdims": True}), ("sum", {"axes": (0,), "keepdims": False})]


# One op per kind of node a VJP holds: elementwise with static and run-time
# unbroadcasting, a guard (a removable singularity filled in), a kink, reductions
# (max with ties, softmax, log-softmax, logsumexp, a keepdims mean), matrix
# products, inverse, log(det()), det (the cofactor), einsum.
CASES = [
    ("seeds", "bar"), ("seeds", "polar"), ("stability", "sinc"), ("kinks", "abs_diff"),
    ("reductions", "max_margin"), ("reductions", "softmax_cross_entropy"),
    ("reductions", "log_softmax_stable"), ("memory", "layer_norm"), ("seeds", "matmul"),
    ("matrix", "inverse_trace"), ("matrix", "log_det"), ("special", "det3"),
    ("matrix", "attention_scores"),
]


@pytest.mark.parametrize("module, name", CASES)
def test_second_and_third_order_vjps_match_finite_differences(module, name):
    doc, program = _example(module, name)
    second = vjp_op(program, doc)
    assert verify_op(derive(second, doc)) is not None
    assert verify_op(derive(vjp_op(second, doc), doc)) is not None


@pytest.mark.slow
@pytest.mark.parametrize("spec", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_every_real_example_op_is_differentiable_twice_more(spec):
    doc = load_spec(EXAMPLES / spec)
    for index, op in enumerate(doc.model.ops):
        program = parse_op(doc, index)
        if program.is_complex or isinstance(op.dtype, list):
            continue
        second = vjp_op(program, doc)
        assert verify_op(derive(second, doc)) is not None, op.name
        assert verify_op(derive(vjp_op(second, doc), doc)) is not None, op.name


def test_a_wrong_vjp_rule_of_a_vjp_is_caught(monkeypatch):
    """The check above would fail on a wrong rule: the cofactor's VJP with the sign of
    its second term flipped."""
    from gradgen.derive import adjoints

    monkeypatch.setattr(adjoints, "_minus", lambda value: value)
    doc, program = _example("special", "det3")
    with pytest.raises(Exception, match="does not match finite differences"):
        verify_op(derive(vjp_op(vjp_op(program, doc), doc), doc))


def test_the_vjp_of_a_complex_op_is_refused_with_its_reason():
    text = yaml.safe_dump({"version": 1, "module": "m", "ops": [{
        "name": "f", "inputs": {"z": {"shape": [3], "dtype": "complex64"}},
        "output": "exp(z)"}]})
    doc = parse_spec(text.encode(), "s.yaml")
    with pytest.raises(SpecError) as info:
        vjp_op(parse_op(doc, 0), doc)
    (diag,) = info.value.diagnostics
    assert diag.message == ("the VJP of a complex op is not differentiated again (it "
                            "holds conjugates, which are not holomorphic)")
    assert (diag.op, diag.field) == ("f", "output")


def test_a_guard_differentiates_as_the_branch_it_chooses():
    x = sympy.Symbol("x", real=True)
    guard = fn.Guard(sympy.sin(x) / x, sympy.Ne(x, 0), 1)
    assert guard.diff(x) == fn.Guard(sympy.diff(sympy.sin(x) / x, x), sympy.Ne(x, 0), 0)
    assert fn.Guard(x, x > 0, 1).diff(sympy.Symbol("y")) == 0


def test_sympys_kinks_become_the_spec_functions_with_derivative_0():
    """|x|' is SymPy's sign(x), whose derivative is a Dirac delta; the VJP op holds the
    spec's sign (derivative 0), as the first-order partial of sign(x) is 0."""
    x = sympy.Symbol("x", real=True)
    converted = as_declared(sympy.Abs(x).diff(x) + sympy.Max(x, 1))
    assert {type(f) for f in converted.atoms(sympy.Function)} == {fn.sign, fn.Max}
    assert converted.diff(x).atoms(sympy.DiracDelta) == set()
