"""A validated spec with the positions of its values; its content digest; its
one-dtype variants.

Receives: the validated and resolved :class:`~.model.ModuleSpec`, the spec's text and
data, and the positions the YAML reader recorded (all from :mod:`.load`).
Returns: :class:`SpecDocument`, what every later stage reads (the model; the path for
messages; :meth:`~SpecDocument.location` and :meth:`~SpecDocument.anchor` for
positions); :func:`content_sha256`, the digest of a spec's data (not of its bytes);
:func:`dtype_variant`, a document with one op of several dtypes fixed to one.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from ..errors import Location
from .dtypes import FLOAT_DTYPES
from .model import ModuleSpec
from .positions import ExprAnchor, Loc, locate


def content_sha256(data: Any) -> str:
    """The sha256 of a spec's content: its YAML data, not its bytes.

    Comments, quoting, indentation, flow or block style and anchors do not change it;
    any change of a key or value (an expression's text, a shape, the order of ops,
    inputs or ``where`` names) does. The data is written as compact JSON with the
    mappings as lists of ``[key, value]`` pairs in their order in the file (YAML values
    JSON has no form for, such as dates, as their ``str``). Called on validated specs
    only, so the data is a tree of bounded size.

    Args:
        data: the spec as loaded from YAML (mappings, lists, scalars).

    Returns:
        64 lowercase hex digits.
    """
    def plain(value: Any) -> Any:
        if isinstance(value, dict):
            return [[plain(k), plain(v)] for k, v in value.items()]
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        return str(value)

    text = json.dumps(plain(data), ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class SpecDocument:
    """A validated spec with the positions of its values.

    Attributes:
        path: the spec path as given (used in messages and, made relative to the output
            folder, in generated headers).
        source: the spec's text.
        sha256: hex digest of the spec's content (:func:`content_sha256`).
        model: the validated spec.
    """

    path: str
    source: str
    sha256: str
    model: ModuleSpec
    _positions: dict = field(repr=False, compare=False)
    _key_positions: dict = field(repr=False, compare=False)
    _anchors: dict = field(repr=False, compare=False)

    def location(self, loc: Loc, key: bool = False) -> Location:
        """Position of the value (or with ``key=True`` the key) at spec key path ``loc``.

        Falls back to the nearest enclosing value that has a position.
        """
        return locate(self.path, self._positions, self._key_positions, loc, key)

    def anchor(self, loc: Loc) -> ExprAnchor | None:
        """The :class:`ExprAnchor` of an expression field, if ``loc`` is one."""
        return self._anchors.get(tuple(loc))


def dtype_variant(doc: "SpecDocument", index: int, dtype: str) -> "SpecDocument":
    """``doc`` with op ``index``, generated for several dtypes, fixed to one: its float
    inputs (those that follow the op's dtype) and the op's dtype become ``dtype``.
    Every other stage (derivation, stable forms, guards, the audit) then sees an
    ordinary one-dtype op."""
    import dataclasses

    op = doc.model.ops[index]
    inputs = {
        name: spec.model_copy(update={"dtype": dtype}) if spec.dtype in FLOAT_DTYPES else spec
        for name, spec in op.inputs.items()
    }
    ops = list(doc.model.ops)
    ops[index] = op.model_copy(update={"inputs": inputs, "dtype": dtype})
    return dataclasses.replace(doc, model=doc.model.model_copy(update={"ops": ops}))


def op_variants(doc: "SpecDocument", index: int) -> list[tuple["SpecDocument", str | None]]:
    """What the build derives for op ``index``: ``(document, dtype)`` once per dtype of
    an op generated for several (:func:`dtype_variant`), else ``[(doc, None)]``."""
    dtypes = doc.model.ops[index].dtype
    if isinstance(dtypes, list):
        return [(dtype_variant(doc, index, d), d) for d in dtypes]
    return [(doc, None)]
