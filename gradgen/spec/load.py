"""Read, parse and validate one spec: the steps from a file to a :class:`SpecDocument`.

Receives: a spec file's path (:func:`load_spec`) or its bytes (:func:`parse_spec`).
Returns: a :class:`~.document.SpecDocument` whose model is validated and resolved, or
raises :class:`~gradgen.errors.SpecError` listing every problem found, each with its
position. The steps: bytes -> UTF-8 text -> YAML nodes (PyYAML's safe composer) ->
plain data with positions (:mod:`.yaml_reader`) -> the model (:mod:`.model`, problems
worded by :mod:`.messages`) -> names and defaults (:mod:`.resolve`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ..errors import Diagnostic, Location, SpecError
from .document import SpecDocument, content_sha256
from .fields import describe
from .limits import MAX_SPEC_BYTES, SPEC_VERSION
from .messages import diagnostic_at, op_field, pydantic_message
from .model import ModuleSpec
from .resolve import resolve_model
from .yaml_reader import YamlReader, expression_locs, replace_at, value_at


def load_spec(path: str | Path, display_path: str | None = None) -> SpecDocument:
    """Read, parse and validate one spec file.

    Args:
        path: the file to read.
        display_path: how to name the file in messages and headers (default: ``path`` as
            given).

    Returns:
        A :class:`SpecDocument`.

    Raises:
        SpecError: unreadable file, invalid YAML, or any structural or naming problem;
            every problem found is listed with its position.
    """
    shown = display_path if display_path is not None else str(path)
    from ..files import FileRefused, read_bounded

    try:
        data = read_bounded(path, MAX_SPEC_BYTES, "spec")
    except FileRefused as e:
        raise SpecError(Diagnostic(Location(shown), str(e)))
    except OSError as e:
        raise SpecError(Diagnostic(Location(shown), f"cannot read spec: {e.strerror or e}"))
    return parse_spec(data, shown)


def parse_spec(data: bytes, path: str) -> SpecDocument:
    """Validate spec bytes; see :func:`load_spec`."""
    source = _decode(data, path)
    reader, raw = _read(path, source, _compose(source, path))

    def diag(loc, message, key=False):
        return diagnostic_at(
            path, reader.positions, reader.key_positions, raw, loc, message, key
        )

    _refuse_read_problems(path, reader, raw)
    _check_mapping_and_version(raw, diag)
    _expressions_as_text(raw, reader)
    model, problems = resolve_model(_validate(raw, diag), diag)
    if problems:
        raise SpecError(problems)
    return SpecDocument(
        path=path,
        source=source,
        sha256=content_sha256(raw),
        model=model,
        _positions=reader.positions,
        _key_positions=reader.key_positions,
        _anchors=reader.anchors,
    )


def _decode(data: bytes, path: str) -> str:
    """The spec's text: at most :data:`~.limits.MAX_SPEC_BYTES` bytes of UTF-8."""
    if len(data) > MAX_SPEC_BYTES:
        raise SpecError(
            Diagnostic(Location(path), f"spec is larger than {MAX_SPEC_BYTES} bytes")
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        before = data[: e.start]
        line = before.count(b"\n") + 1
        col = e.start - (before.rfind(b"\n") + 1) + 1
        raise SpecError(
            Diagnostic(Location(path, line, col), f"spec is not UTF-8 ({e.reason} at byte "
                       f"{e.start})")
        )


def _compose(source: str, path: str) -> yaml.Node:
    """The spec's YAML node tree, from PyYAML's safe composer (no value constructed)."""
    try:
        node = yaml.compose(source, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = e.problem or e.context or "invalid YAML"
        raise SpecError(Diagnostic(Location(path, line, col), f"invalid YAML: {problem}"))
    except yaml.YAMLError as e:
        raise SpecError(Diagnostic(Location(path), f"invalid YAML: {e}"))
    except RecursionError:
        raise SpecError(Diagnostic(Location(path), "invalid YAML: nested too deeply"))
    if node is None:
        raise SpecError(Diagnostic(Location(path), "spec is empty; expected a mapping"))
    return node


def _read(path: str, source: str, node: yaml.Node) -> tuple[YamlReader, Any]:
    """The node tree as plain data, and the reader that recorded its positions."""
    reader = YamlReader(path, source)
    try:
        raw = reader.read(node)
    except RecursionError:
        raise SpecError(Diagnostic(Location(path), "spec is nested too deeply"))
    return reader, raw


def _refuse_read_problems(path: str, reader: YamlReader, raw: Any) -> None:
    """Raise the problems the reader found (aliases, tags, keys, scalars), if any."""
    problems = [
        Diagnostic(Location(path, *mark), msg, *op_field(raw, loc))
        for loc, mark, msg in reader.errors
    ]
    if problems:
        raise SpecError(problems)


def _check_mapping_and_version(raw: Any, diag) -> None:
    """Refuse data that is not a mapping, and a version this gradgen does not read."""
    if not isinstance(raw, dict):
        # the type only: a file named by mistake (or by a hostile glob) is not quoted
        kind = "a list" if isinstance(raw, list) else (
            "nothing" if raw is None else f"a {type(raw).__name__} scalar")
        raise SpecError(diag((), f"a spec is a mapping; got {kind}"))
    if "version" in raw and raw["version"] != SPEC_VERSION:
        version = raw["version"]
        message = (
            f"unsupported spec version {version}; this gradgen reads version {SPEC_VERSION}"
            if isinstance(version, int) and not isinstance(version, bool)
            else f"expected the integer {SPEC_VERSION}; got {describe(version)}"
        )
        raise SpecError(diag(("version",), message))


def _expressions_as_text(raw: dict, reader: YamlReader) -> None:
    """Put back, in ``raw``, each expression YAML read as a number, as it was written."""
    # Expressions are text: `output: 2` or `output: 1.5` mean the expression as written.
    for loc in expression_locs(raw):
        value = value_at(raw, loc)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            replace_at(raw, loc, reader.raw[loc])


def _validate(raw: dict, diag) -> ModuleSpec:
    """The pydantic model of ``raw``; every validation error as a diagnostic."""
    try:
        return ModuleSpec.model_validate(raw)
    except ValidationError as e:
        diagnostics = []
        for err in e.errors(include_url=False):
            loc, message, at_key = pydantic_message(err, raw)
            diagnostics.append(diag(loc, message, at_key))
        raise SpecError(diagnostics)
