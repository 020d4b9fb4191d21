"""KV-link load of an xPyD fan-in: which side's NICs are busier, and that side as an M/G/1 queue.

**Fan-in / link queue** (docs/queueing.md §1.5). ``x`` prefill feed ``y`` decode instances, evenly:
``ρ_d = λ·E[B]/(y·BW_d)``, ``ρ_p = (λ/x)·E[B]/BW_p`` with ``BW_side = line_rate·eff·nics_side``.
The busier side is one FCFS M/G/1 server on work, ``S = latency + B/BW_side``; Pollaczek–Khinchine
``E[W] = λE[S²]/(2(1−ρ))``. Always modelled (at low ρ the wait is ≈ 0); the service-time
distribution is returned for the FFT waiting-time machinery. The serving model refines this per
prompt bin (:mod:`pdplan.queueing.link_delay`): a stream absorbs ``slack = exposed + overlap −
time`` of any wait, and a prefill instance's own NICs are fed by that one server, not by Poisson
arrivals (a tandem chain instead of the M/G/1).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from pdplan.transfer.kv import TransferResult, expectation
from pdplan.transfer.kv_inputs import LinkLike, TransferConfig, effective_bandwidth_bytes_per_s, require
from pdplan.types import FloatArray


def required_bandwidth_bytes_per_s(rate_rps: float, mean_bytes: float, max_utilisation: float = 1.0) -> float:
    """Link rate that carries ``λ·E[B]`` at utilisation ``max_utilisation``: ``λ·E[B]/ρ_max``.
    DistServe §1.7: 10 rps × 1.125 GiB → 11.25 GiB/s (= 90 Gib/s)."""
    require(0.0 < max_utilisation <= 1.0, "max_utilisation", "must be in 0 < value <= 1")
    return rate_rps * mean_bytes / max_utilisation


@dataclass(frozen=True, slots=True)
class FanInLoad:
    """Per-instance NIC utilisation on each side of an xPyD deployment (even routing)."""

    rho_prefill_side: float
    rho_decode_side: float

    @property
    def bottleneck(self) -> Literal["prefill", "decode"]:
        return "decode" if self.rho_decode_side >= self.rho_prefill_side else "prefill"

    @property
    def rho(self) -> float:
        return max(self.rho_prefill_side, self.rho_decode_side)


def fan_in_load(
    rate_rps: float,
    mean_bytes: float,
    num_prefill: int,
    num_decode: int,
    prefill_side_bytes_per_s: float,
    decode_side_bytes_per_s: float,
) -> FanInLoad:
    """``ρ_p = (λ/x)·E[B]/BW_p``, ``ρ_d = λ·E[B]/(y·BW_d)``; linear in λ."""
    require(num_prefill >= 1 and num_decode >= 1, "xpyd", "instance counts must be >= 1")
    return FanInLoad(
        rate_rps / num_prefill * mean_bytes / prefill_side_bytes_per_s,
        rate_rps / num_decode * mean_bytes / decode_side_bytes_per_s,
    )


@dataclass(frozen=True, slots=True)
class LinkQueue:
    """The busy side as an M/G/1 server: service-time bins ``service_s`` with ``probabilities``."""

    arrival_rate_per_s: float
    service_s: FloatArray
    probabilities: FloatArray
    load: FanInLoad | None = None
    """Both sides' utilisation, when built by :func:`fan_in_link_queue`."""

    @property
    def mean_service_s(self) -> float:
        return float(np.sum(self.probabilities * self.service_s))

    @property
    def second_moment_s2(self) -> float:
        return float(np.sum(self.probabilities * self.service_s**2))

    @property
    def rho(self) -> float:
        return self.arrival_rate_per_s * self.mean_service_s

    @property
    def stable(self) -> bool:
        return self.rho < 1.0

    @property
    def mean_wait_s(self) -> float:
        """Pollaczek–Khinchine ``λE[S²]/(2(1−ρ))``; inf when ρ ≥ 1. M/D/1, λ=1, S=0.5: 0.25 s."""
        if not self.stable:
            return math.inf
        return self.arrival_rate_per_s * self.second_moment_s2 / (2.0 * (1.0 - self.rho))


def link_queue(service_s: npt.ArrayLike, probabilities: npt.ArrayLike | None, arrival_rate_per_s: float) -> LinkQueue:
    """M/G/1 link queue from per-bin service times (probabilities normalised; None = equal)."""
    s = np.ravel(np.asarray(service_s, dtype=np.float64))
    p = (
        np.ones_like(s)
        if probabilities is None
        else np.ravel(np.broadcast_to(np.asarray(probabilities, dtype=np.float64), np.shape(service_s)))
    )
    require(bool(np.all(p >= 0.0)) and float(p.sum()) > 0.0, "probabilities", "must be >= 0 with a positive sum")
    require(
        bool(np.all(s >= 0.0)) and arrival_rate_per_s >= 0.0, "service_s", "service times and arrival rate must be >= 0"
    )
    return LinkQueue(float(arrival_rate_per_s), s, p / p.sum())


def side_busy_s(result: TransferResult, link: LinkLike, nics: int) -> FloatArray:
    """How long one side's ``nics`` are held per transfer: ``latency + B/BW_side``."""
    return np.asarray(result.latency_s + result.bytes / effective_bandwidth_bytes_per_s(link, nics), dtype=np.float64)


def fan_in_link_queue(
    result: TransferResult,
    probabilities: npt.ArrayLike | None,
    rate_rps: float,
    num_prefill: int,
    num_decode: int,
    link: LinkLike,
    config: TransferConfig | None = None,
) -> LinkQueue:
    """Queue at the busier side: arrivals ``λ/x`` or ``λ/y``, service ``latency + B/BW_side``."""
    cfg = config or TransferConfig()
    nics_p, nics_d = cfg.side_nics
    bw_p = effective_bandwidth_bytes_per_s(link, nics_p)
    bw_d = effective_bandwidth_bytes_per_s(link, nics_d)
    load = fan_in_load(rate_rps, expectation(result.bytes, probabilities), num_prefill, num_decode, bw_p, bw_d)
    side_decode = load.bottleneck == "decode"
    arrivals = rate_rps / (num_decode if side_decode else num_prefill)
    queue = link_queue(side_busy_s(result, link, nics_d if side_decode else nics_p), probabilities, arrivals)
    return dataclasses.replace(queue, load=load)
