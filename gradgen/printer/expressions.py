"""SymPy expressions as TensorFlow source: :class:`TFPrinter`.

Receives: elementwise SymPy expressions (the values of :data:`gradgen.ir.Value` that are
not calls) whose symbols are named as the generated locals, and the op's compute dtype.
Returns: one Python expression per value (:meth:`TFPrinter.value`); the printer records
what the text needs around it (:attr:`TFPrinter.uses_math`, :attr:`TFPrinter.helpers`).

* :class:`TFPrinter` subclasses SymPy's ``TensorflowPrinter`` and writes ``tf.`` names
  (``tf.math.exp``); the ``math`` module is used only for numeric constants such as
  ``math.pi`` (:mod:`gradgen.printer.numbers`);
* numbers never change a tensor's dtype: in arithmetic with a tensor a number is a
  Python float literal (TensorFlow converts it to the tensor's dtype); anywhere else
  (a ``tf.where`` branch, a ``tf.math.maximum`` argument, a whole constant value) it is
  ``tf.constant(value, dtype=tf.<op dtype>)``;
* small integer powers are products (``x * x``) or ``tf.math.square``; ``x**0.5`` is
  ``tf.math.sqrt``, ``x**-0.5`` is ``tf.math.rsqrt``;
* a function is printed as its declaration (:mod:`gradgen.functions`) says: a TensorFlow
  function, or a runtime helper whose name is recorded in :attr:`TFPrinter.helpers`;
* anything without a TensorFlow form (``Derivative``, ``Heaviside``, an unknown
  function...) raises :class:`~gradgen.printer.errors.PrintError` naming the function.
"""

from __future__ import annotations

import contextlib

import sympy
from sympy.printing.precedence import PRECEDENCE
from sympy.printing.pycode import PythonCodePrinter

from .. import functions as fn
from .. import runtime
from ..functions import declarations as fns
from ..pinned import Pinned
from ..spec import HALF_DTYPES
from ..stability.guards import clamp_of
from .errors import PrintError
from .numbers import number_literal


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


_COMPARISONS = {
    sympy.StrictLessThan: "<",
    sympy.LessThan: "<=",
    sympy.StrictGreaterThan: ">",
    sympy.GreaterThan: ">=",
}
_EQUALITY = {sympy.Eq: "tf.math.equal", sympy.Ne: "tf.math.not_equal"}
_LOGICAL = {sympy.And: "tf.math.logical_and", sympy.Or: "tf.math.logical_or"}


class _Constants(Pinned, PythonCodePrinter):
    """Python literals of constants (math.pi...), from the class defaults only."""


class TFPrinter(Pinned, TensorflowPrinter):
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
        self._constants = _Constants({"standard": "python3"})

    # ------------------------------------------------------------------ entry points

    def value(self, expr) -> str:
        """Print ``expr`` where it stands alone (a statement value or a call argument)."""
        if isinstance(expr, sympy.Expr) and expr.is_number:
            return self._typed(expr)
        return self.doprint(expr)

    def use_helper(self, name: str) -> str:
        """Record that the printed code calls the runtime helper ``name``
        (:mod:`gradgen.runtime`, which must declare it); returns ``name``."""
        self.helpers.add(runtime.helper(name))
        return name

    def _typed(self, expr) -> str:
        return f"tf.constant({self._number(expr)}, dtype=tf.{self.dtype})"

    def _print(self, expr, **kwargs):
        if isinstance(expr, sympy.Expr) and expr.is_number and not expr.is_Atom:
            return self._number(expr)
        return super()._print(expr, **kwargs)

    # ------------------------------------------------------------------ numbers

    def _number(self, expr) -> str:
        """A numeric constant as a Python literal or a ``math`` expression."""
        text, uses_math = number_literal(expr, self._constants)
        self.uses_math = self.uses_math or uses_math
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
    _print_Infinity = _print_Integer  # a limit at build time (guards.singular_limits)
    _print_NegativeInfinity = _print_Integer
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
            or (isinstance(expr, sympy.Function)
                and not (isinstance(expr, fn.Square) and expr.args[0].is_Atom))
            or (expr.is_Number and not expr.is_negative)
            or (isinstance(expr, sympy.Pow) and not self._prints_as_product(expr)
                and not expr.exp.is_negative)
        )
        return text if atomic else f"({text})"

    def _print_Pow(self, expr, rational=False):
        base, exp = expr.base, expr.exp
        if base == sympy.E:  # SymPy writes exp(x) as a power of E
            return f"{fns.declared('exp').tf}({self._arg(exp)})"
        if exp == sympy.S.Half:  # and sqrt(x) as x**(1/2)
            return f"{fns.declared('sqrt').tf}({self._arg(base)})"
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
        """A product, left to right. With two or more tensor factors the constant comes
        last: ``scale * t * 2.0``, not ``2.0 * scale * t``, whose ``2.0 * scale``
        overflows (scale > 1.7e38 in float32) before ``t = a + b = 0`` makes the
        product 0 (inf * 0 = NaN). With one, ``c * x`` rounds once either way."""
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
            return ("-" if negative else "") + " * ".join(self._ordered(text, rest))
        coeff, rest = expr.as_coeff_Mul()
        sign = ""
        if coeff.is_real and coeff.is_negative:
            sign, coeff = "-", -coeff
        numbers: list[str] = []
        denominator: list = []
        if coeff != 1:
            if coeff.is_Rational and not coeff.is_Integer and coeff.q & (coeff.q - 1):
                if coeff.p != 1:
                    numbers.append(f"{int(coeff.p)}.0")
                denominator.append(sympy.Integer(coeff.q))
            else:
                numbers.append(self._number(coeff))
        numerator: list[str] = []
        for factor in _vanishing_first(rest.as_ordered_factors()):  # the non-numeric
            if isinstance(factor, fn.Const) and not numbers:
                numbers.append(self._operand(factor))  # a constant held as an atom
            elif (
                isinstance(factor, sympy.Pow)
                and factor.exp.is_Rational
                and factor.exp.is_negative
                and factor.exp != -sympy.S.Half
                and not self._keeps_negative_power(factor)
            ):
                denominator.append(factor.base ** -factor.exp)
            else:
                numerator.append(self._operand(factor))
        tensors = len(numerator) + sum(not d.is_number for d in denominator)
        numerator = self._ordered(numbers[0], numerator, tensors) if numbers else numerator
        text = " * ".join(numerator) if numerator else "1.0"
        if denominator:
            if len(denominator) == 1:
                text += f" / {self._divisor(denominator[0])}"
            else:
                text += " / (" + " * ".join(self._operand(d) for d in denominator) + ")"
        return sign + text

    @staticmethod
    def _ordered(number: str, tensors: list[str], count: int | None = None) -> list[str]:
        """The factors of a product: ``number`` first where it multiplies one tensor
        factor (``count`` of them in all, divisors too), last where it multiplies
        more."""
        count = len(tensors) if count is None else count
        return tensors + [number] if count >= 2 and tensors else [number] + tensors

    # ------------------------------------------------------------------ functions

    def _print_Function(self, expr):
        """A function call, as its declaration (:mod:`gradgen.functions`) says: a runtime
        helper, a TensorFlow function of one argument, or one folded over two or more."""
        function = fns.of_class(type(expr))
        if function is not None and function.helper:
            one = function.arity == (1, 1)
            args = self._arg(expr.args[0]) if one else self._args(expr.args)
            return f"{self.use_helper(function.helper)}({args})"
        if function is None or function.tf is None:
            raise PrintError(type(expr).__name__)
        if function.arity == (1, 1):
            return f"{function.tf}({self._arg(expr.args[0])})"
        return self._fold(function.tf, expr.args, commutative=function.arity[1] is None)

    _print_Expr = _print_Function
    _print_Application = _print_Function

    def _fold(self, name: str, args, commutative: bool) -> str:
        """``name`` applied pairwise, left to right; the arguments of a function of any
        number of them (Max, Min: commutative) in order, tensors first, numbers last."""
        if commutative:
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
            rest = self._print(last) if text is None else text  # (a tf.where: a tensor)
            if value.is_number and (text is not None or not last.is_number):
                # the tensor first, so that the number takes its dtype (a typed constant
                # would tie the code to one dtype): where(x != 1, f, 2.0)
                text = f"tf.where({self._print(sympy.Not(cond))}, {rest}, " \
                       f"{self._print(value)})"
            elif text is None:
                text = f"tf.where({self._print(cond)}, {self._args([value, last])})"
            else:
                text = f"tf.where({self._print(cond)}, {self._args([value])}, {text})"
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

    def _print_overflowed(self, expr):
        return f"tf.math.is_inf({self._print(expr.args[0])})"

    def _print_LogAbs(self, expr):
        return f"tf.math.log(tf.math.abs({self._print(expr.args[0])}))"

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
    _print_ComplexInfinity = _refuse
    _print_NaN = _refuse
    _print_MatrixBase = _refuse
    _print_MatrixExpr = _refuse
    _print_Basic = _refuse
    _print_not_supported = _refuse
    emptyPrinter = _refuse


# Functions whose 0 is exact where another factor of the product may overflow: xdivy(0,
# x) and xlogy(0, x) are 0 at any x, mul_no_nan(x, 0) at any x.
_VANISHING = (fn.xdivy, fn.xlogy, fn.mul_no_nan)


def _vanishing_first(factors) -> list:
    """The factors of a product with :data:`_VANISHING` calls first, the rest in order:
    ``xdivy(t, x) * (y - 1) * upstream``, not ``(y - 1) * upstream * xdivy(t, x)``,
    whose ``(y - 1) * upstream`` overflows (y = 3.4e38 in float32) before the xdivy's 0
    makes the product 0 (inf * 0 = NaN: x**y's second derivative at x = -1.2e-38)."""
    if len(factors) < 3:  # (two factors round once in either order)
        return list(factors)
    return sorted(factors, key=lambda f: not isinstance(f, _VANISHING))
