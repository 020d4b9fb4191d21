"""The record ``evaluate`` returns (frozen dataclasses, SI units) and its JSON document.

JSON keys (docs/architecture.md §4 contract): ``goodput_rps``, ``goodput_rps_per_gpu``, ``num_gpus``;
with a rate or a concurrency also ``ttft_s`` / ``tpot_s`` objects with ``mean p50 p90 p99`` and
``attainment``; plus ``utilisation`` (at that rate, else at the goodput rate),
``binding_constraint``, ``convention``, ``warnings``, ``expected_error`` (:mod:`pdplan.evaluation.error_band`);
where the comfortable (P99) decode KV limit lies below the stability limit also ``comfortable_kv_limit_rps`` and
``beyond_comfortable_kv_limit`` (a colocated one's seat limit: ``comfortable_seat_limit_rps``,
``beyond_comfortable_seat_limit``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pdplan.serving.operating_point import OperatingPoint
from pdplan.serving.ttft import TtftParts
from pdplan.types import UtilisationKey

if TYPE_CHECKING:  # field types only; the modules making these values import them (start-up, issue #27)
    from pdplan.benchmark.records import BenchmarkLoop, ClosedLoop
    from pdplan.evaluation.error_band import ExpectedError
    from pdplan.serving.cache_report import CacheReport
    from pdplan.serving.prfaas.result import PrfaasResult


@dataclass(frozen=True, slots=True)
class PrefillAssumptions:
    """What the disaggregated model assumed of the prefill pool and the KV link (means over the workload)."""

    mean_prefill_s: float
    mean_kv_exposed_s: float
    mean_kv_bytes: float
    kv_link_queue: str
    """Which KV-link queue the model uses, in words (:mod:`pdplan.queueing.link_delay`)."""
    full_batch_tokens: float | None = None
    """Batched prefill only: a full batch's tokens, its time and the pool's capacity."""
    full_batch_s: float | None = None
    capacity_rps: float | None = None


@dataclass(frozen=True, slots=True)
class Assumptions:
    """The numbers an evaluation rests on: the linear decode step law it fitted to the roofline (and how well it
    fits), the decode instance's KV capacity and fixed state per sequence, the seat cap, the workload's mean lengths,
    the kernel tables, and for xPyD the prefill pool and link."""

    decode_step_t0_s: float
    decode_step_t1_s_per_seq: float
    decode_step_t2_s_per_token: float
    decode_fit_median_rel_err: float
    decode_fit_max_rel_err: float
    decode_kv_capacity_tokens: float
    decode_state_tokens_per_seq: float
    max_num_seqs: int
    mean_input_tokens: float
    mean_output_tokens: float
    kernel_tables: tuple[str, ...]
    prefill: PrefillAssumptions | None = None
    arrival_process: str | None = None
    """A workload whose arrivals are not Poisson: the process, its c_a² and how the model treats it, in words (None:
    Poisson, the serving model's default, and the key is left out)."""
    decode_step_lines: tuple[tuple[float, float, float], ...] = ()
    """A decode step concave in B (a MoE's): the lines ``(t0_s, t1_s_per_seq, t2_s_per_token)`` whose minimum is its
    law, steepest first; the ``decode_step_*`` keys are then the line the goodput runs on and the fit errors the
    law's (:mod:`pdplan.serving.decode_lines`). Empty: one line, and the key is left out."""

    def to_document(self) -> dict[str, Any]:
        """The ``assumptions`` JSON object (the fixed state only where a sequence holds one; the prefill pool's
        keys only for xPyD, its batch keys only for batched prefill)."""
        doc: dict[str, Any] = {
            "decode_step_t0_s": self.decode_step_t0_s,
            "decode_step_t1_s_per_seq": self.decode_step_t1_s_per_seq,
            "decode_step_t2_s_per_token": self.decode_step_t2_s_per_token,
            "decode_fit_median_rel_err": self.decode_fit_median_rel_err,
            "decode_fit_max_rel_err": self.decode_fit_max_rel_err,
            "decode_kv_capacity_tokens": self.decode_kv_capacity_tokens,
        }
        if self.decode_step_lines:
            doc["decode_step_lines"] = [list(line) for line in self.decode_step_lines]
        if self.decode_state_tokens_per_seq:
            doc["decode_state_tokens_per_seq"] = self.decode_state_tokens_per_seq
        doc.update(
            max_num_seqs=self.max_num_seqs,
            mean_input_tokens=self.mean_input_tokens,
            mean_output_tokens=self.mean_output_tokens,
            kernel_tables=list(self.kernel_tables),
        )
        p = self.prefill
        if p is not None:
            doc.update(
                mean_prefill_s=p.mean_prefill_s,
                mean_kv_exposed_s=p.mean_kv_exposed_s,
                mean_kv_bytes=p.mean_kv_bytes,
                kv_link_queue=p.kv_link_queue,
            )
            if p.full_batch_tokens is not None:
                doc.update(
                    prefill_full_batch_tokens=p.full_batch_tokens,
                    prefill_full_batch_s=p.full_batch_s,
                    prefill_capacity_rps=p.capacity_rps,
                )
        if self.arrival_process is not None:
            doc["arrival_process"] = self.arrival_process
        return doc


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
    assumptions: Assumptions | None = None
    warnings: tuple[str, ...] = ()
    prfaas: PrfaasResult | None = None
    """A ``prfaas:`` scenario's remote-prefill analysis (:func:`pdplan.serving.prfaas.evaluate.evaluate_prfaas`)."""
    engine: dict[str, str] = field(default_factory=dict)
    """The engine profile: ``{name, version, source}``."""
    cache: CacheReport | None = None
    """The prefix cache where the workload reuses KV (:mod:`pdplan.serving.cache_report`); JSON ``cache``."""
    ttft_parts: TtftParts | None = None
    """At the operating rate (with a rate or a concurrency): the mean TTFT split into its parts
    (:mod:`pdplan.serving.ttft`); not part of the JSON document."""
    benchmark: BenchmarkLoop | None = None
    """With a concurrency: what the benchmark tool would report (colocated: :mod:`pdplan.benchmark.colocated_loop`;
    disaggregated: :mod:`pdplan.benchmark.disaggregated_loop`)."""
    kv_comfort_limit_rps: float | None = None
    """The comfortable (P99) decode KV limit when it lies below the stability limit (past it requests queue for KV
    admission, :mod:`pdplan.queueing.kv_admission`); JSON ``comfortable_kv_limit_rps``, only then."""
    seat_comfort_limit_rps: float | None = None
    """A colocated deployment's comfortable (P99) seat limit when it lies below the stability limit (past it requests
    queue for a seat, :mod:`pdplan.queueing.kv_admission` *Seats*); JSON ``comfortable_seat_limit_rps``, only then."""
    expected_error: ExpectedError | None = None
    """The cross-validated error band of the latencies and where the deployment sits outside the validation
    (:mod:`pdplan.evaluation.error_band`); JSON ``expected_error``."""

    @property
    def beyond_kv_comfort(self) -> bool:
        """Whether the goodput lies past the comfortable decode KV limit (JSON ``beyond_comfortable_kv_limit``)."""
        return self.kv_comfort_limit_rps is not None and self.goodput_rps > self.kv_comfort_limit_rps

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
        if self.kv_comfort_limit_rps is not None:
            doc["comfortable_kv_limit_rps"] = self.kv_comfort_limit_rps
            doc["beyond_comfortable_kv_limit"] = self.beyond_kv_comfort
        if self.seat_comfort_limit_rps is not None:
            doc["comfortable_seat_limit_rps"] = self.seat_comfort_limit_rps
            doc["beyond_comfortable_seat_limit"] = self.goodput_rps > self.seat_comfort_limit_rps
        doc["utilisation"] = self.utilisation_at_goodput
        doc.update(self._load_fields())
        doc["engine"] = self.engine
        doc["assumptions"] = {} if self.assumptions is None else self.assumptions.to_document()
        doc["warnings"] = list(self.warnings)
        if self.expected_error is not None:
            doc["expected_error"] = self.expected_error.to_document()
        if self.prfaas is not None:
            doc["prfaas"] = self.prfaas.to_document()
        if self.cache is not None:
            doc["cache"] = self.cache.to_document(self.goodput_rps)
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
