"""Load and validate a spec file, keeping the position of every value.

Consumes: the bytes of a YAML spec (format: SPEC.md / the README's "Spec format").
Guarantees: :func:`load_spec` returns a :class:`SpecDocument` whose ``model`` is a
validated, frozen :class:`ModuleSpec` (every input in the long form, every dtype
resolved), or raises :class:`~gradgen.errors.SpecError` listing every problem found, each
with file:line:col, op and field. Nothing in the spec is executed: YAML is read with
PyYAML's *safe* composer (no tags beyond the standard scalar/collection ones, no aliases,
no merge keys, no duplicate keys), and expressions stay text until
:mod:`gradgen.expr` parses them with an allow-list.

The modules, each importing only those before it: :mod:`.limits` and :mod:`.dtypes`
(constants), :mod:`.fields` (field types and their checks), :mod:`.model` (the pydantic
model), :mod:`.positions` (key paths, expression anchors), :mod:`.yaml_reader` (YAML
nodes to plain data with positions), :mod:`.document` (:class:`SpecDocument`),
:mod:`.messages` (problems worded), :mod:`.resolve` (names and defaults), :mod:`.load`
(the steps in order); :mod:`.schema` (the JSON Schema) stands beside them.
"""

from .document import SpecDocument, dtype_variant, op_variants
from .dtypes import COMPLEX_DTYPES, FLOAT_DTYPES, HALF_DTYPES, INT_DTYPES, default_dtype
from .fields import BATCH
from .limits import MAX_EXPRESSION_CHARS
from .load import load_spec, parse_spec
from .model import InputSpec, ModuleSpec, OpSpec
from .positions import ExprAnchor, Loc, format_key_path
from .resolve import default_memory
from .schema import json_schema

__all__ = [
    "BATCH",
    "COMPLEX_DTYPES",
    "ExprAnchor",
    "FLOAT_DTYPES",
    "HALF_DTYPES",
    "INT_DTYPES",
    "InputSpec",
    "Loc",
    "MAX_EXPRESSION_CHARS",
    "ModuleSpec",
    "OpSpec",
    "SpecDocument",
    "default_dtype",
    "default_memory",
    "dtype_variant",
    "op_variants",
    "format_key_path",
    "json_schema",
    "load_spec",
    "parse_spec",
]
