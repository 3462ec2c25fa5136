"""SymPy -> TensorFlow source.

Consumes: IR values (:data:`gradgen.ir.Value`): SymPy expressions whose symbols are
named as the generated locals, and :class:`gradgen.ir.Call` s. Guarantees:

* :class:`TFPrinter` subclasses SymPy's ``TensorflowPrinter`` and writes ``tf.`` names
  (``tf.math.exp``, ``tf.linalg.matmul``); the ``math`` module is used only for numeric
  constants such as ``math.pi`` and recorded in :attr:`TFPrinter.uses_math`;
* numbers never change a tensor's dtype: in arithmetic with a tensor a number is a
  Python float literal (TensorFlow converts it to the tensor's dtype); anywhere else
  (a ``tf.where`` branch, a ``tf.math.maximum`` argument, a whole constant value) it is
  ``tf.constant(value, dtype=tf.<op dtype>)``;
* small integer powers are products (``x * x``) or ``tf.math.square``; ``x**0.5`` is
  ``tf.math.sqrt``, ``x**-0.5`` is ``tf.math.rsqrt``;
* anything without a TensorFlow form (``Derivative``, ``Heaviside``, an unknown
  function...) raises :class:`PrintError` naming the function; the caller turns it into a
  spec error naming the op. No ``tf.gradients`` call is ever printed.
"""

from __future__ import annotations

import contextlib
import math

import sympy
from sympy.printing.codeprinter import PrintMethodNotImplementedError
from sympy.printing.precedence import PRECEDENCE
from sympy.printing.pycode import PythonCodePrinter

from . import functions as fn
from .functions import declarations as fns
from . import ir
from .spec import HALF_DTYPES
from .stability.guards import clamp_of


@contextlib.contextmanager
def _without_tensorflow():
    """Import SymPy's TensorFlow printer without importing (or trying to import)
    TensorFlow.

    ``sympy.printing.tensorflow`` calls ``sympy.external.import_module('tensorflow')`` at
    import time, only to read ``tensorflow.__version__``. gradgen passes the version
    explicitly, and generating code must not import TensorFlow (slow, and not a
    dependency), so that one call is answered with None while the module loads.
    """
    import sympy.external

    original = sympy.external.import_module

    def import_module(module, *args, **kwargs):
        if module == "tensorflow":
            return None
        return original(module, *args, **kwargs)

    sympy.external.import_module = import_module
    try:
        yield
    finally:
        sympy.external.import_module = original


with _without_tensorflow():
    from sympy.printing.tensorflow import TensorflowPrinter


class PrintError(Exception):
    """An expression has no TensorFlow form; ``function`` names what could not be printed."""

    def __init__(self, function: str, detail: str = ""):
        self.function = function
        super().__init__(detail or f"{function} has no TensorFlow form")


_COMPARISONS = {
    sympy.StrictLessThan: "<",
    sympy.LessThan: "<=",
    sympy.StrictGreaterThan: ">",
    sympy.GreaterThan: ">=",
}
_EQUALITY = {sympy.Eq: "tf.math.equal", sympy.Ne: "tf.math.not_equal"}
_LOGICAL = {sympy.And: "tf.math.logical_and", sympy.Or: "tf.math.logical_or"}


class TFPrinter(TensorflowPrinter):
    """Prints elementwise SymPy expressions as TensorFlow code.

    Args:
        dtype: the op's compute dtype name (``float32``...), used for typed constants.
    """

    printmethod = "_gradgen_tfcode"

    def __init__(self, dtype: str):
        super().__init__({"tensorflow_version": "2.21", "strict": True})
        self.dtype = dtype
        self.uses_math = False
        self.helpers: set[str] = set()
        self._constants = PythonCodePrinter({"standard": "python3"})

    # ------------------------------------------------------------------ entry points

    def value(self, expr) -> str:
        """Print ``expr`` where it stands alone (a statement value or a call argument)."""
        if isinstance(expr, sympy.Expr) and expr.is_number:
            return self._typed(expr)
        return self.doprint(expr)

    def _typed(self, expr) -> str:
        return f"tf.constant({self._number(expr)}, dtype=tf.{self.dtype})"

    def _print(self, expr, **kwargs):
        if isinstance(expr, sympy.Expr) and expr.is_number and not expr.is_Atom:
            return self._number(expr)
        return super()._print(expr, **kwargs)

    # ------------------------------------------------------------------ numbers

    def _number(self, expr) -> str:
        """A numeric constant as a Python literal or a ``math`` expression."""
        value = complex(expr.evalf(30))
        if not (math.isfinite(value.real) and math.isfinite(value.imag)):
            raise PrintError("constant", f"constant {_short(expr)} is not finite in float64")
        if expr.is_Integer:
            return f"{int(expr)}.0"
        if expr.is_Rational:
            p, q = int(expr.p), int(expr.q)
            if q & (q - 1) == 0:  # exact in binary
                return repr(p / q)
            return f"-({-p}.0 / {q}.0)" if p < 0 else f"({p}.0 / {q}.0)"
        if expr.is_Float:
            return repr(float(expr))
        if expr.is_real is False or value.imag != 0:
            return repr(value)
        try:
            text = self._constants.doprint(expr)
        except PrintMethodNotImplementedError:
            # a constant of a function the math module lacks (softplus(2), sigmoid(1)):
            # its value, correctly rounded from 30 digits
            return repr(value.real)
        if "math." in text:
            self.uses_math = True
        return text

    def _print_Integer(self, expr):
        return self._number(expr)

    _print_Rational = _print_Integer
    _print_Float = _print_Integer
    _print_NumberSymbol = _print_Integer
    _print_Exp1 = _print_Integer
    _print_Pi = _print_Integer
    _print_ImaginaryUnit = _print_Integer
    _print_Half = _print_Integer
    _print_One = _print_Integer
    _print_Zero = _print_Integer
    _print_NegativeOne = _print_Integer

    def _arg(self, expr) -> str:
        """A function's first argument: a number becomes a typed constant."""
        if isinstance(expr, fn.Recip):  # square(1.0 / x), not square((1.0 / x))
            return self._print_Recip(expr)[1:-1]
        return self.value(expr)

    def _args(self, args) -> str:
        """Arguments of one call, comma-separated.

        A number before any tensor argument is a typed constant; after one it is a plain
        literal, which TensorFlow converts to that tensor's dtype.
        """
        out, seen_tensor = [], False
        for arg in args:
            if isinstance(arg, sympy.Expr) and arg.is_number and not seen_tensor:
                out.append(self._typed(arg))
            else:
                out.append(self._print(arg))
                seen_tensor = True
        return ", ".join(out)

    # ------------------------------------------------------------------ symbols

    def _print_Symbol(self, expr):
        return expr.name

    _print_Dummy = _print_Symbol

    # ------------------------------------------------------------------ arithmetic

    def _prints_as_product(self, expr) -> bool:
        return (
            isinstance(expr, sympy.Pow)
            and expr.exp.is_Integer
            and 2 <= expr.exp <= 4
            and expr.base.is_Atom
        )

    def _operand(self, expr) -> str:
        """``expr`` as a factor of a product (parenthesized when it is a sum)."""
        text = self._print(expr)
        if isinstance(expr, sympy.Add) or (expr.is_Number and expr.is_negative):
            return f"({text})"
        return text

    def _divisor(self, expr) -> str:
        """``expr`` as the right operand of ``/``."""
        text = self._print(expr)
        atomic = (
            expr.is_Symbol
            or isinstance(expr, sympy.Function)
            or (expr.is_Number and not expr.is_negative)
            or (isinstance(expr, sympy.Pow) and not self._prints_as_product(expr)
                and not expr.exp.is_negative)
        )
        return text if atomic else f"({text})"

    def _print_Pow(self, expr, rational=False):
        base, exp = expr.base, expr.exp
        if base == sympy.E:
            return f"tf.math.exp({self._arg(exp)})"
        if exp == sympy.S.Half:
            return f"tf.math.sqrt({self._arg(base)})"
        if exp == -sympy.S.Half:
            return f"tf.math.rsqrt({self._arg(base)})"
        if self._prints_as_product(expr):
            return " * ".join([self._print(base)] * int(exp))
        if exp.is_Integer and exp == 2:
            return f"tf.math.square({self._arg(base)})"
        if exp.is_Integer and exp < 0 and not self._keeps_negative_power(expr):
            return f"1.0 / {self._divisor(base ** -exp)}"
        return f"tf.math.pow({self._args([base, exp])})"

    def _keeps_negative_power(self, expr) -> bool:
        """In float16/bfloat16, ``x**-n`` (n > 1) stays one pow call: ``1 / x**n``
        overflows to 1/inf = 0 where x**-n is representable (x = 45, n = 3 in float16);
        pow computes in float32 inside and rounds once."""
        return (
            self.dtype in HALF_DTYPES
            and isinstance(expr, sympy.Pow)
            and expr.exp.is_Rational
            and expr.exp < -1
        )

    def _print_Mul(self, expr):
        factors = sympy.Mul.make_args(expr)
        numeric = [f for f in factors if f.is_number]
        # (a Mul of numbers only is printed as one number by _print, never reaches here)
        if any(not f.is_Rational for f in numeric):
            # the numeric factors (2, 1/sqrt(pi)...) as one coefficient: 2/math.sqrt(math.pi)
            coeff = sympy.Mul(*numeric)
            negative = coeff.is_real and coeff.is_negative
            text = self._number(-coeff if negative else coeff)
            if not (coeff.is_Atom or isinstance(coeff, sympy.Function)):
                text = f"({text})"
            rest = [self._operand(f) for f in factors if not f.is_number]
            return ("-" if negative else "") + " * ".join([text] + rest)
        coeff, rest = expr.as_coeff_Mul()
        sign = ""
        if coeff.is_real and coeff.is_negative:
            sign, coeff = "-", -coeff
        numerator: list[str] = []
        denominator: list = []
        if coeff != 1:
            if coeff.is_Rational and not coeff.is_Integer and coeff.q & (coeff.q - 1):
                if coeff.p != 1:
                    numerator.append(f"{int(coeff.p)}.0")
                denominator.append(sympy.Integer(coeff.q))
            else:
                numerator.append(self._number(coeff))
        for factor in rest.as_ordered_factors():  # rest has the non-numeric factors
            if (
                isinstance(factor, sympy.Pow)
                and factor.exp.is_Rational
                and factor.exp.is_negative
                and factor.exp != -sympy.S.Half
                and not self._keeps_negative_power(factor)
            ):
                denominator.append(factor.base ** -factor.exp)
            else:
                numerator.append(self._operand(factor))
        text = " * ".join(numerator) if numerator else "1.0"
        if denominator:
            if len(denominator) == 1:
                text += f" / {self._divisor(denominator[0])}"
            else:
                text += " / (" + " * ".join(self._operand(d) for d in denominator) + ")"
        return sign + text

    # ------------------------------------------------------------------ functions

    def _print_Function(self, expr):
        """A function call, as its declaration (:mod:`gradgen.functions`) says: a runtime
        helper, a TensorFlow function of one argument, or one folded over two or more."""
        function = fns.of_class(type(expr))
        if function is not None and function.helper:
            self.helpers.add(function.helper)
            return f"{function.helper}({self._args(expr.args)})"
        if function is None or function.tf is None:
            raise PrintError(type(expr).__name__)
        if function.arity == (1, 1):
            return f"{function.tf}({self._arg(expr.args[0])})"
        return self._fold(function.tf, expr.args)

    _print_Expr = _print_Function
    _print_Application = _print_Function

    def _fold(self, name: str, args) -> str:
        if name in ("tf.math.maximum", "tf.math.minimum"):  # tensors first, numbers last
            args = sorted(args, key=lambda a: (a.is_number, sympy.default_sort_key(a)))
        out = self._args(args[:2])
        out = f"{name}({out})"
        for arg in args[2:]:
            out = f"{name}({out}, {self._print(arg)})"
        return out

    def _print_Piecewise(self, expr):
        *pairs, (last, cond) = expr.args
        if cond is not sympy.true or not pairs:
            raise PrintError("Piecewise", "a Piecewise without a final True branch")
        if len(pairs) == 1 and last == 0 and pairs[0][0].is_number:
            # an indicator: a * [c]
            value, c = pairs[0]
            cast = f"tf.cast({self._print(c)}, tf.{self.dtype})"
            return cast if value == 1 else f"{self._number(value)} * {cast}"
        text = None
        for value, cond in reversed(pairs):
            if text is None:
                branches = self._args([value, last])
            else:  # the else-branch is a tf.where call: a tensor
                branches = f"{self._args([value])}, {text}"
            text = f"tf.where({self._print(cond)}, {branches})"
        return text

    def _print_Square(self, expr):
        (x,) = expr.args
        if x.is_Atom:
            text = self._print(x)
            return f"{text} * {text}"
        return f"tf.math.square({self._arg(x)})"

    def _print_Recip(self, expr):
        return f"(1.0 / {self._divisor(expr.args[0])})"

    def _print_Ratio(self, expr):
        a, b = expr.args
        left = self._print(a)
        if not (a.is_Symbol or isinstance(a, sympy.Function) or isinstance(a, sympy.Pow)):
            left = f"({left})"
        return f"({left} / {self._divisor(b)})"


    def _print_Const(self, expr):
        coeff, rest = expr.value.as_coeff_Mul()
        if coeff.is_Rational and abs(coeff.p) == 1 and coeff.q > 1 and not rest.is_Rational:
            sign = "-" if coeff.p < 0 else ""
            return f"({sign}{self._number(rest)} / {coeff.q})"  # sqrt(2)/2, not (1/2)*...
        text = self._number(expr.value)
        atomic = expr.value.is_Atom or isinstance(expr.value, sympy.Function)
        return text if atomic else f"({text})"

    def _print_Guard(self, expr):
        clamp = clamp_of(expr)
        if clamp is not None:  # where(u <= c, u, c) is minimum(u, c): one kernel
            kind, u, c = clamp
            return f"tf.math.{kind}({self._args([u, c])})"
        u, cond, safe = expr.args
        return f"tf.where({self._print(cond)}, {self._args([u, safe])})"

    def _print_nan_outside(self, expr):
        value, cond = expr.args
        self.uses_math = True
        nan = f"tf.constant(math.nan, dtype=tf.{self.dtype})"
        return f"tf.where({self._print(cond)}, {self._args([value])}, {nan})"

    # ------------------------------------------------------------------ conditions

    def _print_Relational(self, expr):
        cls = type(expr)
        if cls in _EQUALITY:
            lhs, rhs = expr.args
            if lhs.is_number:
                lhs, rhs = rhs, lhs
            return f"{_EQUALITY[cls]}({self._args([lhs, rhs])})"
        op = _COMPARISONS.get(cls)
        if op is None:
            raise PrintError(cls.__name__)
        lhs, rhs = expr.args
        prec = PRECEDENCE["Relational"]
        return f"{self.parenthesize(lhs, prec)} {op} {self.parenthesize(rhs, prec)}"

    def _print_And(self, expr):
        return self._logical(expr)

    _print_Or = _print_And

    def _logical(self, expr):
        name = _LOGICAL[type(expr)]
        args = sorted(expr.args, key=sympy.default_sort_key)
        out = self._print(args[0])
        for arg in args[1:]:
            out = f"{name}({out}, {self._print(arg)})"
        return out

    def _print_Not(self, expr):
        return f"tf.math.logical_not({self._print(expr.args[0])})"

    def _print_BooleanTrue(self, expr):
        raise PrintError("True", "a constant condition")

    _print_BooleanFalse = _print_BooleanTrue

    # ------------------------------------------------------------------ refused

    def _refuse(self, expr, **kwargs):
        raise PrintError(type(expr).__name__)

    _print_Derivative = _refuse
    _print_Subs = _refuse
    _print_Integral = _refuse
    _print_Heaviside = _refuse
    _print_DiracDelta = _refuse
    _print_re = _refuse
    _print_im = _refuse
    _print_arg = _refuse
    _print_Infinity = _refuse
    _print_NegativeInfinity = _refuse
    _print_ComplexInfinity = _refuse
    _print_NaN = _refuse
    _print_MatrixBase = _refuse
    _print_MatrixExpr = _refuse
    _print_Basic = _refuse
    _print_not_supported = _refuse
    emptyPrinter = _refuse


# Reductions and their VJPs printed as calls of module helpers (templates/helpers.py.j2).
_REDUCTION_HELPERS = {
    "reduce_logsumexp": "_reduce_logsumexp",
    "softmax": "_softmax",
    "log_softmax": "_log_softmax",
    "extremum_grad": "_extremum_grad",
    "softmax_grad": "_softmax_grad",
    "log_softmax_grad": "_log_softmax_grad",
}


# Helpers that call other helpers (templates/helpers.py.j2): emitted together.
HELPER_DEPENDENCIES = {
    "_log_erfc": ("_erfcx",),
    "_reduce_logsumexp": ("_lse_parts", "_softmax"),
    "_log_softmax": ("_lse_parts", "_log_softmax_grad"),
    "_softmax": ("_softmax_grad",),
    "_complex_det": ("_cofactor",),
    "_cofactor": ("_complex_det",),  # its general branch computes det(a) * inverse(a)
}


def with_dependencies(helpers) -> set[str]:
    """``helpers`` and every helper they call, transitively."""
    out, todo = set(), list(helpers)
    while todo:
        name = todo.pop()
        if name not in out:
            out.add(name)
            todo.extend(HELPER_DEPENDENCIES.get(name, ()))
    return out


def print_value(printer: TFPrinter, value: ir.Value) -> str:
    """Print a statement value: a SymPy expression or an :class:`~gradgen.ir.Call`."""
    if not isinstance(value, ir.Call):
        return printer.value(value)
    args = [print_value(printer, a) for a in value.args]
    fn = value.fn
    dtype = f"tf.{printer.dtype}"
    if fn == "add":
        return " + ".join(args)
    if fn == "mul":
        return " * ".join(_operand(a, v) for a, v in zip(args, value.args))
    if fn == "div":
        return f"{_operand(args[0], value.args[0])} / {_operand(args[1], value.args[1])}"
    if fn == "matmul":
        flags = "".join(f", {name}=True" for name, on in value.params if on)
        return f"tf.linalg.matmul({args[0]}, {args[1]}{flags})"
    if fn == "transpose":
        return f"tf.linalg.matrix_transpose({args[0]})"
    if fn in ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min"):
        axis = list(value.required("axis"))
        keep = ", keepdims=True" if value.required("keepdims") else ""
        return f"tf.{fn}({args[0]}, axis={axis}{keep})"
    if fn in _REDUCTION_HELPERS:
        helper = _REDUCTION_HELPERS[fn]
        printer.helpers.add(helper)
        axis = list(value.param("axis"))
        keep = ", keepdims=True" if value.param("keepdims") else ""
        keep += f", count={int(value.param('count'))}" if value.param("count") else ""
        return f"{helper}({', '.join(args)}, axis={axis}{keep})"
    if fn == "unbroadcast":
        return f"_unbroadcast({args[0]}, {args[1]})"
    if fn == "zeros_like":
        return f"tf.zeros_like({args[0]})"
    if fn == "broadcast_to":
        if len(args) == 2:
            return f"tf.broadcast_to({args[0]}, {args[1]})"
        return f"tf.broadcast_to({args[0]}, {list(value.param('shape'))})"
    if fn == "broadcast_shape":
        out = f"tf.shape({args[0]})"
        for arg in args[1:]:
            out = f"tf.broadcast_dynamic_shape({out}, tf.shape({arg}))"
        return out
    if fn == "cast":
        return f"tf.cast({args[0]}, tf.{value.param('dtype')})"
    if fn == "inverse":
        adjoint = ", adjoint=True" if value.param("adjoint") else ""
        return f"tf.linalg.inv({args[0]}{adjoint})"
    if fn == "det":
        if printer.dtype.startswith("complex"):  # TF's own det gradient lacks a conj
            printer.helpers.add("_complex_det")
            return f"_complex_det({args[0]})"
        return f"tf.linalg.det({args[0]})"
    if fn == "cofactor":
        printer.helpers.add("_cofactor")
        if value.param("conjugate"):
            return f"tf.math.conj(_cofactor({args[0]}))"
        return f"_cofactor({args[0]})"
    if fn == "logdet":
        printer.helpers.add("_logabsdet")
        return f"_logabsdet({args[0]})"
    if fn == "trace":
        return f"tf.linalg.trace({args[0]})"
    if fn == "einsum":
        return f"tf.einsum({value.param('subscripts')!r}, {', '.join(args)})"
    if fn == "expand_matrix":
        return f"{_operand(args[0], value.args[0])}[..., tf.newaxis, tf.newaxis]"
    if fn == "eye":
        n = value.param("n")
        size = n if n is not None else f"tf.shape({args[0]})[-1]"
        return f"tf.eye({size}, dtype={dtype})"
    if fn == "unreduce":
        out = args[0]
        if not value.required("keepdims"):
            for axis in value.required("axes"):
                out = f"tf.expand_dims({out}, {axis})"
        shape = value.param("shape")
        target = list(shape) if shape is not None else f"tf.shape({args[1]})"
        return f"tf.broadcast_to({out}, {target})"
    if fn == "count":
        axes = value.param("axes")
        if all(a < 0 for a in axes):  # a shape with `...`: tf.gather takes no index < 0
            dims = " * ".join(f"tf.shape({args[0]})[{a}]" for a in axes)
            return f"tf.cast({dims}, {dtype})"
        dims = f"tf.gather(tf.shape({args[0]}), {list(axes)})"
        return f"tf.cast(tf.reduce_prod({dims}), {dtype})"
    raise AssertionError(fn)  # ir.Call validates fn


def _operand(text: str, value) -> str:
    """``text`` parenthesized unless it is a name, a call or a subscript."""
    if isinstance(value, ir.Call) and value.fn not in ("add", "mul", "div"):
        return text
    if isinstance(value, sympy.Basic) and (value.is_Atom or isinstance(value, sympy.Function)):
        return text
    return f"({text})"


def _short(number) -> str:
    """A number for a message: as written when short, else to 6 significant digits
    (a 1,200-digit constant is not repeated in full)."""
    text = f"{number}"
    if len(text) <= 40:
        return text
    try:
        return str(sympy.N(number, 6))
    except (TypeError, ValueError):
        return text[:20] + f"... ({len(text)} characters)"
