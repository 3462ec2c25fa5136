"""The benchmark ops written in plain TensorFlow, as a careful TensorFlow user would
(built-in fused ops where TensorFlow has them), and their inputs."""

from __future__ import annotations

import math

import numpy as np


def plain_forwards(tf):
    """{op name: forward function}: each op's expression from ops.yaml, written op for op
    in plain TensorFlow. TensorFlow's autodiff of these is the baseline."""
    exp, log, tanh = tf.math.exp, tf.math.log, tf.math.tanh

    def huber(pred, target):
        r = pred - target
        return tf.where(tf.abs(r) <= 1.0, r * r / 2, tf.abs(r) - 0.5)

    def layer_norm(x):
        mu = tf.reduce_mean(x, axis=-1, keepdims=True)
        d = x - mu
        return d / tf.sqrt(tf.reduce_mean(d**2, axis=-1, keepdims=True) + 1e-5)

    return {
        "gelu_tanh": lambda x: 0.5 * x * (1 + tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
        "gelu_erf": lambda x: 0.5 * x * (1 + tf.math.erf(x / math.sqrt(2))),
        "swish": lambda x: x * tf.sigmoid(x),
        "mish": lambda x: x * tanh(tf.nn.softplus(x)),
        "softplus_act": lambda x: log(1 + exp(x)),
        "elu": lambda x: tf.where(x > 0, x, exp(x) - 1),
        "huber": huber,
        "log_cosh": lambda p, t: log(tf.math.cosh(p - t)),
        "bce_logits": lambda z, y: log(1 + exp(-z)) + z - z * y,
        "layer_norm": layer_norm,
        "lennard_jones": lambda r: 4 * (r**-12 - r**-6),
        "sandwich": lambda A, X, B: tf.linalg.matmul(tf.linalg.matmul(A, X), B),
        "log_det": lambda S: tf.linalg.slogdet(S)[1],
    }


def builtin_forwards(tf):
    """TensorFlow's own fused implementations of the ops it has one for: what a TF user
    would call instead of writing the expression, so the baseline of those ops."""
    return {
        "gelu_tanh": lambda x: tf.nn.gelu(x, approximate=True),
        "gelu_erf": lambda x: tf.nn.gelu(x, approximate=False),
        "swish": tf.nn.silu,
        "softplus_act": tf.nn.softplus,
        "elu": tf.nn.elu,
        "bce_logits": lambda z, y: tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=z),
    }


def baselines(tf):
    """{op name: forward}: TF's built-in op where one exists, else the plain forward."""
    return {**plain_forwards(tf), **builtin_forwards(tf)}


MATRIX_OPS = {"sandwich", "log_det"}


def make_inputs(name: str, n: int, seed: int = 0):
    """Inputs with about ``n`` elements each (float32), and which are differentiable."""
    rng = np.random.default_rng(seed)
    if name in ("huber", "log_cosh"):
        return [rng.normal(size=n).astype(np.float32), rng.normal(size=n).astype(np.float32)], [True, True]
    if name == "bce_logits":
        return [rng.normal(size=n).astype(np.float32),
                rng.integers(0, 2, n).astype(np.float32)], [True, False]
    if name == "layer_norm":
        return [rng.normal(size=(max(1, n // 64), 64)).astype(np.float32)], [True]
    if name == "lennard_jones":
        return [rng.uniform(0.9, 2.5, n).astype(np.float32)], [True]
    if name == "sandwich":
        batch = max(1, n // 64)
        return [rng.normal(size=(batch, 8, 8)).astype(np.float32),
                rng.normal(size=(8, 8)).astype(np.float32),
                rng.normal(size=(batch, 8, 8)).astype(np.float32)], [True, True, True]
    if name == "log_det":
        batch = max(1, n // 64)
        s = rng.normal(size=(batch, 8, 8)) * 0.3 + 8 * np.eye(8)
        return [s.astype(np.float32)], [True]
    return [rng.normal(size=n).astype(np.float32) * 3], [True]


def moved_bytes(inputs, outputs) -> int:
    """Bytes a forward + backward pass must move at least: read the inputs and the
    upstream, write the output and the gradients (each once)."""
    size = sum(x.nbytes for x in inputs)
    out = sum(int(np.prod(o.shape)) * 4 for o in outputs)
    return 2 * size + 2 * out


def log10_label(n: int) -> str:
    return f"1e{round(math.log10(n))}"
