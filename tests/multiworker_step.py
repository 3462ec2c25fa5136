"""One worker of a two-worker tf.distribute.MultiWorkerMirroredStrategy training step on
CPU (collective ops over gRPC on 127.0.0.1, RING all-reduce), using the generated ops of
tests/distributed_step.py: ``matrix.layer`` and ``stability.softplus_naive``.

Usage: ``TF_CONFIG=... python tests/multiworker_step.py OUT.json``. TF_CONFIG names the
cluster (two workers) and this worker's index; tests/test_integration.py picks the ports
and starts both workers. Each worker reads its own shard of a global batch of 8 rows
(``distribute_datasets_from_function``), takes one SGD step, and writes to OUT.json the
rows it read, the initial weights, its all-reduced gradients, the updated weights and
the loss; then, outside the strategy, the same step on a single device on all 8 rows,
to compare with.
"""

import json
import os
import pathlib
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["CUDA_VISIBLE_DEVICES"] = ""  # CPU only, whatever the machine has
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
GLOBAL_BATCH = 8
LEARNING_RATE = 0.1


def load(name):
    """generated/<name>.py, imported as gradgen's tests import generated modules."""
    from gradgen.loading import load_file

    return load_file(ROOT / "generated" / f"{name}.py")


def main(out_path):
    # The strategy first: it starts this worker's gRPC server and must exist before any
    # other TensorFlow op runs.
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING,
            timeout_seconds=120.0,
        )
    )
    matrix, stability = load("matrix"), load("stability")
    rng = np.random.default_rng(0)  # the same data and weights on every worker
    x = rng.normal(size=(GLOBAL_BATCH, 4)).astype(np.float32)
    y = rng.normal(size=(GLOBAL_BATCH, 3)).astype(np.float32)
    w0 = rng.normal(size=(4, 3)).astype(np.float32) * 0.3
    rows = np.arange(GLOBAL_BATCH, dtype=np.int64)

    def loss_of(features, labels, w, b):
        h, _ = matrix.layer(features, w, b)
        return tf.reduce_sum(stability.softplus_naive(tf.reshape(h - labels, [-1]))) / GLOBAL_BATCH

    # --- the distributed step: this worker's shard, gradients all-reduced over both
    with strategy.scope():
        w = tf.Variable(w0)
        b = tf.Variable(tf.zeros([3]))
        optimizer = tf.keras.optimizers.SGD(LEARNING_RATE)

    def dataset_fn(context):
        data = tf.data.Dataset.from_tensor_slices((rows, x, y))
        data = data.shard(context.num_input_pipelines, context.input_pipeline_id)
        return data.batch(context.get_per_replica_batch_size(GLOBAL_BATCH))

    batch = next(iter(strategy.distribute_datasets_from_function(dataset_fn)))

    @tf.function
    def step(inputs):
        index, features, labels = inputs
        with tf.GradientTape() as tape:
            loss = loss_of(features, labels, w, b)
        grads = tape.gradient(loss, [w, b])
        context = tf.distribute.get_replica_context()
        # the sums the optimizer's own all-reduce computes, returned to be compared
        reduced = context.all_reduce(tf.distribute.ReduceOp.SUM, grads)
        optimizer.apply_gradients(zip(grads, [w, b]))  # all-reduces the raw gradients
        return index, loss, reduced

    index, losses, (gw, gb) = strategy.run(step, args=(batch,))
    total = strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)
    local = strategy.experimental_local_results

    # --- the single-device step on all 8 rows, outside the strategy
    with tf.device("/cpu:0"):
        w1 = tf.Variable(w0)
        b1 = tf.Variable(tf.zeros([3]))
        optimizer1 = tf.keras.optimizers.SGD(LEARNING_RATE)

        @tf.function
        def single_step(features, labels):
            with tf.GradientTape() as tape:
                loss = loss_of(features, labels, w1, b1)
            grads = tape.gradient(loss, [w1, b1])
            optimizer1.apply_gradients(zip(grads, [w1, b1]))
            return loss, grads

        loss1, (gw1, gb1) = single_step(tf.constant(x), tf.constant(y))

    result = {
        "task": json.loads(os.environ["TF_CONFIG"])["task"]["index"],
        "replicas": strategy.num_replicas_in_sync,
        "initial_w": w0.tolist(),
        "rows": np.concatenate([r.numpy() for r in local(index)]).tolist(),
        "distributed": {
            "loss": float(total),
            "grad_w": local(gw)[0].numpy().tolist(),
            "grad_b": local(gb)[0].numpy().tolist(),
            "w": w.numpy().tolist(),
            "b": b.numpy().tolist(),
        },
        "single": {
            "loss": float(loss1),
            "grad_w": gw1.numpy().tolist(),
            "grad_b": gb1.numpy().tolist(),
            "w": w1.numpy().tolist(),
            "b": b1.numpy().tolist(),
        },
    }
    pathlib.Path(out_path).write_text(json.dumps(result))
    print("wrote", out_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
