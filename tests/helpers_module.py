"""Render every helper of templates/helpers.py.j2 into one standalone Python module.

The helpers are Jinja-conditional blocks that gradgen emits into a generated module only
when an op needs them; :func:`render_helpers_module` renders all of them at once with
gradgen's own Jinja environment, so they can be imported and tested directly
(tests/test_helpers.py) or reused by another harness.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # this checkout's gradgen, not an installed copy
    sys.path.insert(0, str(ROOT))

# Every conditional helper of the template (_check_input is always emitted).
HELPERS = (
    "_common_dtype",
    "_check_named_dims",
    "_logsumexp",
    "_log1mexp",
    "_lse_parts",
    "_reduce_logsumexp",
    "_log_softmax",
    "_softmax",
    "_softmax_grad",
    "_log_softmax_grad",
    "_extremum_grad",
    "_logcosh",
    "_erfcx",
    "_log_erfc",
    "_hypot",
    "_cofactor",
    "_complex_det",
    "_logabsdet",
    "_unbroadcast",
    "_fused_kernels",
)

PRELUDE = "import math\nimport tensorflow as tf\n"


def template_helper_names() -> set[str]:
    """The helper names templates/helpers.py.j2 guards with
    ``{% if "..." in helpers %}``."""
    from gradgen.render import templates_dir

    text = (templates_dir() / "helpers.py.j2").read_text()
    return set(re.findall(r'\{%\s*if\s+"(\w+)"\s+in\s+helpers\s*%\}', text))


def render_helpers_source(helpers=HELPERS) -> str:
    """The source of a module holding ``helpers`` (default: all) and _check_input."""
    from gradgen.render import _environment

    text = _environment().get_template("helpers.py.j2").render(helpers=list(helpers))
    return PRELUDE + text


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
