"""``optimize``: search xPyD deployments (and the colocated baseline) for the best plan under an SLO.

1. Build the search space (:mod:`pdplan.search.space`) and per-role tables once per instance type
   (:mod:`pdplan.search.tables`).
2. Screen every candidate at once (:mod:`pdplan.search.screen`); the colocated baseline's per-instance goodput is
   exact (random routing splits the rate evenly, so z instances carry z times one instance's goodput).
3. Rank by the objective (:mod:`pdplan.search.select`), re-evaluate the best ones exactly with the serving model
   (:mod:`pdplan.search.exact`), and report the ranked plans, the baseline, the Pareto front, the pick's
   sensitivity and its latency-vs-rate curve.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pdplan.catalog import Catalog, open_catalog
from pdplan.errors import NoFeasiblePlanError, SpecError
from pdplan.search.describe import describe_assumptions, describe_inputs
from pdplan.search.exact import Deployment, Exact, evaluate_exact, rate_curve, scenario_for, sensitivity
from pdplan.search.results import Plan, PlanResult, RoleChoice, SearchStats
from pdplan.search.screen import Candidates, screen_disaggregated
from pdplan.search.select import Metrics, pareto_front, rank
from pdplan.search.space import Space, build_space
from pdplan.search.tables import DecodeTable, PrefillBase, decode_table, prefill_base
from pdplan.serving.disaggregated import decode_cells
from pdplan.serving.evaluate import build_model
from pdplan.serving.goodput import find_goodput
from pdplan.serving.inputs import ResolvedScenario, resolve
from pdplan.serving.roles import RoleHardware
from pdplan.specs.scenario import Scenario

Stage = Callable[[str], None]
REFINE_FACTOR = 3
"""Exact re-evaluations tried per plan reported (the screen's order can shift a little once exact)."""


@dataclass(frozen=True)
class Pool:
    """All screened candidates, disaggregated then colocated, as parallel arrays plus how to rebuild each."""

    deployments: list[Deployment]
    metrics: Metrics
    tau_s: np.ndarray
    binding: np.ndarray
    n_disaggregated: int


def _role(hw: RoleHardware, count: int) -> RoleChoice:
    return RoleChoice(hw.gpu.name, hw.tp, hw.pp, count)


def _price(hw: RoleHardware) -> float:
    return np.nan if hw.gpu.price is None else hw.gpu.price.typical_usd_per_gpu_hour


def _tables(space: Space, res: ResolvedScenario, catalog: Catalog) -> tuple[list[PrefillBase], list[DecodeTable]]:
    lens = res.lengths
    prob = np.asarray(lens.input_marginal(), dtype=np.float64)
    decode_tps = sorted({h.tp for h in space.decode})
    bases = [prefill_base(hw, g, catalog.link(link), dtp, lens.input_tokens, prob, res.chunk_tokens,
                          res.scenario.nics_per_instance)
             for hw in space.prefill for g in space.granularities for link in space.links for dtp in decode_tps]
    cells = decode_cells(res)
    tables = [decode_table(hw, seqs, cells, lens.input_tokens.size, res.scenario.slo.tpot)
              for hw in space.decode for seqs in space.max_num_seqs]
    kept = [t for t in tables if t is not None]
    if not kept:
        raise NoFeasiblePlanError("no decode instance type holds the longest request's KV cache",
                                  binding_constraint="decode KV capacity")
    return bases, kept


def _disaggregated_pool(c: Candidates, bases: list[PrefillBase], tables: list[DecodeTable], space: Space,
                        mean_out: float) -> tuple[list[Deployment], Metrics]:
    pb = [bases[i] for i in c.prefill]
    dt = [tables[k] for k in c.decode]
    deps = [Deployment("disaggregated", _role(b.hw, int(x)), _role(t.hw, int(y)), granularity=b.granularity,
                       link=b.link, routing=space.routings[int(r)], max_num_seqs=t.max_num_seqs)
            for b, t, x, y, r in zip(pb, dt, c.x, c.y, c.routing, strict=True)]
    p_gpus = np.array([b.hw.tp * b.hw.pp for b in bases], dtype=np.float64)[c.prefill]
    d_gpus = np.array([t.hw.tp * t.hw.pp for t in tables], dtype=np.float64)[c.decode]
    p_cost = np.array([_price(b.hw) for b in bases])[c.prefill]
    d_cost = np.array([_price(t.hw) for t in tables])[c.decode]
    gpus = c.x * p_gpus + c.y * d_gpus
    cost = c.x * p_gpus * p_cost + c.y * d_gpus * d_cost
    return deps, Metrics(c.goodput_rps, gpus, cost, c.goodput_rps * mean_out)


def _colocated_pool(base: Scenario, space: Space, catalog: Catalog, mean_out: float
                    ) -> tuple[list[Deployment], Metrics, np.ndarray, np.ndarray]:
    """z = 1..max_instances replicas of each colocated instance type (per-instance goodput computed exactly)."""
    deps: list[Deployment] = []
    good, gpus, cost, tau, binding = [], [], [], [], []
    zs = np.arange(1, space.max_instances + 1)
    for hw in space.colocated:
        for seqs in space.max_num_seqs:
            one = Deployment("colocated", colocated=_role(hw, 1), scheduler=space.colocated_scheduler,
                             max_num_seqs=seqs)
            try:
                model = build_model(resolve(scenario_for(base, one), catalog))
                g1 = find_goodput(model, base.slo)
            except NoFeasiblePlanError:
                continue
            mean_tpot = float(model.snapshot(np.array([g1.rate_rps * (1 - 1e-6)])).tpot.mean_s[0])
            for z in zs:
                deps.append(Deployment("colocated", colocated=_role(hw, int(z)), scheduler=space.colocated_scheduler,
                                       max_num_seqs=seqs))
            good.append(zs * g1.rate_rps)
            gpus.append(zs * float(hw.tp * hw.pp))
            cost.append(zs * hw.tp * hw.pp * _price(hw))
            tau.append(np.full(zs.size, mean_tpot))
            binding.append(np.full(zs.size, g1.binding, dtype=object))
    if not deps:
        empty = np.zeros(0)
        return [], Metrics(empty, empty, empty, empty), empty, np.zeros(0, dtype=object)
    g = np.concatenate(good)
    return deps, Metrics(g, np.concatenate(gpus), np.concatenate(cost), g * mean_out), np.concatenate(tau), \
        np.concatenate(binding)


def _pool(base: Scenario, res: ResolvedScenario, space: Space, catalog: Catalog, stage: Stage) -> Pool:
    stage("pricing instance types")
    bases, tables = _tables(space, res, catalog)
    stage("screening candidates")
    prob = np.asarray(res.lengths.input_marginal(), dtype=np.float64)
    cands = screen_disaggregated(bases, tables, space.routings, base.slo, base.ttft_convention, prob,
                                 space.max_instances)
    mean_out = res.lengths.mean_output()
    deps, m = _disaggregated_pool(cands, bases, tables, space, mean_out)
    stage("colocated baseline")
    cdeps, cm, ctau, cbind = _colocated_pool(base, space, catalog, mean_out)
    metrics = Metrics(*(np.concatenate([getattr(m, f), getattr(cm, f)]) for f in
                        ("goodput_rps", "num_gpus", "cost_usd_per_hour", "output_tokens_per_s")))
    return Pool(deps + cdeps, metrics, np.concatenate([cands.tau_s, ctau]),
                np.concatenate([cands.binding, cbind]), len(deps))
