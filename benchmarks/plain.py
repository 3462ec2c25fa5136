"""The benchmark ops written in plain TensorFlow, as a careful TensorFlow user would
(built-in fused ops where TensorFlow has them), and their inputs."""

from __future__ import annotations

import math

import numpy as np


def plain_forwards(tf):
    """{op name: forward function}; TensorFlow's autodiff of these is the baseline."""
    def huber(pred, target):
        r = pred - target
        return tf.where(tf.abs(r) <= 1.0, 0.5 * r * r, tf.abs(r) - 0.5)

    def layer_norm(x):
        mu = tf.reduce_mean(x, axis=-1, keepdims=True)
        d = x - mu
        return d / tf.sqrt(tf.reduce_mean(d * d, axis=-1, keepdims=True) + 1e-5)

    def lennard_jones(r):
        inv6 = tf.pow(r, -6.0)
        return 4.0 * (inv6 * inv6 - inv6)

    return {
        "gelu_tanh": lambda x: tf.nn.gelu(x, approximate=True),
        "gelu_erf": lambda x: tf.nn.gelu(x, approximate=False),
        "swish": lambda x: tf.nn.silu(x),
        "mish": lambda x: x * tf.tanh(tf.nn.softplus(x)),
        "softplus_act": lambda x: tf.nn.softplus(x),
        "elu": lambda x: tf.nn.elu(x),
        "huber": huber,
        "log_cosh": lambda p, t: tf.math.log(tf.math.cosh(p - t)),
        "bce_logits": lambda z, y: tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=z),
        "layer_norm": layer_norm,
        "lennard_jones": lennard_jones,
        "sandwich": lambda A, X, B: tf.linalg.matmul(tf.linalg.matmul(A, X), B),
        "log_det": lambda S: tf.linalg.slogdet(S)[1],
    }


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
