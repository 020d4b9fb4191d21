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
from pdplan.io.planning_defaults import planning_defaults
from pdplan.perf.expert_parallel import parallelism_error
from pdplan.search.cache_options import cache_variants
from pdplan.search.inputs_record import SpaceFacts
from pdplan.search.parallel import parallel_shapes
from pdplan.serving import RoleHardware, instance_budget, precision_of
from pdplan.serving.engine_bind import engine_limits, scenario_engine, with_engine
from pdplan.specs.cache import CacheSpec
from pdplan.specs.command_line import flag
from pdplan.specs.engine import EngineProfile
from pdplan.specs.hardware import GpuSpec
from pdplan.specs.kernel_table import KernelTable
from pdplan.specs.model import ModelSpec
from pdplan.specs.scenario import Scenario, SearchSpace
from pdplan.transfer.plane_setup import KvChoice, search_choices
from pdplan.types import Binding, Granularity, Objective, Redundancy, Routing, Scheduler

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
    headroom: float = 0.0
    """Planning margin H: a plan's goodput is its SLO-meeting rate / (1 + H)."""
    redundancy: Redundancy = "none"
    """``n+1``: a plan's goodput is that of the plan with one instance of each pool down."""
    budget_usd_per_hour: float | None = None
    rejected: tuple[dict[str, object], ...] = field(default=())
    """GPU types and TP/PP sizes the search dropped before screening, each with the binding reason (why not)."""
    caches: tuple[CacheSpec | None, ...] = (None,)
    """The prefix-cache settings tried (:func:`pdplan.search.cache_options.cache_variants`)."""
    kv_choices: tuple[KvChoice, ...] = (KvChoice(None, None),)
    """The KV (backend, block size) choices tried by disaggregated plans (:func:`pdplan.transfer.plane_setup.
    search_choices`); the one default: the scenario's own."""
    kv_searched: bool = False
    """Whether ``search.kv_backends`` or ``search.kv_block_tokens`` was given (plans then record their choice)."""

    def describe(self) -> SpaceFacts:
        """The space in plain values (for reports)."""
        return SpaceFacts(
            prefill=tuple(h.label for h in self.prefill),
            decode=tuple(h.label for h in self.decode),
            colocated=tuple(h.label for h in self.colocated),
            granularities=self.granularities,
            links=self.links,
            routing=self.routings,
            max_num_seqs=self.max_num_seqs,
            max_instances=self.max_instances,
            budget_gpus=self.budget_gpus,
            rate_rps=self.rate_rps,
            objective=self.objective,
            colocated_scheduler=self.colocated_scheduler,
            headroom=self.headroom,
            redundancy=self.redundancy,
            budget_usd_per_hour=self.budget_usd_per_hour,
        )


def _fits(hw: RoleHardware) -> bool:
    try:
        instance_budget(hw, "candidate")
    except NoFeasiblePlanError:
        return False
    return True


def _reject(
    rejected: list[dict[str, object]],
    role: str,
    gpu: str,
    tp: int | None,
    pp: int | None,
    why: str,
    dp_ep: tuple[int, int] | None = None,
) -> None:
    """One why-not row of the space stage (``dp_ep``: the attention DP and EP of an MoE instance type, None: any)."""
    dp, ep = dp_ep if dp_ep is not None else (None, None)
    row: dict[str, object] = {"role": role, "gpu": gpu, "tp": tp, "pp": pp, "dp": dp, "ep": ep, "stage": "space"}
    row["reason"] = why
    rejected.append(row)


def _tp_reason(model: ModelSpec, gpus_per_node: int, t: int) -> str | None:
    if t > gpus_per_node:
        return f"TP{t} spans more than one {gpus_per_node}-GPU node"
    if model.num_attention_heads % t:
        return f"TP{t} does not divide {model.name}'s {model.num_attention_heads} attention heads"
    return None


_Make = tuple[ModelSpec, GpuSpec, KernelTable, Scenario, EngineProfile]


def _options(
    make: _Make,
    shapes: list[tuple[int, int, int]],
    degrees: tuple[int, ...],
    gather: bool,
    rejected: tuple[str, list[dict[str, object]]],
) -> list[RoleHardware]:
    """The instance types of one GPU at ``degrees`` PP × its (TP, DP, EP) ``shapes`` whose weights fit (the others
    rejected), run by the scenario's engine; ``gather`` adds ZeRO-Prefill's expert gather where EP > 1."""
    model, gpu, table, scenario, engine = make
    out = []
    for p in degrees:
        for t, d, e in shapes:
            for g in (False, True) if gather and e > 1 else (False,):
                h = _hardware(model, gpu, table, scenario, t, p, d, e, g)
                h = with_engine(h, engine, scenario.gpu_memory_utilization, scenario.kv_block_tokens)
                if _fits(h):
                    out.append(h)
                elif not g:
                    shape = f"TP{t}" + (f" DP{d}" if d > 1 else "") + (f" EP{e}" if e > 1 else "")
                    why = f"weights do not fit {gpu.name} at {shape} PP{p}"
                    _reject(rejected[1], rejected[0], gpu.name, t, p, why, (d, e))
    return out


def _roles(
    catalog: Catalog,
    model: ModelSpec,
    scenario: Scenario,
    gpu_names: list[str],
    tps: tuple[int, ...],
    notes: list[str],
    pps: tuple[int, ...] | None = None,
    rejected: tuple[str, list[dict[str, object]]] | None = None,
    parallel: _Parallel | None = None,
) -> tuple[RoleHardware, ...]:
    """GPU × TP × PP options whose weights fit, in a stable order; TP must divide the attention heads (Megatron
    sharding) and stay within one node (≤ GPUs per node). ``pps`` (``--pp``, ``search.pp``) lists the PP degrees
    to try; without it PP > 1 is tried only where TP alone cannot hold the model. ``rejected`` (role, list)
    collects each dropped GPU/TP/PP with its reason; DP/EP shapes from :mod:`pdplan.search.parallel`."""
    role, why_not = rejected if rejected is not None else ("", [])
    par = parallel or _Parallel()
    out: list[RoleHardware] = []
    engine = scenario_engine(catalog, scenario)
    for name in gpu_names:
        gpu = catalog.gpu(name)
        table = catalog.kernel_table(gpu.name)
        node_tps = _node_tps(model, gpu, tps, (role, why_not))
        if not node_tps:
            notes.append(
                f"no TP in {list(tps)} divides {model.name}'s {model.num_attention_heads} attention heads "
                f"within one {gpu.gpus_per_node}-GPU {gpu.name} node"
            )
            continue
        make = (model, gpu, table, scenario, engine)
        out.extend(_fitting(make, node_tps, par, pps, (role, why_not), notes))
    return tuple(out)


def _node_tps(
    model: ModelSpec, gpu: GpuSpec, tps: tuple[int, ...], rejected: tuple[str, list[dict[str, object]]]
) -> list[int]:
    """The TPs that divide the attention heads within one node of ``gpu``; the others rejected with their reason."""
    role, why_not = rejected
    for t in tps:
        reason = _tp_reason(model, gpu.gpus_per_node, t)
        if reason is not None:
            _reject(why_not, role, gpu.name, t, None, reason)
    return [t for t in tps if _tp_reason(model, gpu.gpus_per_node, t) is None]


def _fitting(
    make: _Make,
    node_tps: list[int],
    par: _Parallel,
    pps: tuple[int, ...] | None,
    rejected: tuple[str, list[dict[str, object]]],
    notes: list[str],
) -> list[RoleHardware]:
    """The instance types of one GPU whose weights fit: its DP/EP shapes at ``pps`` (default PP 1), else (no
    ``pps`` given) PP where tensor parallelism alone cannot hold the model; a note when nothing fits."""
    model, gpu, _, scenario, _ = make
    weight_bytes = precision_of(scenario, model).weight_bytes
    shapes = parallel_shapes(
        model,
        tuple(node_tps),
        par.dps,
        par.eps,
        redundant_experts=scenario.redundant_experts,
        budget_gpus=par.budget_gpus,
        allow_dp=par.allow_dp,
        weight_bytes=weight_bytes,
    )
    fitting = _options(make, shapes, pps or (1,), par.gather, rejected)
    if not fitting and pps is None:  # pipeline parallelism only where tensor parallelism alone cannot hold it
        loadable = [(t, 1, 1) for t in node_tps if parallelism_error(model, t, 1, 1, 0, weight_bytes) is None]
        fitting = _options(make, loadable, DEFAULT_PP, False, rejected)
        if fitting:
            notes.append(f"{model.name} does not fit one {gpu.name} node at TP {node_tps}; PP tried")
    if not fitting:
        notes.append(f"{model.name} does not fit {gpu.name} at any TP {node_tps} / PP {list(pps or DEFAULT_PP)}")
    return fitting


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
        two_batch_overlap=scenario.two_batch_overlap,
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


def _target(s: SearchSpace, budget_gpus: int | None, rate_rps: float | None) -> tuple[int | None, float | None]:
    """(GPU budget, target rate): the CLI's, else the ``search:`` block's; one of them at most."""
    if budget_gpus is not None and rate_rps is not None:
        raise SpecError(f"give either {flag('gpus')} (budget) or {flag('rate')} (target), not both", field=flag("gpus"))
    budget = budget_gpus if budget_gpus is not None else (None if rate_rps is not None else s.gpus)
    rate = rate_rps if rate_rps is not None else (None if budget_gpus is not None else s.rate)
    if budget is not None and rate is not None:
        raise SpecError("the search block gives both gpus (budget) and rate (target); keep one", field="search")
    return budget, rate


def _space_roles(
    catalog: Catalog,
    model: ModelSpec,
    scenario: Scenario,
    budget: int | None,
    notes: list[str],
    why_not: list[dict[str, object]],
) -> tuple[tuple[RoleHardware, ...], tuple[RoleHardware, ...], tuple[RoleHardware, ...]]:
    """(prefill, decode, colocated) instance types from the ``search:`` block (default: the scenario's GPUs and
    :data:`DEFAULT_TP`); a colocated instance does both phases, so it tries both roles' GPUs and TPs. Colocated
    attention DP (:mod:`pdplan.serving.colocated_dp`) is tried at the degrees above 1 that ``search.dp`` lists: every
    profiled engine runs it (TensorRT-LLM ``enable_attention_dp``, SGLang ``--enable-dp-attention``, vLLM
    ``--data-parallel-size``), and the default DP ladder leaves it out, so a search that names no DP is unchanged."""
    s = scenario.search or SearchSpace()
    roles = [r for r in (scenario.prefill, scenario.decode, scenario.colocated) if r is not None]
    prefill_gpus = s.prefill_gpus or [roles[0].gpu]
    decode_gpus = s.decode_gpus or [roles[-1].gpu]
    prefill_tps = tuple(s.prefill_tp or s.tp or DEFAULT_TP)
    decode_tps = tuple(s.decode_tp or s.tp or DEFAULT_TP)
    colocated_tps = tuple(s.tp or sorted({*prefill_tps, *decode_tps}))  # a colocated instance does both phases
    _check_ep_lists(model, s)
    pps = tuple(s.pp) if s.pp else None
    pre_par = _Parallel(s.prefill_dp or s.dp, s.prefill_ep or s.ep, budget, gather=True)
    dec_par = _Parallel(s.decode_dp or s.dp, s.decode_ep or s.ep, budget)
    prefill = _roles(catalog, model, scenario, prefill_gpus, prefill_tps, notes, pps, ("prefill", why_not), pre_par)
    decode = _roles(catalog, model, scenario, decode_gpus, decode_tps, notes, pps, ("decode", why_not), dec_par)
    colocated_gpus = list(dict.fromkeys([*prefill_gpus, *decode_gpus]))
    co_par = _Parallel(None, s.ep, budget, allow_dp=False)
    colocated = _roles(catalog, model, scenario, colocated_gpus, colocated_tps, [], pps, None, co_par)
    co_dps = [d for d in s.dp or [] if d > 1]
    if co_dps:  # colocated attention DP only at the degrees search.dp names (docstring)
        dp_par = _Parallel(co_dps, s.ep, budget)
        colocated += _roles(catalog, model, scenario, colocated_gpus, colocated_tps, [], pps, None, dp_par)
    return prefill, decode, colocated


def engine_granularities(
    asked: tuple[Granularity, ...], engine: EngineProfile, notes: list[str]
) -> tuple[Granularity, ...]:
    """The KV-transfer granularities of a ``search.granularities`` list that the engine's connector runs (issue #25:
    the search offers an engine only what it can run; ``kv_connector.granularities`` in its profile, with the
    source); the dropped ones are noted. When none is left the list is kept as asked, with a note that those plans are
    not what the engine runs. A scenario without the list keeps its own
    ``granularity`` as the user set it (a deployment priced as given, e.g. PrfaaS's layer-wise streaming)."""
    allowed = engine.kv_connector.granularities if engine.kv_connector is not None else None
    if allowed is None:
        return asked
    kept = tuple(g for g in asked if g in allowed)
    dropped = [g for g in asked if g not in allowed]
    if not kept:  # the user asked only for what the engine cannot run: priced as asked, said plainly
        notes.append(
            f"the search lists {', '.join(asked)}-wise KV transfer, which {engine.name}'s connector does not run "
            f"({'/'.join(allowed)}-wise only): the plans are priced as asked, not as {engine.name} would run them "
            f"(an export warns or refuses); list {'/'.join(allowed)} in search.granularities for plans it runs"
        )
        return asked
    if dropped:
        notes.append(
            f"{', '.join(dropped)}-wise KV transfer not searched: {engine.name}'s connector runs "
            f"{'/'.join(allowed)}-wise only (its profile's kv_connector.granularities)"
        )
    return kept


def build_space(
    scenario: Scenario,
    catalog: Catalog,
    *,
    budget_gpus: int | None = None,
    rate_rps: float | None = None,
    objective: str | None = None,
    **planning: object,
) -> Space:
    """Options for the optimiser from the scenario, its ``search:`` block and CLI values (which win); ``planning``
    holds ``headroom``, ``redundancy`` and ``budget_usd_per_hour`` (None: the block's, then the defaults)."""
    s = scenario.search or SearchSpace()
    budget, rate = _target(s, budget_gpus, rate_rps)
    model = catalog.model(scenario.model)
    notes: list[str] = []
    why_not: list[dict[str, object]] = []
    prefill, decode, colocated = _space_roles(catalog, model, scenario, budget, notes, why_not)
    notes = list(dict.fromkeys(notes))
    if not prefill or not decode:
        raise NoFeasiblePlanError(
            f"no instance type holds {model.name}: " + "; ".join(notes), binding_constraint=Binding.MEMORY
        )
    engine = scenario_engine(catalog, scenario)
    seats = engine_limits(engine, decode[0].gpu).max_seqs
    granularities = (
        engine_granularities(tuple(s.granularities), engine, notes) if s.granularities else (scenario.granularity,)
    )
    return Space(
        prefill=prefill,
        decode=decode,
        colocated=colocated,
        granularities=granularities,
        links=tuple(s.links or [scenario.link]),
        routings=tuple(s.routing or [scenario.routing]),
        max_num_seqs=tuple(s.max_num_seqs or [scenario.max_num_seqs or seats]),
        max_instances=s.max_instances or DEFAULT_MAX_INSTANCES,
        budget_gpus=budget,
        rate_rps=rate,
        objective=_objective(objective) if objective is not None else s.objective,
        colocated_scheduler=s.colocated_scheduler,
        notes=tuple(notes),
        **_planning(s, planning),  # type: ignore[arg-type]  # headroom, redundancy, budget_usd_per_hour
        rejected=tuple(why_not),
        caches=cache_variants(scenario, catalog),
        kv_choices=search_choices(
            s.kv_backends, s.kv_block_tokens, KvChoice(scenario.kv_backend, scenario.kv_block_tokens), engine
        ),
        kv_searched=s.kv_backends is not None or s.kv_block_tokens is not None,
    )


def _planning(s: SearchSpace, planning: dict[str, object]) -> dict[str, object]:
    """Headroom, redundancy and the dollar budget: arguments win over the ``search:`` block, then the packaged
    defaults (``pdplan/data/planning_defaults.yaml``)."""
    defaults = planning_defaults()
    headroom = planning.get("headroom")
    redundancy = planning.get("redundancy")
    budget = planning.get("budget_usd_per_hour")
    headroom = headroom if headroom is not None else s.headroom
    redundancy = redundancy if redundancy is not None else s.redundancy
    if redundancy is not None and redundancy not in get_args(Redundancy):
        raise SpecError(f"{redundancy!r} is not one of {', '.join(get_args(Redundancy))}", field=flag("redundancy"))
    if headroom is not None and not 0.0 <= float(cast(float, headroom)) <= 10.0:
        raise SpecError(f"must be between 0 and 10, got {headroom}", field=flag("headroom"))
    if budget is not None and not float(cast(float, budget)) > 0.0:
        raise SpecError(f"must be > 0, got {budget}", field=flag("budget_usd_per_hour"))
    return {
        "headroom": float(cast(float, headroom)) if headroom is not None else defaults.headroom,
        "redundancy": redundancy if redundancy is not None else defaults.redundancy,
        "budget_usd_per_hour": budget if budget is not None else s.budget_usd_per_hour,
    }
