"""The prefill pool of an xPyD deployment: x instances behind the router, batch-1 or batched.

* **One prompt at a time** (default; docs/queueing.md §1.2–1.3): FCFS service S(l) = the batch-1 roofline
  *stage* time plus the transfer granularity's prefill extra; the wait by routing policy
  (:func:`pdplan.serving.ttft.prefill_wait`); capacity x/E[S].
* **Batched** (scenario ``prefill_max_batch_tokens``; docs/queueing.md §1.4): each instance is the
  dynamic-batching queue of :mod:`pdplan.queueing.batched`, with batches priced by the roofline
  (:class:`pdplan.serving.roles.PrefillBatchTime`); the transfer granularity's prefill extra is
  paid once per batch (layer: the per-layer syncs of one pass; chunk: its largest value over the
  prompts, a pessimistic simplification); capacity x·λ_cap. Random routing: one chain per
  instance at λ/x (exact thinning); round-robin: the same (pessimistic: its arrivals are
  smoother); least-work (the simulator's central FCFS queue, taken by whichever instance frees
  first): the chain with batch durations T/x and Erlang-C idle instances
  (:func:`pdplan.queueing.batched_ttft.batched_wait`).

TTFT offsets are taken per quadrature length l_kj of each prompt bin
(:func:`pdplan.workload.quadrature.input_quadrature`): the prompt's own prefill (its batch-1 pass
latency; batched: its single-prompt batch time plus the pipeline latency beyond the stage time,
PP > 1) enters TTFT directly, so it is resolved within bins; the FCFS wait uses the same points as
its service-time law (weights p_k/J).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from pdplan.errors import SpecError
from pdplan.queueing import WaitDistribution
from pdplan.serving.role_hardware import RoleHardware
from pdplan.serving.roles import PrefillPerf, prefill_batch_time
from pdplan.serving.ttft import prefill_wait
from pdplan.types import FloatArray

if TYPE_CHECKING:
    from pdplan.queueing.batched import BatchedPrefill
    from pdplan.queueing.batched_ttft import PerBinWait


@dataclass(frozen=True, slots=True)
class PrefillPool:
    """Prefill instances of one type; per-point arrays have shape ``[K, J]``."""

    routing: str
    instances: int
    bin_prob: FloatArray
    point_latency_s: FloatArray
    point_service_s: FloatArray
    batched: BatchedPrefill | None = None
    arrival_ca2: float = 1.0
    """c_a² of the workload's arrival gaps (:mod:`pdplan.queueing.arrivals`; batch-1 waits only, batched: Poisson)."""

    @property
    def point_prob(self) -> FloatArray:
        """Weights of the flattened points: p_k/J each."""
        j = self.point_latency_s.shape[1]
        return np.asarray(np.repeat(self.bin_prob / j, j), dtype=np.float64)

    @property
    def capacity_rps(self) -> float:
        """Largest stable total rate of the pool (req/s)."""
        if self.batched is not None:
            return self.instances * self.batched.capacity_rps
        return self.instances / float(self.point_prob @ self.point_service_s.ravel())

    def load(self, rates: FloatArray) -> FloatArray:
        """Rate over capacity: ρ = λE[S]/x for batch-1 prefill (its busy fraction too)."""
        return np.asarray(rates / self.capacity_rps, dtype=np.float64)

    def wait(self, rates: FloatArray) -> tuple[WaitDistribution | PerBinWait, FloatArray]:
        """(wait before the own prefill, busy time fraction of an instance) per rate.

        Batched: the wait is per prompt bin, ``Z_k = TTFT − F(l_k)`` (its prefill included
        beyond the single-prompt time), so the offsets are the single-prompt times.
        """
        if self.batched is not None:
            from pdplan.queueing.batched_ttft import batched_wait  # lazy: batched prefill only (issue #27)

            if self.routing == "least-work" and self.instances > 1:
                wait = batched_wait(self.batched, rates, self.instances)
            else:
                wait = batched_wait(self.batched, rates / self.instances)
            return wait, wait.busy
        service, prob = self.point_service_s.ravel(), self.point_prob
        out = prefill_wait(self.routing, rates, service, prob, self.instances, arrival_ca2=self.arrival_ca2)
        return out, self.load(rates)


def prefill_pool(
    hw: RoleHardware,
    routing: str,
    instances: int,
    points: FloatArray,
    bin_lengths: FloatArray,
    bin_prob: FloatArray,
    extra_s: FloatArray,
    budget_tokens: int | None,
    base: PrefillPerf,
    cached_tokens: FloatArray | None = None,
) -> PrefillPool:
    """Price the pool at the quadrature ``points`` ``[K, J]`` (module docstring).

    ``extra_s`` ``[K, J]``: the transfer granularity's prefill extra per point (batch-1: added to
    each prompt; batched: once per batch, its value being the same for every prompt). ``base``: each point's batch-1
    prefill, flattened (:func:`pdplan.serving.roles.prefill_perf` of ``points.ravel()``; with ``cached_tokens``
    ``[K, J]``, each point's prefix served from a prefix cache, :func:`pdplan.serving.roles.cached_prefill_perf`;
    batch-1 only).
    """
    if cached_tokens is not None and budget_tokens is not None:
        raise SpecError(
            "batched prefill (prefill_max_batch_tokens) with a prefix cache is not modelled; drop one of them",
            field="prefill_max_batch_tokens",
        )
    shape = points.shape
    latency = base.latency_s.reshape(shape) + extra_s
    service = base.service_s.reshape(shape) + extra_s
    if budget_tokens is None:
        return PrefillPool(routing, instances, bin_prob, latency, service)
    from pdplan.queueing.batched import batched_prefill  # lazy: batched prefill only (start-up, issue #27)

    top = max(float(budget_tokens), float(points.max()), float(bin_lengths.max()))
    table = prefill_batch_time(hw, 1.1 * top, float(extra_s.max()))
    model = batched_prefill(bin_lengths, bin_prob, float(budget_tokens), table)
    pipe = (base.latency_s - base.service_s).reshape(shape)
    own = table.single_s(points) + pipe
    return PrefillPool(routing, instances, bin_prob, own, service, model)
