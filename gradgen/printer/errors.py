"""The printer's one error.

Receives: nothing. Returns: :class:`PrintError`, raised by every part of the printer for
a value that has no TensorFlow form; the caller (:mod:`gradgen.views`) turns it into a
spec error naming the op.
"""

from __future__ import annotations


class PrintError(Exception):
    """An expression has no TensorFlow form; ``function`` names what could not be printed."""

    def __init__(self, function: str, detail: str = ""):
        self.function = function
        super().__init__(detail or f"{function} has no TensorFlow form")
