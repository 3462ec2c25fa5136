"""Which module helpers call which.

Receives: names of helpers that printed code calls (:attr:`TFPrinter.helpers`, and those
the views add). Returns: :func:`with_dependencies`, those names with every helper they
call, transitively: the helpers a module must hold.
"""

from __future__ import annotations

# Helpers that call other helpers (templates/helpers.py.j2): emitted together.
HELPER_DEPENDENCIES = {
    "_log_erfc": ("_erfcx",),
    "_reduce_logsumexp": ("_lse_parts", "_softmax"),
    "_log_softmax": ("_lse_parts", "_log_softmax_grad"),
    "_softmax": ("_softmax_grad",),
    "_complex_det": ("_cofactor",),
    "_cofactor": ("_complex_det",),  # its general branch computes det(a) * inverse(a)
}


def with_dependencies(helpers) -> set[str]:
    """``helpers`` and every helper they call, transitively."""
    out, todo = set(), list(helpers)
    while todo:
        name = todo.pop()
        if name not in out:
            out.add(name)
            todo.extend(HELPER_DEPENDENCIES.get(name, ()))
    return out
