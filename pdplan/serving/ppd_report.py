"""What a plan's PPD placement does, for the reports (``cache.turn_placement`` in the JSON, docs/json_keys.md).

At the rate the hit rates hold at (the plan's goodput at its fixed point): the share of all turns placed on decode and
of Turn 2+ turns whose history the decode instance held, the P→D bytes per second saved and the share of the KV
traffic that is, the decode step's stretch from the appends (every co-running sequence's TPOT) and the share of
steps carrying one, the KV the held histories take on a decode instance, Turn-1 and Turn-2+ TTFT P90 separately, and
the same plan's goodput with ``pd`` (plain disaggregation) for the gain.

**Turn 1 and Turn 2+.** The model's rows are (prompt bin, class). Turn 1's prompt law over the bins is the session
model's (:attr:`~pdplan.serving.ppd_pool.TurnPlacement.turn1_bins`); within a bin it is a miss when the sessions
share no system prompt, else it takes the bin's prefill-side class mix (an approximation: a Turn 1 hits only its
system prompt, which usually sits in HBM). Turn 2+ is every row less Turn 1's share. Each P90 is the quantile of the
row mixture under those weights (the rows' own TTFT laws, :class:`pdplan.queueing.ttft_mixture.TtftMixture`).

Stock engines do not run PPD (:data:`ENGINE_NOTE`): an export of such a plan says so in its header.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from pdplan.numerics.roots import brentq
from pdplan.serving.cache_mechanisms import placement_of
from pdplan.specs.cache import TurnPlacementSpec
from pdplan.types import FloatArray

if TYPE_CHECKING:
    from pdplan.serving.ppd_pool import TurnPlacement

ENGINE_NOTE = (
    "PPD turn placement (cache.turn_placement) is not run by this export: neither vLLM nor SGLang (nor the Dynamo "
    "or SGLang routers) has a flag or router policy that sends a session's Turn 2+ to the decode instance holding its "
    "history; the PPD authors run stock vLLM decode instances (prefix caching, P2pNcclConnector) behind their own "
    "proxy (freelulul/vllm-ppd, ppd/comprehensive_proxy.py, --enable-ppd). Deployed as written, the plan runs as "
    "plain disaggregation (pd)"
)
"""The note every export of a plan with a policy other than ``pd`` carries (docs/prefix_cache.md §11)."""


@dataclass(frozen=True, slots=True)
class PpdReport:
    """One plan's PPD placement (module docstring)."""

    policy: str
    decode_routing: str
    rate_rps: float
    share_on_decode: float
    held_turn2: float
    """Of Turn 2+ turns, the share whose history the decode instance still held."""
    bytes_saved_per_s: float
    transfer_reduction: float
    tpot_factor: float
    steps_with_append: float
    held_history_tokens: float
    """KV tokens the histories take on one decode domain (its free KV, filled under LRU)."""
    ttft_turn1_p90_s: float
    ttft_turn2_p90_s: float
    goodput_pd_rps: float | None = None

    def gain(self, goodput_rps: float) -> float | None:
        """Goodput with this policy over the same plan with ``pd`` (None when not computed or 0 with pd)."""
        base = self.goodput_pd_rps
        return None if base is None or base <= 0 else goodput_rps / base

    def words(self, goodput_rps: float) -> str:
        """The placement in one line for the terminal and Markdown reports."""
        gain = self.gain(goodput_rps)
        return (
            f"{self.policy} ({self.decode_routing} decode routing): {self.share_on_decode:.0%} of turns appended on "
            f"decode ({self.held_turn2:.0%} of Turn 2+ histories held), P→D bytes -{self.transfer_reduction:.0%} "
            f"({self.bytes_saved_per_s / 1e9:.3g} GB/s saved), TPOT x{self.tpot_factor:.3f} from the appends "
            f"({self.steps_with_append:.0%} of steps carry one), TTFT P90 Turn 1 {self.ttft_turn1_p90_s * 1e3:.4g} ms, "
            f"Turn 2+ {self.ttft_turn2_p90_s * 1e3:.4g} ms"
            + ("" if gain is None else f", {gain:.3g}x the same plan with pd")
        )

    def to_document(self, goodput_rps: float) -> dict[str, Any]:
        doc = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        doc["gain_vs_pd"] = self.gain(goodput_rps)
        return doc


def without_ppd(res: Any) -> Any:
    """``res`` with ``cache.turn_placement`` back to ``pd`` (the plan the gain is measured against)."""
    setup = res.cache
    spec = setup.spec.model_copy(update={"turn_placement": TurnPlacementSpec()})
    return dataclasses.replace(res, cache=dataclasses.replace(setup, spec=spec))


def ppd_report(res: Any, model: Any, goodput_of: Callable[[Any], float] | None = None) -> PpdReport | None:
    """The plan's :class:`PpdReport` (None without PPD); ``goodput_of`` prices the same plan with ``pd``."""
    placement = placement_of(model)
    if placement is None:
        return None
    rate = min(placement.rate_rps, 0.999 * model.limit().rate_rps)
    turn1, turn2 = turn_weights(model, placement)
    inner = model.snapshot(np.array([rate])).ttft.inner
    later = placement.turn_share[1:]
    held2 = float(later @ placement.held[1:]) / float(later.sum()) if later.sum() > 0 else 0.0
    return PpdReport(
        policy=placement.policy,
        decode_routing="session-affine" if placement.affine else f"load-balanced (1/{placement.domains})",
        rate_rps=rate,
        share_on_decode=placement.share_on_decode,
        held_turn2=held2,
        bytes_saved_per_s=placement.bytes_saved_per_request * rate,
        transfer_reduction=placement.transfer_reduction,
        tpot_factor=placement.tpot_factor,
        steps_with_append=placement.steps_with_append,
        held_history_tokens=placement.free_tokens,
        ttft_turn1_p90_s=weighted_quantile(inner.cdf_per_bin, turn1, 0.9),
        ttft_turn2_p90_s=weighted_quantile(inner.cdf_per_bin, turn2, 0.9),
        goodput_pd_rps=None if goodput_of is None else goodput_of(without_ppd(res)),
    )


def turn_weights(model: Any, placement: TurnPlacement) -> tuple[FloatArray, FloatArray]:
    """Row weights ``[K·(H+1)]`` of Turn 1 and of Turn 2+ (module docstring), each summing to 1."""
    k = model.res.lengths.input_tokens.size
    rows = np.asarray(model.bin_prob, dtype=np.float64).reshape(k, -1)
    prefill_side = rows.copy()
    prefill_side[:, -1] = 0.0
    if model.res.cache.reuse.sessions.system_prompt_tokens <= 0:
        prefill_side[:, 1:] = 0.0
    mix = prefill_side / np.maximum(prefill_side.sum(axis=1, keepdims=True), 1e-300)
    first = placement.turn1_bins[:, None] * mix
    first /= max(float(first.sum()), 1e-300)
    later = np.clip(rows - float(placement.turn_share[0]) * first, 0.0, None)
    later /= max(float(later.sum()), 1e-300)
    return first.ravel(), later.ravel()


def weighted_quantile(cdf_per_row: Callable[[float], FloatArray], weights: FloatArray, q: float) -> float:
    """The q-quantile of the mixture of rows (one rate) under ``weights`` (brentq on the mixture cdf)."""

    def excess(a: float) -> float:
        return float(cdf_per_row(a)[0] @ weights) - q

    hi = 1e-3
    while excess(hi) < 0:
        hi *= 2.0
        if hi > 1e6:
            return math.inf
    return float(brentq(excess, 0.0, hi, xtol=1e-6, rtol=1e-6))
