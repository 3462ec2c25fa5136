"""Output that depends on the spec and gradgen alone, not on SymPy's global printing
settings (gradgen.pinned): a notebook that ran ``init_printing(order="rev-lex")``
generated sums in reverse, and the accuracy audit seeded its sample from SymPy's own
``srepr``, so it drew other points and reported other errors."""

from __future__ import annotations

import pytest
from sympy.printing.printer import Printer

from gradgen.emit import generate
from gradgen.explain import explain_spec

SPEC = """\
version: 1
module: pinned
ops:
  - name: f
    inputs: {x: [3], y: [3], z: [3]}
    output: x**2 + y*z + 3*x + 1.5e-7*exp(z)*y + 1
  - name: g
    inputs: {x: [3]}
    output: sqrt(2/pi) * erf(x) + 0.1234567 * x
"""

# what init_printing and Printer.set_global_settings take that changes SymPy's text
HOSTILE = dict(order="rev-lex", full_prec=True, abbrev=True, perm_cyclic=False, min=-1,
               max=1, use_unicode=True, wrap_line=False, num_columns=20)


def _outputs(path, out):
    texts = dict(generate([str(path)], str(out)))
    for fmt in ("text", "markdown"):
        texts[fmt] = explain_spec(str(path), fmt=fmt)
    return texts


def test_global_printing_settings_change_no_output(tmp_path):
    path = tmp_path / "pinned.yaml"
    path.write_text(SPEC)
    want = _outputs(path, tmp_path / "a")
    saved = dict(Printer._global_settings)
    Printer.set_global_settings(**HOSTILE)
    try:
        got = _outputs(path, tmp_path / "b")
    finally:
        Printer._global_settings.clear()
        Printer._global_settings.update(saved)
    assert got.keys() == want.keys()
    for name in want:
        assert got[name] == want[name], name
