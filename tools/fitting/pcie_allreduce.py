"""The all-reduce of PCIe-only GPUs at 4 and 8 GPUs, from published nccl-tests measurements (issue 23 item 7).

AIConfigurator's one PCIe box (``aiconfigurator-kernels/l40s/nccl.csv``, NCCL 2.27.3) measured a 1 GiB fp16
all-reduce on 8 L40S in 649 ms (bus bandwidth 1.45 GB/s, 0.046 of PCIe Gen4 x16) and 5.1 GB/s on 4 (0.16): a box with
no fast GPU-to-GPU path, far below what published PCIe servers sustain. Its 2-GPU rows (20 GB/s, 0.62 of the link)
are in line with those servers and stay as fitted.

Rule, for a PCIe-only part with link rate L (bytes/s per direction, ``hardware_db/gpus/<gpu>.yaml``) and n in
:data:`RULE_COUNTS`: bus bandwidth = s(n) · L, where s(n) is the lowest large-message share of the link among the
published n-GPU measurements of :data:`PUBLISHED` (0.444 at 8 GPUs, 0.556 at 4): the most a planner can promise
without knowing the server's CPU, PCIe switches and NUMA layout, which bound PCIe all-reduce (NCCL's maintainer in
NVIDIA/nccl #1639: "the performance you get is usually determined by the bandwidth your CPU and memory can deliver").
The time of one all-reduce is then α + 2(n−1)/n · bytes / (s(n) · L) (the ring α-β of
:func:`pdplan.perf.kernels.allreduce_time_s`, whose bus bandwidth nccl-tests reports as busbw).

α (the small-message latency) stays the box's own fit: its small rows are latency-bound, not bandwidth-bound, and
read 11.96 µs (4 GPUs) and 22.42 µs (8 GPUs) at 512 elements, next to the fitted 11.5 and 21.7 µs. The one
published 8-GPU Gen4 small-message figure found, 8×RTX 4090 at 42.1 µs for 8 B (NVIDIA/nccl #1530, nccl-tests
without CUDA graphs, so with launch cost inside), is the same order.

The custom all-reduce takes the same numbers at 4 and 8 GPUs: vLLM disables its custom kernel on more than two
PCIe-only GPUs (``custom_all_reduce.py``: "Custom allreduce is disabled because it's not supported on more than two
PCIe-only GPUs", quoted in vllm-project/vllm #56128), so NCCL runs there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

RULE_COUNTS = (4, 8)
"""GPU counts whose PCIe all-reduce entries the rule replaces (2 GPUs keep the measured fit)."""


@dataclass(frozen=True)
class PublishedBusbw:
    """One published large-message nccl-tests ``all_reduce_perf`` bus bandwidth on a PCIe-only server."""

    box: str
    num_gpus: int
    link_bytes_per_s: float
    """The GPUs' PCIe x16 rate per direction: Gen4 31.5 GB/s, Gen5 63 GB/s (hpc-notes.pages.dev/reference/pcie)."""
    bus_bytes_per_s: float
    source: str

    @property
    def share(self) -> float:
        """Bus bandwidth as a fraction of the link."""
        return self.bus_bytes_per_s / self.link_bytes_per_s


PUBLISHED = (
    PublishedBusbw(
        "8x H100 PCIe without NVSwitch (Gen5)",
        8,
        63e9,
        35e9,
        "https://docs.alayanew.com/en/docs/tech-blog/2026-05-06-nccl-tests (all_reduce busbw 35-45 GB/s; the low end)",
    ),
    PublishedBusbw(
        "8x RTX 5090, dual Xeon 8480+ (Gen5)",
        8,
        63e9,
        28e9,
        "https://github.com/NVIDIA/nccl/issues/1639 (all_reduce_perf -b 1g -e 8g -g 8: max busbw 28 GB/s)",
    ),
    PublishedBusbw(
        "4x RTX 5090, dual Xeon 8480+ (Gen5)",
        4,
        63e9,
        35e9,
        "https://github.com/NVIDIA/nccl/issues/1639 (same server, 4 GPUs: max busbw 35 GB/s)",
    ),
    PublishedBusbw(
        "4x RTX 4090, EPYC 7773X, P2P driver (Gen4)",
        4,
        31.5e9,
        25.95e9,
        "https://github.com/tinygrad/open-gpu-kernel-modules/issues/36 (all_reduce_perf -g 4: 1 GiB in 62077 us, "
        "busbw 25.95 GB/s; 25.72 at 256 MiB)",
    ),
)
"""Every published figure the rule reads, with its URL (the shares: 0.556, 0.444, 0.556, 0.824)."""


def published_band(num_gpus: int) -> tuple[float, float]:
    """(lowest, highest) published share of the link at ``num_gpus`` GPUs: the band a PCIe table must sit in."""
    shares = [p.share for p in PUBLISHED if p.num_gpus == num_gpus]
    return min(shares), max(shares)


def share_of_link(num_gpus: int) -> float:
    """s(n): the lowest published large-message share of the link at ``num_gpus`` GPUs (module docstring)."""
    return published_band(num_gpus)[0]


def published_pcie_allreduce(allreduce: dict[str, Any], link_bytes_per_s: float) -> dict[str, Any]:
    """``allreduce`` (a kernel table's block) with its custom and NCCL entries at 4 and 8 GPUs priced by the rule.

    Each becomes NCCL's fitted α at that count with bus bandwidth s(n) · ``link_bytes_per_s`` (4 significant digits,
    as the fitted entries); the fallback and every other count are kept.
    """
    custom, nccl = dict(allreduce.get("custom", {})), dict(allreduce.get("nccl", {}))
    for n in RULE_COUNTS:
        entry = {"alpha_s": nccl[n]["alpha_s"], "bus_bytes_per_s": float(f"{share_of_link(n) * link_bytes_per_s:.4g}")}
        custom[n], nccl[n] = entry, dict(entry)
    return {**allreduce, "custom": dict(sorted(custom.items())), "nccl": dict(sorted(nccl.items()))}


def rule_note(link_bytes_per_s: float) -> str:
    """The table's source note for the replaced entries."""
    parts = ", ".join(f"{n} GPUs {share_of_link(n):.3f} x {link_bytes_per_s / 1e9:.1f} GB/s" for n in RULE_COUNTS)
    cites = "; ".join(f"{p.box}: {p.bus_bytes_per_s / 1e9:g} GB/s, {p.source}" for p in PUBLISHED)
    return (
        f". At {' and '.join(map(str, RULE_COUNTS))} GPUs (custom and NCCL) NOT the box's fit (a box without a fast "
        "GPU-to-GPU path: 1.45 GB/s bus at 8 GPUs, 5.1 at 4): bus bandwidth = the lowest published large-message share "
        f"of the PCIe link at that GPU count ({parts}), alpha = the box's NCCL fit (tools/fitting/pcie_allreduce.py). "
        f"Published: {cites}"
    )
