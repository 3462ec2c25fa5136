"""The Python API: a spec built in Python, its generated source, and ops loaded for a
notebook.

A spec built here is the YAML format's data (the same keys and values, see the README's
"The spec format"), validated by the same code: names, shapes, dtypes and supported
functions are checked with the same messages, raised as :class:`~gradgen.errors.SpecError`.
Expressions may be strings in the spec's syntax or SymPy expressions; a SymPy expression
is trusted (it comes from the caller's own code) and is written in the spec's syntax
(:func:`expression_text`), then parsed like any spec text, so an unsupported function is
the same clear error. In shapes, Python's ``...`` is the batch wildcard.

Generating needs no TensorFlow; :func:`op` and :func:`load` import the generated module,
which does.
"""

from __future__ import annotations

import numbers
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

import sympy
import yaml

from .derive import spec_str
from .errors import SpecError, UsageError

Expression = Union[str, int, float, sympy.Basic]
"""An expression: spec text (``"log(1 + exp(x))"``), a number, or a SymPy expression
whose symbols are named after the op's inputs and intermediates."""

InputDecl = Union[Sequence[Any], Mapping[str, Any]]
"""An input: its shape (``[3]``, ``[None, 3]``, ``[..., "n", "n"]``), or a mapping with
``shape`` and optionally ``dtype`` and ``differentiable``, as in a YAML spec."""

SPEC_PATH = "<python spec>"  # how a spec built here is named in messages and headers


def expression_text(value: Expression, what: str = "expression") -> str:
    """``value`` as expression text in the spec's syntax.

    Args:
        value: spec text (returned unchanged), an int or float, or a SymPy expression
            (printed: ``sympy.log(1 + sympy.exp(x))`` is ``"log(exp(x) + 1)"``).
        what: how to name the value in an error.

    Raises:
        TypeError: any other type (a bool, a NumPy array, a TensorFlow tensor).
    """
    if isinstance(value, str):
        return value
    if isinstance(value, sympy.Basic):
        return spec_str(value)
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return str(int(value))
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return repr(float(value))  # a NumPy scalar too (its repr is not a literal)
    raise TypeError(
        f"{what} must be a string in the spec's syntax, a number or a SymPy "
        f"expression; got {type(value).__name__}"
    )


@dataclass(frozen=True)
class OpDef:
    """One op of a spec built in Python (the fields of an op in a YAML spec).

    Attributes:
        name: the op's (public function's) name.
        inputs: input name -> shape, or a mapping with ``shape``, ``dtype``,
            ``differentiable``; in argument order.
        output: the one output's expression (or give ``outputs``).
        outputs: output name -> expression, returned as a tuple in this order.
        where: intermediate name -> expression, in order.
        doc: the docstring's first paragraph.
        dtype: one dtype, ``"floating"`` or a list of float dtypes (default: the
            module's).
        memory: ``"save"`` or ``"recompute"`` (default: ``"recompute"`` with
            ``fuse="xla"``, else ``"save"``).
        fuse: ``"xla"`` (forward and gradient each one XLA kernel) or ``"none"``
            (default: the module's).
        order: the highest derivative order derived symbolically, 1 to 4 (default:
            the module's, 2).
    """

    name: str
    inputs: Mapping[str, InputDecl]
    output: Optional[Expression] = None
    outputs: Optional[Mapping[str, Expression]] = None
    where: Optional[Mapping[str, Expression]] = None
    doc: Optional[str] = None
    dtype: Optional[Union[str, Sequence[str]]] = None
    memory: Optional[str] = None
    fuse: Optional[str] = None
    order: Optional[int] = None

    def data(self) -> dict:
        """The op as YAML spec data (expressions as text, ``...`` as ``"..."``).

        Raises:
            TypeError: an expression, shape or input of an unsupported type.
        """
        out: dict = {"name": self.name}
        if self.doc is not None:
            out["doc"] = self.doc
        if self.dtype is not None:
            out["dtype"] = self.dtype if isinstance(self.dtype, str) else list(self.dtype)
        if self.memory is not None:
            out["memory"] = self.memory
        if self.fuse is not None:
            out["fuse"] = self.fuse
        if self.order is not None:
            out["order"] = self.order
        out["inputs"] = {name: _input_data(name, decl) for name, decl in self.inputs.items()}
        for key in ("where", "outputs"):
            values = getattr(self, key)
            if values is not None:
                out[key] = {
                    name: expression_text(v, f"{self.name}: {key} {name!r}")
                    for name, v in values.items()
                }
        if self.output is not None:
            out["output"] = expression_text(self.output, f"{self.name}: output")
        return out


def _input_data(name: str, decl: InputDecl) -> Any:
    if isinstance(decl, Mapping):
        data = dict(decl)
        if "shape" in data:
            data["shape"] = _shape_data(name, data["shape"])
        return data
    return _shape_data(name, decl)


def _shape_data(name: str, shape: Any) -> Any:
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence):
        raise TypeError(
            f"input {name!r}: a shape is a list like [3], [None, 3] or [..., 'n', 'n']; "
            f"got {type(shape).__name__}"
        )
    return ["..." if d is ... else d for d in shape]


def build_spec(
    ops: Sequence[OpDef], *, module: str = "ops", dtype: Optional[Union[str, Sequence[str]]] = None,
    doc: Optional[str] = None,
):
    """Validate a spec built in Python.

    Args:
        ops: the ops, in order.
        module: the module's name (a Python identifier).
        dtype: the module's default dtype (``float32`` when omitted), ``"floating"`` or
            a list of float dtypes.
        doc: the module docstring.

    Returns:
        A :class:`~gradgen.spec.SpecDocument` named ``<python spec>``.

    Raises:
        SpecError: every problem the YAML format would report (a name, a shape, a dtype,
            an unknown function or a shape mismatch in an expression), naming the op
            and field; positions refer to the spec's YAML form (:func:`spec_text`).
        TypeError: a value of an unsupported type (see :func:`expression_text`).
    """
    from .spec import parse_spec

    return parse_spec(spec_text(ops, module=module, dtype=dtype, doc=doc).encode(), SPEC_PATH)


def spec_text(
    ops: Sequence[OpDef], *, module: str = "ops", dtype: Optional[Union[str, Sequence[str]]] = None,
    doc: Optional[str] = None,
) -> str:
    """The YAML spec of these ops (to save as a spec file, or to read an error's
    position in). Arguments as for :func:`build_spec`."""
    data: dict = {"version": 1, "module": module}
    if doc is not None:
        data["doc"] = doc
    if dtype is not None:
        data["dtype"] = dtype if isinstance(dtype, str) else list(dtype)
    data["ops"] = [op.data() for op in ops]
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=88)


def generate_source(
    ops: Sequence[OpDef], *, module: str = "ops", dtype: Optional[Union[str, Sequence[str]]] = None,
    doc: Optional[str] = None, verify: bool = True, audit: bool = True,
) -> str:
    """The generated module's source: what ``gradgen build`` writes for the same spec.

    Args:
        ops, module, dtype, doc: as for :func:`build_spec`.
        verify: check every derived gradient numerically (as ``gradgen build``).
        audit: run the accuracy audit (its result is in each op's docstring).

    Raises:
        SpecError: see :func:`build_spec`.
        VerificationError: a derived gradient failed the numerical check.
        UsageError: generating took longer than the build's budget.
    """
    return _generate(ops, module, dtype, doc, verify, audit).text


def _generate(ops, module, dtype, doc, verify, audit):
    """The :class:`gradgen.emit.Generated` module of these ops (see :func:`generate_source`)."""
    from .emit import _generate_one, build_budget

    document = build_spec(ops, module=module, dtype=dtype, doc=doc)
    with build_budget():
        return _generate_one(document, None, verify, None, False, audit)


def load(
    ops: Sequence[OpDef], *, module: str = "ops", dtype: Optional[Union[str, Sequence[str]]] = None,
    doc: Optional[str] = None, verify: bool = True, audit: bool = True,
) -> types.ModuleType:
    """Generate the module and import it (TensorFlow is imported), without writing a
    file: ``inspect.getsource`` and tracebacks show its source. Its runtime helpers
    (what ``gradgen build`` writes to ``_gradgen_runtime.py``) are loaded with it.

    Arguments and errors as for :func:`generate_source`.
    """
    return _import(_generate(ops, module, dtype, doc, verify, audit))


def _import(generated) -> types.ModuleType:
    """Import a generated module from its text, with a runtime of the helpers it uses."""
    from .emit import runtime_text
    from .loading import load_texts

    names = {h for v in generated.views for h in v.helpers}
    return load_texts(generated.meta.name, generated.text, runtime_text(names))


@dataclass(frozen=True)
class GeneratedOp:
    """An op generated and loaded by :func:`op`: call it like the generated function.

    Attributes:
        name: the op's name.
        fn: the generated public function (checks its arguments, then runs the
            ``tf.custom_gradient`` function).
        source: the generated module's source.
        module: the loaded module.
    """

    name: str
    fn: Callable = field(repr=False)
    source: str = field(repr=False)
    module: types.ModuleType = field(repr=False)

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


def op(
    name: str, output: Optional[Expression] = None, *, inputs: Mapping[str, InputDecl],
    outputs: Optional[Mapping[str, Expression]] = None,
    where: Optional[Mapping[str, Expression]] = None, doc: Optional[str] = None,
    dtype: Optional[Union[str, Sequence[str]]] = None, memory: Optional[str] = None,
    fuse: Optional[str] = None, order: Optional[int] = None, verify: bool = True,
    audit: bool = True,
) -> GeneratedOp:
    """Generate one op and load it, for a notebook: ``op(...)(x)`` runs it.

    Args:
        name: the op's name.
        output: its expression (spec text or SymPy), or give ``outputs``.
        inputs, outputs, where, doc, dtype, memory, fuse, order: as for :class:`OpDef`;
            ``dtype`` is the op's (default float32).
        verify, audit: as for :func:`generate_source`.

    Returns:
        A :class:`GeneratedOp` (``.fn``, ``.source``).

    Raises:
        SpecError: see :func:`build_spec`.
        TypeError: see :func:`expression_text`.
        VerificationError: a derived gradient failed the numerical check.
    """
    definition = OpDef(name, inputs, output, outputs, where, doc, dtype, memory, fuse,
                       order)
    generated = _generate([definition], f"{name}_op", None, None, verify, audit)
    loaded = _import(generated)
    return GeneratedOp(name, getattr(loaded, name), generated.text, loaded)


__all__ = [
    "Expression", "GeneratedOp", "InputDecl", "OpDef", "SpecError", "UsageError",
    "build_spec", "expression_text", "generate_source", "load", "op", "spec_text",
]
