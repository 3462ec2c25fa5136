"""Reading files that may be hostile: bounded, regular files only, never blocking.

A spec, a ``pyproject.toml`` or a file already in an output folder may be a 3 GB file, a
symbolic link to ``/dev/zero`` or a FIFO nobody writes to. :func:`read_bounded` opens
without blocking (``O_NONBLOCK``: opening a FIFO returns at once), refuses anything
``fstat`` does not call a regular file, refuses a file larger than the limit before
reading it, and reads at most ``limit + 1`` bytes (a file that grows while it is read
is caught too).
"""

from __future__ import annotations

import os
import stat

from .safe import printable


class FileRefused(OSError):
    """The file is not a regular file, or is larger than the limit. ``str()`` says which,
    naming the file."""


def read_bounded(path, limit: int, what: str = "file") -> bytes:
    """The bytes of the regular file at ``path`` (links followed), at most ``limit``.

    Args:
        path: the file.
        limit: the largest size accepted, in bytes.
        what: how to name the file in the message ("spec", "pyproject.toml").

    Raises:
        FileRefused: not a regular file (a folder, FIFO, device, socket), or larger than
            ``limit`` bytes.
        OSError: it cannot be opened or read (missing, permissions).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        shown = printable(str(path))
        if not stat.S_ISREG(info.st_mode):
            raise FileRefused(f"{what} {shown} is not a regular file")
        if info.st_size > limit:
            raise FileRefused(
                f"{what} {shown} is {info.st_size} bytes; the limit is {limit} bytes"
            )
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise FileRefused(f"{what} {shown} is larger than {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def describe(error: OSError) -> str:
    """A short reason for an ``OSError``: the message of a :class:`FileRefused`, else
    its ``strerror`` ("Permission denied")."""
    if isinstance(error, FileRefused):
        return str(error)
    return error.strerror or str(error)
