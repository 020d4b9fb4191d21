"""An engine profile (:mod:`pdplan.specs.engine`) put on an instance type: what the engine adds to the kernels.

* **Step time.** Every engine step pays the profile's host overhead on top of its kernels:
  ``step_s + L·launch_gap_s_per_layer + 2L·collective_s`` (the two all-reduces per layer only at TP > 1;
  :meth:`~pdplan.specs.engine.Overheads.step_overhead_s`), and each decode step ``step_s_per_seq`` per running
  sequence (priced by the roofline's decode pass at its batch). They are added to the kernel table's own
  ``framework.decode_step_overhead_s`` and ``decode_step_overhead_s_per_seq`` (0 s in the shipped tables), so the
  roofline, the decode fit, the chunk price and the simulator's tables all carry them without a second code path.
* **Memory.** The engine's KV basis sets the usable share of the GPU (``total``: vLLM ``gpu_memory_utilization``;
  ``reserve``: SGLang ``mem_fraction_static`` from its reserve formula; ``free``: all of it, with TensorRT-LLM's
  ``free_gpu_memory_fraction`` applied to what weights and workspace leave). A scenario's own
  ``gpu_memory_utilization`` wins over the profile (under SGLang it is ``--mem-fraction-static``). The workspace is
  sized for the class's token budget; under ``reserve`` it sits in the reserve, outside the weights + KV share.
* **Limits.** The seat cap and chunk budget of the GPU's memory class (:meth:`~pdplan.specs.engine.Limits.for_gpu`).
* **MoE.** The expert kernel the engine runs at this instance's EP, dtype and GPU (the profile's ``moe`` rule,
  :func:`pdplan.perf.moe_wideep.moe_kernel_for`) and its two-batch-overlap default, unless the instance already
  states one (a scenario's ``two_batch_overlap``). Where the instance runs EPLB (redundant expert slots) on the
  profile's wide-EP kernel, its prefill experts take the profile's ``eplb_prefill_routing`` law (SGLang:
  ``sglang-eplb-prefill``, AIConfigurator's rule, ``pdplan/data/moe_routing.yaml``); decode stays uniform.
* **Data.** What the roofline prices beyond the kernel table for this instance type (EP constants, DeepEP's
  inter-node shares, the two-batch-overlap schedule, the GPU's W4A16 / CUTLASS MoE entries), read here
  (:func:`pdplan.io.perf_data.perf_data`, each file only where the instance type can use it) and carried as
  :attr:`~pdplan.serving.role_hardware.RoleHardware.perf_data`: the roofline itself reads no file.
* **Host time twice.** A kernel table fitted to phase times (``pdplan calibrate``) carries the measured steps' host
  time as its per-step ``framework.decode_step_overhead_s`` (named in its ``sources.framework``); a profile that adds
  its own fitted ``step_s`` (vLLM: 1.81 ms) on top prices the same host work twice (:mod:`pdplan.calibrate.host_terms`
  says so when the table is fitted). :func:`host_time_counted_twice` is the one-line warning for a run that binds
  such a table to such a profile.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from pdplan.io.catalog import Catalog, looks_like_path
from pdplan.io.engines import DEFAULT_ENGINE, ENGINE_DIR
from pdplan.io.perf_data import perf_data, routing_law
from pdplan.perf.moe_wideep import MoeKernel, moe_kernel_for
from pdplan.serving.role_hardware import RoleHardware
from pdplan.specs.engine import EngineProfile, MemoryClass
from pdplan.specs.hardware import GpuSpec
from pdplan.specs.kernel_table import KernelTable
from pdplan.specs.routing_law import RoutingLaw
from pdplan.specs.scenario import Scenario


def scenario_engine(catalog: Catalog, scenario: Scenario) -> EngineProfile:
    """The scenario's engine profile (``engine:`` / ``--engine``), else the default (vLLM)."""
    return catalog.engine(scenario.engine or DEFAULT_ENGINE)


def engine_limits(engine: EngineProfile, gpu: GpuSpec) -> MemoryClass:
    """Token budget and seat cap of this GPU's memory class."""
    return engine.limits.for_gpu(gpu.name, gpu.memory_bytes)


def with_engine(
    hw: RoleHardware, engine: EngineProfile, memory_utilization: float | None = None, block_tokens: int | None = None
) -> RoleHardware:
    """``hw`` run by ``engine`` (module docstring); ``memory_utilization`` and ``block_tokens`` (the scenario's
    ``kv_block_tokens``) override the profile's (the KV block: its ``kv_connector``'s, 1 without one)."""
    cls = engine_limits(engine, hw.gpu)
    step_s = engine.overheads.step_overhead_s(hw.model.num_layers, hw.tp)
    seq_s = engine.overheads.seq_overhead_s()
    table = hw.table
    if step_s > 0.0 or seq_s > 0.0:
        fw = table.framework
        framework = fw.model_copy(
            update={
                "decode_step_overhead_s": fw.decode_step_overhead_s + step_s,
                "decode_step_overhead_s_per_seq": fw.decode_step_overhead_s_per_seq + seq_s,
            }
        )
        table = table.model_copy(update={"framework": framework})
    tbo_default = engine.moe.two_batch_overlap if engine.moe is not None else False
    tbo = hw.two_batch_overlap if hw.two_batch_overlap is not None else tbo_default
    data = perf_data(hw.model, hw.gpu, table, tp=hw.tp, dp=hw.dp, ep=hw.ep, two_batch_overlap=tbo)
    moe_kernel = moe_kernel_for(engine.moe, hw.ep, hw.precision.weight_bytes, table, data)
    util = memory_utilization
    if util is None:
        util = engine.kv_memory.usable_fraction(
            hw.gpu.memory_bytes,
            chunk_tokens=cls.max_batched_tokens,
            graph_seqs=cls.cuda_graph_max_seqs or 0,
            gpus=hw.tp * hw.pp,
            dp_attention=hw.dp > 1,
        )
    return dataclasses.replace(
        hw,
        table=table,
        gpu_memory_utilization=util,
        kv_free_fraction=engine.kv_memory.free_fraction,
        workspace_in_budget=engine.kv_memory.workspace_in_budget,
        workspace_tokens=cls.workspace_tokens or cls.max_batched_tokens,
        engine=engine,
        moe_kernel=moe_kernel,
        two_batch_overlap=tbo,
        prefill_routing=eplb_prefill_routing(engine, moe_kernel, hw.redundant_experts),
        perf_data=data,
        kv_block_tokens=block_tokens or (engine.kv_connector.block_tokens if engine.kv_connector is not None else 1),
    )


def host_time_counted_twice(tables: Iterable[tuple[str, KernelTable]], engine: EngineProfile, label: str) -> str | None:
    """The warning for a run binding ``engine`` (picked as ``label``) to user kernel ``tables`` (``(file, table)``
    pairs) when a table carries fitted host time per step and the profile adds its own ``step_s`` (module
    docstring), for the first such table; None otherwise (a shipped table has 0 s; ``--engine kernels`` adds none).

    Example: a table fitted to 0.869 ms per step under vLLM (step_s 1.81 ms) -> one line naming both and the fix."""
    profile_s = engine.overheads.step_s.value
    if profile_s <= 0.0:
        return None
    for name, table in tables:
        host_s = table.framework.decode_step_overhead_s
        if host_s > 0.0:
            return (
                f"kernel table {name} carries {host_s * 1e3:.3g} ms of fitted host time per step (sources.framework) "
                f"and the {label} engine profile adds its step_s of {profile_s * 1e3:.3g} ms: host time is counted "
                "twice; run the table with --engine kernels (no host terms), or fit a profile over this table "
                "(pdplan calibrate RESULTS... --kernel-table TABLE -o ENGINE.yaml)"
            )
    return None


def eplb_prefill_routing(engine: EngineProfile, moe_kernel: MoeKernel, redundant_experts: int) -> RoutingLaw | None:
    """The profile's EPLB prefill routing law where EPLB runs (``redundant_experts`` > 0) on the profile's wide-EP
    kernel (``deepgemm_wideep``: the law was measured on that layer's rows); None (uniform) otherwise.

    Example: SGLang, DeepGEMM experts, 32 redundant slots -> ``sglang-eplb-prefill``; no redundant slots -> None."""
    moe = engine.moe
    if moe is None or moe.eplb_prefill_routing is None or moe_kernel != "deepgemm_wideep" or redundant_experts <= 0:
        return None
    return routing_law(moe.eplb_prefill_routing)


def engine_record(catalog: Catalog, scenario: Scenario) -> dict[str, str]:
    """``{name, version, source}`` of the scenario's engine profile, for every report (source: the file it came from,
    ``pdplan/data/engines/<name>.yaml`` for a packaged one); for an MoE model also ``moe``, the profile's expert
    kernel at EP > 1 and whether two-batch overlap is on (the scenario's word, else the profile's)."""
    profile = scenario_engine(catalog, scenario)
    name = scenario.engine or DEFAULT_ENGINE
    path = catalog.path_of("engine", name) if looks_like_path(name) else catalog.files["engine"].get(name.lower())
    source = str(path) if path is not None else name
    packaged = str(ENGINE_DIR)
    if source.startswith(packaged):
        source = "pdplan/data/engines/" + source[len(packaged) :].lstrip("/")
    record = {"name": profile.name, "version": profile.version, "source": source, "engine": profile.engine}
    moe = profile.moe
    if moe is not None and catalog.model(scenario.model).moe is not None:
        tbo = scenario.two_batch_overlap if scenario.two_batch_overlap is not None else moe.two_batch_overlap
        overlap = "on" if tbo else "off"
        record["moe"] = f"{moe.ep_kernel} experts at EP > 1 with FP8 experts; two-batch overlap {overlap}"
    return record
