"""The registry of runtime helpers (gradgen.runtime), without TensorFlow or a build:
each helper's declaration, the helpers a set of names needs and the order they are
written in, and the names a generated module's source takes from the runtime module
(read from the part before its first definition, within a bound on its size)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradgen import runtime
from gradgen.runtime import MAX_PREAMBLE, Helper, _preamble, imported_names

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
NAMES = [h.name for h in runtime.HELPERS]


# ------------------------------------------------------------------ declarations


def test_a_helper_is_declared_with_its_template_and_defaults():
    """The template is the name without its leading underscores, under runtime/; a
    helper calls nothing and needs no math unless it says so."""
    assert runtime._helper("_x", "does x") == Helper(
        "_x", "runtime/x.py.j2", "does x", (), False)
    assert runtime._helper("__Xy_", "d", ("_x",), True) == Helper(
        "__Xy_", "runtime/Xy_.py.j2", "d", ("_x",), True)


def test_every_declared_helper_has_its_template_and_known_callees():
    assert len(set(NAMES)) == len(NAMES)
    assert runtime.BY_NAME == {h.name: h for h in runtime.HELPERS}
    for h in runtime.HELPERS:
        assert h.name.startswith("_") and h.description, h
        assert (TEMPLATES / h.template).is_file(), h.template
        assert set(h.calls) <= set(NAMES) and h.name not in h.calls, h


def test_helper_returns_a_declared_name_and_refuses_others():
    for name in NAMES:
        assert runtime.helper(name) == name
    for name in ("_nope", "logcosh", "", "_LOGCOSH"):
        with pytest.raises(KeyError):
            runtime.helper(name)


# ------------------------------------------------------------------ dependencies


def test_with_dependencies_adds_every_helper_called_transitively():
    assert runtime.with_dependencies([]) == set()
    assert runtime.with_dependencies(["_logcosh"]) == {"_logcosh"}
    assert runtime.with_dependencies(["_check_input"]) == {
        "_check_input", "_check_representable", "_dtype_of"}
    assert runtime.with_dependencies(["_reduce_logsumexp"]) == {
        "_reduce_logsumexp", "_lse_parts", "_softmax", "_softmax_grad"}  # two levels
    assert runtime.with_dependencies(iter(["_log_erfc", "_log_erfc"])) == {
        "_log_erfc", "_erfcx"}  # any iterable, repeats once


def test_with_dependencies_ends_on_helpers_that_call_each_other():
    assert runtime.with_dependencies(["_cofactor"]) == {"_cofactor", "_complex_det"}
    assert runtime.with_dependencies(["_complex_det"]) == {"_cofactor", "_complex_det"}


def test_with_dependencies_is_closed_and_leaves_its_argument_alone():
    names = ["_check_input", "_log_softmax"]
    out = runtime.with_dependencies(names)
    assert names == ["_check_input", "_log_softmax"]
    assert runtime.with_dependencies(out) == out
    for name in out:
        assert set(runtime.BY_NAME[name].calls) <= out


def test_with_dependencies_refuses_an_unknown_name():
    with pytest.raises(KeyError, match="_nope"):
        runtime.with_dependencies(["_logcosh", "_nope"])


def test_ordered_lists_what_the_names_need_in_the_registry_order():
    got = runtime.ordered(["_unbroadcast", "_log_erfc", "_check_input"])
    assert [h.name for h in got] == [
        "_check_input", "_check_representable", "_dtype_of", "_erfcx", "_log_erfc",
        "_unbroadcast"]
    assert all(isinstance(h, Helper) for h in got)
    assert runtime.ordered([]) == []
    assert runtime.ordered(reversed(NAMES)) == list(runtime.HELPERS)


# ------------------------------------------------------------------ imported names


@pytest.mark.parametrize("source, names", [
    # how gradgen writes a module's imports: the runtime module, then one line a name
    (("from . import _gradgen_runtime as _runtime\n"
      "_check_input = _runtime._check_input\n_erfcx = _runtime._erfcx\n"),
     {"_check_input", "_erfcx"}),
    ("import _gradgen_runtime as _runtime\n_erfcx = _runtime._erfcx\n", {"_erfcx"}),
    ("import _gradgen_runtime\n_erfcx = _gradgen_runtime._erfcx\n", {"_erfcx"}),
    ("from . import _gradgen_runtime\n_erfcx = _gradgen_runtime._erfcx\n", {"_erfcx"}),
    ("from . import other, _gradgen_runtime as rt\n_a = rt._a\n", {"_a"}),
    # earlier builds' form
    ("from ._gradgen_runtime import _a, _b as b\nfrom _gradgen_runtime import _c\n",
     {"_a", "_b", "_c"}),
    (("try:\n    from ._gradgen_runtime import _a\nexcept ImportError:\n"
      "    from _gradgen_runtime import _a\n"), {"_a"}),
])
def test_imported_names_reads_each_form_gradgen_writes(source, names):
    assert imported_names(source) == names


@pytest.mark.parametrize("source", [
    "from .._gradgen_runtime import _a\n",  # a parent package's runtime
    "from pkg._gradgen_runtime import _a\n",
    "from other import _a\nimport os\n",
    "from pkg import _gradgen_runtime as _runtime\n_a = _runtime._a\n",
    "from .. import _gradgen_runtime as _runtime\n_a = _runtime._a\n",
    "import os as _runtime\n_a = _runtime._a\n",
    "from . import _gradgen_runtime as _runtime\n_a = other._a\n",
    "from . import _gradgen_runtime as _runtime\n_a = _runtime._b\n",  # renamed
    "from . import _gradgen_runtime as _runtime\n_a = _a._a\n",
    "from . import _gradgen_runtime as _runtime\n_a = _runtime\n_b = 1\n",
    "from . import _gradgen_runtime as _runtime\n_a = _runtime._a._a\n",
    "from . import _gradgen_runtime as _runtime\n_a = _b = _runtime._a\n",
    "from . import _gradgen_runtime as _runtime\n_a, _b = _runtime._a\n",
    "from . import _gradgen_runtime as _runtime\nx._a = _runtime._a\n",
    "from . import _gradgen_runtime as _runtime\n_a: int = _runtime._a\n",
    "",
])
def test_imported_names_ignores_what_is_not_a_runtime_import(source):
    assert imported_names(source) == set()


def test_imported_names_reads_only_before_the_first_definition():
    head = "from ._gradgen_runtime import _a\n"
    for definition in ("def f():\n    pass\n", "class C:\n    pass\n",
                       "@decorator\ndef f():\n    pass\n",
                       "async def f():\n    pass\n"):
        source = head + definition + "from ._gradgen_runtime import _b\n"
        assert imported_names(source) == {"_a"}, definition
    # a definition inside a block is not the module's first definition
    source = head + "if True:\n    def f():\n        pass\nfrom _gradgen_runtime import _b\n"
    assert imported_names(source) == {"_a", "_b"}


@pytest.mark.parametrize("source", [
    "from ._gradgen_runtime import (_a\n",  # syntax error
    "from ._gradgen_runtime import _a\nx = '''\n",  # tokenize: EOF in a string
    "from ._gradgen_runtime import _a\nx = 1\0\n",  # null byte
    "from ._gradgen_runtime import _a\nx = '\ud800'\n",  # not encodable: ValueError
    "from ._gradgen_runtime import _a\n  x = 1\n",  # indentation
    "from ._gradgen_runtime import _a\nx = a" + ".b" * 100_000 + "\n",  # too deep
    "from ._gradgen_runtime import _a\nx = " + "-" * 200_000 + "1\n",  # parser's memory
])
def test_imported_names_is_empty_when_the_preamble_is_not_python(source):
    assert imported_names(source) == set()


# ------------------------------------------------------------------ the preamble


def test_preamble_ends_before_the_line_of_the_first_definition():
    body = "a = 1\nb = 2\n"
    for definition in ("def", "class", "@", "async"):
        assert _preamble(body + definition + " f(): pass\nc = 3\n") == body, definition
    assert _preamble("def f(): pass\na = 1\n") == ""
    assert _preamble(body) == body
    assert _preamble("a = 1") == "a = 1"
    assert _preamble("") == ""


def test_preamble_ignores_definitions_inside_blocks():
    source = "a = 1\nif a:\n    def f(): pass\n    class C: pass\n    @d\n    def g(): pass\n"
    assert _preamble(source) == source
    source = "a = 1\nif a:\n def f(): pass\n"  # indented by one column
    assert _preamble(source) == source


def _sized(*parts: str, total: int) -> str:
    """``parts`` with a comment line before the last one, padded so that everything
    up to that comment line's end is ``total`` characters."""
    *head, last = parts
    text = "".join(head)
    pad = total - len(text) - 2  # "#" and "\n"
    return text + "#" + "x" * pad + "\n" + last


def test_preamble_past_its_bound_is_cut_just_past_it():
    """Past MAX_PREAMBLE characters (after the first line) the preamble is the
    source's first MAX_PREAMBLE + 1 characters, and imported_names gives up."""
    source = _sized("from ._gradgen_runtime import _a\n", "def f(): pass\n",
                    total=MAX_PREAMBLE + 10)
    assert _preamble(source) == source[:MAX_PREAMBLE + 1]
    assert imported_names(source) == set()
    # cut at the first token read past the bound, even one in the first columns
    source = _sized("a = 1\n", "x\ndef f(): pass\n", total=MAX_PREAMBLE)
    assert _preamble(source) == source[:MAX_PREAMBLE + 1]


def test_preamble_at_its_bound_is_read():
    source = _sized("from ._gradgen_runtime import _a\n", "def f(): pass\n",
                    total=MAX_PREAMBLE)
    assert _preamble(source) == source[:MAX_PREAMBLE]
    assert imported_names(source) == {"_a"}
    source = _sized("from ._gradgen_runtime import _a\n", "", total=MAX_PREAMBLE)
    assert _preamble(source) == source
    assert imported_names(source) == {"_a"}


def test_a_long_first_line_is_read_to_its_end():
    """The bound is checked from the second line on: a first line longer than it
    is kept whole (imported_names then refuses it by its length)."""
    first = "#" + "x" * MAX_PREAMBLE + "\n"
    assert _preamble(first + "def f(): pass\n") == first
    assert imported_names(first + "def f(): pass\n") == set()
