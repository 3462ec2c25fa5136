"""Format generated source with black, in-process.

Consumes: Python source text. Guarantees: :func:`format_source` returns it formatted by
the pinned black version with an explicit mode (line length 88, Python 3.10+ target,
default string normalization), independent of any black configuration in the user's
project, so that output is byte-identical wherever gradgen runs.
"""

from __future__ import annotations

import black

MODE = black.Mode(
    target_versions={black.TargetVersion.PY310},
    line_length=88,
    string_normalization=True,
    is_pyi=False,
    magic_trailing_comma=True,
)


def format_source(source: str) -> str:
    """Format ``source`` with black.

    Raises:
        black.InvalidInput: the source is not valid Python (a gradgen bug).
    """
    return black.format_str(source, mode=MODE)
