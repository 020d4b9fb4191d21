"""DualPath read paths in a bound xPyD deployment (scenario ``cache: read_paths: dual``; :mod:`pdplan.cache.dual_path`,
docs/prefix_cache.md §10): the cluster the read-path model needs, the read limit it sets, and its report.

**Which tier.** The first ``remote-pool`` tier of ``cache.tiers``: a remote pool is read over the node's storage
NIC (DualPath §2.3: a DGX SuperPOD node has one storage NIC apart from its compute NICs). Host DRAM and local SSD
are read inside the node, with no second path.

**The cluster** (the paper's notation). P and D: the prefill and decode pools' GPUs over the GPUs of a node, g of
the prefill GPU (instances smaller than a node give fractional nodes); B: the P→D link's achievable bandwidth
(line rate × efficiency), one NIC per GPU as in the KV-transfer model; S: the pool's ``read_bytes_per_s``, per
node by the storage catalogue's convention (``pdplan/specs/storage.py``); p: the pool's ``gpu_path_bytes_per_s``;
M: the ``cache.staging_dram`` entry's ``read_bytes_per_s``.

**The limit.** The prefill instances read the tier at R = (their count) × (one instance's read rate) at the hit
rates' request rate λ_c; at the chosen split the busiest resource is at utilisation u (every utilisation is
proportional to R, so to the rate at fixed hit rates), so the tier's reads saturate at λ_c / u. This replaces the
prefill node's own path (the tier's medium and GPU-path elements) in :func:`pdplan.serving.limits.cache_read_limit`.

**The load: two stages** (DualPath §4 and §6.1: a request's hit is read into a DRAM buffer while it waits for its
prefill engine, the TTFT being scheduling, allocation, reading and prefill; the buffer is moved to the GPU while
the prefill runs, layer by layer). A request's hit is read over ONE path (§6.1: splitting a request over both is
future work), the decode path with probability f (the split).

* *Storage → DRAM, before the prefill queue* (:class:`StorageReadStage`, :func:`storage_read_stage`): the tier's
  hit bytes ``b`` of a request stream through one node's SNIC into its DRAM, cut-through at the slower of the two,
  ``v = min(S, M)`` on either path (the decode path's CNIC hop belongs to the second stage), so the transfer takes
  ``b / v``. Each SNIC is a FCFS queue of reads of service ``X = b/S``, ρ its utilisation of the fluid model at the
  rate (PE SNIC for the prefill path, DE SNIC for the decode path, each proportional to the rate at fixed hit rates),
  the moments over the requests that read the tier (Poisson thinning: a node's SNIC sees a fraction of a Poisson
  stream); the waits are in **The SNIC waits**. The stage adds the fixed ``b/v`` and the SNIC wait's law (**The
  wait's law**) to the request's TTFT and does not hold the prefill instance; its rate limit is the fluid bound
  (**the limit**), unchanged.
* *DRAM → GPU, under the prefill* (:func:`dual_path_cache`): the buffer reaches the prefill instance's k GPUs over
  their PCIe (prefill path) or the compute network (decode path, one CNIC per GPU), ``k·min(p, B)`` (the decode
  node's g CNICs carry ``g·B ≥ k·B`` for k ≤ g); the tier's path is that hop alone, exposed against the compute by
  the tiers' rule (:mod:`pdplan.cache.tiers`) and holding the instance.

**The SNIC waits.** A read over the prefill path has one server, its prefill node's SNIC: the M/G/1
(Pollaczek–Khinchine) mean wait ``W_PE = ρ/(1 − ρ)·R``, ``R = E[X²]/(2E[X])`` (Kleinrock, *Queueing Systems* I,
1975, eq. 5.65, the residual-life form). A read over the decode path goes to the decode node whose SNIC has the least
work queued (DualPath §6.1: the DE is chosen to balance the DEs' load; the simulator takes the shortest SNIC
queue): assigning each arrival to the FCFS server with the least work left is the central FCFS queue over those
servers (the least-work-left equivalence, Harchol-Balter, *Performance Modeling and Design of Computer Systems*,
2013, ch. 24; :mod:`pdplan.queueing.mgc` prices the prefill pool's ``least-work`` routing the same way), so the
c_D = D decode SNICs are one M/G/c_D queue at their utilisation ρ_DE, whose mean wait is Allen–Cunneen's
``W_DE = (1 + c_s²)/2·C(c, cρ)·E[X]/(c(1 − ρ)) = R·C(c, cρ)/(c(1 − ρ))`` (Allen, *Probability, Statistics and
Queueing Theory*, 1990; C the Erlang-C probability; exact for exponential X, and for c = 1 the M/G/1 above, C(1, ρ) =
ρ). Thinning the Poisson stream to the decode nodes at random instead (D independent M/G/1s at ρ_DE) over-counts it:
at the example's optimal split (ρ_DE = 0.41, D = 4) 44 ms against 3 ms. Under DualPath's rule (``snic-balanced``:
each read to its prefill node's SNIC or the least-loaded decode node's, the shorter queue) a read chooses among every
SNIC but the other prefill nodes': the P + D SNICs are taken as one central M/G/(P + D) queue at their common fluid
utilisation (exact with one prefill node; the rule's tie to the prefill node and its fluid split below saturation
are left out: the fluid split sets the utilisations, **the limit**).

**The wait's law.** Each path's wait is an atom ``1 − P_w`` at 0 and an exponential tail of mean
``E[W | W > 0]``: for the M/G/1, ``P_w = ρ`` (the server's busy probability, which a Poisson arrival sees: PASTA)
and ``E[W | W > 0] = W/ρ = R/(1 − ρ)``; for the M/G/c, ``P_w = C(c, cρ)`` and ``E[W | W > 0] = W/C =
R/(c(1 − ρ))``, the Allen–Cunneen mean over the Erlang-C probability. The split mixes them: a read takes the prefill
path with probability 1 − f and the decode path with f (DualPath's rule: its one pooled queue). Exact for the
M/M/c, whose waiting time is ``P(W > t) = C(c, cρ)·e^{−(cμ − λ)t}``, so W given W > 0 exponential of mean
``E[X]/(c(1 − ρ))`` (Gross, Shortle, Thompson and Harris, *Fundamentals of Queueing Theory*, 4th ed., 2008, §2.3;
c = 1: ``P(W > t) = ρe^{−(1 − ρ)t/E[X]}``). For general X the shape is kept and its scale set by the mean above (the
M/M/c's tail with Allen–Cunneen's ``(1 + c_s²)/2`` factor, as :mod:`pdplan.queueing.kv_admission` prices its
admission wait): a two-moment approximation whose mean is the M/G/c's, its tail exponential only asymptotically
(Cramér–Lundberg: the M/G/1 wait's tail decays exponentially at a rate the service law's transform sets). Its
mean is ``Σ share·P_w·E[W | W > 0]``, the means above exactly: each path's tail is discretised at
:func:`~pdplan.queueing.link_delay.tail_bands`' probability bands, each point the exponential's conditional mean over
its band (:func:`exponential_band_means`, which average to 1), not its mid-band quantile. The wait is independent of
the request's prefill wait (two queues; the prefill queue's arrivals are the reads' departures, taken Poisson as
before) and of the KV link's delay: the laws are convolved (:func:`add_read_wait`).

Poisson reads are the waits' one assumption about the sessions. Sessions with a fixed think time and fixed outputs
return spaced by the reads that separated them, and their SNIC waits fall below the M/G/1's (the agent preset at
the prefill-only split: 11–30 % in the mean, 34–42 % at P90, below the same services behind Poisson arrivals) while
their gaps are burstier (c² 1.2–1.6): the arrivals depend on the queue's own past, which no correction by the gaps'
c² (Kingman, QNA) describes (it moves the wait up); not modelled (docs/prefix_cache.md §10, *Can the closed form
price the synchrony?*; ``benchmarks/dualpath_snic_sync.py``).

The simulator (:mod:`pdplan.sim.storage_paths`) replays the same two stages over FCFS servers, from the mechanism.

**The comparison.** The report adds the same plan with every read over the prefill nodes in the same resource model
(``dual_split: 0``, :func:`prefill_only`), so the gain is DualPath's alone: ``read_paths: prefill`` prices the tier
with the catalogue's per-path elements instead (the same per-node bandwidth, the load held by the prefill instance).

**Cache-compute ratio** of the workload at the rate: mean hit KV bytes per request over the prefill FLOPs of the
mean append on the mean hit (:func:`pdplan.cache.dual_path.append_prefill_flops` at the means, an approximation of
the mean of the ratio's parts: the FLOPs are near-linear in the append at long contexts).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from pdplan.cache.dual_path import (
    DualPathCluster,
    ReadPathLoad,
    append_prefill_flops,
    cache_compute_ratio_gb_per_pflop,
    max_read_bytes_per_s,
    optimal_split,
    read_path_load,
    snic_balanced_split,
)
from pdplan.errors import SpecError
from pdplan.numerics.gamma import xlogy
from pdplan.queueing.erlang import erlang_c
from pdplan.queueing.link_delay import BinDelay, tail_bands
from pdplan.serving.cache_mechanisms import SNIC_KINDS
from pdplan.serving.resolve import DisaggregatedHardware, ResolvedScenario
from pdplan.types import FloatArray

if TYPE_CHECKING:
    from pdplan.serving.prefix_cache import CacheClasses, CacheSetup


WAIT_POINTS = 8
"""Band points of each read path's exponential wait tail (:meth:`StorageReadStage.wait_law`), as many as the KV
admission wait's (:data:`pdplan.queueing.kv_admission.ADMISSION_POINTS`)."""


HELD_HOP = "DRAM buffer -> GPU (PCIe, or the compute network from a decode node), one GPU"
"""The DualPath tier's path element the prefill instance holds (module docstring, **the load**)."""


@dataclass(frozen=True, slots=True)
class DualPathSetting:
    """The tier DualPath reads, the cluster it reads over, the split, and how many cache domains read it."""

    tier: str
    cluster: DualPathCluster
    split: str | float
    prefill_instances: int

    def de_fraction(self) -> float:
        if self.split == "optimal":
            return optimal_split(self.cluster)
        if self.split == "snic-balanced":
            return snic_balanced_split(self.cluster)
        return float(self.split)

    def load(self, classes: CacheClasses) -> ReadPathLoad | None:
        """Every resource's utilisation at the classes' rate (None: the tier is not among them)."""
        use = next((t for t in classes.tiers if t.name == self.tier), None)
        if use is None:
            return None
        return read_path_load(self.cluster, use.read_bytes_per_s * self.prefill_instances, self.de_fraction())


def dual_path_setting(res: ResolvedScenario[Any]) -> DualPathSetting | None:
    """The deployment's DualPath setting; None unless its cache reads ``dual`` (bad input: a colocated deployment or
    no tier behind a storage NIC)."""
    setup = res.cache
    if setup is None or setup.spec.read_paths == "prefill":
        return None
    hw = res.hardware
    if not isinstance(hw, DisaggregatedHardware):
        raise SpecError("read_paths: dual needs an xPyD deployment (the decode nodes' storage NICs)", field="cache")
    tiers = [s for s in setup.storages if s.kind in SNIC_KINDS]
    if not tiers:
        raise SpecError(
            "read_paths: dual needs a tier behind a storage NIC (a remote-pool entry in cache.tiers)", field="cache"
        )
    storage, g = tiers[0], hw.prefill.gpu.gpus_per_node
    counts = hw.deployment
    cluster = DualPathCluster(
        prefill_nodes=counts.prefill.count * hw.prefill.gpus_per_instance / g,
        decode_nodes=counts.decode.count * hw.decode.gpus_per_instance / g,
        gpus_per_node=g,
        cnic_bytes_per_s=hw.link.achievable_bytes_per_s,
        snic_bytes_per_s=storage.read_bytes_per_s,
        dram_bytes_per_s=res.catalog.storage(setup.spec.staging_dram).read_bytes_per_s,
        pcie_bytes_per_s=storage.gpu_path_bytes_per_s,
    )
    instances = counts.prefill.count * hw.prefill.dp
    return DualPathSetting(storage.name, cluster, setup.spec.dual_split, instances)


def dual_path_cache(res: ResolvedScenario[Any], setup: CacheSetup) -> CacheSetup:
    """``setup`` with the DualPath tier's held path the buffer → GPU hop alone (module docstring, **the load**: the
    storage → DRAM stage is :func:`storage_read_stage`, before the queue); unchanged with prefill-only reads."""
    setting = dual_path_setting(res)
    if setting is None:
        return setup
    cluster = setting.cluster
    hop = min(cluster.pcie_bytes_per_s, cluster.cnic_bytes_per_s)  # per GPU; the tier's path widens it to k GPUs
    update = {"read_bytes_per_s": math.inf, "gpu_path_bytes_per_s": hop, "gpu_path": HELD_HOP}
    storages = tuple(s.model_copy(update=update) if s.name == setting.tier else s for s in setup.storages)
    return dataclasses.replace(setup, storages=storages)


@dataclass(frozen=True, slots=True)
class StorageReadStage:
    """DualPath's storage → DRAM stage of each (bin-class, point) before its prefill queue (module docstring). With
    PPD (``cache: turn_placement``) each bin gains a decode class whose appends read nothing from the tier
    (:mod:`pdplan.serving.ppd_model`): :meth:`fixed_s`, :meth:`wait_law` and :meth:`mean_s` take those rows as
    zero."""

    transfer_s: FloatArray
    """``[K·H, J]`` the tier's hit bytes over ``min(S, M)``."""
    residual_s: float
    """``E[X²]/(2E[X])`` of a read's SNIC service ``X = b/S`` over the requests that read the tier."""
    snic_utilisation_per_rps: tuple[float, float]
    """The PE and DE SNICs' utilisations per request/s of the deployment."""
    de_fraction: float
    bins: int
    """K, the prompt bins."""
    fetch_over_snic: float = 1.0
    """``min(S, M)/S``: a read's SNIC service over its transfer (``X = b/S``, transfer ``b/min(S, M)``)."""
    reads: FloatArray | None = None
    """``[rows]`` 1 where the row reads the tier, 0 for PPD's decode rows (:func:`placed_read_stage`); None: every
    row of ``transfer_s``."""
    decode_servers: int = 1
    """c_D: the decode nodes' SNICs a read over the decode path may take (the least-loaded one; module docstring,
    **The SNIC waits**)."""
    pooled_servers: int = 0
    """DualPath's rule (``snic-balanced``): the SNICs every read chooses among, its own prefill node's and every
    decode node's, as one central queue (0: the split's two paths apart)."""

    def wait_s(self, rates_rps: FloatArray) -> FloatArray:
        """``[R]`` the mean SNIC wait (inf at or past a SNIC's saturation; module docstring, **The SNIC waits**):
        ``(1 − f)·W_PE + f·W_DE``, W_PE the prefill node's M/G/1 and W_DE the M/G/c_D of the decode nodes' SNICs,
        or under DualPath's rule the M/G/c of the pooled SNICs at their common (fluid, balanced) utilisation."""
        rates = np.atleast_1d(np.asarray(rates_rps, dtype=np.float64))
        total = np.zeros_like(rates)
        for share, prob, cond in self._paths(rates):
            total += share * self._mean(prob, cond)
        return total

    def _paths(self, rates: FloatArray) -> list[tuple[float, FloatArray, FloatArray]]:
        """``(share, P_w, E[W | W > 0])`` of each path a read may take (module docstring, **The wait's law**): the
        prefill node's SNIC with 1 − f, the decode nodes' with f (a path of no share left out), or DualPath's rule's
        pooled SNICs with 1."""
        pe, de = self.snic_utilisation_per_rps
        if self.pooled_servers > 0:
            return [(1.0, *self._mgc_wait(rates * max(pe, de), self.pooled_servers))]
        f = self.de_fraction
        paths = ((1.0 - f, pe, 1), (f, de, self.decode_servers))
        return [(share, *self._mgc_wait(rates * per_rps, c)) for share, per_rps, c in paths if share > 0.0]

    @staticmethod
    def _mean(prob: FloatArray, cond: FloatArray) -> FloatArray:
        """``P_w·E[W | W > 0]``, 0 where nothing waits (also where nothing is read: R = 0)."""
        return np.where(prob > 0.0, prob * cond, 0.0)

    def _mgc_wait(self, rho: FloatArray, servers: int) -> tuple[FloatArray, FloatArray]:
        """``(P_w, E[W | W > 0])`` of the M/G/c at utilisation ρ per server: ``(C(c, cρ), R/(c(1 − ρ)))`` (R =
        :attr:`residual_s`; Allen–Cunneen's mean ``R·C/(c(1 − ρ))`` over C; c = 1: C(1, ρ) = ρ, the M/G/1's
        ``R·ρ/(1 − ρ)``); ``(1, inf)`` at ρ ≥ 1."""
        prob, cond = np.ones(rho.shape), np.full(rho.shape, math.inf)
        ok = rho < 1.0
        if np.any(ok):
            prob[ok] = rho[ok] if servers == 1 else erlang_c(servers, servers * rho[ok])
            cond[ok] = self.residual_s / (servers * (1.0 - rho[ok]))
        return prob, cond

    def wait_law(self, rates_rps: FloatArray, rows: int, points: int = WAIT_POINTS) -> BinDelay:
        """The SNIC wait's law per rate and row (module docstring, **The wait's law**): an atom ``1 − Σ share·P_w``
        at 0 and, per path, ``points`` band points of its exponential tail at the bands' conditional means, of
        weights ``share·P_w·width``; its mean is :meth:`wait_s` (to rounding). ``[R, 1, ·]`` when every row reads
        the tier, else ``[R, rows, ·]`` with the rows that read nothing (PPD's decode rows) an atom 1 at 0."""
        rates = np.atleast_1d(np.asarray(rates_rps, dtype=np.float64))
        _, reads = self._rows(rows)
        _, widths = tail_bands(points)
        factors = exponential_band_means(points)
        paths = self._paths(rates)
        tails = [np.where(prob > 0.0, cond, 0.0)[:, None] * factors[None, :] for _, prob, cond in paths]
        masses = [share * prob[:, None] * widths[None, :] for share, prob, _ in paths]
        waiting = np.concatenate(masses, axis=1)  # [R, paths·points]
        pts = np.concatenate([np.zeros((rates.size, 1)), *tails], axis=1)
        wts = np.concatenate([1.0 - waiting.sum(axis=1, keepdims=True), waiting], axis=1)
        if bool(np.all(reads > 0)):
            return BinDelay(pts[:, None, :], wts[:, None, :])
        none = np.zeros_like(wts)
        none[:, 0] = 1.0
        on = reads[None, :, None] > 0
        return BinDelay(np.where(on, pts[:, None, :], 0.0), np.where(on, wts[:, None, :], none[:, None, :]))

    def _rows(self, rows: int) -> tuple[FloatArray, FloatArray]:
        """(transfer ``[rows, J]``, 1 where the row reads the tier ``[rows]``) for ``rows`` = K·H, or K·(H + 1)
        with PPD's decode class (zero) appended to each bin."""
        transfer, n = self.transfer_s, self.transfer_s.shape[0]
        if rows == n:
            return transfer, np.ones(n) if self.reads is None else self.reads
        k = self.bins
        if rows != n + k:
            raise ValueError(f"storage read stage: {n} rows over {k} bins, asked for {rows}")
        h, j = n // k, transfer.shape[1]
        padded = np.concatenate((transfer.reshape(k, h, j), np.zeros((k, 1, j))), axis=1).reshape(rows, j)
        reads = np.concatenate((np.ones((k, h)), np.zeros((k, 1))), axis=1).ravel()
        return padded, reads

    def fixed_s(self, rows: int) -> FloatArray:
        """``[rows, J]`` each point's fixed part of the stage, its transfer ``b/v`` (the wait: :meth:`wait_law`)."""
        return self._rows(rows)[0]

    def mean_s(self, rate_rps: float, prob: FloatArray) -> float:
        """The stage's mean at ``rate_rps`` over the rows' probabilities ``prob``."""
        transfer, reads = self._rows(prob.size)
        return float(prob @ transfer.mean(axis=1) + (prob @ reads) * self.wait_s(np.array([rate_rps]))[0])


def exponential_band_means(points: int) -> FloatArray:
    """``E[Y | Y in band j]`` ``[points]`` of the unit exponential Y over the probability bands ``[a, b]`` of
    :func:`~pdplan.queueing.link_delay.tail_bands`:
    ``∫_a^b −ln(1 − u) du / (b − a) = 1 + ((1 − b)ln(1 − b) − (1 − a)ln(1 − a))/(b − a)``
    (``(1 − u)ln(1 − u) + u`` is ``−ln(1 − u)``'s antiderivative; its first term is 0 at u = 0 and at u = 1).
    Weighted by the widths they sum to 1, the telescoped ``1 + (0 − 0)``: the discretised tail keeps its mean."""
    _, widths = tail_bands(points)
    edges = np.concatenate(([0.0], np.cumsum(widths)))
    edges[-1] = 1.0
    term = xlogy(1.0 - edges, 1.0 - edges)
    return np.asarray(1.0 + np.diff(term) / widths, dtype=np.float64)


def add_read_wait(link: BinDelay, wait: BinDelay) -> BinDelay:
    """The sum of the KV link's delay and the independent SNIC wait (module docstring, **The wait's law**), exactly:
    every pair of points, weights multiplied (``[R, bins, P·Q]``; a bin axis of length 1 broadcasts). No link delay
    (one point at 0): the wait itself."""
    if link.points_s.shape[2] == 1 and not np.any(link.points_s):
        return wait
    r = max(link.points_s.shape[0], wait.points_s.shape[0])
    bins = max(link.points_s.shape[1], wait.points_s.shape[1])
    p, q = link.points_s.shape[2], wait.points_s.shape[2]
    pts = link.points_s[:, :, :, None] + wait.points_s[:, :, None, :]
    wts = link.weights[:, :, :, None] * wait.weights[:, :, None, :]
    shape = (r, bins, p, q)
    return BinDelay(
        np.broadcast_to(pts, shape).reshape(r, bins, p * q), np.broadcast_to(wts, shape).reshape(r, bins, p * q)
    )


def storage_read_stage(
    res: ResolvedScenario[Any], classes: CacheClasses, cached_tokens: FloatArray, prob: FloatArray
) -> StorageReadStage | None:
    """The :class:`StorageReadStage` of the prefill side's points: ``cached_tokens`` ``[K·H, J]`` each point's hit
    tokens, ``prob`` ``[K·H]`` the bin-classes' probabilities (equal-weight points). None without DualPath reads
    or when the tier is not among the classes' tiers."""
    setting = dual_path_setting(res)
    if setting is None:
        return None
    g = next((i for i, t in enumerate(classes.load_from) if t is not None and t.name == setting.tier), None)
    load = setting.load(classes)
    if g is None or load is None:
        return None
    k, h = classes.weights.shape
    share = classes.tier_share[:, :, g].reshape(k * h, 1)
    kvb = res.model.kv_bytes_per_token(res.hardware.prefill.precision.kv_bytes)
    read_bytes = cached_tokens * share * kvb
    cluster = setting.cluster
    s = cluster.snic_bytes_per_s
    v = min(s, cluster.dram_bytes_per_s)
    transfer = read_bytes / v
    per_rps = (load.utilisation["PE SNIC"] / classes.rate_rps, load.utilisation["DE SNIC"] / classes.rate_rps)
    decode_servers = max(1, round(cluster.decode_nodes))
    pooled = max(1, round(cluster.prefill_nodes + cluster.decode_nodes)) if setting.split == "snic-balanced" else 0
    residual = read_residual_s(transfer, prob, v / s)
    return StorageReadStage(transfer, residual, per_rps, load.de_fraction, k, v / s, None, decode_servers, pooled)


def read_residual_s(transfer_s: FloatArray, prob: FloatArray, fetch_over_snic: float) -> float:
    """``E[X²]/(2E[X])`` of a read's SNIC service ``X = (v/S)·t`` (t its transfer ``b/v``, ``v = min(S, M)``) over
    the rows' law ``prob`` ``[rows]``, each row's points ``transfer_s`` ``[rows, J]`` equally weighted: requests that
    read nothing add to neither moment, so it is the moment ratio over the reads (0 where nothing is read)."""
    weight = np.broadcast_to(np.asarray(prob, dtype=np.float64)[:, None], transfer_s.shape)
    first = float(np.sum(weight * transfer_s))
    return 0.0 if first <= 0.0 else fetch_over_snic * float(np.sum(weight * transfer_s**2)) / (2.0 * first)


def placed_read_stage(res: ResolvedScenario[Any], stage: StorageReadStage | None, classes: CacheClasses,
                      prob: FloatArray) -> StorageReadStage | None:  # fmt: skip
    """``stage`` in a PPD model (:func:`pdplan.serving.ppd_model.place_turns`): ``classes`` the placed model's
    (K bins × H + 1 classes, the decode class last; its tiers' read bytes those of the turns left on the prefill
    pool), ``prob`` ``[K·(H + 1)]`` its rows' law. A turn appended on the decode instance that holds its session
    reads nothing from the tier: its row has no transfer and no SNIC wait, and only the prefill-pool turns load the
    SNICs, so each SNIC's utilisation per request/s is the fluid model's on the placed classes' read bytes
    (``λ·Σ_b P'(b, h)·hit(b, h)`` over the prefill-side rows, :func:`pdplan.serving.ppd_model._prefill_tiers`),
    not plain disaggregation's (every turn). The residual ``E[X²]/(2E[X])`` is taken over the placed rows' law (each
    row's points equally weighted; rows that read nothing add to neither moment). None: no stage."""
    setting = dual_path_setting(res)
    if stage is None or setting is None:
        return None
    load = setting.load(classes)
    if load is None:
        return None
    transfer, reads = stage._rows(prob.size)
    return dataclasses.replace(
        stage,
        transfer_s=transfer,
        residual_s=read_residual_s(transfer, prob, stage.fetch_over_snic),
        snic_utilisation_per_rps=(
            load.utilisation["PE SNIC"] / classes.rate_rps,
            load.utilisation["DE SNIC"] / classes.rate_rps,
        ),
        de_fraction=load.de_fraction,
        reads=reads,
    )


@dataclass(frozen=True, slots=True)
class DualPathReport:
    """What DualPath does in a plan at the hit rates' rate (docs/json_keys.md ``cache.dual_path``)."""

    tier: str
    de_fraction: float
    snic_balanced_fraction: float
    binding: str
    utilisation: dict[str, float]
    read_limit_rps: float
    prefill_only_read_limit_rps: float
    cache_compute_gb_per_pflop: float | None
    goodput_prefill_only_rps: float | None = None
    """The same plan with prefill-only reads (None: not computed)."""

    def gain(self, goodput_rps: float) -> float | None:
        """The plan's goodput over the same plan's with prefill-only reads."""
        base = self.goodput_prefill_only_rps
        return None if base is None or base <= 0 else goodput_rps / base

    @property
    def read_limit_gain(self) -> float:
        """The tier's read bound with DualPath over prefill-only reads, in the same resource model."""
        return self.read_limit_rps / self.prefill_only_read_limit_rps

    def to_document(self, goodput_rps: float) -> dict[str, Any]:
        return {
            "tier": self.tier,
            "de_fraction": self.de_fraction,
            "snic_balanced_fraction": self.snic_balanced_fraction,
            "binding_resource": self.binding,
            "utilisation": dict(self.utilisation),
            "read_limit_rps": self.read_limit_rps,
            "prefill_only_read_limit_rps": self.prefill_only_read_limit_rps,
            "read_limit_gain": self.read_limit_gain,
            "cache_compute_gb_per_pflop": self.cache_compute_gb_per_pflop,
            "goodput_prefill_only_rps": self.goodput_prefill_only_rps,
            "gain_vs_prefill_only": self.gain(goodput_rps),
        }


def prefill_only(res: ResolvedScenario[Any]) -> ResolvedScenario[Any]:
    """``res`` with every hit read over the prefill nodes in the same resource model (``dual_split: 0``), so that
    the gain is DualPath's alone (``read_paths: prefill`` prices the tier with the storage catalogue's path
    elements, its load held by the prefill instance)."""
    if res.cache is None:
        return res
    spec = res.cache.spec.model_copy(update={"dual_split": 0.0})
    return dataclasses.replace(res, cache=dataclasses.replace(res.cache, spec=spec))


def dual_path_report(
    res: ResolvedScenario[Any],
    classes: CacheClasses | None,
    goodput_of: Callable[[ResolvedScenario[Any]], float] | None = None,
) -> DualPathReport | None:
    """The plan's :class:`DualPathReport` (None: no cache, prefill-only reads, or nothing read from the tier);
    ``goodput_of`` prices the same plan with prefill-only reads (:func:`prefill_only`) for the mechanism's gain."""
    setting = dual_path_setting(res)
    if setting is None or classes is None:
        return None
    load = setting.load(classes)
    if load is None or load.read_bytes_per_s <= 0:
        return None
    per_rps = load.read_bytes_per_s / classes.rate_rps
    cluster = setting.cluster
    return DualPathReport(
        tier=setting.tier,
        de_fraction=load.de_fraction,
        snic_balanced_fraction=snic_balanced_split(cluster),
        binding=load.binding,
        utilisation=load.utilisation,
        read_limit_rps=max_read_bytes_per_s(cluster, load.de_fraction) / per_rps,
        prefill_only_read_limit_rps=max_read_bytes_per_s(cluster, 0.0) / per_rps,
        cache_compute_gb_per_pflop=_ratio(res, classes),
        goodput_prefill_only_rps=None if goodput_of is None else goodput_of(prefill_only(res)),
    )


def _ratio(res: ResolvedScenario[Any], classes: CacheClasses) -> float | None:
    """GB/PFLOP at the means (module docstring); None when nothing hits or nothing is appended."""
    prompt = float(res.lengths.input_marginal() @ res.lengths.input_tokens)
    hit = classes.token_hit_ratio * prompt
    append = prompt - hit
    if hit <= 0 or append <= 0:
        return None
    hw = res.hardware.prefill
    kvb = res.model.kv_bytes_per_token(hw.precision.kv_bytes)
    return cache_compute_ratio_gb_per_pflop(hit, kvb, append_prefill_flops(res.model, append, hit))
