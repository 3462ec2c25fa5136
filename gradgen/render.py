"""Render Python source from prepared views with Jinja templates.

Consumes: a :class:`ModuleMeta` and the ops' views (:mod:`gradgen.views`, where every
decision and all printing happen). Guarantees: :func:`render_module` and
:func:`render_tests` return source text (before formatting); the templates in
``templates/`` only loop over prepared strings (``StrictUndefined``: a missing value is
an error, never an empty string). User text (docs) reaches the output only inside
docstrings built by :func:`docstring_literal`, which escapes anything that could end
the string. This module imports neither SymPy nor TensorFlow.
"""

from __future__ import annotations

import keyword
import textwrap
from functools import lru_cache
from importlib import resources
from dataclasses import dataclass, field
from pathlib import Path

import jinja2

from . import runtime
from .safe import comment, literal

_CONTROL = {i for i in range(32)} - {9, 10} | {127}
LINE_LENGTH = 88


def templates_dir() -> Path:
    """The template folder: inside the installed package, or ``templates/`` of a checkout."""
    packaged = resources.files("gradgen") / "templates"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parent.parent / "templates"


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
        finalize=_finalize,
    )
    env.filters.update(code=_code, name=_name, literal=_literal, comment=_comment)
    return env


class Code(str):
    """Text a template may write as it is: source that gradgen printed, or a value made
    safe by one of the filters below."""


def _finalize(value):
    """Every ``{{ ... }}`` of a template ends in a filter that makes :class:`Code`;
    anything else is a gradgen bug (a value pasted into code unescaped)."""
    if not isinstance(value, Code):
        raise jinja2.TemplateError(
            f"template wrote {value!r} without | code, | name, | literal or | comment"
        )
    return value


def _code(text: str) -> Code:
    """Source that gradgen made (the printer's statements, checks, docstrings built by
    :func:`docstring_literal`): one Python fragment, no user text outside literals."""
    if not isinstance(text, str):
        raise jinja2.TemplateError(f"| code of a {type(text).__name__}")
    return Code(text)


def _name(text: str) -> Code:
    """An identifier (validated by the spec: ASCII, not a keyword)."""
    if not (isinstance(text, str) and text.isascii() and text.isidentifier()
            and not keyword.iskeyword(text)):
        raise jinja2.TemplateError(f"| name of {text!r}, which is not an identifier")
    return Code(text)


def _literal(value) -> Code:
    """A Python literal of ``value`` (:func:`gradgen.safe.literal`)."""
    return Code(literal(value))


def _comment(text) -> Code:
    """Text for a ``#`` comment, on one line (:func:`gradgen.safe.comment`)."""
    return Code(comment(text))


def docstring_literal(text: str) -> str:
    """A triple-quoted Python string literal whose value is ``text``.

    Backslashes, quote runs and control characters are escaped, so no text can end the
    literal early or inject code.
    """
    out = []
    for ch in text.replace("\r\n", "\n").replace("\r", "\n"):
        code = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif code in _CONTROL or 0x2028 <= code <= 0x2029 or code == 0xFEFF:
            out.append(f"\\x{code:02x}" if code < 256 else f"\\u{code:04x}")
        else:
            out.append(ch)
    body = "".join(out)
    body = "\n".join(line.rstrip() for line in body.split("\n"))
    return f'"""{body}\n"""' if "\n" in body else f'"""{body}"""'


def wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters; continuation lines are
    indented by four spaces (long formulas stay readable in comments and docstrings)."""
    return textwrap.wrap(
        text, width=width, subsequent_indent="    ", break_long_words=True,
        break_on_hyphens=False,
    ) or [""]


def _prose(text: str, width: int) -> list[str]:
    """User text wrapped to ``width``, keeping its line breaks and blank lines."""
    out = []
    for line in text.strip().splitlines():
        stripped = line.rstrip()
        if not stripped:
            out.append("")
            continue
        indent = stripped[: len(stripped) - len(stripped.lstrip())]
        out += textwrap.wrap(
            stripped.lstrip(), width=width, initial_indent=indent, subsequent_indent=indent,
            break_long_words=False, break_on_hyphens=False, expand_tabs=False,
            replace_whitespace=False,
        ) or [""]
    return out


@dataclass(frozen=True)
class ModuleMeta:
    """The module-level facts of a generated file (its header and docstring).

    Attributes:
        name: module name.
        doc: the spec's doc text, or None.
        spec_path: the spec's path relative to the output file's folder.
        spec_sha256: hex digest of the spec's bytes.
        version: the gradgen version.
    """

    name: str
    doc: str | None
    spec_path: str
    spec_sha256: str
    version: str


@dataclass
class OpViews:
    """What the templates need for one op.

    Attributes:
        module: the op's view for ``templates/op.py.j2``.
        uses_math: the op's code uses the ``math`` module.
        helpers: the runtime helpers (:mod:`gradgen.runtime`) the op's code calls
            (``_check_input``, ``_unbroadcast``...): what its module imports.
        test: the op's view for ``templates/test_module.py.j2`` (cases without the
            sampling range, which verification decides: see :func:`test_cases`).
        test_math, test_helpers: the same needs for the reference forward (the emitted
            tests take those helpers from the runtime module).
    """

    module: dict
    uses_math: bool
    helpers: list
    test: dict
    test_math: bool
    test_helpers: list
    cases: list = field(default_factory=list)

    def to_json(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, data: dict) -> "OpViews":
        return cls(**data)


def test_cases(views: OpViews, sample_range) -> list[str]:
    """The op's test cases as Python literals: inputs with a declared domain are drawn
    from it, the others from ``sample_range`` (where verification sampled)."""
    low, high = sample_range or (0.5, 1.5)
    return [
        literal((name, tuple(dtypes), tuple(flags), tuple(tuple(s) for s in shapes),
                 tuple(tuple(d) if d else None for d in domains), (low, high), solves))
        for name, dtypes, flags, shapes, domains, solves in views.cases
    ]


def render_module(meta: ModuleMeta, ops: list) -> str:
    """The module's source (unformatted; see :mod:`gradgen.formatter`) from the ops'
    views (:class:`gradgen.views.OpViews`)."""
    doc = meta.doc.strip() if meta.doc and meta.doc.strip() else (
        "TensorFlow ops with custom gradients, generated by gradgen."
    )
    imports = sorted({h for v in ops for h in v.helpers})
    return _environment().get_template("module.py.j2").render(
        version=meta.version,
        spec_path=meta.spec_path,
        spec_sha256=meta.spec_sha256,
        docstring=docstring_literal("\n".join(_prose(doc, LINE_LENGTH))),
        uses_math=any(v.uses_math for v in ops),
        imports=[runtime.helper(h) for h in imports],
        ops=[_op_view(v.module) for v in ops],
    )


def render_runtime(version: str, names) -> str:
    """The runtime module of an output folder (:data:`gradgen.runtime.FILE`, unformatted)
    holding the helpers ``names`` (what the folder's generated modules import) and every
    helper they call, in the registry's order, each under a comment that says what it
    does."""
    helpers = runtime.ordered(names)
    return _environment().get_template("runtime.py.j2").render(
        version=version,
        uses_math=any(h.uses_math for h in helpers),
        helpers=[{"name": h.name, "description": h.description, "template": h.template}
                 for h in helpers],
    )


def render_helpers(names) -> str:
    """The code of the runtime helpers ``names`` need, with the helpers they call (no
    imports): the accuracy audit's mirror runs it against its NumPy stand-in of ``tf``."""
    return _environment().get_template("helpers.py.j2").render(
        helper_templates=[h.template for h in runtime.ordered(names)])


def defined_names(view: dict) -> list[str]:
    """The module-level names an op's view defines: its public function, its
    ``tf.custom_gradient`` function (one per dtype group of a generic op) and a fused
    op's two kernels."""
    names = [view["name"]]
    for impl in _op_view(view)["impls"]:
        names.append(impl["impl"])
        names += [level["impl"] for level in impl.get("level_impls", ())]
        names += [impl[k] for k in ("forward_kernel", "backward_kernel") if k in impl]
    return names


def chained(impl: dict) -> dict:
    """A ``tf.custom_gradient`` function's view (``impl``: ``_name_vjp``) with its
    higher orders (its ``levels``, from ``order``) as functions of their own.

    Its gradient function computes the input gradients as before (from the forward
    values it kept), then passes them through ``_name_grad_vjp(inputs, upstreams,
    gradients)``: the identity on ``gradients``, as a ``tf.custom_gradient`` whose own
    gradient function is the derived second-order VJP with respect to the inputs and
    upstreams (recomputing what it needs from them; None for ``gradients``, so that
    TensorFlow does not differentiate the first-order code too). Order 3 passes that
    function's results through ``_name_grad_grad_vjp`` likewise, and so on: each order
    costs only when it is asked for. ``level_impls``: those functions' views."""
    levels = impl.get("levels") or []
    if not levels:
        return _forward_mode(impl, impl)
    base = impl["impl"][: -len("_vjp")]
    names = [f"{base}{'_grad' * k}_vjp" for k in range(1, len(levels) + 1)]
    bodies = [dict(impl)]
    for k, (level, name) in enumerate(zip(levels, names)):
        outs = [o.strip() for o in level["returns"].strip("()").split(",") if o.strip()]
        body = dict(level, impl=name, dtype_note=impl["dtype_note"], order=k + 2,
                    caller=([impl["impl"]] + names)[k], recompute=False, recomputed=[],
                    params=", ".join([level["params"]] + outs), forward=[],
                    backward=level["forward"] + level["backward"],
                    grad_returns=", ".join([level["grad_returns"]] + ["None"] * len(outs)))
        caller = bodies[-1]
        # the caller's gradients, in input order: the level's outputs (its own names
        # for them are its parameters')
        own = caller["levels_grads"] if k else caller["grad_returns"]
        grads = [g for g in own.split(", ") if g != "None"]
        targets = ", ".join(grads) + ("," if len(grads) == 1 else "")
        caller["backward"] = list(caller["backward"]) + [{
            "comments": [f"the same values, with their derived VJP: order {k + 2}"],
            "code": f"{targets} = {name}({', '.join([level['params']] + grads)})",
        }]
        body["levels_grads"] = level["grad_returns"]
        bodies.append(body)
    bodies = [_forward_mode(body, impl) for body in bodies]
    return dict(bodies[0], level_impls=bodies[1:])


def _forward_mode(body: dict, impl: dict) -> dict:
    """``body`` with ``jvp_primals``: the tuple of its parameters that ``_with_jvp``
    takes the JVP in (empty where ``impl``, the op's first-order function, has no
    ``forward_mode``: see :func:`gradgen.views.op_views`)."""
    names = [p.strip() for p in body["params"].split(",") if p.strip()]
    primals = "(" + ", ".join(names) + ("," if len(names) == 1 else "") + ")"
    return dict(body, jvp_primals=primals if impl.get("forward_mode") else "")


def _op_view(view: dict) -> dict:
    """The op template's view: the public function's checks and the dispatch to its
    ``tf.custom_gradient`` function (one per dtype for a generic op: ``variants``)."""
    if "variants" in view:
        return view
    return dict(view, dispatch=[f"return {view['impl']}({view['params']})"],
                impls=[chained(dict(view, dtype_note=""))])


def render_tests(meta: ModuleMeta, module_path: str, ops: list, cases: list) -> str:
    """The pytest module checking ``meta``'s ops (see
    :func:`gradgen.emit.generate_tests`).

    Args:
        meta: the generated module's facts.
        module_path: path of the generated module relative to the test's folder.
        ops: the ops' views (:class:`gradgen.views.OpViews`).
        cases: per op, its test cases as Python literals.
    """
    views = [dict(v.test, cases=c) for v, c in zip(ops, cases)]
    # one reference forward per op (a generic op's dtypes share it)
    references = list({v["name"]: v for v in views}.values())
    return _environment().get_template("test_module.py.j2").render(
        version=meta.version,
        spec_path=meta.spec_path,
        spec_sha256=meta.spec_sha256,
        module=meta.name,
        module_path=module_path,
        uses_math=any(v.test_math for v in ops),
        helpers=sorted({h for v in ops for h in v.test_helpers}),
        ops=views,
        references=references,
    )


def starter_spec(module: str) -> str:
    """The commented starter spec that ``gradgen init`` writes (module name from the file
    name, made a valid identifier)."""
    import re

    from .naming import reserved_reason

    name = re.sub(r"[^A-Za-z0-9_]", "_", module).strip("_") or "ops"
    if not name[0].isalpha() or reserved_reason(name):
        name = f"ops_{name}".rstrip("_")
    return _environment().get_template("starter.yaml.j2").render(module=name)
