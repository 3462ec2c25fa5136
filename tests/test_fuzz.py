"""Property-based fuzzing of specs (untrusted input).

For any spec text, gradgen either generates modules that import, or fails with its own
spec or usage error: never another exception, a hang, or a side effect (a file
written, the working directory changed). Values are checked by test_fuzz_values.py
(random well-formed expressions against an independent reading of their text).

The number of examples is GRADGEN_FUZZ_EXAMPLES (default 800, derandomized so CI runs
the same examples every time); set GRADGEN_FUZZ_RANDOM=1 and a larger count for a
nightly run that explores new inputs.
"""

from __future__ import annotations

import os
import zlib

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gradgen.emit import generate
from gradgen.errors import SpecError, UsageError
from gradgen.loading import load_texts

EXAMPLES = int(os.environ.get("GRADGEN_FUZZ_EXAMPLES", "800"))
RANDOM = os.environ.get("GRADGEN_FUZZ_RANDOM") == "1"

NAMES = ["x", "y", "z", "w", "b", "a1", "batch", "n", "_x", "class", "exp", "tf", "grad",
         "upstream", "out", "x y", "", "A" * 70, "print", "None", "f", "g"]
FUNCTIONS = ["exp", "log", "sqrt", "sin", "tanh", "atanh", "acosh", "Abs", "sign", "floor",
             "Max", "Min", "sigmoid", "softplus", "log1p", "expm1", "erf", "atan2",
             "Heaviside", "sum", "mean", "transpose", "inverse", "det", "trace", "foo",
             "eval", "__import__", "getattr"]
ATOMS = ["x", "y", "z", "b", "x", "y", "1", "2", "0", "0.5", "-1", "3.25", "pi", "E",
         "x", "y", "I", "1e400", "10**10**10", "'s'", "x.real", "lambda: 0", "[1]",
         "undefined", "True"]
OPERATORS = ["+", "-", "*", "/", "**", "@", "//", "%", ">", "<=", "==", "and", ","]

atom = st.sampled_from(ATOMS)
expression = st.recursive(
    atom,
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(OPERATORS), inner).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        st.tuples(st.sampled_from(FUNCTIONS), st.lists(inner, max_size=3)).map(
            lambda t: f"{t[0]}({', '.join(t[1])})"
        ),
        st.tuples(inner, inner, inner).map(lambda t: f"where({t[0]} > 0, {t[1]}, {t[2]})"),
        st.tuples(inner, st.sampled_from(["0", "-1", "[0, 1]", "5"])).map(
            lambda t: f"sum({t[0]}, axis={t[1]})"
        ),
        inner.map(lambda e: f"-{e}"),
    ),
    max_leaves=8,
)
dim = st.one_of(
    st.integers(-1, 4),
    st.none(),
    st.sampled_from(["n", "batch", "class", "1x", 2.5, True]),
)
shape = st.one_of(st.lists(dim, max_size=3), st.sampled_from(["3", 7, None, {"a": 1}]))
long_input = st.fixed_dictionaries(
    {"shape": st.lists(dim, max_size=3)},
    optional={
        "dtype": st.sampled_from(["float32", "float64", "float16", "int32", "complex64",
                                  "float33"]),
        "differentiable": st.booleans(),
        "shapee": st.just(1),
    },
)
chaotic_inputs = st.dictionaries(st.sampled_from(NAMES), st.one_of(shape, long_input),
                                 max_size=3)
# Plausible inputs: the names expressions use, with shapes that mostly broadcast.
plausible_shape = st.sampled_from([[3], [None], [2, 3], [None, 3], [3, 3], [], [1], [2, 1],
                                   ["n"], ["n", "n"]])
plausible_inputs = st.fixed_dictionaries(
    {"x": plausible_shape},
    optional={"y": plausible_shape, "z": plausible_shape,
              "b": st.fixed_dictionaries({"shape": plausible_shape,
                                          "differentiable": st.booleans()})},
)
plausible_name = st.sampled_from(["f", "g", "h", "op1"])


def sometimes(draw, chance: int) -> bool:
    """True about once in ``chance`` draws."""
    return draw(st.integers(0, chance - 1)) == 0


@st.composite
def op_spec(draw):
    chaos = sometimes(draw, 6)
    op = {
        "name": draw(st.sampled_from(NAMES) if chaos else plausible_name),
        "inputs": draw(chaotic_inputs if chaos else plausible_inputs),
    }
    if sometimes(draw, 4):
        keys = st.sampled_from(NAMES if chaos else ["u", "v", "s2"])
        op["where"] = draw(st.dictionaries(keys, expression, min_size=1, max_size=2))
    if sometimes(draw, 5):
        keys = st.sampled_from(NAMES if chaos else ["p", "q", "r"])
        op["outputs"] = draw(st.dictionaries(keys, expression, min_size=1, max_size=2))
    else:
        op["output"] = draw(expression)
    if sometimes(draw, 6):
        op["doc"] = draw(st.text(max_size=20))
    return op


class _NoAliases(yaml.SafeDumper):
    """Repeated objects are written out, not as YAML aliases (which specs refuse)."""

    def ignore_aliases(self, data):
        return True


@st.composite
def spec_text(draw):
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.text(max_size=200))  # arbitrary text
    chaos = kind == 2
    spec = {
        "version": draw(st.sampled_from([1, 2, "1"])) if chaos else 1,
        "module": draw(st.sampled_from(NAMES)) if chaos else "m",
        "ops": draw(st.lists(op_spec(), min_size=0 if chaos else 1, max_size=2)),
    }
    for i, op in enumerate(spec["ops"]):
        if op["name"] in ("f", "g", "h", "op1"):
            op["name"] = f"op{i}"  # distinct, so one duplicate does not hide the rest
    if sometimes(draw, 3):
        spec["dtype"] = draw(st.sampled_from(["float64", "float16", "bfloat16", "complex128"]
                                             + (["int64", "half"] if chaos else [])))
    text = yaml.dump(spec, Dumper=_NoAliases, sort_keys=False, allow_unicode=True)
    if kind == 1:  # corrupt the YAML
        position = draw(st.integers(0, max(0, len(text) - 1)))
        text = text[:position] + draw(st.sampled_from(["\t", "&a", "*a", "!!python/name:os",
                                                       "<<", "{", "'", ":"])) + text[position:]
    return text


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not RANDOM,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                           HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
@given(text=spec_text())
def test_any_spec_builds_or_fails_cleanly(tf, sandbox, monkeypatch, text):
    monkeypatch.setenv("GRADGEN_OP_TIMEOUT", "10")
    cwd = os.getcwd()
    path = sandbox / "fuzz.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    before = sorted(p.name for p in sandbox.iterdir())
    # the accuracy audit runs on every fourth spec (chosen by content, so the same ones
    # every run): it is part of every build, but at 2000 specs it would cost a minute
    audit = zlib.crc32(text.encode("utf-8", "surrogatepass")) % 4 == 0
    try:
        files = generate([str(path)], str(sandbox / "out"), audit=audit)
    except (SpecError, UsageError) as e:
        assert str(e)  # a message for the user
        event("refused")
    else:
        event("built")
        runtime = files.pop("_gradgen_runtime.py")
        for name, source in files.items():  # the generated module imports
            load_texts(f"fuzz_{name[:-3]}", source, runtime)
    assert os.getcwd() == cwd
    assert sorted(p.name for p in sandbox.iterdir()) == before  # nothing written
