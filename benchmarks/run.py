"""The benchmark: generated gradients against TensorFlow autodiff, side by side.

For every op of ``benchmarks/ops.yaml`` and every size, two ``tf.function`` s compute a
training step's share of the op, what a model pays: the forward output (returned, so
that no optimizer prunes it) and then the backward pass (the gradient of
``sum(upstream * f(inputs))``, made to wait for the forward output as a model's loss
would). One calls the generated op; the other TensorFlow's autodiff of what a TF user
would write instead (``benchmarks/plain.py``: TF's built-in op where one exists, such
as ``tf.nn.elu``, else the same forward in plain TensorFlow). They run in the same
process, interleaved, after a warm-up; the median of the repeats is reported, without
and with XLA. The speed ratio is autodiff time / generated time (above 1: the generated
op is faster).

Also measured: peak memory of one forward + backward pass (in a fresh process each,
from the peak resident set size), for the generated op with ``memory: save`` and
``memory: recompute`` and for autodiff; and effective bandwidth (the bytes a pass must
move, over its time) next to a plain copy's bandwidth in the same run.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SPEC = HERE / "ops.yaml"
DEFAULT_SIZES = (10**3, 10**4, 10**5, 10**6, 10**7)


def build(policy: str | None = "save", folder: Path | None = None, fuse: str = "none",
          unfused: frozenset = frozenset()):
    """Generate the benchmark module (every op's memory policy set, or left to its
    default where ``policy`` is None, and ``fuse`` for every op not in ``unfused``) and
    import it."""
    import yaml

    sys.path.insert(0, str(ROOT))
    from gradgen.emit import generate
    from gradgen.loading import load_file

    spec = yaml.safe_load(SPEC.read_text())
    for op in spec["ops"]:
        if policy is not None:
            op["memory"] = policy
        op["fuse"] = "none" if op["name"] in unfused else fuse
    policy = policy or "default"
    spec["module"] = f"bench_ops_{policy}_{fuse}"
    folder = folder or Path(tempfile.mkdtemp(prefix="gradgen-bench-"))
    path = folder / f"ops_{policy}_{fuse}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    for name, text in generate([str(path)], str(folder)).items():  # the module, its runtime
        (folder / name).write_text(text)
    return load_file(folder / f"{spec['module']}.py")


def step_function(tf, fn, differentiable, jit: bool):
    """A ``tf.function`` returning ``(output, gradients)``: the output is kept (a model
    uses it), and the backward pass starts after it exists (a model's upstream gradient
    comes from a loss of it), so neither is pruned or run ahead of the forward."""

    @tf.function(jit_compile=jit)
    def step(inputs, upstream):
        watched = [x for x, on in zip(inputs, differentiable) if on]
        with tf.GradientTape() as tape:
            tape.watch(watched)
            out = fn(*inputs)
        with tf.control_dependencies([out]):
            upstream = tf.identity(upstream)
        return out, tape.gradient(out, watched, output_gradients=upstream)

    return step


def time_pair(tf, steps: dict, inputs, upstream, repeats: int) -> dict:
    """Median seconds per call of each step, interleaved (after two warm-up calls)."""
    args = ([tf.constant(x) for x in inputs], tf.constant(upstream))
    for step in steps.values():
        for _ in range(2):
            _sync(step(*args))
    samples = {name: [] for name in steps}
    for i in range(repeats):
        order = list(steps) if i % 2 == 0 else list(reversed(steps))
        for name in order:
            start = time.perf_counter()
            _sync(steps[name](*args))
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(v) for name, v in samples.items()}


def _sync(result):
    out, grads = result
    for t in [out, *grads]:
        if t is not None:
            t.numpy().ravel()[:1]  # wait for the values (also on a GPU)


def copy_bandwidth(tf, n: int, repeats: int) -> float:
    """Bytes per second of a plain elementwise copy (read n floats, write n floats)."""
    x = tf.constant(np.ones(n, np.float32))
    copy = tf.function(lambda v: v * 1.0)
    copy(x).numpy()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        copy(x).numpy().ravel()[:1]
        times.append(time.perf_counter() - start)
    return 8 * n / statistics.median(times)


def measure_memory(op: str, method: str, n: int) -> float:
    """Peak resident memory (MB) added by one forward + backward pass, in a new process."""
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks.memory", op, method, str(n)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )
    if run.returncode != 0:
        raise RuntimeError(run.stderr[-2000:])
    return float(run.stdout.strip().splitlines()[-1])


def machine() -> dict:
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    cpu = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "gpu": [tf.config.experimental.get_device_details(g).get("device_name", g.name)
                for g in gpus],
        "tensorflow": tf.__version__,
        "python": platform.python_version(),
    }
