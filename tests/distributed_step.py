"""One training step of a model using generated ops, under tf.distribute.MirroredStrategy
on two logical CPU devices and on a single device; prints whether they match.

Run by tests/test_integration.py in its own process (logical devices must be set up
before TensorFlow initializes). The same model and ops run under
MultiWorkerMirroredStrategy in tests/multiworker_step.py (two worker processes); the
generated ops are ordinary TensorFlow functions with custom gradients.
"""

import os
import pathlib
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent


def load(name):
    """generated/<name>.py, imported as gradgen's tests import generated modules."""
    from gradgen.loading import load_file

    return load_file(ROOT / "generated" / f"{name}.py")


def main():
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()]
    )
    # `fused`: the same model with ops whose forward and gradient are XLA kernels
    if sys.argv[1:] == ["fused"]:
        fused = load("fused")
        from gradgen.loading import runtime_of

        # the XLA kernels, also for this model's small tensors
        runtime_of(fused)._FUSE_FROM = 0
        layer = lambda x, w, b: (fused.dense(x, w, b), None)  # noqa: E731
        softplus = fused.softplus
    else:
        matrix, stability = load("matrix"), load("stability")
        layer, softplus = matrix.layer, stability.softplus_naive
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 4)).astype(np.float32)
    y = rng.normal(size=(8, 3)).astype(np.float32)
    w0 = rng.normal(size=(4, 3)).astype(np.float32) * 0.3

    def run(strategy):
        with strategy.scope():
            w = tf.Variable(w0)
            b = tf.Variable(tf.zeros([3]))
            optimizer = tf.keras.optimizers.SGD(0.1)
        data = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
        batch = next(iter(strategy.experimental_distribute_dataset(data)))

        @tf.function
        def step(inputs):
            features, labels = inputs
            with tf.GradientTape() as tape:
                h, _ = layer(features, w, b)
                per_example = tf.reduce_sum(softplus(tf.reshape(h - labels, [-1])))
                loss = per_example / 8.0  # global batch size
            grads = tape.gradient(loss, [w, b])
            optimizer.apply_gradients(zip(grads, [w, b]))  # all-reduced across replicas
            return loss

        losses = strategy.run(step, args=(batch,))
        total = strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)
        return float(total), w.numpy(), b.numpy(), strategy.num_replicas_in_sync

    mirrored = run(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
    single = run(tf.distribute.OneDeviceStrategy("/cpu:0"))
    print("replicas:", mirrored[3])
    match = (
        abs(mirrored[0] - single[0]) < 1e-5
        and np.allclose(mirrored[1], single[1], atol=1e-6)
        and np.allclose(mirrored[2], single[2], atol=1e-6)
    )
    print("match:", match)
    return 0 if match else 1


if __name__ == "__main__":
    sys.exit(main())
