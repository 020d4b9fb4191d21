"""What AIConfigurator's ``balanced`` MoE rows measure for models with group-limited routing (DeepSeek-V3/R1).

AIConfigurator's vLLM MoE collector (ai-dynamo/aiconfigurator ``collector/vllm/collect_moe.py``,
``_resolve_moe_runtime_config`` and the benchmark loop) builds vLLM's ``FusedMoE`` module with the model's own
routing: for ``model_type`` ``deepseek_v3`` ``use_grouped_topk=True``, ``num_expert_group = n_group = 8``,
``topk_group = 4``, sigmoid scoring and a zero ``e_score_correction_bias`` (``noaux_tc``), and times
``moe_module(hidden_states, router_logits)``: the module routes the synthetic logits itself, before any experts
kernel (Triton, CUTLASS or TRT-LLM alike). The logits are ``balanced_logits`` (``collector/helper.py``): token i
gets a one-hot score on experts (r_i + j·s) mod E, j = 0..k−1, with stride s = ⌈E/k⌉ and r_i = i for T >= s, else
⌊i·s/T⌋; softmax of the one-hot map, so k hot experts tie at one value and the others at a lower one.

With E = 256, k = 8 and 32-expert groups, s = 32: token i has exactly one hot expert in every group
(32·g + r_i mod 32), so all eight group scores (sum of the two best experts of the group) tie. Group-limited
routing then keeps ``topk_group`` tied groups and fills top-k with tied cold experts. Ties to the lowest index
(groups 0-3, cold experts 0-3, or 1-4 when r_i = 0) reproduce the times of B200's TRT-LLM kernels, which route
inside the kernel (``...monolithic``): rank 0 serves 8, 8, 6, 5, 4.5, 4.25, 4, 2, 1 pairs per token at EP 1, 2,
4, 8, 16, 32, 64, 128, 256, where the labelled routing gives 8/EP, and below 32 tokens at EP 1 the experts read,
estimated from the times as (t − t₁)/(t₃₂ − t₁)·120 + 8, are 12, 20, 34.5, 64.6 at T = 2, 4, 8, 16 against 12, 20,
35, 66 enumerated. On Hopper, where vLLM's router selects before the Triton kernel, the same estimate gives 13-14,
27-28, 55-58, 66 (H100, H200): the group choice is the same (128 experts from T = 32 on, flat to T = 128,
where Kimi K2's 384 ungrouped experts keep growing) but the cold fills of 4-8-token calls follow another tie
order, not derived here (:func:`fitting.fit_moe.rerouted` leaves those rows out). The tie rule of the
routing kernels is inferred from the times, not read from their source. So only the 128 experts of groups 0-3
are ever selected: at EP 1 every pair stays on the GPU (8·T pairs, as labelled) but only 128 distinct experts
are read, and weight-bound rows (decode-sized T) take about half the time 256 experts would.

:func:`grouped_balanced_routing` enumerates the T tokens' selections exactly (the generator is deterministic)
and returns rank 0's pairs and hit experts (rank 0 holds experts 0..E/ep − 1, the GPU the collector measures).
The ``power_law`` rows of such shapes are not priced: their per-token selections are random draws whose group
ties and cold fills depend on each draw, so no expected count is derived here; the fit leaves them out.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from pdplan.perf.moe_routing import Routing
from pdplan.types import ArrayLike

GROUPED_ROUTING: dict[tuple[float, float, float, float], tuple[int, int]] = {
    (7168.0, 2048.0, 8.0, 256.0): (8, 4),
}
"""(hidden, inter, top-k, experts) -> (n_group, topk_group) of the models whose MoE routes group-limited in the
collector: DeepSeek-V3/R1/V3.1/V3.2 (``n_group`` 8, ``topk_group`` 4 in their config.json; AIConfigurator's
packaged configs show no other MoE with more than one expert group)."""


def _balanced_hot(tokens: int, experts: int, top_k: int) -> np.ndarray:
    """[T, k] hot experts of AIConfigurator's ``balanced_logits`` (float index truncated, as ``.long()`` does)."""
    stride = -(-experts // top_k)
    i = np.arange(tokens, dtype=np.float64)[:, None]
    j = np.arange(top_k, dtype=np.float64)[None, :]
    base = i if tokens >= stride else i * stride / tokens
    return np.floor(np.mod(base + j * stride, experts)).astype(np.int64)


@lru_cache(maxsize=4096)
def _selection_counts(tokens: int, experts: int, top_k: int, n_group: int, topk_group: int) -> np.ndarray:
    """Pairs per expert after group-limited top-k of the balanced logits, ties to the lowest index."""
    hot = _balanced_hot(tokens, experts, top_k)
    score = np.zeros((tokens, experts))
    np.put_along_axis(score, hot, 1.0, axis=1)
    size = experts // n_group
    grouped = score.reshape(tokens, n_group, size)
    group_score = np.sort(grouped, axis=2)[:, :, -2:].sum(axis=2)
    # stable sort on the negated score keeps the lower index first among ties
    keep = np.argsort(-group_score, axis=1, kind="stable")[:, :topk_group]
    allowed = np.zeros((tokens, n_group), dtype=bool)
    np.put_along_axis(allowed, keep, True, axis=1)
    masked = np.where(np.repeat(allowed, size, axis=1), score, -1.0)
    chosen = np.argsort(-masked, axis=1, kind="stable")[:, :top_k]
    return np.bincount(chosen.ravel(), minlength=experts).astype(np.float64)


def grouped_balanced_routing(
    tokens: ArrayLike, experts: int, top_k: int, ep: ArrayLike, n_group: int, topk_group: int
) -> Routing:
    """Rank 0's token-expert pairs and hit experts for ``balanced`` logits under group-limited routing.

    Example (E 256, k 8, 8 groups, top-4 groups): T = 64 at EP 1 hits the 128 experts of groups 0-3 with
    512 pairs; at EP 8 rank 0 (experts 0-31) serves 5 pairs per token (320) on 32 hit experts.
    """
    t_arr, ep_arr = np.broadcast_arrays(np.asarray(tokens, dtype=np.float64), np.asarray(ep, dtype=np.float64))
    pairs, hit = np.zeros(t_arr.shape), np.zeros(t_arr.shape)
    for idx in np.ndindex(t_arr.shape):
        t = int(t_arr[idx])
        if t <= 0:
            continue
        counts = _selection_counts(t, experts, top_k, n_group, topk_group)[: int(experts // ep_arr[idx])]
        pairs[idx], hit[idx] = counts.sum(), np.count_nonzero(counts)
    return Routing(pairs, hit)
