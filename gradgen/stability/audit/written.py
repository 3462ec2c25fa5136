"""The forms as written, run in the op's dtype: what every rewrite and guard is measured
against (Herbie's rule: a rewrite is kept only where it is at least as accurate).

Consumes: the audit's :class:`~.reference.Reference` (the forward as written, its
`where` intermediates inlined, and SymPy's partial derivatives of it) and the op's
dtype. Guarantees: :class:`Written` prints each target with gradgen's printer, without
the stable rewrites, guards, limits and cheaper forms the derivation applies (what a
person who wrote the formula and called ``tf.GradientTape`` on it would get, up to the
order of operations), and :meth:`Written.run` evaluates them in the NumPy mirror at the
audit's points, rounding every operation to the dtype as the generated code's mirror
does. A target SymPy's derivative of which cannot be printed or run (an unevaluated
``Derivative``, a function only a rewrite introduces) is None: not measured.
"""

from __future__ import annotations

import numpy as np

from ...budget import BudgetExceeded
from ..formats import Format
from .mirror import MirrorError, environment
from .reference import Reference


class Written:
    """The targets of a :class:`Reference` as printed code, not rewritten.

    ``printer``: a fresh :class:`gradgen.printer.TFPrinter` for the op's dtype (the
    caller's: the audit sits below the printer in the pipeline); its ``PrintError``, as
    any error printing raises, leaves that target unmeasured."""

    def __init__(self, reference: Reference, printer):
        self.params = [s.name for s in reference.symbols]
        self.code: list = []
        for t, (_, _, expr) in enumerate(reference.targets):
            try:
                line = f"_written_{t} = {printer.doprint(expr)}"
                self.code.append(compile(line, f"<as written {t}>", "exec"))
            except BudgetExceeded:
                raise  # the op's time budget, not a form that cannot be printed
            except Exception:  # noqa: BLE001 - PrintError and SymPy's own: not measured
                self.code.append(None)
        self.helpers = tuple(sorted(printer.helpers))

    def run(self, fmt: Format, points: dict) -> list:
        """Per target, its values at ``points`` (float64 vectors of numbers of ``fmt``),
        or None where it cannot be run."""
        n = len(next(iter(points.values())))
        try:
            _, env = environment(fmt, n, self.helpers, {p: points[p] for p in self.params})
        except MirrorError:  # pragma: no cover - gradgen's own helpers
            return [None] * len(self.code)
        out: list = []
        for t, code in enumerate(self.code):
            value = None
            if code is not None:
                local = dict(env)
                try:
                    exec(code, local)  # noqa: S102 - printed by gradgen from SymPy
                    value = np.broadcast_to(
                        np.asarray(local[f"_written_{t}"], dtype=np.float64), (n,))
                except (MirrorError, AttributeError, NameError, TypeError, ValueError):
                    value = None
            out.append(value)
        return out
