"""SymPy printers whose output depends on their own settings alone.

A SymPy printer starts from the process's global printing settings
(``Printer.set_global_settings``, which ``init_printing`` calls, as a notebook may) and
then applies the settings it is given: ``order="rev-lex"`` set there reverses every sum
gradgen prints, ``human=False`` turns a code printer's output into tuples. Generated
code, docstrings, comments and ``explain`` must depend on the spec and gradgen alone
(the same bytes in any process), so every printer gradgen uses starts from its class
defaults instead: :class:`Pinned` first among its bases.
"""

from __future__ import annotations

from sympy.printing.latex import LatexPrinter
from sympy.printing.pycode import MpmathPrinter
from sympy.printing.repr import ReprPrinter
from sympy.printing.str import StrPrinter


class Pinned:
    """Mixin for a ``sympy.printing.printer.Printer`` subclass: its initial settings are
    its class's defaults, never the process's global settings (SymPy's
    ``Printer._get_initial_settings`` merges those in; sympy is pinned in
    ``pyproject.toml``, so this private hook is the one of the pinned version)."""

    @classmethod
    def _get_initial_settings(cls) -> dict:
        return dict(cls._default_settings)


def srepr(expr) -> str:
    """``sympy.srepr(expr)`` from the class defaults only: the text the accuracy audit
    seeds its sample from and internal constants are named after (a global ``order``
    reorders a sum's arguments in SymPy's own ``srepr``)."""
    return _Repr().doprint(expr)


def sstr(expr) -> str:
    """``str(expr)`` from the class defaults only (``str`` of a SymPy object pins the
    order, but a global ``full_prec``, ``min`` or ``max`` still changes its floats)."""
    return _Str().doprint(expr)


def latex(expr) -> str:
    """``sympy.latex(expr)`` from the class defaults only (``explain --format
    markdown``)."""
    return _Latex().doprint(expr)


# the settings sympy.lambdify gives the printer it makes for a module (plus
# ``user_functions`` from a dict among its modules), for a printer passed as printer=
LAMBDIFY_SETTINGS = {"fully_qualified_modules": False, "inline": True,
                     "allow_unknown_functions": True}


def mpmath_printer() -> MpmathPrinter:
    """The printer ``sympy.lambdify(..., "mpmath")`` makes, pinned: pass it as
    ``printer=``."""
    return _Mpmath(LAMBDIFY_SETTINGS)


class _Repr(Pinned, ReprPrinter):
    """SymPy's ``srepr`` printer, pinned."""


class _Str(Pinned, StrPrinter):
    """SymPy's ``str`` printer, pinned."""


class _Latex(Pinned, LatexPrinter):
    """SymPy's LaTeX printer, pinned."""


class _Mpmath(Pinned, MpmathPrinter):
    """SymPy's mpmath code printer, pinned."""
