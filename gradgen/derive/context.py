"""What the passes of one op's derivation share.

Receives a parsed op (:class:`gradgen.graph.Program`) and the spec document it came from
(for error locations and the names the module already binds). Returns a
:class:`Derivation`: the op, one :class:`~gradgen.naming.NameScope` for every local the
generated function binds, the declared shape of every symbol, the stable rules in use
for the op's dtype, and what the passes record as they go (the rules and guards used,
the renamed nodes, the cotangents' shapes). Each pass reads and extends it; none keeps
state of its own.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable

import sympy

from .. import stability as stable
from ..errors import Diagnostic, SpecError
from ..graph import Program
from ..naming import NameScope
from ..spec import SpecDocument, format_key_path
from .text import Display


@dataclass
class Derivation:
    """One op's derivation in progress.

    Attributes:
        program: the parsed op (stable reductions applied).
        locate: a spec key path -> its location in the spec file.
        scope: the local names of the generated functions (inputs, `where` names,
            outputs and the module's ops are taken from the start).
        shape_of: declared shape of every input and node symbol (renamed nodes too).
        rules: the stable rules for the op's dtype (complex ops have fewer).
        rules_used: names of the stable rules, guards and cheaper forms applied.
        cotangent_shape: shape of each cotangent symbol (upstreams, keepdims ones).
        rename: parsed node symbol -> the symbol of its local (set by lowering).
        nodes: the nodes, renamed, their operands in stable forms (set by lowering).
        node_args: node symbol -> its operands as the forward computes them.
        diff_symbols: the symbols a gradient flows to (differentiable inputs, nodes).
        leaf_symbols: every input and node symbol.
        guarded: False for the pass whose backward becomes the VJP op of the next
            order (:mod:`.vjp_op`): its products keep SymPy's order, with no
            ``mul_no_nan`` orderings or regimes, and the next order orders its own
            (:func:`.stabilize.finalize`).
    """

    program: Program
    locate: Callable
    scope: NameScope
    shape_of: dict
    rules: tuple
    rules_used: set = field(default_factory=set)
    cotangent_shape: dict = field(default_factory=dict)
    rename: dict = field(default_factory=dict)
    nodes: list = field(default_factory=list)
    node_args: dict = field(default_factory=dict)
    diff_symbols: set = field(default_factory=set)
    leaf_symbols: set = field(default_factory=set)
    guarded: bool = True

    @classmethod
    def start(cls, program: Program, doc: SpecDocument,
              guarded: bool = True) -> "Derivation":
        """The derivation of ``program``, an op of ``doc``: its inputs', `where` names',
        outputs' (of a multi-output op) and the module's op names are taken (a local
        must not shadow another op of the same module)."""
        user = [v.name for v in program.inputs] + [n for n, _ in program.where]
        if not program.single:
            user += [o.name for o in program.outputs]
        return cls(
            program=program,
            locate=doc.location,
            scope=NameScope(set(user) | {op.name for op in doc.model.ops}),
            shape_of=dict(program.shape_of),
            rules=stable.COMPLEX_RULES if program.is_complex else stable.RULES,
            guarded=guarded,
        )

    def key(self, key) -> str:
        """``op.output``, ``op.where.t``: the keys of expressions are never the op's own."""
        return f"{self.program.name}.{format_key_path(key[2:])}"

    def error(self, key, message: str) -> SpecError:
        """A spec error at ``key`` (an expression's key path) of this op."""
        return SpecError(Diagnostic(self.locate(key), message, self.program.name,
                                    format_key_path(key[2:])))

    def symbol(self, name: str) -> sympy.Symbol:
        """The symbol of a local: real for real ops."""
        kind = {} if self.program.is_complex else {"real": True}
        return sympy.Symbol(name, **kind)

    @functools.cached_property
    def display(self) -> Display:
        """Formulas of this op for docs and comments (after lowering has renamed the
        nodes)."""
        return Display(self.program, self.rename)

    def applied(self, result):
        """The expression of a rewrite's ``(expression, rules used)``, recording the rules."""
        expr, used = result
        self.rules_used.update(used)
        return expr
