"""The VJP of an op is an op in the same IR (gradgen.derive.vjp_op), so derivation
applies to its own output: its derived VJP (the op's second-order VJP) and that one's
(third order) are checked numerically like any op (gradgen.verify: directional
derivatives against central differences of the VJP, in float64)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import sympy
import yaml

from gradgen import functions as fn
from gradgen.derive import derive, vjp_op
from gradgen.errors import SpecError
from gradgen.expr import parse_op
from gradgen.functions.declarations import as_declared
from gradgen.spec import load_spec, parse_spec
from gradgen.verify import RANGES, verify_op

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _computes_the_gradient_function(op, vjp) -> bool:
    """Whether ``vjp`` (the derived VJP op) computes what ``op``'s gradient function
    does: at random inputs (the first range where both are finite) and upstreams, its
    outputs are the input gradients, in float64. False where no range is finite."""
    from gradgen.verify import _Evaluator, _run

    evaluator, rng = _Evaluator(), np.random.default_rng(0)
    shapes = op.example_shapes[0]
    for low, high in RANGES:
        inputs = {spec.name: rng.uniform(*(spec.domain or (low, high)), shape)
                  for spec, shape in zip(op.inputs, shapes)}
        outputs, _ = _run(op, evaluator, inputs)
        upstreams = [rng.uniform(-1, 1, np.shape(o)) for o in outputs]
        _, grads = _run(op, evaluator, inputs, upstreams)
        got, _ = _run(vjp, evaluator, {**inputs, **dict(zip(op.upstreams, upstreams))})
        want = [grads[i.name] for i in op.inputs if i.grad]
        if all(np.all(np.isfinite(v)) for v in want + got):
            assert len(got) == len(want)
            for g, w in zip(got, want):
                np.testing.assert_allclose(np.broadcast_to(g, np.shape(w)), w,
                                           rtol=1e-9, atol=1e-12)
            return True
    return False


def _check_orders(program, doc):
    """Second and third order: each VJP op computes the gradient function it comes from,
    and its own derived gradient matches central differences."""
    first = derive(program, doc)
    vjp = vjp_op(program, doc)
    second = derive(vjp, doc)
    assert _computes_the_gradient_function(first, second)
    assert verify_op(second) is not None
    third = derive(vjp_op(vjp, doc), doc)
    assert _computes_the_gradient_function(second, third)
    assert verify_op(third) is not None
    for op in (second, third):  # every VJP rule used states its formula
        assert all(t.split(": ", 1)[1] != "None" for t in op.vjp_text + op.reduction_vjp_text)


def test_the_vjp_rules_of_what_vjps_hold_state_their_formulas():
    doc, program = _example("special", "det3")
    assert any("det * (<grad_" in t for t in derive(vjp_op(program, doc), doc).vjp_text)
    doc, program = _example("reductions", "softmax_stable")
    texts = derive(vjp_op(program, doc), doc).vjp_text
    assert any("softmax_grad(" in t for t in texts), texts


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
    assert (vjp.name, vjp.key, vjp.dtype, vjp.single) == ("bar", program.key, "float32", False)
    assert (vjp.memory, vjp.fuse) == (program.memory, program.fuse)
    assert {v.dtype for v in vjp.inputs} == {"float32"}


def test_the_upstream_is_declared_like_the_output():
    text = yaml.safe_dump({"version": 1, "module": "m", "dtype": "float64", "ops": [{
        "name": "f", "memory": "recompute", "inputs": {"x": ["...", "n", None], "k": [1]},
        "output": "2 * x * k"}]}, sort_keys=False)
    doc = parse_spec(text.encode(), "s.yaml")
    vjp = vjp_op(parse_op(doc, 0), doc)
    upstream = vjp.inputs[-1]
    assert (upstream.name, upstream.declared, upstream.dtype) == (
        "upstream", (..., "n", None), "float64")
    assert (vjp.memory, [o.name for o in vjp.outputs]) == ("recompute", ["grad_x", "grad_k"])
    assert [o.term.leaves for o in vjp.outputs] == [
        frozenset([o.term.expr]) for o in vjp.outputs]


# One op per kind of node a VJP holds: elementwise with static and run-time
# unbroadcasting, a guard (a removable singularity filled in), a kink, reductions
# (max with ties, softmax, log-softmax, logsumexp, a keepdims mean), matrix
# products, inverse, log(det()), det (the cofactor), einsum.
CASES = [
    ("seeds", "bar"), ("seeds", "polar"), ("stability", "sinc"), ("kinks", "abs_diff"),
    ("reductions", "max_margin"), ("reductions", "softmax_cross_entropy"),
    ("reductions", "log_softmax_stable"), ("memory", "layer_norm"), ("seeds", "matmul"),
    ("matrix", "inverse_trace"), ("matrix", "log_det"), ("special", "det3"),
    ("matrix", "attention_scores"), ("reductions", "softmax_stable"),
    ("reductions", "logsumexp_stable"),
]


@pytest.mark.parametrize("module, name", CASES)
def test_second_and_third_order_vjps_match_finite_differences(module, name):
    doc, program = _example(module, name)
    _check_orders(program, doc)


# Ops whose VJPs hold what the examples' do not: a mean over dims known only at run
# time, batch dims `...`, a keepdims max broadcast back, a log-softmax, a constant
# gradient (zeros_like), a log-mean-exp (a logsumexp with a count), batched matrices
# (transposes of rank 3, a matmul whose batch dim is known only at run time).
INLINE = {
    "log_mean_exp": ({"x": [3, 4]}, "log(mean(exp(x), axis=-1))"),
    "batch_matmul": ({"a": [None, 3, 4], "b": [None, 5, 4]}, "a @ transpose(b)"),
    "mean_unknown": ({"x": [None, None]}, "x * mean(exp(x), axis=-1, keepdims=True)"),
    "batch_norm": ({"x": [..., 4]}, "x / sqrt(mean(x**2, axis=-1, keepdims=True) + 1)"),
    "max_keepdims": ({"x": [3, 4]}, "x - max(x, axis=1, keepdims=True)"),
    "log_softmax": ({"x": [3, 4], "w": [4]}, "w * log_softmax(x * w, axis=-1)"),
    "unused_input": ({"x": [3], "c": [3]}, "exp(x) + 0 * c"),
    # x - x + y is y ([4]), broadcast to the operand's [3, 4] as written
    "broadcast_static": ({"x": [3, 4], "y": [4]}, "(x - x + y) @ transpose(x)"),
}


@pytest.mark.parametrize("name", sorted(INLINE))
def test_vjps_of_more_node_kinds_differentiate_again(name):
    inputs, output = INLINE[name]
    text = yaml.safe_dump({"version": 1, "module": "m", "ops": [{
        "name": "f", "inputs": {k: ["..." if d is ... else d for d in v]
                                for k, v in inputs.items()}, "output": output}]})
    doc = parse_spec(text.encode(), "s.yaml")
    _check_orders(parse_op(doc, 0), doc)


def test_an_operand_broadcast_to_its_shape_as_written_is_a_broadcast_node():
    """Simplification leaves y ([4]) of the operand x - x + y ([3, 4] as written); the
    forward broadcasts it to [3, 4], and the VJP op holds that broadcast as a node with
    the static shape (its VJP, the sum back to [4], is in :mod:`gradgen.derive.adjoints`)."""
    text = yaml.safe_dump({"version": 1, "module": "m", "ops": [{
        "name": "f", "inputs": {"x": [3, 4], "y": [4]},
        "output": "sum(x - x + y, axis=-1)"}]})
    doc = parse_spec(text.encode(), "s.yaml")
    vjp = vjp_op(parse_op(doc, 0), doc)
    (node,) = [n for n in vjp.nodes if n.op == "broadcast"]
    y = sympy.Symbol("y", real=True)
    assert (node.args, node.arg_shapes, node.shape, node.params) == (
        (y,), ((4,),), (3, 4), (("shape", (3, 4)),))
    assert node.arg_leaves == (frozenset([y]),)


@pytest.mark.slow
@pytest.mark.parametrize("spec", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_every_real_example_op_is_differentiable_twice_more(spec):
    doc = load_spec(EXAMPLES / spec)
    for index, op in enumerate(doc.model.ops):
        program = parse_op(doc, index)
        if program.is_complex or isinstance(op.dtype, list):
            continue
        _check_orders(program, doc)


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
