r"""The error function: complements of erf and erfc, and log(erfc) for large arguments.

| rule | identity | domain | fails at | source |
| --- | --- | --- | --- | --- |
| `erf_complement` | c − c·erf(u) = c·erfc(u) (1 − erf(u) = erfc(u), erf(u) − 1 = −erfc(u)) | real u | naive: u > 3 in float32 (1 − erf(u) is 0 for u > 3.9, erfc(u) is normal to u = 9.2) | PyTensor `local_one_minus_erf`, `local_erf_minus_one` (tensor/rewriting/math.py) |
| `erfc_complement` | c·erfc(u) − c = −c·erf(u) (1 − erfc(u) = erf(u), erfc(−u) − 1 = erf(u)) | real u | naive: \|u\| < 1e-4 in float32 (1 − erfc(u) loses the digits of erf(u) ≈ 1.13u) | PyTensor `local_one_minus_erfc`, `local_erf_neg_minus_one` |
| `erfc_reflection` | c + c·erf(u) = c·erfc(−u); 2c − c·erfc(u) = c·erfc(−u) | real u | naive: u < −3 in float32 (1 + erf(u) cancels); SymPy writes every erfc(−u) as 2 − erfc(u) | PyTensor `local_one_plus_erf`, `local_one_add_neg_erfc`; DLMF 7.4.2 |
| `log_erfc` | log(erfc(u)) = log_erfc(u) = −u² + log(erfcx(u)) for large u | real u | naive: u > 9.2 in float32, u > 26.6 in float64 (erfc underflows: log is −inf, its derivative 0/0) | PyTensor `local_log_erfc` (thresholds float32 10.0541949, float64 26.641747557); DLMF 7.12.1 (asymptotic series) |

Matching: a constant ``c`` and a term ``k·erf(u)`` (or ``k·erfc(u)``) of one sum, with
``k = −c`` (or the reflection's ``k = c``) to within 10 units in the last place, as
PyTensor's ``_is_1`` accepts 1.0 written as a float; other terms of the sum stay. So
``1 − erf(u)``, ``-erf(u) + 1``, ``1 + (-erf(u))``, ``-1.0*erf(u) + 1`` and
``2 − 2·erf(u)`` fire; ``2 − erf(u)`` (no cancellation: its value is in [1, 3]) does not.
The results use :class:`gradgen.functions.erfc`, which SymPy does not turn back into
``2 − erfc(−u)``.

``log_erfc``'s thresholds and its derivative ``−2/(√π·erfcx(u))`` are described in the
``_erfcx``/``_log_erfc`` helpers (templates/runtime/).
"""

from __future__ import annotations

import sympy

from ...functions import erfc, log_erfc
from ..rule import Rule

_ULPS = 10 * 2.0**-52


def _same(a, b) -> bool:
    """``a == b`` for numbers, to within 10 float64 ulps (1.0 written as a float)."""
    a, b = complex(a), complex(b)  # (both are numbers: _split's and the constant)
    return a.imag == 0 and b.imag == 0 and abs(a - b) <= _ULPS * max(abs(a), abs(b))


def _split(term):
    """(number, rest) of a product: ``-1.0*erf(u)`` is (-1.0, erf(u))."""
    factors = sympy.Mul.make_args(term)
    numbers = [f for f in factors if f.is_number]
    rest = [f for f in factors if not f.is_number]
    return sympy.Mul(*numbers), sympy.Mul(*rest)


def _constant_and_terms(expr, cls):
    """(c, [(k, u, term)]) for a sum ``c + k1·cls(u1) + ...`` with a nonzero number c."""
    if not isinstance(expr, sympy.Add):
        return None
    constants = [t for t in expr.args if t.is_number]
    if len(constants) != 1 or constants[0] == 0:
        return None
    found = []
    for t in expr.args:
        k, rest = _split(t)
        if isinstance(rest, cls) and len(rest.args) == 1 and k != 0:
            found.append((k, rest.args[0], t))
    return constants[0], found


def _erf_complement(expr):
    # c - c*erf(u) = c*erfc(u): 1 - erf(u) is 0 for u > 3.9 in float32
    split = _constant_and_terms(expr, sympy.erf)
    if split is None:
        return None
    c, found = split
    for k, u, term in found:
        if _same(k, -c):
            return c * erfc(u) + (expr - c - term)
    return None


def _erfc_complement(expr):
    # c - c*erfc(u) = c*erf(u): 1 - erfc(u) loses the digits of erf(u) near 0
    split = _constant_and_terms(expr, sympy.erfc)
    if split is None:
        return None
    c, found = split
    for k, u, term in found:
        if _same(k, -c):
            return c * sympy.erf(u) + (expr - c - term)
    return None


def _erfc_reflection(expr):
    # c + c*erf(u) = c*erfc(-u) (1 + erf(u) cancels for u < -3); 2c - c*erfc(u) = c*erfc(-u)
    # (SymPy writes erfc(-u) as 2 - erfc(u), which cancels for u < -3)
    for cls, want in ((sympy.erf, 1), (sympy.erfc, -2)):
        split = _constant_and_terms(expr, cls)
        if split is None:  # not c + terms (whatever cls is)
            return None
        c, found = split
        for k, u, term in found:
            if cls is sympy.erfc and isinstance(term, erfc) and k == 1:
                continue  # erfc(-u) already kept as written
            if _same(c, want * k):
                scale = k if cls is sympy.erf else -k
                return scale * erfc(-u) + (expr - c - term)
    return None


def _log_erfc(expr):
    # log(erfc(u)) = log_erfc(u): erfc underflows to 0 for u > 9.2 in float32
    if isinstance(expr, sympy.log):  # (SymPy's log has one argument: log(x, b) divides)
        if isinstance(expr.args[0], sympy.erfc):
            return log_erfc(expr.args[0].args[0])
    return None


RULES: tuple[Rule, ...] = (
    Rule(
        "erf_complement",
        "c - c*erf(u) = c*erfc(u): 1 - erf(u) = erfc(u), erf(u) - 1 = -erfc(u)",
        "1 - erf(u) cancels: 0 for u > 3.9 in float32, where erfc(u) is 1.7e-8",
        _erf_complement,
    ),
    Rule(
        "erfc_complement",
        "c - c*erfc(u) = c*erf(u): 1 - erfc(u) = erf(u), erfc(-u) - 1 = erf(u)",
        "1 - erfc(u) loses the digits of erf(u) for small u (0 for |u| < 3e-8 in float32)",
        _erfc_complement,
    ),
    Rule(
        "erfc_reflection",
        "c + c*erf(u) = c*erfc(-u); 2 - erfc(u) = erfc(-u) (SymPy's form of erfc(-u))",
        "1 + erf(u) and 2 - erfc(u) cancel to 0 for u < -3.9 in float32",
        _erfc_reflection,
    ),
    Rule(
        "log_erfc",
        "log(erfc(u)) = log_erfc(u) = -u**2 + log(erfcx(u)), erfcx(u) = exp(u**2)*erfc(u)",
        "erfc(u) underflows to 0 for u > 9.2 in float32 and 26.6 in float64: log(0) = -inf "
        "and the derivative is 0/0",
        _log_erfc,
    ),
)
