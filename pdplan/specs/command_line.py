"""The command line's overrides of a scenario (docs/architecture.md §4) and the flag that names each field.

One frozen model, :class:`ScenarioOverrides`, carries what ``evaluate``, ``simulate`` and ``optimize`` take on top of a
scenario file; ``None`` keeps the scenario's value. Prefill and decode values stay apart (``prefill_gpu``,
``decode_tp``...); the role-less ``gpu``/``tp`` apply to a role that has no value of its own. Two readers:

* :func:`pdplan.io.overrides.apply_overrides` sets the scenario's deployment, workload, SLO and dtypes
  (``evaluate``, ``simulate``; ``optimize`` for the non-deployment fields);
* :func:`pdplan.io.overrides.with_search_overrides` narrows ``optimize``'s search (comma-separated lists).

:data:`FLAGS` is the one place below the CLI where flag words live: library code names the flag of a bad value with
:func:`flag` (``SpecError(..., field=flag("isl"))``), and :mod:`pdplan.cli.options` declares each option with it.
"""

from types import MappingProxyType

from pdplan.specs.base import FrozenModel


class ScenarioOverrides(FrozenModel):
    """Values from the command line that replace a scenario's own; ``None`` keeps the scenario's.

    Strings stay as typed (``xpyd="2P1D"``, ``ttft_slo="400ms"``, ``gpu="h100-sxm,l40s"`` for a search): they are
    parsed and validated where they are applied, so an error names the scenario field or the flag it came from.
    """

    model: str | None = None
    gpu: str | None = None
    prefill_gpu: str | None = None
    decode_gpu: str | None = None
    tp: int | None = None
    prefill_tp: int | None = None
    decode_tp: int | None = None
    xpyd: str | None = None
    colocated: int | None = None
    scheduler: str | None = None
    link: str | None = None
    granularity: str | None = None
    routing: str | None = None
    isl: int | None = None
    osl: int | None = None
    workload: str | None = None
    ttft_slo: str | None = None
    tpot_slo: str | None = None
    attainment: float | None = None
    dtype: str | None = None
    kv_dtype: str | None = None
    max_instances: int | None = None
    pp: int | None = None
    percentile: float | None = None
    prfaas_gpu: str | None = None
    prfaas_tp: int | None = None
    prfaas_instances: int | None = None
    prfaas_link: str | None = None
    prfaas_rtt: str | None = None
    prfaas_threshold: int | None = None
    engine: str | None = None
    ep: str | None = None
    prefill_ep: str | None = None
    decode_ep: str | None = None
    dp: str | None = None
    prefill_dp: str | None = None
    decode_dp: str | None = None
    max_num_seqs: str | None = None
    max_num_batched_tokens: int | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None

    def without(self, fields: tuple[str, ...]) -> "ScenarioOverrides":
        """A copy with ``fields`` reset to ``None`` (kept from the scenario)."""
        return self.model_copy(update=dict.fromkeys(fields))


DEPLOYMENT_FIELDS = (
    "gpu",
    "prefill_gpu",
    "decode_gpu",
    "tp",
    "prefill_tp",
    "decode_tp",
    "xpyd",
    "colocated",
    "scheduler",
    "link",
    "granularity",
    "routing",
    "max_instances",
    "pp",
    "ep",
    "prefill_ep",
    "decode_ep",
    "dp",
    "prefill_dp",
    "decode_dp",
    "max_num_seqs",
)
"""Fields that choose the deployment: ``evaluate`` sets them, ``optimize`` narrows its search with them."""

PRFAAS_FIELDS = (
    "prfaas_gpu",
    "prfaas_tp",
    "prfaas_instances",
    "prfaas_link",
    "prfaas_rtt",
    "prfaas_threshold",
)
"""Fields that set the scenario's ``prfaas:`` block (:mod:`pdplan.specs.prfaas`); ``evaluate`` and ``optimize`` both
apply them (``optimize`` searches the threshold unless ``--prfaas-threshold`` pins it)."""

FLAGS = MappingProxyType(
    {
        "model": "--model",
        "gpu": "--gpu",
        "prefill_gpu": "--prefill-gpu",
        "decode_gpu": "--decode-gpu",
        "tp": "--tp",
        "prefill_tp": "--prefill-tp",
        "decode_tp": "--decode-tp",
        "xpyd": "--xpyd",
        "colocated": "--colocated",
        "scheduler": "--scheduler",
        "link": "--link",
        "granularity": "--granularity",
        "routing": "--routing",
        "isl": "--isl",
        "osl": "--osl",
        "workload": "--workload",
        "ttft_slo": "--ttft-slo",
        "tpot_slo": "--tpot-slo",
        "attainment": "--attainment",
        "dtype": "--dtype",
        "kv_dtype": "--kv-dtype",
        "gpus": "--gpus",  # optimize's GPU budget (search.gpus, optimize(budget_gpus=...))
        "rate": "--rate",
        "concurrency": "--concurrency",
        "plot": "--plot",
        "objective": "--objective",  # optimize's plot file (pdplan.report.write_plot)
        "growth": "--growth",  # optimize: re-plan at +P % traffic (pdplan.search.growth)
        "max_instances": "--max-instances",  # optimize: search.max_instances
        "pp": "--pp",
        "percentile": "--percentile",  # slo.percentile
        "headroom": "--headroom",  # optimize: search.headroom
        "redundancy": "--redundancy",  # optimize: search.redundancy
        "prices": "--price",  # optimize: search.prices (GPU=USD_PER_HOUR, repeatable)
        "budget_usd_per_hour": "--budget-usd-per-hour",  # optimize: search.budget_usd_per_hour
        "prfaas_gpu": "--prfaas-gpu",
        "prfaas_tp": "--prfaas-tp",
        "prfaas_instances": "--prfaas-instances",
        "prfaas_link": "--prfaas-link",
        "prfaas_rtt": "--prfaas-rtt",
        "prfaas_threshold": "--prfaas-threshold",
        "engine": "--engine",
        "requests": "--requests",
        "warmup": "--warmup",
        "ep": "--ep",
        "prefill_ep": "--prefill-ep",
        "decode_ep": "--decode-ep",
        "dp": "--dp",
        "prefill_dp": "--prefill-dp",
        "decode_dp": "--decode-dp",
        # engine settings, named as vLLM names them (``vllm serve --help``); scenario keys max_num_seqs, chunk_tokens
        # and prefill_max_batch_tokens, max_model_len, gpu_memory_utilization
        "max_num_seqs": "--max-num-seqs",
        "max_num_batched_tokens": "--max-num-batched-tokens",
        "max_model_len": "--max-model-len",
        "gpu_memory_utilization": "--gpu-memory-utilization",
    }
)
"""Field (or library parameter) → the command-line flag that sets it: ``FLAGS["kv_dtype"] == "--kv-dtype"``."""


def flag(field: str) -> str:
    """The flag that sets ``field``, for error messages: ``flag("isl")`` → ``"--isl"``."""
    return FLAGS[field]
