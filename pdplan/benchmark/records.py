"""What the closed loops report (frozen dataclasses, SI units): the mean-value fixed point of the open-loop model
(:class:`ClosedLoop`, :mod:`pdplan.benchmark.mva`) and what the engine's benchmark tool would print
(:class:`BenchmarkLoop`, :mod:`pdplan.benchmark.colocated_loop`, :mod:`pdplan.benchmark.disaggregated_loop`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ClosedLoop:
    """Closed-loop fixed point: C clients, throughput X = C / E[response time](X)."""

    concurrency: int
    throughput_rps: float
    mean_response_s: float
    saturated: bool


@dataclass(frozen=True, slots=True)
class BenchmarkLoop:
    """What a closed-loop benchmark at concurrency C reports (:mod:`pdplan.benchmark.colocated_loop`)."""

    tool: str
    concurrency: int
    requests: int
    warmup: int
    effective_concurrency: int
    throughput_rps: float
    mean_ttft_s: float
    mean_tpot_s: float
    steady_ttft_s: float
    steady_tpot_s: float
    burst_ttft_s: float
    server_queue_s: float
    request_overhead_s: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "concurrency": self.concurrency,
            "requests": self.requests,
            "warmup": self.warmup,
            "effective_concurrency": self.effective_concurrency,
            "throughput_rps": self.throughput_rps,
            "mean_ttft_s": self.mean_ttft_s,
            "mean_tpot_s": self.mean_tpot_s,
            "steady_ttft_s": self.steady_ttft_s,
            "steady_tpot_s": self.steady_tpot_s,
            "burst_ttft_s": self.burst_ttft_s,
            "server_queue_s": self.server_queue_s,
            "request_overhead_s": self.request_overhead_s,
        }
