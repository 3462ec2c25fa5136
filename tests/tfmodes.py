"""Run an op and its gradients in each TensorFlow execution mode.

Every mode computes the same thing: the op's outputs and, for given upstream
(cotangent) values, the gradient of sum(upstream * output) with respect to each input,
returned as NumPy arrays (None where TensorFlow gives None).
"""

from __future__ import annotations

import numpy as np

MODES = ("eager", "function", "function_none_dims", "graph")


def two_orders(tf, fn, x):
    """``fn(x)``, its gradient and the gradient of that gradient, eagerly (elementwise
    ``fn``: each is the derivative at each point)."""
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = fn(x)
        g = inner.gradient(y, x)
    return y, g, outer.gradient(g, x)


def second_partials(tf, fn, *args):
    """The Hessian of an elementwise ``fn(*args)`` (summed), eagerly: ``h[i][j]`` is
    d/d args[j] of the gradient with respect to args[i], at each point."""
    with tf.GradientTape(persistent=True) as outer:
        outer.watch(args)
        with tf.GradientTape() as inner:
            inner.watch(args)
            y = fn(*args)
        grads = inner.gradient(y, list(args))
    out = [[outer.gradient(g, a) for a in args] for g in grads]
    return [[np.zeros(a.shape) if h is None else h.numpy() for h, a in zip(row, args)]
            for row in out]


def _as_list(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def run(tf, fn, inputs, upstreams, mode, declared=None):
    """Outputs and input gradients of ``fn(*inputs)`` in ``mode``.

    Args:
        tf: the tensorflow module.
        fn: the op (generated or plain TF), taking tensors positionally.
        inputs: list of NumPy arrays.
        upstreams: list of NumPy arrays, one per output.
        mode: one of :data:`MODES` or ``"xla"``.
        declared: per input, the declared shape with None for unknown dims (used for the
            input signature / placeholders); defaults to fully unknown dims of the right
            rank in "function_none_dims" and "graph", and to the static shape otherwise.
    """
    if declared is None:
        declared = [[None] * np.ndim(x) for x in inputs]
    if mode == "eager":
        return _eager(tf, fn, inputs, upstreams)
    if mode in ("function", "function_none_dims", "xla"):
        if mode == "function":
            signature = [tf.TensorSpec(np.shape(x), x.dtype) for x in inputs]
        else:
            signature = [tf.TensorSpec(d, x.dtype) for d, x in zip(declared, inputs)]
        step = tf.function(
            lambda *args: _tape(tf, fn, args[: len(inputs)], args[len(inputs):]),
            input_signature=signature
            + [tf.TensorSpec(np.shape(u), u.dtype) for u in upstreams],
            jit_compile=mode == "xla",
        )
        outs, grads = step(*inputs, *upstreams)
        return _np(outs), _np(grads)
    if mode == "graph":
        return _graph(tf, fn, inputs, upstreams, declared)
    raise ValueError(mode)


def _tape(tf, fn, args, upstreams):
    args = [tf.convert_to_tensor(a) for a in args]
    with tf.GradientTape() as tape:
        for a in args:
            tape.watch(a)
        outs = _as_list(fn(*args))
    grads = tape.gradient(outs, args, output_gradients=list(upstreams))
    return outs, grads


def _eager(tf, fn, inputs, upstreams):
    outs, grads = _tape(tf, fn, inputs, [tf.constant(u) for u in upstreams])
    return _np(outs), _np(grads)


def _graph(tf, fn, inputs, upstreams, declared):
    graph = tf.Graph()
    with graph.as_default():
        holders = [
            tf.compat.v1.placeholder(x.dtype, shape=d) for x, d in zip(inputs, declared)
        ]
        outs = _as_list(fn(*holders))
        grad_ys = [tf.constant(u) for u in upstreams]
        grads = tf.gradients(outs, holders, grad_ys=grad_ys)
        fetch_grads = [g for g in grads if g is not None]
        with tf.compat.v1.Session(graph=graph) as session:
            values = session.run(
                outs + fetch_grads, feed_dict=dict(zip(holders, inputs))
            )
    out_values = values[: len(outs)]
    it = iter(values[len(outs):])
    grad_values = [None if g is None else next(it) for g in grads]
    return out_values, grad_values


def _np(values):
    return [None if v is None else np.asarray(v) for v in values]
