"""Check what the model's types cannot, and fill in the defaults that depend on other
fields.

Receives: a validated :class:`~.model.ModuleSpec`, and ``diag(loc, message, key=False)``
that makes a :class:`~gradgen.errors.Diagnostic` for a spec key path.
Returns: :func:`resolve_model`, the model with every input's dtype and
differentiability and every op's dtype, fuse and memory filled in, with every problem
found (names that are reserved or used twice, dim names, input dtypes and domains that
do not fit the op); :func:`default_memory`, an op's memory policy where its spec names
none.
"""

from __future__ import annotations

import math

from ..errors import Diagnostic
from ..naming import module_reason, op_name_reason, reserved_reason
from .dtypes import INT_DTYPES, default_dtype, dtype_set
from .fields import BATCH
from .model import InputSpec, ModuleSpec, OpSpec
from .positions import Loc


def resolve_model(model: ModuleSpec, diag) -> tuple[ModuleSpec, list[Diagnostic]]:
    """Names, uniqueness, default dtypes and differentiability."""
    problems: list[Diagnostic] = []
    _check_module_name(model, diag, problems)
    seen_ops: dict[str, int] = {}
    ops = []
    for i, op in enumerate(model.ops):
        base: Loc = ("ops", i)
        _check_op_name(op, i, seen_ops, diag, problems)
        local = _check_value_names(op, base, diag, problems)
        _check_dim_names(op, base, local, diag, problems)
        generic, single = _op_dtypes(op, model.dtype, base, diag, problems)
        inputs = _resolve_inputs(op, single, base, diag, problems)
        fuse = op.fuse or model.fuse
        ops.append(op.model_copy(update={"inputs": inputs,
                                          "dtype": list(generic) if generic else single,
                                          "fuse": fuse,
                                          "memory": op.memory or default_memory(fuse),
                                          "order": op.order or model.order}))
    return model.model_copy(update={"ops": ops}), problems


def _check_module_name(model: ModuleSpec, diag, problems: list[Diagnostic]) -> None:
    """The module's name must be allowed as a Python module's."""
    if module_reason(model.module):
        problems.append(
            diag(
                ("module",),
                f"module name '{model.module}' is not allowed: "
                f"{module_reason(model.module)}",
            )
        )


def _check_op_name(
    op: OpSpec, i: int, seen_ops: dict[str, int], diag, problems: list[Diagnostic]
) -> None:
    """Op ``i``'s name must be allowed and not taken by an earlier op; records it in
    ``seen_ops`` (name -> index of the first op of that name)."""
    base: Loc = ("ops", i)
    reason = op_name_reason(op.name)
    if reason:
        problems.append(diag(base + ("name",), f"op name '{op.name}' is not allowed: {reason}"))
    if op.name in seen_ops:
        problems.append(
            diag(
                base + ("name",),
                f"duplicate op name '{op.name}' (also ops[{seen_ops[op.name]}])",
            )
        )
    seen_ops.setdefault(op.name, i)


def _check_value_names(
    op: OpSpec, base: Loc, diag, problems: list[Diagnostic]
) -> dict[str, str]:
    """The op's input, intermediate and output names must be allowed and distinct.

    Returns:
        Each name, mapped to the first section (``inputs``, ``where``, ``outputs``)
        that uses it.
    """
    local: dict[str, str] = {}
    sections = [("inputs", op.inputs), ("where", op.where), ("outputs", op.outputs or {})]
    for section, mapping in sections:
        what = {"inputs": "input", "where": "intermediate", "outputs": "output"}[section]
        for name in mapping:
            loc = base + (section, name)
            reason = reserved_reason(name)
            if reason:
                problems.append(diag(loc, f"{what} name '{name}' is not allowed: {reason}", True))
            if name in local:
                problems.append(
                    diag(loc, f"name '{name}' is already used in '{local[name]}'", True)
                )
            local.setdefault(name, section)
    return local


def _check_dim_names(
    op: OpSpec, base: Loc, local: dict[str, str], diag, problems: list[Diagnostic]
) -> None:
    """The op's dim names must be allowed, and none may also name a value (``local``)."""
    dims = {d for spec in op.inputs.values() for d in spec.shape
            if isinstance(d, str) and d != BATCH}
    for input_name, spec in op.inputs.items():
        for axis, d in enumerate(spec.shape):
            if isinstance(d, str) and d != BATCH and reserved_reason(d):
                problems.append(
                    diag(base + ("inputs", input_name, "shape", axis),
                         f"dim name '{d}' is not allowed: {reserved_reason(d)}")
                )
    for name in sorted(dims & set(local)):
        problems.append(
            diag(base + ("inputs",), f"dim name '{name}' is also a value name in this op")
        )


def _op_dtypes(
    op: OpSpec, module_dtype, base: Loc, diag, problems: list[Diagnostic]
) -> tuple[tuple[str, ...] | None, str]:
    """The float dtypes the op is generated for (None: one dtype), and the dtype its
    float inputs take where they name none. An op of several dtypes is refused a float
    input that declares its own."""
    op_dtype = op.dtype if op.dtype is not None else module_dtype
    generic = dtype_set(op_dtype)
    if generic and all(s.dtype in INT_DTYPES for s in op.inputs.values()):
        generic = None  # integer inputs only: one dtype, the default
    if generic:
        for name, spec in op.inputs.items():
            if spec.dtype is not None and spec.dtype not in INT_DTYPES:
                problems.append(diag(
                    base + ("inputs", name, "dtype"),
                    f"input '{name}' declares dtype {spec.dtype}, but the op is "
                    f"generated for {', '.join(generic)} and its float inputs follow "
                    "the dtype of the arguments; drop the input's dtype (integer "
                    "dtypes may stay)",
                ))
        single = default_dtype(generic)
    else:
        several = dtype_set(op_dtype)  # (an op of integer inputs only)
        single = default_dtype(several) if several else op_dtype
    return generic, single


def _resolve_inputs(
    op: OpSpec, single: str, base: Loc, diag, problems: list[Diagnostic]
) -> dict[str, InputSpec]:
    """The op's inputs with their dtype (``single`` where they name none) and
    differentiability filled in; an integer input may not be differentiable, and its
    domain must hold an integer."""
    inputs = {}
    for name, spec in op.inputs.items():
        dtype = spec.dtype or single
        is_int = dtype in INT_DTYPES
        if spec.differentiable and is_int:
            problems.append(
                diag(
                    base + ("inputs", name, "differentiable"),
                    f"input '{name}' has integer dtype {dtype} and cannot be "
                    "differentiated; drop 'differentiable: true' or use a float dtype",
                )
            )
        if is_int and spec.domain and math.ceil(spec.domain[0]) > spec.domain[1]:
            problems.append(diag(
                base + ("inputs", name, "domain"),
                f"input '{name}' has integer dtype {dtype}, and its domain "
                f"[{spec.domain[0]:g}, {spec.domain[1]:g}] holds no integer",
            ))
        differentiable = (not is_int) if spec.differentiable is None else spec.differentiable
        inputs[name] = spec.model_copy(
            update={"dtype": dtype, "differentiable": differentiable and not is_int}
        )
    return inputs


def default_memory(fuse: str) -> str:
    """An op's memory policy where its spec names none: ``recompute`` for ``fuse: xla``
    (inside one compiled kernel, recomputing forward values from the inputs costs less
    than writing them out and reading them back: equal to 2x faster at 1e5 to 1e7
    elements on the benchmark's ops, mish at 1e5 the one exception), else ``save``."""
    return "recompute" if fuse == "xla" else "save"
