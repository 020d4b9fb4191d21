"""The options shared by ``evaluate``, ``simulate`` and ``optimize`` (docs/architecture.md §4), each defined once.

:data:`OVERRIDE_OPTIONS` declares one option per :class:`~pdplan.specs.command_line.ScenarioOverrides` field: its flag
(from :data:`~pdplan.specs.command_line.FLAGS`), type and help text. A command takes them all with
:func:`takes_overrides`: it declares one keyword-only parameter ``overrides: ScenarioOverrides``, typer shows the
options in its place, and the command receives their values as one object::

    @takes_overrides
    def evaluate_command(scenario: ScenarioArg = None, *, overrides: ScenarioOverrides, rate: RateOpt = None) -> None:
        scenario_from_flags(scenario, overrides)
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from pdplan.cli.common import prepare_output, warn
from pdplan.errors import SpecError
from pdplan.report.render import Format
from pdplan.specs.ceilings import MAX_CONCURRENCY, MAX_REQUESTS
from pdplan.specs.command_line import FLAGS, ScenarioOverrides

if TYPE_CHECKING:
    from pdplan.specs.scenario import Scenario

R = TypeVar("R")
Opt = typer.Option
_SEARCH = "optimize: a comma-separated list to search"

OVERRIDE_OPTIONS: dict[str, Any] = {
    "model": Annotated[str | None, Opt(FLAGS["model"], help="Model name or path.")],
    "gpu": Annotated[str | None, Opt(FLAGS["gpu"], help=f"GPU for both roles ({_SEARCH}).")],
    "prefill_gpu": Annotated[str | None, Opt(FLAGS["prefill_gpu"], help=f"Prefill GPU ({_SEARCH}).")],
    "decode_gpu": Annotated[str | None, Opt(FLAGS["decode_gpu"], help=f"Decode GPU ({_SEARCH}).")],
    "tp": Annotated[int | None, Opt(FLAGS["tp"], min=1, help="TP for both roles (optimize: only this degree).")],
    "prefill_tp": Annotated[
        int | None, Opt(FLAGS["prefill_tp"], min=1, help="Prefill TP (optimize: joins the --tp degrees searched).")
    ],
    "decode_tp": Annotated[
        int | None, Opt(FLAGS["decode_tp"], min=1, help="Decode TP (optimize: joins the --tp degrees searched).")
    ],
    "xpyd": Annotated[
        str | None, Opt(FLAGS["xpyd"], help="Disaggregated counts, e.g. 2P1D (optimize: only plans with these).")
    ],
    "colocated": Annotated[
        int | None, Opt(FLAGS["colocated"], min=1, help="N colocated instances (optimize: only plans with N).")
    ],
    "scheduler": Annotated[
        str | None,
        Opt(FLAGS["scheduler"], help="Colocated batching: prefill-first|chunked (optimize: the baseline's)."),
    ],
    "link": Annotated[str | None, Opt(FLAGS["link"], help=f"KV link name or path ({_SEARCH}).")],
    "granularity": Annotated[
        str | None, Opt(FLAGS["granularity"], help=f"KV transfer: request|layer|chunk ({_SEARCH}).")
    ],
    "routing": Annotated[
        str | None,
        Opt(
            FLAGS["routing"],
            help=f"Prefill routing: random|round-robin|least-work|least-loaded|power-of-two ({_SEARCH}).",
        ),
    ],
    "isl": Annotated[int | None, Opt(FLAGS["isl"], min=1, help="Fixed input length (tokens).")],
    "osl": Annotated[int | None, Opt(FLAGS["osl"], min=1, help="Fixed output length (tokens).")],
    "workload": Annotated[str | None, Opt(FLAGS["workload"], help="Workload YAML or preset.")],
    "ttft_slo": Annotated[str | None, Opt(FLAGS["ttft_slo"], help="e.g. 2s, 250ms.")],
    "tpot_slo": Annotated[str | None, Opt(FLAGS["tpot_slo"], help="e.g. 100ms.")],
    "attainment": Annotated[float | None, Opt(FLAGS["attainment"], help="Target fraction of requests, e.g. 0.9.")],
    "dtype": Annotated[str | None, Opt(FLAGS["dtype"], help="bf16|fp8 weights/GEMMs.")],
    "kv_dtype": Annotated[str | None, Opt(FLAGS["kv_dtype"], help="bf16|fp8 KV cache.")],
    "max_instances": Annotated[
        int | None, Opt(FLAGS["max_instances"], min=1, help="optimize: most instances per pool (search.max_instances).")
    ],
    "pp": Annotated[int | None, Opt(FLAGS["pp"], min=1, help="Pipeline-parallel degree (optimize: only this degree).")],
    "percentile": Annotated[
        float | None, Opt(FLAGS["percentile"], min=0.0, max=100.0, help="SLO percentile, e.g. 90 or 99.")
    ],
    "prfaas_gpu": Annotated[
        str | None, Opt(FLAGS["prfaas_gpu"], help="PrfaaS: remote prefill GPU (adds a prfaas: block if none).")
    ],
    "prfaas_tp": Annotated[int | None, Opt(FLAGS["prfaas_tp"], min=1, help="PrfaaS: remote prefill TP.")],
    "prfaas_instances": Annotated[
        int | None, Opt(FLAGS["prfaas_instances"], min=1, help="PrfaaS: remote prefill instances.")
    ],
    "prfaas_link": Annotated[str | None, Opt(FLAGS["prfaas_link"], help="PrfaaS: cross-DC link, e.g. dci-100g.")],
    "prfaas_rtt": Annotated[str | None, Opt(FLAGS["prfaas_rtt"], help="PrfaaS: cross-DC round trip, e.g. 2ms.")],
    "prfaas_threshold": Annotated[
        int | None,
        Opt(FLAGS["prfaas_threshold"], min=1, help="PrfaaS: offload prompts longer than this (default: searched)."),
    ],
    "engine": Annotated[
        str | None, Opt(FLAGS["engine"], help="Serving engine: vllm|sglang|trtllm|kernels or a profile YAML.")
    ],
    "ep": Annotated[str | None, Opt(FLAGS["ep"], help=f"Expert-parallel size, both roles, MoE ({_SEARCH}).")],
    "prefill_ep": Annotated[str | None, Opt(FLAGS["prefill_ep"], help=f"Prefill EP size ({_SEARCH}).")],
    "decode_ep": Annotated[str | None, Opt(FLAGS["decode_ep"], help=f"Decode EP size ({_SEARCH}).")],
    "dp": Annotated[str | None, Opt(FLAGS["dp"], help=f"Attention data-parallel ranks, both roles ({_SEARCH}).")],
    "prefill_dp": Annotated[str | None, Opt(FLAGS["prefill_dp"], help=f"Prefill attention DP ranks ({_SEARCH}).")],
    "decode_dp": Annotated[str | None, Opt(FLAGS["decode_dp"], help=f"Decode attention DP ranks ({_SEARCH}).")],
    "max_num_seqs": Annotated[
        str | None, Opt(FLAGS["max_num_seqs"], help=f"Most sequences per instance (vLLM's name; {_SEARCH}).")
    ],
    "max_num_batched_tokens": Annotated[
        int | None,
        Opt(
            FLAGS["max_num_batched_tokens"],
            min=1,
            help="Token budget per engine step (vLLM's name): the colocated chunk and the prefill batch budget.",
        ),
    ],
    "max_model_len": Annotated[
        int | None,
        Opt(FLAGS["max_model_len"], min=1, help="Longest request, prompt + output (vLLM's name); longer are clipped."),
    ],
    "gpu_memory_utilization": Annotated[
        float | None,
        Opt(
            FLAGS["gpu_memory_utilization"],
            min=0.0,
            max=1.0,
            help="Fraction of GPU memory the engine may use, in (0, 1] (vLLM's name).",
        ),
    ],
}
"""Field of :class:`ScenarioOverrides` → its option (``Annotated`` type with the typer declaration)."""

ScenarioArg = Annotated[Path | None, typer.Argument(help="Scenario YAML (default: bundled).", dir_okay=False)]
RateOpt = Annotated[
    float | None,
    Opt(FLAGS["rate"], help="Poisson rate, req/s (optimize: the target to meet at the fewest GPUs or lowest $)."),
]
ConcurrencyOpt = Annotated[
    int | None, Opt(FLAGS["concurrency"], min=1, max=MAX_CONCURRENCY, help="Closed loop: C clients.")
]
HeadroomOpt = Annotated[
    float | None,
    Opt(
        FLAGS["headroom"],
        min=0.0,
        help="Planning margin H: the SLO must hold at (1+H)x the operating rate (goodput = SLO-meeting rate / (1+H)).",
    ),
]
RedundancyOpt = Annotated[
    str | None, Opt(FLAGS["redundancy"], help="none | n+1 (the SLO must hold with one instance of each pool down).")
]
PriceOpt = Annotated[
    list[str] | None, Opt(FLAGS["prices"], help="GPU=USD_PER_GPU_HOUR, replaces the catalogue price (repeatable).")
]
BudgetUsdOpt = Annotated[
    float | None, Opt(FLAGS["budget_usd_per_hour"], min=0.0, help="Dollar budget: only plans costing at most this $/h.")
]


def parse_prices(items: list[str] | None) -> dict[str, float] | None:
    """``["h20=1.5", "h100-sxm=3"]`` -> ``{"h20": 1.5, "h100-sxm": 3.0}`` (SpecError naming ``--price``)."""
    if not items:
        return None
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            price = float(value) if math.isfinite(float(value)) else -1.0
        except ValueError:
            price = -1.0
        if not sep or not name.strip() or not price > 0:
            raise SpecError(f"expected GPU=USD_PER_GPU_HOUR with a positive price, got {item!r}", field=FLAGS["prices"])
        out[name.strip().lower()] = price
    return out


RequestsOpt = Annotated[
    int | None,
    Opt(
        FLAGS["requests"], min=1, max=MAX_REQUESTS, help="Closed loop: measured requests (default: the engine tool's)."
    ),
]
WarmupOpt = Annotated[
    int | None,
    Opt(FLAGS["warmup"], min=0, max=MAX_REQUESTS, help="Closed loop: warm-up requests (default: the engine's tool's)."),
]


def takes_overrides(command: Callable[..., R]) -> Callable[..., R]:
    """``command`` with the :data:`OVERRIDE_OPTIONS` in place of its ``overrides`` parameter (keyword-only): typer
    parses one option per field and ``command`` receives them as one :class:`ScenarioOverrides`."""
    signature = inspect.signature(command, eval_str=True)
    params = list(signature.parameters.values())
    at = [p.name for p in params].index("overrides")
    shared = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=option)
        for name, option in OVERRIDE_OPTIONS.items()
    ]
    options = signature.replace(parameters=[*params[:at], *shared, *params[at + 1 :]])

    @functools.wraps(command)
    def with_overrides(*args: Any, **kwargs: Any) -> R:
        values = lower_choices({name: kwargs.pop(name) for name in OVERRIDE_OPTIONS})
        warn_bare_durations(values)
        return command(*args, overrides=ScenarioOverrides(**values), **kwargs)

    with_overrides.__signature__ = options  # type: ignore[attr-defined]  # what typer reads the options from
    with_overrides.__annotations__ = {p.name: p.annotation for p in options.parameters.values()}
    return with_overrides


CHOICE_FIELDS = ("scheduler", "granularity", "routing", "dtype", "kv_dtype")
"""Overrides whose values are words from a fixed vocabulary: read case-insensitively (``--dtype FP8``)."""


def lower_choices(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with the :data:`CHOICE_FIELDS` lower-cased (names of GPUs and models are matched
    case-insensitively where they are looked up)."""
    return {k: v.lower() if k in CHOICE_FIELDS and isinstance(v, str) else v for k, v in values.items()}


BARE_SECONDS_ABOVE = {"ttft_slo": 60.0, "tpot_slo": 1.0}
"""A bare number (seconds) above which an SLO is implausible for its quantity, so probably meant in ms: a time to
first token over a minute, a time per output token over a second (interactive serving targets are 0.1-10 s and
10-200 ms). A warning, never a change: the value is used as given."""


def warn_bare_durations(values: dict[str, Any]) -> None:
    """Warn (stderr) when ``--ttft-slo``/``--tpot-slo`` is a bare number implausibly large in seconds."""
    from pdplan.units import is_bare_number, parse_time_s

    for name, limit_s in BARE_SECONDS_ABOVE.items():
        text = values.get(name)
        if text is None or not is_bare_number(text):
            continue
        seconds = parse_time_s(text)
        if seconds > limit_s:
            warn(
                f"{FLAGS[name]} {text} has no unit and is read as {seconds:g} s; "
                f"did you mean {text}ms? (give a unit: {text}ms or {text}s)"
            )


def positive_rate(rate: float | None) -> float | None:
    """``--rate`` must be > 0 when given."""
    if rate is not None and not (math.isfinite(rate) and rate > 0):
        raise SpecError(f"must be a finite number > 0, got {rate}", field=FLAGS["rate"])
    return rate


def load_scenario_arg(path: Path | None) -> Scenario:
    """The scenario file given on the command line, or the bundled default."""
    from pdplan.io.scenario import (
        default_scenario_path,
        load_scenario,  # lazy: workload laws load scipy
    )

    return load_scenario(path or default_scenario_path())


def scenario_from_flags(path: Path | None, overrides: ScenarioOverrides) -> Scenario:
    """The scenario file (or the bundled default) with the command line's overrides applied."""
    from pdplan.io.overrides import apply_overrides

    return apply_overrides(load_scenario_arg(path), overrides)


def start_scenario(
    scenario: Path | None, overrides: ScenarioOverrides, fmt: Format, output: Path | None, rate: float | None
) -> tuple[Format, Scenario]:
    """What ``evaluate`` and ``simulate`` check first: the output (its format, :func:`prepare_output`), ``--rate``
    > 0, then the scenario file (or the bundled default) with the command line's overrides."""
    fmt = prepare_output(fmt, output)
    positive_rate(rate)
    return fmt, scenario_from_flags(scenario, overrides)
