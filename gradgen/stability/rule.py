"""The record of one stable rewrite."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import sympy


@dataclass(frozen=True)
class Rule:
    """A local rewrite applied at every node of an expression tree.

    Attributes:
        name: stable identifier (used in docs, tests and ``gradgen explain``).
        identity: the identity it applies, e.g. ``log(1 + exp(u)) = softplus(u)``.
        why: what goes wrong without it.
        apply: returns the rewritten node, or None when the rule does not match.
        complex_ok: the result is holomorphic and TensorFlow supports it for complex
            dtypes (softplus, logsumexp and xlogy's zero convention are real-only).
    """

    name: str
    identity: str
    why: str
    apply: Callable[[sympy.Basic], sympy.Basic | None]
    complex_ok: bool = False
