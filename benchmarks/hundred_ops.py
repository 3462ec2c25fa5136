"""Write a 100-op spec (benchmarks/hundred_ops.yaml) for the generator-speed check:
variations of the benchmark ops, the stability examples and matrix expressions."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
TEMPLATES = [
    ("x * sigmoid({a} * x)", {"x": [None]}),
    ("x * tanh(softplus(x + {a}))", {"x": [None]}),
    ("0.5 * x * (1 + tanh({a} * (x + 0.044715 * x**3)))", {"x": [None]}),
    ("log(1 + exp(x - {a}))", {"x": [None]}),
    ("where(x > {a}, x, exp(x - {a}) - 1 + {a})", {"x": [None]}),
    ("log(cosh(x - y * {a}))", {"x": [None], "y": [None]}),
    ("Piecewise(((x - y)**2 / 2, Abs(x - y) <= {a}), ({a} * Abs(x - y) - {a}**2 / 2, True))",
     {"x": [None], "y": [None]}),
    ("4 * ({a} * r**-12 - r**-6)", {"r": [None]}),
    ("sqrt(x**2 + y**2 + {a})", {"x": [None, 3], "y": [3]}),
    ("tanh(x @ w + b * {a})", {"x": [None, 4], "w": [4, 3], "b": [3]}),
]


def spec() -> dict:
    ops = []
    for i in range(100):
        expression, inputs = TEMPLATES[i % len(TEMPLATES)]
        ops.append({"name": f"op{i:03d}", "inputs": copy.deepcopy(inputs),
                    "output": expression.format(a=round(0.5 + i / 37, 3))})
    return {"version": 1, "module": "hundred_ops", "ops": ops}


if __name__ == "__main__":
    (HERE / "hundred_ops.yaml").write_text(yaml.safe_dump(spec(), sort_keys=False))
    print(HERE / "hundred_ops.yaml")
