"""``python -m benchmarks.elu_forms``: why gradgen's ELU is slower than ``tf.nn.elu``
without XLA, measured: each candidate form's speed against ``tf.nn.elu``'s autodiff
(the suite's baseline) and its accuracy against a 50-digit reference.

TensorFlow's ``Elu`` kernel computes ``exp(x) - 1`` (every bit lost for tiny negative x)
and ``EluGrad`` computes the derivative as ``y + 1`` from the output (0 where exp(x) is
below half an ulp of 1, from x = -17.3 in float32). Forms that are accurate need an
``expm1`` in the forward and an ``exp`` in the gradient, each its own kernel and memory
pass without XLA, where TensorFlow's two kernels are one pass each. The forms:

* ``gradgen``: the generated op (``benchmarks/ops.yaml``'s elu), default form;
* ``gradgen, fuse: xla``: the same op's fused form (two XLA kernels);
* ``maximum(x, expm1(min(x, 0)))``: the accurate form with one kernel fewer (a maximum
  for the comparison and select: expm1(t) >= t for t <= 0, and 0 < x for x > 0);
* ``Elu, exp gradient``: TensorFlow's ``Elu`` for the forward and the exact
  ``exp(min(x, 0))`` in the gradient;
* ``Elu, EluGrad``: TensorFlow's two kernels in a custom gradient (what autodiff of
  ``tf.nn.elu`` runs).

Speed: the suite's harness (:mod:`benchmarks.run`: forward output kept, backward after
it, interleaved with the baseline, median of repeats), ``tf.function`` without XLA.
Accuracy: worst bits lost (beyond one ulp) of the forward and the gradient over 4,000
float32 points in [-87, -1e-30] and 1,000 in [1e-30, 1e4], against mpmath at 50 digits.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from benchmarks.plain import log10_label
from benchmarks.run import DEFAULT_SIZES, build, machine, step_function, time_pair


def forms(tf) -> dict:
    """{name: elementwise float32 function with a custom or generated gradient}."""

    @tf.custom_gradient
    def maximum_form(x):
        m = tf.math.minimum(x, 0.0)
        out = tf.math.maximum(x, tf.math.expm1(m))
        return out, lambda upstream: upstream * tf.math.exp(m)

    @tf.custom_gradient
    def elu_exp(x):
        m = tf.math.minimum(x, 0.0)
        return tf.nn.elu(x), lambda upstream: upstream * tf.math.exp(m)

    @tf.custom_gradient
    def elu_kernels(x):
        out = tf.nn.elu(x)
        return out, lambda upstream: tf.raw_ops.EluGrad(gradients=upstream, outputs=out)

    return {
        "gradgen": build(None).elu,
        "gradgen, fuse: xla": build(None, fuse="xla").elu,
        "maximum(x, expm1(min(x, 0)))": maximum_form,
        "Elu, exp gradient": elu_exp,
        "Elu, EluGrad": elu_kernels,
    }


def accuracy(tf, fn) -> tuple[float, float]:
    """Worst bits lost beyond one ulp by ``fn``'s value and gradient (float32)."""
    import mpmath
    import numpy as np

    points = np.concatenate([-np.logspace(-30, math.log10(87), 4000),
                             np.logspace(-30, 4, 1000)]).astype(np.float32)
    x = tf.constant(points)
    with tf.GradientTape() as tape:
        tape.watch(x)
        value = fn(x)
    grad = tape.gradient(value, x)
    with mpmath.workdps(50):
        exact_value = np.array([float(mpmath.expm1(p)) if p < 0 else float(p)
                                for p in map(float, points)])
        exact_grad = np.array([float(mpmath.exp(p)) if p < 0 else 1.0
                               for p in map(float, points)])

    def worst(got, exact):
        error = np.abs(got.astype(np.float64) - exact) / np.abs(exact)
        return float(np.log2(np.maximum(error / 2.0**-24, 1.0)).max())

    return worst(value.numpy(), exact_value), worst(grad.numpy(), exact_grad)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.elu_forms")
    parser.add_argument("--sizes", default=",".join(f"{n:.0e}" for n in DEFAULT_SIZES))
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args(argv)

    import numpy as np
    import tensorflow as tf

    sizes = [int(float(s)) for s in args.sizes.split(",")]
    candidates = forms(tf)
    ratios = {name: [] for name in candidates}
    for n in sizes:
        x = np.random.default_rng(0).normal(size=n).astype(np.float32) * 3
        upstream = np.random.default_rng(1).normal(size=n).astype(np.float32)
        steps = {"tf.nn.elu": step_function(tf, tf.nn.elu, [True], jit=False)}
        steps.update({name: step_function(tf, fn, [True], jit=False)
                      for name, fn in candidates.items()})
        repeats = max(5, args.repeats * 3 if n <= 10**5 else
                      args.repeats if n < 10**7 else args.repeats // 3)
        times = time_pair(tf, steps, [x], upstream, repeats)
        for name in candidates:
            ratios[name].append(times["tf.nn.elu"] / times[name])
        print(f"{log10_label(n)}: " + ", ".join(f"{name} {ratios[name][-1]:.2f}"
                                                for name in candidates), flush=True)
    info = machine()
    lines = [f"Machine: {info['cpu']}, {info['cores']} cores; TensorFlow "
             f"{info['tensorflow']}. Speed ratio: tf.nn.elu's autodiff time / the form's "
             "(tf.function, no XLA); accuracy: worst bits lost beyond one ulp (float32, "
             "against mpmath at 50 digits).", "",
             "| form | forward bits lost | gradient bits lost | "
             + " | ".join(log10_label(n) for n in sizes) + " | median |",
             "| --- | --- | --- | " + " | ".join("---" for _ in sizes) + " | --- |"]
    for name, fn in candidates.items():
        value_bits, grad_bits = accuracy(tf, fn)
        lines.append(f"| {name} | {value_bits:.1f} | {grad_bits:.1f} | "
                     + " | ".join(f"{r:.2f}" for r in ratios[name])
                     + f" | {statistics.median(ratios[name]):.2f} |")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
