"""Every example op in every execution mode, and its second-order gradient, against
TensorFlow's autodiff of the forward as written (the emitted tests' references)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from gradgen.loading import runtime_of

from conftest import ROOT, import_source
from tfmodes import MODES, run

EMITTED = sorted((ROOT / "tests" / "generated").glob("test_*_gradients.py"))


def _cases():
    out = []
    for path in EMITTED:
        seen = set()
        for case in _load(path).CASES:
            if case[0] not in seen:  # the first shape variant of each op
                seen.add(case[0])
                out.append((path.stem, case))
    return out


_MODULES: dict = {}


def _load(path):
    if path not in _MODULES:
        _MODULES[path] = import_source(f"matrix_{path.stem}", path)
    return _MODULES[path]


CASES = _cases()
IDS = [f"{stem[len('test_'):-len('_gradients')]}.{case[0]}" for stem, case in CASES]


def _setup(tf, stem, case, seed=0):
    name, dtypes, differentiable, shapes, domains, domain, solves = case
    module = _load(ROOT / "tests" / "generated" / f"{stem}.py")
    # drawn where the forward as written is finite (log(exp(a) - exp(b)) needs a > b)
    inputs = module._finite_inputs(name, dtypes, shapes, domains, domain, solves, seed=seed)
    return module, name, [x.numpy() for x in inputs], differentiable


def _wide(arrays):
    """Float arrays in float64, complex ones in complex128 (the references' dtypes)."""
    return [x.astype(np.complex128) if np.iscomplexobj(x) else
            x.astype(np.float64) if x.dtype.kind == "f" or x.dtype.name == "bfloat16" else x
            for x in arrays]


def _no_xla_kernel(module, name, dtype) -> bool:
    """TensorFlow has no XLA kernel for det (MatrixDeterminant), nor for a complex
    MatrixInverse."""
    source = inspect.getsource(module.ops)
    # a generic op whose code differs by dtype has a VJP per dtype (_morse_float32_vjp)
    per_dtype = f"def _{name}_{dtype}_vjp("
    start = source.index(per_dtype if per_dtype in source else f"def _{name}_vjp(")
    end = source.find("\ndef ", start + 1)
    body = source[start:end if end > 0 else None]
    det = "tf.linalg.det(" in body or "_complex_det(" in body
    return det or (dtype.startswith("complex") and "tf.linalg.inv(" in body)


# The fused ops (fuse: xla). The cases' tensors are small, and below _FUSE_FROM elements
# of known shape a fused op runs its kernels' code without XLA: these cases run again
# with the XLA kernels used at every size.
FUSED = [(i, (stem, case)) for i, (stem, case) in enumerate(CASES)
         if hasattr(_load(ROOT / "tests" / "generated" / f"{stem}.py").ops, "_fused_kernels")]


def _force_kernels(stem, monkeypatch):
    ops = _load(ROOT / "tests" / "generated" / f"{stem}.py").ops
    monkeypatch.setattr(runtime_of(ops), "_FUSE_FROM", 0)  # the module's runtime


@pytest.mark.parametrize("mode", MODES + ("xla",))
@pytest.mark.parametrize("stem, case", [c for _, c in FUSED],
                         ids=[IDS[i] for i, _ in FUSED])
def test_fused_kernels_in_every_mode(tf, stem, case, mode, monkeypatch):
    _force_kernels(stem, monkeypatch)
    _check_mode(tf, stem, case, mode)


@pytest.mark.parametrize("stem, case", [c for _, c in FUSED],
                         ids=[IDS[i] for i, _ in FUSED])
def test_fused_kernels_second_order(tf, stem, case, monkeypatch):
    _force_kernels(stem, monkeypatch)
    _check_second_order(tf, stem, case)


@pytest.mark.parametrize("mode", MODES + ("xla",))
@pytest.mark.parametrize("stem, case", CASES, ids=IDS)
def test_every_op_in_every_mode(tf, stem, case, mode):
    _check_mode(tf, stem, case, mode)


def _check_mode(tf, stem, case, mode):
    module, name, inputs, differentiable = _setup(tf, stem, case)
    if mode == "xla" and _no_xla_kernel(module, name, case[1][0]):
        pytest.skip("TensorFlow has no XLA kernel for det or a complex matrix inverse")
    reference = module.REFERENCES[name]  # the forward as written, in float64 (complex128)
    op_outs = getattr(module.ops, name)(*inputs)
    op_outs = op_outs if isinstance(op_outs, tuple) else (op_outs,)
    rng = np.random.default_rng(3)
    wide_upstreams = [rng.normal(size=o.shape) for o in op_outs]
    upstreams = [u.astype(o.dtype.as_numpy_dtype) for u, o in zip(wide_upstreams, op_outs)]
    declared = [[None] * np.ndim(x) for x in inputs]
    outs, grads = run(tf, getattr(module.ops, name), inputs, upstreams, mode, declared)
    ref_outs, ref_grads = run(tf, reference, _wide(inputs), [
        u.astype(np.complex128) if o.dtype.is_complex else u
        for u, o in zip(wide_upstreams, op_outs)], "eager")
    dtype = case[1][0] if not case[1][0].startswith("int") else "float32"
    rtol, atol = module.AUTODIFF_RTOL[dtype], module.AUTODIFF_ATOL[dtype]
    for got, want in zip(outs, ref_outs):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    for x, got, want, on in zip(inputs, grads, ref_grads, differentiable):
        if not on:
            assert got is None
            continue
        assert got.shape == x.shape and got.dtype == x.dtype
        want = np.zeros_like(x) if want is None else want
        assert np.all(np.isfinite(got)), f"{name}: gradient not finite where the forward is"
        finite = np.isfinite(want)  # autodiff of the naive form may be NaN (where trick)
        np.testing.assert_allclose(got[finite], want[finite], rtol=rtol, atol=atol)


# (rtol, atol) of second derivatives: autodiff of gradgen's gradient against autodiff of
# autodiff of the forward as written, two differently rounded computations
SECOND_ORDER_TOL = {
    "float16": (1e-1, 1e-1), "bfloat16": (1e-1, 1e-1), "float32": (1e-3, 1e-4),
    "complex64": (1e-3, 1e-4), "float64": (1e-8, 1e-10), "complex128": (1e-8, 1e-10),
}


@pytest.mark.parametrize("stem, case", CASES, ids=IDS)
def test_every_op_second_order(tf, stem, case):
    _check_second_order(tf, stem, case)


def _check_second_order(tf, stem, case):
    module, name, inputs, differentiable = _setup(tf, stem, case, seed=5)
    results = []
    for fn, values in ((getattr(module.ops, name), inputs),
                       (module.REFERENCES[name], _wide(inputs))):
        args = [tf.constant(x) for x in values]
        watched = [a for a, on in zip(args, differentiable) if on]
        with tf.GradientTape(persistent=True) as outer:
            outer.watch(watched)
            with tf.GradientTape() as inner:
                inner.watch(watched)
                outs = fn(*args)
                outs = list(outs) if isinstance(outs, tuple) else [outs]
                total = tf.add_n([tf.reduce_sum(tf.math.real(o) if o.dtype.is_complex else o)
                                  for o in outs])
            first = inner.gradient(total, watched)
            first_sum = tf.add_n([tf.reduce_sum(tf.math.real(g) if g.dtype.is_complex else g)
                                  for g in first if g is not None])
        second = outer.gradient(first_sum, watched)
        results.append([None if g is None else g.numpy() for g in second])
    rtol, atol = SECOND_ORDER_TOL[case[1][0]]
    for (got, want), x in zip(zip(*results), [a for a, on in zip(inputs, differentiable) if on]):
        got = np.zeros(np.shape(x)) if got is None else got
        want = np.zeros(np.shape(x)) if want is None else want
        assert np.all(np.isfinite(got)), name
        finite = np.isfinite(want)
        np.testing.assert_allclose(got[finite], want[finite], rtol=rtol, atol=atol, err_msg=name)
