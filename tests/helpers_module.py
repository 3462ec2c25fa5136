"""Render every runtime helper (gradgen/runtime.py, templates/runtime/) into one
standalone Python module.

gradgen writes a helper into generated code only when an op needs it;
:func:`render_helpers_module` renders all of them at once with gradgen's own Jinja
environment, so they can be imported and tested directly (tests/test_helpers.py) or
reused by another harness.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # this checkout's gradgen, not an installed copy
    sys.path.insert(0, str(ROOT))

from gradgen.runtime import HELPERS as DECLARED  # noqa: E402

# Every runtime helper, in the registry's order.
HELPERS = tuple(h.name for h in DECLARED)

PRELUDE = "import math\nimport tensorflow as tf\n"


def render_helpers_source(helpers=HELPERS) -> str:
    """The source of a module holding ``helpers`` (default: all) and those they call."""
    from gradgen.render import render_helpers

    return PRELUDE + render_helpers(helpers)


def render_helpers_module(path) -> Path:
    """Write a standalone importable module with every helper to ``path`` (a .py file,
    or a folder to hold ``gradgen_helpers.py``); returns the file's path."""
    path = Path(path)
    if path.suffix != ".py":
        path.mkdir(parents=True, exist_ok=True)
        path = path / "gradgen_helpers.py"
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_helpers_source())
    return path


def import_helpers_module(path, name: str = "gradgen_helpers_under_test"):
    """Import the module written by :func:`render_helpers_module` under ``name``."""
    spec = importlib.util.spec_from_file_location(name, Path(path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
