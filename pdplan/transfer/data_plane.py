"""The KV data plane: what moving a request's KV costs beyond ``bytes / bandwidth`` (docs/kv_data_plane.md).

Engines do not move a request's KV as one copy. A connector cuts it into **descriptors** (contiguous regions), a
backend posts each at a cost, launches the request's transfer once, may cap the rate and may stage the bytes
through host memory (the backends' numbers and sources: ``pdplan/data/kv_backends.yaml``, the connectors' split
and block size: the engine profiles' ``kv_connector``).

**Descriptors** of a unit of ``t`` tokens over ``m`` layers, per decode-side worker (the workers post in
parallel; a decode rank reads from ``pairs = ⌈max(tp_p, tp_d)/tp_d⌉`` prefill ranks, vLLM NixlConnector's TP
mapping: one when tp_p ≤ tp_d, tp_p/tp_d when the prefill side is wider):

* ``block`` (vLLM NixlConnector): ``m · parts · ⌈t/b⌉ · pairs``, ``b`` the KV block size, ``parts`` = 2 (K and
  V apart; 1 for MLA's single latent);
* ``layer`` (a contiguous run per layer, SGLang's Mooncake path): ``m · parts · pairs``;
* ``buffer`` (gathered into one send buffer, TensorRT-LLM's transceiver): ``pairs``.

vLLM #50913 (Qwen3-32B TP2, fp8 KV, 4,900 tokens, block 16): 64 · 2 · ⌈4900/16⌉ · 1 = 39,296 descriptors of
8 KiB, 9,856 at block 64.

**Time** of a unit, added to the link's ``α·⌈m_l/lanes⌉ + B/BW + relayout`` (:mod:`pdplan.transfer.kv`):
``d·t_d`` for its ``d`` descriptors; the request's launch ``h`` (``per_transfer_s``) once, before its first
unit. ``BW = min(line·eff·lanes, cap)`` where the backend caps the rate (TCP). **Staging** on side ``x`` copies
that side's share ``B/tp_x`` per GPU at ``r`` B/s: ``B/(tp_x·r)``; not overlapped, each side's copy adds
``1/(tp_x·r)`` per byte; overlapped (pipelined with the wire), the per-byte time is the slowest stage's,
``max(1/BW, 1/(tp_x·r))``.

**Granularities** (:mod:`pdplan.transfer.kv`): ``request``: one unit, ``exposed = h + α-part + d(l)·t_d + B·s_B``;
``layer``: ``L`` units of ``d(l)/L`` descriptors each, the launch on the first, so the pipeline lag becomes
``max(h + s + (L−1)(s − c), s + max(0, (L−2)(s − c)))``; ``chunk``: full chunks of ``d(C)`` descriptors (``⌈C/b⌉``
blocks: exact when the chunk budget is a multiple of the block), the last of ``d(r)``, the launch on the first.
A block size below a chunk's or a layer's share only adds descriptors; it never changes the bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from pdplan.errors import SpecError
from pdplan.specs.kv_backend import KvBackendSpec
from pdplan.types import FloatArray

Split = Literal["block", "layer", "buffer"]
SPLITS: tuple[Split, ...] = ("block", "layer", "buffer")


def _require(ok: bool, field: str, message: str) -> None:
    if not ok:
        raise SpecError(message, source="transfer", field=field)


@dataclass(frozen=True, slots=True)
class DataPlane:
    """One backend as a connector drives it (module docstring); SI units."""

    backend: str
    split: Split
    block_tokens: int
    per_descriptor_s: float
    per_transfer_s: float
    bandwidth_cap_bytes_per_s: float | None = None
    staging_sides: tuple[Literal["prefill", "decode"], ...] = ()
    staging_bytes_per_s: float | None = None
    staging_overlapped: bool = False

    def __post_init__(self) -> None:
        _require(self.split in SPLITS, "split", f"{self.split!r} is not one of {', '.join(SPLITS)}")
        _require(
            isinstance(self.block_tokens, int) and self.block_tokens >= 1,
            "kv_block_tokens",
            f"must be an integer >= 1, got {self.block_tokens!r}",
        )
        _require(self.per_descriptor_s >= 0.0 and self.per_transfer_s >= 0.0, "per_descriptor_s", "must be >= 0")
        cap = self.bandwidth_cap_bytes_per_s
        _require(cap is None or cap > 0.0, "bandwidth_cap_bytes_per_s", f"backend {self.backend!r} has no bandwidth")
        rate = self.staging_bytes_per_s
        _require(
            not self.staging_sides or (rate is not None and rate > 0.0),
            "staging.bytes_per_s",
            f"backend {self.backend!r} stages with no bandwidth",
        )

    def pairs(self, prefill_tp: int, decode_tp: int) -> int:
        """Prefill ranks one decode worker reads from: ``⌈max(tp_p, tp_d)/tp_d⌉``."""
        return math.ceil(max(prefill_tp, decode_tp) / decode_tp)

    def descriptors(
        self, tokens: npt.ArrayLike, layers: float, kv_parts: int, prefill_tp: int, decode_tp: int
    ) -> FloatArray:
        """Descriptors per decode worker for a unit of ``tokens`` over ``layers`` layers (module docstring).
        #50913: 4,900 tokens, 64 layers, K and V, TP2→TP2, block 16 → 39,296."""
        t = np.asarray(tokens, dtype=np.float64)
        pairs = float(self.pairs(prefill_tp, decode_tp))
        if self.split == "block":
            return np.asarray(layers * kv_parts * np.ceil(t / self.block_tokens) * pairs, dtype=np.float64)
        if self.split == "layer":
            return np.full(t.shape, layers * kv_parts * pairs)
        return np.full(t.shape, pairs)

    def staging_per_byte_s(self, prefill_tp: int, decode_tp: int, wire_per_byte_s: float) -> float:
        """Staging time per byte of the request beyond the wire's (0 without staging; module docstring)."""
        if not self.staging_sides:
            return 0.0
        rate = self.staging_bytes_per_s or 0.0
        tps = {"prefill": prefill_tp, "decode": decode_tp}
        per_side = [1.0 / (tps[side] * rate) for side in self.staging_sides]
        if self.staging_overlapped:
            return max(0.0, max(per_side) - wire_per_byte_s)
        return float(sum(per_side))


def data_plane(name: str, backend: KvBackendSpec, split: Split, block_tokens: int) -> DataPlane:
    """The :class:`DataPlane` of backend ``name`` (its spec) driven with ``split`` at ``block_tokens``."""
    staging = backend.staging
    return DataPlane(
        backend=name,
        split=split,
        block_tokens=block_tokens,
        per_descriptor_s=backend.per_descriptor_s.value,
        per_transfer_s=backend.per_transfer_s.value,
        bandwidth_cap_bytes_per_s=(
            None if backend.bandwidth_cap_bytes_per_s is None else backend.bandwidth_cap_bytes_per_s.value
        ),
        staging_sides=() if staging is None else tuple(staging.sides),
        staging_bytes_per_s=None if staging is None else staging.bytes_per_s.value,
        staging_overlapped=False if staging is None else staging.overlapped,
    )


def pipeline_with_launch_s(units: FloatArray, compute_s: FloatArray, send_s: FloatArray, launch_s: float) -> FloatArray:
    """Lag after ``n`` units of compute ``c`` sent FIFO in ``s`` each when the first send also pays ``h``:
    ``max(h + s + (n−1)(s − c), s + max(0, (n−2)(s − c)))`` for n ≥ 2, ``h + s`` for n = 1 (module docstring).
    h = 0 gives :func:`pdplan.transfer.kv.pipeline_exposed_s`. n=80, c=2 ms, s=40 µs, h=3 ms → 3.04 ms − 79·1.96 ms
    < s, so 40 µs."""
    n, c, s = units, compute_s, send_s
    first = launch_s + s + (n - 1.0) * (s - c)
    later = s + np.maximum(0.0, (n - 2.0) * (s - c))
    return np.asarray(np.where(n >= 2.0, np.maximum(first, later), launch_s + s), dtype=np.float64)
