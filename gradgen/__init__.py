"""gradgen: generate TensorFlow custom-gradient ops from YAML specs.

The public API is small: :func:`load_spec` (read and validate a spec), :func:`generate`
(specs -> ``{relative path: source}``, nothing written) and ``__version__``. Everything
else is internal. Importing gradgen does not import TensorFlow.
"""

__version__ = "0.1.0"

__all__ = ["__version__", "generate", "load_spec"]


def __getattr__(name):
    # Lazy, so that `gradgen --help` stays fast.
    if name == "load_spec":
        from .spec import load_spec

        return load_spec
    if name == "generate":
        from .emit import generate

        return generate
    raise AttributeError(f"module 'gradgen' has no attribute {name!r}")
