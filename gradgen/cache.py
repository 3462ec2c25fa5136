"""A cache of derived and printed ops, so that an unchanged spec is fast to rebuild and
to check.

Consumes: JSON-serializable values (never pickles: a cache entry cannot run code) under
keys that hash everything the value depends on. Guarantees: :func:`get` returns a value
stored by :func:`put` under the same key, or None (missing, unreadable or corrupt
entries are misses, never errors); :func:`put` writes atomically and never fails the
build (a read-only or full disk just means no caching).

Keys include :func:`fingerprint`: a hash of gradgen's own source files and templates and
of the versions of SymPy, black, mpmath (and its backend), NumPy and Python, so a
different gradgen (even an unreleased edit) or environment never reads another's
entries.

Location: ``$GRADGEN_CACHE_DIR``, else ``$XDG_CACHE_HOME/gradgen``, else
``~/.cache/gradgen``. ``GRADGEN_CACHE=0`` (also ``false``, ``no``, ``off``, in any case)
or ``--no-cache`` disables it.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import tempfile
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from .version import __version__
from .files import read_bounded


OFF = ("0", "false", "no", "off")


def enabled() -> bool:
    """False when ``GRADGEN_CACHE`` is one of :data:`OFF`, in any case and with any
    surrounding white space (``False``, ``OFF``, ``0``); on otherwise."""
    return os.environ.get("GRADGEN_CACHE", "1").strip().lower() not in OFF


def directory() -> Path:
    if os.environ.get("GRADGEN_CACHE_DIR"):
        return Path(os.environ["GRADGEN_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gradgen"


def code_files() -> list[Path]:
    """Every module of the package (subpackages included) and every file of the template
    folder (subfolders included: the template loader reads any file there by name)."""
    from .render import templates_dir

    package = Path(__file__).resolve().parent
    templates = sorted(p for p in templates_dir().rglob("*") if p.is_file())
    return sorted(package.rglob("*.py")) + templates


@lru_cache(maxsize=1)
def fingerprint() -> str:
    """Hash of gradgen's code and templates, of the versions of the libraries its output
    depends on (SymPy derives, black formats, mpmath and NumPy compute the numerical
    check and the accuracy audit, whose sentence is in the docstring), of mpmath's
    backend (gmpy2 or pure Python) and of Python's version."""
    import mpmath

    digest = hashlib.sha256(__version__.encode())
    for path in code_files():
        digest.update(path.relative_to(path.parent.parent).as_posix().encode())
        digest.update(path.read_bytes())
    for dist in ("sympy", "black", "mpmath", "numpy"):
        try:
            digest.update(f"{dist} {metadata.version(dist)}".encode())
        except metadata.PackageNotFoundError:
            pass
    digest.update(f"mpmath backend {mpmath.libmp.BACKEND}".encode())
    digest.update(f"python {platform.python_version()}".encode())
    return digest.hexdigest()


def _json(value) -> str:
    """``value`` as compact JSON, its mappings in their own order: the order of an op's
    inputs and outputs is its function's signature and return tuple, so two payloads
    that differ only in it must not share a key (sorting the keys made a spec with
    inputs ``{y, x}`` read the entry of ``{x, y}`` and generate ``f(x, y)``). The order
    is the spec's (YAML mappings keep it) and pydantic's field order, the same in every
    run."""
    return json.dumps(value, sort_keys=False, separators=(",", ":"))


def key(kind: str, payload) -> str:
    """A cache key for ``payload`` (any JSON-serializable value) of the given kind; the
    order of its mappings counts (see :func:`_json`)."""
    text = _json({"kind": kind, "code": fingerprint(), "payload": payload})
    return hashlib.sha256(text.encode()).hexdigest()


def _path(k: str) -> Path:
    return directory() / k[:2] / f"{k}.json"


MAX_ENTRY_BYTES = 64 << 20


def _checksum(k: str, value) -> str:
    return hashlib.sha256(f"{k}:{_json(value)}".encode()).hexdigest()


def get(k: str):
    """The value stored under ``k``, or None: also when the entry is missing,
    unreadable, not a regular file, larger than :data:`MAX_ENTRY_BYTES`, not JSON,
    nested too deeply, or not what :func:`put` wrote under ``k`` (its checksum, over the
    key and the value, does not match: a truncated, corrupted or edited entry)."""
    if not enabled():
        return None
    try:
        entry = json.loads(read_bounded(_path(k), MAX_ENTRY_BYTES, "cache entry"))
    except (OSError, ValueError, RecursionError):
        return None
    if not (isinstance(entry, dict) and set(entry) == {"value", "sha256"}):
        return None
    try:
        if entry["sha256"] != _checksum(k, entry["value"]):
            return None
    except (ValueError, RecursionError):
        return None
    return entry["value"]


def put(k: str, value) -> None:
    """Store ``value`` under ``k`` (atomically; failures are ignored)."""
    if not enabled():
        return
    path = _path(k)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"value": value, "sha256": _checksum(k, value)}, f)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except (OSError, UnboundLocalError):
            pass
