"""The sizes a spec may reach, and the spec format version this gradgen reads.

Receives: nothing (constants only).
Returns: the bounds the loader and the model enforce: :data:`MAX_SPEC_BYTES` (a spec
file), :data:`MAX_EXPRESSION_CHARS` (one expression's text), :data:`MAX_DIM` and
:data:`MAX_RANK` (a shape), :data:`MAX_OPS` (ops in a module), :data:`MAX_ORDER` (the
highest derivative order derived symbolically); and :data:`SPEC_VERSION`.
"""

MAX_SPEC_BYTES = 1 << 20
MAX_EXPRESSION_CHARS = 4000
MAX_DIM = 1 << 40
MAX_RANK = 32
MAX_OPS = 1000
MAX_ORDER = 4
SPEC_VERSION = 1
