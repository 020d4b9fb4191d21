"""What the PrfaaS analysis of one deployment finds (a frozen record, SI units) and its JSON document.

The document's first keys are the contract of docs/architecture.md §4 (``threshold_tokens``, ``offload_fraction``,
``link_utilization``, ``remote_instances``, ``remote_ttft_p90_s``, ``local_ttft_p90_s``); the rest are what the
reports print: the goodput and its binding constraint, the egress, the comparisons with homogeneous and naive
heterogeneous PD on the same local GPUs, the capacity-only optimum (the paper's Eq. 7), the link sensitivity and the
source of every input (:func:`pdplan.serving.prfaas.evaluate.prfaas_result` builds it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class RemoteCluster:
    """The remote prefill cluster: GPU type, tensor parallelism and instance count."""

    gpu: str
    tp: int
    count: int


@dataclass(frozen=True, slots=True)
class LinkSensitivity:
    """Threshold and goodput re-searched with the cross-datacenter link's bandwidth scaled by ``link_scale``."""

    link_scale: float
    threshold_tokens: float
    goodput_rps: float


@dataclass(frozen=True, slots=True)
class PrfaasResult:
    """One PrfaaS deployment at its goodput (TTFT percentiles and egress at that rate)."""

    threshold_tokens: float
    offload_fraction: float
    link_utilization: float
    remote_instances: int
    remote_ttft_p90_s: float
    local_ttft_p90_s: float
    ttft_p90_s: float
    threshold_searched: bool
    remote: RemoteCluster
    link: str
    rtt_s: float
    goodput_rps: float
    binding_constraint: str
    stability_limit_rps: float
    egress_gbps: float
    homogeneous_goodput_rps: float
    homogeneous_split: tuple[int, int]
    """Homogeneous PD's best (prefill, decode) instance split of the same local GPUs."""
    naive_goodput_rps: float
    gain_vs_homogeneous: float
    gain_vs_naive: float
    capacity_threshold_tokens: float
    capacity_lambda_max_rps: float
    capacity_binding: str
    link_sensitivity: tuple[LinkSensitivity, ...]
    sources: dict[str, str]
    """Where each input came from (a measured profile or pdplan's roofline), by input."""

    def to_document(self) -> dict[str, Any]:
        """The ``prfaas`` JSON object (key order as the reports have always written it)."""
        return {
            "threshold_tokens": self.threshold_tokens,
            "offload_fraction": self.offload_fraction,
            "link_utilization": self.link_utilization,
            "remote_instances": self.remote_instances,
            "remote_ttft_p90_s": self.remote_ttft_p90_s,
            "local_ttft_p90_s": self.local_ttft_p90_s,
            "ttft_p90_s": self.ttft_p90_s,
            "threshold_searched": self.threshold_searched,
            "remote": {"gpu": self.remote.gpu, "tp": self.remote.tp, "count": self.remote.count},
            "link": self.link,
            "rtt_s": self.rtt_s,
            "goodput_rps": self.goodput_rps,
            "binding_constraint": self.binding_constraint,
            "stability_limit_rps": self.stability_limit_rps,
            "egress_gbps": self.egress_gbps,
            "homogeneous_goodput_rps": self.homogeneous_goodput_rps,
            "homogeneous_split": list(self.homogeneous_split),
            "naive_goodput_rps": self.naive_goodput_rps,
            "gain_vs_homogeneous": self.gain_vs_homogeneous,
            "gain_vs_naive": self.gain_vs_naive,
            "capacity_threshold_tokens": self.capacity_threshold_tokens,
            "capacity_lambda_max_rps": self.capacity_lambda_max_rps,
            "capacity_binding": self.capacity_binding,
            "link_sensitivity": [
                {"link_scale": s.link_scale, "threshold_tokens": s.threshold_tokens, "goodput_rps": s.goodput_rps}
                for s in self.link_sensitivity
            ],
            "sources": dict(self.sources),
        }
