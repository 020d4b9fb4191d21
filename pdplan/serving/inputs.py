"""Resolve a :class:`~pdplan.specs.scenario.Scenario` into specs, kernel tables and length bins.

Catalogue names become :class:`GpuSpec` / :class:`LinkSpec` / :class:`ModelSpec`; each GPU gets its
kernel table (packaged, or the user's via ``--kernel-table``: :meth:`Catalog.kernel_table`); the workload is binned into
a joint (input, output) histogram with at most ``WORKLOAD_BINS`` bins per axis (the 3 tail bins of
:func:`pdplan.serving.workload_bins.discretize` keep P99+ prompts separate) and clipped to the model's context
window, with a warning naming the fraction of requests affected (ARCHITECTURE §2). The one-token
output mass gets its own output bin and each input bin a set of quadrature lengths
(:mod:`pdplan.serving.lengths`).
"""

from __future__ import annotations

from dataclasses import dataclass

from pdplan.errors import SpecError
from pdplan.io.catalog import Catalog
from pdplan.io.serving_defaults import serving_defaults
from pdplan.perf.roofline import Precision
from pdplan.queueing.distributions import FloatArray
from pdplan.serving.lengths import input_quadrature, one_token_fraction, split_one_token
from pdplan.serving.roles import RoleHardware
from pdplan.serving.workload_bins import JointLengths, discretize
from pdplan.specs.hardware import LinkSpec
from pdplan.specs.model import ModelSpec
from pdplan.specs.scenario import RoleSpec, Scenario

WORKLOAD_BINS = 24
"""Bins per length axis: 21 equal-probability body bins + 3 tail bins (speed vs. resolution)."""

DTYPE_BYTES = {"bf16": 2.0, "fp8": 1.0}


@dataclass(frozen=True, slots=True)
class ResolvedScenario:
    """Everything the serving models need, looked up once."""

    scenario: Scenario
    model: ModelSpec
    lengths: JointLengths
    prefill: RoleHardware | None
    decode: RoleHardware | None
    colocated: RoleHardware | None
    link: LinkSpec | None
    max_num_seqs: int
    chunk_tokens: int
    warnings: tuple[str, ...]
    input_points: FloatArray
    """``[K, J]`` quadrature lengths per input bin (:func:`pdplan.serving.lengths.input_quadrature`)."""
    prefill_batch_tokens: int | None = None
    """Token budget of a batched prefill instance (None: one prompt at a time)."""


def precision_of(scenario: Scenario) -> Precision:
    """Bytes per weight / activation / KV element from ``dtype`` and ``kv_dtype``."""
    return Precision(weight_bytes=DTYPE_BYTES[scenario.dtype], act_bytes=2.0, kv_bytes=DTYPE_BYTES[scenario.kv_dtype])


def _role(catalog: Catalog, model: ModelSpec, spec: RoleSpec | None, scenario: Scenario) -> RoleHardware | None:
    if spec is None:
        return None
    gpu = catalog.gpu(spec.gpu)
    if model.num_attention_heads % spec.tp:
        raise SpecError(
            f"TP {spec.tp} does not divide {model.name}'s {model.num_attention_heads} attention heads "
            "(tensor parallelism shards heads evenly)",
            field="tp",
        )
    if spec.tp > gpu.gpus_per_node:
        raise SpecError(
            f"TP {spec.tp} exceeds the {gpu.gpus_per_node} GPUs of one {gpu.name} node (tensor "
            "parallelism stays inside a node; use PP across nodes)",
            field="tp",
        )
    return RoleHardware(
        model,
        gpu,
        catalog.kernel_table(gpu.name),
        spec.tp,
        spec.pp,
        precision_of(scenario),
        scenario.gpu_memory_utilization,
    )


def resolve(scenario: Scenario, catalog: Catalog) -> ResolvedScenario:
    """Look up every name and bin the workload (warnings collected, not printed)."""
    model = catalog.model(scenario.model)
    window = model.max_position_embeddings
    lengths = discretize(scenario.workload, max_bins=WORKLOAD_BINS, context_window=window)
    lengths = split_one_token(lengths, one_token_fraction(scenario.workload))
    warnings = []
    if lengths.clipped_fraction > 0.0:
        warnings.append(
            f"{lengths.clipped_fraction:.2%} of requests exceed {model.name}'s context window of "
            f"{window} tokens and are clipped to it"
        )
    defaults = serving_defaults()
    colocated = scenario.colocated
    chunk = scenario.chunk_tokens or (colocated.chunk_tokens if colocated else None)
    link = catalog.link(scenario.link) if scenario.mode == "disaggregated" else None
    return ResolvedScenario(
        scenario=scenario,
        model=model,
        lengths=lengths,
        prefill=_role(catalog, model, scenario.prefill, scenario),
        decode=_role(catalog, model, scenario.decode, scenario),
        colocated=_role(catalog, model, colocated, scenario),
        link=link,
        max_num_seqs=scenario.max_num_seqs or defaults.max_num_seqs,
        chunk_tokens=chunk or defaults.prefill_chunk_tokens,
        warnings=tuple(warnings),
        input_points=input_quadrature(lengths.input_tokens, lengths.input_marginal()),
        prefill_batch_tokens=scenario.prefill_max_batch_tokens,
    )
