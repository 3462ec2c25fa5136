"""Generation as a pure function, and the one place that touches the output folder.

Consumes: spec paths and an output folder. Guarantees:

* :func:`generate` reads the specs and returns ``{relative path: text}`` without writing
  anything; ``build`` and ``check`` both consume that map, so what ``check`` compares is
  exactly what ``build`` writes;
* every spec is loaded, derived and rendered before anything is written; a
  :class:`~gradgen.errors.SpecError` (listing the problems of every spec) leaves the
  output folder untouched;
* :func:`write_outputs` writes only files whose bytes change, each atomically (a
  temporary file in the same folder, then ``os.replace``).
"""

from __future__ import annotations

import difflib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import __version__, ir
from .derive import derive_op
from .errors import Diagnostic, Location, SpecError, UsageError
from .formatter import format_source
from .render import RenderError, render_module
from .spec import SpecDocument, format_key_path, load_spec
from .verify import VerificationError, verify_op


def _relative_spec_path(spec: str, out_dir: str) -> str:
    rel = os.path.relpath(os.path.abspath(spec), os.path.abspath(out_dir))
    return Path(rel).as_posix()


def _check_path_text(path: str) -> None:
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        raise UsageError(f"spec path {path!r} contains control characters")


def build_module_ir(doc: SpecDocument, out_dir: str) -> ir.ModuleIR:
    """Derive every op of a spec.

    Raises:
        SpecError: listing the problems of every op that failed.
    """
    ops, problems = [], []
    for index in range(len(doc.model.ops)):
        try:
            ops.append(derive_op(doc, index))
        except SpecError as e:
            problems.extend(e.diagnostics)
    if problems:
        raise SpecError(problems)
    return ir.ModuleIR(
        name=doc.model.module,
        doc=doc.model.doc,
        ops=tuple(ops),
        spec_path=_relative_spec_path(doc.path, out_dir),
        spec_sha256=doc.sha256,
        gradgen_version=__version__,
    )


def render_spec(doc: SpecDocument, out_dir: str, verify: bool = True) -> str:
    """The formatted source of the module generated from one spec.

    Raises:
        SpecError: an op cannot be derived or printed.
        VerificationError: a derived gradient failed the numerical check.
    """
    module = build_module_ir(doc, out_dir)
    try:
        source = render_module(module)
    except RenderError as e:
        index = module.ops.index(e.op)
        loc = ("ops", index)
        raise SpecError(
            Diagnostic(doc.location(loc), str(e), e.op.name, format_key_path(loc[2:]) or None)
        ) from None
    if verify:  # after printing succeeded: every value is something TensorFlow has
        for index, op in enumerate(module.ops):
            try:
                verify_op(op)
            except VerificationError as e:
                e.location = doc.location(("ops", index))
                raise
    return format_source(source)


def generate(spec_paths: list[str], out_dir: str, verify: bool = True) -> dict[str, str]:
    """Generate the modules of ``spec_paths``: ``{path relative to out_dir: text}``.

    Nothing is written. Paths are ``<module>.py``.

    Args:
        spec_paths: spec files, as the user named them.
        out_dir: the output folder (only used to make the spec paths in headers
            relative to it).
        verify: check every derived gradient numerically (default; see
            :mod:`gradgen.verify`).

    Raises:
        UsageError: no spec given, or a path with control characters.
        SpecError: every problem of every spec, each with file:line:col; two specs that
            name the same module.
        VerificationError: a derived gradient failed the numerical check.
    """
    if not spec_paths:
        raise UsageError("no spec files given")
    docs, problems = [], []
    for path in spec_paths:
        _check_path_text(path)
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
    files: dict[str, str] = {}
    for doc in docs:
        try:
            files[f"{doc.model.module}.py"] = render_spec(doc, out_dir, verify)
        except SpecError as e:
            problems.extend(e.diagnostics)
    if problems:
        raise SpecError(problems)
    return dict(sorted(files.items()))


@dataclass(frozen=True)
class FileStatus:
    """How one generated file compares with the output folder.

    Attributes:
        path: relative to the output folder.
        state: ``"unchanged"``, ``"changed"`` or ``"missing"``.
        diff: unified diff from the file on disk to the generated text ('' if unchanged).
    """

    path: str
    state: str
    diff: str = ""


def compare_outputs(files: dict[str, str], out_dir: str) -> list[FileStatus]:
    """Compare generated ``files`` with what is in ``out_dir``."""
    out = []
    for rel, text in files.items():
        target = Path(out_dir) / rel
        if not target.exists():
            diff = "".join(
                difflib.unified_diff(
                    [], text.splitlines(keepends=True), "/dev/null", f"{rel} (generated)"
                )
            )
            out.append(FileStatus(rel, "missing", diff))
            continue
        current = target.read_bytes().decode("utf-8", errors="replace")
        if current == text:
            out.append(FileStatus(rel, "unchanged"))
            continue
        diff = "".join(
            difflib.unified_diff(
                current.splitlines(keepends=True),
                text.splitlines(keepends=True),
                f"{rel} (on disk)",
                f"{rel} (generated)",
            )
        )
        out.append(FileStatus(rel, "changed", diff))
    return out


def write_outputs(files: dict[str, str], out_dir: str) -> list[FileStatus]:
    """Write the files whose bytes differ from disk, each atomically.

    Returns:
        The status of every file before writing (``unchanged`` files were not touched).
    """
    statuses = compare_outputs(files, out_dir)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    for status in statuses:
        if status.state == "unchanged":
            continue
        _atomic_write(Path(out_dir) / status.path, files[status.path].encode("utf-8"))
    return statuses


def _atomic_write(target: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
