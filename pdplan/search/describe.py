"""The inputs and assumptions a capacity review must see, with their sources (for every report): the typed records
of :mod:`pdplan.search.inputs_record`, built from the scenario, the search space and the catalogue."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from pdplan.io.catalog import Catalog
from pdplan.search.inputs_record import (
    EngineSettings,
    GpuFacts,
    KernelTableFacts,
    LinkFacts,
    ModelFacts,
    PlanningMargins,
    SearchAssumptions,
    SearchInputs,
    WorkloadFacts,
)
from pdplan.search.space import Space
from pdplan.serving import ResolvedScenario
from pdplan.serving.engine_bind import engine_record
from pdplan.version import VERSION as __version__


def _sha256(path: Path) -> str:
    """The first 16 hex digits of the file's SHA-256 ("unavailable" where it cannot be read); the file is closed."""
    try:
        with path.open("rb") as f:
            return hashlib.sha256(f.read()).hexdigest()[:16]
    except OSError:
        return "unavailable"


def _gpu_names(space: Space) -> list[str]:
    return sorted({h.gpu.name for h in (*space.prefill, *space.decode, *space.colocated)})


def _gpu_facts(name: str, catalog: Catalog) -> GpuFacts:
    gpu = catalog.gpu(name)
    path = catalog.path_of("gpu", name)
    table = catalog.kernel_table(name)
    return GpuFacts(
        display_name=gpu.display_name,
        source_file=path.name,
        sha256=_sha256(path),
        price_usd_per_gpu_hour=None if gpu.price is None else gpu.price.typical_usd_per_gpu_hour,
        price_source=gpu.sources.get("price", ""),
        calibrated_kernel_table=table.calibrated,
        kernel_table_derived_from=table.derived_from,
    )


def _link_facts(name: str, catalog: Catalog) -> LinkFacts:
    link = catalog.link(name)
    return LinkFacts(
        display_name=link.display_name,
        line_rate_gbit_per_s=link.line_rate_bytes_per_s * 8e-9,
        efficiency=link.efficiency,
        source=link.sources.get("line_rate_bytes_per_s", ""),
    )


def describe_inputs(
    res: ResolvedScenario[Any], space: Space, catalog: Catalog, planning: PlanningMargins
) -> SearchInputs:
    """Model, workload, SLO, GPUs and links with the files (and hashes) they came from, the space searched and the
    planning margins (a PrfaaS search replaces the space and adds its remote cluster:
    :func:`pdplan.search.prfaas_describe.prfaas_inputs`)."""
    sc, wl = res.scenario, res.scenario.workload
    return SearchInputs(
        model=ModelFacts(
            name=res.model.name,
            source=res.model.source,
            total_params=res.model.total_params(),
            active_params=res.model.active_params(),
        ),
        workload=WorkloadFacts(
            name=wl.name,
            description=wl.description,
            source=wl.source,
            is_fit=wl.is_fit,
            mean_input_tokens=res.lengths.mean_input(),
            mean_output_tokens=res.lengths.mean_output(),
        ),
        slo=sc.slo,
        ttft_convention=sc.ttft_convention,
        dtype=sc.dtype,
        kv_dtype=sc.kv_dtype,
        gpus={name: _gpu_facts(name, catalog) for name in _gpu_names(space)},
        links={name: _link_facts(name, catalog) for name in space.links},
        search_space=space.describe(),
        pdplan_version=__version__,
        planning=planning,
    )


def _kernel_table_facts(name: str, catalog: Catalog) -> KernelTableFacts:
    t = catalog.kernel_table(name)
    return KernelTableFacts(
        calibrated=t.calibrated,
        derived_from=t.derived_from,
        stack=t.stack,
        gemm_bf16_peak_fraction=t.gemm["bf16"].peak_fraction,
        gemm_bf16_memory_fraction=t.gemm["bf16"].memory_fraction,
        prefill_attention_compute_fraction=t.prefill_attention["bf16"].compute_fraction,
        decode_attention_memory_fraction=t.decode_attention["bf16"].memory_fraction,
        allreduce_bus_gb_per_s=t.allreduce.bus_bytes_per_s / 1e9,
        decode_step_overhead_s=t.framework.decode_step_overhead_s,
    )


def describe_assumptions(space: Space, catalog: Catalog, res: ResolvedScenario[Any]) -> SearchAssumptions:
    """Efficiencies per GPU (kernel tables) and the engine's settings on the first decode instance type, each with
    where it came from (the engine is the scenario's, :attr:`ResolvedScenario.engine`, which every candidate of the
    space is bound to: :mod:`pdplan.search.space`)."""
    hw, engine = space.decode[0], res.engine
    limits = engine.limits.for_gpu(hw.gpu.name, hw.gpu.memory_bytes)
    return SearchAssumptions(
        kernel_tables={name: _kernel_table_facts(name, catalog) for name in _gpu_names(space)},
        engine=engine_record(catalog, res.scenario),
        engine_defaults=EngineSettings(
            gpu_memory_utilization=hw.gpu_memory_utilization,
            max_num_batched_tokens=res.scenario.chunk_tokens or limits.max_batched_tokens,  # --max-num-batched-tokens
            max_num_seqs=limits.max_seqs,
            limits_source=engine.limits.source,
            kv_memory_source=engine.kv_memory.source,
            step_overhead_source=engine.overheads.step_s.source,
        ),
        method=(
            "roofline per operator on a calibrated kernel table; prefill queue M/G/1 or M/G/c by FFT "
            "(Pollaczek-Khinchine); decode continuous-batching fixed point with load-feedback TPOT; "
            "percentiles from distributions; candidates screened on tabulated per-instance loads, the "
            "top ones re-evaluated exactly"
        ),
    )
