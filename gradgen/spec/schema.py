"""The JSON Schema of a spec, for editors and CI validators.

Receives: nothing; reads the pydantic models of :mod:`.model`.
Returns: :func:`json_schema`, a draft 2020-12 schema with a description for every
model and property, and the forms the loader also accepts (an input given as its shape
list alone, an expression written as a YAML number).
"""

from __future__ import annotations

from ..naming import IDENTIFIER_RE
from .dtypes import DTYPES, FLOAT_DTYPES, FLOATING
from .limits import MAX_EXPRESSION_CHARS, SPEC_VERSION
from .model import ModuleSpec


_DESCRIPTIONS = {
    "ModuleSpec": "A gradgen spec (version 1): one generated Python module of TensorFlow "
    "ops with custom gradients.",
    "OpSpec": "One op: a public function whose gradient is the derived VJP.",
    "InputSpec": "An input in the long form; the short form is the shape list alone.",
    ("ModuleSpec", "version"): "Spec format version; must be 1.",
    ("ModuleSpec", "module"): "Python identifier; the output file is <out>/<module>.py.",
    ("ModuleSpec", "dtype"): "Default dtype of every input; or several float dtypes (a "
    "list, or floating: all four), each op then following its arguments' dtype.",
    ("OpSpec", "dtype"): "The op's dtype, or several float dtypes (a list, or floating), "
    "overriding the module's dtype.",
    ("ModuleSpec", "doc"): "Module docstring.",
    ("ModuleSpec", "ops"): "The ops, in order.",
    ("OpSpec", "name"): "Python identifier, unique in the module.",
    ("OpSpec", "doc"): "The op's docstring summary.",
    ("OpSpec", "inputs"): "Inputs in argument order: a shape list, or {shape, dtype, "
    "differentiable}.",
    ("OpSpec", "where"): "Named intermediates, in order; each may use the inputs and "
    "earlier intermediates.",
    ("OpSpec", "output"): "The one output's expression (the op returns one tensor).",
    ("OpSpec", "outputs"): "Named outputs' expressions (the op returns a tuple in order).",
    ("OpSpec", "fuse"): "xla: the forward and the gradient each one XLA-compiled kernel "
    "(tf.function(jit_compile=True)), also in a model that does not use XLA; none: "
    "TensorFlow ops (default: the module's fuse).",
    ("ModuleSpec", "fuse"): "The default of every op's fuse: none (default) or xla.",
    ("OpSpec", "memory"): "save (default without fuse): the gradient reuses forward values "
    "kept alive; recompute (default with fuse: xla): it computes them again from the "
    "inputs, for a lower peak memory.",
    ("OpSpec", "order"): "The highest derivative order gradgen derives symbolically, 1 to "
    "4: each gradient function up to it is a tf.custom_gradient of its own, derived with "
    "the same stable forms and guards; beyond it, TensorFlow's autodiff of the last one "
    "(default: the module's order).",
    ("ModuleSpec", "order"): "The default of every op's order: 1 (default) to 4.",
    ("InputSpec", "shape"): "Dims: a size >= 0, null (known at run time) or a dim name "
    "(the same size wherever the name appears in the op); the first may be '...': any "
    "number of leading batch dims, broadcast across inputs as NumPy does.",
    ("InputSpec", "dtype"): "The input's dtype (default: the module's dtype).",
    ("InputSpec", "domain"): "Where tests and the build-time check draw the input's "
    "values: [low, high], positive ([0.1, 3]) or negative ([-3, -0.1]). The accuracy "
    "audit still tries the dtype's extreme points.",
    ("InputSpec", "differentiable"): "Whether a gradient is returned (default: true for "
    "float and complex dtypes; integers are never differentiated).",
}


def json_schema() -> dict:
    """The JSON Schema of a spec (draft 2020-12), for editors and CI validators.

    Built from the pydantic models, with the forms the loader also accepts: an input
    given as its shape list alone, and an expression written as a YAML number.
    """
    schema = ModuleSpec.model_json_schema()
    defs = schema["$defs"]
    expression = {"anyOf": [{"type": "string", "minLength": 1,
                             "maxLength": MAX_EXPRESSION_CHARS}, {"type": "number"}]}
    shape = defs["InputSpec"]["properties"]["shape"]
    op = defs["OpSpec"]["properties"]
    name_pattern = IDENTIFIER_RE.pattern

    def mapping(values):
        return {
            "type": "object",
            "patternProperties": {name_pattern: values},
            "additionalProperties": False,
        }

    op["inputs"] = dict(
        mapping({"anyOf": [shape, {"$ref": "#/$defs/InputSpec"}]}), minProperties=1
    )
    op["where"] = mapping(expression)
    op["output"] = expression
    op["outputs"] = dict(mapping(expression), minProperties=1)
    defs["OpSpec"]["oneOf"] = [{"required": ["output"]}, {"required": ["outputs"]}]
    schema["properties"]["version"] = {"const": SPEC_VERSION}
    dtype_set = {"anyOf": [
        {"enum": list(DTYPES) + [FLOATING]},
        {"type": "array", "items": {"enum": list(FLOAT_DTYPES)}, "minItems": 1,
         "maxItems": 4},
    ]}
    schema["properties"]["dtype"] = dict(dtype_set, default="float32")
    defs["OpSpec"]["properties"]["dtype"] = dict(dtype_set)
    schema["properties"]["doc"] = {"type": "string"}
    defs["OpSpec"]["properties"]["doc"] = {"type": "string"}
    defs["InputSpec"]["properties"]["dtype"] = {"enum": list(DTYPES)}
    defs["InputSpec"]["properties"]["differentiable"] = {"type": "boolean"}
    for name, model in (("ModuleSpec", schema), ("OpSpec", defs["OpSpec"]),
                        ("InputSpec", defs["InputSpec"])):
        model["description"] = _DESCRIPTIONS[name]
        model.pop("title", None)
        for prop, body in model["properties"].items():
            body.pop("title", None)
            body["description"] = _DESCRIPTIONS[(name, prop)]
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://gradgen.dev/schema/spec-v1.json",
        "title": "gradgen spec",
        **schema,
    }
    return schema
