"""The README stays true: its commands, its example, its rule table."""

from __future__ import annotations

import re

from conftest import GENERATED, ROOT

README = (ROOT / "README.md").read_text()


def _commands():
    return re.findall(r"```sh\n(.*?)\n```", README, flags=re.S)


def test_readme_opens_with_install_and_test_commands():
    build, test = _commands()[:2]
    assert build.startswith("python3 -m pip install .") and "gradgen build examples/*.yaml -o generated" in build
    assert "'.[test]'" in test and test.endswith("python3 -m pytest")


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert _commands()[1] in ci.splitlines()


def test_readme_example_is_the_generated_code():
    block = re.search(r"```python\n(.*?)```", README, flags=re.S).group(1)
    vjp = block[block.index("@tf.custom_gradient"):block.index("\n...\n")]
    generated = GENERATED / "seeds.py"
    text = generated.read_text()
    # the top of the module (header, docstring, imports) as it is, up to the first op
    top = block[:block.index("def bar(x, y):")]
    assert text.startswith(top)
    assert block.split("\n...\n")[-1].startswith("\n__all__ = [\n    \"bar\",\n")
    assert text.rstrip().endswith("]") and '\n\n__all__ = [\n    "bar",\n' in text
    # The README omits the inner docstring; compare everything else line by line.
    start = text.index("@tf.custom_gradient\ndef _bar_vjp")
    last = "    return _with_jvp(out, (x, y), grad), grad\n"
    end = text.index(last, start) + len(last)
    lines = [l for l in text[start:end].splitlines() if l.strip()]
    kept = [l for l in lines if not l.strip().startswith(('"""', "Call `bar`"))]
    assert [l for l in vjp.splitlines() if l.strip()] == kept


def test_readme_lists_every_stable_rule():
    from gradgen.stability import RULES

    for rule in RULES:
        assert f"| `{rule.name}` |" in README


def test_readme_python_api_example_runs(tf):
    """The Python API section's example, run as a doctest (a SymPy object included)."""
    import doctest

    section = README[README.index("## Python API"):]
    block = re.search(r"```pycon\n(.*?)```", section, flags=re.S).group(1)
    import builtins

    test = doctest.DocTestParser().get_doctest(block, {}, "README Python API", "README.md", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    had, last = hasattr(builtins, "_"), getattr(builtins, "_", None)
    try:
        runner.run(test)
    finally:  # the doctest's display hook sets builtins._, as an interactive session does
        if had:
            builtins._ = last
        elif hasattr(builtins, "_"):
            del builtins._
    assert runner.summarize(verbose=False).failed == 0
    assert test.examples and "sympy" in block
