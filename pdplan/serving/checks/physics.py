"""Physics invariants of a priced deployment at an operating rate: ceilings and floors (issue 11).

A plan that breaks one of these is impossible on the hardware it names, whatever the queueing says,
so a breach is a bug in pdplan, not an infeasible input: :func:`check_operating_point` raises
:class:`PhysicsInvariantError` (a plain exception: the CLI exits 1 with the numbers).

Every bound is computed from the roofline's own operator list (:func:`pdplan.perf.ops.forward_ops`:
shapes per operator, per GPU of a TP group, over all layers; FLOPs by the textbook numerators that
:func:`pdplan.perf.roofline.phase_time` reports per op, bytes by
:func:`pdplan.serving.roles.step_bytes`) and the GPU's datasheet peaks
(:class:`pdplan.specs.hardware.GpuSpec`), never from the kernel table's fitted efficiencies nor from
the serving model's fits (the decode step's linearisation, the chunk price), so a check is
independent of the piece it checks. The kernel model prices each op at ``FLOPs/(peak·η_c)`` or
``bytes/(BW·η_m)`` with η ≤ 1, so an op at its peak is a floor the roofline itself respects; the
decode linearisation is constrained to respect the HBM floor (:func:`pdplan.serving.roles.
decode_perf`), which for MoE it did not (found by the property test of this module).

Notation: an instance has TP = t GPUs × PP = p stages; "per GPU" means one GPU of a TP group over
all layers (a stage GPU holds 1/p of that). Per request, ``T_pk`` = Σ_op FLOPs_op / peak_op of its
work per GPU (GEMMs at the FP8 peak when weights are FP8, attention at the FP8 peak when the KV
cache is, else the BF16 peak): prefill of L tokens is one batch-1 pass; decode is n steps at contexts
L … L + n − 1 whose FLOPs are linear in the context, ``n·F(1, L + (n − 1)/2)``.

Ceilings, at total rate λ on a pool of k instances (``λ_k = λ/k``):

* **compute**: ``λ_k E[T_pk] ≤ p`` — rate × E[FLOPs per request] ≤ GPUs × peak, per pool (t GPUs
  share a request's FLOPs, p stages work on p requests at once); colocated: prefill + decode.
* **decode HBM**: bytes read per second per GPU ``B(N̄/p, K̄/N̄)/τ̄ ≤ BW``, with ``B(b, c)`` the
  weight bytes of a step of b sequences (MoE: the experts they touch) plus their KV reads ``b·c·κ``
  (κ the KV bytes per token per GPU), and the model's own mean field (N̄ sequences, K̄ context
  tokens, token interval τ̄): each token interval reads the weights once per micro-batch and every
  sequence's KV once.
* **KV capacity**: resident KV ``λ_k E[work] τ_min ≤ M_kv`` by Little's law at the fastest step
  physics allows, ``τ_min = B(1/p, 0)/BW``, with E[work] = E[nL + n(n − 1)/2] (a model whose every layer is windowed:
  E[Σ_{j<n} min(L + j, w)], :class:`pdplan.queueing.decode.DecodeWorkload`) (and the model's own
  K̄ = λ_k E[work] τ̄ ≤ M_kv); seats ``λ_k E[n] τ_min ≤ max_num_seqs``. Hybrid and sliding-window models add
  s token slots of fixed state per sequence (:mod:`pdplan.perf.memory`): E[work] + s·E[n], K̄ + s·N̄.
* **link**: KV bytes per second ``λ (E[L] kv_bytes_per_token + S) ≤ k_side ν R`` on each side (ν NICs per
  instance, ``nics_per_instance`` or one per GPU, at line rate R; the unique KV plus the fixed per-sequence state S
  that :func:`pdplan.transfer.kv.kv_shape_from_model` sends once, a lower bound on what any granularity sends;
  a model whose every layer is windowed: E[min(L, w)] tokens, what a request-wise transfer sends).

Floors, at the same rate, on the model's distributions:

* **TTFT**: each prompt bin's TTFT ≥ its own prefill at peak, ``T_pk(ℓ)`` for the bin's shortest
  length ℓ (``P(TTFT < T_pk(ℓ)) = 0``): no queue, chunking or pipelining makes a prompt's own FLOPs
  faster than the GPUs' peak.
* **decode step**: the request's own step (the TPOT law's offset: the step with it alone, t0 plus its
  own weight) ≥ ``B(1/p, L + (n − 1)/2)/BW``, the weights and its own KV read at full bandwidth.

Tolerance ``REL_TOL`` (1e-9) absorbs rounding only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pdplan.numerics.sorted_stats import sorted_unique
from pdplan.perf.op_types import PassShape, Phase
from pdplan.perf.ops import forward_ops
from pdplan.queueing import decode_fixed_point, kv_footprint
from pdplan.serving.cache_mechanisms import placement_of
from pdplan.serving.cells import tpot_defined
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.resolve import ResolvedScenario
from pdplan.serving.role_hardware import RoleHardware
from pdplan.serving.roles import step_bytes
from pdplan.serving.snapshot import Snapshot
from pdplan.transfer.kv_inputs import kv_shape_from_model
from pdplan.types import FloatArray

REL_TOL = 1e-9
ServingModelT = DisaggregatedModel | ColocatedModel


@dataclass(frozen=True, slots=True)
class Breach:
    """One invariant that does not hold: ``value`` should be ≤ ``bound`` (ceiling) or ≥ it (floor)."""

    invariant: str
    value: float
    bound: float
    detail: str

    def __str__(self) -> str:
        return f"{self.invariant}: {self.detail} ({self.value:.6g} vs bound {self.bound:.6g})"


class PhysicsInvariantError(RuntimeError):
    """A priced plan breaks physics (module docstring): a bug, never a user error."""

    def __init__(self, rate_rps: float, breaches: list[Breach]) -> None:
        self.rate_rps = rate_rps
        self.breaches = breaches
        lines = "; ".join(str(b) for b in breaches)
        super().__init__(f"physics invariant breached at {rate_rps:.6g} req/s: {lines}")


def _peaks(hw: RoleHardware) -> tuple[float, float]:
    """(GEMM peak, attention peak) FLOP/s per GPU: FP8 where that precision is in use and the GPU has it."""
    bf16, fp8 = hw.gpu.bf16_flops_per_s, hw.gpu.fp8_flops_per_s
    gemm = fp8 if hw.precision.weight_bytes <= 1.0 and fp8 is not None else bf16
    attn = fp8 if hw.precision.kv_bytes <= 1.0 and fp8 is not None else bf16
    return max(gemm, bf16), max(attn, bf16)


def peak_time_s(hw: RoleHardware, phase: Phase, batch: FloatArray, tokens: FloatArray) -> FloatArray:
    """``Σ_op FLOPs_op/peak_op`` of one pass per GPU of a TP group, all layers (module docstring), over
    the operator list of :func:`pdplan.perf.ops.forward_ops`, each op's own ``flops()`` (the FLOPs that
    :func:`pdplan.perf.roofline.phase_time` reports per op, without pricing the kernels)."""
    b = np.asarray(batch, dtype=np.float64)
    n = np.asarray(tokens, dtype=np.float64)
    prec = hw.precision
    shape = PassShape(phase, b, n, np.asarray(float(hw.tp)), prec.act_bytes, prec.weight_bytes, prec.kv_bytes)
    gemm_peak, attn_peak = _peaks(hw)
    out = np.zeros(np.broadcast_shapes(b.shape, n.shape))
    for op in forward_ops(hw.model, shape):
        out = out + op.count * op.flops() / (gemm_peak if op.kind in ("gemm", "moe") else attn_peak)
    return np.asarray(out, dtype=np.float64)


@dataclass(frozen=True, slots=True)
class _Pool:
    """One pool: its hardware, instance count and E[T_pk] per request it serves (module docstring)."""

    name: str
    hw: RoleHardware
    count: int
    request_peak_s: float


def _pools(res: ResolvedScenario[Any], model: ServingModelT) -> list[_Pool]:
    """The pools with E[T_pk]: prefill of L tokens, decode ``n·T_pk(1, L + (n − 1)/2)`` (module docstring)."""
    wl = model.cells
    mid = wl.input_tokens + (wl.decode_steps - 1.0) / 2.0
    tokens, prob = _computed_tokens(res, model)

    def prefill(hw: RoleHardware) -> float:
        return float(prob @ peak_time_s(hw, "prefill", np.ones(1), tokens))

    def decode(hw: RoleHardware) -> float:
        return float(wl.prob @ (wl.decode_steps * peak_time_s(hw, "decode", np.ones(1), mid)))

    if isinstance(model, DisaggregatedModel):
        p, d = model.res.hardware.prefill, model.res.hardware.decode
        return [_Pool("prefill", p, model.x, prefill(p) / p.dp), _Pool("decode", d, model.y, decode(d) / d.dp)]
    c = model.res.hardware.colocated
    # model.z counts attention-DP ranks (pdplan.serving.colocated_dp); the pool's instances are z / dp.
    return [_Pool("colocated", c, model.z // c.dp, (prefill(c) + decode(c)) / c.dp)]


def _computed_tokens(res: ResolvedScenario[Any], model: ServingModelT) -> tuple[FloatArray, FloatArray]:
    """The prompt tokens a prefill computes, per prefill-side bin, with their probabilities: the whole prompt, or
    with a prefix cache the missed tokens of each (bin, class) (at least one; a hit's load is no compute)."""
    lens = res.lengths
    cache = model.cache
    if cache is None:
        return lens.input_tokens, lens.input_marginal()
    new = np.maximum(lens.input_tokens[:, None] - cache.hit_tokens, 1.0)
    return np.asarray(new.ravel(), np.float64), np.asarray((lens.input_marginal()[:, None] * cache.weights).ravel())


def _shortest_computed(res: ResolvedScenario[Any], model: ServingModelT) -> FloatArray:
    """Per prompt bin, the fewest tokens any of its requests computes (the TTFT floor's prefill): its shortest
    quadrature length, less the largest hit of a class it holds requests of."""
    shortest = np.asarray(np.minimum(res.input_points.min(axis=1), res.lengths.input_tokens), np.float64)
    cache = model.cache
    if cache is None:
        return shortest
    held = np.where(cache.weights > 0, cache.hit_tokens, 0.0)
    return np.asarray(np.maximum(shortest - held.max(axis=1), 1.0), np.float64)


def _ceiling(name: str, value: float, bound: float, detail: str) -> list[Breach]:
    return [Breach(name, value, bound, detail)] if value > bound * (1.0 + REL_TOL) else []


@dataclass(frozen=True, slots=True)
class PhysicsBounds:
    """The rate-independent part of the invariants of one deployment (:func:`physics_bounds`), checked
    at any rate by :meth:`breaches`."""

    res: ResolvedScenario[Any]
    model: ServingModelT
    pools: list[_Pool]
    tau_min_s: float
    """Fastest decode step physics allows, ``B(1/p, 0)/BW`` (module docstring)."""
    ttft_floor_in_s: FloatArray
    """``[K]`` per input bin: its shortest prompt's prefill at peak."""
    step_floor_s: FloatArray
    """``[C]`` per cell: its own decode step's weight + KV read at full HBM bandwidth."""

    def ceiling_breaches(self, rate_rps: float) -> list[Breach]:
        """Every ceiling ``rate_rps`` passes (module docstring)."""
        return [*self._compute(rate_rps), *self._decode(rate_rps), *self._link(rate_rps)]

    def breaches(self, rate_rps: float, snapshot: Snapshot | None = None) -> list[Breach]:
        """Every ceiling and floor that fails at ``rate_rps`` (``snapshot``: the model's at that rate)."""
        snap = snapshot if snapshot is not None else self.model.snapshot(np.array([rate_rps]))
        return [*self.ceiling_breaches(rate_rps), *self._ttft(snap), *self._step(snap)]

    def _compute(self, rate_rps: float) -> list[Breach]:
        out: list[Breach] = []
        for pool in self.pools:
            need = rate_rps / pool.count * pool.request_peak_s
            out += _ceiling(
                f"compute ceiling ({pool.name})",
                need,
                float(pool.hw.pp),
                f"{rate_rps:.6g} req/s over {pool.count} instance(s) need {need:.4g} s of peak compute per "
                f"second on each TP rank of an instance, more than its {pool.hw.pp} stage(s) "
                f"({pool.count * pool.hw.gpus_per_instance} GPUs × peak in all)",
            )
        return out

    def _decode(self, rate_rps: float) -> list[Breach]:
        """Decode HBM traffic, KV capacity and seats (module docstring)."""
        pool, wl = self.pools[-1], self.model.cells
        hw, bw = pool.hw, pool.hw.gpu.memory_bytes_per_s
        lam = rate_rps / pool.count
        n_bar, k_bar, tau = _mean_field(self.model, rate_rps)
        ctx = k_bar / max(n_bar, 1e-300)
        traffic = float(step_bytes(hw, np.array(n_bar / hw.pp), np.array(ctx))) / tau
        cap, tau_min = self.model.decode.kv_capacity_tokens, self.tau_min_s
        if not isinstance(self.model, DisaggregatedModel):
            cap *= hw.dp  # a colocated model's decode holds one attention-DP rank's KV (serving.colocated_dp)
        state = self.model.decode.state_tokens_per_seq
        held = kv_footprint(wl, state)  # each sequence also holds its fixed state's token slots (perf.memory)
        resident = max(lam * held.mean_work * tau_min, k_bar + state * n_bar)
        seats = self.res.max_num_seqs * hw.dp  # each DP rank schedules its own max_num_seqs
        return [
            *_ceiling(
                f"decode HBM traffic ({pool.name})",
                traffic,
                bw,
                f"{n_bar:.4g} sequences at {ctx:.4g} context tokens every {tau * 1e3:.4g} ms read "
                f"{traffic:.4g} B/s per GPU, more than its HBM bandwidth",
            ),
            *_ceiling(
                f"KV capacity ({pool.name})",
                resident,
                cap,
                f"{resident:.4g} KV tokens resident per instance (Little's law, at the model's token interval "
                f"or the fastest possible step {tau_min * 1e3:.4g} ms) exceed the {cap:.4g} it holds",
            ),
            *_ceiling(
                f"seats ({pool.name})",
                lam * wl.mean_steps * tau_min,
                float(seats),
                f"sequences in flight at the fastest possible step exceed max_num_seqs {seats}",
            ),
        ]

    def _link(self, rate_rps: float) -> list[Breach]:
        res, model = self.res, self.model
        if not isinstance(model, DisaggregatedModel):
            return []
        hw = model.res.hardware
        kv_b = hw.prefill.precision.kv_bytes
        mean_sent = res.lengths.mean_input()
        window = res.model.kv_window_tokens
        if window is not None:  # every layer windowed: at least E[min(L, w)] tokens go (pdplan.transfer.kv)
            lens = res.lengths
            mean_sent = float(
                lens.prob.ravel() @ np.repeat(np.minimum(lens.input_tokens, window), lens.output_tokens.size)
            )
        need = rate_rps * mean_sent * res.model.kv_bytes_per_token(kv_b)
        need += rate_rps * kv_shape_from_model(res.model, kv_b).state_bytes_per_sequence  # sent once per request
        placement = placement_of(model)
        if placement is not None:  # PPD: the turns appended on decode send nothing (pdplan.serving.ppd_model)
            need *= 1.0 - placement.transfer_reduction
        out: list[Breach] = []
        for side, count, role in (("prefill", model.x, hw.prefill), ("decode", model.y, hw.decode)):
            nics = res.scenario.nics_per_instance or role.tp * role.pp  # default: one NIC per GPU
            out += _ceiling(
                f"link bandwidth ({side} side)",
                need,
                count * nics * hw.link.line_rate_bytes_per_s,
                f"{rate_rps:.6g} req/s send {need:.4g} B/s of KV through {count} × {nics} NIC(s) of {hw.link.name}",
            )
        return out

    def _ttft(self, snap: Snapshot) -> list[Breach]:
        """P(TTFT < own prefill at peak) must be 0 in every TTFT bin (module docstring)."""
        split = self.model.cell_input_bin if isinstance(self.model, ColocatedModel) else None
        cell_in = np.arange(snap.prob.size) // self.res.lengths.output_tokens.size if split is None else split
        floor = np.full(int(snap.ttft_bin.max()) + 1, np.inf)
        np.minimum.at(floor, snap.ttft_bin, self.ttft_floor_in_s[cell_in])
        below = _below(snap, floor)
        if float(below.max()) <= REL_TOL:
            return []
        b = int(np.argmax(below.max(axis=0)))
        worst = float(below[:, b].max())
        return [
            Breach(
                "TTFT floor",
                worst,
                0.0,
                f"TTFT bin {b}: P(TTFT < {floor[b] * 1e3:.4g} ms, its prompt's own prefill at peak) = {worst:.3g}",
            )
        ]

    def _step(self, snap: Snapshot) -> list[Breach]:
        """Each cell's own decode step (the TPOT offset) ≥ its weight + KV bytes ÷ HBM (module docstring)."""
        split = self.model.defined if isinstance(self.model, ColocatedModel) else None
        defined = tpot_defined(self.res) if split is None else split  # colocated with a cache: cells split by class
        short = np.where(defined[None, :], self.step_floor_s[None, :] * (1.0 - REL_TOL) - snap.tpot.offset_s, -np.inf)
        if not bool(defined.any()) or float(short.max()) <= 0.0:
            return []
        r, c = np.unravel_index(int(np.argmax(short)), short.shape)
        wl, own = self.model.cells, float(snap.tpot.offset_s[r, c])
        return [
            Breach(
                "decode step floor",
                own,
                float(self.step_floor_s[c]),
                f"cell {c} (prompt {wl.input_tokens[c]:.0f}, {wl.decode_steps[c]:.0f} steps): its own step "
                f"{own * 1e3:.4g} ms is below its weight + KV read at full HBM bandwidth, "
                f"{float(self.step_floor_s[c]) * 1e3:.4g} ms",
            )
        ]


def _below(snap: Snapshot, floor: FloatArray) -> FloatArray:
    """``P(TTFT_b < floor_b)`` per rate and TTFT bin ``[R, B]``, 0 where it is ≤ REL_TOL. The cdf is
    read once per octave of floors at the octave's top (a bin clear there is clear at its own floor:
    the cdf rises) and then at its own floor only for a bin not clear at the top."""
    out = np.zeros((snap.rates.size, floor.size))
    levels = sorted_unique(floor[np.isfinite(floor)])
    while levels.size:
        group = levels[levels < 2.0 * levels[0]]
        levels = levels[group.size :]
        mask = (floor >= group[0]) & (floor <= group[-1])
        top = snap.ttft.cdf_per_bin(float(group[-1]) * (1.0 - REL_TOL))[:, mask]
        suspect = np.flatnonzero(mask)[top.max(axis=0) > REL_TOL]
        for f in sorted_unique(floor[suspect]):
            own = floor == f
            out[:, own] = snap.ttft.cdf_per_bin(float(f) * (1.0 - REL_TOL))[:, own]
    return np.where(out > REL_TOL, out, 0.0)


def _mean_field(model: ServingModelT, rate_rps: float) -> tuple[float, float, float]:
    """(N̄, K̄, τ̄) of one decode (or colocated) instance, all its attention-DP ranks, at total rate ``rate_rps``."""
    wl = model.cells
    if isinstance(model, DisaggregatedModel):
        fp = decode_fixed_point(np.array([rate_rps / model.y]), wl, model.decode.step)
        return float(fp.mean_seqs[0]), float(fp.mean_context_tokens[0]), float(fp.tau_mean_s[0])
    lam = rate_rps / model.z  # one server: z counts attention-DP ranks (pdplan.serving.colocated_dp)
    tau = model.token_interval_s(lam)
    ranks = model.res.hardware.colocated.dp  # an instance's D ranks share each step
    return ranks * lam * wl.mean_steps * tau, ranks * lam * wl.mean_work * tau, tau


def physics_bounds(res: ResolvedScenario[Any], model: ServingModelT) -> PhysicsBounds:
    """Price the rate-independent bounds of ``model`` on the deployment ``res`` is bound to, once."""
    pools = _pools(res, model)
    first, last = pools[0].hw, pools[-1].hw
    shortest = _shortest_computed(res, model)
    wl = model.cells
    mid = wl.input_tokens + (wl.decode_steps - 1.0) / 2.0
    bw = last.gpu.memory_bytes_per_s
    return PhysicsBounds(
        res,
        model,
        pools,
        float(step_bytes(last, np.array(1.0 / last.pp), np.array(0.0))) / bw,
        peak_time_s(first, "prefill", np.ones(1), shortest),
        step_bytes(last, np.array(1.0 / last.pp), mid) / bw,
    )


def operating_point_breaches(
    res: ResolvedScenario[Any], model: ServingModelT, rate_rps: float, snapshot: Snapshot | None = None
) -> list[Breach]:
    """Every ceiling and floor that fails at ``rate_rps`` (empty: all hold)."""
    return physics_bounds(res, model).breaches(rate_rps, snapshot)


def check_operating_point(
    res: ResolvedScenario[Any],
    model: ServingModelT,
    rate_rps: float,
    *,
    snapshot: Snapshot | None = None,
    bounds: PhysicsBounds | None = None,
) -> None:
    """Raise :class:`PhysicsInvariantError` naming the numbers when a ceiling or floor fails at
    ``rate_rps`` (req/s, below the model's stability limit) on the deployment ``res`` is bound to and its
    serving model ``model``. ``snapshot``: reuse the model's snapshot at exactly that rate; ``bounds``:
    reuse :func:`physics_bounds` of the same pair across rates."""
    found = (bounds or physics_bounds(res, model)).breaches(rate_rps, snapshot)
    if found:
        raise PhysicsInvariantError(rate_rps, found)


def check_ceilings(
    res: ResolvedScenario[Any], model: ServingModelT, rate_rps: float, *, bounds: PhysicsBounds | None = None
) -> None:
    """The ceilings alone (no distributions needed: e.g. at the stability limit itself)."""
    found = (bounds or physics_bounds(res, model)).ceiling_breaches(rate_rps)
    if found:
        raise PhysicsInvariantError(rate_rps, found)


def check_result(res: ResolvedScenario[Any], model: ServingModelT, goodput: float, limit: float) -> PhysicsBounds:
    """The invariants of a result before it is reported: every ceiling and floor at the goodput rate, the ceilings
    at the stability limit (both are rates the result claims the deployment sustains); :class:`PhysicsInvariantError`
    (exit 1) on a breach. Returns the bounds, for more rates."""
    top = limit * (1.0 - 1e-6)
    bounds = physics_bounds(res, model)
    check_operating_point(res, model, min(max(goodput, 1e-12), top), bounds=bounds)
    check_ceilings(res, model, top, bounds=bounds)
    return bounds
