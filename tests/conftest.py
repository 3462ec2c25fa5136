"""Shared fixtures: TensorFlow imported once, generated modules built and imported once.

TensorFlow is imported lazily by the `tf` fixture, so the pure tests (shapes, spec,
printer, CLI) run without it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
from pathlib import Path

try:
    import fcntl
except ImportError:  # not on Windows: each worker builds for itself
    fcntl = None

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
GENERATED = ROOT / "generated"
# In this process too, the checkout's gradgen (not an installed copy) is the one tested.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Tests exercise the uncached path (tests of the cache turn it on in a private folder).
os.environ["GRADGEN_CACHE"] = "0"


def sampled(values, keep: int = 2) -> list:
    """Parametrize values of which the first ``keep`` run by default and the rest are
    marked slow (`python3 -m pytest -m slow` runs them): the default run keeps one or
    two cases of each kind of a long, subprocess-heavy table."""
    return [v if i < keep else pytest.param(*(v if isinstance(v, tuple) else (v,)),
                                            marks=pytest.mark.slow)
            for i, v in enumerate(values)]


def checkout_env(env=None) -> dict:
    """``env`` (default: this process's environment) with the repository root first on
    PYTHONPATH, so that a child Python imports this checkout's gradgen (and its
    templates), not an installed copy."""
    env = dict(os.environ if env is None else env)
    rest = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + rest if rest else "")
    return env


def run_python(*args, env=None, **kwargs) -> subprocess.CompletedProcess:
    """``python *args`` in a fresh process (this interpreter) that imports the checkout's
    gradgen: every subprocess test goes through here. ``env`` and ``kwargs`` as for
    subprocess.run."""
    return subprocess.run([sys.executable, *args], env=checkout_env(env), **kwargs)


@pytest.fixture(scope="session")
def tf():
    """TensorFlow, imported once per test session."""
    import tensorflow

    return tensorflow


def import_source(name: str, path: Path):
    """Import a generated module (or emitted tests) from a file: a submodule of a
    package made for its folder, so that it imports that folder's runtime
    (:func:`gradgen.loading.load_file`); ``name`` is the copy: each name imports the
    folder's modules, runtime included, anew."""
    from gradgen.loading import load_file

    return load_file(path, copy=name)


def invoke_in(cwd, *args):
    """``gradgen *args`` run in ``cwd`` in this process (click's test runner)."""
    from click.testing import CliRunner

    from gradgen.cli import main

    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, list(args), catch_exceptions=False)
    finally:
        os.chdir(old)


def write_files(files: dict, folder: Path) -> None:
    """Write a build's ``{name: text}`` (modules and the runtime) into ``folder``."""
    for rel, text in files.items():
        (folder / rel).write_text(text)


def _shared_folder(tmp_path_factory) -> Path:
    """A folder this run's pytest-xdist workers share (their base temporary folders'
    parent is the run's own), or this process's own without workers or without a lock
    to share it under (no fcntl)."""
    base = tmp_path_factory.getbasetemp()
    shared = os.environ.get("PYTEST_XDIST_WORKER") and fcntl is not None
    return (base.parent if shared else base) / "built"


@contextlib.contextmanager
def _locked(path: Path):
    """Hold an exclusive lock on ``path`` (created), where the platform has fcntl."""
    if fcntl is None:
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="session")
def build(tmp_path_factory, tf):
    """build(spec_text, audit=True) -> imported generated module (cached by spec text).

    Suites that measure accuracy against their own 50-digit reference pass
    ``audit=False``: the build-time audit (tested in test_audit.py) would measure the
    same ops again, at a cost of up to a second per float64 op. A spec is built once
    per run: the first worker to need it builds it into a folder the workers share,
    under a lock, and the others import what it wrote.
    """
    from gradgen.emit import generate

    cache: dict = {}
    shared = _shared_folder(tmp_path_factory)
    shared.mkdir(exist_ok=True)

    def _build(spec_text: str, audit: bool = True):
        key = (spec_text, audit)
        if key not in cache:
            digest = hashlib.sha256(repr(key).encode()).hexdigest()[:16]
            folder = shared / digest
            with _locked(shared / f"{digest}.lock"):
                if not (folder / "BUILT").exists():
                    folder.mkdir(exist_ok=True)
                    spec = folder / "spec.yaml"
                    spec.write_text(spec_text)
                    files = generate([str(spec)], str(folder), audit=audit)
                    write_files(files, folder)
                    (rel,) = (name for name in files if name != "_gradgen_runtime.py")
                    (folder / "BUILT").write_text(rel)
            rel = (folder / "BUILT").read_text()
            cache[key] = import_source(f"gradgen_test_{digest}", folder / rel)
        return cache[key]

    return _build


@pytest.fixture(scope="session")
def seeds(tf):
    """The checked-in generated/seeds.py."""
    return import_source("generated_seeds", GENERATED / "seeds.py")
