"""The simulator against queueing theory: P-K, Erlang C, Little's law, mean field (pdplan.sim).

Each reference formula is written out here (docs/queueing.md §1.2, §1.3, §2.2) so that the test depends
only on the simulator. Seeds are fixed; tolerances are about 3 standard errors of the sample mean.
"""

import numpy as np
import pytest

from pdplan.sim import (
    Colocated,
    DecodePool,
    Disaggregated,
    PrefillPool,
    Requests,
    poisson_arrivals,
    simulate,
    simulate_closed_loop,
)


def _prefill_only(service_s: np.ndarray, instances: int = 1, routing: str = "least-work"):
    # Convention B with one output token: the request ends at prefill completion, no decode.
    return Disaggregated(
        PrefillPool(instances, routing=routing, service_s=service_s),  # type: ignore[arg-type]
        DecodePool(1, step_time_s=lambda b, k: np.full(np.shape(b), 0.01)),
        convention="B",
    )


def _mean_wait(kind: str, n: int, seed: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    service = np.ones(n) if kind == "D" else rng.exponential(1.0, n)
    arrival = poisson_arrivals(0.5, n, rng)
    req = Requests.of(np.full(n, 100), np.ones(n, dtype=int))
    res = simulate(arrival, req, _prefill_only(service), rng)
    wait = (res.ttft_s - service)[res.warmup_count :]
    return float(wait.mean()), res.pool("prefill").utilisation


@pytest.mark.parametrize(("kind", "second_moment"), [("D", 1.0), ("M", 2.0)])
def test_single_prefill_instance_matches_pollaczek_khinchine(kind: str, second_moment: float) -> None:
    # ρ = λE[S] = 0.5; E[W] = λE[S²]/(2(1 − ρ)) = 0.5 (M/D/1) and 1.0 (M/M/1).
    wait, util = _mean_wait(kind, 200_000, seed=1)
    expected = 0.5 * second_moment / (2 * (1 - 0.5))
    assert wait == pytest.approx(expected, rel=0.03)
    assert util == pytest.approx(0.5, rel=0.02)


def _erlang_c(c: int, a: float) -> float:
    b = 1.0
    for k in range(1, c + 1):  # Erlang-B recursion
        b = a * b / (k + a * b)
    return c * b / (c - a * (1 - b))


def _mean_ttft(routing: str, n: int = 40_000) -> float:
    rng = np.random.default_rng(7)
    service = rng.exponential(1.0, n)
    arrival = poisson_arrivals(2.8, n, rng)  # x = 4, ρ = 0.7
    req = Requests.of(np.full(n, 100), np.ones(n, dtype=int))
    res = simulate(arrival, req, _prefill_only(service, 4, routing), rng)
    return res.summary("ttft").mean_s


def test_least_work_is_mmc_and_beats_round_robin_and_random() -> None:
    # Least-work = central FCFS queue: M/M/4 mean wait C(c, a)/(cμ − λ) with a = λ/μ = 2.8.
    lw, rr, rnd = (_mean_ttft(r) for r in ("least-work", "round-robin", "random"))
    expected = 1.0 + _erlang_c(4, 2.8) / (4.0 - 2.8)
    assert lw == pytest.approx(expected, rel=0.04)
    assert lw < rr < rnd
    assert rnd == pytest.approx(1.0 + 0.7 / (1 - 0.7), rel=0.08)  # random: M/M/1 at λ/4


_T0, _T1, _T2 = 8e-3, 50e-6, 4e-8


def _step(b: np.ndarray, k: np.ndarray) -> np.ndarray:
    return _T0 + _T1 * b + _T2 * k


def _decode_run(u: float, n: int = 8000, seed: int = 3):
    rng = np.random.default_rng(seed)
    prompt = rng.integers(100, 2000, n)
    out = 1 + rng.geometric(1 / 80, n)
    steps = out - 1  # convention B
    work = _T1 * steps.mean() + _T2 * np.mean(steps * prompt + steps * (steps - 1) / 2)
    rate = u / work  # u = λ(t1 E[n] + t2 E[nL + n(n−1)/2])  (docs/queueing.md §2.2)
    dep = Disaggregated(PrefillPool(8, service_s=np.full(n, 1e-3)), DecodePool(1, _step), convention="B")
    return simulate(poisson_arrivals(rate, n, rng), Requests.of(prompt, out), dep, rng)


def test_decode_littles_law_and_mean_field_tpot() -> None:
    res = _decode_run(u=0.3)
    counted = res.counted & ~np.isnan(res.decode_admit_s)
    residence = (res.finish_s - res.decode_admit_s)[counted]
    pool = res.pool("decode")
    # Little: mean sequences in the batch = completion rate × mean time in the batch.
    assert pool.mean_active == pytest.approx(res.throughput_rps * residence.mean(), rel=0.03)
    # Mean field τ̄ = t0/(1 − u); measured −1.5 % at u = 0.3 in docs/queueing.md §6.3.
    assert res.summary("tpot").mean_s == pytest.approx(_T0 / (1 - 0.3), rel=0.06)
    assert pool.utilisation == pytest.approx(1.0, abs=0.02)  # a batch is almost never empty


@pytest.mark.parametrize("colocated", [False, True])
def test_closed_loop_throughput(colocated: bool) -> None:
    rng = np.random.default_rng(11)
    n = 3000
    req = Requests.of(rng.integers(100, 1000, n), rng.integers(1, 60, n))
    service = 1e-4 * req.input_tokens
    if colocated:
        dep: Disaggregated | Colocated = Colocated(
            2,
            step_time_s=_step,
            scheduler="chunked",
            token_budget=512,
            max_batch=64,
            chunk_time_s=lambda c, ctx, _b: 1e-4 * c + 1e-8 * c * ctx,
        )
    else:
        dep = Disaggregated(PrefillPool(1, service_s=service), DecodePool(2, _step))
    one = simulate_closed_loop(1, req, dep, rng)
    # One client, zero think time: requests run back to back, throughput = 1/E[e2e].
    assert one.throughput_rps == pytest.approx(1.0 / one.summary("e2e").mean_s, rel=0.01)
    many = simulate_closed_loop(16, req, dep, rng)
    # Little's law for the closed system: X · E[e2e] = C (every client always has one request).
    assert many.throughput_rps * many.summary("e2e").mean_s == pytest.approx(16, rel=0.03)
    assert many.throughput_rps > 3 * one.throughput_rps
    tokens_per_req = many.output_tokens_per_s / many.throughput_rps
    assert tokens_per_req == pytest.approx(req.output_tokens.mean(), rel=0.1)


def test_colocated_prefill_first_stretches_tpot() -> None:
    # Prefill-first stalls decodes: mean TPOT ≈ τ_d/(1 − ρ_p) (docs/queueing.md §3) with constant
    # τ_d = 2 ms and ρ_p = λ E[S] = 2 · 0.2 = 0.4 → 3.33 ms. Long outputs (400 steps) make the
    # per-request average close to the time average; the sim sits ~12 % above because a request
    # leaves prefill exactly when the prefill queue is most likely busy.
    rng = np.random.default_rng(5)
    n = 3000
    req = Requests.of(np.full(n, 200), np.full(n, 401))
    dep = Colocated(
        1,
        step_time_s=lambda b, k: np.full(np.shape(b), 0.002),
        scheduler="prefill-first",
        prefill_service_s=np.full(n, 0.2),
    )
    res = simulate(poisson_arrivals(2.0, n, rng), req, dep, rng)
    tpot = res.summary("tpot").mean_s
    assert 0.002 / (1 - 0.4) < tpot < 1.2 * 0.002 / (1 - 0.4)
    assert res.pool("colocated").utilisation > 0.4
