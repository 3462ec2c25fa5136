"""The runtime helpers that generated code calls, each declared once.

Receives: names of helpers that printed code calls (:attr:`gradgen.printer.TFPrinter.helpers`
and those the views add, such as ``_check_input``), or the source of a generated module.
Returns: the helpers those names need, with every helper they call
(:func:`with_dependencies`), in the one fixed order they are written in
(:func:`ordered`), each with its template file (``templates/runtime/``); and the names
a module's source imports from the runtime (:func:`imported_names`).

:data:`HELPERS` is the registry: a helper's name, its template, the helpers it calls,
whether it needs ``import math``, and what it does. The printer and the views name
helpers from it, the function registry's ``helper`` field (:mod:`gradgen.functions`)
names entries of it, and :mod:`gradgen.render` writes the runtime module
(:data:`FILE`) that every output folder holds: the helpers its generated modules
import, each once. This module imports neither SymPy nor TensorFlow.
"""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import dataclass

#: the runtime module of an output folder, which its generated modules import from
MODULE = "_gradgen_runtime"
FILE = f"{MODULE}.py"


@dataclass(frozen=True)
class Helper:
    """One runtime helper.

    Attributes:
        name: the function generated code calls (``_unbroadcast``).
        template: its code, relative to ``templates/`` (``runtime/unbroadcast.py.j2``);
            the file may also hold constants and private functions only it uses.
        description: what it does, in one line (the runtime module writes it above the
            helper, as ``# <name>: <description>.``, within 88 characters).
        calls: the other helpers its code calls.
        uses_math: its code uses the ``math`` module.
        wraps: the ``tf.custom_gradient`` functions call it around the printed code
            (which never calls it, so the accuracy audit's stand-in leaves it out).
    """

    name: str
    template: str
    description: str
    calls: tuple[str, ...] = ()
    uses_math: bool = False
    wraps: bool = False


def _helper(name: str, description: str, calls: tuple[str, ...] = (),
            uses_math: bool = False, wraps: bool = False) -> Helper:
    return Helper(name, f"runtime/{name.lstrip('_')}.py.j2", description, calls, uses_math,
                  wraps)


#: every helper, in the order generated code holds them
HELPERS: tuple[Helper, ...] = (
    _helper("_check_input", "an argument converted to its declared dtype, its shape checked",
            ("_check_representable", "_dtype_of")),
    _helper("_check_representable",
            "refuses a host value that conversion to the dtype would change"),
    _helper("_dtype_of", "the dtype of a tensor, variable or NumPy value (None for Python "
            "numbers)"),
    _helper("_fused_kernels", "a fused op's XLA kernels, or their code without XLA for small "
            "tensors"),
    _helper("_common_dtype", "the dtype an op generated for several float dtypes computes in",
            ("_dtype_of",)),
    _helper("_check_named_dims", "checks that each named dim has one size wherever it is "
            "declared"),
    _helper("_logsumexp", "log(exp(t1) + exp(t2) + ...), elementwise, without overflow"),
    _helper("_log1mexp", "log(1 - exp(x)) for x <= 0, accurate on both sides of -log(2)"),
    _helper("_lse_parts", "the parts m and log1p(s) of log(sum(exp(x), axis)), for the "
            "reductions"),
    _helper("_reduce_logsumexp", "log(sum(exp(x), axis)), or of the mean, with a softmax VJP",
            ("_lse_parts", "_softmax")),
    _helper("_log_softmax", "x - logsumexp(x, axis) without cancellation, with its VJP",
            ("_lse_parts", "_log_softmax_grad")),
    _helper("_softmax", "softmax(x, axis), shifted by the largest term, with its VJP",
            ("_softmax_grad",)),
    _helper("_softmax_grad", "the VJP of softmax, accurate where one term dominates"),
    _helper("_log_softmax_grad", "the VJP of log_softmax, accurate where one term dominates"),
    _helper("_extremum_grad", "the VJP of reduce_max and reduce_min: ties share the cotangent"),
    _helper("_logcosh", "log(cosh(x)) without overflow or cancellation"),
    _helper("_erf", "erf(x), finite where TensorFlow's float64 kernel is NaN (|x| >= 1e155)"),
    _helper("_erfcx", "exp(x**2) * erfc(x), by an asymptotic series where erfc underflows"),
    _helper("_erfcx_recip", "1 / erfcx(x), finite where erfcx(x) is subnormal",
            ("_erfcx",)),
    _helper("_erfcx_recip_slope", "the derivative of 1 / erfcx(x), in float64",
            ("_erfcx_recip",)),
    _helper("_log_erfc", "log(erfc(x)) without the underflow of erfc", ("_erfcx",)),
    _helper("_hypot", "sqrt(t1**2 + t2**2 + ...) without overflow or underflow of the "
            "squares"),
    _helper("_finite_or", "a product where finite, else the same from its factors' "
            "logarithms"),
    # its general branch computes det(a) * inverse(a), with _complex_det for complex a
    _helper("_cofactor", "the cofactor matrix det(a) * inverse(a)^T, finite where a is "
            "singular", ("_complex_det",)),
    _helper("_complex_det", "det of complex matrices, with the conjugated VJP",
            ("_cofactor",)),
    _helper("_logabsdet", "log|det(a)|: slogdet, or a QR where XLA compiles the graph"),
    _helper("_with_jvp", "values carrying, for forward mode, the JVP their derived VJP "
            "transposes", ("_jvp_of",), wraps=True),
    _helper("_jvp_of", "the JVP that a VJP transposes, as the tangent of zeros",
            wraps=True),
    _helper("_unbroadcast", "a gradient summed over the axes broadcasting added (run-time "
            "shapes)"),
)

BY_NAME: dict[str, Helper] = {h.name: h for h in HELPERS}


def helper(name: str) -> str:
    """``name``, checked to be a declared helper (what printers record).

    Raises:
        KeyError: no helper has that name (a gradgen bug).
    """
    return BY_NAME[name].name


def with_dependencies(names) -> set[str]:
    """``names`` and every helper they call, transitively.

    Raises:
        KeyError: a name is not a declared helper.
    """
    out: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name not in out:
            out.add(name)
            todo.extend(BY_NAME[name].calls)
    return out


def ordered(names) -> list[Helper]:
    """The helpers ``names`` need (:func:`with_dependencies`), in :data:`HELPERS`' order."""
    needed = with_dependencies(names)
    return [h for h in HELPERS if h.name in needed]


#: the most text before a module's first definition that :func:`imported_names` parses
#: (a generated module's is its header, docstring and imports)
MAX_PREAMBLE = 2 << 20


def imported_names(source: str) -> set[str]:
    """The names ``source`` (a generated module) takes from the runtime module: each
    ``name = _runtime.name`` after ``from . import _gradgen_runtime as _runtime`` (or
    ``import _gradgen_runtime as _runtime``), as gradgen writes them, and the names of
    ``from ._gradgen_runtime import ...`` or ``from _gradgen_runtime import ...`` (the
    form of earlier builds, which a folder may still hold).

    Only what comes before the first top-level ``def``, ``class`` or decorator is read
    (a generated module imports its helpers there), with :mod:`tokenize` and
    :mod:`ast`: never run, and in time and memory bounded by :data:`MAX_PREAMBLE`.
    Empty when that part is not Python or is larger (not a module gradgen wrote)."""
    try:
        preamble = _preamble(source)
        if len(preamble) > MAX_PREAMBLE:
            return set()
        tree = ast.parse(preamble)
    except (SyntaxError, ValueError, RecursionError, MemoryError, tokenize.TokenError):
        return set()
    nodes = list(ast.walk(tree))
    return {
        alias.name
        for node in nodes
        if isinstance(node, ast.ImportFrom) and node.module == MODULE and node.level <= 1
        for alias in node.names
    } | _bound_names(nodes)


def _bound_names(nodes) -> set[str]:
    """The ``name`` of each ``name = <alias>.name`` among ``nodes``, where ``<alias>`` is
    what the runtime module was imported as (``from . import _gradgen_runtime as
    <alias>`` or ``import _gradgen_runtime as <alias>``)."""
    aliases = {
        alias.asname or alias.name
        for node in nodes
        if (isinstance(node, ast.ImportFrom) and node.module is None and node.level == 1)
        or isinstance(node, ast.Import)
        for alias in node.names
        if alias.name == MODULE
    }
    return {
        node.value.attr
        for node in nodes
        if isinstance(node, ast.Assign) and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Attribute)
        and isinstance(node.value.value, ast.Name) and node.value.value.id in aliases
        and node.targets[0].id == node.value.attr
    }


def _preamble(source: str) -> str:
    """``source`` up to the line of its first top-level definition (all of it if none)."""
    lines = io.StringIO(source)
    for token in tokenize.generate_tokens(lines.readline):
        if token.start[1] == 0 and token.string in ("def", "class", "@", "async"):
            return "".join(source.splitlines(keepends=True)[: token.start[0] - 1])
        if token.start[0] > 1 and lines.tell() > MAX_PREAMBLE:
            return source[: MAX_PREAMBLE + 1]  # too long: not a generated module's
    return source
