"""Mutation testing of the runtime helpers' templates (templates/runtime/*.py.j2, one per
helper of gradgen/runtime.py), which mutmut cannot mutate (they are Jinja templates,
rendered into each output folder's _gradgen_runtime.py).

Each mutant changes one operator, comparison, constant, keyword or TensorFlow function
in one code line of one template (comments and docstrings are left alone); the
helpers are rendered as generated code renders them and the helpers' own tests
(tests/test_helpers.py, against mpmath and NumPy) run against them::

    python tools/mutate_templates.py                 # every mutant, two at a time
    python tools/mutate_templates.py --sample 80     # a seeded random sample
    python tools/mutate_templates.py --template runtime/log1mexp.py.j2   # one helper
    python tools/mutate_templates.py --list          # the mutants, without running

A mutant is killed when the tests fail (or time out), survived when they pass. The
report (Markdown, on standard output) gives the score and every survivor's diff. Needs
TensorFlow (the helpers are TensorFlow code); not part of the default test run.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "docs"))
from mutation_reasons import TEMPLATE_REASONS  # noqa: E402

TEMPLATES = Path("templates")
RUNTIME = TEMPLATES / "runtime"
TESTS = ["tests/test_helpers.py"]
TIMEOUT_S = 300

# (pattern, replacement): each match in a code line is one mutant
OPERATORS = [
    (r" \+ ", " - "), (r" - ", " + "), (r" \* ", " / "), (r" / ", " * "), (r"\*\*", "*"),
    (r" <= ", " < "), (r" >= ", " > "), (r" < ", " <= "), (r" > ", " >= "),
    (r" == ", " != "), (r" != ", " == "),
    (r"\band\b", "or"), (r"\bor\b", "and"), (r"\bnot ", ""),
    (r"\bTrue\b", "False"), (r"\bFalse\b", "True"),
    (r"(?<![\w.])0(?![\w.])", "1"), (r"(?<![\w.])1(?![\w.])", "2"),
    (r"(?<![\w.])2(?![\w.])", "3"), (r"(?<![\w.])0\.5(?![\w])", "0.25"),
    (r"\bmaximum\b", "minimum"), (r"\bminimum\b", "maximum"),
    (r"\breduce_max\b", "reduce_min"), (r"\breduce_min\b", "reduce_max"),
    (r"\breduce_sum\b", "reduce_mean"), (r"\blog1p\b", "log"), (r"\bexpm1\b", "exp"),
    (r"\bkeepdims=True\b", "keepdims=False"),
]


@dataclass(frozen=True)
class Mutant:
    template: str  # relative to templates/: runtime/<helper>.py.j2
    line: int  # 1-based
    start: int
    end: int
    replacement: str

    def apply(self, lines: list[str]) -> list[str]:
        out = list(lines)
        text = out[self.line - 1]
        out[self.line - 1] = text[: self.start] + self.replacement + text[self.end:]
        return out

    def describe(self, lines: list[str]) -> str:
        before = lines[self.line - 1].strip()
        after = self.apply(lines)[self.line - 1].strip()
        return f"{self.template} line {self.line}: `{before}` -> `{after}`"


def code_lines(lines: list[str]):
    """(1-based line number, text with any trailing comment removed) of code lines."""
    in_doc = False
    for i, line in enumerate(lines, 1):
        stripped = line.strip()
        quotes = stripped.count('"""')
        if in_doc:
            in_doc = quotes % 2 == 0
            continue
        if quotes:
            in_doc = quotes % 2 == 1
            continue
        if not stripped or stripped.startswith(("#", "{%", "{#")):
            continue
        code = re.sub(r"\s+#.*$", "", line) if "#" in line else line
        if re.search(r"[\"']", code):  # string literals: mutate only outside them
            code = re.sub(r"(\"[^\"]*\"|'[^']*')", lambda m: " " * len(m.group(0)), code)
        yield i, code


def mutants(template: str, lines: list[str]) -> list[Mutant]:
    out = []
    for number, code in code_lines(lines):
        for pattern, replacement in OPERATORS:
            for m in re.finditer(pattern, code):
                out.append(Mutant(template, number, m.start(), m.end(), replacement))
    return sorted(set(out), key=lambda m: (m.line, m.start, m.replacement))


def read_lines(root: Path, template: str) -> list[str]:
    lines = (root / TEMPLATES / template).read_text().split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def _run(copy: Path, lines: list[str], mutant: Mutant) -> str:
    target = copy / TEMPLATES / mutant.template
    original = target.read_text()
    target.write_text("\n".join(mutant.apply(lines)) + "\n")
    try:
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *TESTS],
            cwd=copy, capture_output=True, text=True, timeout=TIMEOUT_S,
            env={**os.environ, "PYTHONPATH": str(copy)},
        )
    except subprocess.TimeoutExpired:
        return "timeout"
    finally:
        target.write_text(original)  # the copy serves the next mutant
    return "survived" if result.returncode == 0 else "killed"


def _arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", type=int, help="test a seeded random sample of N")
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--template", action="append",
                        help="only this template (relative to templates/; repeatable)")
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    return parser.parse_args()


def main() -> int:
    args = _arguments()
    templates = args.template or sorted(
        p.relative_to(ROOT / TEMPLATES).as_posix() for p in (ROOT / RUNTIME).glob("*.py.j2"))
    texts = {t: read_lines(ROOT, t) for t in templates}
    every = [m for t in templates for m in mutants(t, texts[t])]
    todo = list(every)
    if args.list:
        for m in todo:
            print(m.describe(texts[m.template]))
        print(f"{len(todo)} mutants")
        return 0
    if args.sample and args.sample < len(todo):
        todo = sorted(random.Random(args.seed).sample(todo, args.sample),
                      key=lambda m: (m.template, m.line, m.start))
    results = _run_all(todo, texts, args.workers)
    if results is None:
        return 2
    _report(results, texts, len(every), args)
    return 0


def _run_all(todo: list[Mutant], texts: dict, workers: int) -> dict | None:
    """{mutant: "killed", "survived" or "timeout"}; None when the unmutated templates
    fail the tests."""
    with tempfile.TemporaryDirectory() as tmp:
        copies = []
        for k in range(workers):
            copy = Path(tmp) / f"copy{k}"
            shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(
                ".git", ".venv*", "mutants", "__pycache__", "*.egg-info", "build", "dist"))
            copies.append(copy)
        # the unmutated templates must pass, or every mutant would look killed
        first = next(iter(texts))
        if _run(copies[0], texts[first], Mutant(first, 1, 0, 0, "")) != "survived":
            print("the helper tests fail on the unmutated templates", file=sys.stderr)
            return None
        results: dict[Mutant, str] = {}
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            free = list(copies)
            pending = {}
            queue = list(todo)
            while queue or pending:
                while queue and free:
                    copy, m = free.pop(), queue.pop(0)
                    pending[pool.submit(_run, copy, texts[m.template], m)] = (copy, m)
                done, _ = concurrent.futures.wait(
                    pending, return_when=concurrent.futures.FIRST_COMPLETED)
                for future in done:
                    copy, m = pending.pop(future)
                    results[m] = future.result()
                    free.append(copy)
    return results


def _report(results: dict, texts: dict, total: int, args) -> None:
    killed = sum(1 for s in results.values() if s in ("killed", "timeout"))
    print(f"{len(results)} mutants of {len(texts)} runtime helper templates tested"
          + (f" (a sample, seed {args.seed}, of {total})" if args.sample else "")
          + f": {killed} killed ({100 * killed / max(1, len(results)):.1f}%)\n")
    print("| survivor | why it survives |")
    print("| --- | --- |")
    unreviewed = 0
    for m in sorted(results, key=lambda m: (m.template, m.line, m.start)):
        if results[m] == "survived":
            shown = m.describe(texts[m.template])
            reason = next((r for pattern, r in TEMPLATE_REASONS if re.search(pattern, shown)),
                          "UNREVIEWED")
            unreviewed += reason == "UNREVIEWED"
            print(f"| {shown.replace('|', chr(92) + '|')} | {reason} |")
    print(f"\n{unreviewed} survivors without a reason.")


if __name__ == "__main__":
    sys.exit(main())
