"""One op derived, printed, verified and audited, with the regimes its audit infers:
the one loop from the accuracy audit back into the derivation.

Consumes: a loaded spec document and an op's index. Guarantees:
:func:`derive_print_verify` gives the op's IR, its printed views and the input range
verification sampled; :func:`audited` audits it (:mod:`gradgen.stability.audit`) and,
where the audit infers regimes (:mod:`gradgen.stability.regimes`: a partial or an
output less accurate than the form as written on an interval of one input), derives it
again with them and keeps whichever version the measurements favour (:func:`_in_regimes`).
:mod:`gradgen.emit` (the build) and :mod:`gradgen.explain` share it, so both show the
same code.
"""

from __future__ import annotations

from functools import partial

from .errors import Diagnostic, SpecError
from .printer import TFPrinter
from .spec import SpecDocument


def audited(doc: SpecDocument, index: int, verify: bool, derived: tuple) -> tuple:
    """``(op IR, views, sampled range or None, audit)`` of ``doc.model.ops[index]``,
    ``derived`` its first three: the accuracy audit of the op, and where it finds a
    partial less accurate than written somewhere and more accurate elsewhere, the op
    derived again with regimes (:func:`_in_regimes`). The build and ``explain`` share it.
    """
    from .stability.audit import audit_in_budget

    op_ir, views, sampled = derived
    regimes: list = []
    result = audit_in_budget(op_ir, views, partial(TFPrinter, op_ir.dtype), regimes=regimes)
    if not regimes:
        return op_ir, views, sampled, result
    return _in_regimes(doc, index, verify, (op_ir, views, sampled, result), tuple(regimes))


def _in_regimes(doc: SpecDocument, index: int, verify: bool, first: tuple, regimes: tuple):
    """``(op IR, views, sampled range, audit)`` of the op derived again with ``regimes``
    (:mod:`gradgen.stability.regimes`: partials as written where the audit of ``first``,
    the same four of the op as derived, found them more accurate), where its audit
    finds it less accurate than written at fewer points, nowhere more points NaN or inf
    or less accurate than ``first``'s, and at points it was not inferred from
    (:func:`gradgen.stability.audit.holdout.no_worse`) nowhere less accurate than the
    form it replaces; else ``first``. Herbie's rule: the branch is kept only where it
    is measured no worse."""
    from .budget import op_seconds, within
    from .stability.audit import audit_in_budget, seed_text
    from .stability.audit.holdout import no_worse
    from .verify import VerificationError

    old = first[3]
    try:
        done, derived = within(op_seconds(doc.model.ops[index].order or 1),
                               lambda: derive_print_verify(doc, index, verify, regimes))
    except (SpecError, VerificationError):  # the as-written form cannot be used here
        return first
    if not done:
        return first
    op_ir, views, sampled = derived
    new = audit_in_budget(op_ir, views, partial(TFPrinter, op_ir.dtype))
    if new.skipped or len(new.targets) != len(old.targets):
        return first
    pairs = list(zip(new.targets, old.targets))
    if not (sum(n.worse for n, _ in pairs) < sum(o.worse for _, o in pairs)
            and all(n.nonfinite <= o.nonfinite and n.worse <= o.worse for n, o in pairs)):
        return first
    done, lost = within(op_seconds(),
                        lambda: no_worse(first[:2], (op_ir, views), seed_text(op_ir)))
    return first if lost or not done else (op_ir, views, sampled, new)


def derive_print_verify(doc: SpecDocument, index: int, verify: bool, regimes: tuple = ()):
    """(op IR, views, sampled range or None) of ``doc.model.ops[index]``, derived with
    ``regimes`` (:func:`gradgen.pipeline.derive_op`)."""
    from .pipeline import derive_op
    from .views import RenderError, op_views

    op_ir = derive_op(doc, index, regimes) if regimes else derive_op(doc, index)
    try:
        views = op_views(op_ir)
    except RenderError as e:
        loc = ("ops", index)
        raise SpecError(Diagnostic(doc.location(loc), str(e), doc.model.ops[index].name,
                                   None)) from None
    sampled = None
    if verify:  # after printing succeeded: every value is something TensorFlow has
        from .verify import VerificationError, verify_op

        try:
            sampled = verify_op(op_ir)
            for level in op_ir.levels:  # each derived order, against its own differences
                verify_op(level)
        except VerificationError as e:
            e.location = doc.location(("ops", index))
            raise
    return op_ir, views, sampled
