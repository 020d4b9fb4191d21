"""What a plan result records beside its plans (frozen dataclasses): the inputs with the files and sources they came
from, and the efficiencies and engine settings the numbers rest on.

Built by :mod:`pdplan.search.describe`, :mod:`pdplan.search.planning` and :mod:`pdplan.search.prfaas_describe`;
read by the reports. Each record's ``to_document`` writes its JSON object (``inputs``, ``assumptions`` and
``planning`` of ``optimize --format json``, keys listed in docs/json_keys.md) with the keys in the order the reports
have always written them. Most records' keys are their field names in declaration order (:class:`_Fields`): renaming
or reordering a field changes the JSON, which the golden reports of the examples pin.
"""

from __future__ import annotations

from dataclasses import Field, dataclass, fields
from typing import Any, ClassVar

from pdplan.specs.scenario import SloSpec


class _Fields:
    """A record whose JSON object is its fields in declaration order (tuples written as lists, dicts copied)."""

    __slots__ = ()
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    def to_document(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else dict(value) if isinstance(value, dict) else value
        return out


@dataclass(frozen=True, slots=True)
class ModelFacts(_Fields):
    """The model searched: its name, the file or config it came from, and its parameter counts."""

    name: str
    source: str
    total_params: int
    active_params: int


@dataclass(frozen=True, slots=True)
class WorkloadFacts(_Fields):
    """The workload: its name, description and citation, whether its parameters are a fit, its mean lengths."""

    name: str | None
    description: str
    source: str
    is_fit: bool
    mean_input_tokens: float
    mean_output_tokens: float


@dataclass(frozen=True, slots=True)
class GpuFacts(_Fields):
    """One GPU type of the search: its file (and hash), its price and where the price came from, and its kernel
    table (calibrated, or derived from which GPU)."""

    display_name: str
    source_file: str
    sha256: str
    price_usd_per_gpu_hour: float | None
    price_source: str
    calibrated_kernel_table: bool
    kernel_table_derived_from: str | None


@dataclass(frozen=True, slots=True)
class LinkFacts(_Fields):
    """One KV link of the search: line rate (Gbit/s), usable fraction and the line rate's source."""

    display_name: str
    line_rate_gbit_per_s: float
    efficiency: float
    source: str


@dataclass(frozen=True, slots=True)
class SpaceFacts(_Fields):
    """The search space of an xPyD / colocated search in plain values: instance-type labels per role and the options
    and budgets (:class:`pdplan.search.space.Space`)."""

    prefill: tuple[str, ...]
    decode: tuple[str, ...]
    colocated: tuple[str, ...]
    granularities: tuple[str, ...]
    links: tuple[str, ...]
    routing: tuple[str, ...]
    max_num_seqs: tuple[int, ...]
    max_instances: int
    budget_gpus: int | None
    rate_rps: float | None
    objective: str
    colocated_scheduler: str
    headroom: float
    redundancy: str
    budget_usd_per_hour: float | None


@dataclass(frozen=True, slots=True)
class PrfaasSpaceFacts(_Fields):
    """The search space of a PrfaaS search: the local instance types, the local splits and remote counts tried,
    how the threshold was chosen, and the budgets."""

    prefill: str
    decode: str
    local_splits: tuple[str, ...]
    remote_instances: tuple[int, ...]
    threshold: str
    budget_gpus: int | None
    rate_rps: float | None
    headroom: float


@dataclass(frozen=True, slots=True)
class PlanningMargins(_Fields):
    """The margins a search ran with, each with its meaning in words, and the planning defaults' sources."""

    headroom: float
    headroom_meaning: str
    redundancy: str
    redundancy_meaning: str
    budget_usd_per_hour: float | None
    sources: dict[str, str]


@dataclass(frozen=True, slots=True)
class PrfaasFacts(_Fields):
    """A PrfaaS search's remote cluster and cross-datacenter link, with the sources of its measured inputs."""

    remote_gpu: str
    remote_tp: int
    remote_instances_max: int
    link: str
    link_line_rate_gbit_per_s: float
    link_efficiency: float
    link_source: str
    rtt_s: float
    threshold_pinned_tokens: int | None
    sources: dict[str, str]


@dataclass(frozen=True, slots=True)
class SearchInputs:
    """Everything a search was asked and given: model, workload, SLO, conventions and precisions, the GPUs and links
    with their files, the space searched, the planning margins and, for PrfaaS, the remote cluster."""

    model: ModelFacts
    workload: WorkloadFacts
    slo: SloSpec
    ttft_convention: str
    dtype: str
    kv_dtype: str
    gpus: dict[str, GpuFacts]
    links: dict[str, LinkFacts]
    search_space: SpaceFacts | PrfaasSpaceFacts
    pdplan_version: str
    planning: PlanningMargins
    prfaas: PrfaasFacts | None = None

    def to_document(self) -> dict[str, Any]:
        """The ``inputs`` JSON object (``prfaas`` only for a PrfaaS search)."""
        doc: dict[str, Any] = {
            "model": self.model.to_document(),
            "workload": self.workload.to_document(),
            "slo": self.slo.model_dump(),
            "ttft_convention": self.ttft_convention,
            "dtype": self.dtype,
            "kv_dtype": self.kv_dtype,
            "gpus": {name: gpu.to_document() for name, gpu in self.gpus.items()},
            "links": {name: link.to_document() for name, link in self.links.items()},
            "search_space": self.search_space.to_document(),
            "pdplan_version": self.pdplan_version,
            "planning": self.planning.to_document(),
        }
        if self.prfaas is not None:
            doc["prfaas"] = self.prfaas.to_document()
        return doc


@dataclass(frozen=True, slots=True)
class KernelTableFacts(_Fields):
    """The efficiencies a GPU's kernel table gives (BF16 GEMM, both attentions, all-reduce bus bandwidth, decode step
    overhead), whether it was measured or derived, and on which software stack."""

    calibrated: bool
    derived_from: str | None
    stack: str
    gemm_bf16_peak_fraction: float
    gemm_bf16_memory_fraction: float
    prefill_attention_compute_fraction: float
    decode_attention_memory_fraction: float
    allreduce_bus_gb_per_s: float
    decode_step_overhead_s: float


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """The engine settings the decode instance was priced with, and the engine profile entries they came from."""

    gpu_memory_utilization: float | None
    """The share of HBM the engine may use (:class:`pdplan.serving.RoleHardware`'s, set by the engine binding)."""
    max_num_batched_tokens: int
    max_num_seqs: int
    limits_source: str
    kv_memory_source: str
    step_overhead_source: str

    def to_document(self) -> dict[str, Any]:
        """The ``engine_defaults`` JSON object (its sources nested under ``sources``)."""
        return {
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "max_num_seqs": self.max_num_seqs,
            "sources": {
                "limits": self.limits_source,
                "kv_memory": self.kv_memory_source,
                "step_overhead": self.step_overhead_source,
            },
        }


@dataclass(frozen=True, slots=True)
class SearchAssumptions:
    """The numbers every plan of a search rests on: each GPU's kernel-table efficiencies, the engine (``{name,
    version, source, engine[, moe]}``, :func:`pdplan.serving.engine_bind.engine_record`), its settings, and the
    method in words."""

    kernel_tables: dict[str, KernelTableFacts]
    engine: dict[str, str]
    engine_defaults: EngineSettings
    method: str

    def to_document(self) -> dict[str, Any]:
        """The ``assumptions`` JSON object."""
        return {
            "kernel_tables": {name: table.to_document() for name, table in self.kernel_tables.items()},
            "engine": self.engine,
            "engine_defaults": self.engine_defaults.to_document(),
            "method": self.method,
        }
