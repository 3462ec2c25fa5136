"""Shared fixtures: TensorFlow imported once, generated modules built and imported once.

TensorFlow is imported lazily by the `tf` fixture, so the pure tests (shapes, spec,
printer, CLI) run without it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
GENERATED = ROOT / "generated"

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Tests exercise the uncached path (tests of the cache turn it on in a private folder).
os.environ["GRADGEN_CACHE"] = "0"


@pytest.fixture(scope="session")
def tf():
    """TensorFlow, imported once per test session."""
    import tensorflow

    return tensorflow


def import_source(name: str, path: Path):
    """Import a generated module from a file, under a unique module name."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def build(tmp_path_factory, tf):
    """build(spec_text, audit=True) -> imported generated module (cached by spec text).

    Suites that measure accuracy against their own 50-digit reference pass
    ``audit=False``: the build-time audit (tested in test_audit.py) would measure the
    same ops again, at a cost of up to a second per float64 op.
    """
    from gradgen.emit import generate

    cache: dict = {}

    def _build(spec_text: str, audit: bool = True):
        key = (spec_text, audit)
        if key not in cache:
            folder = tmp_path_factory.mktemp("gen")
            spec = folder / "spec.yaml"
            spec.write_text(spec_text)
            files = generate([str(spec)], str(folder), audit=audit)
            ((rel, text),) = files.items()
            (folder / rel).write_text(text)
            cache[key] = import_source(f"gradgen_test_{len(cache)}", folder / rel)
        return cache[key]

    return _build


@pytest.fixture(scope="session")
def seeds(tf):
    """The checked-in generated/seeds.py."""
    return import_source("generated_seeds", GENERATED / "seeds.py")
