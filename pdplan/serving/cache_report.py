"""What a plan's prefix cache does, for the reports (a frozen record and its JSON document, docs/json_keys.md).

The hit rates are those at ``rate_rps`` (the plan's goodput, or the operating rate asked for); per tier its token hit
ratio, the bytes per second one instance reads from it and the utilisation of every element of its read path; and
what the cache buys: the same deployment's goodput without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pdplan.serving.dual_path_setup import DualPathReport
    from pdplan.serving.ppd_report import PpdReport
    from pdplan.serving.prefix_cache import CacheClasses, TierUse


@dataclass(frozen=True, slots=True)
class CacheReport:
    """The prefix cache of one plan (module docstring)."""

    routing: str
    rate_rps: float
    token_hit_ratio: float
    tiers: tuple[TierUse, ...]
    goodput_without_cache_rps: float | None = None
    """The same deployment with prefix caching off (None: not computed)."""
    lives_on: str = "prefill instances"
    """Where the cache is: ``prefill instances`` (xPyD: their HBM and their nodes' lower tiers) or ``colocated
    instances``; a remote pool tier is shared by the whole deployment either way."""
    dual_path: DualPathReport | None = None
    """DualPath's split, binding resource and gain (``cache: read_paths: dual``); None otherwise."""
    turn_placement: PpdReport | None = None
    """PPD's placement, Turn-1/Turn-2+ TTFT and gain (``cache: turn_placement`` other than ``pd``); None otherwise."""
    warmup_requests: int = 0
    """A trace's first requests, which warm the cache and are not counted in the hit ratios
    (:data:`pdplan.cache.trace.WARMUP_SHARE`); 0 for sessions and shared prefixes."""

    @classmethod
    def of(
        cls,
        classes: CacheClasses,
        goodput_without_cache_rps: float | None = None,
        *,
        mode: str,
        dual_path: DualPathReport | None = None,
        turn_placement: PpdReport | None = None,
    ) -> CacheReport:
        """The report of ``classes`` on a deployment of ``mode`` (``disaggregated`` or ``colocated``)."""
        where = "colocated instances" if mode == "colocated" else "prefill instances"
        return cls(
            classes.routing,
            classes.rate_rps,
            classes.token_hit_ratio,
            classes.tiers,
            goodput_without_cache_rps,
            where,
            dual_path,
            turn_placement,
            classes.warmup_requests,
        )

    @property
    def link_carries(self) -> str | None:
        """What crosses the P→D link (xPyD): the whole context's KV — a prefix hit saves prefill compute, not
        transfer (docs/prefix_cache.md §8); None on a colocated deployment."""
        if self.lives_on == "colocated instances":
            return None
        return "whole context KV" if self.turn_placement is None else "whole context KV of the turns prefilled there"

    def gain(self, goodput_rps: float) -> float | None:
        """Goodput with the cache over goodput without it (None when not computed or 0 without)."""
        base = self.goodput_without_cache_rps
        return None if base is None or base <= 0 else goodput_rps / base

    def to_document(self, goodput_rps: float) -> dict[str, Any]:
        doc = self._document(goodput_rps)
        if self.dual_path is not None:  # only with read_paths: dual (prefill-only documents are unchanged)
            doc["dual_path"] = self.dual_path.to_document(goodput_rps)
        if self.turn_placement is not None:  # only with a PPD policy (pd documents are unchanged)
            doc["turn_placement"] = self.turn_placement.to_document(goodput_rps)
        if self.warmup_requests:  # only for a trace (other documents are unchanged)
            doc["hits_counted_after_requests"] = self.warmup_requests
        return doc

    def _document(self, goodput_rps: float) -> dict[str, Any]:
        return {
            "lives_on": self.lives_on,
            "link_carries": self.link_carries,
            "routing": self.routing,
            "hit_rates_at_rps": self.rate_rps,
            "token_hit_ratio": self.token_hit_ratio,
            "tiers": [
                {
                    "name": t.name,
                    "capacity_tokens": t.capacity_tokens,
                    "token_hit_ratio": t.token_hit_ratio,
                    "read_bytes_per_s": t.read_bytes_per_s,
                    "path_utilisation": dict(t.path_utilisation),
                }
                for t in self.tiers
            ],
            "goodput_without_cache_rps": self.goodput_without_cache_rps,
            "gain_vs_no_cache": self.gain(goodput_rps),
        }
