"""Render a :class:`gradgen.ir.ModuleIR` to Python source with Jinja templates.

Consumes: a module IR. Guarantees: :func:`render_module` returns the module's source
(before formatting). All decisions are made here in Python, through
:class:`gradgen.printer.TFPrinter`; the templates in ``templates/`` only loop over
prepared strings (``StrictUndefined``: a missing value is an error, never an empty
string). User text (docs) reaches the output only inside docstrings built by
:func:`docstring_literal`, which escapes anything that could end the string.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

import jinja2

from . import ir
from .printer import PrintError, TFPrinter, print_value

_CONTROL = {i for i in range(32)} - {9, 10} | {127}
LINE_LENGTH = 88


def templates_dir() -> Path:
    """The template folder: inside the installed package, or ``templates/`` of a checkout."""
    packaged = resources.files("gradgen") / "templates"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parent.parent / "templates"


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def docstring_literal(text: str) -> str:
    """A triple-quoted Python string literal whose value is ``text``.

    Backslashes, quote runs and control characters are escaped, so no text can end the
    literal early or inject code.
    """
    out = []
    for ch in text.replace("\r\n", "\n").replace("\r", "\n"):
        code = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif code in _CONTROL or 0x2028 <= code <= 0x2029 or code == 0xFEFF:
            out.append(f"\\x{code:02x}" if code < 256 else f"\\u{code:04x}")
        else:
            out.append(ch)
    body = "".join(out)
    body = "\n".join(line.rstrip() for line in body.split("\n"))
    return f'"""{body}\n"""' if "\n" in body else f'"""{body}"""'


@dataclass(frozen=True)
class _Line:
    comments: tuple[str, ...]
    code: str


def wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters; continuation lines are
    indented by four spaces (long formulas stay readable in comments and docstrings)."""
    return textwrap.wrap(
        text, width=width, subsequent_indent="    ", break_long_words=True,
        break_on_hyphens=False,
    ) or [""]


def _statements(
    printer: TFPrinter, statements, op: ir.OpIR, where: str, indent: int
) -> list[_Line]:
    lines = []
    for stmt in statements:
        try:
            code = f"{stmt.target} = {print_value(printer, stmt.value)}"
        except PrintError as e:
            raise RenderError(op, f"{where} cannot be generated: {e}") from None
        width = LINE_LENGTH - indent - 2
        comments = tuple(line for c in stmt.comments for line in wrap(c, width))
        lines.append(_Line(comments, code))
    return lines


class RenderError(Exception):
    """An IR value that the printer cannot print; names the op (a spec problem)."""

    def __init__(self, op: ir.OpIR, message: str):
        self.op = op
        super().__init__(message)


def _prose(text: str, width: int) -> list[str]:
    """User text wrapped to ``width``, keeping its line breaks and blank lines."""
    out = []
    for line in text.strip().splitlines():
        stripped = line.rstrip()
        if not stripped:
            out.append("")
            continue
        indent = stripped[: len(stripped) - len(stripped.lstrip())]
        out += textwrap.wrap(
            stripped.lstrip(), width=width, initial_indent=indent, subsequent_indent=indent,
            break_long_words=False, break_on_hyphens=False, expand_tabs=False,
            replace_whitespace=False,
        ) or [""]
    return out


def _op_docstring(op: ir.OpIR) -> str:
    width = LINE_LENGTH - 4
    summary = _prose(op.doc, width) if op.doc and op.doc.strip() else [f"The `{op.name}` op."]
    lines = [f"Forward ({op.dtype}):"]
    lines += [f"    {t}" for t in op.forward_text]
    partials = [p for p in op.partials if p.wrt in {i.name for i in op.inputs}]
    if partials:
        lines += ["", "Partial derivatives:"]
        lines += [f"    d({p.output})/d({p.wrt}) = {p.formula}" for p in partials]
    if op.memory == "recompute":
        lines += ["", "Memory: the gradient recomputes forward values from the inputs."]
    if op.rewrites:
        lines += ["", "Stable forms and guards used:"]
        lines += [f"    {r}" for r in op.rewrites]
    if op.vjp_text:
        lines += ["", "Vector-Jacobian products of the matrix operations:"]
        lines += [f"    {t}" for t in op.vjp_text]
    lines += ["", "Args:"]
    for inp in op.inputs:
        note = ""
        if not inp.differentiable:
            note = " Not differentiated: its gradient is None."
        if inp.is_integer:
            note += f" Cast to {op.dtype} where used."
        lines.append(f"    {inp.name}: {inp.dtype} tensor of shape {inp.shape_text}.{note}")
    lines += ["", "Returns:"]
    if op.single:
        lines.append(f"    {op.dtype} tensor of shape {op.outputs[0].shape_text}.")
    else:
        lines.append("    A tuple of:")
        lines += [f"    {o.name}: {op.dtype} tensor of shape {o.shape_text}." for o in op.outputs]
    lines += [
        "",
        "Raises:",
        "    TypeError: an argument is a tensor or variable of another dtype.",
        "    ValueError: an argument's static shape does not match its declaration.",
    ]
    wrapped = []
    for line in lines:  # formulas: continuation lines indented four more
        body = line.lstrip(" ")
        lead = line[: len(line) - len(body)]
        wrapped += [lead + part for part in wrap(body, width - len(lead))] if body else [""]
    return docstring_literal("\n".join(summary + [""] + wrapped))


def _op_view(op: ir.OpIR) -> tuple[dict, bool, set[str]]:
    """The template view of one op, whether it uses ``math``, and the module helpers
    (``_unbroadcast``, ``_logsumexp``, ``_check_named_dims``) it calls."""
    printer = TFPrinter(op.dtype)
    forward = _statements(printer, op.forward, op, "the forward pass", indent=4)
    backward = _statements(printer, op.backward, op, "the gradient", indent=8)
    helpers = set(printer.helpers)
    if any(isinstance(s.value, ir.Call) and _calls(s.value, "unbroadcast") for s in op.backward):
        helpers.add("_unbroadcast")
    if op.named_dims:
        helpers.add("_check_named_dims")
    checks = [
        f"{i.name} = _check_input({op.name!r}, {i.name!r}, {i.name}, tf.{i.dtype}, "
        f"{list(i.declared)!r})"
        for i in op.inputs
    ]
    if op.named_dims:
        uses = ", ".join(
            f"{dim!r}: [" + ", ".join(f"({n!r}, {n}, {axis})" for n, axis in places) + "]"
            for dim, places in op.named_dims
        )
        checks.append(f"_check_named_dims({op.name!r}, {{{uses}}})")
    params = ", ".join(i.name for i in op.inputs)
    grads = [i.grad if i.grad else "None" for i in op.inputs]
    outputs = [o.name for o in op.outputs]
    view = {
        "name": op.name,
        "impl": op.impl,
        "params": params,
        "docstring": _op_docstring(op),
        "checks": checks,
        "forward": forward,
        "upstreams": ", ".join(op.upstreams),
        "grad_fn": op.grad_fn,
        "backward": backward,
        "grad_returns": ", ".join(grads),
        "returns": outputs[0] if op.single else (
            f"({outputs[0]},)" if len(outputs) == 1 else "(" + ", ".join(outputs) + ")"
        ),
    }
    return view, printer.uses_math, helpers


def _calls(value: ir.Call, fn: str) -> bool:
    return value.fn == fn or any(isinstance(a, ir.Call) and _calls(a, fn) for a in value.args)


def render_module(module: ir.ModuleIR) -> str:
    """Render the module's source text (unformatted; see :mod:`gradgen.formatter`).

    Raises:
        RenderError: an op needs something the printer cannot print.
    """
    views, uses_math, helpers = [], False, set()
    for op in module.ops:
        view, op_math, op_helpers = _op_view(op)
        views.append(view)
        uses_math |= op_math
        helpers |= op_helpers
    doc = module.doc.strip() if module.doc and module.doc.strip() else (
        f"TensorFlow ops with custom gradients, generated by gradgen."
    )
    template = _environment().get_template("module.py.j2")
    return template.render(
        version=module.gradgen_version,
        spec_path=module.spec_path,
        spec_sha256=module.spec_sha256,
        docstring=docstring_literal("\n".join(_prose(doc, LINE_LENGTH))),
        uses_math=uses_math,
        helpers=sorted(helpers),
        ops=views,
    )


def render_tests(module: ir.ModuleIR, module_path: str, ranges: dict) -> str:
    """Render the pytest module that checks ``module``'s ops (see
    :func:`gradgen.emit.generate_tests`).

    Args:
        module: the generated module's IR.
        module_path: path of the generated module relative to the test's folder.
        ranges: {op name: (low, high) input range where verification sampled, or None}.
    """
    ops = []
    uses_math = False
    for op in module.ops:
        printer = TFPrinter(op.dtype)
        reference = _statements(printer, op.reference, op, "the reference forward", indent=4)
        uses_math |= printer.uses_math
        outputs = [o.name for o in op.outputs]
        low, high = ranges.get(op.name) or (0.5, 1.5)
        cases = [
            repr(
                (
                    op.name,
                    tuple(i.dtype for i in op.inputs),
                    tuple(i.differentiable for i in op.inputs),
                    tuple(tuple(s) for s in shapes),
                    (low, high),
                    op.solves,
                )
            )
            for shapes in op.example_shapes
        ]
        ops.append(
            {
                "name": op.name,
                "params": ", ".join(i.name for i in op.inputs),
                "reference": reference,
                "helpers": sorted(printer.helpers),
                "returns": outputs[0] if op.single else "(" + ", ".join(outputs) + ",)",
                "cases": cases,
            }
        )
    helpers = sorted({h for op in ops for h in op["helpers"]})
    template = _environment().get_template("test_module.py.j2")
    return template.render(
        version=module.gradgen_version,
        spec_path=module.spec_path,
        spec_sha256=module.spec_sha256,
        module=module.name,
        module_path=module_path,
        uses_math=uses_math,
        helpers=helpers,
        ops=ops,
    )


def starter_spec(module: str) -> str:
    """The commented starter spec that ``gradgen init`` writes (module name from the file
    name, made a valid identifier)."""
    import re

    from .naming import reserved_reason

    name = re.sub(r"[^A-Za-z0-9_]", "_", module).strip("_") or "ops"
    if not name[0].isalpha() or reserved_reason(name):
        name = f"ops_{name}".rstrip("_")
    return _environment().get_template("starter.yaml.j2").render(module=name)
