"""What the turn placement of a multi-turn run did (PPD, :mod:`pdplan.sim.turn_placement`), over its counted turns:
the block ``turn_placement`` of :meth:`pdplan.sim.reuse.ReuseResult.as_dict` and of ``pdplan simulate``'s ``cache``.

For a sessions workload on an xPyD deployment, every policy ``pd`` included (today's deployment, the baseline):

* TTFT of Turn 1 and of Turns 2+ apart (P50, P90; the engine's host time included as in every TTFT of
  ``pdplan simulate``: on decode, the decode engine's), and TPOT (P50, P90) over all counted turns;
* ``share_on_decode``: the share of the counted turns (Turn 1 included, which never runs there) whose prefill ran
  on their decode instance;
* ``decode_hit_ratio``: the share of the counted Turns 2+ whose decode instance held their history when they
  arrived (placed there or not); ``decode_token_hit_ratio``: the history tokens those on decode found in their
  instance's cache, over every counted turn's prompt tokens (the prefill side's share is the tiers'
  ``token_hit_ratio``, over the same prompt tokens); all three null under ``pd``, which keeps nothing on decode;
* ``pd_kv_bytes``: the KV that crossed the P→D link for the counted turns (each turn on the prefill pool sends its
  whole prompt's KV, as :mod:`pdplan.sim.deployment` transfers it), ``pd_kv_bytes_per_s`` over the run's
  measurement window, ``pd_kv_bytes_all_pd`` what the same turns send when every one goes through the prefill pool,
  and ``transfer_reduction`` = 1 − moved / all-PD.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.request_overhead import request_delay_s
from pdplan.sim.metrics import SimResult
from pdplan.types import FloatArray, Int64Array

if TYPE_CHECKING:
    from pdplan.sim.turn_placement import TurnPlacer


@dataclass(frozen=True, slots=True)
class TurnStats:
    """The counted turns of one run (module docstring); a percentile of no turns is None."""

    policy: str
    turns: int
    later_turns: int
    ttft_turn1_p50_s: float | None
    ttft_turn1_p90_s: float | None
    ttft_turn2_p50_s: float | None
    ttft_turn2_p90_s: float | None
    tpot_p50_s: float | None
    tpot_p90_s: float | None
    share_on_decode: float | None
    decode_hit_ratio: float | None
    decode_token_hit_ratio: float | None
    pd_kv_bytes: float
    pd_kv_bytes_per_s: float | None
    pd_kv_bytes_all_pd: float
    transfer_reduction: float | None

    def as_dict(self) -> dict[str, Any]:
        """The JSON view (module docstring)."""
        return dataclasses.asdict(self)


def _p50_p90(values: FloatArray) -> tuple[float | None, float | None]:
    v = values[~np.isnan(values)]
    if v.size == 0:
        return None, None
    p50, p90 = np.percentile(v, [50.0, 90.0])
    return float(p50), float(p90)


def turn_stats(
    run: SimResult,
    ttft_s: FloatArray,
    turn: Int64Array,
    placed: tuple[FloatArray, FloatArray, Int64Array] | None,
    kv_bytes_per_token: float,
    policy: str,
) -> TurnStats:
    """The statistics of the counted turns (arrays in the run's order); ``placed``: per turn whether it ran on decode,
    whether its decode instance held its history, the history tokens it found there (None: policy ``pd``)."""
    warm = run.warmup_count
    ttft, turns, tpot = ttft_s[warm:], turn[warm:], run.tpot_s[warm:]
    later = turns >= 2
    prompt = run.input_tokens[warm:].astype(np.float64)
    first50, first90 = _p50_p90(ttft[~later])
    later50, later90 = _p50_p90(ttft[later])
    tpot50, tpot90 = _p50_p90(tpot)
    all_pd = float(prompt.sum()) * kv_bytes_per_token
    share = hit = token_hit = None
    moved = all_pd
    if placed is not None:
        on_decode, held, hit_tokens = (a[warm:] for a in placed)
        moved = float(prompt[on_decode == 0].sum()) * kv_bytes_per_token
        share = float(np.mean(on_decode)) if on_decode.size else None
        hit = float(np.mean(held[later])) if later.any() else None
        token_hit = float(hit_tokens.sum()) / float(prompt.sum()) if prompt.sum() > 0 else None
    span = run.window_s[1] - run.window_s[0]
    return TurnStats(
        policy=policy, turns=int(turns.size), later_turns=int(later.sum()),
        ttft_turn1_p50_s=first50, ttft_turn1_p90_s=first90, ttft_turn2_p50_s=later50, ttft_turn2_p90_s=later90,
        tpot_p50_s=tpot50, tpot_p90_s=tpot90, share_on_decode=share, decode_hit_ratio=hit,
        decode_token_hit_ratio=token_hit, pd_kv_bytes=moved, pd_kv_bytes_per_s=moved / span if span > 0 else None,
        pd_kv_bytes_all_pd=all_pd, transfer_reduction=1.0 - moved / all_pd if all_pd > 0 else None,
    )  # fmt: skip


def placed_turns(
    run: SimResult,
    ttft_extra_s: FloatArray,
    turn: Int64Array,
    model: DisaggregatedModel,
    placer: TurnPlacer | None,
    order: Int64Array,
    kv_bytes_per_token: float,
    policy: str,
) -> tuple[FloatArray, TurnStats]:
    """The TTFT extras of a sessions run on xPyD (arrays in the run's order) and its :class:`TurnStats`: a turn that
    ran on decode takes the decode engine's host time as its TTFT's extra instead of the prefill side's."""
    extra = np.array(ttft_extra_s, dtype=np.float64)
    placed = None
    if placer is not None:
        on_decode = placer.on_decode[order]
        extra[on_decode] = request_delay_s(model.res.hardware.decode, model.res.lengths.mean_input())
        hits = np.asarray(placer.work.hit_tokens, dtype=np.int64)[order]
        placed = (on_decode.astype(np.float64), placer.held[order].astype(np.float64), hits)
    ttft = np.asarray(run.ttft_s + extra, dtype=np.float64)
    return extra, turn_stats(run, ttft, turn, placed, kv_bytes_per_token, policy)
