"""The mutants an outside mutation run found surviving, each applied to a copy of the
checkout: the tests named beside it must fail (they passed on every one of these
before). Slow (a fresh pytest per mutant): `python3 -m pytest -m slow
tests/test_named_mutants.py`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

# (what the mutant does, file, original text, mutated text, the tests that must fail)
MUTANTS = [
    ("atanh printed as asinh", "gradgen/functions/declarations.py",
     '("atanh", "arctanh", {"domain": Interval.open(-1, 1)})',
     '("atanh", "arctanh", {"domain": Interval.open(-1, 1), "tf": "tf.math.asinh"})',
     ["tests/test_reference_functions.py", "-k", "atanh"]),
    ("the emitted autodiff test compares the op with itself", "templates/test_module.py.j2",
     "_, expected = _vjp(REFERENCES[name], wide,",
     "_, expected = _vjp(getattr(ops, name), inputs,",
     ["tests/test_generated_behaviour.py", "-k", "emitted"]),
    ("the input check accepts a larger size", "templates/runtime/check_input.py.j2",
     "got is not None and got != dim", "got is not None and got > dim",
     ["tests/test_generated_behaviour.py", "-k", "static_shapes"]),
    ("the cache key ignores gradgen's code", "gradgen/cache.py",
     'return sorted(package.rglob("*.py")) + templates', "return templates",
     ["tests/test_cache.py"]),
    ("the cache key ignores the templates", "gradgen/cache.py",
     'return sorted(package.rglob("*.py")) + templates',
     'return sorted(package.rglob("*.py"))',
     ["tests/test_cache.py"]),
    ("complex det's VJP without the conjugate", "gradgen/printer/calls.py",
     'return f"tf.math.conj(_cofactor({args[0]}))"', 'return f"_cofactor({args[0]})"',
     ["tests/test_complex_examples.py", "-k", "differences"]),
]


def _copy(tmp_path):
    copy = tmp_path / "checkout"
    for part in ("gradgen", "templates", "tests", "examples", "generated"):
        shutil.copytree(ROOT / part, copy / part,
                        ignore=shutil.ignore_patterns("__pycache__", ".hypothesis"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    return copy


def _pytest(copy, tests):
    env = dict(os.environ, PYTHONPATH=str(copy))  # the copy's gradgen, not this one
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                           *tests], cwd=copy, env=env, capture_output=True, text=True,
                          timeout=900)


@pytest.mark.slow
def test_the_unmutated_copy_passes(tmp_path):
    """The control: the same tests pass on a copy without a mutant."""
    run = _pytest(_copy(tmp_path), ["tests/test_cache.py", "tests/test_generated_behaviour.py",
                                    "-k", "cache or static_shapes or emitted"])
    assert run.returncode == 0, run.stdout[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("what, path, original, mutated, tests", MUTANTS,
                         ids=[m[0] for m in MUTANTS])
def test_named_mutant_is_killed(tmp_path, what, path, original, mutated, tests):
    copy = _copy(tmp_path)
    target = copy / path
    text = target.read_text()
    assert text.count(original) == 1, f"{what}: the original text moved; update MUTANTS"
    target.write_text(text.replace(original, mutated))
    run = _pytest(copy, tests)
    assert run.returncode == 1, f"{what} survived:\n{run.stdout[-2000:]}"
