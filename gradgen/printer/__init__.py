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
:class:`~gradgen.ir.Call` s), :mod:`~gradgen.printer.helpers` (which module helpers
call which) and :mod:`~gradgen.printer.errors`.
"""

from .calls import print_value
from .errors import PrintError
from .expressions import TFPrinter
from .helpers import HELPER_DEPENDENCIES, with_dependencies

__all__ = ["HELPER_DEPENDENCIES", "PrintError", "TFPrinter", "print_value",
           "with_dependencies"]
