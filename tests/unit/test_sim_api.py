"""Simulator API: statistics helpers, reproducibility, input errors, invariants (pdplan.sim)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdplan.errors import SpecError
from pdplan.sim import (
    Colocated,
    DecodePool,
    Disaggregated,
    KvTransfer,
    PrefillPool,
    Requests,
    poisson_arrivals,
    simulate,
    simulate_closed_loop,
)


def _step(b: np.ndarray, k: np.ndarray) -> np.ndarray:
    return 0.01 + 1e-4 * b + 1e-7 * k


def _workload(n: int, seed: int) -> tuple[np.ndarray, Requests]:
    rng = np.random.default_rng(seed)
    req = Requests.of(rng.integers(50, 800, n), rng.integers(1, 40, n))
    return poisson_arrivals(4.0, n, rng), req


def _deployments(n: int, req: Requests) -> list[Disaggregated | Colocated]:
    service = 1e-4 * req.input_tokens + 0.01
    return [
        Disaggregated(
            PrefillPool(3, routing="random", service_s=service),
            DecodePool(2, _step),
            KvTransfer(np.full(n, 0.01), np.full(n, 0.005)),
        ),
        Disaggregated(
            PrefillPool(2, routing="random", batch_time_s=lambda t, q: 0.01 + 1e-4 * t),
            DecodePool(2, _step, max_batch=8),
            convention="B",
        ),
        Colocated(3, _step, scheduler="prefill-first", routing="random", prefill_service_s=service),
        Colocated(
            3,
            _step,
            scheduler="chunked",
            routing="random",
            token_budget=256,
            max_batch=64,
            chunk_time_s=lambda c, ctx, _b: 1e-4 * c,
        ),
    ]


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.array_equal(a, b, equal_nan=True))


def test_same_seed_gives_identical_results() -> None:
    n = 600
    arrival, req = _workload(n, 2)
    for dep in _deployments(n, req):
        one = simulate(arrival, req, dep, np.random.default_rng(9))
        two = simulate(arrival, req, dep, np.random.default_rng(9))
        other = simulate(arrival, req, dep, np.random.default_rng(10))
        assert _same(one.ttft_s, two.ttft_s)
        assert _same(one.tpot_s, two.tpot_s)
        assert one.pools == two.pools
        assert not _same(one.e2e_s, other.e2e_s)  # random routing differs
        closed = [simulate_closed_loop(4, req, dep, np.random.default_rng(9)) for _ in range(2)]
        assert _same(closed[0].e2e_s, closed[1].e2e_s)


def test_summary_and_attainment_by_hand() -> None:
    # Constant services: S = 1 s, step 0.1 s, far apart arrivals: TTFT (A) = 1 + 0.1, TPOT 0.1.
    n = 20
    req = Requests.of(np.full(n, 10), np.array([1, 3] * (n // 2)))
    dep = Disaggregated(PrefillPool(1, service_s=np.ones(n)), DecodePool(1, lambda b, k: np.full(np.shape(b), 0.1)))
    res = simulate(np.arange(n) * 10.0, req, dep, np.random.default_rng(0))
    assert res.warmup_count == 2
    ttft = res.summary("ttft")
    assert ttft.count == 18
    assert ttft.mean_s == pytest.approx(1.1)
    assert ttft.p99_s == pytest.approx(1.1)
    tpot = res.summary("tpot")
    assert tpot.count == 9
    assert tpot.p50_s == pytest.approx(0.1)
    assert res.attainment(1.2, 0.2) == 1.0
    assert res.attainment(1.0, 0.2) == 0.0
    assert res.attainment(1.2, 0.05) == pytest.approx(0.5)  # one-token outputs meet TPOT
    assert res.window_s == (20.0, 190.0)
    assert res.pool("prefill").utilisation == pytest.approx(17 / 170)
    with pytest.raises(KeyError):
        res.pool("colocated")


def test_poisson_arrivals_rate_and_order() -> None:
    times = poisson_arrivals(5.0, 50_000, np.random.default_rng(1))
    assert np.all(np.diff(times) >= 0)
    assert times.size / times[-1] == pytest.approx(5.0, rel=0.02)


_REQ = Requests.of([10, 10], [2, 2])


@pytest.mark.parametrize(
    ("dep", "arrival", "match"),
    [
        (Disaggregated(PrefillPool(1), DecodePool(1, _step)), [0, 1], "exactly one"),
        (Disaggregated(PrefillPool(1, service_s=[1, 1]), DecodePool(1, _step)), [1, 0], "sorted"),
        (Disaggregated(PrefillPool(0, service_s=[1, 1]), DecodePool(1, _step)), [0, 1], "instances"),
        (
            Disaggregated(
                PrefillPool(1, routing="jsq", service_s=[1, 1]),  # type: ignore[arg-type]
                DecodePool(1, _step),
            ),
            [0, 1],
            "routing",
        ),
        (
            Disaggregated(PrefillPool(1, service_s=[1, 1]), DecodePool(1, _step, kv_capacity_tokens=5)),
            [0, 1],
            "kv_capacity",
        ),
        (Disaggregated(PrefillPool(1, service_s=[1, -1]), DecodePool(1, _step)), [0, 1], ">= 0"),
        (Disaggregated(PrefillPool(1, service_s=[1, 1]), DecodePool(1, lambda b, k: 0 * b)), [0, 1], "positive"),
        (Colocated(1, _step, scheduler="prefill-first"), [0, 1], "prefill_service_s"),
        (Colocated(1, _step, token_budget=8, max_batch=8, chunk_time_s=lambda c, x, _b: c), [0, 1], "token_budget"),
        (Colocated(1, _step, chunk_time_s=None), [0, 1], "chunk_time_s"),
    ],
)
def test_bad_inputs_raise_spec_error(dep: Disaggregated | Colocated, arrival: list[float], match: str) -> None:
    with pytest.raises(SpecError, match=match):
        simulate(arrival, _REQ, dep, np.random.default_rng(0))


def test_bad_requests_and_options() -> None:
    with pytest.raises(SpecError, match="output_tokens"):
        Requests.of([10], [0])
    with pytest.raises(SpecError, match="same length"):
        Requests.of([10, 20], [1])
    dep = Disaggregated(PrefillPool(1, service_s=[1, 1]), DecodePool(1, _step))
    with pytest.raises(SpecError, match="warmup_fraction"):
        simulate([0, 1], _REQ, dep, np.random.default_rng(0), warmup_fraction=1.0)
    with pytest.raises(SpecError, match="concurrency"):
        simulate_closed_loop(0, _REQ, dep, np.random.default_rng(0))
    with pytest.raises(SpecError, match="rate_per_s"):
        poisson_arrivals(0.0, 3, np.random.default_rng(0))


@settings(deadline=None, max_examples=25)
@given(
    seed=st.integers(0, 10_000),
    which=st.integers(0, 3),
    concurrency=st.one_of(st.none(), st.integers(1, 6)),
)
def test_every_request_finishes_in_causal_order(seed: int, which: int, concurrency: int | None) -> None:
    n = 60
    arrival, req = _workload(n, seed)
    dep = _deployments(n, req)[which]
    rng = np.random.default_rng(seed)
    if concurrency is None:
        res = simulate(arrival, req, dep, rng, warmup_fraction=0.0)
    else:
        res = simulate_closed_loop(concurrency, req, dep, rng, warmup_fraction=0.0)
    assert np.all(np.isfinite(res.finish_s))
    assert np.all(res.ttft_s > 0)
    assert np.all(res.finish_s >= res.first_token_s)
    multi = req.output_tokens > 1
    assert np.all(res.tpot_s[multi] >= 0.01 - 1e-12)  # every step costs at least t0
    assert np.isnan(res.tpot_s[~multi]).all()
    for pool in res.pools:
        assert 0.0 <= pool.utilisation <= 1.0 + 1e-9 or math.isnan(pool.utilisation)
