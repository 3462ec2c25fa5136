"""Importing generated modules without putting their folder on ``sys.path``.

Receives: the path of a generated module (or of any module in an output folder), or a
generated module's text with its runtime's text. Returns: the imported module.

A generated module imports its runtime with ``from . import _gradgen_runtime`` when it
is part of a package, so each is imported here as a submodule of a package made for
its folder: :func:`load_file` names that package after the folder's real path, so two
output folders never share a runtime, however many one process imports (a test suite
builds into many). The emitted tests (``templates/test_module.py.j2``) carry the same
function, as they need only TensorFlow and the standard library. :func:`load_texts`
does the same in memory for :mod:`gradgen.api`. Importing runs the module: only for
gradgen's own output.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import itertools
import linecache
import os
import re
import sys
import types
from pathlib import Path

from .runtime import MODULE as RUNTIME_MODULE

_IN_MEMORY = itertools.count()


def package_name(folder, copy: str = "") -> str:
    """The package a folder's modules are imported in: ``gradgen_generated_`` and 16 hex
    digits of the sha256 of the folder's real path (as the emitted tests name it), and
    ``_<copy>`` for a separate copy of it."""
    digest = hashlib.sha256(os.fsencode(os.path.realpath(folder))).hexdigest()[:16]
    return f"gradgen_generated_{digest}" + ("_" + re.sub(r"\W", "_", copy) if copy else "")


def load_file(path, copy: str = "") -> types.ModuleType:
    """Import the module at ``path`` as a submodule of its folder's package
    (:func:`package_name`), once per process: a second call returns the same module.

    Args:
        path: a ``.py`` file (a generated module, the runtime, emitted tests).
        copy: a name for a separate copy of the folder's package: its modules, runtime
            included, are imported again, apart from any other copy (a test that
            changes a runtime setting such as ``_FUSE_FROM`` takes a copy of its own).
    """
    path = Path(path)
    package = package_name(path.parent, copy)
    if package not in sys.modules:
        spec = importlib.machinery.ModuleSpec(package, None, is_package=True)
        spec.submodule_search_locations = [os.path.realpath(path.parent)]
        sys.modules[package] = importlib.util.module_from_spec(spec)
    return importlib.import_module(f"{package}.{path.stem}")


def runtime_of(module: types.ModuleType) -> types.ModuleType:
    """The runtime module that ``module`` (imported by :func:`load_file` or
    :func:`load_texts`) imports its helpers from."""
    return importlib.import_module(f"{module.__package__}.{RUNTIME_MODULE}")


def load_texts(module: str, source: str, runtime_source: str) -> types.ModuleType:
    """Import a generated module from its text, and its runtime from ``runtime_source``,
    without a file: both in a package of their own, their text in :mod:`linecache` so
    that ``inspect.getsource`` and tracebacks show it."""
    package = f"gradgen_loaded_{next(_IN_MEMORY)}"
    spec = importlib.machinery.ModuleSpec(package, None, is_package=True)
    spec.submodule_search_locations = []
    sys.modules[package] = importlib.util.module_from_spec(spec)
    runtime = _exec_text(f"{package}.{RUNTIME_MODULE}", runtime_source,
                         f"<gradgen runtime of {package}>")
    sys.modules[runtime.__name__] = runtime  # what the module's relative import finds
    return _exec_text(f"{package}.{module}", source, f"<gradgen module {module}>")


def _exec_text(name: str, source: str, filename: str) -> types.ModuleType:
    # gradgen's own output, run as an import would: no spec text is evaluated
    # (expressions were parsed against the allow-list and printed as TF calls)
    code = compile(source, filename, "exec")
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    loaded = types.ModuleType(name)
    loaded.__file__ = filename
    loaded.__package__ = name.rpartition(".")[0]
    exec(code, loaded.__dict__)
    return loaded
