"""Continuous-batching decode pool: mean-field step time, KV/seat capacity, TPOT distribution.

Model (docs/queueing.md §2). Per decode instance, requests arrive Poisson at λ_d (= λ/y) and each needs
n decode steps with prompt context L (workload bins ``(L_i, n_i, p_i)``). Every iteration runs all B
in-flight sequences with total context K; the step time is τ(B, K):

* linear ``τ = t0 + t1·B + t2·K`` (:class:`LinearStepTime`; memory-bound regime of §2.1), or
* any vectorised callable ``τ(B, K)`` (e.g. the roofline ``max(compute, memory)``).

Mean field (§2.2): Little's law on sequences and on context tokens (renewal–reward),
``N = λ_d E[n] τ̄``, ``K̄ = λ_d τ̄ E[nL + n(n−1)/2]``; linear τ gives ``τ̄ = t0/(1 − u)`` with
``u = λ_d(t1 E[n] + t2 E[nL + n(n−1)/2])`` (stable iff u < 1); a non-linear τ is solved by brentq on
``τ̄ = τ(N(τ̄), K̄(τ̄))`` and u := 1 − τ(0, 0)/τ̄. Measured: τ̄ within −4…+3 % of simulated mean TPOT
for u ≤ 0.5 and −9 % up to u = 0.85 (docs/queueing.md §6.3); cf. Song et al. 2026 (arXiv 2601.21351).

Capacity (§2.3): KV ``K̄ + z·sd(K) ≤ M_kv`` with M/G/∞ shot-noise ``Var K = λ_d τ̄ E[Σ_{j<n}(L+j)²]``
and seats ``N + z·sqrt(N·F) ≤ max_num_seqs``; both variances are multiplied by the load-feedback
amplification F = Var X / Var X|no feedback of the §2.4 model (our reading of "× feedback factor").
Form of the KV bound: Nie, Si, Zhou 2026 (arXiv 2605.04595).

TPOT (§2.4, "shot noise with load feedback", linear-noise approximation in step units): a tagged
request's TPOT = t0 + w + X̄ where ``w = t1 + t2(L + (n−1)/2)`` is its own weight and X̄ the average
over its n steps of the others' load X. Kernels ``g_m = E[w·1{n>m}]``, ``r_m = E[w²(n−|m|)^+]``;
``S_X(f) = λ_d τ̄ R(f)/|1 − λ_d G(f)|²`` (G includes the one-step admission delay),
``C_X = irfft(S_X)``, ``Var X̄(n) = (n C_0 + 2Σ_{m<n}(n−m)C_m)/n²``, ``E X̄ = u τ̄``;
X̄ ~ Gamma(mean, var); TPOT cdf = mixture over bins. Non-linear τ is linearised at the fixed point
(t1 = ∂τ/∂B, t2 = ∂τ/∂K, t0 = τ̄ − t1 N − t2 K̄). Measured (docs/queueing.md §6.3): P50/P90/P99 within
−4…+2 % for u ≤ 0.5; −7/−15/−12 % at u = 0.7; −9/−6/+3 % at u = 0.85.
This implementation vs a step-level DES (tests/unit/test_queueing_decode.py, L ~ LN(1000, σ=1),
n ~ LN(100, σ=1)): mean/P50/P90/P99 within −5.3…+2.4 % for u = .3/.5/.7 (30 k requests).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from numpy.typing import ArrayLike

from pdplan.numerics.roots import brentq
from pdplan.queueing.distributions import GammaMixture, as_rates, check_pmf
from pdplan.queueing.exact_memo import forgets
from pdplan.types import Z99, FloatArray

ComplexArray = npt.NDArray[np.complex128]

StepTimeFn = Callable[[FloatArray, FloatArray], FloatArray]
_MAX_FFT = 2**19
_GRID_FACTOR = 2.0
"""Circular grid length ≥ this × (n_max + 2)/(1 − u) (and ≥ 4(n_max + 2)): the load covariance
must decay before it wraps around (feedback stretches its correlation time by ~1/(1 − u)).
Measured against factor 8 on the examples and the chat / coding / arxiv / leval / prfaas-long
presets for u = 0.1…0.99: sd X̄ and F agree to < 3e−8, except prfaas-long (fixed 1024-token
outputs, the slowest decay): 0.5 % in sd X̄ and 1 % in F (factor 1: up to 16 %)."""
_FFT_BUDGET = 2**22  # real entries per batched inverse FFT (32 MiB)


@dataclass(frozen=True, slots=True)
class LinearStepTime:
    """``τ(B, K) = t0 + t1·B + t2·K`` in seconds (B sequences, K context tokens in the batch)."""

    t0_s: float
    t1_s_per_seq: float
    t2_s_per_token: float

    def __call__(self, batch: FloatArray, context_tokens: FloatArray) -> FloatArray:
        return np.asarray(
            self.t0_s + self.t1_s_per_seq * batch + self.t2_s_per_token * context_tokens,
            dtype=np.float64,
        )

    def per_request_s(self, workload: DecodeWorkload) -> float:
        """``t1·E[steps] + t2·E[Σ context over its steps]``: the step time one request adds over its stay beyond the
        shared ``t0`` (the load a request puts on the step law: u = λ·this; τ̄ = t0/(1 − u))."""
        return self.t1_s_per_seq * workload.mean_steps + self.t2_s_per_token * workload.mean_work


@dataclass(frozen=True, slots=True)
class DecodeWorkload:
    """Decode workload bins: prompt context ``input_tokens``, ``decode_steps`` (≥ 1), ``prob``; ``prefill_tokens``
    the tokens a colocated instance's prefill computes per bin (fewer than the context when a prefix cache holds the
    rest; None: the whole prompt). ``window_tokens``: a sliding window every layer attends over (Mistral-7B v0.1,
    :attr:`pdplan.specs.model.ModelSpec.kv_window_tokens`), None without one. With a window w a sequence at context
    c holds and reads min(c, w) tokens of KV, so every context sum below counts min(L + j, w) at step j
    (:func:`held_context_sums`); without one the sums are the §2.2 ones, unchanged."""

    input_tokens: FloatArray
    decode_steps: FloatArray
    prob: FloatArray
    prefill_tokens: FloatArray | None = None
    window_tokens: float | None = None
    mean_steps: float = field(init=False, repr=False, compare=False)
    """E[n] (computed once, at construction)."""
    mean_work: float = field(init=False, repr=False, compare=False)
    """E[nL + n(n−1)/2]: context-token·steps a request holds over its life (§2.2); windowed: E[Σ_{j<n} min(L+j, w)]
    (computed once, at construction: a search reads it about 15,000 times over 24 sweep points)."""

    def __post_init__(self) -> None:
        n, lin = self.decode_steps, self.input_tokens
        if self.window_tokens is not None:
            work = float(self.prob @ held_context_sums(lin, n, self.window_tokens)[0])
        else:
            work = float(self.prob @ (n * lin + n * (n - 1.0) / 2.0))
        object.__setattr__(self, "mean_steps", float(self.prob @ self.decode_steps))
        object.__setattr__(self, "mean_work", work)

    @property
    def computed_tokens(self) -> FloatArray:
        """The tokens each bin's prefill computes (``prefill_tokens``, else the whole prompt)."""
        return self.input_tokens if self.prefill_tokens is None else self.prefill_tokens

    @property
    def context_square_sum(self) -> float:
        """E[Σ_{j<n} (L+j)²] (M/G/∞ variance of K, §2.3); windowed: E[Σ_{j<n} min(L+j, w)²]."""
        n, lin = self.decode_steps, self.input_tokens
        if self.window_tokens is not None:
            return float(self.prob @ held_context_sums(lin, n, self.window_tokens)[1])
        s = n * lin**2 + lin * n * (n - 1.0) + (n - 1.0) * n * (2.0 * n - 1.0) / 6.0
        return float(self.prob @ s)

    @property
    def bin_mean_context(self) -> FloatArray:
        """Per bin, the context a sequence holds averaged over its n steps: L + (n − 1)/2; windowed:
        Σ_{j<n} min(L+j, w)/n."""
        n, lin = self.decode_steps, self.input_tokens
        if self.window_tokens is not None:
            return np.asarray(held_context_sums(lin, n, self.window_tokens)[0] / n, dtype=np.float64)
        return np.asarray(lin + (n - 1.0) / 2.0, dtype=np.float64)

    @property
    def peak_tokens(self) -> FloatArray:
        """Per bin, the most KV a sequence ever holds, L + n (its final footprint); windowed: min(L + n, w)."""
        top = self.input_tokens + self.decode_steps
        return top if self.window_tokens is None else np.minimum(top, self.window_tokens)


def held_context_sums(input_tokens: ArrayLike, steps: ArrayLike, window_tokens: float) -> tuple[FloatArray, FloatArray]:
    """``(Σ_{j<n} min(L+j, w), Σ_{j<n} min(L+j, w)²)`` per bin. Derivation: the context L + j stays below the window
    for the first m = clip(w − L, 0, n) steps (exact for integer L, w; continuous between) and is w for the n − m
    others, so the sums are m·L + m(m−1)/2 + (n−m)·w and m·L² + L·m(m−1) + (m−1)m(2m−1)/6 + (n−m)·w², the §2.2/§2.3
    sums over the first m steps plus the capped rest. m = n (w ≥ L + n) gives the unwindowed sums."""
    lin, n = np.asarray(input_tokens, dtype=np.float64), np.asarray(steps, dtype=np.float64)
    w = float(window_tokens)
    m = np.clip(w - lin, 0.0, n)
    first = m * lin + m * (m - 1.0) / 2.0 + (n - m) * w
    square = m * lin**2 + lin * m * (m - 1.0) + (m - 1.0) * m * (2.0 * m - 1.0) / 6.0 + (n - m) * w**2
    return np.asarray(first, dtype=np.float64), np.asarray(square, dtype=np.float64)


def windowed_mean_context(start_tokens: float, span_tokens: float, window_tokens: float | None) -> float:
    """Mean of min(L + x, w) over x uniform on [0, span] (a sequence from context L to L + span, each context
    held equally long), the fixed-length benchmark loops' mean context (:mod:`pdplan.benchmark`). Without a window:
    L + span/2. With one: w when L ≥ w, L + span/2 when L + span ≤ w, else with m = w − L the integral
    (m·L + m²/2 + (span − m)·w)/span. span = 0: min(L, w)."""
    lo, span = float(start_tokens), float(span_tokens)
    if window_tokens is None:
        return lo + span / 2.0
    w = float(window_tokens)
    if lo >= w:
        return w
    if lo + span <= w:
        return lo + span / 2.0
    m = w - lo
    return (m * lo + m * m / 2.0 + (span - m) * w) / span


def kv_footprint(workload: DecodeWorkload, state_tokens_per_seq: float) -> DecodeWorkload:
    """The workload as the KV pool sees it: each sequence holds ``s`` token slots of fixed state on top of its
    context (:mod:`pdplan.perf.memory`), i.e. its context shifted by s, so ``mean_work`` gains s·E[n] (K̄ + s·N by
    Little's law) and ``context_square_sum`` becomes E[Σ_{j<n}(L+s+j)²]. Unchanged when s = 0."""
    if state_tokens_per_seq == 0.0:
        return workload
    if not state_tokens_per_seq > 0.0:
        raise ValueError(f"state_tokens_per_seq must be >= 0, got {state_tokens_per_seq}")
    w = workload.window_tokens  # min(L + j, w) + s = min(L + s + j, w + s): the window shifts with the context
    return DecodeWorkload(
        workload.input_tokens + state_tokens_per_seq,
        workload.decode_steps,
        workload.prob,
        workload.prefill_tokens,
        None if w is None else w + state_tokens_per_seq,
    )


def decode_workload(
    input_tokens: ArrayLike, decode_steps: ArrayLike, prob: ArrayLike, window_tokens: float | None = None
) -> DecodeWorkload:
    """Validate workload bins (joint (L, n) histogram flattened to M bins); ``window_tokens`` as
    :class:`DecodeWorkload`'s."""
    lin, p = check_pmf(input_tokens, prob, "input_tokens")
    n = np.asarray(decode_steps, dtype=np.float64).ravel()
    if n.shape != lin.shape or np.any(~np.isfinite(n)) or np.any(n < 1):
        raise ValueError("decode_steps must be finite, >= 1 and match input_tokens in length")
    if window_tokens is not None and not window_tokens > 0.0:
        raise ValueError(f"window_tokens must be > 0, got {window_tokens}")
    return DecodeWorkload(lin, n, p, None, window_tokens)


@dataclass(frozen=True, slots=True)
class DecodeFixedPoint:
    """Mean-field state per rate (shape ``[R]``) plus the local linearisation of τ."""

    rate_per_s: FloatArray
    tau_mean_s: FloatArray
    utilisation: FloatArray
    mean_seqs: FloatArray
    mean_context_tokens: FloatArray
    t0_s: FloatArray
    t1_s_per_seq: FloatArray
    t2_s_per_token: FloatArray


def _solve_tau(rate: float, wl: DecodeWorkload, step: StepTimeFn, tau0: float) -> float:
    """brentq on ``τ − τ(λE[n]τ, λE[work]τ)`` over ``[τ(0,0), τ_hi]`` (τ_hi found by doubling)."""

    def f(tau: float) -> float:
        b = np.array([rate * wl.mean_steps * tau])
        k = np.array([rate * wl.mean_work * tau])
        return tau - float(step(b, k)[0])

    hi = 2.0 * tau0
    while f(hi) <= 0.0:
        hi *= 2.0
        if hi > 1e6 * tau0:
            raise ValueError(f"decode: no stable fixed point at rate {rate:.6g}/s (u >= 1)")
    return float(brentq(f, tau0, hi, xtol=1e-15, rtol=1e-12))


def decode_fixed_point(rate_per_s: ArrayLike, workload: DecodeWorkload, step_time: StepTimeFn) -> DecodeFixedPoint:
    """Mean-field fixed point τ̄, u, N, K̄ per rate; ValueError if u ≥ 1 (unstable)."""
    rate = as_rates(rate_per_s)
    en, ew = workload.mean_steps, workload.mean_work
    zero = np.zeros(1)
    tau0 = float(step_time(zero, zero)[0])
    if tau0 <= 0:
        raise ValueError("decode step time at B = K = 0 must be > 0")
    if isinstance(step_time, LinearStepTime):
        t1 = np.full_like(rate, step_time.t1_s_per_seq)
        t2 = np.full_like(rate, step_time.t2_s_per_token)
        u = rate * (t1 * en + t2 * ew)
        if np.any(u >= 1.0):
            bad = float(rate[u >= 1.0][0])
            raise ValueError(f"decode: unstable at rate {bad:.6g}/s (u >= 1); max {bad / u.max():.6g}/s")
        tau = tau0 / (1.0 - u)
    else:
        tau = np.array([_solve_tau(float(r), workload, step_time, tau0) for r in rate])
        u = 1.0 - tau0 / tau
        t1, t2 = _linearise(step_time, rate * en * tau, rate * ew * tau)
    n_seqs, k_tok = rate * en * tau, rate * ew * tau
    t0 = tau - t1 * n_seqs - t2 * k_tok
    return DecodeFixedPoint(rate, tau, u, n_seqs, k_tok, t0, t1, t2)


def _linearise(step: StepTimeFn, b: FloatArray, k: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Central-difference ∂τ/∂B and ∂τ/∂K at (B, K) (one-sided at 0)."""
    db = np.maximum(1e-3 * b, 1e-3)
    dk = np.maximum(1e-3 * k, 1.0)
    t1 = (step(b + db, k) - step(np.maximum(b - db, 0.0), k)) / (b + db - np.maximum(b - db, 0.0))
    t2 = (step(b, k + dk) - step(b, np.maximum(k - dk, 0.0))) / (k + dk - np.maximum(k - dk, 0.0))
    return np.asarray(t1, dtype=np.float64), np.asarray(t2, dtype=np.float64)


def _split_steps(n: FloatArray, mass: FloatArray, length: int) -> FloatArray:
    """Spread ``mass`` at non-integer step counts over floor/ceil (keeps E[n]); histogram by n."""
    lo = np.floor(n).astype(np.intp)
    frac = n - lo
    out = np.bincount(lo, weights=mass * (1.0 - frac), minlength=length + 2)
    out += np.bincount(lo + 1, weights=mass * frac, minlength=length + 2)
    return np.asarray(out[: length + 2], dtype=np.float64)


_SPECTRA: dict[tuple[bytes, float, float, int], tuple[FloatArray, ComplexArray, float]] = {}
_SPECTRA_MAX = 64


def _kernel_spectra(
    workload: DecodeWorkload, t1: float, t2: float, n_max: int, length: int
) -> tuple[FloatArray, ComplexArray, float]:
    """``(Re rfft(r_circ), rfft(g delayed one step), r_0)`` of the §2.4 kernels (rate-free).

    For a step linear in (B, K), r and g depend on the workload and (t1, t2) only, so they are
    transformed once per decode configuration (cached on the workload's bytes, t1, t2 and the
    grid length) and
    every rate costs one inverse FFT.
    """
    key = (_workload_key(workload), t1, t2, length)
    hit = _SPECTRA.get(key)
    if hit is not None:
        return hit
    w = t1 + t2 * workload.bin_mean_context
    a = _split_steps(workload.decode_steps, workload.prob * w, n_max)  # Σ p w at n = k
    b = _split_steps(workload.decode_steps, workload.prob * w**2, n_max)
    g = np.cumsum(a[::-1])[::-1][1:]  # g_m = Σ_{k>m} a_k, m = 0..n_max
    n_int = np.arange(n_max + 2, dtype=np.float64)
    tail_b = np.cumsum(b[::-1])[::-1]
    tail_kb = np.cumsum((b * n_int)[::-1])[::-1]
    r_m = np.zeros(length // 2 + 1)
    r_m[: n_max + 1] = tail_kb[1:] - n_int[: n_max + 1] * tail_b[1:]  # Σ_{k>m} b_k (k − m)
    r_circ = np.concatenate((r_m, r_m[-2:0:-1]))
    g_delayed = np.zeros(length)
    g_delayed[1 : n_max + 2] = g
    spec_r = np.fft.rfft(r_circ).real
    g_hat = np.fft.rfft(g_delayed)
    spec_r.flags.writeable = False
    g_hat.flags.writeable = False
    if len(_SPECTRA) >= _SPECTRA_MAX:
        _SPECTRA.clear()
    _SPECTRA[key] = (spec_r, g_hat, float(r_m[0]))
    return _SPECTRA[key]


def _workload_key(workload: DecodeWorkload) -> bytes:
    return b"".join(
        np.ascontiguousarray(x, dtype=np.float64).tobytes()
        for x in (workload.input_tokens, workload.decode_steps, workload.prob)
    ) + (b"" if workload.window_tokens is None else np.float64(workload.window_tokens).tobytes())


def load_noise(state: DecodeFixedPoint, workload: DecodeWorkload) -> tuple[FloatArray, FloatArray]:
    """§2.4 linear-noise model: ``Var X̄(n_i)`` ``[R, M]`` and the feedback factor F ``[R]``.

    Spectra of the kernels are cached per (workload, t1, t2, grid); the inverse FFTs of all rates
    sharing (t1, t2) run as one batched call (chunks of ``_FFT_BUDGET`` entries).
    """
    var_bins = np.zeros((state.rate_per_s.size, workload.prob.size))
    factor = np.ones(state.rate_per_s.size)
    for idx, cov, fac in _load_covariances(state, workload):
        factor[idx] = fac
        var_bins[idx] = _average_variance(cov, workload.decode_steps)
    return var_bins, factor


def feedback_factor(state: DecodeFixedPoint, workload: DecodeWorkload) -> FloatArray:
    """The feedback factor F ``[R]`` of :func:`load_noise` alone (the same doubles), without the per-bin
    variances it also averages out of each rate's covariance (what the capacity bounds read, §2.3)."""
    factor = np.ones(state.rate_per_s.size)
    for idx, _, fac in _load_covariances(state, workload):
        factor[idx] = fac
    return factor


Covariances = tuple[tuple[npt.NDArray[np.intp], FloatArray, FloatArray], ...]
_COVARIANCES: dict[tuple[bytes, bytes], Covariances] = {}
_COVARIANCES_BUDGET = 2**22
"""Doubles of covariance :func:`_load_covariances` keeps (32 MiB); past it the memo is emptied."""
_COVARIANCES_HELD = [0]


@forgets
def clear_memo() -> None:
    """Forget the load covariances :func:`_load_covariances` memoised (a search timed from scratch)."""
    _COVARIANCES.clear()
    _COVARIANCES_HELD[0] = 0


def _load_covariances(state: DecodeFixedPoint, workload: DecodeWorkload) -> Covariances:
    """Per batch of busy rates: their indices, the load covariance ``C_m`` (m = 0 … n_max + 1) of each and F =
    ``C_0/(λτ̄ r_0)`` (1 where that is 0: no noise). F = 1 for an idle rate (not yielded).

    Memoised on the exact doubles it reads (the workload's bins and window, each rate's λ, τ̄, u, t1, t2): a search
    asks for the same state again (a rate's TPOT and its capacity bounds' F, the KV and seat searches of one
    instance), about three calls in four in a default-family sweep. The arrays kept are read-only."""
    rates = b"".join(np.ascontiguousarray(x, np.float64).tobytes() for x in _state_inputs(state))
    key = (_workload_key(workload), rates)
    hit = _COVARIANCES.get(key)
    if hit is not None:
        return hit
    out = tuple(_computed_covariances(state, workload))
    for idx, cov, fac in out:
        for x in (idx, cov, fac):
            x.flags.writeable = False
    size = sum(cov.size for _, cov, _ in out)
    if _COVARIANCES_HELD[0] + size > _COVARIANCES_BUDGET:
        clear_memo()
    _COVARIANCES[key] = out
    _COVARIANCES_HELD[0] += size
    return out


def _state_inputs(state: DecodeFixedPoint) -> tuple[FloatArray, ...]:
    """What :func:`_computed_covariances` reads of a fixed point."""
    return (state.rate_per_s, state.tau_mean_s, state.utilisation, state.t1_s_per_seq, state.t2_s_per_token)


def _computed_covariances(
    state: DecodeFixedPoint, workload: DecodeWorkload
) -> Iterator[tuple[npt.NDArray[np.intp], FloatArray, FloatArray]]:
    """:func:`_load_covariances` computed (each covariance copied out of its FFT's buffer)."""
    n_max = int(np.ceil(workload.decode_steps.max()))
    u_top = float(np.clip(state.utilisation.max(), 0.0, 0.999))
    need = max(4.0, _GRID_FACTOR / (1.0 - u_top)) * (n_max + 2)
    length = min(_MAX_FFT, 2 ** int(np.ceil(np.log2(need))))
    if length < 4 * (n_max + 2):
        raise ValueError("decode load noise: step counts too long for the FFT grid")
    busy = np.flatnonzero(state.rate_per_s > 0.0)
    chunk = max(1, _FFT_BUDGET // length)
    groups: dict[tuple[float, float], list[int]] = {}
    for r in busy.tolist():
        groups.setdefault((float(state.t1_s_per_seq[r]), float(state.t2_s_per_token[r])), []).append(r)
    for (t1, t2), rows in groups.items():
        spec_r, g_hat, r0 = _kernel_spectra(workload, t1, t2, n_max, length)
        for start in range(0, len(rows), chunk):
            idx = np.asarray(rows[start : start + chunk])
            lam = state.rate_per_s[idx, None]
            lt = lam * state.tau_mean_s[idx, None]
            spec = lt * spec_r[None, :] / np.abs(1.0 - lam * g_hat[None, :]) ** 2
            cov = np.fft.irfft(spec, n=length, axis=1)[:, : n_max + 2].copy()
            denom = lt[:, 0] * r0  # 0 when w ≡ 0 or λτ̄ underflows: no noise, F = 1
            yield idx, cov, np.where(denom > 0.0, cov[:, 0] / np.where(denom > 0.0, denom, 1.0), 1.0)


def _average_variance(cov: FloatArray, steps: FloatArray) -> FloatArray:
    """``Var X̄(n) = (n C_0 + 2Σ_{m=1}^{n−1}(n−m)C_m)/n²``, linearly interpolated at real n; one row per covariance
    row (``cov`` ``[B, m]`` → ``[B, M]``: the running sums along each row are the sequential sums of one row)."""
    n_max = int(np.ceil(steps.max())) + 1
    c = cov[:, :n_max]
    m = np.arange(n_max, dtype=np.float64)
    zero = np.zeros((c.shape[0], 1))
    cs1 = np.concatenate((zero, np.cumsum(c[:, 1:], axis=1)), axis=1)  # Σ_{m=1}^{j} C_m
    cs2 = np.concatenate((zero, np.cumsum(m[1:] * c[:, 1:], axis=1)), axis=1)
    n = np.arange(1, n_max, dtype=np.float64)
    var_n = np.maximum((n * c[:, :1] + 2.0 * (n * cs1[:, :-1] - cs2[:, :-1])) / n**2, 0.0)
    return np.array([np.interp(steps, n, row) for row in var_n], dtype=np.float64).reshape(c.shape[0], steps.size)


def tpot_distribution(rate_per_s: ArrayLike, workload: DecodeWorkload, step_time: StepTimeFn) -> GammaMixture:
    """Per-request TPOT mixture (§2.4): offset t0 + w_i, load X̄ ~ Gamma(u τ̄, Var X̄(n_i))."""
    st = decode_fixed_point(rate_per_s, workload, step_time)
    var_bins, _ = load_noise(st, workload)
    w = st.t1_s_per_seq[:, None] + st.t2_s_per_token[:, None] * workload.bin_mean_context
    load_mean = st.tau_mean_s - st.t0_s  # = u_lin·τ̄ = t1 N + t2 K̄
    return GammaMixture(
        offset_s=st.t0_s[:, None] + w,
        load_mean_s=np.broadcast_to(load_mean[:, None], w.shape).copy(),
        load_var_s2=var_bins,
        prob=workload.prob,
    )


@dataclass(frozen=True, slots=True)
class DecodeCapacity:
    """Max stable per-instance rate and each bound (``inf`` = not binding below the u cap)."""

    max_rate_per_s: float
    utilisation_rate_per_s: float
    kv_rate_per_s: float
    seqs_rate_per_s: float
    binding: str


def _rate_at_utilisation(wl: DecodeWorkload, step: StepTimeFn, u_max: float) -> float:
    """λ with u(λ) = u_max: solve τ(λE[n]τ*, λE[work]τ*) = τ* for τ* = τ(0,0)/(1 − u_max)."""
    zero = np.zeros(1)
    target = float(step(zero, zero)[0]) / (1.0 - u_max)

    def f(lam: float) -> float:
        return (
            float(
                step(
                    np.array([lam * wl.mean_steps * target]),
                    np.array([lam * wl.mean_work * target]),
                )[0]
            )
            - target
        )

    hi = 1.0 / (wl.mean_steps * target)
    while f(hi) < 0.0:
        hi *= 2.0
    return float(brentq(f, 0.0, hi, xtol=1e-12, rtol=1e-12))


def decode_capacity(
    workload: DecodeWorkload,
    step_time: StepTimeFn,
    *,
    kv_capacity_tokens: float,
    max_num_seqs: float,
    z: float = Z99,
    utilisation_max: float = 0.85,
    state_tokens_per_seq: float = 0.0,
) -> DecodeCapacity:
    """Max per-instance rate meeting u ≤ u_max, ``K̄ + z·sd K ≤ M_kv``, ``N + z·sqrt(N F) ≤ seats``.

    ``utilisation_max`` defaults to 0.85, the highest load at which docs/queueing.md §6.3 validated the
    model (§5.2 "require u < u_max (≈0.85)"). A single request whose L + n exceeds M_kv gives 0.
    ``state_tokens_per_seq``: KV slots of fixed state per sequence; K counts them (:func:`kv_footprint`).
    """
    if not 0.0 < utilisation_max < 1.0:
        raise ValueError("utilisation_max must lie in (0, 1)")
    lam_u = _rate_at_utilisation(workload, step_time, utilisation_max)
    held = kv_footprint(workload, state_tokens_per_seq)
    if float(held.peak_tokens.max()) > kv_capacity_tokens:
        return DecodeCapacity(0.0, lam_u, 0.0, math.inf, "kv")

    def excess(lam: float) -> tuple[float, float]:
        st = decode_fixed_point([lam], workload, step_time)
        _, fac = load_noise(st, workload)
        lt = lam * float(st.tau_mean_s[0])
        sd_k = math.sqrt(lt * held.context_square_sum * float(fac[0]))
        n = float(st.mean_seqs[0])
        k_mean = float(st.mean_context_tokens[0]) + state_tokens_per_seq * n
        kv = k_mean + z * sd_k - kv_capacity_tokens
        return kv, n + z * math.sqrt(n * float(fac[0])) - max_num_seqs

    top = excess(lam_u)
    rates = []
    for i in range(2):
        if top[i] <= 0.0:
            rates.append(math.inf)
        else:
            rates.append(float(brentq(lambda x, i=i: excess(x)[i], 1e-12 * lam_u, lam_u, rtol=1e-6)))
    bounds = {"utilisation": lam_u, "kv": rates[0], "seqs": rates[1]}
    binding = min(bounds, key=lambda k: bounds[k])
    return DecodeCapacity(bounds[binding], lam_u, rates[0], rates[1], binding)
