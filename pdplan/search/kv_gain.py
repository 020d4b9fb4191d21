"""What the searched KV block size and transfer backend gain (issue #24: "each mechanism's gain against the same plan
without it"; docs/kv_data_plane.md §6).

Where the optimiser searched ``search.kv_block_tokens`` / ``search.kv_backends``, the pick's choice is compared with
the scenario's own (its ``kv_backend`` / ``kv_block_tokens``, by default the engine's connector and block size) on
the same deployment: the same instance types and counts, link, granularity, routing and cache, evaluated exactly
(:func:`pdplan.search.exact.evaluate_exact`) with the default choice. The gain is the ratio of the two goodputs less
one; a default that cannot meet the SLO (or the target rate) on that deployment is said so, with no ratio.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pdplan.search.exact import Exact, evaluate_exact
from pdplan.search.space import Space
from pdplan.serving.deployment import Disaggregated, local_part
from pdplan.serving.resolve import ResolvedScenario


def default_choice_words(res: ResolvedScenario[Any]) -> str:
    """The scenario's own KV choice in words: ``"engine block 16"`` (vLLM's defaults)."""
    connector = res.engine.kv_connector
    backend = res.scenario.kv_backend or ("engine" if connector is not None else "none")
    block = res.scenario.kv_block_tokens or (connector.block_tokens if connector is not None else 1)
    return f"{backend.strip().lower()} block {block}"


def kv_gain_notes(res: ResolvedScenario[Any], space: Space, pick: Exact) -> tuple[str, ...]:
    """One line on the pick's KV choice against the scenario's default on the same plan (module docstring); none
    where the search tried no KV choice or the pick is not an xPyD plan."""
    d = local_part(pick.plan.deployment)
    if not space.kv_searched or not isinstance(d, Disaggregated) or d.kv_block_tokens is None:
        return ()
    chosen, default = f"{d.kv_backend} block {d.kv_block_tokens}", default_choice_words(res)
    if chosen == default:
        return (f"KV data plane: the pick runs the scenario's default ({default}), the best of those searched",)
    same = dataclasses.replace(d, kv_backend=None, kv_block_tokens=None)
    e = evaluate_exact(res, same, target_rps=space.rate_rps, headroom=space.headroom, redundancy=space.redundancy)
    if e is None:
        return (f"KV data plane: {chosen} chosen; at the default ({default}) the same plan does not meet the SLO",)
    gain = pick.plan.goodput_rps / e.plan.goodput_rps - 1.0
    return (
        f"KV data plane: {chosen} chosen, goodput {pick.plan.goodput_rps:.4g} req/s against "
        f"{e.plan.goodput_rps:.4g} at the default ({default}) on the same plan ({gain:+.1%})",
    )
