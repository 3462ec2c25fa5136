"""What a reviewer reads in generated code, pinned on tests/specs/views/readable.yaml (a
spec with `where:` names, a matrix inverse, a reduction and a condition; its views are
also a golden record, tests/golden/views/readable.json):

* the user's `where:` names survive as variables, also inside a guarded branch;
* temporaries are named after what they hold (`sigma_over_r`, `mask`);
* no provenance comment for a partial that is a constant;
* formulas in the spec's syntax (`where(c, a, b)`, `and`, `(sigma/r)**6`, `0.5`);
* a matrix inverse computed in the forward is reused by the backward;
* the partials of f(a - b) share their product with the upstream (huber: one `where`);
* docstrings and `explain` list reductions apart from matrix operations.
"""

from __future__ import annotations

import re

import pytest

from conftest import ROOT

SPEC = ROOT / "tests" / "specs" / "views" / "readable.yaml"


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    from gradgen.emit import generate

    out = tmp_path_factory.mktemp("readable")
    return generate([str(SPEC)], str(out), audit=False)["readable.py"]


def _function(source: str, name: str) -> str:
    start = source.index(f"def {name}(")
    end = source.find("\n\n\n", start)
    return source[start:end if end > 0 else None]


def test_where_names_survive_as_variables(source):
    nll = _function(source, "_gaussian_nll_vjp")
    assert "    precision = tf.linalg.inv(s)\n" in nll
    assert "    quad = tf.reduce_sum(" in nll and "    logdet = _logabsdet(s)\n" in nll
    lj = _function(source, "_lennard_jones_vjp")
    # (sigma / r)**6 inside the cutoff's guarded branch, from the guarded r
    assert re.search(r"\n    s6 = sigma_over_r_safe_sq \* sigma_over_r_safe_sq_sq\n", lj)


def test_temporaries_are_named_after_what_they_hold(source):
    lj = _function(source, "_lennard_jones_vjp")
    assert "    in_range = tf.math.logical_and(r > 0.5, r < 2.5)\n" in lj
    assert "    sigma_over_r_safe = sigma / r_safe\n" in lj
    # no power of sigma or r alone: their ratio is computed first (finite at 1e4)
    assert "sigma_sq" not in lj and "inv_r_safe_sq" not in lj


def test_no_comment_for_a_constant_partial(source):
    nll = _function(source, "_gaussian_nll_vjp")
    assert "d(out)/d(total)" not in nll and "0.50000" not in source
    assert "d(out)/d(total) = 0.5\n" in _function(source, "gaussian_nll")  # docstring


def test_formulas_in_the_spec_syntax(source):
    doc = _function(source, "lennard_jones")
    assert "s6 = (sigma/r)**6" in doc
    assert "out = where(r > 0.5 and r < 2.5, 4*eps*((sigma/r)**12 - (sigma/r)**6), 0)" in doc
    assert "Piecewise" not in source and "&" not in doc
    assert "quad = sum(((transpose(v) @ precision) @ v), axis=[-1, -2])" in _function(
        source, "gaussian_nll")


def test_the_forward_inverse_is_reused(source):
    nll = _function(source, "_gaussian_nll_vjp")
    assert nll.count("tf.linalg.inv(") == 1
    backward = nll[nll.index("def grad("):]
    assert "tf.linalg.matrix_transpose(\n            precision\n        )" in backward or \
        "tf.linalg.matrix_transpose(precision)" in backward


def test_reductions_are_listed_apart_from_matrix_operations(source):
    doc = _function(source, "gaussian_nll")
    matrix = doc[doc.index("Vector-Jacobian products of the matrix operations:"):
                 doc.index("Vector-Jacobian products of the reductions:")]
    assert "VJP of quad" not in matrix and "inverse" in matrix
    reductions = doc[doc.index("Vector-Jacobian products of the reductions:"):]
    assert "VJP of quad w.r.t. product_1: grad_quad broadcast over axes [-1, -2]" in reductions


def test_explain_lists_reductions_apart(capsys):
    from gradgen.cli import main

    with pytest.raises(SystemExit) as e:
        main(["explain", str(SPEC), "gaussian_nll"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    matrix = out[out.index("  matrix VJPs:"):out.index("  reduction VJPs:")]
    assert "VJP of quad" not in matrix
    assert "VJP of quad" in out[out.index("  reduction VJPs:"):]


def test_partials_of_a_difference_share_one_product(source):
    """d/d(target) of huber(pred - target) is minus d/d(pred): a where() whose branches
    are all negated is written as the negation of one, so the gradient computes one
    where() and one product with the upstream, and negates it for the target."""
    grad = _function(source, "_huber_vjp").split("def grad(", 1)[1]
    assert grad.count("tf.where(") == 1, grad
    assert re.search(r"grad_target = _unbroadcast\(-\w+, target\)", grad), grad
