"""Render every runtime helper (gradgen/runtime.py, templates/runtime/) into one
runtime module.

A build writes into an output folder's runtime module only the helpers its generated
modules use; :func:`render_helpers_module` writes one with all of them, as gradgen
renders it, so they can be imported and tested directly (tests/test_helpers.py) or
reused by another harness.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # this checkout's gradgen, not an installed copy
    sys.path.insert(0, str(ROOT))

from gradgen.runtime import HELPERS as DECLARED  # noqa: E402

# Every runtime helper, in the registry's order.
HELPERS = tuple(h.name for h in DECLARED)


def render_helpers_source(helpers=HELPERS) -> str:
    """The runtime module (``_gradgen_runtime.py``, as a build writes it) holding
    ``helpers`` (default: all) and those they call."""
    from gradgen.emit import runtime_text

    return runtime_text(helpers)


def render_helpers_module(path) -> Path:
    """Write the runtime module with every helper to ``path`` (a .py file, or a folder to
    hold ``_gradgen_runtime.py``); returns the file's path."""
    path = Path(path)
    if path.suffix != ".py":
        path.mkdir(parents=True, exist_ok=True)
        path = path / "_gradgen_runtime.py"
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_helpers_source())
    return path


def import_helpers_module(path, name: str = "gradgen_helpers_under_test"):
    """Import the module written by :func:`render_helpers_module` (a copy of its own:
    ``name``), as generated modules are imported (:func:`gradgen.loading.load_file`)."""
    from gradgen.loading import load_file

    return load_file(path, copy=name)
