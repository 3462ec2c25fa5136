"""Rewrite the golden records from this checkout's gradgen: ``python tests/regen_golden.py``.
Review the diff before committing.

* the error output of the bad specs (tests/specs/bad/*.stderr), which tests/test_cli.py
  compares through the same :func:`bad_spec_result`, and tests/test_expr.py through
  :func:`parsed_stderr` (the same text from reading and parsing alone, in a fraction of
  the time: the record of every refusal of gradgen/expr and gradgen/shapes.py);
* the expression record (tests/golden/expressions.txt) and the printed views of every
  example op (tests/golden/views/), which tests/test_golden.py compares (tests/goldens.py
  makes both).

The tests only ever compare with these files.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BAD = ROOT / "tests" / "specs" / "bad"


def bad_specs() -> list[str]:
    return sorted(p.name for p in BAD.glob("*.yaml"))


def golden_path(name: str) -> Path:
    return BAD / (name[: -len(".yaml")] + ".stderr")


def bad_spec_result(name: str, out: Path):
    """`gradgen build NAME -o OUT` run in tests/specs/bad (click's test runner, in this
    process): the result whose stderr is the golden text."""
    from click.testing import CliRunner

    from gradgen.cli import main

    old = os.getcwd()
    try:
        os.chdir(BAD)
        return CliRunner().invoke(main, ["build", name, "-o", str(out)],
                                  catch_exceptions=False)
    finally:
        os.chdir(old)


def parsed_stderr(name: str) -> str:
    """What `gradgen build NAME` prints for bad spec NAME when every error in it is one of
    reading or parsing, without building anything: the spec read by ``load_spec``, each op
    parsed by ``parse_op`` (once per dtype of an op generated for several, as the build
    derives each), and the diagnostics printed by the command line's own reporting
    (``gradgen.cli._fail``). Only an error that derivation, printing or verification
    finds, which no bad spec holds, would tell it from :func:`bad_spec_result`'s stderr.
    """
    import contextlib
    import io

    from gradgen.cli import Reporter, _fail
    from gradgen.errors import SpecError
    from gradgen.expr import parse_op
    from gradgen.spec import load_spec, op_variants

    problems = []
    try:
        doc = load_spec(BAD / name, display_path=name)
    except SpecError as e:
        problems += e.diagnostics
    else:
        for index in range(len(doc.model.ops)):
            for variant, _ in op_variants(doc, index):
                try:
                    parse_op(variant, index)
                except SpecError as e:
                    problems += e.diagnostics
    if not problems:
        return ""
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.suppress(SystemExit):
        _fail(SpecError(problems), Reporter())
    return stderr.getvalue()


def main() -> int:
    sys.path.insert(0, str(ROOT))  # this checkout's gradgen, not an installed one
    changed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in bad_specs():
            result = bad_spec_result(name, Path(tmp) / "out")
            if result.exit_code != 2:
                print(f"{name}: exit {result.exit_code}, not 2; golden file left as it is",
                      file=sys.stderr)
                continue
            if parsed_stderr(name) != result.stderr:
                print(f"{name}: reading and parsing alone report other errors than the "
                      "build (tests/test_expr.py will fail): keep errors of derivation "
                      "out of tests/specs/bad", file=sys.stderr)
            golden = golden_path(name)
            if not golden.exists() or golden.read_text() != result.stderr:
                golden.write_text(result.stderr)
                print(f"rewrote {golden.relative_to(ROOT)}")
                changed += 1
    sys.path.insert(0, str(ROOT / "tests"))
    import goldens

    records = {goldens.EXPRESSIONS_GOLDEN: goldens.expressions_record()}
    for example in sorted({e for e, _, _ in goldens.example_ops()}):
        records[goldens.views_golden_path(example)] = goldens.views_record(example)
    for path, text in records.items():
        if not path.exists() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"rewrote {path.relative_to(ROOT)}")
            changed += 1
    print(f"{changed} golden file(s) rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
