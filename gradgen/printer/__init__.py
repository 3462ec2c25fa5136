"""SymPy -> TensorFlow source.

Receives: IR values (:data:`gradgen.ir.Value`): SymPy expressions whose symbols are
named as the generated locals, and :class:`gradgen.ir.Call` s. Returns: Python source
text, one expression per value, from :func:`print_value` with a :class:`TFPrinter` per
op and dtype; the printer records what that text needs (``uses_math``, ``helpers``).
Anything without a TensorFlow form raises :class:`PrintError` naming the function. No
``tf.gradients`` call is ever printed.

The modules: :mod:`~gradgen.printer.expressions` (elementwise SymPy expressions:
:class:`TFPrinter`), :mod:`~gradgen.printer.numbers` (numeric constants),
:mod:`~gradgen.printer.calls` (matrix products, reductions and the other
:class:`~gradgen.ir.Call` s) and :mod:`~gradgen.printer.errors`. The helpers printed
code calls are declared in :mod:`gradgen.runtime`.
"""

from .calls import print_value
from .errors import PrintError
from .expressions import TFPrinter

__all__ = ["PrintError", "TFPrinter", "print_value"]
