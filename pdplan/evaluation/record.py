"""The record ``evaluate`` returns (frozen dataclasses, SI units) and its JSON document.

JSON keys (docs/architecture.md §4 contract): ``goodput_rps``, ``goodput_rps_per_gpu``, ``num_gpus``;
with a rate or a concurrency also ``ttft_s`` / ``tpot_s`` objects with ``mean p50 p90 p99`` and
``attainment``; plus ``utilisation`` (at that rate, else at the goodput rate),
``binding_constraint``, ``convention``, ``warnings``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pdplan.benchmark.records import BenchmarkLoop, ClosedLoop
from pdplan.serving.operating_point import OperatingPoint
from pdplan.serving.prfaas.result import PrfaasResult
from pdplan.serving.ttft import TtftParts
from pdplan.types import UtilisationKey


@dataclass(frozen=True, slots=True)
class Evaluation:
    """Everything ``pdplan evaluate`` reports about one deployment."""

    name: str | None
    mode: str
    model: str
    deployment: dict[str, Any]
    num_gpus: int
    goodput_rps: float
    stability_limit_rps: float
    stability_binding: str
    binding_constraint: str
    convention: str
    slo: dict[str, float]
    cost_usd_per_hour: float | None
    price_usd_per_gpu_hour: dict[str, float | None] = field(default_factory=dict)
    """USD per GPU-hour per GPU type priced in :attr:`cost_usd_per_hour` (``--price`` or the catalogue's typical)."""
    utilisation_at_goodput: dict[UtilisationKey, float] = field(default_factory=dict)
    operating_point: OperatingPoint | None = None
    closed_loop: ClosedLoop | None = None
    assumptions: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    prfaas: PrfaasResult | None = None
    """A ``prfaas:`` scenario's remote-prefill analysis (:func:`pdplan.serving.prfaas.evaluate.evaluate_prfaas`)."""
    engine: dict[str, str] = field(default_factory=dict)
    """The engine profile: ``{name, version, source}``."""
    ttft_parts: TtftParts | None = None
    """At the operating rate (with a rate or a concurrency): the mean TTFT split into its parts
    (:mod:`pdplan.serving.ttft`); not part of the JSON document."""
    benchmark: BenchmarkLoop | None = None
    """With a concurrency: what the benchmark tool would report (colocated: :mod:`pdplan.benchmark.colocated_loop`;
    disaggregated: :mod:`pdplan.benchmark.disaggregated_loop`)."""

    @property
    def goodput_rps_per_gpu(self) -> float:
        return self.goodput_rps / self.num_gpus

    @property
    def goodput_rps_per_usd_hour(self) -> float | None:
        """Goodput per $/h of the deployment at typical prices; None when a price is missing."""
        if self.cost_usd_per_hour is None:
            return None
        return self.goodput_rps / self.cost_usd_per_hour

    def to_document(self) -> dict[str, Any]:
        """The JSON document (stable keys; SI units in names)."""
        doc: dict[str, Any] = {
            "name": self.name,
            "mode": self.mode,
            "model": self.model,
            **self.deployment,
            "num_gpus": self.num_gpus,
            "goodput_rps": self.goodput_rps,
            "goodput_rps_per_gpu": self.goodput_rps_per_gpu,
            "goodput_rps_per_usd_hour": self.goodput_rps_per_usd_hour,
            "cost_usd_per_hour": self.cost_usd_per_hour,
            "price_usd_per_gpu_hour": self.price_usd_per_gpu_hour,
            "stability_limit_rps": self.stability_limit_rps,
            "stability_binding": self.stability_binding,
            "binding_constraint": self.binding_constraint,
            "convention": self.convention,
            "slo": self.slo,
        }
        doc["utilisation"] = self.utilisation_at_goodput
        doc.update(self._load_fields())
        doc["engine"] = self.engine
        doc["assumptions"] = self.assumptions
        doc["warnings"] = list(self.warnings)
        if self.prfaas is not None:
            doc["prfaas"] = self.prfaas.to_document()
        return doc

    def _load_fields(self) -> dict[str, Any]:
        """The document's keys at the asked load: the operating point's (open loop), the closed loop's, and the
        benchmark tool's means over them (updated in this order, as :meth:`to_document` has always written)."""
        doc: dict[str, Any] = {}
        op = self.operating_point
        if op is not None:
            doc.update(
                {
                    "rate_rps": op.rate_rps,
                    "ttft_s": op.ttft_s.as_dict(),
                    "tpot_s": op.tpot_s.as_dict(),
                    "attainment": op.attainment,
                    "utilisation": op.utilisation,
                    "operating_binding_constraint": op.binding_constraint,
                }
            )
        if self.closed_loop is not None:
            cl = self.closed_loop
            doc.update(
                {
                    "concurrency": cl.concurrency,
                    "throughput_rps": cl.throughput_rps,
                    "mean_response_s": cl.mean_response_s,
                    "saturated": cl.saturated,
                }
            )
        if self.benchmark is not None:
            bench = self.benchmark
            doc["ttft_s"] = {**doc.get("ttft_s", {}), "mean": bench.mean_ttft_s}
            doc["tpot_s"] = {**doc.get("tpot_s", {}), "mean": bench.mean_tpot_s}
            doc["throughput_rps"] = bench.throughput_rps
            doc["closed_loop"] = bench.as_dict()
        return doc
