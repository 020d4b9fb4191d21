"""A KV-cache hierarchy (GPU HBM → host DRAM → local SSD → remote pool): hits per tier, read traffic, load time.

**One curve, many tiers** (``docs/prefix_cache.md §3``). An LRU hierarchy answers hit/miss like one LRU whose
capacity is what the hierarchy holds in total, and serves a hit from the tier whose *capacity band* holds the
block's stack distance:

* *exclusive* (each block in one tier; a tier's LRU victims are demoted to the next tier, a hit is promoted to
  HBM): the tiers hold the top ``C_1 + … + C_n`` blocks of the LRU stack, tier i the band
  ``[C_1 + … + C_{i−1}, C_1 + … + C_i)``: **cumulative** capacities;
* *inclusive* (a lower tier keeps a copy of everything above it, written through on insert, and every access
  refreshes the block's recency in every tier that holds it): tier i holds the top ``C_i`` blocks, so it serves the
  band ``[C_{i−1}, C_i)``, and the hierarchy as a whole holds only the largest tier: **nested** capacities.

Both hold only when every tier is LRU over the *same* access order (a hit in HBM also refreshes the block below, an
eviction demotes in LRU order). They break when a tier uses another policy (FIFO or size-aware eviction in a storage
backend, write-back that persists only some blocks, a remote pool shared by many instances whose eviction order
mixes their streams, TTL expiry): then the band split is an approximation.

**Traffic and time.** At a request rate λ with mean prompt P̄ tokens and b KV bytes per token, tier i is read at
``λ · P̄ · h_i · b`` bytes/s (h_i its token hit ratio). Its read path (the tier's own read bandwidth, then the links
to the GPU: PCIe host-to-device, a storage NIC, the SSDs) is as fast as its slowest element; the utilisation of
each element is the traffic it carries over its bandwidth. A request's ``n`` hit tokens from tier i take
``latency + n·b / bottleneck``. A mechanism that loads layer by layer overlaps the load of layer ℓ + 1 with the
compute of layer ℓ: a two-stage pipeline of L layers exposes ``a + (L − 1)·max(a − c, 0)`` beyond the compute, with
``a = load / L`` and ``c = prefill_compute / L`` (the first layer's load is never hidden; the rest is hidden while the
compute is the slower stage), plus the latency. Without overlap the whole load is exposed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from pdplan.errors import SpecError
from pdplan.specs.storage import StorageSpec
from pdplan.types import ArrayLike, FloatArray

Inclusion = Literal["inclusive", "exclusive"]


class TokenHitCurve(Protocol):
    """Anything that gives the token hit ratio of one LRU at a capacity in tokens (the exact
    :class:`pdplan.cache.curve.HitRatioCurve`, or :class:`ClosedFormCurve`)."""

    def token_hit_ratio_at_tokens(self, capacity_tokens: ArrayLike) -> FloatArray: ...


@dataclass(frozen=True)
class ClosedFormCurve:
    """A closed form (e.g. ``lambda c: session_cache(w, c).token_hit_ratio``) as a :class:`TokenHitCurve`."""

    ratio_at_tokens: Callable[[float], float]

    def token_hit_ratio_at_tokens(self, capacity_tokens: ArrayLike) -> FloatArray:
        capacities = np.atleast_1d(np.asarray(capacity_tokens, dtype=np.float64))
        return np.array([float(self.ratio_at_tokens(float(c))) for c in capacities])


@dataclass(frozen=True)
class PathElement:
    """One element a tier's reads pass through, with the bandwidth available to this cache domain."""

    name: str
    read_bytes_per_s: float


@dataclass(frozen=True)
class CacheTier:
    """One level of the hierarchy, sized and timed for one cache domain (an instance, or the node it shares)."""

    name: str
    capacity_tokens: float
    path: tuple[PathElement, ...]
    """The tier's own read bandwidth and every link to the GPU; the slowest one bounds the load."""
    latency_s: float
    """Fixed time per request load (lookup, first-byte latency, I/O submission)."""
    layerwise_overlap: bool
    """Whether the mechanism that loads from this tier overlaps loading with the prefill, layer by layer."""

    def __post_init__(self) -> None:
        if self.capacity_tokens < 0 or self.latency_s < 0:
            raise SpecError(f"tier {self.name!r}: capacity and latency must be >= 0", field="tiers")
        if not self.path or min(e.read_bytes_per_s for e in self.path) <= 0:
            raise SpecError(f"tier {self.name!r}: needs a read path of bandwidths > 0", field="tiers")

    @property
    def bottleneck_bytes_per_s(self) -> float:
        return min(e.read_bytes_per_s for e in self.path)

    def load_time_s(self, tokens: ArrayLike, kv_bytes_per_token: float) -> FloatArray:
        """Time to read ``tokens`` hit tokens' KV from this tier to the GPU: latency + bytes / bottleneck (0 for
        no tokens)."""
        n = np.asarray(tokens, dtype=np.float64)
        return np.where(n > 0, self.latency_s + n * kv_bytes_per_token / self.bottleneck_bytes_per_s, 0.0)

    def exposed_load_s(
        self, tokens: ArrayLike, kv_bytes_per_token: float, prefill_compute_s: ArrayLike, n_layers: int
    ) -> FloatArray:
        """The part of the load the prefill cannot hide: with layer-wise overlap ``latency + a + (L − 1)·max(a − c,
        0)`` (a, c the per-layer load and compute), else the whole load."""
        load = self.load_time_s(tokens, kv_bytes_per_token)
        if not self.layerwise_overlap:
            return load
        n = np.asarray(tokens, dtype=np.float64)
        transfer = np.where(n > 0, load - self.latency_s, 0.0)
        per_layer = transfer / n_layers
        compute = np.asarray(prefill_compute_s, dtype=np.float64) / n_layers
        exposed = per_layer + (n_layers - 1) * np.maximum(per_layer - compute, 0.0)
        return np.where(n > 0, self.latency_s + exposed, 0.0)


@dataclass(frozen=True)
class TierLoad:
    """What one tier serves at a request rate."""

    name: str
    token_hit_ratio: float
    read_bytes_per_s: float
    utilisation: dict[str, float]
    """Traffic / bandwidth for every element of the tier's read path."""


@dataclass(frozen=True)
class TierHierarchy:
    """Tiers fastest first, and how they share content."""

    tiers: tuple[CacheTier, ...]
    inclusion: Inclusion

    def __post_init__(self) -> None:
        capacities = [t.capacity_tokens for t in self.tiers]
        if self.inclusion == "inclusive" and any(b < a for a, b in itertools.pairwise(capacities)):
            raise SpecError("an inclusive hierarchy needs each tier at least as large as the one above", field="tiers")

    @property
    def band_edges_tokens(self) -> FloatArray:
        """The capacity each tier's band ends at: cumulative (exclusive) or its own (inclusive)."""
        capacities = np.array([t.capacity_tokens for t in self.tiers], dtype=np.float64)
        return np.cumsum(capacities) if self.inclusion == "exclusive" else capacities

    def token_hit_ratios(self, curve: TokenHitCurve) -> FloatArray:
        """The token hit ratio each tier serves (they sum to the hierarchy's)."""
        return np.diff(curve.token_hit_ratio_at_tokens(self.band_edges_tokens), prepend=0.0)

    def loads(
        self,
        curve: TokenHitCurve,
        request_rate_per_s: float,
        mean_prompt_tokens: float,
        kv_bytes_per_token: float,
    ) -> list[TierLoad]:
        """Read traffic of every tier and the utilisation of every path element. Elements are identified by name:
        one that several tiers name (the PCIe host-to-device link that DRAM, SSD and remote reads all cross)
        carries the traffic of all of them."""
        ratios = self.token_hit_ratios(curve)
        traffic = request_rate_per_s * mean_prompt_tokens * kv_bytes_per_token * ratios
        carried: dict[str, float] = {}
        for tier, bytes_per_s in zip(self.tiers, traffic, strict=True):
            for element in tier.path:
                carried[element.name] = carried.get(element.name, 0.0) + float(bytes_per_s)
        return [
            TierLoad(
                name=tier.name,
                token_hit_ratio=float(ratio),
                read_bytes_per_s=float(bytes_per_s),
                utilisation={e.name: carried[e.name] / e.read_bytes_per_s for e in tier.path},
            )
            for tier, ratio, bytes_per_s in zip(self.tiers, ratios, traffic, strict=True)
        ]


def tier_from_storage(
    spec: StorageSpec,
    *,
    capacity_tokens: float,
    sharing: int,
    layerwise_overlap: bool,
    latency_s: float | None = None,
) -> CacheTier:
    """A catalogue storage tier as one cache domain's :class:`CacheTier`: the medium's per-node read bandwidth
    divided among the ``sharing`` domains (instances) of the node that read it, then the path into one GPU.
    ``latency_s`` replaces the file's latency (required when the file has none)."""
    if sharing < 1:
        raise SpecError(f"must be >= 1, got {sharing}", field="sharing")
    latency = spec.latency_s if latency_s is None else latency_s
    if latency is None:
        raise SpecError(f"storage tier {spec.name!r} records no latency; give latency_s", field="latency_s")
    path = (
        PathElement(f"{spec.name} read", spec.read_bytes_per_s / sharing),
        PathElement(spec.gpu_path, spec.gpu_path_bytes_per_s),
    )
    return CacheTier(spec.name, capacity_tokens, path, latency, layerwise_overlap)
