"""Running one attack on the command line: in a new process, under limits, watched.

:func:`attack` runs ``python -m gradgen ARGS`` in a folder, under an address-space limit
(``RLIMIT_AS``) and a wall-clock timeout, and returns what a test asserts on: the exit
status, stdout and stderr, the process's own peak memory (``ru_maxrss``), its wall time,
and the folder's files before and after (read without following links or opening
FIFOs). The process is forked from a server that has already imported what a build
imports (tests/forked_cli.py says what that keeps and what it cannot), so an attack
costs its own work, not 0.8 s of imports; ``fresh=True`` runs a new interpreter.
:func:`assert_outcome` checks the common part: the exit status, a message matching a
pattern, no traceback, no sentinel file (no code ran), time and memory within bounds,
and (by default) nothing written or changed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from conftest import checkout_env

SENTINEL = "gradgen-pwned"
MEMORY_LIMIT = 3 << 30  # address space of the gradgen process
MAX_RSS_BYTES = 1 << 30  # what an attack may make it use
TIMEOUT = 60.0


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str
    rss_bytes: int
    seconds: float
    before: dict
    after: dict


def tree(folder: Path, skip: tuple = ("cache",)) -> dict:
    """{relative path: bytes of a regular file, or a word for anything else}, without
    following links or opening anything but regular files."""
    out = {}
    for root, dirs, files in os.walk(folder):
        rel_root = Path(root).relative_to(folder)
        dirs[:] = [d for d in dirs if not (rel_root == Path(".") and d in skip)]
        for name in dirs + files:
            path = Path(root) / name
            info = os.lstat(path)
            rel = (rel_root / name).as_posix()
            if stat.S_ISREG(info.st_mode) and info.st_size < (1 << 24):
                out[rel] = path.read_bytes()
            elif stat.S_ISREG(info.st_mode):
                out[rel] = f"large file of {info.st_size} bytes"
            elif stat.S_ISLNK(info.st_mode):
                out[rel] = "link to " + os.readlink(path)
            else:
                out[rel] = f"mode {stat.S_IFMT(info.st_mode):o}"
    return out


def attack(folder: Path, args: list[str], env: dict | None = None,
           file_size_limit: int | None = None, timeout: float = TIMEOUT,
           fresh: bool = False) -> Result:
    """``python -m gradgen *args`` in ``folder`` (see the module docstring). The cache
    is off unless ``env`` turns it on (``GRADGEN_CACHE_DIR`` defaults to
    ``folder/cache``). The process is forked from a server that has imported what a
    build imports (tests/forked_cli.py); ``fresh`` starts a new interpreter instead."""
    environment = checkout_env(dict(os.environ, OPENBLAS_NUM_THREADS="1",
                                    GRADGEN_CACHE_DIR=str(folder / "cache"),
                                    **(env or {})))
    limits = {"RLIMIT_AS": MEMORY_LIMIT}
    if file_size_limit is not None:
        limits["RLIMIT_FSIZE"] = file_size_limit
    before = tree(folder)
    start = time.monotonic()
    run = _fresh if fresh else _forked
    code, stdout, stderr, rss = run(folder, args, environment, limits, timeout)
    seconds = time.monotonic() - start
    return Result(code, stdout.decode(errors="replace"), stderr.decode(errors="replace"),
                  rss, seconds, before, tree(folder))


def _fresh(folder, args, environment, limits, timeout):
    """A new interpreter: exit status, stdout, stderr, peak RSS in bytes."""
    def set_limits():
        for name, value in limits.items():
            resource.setrlimit(getattr(resource, name), (value, value))

    process = subprocess.Popen(
        [sys.executable, "-m", "gradgen", *args], cwd=folder, env=environment,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=set_limits,
    )
    streams = {}
    readers = [threading.Thread(target=lambda n=n, f=f: streams.__setitem__(n, f.read()))
               for n, f in (("out", process.stdout), ("err", process.stderr))]
    for reader in readers:
        reader.start()
    with _deadline(timeout, process.kill, args):
        # wait4, not Popen.wait: the rusage of this child alone (RUSAGE_CHILDREN would be
        # the largest of every child this test process ever had)
        _, status, usage = os.wait4(process.pid, 0)
    for reader in readers:
        reader.join()
    return (os.waitstatus_to_exitcode(status), streams["out"], streams["err"],
            usage.ru_maxrss * 1024)


@contextlib.contextmanager
def _deadline(timeout: float, kill, args):
    """Call ``kill()`` if the block runs longer than ``timeout`` seconds, and then fail."""
    killed = threading.Event()
    timer = threading.Timer(timeout, lambda: (killed.set(), kill()))
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
    if killed.is_set():
        raise AssertionError(f"gradgen {args} ran longer than {timeout} s")


_SERVER = []


def _server() -> subprocess.Popen:
    """The fork server (tests/forked_cli.py), started on first use, one per test
    process; it ends when this process does (its stdin closes)."""
    if not _SERVER or _SERVER[0].poll() is not None:
        _SERVER[:] = [subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("forked_cli.py"))],
            env=checkout_env(dict(os.environ, OPENBLAS_NUM_THREADS="1")),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)]
    return _SERVER[0]


def _forked(folder, args, environment, limits, timeout):
    """A child of the fork server: exit status, stdout, stderr, peak RSS in bytes."""
    server = _server()
    with tempfile.TemporaryDirectory(prefix="gradgen-attack-") as scratch:
        streams = [os.path.join(scratch, name) for name in ("stdout", "stderr")]
        server.stdin.write(json.dumps({"args": list(args), "folder": str(folder),
                                       "env": environment, "limits": limits,
                                       "streams": streams}) + "\n")
        server.stdin.flush()
        pid = json.loads(server.stdout.readline())["pid"]
        with _deadline(timeout, lambda: os.kill(pid, signal.SIGKILL), args):
            reply = json.loads(server.stdout.readline())
        stdout, stderr = (Path(n).read_bytes() if os.path.exists(n) else b""
                          for n in streams)
    return reply["code"], stdout, stderr, reply["rss"]


def assert_outcome(result: Result, code: int, message: str | None = None, *,
                   unchanged: bool = True, max_seconds: float = 45.0) -> None:
    """The attack's exact outcome: exit status ``code``, ``message`` (a regular
    expression) in stderr, no traceback, no sentinel file, bounded time and memory, and
    with ``unchanged`` no file written, changed or removed."""
    shown = f"exit {result.code}\nstdout: {result.stdout[-1500:]}\nstderr: {result.stderr[-3000:]}"
    assert result.code == code, shown
    if message is not None:
        assert re.search(message, result.stderr), shown
    assert "Traceback" not in result.stderr + result.stdout, shown
    assert not any(Path(path).name == SENTINEL for path in result.after), "code ran"
    assert result.seconds < max_seconds, f"took {result.seconds:.1f} s"
    assert result.rss_bytes < MAX_RSS_BYTES, f"peak memory {result.rss_bytes >> 20} MiB"
    if unchanged:
        assert result.after == result.before, "files changed: " + ", ".join(
            sorted(p for p in set(result.after) | set(result.before)
                   if result.after.get(p) != result.before.get(p)))
