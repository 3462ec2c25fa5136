"""Errors are values with a location.

Every problem a user can cause (a malformed spec, an expression gradgen refuses, a shape
that does not broadcast) is reported as a :class:`Diagnostic`: spec file, 1-based line and
column, the op and the field (a spec key path such as ``ops[0].inputs.x.shape[1]``), and
a message saying what was expected. Diagnostics are collected into a :class:`SpecError`,
which the command line prints one per line as ``file:line:col: error: ...`` and turns into
exit status 2. Nothing is written when a ``SpecError`` is raised.

Errors that are gradgen's own fault are ordinary exceptions; the command line reports
them with exit status 123.
"""

from __future__ import annotations

from dataclasses import dataclass

EXIT_OK = 0
EXIT_STALE = 1
EXIT_SPEC_ERROR = 2
EXIT_VERIFY_FAILED = 3
EXIT_OUTPUT = 4
EXIT_INTERNAL = 123
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C


@dataclass(frozen=True, order=True)
class Location:
    """A position in a spec file.

    Attributes:
        path: the spec path as the user gave it (never made absolute).
        line: 1-based line number.
        col: 1-based column number.
    """

    path: str
    line: int = 1
    col: int = 1

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Diagnostic:
    """One user-facing error: where it is, which op and field, and what was expected.

    Attributes:
        location: file, line and column.
        message: what is wrong and what was expected.
        op: the op's name (or ``ops[i]`` when the op has no valid name), or None for
            module-level fields.
        field: spec key path of the offending value, e.g. ``ops[0].output``.
    """

    location: Location
    message: str
    op: str | None = None
    field: str | None = None

    def format(self) -> str:
        """Render as ``file:line:col: error: op 'x', field 'y': message``."""
        where = []
        if self.op is not None:
            where.append(f"op '{self.op}'")
        if self.field:
            where.append(f"field '{self.field}'")
        prefix = ", ".join(where)
        body = f"{prefix}: {self.message}" if prefix else self.message
        return f"{self.location}: error: {body}"

    def sort_key(self) -> tuple:
        return (self.location, self.message)


class GradgenError(Exception):
    """Base class of the errors gradgen reports to users."""

    exit_code = EXIT_INTERNAL


class SpecError(GradgenError):
    """A spec (or an expression in it) is invalid. Exit status 2.

    Args:
        diagnostics: one or more :class:`Diagnostic`; kept sorted by position.
    """

    exit_code = EXIT_SPEC_ERROR

    def __init__(self, diagnostics: list[Diagnostic] | Diagnostic):
        if isinstance(diagnostics, Diagnostic):
            diagnostics = [diagnostics]
        unique = {d.format(): d for d in diagnostics}
        self.diagnostics = sorted(unique.values(), key=Diagnostic.sort_key)
        super().__init__("\n".join(d.format() for d in self.diagnostics))


class UsageError(GradgenError):
    """The command line was used wrongly (missing file, bad option). Exit status 2."""

    exit_code = EXIT_SPEC_ERROR


class OutputError(GradgenError):
    """The environment refused a read or write of the output (permissions, a full disk,
    a file-size limit). Exit status 4; no output file changed, unless the message says
    otherwise."""

    exit_code = EXIT_OUTPUT

# What SymPy and mpmath raise for a value they cannot build or evaluate (a comparison
# of a complex number, a huge argument, a division by an exact 0)
EVALUATION_ERRORS = (TypeError, ValueError, OverflowError, ZeroDivisionError)


def error_text(error: BaseException) -> str:
    """A library's exception for a message: its words, or its type where it has none
    (mpmath and SymPy raise ``OverflowError()`` and ``NotImplementedError()`` bare; an
    exception object is true even then, so ``f"{e or ...}"`` never falls back)."""
    return str(error) or type(error).__name__


def short(number) -> str:
    """A number for a message: as written when short, else to 6 significant digits
    (a 1,200-digit constant is not repeated in full), else, where SymPy cannot evaluate
    it, its first 20 characters and its length."""
    text = f"{number}"
    if len(text) <= 40:
        return text
    import sympy  # only for a long number: the command line starts without SymPy

    try:
        return str(sympy.N(number, 6))
    except EVALUATION_ERRORS:
        return text[:20] + f"... ({len(text)} characters)"
