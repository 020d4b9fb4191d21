"""Tiny numpy discrete-event simulator behind ``pdplan simulate`` (docs/queueing.md §5.4).

It validates the closed forms of :mod:`pdplan.queueing` by replaying the same model event by event:
prefill pools (FCFS per instance, random / round-robin / least-work / least-loaded / power-of-two routing, optional
batching),
KV transfer (optional FIFO links: each decode instance's inbound and each prefill instance's
outbound NICs), decode pools (random / round-robin / least-work routing, step-level continuous
batching with seat and KV admission limits), and colocated instances (prefill-first or chunked
prefill). It takes plain arrays and callables — never the perf model or specs — so any step-time
model can be simulated. Everything is deterministic given the seeded ``np.random.Generator``
(used only for random and power-of-two routing; arrivals come from :func:`poisson_arrivals` or a trace).

Example::

    rng = np.random.default_rng(0)
    req = Requests.of(input_tokens=np.full(1000, 512), output_tokens=np.full(1000, 128))
    dep = Disaggregated(
        prefill=PrefillPool(instances=1, service_s=np.full(1000, 0.05)),
        decode=DecodePool(instances=1, step_time_s=lambda b, k: 0.01 + 1e-4 * b + 1e-8 * k),
    )
    res = simulate(poisson_arrivals(5.0, 1000, rng), req, dep, rng)
    res.summary("ttft").p90_s, res.attainment(ttft_slo_s=0.5, tpot_slo_s=0.05)
"""

from pdplan.sim.event_loop import simulate, simulate_closed_loop
from pdplan.sim.metrics import PoolStats, SimResult, Summary
from pdplan.sim.prefill import lindley_done_s
from pdplan.sim.spec import (
    Colocated,
    DecodePool,
    Deployment,
    Disaggregated,
    KvTransfer,
    PrefillPool,
    Requests,
    poisson_arrivals,
)

__all__ = [
    "Colocated",
    "DecodePool",
    "Deployment",
    "Disaggregated",
    "KvTransfer",
    "PoolStats",
    "PrefillPool",
    "Requests",
    "SimResult",
    "Summary",
    "lindley_done_s",
    "poisson_arrivals",
    "simulate",
    "simulate_closed_loop",
]
