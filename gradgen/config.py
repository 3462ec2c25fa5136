"""Project configuration: ``[tool.gradgen]`` in ``pyproject.toml``.

Consumes: the nearest ``pyproject.toml`` at or above the working directory. Guarantees:
:func:`load_config` returns a :class:`Config` (empty when there is no such table), or
raises :class:`~gradgen.errors.UsageError` for an unreadable file, an unknown key (with a
"did you mean" hint) or a value of the wrong type. Paths in the table are relative to
the ``pyproject.toml``'s folder and are returned relative to the working directory.

Example::

    [tool.gradgen]
    specs = ["specs/*.yaml"]      # globs ("**": any folders below, not through links);
                                  # used when no spec is named on the command line
    out = "src/mypkg/ops"         # output folder (default: generated)
    emit_tests = "tests/gradgen"  # also write gradient tests there on build
    verify = true                 # numerical check of derived gradients (default true)
    strict_accuracy = false       # fail when the accuracy audit finds a NaN/inf gradient
    error_format = "text"         # or "github"
"""

from __future__ import annotations

import difflib
import fnmatch
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .errors import UsageError
from .files import describe, read_bounded
from .safe import check_path_text, printable

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

MAX_PYPROJECT_BYTES = 1 << 20
MAX_SPEC_GLOBS = 100
MAX_SPEC_FILES = 1000
#: folders the spec globs may list, all together (a loop of links, '**' over a huge tree)
MAX_GLOB_FOLDERS = 10000
_MAGIC = re.compile(r"[*?[]")
KEYS = {"specs": list, "out": str, "emit_tests": str, "verify": bool, "error_format": str,
        "strict_accuracy": bool}


@dataclass(frozen=True)
class Config:
    """Settings from ``[tool.gradgen]`` (paths already relative to the working dir).

    Attributes:
        source: the pyproject.toml read, or None.
        root: its folder: every path it names stays inside (links resolved).
        specs: spec globs.
        out, emit_tests: folders, or None.
        verify: run the numerical verification.
        error_format: "text", "github" or None.
        strict_accuracy: a gradient the accuracy audit finds NaN or inf where the exact
            one is finite fails the build (exit status 3).
    """

    source: str | None = None
    root: str | None = None
    specs: tuple[str, ...] = ()
    out: str | None = None
    emit_tests: str | None = None
    verify: bool = True
    error_format: str | None = None
    strict_accuracy: bool = False

    def spec_paths_or_empty(self) -> list[str]:
        """The configured spec files, or [] when none are configured or matched."""
        try:
            return self.spec_paths()
        except UsageError:
            return []

    def spec_paths(self) -> list[str]:
        """The spec files the globs match, sorted (see :func:`_glob`: ``**`` does not
        enter links to folders).

        Raises:
            UsageError: no globs configured, they match nothing or more than
                :data:`MAX_SPEC_FILES` files, or they list more than
                :data:`MAX_GLOB_FOLDERS` folders (a pull request's pyproject.toml).
        """
        if not self.specs:
            raise UsageError(
                "no spec files given; name them, or set specs in [tool.gradgen] of "
                "pyproject.toml"
            )
        paths = set()
        listed = 0

        def list_folder(folder: str) -> list[os.DirEntry]:
            nonlocal listed
            listed += 1
            if listed > MAX_GLOB_FOLDERS:
                raise UsageError(
                    f"[tool.gradgen] specs {list(self.specs)} search more than "
                    f"{MAX_GLOB_FOLDERS} folders (in {self.source}); narrow them"
                )
            try:
                with os.scandir(folder or ".") as entries:
                    return list(entries)
            except OSError:  # missing, not a folder, unreadable: no match there
                return []

        for pattern in self.specs:
            base = os.sep if os.path.isabs(pattern) else ""
            for p in _glob(base, pattern.replace(os.sep, "/").split("/"), list_folder):
                if self.root is not None:
                    _inside_project(p, Path(self.root), f"[tool.gradgen] specs (in "
                                    f"{self.source}) match {printable(p)}, which", link=True)
                paths.add(p)
                if len(paths) > MAX_SPEC_FILES:
                    raise UsageError(
                        f"[tool.gradgen] specs {list(self.specs)} match more than "
                        f"{MAX_SPEC_FILES} files (in {self.source})"
                    )
        paths = sorted(paths)
        if not paths:
            raise UsageError(
                f"[tool.gradgen] specs {list(self.specs)} match no file (in {self.source})"
            )
        return paths


def _glob(base: str, parts: list[str], list_folder) -> Iterator[str]:
    """The paths below ``base`` that match the glob ``parts`` (a pattern split at
    ``/``), as ``glob.iglob(pattern, recursive=True)`` finds them, except that ``**``
    does not descend into symbolic links to folders (a loop of links is not searched
    forever). A part that is not ``**`` follows links, as glob does; names starting with
    ``.`` match only a part that does. Every folder is listed through ``list_folder``
    (``os.scandir``'s entries), which counts them.
    """
    parts = [part for part in parts if part]  # "a//b" is "a/b"
    if not parts:
        return
    part, rest = parts[0], parts[1:]
    if part == "**":
        below = _below(base, list_folder)
        if rest:  # "**" matches no folder, or any folder below
            for folder in [base, *(path for path, entry in below
                                   if _is_folder(entry, follow=False))]:
                yield from _glob(folder, rest, list_folder)
        else:
            yield from (path for path, _ in below)
    elif _MAGIC.search(part):
        for entry in list_folder(base):
            if entry.name.startswith(".") and not part.startswith("."):
                continue
            if fnmatch.fnmatchcase(entry.name, part):
                path = os.path.join(base, entry.name)
                if not rest:
                    yield path
                elif _is_folder(entry):
                    yield from _glob(path, rest, list_folder)
    elif rest:
        yield from _glob(os.path.join(base, part), rest, list_folder)
    elif os.path.lexists(os.path.join(base, part)):
        yield os.path.join(base, part)


def _below(folder: str, list_folder) -> list[tuple[str, os.DirEntry]]:
    """(path, entry) of everything below ``folder`` but hidden names, without entering
    links to folders."""
    found, pending = [], [folder]
    while pending:
        current = pending.pop()
        for entry in list_folder(current):
            if entry.name.startswith("."):
                continue
            path = os.path.join(current, entry.name)
            found.append((path, entry))
            if _is_folder(entry, follow=False):
                pending.append(path)
    return found


def _is_folder(entry: os.DirEntry, follow: bool = True) -> bool:
    try:
        return entry.is_dir(follow_symlinks=follow)
    except OSError:  # a loop of links, a name too long, gone meanwhile
        return False


def _inside_project(text: str, root: Path, what: str, link: bool = False) -> None:
    """Refuse a path from ``[tool.gradgen]`` that leaves the pyproject's folder: absolute,
    with a ``..`` part, or (``link``: an existing path) resolving outside through a
    symbolic link. A pyproject.toml from a pull request must not make gradgen read
    files elsewhere (and quote them in errors) or write there.

    Raises:
        UsageError: naming ``what`` and the path.
    """
    parts = Path(text).parts
    if Path(text).is_absolute() or ".." in parts:
        raise UsageError(f"{what} {printable(repr(text))} is outside the project: paths "
                         "in pyproject.toml are relative to its folder, without '..'")
    if link:
        _resolves_inside(Path(text), root, what)


def _resolves_inside(path: Path, root: Path, what: str) -> None:
    """Refuse ``path`` when it, or its nearest existing ancestor, resolves outside
    ``root`` through a symbolic link."""
    existing = path
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    real, top = os.path.realpath(existing), os.path.realpath(root)
    if os.path.commonpath([real, top]) != top:
        raise UsageError(f"{what} resolves outside the project ({printable(real)}, "
                         "through a symbolic link)")


def find_pyproject(start: Path) -> Path | None:
    for folder in [start, *start.parents]:
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_config(cwd: Path) -> Config:
    """Read ``[tool.gradgen]`` from the nearest pyproject.toml (an empty Config if none)."""
    path = find_pyproject(cwd)
    if path is None:
        return Config()
    shown = printable(os.path.relpath(path, cwd))
    try:
        data = tomllib.loads(read_bounded(path, MAX_PYPROJECT_BYTES, "pyproject.toml")
                             .decode("utf-8"))
    except OSError as e:
        raise UsageError(f"cannot read {shown}: {describe(e)}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise UsageError(f"cannot read {shown}: {printable(str(e))}") from None
    except RecursionError:
        raise UsageError(f"cannot read {shown}: values nested too deeply") from None
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise UsageError(f"{shown}: 'tool' must be a table")
    table = tool.get("gradgen")
    if table is None:
        return Config()
    if not isinstance(table, dict):
        raise UsageError(f"{shown}: [tool.gradgen] must be a table, got a "
                         f"{type(table).__name__}")
    for key, value in table.items():
        if key not in KEYS:
            hint = difflib.get_close_matches(key[:100], KEYS, n=1)
            extra = f"; did you mean '{hint[0]}'?" if hint else ""
            raise UsageError(
                f"{shown}: unknown key {printable(key[:100])!r} in [tool.gradgen]{extra} "
                "(allowed: "
                f"{', '.join(sorted(KEYS))})"
            )
        if not isinstance(value, KEYS[key]) or (
            key == "specs" and not all(isinstance(v, str) for v in value)
        ):
            raise UsageError(
                f"{shown}: [tool.gradgen] {key} must be "
                + ("a list of strings" if key == "specs" else f"a {KEYS[key].__name__}")
            )
        if key == "specs" and len(value) > MAX_SPEC_GLOBS:
            raise UsageError(f"{shown}: [tool.gradgen] specs lists more than "
                             f"{MAX_SPEC_GLOBS} globs")
        for path_text in value if key == "specs" else [value] if KEYS[key] is str else []:
            if key in ("specs", "out", "emit_tests"):
                check_path_text(path_text, f"{shown}: [tool.gradgen] {key}")
                _inside_project(path_text, path.parent, f"{shown}: [tool.gradgen] {key}")
                if key != "specs":
                    _resolves_inside(path.parent / path_text, path.parent,
                                     f"{shown}: [tool.gradgen] {key}")
    if table.get("error_format", "text") not in ("text", "github"):
        raise UsageError(f"{shown}: [tool.gradgen] error_format is text or github")
    root = path.parent

    def rel(p: str) -> str:
        return os.path.relpath(root / p, cwd)

    return Config(
        source=shown,
        root=str(root),
        specs=tuple(rel(p) for p in table.get("specs", [])),
        out=rel(table["out"]) if "out" in table else None,
        emit_tests=rel(table["emit_tests"]) if "emit_tests" in table else None,
        verify=table.get("verify", True),
        error_format=table.get("error_format"),
        strict_accuracy=table.get("strict_accuracy", False),
    )
