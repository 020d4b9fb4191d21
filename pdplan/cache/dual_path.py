"""DualPath storage read paths (arXiv 2602.21548, §4.1–4.2): the traffic on every resource as a function of the
share of hit KV read over the decode engines, the split that minimises the busiest resource, the bottleneck-free
P/D range, and a workload's cache-compute ratio (docs/prefix_cache.md §10).

**Notation (the paper's §4.2).** P prefill (PE) and D decode (DE) nodes, g GPUs per node, one compute NIC (CNIC)
of bandwidth B per GPU, a storage NIC (SNIC) of ``s·B`` per node, host DRAM of bandwidth M per node. Here
``S = s·B`` (``snic_bytes_per_s``), ``p`` the PCIe host-to-device bandwidth of one GPU, R the hit-KV bytes per
second the prefills read from the storage tier (the whole deployment), and f the share of R read over the DE path.

**The two paths** (§4.1). *PE path*: storage → PE DRAM (PE SNIC) → PE HBM, layer by layer; after the prefill the PE
sends the hit and miss KV to the DE buffer. *DE path*: storage → DE DRAM (DE SNIC) → PE HBM over CNIC RDMA, layer
by layer; only the miss KV goes back to the DE buffer. Either way the decode then loads the whole context from the
DE buffer into DE HBM. Every host↔device copy goes through the GPU's own CNIC (GPUDirect RDMA loopback, §3.2), so
it counts on that CNIC in the direction the data leaves and the one it enters. Miss-token KV (1 − hit rate of the
context, 1.3 % in the paper's traces) is left out, as in the paper's analysis.

**Traffic per node or GPU** (bytes/s; each linear in f, so the utilisation of resource r is ``R·(a_r + b_r·f)``):

=============  ===================================  =====================================================
resource       traffic                              what carries it
=============  ===================================  =====================================================
PE SNIC        ``(1 − f)·R / P``                    the PE path's storage reads
DE SNIC        ``f·R / D``                          the DE path's storage reads
PE DRAM        ``2·(1 − f)·R / P``                  PE-path reads written, then read to HBM
DE DRAM        ``(2 + f)·R / D``                    DE-path reads written and read (2f), the PE-path KV
                                                    written (1 − f), the decode's load of everything (1)
PE CNIC out    ``2·(1 − f)·R / (P·g)``              PE-path H2D loopback + the PE's send to the DE buffer
PE CNIC in     ``R / (P·g)``                        PE-path H2D loopback + DE-path RDMA into PE HBM
DE CNIC out    ``(1 + f)·R / (D·g)``                DE-path RDMA to the PE + the decode's H2D loopback
DE CNIC in     ``(2 − f)·R / (D·g)``                the PE's send (1 − f) + the decode's H2D loopback
PE PCIe        ``R / (P·g)``                        everything lands in PE HBM
DE PCIe        ``R / (D·g)``                        the decode loads everything into DE HBM
=============  ===================================  =====================================================

**The paper's constraints follow** at its operating point, both SNICs saturated: ``(1 − f)·R = P·S`` and
``f·R = D·S`` (so ``f = D/(P + D)``, ``R = (P + D)·S``). PE CNIC out ``2S/g ≤ B`` is (1) (``2s ≤ g``); PE CNIC in
``(P + D)·S/(P·g) ≤ B`` is (3) ``P/D ≥ s/(g − s)``; DE CNIC out ``(P + 2D)·S/(D·g) ≤ B`` is (5)
``P/D ≤ (g − 2s)/s``; DE CNIC in ``(2P + D)·S/(D·g) ≤ B`` is (7) ``P/D ≤ (g − s)/(2s)``; DE DRAM
``(3 + 2P/D)·S ≤ M`` is (8) ``P/D ≤ (M/S − 3)/2``; PE DRAM ``2S ≤ M``. Together (9):
``s/(g − s) ≤ P/D ≤ min{(g − 2s)/s, (g − s)/(2s), (M/(s·B) − 3)/2}`` (:func:`bottleneck_free_ratio_range`;
the paper's "since s ≤ g" should read s ≤ g/2, which (1) needs).

**Split policies.** *SNIC-balanced* (:func:`snic_balanced_split`, the paper's scheduler in its fluid limit): the
paper sends each read to the path whose storage-NIC queue is shorter (§5, read-queue and occupancy thresholds); in
steady state that equalises the SNICs' utilisation, ``(1 − f)/P = f/D``, so ``f = D/(P + D)``. *Optimal*
(:func:`optimal_split`): the f in [0, 1] that minimises ``max_r (a_r + b_r·f)``, a convex piecewise-linear
function whose minimum lies at 0, at 1, or where a rising line crosses a falling one; every candidate is
evaluated, so the result is exact. The largest read rate a split carries is ``1 / max_r (a_r + b_r·f)``
(:func:`max_read_bytes_per_s`); prefill-only reading is ``f = 0``.

**Cache-compute ratio** (:func:`cache_compute_ratio_gb_per_pflop`, §3.1): the hit KV bytes a request reads over
the FLOPs of its append's prefill, ``h·b / F(n, c)`` in GB per PFLOP, with h hit tokens, b KV bytes per token, n
appended tokens after c cached ones. ``F`` (:func:`append_prefill_flops`): the linear layers ``2·N_active·n``
plus, per attention layer and appended token at position i, ``2·H·(d_qk + d_v)·k_i`` for k_i the keys it attends
to (``c + i``, or ``min(c + i, top_k)`` for a sparse attention that keeps the top k keys) plus a sparse
attention's indexer ``2·H_I·d_I·(c + i)`` over every key; summed over i: k_i → its mean over the append. An MLA
model attends in its absorbed latent form (``d_qk = kv_lora + rope``, ``d_v = kv_lora``: FlashMLA's decode and
sparse kernels); others with their head sizes. Sliding-window layers (same query heads and head sizes,
:class:`~pdplan.specs.model_parts.SlidingWindowSpec`) attend to ``min(c + i, w)`` keys, whose mean over the append
is ``(m·c + m(m + 1)/2 + (n − m)·w)/n`` with m = clip(w − c, 0, n) the appended tokens still within the window
(exact for whole token counts): a model whose every layer is windowed (Mistral-7B v0.1) has only those.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from pdplan.errors import SpecError
from pdplan.specs.model import ModelSpec

RESOURCES = (
    "PE SNIC",
    "DE SNIC",
    "PE DRAM",
    "DE DRAM",
    "PE CNIC out",
    "PE CNIC in",
    "DE CNIC out",
    "DE CNIC in",
    "PE PCIe",
    "DE PCIe",
)
"""Every resource a hit read crosses (module docstring's table), in its order."""


@dataclass(frozen=True)
class DualPathCluster:
    """The nodes and bandwidths of a PD deployment reading a storage tier (module docstring's notation); nodes may
    be fractional (instances smaller than a node), bandwidths in bytes/s (``math.inf``: not a limit)."""

    prefill_nodes: float
    decode_nodes: float
    gpus_per_node: int
    cnic_bytes_per_s: float
    """B: one GPU's compute NIC, one direction."""
    snic_bytes_per_s: float
    """S = s·B: one node's storage NIC."""
    dram_bytes_per_s: float
    """M: one node's host DRAM."""
    pcie_bytes_per_s: float = math.inf
    """One GPU's PCIe host-to-device bandwidth."""

    def __post_init__(self) -> None:
        for name in ("prefill_nodes", "decode_nodes", "cnic_bytes_per_s", "snic_bytes_per_s", "dram_bytes_per_s"):
            value = getattr(self, name)
            if not value > 0:
                raise SpecError(f"dual path: {name} must be > 0, got {value!r}", field="cache.read_paths")
        if self.gpus_per_node < 1 or not self.pcie_bytes_per_s > 0:
            raise SpecError("dual path: needs >= 1 GPU per node and a PCIe bandwidth > 0", field="cache.read_paths")

    def coefficients(self) -> dict[str, tuple[float, float]]:
        """``{resource: (a, b)}``: its utilisation per byte/s of R is ``a + b·f`` (module docstring's table)."""
        p, d, g = self.prefill_nodes, self.decode_nodes, self.gpus_per_node
        s, m, b, pcie = self.snic_bytes_per_s, self.dram_bytes_per_s, self.cnic_bytes_per_s, self.pcie_bytes_per_s
        return {
            "PE SNIC": (1 / (p * s), -1 / (p * s)),
            "DE SNIC": (0.0, 1 / (d * s)),
            "PE DRAM": (2 / (p * m), -2 / (p * m)),
            "DE DRAM": (2 / (d * m), 1 / (d * m)),
            "PE CNIC out": (2 / (p * g * b), -2 / (p * g * b)),
            "PE CNIC in": (1 / (p * g * b), 0.0),
            "DE CNIC out": (1 / (d * g * b), 1 / (d * g * b)),
            "DE CNIC in": (2 / (d * g * b), -1 / (d * g * b)),
            "PE PCIe": (1 / (p * g * pcie), 0.0),
            "DE PCIe": (1 / (d * g * pcie), 0.0),
        }


@dataclass(frozen=True)
class ReadPathLoad:
    """What a split does at a read rate: every resource's utilisation and the busiest one."""

    de_fraction: float
    read_bytes_per_s: float
    utilisation: dict[str, float]

    @property
    def binding(self) -> str:
        """The busiest resource (the first of :data:`RESOURCES` among equals)."""
        return max(self.utilisation, key=lambda r: self.utilisation[r])

    @property
    def max_utilisation(self) -> float:
        return self.utilisation[self.binding]


def _check_fraction(de_fraction: float) -> None:
    if not 0.0 <= de_fraction <= 1.0:
        raise SpecError(f"dual path: the DE-path share must lie in [0, 1], got {de_fraction!r}", field="split")


def read_path_load(cluster: DualPathCluster, read_bytes_per_s: float, de_fraction: float) -> ReadPathLoad:
    """Every resource's utilisation when ``read_bytes_per_s`` of hit KV is read, ``de_fraction`` of it over the
    DE path (module docstring's table)."""
    _check_fraction(de_fraction)
    if not read_bytes_per_s >= 0:
        raise SpecError(f"dual path: the read rate must be >= 0, got {read_bytes_per_s!r}", field="read_bytes_per_s")
    util = {r: read_bytes_per_s * (a + b * de_fraction) for r, (a, b) in cluster.coefficients().items()}
    return ReadPathLoad(de_fraction, read_bytes_per_s, util)


def _peak(coefficients: dict[str, tuple[float, float]], f: float) -> float:
    return max(a + b * f for a, b in coefficients.values())


def optimal_split(cluster: DualPathCluster) -> float:
    """The DE-path share in [0, 1] that minimises the busiest resource's utilisation (independent of R: every
    utilisation is proportional to it). Exact: the candidates are 0, 1 and every crossing of a rising and a
    falling line inside (module docstring); among equal peaks the smallest share (the least DE traffic)."""
    coef = cluster.coefficients()
    candidates = {0.0, 1.0}
    for (a1, b1), (a2, b2) in itertools.combinations(coef.values(), 2):
        if b1 != b2:
            f = (a2 - a1) / (b1 - b2)
            if 0.0 < f < 1.0:
                candidates.add(f)
    return min(sorted(candidates), key=lambda f: _peak(coef, f))


def snic_balanced_split(cluster: DualPathCluster) -> float:
    """The paper's shortest-read-queue policy in its fluid limit: both SNIC pools equally busy, f = D/(P + D)."""
    return cluster.decode_nodes / (cluster.prefill_nodes + cluster.decode_nodes)


def max_read_bytes_per_s(cluster: DualPathCluster, de_fraction: float) -> float:
    """The largest hit-read rate (bytes/s, whole deployment) the split carries before a resource saturates:
    ``1 / max_r (a_r + b_r·f)``."""
    _check_fraction(de_fraction)
    return 1.0 / _peak(cluster.coefficients(), de_fraction)


def bottleneck_free_ratio_range(
    gpus_per_node: float, storage_share: float, dram_over_storage: float
) -> tuple[float, float] | None:
    """The paper's (9): the P/D ratios at which both SNIC pools run saturated with no CNIC or DRAM bottleneck,
    ``s/(g − s) ≤ P/D ≤ min{(g − 2s)/s, (g − s)/(2s), (M/(s·B) − 3)/2}`` (``storage_share`` s = SNIC/CNIC,
    ``dram_over_storage`` = M/(s·B)); None when it is empty (s > g/2, constraint (1), or 2·s·B > M, the PE DRAM)."""
    g, s, m = gpus_per_node, storage_share, dram_over_storage
    if s <= 0 or g <= 0 or m <= 0:
        raise SpecError("the bottleneck-free range needs g, s and M/(s·B) > 0", field="dual_path")
    if 2 * s > g or m < 2:
        return None
    low = s / (g - s)
    high = min((g - 2 * s) / s, (g - s) / (2 * s), (m - 3) / 2)
    return (low, high) if low <= high else None


@dataclass(frozen=True)
class SparseAttention:
    """A top-k sparse attention with a lightning indexer over every key (DeepSeek Sparse Attention)."""

    top_k: int
    indexer_heads: int
    indexer_head_dim: int


def append_prefill_flops(
    model: ModelSpec, append_tokens: float, cached_tokens: float, sparse: SparseAttention | None = None
) -> float:
    """FLOPs of prefilling ``append_tokens`` after ``cached_tokens`` (module docstring's ``F(n, c)``)."""
    n, c = float(append_tokens), float(cached_tokens)
    if n <= 0 or c < 0:
        raise SpecError(f"an append of {n} tokens after {c}: needs n > 0, c >= 0", field="append_tokens")
    mla = model.mla
    if mla is not None:
        qk, v = mla.kv_lora_rank + mla.qk_rope_head_dim, mla.kv_lora_rank
    else:
        qk, v = model.head_dim, model.value_head_dim
    mean_keys = c + (n + 1) / 2  # the append's i-th token attends to c + i keys (causal), i = 1..n
    keys = mean_keys if sparse is None else min(mean_keys, float(sparse.top_k))
    per_key = 2 * model.num_attention_heads * (qk + v)
    per_token = per_key * keys
    if sparse is not None:
        per_token += 2 * sparse.indexer_heads * sparse.indexer_head_dim * mean_keys
    attention = model.num_kv_layers * per_token
    sw = model.sliding_window
    if sw is not None:  # window layers: min(c + i, w) keys each (module docstring)
        m = min(max(sw.window - c, 0.0), n)
        window_keys = (m * c + m * (m + 1) / 2 + (n - m) * sw.window) / n
        attention += model.num_swa_layers * per_key * window_keys
    return n * (2 * model.active_non_embedding_params() + attention)


def cache_compute_ratio_gb_per_pflop(hit_tokens: float, kv_bytes_per_token: float, append_flops: float) -> float:
    """Hit KV bytes read per request over the append's prefill FLOPs, in GB/PFLOP: ``h·b / F · 1e15 / 1e9``."""
    if append_flops <= 0 or hit_tokens < 0 or kv_bytes_per_token <= 0:
        raise SpecError("the cache-compute ratio needs FLOPs > 0, hit tokens >= 0, KV bytes > 0", field="cache")
    return hit_tokens * kv_bytes_per_token / append_flops * 1e6
