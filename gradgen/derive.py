"""Derivation: forward program -> VJPs with unbroadcasting, stable forms and CSE.

Consumes: a :class:`gradgen.expr.Program`. Guarantees: :func:`derive_op` returns an
:class:`gradgen.ir.OpIR` whose backward statements compute, for every differentiable
input ``x``,

    grad_x = sum over outputs k of unbroadcast_x(upstream_k * conj(d out_k / d x))

reduced back to the input's declared shape (see :func:`gradgen.shapes.reduction_plan`),
with ``conj`` the identity for real dtypes (TensorFlow's convention for complex inputs
is the conjugate of the derivative times the upstream value).

How:

* reverse mode over the program's non-elementwise nodes (``@``, ``transpose``), with
  symbolic partial derivatives (SymPy) for the elementwise parts between them;
* contributions are unbroadcast *per output shape* before they are added, so an output
  that was not broadcast is never summed over another output's broadcast axes;
* forward and partials are rewritten into stable forms (:mod:`gradgen.stability`) and
  simplified within a size budget;
* one common-subexpression elimination (SymPy's ``cse``, canonical order) runs over
  forward and backward together; shared subexpressions are computed in the forward
  function and reach the gradient function through its closure, so the backward pass
  reuses them instead of recomputing them. Subexpressions that involve a cotangent stay
  in the backward function, as do ones only the backward pass needs.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field

import sympy
from sympy.printing.precedence import PRECEDENCE
from sympy.printing.str import StrPrinter

from . import functions as fn
from . import ir
from .budget import BudgetExceeded, op_seconds, time_budget
from . import shapes as sh
from . import stability as stable
from .stability import guards
from .stability.cheaper import CHEAPER, absorbed_complements
from .stability.reductions import RULES as REDUCTION_RULES
from .stability.reductions import stabilize_reductions
from .errors import Diagnostic, SpecError
from .expr import parse_op
from .graph import Program, TensorNode
from .naming import NameScope
from .spec import HALF_DTYPES, SpecDocument, format_key_path

FORMULA_MAX_CHARS = 240
# Nodes whose VJPs docstrings and explain list as reductions, apart from matrix ones
REDUCTION_OPS = ("sum", "mean", "max", "min", "logsumexp", "softmax", "log_softmax")
MAX_PARTIAL_OPS = 5000
_UNPRINTABLE = (
    sympy.Derivative,
    sympy.Subs,
    sympy.Integral,
    sympy.DiracDelta,
    sympy.Heaviside,
    sympy.re,
    sympy.im,
)


# Functions a complex op may use: holomorphic, and supported by TensorFlow for complex
# dtypes (softplus, erf, erfc and atan2 are not; Abs, sign, floor... are not holomorphic).
HOLOMORPHIC = (
    sympy.exp, sympy.log, sympy.sin, sympy.cos, sympy.tan, sympy.asin, sympy.acos,
    sympy.atan, sympy.sinh, sympy.cosh, sympy.tanh, sympy.asinh, sympy.acosh,
    sympy.atanh, fn.log1p, fn.expm1, fn.sigmoid,
)


class _SpecText(StrPrinter):
    """SymPy's str form in the spec's syntax: conditions with ``and``, ``or``, ``not``,
    ``==`` and ``!=`` (the expression language refuses ``&``, ``|``, ``~``); a
    ``Piecewise`` with an otherwise-branch as nested ``where``; numbers as the shortest
    text of their double; ``Ratio(a, b)`` as ``(a/b)``."""

    def _print_And(self, expr):
        return self.stringify(expr.args, " and ", PRECEDENCE["And"])

    def _print_Or(self, expr):
        return self.stringify(expr.args, " or ", PRECEDENCE["Or"])

    def _print_Not(self, expr):
        return "not " + self.parenthesize(expr.args[0], PRECEDENCE["Not"])

    def _print_Piecewise(self, expr):
        *branches, (last, cond) = expr.args
        if cond is not sympy.true:  # no otherwise-branch: SymPy's form (also parsed)
            return super()._print_Piecewise(expr)
        text = self._print(last)
        for value, cond in reversed(branches):
            text = f"where({self._print(cond)}, {self._print(value)}, {text})"
        return text

    def _print_Equality(self, expr):
        return self.stringify(expr.args, " == ", PRECEDENCE["Relational"])

    def _print_Unequality(self, expr):
        return self.stringify(expr.args, " != ", PRECEDENCE["Relational"])

    def _print_BooleanTrue(self, expr):
        return "True"

    def _print_BooleanFalse(self, expr):
        return "False"

    def _print_Ratio(self, expr):
        a, b = (self.parenthesize(arg, PRECEDENCE["Mul"]) for arg in expr.args)
        return f"({a}/{b})"

    def _print_Float(self, expr):
        # the shortest text of a double that is this number (0.5, not 0.500000000000000)
        value = float(expr)
        if math.isfinite(value) and sympy.Float(repr(value), precision=expr._prec) == expr:
            return repr(value)
        return super()._print_Float(expr)


def spec_str(expr) -> str:
    """A formula for docstrings, comments and explain, in the spec's syntax (the parser
    reads it back: the Python API writes SymPy expressions with it)."""
    return _SpecText({"order": None}).doprint(expr)


def derive_op(doc: SpecDocument, index: int) -> ir.OpIR:
    """Parse and derive ``doc.model.ops[index]``.

    Raises:
        SpecError: from parsing, or when a derivative cannot be expressed with
            TensorFlow ops (the message names the op and the function).
    """
    seconds = op_seconds()
    # SymPy memoizes constructions and assumption queries process-wide; which equal
    # form a later construction returns can depend on what was built before (a long
    # test session, several specs in one build). Each op starts from an empty cache,
    # so its output depends on its spec alone.
    sympy.core.cache.clear_cache()
    budget = None
    try:
        with time_budget(seconds) as budget:
            program, used = stabilize_reductions(parse_op(doc, index))
            deriver = _Deriver(doc, program)
            deriver.rules_used.update(used)
            return deriver.run()
    except (BudgetExceeded, RecursionError) as e:
        if isinstance(e, BudgetExceeded) and e.budget is not budget:
            raise  # an enclosing budget (the op's, the build's) ran out: it reports
        loc = ("ops", index)
        reason = (
            f"deriving this op took longer than {seconds:g} s"
            if isinstance(e, BudgetExceeded) else "this op's expressions are nested too deeply"
        )
        raise SpecError(
            Diagnostic(
                doc.location(loc),
                f"{reason}; simplify the expression, or split it into `where` "
                "intermediates",
                doc.model.ops[index].name,
                None,
            )
        ) from None


def simplify_partial(
    expr: sympy.Basic, rules: tuple[stable.Rule, ...] = stable.RULES
) -> tuple[sympy.Basic, tuple[str, ...]]:
    """A simpler equal form of ``expr``, after stable rewrites.

    SymPy's ``simplify`` is not used: its run time is unbounded (minutes on a ten-term
    partial) and it tends to combine terms over a common denominator, which is slower
    and less stable to evaluate. Instead the candidates are the expression as
    differentiated (SymPy already cancels and collects while building it) and
    ``factor_terms`` of it (common factors pulled out), and the one with the fewest
    operations wins; ties go to SymPy's canonical sort key, so the choice is
    deterministic.

    Returns:
        The chosen expression and the names of the stable rules it used.
    """
    expr, used = stable.rewrite(expr, rules)
    if expr.is_Atom:
        return expr, used
    candidates = [(expr, used), stable.rewrite(sympy.factor_terms(expr), rules)]
    return min(candidates, key=lambda c: (sympy.count_ops(c[0]), sympy.default_sort_key(c[0])))


def _shorten(text: str) -> str:
    return text if len(text) <= FORMULA_MAX_CHARS else text[: FORMULA_MAX_CHARS - 3] + "..."


@dataclass
class _Contribution:
    """A cotangent contribution to one symbol: a value of the given declared shape.

    ``wide``: where ``value`` is a keepdims reduction's cotangent, smaller than the
    symbol (``shape`` is then its own), the value broadcast to the symbol's shape; the
    sum uses ``value`` where other contributions broadcast it, else ``wide``.
    """

    value: ir.Value
    shape: sh.Shape
    comments: tuple = ()
    wide: ir.Value | None = None


@dataclass
class _State:
    contributions: dict = field(default_factory=dict)
    backward: list = field(default_factory=list)


class _Deriver:
    def __init__(self, doc: SpecDocument, program: Program):
        self.doc = doc
        self.p = program
        user = [v.name for v in program.inputs] + [n for n, _ in program.where]
        if not program.single:
            user += [o.name for o in program.outputs]
        # Op names too: a local must not shadow another op of the same module.
        self.scope = NameScope(set(user) | {op.name for op in doc.model.ops})
        self.shape_of = dict(program.shape_of)
        self.rules_used: set[str] = set()
        self.rules = stable.COMPLEX_RULES if program.is_complex else stable.RULES
        self.memory = program.memory
        self.symbol_kind = {} if program.is_complex else {"real": True}
        self.cotangent_shape: dict = {}  # cotangent symbols (upstreams, keepdims ones): shape

    # ------------------------------------------------------------------ helpers

    def _key(self, key) -> str:
        """``op.output``, ``op.where.t``: the keys of expressions are never the op's own."""
        return f"{self.p.name}.{format_key_path(key[2:])}"

    def _error(self, key, message: str) -> SpecError:
        return SpecError(
            Diagnostic(self.doc.location(key), message, self.p.name, format_key_path(key[2:]))
        )

    def _check_printable(self, expr, key, what: str) -> None:
        if not self.p.is_complex and expr.has(sympy.I):
            # SymPy takes sqrt(-1 - x**2) as I*sqrt(x**2 + 1) for real x: a real op
            # whose derivative is imaginary would print a complex constant into float
            # code (TypeError when the gradient runs)
            raise self._error(
                key,
                f"the {what} is not real ({_shorten(spec_str(expr))}): SymPy finds "
                "part of the expression imaginary for every real input (as "
                "sqrt(-1 - x**2) = I*sqrt(1 + x**2)); declare a complex dtype, or "
                "rewrite it",
            )
        for cls in _UNPRINTABLE:
            found = expr.atoms(cls)
            if found:
                name = cls.__name__
                raise self._error(
                    key,
                    f"the {what} contains {name}, which has no TensorFlow form "
                    f"(from {_shorten(spec_str(sorted(found, key=sympy.default_sort_key)[0]))}); "
                    "rewrite the expression",
                )

    def _symbol(self, name: str) -> sympy.Symbol:
        return sympy.Symbol(name, **self.symbol_kind)

    # -------------------------------------------------------------------- stages

    def run(self) -> ir.OpIR:
        p = self.p
        out_locals = {
            o.name: (self.scope.claim("out") if p.single else o.name) for o in p.outputs
        }
        where_names = {n for n, _ in p.where}
        # Node names: an output's or intermediate's name when the node is all of it.
        self.rename: dict = {}
        node_targets: dict = {}
        for node in p.nodes:
            # (not when simplification dropped an operand that broadcast the output:
            # sum(a, axis=1, keepdims=True) + x - x is the sum broadcast to a's shape)
            whole_output = [o for o in p.outputs if o.term.expr == node.symbol
                            and sh.same_shape(o.term.shape, node.shape)]
            if whole_output:
                name = out_locals[whole_output[0].name]
            elif node.name_hint in where_names:
                name = node.name_hint
            else:
                name = self.scope.claim(node.name_hint)
            new = sympy.Symbol(name, **node.symbol.assumptions0)  # keeps e.g. >= 0
            self.rename[node.symbol] = new
            node_targets[new] = name
            self.shape_of[new] = node.shape

        def fwd(expr):
            out, used = stable.rewrite(expr.xreplace(self.rename), self.rules)
            self.rules_used.update(used)
            return out

        nodes = [
            dataclasses.replace(
                n, symbol=self.rename[n.symbol], args=tuple(fwd(a) for a in n.args)
            )
            for n in p.nodes
        ]
        self.nodes = nodes  # renamed (node symbols are the forward's locals)
        outputs = [(o, fwd(o.term.expr)) for o in p.outputs]
        where_exprs = [(name, fwd(term.expr)) for name, term in p.where]
        if p.is_complex:
            for n in nodes:
                if n.op == "logdet":
                    raise self._error(
                        n.key, "log(det()) is computed as log|det| (slogdet), which is not "
                        "holomorphic; complex ops cannot use it"
                    )
                if n.op in ("max", "min", "logsumexp", "softmax", "log_softmax"):
                    raise self._error(
                        n.key, f"{n.op}() compares or shifts by the largest real part; "
                        "it is defined for real dtypes only"
                    )
                for a in n.args:
                    self._check_holomorphic(a, n.key)
            for o, expr in outputs:
                self._check_holomorphic(expr, o.key)

        if p.fuse == "xla":
            for n in nodes:
                if n.op == "det" or (n.op == "inverse" and p.is_complex):
                    what = "det()" if n.op == "det" else "a complex inverse()"
                    raise self._error(
                        n.key, f"fuse: xla cannot compile {what}: TensorFlow has no XLA "
                        "kernel for it (MatrixDeterminant, complex MatrixInverse); use "
                        "fuse: none for this op" + (", or log(det(...))" if n.op == "det"
                                                    else "")
                    )
        self.diff_symbols = {v.symbol for v in p.inputs if v.differentiable} | {
            n.symbol for n in nodes
        }
        self.leaf_symbols = {v.symbol for v in p.inputs} | {n.symbol for n in nodes}

        # Forward values, with broadcasts restored where simplification dropped operands.
        forward_values = []  # (target, value, comments)
        self.node_args: dict = {}  # node symbol -> operand values as the forward uses them
        for orig, n in zip(p.nodes, nodes):
            args = tuple(
                self._as_written(self._finalize(a), shape, leaves)
                for a, shape, leaves in zip(n.args, n.arg_shapes, orig.arg_leaves)
            )
            self.node_args[n.symbol] = args
            comment = self._key(n.key) + (
                "" if n.op == "elementwise" else f": {self._describe_node(n)}"
            )
            forward_values.append(
                (node_targets[n.symbol], self._forward_call(n, args), (comment,))
            )
        for o, expr in outputs:
            if expr in node_targets and node_targets[expr] == out_locals[o.name]:
                continue  # the output is a node's result, already named after the output
            value = self._as_written(self._finalize(expr), o.term.shape, o.term.leaves)
            forward_values.append((out_locals[o.name], value, (self._key(o.key),)))

        # Reverse mode: outputs, then nodes from last to first, then inputs.
        self.grad_fn = self.scope.claim("grad")
        upstreams = []
        for o, _ in outputs:
            base = "upstream" if p.single else f"upstream_{o.name}"
            upstreams.append(self._symbol(self.scope.claim(base)))
            self.cotangent_shape[upstreams[-1]] = o.term.shape
        state = _State()
        partial_docs: list[ir.PartialIR] = []
        vjp_docs: list[str] = []
        reduction_docs: list[str] = []
        for (o, expr), u in zip(outputs, upstreams):
            self._elementwise_vjp(
                state, expr, u, o.term.shape, out_locals[o.name], o.key, partial_docs
            )
        for node in reversed(nodes):
            contributions = state.contributions.pop(node.symbol, [])
            if not contributions:
                continue
            name = node_targets[node.symbol]
            value, comments = self._accumulate(contributions, node.symbol, node.shape)
            if isinstance(value, sympy.Symbol):
                g = value  # the cotangent is already a local (e.g. the upstream)
            else:
                g = self._symbol(self.scope.claim(f"grad_{name}"))
                state.backward.append((g.name, value, comments))
            texts = self._node_vjp(state, node, g, name, partial_docs)
            (reduction_docs if node.op in REDUCTION_OPS else vjp_docs).extend(texts)

        grads = {}
        self.reductions = []
        for v in p.inputs:
            if not v.differentiable:
                continue
            contributions = state.contributions.pop(v.symbol, [])
            plans = [
                sh.describe_reduction(sh.reduction_plan(v.shape, c.shape), v.shape, c.shape)
                for c in contributions if c.wide is None
            ]
            self.reductions.append((v.name, tuple(dict.fromkeys(plans))))
            target = self.scope.claim(f"grad_{v.name}")
            grads[v.name] = target
            if contributions:
                value, comments = self._accumulate(contributions, v.symbol, v.shape)
            else:
                value = ir.Call("zeros_like", (v.symbol,))
                appears = any(v.name == doc.wrt for doc in partial_docs)
                comments = (
                    f"every partial derivative with respect to {v.name} is 0"
                    if appears else f"{v.name} does not affect any output",
                )
            state.backward.append((target, value, comments))

        # Integer inputs compute as floats under their own local names.
        floats = {
            v.symbol: self._symbol(self.scope.claim(f"{v.name}_float"))
            for v in p.inputs if v.is_integer
        }

        def to_float(values):
            return [(t, ir.map_value(v, lambda e: e.xreplace(floats)), c) for t, v, c in values]

        forward, backward = self._cse(
            to_float(forward_values), to_float(state.backward), where_exprs
        )
        used = {
            s.name
            for stmt in forward + backward
            for e in ir.value_exprs(stmt.value)
            for s in e.free_symbols
        }
        casts = tuple(  # an integer input's cast, where the float value is used
            ir.Statement(
                floats[v.symbol].name,
                ir.Call("cast", (v.symbol,), (("dtype", p.dtype),)),
                (f"integer input {v.name} ({v.dtype}) computes in {p.dtype}",),
            )
            for v in p.inputs
            if v.is_integer and floats[v.symbol].name in used
        )
        forward = casts + forward
        recomputed = _recomputed(forward, backward) if self.memory == "recompute" else ()
        return ir.OpIR(
            name=p.name,
            impl=f"_{p.name}_vjp",
            doc=p.doc,
            dtype=p.dtype,
            inputs=tuple(
                ir.InputIR(
                    name=v.name,
                    dtype=v.dtype,
                    declared=v.declared,
                    shape_text=sh.format_shape(v.shape),
                    differentiable=v.differentiable,
                    is_integer=v.is_integer,
                    grad=grads.get(v.name),
                    domain=v.domain,
                )
                for v in p.inputs
            ),
            outputs=tuple(
                ir.OutputIR(
                    name=out_locals[o.name],
                    shape_text=sh.format_shape(o.term.shape),
                )
                for o, _ in outputs
            ),
            single=p.single,
            forward=forward,
            reference=casts + self._reference(node_targets, out_locals, floats),
            memory=self.memory,
            fuse=p.fuse,
            recomputed=recomputed,
            upstreams=tuple(u.name for u in upstreams),
            grad_fn=self.grad_fn,
            backward=backward,
            forward_text=self._forward_text(outputs, out_locals),
            forward_exprs=self._forward_exprs(out_locals),
            reductions=tuple(self.reductions),
            partials=tuple(partial_docs),
            vjp_text=tuple(vjp_docs),
            reduction_vjp_text=tuple(reduction_docs),
            named_dims=self._named_dims(),
            example_shapes=self._example_shapes(),
            solves=any(n.op in ("inverse", "det", "logdet") for n in p.nodes),
            rewrites=tuple(
                f"{name}: "
                + (stable.RULES_BY_NAME[name].identity if name in stable.RULES_BY_NAME
                   else REDUCTION_RULES.get(name) or guards.GUARDS.get(name)
                   or CHEAPER[name])
                for name in sorted(self.rules_used)
            ),
        )

    # ------------------------------------------------------------ forward pieces

    def _describe_node(self, node: TensorNode) -> str:
        args = [spec_str(a) if a.is_Atom else f"({spec_str(a)})" for a in node.args]
        return _shorten(_node_text(node, args))

    def _as_written(self, expr, shape: sh.Shape, leaves: frozenset) -> ir.Value:
        """``expr`` broadcast to the shape it has as written.

        Simplification may drop operands (``x - x + y`` is ``y``), and the result must
        still have the broadcast shape of everything written.
        """
        leaves = frozenset(self.rename.get(s, s) for s in leaves)
        present = sorted(expr.free_symbols & self.leaf_symbols, key=str)
        missing = sorted(leaves - set(present), key=str)
        factory = sh.DimFactory()
        actual = sh.broadcast_all([self.shape_of[s] for s in present], factory)
        if all(
            sh.same_shape(sh.broadcast(actual, self.shape_of[s], factory), actual)
            for s in missing
        ) and (present or not shape):
            # every operand as written is still there, or the dropped ones could not
            # have changed the shape (a constant left alone needs its shape, though)
            return expr
        if sh.is_static(shape):
            return ir.Call("broadcast_to", (expr,), (("shape", tuple(shape)),))
        sources = tuple(sorted(leaves, key=str))
        return ir.Call("broadcast_to", (expr, ir.Call("broadcast_shape", sources)))

    # ----------------------------------------------------------- reverse pieces

    def _finalize(self, expr, partial: bool = False):
        """The printable form of a forward value or partial: kinks as Piecewise, guards
        where the formula is 0/0, inf * 0 or outside its domain, and cheaper forms whose
        extra error is bounded in the op's dtype (real ops)."""
        if self.p.is_complex:
            return expr
        if partial:
            expr, used = guards.zero_subgradients(expr)
            self.rules_used.update(used)
        expr, used = guards.removable_singularities(expr, self.p.dtype)
        self.rules_used.update(used)
        expr, used = guards.guard_branches(guards.kinks_to_piecewise(expr))
        self.rules_used.update(used)
        expr, used = guards.vanishing_products(expr, self.p.dtype)
        self.rules_used.update(used)
        expr, used = absorbed_complements(expr, self.p.dtype)
        self.rules_used.update(used)
        expr, used = guards.exponent_logs(expr)
        self.rules_used.update(used)
        return expr

    def _check_holomorphic(self, expr, key) -> None:
        for f in sorted(expr.atoms(sympy.Function), key=sympy.default_sort_key):
            if not isinstance(f, HOLOMORPHIC):
                raise self._error(
                    key,
                    f"{type(f).__name__} is not holomorphic (or has no complex TensorFlow "
                    "kernel); a complex op must be holomorphic, since its gradient is "
                    "upstream * conj(f'(z)). Allowed for complex inputs: arithmetic, @, "
                    "transpose and " + ", ".join(sorted(c.__name__ for c in HOLOMORPHIC)),
                )

    def _partial(self, expr, wrt, key, label):
        d, used = simplify_partial(sympy.diff(expr, wrt), self.rules)
        self.rules_used.update(used)
        if sympy.count_ops(d) > MAX_PARTIAL_OPS:
            raise self._error(
                key,
                f"the derivative {label} has more than {MAX_PARTIAL_OPS} operations; "
                "split the expression into `where` intermediates",
            )
        self._check_printable(d, key, f"derivative {label}")
        return d

    def _elementwise_vjp(self, state, expr, g, shape, out_name, key, docs, narrow=None):
        """Contributions of ``g * conj(d expr/d v)`` to every differentiable symbol ``v``.

        ``narrow``: ``(g's shape, widened)`` where ``g`` is smaller than ``shape`` (a
        keepdims reduction's cotangent); ``widened()`` gives ``g`` broadcast to
        ``shape``, used for the partials whose product with ``g`` would not have it.
        """
        key_text = self._key(key)
        for v in sorted(expr.free_symbols & self.diff_symbols, key=str):
            if expr == v:  # the output is this value itself: the cotangent passes through
                passed = g if narrow is None else narrow[1]()
                state.contributions.setdefault(v, []).append(_Contribution(passed, shape))
                continue
            label = f"d({out_name})/d({v.name})"
            d = self._partial(expr, v, key, label)
            docs.append(ir.PartialIR(out_name, v.name, self._show(d), self._shown(d)))
            if d == 0:
                continue
            d_code = self._finalize(d, partial=True)
            if not self.p.is_complex:
                d_code = _pull_sign(d_code)
            g_v = g
            if narrow is not None and not self._covers(d_code, narrow[0], shape):
                g_v = narrow[1]()
            term = g_v * (sympy.conjugate(d_code) if self.p.is_complex else d_code)
            # no provenance for a constant partial or a single value: the code says it
            comments = () if d.is_number or d.is_Symbol else (
                _shorten(f"{label} = {self._show(d)}  ({key_text})"),)
            state.contributions.setdefault(v, []).append(_Contribution(term, shape, comments))

    def _accumulate(self, contributions, target, target_shape):
        """Sum contributions, unbroadcasting each group of equal shape to ``target_shape``."""
        groups: list[tuple[sh.Shape, list[_Contribution]]] = []
        narrow = [c for c in contributions if c.wide is not None]
        for c in contributions:
            if c.wide is not None:
                continue
            for shape, members in groups:
                if sh.same_shape(shape, c.shape):
                    members.append(c)
                    break
            else:
                groups.append((c.shape, [c]))
        parts, comments, zero_groups = [], [], []
        for shape, members in groups:
            total = _add([m.value for m in members])
            above = [c for m in members for c in m.comments]
            comments.extend(above)
            plan = sh.reduction_plan(target_shape, shape)
            indent = "  " if above else ""  # where it applies to the partials just above
            if not (isinstance(plan, sh.StaticReduction) and plan.is_identity):
                comments.append(indent + sh.describe_reduction(plan, target_shape, shape))
            value, dropped = self._reduced(total, plan, shape, target)
            comments.extend(indent + line for line in dropped)
            if value is not None:
                parts.append(value)
            else:
                zero_groups.append(_unbroadcast(total, plan, target))
        if not parts and not narrow:  # every group sums to 0: keep one (the shape)
            parts = zero_groups[:1]
        for c in narrow:  # a part of the target's shape broadcasts the others in the sum
            parts.append(c.value if parts else c.wide)
        comments.extend(line for c in narrow for line in c.comments)
        return _add(parts), tuple(comments)

    def _reduced_axes(self, total, plan, shape: sh.Shape):
        """``(axes, constant)`` for a static reduction of ``total`` (of ``shape``) that
        only keeps dims, where every symbol's shape is known and of ``shape``'s rank:
        ``constant(e)`` says whether ``e`` is constant (size 1) along the axes. Else
        None."""
        if not (isinstance(total, sympy.Expr) and isinstance(plan, sh.StaticReduction)
                and plan.keep_axes and not plan.drop_axes and not sh.has_batch(shape)):
            return None
        shapes = {}
        for s in total.free_symbols:
            s_shape = self.shape_of.get(s, self.cotangent_shape.get(s))
            if s_shape is None or sh.has_batch(s_shape) or len(s_shape) != len(shape):
                return None
            shapes[s] = s_shape
        axes = tuple(sorted(plan.keep_axes))

        def constant(e) -> bool:
            return all(shapes[s][a] == 1 for s in e.free_symbols for a in axes)

        return axes, constant

    def _reduced(self, total, plan, shape: sh.Shape, target) -> tuple[ir.Value, list]:
        """``unbroadcast(total)`` to ``target``, the sum over the reduced axes made
        cheaper where that is exact, for a static reduction that keeps dims:

        * terms whose sum is exactly 0 are dropped: ``C * V`` with ``C`` constant along
          the axes and ``V`` linear in an ``x`` whose mean over exactly those axes is a
          forward local ``mu`` (keepdims), with ``V = 0`` at ``x = mu`` (the sum is ``C *
          n * V(mu) = 0``, as ``sum(x - mu) = n mu - n mu``). Layer norm's ``d(mu)`` has
          one (``g_var * (2 mu - 2 x)``); as computed, its value is rounding noise. The
          identity behind the hand-written layer-norm gradient ``rstd * (g - mean(g) -
          y * mean(g * y))``;
        * a single term ``C * g``, ``C`` constant along the axes and ``g`` made of
          cotangents only, is ``C * sum(g)``, not ``sum(C * g)``: one pass over the
          tensor less without XLA. (Not where the rest holds forward values: splitting
          ``out * g`` into ``rstd * sum(d * g)`` would keep ``d`` alive for the
          gradient, layer norm's peak memory with ``memory: save`` 473 -> 740 MB.)

        Never every factor (a constant summed over broadcast axes is ``n`` times
        itself). Returns the value, None where every term sums to 0, and a comment line
        per term left out.
        """
        found = self._reduced_axes(total, plan, shape)
        if found is None:
            return _unbroadcast(total, plan, target), []
        axes, constant = found
        means = {
            n.args[0]: n.symbol for n in self.nodes
            if n.op == "mean" and n.param("keepdims") and n.args[0].is_Symbol
            and tuple(sorted(n.param("axes"))) == axes
        }

        def zero_sum(term):  # the x whose mean makes the term's sum 0, or None
            varying = sympy.Mul(*[f for f in sympy.Mul.make_args(term) if not constant(f)])
            xs = [x for x in varying.free_symbols if x in means]
            if len(xs) != 1:
                return None
            poly = guards._poly(varying, xs[0])
            if poly is None or poly.degree() != 1 or not all(
                    constant(c) for c in poly.all_coeffs()):
                return None
            return xs[0] if sympy.expand(varying.subs(xs[0], means[xs[0]])) == 0 else None

        terms = sympy.Add.make_args(total)
        zeros = {t: zero_sum(t) for t in terms}
        kept = [t for t in terms if zeros[t] is None]
        dropped = [
            _shorten(f"(the sum of {self._show(t)} over axes {list(axes)} is 0, "
                     f"{self._show(means[zeros[t]])} being the mean of "
                     f"{self._show(zeros[t])} there: left out)")
            for t in terms if t not in kept
        ]
        if not kept:
            return None, dropped
        total = sympy.Add(*kept)
        factors = sympy.Mul.make_args(total)
        scale = sympy.Mul(*[f for f in factors if constant(f)])
        rest = sympy.Mul(*[f for f in factors if not constant(f)])
        if (scale == 1 or rest == 1 or scale.is_number
                or not rest.free_symbols <= self.cotangent_shape.keys()):
            return _unbroadcast(total, plan, target), dropped
        return ir.Call("mul", (scale, _unbroadcast(rest, plan, target))), dropped

    def _forward_call(self, node: TensorNode, args: tuple) -> ir.Call:
        """The TensorFlow call that computes a node in the forward pass."""
        if node.op in ("sum", "mean", "max", "min", "logsumexp"):
            params = (("axis", node.param("axes")), ("keepdims", node.param("keepdims")))
            if dict(node.params).get("count"):  # log-mean-exp over `count` terms
                params += (("count", node.param("count")),)
            return ir.Call(f"reduce_{node.op}", args, params)
        if node.op in ("softmax", "log_softmax"):
            return ir.Call(node.op, args, (("axis", node.param("axes")),))
        if node.op == "einsum":
            inputs, out = node.param("subscripts")
            return ir.Call("einsum", args, (("subscripts", f"{','.join(inputs)}->{out}"),))
        if node.op == "elementwise":
            return args[0]
        return ir.Call(node.op, args)

    def _static(self, shape: sh.Shape):
        return tuple(shape) if sh.is_static(shape) else None

    def _node_vjp(self, state, node: TensorNode, g, name, docs) -> list[str]:
        """Contributions of a node's VJP to the symbols in its operands.

        Rules (matrix calculus; ``^H`` is the transpose, the conjugate transpose for
        complex dtypes), with ``G`` the node's cotangent and ``Y`` its value:

        * ``Y = A @ B``: ``dA = G @ B^H``, ``dB = A^H @ G`` (batch axes unbroadcast);
        * ``Y = transpose(A)``: ``dA = transpose(G)``;
        * ``Y = inverse(A)``: ``dA = -Y^H @ G @ Y^H``;
        * ``Y = det(A)``: ``dA = G * conj(cofactor(A))`` (Jacobi's formula; the cofactor
          matrix det(A) * inverse(A)^T = adj(A)^T is computed without inverting, so it is
          finite, the adjugate, at a singular A);
        * ``Y = log|det(A)|``: ``dA = G * inverse(A)^H`` (infinite at a singular A, where
          the forward is -inf: TensorFlow's inverse raises there);
        * ``Y = trace(A)``: ``dA = G * I``;
        * ``Y = sum(A, axes)``: ``dA = G`` broadcast back over ``axes``; mean divides
          by the number of elements summed;
        * ``Y = einsum(s1,...,sn->o)``: ``dAi = einsum(o,s1..(not i)..sn->si)`` of ``G``
          and the other operands (conjugated), broadcast over indices only ``si`` has;
        * ``Y = max(A, axes)`` (or min): ``dA = G`` broadcast back, times the indicator
          of ``A == Y`` divided by the number of ties (``tf.reduce_max``'s gradient);
        * ``Y = logsumexp(A, axes)``: ``dA = G`` broadcast back times ``softmax(A, axes)``;
        * ``Y = softmax(A, axes)``: ``dA = Y * (G - sum(G * Y, axes))``
          (``nn_grad._SoftmaxGrad``);
        * ``Y = log_softmax(A, axes)``: ``dA = G - exp(Y) * sum(G, axes)``.
        """
        texts = []
        key_text = self._key(node.key)
        args = self.node_args[node.symbol]
        shapes = node.arg_shapes
        y = node.symbol
        cplx = self.p.is_complex
        adj = "adjoint" if cplx else "transpose"

        def conj(v):
            if not cplx:
                return v
            if isinstance(v, ir.Call):  # an operand broadcast to its shape as written
                assert v.fn == "broadcast_to", v.fn  # (the only Call _as_written makes)
                return ir.Call(v.fn, (sympy.conjugate(v.args[0]),) + v.args[1:], v.params)
            return sympy.conjugate(v)

        rules = []  # (operand expression, VJP value, contribution shape, formula text)
        # A keepdims reduction's cotangent before it is broadcast back (value, shape,
        # broadcast of a local holding it): a compound operand's partials that have the
        # operand's shape broadcast it in their product, with no broadcast_to pass.
        narrow = None
        if node.op == "elementwise":  # a materialized `where` intermediate: chain rule
            self._elementwise_vjp(state, node.args[0], g, node.shape, name, node.key, docs)
            return []
        if node.op == "matmul":
            (a, b), batch = node.args, node.shape[:-2]
            rules = [
                (a, ir.Call("matmul", (g, args[1]), ((f"{adj}_b", True),)),
                 batch + tuple(shapes[0][-2:]), f"{g.name} @ {adj}({spec_str(b)})"),
                (b, ir.Call("matmul", (args[0], g), ((f"{adj}_a", True),)),
                 batch + tuple(shapes[1][-2:]), f"{adj}({spec_str(a)}) @ {g.name}"),
            ]
        elif node.op == "transpose":
            rules = [(node.args[0], ir.Call("transpose", (g,)), shapes[0],
                      f"transpose({g.name})")]
        elif node.op == "inverse":
            inner = ir.Call("matmul", (-y, g), ((f"{adj}_a", True),))
            value = ir.Call("matmul", (inner, y), ((f"{adj}_b", True),))
            rules = [(node.args[0], value, shapes[0],
                      f"-{adj}({y.name}) @ {g.name} @ {adj}({y.name})")]
        elif node.op == "det":
            # Jacobi's formula with the cofactor matrix det(A) * inverse(A)^T computed
            # without inverting: finite (the adjugate) where A is singular
            cof = ir.Call("cofactor", (args[0],), (("conjugate", cplx),))
            value = ir.Call("mul", (ir.Call("expand_matrix", (g,)), cof))
            what = "conj(cofactor" if cplx else "cofactor"
            text = f"{g.name} * {what}({spec_str(node.args[0])}){')' if cplx else ''}"
            rules = [(node.args[0], value, shapes[0], text)]
        elif node.op == "logdet":
            # inverse(A)^T: genuinely infinite where A is singular (log|det| is -inf
            # there); tf.linalg.inv raises "Input is not invertible" at such A. An
            # inverse(A) the forward computes is reused, not computed again.
            forward_inv = next((n.symbol for n in self.nodes if n.op == "inverse"
                                and n.args[0] == node.args[0]), None)
            if forward_inv is not None and not cplx:
                inv_h = ir.Call("transpose", (forward_inv,))
            else:
                inv_h = ir.Call("inverse", (args[0],), (("adjoint", True),))
            value = ir.Call("mul", (ir.Call("expand_matrix", (g,)), inv_h))
            text = f"{spec_str(g)} * {adj}(inverse({spec_str(node.args[0])}))"
            rules = [(node.args[0], value, shapes[0], text)]
        elif node.op == "trace":
            n = shapes[0][-1]
            eye = ir.Call("eye", (args[0],), (("n", n if sh.is_known(n) else None),))
            value = ir.Call("mul", (ir.Call("expand_matrix", (g,)), eye))
            rules = [(node.args[0], value, shapes[0], f"{g.name} * I")]
        elif node.op in ("sum", "mean"):
            axes, keepdims = node.param("axes"), node.param("keepdims")
            cotangent = g
            if node.op == "mean":
                reduced = [shapes[0][i] for i in axes]
                if all(sh.is_known(d) for d in reduced):
                    cotangent = g / sympy.Integer(max(1, int(sympy.prod(reduced))))
                else:
                    count = ir.Call("count", (args[0],), (("axes", axes),))
                    cotangent = ir.Call("div", (g, count))
            params = (("axes", axes), ("keepdims", keepdims),
                      ("shape", self._static(shapes[0])))

            def unreduce(cot):
                return ir.Call("unreduce", (cot, args[0]), params)

            value = unreduce(cotangent)
            what = "broadcast" if node.op == "sum" else "broadcast, divided by the count"
            rules = [(node.args[0], value, shapes[0], f"{g.name} {what} over axes {list(axes)}")]
            if keepdims:  # a compound operand's partials may broadcast it for free
                narrow = (cotangent, node.shape, unreduce)
        elif node.op in ("max", "min"):
            axes, keepdims = node.param("axes"), node.param("keepdims")
            value = ir.Call(
                "extremum_grad", (g, args[0], y), (("axis", axes), ("keepdims", keepdims))
            )
            rules = [(node.args[0], value, shapes[0],
                      f"{g.name} to the {node.op}imal elements over axes {list(axes)}, "
                      "shared among ties")]
        elif node.op == "logsumexp":
            axes, keepdims = node.param("axes"), node.param("keepdims")
            back = ir.Call(
                "unreduce", (g, args[0]),
                (("axes", axes), ("keepdims", keepdims), ("shape", self._static(shapes[0]))),
            )
            value = ir.Call("mul", (back, ir.Call("softmax", (args[0],), (("axis", axes),))))
            rules = [(node.args[0], value, shapes[0],
                      f"{g.name} * softmax({spec_str(node.args[0])}, axis={list(axes)})")]
        elif node.op in ("softmax", "log_softmax"):
            axes = node.param("axes")
            value = ir.Call(f"{node.op}_grad", (g, y), (("axis", axes),))
            text = (
                f"{y.name} * ({g.name} - sum({g.name} * {y.name}, axis={list(axes)}))"
                if node.op == "softmax"
                else f"{g.name} - exp({y.name}) * sum({g.name}, axis={list(axes)})"
            )
            rules = [(node.args[0], value, shapes[0], text)]
        elif node.op == "einsum":
            inputs, out = node.param("subscripts")
            for i, sub in enumerate(inputs):
                others = [s for j, s in enumerate(inputs) if j != i]
                present = set(out).union(*others)
                missing = [k for k, c in enumerate(sub) if c not in present]
                keep = "".join(c for c in sub if c in present)
                spec = ",".join([out] + others) + "->" + keep
                operands = (g,) + tuple(conj(a) for j, a in enumerate(args) if j != i)
                value = ir.Call("einsum", operands, (("subscripts", spec),))
                if missing:
                    value = ir.Call(
                        "unreduce", (value, args[i]),
                        (("axes", tuple(missing)), ("keepdims", False),
                         ("shape", self._static(shapes[i]))),
                    )
                rules.append((node.args[i], value, shapes[i], f"einsum({spec!r}, ...)"))
        else:  # pragma: no cover - the parser creates no other nodes
            raise AssertionError(node.op)
        sides = ["lhs", "rhs"] if node.op == "matmul" else [
            f"arg{i}" if len(rules) > 1 else "arg" for i in range(len(rules))
        ]
        for side, (arg, vjp, vjp_shape, text) in zip(sides, rules):
            targets = sorted(arg.free_symbols & self.diff_symbols, key=str)
            if not targets:
                continue
            texts.append(f"VJP of {name} w.r.t. {spec_str(arg)}: {text}")
            comment = _shorten(f"VJP of {name} ({node.op}): {text}  ({key_text})")
            if arg.is_Symbol:
                state.contributions.setdefault(arg, []).append(
                    _Contribution(vjp, vjp_shape, (comment,)) if narrow is None else
                    _Contribution(narrow[0], narrow[1], (comment,), wide=vjp)
                )
                continue
            # A compound operand: materialize its cotangent, then differentiate it.
            if narrow is None:
                ga = self._symbol(self.scope.claim(f"grad_{name}_{side}"))
                state.backward.append((ga.name, vjp, (comment,)))
                self._elementwise_vjp(
                    state, arg, ga, vjp_shape, f"{name} operand", node.key, docs
                )
                continue
            value, narrow_shape, widen = narrow
            if isinstance(value, sympy.Symbol):
                ga = value  # the cotangent is already a local (e.g. the upstream)
            else:
                ga = self._symbol(self.scope.claim(f"grad_{name}_{side}"))
                state.backward.append((ga.name, value, (comment,)))
            self.cotangent_shape[ga] = narrow_shape
            wide = []  # the broadcast cotangent, made once where a partial needs it

            def widened():
                if not wide:
                    wide.append(self._symbol(self.scope.claim(f"{ga.name}_wide")))
                    state.backward.append((wide[0].name, widen(ga), ()))
                return wide[0]

            self._elementwise_vjp(state, arg, ga, vjp_shape, f"{name} operand", node.key,
                                  docs, narrow=(narrow_shape, widened))
        return texts

    def _covers(self, expr, g_shape: sh.Shape, shape: sh.Shape) -> bool:
        """Whether ``g * expr`` has ``shape`` by broadcasting, for a ``g`` of ``g_shape``
        (every symbol of ``expr`` of known shape)."""
        symbols = expr.free_symbols
        if any(s not in self.shape_of for s in symbols):
            return False
        factory = sh.DimFactory()
        actual = sh.broadcast_all([g_shape] + [self.shape_of[s] for s in symbols], factory)
        return sh.same_shape(actual, shape)

    # ----------------------------------------------------------------- CSE + order

    def _cse(self, forward_values, backward_values, where_exprs):
        # squaring chains round after every product (r**-12 loses ~3% in bfloat16)
        chains = self.p.dtype not in HALF_DTYPES

        def cheap(e):
            return _cheap_forms(e, chains)

        forward_values = [(t, ir.map_value(v, cheap), c) for t, v, c in forward_values]
        backward_values = [(t, ir.map_value(v, cheap), c) for t, v, c in backward_values]
        fwd_exprs = [e for _, v, _ in forward_values for e in ir.value_exprs(v)]
        bwd_exprs = [e for _, v, _ in backward_values for e in ir.value_exprs(v)]
        # Temporaries that involve a cotangent can only be used by backward statements,
        # so the forward/backward split below keeps them in the gradient function.
        replacements, reduced = sympy.cse(
            fwd_exprs + bwd_exprs,
            symbols=sympy.numbered_symbols("_cse"),
            order="canonical",
        )
        reduced_iter = iter(reduced)

        def take(_):
            return next(reduced_iter)

        fwd_vals = [(t, ir.map_value(v, take), c) for t, v, c in forward_values]
        bwd_vals = [(t, ir.map_value(v, take), c) for t, v, c in backward_values]

        temps = dict(replacements)
        order = [s for s, _ in replacements]
        deps = {s: e.free_symbols & set(temps) for s, e in temps.items()}
        forward_temps: set = set()
        stack = [s for _, v, _ in fwd_vals for e in ir.value_exprs(v) for s in e.free_symbols
                 if s in temps]
        while stack:
            s = stack.pop()
            if s not in forward_temps:
                forward_temps.add(s)
                stack.extend(deps[s])

        # Names: a temp equal to a `where` intermediate takes its name; a temp that is a
        # whole output takes the output's name; other temps get short descriptive names.
        names: dict = {}
        expanded: dict = {}
        for s in order:
            expanded[s] = temps[s].xreplace(expanded)
        where_names = {cheap(e): n for n, e in reversed(where_exprs)}
        # inside a guarded branch a `where` value is computed from the guarded input
        # (r_safe for r): it keeps its name there too
        guarded = sorted({g for e in fwd_exprs + bwd_exprs for g in e.atoms(fn.Guard)
                          if g.args[0].is_Symbol}, key=sympy.default_sort_key)
        for n, e in where_exprs:
            for g in guarded:
                if g.args[0] in e.free_symbols:
                    where_names.setdefault(cheap(e.xreplace({g.args[0]: g})), n)
        for s in order:
            name = where_names.get(expanded[s])
            if name is not None and name not in names.values():
                names[s] = name
        # A statement `target = <temporary>` is folded: the temporary takes the target's
        # name (e.g. an output, or a cotangent that CSE shared with another statement).
        def fold(values, section):
            folded = set()
            for i, (t, v, c) in enumerate(values):
                if isinstance(v, sympy.Symbol) and v in temps and v not in names and (
                    (v in forward_temps) == section
                ):
                    names[v] = t
                    folded.add(i)
            return folded

        fwd_folded, bwd_folded = fold(fwd_vals, True), fold(bwd_vals, False)
        for s in order:
            if s not in names:
                names[s] = self.scope.claim(_temp_name(temps[s], names))
        rename = {s: self._symbol(names[s]) for s in order}

        def fix(e):
            return e.xreplace(rename)

        temp_stmts = {rename[s]: ir.Statement(names[s], fix(temps[s])) for s in order}

        def emit(value_list, allowed, skip=()):
            out, done = [], set()

            def need(expr_list):
                for e in expr_list:
                    for sym in sorted(e.free_symbols, key=str):
                        if sym in temp_stmts and sym in allowed and sym not in done:
                            done.add(sym)
                            need([temp_stmts[sym].value])
                            out.append(temp_stmts[sym])

            for i, (t, v, c) in enumerate(value_list):
                v = ir.map_value(v, fix)
                if i in skip:  # folded: emit the temporary here, with this comment
                    target_sym = self._symbol(t)
                    stmt = temp_stmts[target_sym]
                    if target_sym in done:
                        index = out.index(stmt)
                        out[index] = ir.Statement(stmt.target, stmt.value, stmt.comments + c)
                        continue
                    done.add(target_sym)
                    need([stmt.value])
                    out.append(ir.Statement(stmt.target, stmt.value, c))
                    continue
                need(list(ir.value_exprs(v)))
                out.append(ir.Statement(t, v, c))
            return tuple(out)

        fwd_allowed = {rename[s] for s in forward_temps}
        bwd_allowed = {rename[s] for s in order if s not in forward_temps}
        forward = emit(fwd_vals, fwd_allowed, skip=fwd_folded)
        backward = emit(bwd_vals, bwd_allowed, skip=bwd_folded)
        return forward, backward

    # ------------------------------------------------------------------ docs

    def _forward_text(self, outputs, out_locals):
        lines = []
        for i, (name, term) in enumerate(self.p.where):
            lines.append(f"{name} = {self._show(term.expr, upto=i)}")
        for o, _ in outputs:
            lines.append(f"{out_locals[o.name]} = {self._show(o.term.expr)}")
        return tuple(lines)

    def _forward_exprs(self, out_locals) -> tuple:
        pairs = [(name, self._shown(term.expr, upto=i)) for i, (name, term) in
                 enumerate(self.p.where)]
        pairs += [(out_locals[o.name], self._shown(o.term.expr)) for o in self.p.outputs]
        return tuple(pairs)

    def _shown(self, expr, upto: int | None = None):
        """``expr`` for display: ``where`` names in place of their expressions (the
        first ``upto`` of them), node symbols as their operations."""
        where = self.p.where[:upto]  # (all of them for upto None)
        mapping = {}
        for name, term in reversed(where):
            mapping[term.expr] = sympy.Symbol(name)
            mapping[self._rewritten(term.expr)] = sympy.Symbol(name)
        return self._display(expr.xreplace(self._inverse_rename()).xreplace(mapping))

    def _show(self, expr, upto: int | None = None) -> str:
        """Formula text for docs and comments (see :meth:`_shown`)."""
        # a ratio of powers as the user wrote it: (sigma/r)**6, not sigma**6/r**6
        shown = guards._bottom_up(self._shown(expr, upto), _ratio_powers)
        indicators = {
            p: sympy.Symbol(f"[{spec_str(p.args[0].cond)}]")
            for p in shown.atoms(sympy.Piecewise)
            if len(p.args) == 2 and p.args[0].expr == 1 and p.args[1].expr == 0
        }
        return _shorten(spec_str(shown.xreplace(indicators)))

    def _rewritten(self, expr):
        return stable.rewrite(expr)[0]

    def _inverse_rename(self) -> dict:
        return {new: old for old, new in self.rename.items()}

    def _display(self, expr):
        """``expr`` with node symbols shown as their operations, e.g. ``(a @ b)``."""
        return expr.xreplace(self._display_map)

    @functools.cached_property
    def _display_map(self) -> dict:
        mapping: dict = {}
        # an operand that is a `where` intermediate is shown by its name
        symbols = {n.symbol for n in self.p.nodes}
        named = {t.expr: sympy.Symbol(name) for name, t in self.p.where if t.expr in symbols}
        for n in self.p.nodes:
            args = [spec_str(a.xreplace({**mapping, **named})) for a in n.args]
            text = _node_text(n, args)
            mapping[n.symbol] = sympy.Symbol(f"({text})" if n.op == "matmul" else text)
        return mapping

    def _reference(self, node_targets, out_locals, floats) -> tuple:
        """The forward as written (no stable rewrites, no guards, no CSE), for tests that
        compare the generated gradient with TensorFlow's autodiff of this forward."""
        out = []
        rename = {**self.rename, **floats}
        for n in self.p.nodes:
            new = self.rename[n.symbol]
            args = tuple(
                self._as_written(guards.kinks_to_piecewise(a.xreplace(rename)), shape, leaves)
                for a, shape, leaves in zip(n.args, n.arg_shapes, n.arg_leaves)
            )
            out.append(ir.Statement(node_targets[new], self._forward_call(n, args)))
        for o in self.p.outputs:
            expr = guards.kinks_to_piecewise(o.term.expr.xreplace(rename))
            if expr in node_targets and node_targets[expr] == out_locals[o.name]:
                continue
            value = self._as_written(expr, o.term.shape, o.term.leaves)
            out.append(ir.Statement(out_locals[o.name], value))
        return tuple(out)

    def _example_shapes(self) -> tuple:
        """Concrete input shapes for verification: named dims distinct (4, 5, ...) and
        null dims 3; then all unknown dims 3; then all 1 (sizes the shapes require win).
        A ``...`` is batch dims ``[2]``, then ``[2, 3]``, then none."""
        names = sorted({d for v in self.p.inputs for d in v.shape if isinstance(d, str)})
        configs = []
        batches = ((2,), (2, 3), ())
        for (default, distinct), batch in zip(((3, True), (3, False), (1, False)), batches):
            sizes = {n: default + (i + 1 if distinct else 0) for i, n in enumerate(names)}
            shapes = tuple(
                (batch if sh.has_batch(v.shape) else ())
                + tuple(
                    self.p.factory.concrete(d, sizes.get(d, default))
                    for d in sh.core(v.shape)
                )
                for v in self.p.inputs
            )
            if shapes not in configs:
                configs.append(shapes)
        return tuple(configs)

    def _named_dims(self):
        uses: dict[str, list] = {}
        for v in self.p.inputs:
            # axes after a `...` count from the end
            offset = len(v.declared) if v.declared[:1] == (...,) else 0
            for axis, d in enumerate(v.declared):
                if isinstance(d, str):
                    uses.setdefault(d, []).append((v.name, axis - offset))
        return tuple((d, tuple(places)) for d, places in sorted(uses.items())
                     if len(places) > 1)


def _node_text(node: TensorNode, args: list[str]) -> str:
    """How a node reads in docs: ``a @ b``, ``sum(x, axis=[1])``, ``log(det(s))``..."""
    if node.op == "elementwise":
        return node.name_hint
    if node.op == "matmul":
        return f"{args[0]} @ {args[1]}"
    if node.op == "logdet":
        return f"log(det({args[0]}))"
    if node.op in ("sum", "mean", "max", "min", "logsumexp"):
        keep = ", keepdims=True" if node.param("keepdims") else ""
        op = "logmeanexp" if dict(node.params).get("count") else node.op
        return f"{op}({args[0]}, axis={list(node.param('axes'))}{keep})"
    if node.op in ("softmax", "log_softmax"):
        return f"{node.op}({args[0]}, axis={list(node.param('axes'))})"
    if node.op == "einsum":
        inputs, out = node.param("subscripts")
        return f"einsum('{','.join(inputs)}->{out}', {', '.join(args)})"
    return f"{node.op}({args[0]})"  # transpose, inverse, det, trace: one operand


def _ratio_powers(e):
    """``a**p * b**-q`` (p, q >= 2) as ``Ratio(a, b)**m * a**(p - m) * b**-(q - m)``,
    ``m = min(p, q)``, pairing the highest powers first: the forward as the user wrote
    it (``(sigma / r)**6``, which SymPy distributes into ``sigma**6 * r**-6``), finite
    where the separate powers would overflow or underflow. None when nothing pairs."""
    if not isinstance(e, sympy.Mul):
        return None
    pos, neg, rest = [], [], []
    for factor in e.args:
        base, exp = factor.as_base_exp()
        if exp.is_Integer and not base.is_number and abs(int(exp)) >= 2:
            (pos if exp > 0 else neg).append([base, abs(int(exp))])
        else:
            rest.append(factor)
    if not pos or not neg:
        return None
    pos.sort(key=lambda f: (-f[1], sympy.default_sort_key(f[0])))
    neg.sort(key=lambda f: (-f[1], sympy.default_sort_key(f[0])))
    factors = []
    for (a, p), (b, q) in zip(pos, neg):
        m = min(p, q)
        factors += [fn.Ratio(a, b) ** m, a ** (p - m), b ** (m - q)]
    for base, exp in pos[len(neg):]:
        factors.append(base ** exp)
    for base, exp in neg[len(pos):]:
        factors.append(base ** -exp)
    return sympy.Mul(*rest, *factors)


def _cheap_forms(expr, chains: bool):
    """Cheaper equal forms for code: ratios of powers as powers of the ratio
    (:func:`_ratio_powers`); with ``chains``, integer and half-integer powers by
    repeated squaring (``r**-12`` is 4 products after one division, not a ``pow`` call,
    which costs an exp and a log per element); and non-trivial numeric constants as
    atoms (so CSE keeps them inline)."""

    def fix(e):
        if isinstance(e, sympy.Pow) and e.exp.is_Rational and not e.base.is_number:
            p, q = int(e.exp.p), int(e.exp.q)
            if q == 1 and p >= 2:
                return fn.squarings(e.base, p)
            if q == 1 and p <= -2:
                return fn.squarings(fn.Recip(e.base), -p)
            if q == 2 and abs(p) >= 3:
                half = sympy.Pow(e.base, sympy.Rational(1 if p > 0 else -1, 2))
                base = e.base if p > 0 else fn.Recip(e.base)
                return sympy.Mul(fn.squarings(base, abs(p) // 2), half)
        return None

    expr = guards._bottom_up(expr, _ratio_powers)
    return _constants(guards._bottom_up(expr, fix) if chains else expr)


def _constants(expr):
    """Non-trivial numeric constants (``sqrt(2)/sqrt(pi)``) as single ``Const`` atoms,
    the numeric factors of a product merged into one, so that CSE does not hoist them
    into temporaries of their own (``t = math.sqrt(2) * (1 / math.sqrt(math.pi))``)."""
    if not isinstance(expr, sympy.Expr) or expr.is_Atom:
        return expr
    if expr.is_number:
        return fn.Const(expr)
    if isinstance(expr, sympy.Mul):
        numbers = [a for a in expr.args if a.is_number]
        rest = [_constants(a) for a in expr.args if not a.is_number]
        coeff = sympy.Mul(*numbers)
        if not coeff.is_Atom:
            coeff = fn.Const(coeff)
        return sympy.Mul(coeff, *rest)
    args = tuple(_constants(a) for a in expr.args)
    return expr if args == expr.args else expr.func(*args)


def _recomputed(forward: tuple, backward: tuple) -> tuple:
    """The forward statements the backward statements need (directly or through each
    other), in forward order, for ``memory: recompute``: the gradient function computes
    them again from the inputs instead of keeping them alive from the forward pass."""
    defined = {stmt.target: stmt for stmt in forward}
    needed: set = set()
    stack = [s.name for stmt in backward for e in ir.value_exprs(stmt.value)
             for s in e.free_symbols if s.name in defined]
    while stack:
        name = stack.pop()
        if name in needed:
            continue
        needed.add(name)
        stack += [s.name for e in ir.value_exprs(defined[name].value) for s in e.free_symbols
                  if s.name in defined]
    return tuple(ir.Statement(s.target, s.value) for s in forward if s.target in needed)


def _pull_sign(expr):
    """``expr`` with each Piecewise whose branches are all negated written as the
    negation of one: ``where(c, -r, -sign(r)) = -where(c, r, sign(r))``, so that CSE
    shares the product with the upstream between the partials of ``f(a - b)`` with
    respect to ``a`` and ``b`` (one ``where`` and one product, not two of each)."""
    def negated(value):
        return value.is_zero or value.could_extract_minus_sign()

    def matches(e):
        return (isinstance(e, sympy.Piecewise) and all(negated(v) for v, _ in e.args)
                and not all(v.is_zero for v, _ in e.args))

    return expr.replace(
        matches, lambda e: -sympy.Piecewise(*[(-v, c) for v, c in e.args], evaluate=False))


def _add(values: list) -> ir.Value:
    exprs = [v for v in values if not isinstance(v, ir.Call)]
    calls = [v for v in values if isinstance(v, ir.Call)]
    parts = ([sympy.Add(*exprs)] if exprs else []) + calls
    out = parts[0]
    for part in parts[1:]:
        out = ir.Call("add", (out, part))
    return out


def _unbroadcast(value: ir.Value, plan: sh.ReductionPlan, like) -> ir.Value:
    if isinstance(plan, sh.DynamicReduction):
        return ir.Call("unbroadcast", (value, like))
    if plan.drop_axes:
        value = ir.Call("reduce_sum", (value,), (("axis", plan.drop_axes), ("keepdims", False)))
    if plan.keep_axes:
        value = ir.Call("reduce_sum", (value,), (("axis", plan.keep_axes), ("keepdims", True)))
    return value


def _temp_name(expr, names: dict) -> str:
    """A short descriptive name for a CSE temporary: ``exp_x``, ``x_sq``, ``t``."""
    def label(e):
        if e.is_Symbol:
            return names.get(e, e.name)
        return None

    if isinstance(expr, sympy.Pow) and label(expr.base):
        if expr.exp == 2:
            return f"{label(expr.base)}_sq"
        if expr.exp == sympy.Rational(1, 2):
            return f"sqrt_{label(expr.base)}"
        if expr.exp == -1:
            return f"inv_{label(expr.base)}"
    if isinstance(expr, fn.Square) and label(expr.args[0]):
        return f"{label(expr.args[0])}_sq"
    if isinstance(expr, fn.Recip) and label(expr.args[0]):
        return f"inv_{label(expr.args[0])}"
    if isinstance(expr, fn.Ratio) and label(expr.args[0]) and label(expr.args[1]):
        return f"{label(expr.args[0])}_over_{label(expr.args[1])}"
    if isinstance(expr, sympy.Function) and len(expr.args) == 1 and label(expr.args[0]):
        return f"{type(expr).__name__.lower()}_{label(expr.args[0])}"
    if isinstance(expr, fn.Guard) and label(expr.args[0]):
        return f"{label(expr.args[0])}_safe"
    if isinstance(expr, sympy.Rel) and label(expr.lhs) and expr.rhs == 0:
        word = {sympy.Ne: "nonzero", sympy.StrictGreaterThan: "positive",
                sympy.StrictLessThan: "negative"}.get(type(expr))
        if word:
            return f"{label(expr.lhs)}_{word}"
    if isinstance(expr, (sympy.Rel, sympy.And, sympy.Or, sympy.Not)):
        return "mask"
    return "t"
