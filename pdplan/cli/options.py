"""Option types shared by ``evaluate``, ``simulate`` and ``optimize`` (ARCHITECTURE §4), defined once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pdplan.errors import SpecError
from pdplan.io.overrides import ScenarioOverrides, apply_overrides
from pdplan.io.scenario import load_scenario
from pdplan.specs.scenario import Scenario

Opt = typer.Option

ScenarioArg = Annotated[Path | None, typer.Argument(help="Scenario YAML (default: bundled).", dir_okay=False)]
ModelOpt = Annotated[str | None, Opt("--model", help="Model name or path.")]
GpuOpt = Annotated[str | None, Opt("--gpu", help="GPU for both roles.")]
PrefillGpuOpt = Annotated[str | None, Opt("--prefill-gpu", help="Prefill GPU.")]
DecodeGpuOpt = Annotated[str | None, Opt("--decode-gpu", help="Decode GPU.")]
TpOpt = Annotated[int | None, Opt("--tp", min=1, help="TP for both roles.")]
PrefillTpOpt = Annotated[int | None, Opt("--prefill-tp", min=1, help="Prefill TP.")]
DecodeTpOpt = Annotated[int | None, Opt("--decode-tp", min=1, help="Decode TP.")]
XpydOpt = Annotated[str | None, Opt("--xpyd", help="Disaggregated counts, e.g. 2P1D.")]
ColocatedOpt = Annotated[int | None, Opt("--colocated", min=1, help="N colocated instances.")]
SchedulerOpt = Annotated[str | None, Opt("--scheduler", help="Colocated batching: prefill-first|chunked.")]
LinkOpt = Annotated[str | None, Opt("--link", help="KV link name or path.")]
GranularityOpt = Annotated[str | None, Opt("--granularity", help="KV transfer: request|layer|chunk.")]
RoutingOpt = Annotated[str | None, Opt("--routing", help="Prefill routing: random|round-robin|least-work.")]
IslOpt = Annotated[int | None, Opt("--isl", min=1, help="Fixed input length (tokens).")]
OslOpt = Annotated[int | None, Opt("--osl", min=1, help="Fixed output length (tokens).")]
WorkloadOpt = Annotated[str | None, Opt("--workload", help="Workload YAML or preset.")]
TtftSloOpt = Annotated[str | None, Opt("--ttft-slo", help="e.g. 2s, 250ms.")]
TpotSloOpt = Annotated[str | None, Opt("--tpot-slo", help="e.g. 100ms.")]
AttainmentOpt = Annotated[float | None, Opt("--attainment", help="Target fraction of requests, e.g. 0.9.")]
DtypeOpt = Annotated[str | None, Opt("--dtype", help="bf16|fp8 weights/GEMMs.")]
KvDtypeOpt = Annotated[str | None, Opt("--kv-dtype", help="bf16|fp8 KV cache.")]
ConcurrencyOpt = Annotated[int | None, Opt("--concurrency", min=1, help="Closed loop: C clients.")]


def positive_rate(rate: float | None) -> float | None:
    """``--rate`` must be > 0 when given."""
    if rate is not None and rate <= 0:
        raise SpecError("must be > 0", field="--rate")
    return rate


def scenario_from_flags(path: Path | None, overrides: ScenarioOverrides) -> Scenario:
    """The scenario file (or the bundled default) with the command line's overrides applied."""
    from pdplan.serving import default_scenario_path

    return apply_overrides(load_scenario(path or default_scenario_path()), overrides)
