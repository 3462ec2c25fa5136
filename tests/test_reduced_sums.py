"""Cheaper sums in unbroadcasting (gradgen.derive.unbroadcast.reduced): a term whose sum
over the reduced axes is exactly 0 (``C * (x - mu)`` with ``mu`` the mean of ``x`` there)
is left out, and factors constant along those axes multiply the sum instead of every
element. Checked on the code and on the numbers: first and second derivatives against
TensorFlow's float64 autodiff of the same formula.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import yaml

from gradgen.emit import generate


def _vjp(output, inputs, tmp_path, where=None):
    """The generated VJP function's source."""
    op = {"name": "f", "inputs": inputs, "output": output}
    if where:
        op["where"] = where
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "module": "m", "ops": [op]}, sort_keys=False))
    text = generate([str(path)], str(tmp_path))["m.py"]
    return text[text.index("def _f_vjp"):]


def _comments(text) -> str:
    """The comments of ``text`` as one line (black wraps them)."""
    return " ".join(ln.strip().lstrip("#").strip() for ln in text.splitlines()
                    if ln.strip().startswith("#"))


LAYER_NORM = {"mu": "mean(x, axis=-1, keepdims=True)", "d": "x - mu"}
LN_OUT = "d / sqrt(mean(d**2, axis=-1, keepdims=True) + 1e-5)"


def test_layer_norm_d_mu_leaves_out_the_term_that_sums_to_zero(tmp_path):
    text = _vjp(LN_OUT, {"x": [None, 8]}, tmp_path, where=LAYER_NORM)
    assert "is 0, mu being the mean of x there: left out" in _comments(text)
    # d(mu) is -rstd * sum(upstream): no (2 mu - 2 x) term summed, the constant outside
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("grad_mu ="))
    assert "mu" not in line.split("=", 1)[1] and "reduce_sum(upstream" in line, line
    # ... and the gradient keeps no full-size forward value alive but the output
    # (rstd * sum(d * g) would keep d: +1 tensor per layer with memory: save)
    code = [ln for ln in text[text.index("def grad("):].splitlines()
            if not ln.strip().startswith("#")]
    assert not re.search(r"\bd\b", "\n".join(code)), "\n".join(code)


@pytest.mark.parametrize("output, inputs, where", [
    # the mean is over other axes than the sum, or without keepdims, or of another
    # value: the term's sum is not 0
    ("(x - mean(x, axis=0, keepdims=True)) * b", {"x": [4, 8], "b": [4, 1]}, None),
    ("(x - mean(y, axis=-1, keepdims=True)) * b", {"x": [4, 8], "y": [4, 8], "b": [4, 1]},
     None),
    # not linear in x: sum((x - mu)**2) is n * var, not 0
    ("(x - mean(x, axis=-1, keepdims=True))**2 * b", {"x": [4, 8], "b": [4, 1]}, None),
], ids=["other_axes", "other_value", "square"])
def test_terms_that_do_not_sum_to_zero_are_kept(output, inputs, where, tmp_path):
    text = _vjp(output, inputs, tmp_path, where=where)
    assert "left out" not in _comments(text)


def test_a_constant_factor_multiplies_the_sum(tmp_path):
    """d/d(q) of exp(q) + x for q [4, 1], x [4, 3]: exp(q) * sum(upstream), not
    sum(exp(q) * upstream)."""
    text = _vjp("exp(q) + x", {"q": [4, 1], "x": [4, 3]}, tmp_path)
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("grad_q ="))
    assert line.strip().startswith("grad_q = exp_q * tf.reduce_sum("), line


SPEC = """
version: 1
module: reduced_sums
dtype: float64
ops:
  - name: layer_norm
    inputs: {x: [null, 8]}
    where:
      mu: mean(x, axis=-1, keepdims=True)
      d: x - mu
    output: d / sqrt(mean(d**2, axis=-1, keepdims=True) + 1e-5)
  - name: standardize
    doc: over the batch axis, scaled by a per-feature weight
    inputs: {x: [16, null], w: [1, null]}
    where:
      mu: mean(x, axis=0, keepdims=True)
      c: x - mu
    output: w * c / sqrt(mean(c**2, axis=0, keepdims=True) + 1e-3) + w * mu
  - name: centred
    doc: the variance of x plus a centred z times x's mean
    inputs: {x: [4, 8], z: [1, 8]}
    where:
      mu: mean(x, axis=[0, 1], keepdims=True)
      nu: mean(z, axis=-1, keepdims=True)
      v: mean((x - mu)**2, axis=[0, 1], keepdims=True)
      w: mean(mu * (z - nu), axis=-1, keepdims=True)
    output: v + w
"""


def _plain(tf):
    def layer_norm(x):
        mu = tf.reduce_mean(x, axis=-1, keepdims=True)
        d = x - mu
        return d / tf.sqrt(tf.reduce_mean(d**2, axis=-1, keepdims=True) + 1e-5)

    def standardize(x, w):
        mu = tf.reduce_mean(x, axis=0, keepdims=True)
        c = x - mu
        return w * c / tf.sqrt(tf.reduce_mean(c**2, axis=0, keepdims=True) + 1e-3) + w * mu

    def centred(x, z):
        mu = tf.reduce_mean(x, axis=[0, 1], keepdims=True)
        nu = tf.reduce_mean(z, axis=-1, keepdims=True)
        return (tf.reduce_mean((x - mu) ** 2, axis=[0, 1], keepdims=True)
                + tf.reduce_mean(mu * (z - nu), axis=-1, keepdims=True))

    return {"layer_norm": layer_norm, "standardize": standardize, "centred": centred}


@pytest.mark.parametrize("name", ["layer_norm", "standardize", "centred"])
def test_first_and_second_derivatives_match_float64_autodiff(tf, build, name):
    module = build(SPEC, audit=False)
    src = open(module.__file__).read()
    assert src.count("left out)") >= 2
    rng = np.random.default_rng(7)
    shapes = {"layer_norm": [(5, 8)], "standardize": [(16, 6), (1, 6)],
              "centred": [(4, 8), (1, 8)]}[name]
    args = [tf.constant(rng.normal(size=s) * 3 + 1) for s in shapes]
    weights = tf.constant(rng.normal(size=(shapes[0][0], shapes[0][1])))
    direction = [tf.constant(rng.normal(size=s)) for s in shapes]

    def derivatives(f):
        with tf.GradientTape() as outer:
            outer.watch(args)
            with tf.GradientTape() as inner:
                inner.watch(args)
                loss = tf.reduce_sum(weights * f(*args))
            grads = inner.gradient(loss, args)
            along = tf.add_n([tf.reduce_sum(g * v) for g, v in zip(grads, direction)])
        # gradient and Hessian-vector product (d^2/dz^2 of centred is 0: None in TF)
        return grads, outer.gradient(along, args, unconnected_gradients="zero")

    got, want = derivatives(getattr(module, name)), derivatives(_plain(tf)[name])
    for g, w in zip(got[0] + got[1], want[0] + want[1]):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-9, atol=1e-11)
