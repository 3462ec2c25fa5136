"""A fork server for :func:`hostile.attack`: ``python -m gradgen ARGS`` in a process
forked from a server that has already imported gradgen and what a build loads.

A fresh ``python -m gradgen`` spends about 0.8 s importing SymPy, NumPy, mpmath, black
and Jinja (``gradgen.budget`` loads lambdify's namespaces before any budget starts)
before it reads the spec; the hostile tests run a few hundred of them. Run as a
script, this module imports all that once and then serves requests, one JSON line each
on stdin: it forks, the child runs the command line, and the server answers with the
child's pid (a line as soon as it is forked, so the caller can kill it), then its exit
status and peak RSS (``wait4``). Each child starts with those imports done and nothing
else: no spec read, no SymPy cache filled, no gradgen state. What a test asserts on is
the child's own: its limits, working folder, environment, exit status, output streams
and peak memory. What a fork cannot reproduce is import-time behaviour and the hash
seed; the tests of those (start-up imports, determinism under ``PYTHONHASHSEED``) run
a real interpreter (``conftest.run_python``), as ``attack(..., fresh=True)`` does.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import traceback


def _child(request: dict) -> int:
    """Set the limits ({RLIMIT_* name: bytes}), move to the folder, take the environment
    as the whole environment, send stdout and stderr to the files named, and run the
    command line; the exit status as the interpreter would give it."""
    import gradgen.cli

    for name, value in request["limits"].items():
        resource.setrlimit(getattr(resource, name), (value, value))
    os.chdir(request["folder"])
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY),
                            (1, request["streams"][0], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                            (2, request["streams"][1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
        target = os.open(path, flags, 0o600)
        os.dup2(target, fd)
        os.close(target)
    sys.stdout = sys.__stdout__  # the server keeps its own for replies
    try:
        gradgen.cli.main.main(args=request["args"], prog_name="python -m gradgen")
        code = 0
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            code = stop.code or 0
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except BaseException:  # what the interpreter does with an uncaught exception
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    return code


def serve() -> None:
    """Answer requests on stdin until it closes (see the module docstring)."""
    import gradgen.budget
    import gradgen.cli  # noqa: F401
    import gradgen.emit  # noqa: F401  (what a build imports first)

    gradgen.budget._load_lazy_state()
    replies = sys.stdout
    sys.stdout = sys.stderr  # nothing but replies on the reply stream
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            os._exit(_child(request))
        replies.write(json.dumps({"pid": pid}) + "\n")
        replies.flush()
        _, status, usage = os.wait4(pid, 0)
        replies.write(json.dumps({"code": os.waitstatus_to_exitcode(status),
                                  "rss": usage.ru_maxrss * 1024}) + "\n")
        replies.flush()


if __name__ == "__main__":
    serve()
