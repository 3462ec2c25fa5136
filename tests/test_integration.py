"""Generated ops inside real TensorFlow programs: tracing, XLA, TF1 graphs, second order,
jacobians, variables and optimizers, Keras, SavedModel, and tf.distribute."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import GENERATED, ROOT, checkout_env, import_source, run_python


@pytest.fixture(scope="module")
def mods(tf):
    return {
        name: import_source(f"integration_{name}", GENERATED / f"{name}.py")
        for name in ("seeds", "stability", "matrix", "kinks", "memory")
    }


def test_one_trace_serves_every_batch_size(tf, mods):
    op = mods["seeds"].scaled_sum
    spec = tf.TensorSpec([None, 3], tf.float32)

    @tf.function(input_signature=[spec, spec, tf.TensorSpec([], tf.float32)])
    def step(a, b, s):
        with tf.GradientTape() as tape:
            tape.watch([a, b])
            out = op(a, b, s)
        return out, tape.gradient(out, [a, b])

    for rows_a, rows_b in [(5, 5), (1, 4), (4, 1), (0, 1), (0, 0)]:
        a = tf.ones([rows_a, 3])
        b = tf.fill([rows_b, 3], 2.0)
        out, (ga, gb) = step(a, b, tf.constant(0.5))
        rows = max(rows_a, rows_b) if 0 not in (rows_a, rows_b) else 0
        assert out.shape == (rows, 3)
        assert ga.shape == a.shape and gb.shape == b.shape
        np.testing.assert_allclose(out.numpy(), np.full((rows, 3), 0.5 * 3.0**2))
        # d/da = d/db of 0.5 * (a + b)**2 = (a + b) = 3 per element, summed over the
        # other input's rows for an input of one row that is broadcast (0 for 0 rows)
        for g, own in ((ga, rows_a), (gb, rows_b)):
            np.testing.assert_allclose(g.numpy(), np.full(g.shape, 3.0 * (rows if own == 1 else 1)))
    assert step.experimental_get_tracing_count() == 1


@pytest.mark.parametrize("pfor", [True, False])
def test_jacobian_with_and_without_pfor(tf, mods, pfor):
    x = tf.constant([3.0, 0.0, -1.0])
    y = tf.constant([4.0, 0.0, 2.0])
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([x, y])
        r, theta = mods["seeds"].polar(x, y)
    jx = tape.jacobian(r, x, experimental_use_pfor=pfor)
    jt = tape.jacobian(theta, y, experimental_use_pfor=pfor)
    radius = np.sqrt(np.array([9.0, 0.0, 5.0]))
    np.testing.assert_allclose(np.diag(jx.numpy()), [0.6, 0.0, -1 / radius[2]], rtol=1e-6)
    assert np.count_nonzero(jx.numpy() - np.diag(np.diag(jx.numpy()))) == 0
    np.testing.assert_allclose(np.diag(jt.numpy()), [3 / 25, 0.0, -1 / 5], rtol=1e-6)


def test_hessian_in_tf1_graph_with_grad_ys(tf, mods):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None])
        out = mods["stability"].swish(x)
        (g,) = tf.gradients(out, [x], grad_ys=[2.0 * tf.ones_like(out)])
        (h,) = tf.hessians(tf.reduce_sum(out), [x])
        with tf.compat.v1.Session(graph=graph) as session:
            g_value, h_value = session.run([g, h], {x: [-2.0, 0.0, 3.0]})
    v = np.array([-2.0, 0.0, 3.0])
    s = 1 / (1 + np.exp(-v))
    np.testing.assert_allclose(g_value, 2 * (s + v * s * (1 - s)), rtol=1e-5)
    np.testing.assert_allclose(np.diag(h_value), s * (1 - s) * (2 + v * (1 - 2 * s)), rtol=1e-4)


def test_gradient_of_one_output_while_the_other_is_unused(tf, mods):
    x = tf.constant([3.0, 1.0])
    y = tf.constant([4.0, 1.0])
    with tf.GradientTape() as tape:
        tape.watch([x, y])
        r, _ = mods["seeds"].polar(x, y)
    gx, gy = tape.gradient(r, [x, y])
    np.testing.assert_allclose(gx, [0.6, 1 / np.sqrt(2)], rtol=1e-6)
    np.testing.assert_allclose(gy, [0.8, 1 / np.sqrt(2)], rtol=1e-6)


def test_variables_train_with_an_optimizer(tf, mods):
    layer = mods["matrix"].layer
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(8, 4)), tf.float32)
    target = tf.constant(rng.uniform(-0.5, 0.5, size=(8, 3)), tf.float32)
    w = tf.Variable(rng.normal(size=(4, 3)) * 0.1, dtype=tf.float32)
    b = tf.Variable(tf.zeros([3]))
    optimizer = tf.keras.optimizers.SGD(0.5)

    def loss_fn():
        h, _ = layer(x, w, b)
        return tf.reduce_mean((h - target) ** 2)

    first = float(loss_fn())
    for _ in range(20):
        with tf.GradientTape() as tape:
            loss = loss_fn()
        grads = tape.gradient(loss, [w, b])
        assert all(np.all(np.isfinite(g.numpy())) for g in grads)
        optimizer.apply_gradients(zip(grads, [w, b]))
    assert float(loss_fn()) < 0.5 * first


@pytest.mark.parametrize("mode", ["eager", "compiled", "xla"])
def test_keras_layer_trains_with_fit(tf, mods, mode):
    keras = tf.keras
    dense = mods["matrix"].layer

    class GradgenDense(keras.layers.Layer):
        def build(self, input_shape):
            self.w = self.add_weight(shape=(4, 3), initializer="glorot_uniform", name="w")
            self.b = self.add_weight(shape=(3,), initializer="zeros", name="b")

        def call(self, x):
            h, _ = dense(x, self.w, self.b)
            return h

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), GradgenDense(), keras.layers.Dense(1)])
    model.compile(
        optimizer=keras.optimizers.Adam(0.05),
        loss="mse",
        run_eagerly=mode == "eager",
        jit_compile=mode == "xla",
    )
    rng = np.random.default_rng(1)
    x = rng.normal(size=(64, 4)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5], [0.0]])).astype(np.float32)
    history = model.fit(x, y, epochs=15, batch_size=16, verbose=0)
    losses = history.history["loss"]
    assert all(np.isfinite(losses)) and losses[-1] < 0.5 * losses[0]
    for weight in model.trainable_weights:
        assert np.all(np.isfinite(weight.numpy()))


def test_saved_model_keeps_the_custom_gradient(tf, mods, tmp_path):
    op = mods["stability"].softplus_naive

    class Module(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
        def __call__(self, x):
            return op(x)

    path = str(tmp_path / "saved")
    tf.saved_model.save(
        Module(), path, options=tf.saved_model.SaveOptions(experimental_custom_gradients=True)
    )
    loaded = tf.saved_model.load(path)
    x = tf.constant([100.0, 0.0, -100.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = loaded(x)
    g = tape.gradient(y, x).numpy()
    # the custom gradient (sigmoid), not autodiff of log(1 + exp(x)), which is NaN at 100
    np.testing.assert_allclose(g, [1.0, 0.5, 0.0], atol=1e-30)


def test_recompute_op_in_a_saved_model(tf, mods, tmp_path):
    # memory: recompute puts the gradient under tf.control_dependencies on the upstream
    op = mods["memory"].layer_norm

    class Module(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 16], tf.float32)])
        def __call__(self, x):
            return op(x)

    path = str(tmp_path / "saved")
    tf.saved_model.save(
        Module(), path, options=tf.saved_model.SaveOptions(experimental_custom_gradients=True)
    )
    loaded = tf.saved_model.load(path)
    x = tf.constant(np.random.default_rng(0).normal(size=(5, 16)).astype(np.float32))
    u = tf.constant(np.random.default_rng(1).normal(size=(5, 16)).astype(np.float32))
    grads = []
    for fn in (loaded, op):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        grads.append(tape.gradient(y, x, output_gradients=u).numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6, atol=1e-6)


def test_mirrored_strategy_matches_a_single_device(tf):
    """Runs tests/distributed_step.py in a fresh process: logical devices must be
    configured before TensorFlow initializes."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    run = run_python(str(ROOT / "tests" / "distributed_step.py"),
                     capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert "replicas: 2" in run.stdout and "match: True" in run.stdout


def _free_ports(count):
    """``count`` distinct free TCP ports on 127.0.0.1 (bound to port 0, then released)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def test_multi_worker_mirrored_strategy_matches_a_single_device(tf, tmp_path):
    """Two worker processes (tests/multiworker_step.py) under MultiWorkerMirroredStrategy,
    talking gRPC on 127.0.0.1 with RING all-reduce on CPU, each take one SGD step on their
    own half of a batch of 8 rows. Their all-reduced gradients, updated weights and loss
    equal a single-device step on all 8 rows, and the two workers agree bit for bit.
    10 to 20 s on 2 cores; both workers are killed at 180 s."""
    ports = _free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}  # no gRPC proxy
    env.update(TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    procs, logs, killed = [], [], []
    try:
        for index in range(2):
            tf_config = {"cluster": cluster, "task": {"type": "worker", "index": index}}
            log = open(tmp_path / f"worker{index}.log", "w")
            logs.append(log)
            procs.append(subprocess.Popen(
                [sys.executable, str(ROOT / "tests" / "multiworker_step.py"),
                 str(tmp_path / f"worker{index}.json")],
                env=checkout_env(dict(env, TF_CONFIG=json.dumps(tf_config))),
                stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
            ))
        deadline = time.monotonic() + 180
        for proc in procs:
            try:
                proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                killed.append(proc)
            proc.wait()
        for log in logs:
            log.close()
    report = "\n".join(
        f"--- worker {i} (exit {proc.returncode}"
        + (", killed" if proc in killed else "") + "):\n"
        + (tmp_path / f"worker{i}.log").read_text()[-3000:]
        for i, proc in enumerate(procs)
    )
    assert [proc.returncode for proc in procs] == [0, 0], report
    results = [json.loads((tmp_path / f"worker{i}.json").read_text()) for i in range(2)]

    assert [r["task"] for r in results] == [0, 1]
    assert [r["replicas"] for r in results] == [2, 2]
    # each worker read its own half; together, every row once
    rows = [r["rows"] for r in results]
    assert len(rows[0]) == len(rows[1]) == 4
    assert sorted(rows[0] + rows[1]) == list(range(8)), rows
    keys = ("loss", "grad_w", "grad_b", "w", "b")
    # all-reduce hands every worker the same sums, so the same step
    for key in keys:
        np.testing.assert_array_equal(results[0]["distributed"][key],
                                      results[1]["distributed"][key], err_msg=key)
    # the single-device step on all 8 rows: float32 sums in another order, so rounding
    # (about 2e-7 relative here) and no more
    for result in results:
        for key in keys:
            np.testing.assert_allclose(result["distributed"][key], result["single"][key],
                                       rtol=1e-6, atol=1e-7, err_msg=key)
    # the step moved the weights, by the learning rate times the all-reduced gradient
    distributed = results[0]["distributed"]
    assert np.abs(distributed["grad_w"]).min() > 1e-3
    np.testing.assert_allclose(
        distributed["w"],
        np.asarray(results[0]["initial_w"]) - 0.1 * np.asarray(distributed["grad_w"]),
        rtol=1e-6, atol=1e-7,
    )


def test_dims_unknown_while_tracing_are_checked_when_run(tf, mods):
    spec = tf.TensorSpec([None, None], tf.float32)
    step = tf.function(mods["seeds"].bar, input_signature=[spec, tf.TensorSpec([None])])
    out = step(tf.ones([10, 1]), tf.ones([5]))
    assert out.shape == (10, 5)
    with pytest.raises(tf.errors.InvalidArgumentError, match="expected shape"):
        step(tf.ones([10, 5]), tf.ones([5]))  # x is declared [10, 1]


@pytest.mark.slow  # six fresh processes measuring peak memory (~40 s)
def test_recompute_lowers_peak_memory(tf):
    """memory: recompute keeps less alive than memory: save and than autodiff, measured
    by TensorFlow's allocator in fresh processes (benchmarks/memory.py: 8 mish layers).
    Before the gradient body waited on the upstream, TensorFlow ran the recomputation
    (and the rest of the gradient) as early as it could, and it saved nothing."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")

    def peak(method):
        run = run_python("-m", "benchmarks.memory", "mish", method, "1000000",
                         capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
        assert run.returncode == 0, run.stderr[-3000:]
        return float(run.stdout.split()[-1])

    # one inter-op thread (set by memory.py): the same figures on every run, e.g. 67, 64
    # and 35 MB; without the control dependency recompute measured the same as save
    autodiff, save, recompute = peak("autodiff"), peak("save"), peak("recompute")
    assert recompute < 0.8 * save and recompute < 0.8 * autodiff, (autodiff, save, recompute)
