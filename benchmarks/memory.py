"""``python -m benchmarks.memory OP METHOD N``: peak memory of one forward + backward pass.

METHOD is ``save`` or ``recompute`` (the generated op with that memory policy) or
``autodiff``. A single-input op is applied ``DEPTH`` times in sequence (``y = f(y)``, as
layers of a network, where what each layer keeps alive for the backward pass adds up);
ops with more inputs once. Prints the peak bytes in use by TensorFlow's CPU allocator
during the pass minus the bytes in use just before it (MB), with the function traced and
the inputs and the upstream gradient allocated (the BFC allocator's exact statistics),
running one op at a time (one inter-op thread) so that the figure does not depend on
how threads happened to schedule the ops.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# TensorFlow's BFC allocator on the CPU keeps exact statistics (current and peak bytes)
os.environ["TF_CPU_ALLOCATOR_USE_BFC"] = "true"


DEPTH = 8  # layers of a single-input op, applied in sequence


def main(op: str, method: str, n: int) -> None:
    import tensorflow as tf

    # one op at a time, in a fixed order: the peak is the same on every run
    tf.config.threading.set_inter_op_parallelism_threads(1)

    from benchmarks.plain import baselines, make_inputs
    from benchmarks.run import build, step_function

    layer = baselines(tf)[op] if method == "autodiff" else getattr(build(method), op)
    inputs, differentiable = make_inputs(op, n)
    depth = DEPTH if len(inputs) == 1 else 1

    def fn(*args):  # `depth` layers, as in a network: each one's input is kept alive
        y = args[0]
        for _ in range(depth):
            y = layer(y, *args[1:])
        return y

    args = [tf.constant(x) for x in inputs]
    # the output's shape from a trace (running the forward here would set the peak)
    specs = [tf.TensorSpec(x.shape, x.dtype) for x in args]
    shape = tf.function(fn).get_concrete_function(*specs).structured_outputs.shape
    upstream = tf.ones(shape, args[0].dtype)
    step = step_function(tf, fn, differentiable, jit=False)
    step.get_concrete_function(args, upstream)
    tf.config.experimental.reset_memory_stats("CPU:0")
    baseline = tf.config.experimental.get_memory_info("CPU:0")["current"]
    out, grads = step(args, upstream)
    [r.numpy() for r in [out, *grads] if r is not None]
    peak = tf.config.experimental.get_memory_info("CPU:0")["peak"]
    print((peak - baseline) / 2**20)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
