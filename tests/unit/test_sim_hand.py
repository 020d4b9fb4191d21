"""Tiny scenarios of the simulator worked out by hand (pdplan.sim); times in seconds."""

import numpy as np
import pytest

from pdplan.sim import (
    Colocated,
    DecodePool,
    Disaggregated,
    KvTransfer,
    PrefillPool,
    Requests,
    simulate,
    simulate_closed_loop,
)


def _const(value: float):
    return lambda b, k: np.full(np.shape(b), value)


def _rng() -> np.random.Generator:
    return np.random.default_rng(0)


# Two requests, one prefill instance (S = 0.5 s each), transfers 0.15 s and 0.2 s, one decode
# instance with τ(B) = 0.05 + 0.05·B (0.1 s alone, 0.15 s for two). r0: arrives 0, out 8; r1: arrives
# 0.1, out 2. Prefill: r0 [0, 0.5], r1 [0.5, 1.0]; KV ready at 0.65 and 1.2.
_REQ = Requests.of([10, 20], [8, 2])
_ARRIVAL = [0.0, 0.1]


def _disagg(convention: str) -> Disaggregated:
    return Disaggregated(
        prefill=PrefillPool(1, service_s=[0.5, 0.5]),
        decode=DecodePool(1, step_time_s=lambda b, k: 0.05 + 0.05 * b),
        transfer=KvTransfer(time_s=[0.15, 0.2]),
        convention=convention,  # type: ignore[arg-type]
    )


def test_disaggregated_convention_a_by_hand() -> None:
    # A: n = output. r0 ready 0.65, steps end 0.75 (token 1), 0.85, ..., r1 ready 1.2: admitted at
    # the boundary 1.25 (r0 has done 6 steps). Then B = 2, τ = 0.15: 1.40 (r1 token 1; r0 step 7),
    # 1.55 (r0 step 8 → done; r1 step 2 → done).
    res = simulate(_ARRIVAL, _REQ, _disagg("A"), _rng(), warmup_fraction=0.0)
    np.testing.assert_allclose(res.first_token_s, [0.75, 1.40])
    np.testing.assert_allclose(res.ttft_s, [0.75, 1.30])
    np.testing.assert_allclose(res.finish_s, [1.55, 1.55])
    np.testing.assert_allclose(res.decode_admit_s, [0.65, 1.25])
    np.testing.assert_allclose(res.tpot_s, [(1.55 - 0.75) / 7, 0.15])
    np.testing.assert_allclose(res.e2e_s, [1.55, 1.45])


def test_disaggregated_convention_b_by_hand() -> None:
    # B: token 1 at prefill end; n = output − 1 = 7 and 1. r0 steps end 0.75 … 1.25 (6 steps);
    # r1 ready 1.2 → admitted at 1.25; B = 2: 1.40 ends r0's 7th and r1's only step.
    res = simulate(_ARRIVAL, _REQ, _disagg("B"), _rng(), warmup_fraction=0.0)
    np.testing.assert_allclose(res.ttft_s, [0.5, 0.9])
    np.testing.assert_allclose(res.finish_s, [1.40, 1.40])
    np.testing.assert_allclose(res.tpot_s, [(1.40 - 0.5) / 7, 0.40])


def test_decode_context_accounting() -> None:
    # Both prefills end at 1.0 (two instances); τ = 0.001·K. r0 (l=10, n=2), r1 (l=20, n=3):
    # K = 30 → 1.030; K = 32 → 1.062 (r0 done); K = 22 (r1 alone, 20 + 2) → 1.084.
    dep = Disaggregated(
        PrefillPool(2, routing="round-robin", service_s=[1.0, 1.0]),
        DecodePool(1, step_time_s=lambda b, k: 0.001 * k),
    )
    res = simulate([0.0, 0.0], Requests.of([10, 20], [2, 3]), dep, _rng(), warmup_fraction=0.0)
    np.testing.assert_allclose(res.first_token_s, [1.030, 1.030])
    np.testing.assert_allclose(res.finish_s, [1.062, 1.084])


def test_shared_link_is_fifo() -> None:
    # Both prefills end at 1.0; link held 0.5 s each, latency 0.6 s: ready 1.6 and 2.1. Steps of
    # 1 s from 1.6: r1 (ready 2.1) is admitted at the boundary 2.6.
    dep = Disaggregated(
        PrefillPool(2, routing="round-robin", service_s=[1.0, 1.0]),
        DecodePool(1, step_time_s=_const(1.0)),
        KvTransfer(time_s=[0.6, 0.6], link_busy_s=[0.5, 0.5]),
    )
    res = simulate([0.0, 0.0], Requests.of([10, 10], [3, 3]), dep, _rng(), warmup_fraction=0.0)
    np.testing.assert_allclose(res.decode_admit_s, [1.6, 2.6])


@pytest.mark.parametrize(("max_batch", "kv"), [(1, 1000.0), (4, 20.0)])
def test_admission_waits_for_seat_or_kv(max_batch: int, kv: float) -> None:
    # Footprints l + n: 13 and 12; with one seat, or 20 KV tokens, r1 waits for r0 (done 1.3).
    dep = Disaggregated(
        PrefillPool(2, routing="round-robin", service_s=[1.0, 1.0]),
        DecodePool(1, step_time_s=_const(0.1), max_batch=max_batch, kv_capacity_tokens=kv),
    )
    res = simulate([0.0, 0.0], Requests.of([10, 10], [3, 2]), dep, _rng(), warmup_fraction=0.0)
    np.testing.assert_allclose(res.decode_admit_s, [1.0, 1.3])
    np.testing.assert_allclose(res.finish_s, [1.3, 1.5])


def test_batched_prefill_by_hand() -> None:
    # Budget 100 tokens, batch time 0.01 s/token. r0 (60) starts alone at 0 → 0.6. r1, r2 (30 each)
    # and r3 (50) queue; at 0.6 the batch is r1 + r2 (60; +50 would exceed 100) → 1.2; r3 → 1.7.
    dep = Disaggregated(
        PrefillPool(1, batch_time_s=lambda tot, sq: 0.01 * tot, max_batch_tokens=100),
        DecodePool(1, step_time_s=_const(0.1)),
        convention="B",
    )
    req = Requests.of([60, 30, 30, 50], [1, 1, 1, 1])
    res = simulate([0.0, 0.1, 0.2, 0.3], req, dep, _rng(), warmup_fraction=0.0)
    np.testing.assert_allclose(res.finish_s, [0.6, 1.2, 1.2, 1.7])
    assert np.isnan(res.tpot_s).all()


def test_colocated_prefill_first_by_hand() -> None:
    # S = 0.5, τ = 0.1. r0 (out 4 → 3 steps) prefills [0, 0.5]; decodes 0.6, 0.7; r1 arrives 0.62,
    # prefills [0.7, 1.2] stalling r0; at 1.3 both finish (r0 step 3, r1 step 1).
    dep = Colocated(1, step_time_s=_const(0.1), scheduler="prefill-first", prefill_service_s=[0.5, 0.5])
    res = simulate([0.0, 0.62], Requests.of([10, 10], [4, 2]), dep, _rng(), warmup_fraction=0.0)
    np.testing.assert_allclose(res.first_token_s, [0.5, 1.2])
    np.testing.assert_allclose(res.finish_s, [1.3, 1.3])
    np.testing.assert_allclose(res.tpot_s, [0.8 / 3, 0.1])


def test_colocated_chunked_by_hand() -> None:
    # C = 8, τ_d = 0.1 (also with B = 0), chunk = 0.01·tokens + 0.001·context_before.
    # it1 [0, 0.18]: r0 8 tokens. it2: r0 2 tokens (ctx 8) + r1 4 tokens → 0.1 + 0.028 + 0.04
    # → 0.348: both prompts done (token 1). Decodes: 0.448 (r1 done), 0.548 (r0 done).
    dep = Colocated(
        1,
        step_time_s=_const(0.1),
        scheduler="chunked",
        token_budget=8,
        max_batch=4,
        chunk_time_s=lambda c, ctx, _b: 0.01 * c + 0.001 * ctx,
    )
    res = simulate([0.0, 0.05], Requests.of([10, 4], [3, 2]), dep, _rng(), warmup_fraction=0.0)
    np.testing.assert_allclose(res.first_token_s, [0.348, 0.348])
    np.testing.assert_allclose(res.finish_s, [0.548, 0.448])
    np.testing.assert_allclose(res.ttft_s, [0.348, 0.298])


@pytest.mark.parametrize("colocated", [False, True])
def test_closed_loop_concurrency_one_is_sequential(colocated: bool) -> None:
    # One client: each request is sent when the previous one finishes, so it never queues.
    req = Requests.of([10, 20, 30], [3, 3, 3])
    if colocated:
        dep: Disaggregated | Colocated = Colocated(
            1, step_time_s=_const(0.1), scheduler="prefill-first", prefill_service_s=[0.5] * 3
        )
        e2e = 0.5 + 2 * 0.1
    else:
        dep = Disaggregated(PrefillPool(1, service_s=[0.5] * 3), DecodePool(1, _const(0.1)), KvTransfer([0.2] * 3))
        e2e = 0.5 + 0.2 + 3 * 0.1
    res = simulate_closed_loop(1, req, dep, _rng(), warmup_fraction=0.0)
    np.testing.assert_allclose(res.e2e_s, [e2e] * 3)
    np.testing.assert_allclose(res.arrival_s[1:], res.finish_s[:-1])


def test_decode_routing_spreads_by_active_sequences() -> None:
    # Both prefills end at 1.0; two decode instances; τ(B) = 0.05 + 0.05·B. Least-loaded routing
    # puts one request on each: both first tokens at 1.1 (one shared instance would give 1.15).
    dep = Disaggregated(
        PrefillPool(2, routing="round-robin", service_s=[1.0, 1.0]),
        DecodePool(2, step_time_s=lambda b, k: 0.05 + 0.05 * b),
    )
    res = simulate([0.0, 0.0], Requests.of([10, 10], [2, 2]), dep, _rng(), warmup_fraction=0.0)
    np.testing.assert_allclose(res.first_token_s, [1.1, 1.1])
    assert res.pool("decode").instances == 2


# Decode routing by hand (convention B, τ(B) = 0.1·B). Prefill (one instance, arrivals at 0):
# r0 0.01 s, r1 0.01 s, r2 0.5 s → done 0.01, 0.02, 0.52. r0 decodes 10 steps on d0 (boundaries
# 0.11 … 1.01 alone); r1 one step on d1 (0.02 → 0.12). r2 (one step) ends prefill at 0.52:
# round-robin sends it to d0, admitted at the boundary 0.61 and batched with r0 (τ = 0.2): done
# 0.81; least-work (fewest outstanding requests) sends it to the idle d1: done 0.62.
@pytest.mark.parametrize(("routing", "finish"), [("round-robin", 0.81), ("least-work", 0.62)])
def test_decode_routing_by_hand(routing: str, finish: float) -> None:
    dep = Disaggregated(
        PrefillPool(1, service_s=[0.01, 0.01, 0.5]),
        DecodePool(2, lambda b, k: 0.1 * np.asarray(b), routing=routing),  # type: ignore[arg-type]
        convention="B",
    )
    res = simulate([0.0, 0.0, 0.0], Requests.of([10, 10, 10], [11, 2, 2]), dep, _rng(), warmup_fraction=0.0)
    np.testing.assert_allclose(res.finish_s[1:], [0.12, finish])


@pytest.mark.parametrize(("routing", "shared"), [("random", 0.5), ("least-work", 0.0), ("round-robin", 0.0)])
def test_decode_routing_random_collides_half_the_time(routing: str, shared: float) -> None:
    # Pairs of one-step requests, ready 1e-4 s apart, pairs 10 s apart, τ = 0.1 s per step: the
    # second of a pair takes 0.1 s on an idle instance, ≈ 0.2 s behind its partner on the same one.
    # Random routing picks the partner's instance half the time; the others never do.
    n = 2000
    arrival = np.repeat(np.arange(n // 2) * 10.0, 2)
    dep = Disaggregated(
        PrefillPool(1, service_s=np.full(n, 1e-4)),
        DecodePool(2, _const(0.1), routing=routing),  # type: ignore[arg-type]
        convention="B",
    )
    res = simulate(arrival, Requests.of(np.full(n, 8), np.full(n, 2)), dep, _rng(), warmup_fraction=0.0)
    slow = float(np.mean(res.tpot_s[1::2] > 0.15))
    assert slow == pytest.approx(shared, abs=0.04)


def test_prefill_side_link_is_one_fifo_per_prefill_instance() -> None:
    # One prefill instance feeds two decode instances; its NIC is held 0.5 s per transfer, the
    # decode NICs 0.01 s. r1 (prefill done 0.02) waits for r0's transfer (0.01 → 0.51): KV ready at
    # 0.51 + 0.05 although it goes to the other decode instance.
    dep = Disaggregated(
        PrefillPool(1, service_s=[0.01, 0.01]),
        DecodePool(2, _const(0.1), routing="round-robin"),
        KvTransfer(time_s=[0.05, 0.05], link_busy_s=[0.01, 0.01], prefill_link_busy_s=[0.5, 0.5]),
        convention="B",
    )
    res = simulate([0.0, 0.0], Requests.of([10, 10], [2, 2]), dep, _rng(), warmup_fraction=0.0)
    np.testing.assert_allclose(res.decode_admit_s, [0.06, 0.56])


def test_overlapped_stream_starts_before_the_prefill_ends() -> None:
    # Layer-wise: r0's stream may start 0.8 s before its prefill ends (done 1.0 → 0.2), holds the
    # link 0.5 s and needs 0.5 s in all, but its last layer is exposed only 0.05 s: ready at
    # max(1.0 + 0.05, 0.2 + 0.5) = 1.05. r1 (done 2.0, stream from 1.2, link free since 0.7):
    # ready 2.05. The link never delays a stream that keeps up with the compute.
    dep = Disaggregated(
        PrefillPool(1, service_s=[1.0, 1.0]),
        DecodePool(1, _const(0.1)),
        KvTransfer(time_s=[0.05, 0.05], prefill_link_busy_s=[0.5, 0.5], stream_lead_s=[0.8, 0.8], stream_s=[0.5, 0.5]),
    )
    res = simulate([0.0, 0.0], Requests.of([10, 10], [2, 2]), dep, _rng(), warmup_fraction=0.0)
    np.testing.assert_allclose(res.decode_admit_s, [1.05, 2.05])


def test_overlapped_stream_behind_a_busy_link_finishes_late() -> None:
    # r0 holds the link 1.9 s from 0.2 (its stream lead 0.8 before done 1.0): free at 2.1. r1's
    # prefill ends at 1.1 (service 0.1), its stream could start at 1.1 − 0.05 = 1.05 but starts at
    # 2.1 and needs 0.3 s: ready max(1.1 + 0.02, 2.1 + 0.3) = 2.4 (r0: max(1.0 + 1.2, 0.2 + 1.9)).
    dep = Disaggregated(
        PrefillPool(1, service_s=[1.0, 0.1]),
        DecodePool(1, _const(0.1)),
        KvTransfer(time_s=[1.2, 0.02], prefill_link_busy_s=[1.9, 0.3], stream_lead_s=[0.8, 0.05], stream_s=[1.9, 0.3]),
    )
    res = simulate([0.0, 0.0], Requests.of([10, 10], [2, 2]), dep, _rng(), warmup_fraction=0.0)
    np.testing.assert_allclose(res.decode_admit_s, [2.2, 2.4])
