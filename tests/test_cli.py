"""The command line: build, check, exit codes, golden error output, determinism."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import black
import pytest
from click.testing import CliRunner

from conftest import EXAMPLES, GENERATED, ROOT, run_python, sampled
from gradgen.cli import main
from gradgen.formatter import MODE
from regen_golden import bad_spec_result, bad_specs, golden_path


def invoke(*args, cwd=None):
    runner = CliRunner()
    old = os.getcwd()
    try:
        if cwd:
            os.chdir(cwd)
        return runner.invoke(main, list(args), catch_exceptions=False)
    finally:
        os.chdir(old)


@pytest.fixture
def project(tmp_path):
    """A copy of the examples in a scratch folder."""
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    return tmp_path


def test_build_then_check_then_stale(project):
    result = invoke("build", "examples/seeds.yaml", "-o", "out", cwd=project)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "2 written, 0 unchanged"  # the module, the runtime
    out = project / "out" / "seeds.py"
    first = out.read_bytes()
    assert first == (GENERATED / "seeds.py").read_bytes()  # same relative layout

    result = invoke("build", "examples/seeds.yaml", "-o", "out", cwd=project)
    assert result.stdout.strip() == "0 written, 2 unchanged"
    assert out.read_bytes() == first

    assert invoke("check", "examples/seeds.yaml", "-o", "out", cwd=project).exit_code == 0

    spec = project / "examples" / "seeds.yaml"
    spec.write_text(spec.read_text().replace("output: x * y", "output: x * y * 2"))
    result = invoke("check", "examples/seeds.yaml", "-o", "out", cwd=project)
    assert result.exit_code == 1
    assert "+        out = 2*x*y" in result.stdout  # the docstring formula
    assert "out/seeds.py: changed ops: bar" in result.stderr
    assert result.stderr.rstrip().endswith("run: gradgen build examples/seeds.yaml -o out")
    assert out.read_bytes() == first  # check never writes


def test_comment_and_layout_edits_keep_check_green(project):
    assert invoke("build", "examples/seeds.yaml", "-o", "out", cwd=project).exit_code == 0
    spec = project / "examples" / "seeds.yaml"
    text = spec.read_text()
    edited = ("# reviewed 2026-12\n" + text.replace("output: x * y", "output: 'x * y'  # bar")
              .replace("\n", "\n\n", 3))
    assert edited != text
    spec.write_text(edited)
    result = invoke("check", "examples/seeds.yaml", "-o", "out", cwd=project)
    assert result.exit_code == 0, result.stdout + result.stderr
    spec.write_text(text.replace("output: x * y", "output: y * x"))  # same value, new text
    result = invoke("check", "examples/seeds.yaml", "-o", "out", cwd=project)
    assert result.exit_code == 1 and "# Spec sha256:" in result.stdout


def test_check_reports_missing_output(project):
    result = invoke("check", "examples/seeds.yaml", "-o", "out", cwd=project)
    assert result.exit_code == 1
    assert "out/seeds.py: missing" in result.stderr


def test_spec_error_writes_nothing(project):
    invoke("build", "examples/seeds.yaml", "-o", "out", cwd=project)
    before = (project / "out" / "seeds.py").read_bytes()
    spec = project / "examples" / "seeds.yaml"
    spec.write_text(spec.read_text().replace("output: x * y", "output: x * * y"))
    result = invoke("build", "examples/seeds.yaml", "-o", "out", cwd=project)
    assert result.exit_code == 2
    assert result.stderr.startswith("examples/seeds.yaml:13:")
    assert "Traceback" not in result.stderr
    assert (project / "out" / "seeds.py").read_bytes() == before
    assert sorted(p.name for p in (project / "out").iterdir()) == ["_gradgen_runtime.py",
                                                                   "seeds.py"]


def test_usage_errors_exit_2(project):
    result = invoke("build", "nope.yaml", "-o", "out", cwd=project)
    assert result.exit_code == 2
    assert "nope.yaml:1:1: error: cannot read spec" in result.stderr
    assert invoke("build", cwd=project).exit_code == 2  # no spec given
    assert not (project / "out").exists()


def test_two_specs_for_one_module_are_refused(project):
    shutil.copy(project / "examples" / "seeds.yaml", project / "examples" / "copy.yaml")
    result = invoke(
        "build", "examples/seeds.yaml", "examples/copy.yaml", "-o", "out", cwd=project
    )
    assert result.exit_code == 2
    assert "module 'seeds' is also generated from examples/seeds.yaml" in result.stderr


def test_internal_error_exits_123(project, monkeypatch):
    import gradgen.pipeline

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(gradgen.pipeline, "derive_op", broken)
    runner = CliRunner()
    os.chdir(project)
    result = runner.invoke(main, ["build", "examples/seeds.yaml", "-o", "out"])
    assert result.exit_code == 123
    assert "internal error" in result.stderr and "RuntimeError: boom" in result.stderr
    assert not (project / "out").exists()


def test_generated_code_is_black_formatted():
    text = (GENERATED / "seeds.py").read_text()
    assert black.format_str(text, mode=MODE) == text
    # ...also for black's defaults, which is what `black --check` in a user repo uses
    assert black.format_str(text, mode=black.Mode()) == text


def test_header_names_version_relative_spec_and_hash():
    import hashlib

    from gradgen import __version__

    lines = (GENERATED / "seeds.py").read_text().splitlines()
    assert lines[0] == (
        f"# Code generated by gradgen {__version__} from ../examples/seeds.yaml. "
        "DO NOT EDIT."
    )
    import yaml

    # the content's hash, written out here as the README documents it
    def pairs(value):
        if isinstance(value, dict):
            return [[k, pairs(v)] for k, v in value.items()]
        return [pairs(v) for v in value] if isinstance(value, list) else value

    data = pairs(yaml.safe_load((EXAMPLES / "seeds.yaml").read_text()))
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    digest = hashlib.sha256(text.encode()).hexdigest()
    assert lines[1] == f"# Spec sha256: {digest}"


@pytest.mark.parametrize("seed", sampled(["0", "4242", "1"]))
def test_output_is_identical_under_any_hash_seed(tmp_path, seed):
    env = dict(os.environ, PYTHONHASHSEED=seed)
    out = tmp_path / "generated"
    run_python("-m", "gradgen", "build", str(EXAMPLES / "seeds.yaml"), "-o", str(out),
               check=True, env=env, capture_output=True)
    # the relative spec path differs from the checked-in file; everything else must not
    got = (out / "seeds.py").read_text().splitlines()[1:]
    want = (GENERATED / "seeds.py").read_text().splitlines()[1:]
    assert got == want


def test_cli_does_not_import_tensorflow(tmp_path):
    code = (
        "import sys; from gradgen.cli import main; "
        "sys.argv = ['gradgen', 'check', %r, '-o', %r]\n"
        "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
        "assert 'tensorflow' not in sys.modules, 'tensorflow was imported'\n"
        "sys.exit(code)" % (str(EXAMPLES / "seeds.yaml"), str(GENERATED))
    )
    result = run_python("-c", code, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_subprocesses_import_this_checkout(tmp_path):
    """run_python's child imports gradgen (and its templates) from this checkout, also
    from another working folder, whatever is installed."""
    code = "import gradgen.render as r; print(r.__file__); print(r.templates_dir())"
    result = run_python("-c", code, cwd=tmp_path, capture_output=True, text=True, check=True)
    module, templates = (Path(line).resolve() for line in result.stdout.split("\n")[:2])
    assert module == ROOT / "gradgen" / "render.py"
    assert (templates / "op.py.j2").read_bytes() == (ROOT / "templates" / "op.py.j2").read_bytes()


def test_python_dash_m_and_help():
    result = run_python("-m", "gradgen", "--help", capture_output=True, text=True)
    assert result.returncode == 0 and "build" in result.stdout and "check" in result.stdout


@pytest.mark.parametrize("name", bad_specs())
def test_bad_spec_golden_stderr(name, tmp_path):
    """Each bad spec: exit 2, the golden stderr (file:line:col: error: ...), no output.
    The golden files are only read here; `python tests/regen_golden.py` rewrites them."""
    result = bad_spec_result(name, tmp_path / "out")
    assert result.exit_code == 2
    assert result.stderr == golden_path(name).read_text()
    for line in result.stderr.splitlines()[:-1]:
        assert line.startswith(f"{name}:") and ": error: " in line
    assert not (tmp_path / "out").exists()


def test_explain_a_generic_op_in_each_dtype():
    """An op generated for several dtypes: explained in the default dtype, saying so, or
    in the one --dtype names (each dtype's derivation is its own)."""
    spec = str(EXAMPLES / "potentials.yaml")
    default = invoke("explain", spec, "morse")
    assert default.exit_code == 0
    assert "generated for float32, float64; shown in float32 (see --dtype)" in default.output
    assert "forward (float32):" in default.output
    wide = invoke("explain", spec, "morse", "--dtype", "float64")
    assert wide.exit_code == 0 and "forward (float64):" in wide.output
    refused = invoke("explain", spec, "morse", "--dtype", "float16")
    assert refused.exit_code == 2
    assert "op 'morse' is generated for float32, float64, not float16" in refused.output


def test_check_compares_bytes_not_decoded_text(tmp_path):
    """A generated file whose UTF-8 is corrupted where the text holds U+FFFD (which is
    what decoding the bad byte with errors="replace" gives back) is stale: check and
    build compare bytes."""
    (tmp_path / "u.yaml").write_text(
        "version: 1\nmodule: u\ndoc: 'A replacement character: \ufffd'\nops:\n"
        "  - name: f\n    inputs:\n      x: [3]\n    output: x * 2\n", encoding="utf-8")
    assert invoke("build", "u.yaml", "-o", "out", cwd=tmp_path).exit_code == 0
    module = tmp_path / "out" / "u.py"
    good = module.read_bytes()
    assert good.count("\ufffd".encode()) == 1
    module.write_bytes(good.replace("\ufffd".encode(), b"\xff"))
    result = invoke("check", "u.yaml", "-o", "out", cwd=tmp_path)
    assert result.exit_code == 1, result.stdout + result.stderr
    assert "out/u.py: changed" in result.stderr
    assert "-\"\"\"A replacement character: \\xff\"\"\"\n" in result.stdout  # the byte
    result = invoke("build", "u.yaml", "-o", "out", cwd=tmp_path)
    assert result.stdout.strip() == "1 written, 1 unchanged"
    assert module.read_bytes() == good


def test_tests_emitted_into_the_output_folder_are_its_own(tmp_path):
    """--emit-tests into the output folder itself: the tests are the build's own
    outputs there (check passes, --prune keeps them), while the module and tests of a
    removed spec are still orphans (reported once, pruned together)."""
    for name in ("a", "b"):
        (tmp_path / f"{name}.yaml").write_text(
            f"version: 1\nmodule: {name}\nops:\n  - name: f\n    inputs:\n      x: [3]\n"
            "    output: x * 2\n")
    both = ["a.yaml", "b.yaml", "-o", "gen", "--emit-tests", "gen"]
    assert invoke("build", *both, cwd=tmp_path).exit_code == 0
    result = invoke("check", *both, cwd=tmp_path)
    assert result.exit_code == 0 and result.stdout == "5 up to date\n", result.stderr
    result = invoke("build", *both, "--prune", cwd=tmp_path)
    assert result.stdout == "0 written, 3 unchanged; tests: 0 written\n"
    assert sorted(os.listdir(tmp_path / "gen")) == [
        "_gradgen_runtime.py", "a.py", "b.py", "test_a_gradients.py", "test_b_gradients.py"]

    (tmp_path / "b.yaml").unlink()
    one = ["a.yaml", "-o", "gen", "--emit-tests", "gen"]
    result = invoke("check", *one, cwd=tmp_path)
    assert result.exit_code == 1
    assert result.stderr.count("orphaned") == 2
    assert "gen/b.py: orphaned, its spec was removed; gen/test_b_gradients.py: orphaned, " \
           "its spec was removed); run: gradgen build a.yaml -o gen --emit-tests gen " \
           "--prune" in result.stderr
    result = invoke("build", *one, "--prune", cwd=tmp_path)
    assert result.stdout == "0 written, 2 unchanged, 2 pruned; tests: 0 written\n"
    assert sorted(os.listdir(tmp_path / "gen")) == ["_gradgen_runtime.py", "a.py",
                                                    "test_a_gradients.py"]
    assert invoke("check", *one, cwd=tmp_path).exit_code == 0
