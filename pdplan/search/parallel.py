"""Which (TP, DP, EP) shapes the optimiser tries per role (issue #13: EP/DP per role for MoE models).

Dense models keep TP (× PP) only: DP would just be independent replicas, which the instance count already covers,
and EP needs experts. For an MoE model the default ladder per attention TP degree ``t`` is

* ``(t, 1, 1)``: plain tensor parallelism (every expert split ``t`` ways);
* ``(t, 1, t)``: TP attention with the experts spread whole over the same ``t`` GPUs (vLLM
  ``--enable-expert-parallel``);
* ``(t, d, t·d)`` for ``d`` in :data:`DEFAULT_DP`: attention data parallelism with wide EP over all ``t·d`` GPUs
  (SGLang ``--enable-dp-attention --enable-deepep-moe``, vLLM data-parallel + EP), across nodes once ``t·d`` exceeds a
  node (e.g. DP72/EP72 on nine 8-GPU nodes, the LMSYS decode run).

``ep``/``dp`` lists from the scenario's ``search:`` block or the CLI (``--ep``, ``--prefill-dp``...) replace the
ladder's values (a DP list alone pairs each ``d > 1`` with EP ``t·d``, ``d = 1`` with EP 1 and ``t``): every
``(t, d, e)`` of the lists with ``e`` dividing ``t·d`` and the expert slots is tried. Shapes
over the GPU budget are dropped. Prefill shapes with EP also get a ZeRO-Prefill variant (expert weights all-gathered
instead of the all-to-all, :mod:`pdplan.perf.expert_parallel`): both are priced, the search keeps the better.
"""

from __future__ import annotations

from pdplan.perf.expert_parallel import parallelism_error
from pdplan.specs.model import ModelSpec

DEFAULT_DP = (8, 16, 32, 64)
"""Attention DP ranks tried for MoE models: one node to eight nodes of 8 GPUs (wide-EP deployments: 4 nodes EP32
prefill and 9 nodes EP72 decode in the LMSYS run, Dynamo's wide-EP recipes at 16-64 GPUs)."""

Shape = tuple[int, int, int]
"""(tp, dp, ep)."""


def parallel_shapes(
    model: ModelSpec,
    tps: tuple[int, ...],
    dps: list[int] | None,
    eps: list[int] | None,
    *,
    redundant_experts: int = 0,
    budget_gpus: int | None = None,
    allow_dp: bool = True,
    weight_bytes: float | None = None,
) -> list[Shape]:
    """The (tp, dp, ep) shapes to try for one role (module docstring), in a stable order; with ``weight_bytes``,
    only those an FP8 block-scaled checkpoint loads in (:func:`pdplan.perf.block_quant.block_split_error`)."""
    if model.moe is None and not dps and not eps:
        return [(t, 1, 1) for t in tps]  # dense: no expert blocks to split
    if dps is None and eps is None:
        shapes = [(t, 1, 1) for t in tps] + [(t, 1, t) for t in tps if t > 1]
        if allow_dp:
            shapes += [(t, d, t * d) for t in tps for d in DEFAULT_DP]
    else:
        shapes = [(t, d, e) for t in tps for d in (dps or [1]) for e in (eps or _default_eps(t, d, model))]
    out = []
    for t, d, e in dict.fromkeys(shapes):
        if d > 1 and not allow_dp:
            continue
        if budget_gpus is not None and t * d > budget_gpus:
            continue
        if (t * d) % e or parallelism_error(model, t, d, e, redundant_experts, weight_bytes) is not None:
            continue
        out.append((t, d, e))
    return out


def _default_eps(t: int, d: int, model: ModelSpec) -> list[int]:
    """EP sizes to pair with a listed DP degree when no EP list is given (module docstring)."""
    if model.moe is None:
        return [1]
    return [1, t] if d == 1 else [t * d]
