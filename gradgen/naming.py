"""Every name that reaches generated code is decided here.

Consumes: user names from a spec (module, ops, inputs, ``where`` intermediates, outputs,
dim names). Guarantees:

* a user name is ASCII (``[A-Za-z][A-Za-z0-9_]*``), is not a Python keyword or soft
  keyword, not a builtin, not a name of the expression language (``exp``, ``pi``...),
  and not a name the generated module itself uses (``tf``, ``math``); names starting with
  ``_`` are reserved for gradgen, so user names can never collide with generated
  temporaries. Op names, which never appear in expressions, are looser
  (:func:`op_name_reason`): any identifier but keywords and what the module binds or
  calls;
* generated local names (temporaries, upstream cotangents, gradients) are unique within
  their function: :class:`NameScope` hands them out, suffixing ``_1``, ``_2``... when a
  preferred name is taken.
"""

from __future__ import annotations

import builtins
import keyword
import re
import sys

IDENTIFIER_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
MAX_NAME_LENGTH = 64

# Names version 1 of the spec format gave a meaning to (functions and constants): they
# are reserved, and this list never grows. Functions declared later (gradgen.functions)
# are not reserved, so specs that named a value like one stay valid.
EXPRESSION_NAMES = frozenset(
    """
    exp log sqrt sin cos tan asin acos atan atan2 sinh cosh tanh asinh acosh atanh
    erf erfc Abs abs sign floor ceiling Heaviside Max Min Piecewise where log1p expm1 sigmoid
    softplus transpose inverse det trace sum mean einsum pi E I True False
    """.split()
)

# Names that generated modules bind at module level or rely on.
MODULE_NAMES = frozenset({"tf", "math", "functools"})

# Builtins that generated modules call (in templates/runtime/ and op bodies); an op
# of the same name, bound at module level, would shadow them. tests/test_naming.py
# checks this list against every builtin the rendered examples load.
MODULE_BUILTINS = frozenset(
    """
    abs all any bool dict enumerate float getattr int isinstance len list max min range
    reversed str sum tuple zip ImportError NotImplementedError TypeError ValueError
    """.split()
)


def reserved_reason(name: str) -> str | None:
    """Why ``name`` cannot be a user name in a spec, or None if it can.

    Args:
        name: a candidate op, input, intermediate, output or module name.

    Returns:
        A short phrase such as ``"a Python keyword"``, or None when the name is allowed.
    """
    if not IDENTIFIER_RE.match(name):
        if name.startswith("_"):
            return "reserved: names starting with '_' belong to gradgen"
        return "not an ASCII identifier (letters, digits and '_', starting with a letter)"
    if len(name) > MAX_NAME_LENGTH:
        return f"longer than {MAX_NAME_LENGTH} characters"
    if keyword.iskeyword(name) or keyword.issoftkeyword(name):
        return "a Python keyword"
    if name in EXPRESSION_NAMES:
        return "a name of the expression language (a function or constant)"
    if name in MODULE_NAMES:
        return "a name the generated module uses"
    if hasattr(builtins, name):
        return "a Python builtin"
    return None


# Modules that a generated module, on sys.path beside them, would shadow: the standard
# library, what gradgen's output and its users import, and the files Python and pytest
# run by name at start-up.
SHADOWED_MODULES = frozenset(sys.stdlib_module_names) | frozenset(
    """
    numpy tensorflow keras tf_keras tensorboard ml_dtypes absl google protobuf h5py
    sympy mpmath scipy jax jaxlib torch pandas matplotlib numba IPython
    pytest _pytest pluggy conftest sitecustomize usercustomize setuptools pip
    pkg_resources wheel six typing_extensions gradgen black jinja2 yaml pydantic click
    """.split()
)
_SHADOWED_FOLDED = frozenset(m.lower() for m in SHADOWED_MODULES)


def module_reason(name: str) -> str | None:
    """Why ``name`` cannot be a generated module's name, or None if it can: a reason of
    :func:`reserved_reason`, or the name (compared without case, as macOS and Windows
    file systems do) of a module the output folder would shadow for every Python
    process with that folder on its path (``numpy``, ``conftest``, ``sitecustomize``)."""
    reason = reserved_reason(name)
    if reason is None and name.lower() in _SHADOWED_FOLDED:
        reason = ("the name of a module it would shadow (a standard-library module, a "
                  "common package, or a file Python or pytest imports at start-up)")
    return reason


def op_name_reason(name: str) -> str | None:
    """Why ``name`` cannot name an op, or None if it can.

    An op's name never appears in an expression, so names of the expression language
    (``softplus``, ``sigmoid``, ``exp``) are allowed; the generated module calls
    TensorFlow through ``tf.`` only, which an op cannot shadow. Refused: what is not an
    ASCII identifier or starts with ``_``, Python keywords, and names the generated
    module binds (``tf``, ``math``) or calls (the builtins in :data:`MODULE_BUILTINS`).
    """
    if not IDENTIFIER_RE.match(name):
        return reserved_reason(name)
    if len(name) > MAX_NAME_LENGTH:
        return f"longer than {MAX_NAME_LENGTH} characters"
    if keyword.iskeyword(name) or keyword.issoftkeyword(name):
        return "a Python keyword"
    if name in MODULE_NAMES:
        return "a name the generated module uses"
    if name in MODULE_BUILTINS:
        return "a Python builtin that the generated module calls"
    return None


class NameScope:
    """Hands out unique local names inside one generated function.

    Args:
        taken: names already bound in the scope (the function's parameters and other
            user names).
    """

    def __init__(self, taken: set[str] | frozenset[str] = frozenset()):
        self._taken = set(taken) | set(MODULE_NAMES)

    def claim(self, preferred: str) -> str:
        """Return ``preferred`` if free, else ``preferred_1``, ``preferred_2``...; mark it taken."""
        base = re.sub(r"[^A-Za-z0-9_]", "_", preferred) or "t"
        if base[0].isdigit():
            base = "t" + base
        if keyword.iskeyword(base) or hasattr(builtins, base):
            base = base + "_"
        name, n = base, 0
        while name in self._taken:
            n += 1
            name = f"{base}_{n}"
        self._taken.add(name)
        return name

    def __contains__(self, name: str) -> bool:
        return name in self._taken
