"""``evaluate``: one deployment → goodput, binding constraint and, at a load, TTFT/TPOT summaries, attainment and
utilisations (the library call behind ``pdplan evaluate``).

The load is one of two regimes, chosen here and nowhere else (:func:`_load_regime`): an open loop at a Poisson
``rate`` (the serving model's operating point there), or a closed loop at a ``concurrency`` as benchmark clients
run it (:func:`pdplan.benchmark.run.closed_loop`: the mean-value fixed point, whose throughput becomes the
operating rate, and what the engine's benchmark tool would print).

Before a result is returned it is checked against the physics invariants
(:func:`pdplan.serving.checks.physics.check_result`): a plan that breaks one is a bug and raises, it is never
reported."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

from pdplan.errors import NoFeasiblePlanError, SpecError
from pdplan.evaluation.error_band import ExpectedError, of_prfaas, of_resolved
from pdplan.evaluation.record import Assumptions, Evaluation, PrefillAssumptions
from pdplan.io.catalog import Catalog, open_catalog
from pdplan.io.kernel_tables import cross_gpu_error
from pdplan.queueing.arrivals import instance_ca2
from pdplan.serving.build import LocalModel, goodput, goodput_model, model_at_rate, with_cache_rate
from pdplan.serving.cache_mechanism_calls import dual_path_report, ppd_report
from pdplan.serving.checks.decode_law import law_warnings
from pdplan.serving.checks.physics import PhysicsBounds, check_operating_point, check_result
from pdplan.serving.checks.vendors import cross_vendor_warning
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.decode_lines import line_count
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.engine_bind import engine_record
from pdplan.serving.goodput import ServingModel
from pdplan.serving.limits import Limit
from pdplan.serving.operating_point import OperatingPoint, operating_point
from pdplan.serving.resolve import ResolvedScenario, resolve
from pdplan.serving.snapshot import Snapshot
from pdplan.serving.ttft import convention_words
from pdplan.specs.arguments import check_count, check_positive, check_scenario
from pdplan.specs.arrivals import ArrivalProcess, GammaArrival, PoissonArrival
from pdplan.specs.ceilings import MAX_CONCURRENCY, MAX_REQUESTS
from pdplan.specs.kernel_table import uncalibrated_warning
from pdplan.specs.scenario import Scenario

if TYPE_CHECKING:  # annotations only (start-up, issue #27)
    from pdplan.benchmark.records import BenchmarkLoop, ClosedLoop
    from pdplan.serving.cache_report import CacheReport
    from pdplan.serving.prfaas.result import PrfaasResult


def _deployment(sc: Scenario) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for role in ("prefill", "decode", "colocated"):
        spec = getattr(sc, role)
        if spec is not None:
            out[role] = spec.model_dump()
    if sc.mode == "disaggregated":
        out.update(link=sc.link, granularity=sc.granularity, routing=sc.routing)
        if sc.prefill_max_batch_tokens is not None:
            out["prefill_max_batch_tokens"] = sc.prefill_max_batch_tokens
    return out


def _assumptions(model: DisaggregatedModel | ColocatedModel, res: ResolvedScenario[Any]) -> Assumptions:
    st = model.decode.step
    return Assumptions(
        decode_step_t0_s=st.t0_s,
        decode_step_t1_s_per_seq=st.t1_s_per_seq,
        decode_step_t2_s_per_token=st.t2_s_per_token,
        decode_fit_median_rel_err=model.decode.fit_median_rel_err,
        decode_fit_max_rel_err=model.decode.fit_max_rel_err,
        decode_kv_capacity_tokens=model.decode.kv_capacity_tokens,
        decode_state_tokens_per_seq=model.decode.state_tokens_per_seq,
        max_num_seqs=res.max_num_seqs,
        mean_input_tokens=res.lengths.mean_input(),
        mean_output_tokens=res.lengths.mean_output(),
        kernel_tables=tuple(
            sorted({hw.table.gpu + (" (calibrated)" if hw.table.calibrated else "") for _, hw in res.roles})
        ),
        prefill=_prefill_assumptions(model) if isinstance(model, DisaggregatedModel) else None,
        arrival_process=_arrival_words(model, res.scenario.workload.arrival_process()),
        decode_step_lines=tuple((x.t0_s, x.t1_s_per_seq, x.t2_s_per_token) for x in model.decode.lines),
    )


ARRIVAL_NAMES = {"constant": "constant spacing", "trace": "the trace's own times"}


def _arrival_words(model: DisaggregatedModel | ColocatedModel, process: ArrivalProcess) -> str | None:
    """A non-Poisson arrival process in words: the process, its c_a², the c² an instance's prompt queue is corrected
    for (:mod:`pdplan.queueing.arrivals`) and what stays Poisson (:mod:`pdplan.serving.build`); None for Poisson."""
    if isinstance(process, PoissonArrival):
        return None
    name = f"gamma gaps, cv {process.cv:g}" if isinstance(process, GammaArrival) else ARRIVAL_NAMES[process.process]
    if isinstance(model, ColocatedModel):
        ca2, seen = model.arrival_ca2, instance_ca2("random", model.arrival_ca2, model.z)
        queue = f"each instance's prompt queue G/G-corrected for c² {seen:.3g} (random split over {model.z})"
    else:
        pool = model.pool
        ca2, seen = pool.arrival_ca2, instance_ca2(pool.routing, pool.arrival_ca2, pool.instances)
        queue = f"prefill waits G/G-corrected for c² {seen:.3g} per instance ({pool.routing} over {pool.instances})"
        if pool.routing == "least-work":
            queue = f"prefill waits G/G/{pool.instances}-corrected (Allen–Cunneen, least-work) for c² {seen:.3g}"
        if pool.batched is not None:
            queue = "the batched prefill queue kept Poisson (no G/G correction)"
    return f"{name} (c_a² {ca2:.3g}); {queue}; decode side and KV link fed as Poisson"


def _prefill_assumptions(model: DisaggregatedModel) -> PrefillAssumptions:
    p, pool = model.input_prob, model.pool
    batched = pool.batched
    return PrefillAssumptions(
        mean_prefill_s=float(pool.point_prob @ pool.point_latency_s.ravel()),
        mean_kv_exposed_s=float(p @ model.exposed_s),
        mean_kv_bytes=float(p @ model.transfer_bytes),
        kv_link_queue=_link_words(model),
        full_batch_tokens=None if batched is None else batched.full_tokens,
        full_batch_s=None if batched is None else batched.full_s,
        capacity_rps=None if batched is None else pool.capacity_rps,
    )


def _link_words(model: DisaggregatedModel) -> str:
    """Which KV-link queue the model uses (:mod:`pdplan.queueing.link_delay`), in words."""
    if not model.link_queued:
        return "none (link utilisation below 1 % at the stability limit)"
    if model.tandem is None:
        return "M/G/1 at the busier NICs, less each prompt's stream slack"
    if float(model.tandem.carry_s.max()) <= float(model.tandem.clear_s.min()):
        return "none on the prefill NICs (the stream keeps up with the prefill)" + (
            "; M/G/1 at the decode NICs from the other prefill instances" if model.x > 1 else ""
        )
    return "tandem chain behind each prefill instance (its own NICs)" + (
        " plus the decode NICs shared with the other prefill instances" if model.x > 1 else ""
    )


def evaluate(
    scenario: Scenario,
    *,
    catalog: Catalog | None = None,
    rate: float | None = None,
    concurrency: int | None = None,
    requests: int | None = None,
    warmup: int | None = None,
    prices: dict[str, float] | None = None,
) -> Evaluation:
    """Evaluate one deployment (goodput always; a rate or a closed-loop concurrency optionally). With a concurrency,
    ``requests``/``warmup`` set the benchmark's measured and warm-up requests (default: the engine's tool's).
    ``prices`` (GPU name → USD per GPU-hour, ``--price``; else the scenario's ``search.prices``) replace the
    catalogue's typical prices in the cost, as in :func:`pdplan.search.optimize.optimize`."""
    check_scenario(scenario)
    _check_load(rate, concurrency, requests, warmup)
    catalog = (catalog or open_catalog()).with_prices(prices or (scenario.search.prices if scenario.search else None))
    base = resolve(scenario, catalog)
    res, model, good = goodput_model(base, scenario.slo)
    bounds = check_result(res, model, good.rate_rps, good.limit.rate_rps)
    rate, loop, bench = _load_regime(model, rate, concurrency, requests, warmup)
    at_rate = _model_at(base, model, rate)
    limit = good.limit if at_rate is model else at_rate.limit()
    point = None if rate is None else _operating_point(at_rate, rate, limit, bounds if at_rate is model else None)
    at_good = model.utilisation(np.array([max(good.rate_rps, 1e-12)]))
    warnings = _warnings(res) + law_warnings(res, model)
    return Evaluation(
        name=scenario.name,
        mode=scenario.mode,
        model=res.model.name,
        deployment=_deployment(scenario),
        num_gpus=scenario.num_gpus,
        goodput_rps=good.rate_rps,
        stability_limit_rps=good.limit.rate_rps,
        stability_binding=good.limit.binding,
        kv_comfort_limit_rps=good.limit.kv_comfort_rps,
        seat_comfort_limit_rps=good.limit.seat_comfort_rps,
        binding_constraint=good.binding,
        convention=convention_words(scenario.mode, scenario.ttft_convention),
        slo=scenario.slo.model_dump(),
        cost_usd_per_hour=res.cost_usd_per_hour(),
        price_usd_per_gpu_hour=res.gpu_prices_usd_per_hour(),
        utilisation_at_goodput={k: float(v[0]) for k, v in at_good.items()},
        operating_point=point,
        closed_loop=loop,
        assumptions=_assumptions(model, res),
        warnings=warnings,
        prfaas=_prfaas(res),
        engine=engine_record(res.catalog, scenario),
        benchmark=bench,
        ttft_parts=None if rate is None else at_rate.ttft_parts(rate),
        cache=_cache_report(res, at_rate, scenario),
        expected_error=_expected_error(res),
    )


def _model_at(base: ResolvedScenario[Any], model: LocalModel, rate: float | None) -> LocalModel:
    """The model at the operating rate: ``model`` (the goodput's) where no rate is given, or where neither the
    prefix cache's hit rates nor a concave decode law's line (:mod:`pdplan.serving.decode_lines`) moves with it;
    else the one built for that rate."""
    if rate is None or (base.cache is None and line_count(base) == 0):
        return model
    return model_at_rate(with_cache_rate(base, rate), rate)


def _cache_report(res: ResolvedScenario[Any], model: LocalModel, scenario: Scenario) -> CacheReport | None:
    """The prefix cache's hit rates (at the model's rate) and the same deployment's goodput without it."""
    from pdplan.serving.cache_report import CacheReport  # only a scenario with a prefix cache (start-up, issue #27)

    if model.cache is None:
        return None

    def rate_of(other: ResolvedScenario[Any]) -> float:  # on every line of a concave decode law (decode_lines)
        return goodput(dataclasses.replace(other, decode_line=None), scenario.slo).rate_rps

    without = rate_of(dataclasses.replace(res, cache=None))
    dual = dual_path_report(res, model.cache, rate_of)
    ppd = ppd_report(res, model, rate_of)
    return CacheReport.of(model.cache, without, mode=res.hardware.deployment.mode, dual_path=dual, turn_placement=ppd)


def _load_regime(
    model: LocalModel, rate: float | None, concurrency: int | None, requests: int | None, warmup: int | None
) -> tuple[float | None, ClosedLoop | None, BenchmarkLoop | None]:
    """The one regime switch: ``(operating rate, closed loop, benchmark)``. Open loop: the given Poisson rate (or
    none). Closed loop: the mean-value fixed point's throughput (just below the stable limit when the clients
    saturate it) and what the engine's benchmark tool would report."""
    if concurrency is None:
        return rate, None, None
    from pdplan.benchmark.run import closed_loop  # lazy: only the closed-loop regime runs the benchmark loops

    loop, bench = closed_loop(model, concurrency, requests, warmup)
    return (loop.throughput_rps * (1.0 - 1e-6) if loop.saturated else loop.throughput_rps), loop, bench


def _check_load(rate: float | None, concurrency: int | None, requests: int | None, warmup: int | None) -> None:
    """A rate or a concurrency, not both; benchmark request counts only with a concurrency; each finite, positive
    and under its ceiling (:mod:`pdplan.specs.ceilings`)."""
    check_positive(rate, "rate")
    check_count(concurrency, "concurrency", ceiling=MAX_CONCURRENCY)
    check_count(requests, "requests", ceiling=MAX_REQUESTS)
    check_count(warmup, "warmup", ceiling=MAX_REQUESTS, floor=0)
    if rate is not None and concurrency is not None:
        raise SpecError("give either a rate or a concurrency, not both", field="rate")
    if (requests is not None or warmup is not None) and concurrency is None:
        raise SpecError(
            "--requests and --warmup describe a closed-loop benchmark: give --concurrency", field="requests"
        )


def _operating_point(model: LocalModel, rate: float, limit: Limit, bounds: PhysicsBounds | None) -> OperatingPoint:
    """The latencies at ``rate``, checked against the physics bounds (``bounds``: the model's, when known)."""
    snap = _snapshot_at(model, rate, limit.rate_rps, limit.binding)
    check_operating_point(model.res, model, rate, snapshot=snap, bounds=bounds)
    return operating_point(snap, model.res.scenario.slo)


def _warnings(res: ResolvedScenario[Any]) -> tuple[str, ...]:
    """The scenario's warnings, plus uncalibrated kernel tables, mixed vendors and a missing price."""
    warnings = list(res.warnings)
    tables = {hw.table.gpu: hw.table for _, hw in res.roles}
    warnings += [uncalibrated_warning(g, t.derived_from) for g, t in sorted(tables.items()) if not t.calibrated]
    warnings += _unmeasured_gpu_warnings(res)
    vendors = cross_vendor_warning(res)
    if vendors is not None:
        warnings.append(vendors)
    if res.cost_usd_per_hour() is None:
        warnings.append("a GPU of this deployment has no price in the catalogue: goodput per $/h is not reported")
    return tuple(warnings)


def _unmeasured_gpu_warnings(res: ResolvedScenario[Any]) -> list[str]:
    """For a GPU whose kernel table pdplan borrowed: the cross-GPU validation's error band of this engine and mode
    (:mod:`pdplan.specs.cross_gpu_error`); for a GPU file without ``tdp_w`` or ``sm_count``: one line each (a missing
    price has its own line)."""
    out = []
    mode = "disagg" if res.scenario.mode == "disaggregated" else ("moe" if res.model.moe is not None else "dense")
    seen: set[str] = set()
    for _, hw in res.roles:
        if hw.gpu.name in seen:
            continue
        seen.add(hw.gpu.name)
        out += [line for line in hw.gpu.missing_fact_warnings() if "gives no price" not in line]
        if "borrowed" in hw.table.sources and hw.table.derived_from is not None:
            engine = hw.engine.engine if hw.engine is not None else "kernels"
            out.append(cross_gpu_error().warning(hw.gpu.name, hw.table.derived_from, engine, mode))
    return out


def _expected_error(res: ResolvedScenario[Any]) -> ExpectedError:
    """The deployment's expected error (:mod:`pdplan.evaluation.error_band`); a PrfaaS scenario's names its remote
    prefill GPU too."""
    prfaas = res.scenario.prfaas
    return of_resolved(res) if prfaas is None else of_prfaas(res, prfaas.gpu)


def _prfaas(res: ResolvedScenario[Any]) -> PrfaasResult | None:
    """The PrfaaS analysis when the scenario has a ``prfaas:`` block (lazy import: only those pay for it)."""
    if res.scenario.prfaas is None:
        return None
    from pdplan.serving.prfaas.evaluate import evaluate_prfaas

    return evaluate_prfaas(res)


def _snapshot_at(model: ServingModel, rate: float, limit: float, binding: str) -> Snapshot:
    if rate >= limit:
        raise NoFeasiblePlanError(
            f"rate {rate:.4g} req/s is beyond this deployment's stable limit of {limit:.4g} req/s (set by {binding})",
            binding_constraint=binding,
        )
    return model.snapshot(np.array([rate]))
