"""``python -m benchmarks``: generated gradients against TF autodiff (see run.py).

Options:
    --sizes 1e3,1e5     element counts (default 1e3,1e4,1e5,1e6,1e7)
    --repeats N         timed calls per size and method at 1e6 (default 15; three
                        times as many up to 1e5, where a call takes about a
                        millisecond and this machine's noise is largest; a third at
                        1e7)
    --ops a,b           only these ops
    --no-memory         skip the peak-memory measurements
    --out DIR           where results.json, results.md and speed.png go
                        (default benchmarks/results)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from benchmarks.plain import MATRIX_OPS, baselines, log10_label, make_inputs, moved_bytes
from benchmarks.run import (
    DEFAULT_SIZES,
    HERE,
    build,
    copy_bandwidth,
    machine,
    measure_memory,
    step_function,
    time_pair,
)

MEMORY_SIZE = 10**7
ACTIVATIONS = ["gelu_tanh", "gelu_erf", "swish", "mish", "softplus_act", "elu"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("--sizes", default=",".join(f"{n:.0e}" for n in DEFAULT_SIZES))
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--ops", default="")
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--out", default=str(HERE / "results"))
    args = parser.parse_args(argv)

    import tensorflow as tf

    sizes = [int(float(s)) for s in args.sizes.split(",")]
    # the default form, and fuse: xla for the elementwise and reduction ops (each with
    # its default memory policy: save, and recompute for fused ops)
    modules = {"default": build(None),
               "fused": build(None, fuse="xla", unfused=frozenset(MATRIX_OPS))}
    plain = baselines(tf)
    names = [n for n in plain if not args.ops or n in args.ops.split(",")]
    rows = []
    for name in names:
        for form, module in modules.items():
            if form == "fused" and name in MATRIX_OPS:
                continue
            for jit in (False, True):
                for n in sizes:
                    row = _measure(tf, name, form, module, plain, jit, n, args.repeats)
                    rows.append(row)
                    print(_line(row), flush=True)
    memory = []
    if not args.no_memory:
        for name in names:
            if name in MATRIX_OPS:
                continue
            entry = {"op": name}
            for method in ("autodiff", "save", "recompute"):
                entry[method] = measure_memory(name, method, MEMORY_SIZE)
            memory.append(entry)
            print(f"memory {name}: " + ", ".join(f"{k} {v:.0f} MB" for k, v in entry.items()
                                                 if k != "op"), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    info = machine()
    (out / "results.json").write_text(json.dumps(
        {"machine": info, "timings": rows, "memory": memory}, indent=1))
    report = markdown(rows, memory, info)
    (out / "results.md").write_text(report)
    plot(rows, out / "speed.png")
    print()
    print(report)
    return 0


import numpy as np  # noqa: E402  (after TF_CPP_MIN_LOG_LEVEL)


def _measure(tf, name, form, module, plain, jit, n, repeats) -> dict:
    """One row: op ``name`` in ``form`` against its baseline at ``n`` elements; for a
    fused op also the first call's latency (tracing and compiling both kernels) and a
    new shape's."""
    import time

    inputs, differentiable = make_inputs(name, n)
    outputs = [plain[name](*[tf.constant(x) for x in inputs])]
    upstream = np.random.default_rng(1).normal(size=outputs[0].shape).astype(np.float32)
    fn = getattr(module, name)
    first = None
    if form == "fused":  # compile cost: the op's first forward + backward at this shape
        args = [tf.constant(x) for x in inputs]
        start = time.perf_counter()
        with tf.GradientTape() as tape:
            tape.watch(args)
            out = fn(*args)
        [g.numpy() for g in tape.gradient(out, args, output_gradients=tf.constant(upstream))
         if g is not None]
        first = time.perf_counter() - start
    if jit and name == "log_det":  # TensorFlow has no XLA kernel for slogdet's LU
        steps = {"generated": step_function(tf, fn, differentiable, True)}
    else:
        steps = {"generated": step_function(tf, fn, differentiable, jit),
                 "autodiff": step_function(tf, plain[name], differentiable, jit)}
    repeats = max(5, repeats * 3 if n <= 10**5 else repeats if n < 10**7 else repeats // 3)
    times = time_pair(tf, steps, inputs, upstream, repeats)
    copy = copy_bandwidth(tf, n, repeats)
    moved = moved_bytes(inputs, outputs)
    return {
        "op": name, "form": form, "xla": jit, "size": n,
        "generated_s": times["generated"],
        "autodiff_s": times.get("autodiff"),
        "ratio": times["autodiff"] / times["generated"] if "autodiff" in times else None,
        "first_call_s": first,
        "bandwidth_gbs": moved / times["generated"] / 1e9,
        "copy_gbs": copy / 1e9,
    }


def _line(row) -> str:
    ratio = f"{row['ratio']:.2f}" if row["ratio"] is not None else "  - "
    first = f"  first call {row['first_call_s'] * 1e3:.0f} ms" if row["first_call_s"] else ""
    return (f"{row['op']:14s} {row['form']:7s} {'xla' if row['xla'] else 'graph':5s} "
            f"{log10_label(row['size']):>4s}"
            f"  generated {row['generated_s'] * 1e3:9.3f} ms  ratio {ratio}"
            f"  {row['bandwidth_gbs']:.1f} GB/s (copy {row['copy_gbs']:.1f}){first}")


def summary(rows, jit: bool, form: str = "default") -> dict:
    """Per op: the median over sizes of the speed ratio (``form``: ``default``, or
    ``best``: the fused form where there is one)."""
    ops = {}
    for row in rows:
        if row["xla"] != jit or row["ratio"] is None:
            continue
        fused = any(r["op"] == row["op"] and r["form"] == "fused" for r in rows)
        if row["form"] == form or (form == "best" and row["form"] == ("fused" if fused
                                                                      else "default")):
            ops.setdefault(row["op"], []).append(row["ratio"])
    return {op: statistics.median(v) for op, v in ops.items()}


def markdown(rows, memory, info) -> str:
    sizes = sorted({r["size"] for r in rows})
    lines = [
        f"Machine: {info['cpu']}, {info['cores']} cores"
        + (f", GPU {', '.join(info['gpu'])}" if info["gpu"] else ", no GPU")
        + f"; TensorFlow {info['tensorflow']}, Python {info['python']}.",
        "",
        "Speed ratio (baseline time / generated time; above 1 the generated op is "
        "faster) of a training step's share of the op: the forward output returned and "
        "the backward pass after it. Baseline: TensorFlow's autodiff of its built-in op "
        "where one exists (tf.nn.gelu, tf.nn.silu, tf.nn.softplus, tf.nn.elu, "
        "tf.nn.sigmoid_cross_entropy_with_logits), else of the same forward in plain "
        "TensorFlow. Median of repeated runs interleaved in one process; `default` is "
        "each op's default form (memory: save), `fused` is `fuse: xla` (its default "
        "memory: recompute):",
        "",
        "| op | form | mode | " + " | ".join(log10_label(n) for n in sizes) + " | median |",
        "| --- | --- | --- | " + " | ".join("---" for _ in sizes) + " | --- |",
    ]
    forms = list(dict.fromkeys(r["form"] for r in rows))
    for form in forms:
        for jit in (False, True):
            per_op = summary(rows, jit, form)
            for op in dict.fromkeys(r["op"] for r in rows if r["form"] == form):
                cells = []
                for n in sizes:
                    row = next((r for r in rows if r["op"] == op and r["xla"] == jit
                                and r["size"] == n and r["form"] == form), None)
                    cells.append(f"{row['ratio']:.2f}" if row and row["ratio"] else "-")
                median = f"{per_op[op]:.2f}" if op in per_op else "-"
                lines.append(f"| {op} | {form} | {'XLA' if jit else 'tf.function'} | "
                             + " | ".join(cells) + f" | {median} |")
    for form in forms + (["best"] if "fused" in forms else []):
        for jit in (False, True):
            per_op = summary(rows, jit, form)
            if per_op:
                what = {"default": "default form", "fused": "fused ops",
                        "best": "fused where fused, else default"}[form]
                lowest = min(per_op, key=per_op.get)
                lines += ["", f"{what}, {'XLA' if jit else 'tf.function'}: median ratio over "
                          f"ops {statistics.median(per_op.values()):.2f}, lowest "
                          f"{per_op[lowest]:.2f} ({lowest})."]
    firsts = [r for r in rows if r.get("first_call_s")]
    if firsts:
        lines += ["", "First call of a fused op at a new shape (tracing and compiling its "
                  "two kernels, then running them), tf.function off:", "",
                  "| op | " + " | ".join(log10_label(n) for n in sizes) + " |",
                  "| --- | " + " | ".join("---" for _ in sizes) + " |"]
        for op in dict.fromkeys(r["op"] for r in firsts):
            cells = []
            for n in sizes:
                row = next((r for r in firsts if r["op"] == op and r["size"] == n
                            and not r["xla"]), None)
                cells.append(f"{row['first_call_s'] * 1e3:.0f} ms" if row else "-")
            lines.append(f"| {op} | " + " | ".join(cells) + " |")
    big = [r for r in rows if r["size"] == max(sizes) and not r["xla"]
           and r["form"] == "default"]
    if big:
        lines += ["", f"Effective bandwidth at {log10_label(max(sizes))} elements "
                  "(bytes a forward + backward pass must move / time; tf.function):", "",
                  "| op | generated GB/s | plain copy GB/s |", "| --- | --- | --- |"]
        lines += [f"| {r['op']} | {r['bandwidth_gbs']:.1f} | {r['copy_gbs']:.1f} |" for r in big]
    if memory:
        lines += ["", f"Peak memory of one forward + backward pass at {log10_label(MEMORY_SIZE)} "
                  "elements (MB allocated by TensorFlow above the inputs, tf.function; a "
                  "single-input op as 8 layers in sequence, as in a network):", "",
                  "| op | autodiff | generated, memory: save | generated, memory: recompute |",
                  "| --- | --- | --- | --- |"]
        lines += [f"| {m['op']} | {m['autodiff']:.0f} | {m['save']:.0f} | {m['recompute']:.0f} |"
                  for m in memory]
    return "\n".join(lines) + "\n"


def plot(rows, path: Path) -> None:
    """Bar chart of the median speed ratio per op, without and with XLA."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install matplotlib)", file=sys.stderr)
        return
    series = [("default, tf.function", summary(rows, False)),
              ("default, XLA", summary(rows, True)),
              ("fused, tf.function", summary(rows, False, "fused")),
              ("fused, XLA", summary(rows, True, "fused"))]
    series = [(label, values) for label, values in series if values]
    ops = list(series[0][1])
    x = np.arange(len(ops))
    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(max(6, len(ops) * 0.9), 4))
    for i, (label, values) in enumerate(series):
        ax.bar(x - 0.4 + width * (i + 0.5), [values.get(o, 0) for o in ops], width,
               label=label)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(x, ops, rotation=45, ha="right")
    ax.set_ylabel("baseline (TF autodiff) time / generated time")
    ax.set_title("gradgen: speed ratio per op (median over sizes)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
