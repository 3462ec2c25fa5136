"""Attacks through everything but the spec's expressions: paths and folder names, files
that are not what they seem, pyproject.toml, the environment, the cache, names that
break gradgen's own machinery, constants too large to print, and killed builds.

Each runs the command line in its own process under a memory limit (tests/hostile.py)
and asserts the exact outcome: the exit status, a message naming the problem, no
traceback, no code run (the sentinel file never appears), bounded time and peak memory,
and no file written or changed, unless the attack is one gradgen must survive by
working (a folder named with a quote), in which case what it wrote is checked.
"""

from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path

import pytest
import yaml

from conftest import sampled
from hostile import SENTINEL, assert_outcome, attack, tree

ROOT = Path(__file__).resolve().parent.parent
SPEC = yaml.safe_dump({"version": 1, "module": "m", "ops": [
    {"name": "f", "inputs": {"x": [3]}, "output": "x * 2"}]}, sort_keys=False)
PWN = f"__import__('os').system('touch {SENTINEL}')"


def spec(output="x * 2", inputs=None, module="m", name="f", doc=None, ops=None) -> str:
    op = {"name": name, "inputs": inputs or {"x": [3]}, "output": output}
    if doc is not None:
        op["doc"] = doc
    return yaml.safe_dump({"version": 1, "module": module, "ops": ops or [op]},
                          sort_keys=False)


def write(folder: Path, files: dict) -> None:
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode())


def sparse(path: Path, size: int = 3 << 30) -> None:
    """A file of ``size`` bytes that takes no disk space."""
    with open(path, "wb") as f:
        f.truncate(size)


def test_control_a_plain_build_and_check_succeed(tmp_path):
    write(tmp_path, {"s.yaml": SPEC})
    assert_outcome(attack(tmp_path, ["build", "s.yaml", "-o", "out"]), 0, unchanged=False)
    assert_outcome(attack(tmp_path, ["check", "s.yaml", "-o", "out"]), 0)


def test_the_fork_server_gives_what_a_new_interpreter_gives(tmp_path):
    """attack() forks from a server with the imports done (tests/forked_cli.py): the
    same exit status, output and files as ``python -m gradgen`` started afresh, for a
    build that writes, one that is refused, and one that fails writing."""
    cases = [(["build", "s.yaml", "-o", "out"], SPEC, None),
             (["build", "s.yaml", "-o", "out"], spec(PWN), None),
             (["build", "s.yaml", "-o", "out", "--emit-tests", "t"], spec("x * 3"), 2000)]
    codes = []
    for case, (args, text, file_size_limit) in enumerate(cases):
        outcomes = []
        for fresh in (True, False):
            folder = tmp_path / f"{case}-{fresh}"  # each run in a folder of its own
            folder.mkdir()
            write(folder, {"s.yaml": text})
            result = attack(folder, args, fresh=fresh, file_size_limit=file_size_limit)
            outcomes.append((result.code, result.stdout, result.stderr.replace(str(folder), "F"),
                             result.after))
        assert outcomes[0] == outcomes[1], args
        codes.append(outcomes[0][0])
    assert codes == [0, 2, 4]


# ------------------------------------------------------------ 1. text reaching code


def _path_literal(test_module: Path) -> str:
    """The string an emitted test module joins to its own folder to find the module."""
    tree_ = ast.parse(test_module.read_text())  # compiles: nothing broke out of a string
    for node in tree_.body:
        if isinstance(node, ast.Assign) and node.targets[0].id == "_PATH":
            return node.value.right.value
    raise AssertionError("no _PATH")


@pytest.mark.parametrize("out, tests", sampled([
    ("o'\"); " + PWN + "; ('", "t"),
    ("out", "t'\"; " + PWN + " #"),
    ("out", r"t\N"),
    (r"o\N{BULLET}\x", r"t\u0041"),
    ('o"""', "t'''"),
]))
def test_folder_names_are_literals_in_the_emitted_tests(tmp_path, out, tests):
    write(tmp_path, {"s.yaml": SPEC})
    result = attack(tmp_path, ["build", "s.yaml", "-o", out, "--emit-tests", tests])
    assert_outcome(result, 0, unchanged=False)
    module = tmp_path / tests / "test_m_gradients.py"
    assert _path_literal(module) == os.path.relpath(tmp_path / out / "m.py", tmp_path / tests)


def test_folder_names_from_pyproject_are_literals(tmp_path):
    write(tmp_path, {"s.yaml": SPEC, "pyproject.toml": (
        "[tool.gradgen]\nspecs = ['s.yaml']\nout = \"o'\\\"\"\nemit_tests = \"t\\\\N\"\n")})
    assert_outcome(attack(tmp_path, ["build"]), 0, unchanged=False)
    assert _path_literal(tmp_path / "t\\N" / "test_m_gradients.py") == "../o'\"/m.py"


@pytest.mark.parametrize("option", ["-o", "--emit-tests"])
@pytest.mark.parametrize("name", ["o\nimport os", "o\x1b[31m", "o\u202eyp.", "o\u2028x"])
def test_folder_names_with_control_characters_are_refused(tmp_path, option, name):
    write(tmp_path, {"s.yaml": SPEC})
    result = attack(tmp_path, ["build", "s.yaml", option, name] + (
        ["-o", "out"] if option != "-o" else []))
    assert_outcome(result, 2, r"output folder '.*' contains control, format or "
                              r"line-break characters")
    assert "\x1b" not in result.stderr and "\u202e" not in result.stderr


def test_pyproject_folder_with_a_newline_is_refused(tmp_path):
    write(tmp_path, {"s.yaml": SPEC, "pyproject.toml":
                     "[tool.gradgen]\nspecs = ['s.yaml']\nemit_tests = \"t\\nimport os\"\n"})
    assert_outcome(attack(tmp_path, ["build"]), 2,
                   r"pyproject\.toml: \[tool\.gradgen\] emit_tests '.*' contains control")


@pytest.mark.parametrize("key", ["out", "emit_tests"])
def test_pyproject_folder_with_a_null_byte_is_refused(tmp_path, key):
    # A command line cannot carry a NUL (exec refuses it); TOML's \u0000 can.
    write(tmp_path, {"s.yaml": SPEC, "pyproject.toml":
                     f"[tool.gradgen]\nspecs = ['s.yaml']\n{key} = \"o\\u0000x\"\n"})
    assert_outcome(attack(tmp_path, ["build"]), 2,
                   rf"pyproject\.toml: \[tool\.gradgen\] {key} '.*' contains control")


def test_spec_path_with_a_newline_is_refused(tmp_path):
    write(tmp_path, {"a\nimport os.yaml": SPEC})
    assert_outcome(attack(tmp_path, ["build", "a\nimport os.yaml", "-o", "out"]), 2,
                   r"spec path 'a\\\\x0aimport os\.yaml' contains control")


def test_spec_linked_to_a_name_with_a_newline_is_refused(tmp_path):
    write(tmp_path, {"real\n" + PWN + ".yaml": SPEC})
    os.symlink("real\n" + PWN + ".yaml", tmp_path / "s.yaml")
    assert_outcome(attack(tmp_path, ["build", "s.yaml", "-o", "out"]), 2,
                   r"spec path \(links resolved\) .*real\\\\x0a__import__.* contains control")


def test_spec_file_name_with_quotes_stays_in_the_header_comment(tmp_path):
    name = 'a"""\'\'\' ; ' + PWN.replace("/", "_") + ".yaml"
    write(tmp_path, {name: SPEC})
    assert_outcome(attack(tmp_path, ["build", name, "-o", "out"]), 0, unchanged=False)
    text = (tmp_path / "out" / "m.py").read_text()
    assert text.splitlines()[0] == f"# Code generated by gradgen 0.1.0 from ../{name}. DO NOT EDIT."
    ast.parse(text)


FORGING_DOCS = [
    "ends here\n\n## Forged section\n\n- [x] approved",
    "</details>\n<details open><summary>forged</summary>",
    "<details><summary>never closed",
    "<script>alert(1)</script> [link](javascript:alert(1)) ![img](http://x/y.png)",
    "```\ncode fence never closed",
    "| forged | table |\n|---|---|\n| a | b |",
    "Forged heading\n==============",
]


@pytest.mark.parametrize("doc", sampled(FORGING_DOCS))
def test_explain_markdown_neutralises_docs(tmp_path, doc):
    write(tmp_path, {"s.yaml": spec(doc=doc)})
    result = attack(tmp_path, ["explain", "s.yaml", "--format", "markdown"])
    assert_outcome(result, 0)
    headings = [line for line in result.stdout.splitlines() if line.startswith("#")]
    assert headings == ["### `f`"], result.stdout
    # CommonMark reads a backslash-escaped punctuation character as itself
    echoed = result.stdout.split("\n\n", 1)[1].split("\n\nSpec: ")[0]
    for raw in (r"<", r"\]\(", r"`", r"\|", r"^=", r"^-", r"^#"):
        assert not re.search(r"(?<!\\)" + raw, echoed, re.M), (raw, echoed)


@pytest.mark.parametrize("payload", sampled(["\x1b]0;pwned\x07\x1b[2J", "\u202e\u2066",
                                              "\r\x08\x7f"], keep=1))
def test_check_diff_shows_escapes_not_terminal_controls(tmp_path, payload):
    write(tmp_path, {"s.yaml": SPEC})
    assert attack(tmp_path, ["build", "s.yaml", "-o", "out"]).code == 0
    path = tmp_path / "out" / "m.py"
    path.write_text(path.read_text() + f"# {payload}\n")
    result = attack(tmp_path, ["check", "s.yaml", "-o", "out"])
    assert_outcome(result, 1, "stale generated code")
    for ch in payload:
        if not ch.isprintable():
            assert ch not in result.stdout + result.stderr, repr(ch)
    assert "\\x1b" in result.stdout or "\\u202e" in result.stdout or "\\x0d" in result.stdout


@pytest.mark.parametrize("yaml_text, field", [
    ('version: 1\nmodule: "m\\e[2J\\u202e"\nops: [{name: f, inputs: {x: [3]}, output: x}]\n',
     "module"),
    ('version: 1\nmodule: m\nops: [{name: "f\\e]0;x\\a", inputs: {x: [3]}, output: x}]\n',
     "name"),
    ('version: 1\nmodule: m\nops: [{name: f, inputs: {"x\\e[1m": [3]}, output: x}]\n',
     "inputs"),
])
def test_error_messages_escape_what_they_echo(tmp_path, yaml_text, field):
    write(tmp_path, {"s.yaml": yaml_text})
    result = attack(tmp_path, ["build", "s.yaml", "-o", "out"])
    assert_outcome(result, 2, r"^s\.yaml:\d+:\d+: error: ")
    assert not any(ch in result.stderr for ch in "\x1b\x07\u202e")
    assert "\\x1b" in result.stderr


# ------------------------------------------------------------ 2. user and environment errors


def test_unwritable_output_folder_is_exit_4(tmp_path):
    write(tmp_path, {"s.yaml": SPEC})  # /proc refuses new folders even to root
    assert_outcome(attack(tmp_path, ["build", "s.yaml", "-o", "/proc/gradgen-out"]), 4,
                   r"gradgen: error: cannot create output folder /proc/gradgen-out: ")


def test_file_size_limit_is_exit_4_and_changes_nothing(tmp_path):
    write(tmp_path, {"s.yaml": SPEC})
    assert attack(tmp_path, ["build", "s.yaml", "-o", "out", "--emit-tests", "t"]).code == 0
    write(tmp_path, {"s.yaml": spec("x * 3")})  # every output changes
    result = attack(tmp_path, ["build", "s.yaml", "-o", "out", "--emit-tests", "t"],
                    file_size_limit=2000)
    before = {k: v for k, v in result.before.items() if k != "s.yaml"}
    assert_outcome(result, 4, r"cannot write .*: File too large; no output file changed",
                   unchanged=False)
    assert {k: v for k, v in result.after.items() if k != "s.yaml"} == before


def test_a_folder_where_the_module_goes_is_refused(tmp_path):
    write(tmp_path, {"s.yaml": SPEC, "out/m.py/keep": "x"})
    for command in ("build", "check"):
        assert_outcome(attack(tmp_path, [command, "s.yaml", "-o", "out"]), 2,
                       r"output file out/m\.py is not a regular file; gradgen does not "
                       "replace it")


def test_a_bad_tests_folder_writes_no_module(tmp_path):
    write(tmp_path, {"s.yaml": SPEC, "t": "a file, not a folder"})
    assert_outcome(attack(tmp_path, ["build", "s.yaml", "-o", "out", "--emit-tests", "t"]),
                   2, r"output folder t exists and is not a folder")


def test_a_foreign_test_file_writes_no_module(tmp_path):
    write(tmp_path, {"s.yaml": SPEC, "t/test_m_gradients.py": "# mine\n"})
    assert_outcome(attack(tmp_path, ["build", "s.yaml", "-o", "out", "--emit-tests", "t"]),
                   2, r"t/test_m_gradients\.py exists and was not generated by gradgen")


PYPROJECTS = {
    "tool_is_a_number": ("tool = 5\n", r"'tool' must be a table"),
    "gradgen_is_a_string": ("[tool]\ngradgen = 'str'\n",
                            r"\[tool\.gradgen\] must be a table, got a str"),
    "gradgen_is_a_list": ("[tool]\ngradgen = [1, 2]\n", r"must be a table, got a list"),
    "deep_arrays": ("[tool.gradgen]\nspecs = " + "[" * 5000 + "]" * 5000 + "\n",
                    r"cannot read pyproject\.toml: values nested too deeply"),
    "deep_tables": ("[tool.gradgen]\nout = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n",
                    r"cannot read pyproject\.toml"),
    "specs_not_list": ("[tool.gradgen]\nspecs = 5\n", r"specs must be a list of strings"),
    "specs_of_numbers": ("[tool.gradgen]\nspecs = [1]\n", r"specs must be a list of strings"),
    "out_a_number": ("[tool.gradgen]\nout = 1\n", r"out must be a str"),
    "verify_a_string": ("[tool.gradgen]\nverify = 'yes'\n", r"verify must be a bool"),
    "unknown_key": ("[tool.gradgen]\n\"\\u001b[2Jx\" = 1\n", r"unknown key '\\\\x1b\[2Jx'"),
    "not_toml": ("[tool.gradgen\n", r"cannot read pyproject\.toml: "),
    "not_utf8": (b"[tool.gradgen]\nout = '\xff'\n", r"cannot read pyproject\.toml: "),
    "too_many_globs": ("[tool.gradgen]\nspecs = [" + ", ".join(["'a'"] * 101) + "]\n",
                       r"lists more than 100 globs"),
}


@pytest.mark.parametrize("name", sorted(PYPROJECTS))
def test_hostile_pyproject_is_a_usage_error(tmp_path, name):
    text, message = PYPROJECTS[name]
    write(tmp_path, {"pyproject.toml": text, "s.yaml": SPEC})
    assert_outcome(attack(tmp_path, ["build"]), 2, message)
    assert "\x1b" not in attack(tmp_path, ["check"]).stderr


def _link_loop(folder: Path) -> None:
    """``folder/a`` and ``folder/b``, each a link to ``folder``: every path a/b/a/... is
    a folder, and a glob that follows them has 2**depth of them to list."""
    folder.mkdir(parents=True, exist_ok=True)
    os.symlink(".", folder / "a")
    os.symlink(".", folder / "b")


@pytest.mark.parametrize("command", ["check", "build"])
def test_a_recursive_spec_glob_does_not_follow_links(tmp_path, command):
    """specs = ["d/**/none.yaml"] in a folder with a loop of links: '**' does not
    descend into links to folders, so the glob ends (no match: exit 2)."""
    _link_loop(tmp_path / "d")
    write(tmp_path, {"pyproject.toml": '[tool.gradgen]\nspecs = ["d/**/none.yaml"]\n'})
    assert_outcome(attack(tmp_path, [command], timeout=30), 2,
                   r"specs \['d/\*\*/none\.yaml'\] match no file", max_seconds=10)


def test_spec_globs_list_a_bounded_number_of_folders(tmp_path):
    """A glob of '*' parts follows links (as glob does) but lists at most 10000 folders
    in all: past that, a usage error naming the globs."""
    _link_loop(tmp_path / "d")
    pattern = "d/" + "*/" * 20 + "none.yaml"
    write(tmp_path, {"pyproject.toml": f'[tool.gradgen]\nspecs = ["{pattern}"]\n'})
    assert_outcome(attack(tmp_path, ["check"], timeout=30), 2,
                   r"\[tool\.gradgen\] specs \['d/\*/.*'\] search more than 10000 "
                   r"folders \(in pyproject\.toml\); narrow them", max_seconds=10)


def test_a_recursive_spec_glob_finds_specs_in_real_folders(tmp_path):
    _link_loop(tmp_path / "d")
    write(tmp_path, {"d/x/y/s.yaml": SPEC, "d/.hidden/t.yaml": spec(module="t"),
                     "pyproject.toml": '[tool.gradgen]\nspecs = ["d/**/*.yaml"]\n'})
    result = attack(tmp_path, ["build"], timeout=30)
    assert_outcome(result, 0, unchanged=False, max_seconds=20)
    assert sorted(set(result.after) - set(result.before)) == [
        "generated", "generated/_gradgen_runtime.py", "generated/m.py"]


def test_pyproject_too_large_is_refused_before_reading(tmp_path):
    sparse(tmp_path / "pyproject.toml")
    assert_outcome(attack(tmp_path, ["build"]), 2,
                   r"pyproject\.toml is 3221225472 bytes; the limit is 1048576 bytes",
                   max_seconds=10)


@pytest.mark.parametrize("variable", ["GRADGEN_OP_TIMEOUT", "GRADGEN_BUILD_TIMEOUT"])
@pytest.mark.parametrize("value", sampled(["inf", "nan", "-1", "0", "1e999", "ten"], keep=1))
def test_bad_timeouts_are_usage_errors(tmp_path, variable, value):
    write(tmp_path, {"s.yaml": SPEC})
    assert_outcome(attack(tmp_path, ["build", "s.yaml", "-o", "out"], {variable: value}), 2,
                   rf"{variable}='{value}': expected a number of seconds in \(0, 86400\]")


@pytest.mark.parametrize("output, message", sampled([  # one of each kind first
    ("(2*x)**(2**20)", r"constant power is too large to represent"),
    ("x * 10**300 * 10**300", r"a constant here has more than 300 digits"),
    ("x * 1e300 * 1e300", r"constant 1\.0+E\+600 is not finite in float64"),
    ("(2*x)**(2**40)", r"constant power is too large to represent"),
    ("(x/3)**(10**6)", r"constant power is too large to represent"),
    ("x" + " * 10**300" * 12, r"a constant here has more than 300 digits"),
    ("x * 10**200 * 10**200 / 10**100", r"a constant here has more than 300 digits"),
], keep=3))
def test_constants_too_large_are_spec_errors(tmp_path, output, message):
    write(tmp_path, {"s.yaml": spec(output)})
    result = attack(tmp_path, ["build", "s.yaml", "-o", "out"])
    assert_outcome(result, 2, message, max_seconds=20)
    assert len(result.stderr) < 600  # the constant is not printed in full


@pytest.mark.parametrize("output", sampled(["x * sin(10**20)", "x * (10**16 + 1)",
                                            "x * 10**20 + exp(x) * 10**-20",
                                            "x * 2**60 * 2**-60"]))
def test_large_exact_constants_verify(tmp_path, output):
    """Integers beyond 2**53 reach verification as floats, not NumPy object arrays."""
    write(tmp_path, {"s.yaml": spec(output)})
    assert_outcome(attack(tmp_path, ["build", "s.yaml", "-o", "out"]), 0, unchanged=False)


# ------------------------------------------------------------ 3. unbounded resources


def test_huge_spec_is_refused_before_reading(tmp_path):
    sparse(tmp_path / "s.yaml")
    assert_outcome(attack(tmp_path, ["build", "s.yaml", "-o", "out"]), 2,
                   r"spec s\.yaml is 3221225472 bytes; the limit is 1048576 bytes",
                   max_seconds=10)


@pytest.mark.parametrize("kind", ["dev_zero", "fifo", "dev_null_dir"])
def test_spec_that_is_not_a_regular_file_is_refused(tmp_path, kind):
    if kind == "dev_zero":
        os.symlink("/dev/zero", tmp_path / "s.yaml")
    elif kind == "fifo":
        os.mkfifo(tmp_path / "s.yaml")  # opening it to read would wait for a writer
    else:
        os.symlink("/dev/null", tmp_path / "s.yaml")
    assert_outcome(attack(tmp_path, ["build", "s.yaml", "-o", "out"], timeout=30), 2,
                   r"spec s\.yaml is not a regular file", max_seconds=10)


# build and check read existing outputs through one path (gradgen.outputs, the emit
# plan they share): each kind of file once, the commands in turn
@pytest.mark.parametrize("kind, command",
                         [("dev_zero", "build"), ("fifo", "check"), ("huge", "build")])
def test_existing_output_that_is_not_a_regular_file(tmp_path, kind, command):
    write(tmp_path, {"s.yaml": SPEC})
    (tmp_path / "out").mkdir()
    target = tmp_path / "out" / "m.py"
    if kind == "dev_zero":
        os.symlink("/dev/zero", target)
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        sparse(target)
    message = r"output file out/m\.py (is not a regular file|is 3221225472 bytes; the limit)"
    assert_outcome(attack(tmp_path, [command, "s.yaml", "-o", "out"], timeout=30), 2,
                   message, max_seconds=15)


def test_fifo_among_the_outputs_is_skipped_not_waited_on(tmp_path):
    write(tmp_path, {"s.yaml": SPEC})
    (tmp_path / "out").mkdir()
    os.mkfifo(tmp_path / "out" / "other.py")
    result = attack(tmp_path, ["build", "s.yaml", "-o", "out"], timeout=30)
    assert_outcome(result, 0, unchanged=False, max_seconds=15)
    assert result.after["out/other.py"] == result.before["out/other.py"]


def test_whole_build_budget(tmp_path):
    ops = [{"name": f"f{i}", "inputs": {"x": [3]},
            "output": f"sin(x)**{i + 2} * exp(x) / (1 + x**2)"} for i in range(300)]
    write(tmp_path, {"s.yaml": spec(ops=ops)})
    result = attack(tmp_path, ["build", "s.yaml", "-o", "out"], {"GRADGEN_BUILD_TIMEOUT": "2"})
    assert_outcome(result, 2, r"generating took longer than the build's budget of 2 s "
                              r"\(GRADGEN_BUILD_TIMEOUT\); nothing written", max_seconds=15)


@pytest.mark.parametrize("inputs, output", [
    ({"a": [65536, 1], "b": [65536]}, "a * b"),
    ({"a": [4096, 1], "b": [1, 4096]}, "sum(a @ b)"),
    ({"a": [256, 1, 1], "b": [256, 1], "c": [256]}, "a * b * c"),
])
def test_verification_does_not_materialise_huge_broadcasts(tmp_path, inputs, output):
    write(tmp_path, {"s.yaml": spec(output, inputs)})
    result = attack(tmp_path, ["build", "s.yaml", "-o", "out"])
    assert_outcome(result, 0, r"m\.f was not verified numerically", unchanged=False)


# ------------------------------------------------------------ 4. names and the cache


@pytest.mark.parametrize("name", sampled(["select", "arctan2", "e", "inf", "nan", "numpy",
                                          "amax", "logical_and", "exp2", "arg0", "x_1",
                                          "builtins"]))
def test_input_names_that_numpy_uses_verify(tmp_path, name):
    """Verification evaluates under its own names: no crash, no false "gradgen bug"."""
    write(tmp_path, {"s.yaml": spec(f"{name} * exp({name}) + where({name} > 0.5, {name}**2, "
                                    f"atan2({name}, 2))", {name: [3]})})
    assert_outcome(attack(tmp_path, ["build", "s.yaml", "-o", "out"]), 0, unchanged=False)


@pytest.mark.parametrize("module", sampled(["numpy", "conftest", "NumPy", "tensorflow",
                                            "sitecustomize", "usercustomize", "os",
                                            "typing", "keras", "gradgen", "pytest"], keep=3))
def test_module_names_that_shadow_modules_are_refused(tmp_path, module):
    write(tmp_path, {"s.yaml": spec(module=module)})
    assert_outcome(attack(tmp_path, ["build", "s.yaml", "-o", "out"]), 2,
                   rf"module name '{module}' is not allowed: the name of a module it would "
                   "shadow")


def _cache_files(folder: Path) -> list[Path]:
    return sorted(p for p in (folder / "cache").rglob("*.json"))


CORRUPTIONS = {
    "empty_list": lambda p: p.write_text("[]"),
    "views_empty": lambda p: p.write_text('{"views": {}}'),
    "wrong_checksum": lambda p: p.write_text(json.dumps({"value": {"views": {}},
                                                         "sha256": "0" * 64})),
    "deeply_nested": lambda p: p.write_text("[" * 200000 + "]" * 200000),
    "truncated": lambda p: p.write_bytes(p.read_bytes()[:40]),
    "binary": lambda p: p.write_bytes(bytes(range(256))),
    "folder": lambda p: (p.unlink(), p.mkdir()),
    "fifo": lambda p: (p.unlink(), os.mkfifo(p)),
    "dev_zero": lambda p: (p.unlink(), os.symlink("/dev/zero", p)),
}


@pytest.mark.parametrize("name", sampled(sorted(CORRUPTIONS), keep=3))
def test_corrupt_cache_entries_are_misses(tmp_path, name):
    write(tmp_path, {"s.yaml": SPEC})
    cached = {"GRADGEN_CACHE": "1"}
    assert attack(tmp_path, ["build", "s.yaml", "-o", "first"], cached).code == 0
    entries = _cache_files(tmp_path)
    assert entries
    for path in entries:
        CORRUPTIONS[name](path)
    result = attack(tmp_path, ["build", "s.yaml", "-o", "second"], cached, timeout=30)
    assert_outcome(result, 0, unchanged=False, max_seconds=20)
    assert result.after["second/m.py"] == result.after["first/m.py"]


def test_tampered_formatted_module_in_the_cache_is_a_miss(tmp_path):
    """An attacker who knows the checksum scheme rewrites the cached black output: the
    entry no longer formats the same code, so it is not used."""
    from gradgen import cache

    write(tmp_path, {"s.yaml": SPEC})
    cached = {"GRADGEN_CACHE": "1"}
    assert attack(tmp_path, ["build", "s.yaml", "-o", "first"], cached).code == 0
    tampered = 0
    for path in _cache_files(tmp_path):
        entry = json.loads(path.read_text())
        if isinstance(entry["value"], str):
            key = path.stem
            value = entry["value"] + f"\n{PWN}\n"
            path.write_text(json.dumps({"value": value,
                                        "sha256": cache._checksum(key, value)}))
            tampered += 1
    assert tampered == 2  # the module's and the runtime's
    result = attack(tmp_path, ["build", "s.yaml", "-o", "second"], cached)
    assert_outcome(result, 0, unchanged=False)
    for name in ("m.py", "_gradgen_runtime.py"):
        assert result.after[f"second/{name}"] == result.after[f"first/{name}"]
        assert SENTINEL.encode() not in result.after[f"second/{name}"]


# ------------------------------------------------------------ 6. interrupted builds


DEAD = 2**22 + 12345  # above the default pid_max: never a running process


def test_stale_temporaries_are_reported_by_check_and_removed_by_build(tmp_path):
    write(tmp_path, {"s.yaml": SPEC})
    assert attack(tmp_path, ["build", "s.yaml", "-o", "out"]).code == 0
    module = (tmp_path / "out" / "m.py").read_text()
    stale = f".m.py.{DEAD}.abcd1234.tmp"
    live = f".m.py.{os.getpid()}.efgh5678.tmp"  # this test process is running
    write(tmp_path, {f"out/{stale}": module[:200], f"out/{live}": module,
                     "out/.m.py.notes": "not gradgen's"})
    result = attack(tmp_path, ["check", "s.yaml", "-o", "out"])
    assert_outcome(result, 1, rf"out/{stale}: temporary, left by a build that was killed")
    assert live not in result.stderr
    result = attack(tmp_path, ["build", "s.yaml", "-o", "out"])
    assert_outcome(result, 0, unchanged=False)
    assert "1 stale temporary file removed" in result.stdout
    assert set(result.before) - set(result.after) == {f"out/{stale}"}
    # another build's file, still being written: neither reported nor removed
    assert_outcome(attack(tmp_path, ["check", "s.yaml", "-o", "out"]), 0)
    assert (tmp_path / "out" / live).exists()


def test_files_that_only_look_like_temporaries_are_left_alone(tmp_path):
    """A file is gradgen's temporary only if its name is .<file gradgen writes>.<pid>.
    <8 random characters>.tmp and it starts with the generated header: anything else,
    however named, is neither reported by check nor removed by build (gradgen deletes
    no file without its header)."""
    write(tmp_path, {"s.yaml": SPEC})
    assert attack(tmp_path, ["build", "s.yaml", "-o", "out"]).code == 0
    header = (tmp_path / "out" / "m.py").read_text().splitlines()[0] + "\n"
    write(tmp_path, {
        f"out/.notes.txt.{DEAD}.bak.tmp": "notes\n",  # not a file gradgen writes
        f"out/.m.py.{DEAD}.abcd1234.tmp": "my notes\n",  # no header
        f"out/.m.py.{DEAD}.ab.tmp": header,  # not a temporary name of gradgen's
        f"out/.m.py.{DEAD}.abcd12345.tmp": header,
        f"out/.notes.{DEAD}.abcd1234.tmp": header,
        f"out/.m.py.0{DEAD}.abcd1234.tmp": header,
        f"out/..py.{DEAD}.abcd1234.tmp": header,
        "elsewhere.py": header,
    })
    os.symlink("../elsewhere.py", tmp_path / "out" / f".m.py.{DEAD}.abcd5678.tmp")  # a link
    assert_outcome(attack(tmp_path, ["check", "s.yaml", "-o", "out"]), 0)
    result = attack(tmp_path, ["build", "s.yaml", "-o", "out"])
    assert_outcome(result, 0)
    assert result.stdout == "0 written, 2 unchanged\n"


def test_init_never_writes_through_a_link(tmp_path):
    os.symlink(tmp_path / "elsewhere.yaml", tmp_path / "spec.yaml")  # dangling
    assert_outcome(attack(tmp_path, ["init", "spec.yaml"]), 2, r"spec\.yaml exists")
    assert not (tmp_path / "elsewhere.yaml").exists()


def test_tree_reads_no_fifo(tmp_path):
    """The harness itself never blocks on what an attack leaves."""
    os.mkfifo(tmp_path / "p")
    assert tree(tmp_path) == {"p": "mode 10000"}


# ------------------------------------- a pyproject.toml names paths outside the project

@pytest.mark.parametrize("setting", [
    'specs = ["/etc/*.conf"]', 'specs = ["../secrets/*"]', 'specs = ["a/../../secrets/*"]',
    'specs = ["s.yaml"]\nout = "/tmp/gradgen-attack-out"', 'specs = ["s.yaml"]\nout = "../o"',
    'specs = ["s.yaml"]\nemit_tests = "../t"',
])
def test_pyproject_paths_outside_the_project_are_refused(tmp_path, setting):
    write(tmp_path, {"s.yaml": SPEC, "pyproject.toml": f"[tool.gradgen]\n{setting}\n"})
    assert_outcome(attack(tmp_path, ["build"]), 2, r"is outside the project: paths in "
                                                  r"pyproject\.toml are relative to its folder")
    assert not Path("/tmp/gradgen-attack-out").exists()


@pytest.mark.parametrize("setting", ['specs = ["link/*.yaml"]',
                                     'specs = ["s.yaml"]\nout = "link/out"'])
def test_pyproject_paths_through_a_link_outside_are_refused(tmp_path, setting):
    project, outside = tmp_path / "project", tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.yaml").write_text("TOKEN=ghp_0123456789\n")
    write(project, {"s.yaml": SPEC, "pyproject.toml": f"[tool.gradgen]\n{setting}\n"})
    os.symlink(outside, project / "link")
    result = attack(project, ["build"])
    assert_outcome(result, 2, r"resolves outside the project \(.*outside.*, through a "
                              r"symbolic link\)")
    assert "ghp_" not in result.stderr and sorted(os.listdir(outside)) == ["secret.yaml"]


def test_a_file_that_is_not_a_spec_is_not_quoted(tmp_path):
    write(tmp_path, {"s.yaml": "AWS_SECRET=abc123xyz\n"})
    result = attack(tmp_path, ["build", "s.yaml", "-o", "out"])
    assert_outcome(result, 2, r"s\.yaml:1:1: error: a spec is a mapping; got a str scalar")
    assert "abc123" not in result.stderr


def test_a_module_named_like_another_modules_tests_is_refused(tmp_path):
    other = SPEC.replace("module: m", "module: test_m_gradients")
    write(tmp_path, {"a.yaml": SPEC, "b.yaml": other})
    for command in ("build", "check"):
        assert_outcome(attack(tmp_path, [command, "a.yaml", "b.yaml", "-o", "out",
                                         "--emit-tests", "out"]), 2,
                       r"the tests of module 'm' and module 'test_m_gradients' \(b\.yaml\) "
                       r"would both be out/test_m_gradients\.py")


@pytest.mark.parametrize("char", sampled(["\u061c", "\U000e0041", "\u00ad", "\u180e",
                                          "\ufff9", "\U0001d173", "\u3164", "\u115f",
                                          "\u034f"]))
def test_invisible_format_characters_in_docs_are_refused(tmp_path, char):
    spec = yaml.safe_load(SPEC)
    spec["doc"] = f"looks{char}harmless"
    write(tmp_path, {"s.yaml": yaml.safe_dump(spec, allow_unicode=True)})
    assert_outcome(attack(tmp_path, ["build", "s.yaml", "-o", "out"]), 2,
                   rf"doc text contains the invisible or control character "
                   rf"U\+{ord(char):04X}")


def test_a_negative_diff_line_cap_is_a_usage_error(tmp_path):
    write(tmp_path, {"s.yaml": SPEC})
    assert_outcome(attack(tmp_path, ["check", "s.yaml", "-o", "out", "--max-diff-lines",
                                     "-1"]), 2, r"-1 is not in the range x>=0")
