"""A synthetic but realistic :class:`PlanResult` for report tests: Llama-3.1-70B chat on H100-SXM (+ H20).

Ranked: 2P1D TP4/TP4 layer (the pick, 0.80 req/s per GPU), 3P2D TP2/TP4 layer, 2P1D h100-sxm TP4 / h20 TP8 chunk
(screened only, unpriced H20 with an uncalibrated kernel table); baseline colocated 3x TP4 chunked
(0.44 req/s per GPU, ratio 1.81x); a Pareto front of three plans (one not ranked); five sensitivity rows and a
12-point rate curve. Numbers are hand-picked, not model output: only the report layout is under test.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pdplan.search.inputs_record import (
    EngineSettings,
    GpuFacts,
    KernelTableFacts,
    LinkFacts,
    ModelFacts,
    PlanningMargins,
    SearchAssumptions,
    SearchInputs,
    SpaceFacts,
    WorkloadFacts,
)
from pdplan.search.planning import HEADROOM_MEANING, REDUNDANCY_MEANING
from pdplan.search.plans import Plan, PlanResult, SearchStats, Sensitivity
from pdplan.serving.deployment import Colocated, Deployment, Disaggregated
from pdplan.serving.deployment import Role as RoleChoice
from pdplan.serving.snapshot import Latency
from pdplan.specs.scenario import SloSpec

GIB = 2**30
H100_PRICE = 3.0  # $/GPU-hour


def _plan(**overrides: Any) -> Plan:
    base: dict[str, Any] = dict(
        mode="disaggregated",
        prefill=RoleChoice("h100-sxm", 4, 1, 2),
        decode=RoleChoice("h100-sxm", 4, 1, 1),
        colocated=None,
        granularity="layer",
        link="ib-ndr",
        routing="least-work",
        scheduler=None,
        max_num_seqs=256,
        num_gpus=12,
        goodput_rps=9.6,
        output_tokens_per_s=2476.8,
        cost_usd_per_hour=12 * H100_PRICE,
        operating_rate_rps=9.6,
        ttft_s=Latency(0.4125, 0.3310, 0.8742, 1.6120),
        tpot_s=Latency(0.0351, 0.0342, 0.0419, 0.0533),
        attainment=0.9003,
        utilisation={"prefill": 0.7124, "decode": 0.6481, "link": 0.0815},
        memory_headroom={"prefill": 31.4 * GIB, "decode": 6.25 * GIB},
        binding_constraint="TTFT at P90 (874 ms of 2000 ms with queueing; attainment 90.0%)",
        tokens_per_s_per_user=28.5,
        exact=True,
    )
    base.update(overrides)
    return Plan(deployment=_deployment(base), **base)


_DEPLOYMENT_KEYS = ("mode", "prefill", "decode", "colocated", "granularity", "link", "routing", "scheduler")


def _deployment(fields: dict[str, Any]) -> Deployment:
    """The deployment union from the fixture's flat fields (removed from ``fields``)."""
    f = {k: fields.pop(k) for k in _DEPLOYMENT_KEYS}
    if f["mode"] == "colocated":
        return Colocated(f["colocated"], f["scheduler"])
    return Disaggregated(f["prefill"], f["decode"], f["link"], f["granularity"], f["routing"])


def pick() -> Plan:
    return _plan()


def runner_up() -> Plan:
    return _plan(
        prefill=RoleChoice("h100-sxm", 2, 1, 3),
        decode=RoleChoice("h100-sxm", 4, 1, 2),
        num_gpus=14,
        goodput_rps=10.5,
        output_tokens_per_s=2709.0,
        cost_usd_per_hour=14 * H100_PRICE,
        operating_rate_rps=10.5,
        ttft_s=Latency(0.5530, 0.4410, 1.1520, 1.9870),
        tpot_s=Latency(0.0298, 0.0291, 0.0352, 0.0447),
        attainment=0.9001,
        utilisation={"prefill": 0.7930, "decode": 0.4712, "link": 0.0934},
        memory_headroom={"prefill": 52.8 * GIB, "decode": 22.5 * GIB},
        binding_constraint="TTFT at P90 (1152 ms of 2000 ms; prefill TP2 is slower per prompt)",
        tokens_per_s_per_user=33.6,
    )


def screened() -> Plan:
    return _plan(
        decode=RoleChoice("h20", 8, 1, 1),
        granularity="chunk",
        num_gpus=16,
        goodput_rps=11.2,
        output_tokens_per_s=2889.6,
        cost_usd_per_hour=None,
        operating_rate_rps=11.2,
        ttft_s=Latency(0.4410, 0.3620, 0.9100, 1.7010),
        tpot_s=Latency(0.0612, 0.0598, 0.0731, 0.0911),
        attainment=0.9010,
        utilisation={"prefill": 0.8311, "decode": 0.7702, "link": 0.0951},
        memory_headroom={"prefill": 31.4 * GIB, "decode": 40.1 * GIB},
        binding_constraint="prefill utilisation (stability limit at 13.5 req/s)",
        tokens_per_s_per_user=16.4,
        exact=False,
        warnings=("h20 kernel table derived from h100-sxm",),
    )


def interactive() -> Plan:
    """On the Pareto front (fastest per user) but not among the ranked plans."""
    return _plan(
        prefill=RoleChoice("h100-sxm", 4, 1, 1),
        decode=RoleChoice("h100-sxm", 8, 1, 1),
        num_gpus=12,
        goodput_rps=5.4,
        output_tokens_per_s=1393.2,
        operating_rate_rps=5.4,
        ttft_s=Latency(0.6010, 0.4820, 1.2870, 2.3040),
        tpot_s=Latency(0.0188, 0.0183, 0.0221, 0.0270),
        attainment=0.9002,
        utilisation={"prefill": 0.8012, "decode": 0.2650, "link": 0.0458},
        memory_headroom={"prefill": 31.4 * GIB, "decode": 58.0 * GIB},
        binding_constraint="TTFT at P90 (one prefill instance)",
        tokens_per_s_per_user=53.2,
    )


def baseline() -> Plan:
    return _plan(
        mode="colocated",
        prefill=None,
        decode=None,
        colocated=RoleChoice("h100-sxm", 4, 1, 3),
        granularity=None,
        link=None,
        routing="least-work",
        scheduler="chunked",
        goodput_rps=5.3,
        output_tokens_per_s=1367.4,
        operating_rate_rps=5.3,
        ttft_s=Latency(0.7020, 0.5810, 1.4910, 2.6120),
        tpot_s=Latency(0.0712, 0.0680, 0.0951, 0.1340),
        attainment=0.9004,
        utilisation={"colocated": 0.8817},
        memory_headroom={"colocated": 18.9 * GIB},
        binding_constraint="TPOT at P90 (prefill chunks stall decode steps)",
        tokens_per_s_per_user=14.0,
    )


def _h100() -> GpuFacts:
    return GpuFacts(
        display_name="NVIDIA H100 SXM5 80GB",
        source_file="hardware_db/gpus/h100-sxm.yaml",
        sha256="3f1c9a0e5b7d2c4a8e6f1b3d5c7a9e0f2b4d6c8a0e1f3b5d7c9a2e4f6b8d0c1a",
        price_usd_per_gpu_hour=H100_PRICE,
        price_source="cloud on-demand quotes, May 2026",
        calibrated_kernel_table=True,
        kernel_table_derived_from=None,
    )


def _planning() -> PlanningMargins:
    return PlanningMargins(
        headroom=0.0,
        headroom_meaning=HEADROOM_MEANING,
        redundancy="none",
        redundancy_meaning=REDUNDANCY_MEANING["none"],
        budget_usd_per_hour=None,
        sources={"headroom": "0: no margin (DistServe's goodput)", "redundancy": "none: every instance up"},
    )


def _inputs() -> SearchInputs:
    return SearchInputs(
        model=ModelFacts(
            name="llama-3.1-70b",
            source="built-in pdplan/models/llama-3.1-70b.yaml",
            total_params=70_553_706_496,
            active_params=70_553_706_496,
        ),
        workload=WorkloadFacts(
            name="chat",
            description="Splitwise conversation trace, lognormal fit",
            source="Patel et al., Splitwise (ISCA 2024), Table 2 medians",
            is_fit=True,
            mean_input_tokens=1155.0,
            mean_output_tokens=258.0,
        ),
        slo=SloSpec(ttft=2.0, tpot=0.1, percentile=90.0, attainment=0.9),
        ttft_convention="A",
        dtype="bf16",
        kv_dtype="bf16",
        gpus={
            "h100-sxm": _h100(),
            "h20": GpuFacts(
                display_name="NVIDIA H20 96GB",
                source_file="hardware_db/gpus/h20.yaml",
                sha256="9b2e4d6f8a0c1e3b5d7f9a1c3e5b7d9f0a2c4e6b8d0f1a3c5e7b9d2f4a6c8e0b",
                price_usd_per_gpu_hour=None,
                price_source="",
                calibrated_kernel_table=False,
                kernel_table_derived_from="h100-sxm",
            ),
        },
        links={
            "ib-ndr": LinkFacts(
                display_name="InfiniBand NDR 400G",
                line_rate_gbit_per_s=400.0,
                efficiency=0.87,
                source="hardware_db/links/ib-ndr.yaml",
            )
        },
        search_space=SpaceFacts(
            prefill=("h100-sxm TP2", "h100-sxm TP4", "h100-sxm TP8"),
            decode=("h100-sxm TP4", "h100-sxm TP8", "h20 TP8"),
            colocated=("h100-sxm TP4",),
            granularities=("layer", "chunk"),
            links=("ib-ndr",),
            routing=("least-work",),
            max_num_seqs=(256,),
            max_instances=16,
            budget_gpus=16,
            rate_rps=None,
            objective="gpus",
            colocated_scheduler="chunked",
            headroom=0.0,
            redundancy="none",
            budget_usd_per_hour=None,
        ),
        pdplan_version="0.1.0",
        planning=_planning(),
    )


def _kernel_table(**overrides: Any) -> KernelTableFacts:
    base: dict[str, Any] = dict(
        calibrated=True,
        derived_from=None,
        stack="vLLM 0.24.0",
        gemm_bf16_peak_fraction=0.8465,
        gemm_bf16_memory_fraction=0.8655,
        prefill_attention_compute_fraction=0.84,
        decode_attention_memory_fraction=0.7812,
        allreduce_bus_gb_per_s=295.4,
        decode_step_overhead_s=0.0,
    )
    return KernelTableFacts(**{**base, **overrides})


def _assumptions() -> SearchAssumptions:
    return SearchAssumptions(
        kernel_tables={
            "h100-sxm": _kernel_table(),
            "h20": _kernel_table(
                calibrated=False,
                derived_from="h100-sxm",
                gemm_bf16_peak_fraction=0.81,
                gemm_bf16_memory_fraction=0.84,
                decode_attention_memory_fraction=0.75,
            ),
        },
        engine={"name": "vllm", "version": "0.12.0", "source": "pdplan/data/engines/vllm.yaml", "engine": "vllm"},
        engine_defaults=EngineSettings(
            gpu_memory_utilization=0.9,
            max_num_batched_tokens=8192,
            max_num_seqs=256,
            limits_source="vLLM EngineArgs defaults",
            kv_memory_source="vLLM gpu_memory_utilization",
            step_overhead_source="fitted on vLLM benchmark runs",
        ),
        method="roofline per operator on a calibrated kernel table",
    )


def _rate_curve() -> tuple[tuple[float, float, float, float], ...]:
    rates = [1.0 * i for i in range(1, 13)]
    ttft = [0.3300, 0.3520, 0.3810, 0.4200, 0.4710, 0.5380, 0.6240, 0.7350, 0.8260, 1.1800, 2.4500, float("inf")]
    tpot = [0.0300, 0.0310, 0.0320, 0.0331, 0.0345, 0.0360, 0.0376, 0.0393, 0.0411, 0.0440, 0.0490, 0.0600]
    attain = [0.999, 0.998, 0.996, 0.993, 0.987, 0.978, 0.962, 0.940, 0.910, 0.842, 0.610, 0.0]
    return tuple(zip(rates, attain, ttft, tpot, strict=True))


def plan_result() -> PlanResult:
    """The fixture: a 2P1D H100 pick, two alternatives, a colocated baseline, Pareto and sensitivity rows."""
    p = pick()
    sensitivity = (
        Sensitivity("rate -20%", 9.6, 0.9650, True, "operating at 7.68 req/s"),
        Sensitivity("rate +20%", 9.6, 0.7820, False, "operating at 11.52 req/s: TTFT P90 past 2 s"),
        Sensitivity("link bandwidth x0.5", 9.1, 0.8810, False, "layer-wise transfer hides most of the KV copy"),
        Sensitivity("SLO -20%", 7.9, 0.8120, False, "TTFT 1.6 s, TPOT 80 ms"),
        Sensitivity("SLO +20%", 10.8, 0.9480, True, "TTFT 2.4 s, TPOT 120 ms"),
    )
    return PlanResult(
        question="Most goodput per GPU for llama-3.1-70b (chat) within 16 GPUs at TTFT P90 <= 2 s, "
        "TPOT P90 <= 100 ms, 90% attainment",
        objective="gpus",
        plans=(p, runner_up(), screened()),
        baseline=baseline(),
        pareto=(interactive(), runner_up(), p),
        search=SearchStats(candidates=4312, feasible=1187, seconds=3.42, refined=24),
        inputs=_inputs(),
        assumptions=_assumptions(),
        sensitivity=sensitivity,
        warnings=("workload input_tokens clipped at the model's 131072-token context for 0.4% of requests",),
        rate_curve=_rate_curve(),
    )


def minimal_result() -> PlanResult:
    """One plan, no baseline, no Pareto, no sensitivity, the inputs and assumptions of one GPU and no link (edge
    cases)."""
    return PlanResult(
        question="q",
        objective="cost",
        plans=(replace(pick(), cost_usd_per_hour=None),),
        baseline=None,
        pareto=(),
        search=SearchStats(1, 1, 0.01, 1),
        inputs=replace(_inputs(), gpus={"h100-sxm": _h100()}, links={}),
        assumptions=replace(_assumptions(), kernel_tables={"h100-sxm": _kernel_table()}),
    )
