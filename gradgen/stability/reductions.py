"""Stable reductions: naive log-sum-exp, softmax and log-softmax written with ``sum``.

Consumes: a parsed :class:`~gradgen.graph.Program` (reduction nodes and the elementwise
expressions around them). Guarantees: :func:`stabilize_reductions` returns a program
that computes the same values, with every recognised naive form replaced by a stable
reduction node, plus the names of the rules used.

The elementwise rules (:mod:`gradgen.stability.families`) cannot see through a ``sum``:
``log(sum(exp(u), axis=-1))`` is ``log`` of a node symbol. These rules work on the
program instead:

| rule | identity | fails at (float32) | source |
| --- | --- | --- | --- |
| ``logsumexp_reduce`` | log(sum(exp(u))) = logsumexp(u); sum(c * exp(u)) = c * exp(logsumexp(u)); mean(exp(u)) = exp(logmeanexp(u)) | exp(u) overflows for u > 88, or all underflow for u < -103 (log(0)) | PyTensor ``local_log_sum_exp`` |
| ``log_softmax_reduce`` | u - logsumexp(u) = log_softmax(u) | the subtraction of two large numbers loses digits (1e-3 absolute at 1e4) | PyTensor ``local_log_softmax_from_logsumexp`` |
| ``softmax_reduce`` | exp(u - logsumexp(u)) = softmax(u) (so exp(u) / sum(exp(u)) too) | inf / inf = NaN | PyTensor ``local_softmax`` |

A rule fires for any axes and ``keepdims``; the log-softmax forms need the log-sum-exp
to broadcast back along the reduced axes (``keepdims=True``, or the leading axes
reduced). A ``sum`` of exponentials is replaced only where the program takes its log
or divides by it: a plain ``sum(exp(u))`` is kept (its overflow is the true value's).
A ``mean`` needs a statically known count. The forward of each node is shifted by the
maximum (``_reduce_logsumexp``, ``_softmax``, ``_log_softmax`` in the generated
module), and its VJP is written in softmax form (:mod:`gradgen.derive.reductions`).
"""

from __future__ import annotations

import dataclasses

import sympy

from ..graph import Program, TensorNode, node_assumptions
from .. import shapes as sh

RULES = {
    "logsumexp_reduce": "log(sum(exp(u), axis)) = logsumexp(u, axis); "
    "sum(exp(u)) = exp(logsumexp(u)) where its log or reciprocal is taken",
    "log_softmax_reduce": "u - logsumexp(u, axis) = log_softmax(u, axis)",
    "softmax_reduce": "exp(u - logsumexp(u, axis)) = softmax(u, axis), "
    "so exp(u) / sum(exp(u), axis) = softmax(u, axis)",
}


def stabilize_reductions(program: Program) -> tuple[Program, tuple[str, ...]]:
    """Replace naive log-sum-exp, softmax and log-softmax reductions by stable nodes.

    Args:
        program: a parsed op (real or complex; complex programs are returned as is,
            since these reductions are defined for real dtypes only).

    Returns:
        The rewritten program and the sorted names of the rules (:data:`RULES`) used.
    """
    if program.is_complex or not any(
        n.op in ("sum", "mean", "logsumexp") for n in program.nodes
    ):
        return program, ()
    return _Rewriter(program).run()


class _Rewriter:
    def __init__(self, program: Program):
        self.p = program
        self.nodes: list[TensorNode] = list(program.nodes)
        self.shape_of = dict(program.shape_of)
        self.where = list(program.where)
        self.outputs = list(program.outputs)
        self.used: set[str] = set()

    # ------------------------------------------------------------------ plumbing

    def _exprs(self):
        """Every elementwise expression of the program (node operands, intermediates
        and outputs)."""
        for n in self.nodes:
            yield from n.args
        for _, term in self.where:
            yield term.expr
        for o in self.outputs:
            yield o.term.expr

    def _map(self, fn, leaves_fn=lambda leaves: leaves) -> None:
        """Apply ``fn`` to every expression (and ``leaves_fn`` to every leaf set)."""
        self.nodes = [
            dataclasses.replace(
                n,
                args=tuple(fn(a) for a in n.args),
                arg_leaves=tuple(leaves_fn(v) for v in n.arg_leaves),
            )
            for n in self.nodes
        ]
        self.where = [
            (name, dataclasses.replace(t, expr=fn(t.expr), leaves=leaves_fn(t.leaves)))
            for name, t in self.where
        ]
        self.outputs = [
            dataclasses.replace(
                o, term=dataclasses.replace(
                    o.term, expr=fn(o.term.expr), leaves=leaves_fn(o.term.leaves)
                )
            )
            for o in self.outputs
        ]

    def _new_node(self, like: TensorNode, op: str, arg, shape, params, hint) -> TensorNode:
        assumptions = node_assumptions(op, arg, is_complex=False)
        # unique: one node of each op is made from a node (derive names it by its hint)
        symbol = sympy.Symbol(f"_{op}{like.symbol.name}", **assumptions)
        self.shape_of[symbol] = shape
        return TensorNode(
            symbol=symbol,
            op=op,
            args=(arg,),
            arg_shapes=(like.arg_shapes[0],),
            shape=shape,
            key=like.key,
            name_hint=hint,
            params=params,
            arg_leaves=(like.arg_leaves[0],),
        )

    def _replace_node(self, old: TensorNode, new: TensorNode) -> None:
        self.nodes = [new if n.symbol == old.symbol else n for n in self.nodes]

    # --------------------------------------------------------------------- rules

    def _current(self, symbol) -> TensorNode | None:
        """The node of ``symbol`` as it is now (every rewrite replaces node objects)."""
        return next(n for n in self.nodes if n.symbol == symbol)  # (never removed before)

    def run(self) -> tuple[Program, tuple[str, ...]]:
        for symbol in [n.symbol for n in self.nodes if n.op in ("sum", "mean")]:
            self._logsumexp(self._current(symbol))
        for symbol in [n.symbol for n in self.nodes if n.op == "logsumexp"]:
            self._log_softmax(self._current(symbol))
        self._drop_unused()
        program = dataclasses.replace(
            self.p,
            nodes=tuple(self.nodes),
            where=tuple(self.where),
            outputs=tuple(self.outputs),
            shape_of=self.shape_of,
        )
        return program, tuple(sorted(self.used))

    def _logsumexp(self, node: TensorNode) -> None:
        """``sum(c * exp(u))`` -> ``c * exp(L)``, ``L = logsumexp(u)`` (where the sum's
        log or reciprocal is taken)."""
        coeff, rest = node.args[0].as_coeff_Mul()
        if not (isinstance(rest, sympy.exp) and coeff.is_positive):
            return
        u = rest.args[0]
        if node.op == "mean":
            reduced = [node.arg_shapes[0][i] for i in node.param("axes")]
            if not all(sh.is_known(d) for d in reduced):
                return  # the count is known only at run time
        if not any(_logged_or_divided(e, node.symbol) for e in self._exprs()):
            return
        # mean: log(mean(exp(u))) is computed as one node (m + log1p(mean(expm1(u - m))))
        # so that a result near 0 is not a cancellation of logsumexp(u) - log(n)
        count = (
            int(sympy.prod([node.arg_shapes[0][i] for i in node.param("axes")]))
            if node.op == "mean" else 0
        )
        params = (("axes", node.param("axes")), ("keepdims", node.param("keepdims")),
                  ("count", count))
        lse = self._new_node(node, "logsumexp", u, node.shape, params, "lse")
        self._replace_node(node, lse)
        value = coeff * sympy.exp(lse.symbol)
        swap = {node.symbol: value}
        self._map(
            lambda e: _tidy(e.xreplace(swap), lse.symbol),
            lambda leaves: _swap_leaf(leaves, node.symbol, {lse.symbol}),
        )
        self.used.add("logsumexp_reduce")

    def _log_softmax(self, node: TensorNode) -> None:
        """``u - L`` -> ``log_softmax(u)`` for ``L = logsumexp(u)``; then ``exp`` of it
        -> ``softmax(u)`` where that is its only use."""
        axes, keepdims = node.param("axes"), node.param("keepdims")
        rank = len(node.arg_shapes[0])
        # u - log(mean(exp(u))) = log_softmax(u) + log(n)
        count = dict(node.params).get("count")
        offset = sympy.log(count) if count else sympy.S.Zero
        if not (keepdims or tuple(axes) == tuple(range(len(axes)))) or rank == 0:
            return  # L does not broadcast back along the reduced axes
        u, lse = node.args[0], node.symbol
        y = self._new_node(
            node, "log_softmax", u, node.arg_shapes[0], (("axes", axes),), "log_probs"
        )
        found = []

        def fix(e):
            # k * (u - lse) inside a sum of terms (SymPy distributes k: k*u - k*lse)
            if isinstance(e, sympy.Add) and lse in e.free_symbols:
                k = -sympy.Add(*(t.as_coeff_Mul()[0] for t in e.args
                                 if t.as_coeff_Mul()[1] == lse))
                if k != 0:  # (a sum of the terms' numeric coefficients)
                    candidate = e + k * lse - k * u
                    if lse not in candidate.free_symbols and sympy.count_ops(
                        candidate
                    ) < sympy.count_ops(e):
                        found.append(e)
                        return candidate + k * (y.symbol + offset)
            return e

        self._map(lambda e: _bottom_up(e, fix))
        if not found:
            return
        leaf = {y.symbol}
        self._map(lambda e: e, lambda leaves: leaves | leaf if lse in leaves else leaves)
        self.used.add("log_softmax_reduce")
        exprs = list(self._exprs())
        if all(_only_exponentiated(e, y.symbol) for e in exprs):
            z = self._new_node(node, "softmax", u, node.arg_shapes[0], (("axes", axes),),
                               "probs")
            swap = {sympy.exp(y.symbol): z.symbol}
            self._map(
                lambda e: e.xreplace(swap),
                lambda leaves: _swap_leaf(leaves, y.symbol, {z.symbol}),
            )
            self._insert_after(node, z)
            self.used.add("softmax_reduce")
        else:
            self._insert_after(node, y)

    def _insert_after(self, anchor: TensorNode, new: TensorNode) -> None:
        i = next(k for k, n in enumerate(self.nodes) if n.symbol == anchor.symbol)
        self.nodes.insert(i + 1, new)

    def _drop_unused(self) -> None:
        """Remove nodes whose value no longer appears in any later expression."""
        while True:
            live = set()
            for e in self._exprs():
                live |= e.free_symbols
            dead = [n for n in self.nodes if n.symbol not in live]
            if not dead:
                return
            for n in dead:
                self.nodes.remove(n)
                self._map(
                    lambda e: e,
                    lambda leaves, n=n: _swap_leaf(leaves, n.symbol, n.arg_leaves[0]),
                )


def _swap_leaf(leaves: frozenset, old, new) -> frozenset:
    return (leaves - {old}) | frozenset(new) if old in leaves else leaves


def _bottom_up(expr, fn):
    if not expr.args:
        return fn(expr)
    args = tuple(_bottom_up(a, fn) for a in expr.args)
    new = expr.func(*args) if args != expr.args else expr
    return fn(new)


def _logged_or_divided(expr, s) -> bool:
    """Whether ``s`` appears inside a log or in the base of a negative power."""
    for sub in sympy.preorder_traversal(expr):
        if isinstance(sub, sympy.log) and s in sub.free_symbols:
            return True
        if isinstance(sub, sympy.Pow) and sub.exp.is_negative and s in sub.base.free_symbols:
            return True
    return False


def _only_exponentiated(expr, y) -> bool:
    """Whether every occurrence of ``y`` in ``expr`` is as ``exp(y)``."""
    if expr == y:
        return False
    if isinstance(expr, sympy.exp) and expr.args[0] == y:
        return True
    return all(_only_exponentiated(a, y) for a in expr.args)


def _tidy(expr, lse):
    """Merge ``exp(a) * exp(b)`` where one involves ``lse``, and split ``log`` of a
    product with such a factor, so the log-softmax pattern ``u - lse`` appears."""

    def fix(e):
        if isinstance(e, sympy.Mul):
            exps = [f for f in e.args if isinstance(f, sympy.exp)]
            if len(exps) >= 2 and any(lse in f.free_symbols for f in exps):
                rest = [f for f in e.args if not isinstance(f, sympy.exp)]
                return sympy.Mul(sympy.exp(sympy.Add(*(f.args[0] for f in exps))), *rest)
        if isinstance(e, sympy.log) and isinstance(e.args[0], sympy.Mul):
            factors = e.args[0].args
            if any(isinstance(f, sympy.exp) and lse in f.free_symbols for f in factors) and all(
                f.is_positive for f in factors
            ):
                return sympy.Add(*(
                    f.args[0] if isinstance(f, sympy.exp) else sympy.log(f) for f in factors
                ))
        return e

    return _bottom_up(expr, fix)

