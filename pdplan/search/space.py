"""The optimiser's search space: which instance types, counts and transfer options are tried.

Built from the scenario's ``search:`` block (:class:`pdplan.specs.scenario.SearchSpace`) with CLI overrides;
anything the block leaves out keeps the scenario's own value. Per role, GPU × TP (within one node: TP ≤ GPUs per
node) × PP; pipeline parallelism beyond 1 is tried only for a GPU on which the model does not fit at any TP of the
list ("PP where the model does not fit"). Instance types whose weights do not fit are dropped with a note.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast, get_args

from pdplan.errors import NoFeasiblePlanError, SpecError
from pdplan.io.catalog import Catalog
from pdplan.io.serving_defaults import serving_defaults
from pdplan.perf.kernels import KernelTable
from pdplan.search.parallel import parallel_shapes
from pdplan.serving import RoleHardware, instance_budget, precision_of
from pdplan.specs.hardware import GpuSpec
from pdplan.specs.model import ModelSpec
from pdplan.specs.overrides import flag
from pdplan.specs.scenario import Scenario, SearchSpace
from pdplan.types import Binding, Granularity, Objective, Routing, Scheduler

DEFAULT_TP = (1, 2, 4, 8)
DEFAULT_PP = (2, 4)
DEFAULT_MAX_INSTANCES = 16


@dataclass(frozen=True)
class Space:
    """Resolved options; every tuple non-empty (else :class:`NoFeasiblePlanError`)."""

    prefill: tuple[RoleHardware, ...]
    decode: tuple[RoleHardware, ...]
    colocated: tuple[RoleHardware, ...]
    granularities: tuple[Granularity, ...]
    links: tuple[str, ...]
    routings: tuple[Routing, ...]
    max_num_seqs: tuple[int, ...]
    max_instances: int
    budget_gpus: int | None
    rate_rps: float | None
    objective: Objective
    colocated_scheduler: Scheduler
    notes: tuple[str, ...] = field(default=())

    def describe(self) -> dict[str, object]:
        """The space in plain values (for reports)."""

        def roles(options: tuple[RoleHardware, ...]) -> list[str]:
            return [h.label for h in options]

        return {
            "prefill": roles(self.prefill),
            "decode": roles(self.decode),
            "colocated": roles(self.colocated),
            "granularities": list(self.granularities),
            "links": list(self.links),
            "routing": list(self.routings),
            "max_num_seqs": list(self.max_num_seqs),
            "max_instances": self.max_instances,
            "budget_gpus": self.budget_gpus,
            "rate_rps": self.rate_rps,
            "objective": self.objective,
            "colocated_scheduler": self.colocated_scheduler,
        }


def _fits(hw: RoleHardware) -> bool:
    try:
        instance_budget(hw, "candidate")
    except NoFeasiblePlanError:
        return False
    return True


def _roles(
    catalog: Catalog,
    model: ModelSpec,
    scenario: Scenario,
    gpu_names: list[str],
    tps: tuple[int, ...],
    notes: list[str],
    parallel: _Parallel | None = None,
) -> tuple[RoleHardware, ...]:
    """GPU × (TP, DP, EP) × PP options whose weights fit, in a stable order; TP must divide the attention heads
    (Megatron sharding) and stay within one node (≤ GPUs per node); DP/EP shapes from :mod:`pdplan.search.parallel`."""
    par = parallel or _Parallel()
    out: list[RoleHardware] = []
    for name in gpu_names:
        gpu = catalog.gpu(name)
        table = catalog.kernel_table(gpu.name)
        node_tps = [t for t in tps if t <= gpu.gpus_per_node and model.num_attention_heads % t == 0]
        if not node_tps:
            notes.append(
                f"no TP in {list(tps)} divides {model.name}'s {model.num_attention_heads} attention heads "
                f"within one {gpu.gpus_per_node}-GPU {gpu.name} node"
            )
            continue
        shapes = parallel_shapes(
            model,
            tuple(node_tps),
            par.dps,
            par.eps,
            redundant_experts=scenario.redundant_experts,
            budget_gpus=par.budget_gpus,
            allow_dp=par.allow_dp,
        )
        fitting = [_hardware(model, gpu, table, scenario, t, 1, d, e) for t, d, e in shapes]
        if par.gather:
            fitting += [_hardware(model, gpu, table, scenario, t, 1, d, e, True) for t, d, e in shapes if e > 1]
        fitting = [h for h in fitting if _fits(h)]
        if not fitting:  # pipeline parallelism only where tensor parallelism alone cannot hold the model
            fitting = [_hardware(model, gpu, table, scenario, t, p) for p in DEFAULT_PP for t in node_tps]
            fitting = [h for h in fitting if _fits(h)]
            if fitting:
                notes.append(f"{model.name} does not fit one {gpu.name} node at TP {node_tps}; PP tried")
        if not fitting:
            notes.append(f"{model.name} does not fit {gpu.name} at any TP {node_tps} / PP {list(DEFAULT_PP)}")
        out.extend(fitting)
    return tuple(out)


def _hardware(
    model: ModelSpec,
    gpu: GpuSpec,
    table: KernelTable,
    scenario: Scenario,
    tp: int,
    pp: int,
    dp: int = 1,
    ep: int = 1,
    gather: bool = False,
) -> RoleHardware:
    """One instance type of the space (precision, memory utilisation and redundant experts from the scenario)."""
    return RoleHardware(
        model,
        gpu,
        table,
        tp,
        pp,
        precision_of(scenario),
        scenario.gpu_memory_utilization,
        dp=dp,
        ep=ep,
        expert_gather=gather,
        redundant_experts=scenario.redundant_experts,
    )


@dataclass(frozen=True)
class _Parallel:
    """DP/EP lists of one role (None: the ladder), the GPU budget, and whether DP and ZeRO-Prefill are tried."""

    dps: list[int] | None = None
    eps: list[int] | None = None
    budget_gpus: int | None = None
    allow_dp: bool = True
    gather: bool = False


def _check_ep_lists(model: ModelSpec, s: SearchSpace) -> None:
    """EP above 1 asked of a dense model is an input error, not an empty search."""
    if model.moe is not None:
        return
    for key in ("ep", "prefill_ep", "decode_ep"):
        if any(e > 1 for e in getattr(s, key) or []):
            raise SpecError(f"EP needs an MoE model; {model.name} is dense (use ep 1)", field=flag(key))


def _objective(text: str) -> Objective:
    """A library or CLI objective, checked against :data:`pdplan.types.Objective`."""
    allowed = get_args(Objective)
    if text not in allowed:
        raise SpecError(f"{text!r} is not one of {', '.join(allowed)}", field=flag("objective"))
    return cast(Objective, text)


def build_space(
    scenario: Scenario,
    catalog: Catalog,
    *,
    budget_gpus: int | None = None,
    rate_rps: float | None = None,
    objective: str | None = None,
) -> Space:
    """Options for the optimiser from the scenario, its ``search:`` block and CLI values (which win)."""
    s = scenario.search or SearchSpace()
    if budget_gpus is not None and rate_rps is not None:
        raise SpecError(f"give either {flag('gpus')} (budget) or {flag('rate')} (target), not both", field=flag("gpus"))
    budget = budget_gpus if budget_gpus is not None else (None if rate_rps is not None else s.gpus)
    rate = rate_rps if rate_rps is not None else (None if budget_gpus is not None else s.rate)
    if budget is not None and rate is not None:
        raise SpecError("the search block gives both gpus (budget) and rate (target); keep one", field="search")
    model = catalog.model(scenario.model)
    roles = [r for r in (scenario.prefill, scenario.decode, scenario.colocated) if r is not None]
    prefill_gpus = s.prefill_gpus or [roles[0].gpu]
    decode_gpus = s.decode_gpus or [roles[-1].gpu]
    prefill_tps = tuple(s.prefill_tp or s.tp or DEFAULT_TP)
    decode_tps = tuple(s.decode_tp or s.tp or DEFAULT_TP)
    colocated_tps = tuple(s.tp or sorted({*prefill_tps, *decode_tps}))  # a colocated instance does both phases
    notes: list[str] = []
    _check_ep_lists(model, s)
    pre_par = _Parallel(s.prefill_dp or s.dp, s.prefill_ep or s.ep, budget, gather=True)
    dec_par = _Parallel(s.decode_dp or s.dp, s.decode_ep or s.ep, budget)
    prefill = _roles(catalog, model, scenario, prefill_gpus, prefill_tps, notes, pre_par)
    decode = _roles(catalog, model, scenario, decode_gpus, decode_tps, notes, dec_par)
    colocated_gpus = list(dict.fromkeys([*prefill_gpus, *decode_gpus]))
    co_par = _Parallel(None, s.ep, budget, allow_dp=False)
    colocated = _roles(catalog, model, scenario, colocated_gpus, colocated_tps, [], co_par)
    notes = list(dict.fromkeys(notes))
    if not prefill or not decode:
        raise NoFeasiblePlanError(
            f"no instance type holds {model.name}: " + "; ".join(notes), binding_constraint=Binding.MEMORY
        )
    defaults = serving_defaults()
    return Space(
        prefill=prefill,
        decode=decode,
        colocated=colocated,
        granularities=tuple(s.granularities or [scenario.granularity]),
        links=tuple(s.links or [scenario.link]),
        routings=tuple(s.routing or [scenario.routing]),
        max_num_seqs=tuple(s.max_num_seqs or [scenario.max_num_seqs or defaults.max_num_seqs]),
        max_instances=s.max_instances or DEFAULT_MAX_INSTANCES,
        budget_gpus=budget,
        rate_rps=rate,
        objective=_objective(objective) if objective is not None else s.objective,
        colocated_scheduler=s.colocated_scheduler,
        notes=tuple(notes),
    )
