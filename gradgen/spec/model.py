"""The spec model: pydantic classes for a module, its ops and their inputs.

Receives: a spec's plain data (mappings, lists, scalars), as :mod:`.yaml_reader` reads
it.
Returns: :meth:`ModuleSpec.model_validate` gives a frozen :class:`ModuleSpec` (unknown
keys refused, strict types, each field checked by :mod:`.fields`, inputs in the long
form) or raises pydantic's ``ValidationError`` (:mod:`.messages` words it). Defaults
that depend on other fields (an input's dtype and differentiability, an op's dtype,
fuse and memory) are still ``None`` here; :mod:`.resolve` fills them in.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .dtypes import DType
from .fields import DocText, Domain, DTypeSet, Expression, Name, ShapeDecl
from .limits import MAX_OPS, MAX_ORDER


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class InputSpec(_Model):
    """One input of an op (long form; the shorthand ``x: [10, 1]`` means ``{shape: [10, 1]}``).

    Attributes:
        shape: dims, each a size >= 0, ``None`` (unknown until run time) or a dim name;
            the first may be ``"..."``: any number of leading batch dims.
        dtype: TF dtype name; ``None`` until resolved to the module's default.
        differentiable: whether a gradient is returned; ``None`` until resolved (true for
            float and complex dtypes, false for integers).
        domain: ``(low, high)``: where the emitted tests and the build-time check draw
            this input's values (``positive`` and ``negative`` stand for ranges, see
            :data:`.fields.DOMAINS`); ``None``: their default ranges.
    """

    shape: ShapeDecl
    dtype: Optional[DType] = None
    differentiable: Optional[bool] = None
    domain: Optional[Domain] = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, list):
            return {"shape": data}
        return data


class OpSpec(_Model):
    """One op: a public function with a custom gradient."""

    name: Name
    doc: DocText = None
    inputs: dict[Name, InputSpec] = Field(min_length=1)
    where: dict[Name, Expression] = Field(default_factory=dict)
    output: Optional[Expression] = None
    outputs: Optional[dict[Name, Expression]] = None
    memory: Optional[Literal["save", "recompute"]] = None
    dtype: Optional[DTypeSet] = None
    fuse: Optional[Literal["none", "xla"]] = None
    order: Optional[int] = Field(default=None, ge=1, le=MAX_ORDER)

    @model_validator(mode="after")
    def _one_output_form(self) -> "OpSpec":
        if (self.output is None) == (self.outputs is None):
            raise ValueError("give exactly one of 'output' (one expression) or 'outputs'")
        if self.outputs is not None and not self.outputs:
            raise ValueError("'outputs' needs at least one entry")
        return self


class ModuleSpec(_Model):
    """A whole spec: one generated Python module."""

    version: int
    module: Name
    dtype: DTypeSet = "float32"
    fuse: Literal["none", "xla"] = "none"
    order: int = Field(default=1, ge=1, le=MAX_ORDER)
    doc: DocText = None
    ops: list[OpSpec] = Field(min_length=1, max_length=MAX_OPS)
