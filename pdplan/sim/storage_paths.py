"""Reads of a storage tier behind storage NICs as work on the nodes' shared resources (DualPath's read paths).

The closed form (:mod:`pdplan.cache.dual_path`) is a fluid model: each resource's load is linear in the share f of
reads over the decode path and the busiest one sets the read limit. This module does not use it: it replays each
request's read over the servers it crosses, from the mechanism of DualPath (Wu et al., arXiv 2602.21548, §3–4):

* **PE path**: storage → the prefill node's storage NIC (SNIC) → its DRAM buffer; then, while the prefill runs, the
  buffer → the prefill GPUs (host-to-device, through the GPU's PCIe and, §3.2, its paired compute NIC).
* **DE path**: storage → a decode node's SNIC → its DRAM buffer; then, while the prefill runs, the buffer → that
  node's compute NICs (CNIC, RDMA) → the compute network → the prefill GPUs' CNICs.

**Servers.** Each node's SNIC (``snic_bytes_per_s``), each node's DRAM (``dram_bytes_per_s``: a byte read is written
into the buffer by the fetch and read out of it by the move to the GPU, one server per direction so that a fetch queued
on its SNIC, its write booked at its future start, does not hold up the buffer reads of prefills starting before it; the
DRAM's utilisation adds both directions' work, and it binds nowhere near the figures here), each decode node's CNICs
outbound (g·B), and each prefill instance's host-to-device hop (its k GPUs × min(B, p)) are FCFS servers. FCFS rather
than processor sharing: a read's completion is then fixed when it is issued (Lindley's recursion on each server's free
time), and both disciplines have the same capacity, which is what the read limit checks; for reads of nearly equal size
(an agent's history) FCFS's waits are no longer than processor sharing's. A read crosses its servers *cut-through*
(streamed in blocks, §4: Full Blocks in storage, Layer Blocks in flight): it starts on a server no earlier than on the
one before and ends no earlier than there, and holds each server for its bytes over the server's rate (work-conserving),
so a path's throughput is its slowest server's.

**Two stages.** DualPath reads a request's hit into a DRAM buffer while the request waits for its prefill engine
(§4, §6.1: the TTFT breakdown is scheduling, allocation, reading, prefill), so the storage → DRAM stage
(:meth:`StorageReads.fetch`) runs from the request's arrival at the prefill pool and the request joins its instance's
queue when its hit is in the buffer; the prefill engine is not held by it. The buffer → GPU stage
(:meth:`StorageReads.to_gpu`) runs when the prefill starts: whole before the compute (Basic), or layer by layer
under it when the engine loads layer-wise (the exposed part ``a + (L − 1)·max(a − c, 0)`` with a, c the per-layer
transfer and compute, §4's per-layer loop; the rule of :mod:`pdplan.cache.tiers` for every tier), and it holds the
prefill instance.

**Path choice** (``policy``): ``"prefill"`` every read over the PE path; ``"shorter-queue"`` DualPath's rule (§6.1,
KV-Cache read task scheduling: with the request's PE and DE chosen, the read goes to the side whose node has the
shorter disk-read queue; ties to the PE, which needs no compute-network hop), the DE being the decode node with the
shortest SNIC queue (DualPath's DE scheduling balances token counts over DEs; the simulator pairs a request with its
decode instance only when its prefill ends); ``"split"`` a seeded Bernoulli draw with the probability
``de_fraction`` (a fixed or the closed form's optimal share), over the decode node with the shortest SNIC queue.

Not modelled: the decode steps are not slowed by the decode nodes' reads (as in the closed form); a request's hit
is read over one path (DualPath leaves splitting a request over both to future work, §6.1); the SNIC queue is
compared in seconds of backlog (DualPath counts tokens; the SNICs are alike, so the order is the same).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from pdplan.errors import SpecError

ReadPolicy = Literal["prefill", "shorter-queue", "split"]
READ_POLICIES: tuple[ReadPolicy, ...] = ("prefill", "shorter-queue", "split")
RESOURCES = ("PE SNIC", "DE SNIC", "PE DRAM", "DE DRAM", "DE CNIC out", "PE host-to-device")
"""The servers, by kind (:meth:`StorageReads.utilisation`)."""


@dataclass(frozen=True, slots=True)
class ReadPathNodes:
    """The nodes a storage tier is read over and their resources (module docstring); rates in bytes/s."""

    tier: str
    prefill_nodes: int
    decode_nodes: int
    prefill_instances_per_node: int
    gpus_per_prefill_instance: int
    gpus_per_node: int
    snic_bytes_per_s: float
    """Per node."""
    dram_bytes_per_s: float
    """Per node, reads and writes together."""
    cnic_bytes_per_s: float
    """Per GPU."""
    pcie_bytes_per_s: float
    """Per GPU, host to device."""
    latency_s: float
    layerwise: bool
    n_layers: int
    policy: ReadPolicy = "prefill"
    de_fraction: float = 0.0

    def __post_init__(self) -> None:
        if self.policy not in READ_POLICIES:
            raise SpecError(f"read policy must be one of {', '.join(READ_POLICIES)}, got {self.policy!r}")
        counts = (self.prefill_nodes, self.prefill_instances_per_node, self.gpus_per_prefill_instance, self.n_layers)
        if min(counts) < 1 or self.decode_nodes < 0 or self.gpus_per_node < 1:
            raise SpecError(f"read-path nodes: counts must be >= 1 (decode nodes >= 0), got {self}")
        rates = (self.snic_bytes_per_s, self.dram_bytes_per_s, self.cnic_bytes_per_s, self.pcie_bytes_per_s)
        if not all(math.isfinite(r) and r > 0 for r in rates):
            raise SpecError(f"tier {self.tier!r}: every read-path bandwidth must be finite and > 0, got {rates}")
        if not (math.isfinite(self.latency_s) and self.latency_s >= 0):
            raise SpecError(f"tier {self.tier!r}: latency must be finite and >= 0 s, got {self.latency_s}")
        if not 0.0 <= self.de_fraction <= 1.0:
            raise SpecError(f"the decode path's share must be in [0, 1], got {self.de_fraction}")
        if self.policy != "prefill" and self.decode_nodes < 1:
            raise SpecError("reads over the decode nodes need at least one decode node")


@dataclass(frozen=True, slots=True)
class Buffered:
    """Where a fetched hit waits: the node whose DRAM holds it (decode nodes after the prefill nodes)."""

    node: int
    nbytes: float

    def over_decode(self, prefill_nodes: int) -> bool:
        return self.node >= prefill_nodes


class StorageReads:
    """The servers of :class:`ReadPathNodes` and their queues over one run (module docstring)."""

    def __init__(self, nodes: ReadPathNodes, rng: np.random.Generator) -> None:
        self.nodes, self.rng = nodes, rng
        n_all = nodes.prefill_nodes + nodes.decode_nodes
        self.snic_free = [0.0] * n_all
        self.dram_write_free = [0.0] * n_all
        self.dram_read_free = [0.0] * n_all
        self.cnic_out_free = [0.0] * n_all
        self.h2d_free = [0.0] * (nodes.prefill_nodes * nodes.prefill_instances_per_node)
        self.log: list[tuple[float, str, int, float]] = []
        """(issue time, resource kind, node or instance, busy seconds) per server a read holds."""
        self.h2d_rate = nodes.gpus_per_prefill_instance * min(nodes.cnic_bytes_per_s, nodes.pcie_bytes_per_s)

    def node_of(self, instance: int) -> int:
        """The prefill node of prefill instance ``instance``."""
        node = instance // self.nodes.prefill_instances_per_node
        if node >= self.nodes.prefill_nodes:
            raise SpecError(f"prefill instance {instance} lies outside the {self.nodes.prefill_nodes} prefill nodes")
        return node

    def fetch(self, instance: int, nbytes: float, now_s: float) -> tuple[float, Buffered]:
        """Read ``nbytes`` for a prompt bound to ``instance`` into a DRAM buffer: (when it is there, where)."""
        node = self._path(self.node_of(instance), now_s)
        side = "DE" if node >= self.nodes.prefill_nodes else "PE"
        hops = [
            (self.snic_free, f"{side} SNIC", node, self.nodes.snic_bytes_per_s),
            (self.dram_write_free, f"{side} DRAM", node, self.nodes.dram_bytes_per_s),
        ]
        done = self._through(hops, nbytes, now_s)
        return done + self.nodes.latency_s, Buffered(node, nbytes)

    def to_gpu(self, instance: int, held: Buffered, now_s: float, compute_s: float) -> float:
        """Move a buffered hit into ``instance``'s GPUs as its prefill starts: the seconds the prefill waits for it
        (module docstring, **two stages**)."""
        decode = held.over_decode(self.nodes.prefill_nodes)
        side = "DE" if decode else "PE"
        hops = [(self.dram_read_free, f"{side} DRAM", held.node, self.nodes.dram_bytes_per_s)]
        if decode:
            out_rate = self.nodes.gpus_per_node * self.nodes.cnic_bytes_per_s
            hops.append((self.cnic_out_free, "DE CNIC out", held.node, out_rate))
        hops.append((self.h2d_free, "PE host-to-device", instance, self.h2d_rate))
        transfer = self._through(hops, held.nbytes, now_s) - now_s
        if not self.nodes.layerwise:
            return transfer
        layers = self.nodes.n_layers
        per_layer, compute = transfer / layers, compute_s / layers
        return per_layer + (layers - 1) * max(per_layer - compute, 0.0)

    def _path(self, pe_node: int, now_s: float) -> int:
        """The node whose SNIC reads (module docstring, **path choice**)."""
        policy = self.nodes.policy
        if policy == "prefill":
            return pe_node
        first = self.nodes.prefill_nodes
        de_free = self.snic_free[first:]
        de_node = first + min(range(len(de_free)), key=de_free.__getitem__)
        if policy == "split":
            return de_node if self.rng.random() < self.nodes.de_fraction else pe_node
        pe_backlog = max(self.snic_free[pe_node] - now_s, 0.0)
        de_backlog = max(self.snic_free[de_node] - now_s, 0.0)
        return de_node if de_backlog < pe_backlog else pe_node

    def _through(self, hops: list[tuple[list[float], str, int, float]], nbytes: float, now_s: float) -> float:
        """Cut-through over FCFS servers (module docstring): when the last byte leaves the last one."""
        start = done = now_s
        for free, kind, index, rate in hops:
            busy = nbytes / rate
            start = max(start, free[index])
            free[index] = start + busy
            done = max(done, start + busy)
            self.log.append((now_s, kind, index, busy))
        return done

    def summary(self, window_s: tuple[float, float]) -> ReadPathStats:
        """The reads issued in ``window_s``: per resource kind the busiest server's work over the window's length,
        and the decode path's share of the bytes read."""
        span = window_s[1] - window_s[0]
        if not span > 0:
            raise SpecError("the read paths' utilisation needs a window of positive length")
        busy: dict[tuple[str, int], float] = {}
        for t, kind, index, seconds in self.log:
            if window_s[0] <= t < window_s[1]:
                busy[(kind, index)] = busy.get((kind, index), 0.0) + seconds
        out = dict.fromkeys(RESOURCES, 0.0)
        for (kind, _), seconds in busy.items():
            out[kind] = max(out[kind], seconds / span)
        snic = {side: sum(v for (k, _), v in busy.items() if k == f"{side} SNIC") for side in ("PE", "DE")}
        total = snic["PE"] + snic["DE"]
        binding = max(RESOURCES, key=out.__getitem__)
        return ReadPathStats(self.nodes.tier, self.nodes.policy, snic["DE"] / total if total > 0 else 0.0, binding, out)


@dataclass(frozen=True, slots=True)
class ReadPathStats:
    """What the read paths did over a run's measurement window (:meth:`StorageReads.summary`)."""

    tier: str
    policy: ReadPolicy
    de_share: float
    """The decode path's share of the bytes read."""
    busiest: str
    utilisation: dict[str, float]
    """Per resource kind, its busiest server's utilisation."""

    def read_limit_rps(self, offered_rps: float) -> float:
        """The request rate at which the busiest server saturates, at these reads per request: the offered rate
        over the busiest utilisation (every server's work is proportional to the rate)."""
        top = self.utilisation[self.busiest]
        return offered_rps / top if top > 0 else math.inf
