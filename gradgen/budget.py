"""Time budgets for work on untrusted input (derivation and simplification).

Consumes: a number of seconds. Guarantees: :func:`time_budget` raises
:class:`BudgetExceeded` inside the guarded block once the time is up, so a spec whose
derivation would run for minutes (SymPy on a huge or pathological expression) fails
with a clear error instead of hanging. It uses ``SIGALRM`` (a Unix interval timer),
which works in the main thread; elsewhere (other threads, Windows) it guards nothing
and the size limits of :mod:`gradgen.expr` and :mod:`gradgen.derive` still apply.

The default is :data:`DEFAULT_SECONDS` per op; ``GRADGEN_OP_TIMEOUT`` (seconds) in the
environment overrides it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading

DEFAULT_SECONDS = 30.0


class BudgetExceeded(Exception):
    """The guarded work ran out of time."""


def op_seconds() -> float:
    """The per-op budget: ``GRADGEN_OP_TIMEOUT`` if set and valid, else the default."""
    try:
        value = float(os.environ.get("GRADGEN_OP_TIMEOUT", DEFAULT_SECONDS))
    except ValueError:
        return DEFAULT_SECONDS
    return value if value > 0 else DEFAULT_SECONDS


@contextlib.contextmanager
def time_budget(seconds: float):
    """Raise :class:`BudgetExceeded` in the block after ``seconds`` (main thread, Unix)."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def expire(signum, frame):
        raise BudgetExceeded()

    previous = signal.signal(signal.SIGALRM, expire)
    remaining, interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if remaining:  # an enclosing timer was running: restore what is left of it
            signal.setitimer(signal.ITIMER_REAL, remaining, interval)
