"""Build-time accuracy audit: the safety net for every form no rewrite rule covers.

Consumes: an op's IR (:class:`gradgen.ir.OpIR`) and its printed views. Guarantees:
:func:`audit_op` samples the op's dtype over its whole range (:mod:`.sample`: Herbie's
uniform ordinals, plus 0, ±smallest normal, ±largest finite, ±1, ±2, ±1/2 and each
condition's threshold ±1 ulp), runs the generated code's forward and gradient
statements at those points in the dtype (:mod:`.mirror`), compares them with the
expression *as written* and its derivatives evaluated with mpmath at rising precision
(:mod:`.reference`), and returns an :class:`Audit`: per output and per input's
gradient, the points where the exact value is finite but the generated one is NaN or
infinite, and the worst error in bits (:mod:`.measure`); and, given a printer, the
same for the form as written, not rewritten (:mod:`.written`), with the points where
the generated form is less accurate than it (Herbie's rule: never worse than
written). :mod:`.report` turns it into the explain section, the docstring line and the
strict-mode error.

The audit is deterministic (seeded from the op's name, dtype and expression as written)
and JSON-serializable, so it is cached with the op's derivation. Ops with tensor
operations (matmul, det, sum...) or complex dtypes are not audited; the audit says so
and why. It imports neither TensorFlow nor anything outside gradgen's dependencies and
mpmath (which SymPy requires).
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass, field

import numpy as np

from ... import ir
from ...errors import error_text
from ...pinned import srepr, sstr
from .. import formats
from ..regimes import infer as infer_regime
from .measure import compare
from .mirror import MirrorError, Program, elementwise_reason
from .reference import Reference
from .sample import sample
from .written import Written

MAX_EXAMPLES = 3  # failing points kept per target
# A generated form counts as less accurate than the form as written at a point where its
# error exceeds the written form's by more than this many bits (2 ulps: the order of
# operations alone moves a result by an ulp or two either way).
WORSE_BITS = 1.6
# Audit.skipped of an audit that ran out of GRADGEN_OP_TIMEOUT: a result of the machine's
# speed and load, not of the op, so never cached (gradgen.emit).
OUT_OF_TIME = "out of the per-op time budget (GRADGEN_OP_TIMEOUT)"


@dataclass(frozen=True)
class Target:
    """One audited quantity: an output's value (``input`` None) or the gradient of an
    input when that output's upstream gradient is 1.

    Attributes:
        output, input: names (``input`` None for the output's value).
        counted: points where the exact value is a finite number in the dtype's range.
        nonfinite: how many of those the generated code gives NaN or inf.
        examples: up to :data:`MAX_EXAMPLES` of them, ``{"point": {input: value},
            "got": ..., "exact": ...}``, in sample order (edge points first).
        worst_bits: the largest error in bits (0 when nothing was counted).
        worst_at: the point of the largest error, or None.
        mean_bits: the mean error in bits over the counted points (Herbie's score).
        written_mean_bits: the same for the form as written (:mod:`.written`), or None
            where it cannot be run.
        worse: points where the generated form's error exceeds the form as written's by
            more than :data:`WORSE_BITS`: where a rewrite or guard lost accuracy.
        worse_examples: up to :data:`MAX_EXAMPLES` of them, ``{"point", "got",
            "written", "exact"}``.
    """

    output: str
    input: str | None
    counted: int
    nonfinite: int
    examples: list
    worst_bits: float
    worst_at: dict | None
    mean_bits: float
    written_mean_bits: float | None = None
    worse: int = 0
    worse_examples: list = field(default_factory=list)


@dataclass(frozen=True)
class Audit:
    """The audit of one op.

    Attributes:
        op: its name.
        dtype: the dtype audited (the op's).
        points: points sampled (0 when not audited).
        skipped: why the op was not audited, or None.
        targets: per output value and per (output, input) gradient.
    """

    op: str
    dtype: str
    points: int = 0
    skipped: str | None = None
    targets: list = field(default_factory=list)

    @property
    def gradients(self) -> list[Target]:
        return [t for t in self.targets if t.input is not None]

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Audit:
        data = dict(data)
        data["targets"] = [Target(**t) for t in data.get("targets", [])]
        return cls(**data)


def seed_text(op: ir.OpIR) -> str:
    """What the sample is seeded from: name, dtype and the forward as written."""
    reference = ";".join(
        f"{s.target}={_call_text(s.value) if isinstance(s.value, ir.Call) else srepr(s.value)}"
        for s in op.reference
    )
    return f"{op.name}|{op.dtype}|{reference}"


def _call_text(value) -> str:
    """``repr(value)`` of an :class:`ir.Call` as the dataclass writes it, its SymPy
    arguments printed pinned (:mod:`gradgen.pinned`)."""
    if not isinstance(value, ir.Call):
        return sstr(value)
    args = ", ".join(_call_text(a) for a in value.args) + ("," if len(value.args) == 1 else "")
    return f"Call(fn={value.fn!r}, args=({args}), params={value.params!r})"


def audit_op(op: ir.OpIR, views, random_points: int | None = None,
             printer=None, level: bool = False, regimes: list | None = None) -> Audit:
    """Audit ``op``, whose printed code is ``views`` (see the module docstring).
    ``printer``: makes a fresh :class:`gradgen.printer.TFPrinter` for ``op.dtype``, to
    print the forms as written each target is also measured against (:mod:`.written`);
    None leaves them unmeasured. ``level``: ``op`` is a derived order's VJP op of an
    elementwise op, whose unbroadcasting reductions are audited as the identity.
    ``regimes``: receives a :class:`gradgen.stability.regimes.Regime` for each partial
    the generated form of which is less accurate than the form as written somewhere
    sampled and more accurate elsewhere (Herbie's regime inference), for
    :mod:`gradgen.accuracy` to derive again with."""
    fmt = formats.get(op.dtype)
    if fmt is None:
        return Audit(op.name, op.dtype, skipped=f"{op.dtype} ops are not audited")
    if not any(i.grad for i in op.inputs):
        return Audit(op.name, op.dtype, skipped="no differentiable input")
    reason = elementwise_reason(op, level)
    if reason is not None:
        return Audit(op.name, op.dtype, skipped=f"{reason}: only elementwise ops are audited")
    points = sample(op, fmt, seed_text(op), random_points)
    n = len(next(iter(points.values())))
    try:
        program = Program(views)
        outputs, gradients = program.run(fmt, points)
    except MirrorError as e:
        return Audit(op.name, op.dtype, skipped=f"the NumPy mirror cannot run it ({e})")
    try:
        reference = Reference(op)
    except NotImplementedError as e:  # SymPy cannot differentiate or print it for mpmath
        return Audit(op.name, op.dtype, skipped=f"no exact reference ({error_text(e)})")
    exact = reference.evaluate(fmt, points)
    written = (Written(reference, printer()).run(fmt, points) if printer is not None
               else [None] * len(reference.targets))
    names = [i.name for i in op.inputs]
    targets = []
    for t, ((k, name, _), (values, kinds)) in enumerate(zip(reference.targets, exact)):
        got = outputs[k] if name is None else gradients[k][name]
        target, bits = _target(op, fmt, points, names, (k, name), got, written[t],
                               values, kinds)
        targets.append(target)
        if regimes is not None and target.worse and bits[1] is not None:
            defined = reference.defined(exact, k)
            found = infer_regime(fmt, points, *_nan_loses(got, written[t], *bits, defined),
                                 (target.output, name), reference.targets[t][2],
                                 _measure(fmt, program, reference, printer, (t, k, name)))
            regimes += [found] if found is not None else []
    return Audit(op.name, op.dtype, n, None, targets)


def _target(op, fmt, points, names, key, got, written, values, kinds):
    """One target's :class:`Target`: the generated values ``got`` and the form as
    written's (None where it cannot be run) against the exact ``values``; and the
    errors in bits per point of both (the written one's None where not run)."""
    k, name = key
    m = compare(fmt, got, values, kinds)
    examples = [
        {"point": _point(points, names, j), "got": _num(got[j]), "exact": _num(values[j])}
        for j in m.nonfinite[:MAX_EXAMPLES]
    ]
    counted = m.bits[~np.isnan(m.bits)]
    if counted.size:
        worst = int(np.nanargmax(m.bits))
        worst_bits, worst_at = float(m.bits[worst]), _point(points, names, worst)
        mean_bits = float(counted.mean())
    else:
        worst_bits, worst_at, mean_bits = 0.0, None, 0.0
    written_mean, worse, worse_examples, w = None, 0, [], None
    if written is not None:
        w = compare(fmt, written, values, kinds)
        both = ~np.isnan(m.bits) & ~np.isnan(w.bits)
        written_mean = round(float(w.bits[both].mean()), 2) if both.any() else 0.0
        lost = np.flatnonzero(both & (m.bits > w.bits + WORSE_BITS))
        worse = len(lost)
        worse_examples = [
            {"point": _point(points, names, j), "got": _num(got[j]),
             "written": _num(written[j]), "exact": _num(values[j])}
            for j in lost[:MAX_EXAMPLES]
        ]
    target = Target(op.outputs[k].name, name, int(m.counted.sum()), len(m.nonfinite),
                    examples, round(worst_bits, 2), worst_at, round(mean_bits, 2),
                    written_mean, worse, worse_examples)
    return target, (m.bits, None if w is None else w.bits)


# the error in bits of a NaN where the other form is a number (any format's width, at
# least: the costs only compare)
NAN_BITS = 64.0


def _nan_loses(got, written, got_bits, written_bits, defined) -> tuple:
    """Both forms' errors in bits, for regime inference: also at the points where
    the forward is ``defined`` but the partial's exact value is not counted (a pole,
    where the math's value is +-inf), a form that is NaN where the other is not scores
    :data:`NAN_BITS`, and the other 0: ``p*x**p/x`` is NaN at x = 0 for 0 < p < 1,
    where ``xdivy(p, x**(1 - p))`` is the derivative's inf. Outside the domain (x < 0
    there) neither number means anything."""
    got = np.broadcast_to(np.asarray(got, dtype=np.float64), np.shape(got_bits))
    written = np.broadcast_to(np.asarray(written, dtype=np.float64), np.shape(got_bits))
    got_bits, written_bits = got_bits.copy(), written_bits.copy()
    for mine, theirs, bits, other in ((written, got, written_bits, got_bits),
                                      (got, written, got_bits, written_bits)):
        lost = defined & np.isnan(mine) & ~np.isnan(theirs)
        bits[lost] = np.fmax(bits[lost], NAN_BITS)
        other[lost & np.isnan(other)] = 0.0
    return got_bits, written_bits


def _measure(fmt, program: Program, reference: Reference, printer, where: tuple):
    """``points -> (generated form's bits, written form's bits)`` of the target
    ``where`` (its index, output index and input name, None for the output's value) at
    other points than the sample's: for :func:`gradgen.stability.regimes.infer` to
    refine its boundaries."""
    t, k, name = where
    written = Written(reference, printer())  # (a fresh printer: its helpers are its own)

    def measure(points):
        outputs, gradients = program.run(fmt, points)
        exact = reference.evaluate(fmt, points)
        values, kinds = exact[t]
        ours = outputs[k] if name is None else gradients[k][name]
        theirs = written.run(fmt, points)[t]
        if theirs is None:  # pragma: no cover - it ran at the sample's points
            theirs = np.full(len(values), np.nan)
        return _nan_loses(ours, theirs, compare(fmt, ours, values, kinds).bits,
                          compare(fmt, theirs, values, kinds).bits,
                          reference.defined(exact, k))

    return measure


def _point(points, names, j) -> dict:
    return {name: _num(points[name][j]) for name in names}


def _num(value) -> float | str:
    """A JSON-safe number (JSON has no NaN or inf)."""
    value = float(value)
    if np.isnan(value):
        return "nan"
    if np.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def audit_in_budget(op: ir.OpIR, views, printer=None, level: bool = False,
                    regimes: list | None = None) -> Audit:
    """:func:`audit_op` under the per-op time budget (:mod:`gradgen.budget`); an audit
    that runs out of time is reported as not run, never as a failure."""
    from ...budget import op_seconds, within

    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's, never the user's
            return audit_op(op, views, printer=printer, level=level, regimes=regimes)

    done, result = within(op_seconds(), run)
    return result if done else Audit(op.name, op.dtype, skipped=OUT_OF_TIME)
