"""gradgen: generate TensorFlow custom-gradient ops from YAML specs.

The public API is small: :func:`load_spec` (read and validate a spec), :func:`generate`
(specs -> ``{relative path: source}``, nothing written), the Python API of
:mod:`gradgen.api` (:func:`op`, :class:`OpDef`, :func:`build_spec`, :func:`spec_text`,
:func:`generate_source`, :func:`load`) and ``__version__``. Everything else is internal.
Importing gradgen does not import TensorFlow (nor SymPy, until an API function is used).
"""

from .version import __version__

_API = ("GeneratedOp", "OpDef", "build_spec", "generate_source", "load", "op", "spec_text")

__all__ = ["__version__", "generate", "load_spec", *_API]


def __getattr__(name):
    # Lazy, so that `gradgen --help` stays fast.
    if name == "load_spec":
        from .spec import load_spec

        return load_spec
    if name == "generate":
        from .emit import generate

        return generate
    if name in _API:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'gradgen' has no attribute {name!r}")
