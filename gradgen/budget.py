"""Time budgets for work on untrusted input: per op, and for a whole build.

Consumes: a number of seconds. Guarantees: :func:`time_budget` raises
:class:`BudgetExceeded` inside the guarded block once its time is up, so a spec whose
derivation would run for minutes (SymPy on a huge or pathological expression), or a
build of a thousand slow ops, fails with a clear error instead of hanging. Budgets nest:
an inner budget never outlasts an enclosing one, and the exception says which budget
ran out (:attr:`BudgetExceeded.budget`), so each level reports only its own. It uses
``SIGALRM`` (a Unix interval timer), which works in the main thread; elsewhere (other
threads, Windows) it guards nothing and the size limits of :mod:`gradgen.expr` and
:mod:`gradgen.derive` still apply.

The defaults are :data:`DEFAULT_SECONDS` per op and derivative order (deriving,
printing and verifying it; formatting a module gets its ops' budgets together) and
:data:`DEFAULT_BUILD_SECONDS` for a whole ``build`` or ``check``; ``GRADGEN_OP_TIMEOUT``
and ``GRADGEN_BUILD_TIMEOUT`` (seconds, in (0, :data:`MAX_SECONDS`]) override them, and
any other value of either is a usage error naming the variable.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import signal
import threading
import time
from dataclasses import dataclass

from .errors import UsageError

DEFAULT_SECONDS = 30.0
DEFAULT_BUILD_SECONDS = 900.0
MAX_SECONDS = 86400.0


@dataclass(frozen=True, eq=False)
class Budget:
    """One running budget: what it covers ("op", "build") and its length."""

    label: str
    seconds: float
    deadline: float


class BudgetExceeded(Exception):
    """The guarded work ran out of time; ``budget`` is the :class:`Budget` that did."""

    def __init__(self, budget: Budget):
        super().__init__(f"{budget.label} budget of {budget.seconds:g} s exceeded")
        self.budget = budget


def _seconds(variable: str, default: float) -> float:
    text = os.environ.get(variable)
    if text is None or text == "":
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (0 < value <= MAX_SECONDS):  # also nan and inf
        raise UsageError(
            f"{variable}={text[:40]!r}: expected a number of seconds in (0, {MAX_SECONDS:g}]"
        )
    return value


def op_seconds(order: int = 1) -> float:
    """The budget of an op derived symbolically up to ``order``: ``GRADGEN_OP_TIMEOUT``
    (else :data:`DEFAULT_SECONDS`) per order, since each derived order is another
    derivation, print and verification of about the first one's size; ``order`` is at
    most ``spec.limits.MAX_ORDER``, so the budget stays bounded.

    Raises:
        UsageError: the variable is set to anything but a number in (0, 86400].
    """
    return _seconds("GRADGEN_OP_TIMEOUT", DEFAULT_SECONDS) * max(order, 1)


def build_seconds() -> float:
    """The whole-build budget: ``GRADGEN_BUILD_TIMEOUT``, else
    :data:`DEFAULT_BUILD_SECONDS`.

    Raises:
        UsageError: the variable is set to anything but a number in (0, 86400].
    """
    return _seconds("GRADGEN_BUILD_TIMEOUT", DEFAULT_BUILD_SECONDS)


_running: list[Budget] = []


def _arm() -> None:
    """Set the timer for the earliest deadline of the running budgets (or clear it)."""
    if not _running:
        signal.setitimer(signal.ITIMER_REAL, 0)
        return
    left = min(b.deadline for b in _running) - time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, max(left, 1e-4))


def _expire(signum, frame):
    now = time.monotonic()
    due = [b for b in _running if b.deadline <= now + 1e-3]
    if not due:  # woke a little early: wait for the rest
        _arm()
        return
    raise BudgetExceeded(min(due, key=lambda b: b.deadline))


_LAMBDIFY_MODULES = ("numpy", "mpmath", "math")


@functools.cache
def _load_lazy_state() -> None:
    """Fill, before any budget can interrupt it, state that libraries build on first
    use and never rebuild: SymPy's lambdify fills a module's namespace on its first
    lambdify and then takes it as loaded, so an alarm in that first call left it with
    one or two names, and every later lambdify in the process failed (NameError:
    'logical_and' is not defined, a traceback instead of the budget's message)."""
    import sympy

    for module in _LAMBDIFY_MODULES:
        sympy.lambdify((), 0, module)


@contextlib.contextmanager
def time_budget(seconds: float, label: str = "op"):
    """Raise :class:`BudgetExceeded` in the block after ``seconds`` (main thread, Unix),
    or when an enclosing budget runs out first."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return
    budget = Budget(label, seconds, time.monotonic() + seconds)
    outermost = not _running
    if outermost:
        _load_lazy_state()
    previous = signal.signal(signal.SIGALRM, _expire) if outermost else None
    _running.append(budget)
    try:
        _arm()
        yield budget
    finally:
        _running.remove(budget)
        _arm()
        if outermost:
            signal.signal(signal.SIGALRM, previous)


def within(seconds: float, run, label: str = "op") -> tuple:
    """``(True, run())`` under a time budget of its own, or ``(False, None)`` where that
    budget runs out; an enclosing budget's running out is raised (the caller that set
    it reports it)."""
    budget = None
    try:
        with time_budget(seconds, label) as budget:
            return True, run()
    except BudgetExceeded as e:
        if e.budget is not budget:
            raise
        return False, None
