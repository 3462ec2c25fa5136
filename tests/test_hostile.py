"""Specs are untrusted input: attacks are refused (exit 2) without running anything,
docs cannot break out of the generated Python, interrupted builds change nothing."""

from __future__ import annotations

import inspect
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

import gradgen.pipeline
import gradgen.emit
from conftest import EXAMPLES, import_source
from gradgen.cli import main
from hostile import SENTINEL, assert_outcome, attack


def spec_with(output=None, inputs=None, name="f", module="m", doc=None, where=None,
              op_doc=None) -> str:
    op = {"name": name, "inputs": inputs if inputs is not None else {"x": [3]}}
    if op_doc is not None:
        op["doc"] = op_doc
    if where:
        op["where"] = where
    op["output"] = output if output is not None else "x"
    spec = {"version": 1, "module": module, "ops": [op]}
    if doc is not None:
        spec["doc"] = doc
    return yaml.safe_dump(spec, sort_keys=False)


touch = f"__import__('os').system('touch {SENTINEL}')"
ATTACKS = {
    # code in expressions
    "import_call": spec_with(touch),
    "dunder_class": spec_with("x.__class__.__bases__[0].__subclasses__()"),
    "attribute": spec_with("x.real"),
    "builtins_via_globals": spec_with("exp.__globals__['__builtins__']"),
    "lambda": spec_with("(lambda: 1)()"),
    "list_comprehension": spec_with("[c for c in 'ab']"),
    "generator": spec_with("sum(c for c in 'ab')"),
    "f_string": spec_with("f'{x}'"),
    "eval_call": spec_with("eval('1')"),
    "exec_call": spec_with("exec('import os')"),
    "open_call": spec_with("open('/etc/passwd')"),
    "getattr_call": spec_with("getattr(x, 'real')"),
    "sympify_call": spec_with("sympify('x')"),
    "import_statement": spec_with("import os"),
    "statement_sequence": spec_with("x; y"),
    "walrus": spec_with("(y := 2)"),
    "subscript": spec_with("x[0]"),
    "string_concat": spec_with("'a' + 'b'"),
    "starred": spec_with("exp(*x)"),
    "ternary": spec_with("x if x else 1"),
    # resource exhaustion
    "huge_power": spec_with("x * 10**10**10"),
    "big_integer_literal": spec_with("x * 123456789012345678901234567890"),
    "float_overflow": spec_with("x * 1e999"),
    "nested_thousands": spec_with("-" * 5000 + "x"),
    "parens_deep": spec_with("(" * 500 + "x" + ")" * 500),
    "very_long": spec_with("+".join(["x"] * 3000)),
    "absurd_shape": spec_with(inputs={"x": [10**15]}),
    "absurd_rank": spec_with(inputs={"x": [1] * 64}),
    # names
    "keyword_input": spec_with(inputs={"class": [3]}, output="1"),
    "builtin_input": spec_with(inputs={"print": [3]}, output="1"),
    "tf_input": spec_with(inputs={"tf": [3]}, output="1"),
    "helper_name": spec_with(name="_check_input"),
    "dunder_op": spec_with(name="__init__"),
    "function_name_input": spec_with(inputs={"exp": [3]}, output="1"),
    "quote_in_name": spec_with(name="f\"):\n    import os\n#"),
    "newline_module": spec_with(module="m\nimport os"),
    "path_module": spec_with(module="../../escape"),
    "unicode_name": spec_with(inputs={"ﬁx": [3]}, output="1"),
    "control_char_doc": spec_with(op_doc="a\x1bb"),
    "nul_in_expression": spec_with("x\x00"),
}
# YAML-level attacks (not expressible as a dict)
ATTACKS["python_tag"] = "version: 1\nmodule: m\nops: !!python/object/apply:os.system ['true']\n"
ATTACKS["alias_bomb"] = (
    "version: 1\nmodule: m\na: &a ['x', 'x']\nb: &b [*a, *a, *a, *a]\nc: &c [*b, *b, *b, *b]\n"
    "ops: [*c]\n"
)
ATTACKS["merge_key"] = "version: 1\nmodule: m\nbase: &b {name: f}\nops:\n  - <<: *b\n"
ATTACKS["binary"] = "version: 1\nmodule: \xff\xfe\n"


def _build_in(tmp_path, data: bytes):
    """`gradgen build attack.yaml -o out` in ``tmp_path`` (the CLI, in this process)."""
    (tmp_path / "attack.yaml").write_bytes(data)
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        return CliRunner().invoke(main, ["build", "attack.yaml", "-o", "out"])
    finally:
        os.chdir(old)


def test_the_corpus_spec_without_an_attack_builds(tmp_path):
    """The control for the attacks below: spec_with()'s spec as it is builds (exit 0,
    output written), so each attack's refusal is due to what the attack changed."""
    result = _build_in(tmp_path, spec_with().encode())
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert (tmp_path / "out" / "m.py").is_file()


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_is_refused_with_exit_2(name, tmp_path):
    """Each spec attack, in its own process under a memory limit (tests/hostile.py)."""
    text = ATTACKS[name]
    (tmp_path / "attack.yaml").write_bytes(
        text.encode("latin-1") if name == "binary" else text.encode("utf-8"))
    result = attack(tmp_path, ["build", "attack.yaml", "-o", "out"])
    assert_outcome(result, 2, r"^attack\.yaml:\d+:\d+: error: ")


BREAKOUT_DOCS = [
    'ends with a quote"',
    '"""\nimport os\nos.system("touch gradgen-pwned")\n"""',
    "'''\nraise SystemExit\n'''",
    "a backslash at the end \\",
    "\\x41 \\u0041 \\N{BULLET} \\\n continued",
    'mixed """ and \'\'\' and \\"""',
    "tabs\tand\nnew lines\n\n  indented",
]


@pytest.mark.parametrize("doc", BREAKOUT_DOCS)
def test_docs_cannot_break_out_of_the_generated_module(doc, build, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    module = build(spec_with("x * 2", op_doc=doc, doc=doc, module="docs"))
    assert module.__doc__.strip() == doc.strip()
    summary = inspect.cleandoc(module.f.__doc__).split("\n\nForward (")[0]
    assert [line.strip() for line in summary.splitlines()] == [  # cleandoc expands tabs
        line.expandtabs().strip() for line in doc.strip().splitlines()
    ]
    assert not (tmp_path / SENTINEL).exists()


def _project(tmp_path):
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    os.chdir(tmp_path)
    # four small specs (25 ops, four outputs): enough to interrupt mid-way
    specs = [f"examples/{name}.yaml" for name in ("kinks", "matrix", "memory", "seeds")]
    assert CliRunner().invoke(main, ["build", *specs, "-o", "out"]).exit_code == 0
    for spec in specs:  # every output would change (a new docstring and the header's hash)
        path = tmp_path / spec
        path.write_text(re.sub(r"^doc: (>-\n  )?", r"doc: \1Changed. ", path.read_text(),
                               count=1, flags=re.M))
    return specs, {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}


def test_build_interrupted_while_deriving_changes_nothing(tmp_path, monkeypatch):
    old = os.getcwd()
    try:
        specs, before = _project(tmp_path)
        calls = {"n": 0}
        original = gradgen.pipeline.derive_op

        def interrupted(doc, index):
            calls["n"] += 1
            if calls["n"] == 12:
                raise KeyboardInterrupt
            return original(doc, index)

        monkeypatch.setattr(gradgen.pipeline, "derive_op", interrupted)
        result = CliRunner().invoke(main, ["build", *specs, "-o", "out"])
        # its own status and message (it was click's "Aborted!" and 1, check's "stale")
        assert result.exit_code == 130 and calls["n"] == 12
        assert result.output.strip().endswith("gradgen: interrupted")
        after = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}
        assert after == before
    finally:
        os.chdir(old)


def test_build_interrupted_while_writing_changes_nothing(tmp_path, monkeypatch):
    old = os.getcwd()
    try:
        specs, before = _project(tmp_path)
        original = os.fdopen
        calls = {"n": 0}

        def interrupted(*args, **kwargs):
            calls["n"] += 1
            if calls["n"] == 3:  # while writing the third temporary file
                raise KeyboardInterrupt
            return original(*args, **kwargs)

        monkeypatch.setattr(gradgen.emit.os, "fdopen", interrupted)
        result = CliRunner().invoke(main, ["build", *specs, "-o", "out"])
        assert result.exit_code == 130 and calls["n"] == 3
        after = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}
        assert after == before  # no output changed, no temporary file left
    finally:
        os.chdir(old)


def test_time_budget_stops_a_runaway_derivation(tmp_path, monkeypatch):
    # 2 ms: a warm process (SymPy's own caches filled by earlier tests) derives this op
    # in well under the 0.05 s this test used, which then passed only when run alone
    monkeypatch.setenv("GRADGEN_OP_TIMEOUT", "0.002")
    spec = tmp_path / "slow.yaml"
    spec.write_text(spec_with("sin(x)/x * exp(x) * cos(x)**7 * tan(x)**3 / (x**2 + 1)**5"))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["build", "slow.yaml", "-o", "out"])
    assert result.exit_code == 2
    assert ("op 'f': deriving, printing and verifying this op took longer than 0.002 s "
            "(GRADGEN_OP_TIMEOUT per derivative order)") in result.stderr
