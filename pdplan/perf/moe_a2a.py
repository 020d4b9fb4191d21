"""Expert-parallel all-to-all: the dispatch and combine of one MoE layer (DeepEP normal / low-latency modes).

Each of the ``tokens`` tokens on a GPU goes to the GPUs holding its k experts (dispatch) and comes back weighted
(combine). Inside one NVLink domain the time is the fitted α + bytes/β of the kernel table's ``ep_a2a`` entry
(:class:`pdplan.specs.kernel_table.A2aParams`, bytes per GPU as defined there). Normal mode is what engines use
for prefill, low-latency mode for decode (SGLang ``--deepep-mode auto``). Across nodes (ep > g GPUs per node, N =
ep/g nodes) the two modes move different copies:

* **low-latency** sends every remote token-expert copy straight to its GPU; the share bound for other nodes,
  (ep − g)/(ep − 1) of the remote copies, crosses the scale-out network.
* **normal** (DeepEP ``internode.cu``) sends a token **once per destination node** over RDMA, to the GPU of the
  same local index there, which forwards it over NVLink to every GPU of its node that holds one of the token's
  experts; the copy for the sender's own node is a local write (``dst_rdma_rank == rdma_rank``: no RDMA put). So
  per token the NIC carries the distinct *remote nodes* hit, (N − 1)·(1 − (1 − 1/N)^k), and NVLink the distinct
  ranks hit less the forwarder's own, ep·(1 − (1 − 1/ep)^k)·(g − 1)/g (uniform routing; the combine runs the
  same paths back).

The RDMA share runs at ``rdma_bytes_per_s`` × ``rdma_fraction``, the achieved fraction of ``pdplan/data/ep_a2a.yaml``
(DeepEP's published inter-node figures, converted to these NIC bytes there; the caller passes it, this module reads
no file); the two domains run concurrently and the slower sets the time.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from pdplan.errors import SpecError
from pdplan.specs.kernel_table import A2aMode, AlphaBeta, KernelTable
from pdplan.types import ArrayLike, FloatArray

A2aPhase = Literal["dispatch", "combine"]
FP8_DISPATCH_BYTES = 1.0 + 4.0 / 128.0
"""FP8 values plus one fp32 scale per 128 (DeepEP's FP8 dispatch)."""


def copies_per_token(top_k: int, ep: ArrayLike, mode: A2aMode) -> FloatArray:
    """Remote copies of one token: ranks hit other than its own (normal) or remote experts (low-latency)."""
    e = np.asarray(ep, dtype=np.float64)
    if mode == "normal":
        hit = e * -np.expm1(top_k * np.log1p(-1.0 / np.maximum(e, 1.0 + 1e-12)))
        out: FloatArray = np.where(e > 1.0, hit * (e - 1.0) / e, 0.0)
        return out
    ll: FloatArray = top_k * (e - 1.0) / np.maximum(e, 1.0)
    return ll


def a2a_bytes(
    tokens: ArrayLike,
    hidden: float,
    top_k: int,
    ep: ArrayLike,
    mode: A2aMode,
    phase: A2aPhase,
    dispatch_bytes: float = FP8_DISPATCH_BYTES,
) -> FloatArray:
    """Bytes one GPU sends in a dispatch or combine (combine in BF16)."""
    per = dispatch_bytes if phase == "dispatch" else 2.0
    out: FloatArray = np.asarray(tokens, dtype=np.float64) * hidden * per * copies_per_token(top_k, ep, mode)
    return out


def node_copies_per_token(top_k: int, ep: ArrayLike, gpus_per_node: int) -> tuple[FloatArray, FloatArray]:
    """DeepEP normal mode across nodes: (NIC copies, NVLink copies) of one token (module docstring).

    Example: k = 8, ep = 32, g = 8 (N = 4 nodes): NIC 3·(1 − (3/4)^8) = 2.700; NVLink 32·(1 − (31/32)^8)·7/8 =
    6.273 (against 5.38 remote-node GPU copies if each remote GPU got its own network copy)."""
    e = np.asarray(ep, dtype=np.float64)
    nodes = np.maximum(e / gpus_per_node, 1.0)
    nic: FloatArray = (nodes - 1.0) * -np.expm1(top_k * np.log1p(-1.0 / np.maximum(nodes, 1.0 + 1e-12)))
    ranks = e * -np.expm1(top_k * np.log1p(-1.0 / np.maximum(e, 1.0 + 1e-12)))
    nvl: FloatArray = ranks * (gpus_per_node - 1.0) / gpus_per_node
    return nic, nvl


def a2a_time_s(
    tokens: ArrayLike,
    hidden: float,
    top_k: int,
    ep: ArrayLike,
    mode: A2aMode,
    phase: A2aPhase,
    table: KernelTable,
    *,
    dispatch_bytes: float = FP8_DISPATCH_BYTES,
    gpus_per_node: int = 8,
    rdma_bytes_per_s: float | None = None,
    rdma_fraction: float | None = None,
) -> FloatArray:
    """Seconds of one dispatch or combine per MoE layer for ``tokens`` tokens per GPU (0 when ep = 1).

    ``rdma_bytes_per_s``: the GPU's scale-out NIC line rate, and ``rdma_fraction`` the share of it DeepEP achieves in
    ``mode`` (``pdplan/data/ep_a2a.yaml``), both required once ep > gpus_per_node.
    Example: H100, 128 tokens, h 7168, k 8, ep 8, low-latency dispatch: α + 128·7·7168·1.03 B / β.
    """
    if mode not in table.ep_a2a:
        raise SpecError(f"kernel table for {table.gpu!r} has no ep_a2a entry for mode {mode!r}", field="ep_a2a")
    ab: AlphaBeta = getattr(table.ep_a2a[mode], phase)
    e = np.asarray(ep, dtype=np.float64)
    spans = e > gpus_per_node
    if np.any(spans) and rdma_bytes_per_s is None:
        raise SpecError(f"ep > {gpus_per_node} spans nodes: give the NIC rate (rdma_bytes_per_s)", field="ep")
    if np.any(spans) and rdma_fraction is None:
        raise SpecError(
            f"ep > {gpus_per_node} spans nodes: give DeepEP's achieved NIC share (rdma_fraction)", field="ep"
        )
    total = a2a_bytes(tokens, hidden, top_k, e, mode, phase, dispatch_bytes)
    if mode == "normal":  # one RDMA copy per remote node, forwarded over NVLink inside it
        per = dispatch_bytes if phase == "dispatch" else 2.0
        row = np.asarray(tokens, dtype=np.float64) * hidden * per
        nic, nvl = node_copies_per_token(top_k, e, gpus_per_node)
        nvl_bytes, nic_bytes = np.where(spans, row * nvl, total), np.where(spans, row * nic, 0.0)
    else:  # every remote expert copy direct; the off-node share over RDMA
        cross = np.where(spans, (e - gpus_per_node) / np.maximum(e - 1.0, 1.0), 0.0)
        nvl_bytes, nic_bytes = total * (1.0 - cross), total * cross
    intra_s = ab.alpha_s + nvl_bytes / ab.bus_bytes_per_s
    if np.any(spans):
        inter_s = ab.alpha_s + nic_bytes / (float(rdma_bytes_per_s or 0.0) * float(rdma_fraction or 0.0))
        intra_s = np.maximum(intra_s, np.where(spans, inter_s, 0.0))
    out: FloatArray = np.where(e > 1.0, intra_s, 0.0)
    return out
