"""Untrusted text, made safe for each place gradgen echoes it.

Spec files, ``pyproject.toml``, command-line paths, files already in an output folder
and cache entries may all come from a stranger's pull request. Whatever of them gradgen
writes back out goes through one function per destination:

* :func:`literal`: a Python literal whose value is the given one (generated code);
* :func:`comment`: text for a ``#`` comment, on one line (generated code);
* :func:`printable`: text for a terminal or a log, with control, format and line-break
  characters other than a newline and a tab shown as escapes (no terminal escape
  sequence or bidirectional override survives);
* :func:`markdown_text`: text for Markdown, with every ASCII punctuation character
  backslash-escaped (CommonMark section 2.4), so it cannot open a heading, HTML (an
  unclosed ``<details>``), a link or a code span;
* :func:`check_path_text`: refuse a path that would need any of the above to be shown.

This module imports neither SymPy nor TensorFlow.
"""

from __future__ import annotations

import math
import string
import unicodedata

from .errors import UsageError

_KEEP = {"\n", "\t"}


# Letters and marks that display as nothing (Hangul fillers, the combining grapheme
# joiner): they can hide text from a reviewer as format characters do.
_BLANK = frozenset("\u034f\u115f\u1160\u3164\uffa0")


def unsafe(ch: str) -> bool:
    """A character that can change how text displays or parses: control (Cc), format
    (Cf: bidirectional marks and overrides, zero-width, soft hyphen, tags), surrogate,
    private use, unassigned, line or paragraph separators (Zl, Zp, which
    ``str.splitlines`` breaks on), and the blank letters of :data:`_BLANK`."""
    return (unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")
            or ch in _BLANK)



def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: str, keep: frozenset | set = frozenset(_KEEP)) -> str:
    """``text`` with every unsafe character (see :func:`unsafe`) except those in
    ``keep`` (newline and tab) written as a Python-style escape (``\\x1b``)."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(_escape(ch) if ch not in keep and unsafe(ch) else ch for ch in text)


def comment(text: str) -> str:
    """``text`` for the body of a one-line ``#`` comment: no character of it can end the
    line (newlines and tabs are escaped too)."""
    return printable(str(text), keep=frozenset())


def literal(value) -> str:
    """The Python source of a literal whose value is ``value``.

    Args:
        value: a str, int, bool, None, ``...`` (Ellipsis), a finite float, or a tuple
            or list of these.

    Raises:
        TypeError: any other type, or a float that is not finite (``repr`` of inf is
            not a literal).
    """
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if value is ...:
        return "..."
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError(f"no Python literal for the float {value!r}")
        return repr(value)
    if isinstance(value, (tuple, list)):
        items = ", ".join(literal(v) for v in value)
        if isinstance(value, tuple):
            return f"({items},)" if len(value) == 1 else f"({items})"
        return f"[{items}]"
    raise TypeError(f"no Python literal for a value of type {type(value).__name__}")


_PUNCTUATION = set(string.punctuation)


def markdown_text(text: str) -> str:
    """``text`` as literal Markdown text: unsafe characters escaped (see
    :func:`printable`), then ASCII punctuation backslash-escaped; its line breaks are
    kept (a blank line stays a paragraph break)."""
    return "\n".join(
        "".join("\\" + ch if ch in _PUNCTUATION else ch for ch in printable(line))
        for line in text.split("\n")
    )


def check_path_text(path: str, what: str) -> str:
    """Refuse a path that holds an unsafe character (see :func:`unsafe`: control,
    format or line-break characters), which would have to be escaped wherever gradgen
    writes it (generated headers, the emitted tests, messages).

    Returns:
        ``path`` unchanged.

    Raises:
        UsageError: naming ``what`` (e.g. "output folder") and the path, escaped.
    """
    if any(unsafe(ch) for ch in path):
        raise UsageError(
            f"{what} {printable(path, set())!r} contains control, format or line-break "
            "characters; rename it"
        )
    return path
