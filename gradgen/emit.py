"""Generation as a pure function, and the one place that touches the output folder.

Consumes: spec paths and an output folder. Guarantees:

* :func:`generate` reads the specs and returns ``{relative path: text}`` without writing
  anything: a module per spec and the folder's runtime module (:func:`runtime_files`:
  the helpers of those modules and of the generated modules already in the folder that
  the build leaves there); ``build``, ``check`` and ``build --dry-run`` all consume
  that map (through :mod:`gradgen.outputs`), so what ``check`` compares is exactly
  what ``build`` writes;
* every op is derived, printed, verified and audited for accuracy (or taken from
  :mod:`gradgen.cache`, which holds what an identical op gave before; see
  :mod:`gradgen.stability.audit`) and every spec rendered before anything is written; a
  :class:`~gradgen.errors.SpecError` (listing the problems of every spec) or a
  :class:`~gradgen.verify.VerificationError` leaves the output folder untouched;
* comparing that map with an output folder and writing it is :mod:`gradgen.outputs`.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import io
import os
import tokenize
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Callable

from . import cache, runtime
from .version import __version__
from .errors import Diagnostic, SpecError, UsageError
from .render import (ModuleMeta, OpViews, defined_names, render_module, render_runtime,
                     render_tests, test_cases)
from .printer import TFPrinter
from .safe import check_path_text, printable
from .spec import SpecDocument, load_spec

Progress = Callable[[str], None]


def _relative_path(target: str, folder: str, what: str) -> str:
    """``target`` relative to ``folder``, both with symbolic links resolved (so a spec
    named through a link gives the same header as the same spec named directly).

    Raises:
        UsageError: the result holds a control, format or line-break character (a link
            to such a name): it is written into generated code.
    """
    rel = os.path.relpath(os.path.realpath(target), os.path.realpath(folder))
    return check_path_text(Path(rel).as_posix(), what)


@dataclass(frozen=True)
class Generated:
    """One spec's output: the document, the module's facts, the ops' views (printed
    code, for the module and the emitted tests), the module text and, per op, the input
    range where verification sampled (None when not verified), its accuracy audit and
    its derived orders' audits (orders 2 and up, in order)."""

    doc: SpecDocument
    meta: ModuleMeta
    views: list = field(compare=False)
    text: str
    ranges: dict = field(default_factory=dict, compare=False)
    audits: dict = field(default_factory=dict, compare=False)
    test_views: list = field(default_factory=list, compare=False)
    level_audits: dict = field(default_factory=dict, compare=False)


def _op_entry(
    doc: SpecDocument, index: int, verify: bool, names: list, progress, audit: bool = True,
    dtypes: tuple | None = None,
) -> dict:
    """Derive, print and verify one op; or take the result from the cache. ``dtypes``:
    the op is one dtype (:func:`gradgen.spec.dtype_variant`) of an op generated for
    these; its views then also hold the generic op's docstring and checks.

    Raises:
        SpecError: the op cannot be derived or printed.
        VerificationError: its gradient fails the numerical check (not cached).
    """
    op = doc.model.ops[index]
    k = cache.key("op", {"op": op.model_dump(mode="json"), "dtype": doc.model.dtype,
                         "names": names, "verify": verify, "audit": audit,
                         "dtypes": list(dtypes) if dtypes else None})
    entry = _decoded(cache.get(k))
    if entry is not None:
        return entry
    if progress:
        progress(f"{doc.model.module}.{op.name}")
    from .budget import BudgetExceeded, op_seconds, time_budget

    seconds, budget = op_seconds(op.order or 1), None
    try:
        with time_budget(seconds) as budget:
            from .accuracy import derive_print_verify

            op_ir, views, sampled = derive_print_verify(doc, index, verify)
    except BudgetExceeded as e:
        if e.budget is not budget:
            raise
        raise SpecError(Diagnostic(
            doc.location(("ops", index)),
            f"deriving, printing and verifying this op took longer than {seconds:g} s "
            "(GRADGEN_OP_TIMEOUT per derivative order); simplify the expression, or split "
            "it into `where` intermediates", op.name, None,
        )) from None
    # The accuracy audit always runs (its sentence is part of the docstring, so the
    # output does not depend on --no-verify); --strict-accuracy is applied on the cached
    # result, in _generate_one.
    from .stability.audit import OUT_OF_TIME, Audit, audit_in_budget
    from .stability.audit.mirror import elementwise_reason
    from .stability.audit.report import docstring_line
    from .views import op_views, with_audit_line

    if audit:
        from .accuracy import audited

        op_ir, views, sampled, result = audited(doc, index, verify, (op_ir, views, sampled))
    else:
        result = Audit(op_ir.name, op_ir.dtype, skipped="turned off for this build")
    elementwise = elementwise_reason(op_ir) is None
    levels = [audit_in_budget(level, op_views(level), partial(TFPrinter, level.dtype),
                              level=elementwise)
              for level in op_ir.levels] if audit \
        else []
    lines = [docstring_line(result)] + [
        docstring_line(r).replace("Accuracy audit", f"Accuracy audit of order {k}", 1)
        for k, r in enumerate(levels, start=2)]
    views = with_audit_line(views, op_ir, lines, dtypes)
    entry = {"views": views.to_json(), "range": list(sampled) if sampled else None,
             "audit": result.to_json(), "levels": [r.to_json() for r in levels]}
    if all(r.skipped != OUT_OF_TIME for r in [result, *levels]):
        # (timing is not in the key: audit again next time)
        cache.put(k, entry)
    return _decoded(entry)


def _decoded(entry):
    """(views, sampled range or None, audit, derived orders' audits) from an op's cache
    entry; None for a miss or a malformed entry (which is a miss too)."""
    from .stability.audit import Audit

    if not isinstance(entry, dict):
        return None
    try:
        views = OpViews.from_json(entry["views"])
        sampled = entry["range"]
        if sampled is not None:
            low, high = (float(v) for v in sampled)
            sampled = (low, high)
        levels = tuple(Audit.from_json(a) for a in entry["levels"])
        return views, sampled, Audit.from_json(entry["audit"]), levels
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def _code_of(text: str) -> tuple:
    """What formatting must not change in ``text``: its syntax tree (each string's lines
    stripped: black re-indents docstrings) and its comments."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = "\n".join(line.strip() for line in node.value.strip().splitlines())
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    comments = [t.string.lstrip("#").strip() for t in tokens if t.type == tokenize.COMMENT]
    return ast.dump(tree), comments


def _same_code(source: str, formatted) -> bool:
    """Whether ``formatted`` is ``source`` formatted: a cached text that is not (a
    corrupted or edited cache entry) is a miss, never trusted."""
    if not isinstance(formatted, str):
        return False
    try:
        return _code_of(source) == _code_of(formatted)
    except (SyntaxError, ValueError, tokenize.TokenError, RecursionError):
        return False


def _format(source: str, ops: int, what: str) -> str:
    """black, through the cache (formatting a large module takes a while; a cached text
    is used only when :func:`_same_code` confirms it), within the budget of ``ops`` ops.

    Raises:
        SpecError: formatting ran out of time (naming ``what``, the module).
    """
    k = cache.key("format", hashlib.sha256(source.encode()).hexdigest())
    cached = cache.get(k)
    if _same_code(source, cached):
        return cached
    from .budget import BudgetExceeded, op_seconds, time_budget
    from .formatter import format_source

    seconds, budget = op_seconds() * max(ops, 1), None
    try:
        with time_budget(seconds) as budget:
            text = format_source(source)
    except BudgetExceeded as e:
        if e.budget is not budget:
            raise
        raise UsageError(f"formatting {what} took longer than {seconds:g} s (its ops' "
                         "budgets, GRADGEN_OP_TIMEOUT)") from None
    cache.put(k, text)
    return text


def _generate_one(doc: SpecDocument, out_dir: str | None, verify: bool, progress,
                  strict_accuracy: bool = False, audit: bool = True) -> Generated:
    meta = ModuleMeta(
        name=doc.model.module,
        doc=doc.model.doc,
        spec_path=(doc.path if out_dir is None  # a spec built in Python (gradgen.api)
                   else _relative_path(doc.path, out_dir, "spec path (links resolved)")),
        spec_sha256=doc.sha256,
        version=__version__,
    )
    names = sorted(op.name for op in doc.model.ops)
    from .stability.audit.report import strict_error

    from .spec import op_variants
    from .views import generic_test_views, generic_views

    views, test_views, ranges, audits, levels, problems = [], [], {}, {}, {}, []
    for index, op in enumerate(doc.model.ops):
        dtypes = tuple(op.dtype) if isinstance(op.dtype, list) else None
        variants = op_variants(doc, index)
        entries = []
        for variant, dtype in variants:
            try:
                entry = _op_entry(variant, index, verify, names, progress, audit, dtypes)
            except SpecError as e:
                problems.extend(e.diagnostics)
                continue
            entries.append(entry)
            key = f"{op.name} ({dtype})" if dtype else op.name  # in notes, and below
            ranges[key], audits[key], levels[key] = entry[1], entry[2], entry[3]
            error = strict_error(entry[2]) if strict_accuracy else None
            if error is not None:
                error.location = doc.location(("ops", index))
                raise error
        if len(entries) != len(variants):
            continue
        if dtypes:
            views.append(generic_views(dtypes, [e[0] for e in entries]))
            test_views += generic_test_views(dtypes, [e[0] for e in entries])
        else:
            views.append(entries[0][0])
            test_views.append(entries[0][0])
    problems += _name_clashes(doc, views)
    if problems:
        raise SpecError(problems)
    text = _format(render_module(meta, views), len(test_views), f"module {meta.name}")
    return Generated(doc, meta, views, text, ranges, audits, test_views, levels)


def _name_clashes(doc: SpecDocument, views: list) -> list[Diagnostic]:
    """Where two ops would define the same module-level function: an op's private
    functions are named after it (``_f_vjp``, a generic op's ``_f_float32_vjp``, a fused
    op's ``_f_forward``), so op ``f`` generated for float32 and float64 and an op
    ``f_float32`` both defined ``_f_float32_vjp``, and the later silently replaced the
    earlier (``f`` in float32 computed ``f_float32``)."""
    index = {op.name: i for i, op in enumerate(doc.model.ops)}
    owner: dict[str, str] = {}
    problems, reported = [], set()
    for view in views:
        op = view.module["name"]
        for name in defined_names(view.module):
            first = owner.setdefault(name, op)
            if first != op and (op, first) not in reported:  # once per pair of ops
                reported.add((op, first))
                problems.append(Diagnostic(
                    doc.location(("ops", index[op], "name")),
                    f"op {op!r} and op {first!r} would both define the function {name} in "
                    "the generated module; rename one of them",
                    op, "name",
                ))
    return problems


@contextlib.contextmanager
def build_budget():
    """The whole-build time budget (:func:`gradgen.budget.build_seconds`) around
    generating every output (never around writing it: a write is never interrupted).

    Raises:
        UsageError: the budget ran out (naming ``GRADGEN_BUILD_TIMEOUT``).
    """
    from .budget import BudgetExceeded, build_seconds, time_budget

    seconds = build_seconds()
    with time_budget(seconds, "build") as budget:
        try:
            yield
        except BudgetExceeded as e:
            if e.budget is not budget:
                raise
            raise UsageError(
                f"generating took longer than the build's budget of {seconds:g} s "
                "(GRADGEN_BUILD_TIMEOUT); nothing written"
            ) from None


def generate_all(
    spec_paths: list[str], out_dir: str, verify: bool = True, progress: Progress | None = None,
    strict_accuracy: bool = False, audit: bool = True,
) -> list[Generated]:
    """Load, derive, render and verify every spec; see :func:`generate`."""
    if not spec_paths:
        raise UsageError("no spec files given")
    docs, problems = [], []
    for path in spec_paths:
        check_path_text(path, "spec path")
        try:
            docs.append(load_spec(path))
        except SpecError as e:
            problems.extend(e.diagnostics)
    owners: dict[str, SpecDocument] = {}
    for doc in docs:
        name = doc.model.module
        if name in owners:
            problems.append(
                Diagnostic(
                    doc.location(("module",)),
                    f"module '{name}' is also generated from {owners[name].path}",
                    None,
                    "module",
                )
            )
        owners.setdefault(name, doc)
    results = []
    for doc in docs:
        try:
            results.append(
                _generate_one(doc, out_dir, verify, progress, strict_accuracy, audit)
            )
        except SpecError as e:
            problems.extend(e.diagnostics)
    if problems:
        raise SpecError(problems)
    return sorted(results, key=lambda g: g.doc.model.module)


def generate(
    spec_paths: list[str], out_dir: str, verify: bool = True, progress: Progress | None = None,
    strict_accuracy: bool = False, audit: bool = True,
) -> dict[str, str]:
    """Generate the modules of ``spec_paths``: ``{path relative to out_dir: text}``.

    Nothing is written. Paths are ``<module>.py``, and ``_gradgen_runtime.py`` for the
    runtime module (see :func:`runtime_files`; ``out_dir`` is read for the generated
    modules already there).

    Args:
        spec_paths: spec files, as the user named them.
        out_dir: the output folder (only used to make the spec paths in headers
            relative to it).
        verify: check every derived gradient numerically (default; see
            :mod:`gradgen.verify`).
        progress: called with ``module.op`` before each op is derived.
        strict_accuracy: a gradient that the accuracy audit finds NaN or inf where the
            exact one is finite is an error (see :mod:`gradgen.stability.audit`).
        audit: run the accuracy audit (default). Off, each op's docstring says it was
            not run; for callers that measure accuracy themselves (the test suites).

    Raises:
        UsageError: no spec given, or a path with control characters; a module in
            ``out_dir`` imports a helper this gradgen does not write.
        SpecError: every problem of every spec, each with file:line:col; two specs that
            name the same module.
        VerificationError: a derived gradient failed the numerical check.
        AccuracyError: with ``strict_accuracy``, the audit found such a gradient.
    """
    generated = generate_all(spec_paths, out_dir, verify, progress, strict_accuracy, audit)
    return {**module_files(generated), **runtime_files(generated, out_dir, spec_paths)}


def module_files(generated: list[Generated]) -> dict[str, str]:
    """``{<module>.py: text}`` of the generated modules."""
    return {f"{g.meta.name}.py": g.text for g in generated}


def runtime_text(names) -> str:
    """The runtime module (formatted) holding the helpers ``names`` and those they call."""
    return _format(render_runtime(__version__, names), 1, "the runtime module")


def runtime_files(generated: list[Generated], out_dir: str, spec_paths: list[str],
                  prune: bool = False) -> dict[str, str]:
    """``{_gradgen_runtime.py: text}``: the runtime module of ``out_dir`` once the modules
    of ``generated`` are written there, holding what they import and what the generated
    modules the build leaves in the folder import (:func:`gradgen.outputs.staying_imports`:
    with ``prune``, orphans are not left), each helper once; ``{}`` when no module there
    imports a helper (a runtime module already there is then an orphan).

    Raises:
        UsageError: a module left in the folder imports a helper this gradgen does not
            write (generated by another version): rebuilding its spec fixes it.
    """
    from .outputs import staying_imports

    names = {h for g in generated for v in g.views for h in v.helpers}
    rebuilt = set(module_files(generated))
    for path, imported in staying_imports(out_dir, rebuilt, spec_paths, prune):
        unknown = sorted(imported - set(runtime.BY_NAME))
        if unknown:
            shown = ", ".join(unknown[:3]) + (f" and {len(unknown) - 3} more"
                                               if len(unknown) > 3 else "")
            raise UsageError(
                f"{printable(str(path))} imports {shown} from "
                f"{runtime.MODULE}, which gradgen {__version__} does not write; rebuild "
                "its spec with this gradgen (or move the module out of the folder)"
            )
        names |= imported
    return {runtime.FILE: runtime_text(names)} if names else {}


def generate_tests(generated: list[Generated], tests_dir: str, out_dir: str) -> dict[str, str]:
    """Pytest modules (``{path relative to tests_dir: text}``), one per spec, that check
    each generated op against ``tf.test.compute_gradient`` and TensorFlow's autodiff of
    the forward as written, at the declared shapes (unknown dims instantiated, size 1
    included). Their header names the spec relative to ``tests_dir`` (links resolved).

    Raises:
        UsageError: a test module would have the path of a generated module (tests
            emitted into the output folder, a module named ``test_<other>_gradients``).
    """
    files = {}
    same_folder = os.path.realpath(tests_dir) == os.path.realpath(out_dir)
    modules = {f"{g.meta.name}.py": g for g in generated}
    for g in generated:
        name = f"test_{g.meta.name}_gradients.py"
        if same_folder and name in modules:
            raise UsageError(
                f"the tests of module '{g.meta.name}' and module "
                f"'{modules[name].meta.name}' ({modules[name].doc.path}) would both be "
                f"{os.path.join(tests_dir, name)}; rename the module, or emit the tests "
                "into another folder"
            )
    for g in generated:
        module_path = _relative_path(os.path.join(out_dir, f"{g.meta.name}.py"), tests_dir,
                                     "output folder (links resolved)")
        cases = [test_cases(v, g.ranges.get(v.test.get("range_key", v.test["name"])))
                 for v in g.test_views]
        # the header names the spec from the tests' own folder, as a module's does
        meta = replace(g.meta, spec_path=_relative_path(g.doc.path, tests_dir,
                                                        "spec path (links resolved)"))
        source = render_tests(meta, module_path, g.test_views, cases)
        files[f"test_{g.meta.name}_gradients.py"] = _format(
            source, len(g.test_views), f"the tests of {g.meta.name}")
    return dict(sorted(files.items()))
