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
from .printer import PrintError, TFPrinter, print_value
from .runtime import with_dependencies
from .spec import COMPLEX_DTYPES, default_dtype
from .render import LINE_LENGTH, OpViews, _prose, chained, docstring_literal, wrap
from .safe import literal


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


# Stands for the accuracy audit's lines in a generic op's docstring text until every
# dtype's audit is known (user text cannot hold a NUL: spec.fields.DocText refuses it).
AUDIT_MARK = "\x00audit\x00"


def _dtypes_text(dtypes: tuple[str, ...]) -> str:
    return ", ".join(dtypes[:-1]) + f" or {dtypes[-1]}" if len(dtypes) > 1 else dtypes[0]


def _op_docstring(op: ir.OpIR, audit_lines: list[str] | None = None) -> str:
    return docstring_literal(_docstring_text(op, audit_lines or []))


def _docstring_text(op: ir.OpIR, audit_lines: list[str], dtypes: tuple | None = None) -> str:
    """The op's docstring text; ``dtypes``: the dtypes a generic op is generated for
    (its text then says "float16, bfloat16, float32 or float64" where one op says its
    dtype, and the forward's constants are those of ``op.dtype``)."""
    width = LINE_LENGTH - 4
    summary = _prose(op.doc, width) if op.doc and op.doc.strip() else [f"The `{op.name}` op."]
    dtype = _dtypes_text(dtypes) if dtypes else op.dtype
    lines = [f"Forward ({dtype}: the dtype of the arguments):" if dtypes
             else f"Forward ({op.dtype}):"]
    lines += [f"    {t}" for t in op.forward_text]
    partials = [p for p in op.partials if p.wrt in {i.name for i in op.inputs}]
    if partials:
        lines += ["", "Partial derivatives:"]
        for p in partials:
            lines.append(f"    d({p.output})/d({p.wrt}) = {p.formula}")
            lines += [f"        {point}" for point in p.limits]
    if op.memory == "recompute":
        lines += ["", "Memory: the gradient recomputes forward values from the inputs."]
    if op.rewrites:
        lines += ["", "Stable forms and guards used:"]
        lines += [f"    {r}" for r in op.rewrites]
    lines += _orders_text(op)
    if op.vjp_text:
        lines += ["", "Vector-Jacobian products of the matrix operations:"]
        lines += [f"    {t}" for t in op.vjp_text]
    if op.reduction_vjp_text:
        lines += ["", "Vector-Jacobian products of the reductions:"]
        lines += [f"    {t}" for t in op.reduction_vjp_text]
    for audit_line in audit_lines:
        lines += ["", audit_line]
    lines += ["", "Args:"]
    for inp in op.inputs:
        note = ""
        if not inp.differentiable:
            note = " Not differentiated: its gradient is None."
        if inp.is_integer:
            note += (" Cast to the op's dtype where used." if dtypes
                     else f" Cast to {op.dtype} where used.")
        kind = dtype if dtypes and not inp.is_integer else inp.dtype
        lines.append(f"    {inp.name}: {kind} tensor of shape {inp.shape_text}.{note}")
    lines += ["", "Returns:"]
    if op.single:
        lines.append(f"    {dtype} tensor of shape {op.outputs[0].shape_text}.")
    else:
        lines.append("    A tuple of:")
        lines += [f"    {o.name}: {dtype} tensor of shape {o.shape_text}." for o in op.outputs]
    type_error = ("    TypeError: tensor arguments of different dtypes, or of a dtype not "
                  "listed above." if dtypes else
                  "    TypeError: an argument is a tensor or variable of another dtype.")
    lines += [
        "",
        "Raises:",
        type_error,
        "    ValueError: an argument's static shape does not match its declaration, or "
        "a number in it would change on conversion to its dtype.",
        "    tf.errors.InvalidArgumentError: (when the graph runs) a shape unknown while "
        "tracing does not match.",
    ]
    return "\n".join(summary + [""] + _wrapped(lines, width))


def _orders_text(op: ir.OpIR) -> list[str]:
    """The docstring's paragraph on higher orders (none for ``order: 1``)."""
    if op.levels:
        names = ", ".join(f"`{op.impl[:-len('_vjp')]}{'_grad' * k}_vjp`"
                          for k in range(1, len(op.levels) + 1))
        top = len(op.levels) + 1
        return ["", f"Higher orders: derived to order {top} ({names}), with the same "
                "stable forms and guards; beyond it, TensorFlow's autodiff of the last."]
    if op.level_note:
        return ["", "Higher orders: TensorFlow's autodiff of this VJP (order 2 not "
                f"derived: {op.level_note})."]
    return []


def _wrapped(lines: list[str], width: int) -> list[str]:
    wrapped = []
    for line in lines:  # formulas: continuation lines indented four more
        body = line.lstrip(" ")
        lead = line[: len(line) - len(body)]
        wrapped += [lead + part for part in wrap(body, width - len(lead))] if body else [""]
    return wrapped


def with_audit_line(views: OpViews, op: ir.OpIR, line: str | list[str],
                    dtypes: tuple | None = None) -> OpViews:
    """``views`` with the accuracy audit's sentence (see
    :mod:`gradgen.stability.audit.report`; a list: one per derived order) in the op's
    docstring, before ``Args:``; for one dtype of a generic op (``dtypes``: all of
    them), also the generic docstring's text with :data:`AUDIT_MARK` where every
    dtype's sentences go."""
    line = [line] if isinstance(line, str) else list(line)
    views.module = dict(views.module, docstring=_op_docstring(op, line))
    if dtypes:
        views.module["generic_doc"] = _docstring_text(op, [AUDIT_MARK], dtypes)
        views.module["generic_checks"] = _checks(op, dtypes)
        views.module["dtype_variable"] = dtype_variable(op)
        views.module["audit_line"] = line
    return views


# What a dtype's tf.custom_gradient function is made of (its view's keys).
_BODY_KEYS = ("forward", "upstreams", "grad_fn", "recompute", "recomputed", "backward",
              "grad_returns", "returns", "fused", "levels", "forward_mode")
# What a higher order's tf.custom_gradient function is made of.
_LEVEL_KEYS = ("params", "forward", "upstreams", "grad_fn", "backward", "grad_returns",
               "returns")


def _jvp_from_vjp(op: ir.OpIR) -> bool:
    """Whether forward mode takes ``op``'s JVPs from its VJPs (``_with_jvp``): for real,
    elementwise ops with a differentiable input. There the transpose of each VJP
    multiplies the same partials by the tangents; a reduction's or matrix op's VJP,
    transposed, can cancel where it does not (log_softmax's Hessian entry p(1 - p) at
    p = 1 - 8e-43 came out 0), so those keep TensorFlow's forward mode of the code."""
    from .stability.audit.mirror import elementwise_reason

    return (op.dtype not in COMPLEX_DTYPES and any(i.grad for i in op.inputs)
            and elementwise_reason(op) is None)


def _helpers(op: ir.OpIR, view: dict, printer: TFPrinter, levels: list) -> set[str]:
    """The runtime helpers ``op``'s functions call: those its printed code and its
    derived orders' (``levels``: their views) call, and those ``view`` wraps them in."""
    helpers = set(printer.helpers) | {"_check_input"}  # every op checks its inputs
    # (the op's own view says whether its functions call _with_jvp)
    helpers.update(h for v in levels for h in v.helpers
                   if h not in ("_check_input", "_with_jvp"))
    if op.named_dims:
        helpers.add("_check_named_dims")
    if view["fused"]:
        helpers.add("_fused_kernels")
    if view["forward_mode"]:
        helpers.add("_with_jvp")
    return helpers


def kernel_names(impl: str) -> dict:
    """The names of a fused op's two XLA kernels, from its ``tf.custom_gradient``
    function's (``_name_vjp``: ``_name_forward`` and ``_name_backward``)."""
    base = impl[: -len("_vjp")]
    return {"forward_kernel": f"{base}_forward", "backward_kernel": f"{base}_backward"}


def _kernels(op: ir.OpIR, printer: TFPrinter) -> dict:
    """The views of ``fuse: xla``: the forward and the VJP each one function for
    ``tf.function(jit_compile=True)``. The forward kernel returns the outputs and, with
    ``memory: save``, the forward values the VJP uses; the VJP kernel takes the inputs,
    those values and the upstream gradients (with ``memory: recompute`` it computes the
    forward values again, inside the kernel, from the inputs alone)."""
    outputs = [o.name for o in op.outputs]
    if op.memory == "recompute":
        body, used = op.recomputed + op.backward, set()
    else:
        body = op.backward
        used = {sym.name for stmt in op.backward for e in ir.value_exprs(stmt.value)
                for sym in e.free_symbols}
    saved = [s.target for s in op.forward if s.target in used and s.target not in outputs]
    inputs = [i.name for i in op.inputs]
    params = inputs + [o for o in outputs if o in used] + saved + list(op.upstreams)
    return {
        "kernel_returns": ", ".join(outputs + saved),
        "kernel_backward": _statements(printer, body, op, "the gradient", indent=4),
        "kernel_backward_params": ", ".join(params),
        "kernel_grads": ", ".join(i.grad for i in op.inputs if i.grad),
    }


def generic_views(dtypes: tuple[str, ...], variants: list[OpViews]) -> OpViews:
    """One op generated for several float dtypes: a public function that takes the
    arguments' dtype (``_common_dtype``), checks and converts them, and calls that
    dtype's ``tf.custom_gradient`` function; each dtype's forward and VJP are derived,
    guarded and audited as a one-dtype op would be (``variants``, in ``dtypes`` order,
    each from :func:`with_audit_line` with ``dtypes``).

    The choice among the functions is made while tracing (a Python ``if`` on a static
    dtype), so it costs nothing when the graph runs.
    """
    default = variants[dtypes.index(default_dtype(dtypes))]
    name, params = default.module["name"], default.module["params"]
    # dtypes whose code is the same (no dtype-dependent constant, guard or form) share
    # one function
    groups: dict[str, list] = {}
    for d, v in zip(dtypes, variants):
        body = repr([v.module[k] for k in _BODY_KEYS])
        groups.setdefault(body, [[], v])[0].append(d)
    impls, tests = [], []
    for group, v in groups.values():
        if len(groups) == 1:
            impl, note = f"_{name}_vjp", " in every dtype"
        else:
            impl, note = f"_{name}_{'_'.join(group)}_vjp", f" in {_dtypes_text(group)}"
        impls.append(chained(dict(v.module, impl=impl, dtype_note=note,
                                  **(kernel_names(impl) if v.module["fused"] else {}))))
        tests.append(" or ".join(f"{default.module['dtype_variable']} == tf.{d}"
                                 for d in group))
    dispatch = []
    for test, impl in zip(tests[:-1], impls[:-1]):
        dispatch += [f"if {test}:", f"    return {impl['impl']}({params})"]
    dispatch.append(f"return {impls[-1]['impl']}({params})")
    module = {
        "name": name,
        "params": params,
        "docstring": generic_docstring(default, variants),
        "checks": default.module["generic_checks"],
        "dispatch": dispatch,
        "impls": impls,
        "variants": list(dtypes),
    }
    helpers = {h for v in variants for h in v.helpers} | {"_common_dtype"}
    return OpViews(
        module=module,
        uses_math=any(v.uses_math for v in variants),
        helpers=sorted(helpers),
        test=default.test,
        test_math=any(v.test_math for v in variants),
        test_helpers=sorted({h for v in variants for h in v.test_helpers}),
        cases=[c for v in variants for c in v.cases],
    )


def generic_test_views(dtypes: tuple[str, ...], variants: list[OpViews]) -> list[OpViews]:
    """The emitted tests' views of a generic op: each dtype's cases, all with the one
    reference forward (in float64)."""
    return [
        OpViews(module=v.module, uses_math=v.uses_math, helpers=v.helpers,
                test=dict(v.test, range_key=f"{v.test['name']} ({d})"),
                test_math=v.test_math, test_helpers=v.test_helpers, cases=v.cases)
        for d, v in zip(dtypes, variants)
    ]


def generic_docstring(default: OpViews, variants: list[OpViews]) -> str:
    """The public docstring of an op generated for several dtypes: the default dtype's
    text, with the accuracy audit's sentence of every dtype."""
    lines = []
    for i, variant in enumerate(variants):
        for k, line in enumerate(variant.module["audit_line"]):
            lines += ([""] if i or k else []) + _wrapped([line], LINE_LENGTH - 4)
    return docstring_literal(default.module["generic_doc"].replace(AUDIT_MARK,
                                                                   "\n".join(lines)))


def dtype_variable(op: ir.OpIR) -> str:
    """The public function's local that holds a generic op's dtype (``dtype``, unless an
    input has that name)."""
    return "dtype_" if any(i.name == "dtype" for i in op.inputs) else "dtype"


def _checks(op: ir.OpIR, dtypes: tuple | None = None) -> list[str]:
    """The public function's argument checks; for a generic op (``dtypes``) first the
    dtype of the arguments, which its float inputs are then converted to."""
    checks = []
    dtype = dtype_variable(op)
    if dtypes:
        follow = ", ".join(f"{i.name!r}: {i.name}" for i in op.inputs if not i.is_integer)
        allowed = ", ".join(f"tf.{d}" for d in dtypes)
        checks.append(f"{dtype} = _common_dtype({op.name!r}, {{{follow}}}, ({allowed}), "
                      f"tf.{default_dtype(dtypes)})")
    checks += [
        f"{i.name} = _check_input({op.name!r}, {i.name!r}, {i.name}, "
        f"{dtype if dtypes and not i.is_integer else 'tf.' + i.dtype}, "
        f"{literal(list(i.declared))})"
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
    return checks


def _cast_to(value, dtype: str):
    """``value`` with an integer input's cast (its only Call in a reference statement)
    converting to ``dtype``: the reference computes in float64, not the op's dtype."""
    if isinstance(value, ir.Call) and value.fn == "cast":
        return ir.Call("cast", value.args, (("dtype", dtype),))
    return value


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
    checks = _checks(op)
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
        "fused": op.fuse == "xla" and any(i.grad for i in op.inputs),
        "forward_mode": _jvp_from_vjp(op),
    }
    if view["fused"]:
        view.update(_kernels(op, printer), **kernel_names(op.impl))
    levels = [op_views(level) for level in op.levels]
    view["levels"] = [{k: v.module[k] for k in _LEVEL_KEYS} for v in levels]
    helpers = _helpers(op, view, printer, levels)
    # the forward as written, in float64 (complex128): the emitted tests compare the op,
    # in its own dtype, with its autodiff and its central differences there, which
    # resolve what the op's dtype cannot (float32 differences at inputs of order 1e4)
    # and do not overflow where the naive form would in the op's dtype
    wide = "complex128" if op.dtype in COMPLEX_DTYPES else "float64"
    test_printer = TFPrinter(wide)
    reference = _statements(test_printer, tuple(
        ir.Statement(s.target, _cast_to(s.value, wide), s.comments) for s in op.reference
    ), op, "the reference forward", indent=4)
    outputs = [o.name for o in op.outputs]
    test = {
        "name": op.name,
        "params": params,
        "reference": reference,
        "returns": outputs[0] if op.single else "(" + ", ".join(outputs) + ",)",
    }
    domains = [list(i.domain) if i.domain else None for i in op.inputs]
    cases = [
        [op.name, [i.dtype for i in op.inputs], [i.differentiable for i in op.inputs],
         [list(s) for s in shapes], domains, op.solves]
        for shapes in op.example_shapes
    ]
    # the emitted tests take the reference's helpers from the runtime module, which holds
    # what the folder's modules import and the helpers those call: a helper only the
    # reference calls is imported by the module too, so that the runtime holds it
    helpers |= set(test_printer.helpers) - with_dependencies(helpers)
    return OpViews(
        module=view,
        uses_math=printer.uses_math or any(v.uses_math for v in levels),
        helpers=sorted(helpers),
        test=test,
        test_math=test_printer.uses_math,
        test_helpers=sorted(test_printer.helpers),
        cases=cases,
    )
