"""Naive forms from peer projects' stability tests, and how cleanly gradgen handles them.

Each :class:`Form` is an expression that a peer project tests or rewrites because the
naive form loses precision, overflows or returns NaN: PyTensor's rewrite tests
(``tests/tensor/rewriting/test_math.py``, ``test_special.py``) and rewrites
(``pytensor/tensor/rewriting/math.py``), SciPy's ``scipy/special/tests``, JAX's
``tests/nn_test.py`` and ``tests/lax_scipy_test.py``, Stan Math's
``test/unit/math/{prim,mix}/fun/*_test.cpp`` and Herbie's ``bench/hamming/*.fpcore``.
Snapshots read: PyTensor f857e69, SciPy 3dbf660, JAX cec06d1, Herbie 1863fcf, Stan Math
(per file, ``develop`` as stored). Each form's ``source`` names the project, the file
and the test (or rewrite); the points include the peer's witness points.

Every form is written in gradgen's expression language as the peer writes the naive
form, built with gradgen once per dtype (all forms in one module), and its forward value
and gradient are evaluated in float16, bfloat16, float32 and float64 at each point and
compared with the value and derivative of the expression *as written*, evaluated with
mpmath at 60 digits and more (rising until two precisions agree to 40 digits; the limit
where the formula is 0/0; see ``tests/stability.py``), at the input rounded to the dtype.

A form is **clean** in a dtype when at every point: no NaN or inf where the true value is
finite and representable in the dtype, and ``|got - exact| <= RTOL * |exact| +
smallest normal`` (RTOL: 1e-5 float32, 1e-12 float64, 4e-3 float16, 3e-2 bfloat16; the
constants of ``tests/stability.py``). Points whose inputs are not representable in a
dtype (overflow, or a nonzero input that rounds to 0 or a subnormal) are skipped for that
dtype, and so is each value whose exact result is infinite or overflows the dtype, or is
undefined (a kink: the form's ``note`` says so). A form gradgen refuses (a spec error, a
failed verification) is not clean: "refused: <message>".

Reductions run over the class axis of ``[null, 3]`` inputs, one row per point. Row
outputs (softmax, standardize) are checked in every component, and their gradient is
the VJP with the cotangent e0 = (1, 0, 0) on each row: the row of the Jacobian of the
first component, so every entry is a well-defined number with its own relative error
(a cotangent of ones would make the exact softmax gradient 0 and measure only noise).

``python tests/peer_forms.py`` prints the markdown summary (clean count, per dtype and
per source, and the forms that are not clean with the reason).
"""

from __future__ import annotations

import ast
import math
import signal
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import sympy

sys.path.insert(0, str(Path(__file__).resolve().parent))

from stability import DTYPES, LARGEST, RTOL, SMALLEST_NORMAL, reference_gradient

ROW = 3  # the class axis of the reduction forms: inputs of shape [null, 3]


@dataclass
class Form:
    """One naive form and where to check it.

    Attributes:
        name: the op name (unique).
        source: "Project: file::test (rewrite); also ..." where the form and the points
            come from; the project is the text before the first ':'.
        expression: the forward, in gradgen's expression language, as the peer writes it.
        inputs: input names in order; each ``[null]`` unless listed in ``rows``.
        points: one tuple per point, one entry per input (a tuple of 3 for a row input).
        rows: inputs of shape ``[null, 3]`` (reduction over the last axis).
        note: domain, kinks, what the witness shows.
        reference: an expression equal to ``expression`` wherever it is defined, used for
            the exact values instead of it (only where SymPy cannot differentiate the
            written form, e.g. a max reduction whose gradient cancels).
        conventions: {point: gradients} where the true gradient is undefined and the
            README documents gradgen's value (as in tests/stability.py).
    """

    name: str
    source: str
    expression: str
    inputs: tuple = ("x",)
    points: list = field(default_factory=list)
    rows: tuple = ()
    note: str = ""
    reference: str | None = None
    conventions: dict = field(default_factory=dict)

    @property
    def project(self) -> str:
        return self.source.split(":", 1)[0]

    def shape(self, name: str) -> list:
        return [None, ROW] if name in self.rows else [None]


def single(*values):
    return [(float(v),) for v in values]


def rows(*values):
    return [(tuple(float(v) for v in r),) for r in values]


PT_MATH = "PyTensor: tests/tensor/rewriting/test_math.py"
PT_SPECIAL = "PyTensor: tests/tensor/rewriting/test_special.py"
SCIPY = "SciPy: scipy/special/tests"
JAX_NN = "JAX: tests/nn_test.py"
JAX_SCIPY = "JAX: tests/lax_scipy_test.py"
STAN = "Stan: test/unit/math"
HERBIE = "Herbie: bench/hamming"

SIGMOID_POINTS = [-1e4, -100.0, -37.0, -20.0, -1.0, 0.0, 1e-30, 1.0, 20.0, 37.0, 100.0, 1e4]
LOG1MEXP_POINTS = [-1e4, -745.0, -500.0, -100.0, -40.157894736842195, -10.0, -1.0, -0.8,
                   -0.6, -0.1, -1e-5, -2.0**-55, -1e-20, -1e-40, -1e-300]
ERF_POINTS = [-30.0, -5.0, -3.0, -2.0, -1.0, 0.0, 1e-30, 1.0, 2.0, 3.0, 5.0, 30.0]
SOFTMAX_ROWS = rows(
    (1000, 0, 0), (-25, 0, 25), (325, 749, 750), (5.5, 1.3, -4.2), (0, 0, 0), (20, 0, 0),
    (1e4, 0, -1e4), (-1e4, -1e4, -1e4), (1000, 1, 0), (0.5, -0.5, 1e-30),
)
LSE_ROWS = rows(
    (-800, 800, 0), (-800, -805, -810), (0, 0, 0), (1, 2, 3), (0, 1, -1), (-1e4, 0, 1e4),
    (1000, 1000, 1000), (1e-40, 1e-40, 1e-40), (-1e4, -1e4, -1e4), (20, 0, 0),
)
STANDARDIZE_ROWS = rows(
    (-11 + 3e-6, -11 + 3e-6, -11 + 3e-6), (1e6, 1e6 + 1, 1e6 + 2), (0, 1, 2),
    (1e-3, 0, -1e-3), (100, -100, 0), (5.5, 1.3, -4.2),
)
LARGE_X = [1.5, 100.0, 1e4, 1e8, 1e15, 1e30, 1e300]


FORMS = [
    # ------------------------------------------------------------------ PyTensor
    Form("pt_log1p", f"{PT_MATH}::test_log1p (local_log1p)", "log(1 + x)",
         points=single(-0.999, -0.5, -1e-7, 0, 1e-30, 1e-7, 10, 1e4)),
    Form("pt_log1m", f"{PT_MATH}::test_log1p (log(1 + (-x)), local_log1p); also Stan "
         "mix/fun/log1m_test.cpp", "log(1 - x)",
         points=single(-1e4, -21.5, -1, -1e-30, 0, 1e-7, 0.5, 0.9, 0.999)),
    Form("pt_log1p_minus_exp", f"{PT_MATH}::test_log1mexp_stabilization[log1p_minus_exp]",
         "log1p(-exp(x))", points=single(*LOG1MEXP_POINTS), note="x < 0"),
    Form("pt_log_minus_expm1", f"{PT_MATH}::test_log1mexp_stabilization[log_minus_expm1]",
         "log(-expm1(x))", points=single(*LOG1MEXP_POINTS), note="x < 0"),
    Form("pt_log_minus_exp_minus_1",
         f"{PT_MATH}::test_log1mexp_stabilization[log_minus_exp_minus_1]",
         "log(-(exp(x) - 1))", points=single(*LOG1MEXP_POINTS), note="x < 0"),
    Form("pt_log_add_exp4", f"{PT_SPECIAL}::test_local_log_add_exp (four terms)",
         "log(exp(x) + exp(y) + exp(x - y) + exp(x + y))", ("x", "y"),
         [(1e4, 1e4), (0.0, 0.0), (10.0, 10.0), (1.0, -1.0), (-100.0, -100.0),
          (-1e4, 1e4), (500.0, -3.0)]),
    Form("pt_softplus", f"{PT_MATH}::TestSoftplusRewrites::test_log1pexp_to_softplus; also "
         "JAX tests/nn_test.py::testSoftplusGrad (1e-8), testSoftplusValue (89)",
         "log(1 + exp(x))",
         points=single(-1e4, -100, -37, -1, 0, 1e-8, 1, 37, 89, 100, 1e4)),
    Form("pt_log_sigmoid", f"{PT_MATH}::TestSoftplusRewrites::test_logsigm_to_softplus",
         "log(sigmoid(x))", points=single(*SIGMOID_POINTS)),
    Form("pt_log1m_sigmoid", f"{PT_MATH}::TestSoftplusRewrites::test_log1msigm_to_softplus, "
         "TestSigmoidRewrites::test_grad_log1msigm (x = 50)", "log(1 - sigmoid(x))",
         points=single(*SIGMOID_POINTS, 50)),
    Form("pt_log1p_neg_sigmoid",
         f"{PT_MATH}::TestSoftplusRewrites::test_log1p_neg_sigmoid_to_softpuls (x = 37)",
         "log1p(-sigmoid(x))", points=single(*SIGMOID_POINTS)),
    Form("pt_exp_over_1_plus_exp", f"{PT_MATH}::TestSigmoidRewrites::test_exp_over_1_plus_exp",
         "exp(x)/(1 + exp(x))", points=single(*SIGMOID_POINTS)),
    Form("pt_neg_sigmoid_squared",
         f"{PT_MATH}::TestSigmoidRewrites::test_exp_over_1_plus_exp (double inv_1_plus_exp "
         "with neg)", "-exp(x)/((1 + exp(x))*(1 + exp(-x)))", points=single(*SIGMOID_POINTS)),
    Form("pt_1m_exp_over_1_plus_exp", f"{PT_MATH}::TestSigmoidRewrites::test_local_1msigmoid",
         "1 - exp(x)/(1 + exp(x))", points=single(*SIGMOID_POINTS)),
    Form("pt_sigmoid_neg_times_exp",
         f"{PT_MATH}::TestSigmoidRewrites::test_local_sigm_times_exp", "sigmoid(-x)*exp(x)",
         points=single(*SIGMOID_POINTS)),
    Form("pt_sigmoid_times_exp_neg",
         f"{PT_MATH}::TestSigmoidRewrites::test_local_sigm_times_exp", "sigmoid(x)*exp(-x)",
         points=single(*SIGMOID_POINTS)),
    Form("pt_reciprocal_1_plus_exp", f"{PT_MATH}::test_local_reciprocal_1_plus_exp",
         "1/(1 + exp(x))", points=single(*SIGMOID_POINTS)),
    Form("pt_odds_sigmoid", f"{PT_MATH}::test_local_odds_sigmoid (x = 0.5; 1 - sigmoid "
         "cancels for x >~ 37)", "sigmoid(x)/(1 - sigmoid(x))",
         points=single(-80, -37, -20, 0, 0.5, 20, 37, 50, 80, 700)),
    Form("pt_inv_odds_sigmoid", f"{PT_MATH}::test_local_odds_sigmoid (inverse)",
         "(1 - sigmoid(x))/sigmoid(x)",
         points=single(-700, -80, -50, -37, -20, 0, 0.5, 20, 37, 80)),
    Form("pt_logit_of_sigmoid", f"{PT_MATH}::test_local_logit_sigmoid (logit(sigmoid(x)))",
         "log(sigmoid(x)/(1 - sigmoid(x)))",
         points=single(-1e4, -100, -37, -20, 0, 0.5, 20, 37, 100, 1e4)),
    Form("pt_sigmoid_of_logit", f"{PT_MATH}::test_local_logit_sigmoid (sigmoid(logit(x)))",
         "sigmoid(log(x/(1 - x)))", points=single(1e-30, 1e-7, 0.25, 0.5, 0.9, 0.9999999),
         note="0 < x < 1"),
    Form("pt_one_plus_erf", f"{PT_MATH}::TestLocalErf::test_local_one_plus_erf", "1 + erf(x)",
         points=single(*ERF_POINTS)),
    Form("pt_one_minus_erf", f"{PT_MATH}::TestLocalErf::test_local_one_minus_erf",
         "1 - erf(x)", points=single(*ERF_POINTS)),
    Form("pt_erf_minus_one", f"{PT_MATH}::TestLocalErf::test_local_erf_minus_one",
         "erf(x) - 1", points=single(*ERF_POINTS)),
    Form("pt_one_minus_erfc", f"{PT_MATH}::TestLocalErfc::test_local_one_minus_erfc",
         "1 - erfc(x)", points=single(*ERF_POINTS, 1e-5, -1e-30)),
    Form("pt_erfc_neg_minus_one", f"{PT_MATH}::TestLocalErfc::test_local_erf_neg_minus_one",
         "erfc(-x) - 1", points=single(*ERF_POINTS, 1e-5, -1e-30)),
    Form("pt_log_erfc", f"{PT_MATH}::TestLocalErfc::test_local_log_erfc (local_log_erfc)",
         "log(erfc(x))",
         points=single(-30, -27, -26, -11, -10, -3, -2, -1, 0, 1, 2, 3, 10, 11, 26, 27, 28,
                       30, 100, 1e4)),
    Form("pt_exp_sq_over_erfc",
         f"{PT_MATH}::TestLocalErfc::test_local_grad_log_erfc_neg (local_grad_log_erfc_neg)",
         "exp(-x**2)/erfc(x)",
         points=single(-100, -30, -10, -3, 0, 1, 3, 9, 10, 11, 26, 26.4, 27, 30, 100)),
    Form("pt_log_sqrt", f"{PT_MATH}::test_log_sqrt (local_log_sqrt)", "log(sqrt(x))",
         points=single(1e-30, 1e-3, 1, 1e4, 1e30), note="x > 0"),
    Form("pt_sqrt_sqr", f"{PT_MATH}::TestSqrSqrt::test_sqrt_sqr (local_sqrt_sqr)",
         "sqrt(x**2)",
         points=single(-1e30, -1e20, -3, -1e-30, 1e-30, 1e-20, 2, 1e4, 1e20, 1e30),
         note="kink at 0 (not checked); x**2 overflows or underflows where |x| does not"),
    Form("pt_sqr_sqrt", f"{PT_MATH}::TestSqrSqrt::test_sqr_sqrt", "sqrt(x)**2",
         points=single(0, 1e-30, 1e-3, 1, 1e4, 1e30), note="x >= 0 (one-sided at 0)"),
    Form("pt_exp_log", f"{PT_MATH}::TestExpLog::test_exp_log (edge case 0)", "exp(log(x))",
         points=single(0, 1e-30, 0.5, 1, 1e4, 1e30), note="x >= 0"),
    Form("pt_log_exp", f"{PT_MATH}::TestExpLog::test_log_exp", "log(exp(x))",
         points=single(-1e4, -100, 0, 100, 1e4)),
    Form("pt_log1p_expm1", f"{PT_MATH}::TestExpLog::test_log1p_expm1", "log1p(expm1(x))",
         points=single(-1e4, -100, -1, 0, 1e-30, 1, 100, 1e4)),
    Form("pt_expm1_log", f"{PT_MATH}::TestExpLog::test_exp_log[expm1] (edge case 0)",
         "expm1(log(x))", points=single(0, 1e-30, 0.5, 1, 1e4), note="x >= 0"),
    Form("pt_exp_log1p", f"{PT_MATH}::TestExpLog::test_exp_log1p (edge case -1)",
         "exp(log1p(x))", points=single(-1, -0.5, -1e-30, 0, 1e-30, 1, 1e4), note="x >= -1"),
    Form("pt_expm1_log1p", f"{PT_MATH}::TestExpLog::test_exp_log1p[expm1] (edge case -1)",
         "expm1(log1p(x))", points=single(-1, -0.5, -1e-30, 0, 1e-30, 1, 1e4),
         note="x >= -1"),
    Form("pt_exp_softplus", f"{PT_MATH}::TestExpLog::test_exp_softplus", "exp(softplus(x))",
         points=single(-1e4, -100, -20, 0, 20, 80, 700)),
    Form("pt_expm1_softplus", f"{PT_MATH}::TestExpLog::test_exp_softplus[expm1]",
         "expm1(softplus(x))", points=single(-1e4, -700, -100, -20, 0, 20, 80, 700)),
    Form("pt_log_reciprocal", f"{PT_MATH}::test_log_reciprocal", "log(1/x)",
         points=single(1e-30, 1e-3, 1, 1e4, 1e30), note="x > 0"),
    Form("pt_log_div_const", f"{PT_MATH}::test_log_div_constant_keeps_precision (k = 2)",
         "log(x/2)", points=single(1e-30, 1e-3, 2, 1e4, 1e30), note="x > 0"),
    Form("pt_log_sum_exp", f"{PT_SPECIAL}::test_local_log_sum_exp_large ([-800, 800], "
         "[-800, -805]); also Stan prim/fun/log_sum_exp_test.cpp, SciPy test_logsumexp.py",
         "log(sum(exp(x), axis=-1))", rows=("x",), points=LSE_ROWS),
    Form("pt_softmax", f"{PT_SPECIAL}::test_softmax_graph; also SciPy test_logsumexp.py::"
         "TestSoftmax (fixtures, multi_axes), JAX nn_test.py::testSoftmaxGrad",
         "exp(x)/sum(exp(x), axis=-1, keepdims=True)", rows=("x",), points=SOFTMAX_ROWS),
    Form("pt_log_softmax", f"{PT_SPECIAL}::test_local_logsoftmax_rewrite, "
         "test_local_logsoftmax_grad_rewrite; also SciPy test_log_softmax_array_like "
         "([1000, 1]), Stan prim/fun/log_softmax_test.cpp",
         "log(exp(x)/sum(exp(x), axis=-1, keepdims=True))", rows=("x",), points=SOFTMAX_ROWS),
    Form("pt_log_softmax_from_lse", f"{PT_SPECIAL}::test_local_log_softmax_from_logsumexp",
         "x - log(sum(exp(x), axis=-1, keepdims=True))", rows=("x",), points=SOFTMAX_ROWS),
    Form("pt_exp_log_softmax", f"{PT_SPECIAL}::test_local_exp_log_softmax_rewrite",
         "exp(x - log(sum(exp(x), axis=-1, keepdims=True)))", rows=("x",),
         points=SOFTMAX_ROWS),
    Form("pt_lse_max_shift", f"{PT_SPECIAL}::test_local_log_sum_exp_maximum (the rewrite's "
         "max-shifted form)",
         "max(x, axis=-1) + log(sum(exp(x - max(x, axis=-1, keepdims=True)), axis=-1))",
         rows=("x",), points=LSE_ROWS, reference="log(sum(exp(x), axis=-1))",
         note="the max's own kink cancels: the gradient is softmax(x) even at ties"),
    # ------------------------------------------------------------------ SciPy
    Form("sp_logit", f"{SCIPY}/test_logit.py::TestLogit (float32 and float64 witnesses); also "
         "PyTensor test_local_logit_sigmoid (logit_fn)", "log(p/(1 - p))", ("p",),
         single(1e-30, 1e-8, 1e-4, 1 / 9, 0.49999, 0.4999999999999, 0.5, 0.50001,
                0.50000000001, 0.9999, 0.9999999), note="0 < p < 1"),
    Form("sp_log_expit", f"{SCIPY}/test_logit.py::TestLogExpit", "-log(1 + exp(-x))",
         points=single(-1e4, -750, -500, -35, -32, -20, -1e-9, 0, 1e-9, 0.1, 100, 500, 710,
                       725, 735, 1e4)),
    Form("sp_expit", f"{SCIPY}/test_logit.py::TestExpit::test_large; also JAX "
         "lax_scipy_test.py::testIssue980 (-1e20), PyTensor test_exp_over_1_plus_exp "
         "(inv_1_plus_exp)", "1/(1 + exp(-x))",
         points=single(-1e20, -11357, -710, -89, -88, -4, 0, 4, 88, 89, 709, 710, 11356,
                       1e20)),
    Form("sp_xlogy", f"{SCIPY}/test_basic.py::test_xlogy; also JAX lax_scipy_test.py::"
         "testGradOfXlogyAtZero (0, 3), Stan prim/fun/lmultiply_test.cpp (0, 0)",
         "x*log(y)", ("x", "y"),
         [(0.0, 0.0), (0.0, 3.0), (1.0, 2.0), (2.0, 3.0), (1e-30, 1e-30), (1e4, 1e-30),
          (0.5, 1e30)],
         note="y >= 0; at (0, 0) d/dx = log(0) is infinite (skipped), d/dy = 0 (f(0, y) = 0)"),
    Form("sp_xlog1py", f"{SCIPY}/test_basic.py::test_xlog1py (1, 1e-30); also JAX "
         "lax_scipy_test.py::testGradOfXlog1pyAtZero, testXlog1pyShouldReturnZero (0, -1)",
         "x*log(1 + y)", ("x", "y"),
         [(0.0, 0.0), (0.0, -1.0), (0.0, 3.0), (1.0, 2.0), (1.0, 1e-30), (2.0, -0.5),
          (1e4, 1e-20)],
         note="y >= -1; at (0, -1) d/dx is infinite (skipped), d/dy = 0"),
    Form("sp_entr", f"{SCIPY}/test_basic.py::test_entr; also JAX lax_scipy_test.py::"
         "testGradOfEntrAtZero", "-x*log(x)", points=single(0, 1e-30, 1e-3, 0.5, 1, 1e4, 1e30),
         note="x >= 0; the gradient at 0 is +inf (skipped)"),
    Form("sp_rel_entr", f"{SCIPY}/test_basic.py::test_rel_entr_gh_20710_near_zero, "
         "test_rel_entr_gh_20710_overflow", "x*log(x/y)", ("x", "y"),
         [(0.9456657713430001, 0.9456657713430094), (0.48066098564791515, 0.48066098564794774),
          (0.786048657854401, 0.7860486578542367), (4.0, 2.22e-308), (1e-200, 1e200),
          (2.22e-308, 1e15), (0.5, 1.0), (1.0, 0.5), (0.0, 0.5)],
         note="x >= 0, y > 0"),
    Form("sp_kl_div", f"{SCIPY}/test_basic.py::test_kl_div", "x*log(x/y) - x + y", ("x", "y"),
         [(0.5, 1.0), (1.0, 0.5), (0.0, 0.5), (1e-30, 1.0), (1.0, 1.0), (1e4, 1e-4)],
         note="x >= 0, y > 0"),
    Form("sp_pseudo_huber", f"{SCIPY}/test_basic.py::test_pseudo_huber, "
         "test_pseudo_huber_small_r (1, 1e-18)", "d**2*(sqrt(1 + (r/d)**2) - 1)", ("d", "r"),
         [(1.0, 1e-18), (0.5, 0.0), (1.0, 0.5), (1.0, -3.0), (1.0, 1e-5), (2.0, 1e4),
          (1e-3, 1e4), (1.0, 1e20)], note="d > 0"),
    Form("sp_huber", f"{SCIPY}/test_basic.py::test_huber",
         "Piecewise((r**2/2, Abs(r) <= d), (d*(Abs(r) - d/2), True))", ("d", "r"),
         [(2.0, 1.5), (2.0, 2.5), (2.0, -2.5), (1.0, 0.3), (1.0, 1e4), (1e-3, -1e4),
          (1.5, 0.5)], note="d > 0; C1, so no kink at |r| = d"),
    Form("sp_log_ndtr", f"{SCIPY}/test_ndtr.py::TestLogNdtr", "log(erfc(-x/sqrt(2))/2)",
         points=single(-40, -20, -10, -5, -0.75, -0.25, 0, 0.5, 1.5, 3, 5, 8, 8.5, 10, 16,
                       20.3, 30.9, 37.1)),
    Form("sp_cosm1", f"{SCIPY}/test_basic.py::test_cosm1 (0, 0.3, pi/10)", "cos(x) - 1",
         points=single(-1e4, -1, 1e-30, 1e-8, 1e-4, 0.3, math.pi / 10, 3, 1e4)),
    Form("sp_powm1", f"{SCIPY}/test_powm1.py::test_powm1", "x**y - 1", ("x", "y"),
         [(1.25, 0.75), (2.0, 1e-7), (25.0, 5e-11), (0.99996, 0.75),
          (0.9999999999990905, 20.0), (1e4, 0.5), (3.0, -2.0), (0.5, 1e-30)],
         note="x > 0"),
    Form("sp_boxcox", f"{SCIPY}/test_boxcox.py::test_boxcox_basic (lmbda = 0), "
         "test_boxcox_underflow", "(x**l - 1)/l", ("x", "l"),
         [(0.5, 0.0), (1.0, 0.0), (2.0, 0.0), (4.0, 0.0), (2.0, 1.0), (2.0, 2.0),
          (1 + 1e-15, 1e-306), (4.0, 1e-10), (0.5, -1.5), (3.0, 1e-20)],
         note="x > 0; at l = 0 the formula is 0/0 (limit log(x))"),
    Form("sp_boxcox1p", f"{SCIPY}/test_boxcox.py::test_boxcox1p_basic, "
         "test_boxcox1p_underflow", "((1 + x)**l - 1)/l", ("x", "l"),
         [(-0.25, 0.0), (-1e-20, 0.0), (1e-20, 0.0), (0.25, 0.0), (1.0, 0.0), (3.0, 0.0),
          (1e-15, 1e-306), (1e-306, 1e-18), (-0.25, 2.0), (3.0, 0.5)],
         note="x > -1; at l = 0 the formula is 0/0 (limit log1p(x))"),
    # ------------------------------------------------------------------ JAX
    Form("jx_squareplus", f"{JAX_NN}::testSquareplusGrad (1e-8), testSquareplusGradZero, "
         "testSquareplusValue (1e3)", "(x + sqrt(x**2 + 4))/2",
         points=single(-1e20, -1e4, -100, -1, 0, 1e-8, 1, 1e3, 1e4, 1e20)),
    Form("jx_mish", f"{JAX_NN}::testMishGrad (1e-8), testMishGradZero, testMishValue (1e3)",
         "x*tanh(log(1 + exp(x)))",
         points=single(-1e4, -100, -20, -1, 0, 1e-8, 1, 20, 100, 1e3, 1e4)),
    Form("jx_elu", f"{JAX_NN}::testEluGrad (1e4), testEluValue", "where(x > 0, x, exp(x) - 1)",
         points=single(-1e4, -100, -1, -1e-5, -1e-30, 0, 1e-30, 1, 1e4)),
    Form("jx_gelu_tanh", f"{JAX_NN}::testGelu (approximate=True)",
         "0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x**3)))",
         points=single(-1e4, -100, -10, -5, -1, 0, 1, 5, 10, 100, 1e4)),
    Form("jx_gelu_erf", f"{JAX_NN}::testGelu (approximate=False)", "0.5*x*(1 + erf(x/sqrt(2)))",
         points=single(-1e4, -100, -10, -5, -1, 0, 1, 5, 10, 100, 1e4)),
    Form("jx_log1mexp", f"{JAX_NN}::testLog1mExp, testLog1mExpGrad", "log(1 - exp(-x))",
         points=single(1e-40, 1e-20, 1e-5, 1e-2, 0.1, 1, 1.1, 10, 100, 1e4), note="x > 0"),
    Form("jx_logmeanexp", f"{JAX_NN}::testLogMeanExp", "log(mean(exp(x), axis=-1))",
         rows=("x",), points=LSE_ROWS),
    Form("jx_standardize_fast", f"{JAX_NN}::testStandardizeNegativeVariance "
         "([-11]*3 + 3e-6), testStandardizeStableAlgorithm (algorithm='fast')",
         "(x - mean(x, axis=-1, keepdims=True))/sqrt(mean(x**2, axis=-1, keepdims=True) "
         "- mean(x, axis=-1, keepdims=True)**2 + 1e-5)", rows=("x",), points=STANDARDIZE_ROWS),
    Form("jx_standardize_stable", f"{JAX_NN}::testStandardizeStableAlgorithm "
         "([1e6, 1e6 + 1, 1e6 + 2])",
         "(x - mean(x, axis=-1, keepdims=True))/sqrt(mean((x - mean(x, axis=-1, "
         "keepdims=True))**2, axis=-1, keepdims=True) + 1e-5)", rows=("x",),
         points=STANDARDIZE_ROWS),
    Form("jx_glu", f"{JAX_NN}::testGluValue ([1, 0] -> 0.5)", "a/(1 + exp(-b))", ("a", "b"),
         [(1.0, 0.0), (1.0, -1e4), (1.0, 1e4), (-3.0, 100.0), (2.0, -100.0), (1e4, 20.0)]),
    Form("jx_relu6", f"{JAX_NN}::testRelu6Grad", "Min(Max(x, 0), 6)",
         points=single(-1e4, -1, 1e-30, 1, 3, 5.9, 7, 1e4),
         reference="Piecewise((0, x < 0), (x, x < 6), (6, True))",
         note="kinks at 0 and 6 not checked (JAX takes 0 there, gradgen splits ties 1/2)"),
    Form("jx_sparse_plus", f"{JAX_NN}::testSparseplusGrad (0), testSparseplusGradZero (-2), "
         "testSparseplusValue (89)", "Piecewise((0, x <= -1), ((x + 1)**2/4, x < 1), (x, True))",
         points=single(-1e4, -2, -0.5, 0, 0.5, 2, 89, 1e4)),
    # ------------------------------------------------------------------ Stan
    Form("st_log1m_exp", f"{STAN}/prim/fun/log1m_exp_test.cpp, mix/fun/log1m_exp_test.cpp; "
         "also PyTensor test_log1mexp_stabilization[log_1_minus_exp], SciPy "
         "test_log1mexp.py::test_log1mexp", "log(1 - exp(x))",
         points=single(*LOG1MEXP_POINTS, -1e10, -14, -12.6, -0.2), note="x < 0"),
    Form("st_log_diff_exp", f"{STAN}/prim/fun/log_diff_exp_test.cpp, mix/fun/"
         "log_diff_exp_test.cpp; also PyTensor test_logdiffexp_stabilization",
         "log(exp(x) - exp(y))", ("x", "y"),
         [(3.0, 2.0), (4.0, 1.0), (0.0, -2.1), (-20.0, -23.0), (-21.2, -32.1), (1e4, 0.0),
          (0.0, -1e4), (2.0, -15.0), (-2.0, -15.0), (0.1, 0.0), (120.1, 120.0), (1.2, 0.5),
          (9.0, 6.0), (3.01, 2.0)], note="x > y"),
    Form("st_log_sum_exp2", f"{STAN}/prim/fun/log_sum_exp_test.cpp (log_sum_exp_2), "
         "mix/fun/log_sum_exp_test.cpp; also PyTensor test_special.py::test_local_log_add_exp",
         "log(exp(x) + exp(y))", ("x", "y"),
         [(1.0, 2.0), (1.0, 1.0), (-20.0, 12.0), (1e4, 0.0), (-1e4, 0.0), (1000.0, 10.0),
          (2.0, -15.0), (-2.0, 15.0), (10.0, 10.0), (1e4, 1e4), (-1e4, -1e4)]),
    Form("st_log1p_exp", f"{STAN}/prim/fun/log1p_exp_test.cpp (+-1e4), mix/fun/"
         "log1p_exp_test.cpp; also PyTensor rewrite local_log1p_plusminus_exp",
         "log1p(exp(x))", points=single(-1e4, -2.6, -0.5, 0.1, 3, 5.5, 100, 1e4)),
    Form("st_log_inv_logit", f"{STAN}/prim/fun/log_inv_logit_test.cpp",
         "log(1/(1 + exp(-x)))", points=single(-1e4, -100, -7.2, -1, 0, 1.9, 20, 100, 1e4)),
    Form("st_log1m_inv_logit", f"{STAN}/prim/fun/log1m_inv_logit_test.cpp, mix/fun/"
         "log1m_inv_logit_test.cpp", "log(1 - 1/(1 + exp(-x)))",
         points=single(-1e4, -100, -7.2, -2.6, 0, 1.9, 5, 20, 100, 1e4)),
    Form("st_logit", f"{STAN}/prim/fun/logit_test.cpp (logit(inv_logit(5))), mix/fun/"
         "logit_test.cpp", "log(u) - log(1 - u)", ("u",),
         single(1e-30, 1e-8, 0.01, 0.5, 0.99, 1 / (1 + math.exp(-5)), 0.9999999),
         note="0 < u < 1"),
    Form("st_hypot", f"{STAN}/prim/fun/hypot_test.cpp, mix/fun/hypot_test.cpp",
         "sqrt(x**2 + y**2)", ("x", "y"),
         [(3.0, 4.0), (0.5, 0.0), (0.5, 2.3), (0.5001, 1.0001), (3.0, 6.0), (0.0, 0.0),
          (1e4, 1e4), (1e20, 1e20), (1e-30, 2e-30), (-1e200, 1e200)],
         conventions={(0.0, 0.0): (0.0, 0.0)},
         note="(0, 0): the subgradient 0 (README sqrt_zero/norm_zero)"),
    Form("st_log_inv_logit_diff", f"{STAN}/prim/fun/log_inv_logit_diff_test.cpp",
         "log(1/(1 + exp(-x)) - 1/(1 + exp(-y)))", ("x", "y"),
         [(2.15, 1.71), (-7.62, -10.15), (1.8, 0.3), (3.24, 0.7), (4.2, -2.8), (40.0, 39.0),
          (-100.0, -101.0), (1e4, 0.0)], note="x > y"),
    Form("st_log_mix", f"{STAN}/prim/fun/log_mix_test.cpp (log_mix_values)",
         "log(t*exp(a) + (1 - t)*exp(b))", ("t", "a", "b"),
         [(0.3, 1.7, -3.9), (0.0001, 197.0, -3000.0), (0.999999, 197.0, -3000.0),
          (0.1, -5.65, -7.62), (0.5, 1e4, 0.0), (0.5, -1e4, -1e4)], note="0 <= t <= 1"),
    Form("st_binary_log_loss", f"{STAN}/prim/fun/binary_log_loss_test.cpp",
         "-y*log(p) - (1 - y)*log(1 - p)", ("y", "p"),
         [(0.0, 0.0), (1.0, 1.0), (0.0, 0.5), (1.0, 0.5), (0.0, 0.25), (1.0, 0.75),
          (1.0, 1e-30), (0.0, 0.9999999)],
         note="0 <= p <= 1; at p = 0 or 1 d/dy is infinite (skipped)"),
    Form("st_phi_approx", f"{STAN}/prim/fun/Phi_approx_test.cpp (0, 0.9, -5)",
         "1/(1 + exp(-(0.07056*x**3 + 1.5976*x)))",
         points=single(-1e4, -40, -37.5, -5, 0, 0.9, 5, 40, 1e4)),
    Form("st_inv_cloglog", f"{STAN}/prim/fun/inv_cloglog_test.cpp (3.7, 0, -2.93)",
         "1 - exp(-exp(x))", points=single(-1e4, -40, -2.93, 0, 3.7, 5, 100)),
    # ------------------------------------------------------------------ Herbie
    Form("hb_2sqrt", f"{HERBIE}/rearrangement.fpcore \"2sqrt (example 3.1)\"",
         "sqrt(x + 1) - sqrt(x)", points=single(*LARGE_X), note="1 < x < 1e308"),
    Form("hb_2isqrt", f"{HERBIE}/rearrangement.fpcore \"2isqrt (example 3.6)\"",
         "1/sqrt(x) - 1/sqrt(x + 1)", points=single(*LARGE_X), note="1 < x < 1e308"),
    Form("hb_2frac", f"{HERBIE}/rearrangement.fpcore \"2frac (problem 3.3.1)\"",
         "1/(x + 1) - 1/x", points=single(-1e8, -1e4, 0.5, 2, 1e4, 1e8, 1e15)),
    Form("hb_3frac", f"{HERBIE}/rearrangement.fpcore \"3frac (problem 3.3.3)\"",
         "1/(x + 1) - 2/x + 1/(x - 1)", points=single(-1e5, -3, 2, 1e3, 1e5, 1e8),
         note="|x| > 1"),
    Form("hb_2cbrt", f"{HERBIE}/rearrangement.fpcore \"2cbrt (problem 3.3.4)\"",
         "(x + 1)**(1/3) - x**(1/3)", points=single(1.5, 1e4, 1e8, 1e15, 1e30),
         note="1 < x < 1e308"),
    Form("hb_2log", f"{HERBIE}/rearrangement.fpcore \"2log (problem 3.3.6)\"",
         "log(N + 1) - log(N)", ("N",), single(1.5, 1e4, 1e8, 1e15, 1e30),
         note="1 < N < 1e40"),
    Form("hb_exp2", f"{HERBIE}/rearrangement.fpcore \"exp2 (problem 3.3.7)\"",
         "exp(x) - 2 + exp(-x)", points=single(-700, -50, -1, -1e-5, 1e-8, 1e-3, 1, 50, 700),
         note="|x| <= 710"),
    Form("hb_expm1", f"{HERBIE}/series.fpcore \"expm1 (example 3.7)\"", "exp(x) - 1",
         points=single(-1, -1e-10, 1e-30, 1e-8, 1e-3, 0.5, 1), note="|x| <= 1"),
    Form("hb_logs", f"{HERBIE}/series.fpcore \"logs (example 3.8)\"",
         "(n + 1)*log(n + 1) - n*log(n) - 1", ("n",), single(6.8e15, 1e17, 1e20, 1e30),
         note="n > 6.8e15"),
    Form("hb_invcot", f"{HERBIE}/series.fpcore \"invcot (example 3.9)\"", "1/x - 1/tan(x)",
         points=single(-0.02, -1e-5, 1e-10, 1e-5, 1e-3, 0.02), note="|x| < 0.026"),
    Form("hb_qlog", f"{HERBIE}/series.fpcore \"qlog (example 3.10)\"",
         "log(1 - x)/log(1 + x)", points=single(-0.9, -0.5, -1e-10, 1e-30, 1e-5, 0.5, 0.9),
         note="|x| < 1"),
    Form("hb_cos2", f"{HERBIE}/series.fpcore \"cos2 (problem 3.4.1)\"", "(1 - cos(x))/(x*x)",
         points=single(0, 1e-30, 1e-8, 1e-4, 1, 3, 1e4), note="0/0 at 0 (limit 1/2)"),
    Form("hb_expq3", f"{HERBIE}/series.fpcore \"expq3 (problem 3.4.2)\"",
         "eps*(exp((a + b)*eps) - 1)/((exp(a*eps) - 1)*(exp(b*eps) - 1))", ("a", "b", "eps"),
         [(1.0, 2.0, 1e-10), (100.0, -3.0, 1e-5), (5.0, 7.0, 0.1), (-2.0, 3.0, 1e-20),
          (300.0, 400.0, 1.0)], note="|a|, |b| <= 710, 1e-27 min(|a|, |b|) <= eps"),
    Form("hb_logq", f"{HERBIE}/series.fpcore \"logq (problem 3.4.3)\"",
         "log((1 - eps)/(1 + eps))", ("eps",),
         single(-0.999, -0.5, -1e-8, 1e-30, 1e-5, 0.5, 0.999), note="|eps| < 1"),
    Form("hb_sqrtexp", f"{HERBIE}/series.fpcore \"sqrtexp (problem 3.4.4)\"",
         "sqrt((exp(2*x) - 1)/(exp(x) - 1))",
         points=single(-1e4, -1, -1e-8, 0, 1e-8, 1, 40, 80, 400), note="0/0 at 0"),
    Form("hb_2nthrt", f"{HERBIE}/series.fpcore \"2nthrt (problem 3.4.6)\"",
         "(x + 1)**(1/n) - x**(1/n)", ("x", "n"),
         [(1.0, 2.0), (0.5, 5.0), (1e4, 3.0), (1e10, 2.0), (1e-30, 3.0), (2.0, 1e4)],
         note="x > 0"),
    Form("hb_2sin", f"{HERBIE}/trigonometry.fpcore \"2sin (example 3.3)\"",
         "sin(x + eps) - sin(x)", ("x", "eps"),
         [(1.0, 1e-10), (0.5, 0.1), (-2.0, 1e-5), (1e4, 1e-8), (3.0, 1e-15)],
         note="|x| <= 1e4, 1e-16 |x| < eps < |x|"),
    Form("hb_2cos", f"{HERBIE}/trigonometry.fpcore \"2cos (problem 3.3.5)\"",
         "cos(x + eps) - cos(x)", ("x", "eps"),
         [(1.0, 1e-10), (0.5, 0.1), (-2.0, 1e-5), (1e4, 1e-8), (3.0, 1e-15)],
         note="|x| <= 1e4, 1e-16 |x| < eps < |x|"),
    Form("hb_2tan", f"{HERBIE}/trigonometry.fpcore \"2tan (problem 3.3.2)\"",
         "tan(x + eps) - tan(x)", ("x", "eps"),
         [(1.0, 1e-10), (0.5, 0.1), (-1.0, 1e-5), (1e4, 1e-8), (1.5, 1e-12)],
         note="|x| <= 1e4, 1e-16 |x| < eps < |x|"),
    Form("hb_tanhf", f"{HERBIE}/trigonometry.fpcore \"tanhf (example 3.4)\"",
         "(1 - cos(x))/sin(x)", points=single(-1, -1e-8, 0, 1e-30, 1e-8, 1e-3, 1, 3),
         note="0/0 at 0 (limit 0)"),
    Form("hb_2atan", f"{HERBIE}/trigonometry.fpcore \"2atan (example 3.5)\"",
         "atan(N + 1) - atan(N)", ("N",), single(1.5, 1e4, 1e8, 1e20, 1e50),
         note="1 < N < 1e100"),
    Form("hb_sintan", f"{HERBIE}/trigonometry.fpcore \"sintan (problem 3.4.5)\"",
         "(eps - sin(eps))/(eps - tan(eps))", ("eps",),
         single(-0.4, -0.1, -1e-3, 1e-8, 1e-3, 0.1, 0.4), note="|eps| <= 0.4"),
    Form("hb_expq2", f"{HERBIE}/overflow-underflow.fpcore \"expq2 (section 3.11)\"",
         "exp(x)/(exp(x) - 1)", points=single(-1e4, -50, -1e-5, 1e-10, 1, 100, 700),
         note="x < 710"),
    Form("hb_expax", f"{HERBIE}/overflow-underflow.fpcore \"expax (section 3.5)\"",
         "exp(a*x) - 1", ("a", "x"),
         [(1e-10, 2.0), (3.0, 1e-20), (2.0, 0.5), (-1e4, 1.0), (1e-5, 1e-5), (100.0, 1.0)],
         note="a*x < 710"),
]


# ------------------------------------------------------------------ the exact values


class Row:
    """The values of one row of a [null, 3] input (or of an expression of rows)."""

    def __init__(self, items):
        self.items = tuple(items)

    def _map(self, other, f):
        if isinstance(other, Row):
            return Row(f(a, b) for a, b in zip(self.items, other.items))
        return Row(f(a, other) for a in self.items)

    def __add__(self, o):
        return self._map(o, lambda a, b: a + b)

    def __radd__(self, o):
        return self._map(o, lambda a, b: b + a)

    def __sub__(self, o):
        return self._map(o, lambda a, b: a - b)

    def __rsub__(self, o):
        return self._map(o, lambda a, b: b - a)

    def __mul__(self, o):
        return self._map(o, lambda a, b: a * b)

    def __rmul__(self, o):
        return self._map(o, lambda a, b: b * a)

    def __truediv__(self, o):
        return self._map(o, lambda a, b: a / b)

    def __rtruediv__(self, o):
        return self._map(o, lambda a, b: b / a)

    def __pow__(self, o):
        return self._map(o, lambda a, b: a**b)

    def __rpow__(self, o):
        return self._map(o, lambda a, b: b**a)

    def __neg__(self):
        return Row(-a for a in self.items)

    def __gt__(self, o):
        return self._map(o, lambda a, b: a > b)

    def __lt__(self, o):
        return self._map(o, lambda a, b: a < b)

    def __ge__(self, o):
        return self._map(o, lambda a, b: a >= b)

    def __le__(self, o):
        return self._map(o, lambda a, b: a <= b)


def _elementwise(f):
    def apply(*args):
        n = next((len(a.items) for a in args if isinstance(a, Row)), None)
        if n is None:
            return f(*args)
        cols = [a.items if isinstance(a, Row) else (a,) * n for a in args]
        return Row(f(*c) for c in zip(*cols))

    return apply


def _reduction(f):
    def apply(a, axis=None, keepdims=False):
        return f(a.items) if isinstance(a, Row) else f((a,))

    return apply


def _log(u, base=None):
    return sympy.log(u) if base is None else sympy.log(u) / sympy.log(base)


def _lse(items):
    return sympy.log(sympy.Add(*(sympy.exp(t) for t in items)))


def _namespace():
    s = sympy
    unary = {
        "exp": s.exp, "sqrt": s.sqrt, "sin": s.sin, "cos": s.cos, "tan": s.tan,
        "asin": s.asin, "acos": s.acos, "atan": s.atan, "sinh": s.sinh, "cosh": s.cosh,
        "tanh": s.tanh, "asinh": s.asinh, "acosh": s.acosh, "atanh": s.atanh, "erf": s.erf,
        "erfc": s.erfc, "Abs": s.Abs, "abs": s.Abs, "sign": s.sign, "floor": s.floor,
        "ceiling": s.ceiling, "log1p": lambda u: s.log(1 + u),
        "expm1": lambda u: s.exp(u) - 1, "sigmoid": lambda u: 1 / (1 + s.exp(-u)),
        "softplus": lambda u: s.log(1 + s.exp(u)),
    }
    ns = {k: _elementwise(f) for k, f in unary.items()}
    ns.update(
        log=_elementwise(_log), atan2=_elementwise(s.atan2), Max=_elementwise(s.Max),
        Min=_elementwise(s.Min), where=_elementwise(lambda c, a, b: s.Piecewise((a, c), (b, True))),
        Piecewise=s.Piecewise, pi=s.pi, E=s.E, _num=s.Rational,
        sum=_reduction(lambda t: s.Add(*t)), mean=_reduction(lambda t: s.Add(*t) / len(t)),
        max=_reduction(lambda t: s.Max(*t)), min=_reduction(lambda t: s.Min(*t)),
        logsumexp=_reduction(_lse),
        softmax=lambda a, axis=None: Row(s.exp(t) / s.Add(*(s.exp(u) for u in a.items))
                                         for t in a.items),
        log_softmax=lambda a, axis=None: Row(t - _lse(a.items) for t in a.items),
    )
    return ns


class _Exact(ast.NodeTransformer):
    """Number literals become exact rationals: 1/3 is 1/3, 0.044715 is 44715/10**6."""

    def visit_Constant(self, node):
        if isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            text = repr(node.value)
            return ast.copy_location(
                ast.Call(ast.Name("_num", ast.Load()), [ast.Constant(text)], []), node)
        return node


def symbols_of(form: Form) -> tuple[dict, list]:
    """{input: SymPy symbol or Row of symbols}, and the flat list of symbols."""
    env, flat = {}, []
    for name in form.inputs:
        if name in form.rows:
            syms = [sympy.Symbol(f"{name}_{j}", real=True) for j in range(ROW)]
            env[name] = Row(syms)
            flat.extend(syms)
        else:
            env[name] = sympy.Symbol(name, real=True)
            flat.append(env[name])
    return env, flat


def sympy_of(form: Form):
    """The form's exact output: a SymPy expression, or a Row of them (row outputs)."""
    env, _ = symbols_of(form)
    tree = ast.fix_missing_locations(_Exact().visit(ast.parse(form.reference or form.expression,
                                                              mode="eval")))
    ns = _namespace()
    ns.update(env)
    return eval(compile(tree, "<form>", "eval"), {"__builtins__": {}}, ns)  # our own table


class _Timeout(Exception):
    pass


def _with_timeout(seconds, f, *args):
    """f(*args), or None after ``seconds`` (a SymPy limit can take very long)."""

    def alarm(signum, frame):
        raise _Timeout()

    try:
        old = signal.signal(signal.SIGALRM, alarm)
    except ValueError:  # not the main thread: no timeout
        return f(*args)
    signal.alarm(seconds)
    try:
        return f(*args)
    except _Timeout:
        return None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _mp(f, point):
    """f at ``point`` with mpmath at rising precision (as tests/stability.py), or None."""
    import mpmath

    previous = None
    for dps in (60, 250, 1200, 6000):
        with mpmath.workdps(dps):
            try:
                value = f(*(mpmath.mpf(float(v)) for v in point))
            except (ZeroDivisionError, ValueError, OverflowError):
                value = None
            if value is not None and (isinstance(value, mpmath.mpc) or mpmath.isnan(value)):
                value = None
            if value is not None and previous is not None and (
                value == previous or abs(value - previous) <= mpmath.mpf(10) ** -40 * abs(value)
            ):
                return float(value)
            previous = value
    return float(previous) if previous is not None else None


def _value_limit(expr, symbols, point):
    """The limit of a forward that is 0/0 at ``point``, along one input at a time."""
    for s in symbols:
        others = {t: sympy.nsimplify(v) for t, v in zip(symbols, point) if t != s}
        target = sympy.nsimplify(dict(zip(symbols, point))[s])
        try:
            value = sympy.limit(expr.subs(others), s, target, "+-")
        except (ValueError, NotImplementedError):
            continue
        if value.is_real and value.is_finite:
            return float(value.evalf(50))
    return math.nan


class Reference:
    """Exact forward values and gradients of one form (cached per point)."""

    def __init__(self, form: Form):
        self.form = form
        _, self.symbols = symbols_of(form)
        out = sympy_of(form)
        self.vector = isinstance(out, Row)
        self.outputs = list(out.items) if self.vector else [out]
        head = self.outputs[0]  # the VJP with cotangent e0 (row outputs) or 1
        self.partials = [sympy.diff(head, s) for s in self.symbols]
        self._values = [sympy.lambdify(self.symbols, o, modules="mpmath") for o in self.outputs]
        self._grads = [sympy.lambdify(self.symbols, d, modules="mpmath") for d in self.partials]
        self._cache = {}

    def at(self, flat_point: tuple) -> tuple[list, list]:
        """(forward values, gradient per symbol) at a flat point; nan where undefined."""
        if flat_point in self._cache:
            return self._cache[flat_point]
        values = []
        for f, o in zip(self._values, self.outputs):
            v = _mp(f, flat_point)
            if v is None:
                v = _with_timeout(20, _value_limit, o, self.symbols, flat_point)
            values.append(math.nan if v is None else v)
        grads = [_mp(f, flat_point) for f in self._grads]
        if any(g is None for g in grads):
            slow = _with_timeout(60, reference_gradient, self.outputs[0], self.symbols,
                                 flat_point)
            slow = slow or (math.nan,) * len(grads)
            grads = [s if g is None else g for g, s in zip(grads, slow)]
        self._cache[flat_point] = (values, grads)
        return values, grads


def flat(form: Form, point: tuple) -> tuple:
    out = []
    for name, v in zip(form.inputs, point):
        out.extend(v if name in form.rows else (v,))
    return tuple(float(t) for t in out)


# ------------------------------------------------------------------ building the ops


def spec_text(forms, dtype: str, names=None) -> str:
    import yaml

    ops = []
    for form in forms:
        if names is not None and form.name not in names:
            continue
        ops.append({
            "name": form.name,
            "inputs": {n: form.shape(n) for n in form.inputs},
            "output": form.expression,
        })
    return yaml.safe_dump({"version": 1, "module": f"peer_forms_{dtype}", "dtype": dtype,
                           "ops": ops}, sort_keys=False)


def _generate(folder: Path, forms, dtype: str, names: set, progress=None) -> dict:
    """The build's files (the module and its runtime)."""
    from gradgen.emit import generate

    spec = folder / f"peer_forms_{dtype}.yaml"
    spec.write_text(spec_text(forms, dtype, names))
    # no build-time audit: this suite is the measurement
    return generate([str(spec)], str(folder), progress=progress, audit=False)


def build(folder: Path, forms, dtype: str):
    """Generate and import one module with every form gradgen accepts.

    Returns (module, {name: "refused: ..."}). A spec error or a failed verification
    drops the op named in it; an error that names no op is narrowed down op by op.
    """
    from gradgen.errors import SpecError
    from gradgen.verify import VerificationError

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    names = {f.name for f in forms}
    refused: dict[str, str] = {}
    text = None
    while names and text is None:
        started: list[str] = []
        try:
            text = _generate(folder, forms, dtype, names, progress=started.append)
        except SpecError as e:
            bad = {d.op: d.message for d in e.diagnostics if d.op in names}
            if not bad:
                raise
            for op, message in bad.items():
                refused[op] = f"refused: {message}"
            names -= set(bad)
        except VerificationError as e:
            if e.op not in names:
                raise
            refused[e.op] = f"refused (verification): {e}"
            names.discard(e.op)
        except Exception as e:  # a gradgen crash: the op being derived, if it crashes alone
            suspect = started[-1].split(".", 1)[-1] if started else None
            if suspect in names:
                try:
                    _generate(folder, forms, dtype, {suspect})
                except Exception as alone:  # noqa: BLE001 - recorded as the reason
                    if type(alone) is type(e):
                        first = str(e).splitlines()[0] if str(e) else ""
                        refused[suspect] = f"refused ({type(e).__name__}): {first}"
                        names.discard(suspect)
                        continue
            crashed = {}  # otherwise every op alone
            for name in sorted(names):
                try:
                    _generate(folder, forms, dtype, {name})
                except Exception as err:  # noqa: BLE001 - recorded as the reason
                    first = str(err).splitlines()[0] if str(err) else ""
                    crashed[name] = f"refused ({type(err).__name__}): {first}"
            if not crashed or crashed.keys() == names:
                raise  # not one op's fault
            refused.update(crashed)
            names -= set(crashed)
    module = None
    if text is not None:
        from gradgen.loading import load_file

        for name, content in text.items():
            (folder / name).write_text(content)
        module = load_file(folder / f"peer_forms_{dtype}.py", copy=f"{dtype}_{id(folder)}")
    return module, refused


# ------------------------------------------------------------------ scoring


@dataclass
class Result:
    """One form in one dtype: the failures (empty when clean) and what was checked."""

    failures: list = field(default_factory=list)
    checked: int = 0
    skipped: int = 0


def _round(tf, values, dtype):
    arr = np.asarray(values, dtype=np.float64)
    return tf.cast(tf.constant(arr, tf.float64), dtype).numpy().astype(np.float64)


def _representable(original, rounded, dtype) -> bool:
    o = np.asarray(original, dtype=np.float64)
    r = np.asarray(rounded, dtype=np.float64)
    if not np.all(np.isfinite(r)):
        return False
    tiny = (o != 0) & (np.abs(r) < SMALLEST_NORMAL[dtype])
    return not np.any(tiny)


def _compare(got: float, want: float, dtype: str) -> str | None:
    """None when ``got`` is ``want`` in ``dtype``; else what is wrong."""
    if math.isnan(got):
        return "nan"
    if not math.isfinite(got):
        return "inf" if got > 0 else "-inf"
    if abs(got - want) <= RTOL[dtype] * abs(want) + SMALLEST_NORMAL[dtype]:
        return None
    return "wrong"


def _fmt(v: float) -> str:
    return f"{v:.6g}"


def score(tf, fn, form: Form, ref: Reference, dtype: str) -> Result:
    result = Result()
    usable = []
    for point in form.points:
        fp = flat(form, point)
        rp = tuple(_round(tf, fp, dtype))
        if _representable(fp, rp, dtype):
            usable.append((point, fp, rp))
        else:
            result.skipped += 1
    if not usable:
        return result
    args = []
    offset = 0
    for name in form.inputs:
        width = ROW if name in form.rows else 1
        col = np.array([rp[offset:offset + width] for _, _, rp in usable])
        col = col if name in form.rows else col[:, 0]
        args.append(tf.cast(tf.constant(col, tf.float64), dtype))
        offset += width
    try:
        with tf.GradientTape() as tape:
            tape.watch(args)
            out = fn(*args)
        if ref.vector:
            cot = tf.one_hot(tf.zeros([len(usable)], tf.int32), ROW, dtype=out.dtype)
        else:
            cot = tf.ones_like(out)
        grads = tape.gradient(out, args, output_gradients=cot)
    except Exception as e:  # noqa: BLE001 - a run-time failure is a result
        result.failures.append(f"{dtype}: run-time error {type(e).__name__}: "
                               f"{str(e).splitlines()[0] if str(e) else ''}")
        return result
    values = out.numpy().astype(np.float64).reshape(len(usable), -1)
    gradients = [
        np.zeros((len(usable), ROW if n in form.rows else 1)) if g is None
        else g.numpy().astype(np.float64).reshape(len(usable), -1)
        for n, g in zip(form.inputs, grads)
    ]
    gradients = np.concatenate(gradients, axis=1)
    labels = [f"d/d{s}" for s in ref.symbols]
    for i, (point, fp, rp) in enumerate(usable):
        want_values, want_grads = ref.at(rp)
        convention = form.conventions.get(tuple(point))
        checks = [("value" if len(want_values) == 1 else f"value[{j}]", values[i][j], w)
                  for j, w in enumerate(want_values)]
        checks += [(lab, gradients[i][k], (convention[k] if convention else w))
                   for k, (lab, w) in enumerate(zip(labels, want_grads))]
        for label, got, want in checks:
            if math.isnan(want) or math.isinf(want) or abs(want) > LARGEST[dtype]:
                result.skipped += 1  # undefined, infinite or not representable
                continue
            result.checked += 1
            problem = _compare(float(got), want, dtype)
            if problem:
                at = ", ".join(_fmt(v) for v in rp)
                result.failures.append(
                    f"{dtype}: {label} at ({at}): got {_fmt(float(got))}, exact {_fmt(want)}")
    return result


@dataclass
class FormReport:
    form: Form
    refused: dict = field(default_factory=dict)  # dtype -> message
    results: dict = field(default_factory=dict)  # dtype -> Result

    def clean_in(self, dtype: str) -> bool:
        return dtype not in self.refused and not self.results[dtype].failures

    @property
    def clean(self) -> bool:
        return all(self.clean_in(d) for d in DTYPES)

    @property
    def checked(self) -> int:
        return sum(r.checked for r in self.results.values())

    def reason(self, limit: int = 2) -> str:
        """The first failures of each dtype that is not clean."""
        parts = []
        messages = set(self.refused.values())
        if messages:
            parts.append("; ".join(sorted(messages)))
        for dtype in DTYPES:
            r = self.results.get(dtype)
            if dtype in self.refused or r is None or not r.failures:
                continue
            more = len(r.failures) - limit
            text = "; ".join(r.failures[:limit])
            parts.append(text + (f" (+{more} more)" if more > 0 else ""))
        return " | ".join(parts)


def evaluate(tf, folder: Path, forms=None) -> dict[str, FormReport]:
    """Build every form per dtype and score it: {name: FormReport}."""
    forms = FORMS if forms is None else forms
    refs = {f.name: Reference(f) for f in forms}
    reports = {f.name: FormReport(f) for f in forms}
    for dtype in DTYPES:
        sub = Path(folder) / dtype
        sub.mkdir(parents=True, exist_ok=True)
        module, refused = build(sub, forms, dtype)
        for f in forms:
            if f.name in refused:
                reports[f.name].refused[dtype] = refused[f.name]
                reports[f.name].results[dtype] = Result()
            else:
                reports[f.name].results[dtype] = score(tf, getattr(module, f.name), f,
                                                       refs[f.name], dtype)
    return reports


def summary(reports: dict[str, FormReport]) -> str:
    """The markdown summary: clean forms, per dtype and per source, and the others."""
    n = len(reports)
    clean = [r for r in reports.values() if r.clean]
    projects = sorted({r.form.project for r in reports.values()})
    lines = [
        (f"{len(clean)} of {n} naive forms from {len(projects)} projects are clean in all "
         "four dtypes."),
        "",
        "| dtype | clean forms |",
        "| --- | --- |",
    ]
    for dtype in DTYPES:
        k = sum(r.clean_in(dtype) for r in reports.values())
        lines.append(f"| {dtype} | {k} / {n} |")
    lines += ["", "| source | forms | clean |", "| --- | --- | --- |"]
    for p in projects:
        mine = [r for r in reports.values() if r.form.project == p]
        lines.append(f"| {p} | {len(mine)} | {sum(r.clean for r in mine)} |")
    lines += ["", "Forms that are not clean:", "",
              "| form | expression | source | not clean in | first failures |",
              "| --- | --- | --- | --- | --- |"]
    for r in reports.values():
        if r.clean:
            continue
        where = ", ".join(d for d in DTYPES if not r.clean_in(d))
        source = r.form.source.split(";")[0]
        reason = r.reason().replace("|", "\\|")
        lines.append(f"| `{r.form.name}` | `{r.form.expression}` | {source} | {where} | "
                     f"{reason} |")
    return "\n".join(lines)


def check_table(forms=None) -> list[str]:
    """Problems with the case table itself (names, inputs, points)."""
    forms = FORMS if forms is None else forms
    problems = []
    seen = set()
    for f in forms:
        if f.name in seen:
            problems.append(f"{f.name}: duplicate name")
        seen.add(f.name)
        if ":" not in f.source:
            problems.append(f"{f.name}: source has no project")
        for p in f.points:
            if len(p) != len(f.inputs):
                problems.append(f"{f.name}: point {p} has {len(p)} entries")
            for name, v in zip(f.inputs, p):
                if (name in f.rows) != isinstance(v, tuple) or (
                        name in f.rows and len(v) != ROW):
                    problems.append(f"{f.name}: point {p}: bad entry for {name}")
        for p in f.conventions:
            if p not in [tuple(q) for q in f.points]:
                problems.append(f"{f.name}: convention at {p} is not a point")
    return problems


if __name__ == "__main__":
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("GRADGEN_CACHE", "0")
    import tensorflow as tf

    with tempfile.TemporaryDirectory() as tmp:
        print(summary(evaluate(tf, Path(tmp))))
