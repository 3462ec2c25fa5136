"""Regression tests for defects found by a fresh-user review (each would have failed)."""

from __future__ import annotations

import os
import stat
import time

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
