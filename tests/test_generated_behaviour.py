"""What gradgen's outputs do, tested by behaviour rather than by their bytes:

* the input checks at the top of every generated op (`_check_input`,
  `_check_named_dims` in templates/runtime/) refuse inputs of the wrong size, rank,
  dtype or disagreeing named dims, eagerly and in `tf.function`, and accept the rest;
* the emitted gradient tests (templates/test_module.py.j2) fail against a generated
  module whose gradient or forward was corrupted, and pass against the real one;
* the cache key changes when any of gradgen's source files or templates changes.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import GENERATED, ROOT, import_source

# ---------------------------------------------------------------------------------------
# 1. Input checks

CHECKS_SPEC = """\
version: 1
module: checks
ops:
  - name: fixed
    inputs:
      x: [3, 1]
      y: {shape: [4], dtype: float32}
    output: x * y
  - name: named
    inputs:
      A: [batch, n, n]
      B: [batch, n, 2]
    output: A @ B
  - name: anysize
    inputs:
      x: [null, 3]
      k: {shape: [3], dtype: int32}
    output: x * k
"""


@pytest.fixture(scope="module")
def checks(build):
    return build(CHECKS_SPEC, audit=False)


def _zeros(tf, shape, dtype=None):
    return tf.zeros(shape, dtype or tf.float32)


def _shape_error(op, name, want, got):
    """The parts the ValueError must name: op, input, declared and actual shape."""
    return [f"{op}: ", f"input {name!r}", f"must have shape {want}", f"got {got}"]


# (op, shapes of the arguments, input at fault, declared shape, actual shape as printed)
WRONG_SHAPES = [
    ("fixed", [(2, 1), (4,)], "x", "[3, 1]", "(2, 1)"),  # smaller
    ("fixed", [(4, 1), (4,)], "x", "[3, 1]", "(4, 1)"),  # larger
    ("fixed", [(3, 0), (4,)], "x", "[3, 1]", "(3, 0)"),  # a size-1 dim empty
    ("fixed", [(3, 2), (4,)], "x", "[3, 1]", "(3, 2)"),  # a size-1 dim larger
    ("fixed", [(3, 1), (3,)], "y", "[4]", "(3,)"),  # the second input smaller
    ("fixed", [(3, 1), (5,)], "y", "[4]", "(5,)"),  # ... and larger
    ("fixed", [(3,), (4,)], "x", "[3, 1]", "(3,)"),  # rank too low
    ("fixed", [(3, 1, 1), (4,)], "x", "[3, 1]", "(3, 1, 1)"),  # rank too high
    ("fixed", [(), (4,)], "x", "[3, 1]", "()"),  # a scalar
    ("anysize", [(2, 2), (3,)], "x", "[None, 3]", "(2, 2)"),  # known dim after None
    ("anysize", [(2, 4), (3,)], "x", "[None, 3]", "(2, 4)"),
    ("anysize", [(2,), (3,)], "x", "[None, 3]", "(2,)"),  # None dims still count in rank
    ("anysize", [(2, 3), (2,)], "k", "[3]", "(2,)"),  # an integer input
    ("named", [(2, 3, 3), (2, 3)], "B", "[batch, n, 2]", "(2, 3)"),
    ("named", [(2, 3, 3), (2, 3, 1)], "B", "[batch, n, 2]", "(2, 3, 1)"),
]


def _args(tf, op, shapes):
    dtypes = {"anysize": [tf.float32, tf.int32]}.get(op, [tf.float32, tf.float32])
    return [_zeros(tf, s, d) for s, d in zip(shapes, dtypes)]


@pytest.mark.parametrize("op, shapes, name, want, got", WRONG_SHAPES)
def test_wrong_static_shapes_are_value_errors(tf, checks, op, shapes, name, want, got):
    args = _args(tf, op, shapes)
    with pytest.raises(ValueError) as info:
        getattr(checks, op)(*args)
    message = str(info.value)
    for part in _shape_error(op, name, want, got):
        assert part in message, message
    # the same inside tf.function with the wrong static shapes in the signature: at trace
    fn = tf.function(getattr(checks, op), input_signature=[
        tf.TensorSpec(s, a.dtype) for s, a in zip(shapes, args)])
    with pytest.raises(ValueError, match=re.escape(f"{op}: input {name!r} must have shape")):
        fn(*args)


@pytest.mark.parametrize("op, value, name, want, got", [
    ("fixed", lambda tf: tf.zeros((3, 1), tf.float64), "x", "float32", "float64"),
    ("fixed", lambda tf: tf.Variable(tf.zeros((3, 1), tf.float64)), "x", "float32", "float64"),
    ("fixed", lambda tf: tf.zeros((3, 1), tf.int32), "x", "float32", "int32"),
    ("fixed", lambda tf: tf.zeros((3, 1), tf.float16), "x", "float32", "float16"),
    ("anysize", lambda tf: tf.zeros((3,), tf.float32), "k", "int32", "float32"),
    ("anysize", lambda tf: tf.zeros((3,), tf.int64), "k", "int32", "int64"),
])
def test_wrong_dtypes_are_type_errors(tf, checks, op, value, name, want, got):
    good = {"fixed": [_zeros(tf, (3, 1)), _zeros(tf, (4,))],
            "anysize": [_zeros(tf, (2, 3)), _zeros(tf, (3,), tf.int32)]}[op]
    position = {"x": 0, "y": 1, "k": 1}[name]
    args = list(good)
    args[position] = value(tf)
    with pytest.raises(TypeError) as info:
        getattr(checks, op)(*args)
    message = str(info.value)
    for part in (f"{op}: ", f"input {name!r}", f"must have dtype {want}", f"got {got}"):
        assert part in message, message


@pytest.mark.parametrize("shapes, dim, sizes", [
    ([(2, 3, 3), (2, 4, 2)], "n", ["A: 3", "B: 4"]),
    ([(2, 3, 3), (5, 3, 2)], "batch", ["A: 2", "B: 5"]),
    # 1 against 5 would broadcast in A @ B: the declared names forbid it
    ([(1, 3, 3), (5, 3, 2)], "batch", ["A: 1", "B: 5"]),
    ([(5, 3, 3), (1, 3, 2)], "batch", ["A: 5", "B: 1"]),
])
def test_named_dims_must_agree(tf, checks, shapes, dim, sizes):
    args = [_zeros(tf, s) for s in shapes]
    with pytest.raises(ValueError) as info:
        checks.named(*args)
    message = str(info.value)
    for part in ["named: ", f"dim {dim!r} must have one size", *sizes]:
        assert part in message, message
    # in tf.function with those sizes known when tracing, the trace fails the same way
    fn = tf.function(checks.named, input_signature=[tf.TensorSpec(s) for s in shapes])
    with pytest.raises(ValueError, match=re.escape(f"dim {dim!r} must have one size")):
        fn(*args)


def test_named_dims_within_one_input_must_agree(tf, checks):
    with pytest.raises(ValueError) as info:
        checks.named(_zeros(tf, (2, 3, 4)), _zeros(tf, (2, 3, 2)))
    message = str(info.value)
    assert "dim 'n' must have one size" in message and "A: " in message


def test_declared_shapes_pass(tf, checks):
    out = checks.fixed(_zeros(tf, (3, 1)), _zeros(tf, (4,)))
    assert out.shape == (3, 4)
    # Python lists and NumPy arrays are converted to the declared dtype
    out = checks.fixed(np.ones((3, 1)), [1.0, 2.0, 3.0, 4.0])
    assert out.dtype == tf.float32 and out.shape == (3, 4)
    out = checks.fixed(tf.Variable(tf.ones((3, 1))), y=tf.ones((4,)))
    assert out.shape == (3, 4)
    for batch, n in itertools.product((0, 1, 4), (1, 3)):
        out = checks.named(_zeros(tf, (batch, n, n)), _zeros(tf, (batch, n, 2)))
        assert out.shape == (batch, n, 2)
    for rows in (0, 1, 7):  # a None dim takes any size
        out = checks.anysize(_zeros(tf, (rows, 3)), tf.ones((3,), tf.int32))
        assert out.shape == (rows, 3)


def test_unknown_dims_are_checked_when_the_graph_runs(tf, checks):
    spec = [tf.TensorSpec([None, None]), tf.TensorSpec([None])]
    fixed = tf.function(checks.fixed, input_signature=spec)
    assert fixed(_zeros(tf, (3, 1)), _zeros(tf, (4,))).shape == (3, 4)
    for x, y, want, got in [((2, 1), (4,), "[3,1]", "[2,1]"), ((4, 1), (4,), "[3,1]", "[4,1]"),
                            ((3, 1), (3,), "[4]", "[3]"), ((3, 1), (5,), "[4]", "[5]"),
                            ((3, 0), (4,), "[3,1]", "[3,0]")]:
        with pytest.raises(tf.errors.InvalidArgumentError) as info:
            fixed(_zeros(tf, x), _zeros(tf, y))
        message = info.value.message
        assert f"expected shape {want}" in message and got in message, message
    # unknown rank: the rank is checked when the graph runs too
    unranked = tf.function(checks.fixed, input_signature=[tf.TensorSpec(None)] * 2)
    assert unranked(_zeros(tf, (3, 1)), _zeros(tf, (4,))).shape == (3, 4)
    for x in [(3,), (3, 1, 1), ()]:
        with pytest.raises(tf.errors.InvalidArgumentError, match="expected shape"):
            unranked(_zeros(tf, x), _zeros(tf, (4,)))


def test_none_dims_take_any_size_in_one_trace(tf, checks):
    anysize = tf.function(checks.anysize, input_signature=[
        tf.TensorSpec([None, None]), tf.TensorSpec([None], tf.int32)])
    k = tf.constant([1, 2, 3])
    for rows in (0, 1, 7):
        assert anysize(_zeros(tf, (rows, 3)), k).shape == (rows, 3)
    assert anysize.experimental_get_tracing_count() == 1
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"expected shape \[\?,3\]"):
        anysize(_zeros(tf, (2, 4)), k)
    named = tf.function(checks.named, input_signature=[
        tf.TensorSpec([None, None, None]), tf.TensorSpec([None, None, 2])])
    for batch, n in [(0, 3), (1, 1), (4, 2)]:
        assert named(_zeros(tf, (batch, n, n)), _zeros(tf, (batch, n, 2))).shape == (batch, n, 2)
    assert named.experimental_get_tracing_count() == 1


def test_named_dims_that_disagree_at_run_time_are_refused(tf, checks):
    """With None dims in a tf.function signature a named dim of size 1 against 5 would
    broadcast silently (the gradient of A got B's batch size): checked when it runs."""
    named = tf.function(checks.named, input_signature=[
        tf.TensorSpec([None, 3, 3]), tf.TensorSpec([None, 3, 2])])
    A, B = _zeros(tf, (1, 3, 3)), _zeros(tf, (5, 3, 2))
    try:
        with tf.GradientTape() as tape:
            tape.watch(A)
            out = named(A, B)
        grad = tape.gradient(out, A)
    except tf.errors.InvalidArgumentError as e:
        message = str(e).replace("\\'", "'")  # TF escapes the quotes of the message
        assert "named: dim 'batch' must have one size in 'A' (axis 0) and 'B' (axis 0)" in message
        assert "[1]" in message and "[5]" in message
        return
    pytest.fail(f"no error; output {out.shape}, gradient of A {grad.shape} for A {A.shape}")


# ---------------------------------------------------------------------------------------
# 2. The emitted tests fail against a corrupted module


def _vjp_function(source: str, op: str) -> tuple[int, int]:
    """Start and end of `_<op>_vjp` in a generated module's source."""
    start = source.index(f"\ndef _{op}_vjp(")
    end = source.find("\n\n\n", start)
    return start, (len(source) if end < 0 else end)


def _substitute(source: str, op: str, pattern: str, replacement: str) -> str:
    """`source` with `pattern` replaced once, inside `_<op>_vjp`."""
    start, end = _vjp_function(source, op)
    body, count = re.subn(pattern, replacement, source[start:end], count=1, flags=re.M)
    assert count == 1, f"{pattern!r} not found in _{op}_vjp"
    return source[:start] + body + source[end:]


def scale_first_gradient(source, op):
    """The first input's gradient times 1.5."""
    return _substitute(source, op, r"^(\s+return )(grad_\w+)", r"\g<1>\g<2> * 1.5")


def scale_forward(source, op):
    """The forward's (first) output times 1.5, the gradient unchanged."""
    # (the values may pass through _with_jvp first: `return _with_jvp(out, ...), grad`)
    call = r"(_with_jvp\()?"
    if re.search(r"^    return " + call + r"\(", source[slice(*_vjp_function(source, op))],
                 flags=re.M):
        return _substitute(source, op, r"^    return " + call + r"\((\w+), ",
                           r"    return \g<1>(\g<2> * 1.5, ")
    return _substitute(source, op, r"^    return " + call + r"(\w+),",
                       r"    return \g<1>\g<2> * 1.5,")


def transpose_gradient(source, op):
    """grad_a (a square matrix) transposed: right shape, wrong values."""
    return _substitute(source, op, r"^(\s+grad_a = )(.*)$",
                       r"\g<1>tf.linalg.matrix_transpose(\g<2>)")


def drop_conjugate(source, op):
    """det's VJP without the conjugate of the cofactor matrix."""
    return _substitute(source, op, r"tf\.math\.conj\((_cofactor\(\w+\))\)", r"\g<1>")


SPECS = {"seeds": "seeds.yaml", "complex_ops": "complex.yaml"}


@functools.lru_cache(maxsize=None)
def _fresh(module: str) -> tuple[str, str, str]:
    """(module source, emitted tests source, runtime source) rendered now from the current
    templates (not the checked-in copies, so a change to the test template is tested by
    behaviour)."""
    from gradgen.emit import generate_all, generate_tests, runtime_text

    cwd = os.getcwd()
    try:
        os.chdir(ROOT)
        generated = generate_all([f"examples/{SPECS[module]}"], "generated", audit=False)
        tests = generate_tests(generated, "tests/generated", "generated")
    finally:
        os.chdir(cwd)
    ((_, test_text),) = tests.items()
    runtime = runtime_text({h for v in generated[0].views for h in v.helpers})
    return generated[0].text, test_text, runtime


def _emitted(tmp_path, module: str, source: str, tag: str):
    """`module`'s emitted tests as the current templates render them, importing `source`
    as the module (laid out as in the repository, so the emitted relative path finds it,
    with its runtime beside it)."""
    folder = tmp_path / tag
    (folder / "generated").mkdir(parents=True)
    (folder / "tests" / "generated").mkdir(parents=True)
    (folder / "generated" / f"{module}.py").write_text(source)
    (folder / "generated" / "_gradgen_runtime.py").write_text(_fresh(module)[2])
    test_name = f"test_{module}_gradients.py"
    (folder / "tests" / "generated" / test_name).write_text(_fresh(module)[1])
    tests = import_source(f"emitted_{module}_{tag}", folder / "tests" / "generated" / test_name)
    assert Path(tests.ops.__file__).resolve() == (folder / "generated" / f"{module}.py").resolve()
    return tests


def _run_emitted(tests, op=None) -> dict:
    """Run the emitted test functions on every case (of `op`); outcome per test id."""
    outcomes = {}
    for case, case_id in zip(tests.CASES, tests.IDS):
        if op is not None and case[0] != op:
            continue
        for test in (tests.test_matches_autodiff_of_the_forward,
                     tests.test_matches_numerical_gradient):
            try:
                test(*case)
                outcome = "passed"
            except AssertionError:
                outcome = "failed"
            except pytest.skip.Exception:
                outcome = "skipped"
            outcomes[f"{test.__name__}[{case_id}]"] = outcome
    return outcomes


def test_emitted_tests_pass_on_the_generated_module(tf, tmp_path):
    source = _fresh("seeds")[0]
    outcomes = _run_emitted(_emitted(tmp_path, "seeds", source, "clean"))
    assert len(outcomes) >= 10 and set(outcomes.values()) == {"passed"}, outcomes


@pytest.mark.parametrize("module, op, corrupt", [
    ("seeds", "bar", scale_first_gradient),
    ("seeds", "bar", scale_forward),
    ("seeds", "matmul", transpose_gradient),
    ("seeds", "polar", scale_first_gradient),
    ("seeds", "polar", scale_forward),
    ("complex_ops", "det_large", drop_conjugate),
])
def test_emitted_tests_fail_on_a_corrupted_module(tf, tmp_path, module, op, corrupt):
    source = _fresh(module)[0]
    broken = corrupt(source, op)
    assert broken != source
    outcomes = _run_emitted(_emitted(tmp_path, module, broken, corrupt.__name__), op)
    assert outcomes, f"no emitted cases for {op}"
    # every case of the corrupted op fails, in both the autodiff and the numerical test
    assert set(outcomes.values()) == {"failed"}, outcomes


# ---------------------------------------------------------------------------------------
# 3. The cache key covers every source file and template


@pytest.fixture
def code_tree(tmp_path, monkeypatch):
    """A copy of gradgen's package and templates that the cache fingerprints instead of
    the real ones; yields (package folder, templates folder) of the copy."""
    import gradgen.render
    from gradgen import cache

    package = tmp_path / "gradgen"
    templates = tmp_path / "templates"
    shutil.copytree(Path(cache.__file__).resolve().parent, package,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copytree(gradgen.render.templates_dir(), templates,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    monkeypatch.setattr(cache, "__file__", str(package / "cache.py"))
    monkeypatch.setattr(gradgen.render, "templates_dir", lambda: templates)
    cache.fingerprint.cache_clear()
    yield package, templates
    cache.fingerprint.cache_clear()


def _every_file(package: Path, templates: Path) -> list[Path]:
    """Enumerated independently of gradgen.cache: every .py file under the package and
    every file under the templates folder, at any depth."""
    files = []
    for root, dirs, names in os.walk(package):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        files += [Path(root) / n for n in names if n.endswith(".py")]
    for root, dirs, names in os.walk(templates):
        files += [Path(root) / n for n in names]
    return sorted(files)


def _key():
    from gradgen import cache

    cache.fingerprint.cache_clear()
    return cache.key("op", {"name": "f", "output": "x * y"})


def test_cache_key_changes_with_every_source_file_and_template(code_tree):
    from gradgen import cache

    package, templates = code_tree
    files = _every_file(package, templates)
    assert len([f for f in files if f.suffix == ".py"]) >= 30
    assert {f.name for f in files} >= {"cache.py", "reverse.py", "engine.py", "logexp.py",
                                       "helpers.py.j2", "op.py.j2", "test_module.py.j2"}
    original = _key()
    assert original == cache.key("op", {"name": "f", "output": "x * y"})
    for path in files:
        data = path.read_bytes()
        # same length, one byte different; and one byte more
        flipped = data[:-1] + bytes([data[-1] ^ 1]) if data else b"#"
        for changed in (flipped, data + b"\n"):
            path.write_bytes(changed)
            assert _key() != original, f"editing {path.relative_to(path.parents[1])} keeps the key"
        path.write_bytes(data)
        assert _key() == original, path
    # a new module or template, anywhere in the tree, changes the key too
    for new in (package / "stability" / "families" / "new_rule.py",
                templates / "extra.py.j2", templates / "partials" / "row.j2"):
        new.parent.mkdir(exist_ok=True)
        new.write_text("x = 1\n")
        assert _key() != original, f"adding {new.name} keeps the key"
        new.unlink()
        assert _key() == original
