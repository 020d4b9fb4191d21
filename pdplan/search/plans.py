"""Typed results of the optimiser (frozen dataclasses, SI units); renderers read these and nothing else.

JSON contract (docs/architecture.md §4): ``plans`` (ranked; each with ``mode``, ``prefill``, ``decode`` (each ``gpu``,
``tp``, ``count``), ``granularity``, ``goodput_rps``, ``goodput_rps_per_gpu``, ``num_gpus``, ``ttft_p90_s``,
``tpot_p90_s``) and ``search`` (``candidates``, ``seconds``). :meth:`PlanResult.to_document` builds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pdplan.io.billing_periods import per_month, per_year
from pdplan.search.inputs_record import PlanningMargins, SearchAssumptions, SearchInputs
from pdplan.serving.cache_report import CacheReport
from pdplan.serving.deployment import Colocated, Deployment, Disaggregated, Prfaas, Role, local_part
from pdplan.serving.prfaas.result import PrfaasResult
from pdplan.serving.snapshot import Latency
from pdplan.specs.cache import CacheSpec
from pdplan.types import Granularity, Mode, Routing, Scheduler, UtilisationKey
from pdplan.units import format_bytes

if TYPE_CHECKING:
    from pdplan.evaluation.error_band import ExpectedError


@dataclass(frozen=True, slots=True)
class Plan:
    """One evaluated deployment, with everything a capacity review asks about it.

    ``deployment`` is any kind (:data:`pdplan.serving.Deployment`); its fields are read through the properties below
    (``prefill``/``decode`` for xPyD, ``colocated`` for the baseline: None where the kind has no such pool). Goodput
    is the highest Poisson rate meeting the SLO at the target attainment; latencies and utilisations are at
    ``operating_rate_rps`` (the target rate with ``--rate``, else the goodput itself). ``exact`` says whether the
    numbers come from the full serving model (:func:`pdplan.evaluation.evaluate`) or only the vectorised screen.
    """

    deployment: Deployment
    max_num_seqs: int
    num_gpus: int
    goodput_rps: float
    output_tokens_per_s: float
    cost_usd_per_hour: float | None
    operating_rate_rps: float
    ttft_s: Latency | None
    tpot_s: Latency | None
    attainment: float | None
    utilisation: dict[UtilisationKey, float]
    memory_headroom: dict[str, float]
    binding_constraint: str
    """What bounds the plan, read at its goodput (as ``evaluate``'s ``binding_constraint``)."""
    tokens_per_s_per_user: float
    exact: bool
    warnings: tuple[str, ...] = ()
    e2e_mean_s: float | None = None
    """Mean end-to-end latency (arrival to last token) at the operating rate: E[TTFT] + Σ p n E[TPOT | bin]."""
    itl_mean_s: float | None = None
    """Mean inter-token latency over all output tokens after the first (token-weighted TPOT) at the operating
    rate."""
    prfaas: PrfaasResult | None = None
    """A PrfaaS plan's analysis (remote prefill cluster, threshold, comparisons:
    :class:`pdplan.serving.prfaas.result.PrfaasResult`); None otherwise."""
    operating_binding_constraint: str | None = None
    """The constraint closest to its limit at ``operating_rate_rps`` (as ``evaluate --rate``'s
    ``operating_binding_constraint``); None for a screened plan (the screen reads only the goodput)."""
    cache: CacheReport | None = None
    """What the plan's prefix cache does (hit rates per tier, read traffic, the goodput without it:
    :class:`pdplan.serving.cache_report.CacheReport`); None when the workload reuses nothing or caching is off."""
    priced: dict[str, Any] | None = None
    """What the plan was priced with, for deployment (:func:`pdplan.search.priced.priced_record`); None where the plan
    was not evaluated exactly."""
    expected_error: ExpectedError | None = None
    """The cross-validated error band of the plan's latencies and where it sits outside the validation
    (:mod:`pdplan.evaluation.error_band`); None where the plan was not evaluated exactly."""

    @classmethod
    def of(
        cls,
        d: Deployment,
        *,
        max_num_seqs: int,
        num_gpus: int,
        goodput_rps: float,
        output_tokens_per_s: float,
        cost_usd_per_hour: float | None,
        operating_rate_rps: float,
        binding_constraint: str,
        tpot_mean_s: float,
        exact: bool,
        ttft_s: Latency | None = None,
        tpot_s: Latency | None = None,
        attainment: float | None = None,
        utilisation: dict[UtilisationKey, float] | None = None,
        memory_headroom: dict[str, float] | None = None,
        warnings: tuple[str, ...] = (),
    ) -> Plan:
        """The plan of deployment ``d`` with the given figures, and tokens/s per user = 1 / mean TPOT (0 when the
        mean TPOT is 0)."""
        return cls(
            deployment=d,
            max_num_seqs=max_num_seqs,
            num_gpus=num_gpus,
            goodput_rps=goodput_rps,
            output_tokens_per_s=output_tokens_per_s,
            cost_usd_per_hour=cost_usd_per_hour,
            operating_rate_rps=operating_rate_rps,
            ttft_s=ttft_s,
            tpot_s=tpot_s,
            attainment=attainment,
            utilisation=utilisation or {},
            memory_headroom=memory_headroom or {},
            binding_constraint=binding_constraint,
            tokens_per_s_per_user=1.0 / tpot_mean_s if tpot_mean_s > 0 else 0.0,
            exact=exact,
            warnings=warnings,
        )

    @property
    def mode(self) -> Mode:
        return self.deployment.mode

    @property
    def _local(self) -> Disaggregated | Colocated:
        return local_part(self.deployment)

    @property
    def prefill(self) -> Role | None:
        return self._local.prefill if isinstance(self._local, Disaggregated) else None

    @property
    def decode(self) -> Role | None:
        return self._local.decode if isinstance(self._local, Disaggregated) else None

    @property
    def colocated(self) -> Role | None:
        return self._local.instance if isinstance(self._local, Colocated) else None

    @property
    def granularity(self) -> Granularity | None:
        return self._local.granularity if isinstance(self._local, Disaggregated) else None

    @property
    def link(self) -> str | None:
        return self._local.link if isinstance(self._local, Disaggregated) else None

    @property
    def routing(self) -> Routing | None:
        return self._local.routing if isinstance(self._local, Disaggregated) else None

    @property
    def scheduler(self) -> Scheduler | None:
        return self._local.scheduler if isinstance(self._local, Colocated) else None

    @property
    def goodput_rps_per_gpu(self) -> float:
        return self.goodput_rps / self.num_gpus

    @property
    def output_tokens_per_s_per_gpu(self) -> float:
        """Output tokens/s per GPU at goodput (AIConfigurator's headline throughput figure)."""
        return self.output_tokens_per_s / self.num_gpus

    @property
    def cost_usd_per_month(self) -> float | None:
        """$/h x 730 h (``pdplan/data/billing_periods.yaml``: 8,760 h / 12)."""
        return per_month(self.cost_usd_per_hour)

    @property
    def cost_usd_per_year(self) -> float | None:
        """$/h x 8,760 h (365 x 24, ``pdplan/data/billing_periods.yaml``)."""
        return per_year(self.cost_usd_per_hour)

    @property
    def goodput_rps_per_usd_hour(self) -> float | None:
        return None if not self.cost_usd_per_hour else self.goodput_rps / self.cost_usd_per_hour

    @property
    def output_tokens_per_s_per_usd_hour(self) -> float | None:
        return None if not self.cost_usd_per_hour else self.output_tokens_per_s / self.cost_usd_per_hour

    @property
    def label(self) -> str:
        """Human label: ``2P1D h100-sxm TP4 / h100-sxm TP4 layer`` or ``colocated 3x h100-sxm TP4 chunked``."""

        def role(r: Role) -> str:
            return (
                f"{r.gpu} TP{r.tp}"
                + (f" PP{r.pp}" if r.pp > 1 else "")
                + (f" DP{r.dp}" if r.dp > 1 else "")
                + (f" EP{r.ep}" if r.ep > 1 else "")
                + (" ZeRO-gather" if r.expert_gather else "")
            )

        local = self._local
        if isinstance(local, Colocated):
            return f"colocated {local.instance.count}x {role(local.instance)} {local.scheduler}" + cache_words(
                local.cache
            )
        counts = f"{local.prefill.count}P{local.decode.count}D"
        label = f"{counts} {role(local.prefill)} / {role(local.decode)} {local.granularity}" + kv_words(local)
        if isinstance(self.deployment, Prfaas):
            remote = self.deployment.remote
            label += f" + PrfaaS {remote.count}x {remote.gpu} TP{remote.tp}"
        return label + cache_words(local.cache)

    def to_document(self) -> dict[str, Any]:
        """The plan as JSON (contract keys first, SI units in names; ``prfaas`` only on PrfaaS plans)."""
        doc = {
            "mode": self.mode,
            "prefill": None if self.prefill is None else self.prefill.as_dict(),
            "decode": None if self.decode is None else self.decode.as_dict(),
            "colocated": None if self.colocated is None else self.colocated.as_dict(),
            "granularity": self.granularity,
            "goodput_rps": self.goodput_rps,
            "goodput_rps_per_gpu": self.goodput_rps_per_gpu,
            "num_gpus": self.num_gpus,
            "ttft_p90_s": None if self.ttft_s is None else self.ttft_s.p90,
            "tpot_p90_s": None if self.tpot_s is None else self.tpot_s.p90,
            "label": self.label,
            "link": self.link,
            "routing": self.routing,
            "scheduler": self.scheduler,
            "max_num_seqs": self.max_num_seqs,
            "output_tokens_per_s": self.output_tokens_per_s,
            "cost_usd_per_hour": self.cost_usd_per_hour,
            "cost_usd_per_month": self.cost_usd_per_month,
            "cost_usd_per_year": self.cost_usd_per_year,
            "goodput_rps_per_usd_hour": self.goodput_rps_per_usd_hour,
            "output_tokens_per_s_per_usd_hour": self.output_tokens_per_s_per_usd_hour,
            "operating_rate_rps": self.operating_rate_rps,
            "ttft_s": None if self.ttft_s is None else self.ttft_s.as_dict(),
            "tpot_s": None if self.tpot_s is None else self.tpot_s.as_dict(),
            "attainment": self.attainment,
            "utilisation": self.utilisation,
            "memory_headroom": self.memory_headroom,
            "binding_constraint": self.binding_constraint,
            "operating_binding_constraint": self.operating_binding_constraint,
            "tokens_per_s_per_user": self.tokens_per_s_per_user,
            "exact": self.exact,
            "warnings": list(self.warnings),
            "expected_error": None if self.expected_error is None else self.expected_error.to_document(),
            "e2e_mean_s": self.e2e_mean_s,
            "itl_mean_s": self.itl_mean_s,
            "output_tokens_per_s_per_gpu": self.output_tokens_per_s_per_gpu,
            "output_tokens_per_s_per_user": self.tokens_per_s_per_user,
        }
        if self.prfaas is not None:
            doc["prfaas"] = self.prfaas.to_document()
        if self.priced is not None:
            doc["priced"] = self.priced
        if isinstance(self._local, Disaggregated) and self._local.kv_block_tokens is not None:  # searched
            doc["kv_backend"], doc["kv_block_tokens"] = self._local.kv_backend, self._local.kv_block_tokens
        setting = self._local.cache
        if self.cache is not None or setting is not None:
            doc["cache"] = cache_document(setting, self.cache, self.goodput_rps)
        return doc


def kv_words(d: Disaggregated) -> str:
    """The searched KV choice in a plan's label: ``""`` (not searched) or ``" nixl-ucx block 64"``."""
    return "" if d.kv_block_tokens is None else f" {d.kv_backend} block {d.kv_block_tokens}"


def cache_words(setting: CacheSpec | None) -> str:
    """The cache setting in a plan's label: ``""`` (the scenario's default, or no setting), ``" no prefix cache"``,
    or ``" cache affinity + host-dram-pcie5 1 TiB"`` (routing, then each lower tier and its size)."""
    if setting is None:
        return ""
    if not setting.prefix_caching:
        return " no prefix cache"
    tiers = "".join(
        f" + {t.storage}" + ("" if t.capacity is None else f" {format_bytes(t.capacity)}") for t in setting.tiers
    )
    dual = " dual-path reads" if setting.read_paths == "dual" else ""  # DualPath (docs/prefix_cache.md §10)
    return f" cache {setting.routing}{tiers}{dual}{placement_words(setting)}"


def placement_words(setting: CacheSpec) -> str:
    """PPD in a plan's label: ``""`` for ``pd``, else ``" ppd"``, ``" ppd score"`` or ``" ppd < 256 tok"``
    (docs/prefix_cache.md §11)."""
    p = setting.turn_placement
    if p.policy == "pd":
        return ""
    if p.policy == "threshold":
        return f" ppd < {p.append_threshold_tokens} tok"
    return " ppd" if p.policy == "ppd" else f" ppd score {p.ttft_weight:g}/{p.tpot_weight:g}"


def cache_document(setting: CacheSpec | None, report: CacheReport | None, goodput_rps: float) -> dict[str, Any]:
    """A plan's ``cache`` JSON: the setting searched (``prefix_caching``, ``routing``, ``tiers`` with their sizes)
    and what it does (:meth:`pdplan.serving.cache_report.CacheReport.to_document`; null without reuse)."""
    spec = setting or CacheSpec()
    doc: dict[str, Any] = {
        "prefix_caching": spec.prefix_caching,
        "routing": spec.routing,
        "tier_sizes": [{"storage": t.storage, "capacity_bytes": t.capacity} for t in spec.tiers],
        "report": None if report is None else report.to_document(goodput_rps),
    }
    if spec.read_paths != "prefill":  # only DualPath plans carry it (prefill-only documents are unchanged)
        doc["read_paths"] = spec.read_paths
    if spec.turn_placement.policy != "pd":  # only PPD plans carry it (pd documents are unchanged)
        doc["turn_placement"] = spec.turn_placement.model_dump()
    return doc


@dataclass(frozen=True, slots=True)
class SearchStats:
    """Size and cost of the search."""

    candidates: int
    feasible: int
    seconds: float
    refined: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "candidates": self.candidates,
            "feasible": self.feasible,
            "seconds": self.seconds,
            "refined": self.refined,
        }


@dataclass(frozen=True, slots=True)
class Sensitivity:
    """How the recommended plan fares when one input moves: its goodput and attainment at the operating rate."""

    change: str
    goodput_rps: float
    attainment: float | None
    meets_target: bool
    note: str = ""


@dataclass(frozen=True, slots=True)
class PriceSensitivity:
    """One GPU's price moved: the pick's $/h and which exactly evaluated plan the objective then ranks first."""

    gpu: str
    factor: float
    price_usd_per_gpu_hour: float
    pick_cost_usd_per_hour: float
    winner: str | None
    winner_changes: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "factor": self.factor,
            "price_usd_per_gpu_hour": self.price_usd_per_gpu_hour,
            "pick_cost_usd_per_hour": self.pick_cost_usd_per_hour,
            "winner": self.winner,
            "winner_changes": self.winner_changes,
        }


@dataclass(frozen=True, slots=True)
class GrowthRow:
    """One traffic level: ``growth`` (a fraction: 0.2 = +20 %), the rate re-planned for, and the plan the search
    recommends there (None with the reason when no plan meets it)."""

    growth: float
    rate_rps: float
    plan: Plan | None
    infeasible: str | None = None

    def to_document(self) -> dict[str, Any]:
        """JSON: ``growth``, ``rate_rps``, ``label``, ``num_gpus``, ``cost_usd_per_hour`` / ``_month`` / ``_year``,
        ``binding_constraint``, ``infeasible`` (null when a plan was found)."""
        p = self.plan
        return {
            "growth": self.growth,
            "rate_rps": self.rate_rps,
            "label": None if p is None else p.label,
            "num_gpus": None if p is None else p.num_gpus,
            "cost_usd_per_hour": None if p is None else p.cost_usd_per_hour,
            "cost_usd_per_month": None if p is None else p.cost_usd_per_month,
            "cost_usd_per_year": None if p is None else p.cost_usd_per_year,
            "binding_constraint": None if p is None else p.binding_constraint,
            "infeasible": self.infeasible,
        }


@dataclass(frozen=True, slots=True)
class PlanResult:
    """Everything ``pdplan optimize`` reports: ranked plans, the baseline, the Pareto front and the inputs."""

    question: str
    objective: str
    plans: tuple[Plan, ...]
    baseline: Plan | None
    pareto: tuple[Plan, ...]
    search: SearchStats
    inputs: SearchInputs
    """What the search was asked and given, with the files and sources (JSON ``inputs``)."""
    assumptions: SearchAssumptions
    """The efficiencies and engine settings every plan rests on (JSON ``assumptions``)."""
    sensitivity: tuple[Sensitivity, ...] = ()
    warnings: tuple[str, ...] = ()
    rate_curve: tuple[tuple[float, float, float, float], ...] = field(default=())
    """The pick's (rate_rps, attainment, TTFT and TPOT at the SLO percentile, s) over a range of rates (the plot)."""
    slo_percentile: float = 90.0
    """The SLO percentile the rate curve's latencies are read at."""
    price_sensitivity: tuple[PriceSensitivity, ...] = ()
    rejected: tuple[dict[str, Any], ...] = ()
    """Why not: each GPU type / TP size tried but in no reported plan, with the binding reason."""
    objective_key: str = "gpus"
    """The objective's name (``gpus`` | ``cost`` | ``tokens-per-dollar``); :attr:`objective` is its words."""
    rate_target_rps: float | None = None
    """The target rate of a ``--rate`` search (None: a budget search)."""
    growth: tuple[GrowthRow, ...] = ()
    """``--growth``: the same search re-planned at each grown rate (:mod:`pdplan.search.growth`); empty unless asked."""

    @property
    def best(self) -> Plan:
        return self.plans[0]

    @property
    def planning(self) -> PlanningMargins:
        """The planning margins of the search (headroom, redundancy, dollar budget) with their meaning and sources."""
        return self.inputs.planning

    @property
    def baseline_ratio(self) -> float | None:
        """Best disaggregated goodput per GPU over the colocated baseline's (None without a baseline)."""
        if self.baseline is None or self.baseline.goodput_rps_per_gpu <= 0:
            return None
        disagg = [p for p in self.plans if p.mode == "disaggregated"]
        if not disagg:
            return None
        return disagg[0].goodput_rps_per_gpu / self.baseline.goodput_rps_per_gpu

    def to_document(self) -> dict[str, Any]:
        """The JSON document of ``pdplan optimize --format json``."""
        return {
            "question": self.question,
            "objective": self.objective,
            "plans": [p.to_document() for p in self.plans],
            "baseline": None if self.baseline is None else self.baseline.to_document(),
            "baseline_ratio": self.baseline_ratio,
            "pareto": [p.to_document() for p in self.pareto],
            "search": self.search.as_dict(),
            "sensitivity": [
                {
                    "change": s.change,
                    "goodput_rps": s.goodput_rps,
                    "attainment": s.attainment,
                    "meets_target": s.meets_target,
                    "note": s.note,
                }
                for s in self.sensitivity
            ],
            "inputs": self.inputs.to_document(),
            "assumptions": self.assumptions.to_document(),
            "warnings": list(self.warnings),
            "slo_percentile": self.slo_percentile,
            "rate_curve": [
                {"rate_rps": r, "attainment": a, "ttft_at_percentile_s": t, "tpot_at_percentile_s": p}
                for r, a, t, p in self.rate_curve
            ],
            "planning": self.planning.to_document(),
            "price_sensitivity": [p.as_dict() for p in self.price_sensitivity],
            "why_not": [dict(r) for r in self.rejected],
            "objective_name": self.objective_key,
            "rate_target_rps": self.rate_target_rps,
            "growth": [g.to_document() for g in self.growth],
        }
