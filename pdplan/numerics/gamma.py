"""Log-gamma and the regularized lower incomplete gamma function ``P(a, x)``, as :mod:`scipy.special` names them
(``gammaln``, ``gammainc``), without importing ``scipy.special`` (about 0.3 s of start-up), and ``xlogy``.

``P(a, x) = γ(a, x)/Γ(a) = (1/Γ(a))·∫₀ˣ t^{a−1} e^{−t} dt`` (Abramowitz & Stegun 6.5.1), elementwise over arrays,
after Cephes' ``igam.c`` as SciPy ships it (DiDonato & Morris, *ACM TOMS* 12, 1986, 377–393; *Numerical Recipes*,
3rd ed., 2007, §6.2), in three regions (Cephes keeps Temme's expansion to a narrower band above ``a = 200`` and sums
the series there; here it serves every ``a > 20``, which bounds the steps of the other two):

* ``a > 20`` and ``|x − a| < 0.3·a``: Temme's uniform asymptotic expansion (DLMF 8.12.8–8.12.11; N. M. Temme,
  *SIAM J. Math. Anal.* 10, 1979, 757–766)

      P = ½·erfc(−η·√(a/2)) − e^{−aη²/2}/√(2πa) · Σ_k c_k(η)·a^{−k},   ½η² = λ − 1 − ln λ,  λ = x/a,

  ``η`` of the sign of ``λ − 1``, each ``c_k`` a 25-term Taylor polynomial in ``η`` (``|η| ≤ 0.34`` here) whose
  coefficients :mod:`pdplan.numerics.temme_coefficients` holds, generated exactly by ``tools/temme_coefficients.py``;
  ``erfc`` is the C library's (:func:`math.erfc`);
* else ``x < a + 1``: the series ``P = x^a e^{−x}/Γ(a+1) · Σ_{n≥0} xⁿ/((a+1)(a+2)…(a+n))`` (A&S 6.5.29), whose term
  ratio ``x/(a+n)`` is below one from the first term;
* else the complement ``Q = 1 − P = x^a e^{−x}/Γ(a) · 1/(x+1−a− 1·(1−a)/(x+3−a− 2·(2−a)/(x+5−a− …)))``
  (Legendre's continued fraction, A&S 6.5.31 in even form), evaluated by the modified Lentz method (Thompson &
  Barnett, *J. Comput. Phys.* 64, 1986, 490–509), and ``P = 1 − Q``.

The series and the fraction stop when a term (or a Lentz factor's distance from one) falls below one machine epsilon
of the sum; outside Temme's region they need at most about 150 steps (``a ≤ 20``: about ``8.6·√a`` near ``x ≈ a``;
``|x − a| ≥ 0.3·a``: a series term ratio at most ``1/1.3``; the fraction took at most 62 on the default search's
780,000 arguments), and :data:`MAX_STEPS` is a guard that raises. The prefactor
``x^a e^{−x}/Γ(a)`` is formed without cancellation for large ``a`` (as Cephes' ``igam_fac`` does): with
``t = (x − a)/a`` and Stirling's remainder ``ε(a) = ln Γ(a) − ((a − ½)·ln a − a + ½·ln 2π)``,

    ln(x^a e^{−x}/Γ(a)) = a·(ln(1+t) − t) + ½·ln(a/2π) − ε(a),

where ``ln(1+t) − t`` is ``−t·r + 2r³·Σ_k r^{2k}/(2k+3)`` with ``r = t/(2+t)`` for ``|t| < ½`` (from
``ln(1+t) = 2·artanh r``, A&S 4.6.22, and ``t − 2r = t·r``), and ``ε(a)`` is Stirling's series
``Σ_k B_{2k}/(2k(2k−1)·a^{2k−1})`` (A&S 6.1.40, eight terms: below 1e-16 absolute for ``a ≥ 10``), for ``a < 10``
after the recurrence ``Γ(a + 1) = a·Γ(a)`` (A&S 6.1.15) lifts ``a`` to 10 or more. The relative error is a few ulps
times ``max(1, |ln P|)``, within 3e-14 of 50-digit values at the points checked; against SciPy over
``a ∈ [1e-3, 1e6]``, ``x/a ∈ [1e-3, 1e3]``, ``P > 1e-100``: within 1e-13 for ``a ≤ 50`` and 3e-12 beyond, where the
difference is SciPy's own error below the mean (tests/unit/test_numerics_gamma.py).

Special values follow SciPy: ``P(a, 0) = 0``; ``P(0, x) = 1`` for ``x > 0``; ``P(a, ∞) = 1``; ``P(∞, x) = 0`` for
finite ``x``; NaN for negative arguments, ``P(0, 0)``, ``P(∞, ∞)`` and NaN inputs.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from pdplan.numerics.temme_coefficients import D

FloatArray = npt.NDArray[np.float64]

EPS = 2.220446049250313e-16
"""Machine epsilon of IEEE doubles (``numpy.finfo(float).eps``): the stopping threshold of the series and fraction."""
TINY = 1e-300
"""Lentz's guard against a zero denominator (Numerical Recipes §5.2, ``FPMIN``)."""
MAX_STEPS = 2_000
"""Cap on the steps of the series or fraction (Cephes' ``MAXITER``); the regions they serve need fewer than 200."""
TEMME_MIN_A = 20.0
"""Temme's expansion serves ``a`` above this (Cephes' ``SMALL``) …"""
TEMME_MAX_SIGMA = 0.3
"""… where ``|x − a|/a`` is below this (Cephes' ``SMALLRATIO``)."""
TEMME_TERMS = len(D[0])
"""Taylor terms per ``c_k(η)`` in :data:`pdplan.numerics.temme_coefficients.D`."""
CHECK_EVERY = 4
"""Steps between convergence checks (converged elements are dropped from the working arrays then)."""
STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156, -3617 / 122400)
"""``B_{2k}/(2k(2k−1))`` for k = 1…8, the coefficients of Stirling's series for ``ln Γ`` (A&S 6.1.40-41)."""
STIRLING_SERIES_MIN = 10.0
"""From this ``a`` on, eight terms of Stirling's series give ``ε(a)`` within 1e-16 (the ninth is 3e-17 at a = 10)."""
ATANH_TERMS = 18
"""Terms of ``Σ r^{2k}/(2k+3)`` for ``|r| ≤ 1/3`` (``|t| < ½``): ``(1/9)^18 < 1e-17``."""
_LOG_2PI = math.log(2.0 * math.pi)


def _lgamma1(x: float) -> float:
    """``ln|Γ(x)|`` of one number; ``+∞`` at the poles (0 and the negative integers), as SciPy returns it."""
    if math.isnan(x):
        return math.nan
    try:
        return math.lgamma(x)
    except ValueError:
        return math.inf


_LGAMMA = np.frompyfunc(_lgamma1, 1, 1)
_ERFC = np.frompyfunc(math.erfc, 1, 1)
_D = np.array(D, dtype=np.float64)


def _shift_up(x: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``(b, ln(x(x+1)…(b−1)))`` with ``b = x + n ≥ 10`` (``n ≥ 0`` the fewest steps), for ``x > 0``: the recurrence
    ``Γ(x + 1) = x·Γ(x)`` (A&S 6.1.15) moves ``ln Γ`` into the range where Stirling's series holds."""
    steps = np.ceil(np.maximum(STIRLING_SERIES_MIN - x, 0.0))
    product = np.ones_like(x)
    for j in range(int(steps.max(initial=0.0))):
        product *= np.where(j < steps, x + j, 1.0)
    return x + steps, np.log(product)


def _stirling_series(b: FloatArray) -> FloatArray:
    """``ε(b) = Σ_k B_{2k}/(2k(2k−1)·b^{2k−1})`` for ``b ≥ 10`` (A&S 6.1.40)."""
    inv2 = 1.0 / (b * b)
    acc = np.full_like(b, STIRLING[-1])
    for c in STIRLING[-2::-1]:
        acc = acc * inv2 + c
    return np.asarray(acc / b, dtype=np.float64)


def gammaln(x: npt.ArrayLike) -> FloatArray:
    """``ln|Γ(x)|`` elementwise: for ``x > 0`` Stirling's series (A&S 6.1.40, eight terms) after the recurrence
    ``ln Γ(x) = ln Γ(x + n) − ln(x(x+1)…(x+n−1))`` lifts ``x`` to 10 or more, absolute error a few ulps of
    ``max(1, |ln Γ(x)|)``; elsewhere the C library's ``lgamma`` (:func:`math.lgamma`), ``+∞`` at the poles."""
    xa = np.asarray(x, dtype=np.float64)
    flat = xa.ravel()
    positive = (flat > 0) & np.isfinite(flat)
    out = np.empty_like(flat)
    b, log_product = _shift_up(flat[positive])
    out[positive] = (b - 0.5) * np.log(b) - b + 0.5 * _LOG_2PI + _stirling_series(b) - log_product
    if not positive.all():
        out[~positive] = np.asarray(_LGAMMA(flat[~positive]), dtype=np.float64)
    result: FloatArray = out.reshape(xa.shape)[()]
    return result


def xlogy(x: npt.ArrayLike, y: npt.ArrayLike) -> FloatArray:
    """``x·ln y`` elementwise, 0 where ``x = 0`` and ``y`` is not NaN (SciPy's ``xlogy``)."""
    xa, ya = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out: FloatArray = np.where((xa == 0) & ~np.isnan(ya), 0.0, xa * np.log(ya))[()]
    return out


def log1pmx(t: FloatArray) -> FloatArray:
    """``ln(1 + t) − t`` for ``t > −1``, without cancellation near 0 (module docstring)."""
    out = np.log1p(t) - t
    small = np.abs(t) < 0.5
    if small.any():
        ts = t[small]
        r = ts / (2.0 + ts)
        r2 = r * r
        acc = np.full_like(r, 1.0 / (2 * ATANH_TERMS + 1))
        for k in range(ATANH_TERMS - 2, -1, -1):
            acc = acc * r2 + 1.0 / (2 * k + 3)
        out[small] = -ts * r + 2.0 * r * r2 * acc
    return out


def _stirling_error(a: FloatArray) -> FloatArray:
    """``ε(a) = ln Γ(a) − ((a − ½)·ln a − a + ½·ln 2π)`` for ``a > 0``: the series directly for ``a ≥ 10``, else
    through the recurrence (:func:`_shift_up`), so every ``a`` is within a few ulps of ``max(1, |ln Γ(a)|)``."""
    b, log_product = _shift_up(a)
    return np.asarray(
        (b - 0.5) * np.log(b) - (a - 0.5) * np.log(a) - (b - a) + _stirling_series(b) - log_product, dtype=np.float64
    )


def log_prefactor(a: FloatArray, x: FloatArray) -> FloatArray:
    """``ln(x^a e^{−x}/Γ(a))`` for ``a > 0``, ``x > 0`` (module docstring)."""
    t = (x - a) / a
    near = np.abs(t) < 0.5
    body = np.where(near, 0.0, np.log(np.where(near, 1.0, x / a)) - t)
    if near.any():
        body[near] = log1pmx(t[near])
    return np.asarray(a * body + 0.5 * np.log(a / (2.0 * math.pi)) - _stirling_error(a), dtype=np.float64)


def _no_convergence(a: FloatArray, x: FloatArray) -> ArithmeticError:
    return ArithmeticError(f"gammainc: no convergence in {MAX_STEPS} steps at a={a[:3]}, x={x[:3]} (module docstring)")


def _series_sum(a: FloatArray, x: FloatArray) -> FloatArray:
    """``Σ_{n≥0} xⁿ/((a+1)…(a+n))`` per element (1-D arrays, ``x < a + 1``)."""
    out = np.empty_like(a)
    idx = np.arange(a.size)
    state = np.stack([a, x, np.ones_like(a), np.ones_like(a)])  # rows: a + n, x, term, sum
    denom, xs, term, total = state
    for _ in range(0, MAX_STEPS, CHECK_EVERY):
        for _ in range(CHECK_EVERY):
            denom += 1.0
            term *= xs / denom
            total += term
        done = term <= EPS * total
        if done.any():
            out[idx[done]] = total[done]
            keep = ~done
            idx, state = idx[keep], state[:, keep]
            if idx.size == 0:
                return out
            denom, xs, term, total = state
    raise _no_convergence(a, x)


def _fraction(a: FloatArray, x: FloatArray) -> FloatArray:
    """Legendre's continued fraction for ``Q·Γ(a)/(x^a e^{−x})`` by modified Lentz (1-D arrays, ``x ≥ a + 1``).

    For ``x ≥ a + 1`` Lentz's ``C`` and ``D`` stay positive (at least 4 and 400 over ``a ∈ [1e-3, 1e6]``,
    ``x − a − 1 ∈ [1e-3, 1e7]``, 400 steps, checked when this was written), so the guard against a zero denominator
    (Numerical Recipes §5.2) is a floor at :data:`TINY`."""
    out = np.empty_like(a)
    idx = np.arange(a.size)
    b0 = x + 1.0 - a
    state = np.stack([a, b0, np.full_like(a, 1.0 / TINY), 1.0 / b0, 1.0 / b0])  # rows: a, b, C, D, h
    aa, b, c, d, h = state
    step = 0
    for _ in range(0, MAX_STEPS, CHECK_EVERY):
        for _ in range(CHECK_EVERY):
            step += 1
            an = (aa - step) * step  # −n(n − a)
            b += 2.0
            d *= an
            d += b
            np.maximum(d, TINY, out=d)
            np.divide(an, c, out=c)
            c += b
            np.maximum(c, TINY, out=c)
            np.reciprocal(d, out=d)
            delta = d * c
            h *= delta
        done = np.abs(delta - 1.0) <= EPS
        if done.any():
            out[idx[done]] = h[done]
            keep = ~done
            idx, state = idx[keep], state[:, keep]
            if idx.size == 0:
                return out
            aa, b, c, d, h = state
    raise _no_convergence(a, x)


def _temme(a: FloatArray, x: FloatArray) -> FloatArray:
    """``P(a, x)`` by Temme's uniform asymptotic expansion (module docstring; 1-D arrays, ``a > 20``)."""
    sigma = (x - a) / a
    half_eta2 = -log1pmx(sigma)  # ½η² = λ − 1 − ln λ ≥ 0
    eta = np.sign(sigma) * np.sqrt(2.0 * half_eta2)
    c_k = np.vander(eta, TEMME_TERMS, increasing=True) @ _D.T  # c_k(η) for k = 0…K−1, shape [m, K]
    total = np.einsum("mk,mk->m", c_k, np.vander(1.0 / a, len(_D), increasing=True))
    erfc_term = 0.5 * _ERFC(-eta * np.sqrt(a / 2.0)).astype(np.float64)
    return np.asarray(erfc_term - np.exp(-a * half_eta2) * total / np.sqrt(2.0 * math.pi * a), dtype=np.float64)


def _regular(a: FloatArray, x: FloatArray) -> FloatArray:
    """``P(a, x)`` for finite ``a > 0``, ``x > 0`` (1-D arrays)."""
    out = np.empty_like(a)
    temme = (a > TEMME_MIN_A) & (np.abs(x - a) < TEMME_MAX_SIGMA * a)
    if temme.any():
        out[temme] = _temme(a[temme], x[temme])
    series = ~temme & (x < a + 1.0)
    fraction = ~temme & ~series
    with np.errstate(divide="ignore", over="ignore", under="ignore"):
        scale = np.zeros_like(a)
        classic = series | fraction
        scale[classic] = np.exp(log_prefactor(a[classic], x[classic]))
        scale[series] /= a[series]
    # where the prefactor underflows, P (series) or Q (fraction) is below the smallest double: skip the iteration
    series &= scale > 0
    out[~temme & (x < a + 1.0) & ~series] = 0.0
    out[fraction & (scale == 0)] = 1.0
    fraction &= scale > 0
    if series.any():
        out[series] = scale[series] * _series_sum(a[series], x[series])
    if fraction.any():
        out[fraction] = 1.0 - scale[fraction] * _fraction(a[fraction], x[fraction])
    return out


def gammainc(a: npt.ArrayLike, x: npt.ArrayLike) -> FloatArray:
    """Regularized lower incomplete gamma function ``P(a, x)``, elementwise over the broadcast of ``a`` and ``x``
    (module docstring)."""
    aa, xx = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(x, dtype=np.float64))
    af, xf = aa.ravel(), xx.ravel()
    regular = (af > 0) & (xf > 0) & (af < math.inf) & (xf < math.inf)
    if regular.all():
        out = _regular(af, xf)
    else:
        out = _special(af, xf)
        out[regular] = _regular(af[regular], xf[regular])
    result: FloatArray = out.reshape(aa.shape)[()]
    return result


def _special(a: FloatArray, x: FloatArray) -> FloatArray:
    """``P`` at the edges (module docstring), NaN elsewhere."""
    out = np.full(a.shape, np.nan)
    out[(x == 0) & (a > 0)] = 0.0
    out[(a == 0) & (x > 0)] = 1.0
    out[(x == math.inf) & (a >= 0) & (a < math.inf)] = 1.0
    out[(a == math.inf) & (x >= 0) & (x < math.inf)] = 0.0
    return out
