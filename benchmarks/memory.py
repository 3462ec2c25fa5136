"""``python -m benchmarks.memory OP METHOD N``: peak memory of one forward + backward pass.

METHOD is ``save`` or ``recompute`` (the generated op with that memory policy) or
``autodiff``. Prints the growth of the peak resident set size (MB) over the state with
TensorFlow started, the function traced and the inputs allocated.
"""

import os
import resource
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main(op: str, method: str, n: int) -> None:
    import tensorflow as tf

    from benchmarks.plain import make_inputs, plain_forwards
    from benchmarks.run import build, step_function

    fn = plain_forwards(tf)[op] if method == "autodiff" else getattr(build(method), op)
    inputs, differentiable = make_inputs(op, n)
    args = [tf.constant(x) for x in inputs]
    out = fn(*args)
    upstream = tf.ones_like(out)
    step = step_function(tf, fn, differentiable, jit=False)
    small, _ = make_inputs(op, 64)
    # trace with the real shapes on a copy of the inputs, then measure a fresh call
    step.get_concrete_function(args, upstream)
    del out
    before = peak_mb()
    result = step(args, upstream)
    [r.numpy() for r in result if r is not None]
    print(peak_mb() - before)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
