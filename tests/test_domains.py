"""Per-input test domains (`domain:`), and ops meant for inputs far from 1: the
Lennard-Jones potential of examples/potentials.yaml at distances of order 1e4.

The emitted tests of examples/potentials.yaml (tests/generated) check its ops in
float32 and float64 against float64 central differences; here: the spec's errors, the
build's check drawing from a domain, and the float32 forward staying finite where
SymPy's distributed powers would overflow.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import EXAMPLES
from gradgen.emit import generate_all
from gradgen.errors import SpecError
from gradgen.spec import parse_spec


def _spec(inputs: str, output: str) -> str:
    return f"version: 1\nmodule: m\nops:\n  - name: f\n    inputs: {inputs}\n    output: {output}\n"


@pytest.mark.parametrize(
    "inputs, message",
    [
        ("{x: {shape: [3], domain: [2, 1]}}", "a domain [low, high] needs low < high; got [2, 1]"),
        ("{x: {shape: [3], domain: positve}}", "got 'positve'; did you mean 'positive'?"),
        ("{x: {shape: [3], domain: [0, .inf]}}", "finite numbers of magnitude at most 1e300"),
        ("{x: {shape: [3], domain: [1, 2, 3]}}", "a domain [low, high] has two numbers; got 3"),
        ("{x: {shape: [3], dtype: int32, domain: [0.2, 0.8]}}", "holds no integer"),
    ],
)
def test_domain_errors(inputs, message):
    with pytest.raises(SpecError) as e:
        parse_spec(_spec(inputs, "x").encode(), "s.yaml")
    assert message in str(e.value)
    assert "field 'inputs.x.domain'" in str(e.value)


def test_shorthands_are_ranges():
    doc = parse_spec(_spec("{x: {shape: [3], domain: positive}, y: {shape: [3], domain: "
                           "negative}, z: {shape: [], domain: [-1, 5]}}", "x + y + z").encode(),
                     "s.yaml")
    inputs = doc.model.ops[0].inputs
    assert (inputs["x"].domain, inputs["y"].domain, inputs["z"].domain) == (
        (0.1, 3.0), (-3.0, -0.1), (-1.0, 5.0)
    )


def test_the_build_check_draws_from_the_domain(tmp_path):
    """log(x - 100) is NaN on every default range: unchecked without a domain, checked
    (and the emitted tests drawn) from it with one."""
    ranges = {}
    for name, inputs in (("none", "{x: [3]}"), ("given", "{x: {shape: [3], domain: [101, 110]}}")):
        spec = tmp_path / f"{name}.yaml"
        spec.write_text(_spec(inputs, "log(x - 100)").replace("module: m", f"module: {name}"))
        (generated,) = generate_all([str(spec)], str(tmp_path), audit=False)
        ranges[name] = generated.ranges["f"]
    assert ranges["none"] is None and ranges["given"] is not None


def test_emitted_cases_carry_the_domains(tmp_path):
    from gradgen.emit import generate_tests

    spec = tmp_path / "s.yaml"
    spec.write_text(_spec("{x: {shape: [3], domain: [101, 110]}, y: [3]}", "log(x - 100) * y"))
    generated = generate_all([str(spec)], str(tmp_path), audit=False)
    (text,) = generate_tests(generated, str(tmp_path), str(tmp_path)).values()
    assert "((101.0, 110.0), None)," in text


@pytest.fixture(scope="module")
def potentials(build):
    return build((EXAMPLES / "potentials.yaml").read_text(), audit=False)


def test_lennard_jones_in_float32_at_distances_of_1e4(tf, potentials):
    """SymPy distributes (sigma / r)**6 into sigma**6 * r**-6; at sigma, r ~ 1e4 in
    float32 sigma**12 is inf and r**-12 is 0, so the op returned NaN. The generated
    code computes sigma / r, then its powers."""
    rng = np.random.default_rng(0)
    r = rng.uniform(9000, 11000, (4, 4))
    args64 = [tf.constant(r), tf.constant(10000.0, tf.float64), tf.constant(2.0, tf.float64)]
    args32 = [tf.cast(a, tf.float32) for a in args64]
    results = {}
    for key, args in (("32", args32), ("64", args64)):
        with tf.GradientTape() as tape:
            tape.watch(args)
            out = potentials.lennard_jones(*args)
        results[key] = [out] + tape.gradient(out, args)
    for got, want in zip(results["32"], results["64"]):
        assert got.dtype == tf.float32 and np.all(np.isfinite(got.numpy()))
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4,
                                   atol=1e-4 * np.max(np.abs(want.numpy())))
    source = potentials.__loader__.get_data(potentials.__file__).decode()
    assert "sigma_over_r = sigma / r" in source and "s6 = " in source


@pytest.mark.parametrize("domain, message", [
    ("[1]", "a domain [low, high] has two numbers; got 1"),
    ("[a, 2]", "a domain's bounds are numbers; got 'a'"),
])
def test_domain_shape_errors(domain, message):
    with pytest.raises(SpecError) as e:
        parse_spec(_spec(f"{{x: {{shape: [3], domain: {domain}}}}}", "x").encode(), "s.yaml")
    assert message in str(e.value)
