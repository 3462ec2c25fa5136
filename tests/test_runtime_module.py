"""The runtime module: each output folder's `_gradgen_runtime.py` holds the helpers its
generated modules import (and those they call), each once; the modules import it as
part of a package or as top-level modules; a partial build, check, prune, dry runs and
the loaders all treat it as the folder's shared file."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from gradgen import runtime
from gradgen.outputs import apply_all, plan_build, read_header

from conftest import EXAMPLES, GENERATED, invoke_in as invoke, run_python

RUNTIME = runtime.FILE

# needs _reduce_logsumexp and _softmax (and the helpers they call); `prod` needs only the
# input check
LSE = """version: 1
module: lse
ops:
  - name: lse
    inputs: {x: [3, 4]}
    output: logsumexp(x, axis=1)
"""
PROD = """version: 1
module: prod
ops:
  - name: prod
    inputs: {x: [3, 1], y: [4]}
    output: x * y
"""
LSE_HELPERS = {"_reduce_logsumexp", "_lse_parts", "_softmax", "_softmax_grad"}
CHECKS = {"_check_input", "_check_representable", "_dtype_of"}


def helpers_in(path: Path) -> list[str]:
    """The helpers a runtime module holds, in its order (the comment above each)."""
    return re.findall(r"^# (_\w+): ", path.read_text(), re.M)


def defined(path: Path) -> set[str]:
    return set(re.findall(r"^def (_\w+)\(", path.read_text(), re.M))


@pytest.fixture
def folder(tmp_path):
    """Specs lse.yaml and prod.yaml in ``tmp_path``, to build into ``tmp_path/out``."""
    (tmp_path / "lse.yaml").write_text(LSE)
    (tmp_path / "prod.yaml").write_text(PROD)
    return tmp_path


def build(folder, *args):
    result = invoke(folder, "build", *args)
    assert result.exit_code == 0, result.stderr
    return result


def test_runtime_holds_exactly_the_helpers_the_folder_uses(folder):
    build(folder, "prod.yaml", "-o", "out")
    out = folder / "out"
    assert helpers_in(out / RUNTIME) == ["_check_input", "_check_representable", "_dtype_of",
                                         "_with_jvp", "_jvp_of"]
    assert "def " not in (out / "prod.py").read_text().split("\ndef prod(")[0]  # no helper
    build(folder, "prod.yaml", "lse.yaml", "-o", "out")
    wanted = CHECKS | LSE_HELPERS | {"_with_jvp", "_jvp_of"}  # (prod's forward mode)
    assert helpers_in(out / RUNTIME) == [h.name for h in runtime.HELPERS
                                         if h.name in wanted]  # its order
    used = {name for module in ("lse.py", "prod.py")
            for name in runtime.imported_names((out / module).read_text())}
    # what the ops call themselves (lse's gradient calls _softmax)
    assert used == {"_check_input", "_reduce_logsumexp", "_softmax", "_with_jvp"}
    assert set(helpers_in(out / RUNTIME)) == runtime.with_dependencies(used)
    assert defined(out / RUNTIME) == runtime.with_dependencies(used)
    assert read_header(out / RUNTIME)[1] is None  # its header names no spec


def test_every_module_reaches_its_first_op_within_40_lines():
    modules = sorted(p for p in GENERATED.glob("*.py") if p.name != RUNTIME)
    assert len(modules) >= 10
    for path in modules:
        lines = path.read_text().splitlines()
        first = next(i for i, line in enumerate(lines, 1) if re.match(r"def [a-z]", line))
        assert first <= 40, f"{path.name}: first op on line {first}"
        assert "__all__ = [" in "\n".join(lines[-60:])  # at the end, after the ops


def first_op_line(text: str) -> int:
    lines = text.splitlines()
    return next(i for i, line in enumerate(lines, 1) if re.match(r"def [a-z]", line))


def test_a_module_using_every_helper_reaches_its_first_op_within_45_lines():
    # each helper costs one line (`_name = _runtime._name`), so even a module calling
    # every declared helper (29), with math imported and a one-line docstring, stays in 45
    from dataclasses import replace

    from gradgen.formatter import format_source
    from gradgen.pipeline import derive_op
    from gradgen.render import ModuleMeta, render_module
    from gradgen.spec import parse_spec
    from gradgen.views import op_views

    doc = parse_spec(PROD.encode(), "prod.yaml")
    views = replace(op_views(derive_op(doc, 0)), uses_math=True,
                    helpers=tuple(h.name for h in runtime.HELPERS))
    meta = ModuleMeta("prod", "A module docstring as long as one line can be: " +
                      "word " * 6, "prod.yaml", "0" * 64, "1.0")
    text = format_source(render_module(meta, [views]))
    assert all(f"\n{h.name} = _runtime.{h.name}\n" in text for h in runtime.HELPERS)
    assert '"""\n\nimport math\n' in text and len(text.splitlines()[2]) > 70
    assert len(runtime.HELPERS) == 29
    assert first_op_line(text) <= 45, text[:3000]


def test_two_specs_in_one_folder_share_one_runtime(folder):
    result = build(folder, "lse.yaml", "prod.yaml", "-o", "out", "-v")
    assert f"wrote out/{RUNTIME}" in result.stdout
    assert result.stdout.splitlines()[-1] == "3 written, 0 unchanged"
    assert sorted(p.name for p in (folder / "out").glob("*.py")) == [RUNTIME, "lse.py",
                                                                     "prod.py"]
    for module in ("lse.py", "prod.py"):
        text = (folder / "out" / module).read_text()
        assert "    from . import _gradgen_runtime as _runtime\n" in text
        assert "    import _gradgen_runtime as _runtime\n" in text
        assert "\n_check_input = _runtime._check_input\n" in text


def test_building_one_spec_keeps_the_other_modules_of_the_folder_working(folder, tf):
    build(folder, "lse.yaml", "-o", "out")
    build(folder, "prod.yaml", "-o", "out")  # only prod: lse.py stays, and its helpers
    out = folder / "out"
    assert LSE_HELPERS <= set(helpers_in(out / RUNTIME))
    assert invoke(folder, "check", "lse.yaml", "prod.yaml", "-o", "out").exit_code == 0
    code = (
        "import sys, numpy as np, tensorflow as tf\n"
        f"sys.path.insert(0, {str(out)!r})\n"
        "import lse, prod\n"
        "x = tf.constant(np.arange(12.0).reshape(3, 4), tf.float32)\n"
        "with tf.GradientTape() as tape:\n"
        "    tape.watch(x)\n"
        "    y = lse.lse(x)\n"
        "g = tape.gradient(y, x).numpy()\n"
        "assert np.allclose(y.numpy(), np.log(np.exp(x.numpy()).sum(1)), rtol=1e-6)\n"
        "assert np.allclose(g.sum(1), 1.0, rtol=1e-6)\n"
        "print(prod.prod(tf.ones([3, 1]), tf.ones([4])).shape)\n"
    )
    result = run_python("-c", code, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().endswith("(3, 4)")


def test_check_reports_a_missing_or_stale_runtime(folder):
    build(folder, "lse.yaml", "-o", "out")
    runtime_path = folder / "out" / RUNTIME
    text = runtime_path.read_text()
    runtime_path.unlink()
    result = invoke(folder, "check", "lse.yaml", "-o", "out")
    assert result.exit_code == 1
    assert f"out/{RUNTIME}: missing" in result.stderr
    assert "+def _reduce_logsumexp(" in result.stdout
    runtime_path.write_text(text.replace("return m_safe, tf.math.log1p(rest), finite, m",
                                         "return m_safe, tf.math.log(rest), finite, m"))
    result = invoke(folder, "check", "lse.yaml", "-o", "out")
    assert result.exit_code == 1
    assert f"out/{RUNTIME}: changed helpers: _lse_parts" in result.stderr
    assert "+    return m_safe, tf.math.log1p(rest), finite, m" in result.stdout
    # a runtime without a helper a module imports (another build's) is stale too
    runtime_path.write_text(text.split("# _reduce_logsumexp: ")[0])
    result = invoke(folder, "check", "lse.yaml", "-o", "out")
    assert result.exit_code == 1
    assert "changed helpers: _reduce_logsumexp" in result.stderr
    build(folder, "lse.yaml", "-o", "out")
    assert runtime_path.read_text() == text


def test_dry_run_shows_the_runtime(folder):
    result = build(folder, "lse.yaml", "-o", "out", "--dry-run", "-v")
    assert f"write out/{RUNTIME}" in result.stdout
    assert result.stdout.splitlines()[-1] == "dry run: 2 to write, 0 unchanged"
    assert not (folder / "out").exists()


def test_prune_keeps_the_runtime_while_a_module_needs_it(folder):
    build(folder, "lse.yaml", "prod.yaml", "-o", "out")
    (folder / "lse.yaml").unlink()
    out = folder / "out"
    # without --prune the orphan stays, and so do its helpers
    result = build(folder, "prod.yaml", "-o", "out")
    assert result.stdout == "0 written, 2 unchanged, 1 orphaned (--prune deletes)\n"
    assert LSE_HELPERS <= set(helpers_in(out / RUNTIME))
    result = build(folder, "prod.yaml", "-o", "out", "--prune", "-v")
    assert "pruned out/lse.py" in result.stdout and f"wrote out/{RUNTIME}" in result.stdout
    assert sorted(p.name for p in out.iterdir()) == [RUNTIME, "prod.py"]
    assert helpers_in(out / RUNTIME) == ["_check_input", "_check_representable", "_dtype_of",
                                         "_with_jvp", "_jvp_of"]
    assert invoke(folder, "check", "prod.yaml", "-o", "out").exit_code == 0


def test_prune_deletes_a_runtime_no_module_imports_from(folder):
    """A runtime is an orphan once no generated module of its folder imports from it:
    here the only module's spec is gone (a build writes at least one module into its
    folder, and every module imports ``_check_input``, so this is the folder's plan
    with nothing built into it)."""
    from gradgen.emit import runtime_files

    build(folder, "lse.yaml", "-o", "out")
    (folder / "lse.yaml").unlink()
    (folder / "out" / "notes.py").write_text("x = 1\n")  # not gradgen's: never touched
    out = str(folder / "out")
    assert runtime_files([], out, [], prune=False)  # lse.py stays: it needs the runtime
    assert runtime_files([], out, [], prune=True) == {}
    outputs = plan_build(out, {}, [], prune=True)
    states = {s.path: (s.state, s.ops) for s in outputs[0].statuses}
    assert states == {"lse.py": ("orphaned", ("its spec was removed",)),
                      RUNTIME: ("orphaned",
                                ("no generated module in this folder imports from it",))}
    apply_all(outputs)
    assert sorted(p.name for p in (folder / "out").iterdir()) == ["notes.py"]


def test_a_runtime_without_the_header_is_never_replaced(folder):
    (folder / "out").mkdir()
    (folder / "out" / RUNTIME).write_text("# mine\n")
    result = invoke(folder, "build", "lse.yaml", "-o", "out")
    assert result.exit_code == 2
    assert f"out/{RUNTIME} exists and was not generated by gradgen" in result.stderr
    assert (folder / "out" / RUNTIME).read_text() == "# mine\n"
    assert not (folder / "out" / "lse.py").exists()  # nothing written


def test_a_module_importing_an_unknown_helper_stops_the_build(folder):
    build(folder, "lse.yaml", "prod.yaml", "-o", "out")
    module = folder / "out" / "lse.py"
    module.write_text(module.read_text().replace("\n_check_input =",
                                                 "\n_gone = _runtime._gone\n_check_input =", 1))
    before = {p.name: p.read_bytes() for p in (folder / "out").iterdir()}
    for command in ("build", "check"):
        result = invoke(folder, command, "prod.yaml", "-o", "out")
        assert result.exit_code == 2, result.stdout
        assert "lse.py imports _gone from _gradgen_runtime, which gradgen" in result.stderr
        assert "Traceback" not in result.stderr
    assert {p.name: p.read_bytes() for p in (folder / "out").iterdir()} == before


def test_imported_names_reads_the_import_without_running_the_module():
    text = (
        "raise SystemExit('never run')\n"
        "if __package__:\n    from ._gradgen_runtime import (_a, _b)\n"
        "else:\n    from _gradgen_runtime import _a, _b\n"
        "from other import _c\nfrom .x._gradgen_runtime import _d\n"
    )
    assert runtime.imported_names(text) == {"_a", "_b"}
    # as gradgen writes it: the module once, then a name per line
    bound = (
        "if __package__:\n    from . import _gradgen_runtime as _runtime\n"
        "else:\n    import _gradgen_runtime as _runtime\n"
        "_a = _runtime._a\n_b = _runtime._b\n"
        "_c = other._c\n_d = _runtime._e\n_f, _g = _runtime._f, _runtime._g\n"
        "from . import other as _rt\n_h = _rt._h\n"
    )
    assert runtime.imported_names(bound) == {"_a", "_b"}
    assert runtime.imported_names(
        "import _gradgen_runtime\n_a = _gradgen_runtime._a\n") == {"_a"}
    assert runtime.imported_names("def (") == set()
    # only what precedes the first definition is read, strings understood as strings
    doc = '"""A doc.\ndef f\n"""\nfrom _gradgen_runtime import _a\ndef g():\n    pass\n'
    assert runtime.imported_names(doc) == {"_a"}
    late = "def g():\n    pass\nfrom _gradgen_runtime import _a\n"
    assert runtime.imported_names(late) == set()
    huge = "from _gradgen_runtime import _a\n" + "x = 1\n" * (runtime.MAX_PREAMBLE // 6)
    assert runtime.imported_names(huge) == set()  # bounded: not a module gradgen wrote


def test_a_generated_module_imports_as_a_package_submodule_and_as_a_top_level_module(
        folder, tf):
    build(folder, "lse.yaml", "prod.yaml", "-o", "out")
    (folder / "pkg").mkdir()
    for name in ("lse.py", "prod.py", RUNTIME):
        (folder / "pkg" / name).write_bytes((folder / "out" / name).read_bytes())
    (folder / "pkg" / "__init__.py").write_text("")
    code = (
        "import sys, tensorflow as tf\n"
        "from out.prod import prod as namespaced\n"  # out/ has no __init__.py
        "from pkg.lse import lse as packaged\n"
        f"sys.path.insert(0, {str(folder / 'out')!r})\n"
        "import prod\n"  # top level: its folder on sys.path
        "assert sys.modules['out.prod']._check_input is sys.modules['out._gradgen_runtime']"
        "._check_input\n"
        "assert prod._check_input is sys.modules['_gradgen_runtime']._check_input\n"
        "x, y = tf.ones([3, 1]), tf.ones([4])\n"
        "print(namespaced(x, y).shape, prod.prod(x, y).shape, packaged(tf.ones([3, 4])).shape)"
    )
    result = run_python("-c", code, capture_output=True, text=True, cwd=folder)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split("\n")[-2] == "(3, 4) (3, 4) (3,)"


def test_modules_loaded_by_path_import_their_own_folder_s_runtime(folder, tf):
    """Two folders with different runtimes, loaded by path in one process (as the test
    suite and the emitted tests do): each module uses its own folder's runtime."""
    from gradgen.loading import load_file, package_name, runtime_of

    build(folder, "lse.yaml", "-o", "a")
    build(folder, "prod.yaml", "-o", "b")
    lse, prod = load_file(folder / "a" / "lse.py"), load_file(folder / "b" / "prod.py")
    assert Path(runtime_of(lse).__file__).parent == (folder / "a").resolve()
    assert Path(runtime_of(prod).__file__).parent == (folder / "b").resolve()
    assert hasattr(runtime_of(lse), "_softmax") and not hasattr(runtime_of(prod), "_softmax")
    assert lse.__package__ == package_name(folder / "a")
    assert load_file(folder / "a" / "lse.py") is lse  # once per process
    assert load_file(folder / "a" / "lse.py", copy="other") is not lse
    assert lse.lse(tf.zeros([3, 4])).shape == (3,)


def test_emitted_tests_load_the_module_as_gradgen_does(folder, tf):
    """The emitted tests' loader names a folder's package as gradgen.loading does."""
    from gradgen.loading import load_file, package_name, runtime_of

    build(folder, "lse.yaml", "-o", "out", "--emit-tests", "tests")
    tests = load_file(folder / "tests" / "test_lse_gradients.py")
    assert tests.ops.__package__ == package_name(folder / "out")
    assert tests._reduce_logsumexp is runtime_of(tests.ops)._reduce_logsumexp


@pytest.mark.parametrize("seed", ["0", "4242"])
def test_runtime_is_identical_under_any_hash_seed(tmp_path, seed):
    specs = [str(EXAMPLES / name) for name in ("reductions.yaml", "matrix.yaml")]
    out = tmp_path / "out"
    run_python("-m", "gradgen", "build", *specs, "-o", str(out), "--no-verify", check=True,
               env=dict(os.environ, PYTHONHASHSEED=seed), capture_output=True)
    text = (out / RUNTIME).read_text()
    checked_in = (GENERATED / RUNTIME).read_text()
    names = helpers_in(out / RUNTIME)
    assert names == [h.name for h in runtime.HELPERS if h.name in names]  # fixed order
    for name in names:  # each helper as in the checked-in runtime, byte for byte
        block = re.search(rf"^# {name}: .*?(?=^# _\w+: |\Z)", text, re.M | re.S).group(0)
        assert block.rstrip() in checked_in, name
    assert text.splitlines()[0] == checked_in.splitlines()[0]
