"""What the accuracy audit says: the docstring line, the explain section, the strict error.

Consumes: an :class:`~gradgen.stability.audit.Audit`. Guarantees:

* :func:`docstring_line` is one short sentence built only from coarse, deterministic
  facts (the dtype, the number of points sampled, which inputs' gradients are NaN or inf
  where the exact gradient is finite and at how many points, and the worst error
  rounded *up* to 1, 2, 4, 8, 16 or 32 bits), so that a one-ulp difference between
  two machines' math libraries does not change the generated file; the exact numbers
  and points are in ``gradgen explain``;
* :func:`explain_lines` lists, per output and per gradient, the points counted, the
  failures with example inputs, the worst and mean error in bits with where, and how
  it compares with the form as written: its mean error, and the points where the
  generated form is less accurate (a rewrite or guard that lost digits there);
* :func:`strict_error` returns an :class:`AccuracyError` (exit status 3, as a failed
  verification) for the first gradient that is NaN or inf where the exact one is
  finite, or None.
"""

from __future__ import annotations

from ...errors import EXIT_VERIFY_FAILED, GradgenError
from .. import formats

BIT_STEPS = (1, 2, 4, 8, 16, 32)


class AccuracyError(GradgenError):
    """Under the strict accuracy audit, a gradient is NaN or inf where the exact
    gradient of the expression as written is finite. Exit status 3.

    Attributes:
        op, input: names; point: the first failing point ({input: value}).
    """

    exit_code = EXIT_VERIFY_FAILED

    def __init__(self, op: str, input_name: str, message: str, point: dict):
        self.op, self.input, self.point = op, input_name, point
        super().__init__(message)


def _fmt(value) -> str:
    return value if isinstance(value, str) else f"{value:.6g}"


def _point(point: dict) -> str:
    return ", ".join(f"{k} = {_fmt(v)}" for k, v in point.items())


def _bits_phrase(bits: float, precision: int) -> str:
    if bits >= precision:
        return f"all {precision} significant bits lost"
    step = next((s for s in BIT_STEPS if bits <= s), BIT_STEPS[-1])
    return f"at most {min(step, precision)} of {precision} bits"


def docstring_line(audit) -> str:
    """One coarse sentence for the op's docstring (see the module docstring)."""
    if audit.skipped:
        return f"Accuracy audit: not run ({audit.skipped})."
    fmt = formats.get(audit.dtype)
    grads = audit.gradients
    failing: dict[str, int] = {}
    for t in grads:
        if t.nonfinite:
            failing[t.input] = failing.get(t.input, 0) + t.nonfinite
    head = f"Accuracy audit ({audit.dtype}, {audit.points} points): "
    if failing:
        parts = [f"of {name} at {n} point{'s' if n != 1 else ''}" for name, n in failing.items()]
        finding = ("the gradient is NaN or inf where the exact one is finite ("
                   + ", ".join(parts) + ")")
    else:
        finding = "the gradient is finite wherever the exact one is"
    counted = [t for t in grads if t.counted]
    if not counted:
        return head + finding + "; no point had a finite exact gradient to compare."
    worst = max(t.worst_bits for t in counted)
    return head + finding + f"; worst error {_bits_phrase(worst, fmt.precision)}."


def explain_lines(audit, indent: str = "    ") -> list[str]:
    """The explain section's lines (without its heading)."""
    if audit.skipped:
        return [f"{indent}not run: {audit.skipped}"]
    lines = [(f"{indent}{audit.points} points in {audit.dtype}; exact values: the expression "
              "as written and its derivatives, mpmath at rising precision")]
    for t in audit.targets:
        name = t.output if t.input is None else f"d({t.output})/d({t.input})"
        if not t.counted:
            lines.append(f"{indent}{name}: no point with a finite exact value in range")
            continue
        if t.nonfinite:
            ex = t.examples[0]
            finding = (f"NaN/inf at {t.nonfinite} of {t.counted} points where the exact "
                       f"value is finite, e.g. {_point(ex['point'])} (got {_fmt(ex['got'])}, "
                       f"exact {_fmt(ex['exact'])})")
        else:
            finding = f"finite wherever the exact value is ({t.counted} points)"
        where = f" at {_point(t.worst_at)}" if t.worst_at else ""
        lines.append(f"{indent}{name}: {finding}; worst error {t.worst_bits:.1f} bits{where}; "
                     f"mean {t.mean_bits:.2f} bits")
        lines += _written_lines(t, indent + "  ")
    return lines


def _written_lines(t, indent: str) -> list[str]:
    """How the target compares with the form as written (:mod:`.written`)."""
    if t.written_mean_bits is None:
        return []
    text = f"{indent}as written: mean {t.written_mean_bits:.2f} bits"
    if not t.worse:
        return [text + "; the generated form is at least as accurate wherever sampled"]
    ex = t.worse_examples[0]

    def full(v):  # every digit: the values differ in their last few
        return v if isinstance(v, str) else repr(float(v))

    return [text + f"; the generated form is less accurate at {t.worse} point"
            f"{'s' if t.worse != 1 else ''}, e.g. {_point(ex['point'])} (got "
            f"{full(ex['got'])}, as written {full(ex['written'])}, exact "
            f"{full(ex['exact'])})"]


def strict_error(audit) -> AccuracyError | None:
    """The strict audit's error for the first failing gradient, or None."""
    if audit.skipped:
        return None
    for t in audit.gradients:
        if t.nonfinite:
            ex = t.examples[0]
            message = (
                f"op '{audit.op}': accuracy audit (strict): the gradient of "
                f"'{t.output}' for input '{t.input}' is {_fmt(ex['got'])} at "
                f"{_point(ex['point'])} ({audit.dtype}) where the exact gradient of the "
                f"expression as written is {_fmt(ex['exact'])}; {t.nonfinite} such point"
                f"{'s' if t.nonfinite != 1 else ''} of {t.counted} (gradgen explain "
                "lists them)"
            )
            return AccuracyError(audit.op, t.input, message, ex["point"])
    return None
