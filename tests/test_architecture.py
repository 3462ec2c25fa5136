"""The layout docs/architecture.md describes, held against the code: imports only run
down the pipeline (a stage never imports a later one), and every module, class and
function stays a size a reader can hold."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "gradgen"

# Each top-level module or package of gradgen, by its place in the pipeline: a module
# may import only modules of a lower rank (its own package's modules aside).
RANKS = {
    "version": 0, "errors": 0,
    "safe": 1, "pinned": 1, "naming": 1, "budget": 1, "formatter": 1, "ir": 1, "runtime": 1,
    "files": 2, "shapes": 2, "render": 2, "loading": 2,
    "spec": 3,
    "functions": 4, "graph": 4,
    "expr": 5, "stability": 5,
    "derive": 6, "verify": 6, "printer": 6, "cache": 6, "outputs": 6, "config": 6,
    "pipeline": 7, "views": 7,
    "accuracy": 8,
    "explain": 9, "emit": 9,
    "api": 10, "cli": 10,
    "__init__": 11, "__main__": 11,
}
MAX_MODULE_LINES, MAX_CLASS_LINES, MAX_FUNCTION_LINES = 700, 400, 80


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        yield path, parts


def _imports(path: Path, parts: tuple) -> set[str]:
    """The top-level gradgen components ``path`` imports (lazy imports included)."""
    return {t[1] if len(t) > 1 else "__init__" for t in _import_paths(path, parts)}


def _import_paths(path: Path, parts: tuple) -> list[list[str]]:
    """The gradgen modules (or names in them) ``path`` imports, as dotted parts."""
    package = parts[:-1]  # a package's __init__ is in the package itself
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        targets = []
        if isinstance(node, ast.ImportFrom) and node.level:
            base = list(package[: len(package) - (node.level - 1)])
            targets = [base + node.module.split(".")] if node.module else [
                base + [a.name] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gradgen"):
            targets = [node.module.split(".")]
        elif isinstance(node, ast.Import):
            targets = [a.name.split(".") for a in node.names if a.name.startswith("gradgen.")]
        found += targets
    return found


def _component(parts: tuple) -> str:
    return parts[1] if len(parts) > 2 or parts[-1] != "__init__" else "__init__"


def test_every_component_has_a_rank():
    components = {_component(parts) for _, parts in _modules()}
    assert components == set(RANKS)


def test_imports_only_run_down_the_pipeline():
    upward = []
    for path, parts in _modules():
        me = _component(parts)
        for other in _imports(path, parts) - {me}:
            if RANKS[other] >= RANKS[me]:
                upward.append(f"{path.relative_to(PACKAGE.parent)} imports gradgen.{other}")
    assert not upward


def test_derivation_does_not_reach_into_the_accuracy_audit():
    # the guards and rewrites (what derivation calls) run before the audit measures
    # their result: only the audit itself, and the stages after derivation, import it
    inside = []
    for path, parts in _modules():
        if parts[:2] == ("gradgen", "stability") and parts[2] != "audit":
            inside += [f"{path.relative_to(PACKAGE.parent)} imports {'.'.join(t)}"
                       for t in _import_paths(path, parts) if t[:3] == ["gradgen",
                                                                    "stability", "audit"]]
    assert not inside
    assert (PACKAGE / "stability" / "formats.py").exists()  # what both use, below both


def test_modules_classes_and_functions_are_a_size_a_reader_can_hold():
    too_large = []
    for path, _ in _modules():
        text = path.read_text()
        name = path.relative_to(PACKAGE.parent)
        if text.count("\n") > MAX_MODULE_LINES:
            too_large.append(f"{name}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            limit = (MAX_CLASS_LINES if isinstance(node, ast.ClassDef) else
                     MAX_FUNCTION_LINES if isinstance(node, (ast.FunctionDef,
                                                             ast.AsyncFunctionDef))
                     else None)
            if limit is not None and node.end_lineno - node.lineno + 1 > limit:
                too_large.append(f"{name}:{node.lineno} {node.name}: "
                                 f"{node.end_lineno - node.lineno + 1} lines")
    assert not too_large
