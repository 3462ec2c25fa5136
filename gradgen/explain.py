"""``gradgen explain``: what gradgen derived for each op, readably.

Consumes: a spec path and optionally an op name. Guarantees: :func:`explain_spec`
returns text (or Markdown with LaTeX formulas, for a pull-request comment) listing, per
op, the forward computation, every partial derivative, the stable rewrites and guards
used, the VJP rules of matrix operations, how each input's gradient is unbroadcast
(reduction axes and why), and the accuracy audit (:mod:`gradgen.stability.audit`:
points tried, NaN or inf where the exact value is finite, worst error and where). It
derives and audits but does not verify or write anything, and does not import
TensorFlow.
"""

from __future__ import annotations

from functools import partial

from .derive.regimes import MORE_ACCURATE
from .pipeline import derive_op
from .errors import UsageError
from .pinned import latex
from .printer import TFPrinter
from .safe import markdown_text
from .spec import load_spec


def explain_spec(
    path: str, op_name: str | None = None, fmt: str = "text", dtype: str | None = None
) -> str:
    """Explain the ops of the spec at ``path`` (only ``op_name`` if given). An op
    generated for several dtypes is explained in ``dtype`` (default: the dtype it
    computes in for Python numbers), each dtype's derivation being its own.

    Raises:
        SpecError: the spec is invalid.
        UsageError: no op of that name; ``dtype`` is not one an explained op is
            generated for.
    """
    from .spec import default_dtype, dtype_variant

    doc = load_spec(path)
    names = [op.name for op in doc.model.ops]
    if op_name is not None and op_name not in names:
        raise UsageError(f"{path} has no op '{op_name}' (its ops: {', '.join(names)})")
    sections = []
    for index, name in enumerate(names):
        if op_name is not None and name != op_name:
            continue
        declared = doc.model.ops[index].dtype
        dtypes = tuple(declared) if isinstance(declared, list) else (declared,)
        if dtype is not None and dtype not in dtypes:
            raise UsageError(f"op '{name}' is generated for {', '.join(dtypes)}, not {dtype}")
        shown = (dtype or default_dtype(dtypes)) if len(dtypes) > 1 else dtypes[0]
        variant = dtype_variant(doc, index, shown) if len(dtypes) > 1 else doc
        op, audit = _derived_audited(variant, index)
        where = doc.location(("ops", index))
        note = (f"generated for {', '.join(dtypes)}; shown in {shown} (see --dtype)"
                if len(dtypes) > 1 else None)
        sections.append(_markdown(op, where, audit, note) if fmt == "markdown"
                        else _text(op, where, audit, note))
    return "\n".join(sections)


def _derived_audited(doc, index: int):
    """``(op IR, audit or None)``: derived and audited as the build does it (regimes
    included: :func:`gradgen.accuracy.audited`), not verified; the audit None where the
    op's code cannot be printed (the build reports that)."""
    from .accuracy import audited
    from .views import RenderError, op_views

    op = derive_op(doc, index)
    try:
        views = op_views(op)
    except RenderError:
        return op, None
    op, _, _, audit = audited(doc, index, False, (op, views, None))
    return op, audit


def _audit(op, level: bool = False):
    """The op's accuracy audit (:mod:`gradgen.stability.audit`), or None when its code
    cannot be printed (the build reports that). ``level``: a derived order's VJP op of
    an elementwise op (as the build audits it)."""
    from .stability.audit import audit_in_budget
    from .views import RenderError, op_views

    try:
        views = op_views(op)
    except RenderError:
        return None
    return audit_in_budget(op, views, partial(TFPrinter, op.dtype), level=level)


def _text(op, where, audit=None, note=None) -> str:
    lines = [f"op {op.name}  ({where})"]
    if op.doc:
        lines.append(f"  {op.doc.strip()}")
    if note:
        lines.append(f"  {note}")
    lines.append(f"  forward ({op.dtype}):")
    lines += [f"    {t}" for t in op.forward_text]
    lines += [f"    {t}: {MORE_ACCURATE}" for t in op.value_regimes]
    lines.append("  partial derivatives:")
    for p in op.partials:
        lines.append(f"    d({p.output})/d({p.wrt}) = {p.formula}")
        lines += [f"      {point}" for point in p.limits]
        lines += [f"      {p.regime}: {MORE_ACCURATE}"] if p.regime else []
    if not op.partials:
        lines.append("    none")
    if op.vjp_text:
        lines.append("  matrix VJPs:")
        lines += [f"    {t}" for t in op.vjp_text]
    if op.reduction_vjp_text:
        lines.append("  reduction VJPs:")
        lines += [f"    {t}" for t in op.reduction_vjp_text]
    lines.append("  stable rewrites and guards:")
    lines += [f"    {r}" for r in op.rewrites] or ["    none"]
    lines.append("  gradients:")
    lines += _gradient_lines(op, "    ")
    if audit is not None:
        from .stability.audit.report import explain_lines

        lines.append("  accuracy audit:")
        lines += explain_lines(audit, "    ")
    lines += _orders(op, audit is not None)
    return "\n".join(lines) + "\n"


def _orders(op, audited: bool) -> list[str]:
    """The higher orders: derived (each its VJP op's partials' count and audit), or why
    not (``order: 1`` says nothing)."""
    if op.level_note:
        return ["  higher orders: TensorFlow's autodiff of the VJP (order 2 not derived: "
                f"{op.level_note})"]
    from .stability.audit.mirror import elementwise_reason

    lines, elementwise = [], elementwise_reason(op) is None
    for k, level in enumerate(op.levels, start=2):
        lines.append(f"  order {k}: derived ({level.impl[1:-len('_vjp')]}: "
                     f"{len(level.partials)} partial derivatives of the order-{k - 1} "
                     "gradient)")
        for p in level.partials:  # the points filled with a limit, as at order 1
            if p.limits:
                lines.append(f"    d({p.output})/d({p.wrt}):")
                lines += [f"      {point}" for point in p.limits]
        audit = _audit(level, elementwise) if audited else None
        if audit is not None:
            from .stability.audit.report import explain_lines

            lines.append(f"  accuracy audit of order {k}:")
            lines += explain_lines(audit, "    ")
    return lines


def _gradient_lines(op, indent: str) -> list[str]:
    reductions = dict(op.reductions)
    out = []
    for i in op.inputs:
        if not i.grad:
            why = "integer input" if i.is_integer else "not differentiable"
            out.append(f"{indent}{i.name} {i.shape_text}: None ({why})")
            continue
        plans = reductions.get(i.name) or ("does not affect any output: zeros",)
        out.append(f"{indent}{i.name} {i.shape_text}: " + "; ".join(plans))
    return out


def _latex(expr) -> str:
    return latex(expr) if expr is not None else ""


def _markdown(op, where, audit=None, note=None) -> str:
    lines = [f"### `{op.name}`", ""]
    if op.doc:  # user text: escaped, so it cannot open a section, HTML or a link
        lines += [markdown_text(op.doc.strip()), ""]
    if note:
        lines += [markdown_text(note.capitalize()) + ".", ""]
    lines += [f"Spec: {markdown_text(str(where))}; dtype `{op.dtype}`.", "", "**Forward**",
              ""]
    lines += [f"- $\\mathrm{{{_tex_name(n)}}} = {_latex(e)}$" for n, e in op.forward_exprs]
    lines += [f"  - {markdown_text(t)}: {MORE_ACCURATE}" for t in op.value_regimes]
    lines += ["", "**Partial derivatives**", ""]
    for p in op.partials:
        lines.append(
            f"- $\\dfrac{{\\partial\\,\\mathrm{{{_tex_name(p.output)}}}}}"
            f"{{\\partial\\,\\mathrm{{{_tex_name(p.wrt)}}}}} = {_latex(p.expr)}$"
        )
        lines += [f"  - {markdown_text(p.regime)}: {MORE_ACCURATE}"] if p.regime else []
    if not op.partials:
        lines.append("- none")
    if op.vjp_text:
        lines += ["", "**Matrix VJPs**", ""] + [f"- `{t}`" for t in op.vjp_text]
    if op.reduction_vjp_text:
        lines += ["", "**Reduction VJPs**", ""] + [f"- `{t}`" for t in op.reduction_vjp_text]
    lines += ["", "**Stable rewrites and guards**", ""]
    lines += [f"- `{r.split(':', 1)[0]}`: {r.split(':', 1)[1].strip()}" for r in op.rewrites]
    if not op.rewrites:
        lines.append("- none")
    lines += ["", "**Gradients (unbroadcasting)**", ""]
    lines += [f"- `{line.strip()}`" for line in _gradient_lines(op, "")]
    if audit is not None:
        from .stability.audit.report import explain_lines

        lines += ["", "**Accuracy audit**", ""]
        lines += [f"- {line.strip()}" for line in explain_lines(audit, "")]
    return "\n".join(lines) + "\n"


def _tex_name(name: str) -> str:
    return name.replace("_", r"\_")
