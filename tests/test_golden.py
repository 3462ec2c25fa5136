"""The golden records of parsing and printing (tests/goldens.py): compared, never
rewritten here. ``python tests/regen_golden.py`` rewrites them; review the diff."""

from __future__ import annotations

import difflib
import functools
import json

import pytest

from goldens import (
    EXPRESSIONS_GOLDEN,
    example_ops,
    expression_cases,
    describe_expression,
    op_views_json,
    views_golden_path,
)

_REGEN = "python tests/regen_golden.py"


@functools.lru_cache(maxsize=1)
def _recorded_expressions() -> list[str]:
    """The expression record split per case (its '## i:' header lines removed); read
    once per session, not once per case."""
    text = EXPRESSIONS_GOLDEN.read_text()
    chunks = text.split("\n## ")
    return ["\n".join(chunk.split("\n")[1:]).rstrip("\n") for chunk in chunks]


_EXPRESSIONS = expression_cases()


@pytest.mark.parametrize("index", range(len(_EXPRESSIONS)))
def test_expression_record(index):
    recorded = _recorded_expressions()
    assert len(recorded) == len(_EXPRESSIONS), f"the record is stale: run {_REGEN}"
    now = describe_expression(_EXPRESSIONS[index])
    assert now == recorded[index], "\n".join(
        difflib.unified_diff(recorded[index].splitlines(), now.splitlines(),
                             "recorded", "now", lineterm="")
    )


@pytest.mark.parametrize(
    "example, index",
    # the other-dtype copies of stability and special (`spec@dtype`) are slow: each op
    # derived again three times; their dtypes' behaviour is checked numerically by
    # test_stability.py and test_special_stability.py in the default run
    [pytest.param(e, i, marks=pytest.mark.slow) if "@" in e else (e, i)
     for e, i, _ in example_ops()],
    ids=[f"{e.replace('.yaml', '')}.{name}" for e, _, name in example_ops()],
)
def test_printed_views(example, index):
    """Each example op's derivation and printing, as the templates receive it."""
    recorded = json.loads(views_golden_path(example).read_text())
    name = example_ops_name(example, index)
    assert name in recorded, f"{example}: op {name} not recorded: run {_REGEN}"
    now = json.dumps(op_views_json(example, index), indent=1, sort_keys=True)
    was = json.dumps(recorded[name], indent=1, sort_keys=True)
    assert now == was, "\n".join(
        difflib.unified_diff(was.splitlines(), now.splitlines(), "recorded", "now",
                             lineterm="")
    )


def example_ops_name(example: str, index: int) -> str:
    return next(n for e, i, n in example_ops() if (e, i) == (example, index))


def test_every_example_is_recorded():
    examples = {e for e, _, _ in example_ops()}
    recorded = set(views_golden_path("x.yaml").parent.glob("*.json"))
    assert recorded == {views_golden_path(e) for e in examples}
