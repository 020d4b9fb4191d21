"""The simulator's routers that count requests (pdplan.sim.prefill: least-loaded, power-of-two), by hand."""

import numpy as np
import pytest

from pdplan.sim import DecodePool, Disaggregated, PrefillPool, Requests, simulate
from pdplan.sim.prefill import count_pick, static_routes

# Two prefill instances; r0 (10 s) at 0, r1, r2, r3 (1 s each) at 1, 2, 2.5. least-loaded: r0 → i0 (tie: lowest
# index), r1 → i1 (counts [1, 0]), r2 at 2 → i1 (r1 ended at 2: counts [1, 0]) [2, 3], r3 at 2.5 → counts [1, 1],
# tie → i0 behind r0: done 11. least-work (the least unfinished work) sends r3 to i1, free at 3: done 4.
_ARRIVAL = [0.0, 1.0, 2.0, 2.5]
_REQ = Requests.of([10, 10, 10, 10], [2, 2, 2, 2])


def _dep(routing: str, **pool: object) -> Disaggregated:
    prefill = PrefillPool(2, routing=routing, **pool)  # type: ignore[arg-type]
    return Disaggregated(prefill, DecodePool(1, lambda b, k: np.full(np.shape(b), 1e-3)), convention="B")


@pytest.mark.parametrize(("routing", "done"), [("least-loaded", [10, 2, 3, 11]), ("least-work", [10, 2, 3, 4])])
def test_prefill_routes_by_count_by_hand(routing: str, done: list[float]) -> None:
    res = simulate(
        _ARRIVAL, _REQ, _dep(routing, service_s=[10.0, 1.0, 1.0, 1.0]), np.random.default_rng(0), warmup_fraction=0.0
    )
    np.testing.assert_allclose(res.prefill_done_s, done)


def test_power_of_two_over_two_instances_is_jsq_but_for_ties() -> None:
    # two instances: both are drawn, so r0…r2 go as least-loaded; r3's tie goes to the first drawn (i0: 11, i1: 4)
    ends = set()
    for seed in range(8):
        res = simulate(
            _ARRIVAL,
            _REQ,
            _dep("power-of-two", service_s=[10.0, 1.0, 1.0, 1.0]),
            np.random.default_rng(seed),
            warmup_fraction=0.0,
        )
        np.testing.assert_allclose(res.prefill_done_s[:3], [10, 2, 3])
        ends.add(float(res.prefill_done_s[3]))
    assert ends == {11.0, 4.0}


def test_batched_prefill_counts_the_running_batch() -> None:
    # batches of one (budget 10 tokens), 1 s per 10-token prompt: r0 [0, 1], r1 [1, 2], r2 [2, 3] on an instance
    # with no request; r3 at 2.5 sees counts 1 (r2's batch running) and 0, so it starts at once on the idle one: 3.5
    # (a random or round-robin split may queue it behind r2: 4)
    req = Requests.of([10, 10, 10, 10], [2, 2, 2, 2])
    dep = _dep("least-loaded", batch_time_s=lambda tot, sq: 0.1 * tot, max_batch_tokens=10)
    res = simulate(_ARRIVAL, req, dep, np.random.default_rng(0), warmup_fraction=0.0)
    np.testing.assert_allclose(res.prefill_done_s, [1.0, 2.0, 3.0, 3.5])


def test_count_pick_and_drawn_pairs() -> None:
    assert count_pick("least-loaded", [2, 0, 1], 0) == 1
    assert count_pick("least-loaded", [1, 1, 1], 0) == 0  # tie: the lowest index
    assert count_pick("power-of-two", [2, 0, 1], 2 * 3 + 0) == 2  # instances 2 and 0: 1 < 2
    assert count_pick("power-of-two", [1, 0, 1], 2 * 3 + 0) == 2  # tie: the first drawn
    codes = static_routes("power-of-two", 5000, 4, np.random.default_rng(1))
    first, second = np.divmod(codes, 4)
    assert np.all(first != second)  # two distinct instances
    np.testing.assert_allclose(np.bincount(first, minlength=4) / 5000, 0.25, atol=0.03)
    np.testing.assert_allclose(np.bincount(second, minlength=4) / 5000, 0.25, atol=0.03)
