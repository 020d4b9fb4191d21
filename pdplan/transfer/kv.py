"""KV-cache transfer prefill → decode: bytes per request, link time, and the part adding to TTFT.

Pure numpy, vectorised over prompt lengths ``l`` (any shape). No default number lives here: link
facts come from the link YAML, overheads and prefill times from the caller. SI units throughout.

**Bytes** (docs/architecture.md §2): ``B(l) = l·kvb·r_d + state``. ``kvb`` = KV bytes/token over all KV
layers; ``state`` = fixed linear-attention state of hybrids (head-sharded, never replicated);
``r_d = tp_d·⌈n_kv/tp_d⌉/n_kv``: with GQA and ``tp_d > n_kv`` each decode GPU needs a whole K/V
head, so each head goes to ``tp_d/n_kv`` GPUs (MLA: one shared latent, ``n_kv = 1``, sent ``tp_d``
times). Prefill-side replicas are sent once. OPT-66B: 2·64·9216·2 B/token × 512 = 1.125 GiB.

**Link** (Hockney α–β). A transfer uses ``lanes = min(nics_p, nics_d)`` NICs/ports, by default one
per GPU (rail-optimised 1:1 GPU↔NIC, as DGX/HGX): ``BW = line_rate·efficiency·lanes``. KV lives in
per-layer buffers split by head over TP ranks, so a unit of work needs ``L·max(tp_p, tp_d)``
messages (one per layer per overlapping shard pair). α is charged per message, serialised per lane:
conservative for pipelined RDMA, right for per-message software cost and request/response
transports. A unit of ``b`` bytes and ``m`` messages takes ``s = α·⌈m/lanes⌉ + b/BW + relayout``.
TP mismatch: the decode GPU rewrites its share into its own head layout (read + write),
``relayout = 2·B/(tp_d·HBM_d)``, folded into ``s`` per unit (one serial stage, conservative).

**Granularity → exposed time** (what adds to TTFT after a prefill of ``T_p``):

* ``request``: all after prefill, ``exposed = time_s = α·L·⌈m_l/lanes⌉ + B/BW + relayout``.
* ``layer``: layer ``i`` is ready at ``i·c`` (``c = T_p/L``), sends take ``s`` each, FIFO:
  ``F_i = max(F_{i−1}, i·c) + s`` ⇒ ``F_L = max_k [k·c + (L−k+1)·s]`` ⇒ exactly
  ``exposed = F_L − L·c = s + max(0, (L−1)(s − c))``: the last layer's share if the link keeps
  up, plus the accumulated lag if not (≤ ``L·s = time_s``). A per-layer sync cost (event + proxy
  signal; Splitwise's ~5–8 ms constant is dominated by such costs) goes to
  ``prefill_extra_s = L·layer_sync_overhead_s``.
* ``chunk`` (chunked prefill, budget C): ``n = ⌈l/C⌉`` chunks, compute split per token
  (``c = T_p·C/l``, ``c_last = T_p·r/l``, ``r = l − (n−1)C``; attention growth ignored). The
  first ``n−1`` chunks are the uniform pipeline above, the last (with the state) follows:
  ``exposed = max(0, s + max(0, (n−2)(s − c)) − c_last) + s_last`` (``s_last`` if n = 1).
  Chunking cost on prefill, for the caller to add: ``(n−1)·chunk_overhead_s`` (launches, weight
  re-read) + re-reading earlier KV, chunk ``j`` reads ``j·C`` tokens of its shard:
  ``C·n(n−1)/2·kvb·r_p/(tp_p·HBM_p)`` — a memory-traffic upper bound (docs/queueing.md §1.4).

With ``T_p`` growing in ``l`` the *overlapped* exposure may shrink (a longer prefill hides a
latency-bound link), and chunk exposure is a sawtooth in ``l`` (≈ the last chunk's share); the
completion time ``T_p + exposed`` never decreases.

**Data plane** (``TransferConfig.data_plane``, :mod:`pdplan.transfer.data_plane`): each unit also pays
``t_d`` per descriptor it carries, the request's launch ``h`` goes before its first unit, a backend's rate cap
bounds ``BW`` and host staging adds to the per-byte time; ``descriptors`` and ``overhead_s`` report them.
Without one every formula above holds unchanged.

**Fan-in / link queue**: :mod:`pdplan.transfer.fan_in` (which side of the x→y fan-in is busier, and its
M/G/1). **Inputs** (:class:`~pdplan.transfer.kv_inputs.KvShape`, :class:`~pdplan.transfer.kv_inputs.TransferConfig`,
the link protocol): :mod:`pdplan.transfer.kv_inputs`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from pdplan.transfer.data_plane import pipeline_with_launch_s
from pdplan.transfer.kv_inputs import (
    Granularity,
    KvShape,
    LinkLike,
    ModelLike,
    TransferConfig,
    effective_bandwidth_bytes_per_s,
    kv_shape_from_model,
    replication_factor,
    require,
)
from pdplan.types import FloatArray
from pdplan.types import Int64Array as IntArray

__all__ = [
    "TransferResult",
    "expectation",
    "kv_bytes_per_request",
    "kv_transfer",
    "pipeline_exposed_s",
    "transfer_for_request",
]


def kv_bytes_per_request(prompt_tokens: npt.ArrayLike, kv: KvShape, decode_tp: int = 1) -> FloatArray:
    """Bytes on the link: ``l·kvb·r_d + state``, l capped at ``kv.window_tokens`` (the tokens the decode keeps when
    every layer is windowed). OPT-66B, 512 tokens, fp16: 1,207,959,552 B; Mistral-7B v0.1, 32,768 tokens, bf16:
    4,096·131,072 = 536,870,912 B."""
    tokens = np.asarray(prompt_tokens, dtype=np.float64)
    if kv.window_tokens is not None:
        tokens = np.minimum(tokens, kv.window_tokens)
    rep = replication_factor(kv.num_kv_heads, decode_tp)
    return tokens * kv.kv_bytes_per_token * rep + kv.state_bytes_per_sequence


@dataclass(frozen=True, slots=True)
class TransferResult:
    """Per-request transfer figures, arrays shaped like ``prompt_tokens`` (SI units).

    ``time_s``: the whole transfer if done after prefill (latency + bytes/BW + re-layout);
    ``exposed_s``: what adds to TTFT; ``prefill_extra_s``: what the granularity adds to prefill (the
    caller adds it to the prefill service time); ``latency_s``: the α part of ``time_s``;
    ``overlap_s``: how long before the prefill ends the stream may start (the prefill time after
    the first unit's KV is ready: ``T_p(L−1)/L`` per layer, ``T_p − c_first`` per chunk, 0 per
    request). A stream started then on a free link ends no later than ``T_p + exposed``:
    ``T_p − overlap + time ≤ T_p + exposed`` (module docstring), so a link wait ``W`` counted
    from the stream start delays the KV by ``max(0, W − slack)``, ``slack = exposed + overlap −
    time`` (:mod:`pdplan.queueing.link_delay`).
    """

    prompt_tokens: FloatArray
    bytes: FloatArray
    time_s: FloatArray
    exposed_s: FloatArray
    prefill_extra_s: FloatArray
    latency_s: FloatArray
    relayout_s: FloatArray
    messages: IntArray
    bandwidth_bytes_per_s: float
    granularity: Granularity
    overlap_s: FloatArray
    descriptors: FloatArray
    """Descriptors per decode worker (:mod:`pdplan.transfer.data_plane`; 0 without a data plane)."""
    overhead_s: FloatArray
    """The data plane's part of ``time_s``: descriptors, launch and staging (0 without one)."""

    @property
    def slack_s(self) -> FloatArray:
        """``exposed + overlap − time`` ≥ 0: link wait a stream absorbs before the KV is late."""
        return np.asarray(np.maximum(0.0, self.exposed_s + self.overlap_s - self.time_s), dtype=np.float64)

    def utilisation(self, rate_rps: float, probabilities: npt.ArrayLike | None = None) -> float:
        """One pair's link busy fraction ``λ·E[bytes]/BW`` (E over ``probabilities`` or uniform)."""
        return float(rate_rps * expectation(self.bytes, probabilities) / self.bandwidth_bytes_per_s)


def expectation(values: FloatArray, probabilities: npt.ArrayLike | None) -> float:
    """``E[values]`` under ``probabilities`` (normalised; None = uniform)."""
    if probabilities is None:
        return float(np.mean(values))
    p = np.broadcast_to(np.asarray(probabilities, dtype=np.float64), values.shape)
    require(bool(np.all(p >= 0.0)) and float(p.sum()) > 0.0, "probabilities", "must be >= 0 with a positive sum")
    return float(np.sum(values * p) / np.sum(p))


def pipeline_exposed_s(units: npt.ArrayLike, compute_s: npt.ArrayLike, send_s: npt.ArrayLike) -> FloatArray:
    """Lag after the last of ``n`` units of compute ``c`` each, sent FIFO in ``s`` each:
    ``s + max(0, (n−1)(s − c))`` (exact, see module docstring). n=80, c=2 ms, s=40 µs → 40 µs."""
    n, c, s = (np.asarray(x, dtype=np.float64) for x in (units, compute_s, send_s))
    return np.asarray(s + np.maximum(0.0, (n - 1.0) * (s - c)), dtype=np.float64)


def _chunk_exposed(
    tokens: FloatArray, prefill_s: FloatArray, cfg: TransferConfig, send: tuple[float, float, float], kv: KvShape
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(exposed_s, n_chunks, descriptors) for chunks; ``send`` = (α per chunk, s per token, s for state); a data
    plane adds each chunk's descriptors and the launch on the first (:mod:`pdplan.transfer.data_plane`)."""
    alpha_chunk, per_token_s, state_s = send
    size = float(cfg.chunk_tokens or 1)
    n = np.ceil(tokens / size)
    last = tokens - (n - 1.0) * size
    d_full, d_last = (
        _unit_descriptors(np.full(tokens.shape, size), float(kv.num_layers), kv, cfg),
        _unit_descriptors(last, float(kv.num_layers), kv, cfg),
    )
    t_d, launch = _plane_times(cfg)
    s_full = alpha_chunk + size * per_token_s + d_full * t_d
    s_last = alpha_chunk + last * per_token_s + state_s + d_last * t_d
    c_full = prefill_s * size / tokens
    c_last = prefill_s * last / tokens
    if launch > 0.0:
        lag = pipeline_with_launch_s(n - 1.0, c_full, s_full, launch) - c_last
        exposed = np.where(n > 1.0, np.maximum(0.0, lag) + s_last, launch + s_last)
    else:
        lag = pipeline_exposed_s(n - 1.0, c_full, s_full) - c_last
        exposed = np.where(n > 1.0, np.maximum(0.0, lag) + s_last, s_last)
    return np.asarray(exposed, dtype=np.float64), n, (n - 1.0) * d_full + d_last


def _unit_descriptors(tokens: FloatArray, layers: float, kv: KvShape, cfg: TransferConfig) -> FloatArray:
    """Descriptors per decode worker of a unit (0 without a data plane)."""
    plane = cfg.data_plane
    if plane is None:
        return np.zeros(tokens.shape)
    return plane.descriptors(tokens, layers, kv.kv_parts, cfg.prefill_tp, cfg.decode_tp)


def _plane_times(cfg: TransferConfig) -> tuple[float, float]:
    """(seconds per descriptor, launch seconds per request); zeros without a data plane."""
    plane = cfg.data_plane
    return (0.0, 0.0) if plane is None else (plane.per_descriptor_s, plane.per_transfer_s)


def _chunk_prefill_extra_s(n: FloatArray, kv: KvShape, cfg: TransferConfig) -> FloatArray:
    """``(n−1)·overhead + C·n(n−1)/2·kvb_gpu/HBM_p`` (re-read of earlier chunks' KV shard)."""
    rep = replication_factor(kv.num_kv_heads, cfg.prefill_tp)
    kvb_gpu = kv.kv_bytes_per_token * rep / cfg.prefill_tp
    reread = float(cfg.chunk_tokens or 1) * n * (n - 1.0) / 2.0 * kvb_gpu / (cfg.prefill_hbm_bytes_per_s or 1.0)
    return np.asarray((n - 1.0) * cfg.chunk_overhead_s + reread, dtype=np.float64)


def _validate_inputs(tokens: FloatArray, prefill_s: FloatArray | None, cfg: TransferConfig) -> None:
    require(bool(np.all(np.isfinite(tokens) & (tokens > 0.0))), "prompt_tokens", "must be finite and > 0")
    require(
        cfg.granularity == "request" or prefill_s is not None,
        "prefill_time_s",
        f"granularity {cfg.granularity!r} overlaps with prefill: give the prefill time",
    )
    require(prefill_s is None or bool(np.all(prefill_s >= 0.0)), "prefill_time_s", "must be >= 0")


@dataclass(frozen=True, slots=True)
class _LinkCosts:
    """BW, α per layer-unit per lane, s per byte (link + re-layout + staging), re-layout and staging s per byte."""

    bandwidth_bytes_per_s: float
    alpha_layer_s: float
    per_byte_s: float
    relayout_per_byte_s: float
    staging_per_byte_s: float


def _link_costs(link: LinkLike, cfg: TransferConfig) -> _LinkCosts:
    bw = effective_bandwidth_bytes_per_s(link, cfg.lanes)
    plane = cfg.data_plane
    if plane is not None and plane.bandwidth_cap_bytes_per_s is not None:
        bw = min(bw, plane.bandwidth_cap_bytes_per_s)
    hbm_d = cfg.decode_hbm_bytes_per_s or 1.0
    relayout = 2.0 / (cfg.decode_tp * hbm_d) if cfg.prefill_tp != cfg.decode_tp else 0.0
    shards_per_lane = math.ceil(max(cfg.prefill_tp, cfg.decode_tp) / cfg.lanes)
    alpha = link.per_message_latency_s * shards_per_lane
    if plane is None:
        return _LinkCosts(bw, alpha, 1.0 / bw + relayout, relayout, 0.0)
    staging = plane.staging_per_byte_s(cfg.prefill_tp, cfg.decode_tp, 1.0 / bw)
    return _LinkCosts(bw, alpha, 1.0 / bw + relayout + staging, relayout, staging)


def _overlap(
    tokens: FloatArray, total: FloatArray, prefill_s: FloatArray, kv: KvShape, cfg: TransferConfig, cost: _LinkCosts
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
    """(exposed_s, layer-units sent, prefill_extra_s, overlap_s, descriptors) for layer or chunk granularity."""
    layers = float(kv.num_layers)
    if cfg.granularity == "layer":
        t_d, launch = _plane_times(cfg)
        d_layer = _unit_descriptors(tokens, 1.0, kv, cfg)
        send = cost.alpha_layer_s + total / layers * cost.per_byte_s + d_layer * t_d
        units = np.full(tokens.shape, layers)
        if launch > 0.0:
            exposed = pipeline_with_launch_s(units, prefill_s / layers, send, launch)
        else:
            exposed = pipeline_exposed_s(layers, prefill_s / layers, send)
        extra = np.full(tokens.shape, layers * cfg.layer_sync_overhead_s)
        return exposed, units, extra, prefill_s * (layers - 1.0) / layers, layers * d_layer
    rep = replication_factor(kv.num_kv_heads, cfg.decode_tp)
    send3 = (
        layers * cost.alpha_layer_s,
        kv.kv_bytes_per_token * rep * cost.per_byte_s,
        kv.state_bytes_per_sequence * cost.per_byte_s,
    )
    exposed, n_chunks, descriptors = _chunk_exposed(tokens, prefill_s, cfg, send3, kv)
    first = prefill_s * np.minimum(float(cfg.chunk_tokens or 1), tokens) / tokens
    return (
        exposed,
        n_chunks * layers,
        _chunk_prefill_extra_s(n_chunks, kv, cfg),
        np.asarray(prefill_s - first, dtype=np.float64),
        descriptors,
    )


def kv_transfer(
    prompt_tokens: npt.ArrayLike,
    kv: KvShape,
    link: LinkLike,
    config: TransferConfig | None = None,
    *,
    prefill_time_s: npt.ArrayLike | None = None,
) -> TransferResult:
    """KV transfer for each prompt length (formulas in the module docstring). ``prefill_time_s``
    (broadcast to ``prompt_tokens``) is needed for layer/chunk granularity.
    Mooncake: 40e9 B over 4×200 Gb/s at 0.87, request granularity → 0.46 s."""
    cfg = config or TransferConfig()
    tokens = np.asarray(prompt_tokens, dtype=np.float64)
    prefill_s = (
        None if prefill_time_s is None else np.broadcast_to(np.asarray(prefill_time_s, dtype=np.float64), tokens.shape)
    )
    _validate_inputs(tokens, prefill_s, cfg)
    cost = _link_costs(link, cfg)
    # every layer windowed: a transfer after the prefill (request) or after each layer's pass (layer) sends the last
    # w tokens the decode keeps; chunks stream while the prompt is computed, before later tokens push earlier ones
    # out of the window, so all are sent
    streamed = prefill_s is not None and cfg.granularity == "chunk"
    sent = tokens if kv.window_tokens is None or streamed else np.minimum(tokens, kv.window_tokens)
    total = kv_bytes_per_request(tokens, replace(kv, window_tokens=None) if streamed else kv, cfg.decode_tp)
    t_d, launch = _plane_times(cfg)
    if prefill_s is None or cfg.granularity == "request":
        units = np.full(tokens.shape, float(kv.num_layers))
        descriptors = _unit_descriptors(sent, float(kv.num_layers), kv, cfg)
        exposed = units * cost.alpha_layer_s + total * cost.per_byte_s
        if cfg.data_plane is not None:
            exposed = exposed + descriptors * t_d + launch
        extra = overlap = np.zeros(tokens.shape)
    else:
        exposed, units, extra, overlap, descriptors = _overlap(sent, total, prefill_s, kv, cfg, cost)
    latency = units * cost.alpha_layer_s
    plane_s = descriptors * t_d + launch + total * cost.staging_per_byte_s
    time_s = latency + total * cost.per_byte_s
    return TransferResult(
        prompt_tokens=tokens,
        bytes=total,
        time_s=time_s if cfg.data_plane is None else time_s + descriptors * t_d + launch,
        exposed_s=exposed,
        prefill_extra_s=extra,
        latency_s=latency,
        relayout_s=total * cost.relayout_per_byte_s,
        messages=(units * max(cfg.prefill_tp, cfg.decode_tp)).astype(np.int64),
        bandwidth_bytes_per_s=cost.bandwidth_bytes_per_s,
        granularity=cfg.granularity,
        overlap_s=np.asarray(overlap, dtype=np.float64),
        descriptors=np.asarray(descriptors, dtype=np.float64),
        overhead_s=np.asarray(plane_s, dtype=np.float64),
    )


def transfer_for_request(
    kv: KvShape | ModelLike,
    tokens: float,
    link: LinkLike,
    config: TransferConfig | None = None,
    *,
    kv_dtype_bytes: float | None = None,
    prefill_time_s: float | None = None,
) -> dict[str, float | int | str]:
    """One request, keyed as the ``pdplan transfer`` JSON contract (``bytes``, ``time_s``,
    ``exposed_s``) plus ``messages``, ``prefill_extra_s``, ``relayout_s``,
    ``bandwidth_bytes_per_s``, ``granularity``. A model spec needs ``kv_dtype_bytes``."""
    if not isinstance(kv, KvShape):
        require(kv_dtype_bytes is not None, "kv_dtype_bytes", "needed to size the KV of a model")
        kv = kv_shape_from_model(kv, float(kv_dtype_bytes or 0.0))
    res = kv_transfer(np.asarray([tokens], dtype=np.float64), kv, link, config, prefill_time_s=prefill_time_s)
    plane = {} if config is None or config.data_plane is None else _plane_keys(res, config)
    doc: dict[str, float | int | str] = {
        "bytes": float(res.bytes[0]),
        "time_s": float(res.time_s[0]),
        "exposed_s": float(res.exposed_s[0]),
        "messages": int(res.messages[0]),
        "prefill_extra_s": float(res.prefill_extra_s[0]),
        "relayout_s": float(res.relayout_s[0]),
        "bandwidth_bytes_per_s": res.bandwidth_bytes_per_s,
        "granularity": res.granularity,
    }
    return doc | plane


def _plane_keys(res: TransferResult, config: TransferConfig) -> dict[str, float | int | str]:
    """The data-plane keys of one request's transfer: backend, block size, descriptors, their part of the time."""
    plane = config.data_plane
    assert plane is not None
    return {
        "backend": plane.backend,
        "block_tokens": plane.block_tokens,
        "descriptors": int(res.descriptors[0]),
        "overhead_s": float(res.overhead_s[0]),
    }
