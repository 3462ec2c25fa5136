"""IR -> template views: every op printed to strings, ready for the templates.

Consumes: an :class:`gradgen.ir.OpIR`. Guarantees: :func:`op_views` returns an
:class:`OpViews`: plain, JSON-serializable data (strings, lists, dicts) for the module
template and for the emitted-test template, printed through
:class:`gradgen.printer.TFPrinter`, plus what the module needs around the op (the
``math`` import, helper functions). Being plain data, views can be cached between runs
(:mod:`gradgen.cache`) so an unchanged op is not derived or printed again. Raises
:class:`RenderError` (naming the op) when a value cannot be printed.
"""

from __future__ import annotations

from . import ir
from .printer import PrintError, TFPrinter, print_value, with_dependencies
from .render import LINE_LENGTH, OpViews, _prose, docstring_literal, wrap


class RenderError(Exception):
    """An IR value that the printer cannot print; names the op (a spec problem)."""

    def __init__(self, op_name: str, message: str):
        self.op_name = op_name
        super().__init__(message)


def _statements(printer: TFPrinter, statements, op: ir.OpIR, where: str, indent: int) -> list:
    lines = []
    for stmt in statements:
        try:
            code = f"{stmt.target} = {print_value(printer, stmt.value)}"
        except PrintError as e:
            raise RenderError(op.name, f"{where} cannot be generated: {e}") from None
        width = LINE_LENGTH - indent - 2
        comments = [line for c in stmt.comments for line in wrap(c, width)]
        lines.append({"comments": comments, "code": code})
    return lines


def _op_docstring(op: ir.OpIR, audit_line: str | None = None) -> str:
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
    if audit_line:
        lines += ["", audit_line]
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
        "    ValueError: an argument's static shape does not match its declaration, or "
        "a number in it would change on conversion to its dtype.",
        "    tf.errors.InvalidArgumentError: (when the graph runs) a shape unknown while "
        "tracing does not match.",
    ]
    wrapped = []
    for line in lines:  # formulas: continuation lines indented four more
        body = line.lstrip(" ")
        lead = line[: len(line) - len(body)]
        wrapped += [lead + part for part in wrap(body, width - len(lead))] if body else [""]
    return docstring_literal("\n".join(summary + [""] + wrapped))


def with_audit_line(views: OpViews, op: ir.OpIR, line: str) -> OpViews:
    """``views`` with the accuracy audit's sentence (see
    :mod:`gradgen.stability.audit.report`) in the op's docstring, before ``Args:``."""
    views.module = dict(views.module, docstring=_op_docstring(op, line))
    return views


def op_views(op: ir.OpIR) -> OpViews:
    """Print one op for the module template and the emitted-test template.

    Raises:
        RenderError: a value has no TensorFlow form.
    """
    printer = TFPrinter(op.dtype)
    forward = _statements(printer, op.forward, op, "the forward pass", indent=4)
    recompute = op.memory == "recompute"
    indent = 12 if recompute else 8  # recompute: the body is in a `with` block
    recomputed = _statements(printer, op.recomputed, op, "the gradient", indent)
    backward = _statements(printer, op.backward, op, "the gradient", indent)
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
        # every (input, axis) place of each dim, an input's repeated axes included; the
        # call returns the inputs it checked (the run-time comparisons gate them)
        declaring = {n for _, places in op.named_dims for n, _ in places}
        named = [i.name for i in op.inputs if i.name in declaring]
        inputs = ", ".join(f"{n!r}: {n}" for n in named)
        uses = ", ".join(
            f"{dim!r}: [" + ", ".join(f"({n!r}, {axis})" for n, axis in places) + "]"
            for dim, places in op.named_dims
        )
        targets = ", ".join(named) + ("," if len(named) == 1 else "")
        checks.append(
            f"{targets} = _check_named_dims({op.name!r}, {{{inputs}}}, {{{uses}}})"
        )
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
        "recompute": recompute,
        "recomputed": recomputed,
        "backward": backward,
        "grad_returns": ", ".join(grads),
        "returns": outputs[0] if op.single else (
            f"({outputs[0]},)" if len(outputs) == 1 else "(" + ", ".join(outputs) + ")"
        ),
    }
    test_printer = TFPrinter(op.dtype)
    reference = _statements(test_printer, op.reference, op, "the reference forward", indent=4)
    outputs = [o.name for o in op.outputs]
    test = {
        "name": op.name,
        "params": params,
        "reference": reference,
        "returns": outputs[0] if op.single else "(" + ", ".join(outputs) + ",)",
    }
    cases = [
        [op.name, [i.dtype for i in op.inputs], [i.differentiable for i in op.inputs],
         [list(s) for s in shapes], op.solves]
        for shapes in op.example_shapes
    ]
    return OpViews(
        module=view,
        uses_math=printer.uses_math,
        helpers=sorted(with_dependencies(helpers)),
        test=test,
        test_math=test_printer.uses_math,
        test_helpers=sorted(with_dependencies(test_printer.helpers)),
        cases=cases,
    )


def _calls(value: ir.Call, fn: str) -> bool:
    return value.fn == fn or any(isinstance(a, ir.Call) and _calls(a, fn) for a in value.args)
