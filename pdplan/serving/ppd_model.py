"""PPD placement applied to a built xPyD model (:mod:`pdplan.serving.ppd` derives the formulas; docs/prefix_cache.md
§11).

:func:`place_turns` takes the plain-disaggregation model of a ``sessions`` workload and returns the same
:class:`~pdplan.serving.disaggregated.DisaggregatedModel` with the turns the policy places on decode as one more
prefix-cache class per prompt bin, ``decode``:

* **Which rows.** Per prompt bin k, the share ``d_k = Σ_t P(turn t | bin k)·f_t·π_t`` of its requests runs on decode
  (turn t's prompt law over the bins and append classes, :func:`pdplan.serving.ppd_bins.class_bins`: the placed
  mass and the bin's whole mass read off the same token grid, :func:`_decode_bins`).
  They are taken out of the bin's prefill-side hit classes in proportion (a history the decode instance holds was
  refreshed in the prefill cache by the same turn: taken to be a hit there too), the rest, if any, out of its misses.
* **What the turns left find in the prefill caches** (:mod:`pdplan.serving.ppd_hits`): the prompt of their session's
  last turn prefilled on the pool, surviving the gaps since that turn (given why the turns missed on decode:
  :mod:`~pdplan.serving.ppd_miss`) under the prefill caches' own characteristic time with the placement, not the
  previous turn's: each bin's prefill-side mass splits into hits and misses by how often the turns the placement
  leaves in it hit (:func:`_rows`), its hit classes' tokens scale by what a hit holds against plain disaggregation,
  then by one factor over the bins that sets the per-request total turn by turn (:func:`_placed_hit_tokens`), and
  the pool's rows, exposed transfer, slack and DualPath read stage are priced at those tokens (ppd_prices).
* **Prefill pool** (:class:`~pdplan.serving.ppd_pool.PpdPool`): the pool serves only the prefill-side rows, at
  ``λ·(1 − s_D)``; its FCFS wait is that of the thinned stream; the decode rows have no service and wait for no
  prefill, only for the decode step in flight (:mod:`pdplan.serving.ppd_boundary`).
* **KV link**: the decode rows carry no bytes (no service, infinite slack): the link's utilisation and wait fall with
  the bytes saved (a zero-service customer leaves a Lindley recursion unchanged, so the M/G/1 sees the thinned stream
  exactly). The link's wait is always the M/G/1 on its busy times with slack here, never the one-server-fed tandem
  chain of :mod:`pdplan.queueing.link_delay` (its lattice iterates for minutes with the decode rows in it): where
  plain disaggregation uses the chain, a PPD plan's link wait is priced by the other form (a limit).
* **Decode**: the step ``(t0, t1, t2)/(1 − ρ_a)`` with ρ_a at the rate the hit rates hold at (the goodput search's
  fixed point makes the two consistent), and its capacity and KV admission queue recomputed on it
  (:mod:`pdplan.serving.ppd_decode`); ρ_a is capped at ``DECODE_U_MAX`` (past it the appends alone fill the
  instance: the slowed step puts the goodput below that rate), and where the hit rates' rate is past the stretched
  step's capacity its fixed point is taken at 0.99 of that capacity (:func:`~pdplan.serving.ppd_decode.decode_at`:
  finite offsets; the goodput search's probe at that rate then fails, :func:`pdplan.serving.build.goodput_model`).
* **The appends placed** (:func:`_placed`): the law of the append lengths the policy places on decode, over every
  turn, in equal-mass groups; ρ_a takes E[w] over it (not w at the mean append: w is not linear in m, the GEMM ridge
  makes short appends nearly free) and a decode row's TTFT mixes its groups.
* **TTFT of a decode row**: its wait R for the decode step in flight (:mod:`pdplan.serving.ppd_boundary`), then the
  step that carries its append's (first) chunk, a plain step τ_p plus its append's work and the work O of the other
  appends admitted with it (those that arrived during the same step in flight,
  :meth:`~pdplan.serving.ppd_boundary.StepBoundary.carried`; the step in flight and the others' work are of the placed
  appends' work law over turns and groups, :func:`_work_law`; on D attention-DP ranks those of its own rank), and
  the append's further steps:
  ``R + O + τ_p + w(m, h) + (⌈m/C⌉ − 1)·τ'`` with m drawn from the placed groups. The row's offset holds the shortest
  group's ``w + (⌈m/C⌉ − 1)·τ'`` (per quadrature point, h its prompt less the append) and its wait law ``R + O + D``,
  D each group's excess over it (the bin's mean over its points; :class:`~pdplan.serving.ppd_pool.PpdPool`). Under
  convention A the model adds ``(1 + busy/2)·τ'`` to every row (:func:`pdplan.serving.ttft.first_token_s`: the step
  in flight as ``busy·τ'/2`` and the first step), so a decode row's offset gives up ``busy·τ'/2`` (its step in
  flight is R alone; exact at the hit rates' rate, where the goodput's fixed point evaluates it) and ``τ' − τ_p``
  (the appends' mean share of a step, which O replaces). Under B, where the model adds nothing (the prefill streams
  token 1 elsewhere), the offset adds ``τ_p``.
* **The score rule's figures** (:func:`_decisions`, :func:`_law_at`): the decode at x = 0 and x = 1 on the step
  *law*, not on the line the model is priced on. A concave MoE step is the minimum of lines, and each line's model
  is built and the best goodput kept (:mod:`pdplan.serving.decode_lines`); the rule compares the deployment's PD and
  PPD figures (the repository measures them on the engine), so every line's model decides on the law's: the least
  mean step over the law's lines, each stretched by ``1/(1 − ρ_1)`` at x = 1 (the mean field of ``min_i ℓ_i`` is
  ``min_i τ̄_i``, that module's derivation). On a line the mean step τ̄ is already the step at the operating batch
  and context, ``ℓ(λE[n]τ̄, λE[W]τ̄)``; what differed was the line: Qwen3-30B-A3B DP1 at 10 req/s, whose law runs on
  line 1 (τ̄ 23.7 ms, 26.4 ms at x = 1), was decided on line 0's own steps in that line's model (45.2 → 48.2 ms, a
  TPOT loss of 0.066 against the law's 0.115), and at ``tpot_weight: 3.2`` placed every Turn 2+ where the line-1
  model placed turn 4 alone (``tests/unit/test_ppd_dp.py``). Left line-dependent: PD's TTFT reads the model's own
  prefill pool, whose cache hits follow its decode turn durations (8.9 against 8.5 ms of wait there).
* **TPOT**: the stretched step's law, plus the variance of the appends' work in a request's own steps (a Poisson
  number of appends and the ones their work lets in; :class:`~pdplan.serving.ppd_decode.AppendNoise`).
* **Prefill-side rows under convention A**: their KV arrives over the link at a random time of steps of two lengths;
  their offsets give up ``busy·τ'/2 + (τ' − τ_p)`` and their wait law takes the decode side's law instead
  (:meth:`pdplan.serving.ppd_boundary.StepBoundary.arrival_law`). Where the policy places nothing (one-turn
  sessions, a threshold below every append) they keep the model's boundary: the plan is plain disaggregation.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from pdplan.errors import SpecError
from pdplan.queueing import DecodeCapacity
from pdplan.queueing.decode import LinearStepTime
from pdplan.serving.append_price import append_expert_s, append_work_s
from pdplan.serving.cache_mechanisms import ppd_applies
from pdplan.serving.limits import DECODE_U_MAX
from pdplan.serving.roles import DecodePerf
from pdplan.serving.ttft import first_token_s, step_boundary_s
from pdplan.specs.token_pmf import length_pmf
from pdplan.types import FloatArray

if TYPE_CHECKING:
    from pdplan.cache.lru_closed_form import ThinkTime
    from pdplan.serving.ppd import AppendGroups
    from pdplan.serving.ppd_boundary import AppendWork
    from pdplan.serving.ppd_decode import AppendNoise, DecodeAt
    from pdplan.serving.ppd_pool import TurnPlacement
    from pdplan.serving.ppd_ranks import RankWork
    from pdplan.serving.prefix_cache import CacheClasses
    from pdplan.transfer.kv_inputs import TransferConfig

M = TypeVar("M")
"""The serving model placed (a DisaggregatedModel)."""

DECODE_CLASS = "decode"
"""The name of the prefill-side class that holds the turns placed on decode."""

RESIDUE = 1e-9
"""Hit tokens per request on the prefill side below this share of plain disaggregation's are the rounding of the
decode share taken out of the hit classes (every Turn 2+ placed: agent sessions), not hits to scale up to the
placement's total (:func:`_placed_hit_tokens`)."""


@dataclass(frozen=True, slots=True)
class _Plan:
    placement: TurnPlacement
    step: LinearStepTime
    decode_latency_s: FloatArray
    """``[K, J]`` a decode row's own-prefill offset per quadrature point."""
    prefill_shift_s: float
    """Taken out of the prefill-side rows' offsets: the model's step in flight and first step's excess over a plain
    step, which their arrival law holds instead (convention A; :mod:`pdplan.serving.ppd_boundary`)."""
    decode: DecodePerf
    capacity: DecodeCapacity
    """The decode instance's perf and capacity on :attr:`step` (:func:`pdplan.serving.ppd_decode.decode_side`)."""
    noise: AppendNoise | None = None
    """The appends' spread of each request's TPOT (:class:`pdplan.serving.ppd_decode.AppendNoise`)."""


def _pd_ttft_s(model: Any, rate_rps: float, prompt_tokens: FloatArray, base: DecodeAt) -> FloatArray:
    """PD's mean TTFT of prompts of these lengths at the rate, from the plain model: the pool's mean wait, then each
    bin's mean own prefill (its cache classes mixed) and exposed transfer, read at the prompt's length, and under
    convention A the decode step boundary."""
    k = model.res.lengths.input_tokens.size
    w = model.cache.weights
    try:
        wait, _ = model.pool.wait(np.array([rate_rps]))
    except ValueError:
        return np.full(prompt_tokens.shape, math.inf)
    mean = wait.mean_s @ model.bin_prob if wait.mean_s.ndim == 2 else wait.mean_s
    own = (model.pool.point_latency_s.mean(axis=1) + model.exposed_s).reshape(k, -1)
    per_bin = np.einsum("kh,kh->k", own, w)
    boundary = first_token_s(model.convention, np.array([base.tau_s]), base.busy)[0]
    return np.asarray(float(mean[0]) + np.interp(prompt_tokens, model.res.lengths.input_tokens, per_bin) + boundary)


def _all_on_decode(model: Any, x0: DecodeAt, hist: FloatArray, groups: AppendGroups, share: FloatArray,
                   held: FloatArray, think: ThinkTime) -> tuple[DecodeAt, float]:  # fmt: skip
    """``(x1, wait1_s)``: the decode instance at the hit rates' rate with every held Turn 2+ appended on it (the
    repository's x = 1 configuration: ρ_1 = λ/y·Σ_t P(turn t)·f_t·E[w | turn t] over the whole append law in its
    groups) and a decode row's mean wait for the step in flight there (:mod:`pdplan.serving.ppd_boundary`)."""
    from pdplan.serving.cache_domain import cache_rate  # lazy: start-up (issue #27)
    from pdplan.serving.ppd import append_load  # lazy: start-up (issue #27)
    from pdplan.serving.ppd_boundary import StepBoundary  # lazy: start-up (issue #27)
    from pdplan.serving.ppd_ranks import RankWork, settle  # lazy: start-up (issue #27)

    res, rate, y = model.res, cache_rate(model.res), model.y
    n, g = hist.size, groups.tokens.size
    work, _ = append_work_s(
        res.hardware.decode, x0.batch, np.tile(groups.tokens, n), np.repeat(hist, g), res.chunk_tokens
    )
    rho1 = append_load(rate / y, float(share[1:] @ (held[1:] * (work.reshape(n, g)[1:] @ groups.prob))))
    lam1 = rate / y * float(share[1:] @ held[1:])
    hw = res.hardware.decode
    ranks = None
    if hw.dp > 1:  # the ranks' own parts run side by side in a step (pdplan.serving.ppd_ranks)
        weight = np.outer(np.r_[0.0, share[1:] * held[1:]], groups.prob)
        experts = np.tile(append_expert_s(hw, x0.batch, groups.tokens, res.chunk_tokens), n)
        ranks = RankWork.of(hw.dp, work, experts, weight)
    if ranks is None:
        x1 = _law_at(model, rate, rho1)
    else:
        load = ranks.load
        rho1, x1 = settle(rho1, lambda r: _law_at(model, rate, r), lambda a: a.tau_s, lambda t: load(lam1, t))
    wait1 = StepBoundary.of(x1.tau_s, rho1, lam1, x1.busy, think).tabulated()
    return x1, wait1.mean_s


def _law_at(model: Any, rate_rps: float, rho: float) -> DecodeAt:
    """The decode at ``rate_rps`` on its step *law* stretched by ``1/(1 − ρ)``: the least mean step over the law's
    lines (:attr:`~pdplan.serving.roles.DecodePerf.law_lines`, each stretched alike), the line the law runs on there
    (:mod:`pdplan.serving.decode_lines`: the mean field of ``min_i ℓ_i`` is ``min_i τ̄_i``); ``model.decode.step``
    itself where the law is one line and ρ = 0. What the score rule decides on (:func:`_decisions`, module
    docstring): the deployment's figures, whichever line a model is priced on."""
    from pdplan.serving.ppd_decode import decode_at, scaled  # lazy: start-up (issue #27)

    lines = model.decode.law_lines
    if len(lines) == 1 and rho == 0.0:
        return decode_at(model, rate_rps, model.decode.step)
    return min((decode_at(model, rate_rps, scaled(line, rho)) for line in lines), key=lambda at: at.tau_s)


def _decisions(model: Any, rate_rps: float, hist: FloatArray, tokens: FloatArray, x0: DecodeAt,
               x1: tuple[DecodeAt, float]) -> FloatArray:  # fmt: skip
    """``[N, G]`` the score rule's decision per (turn, append group) above the bypass (:func:`routes_to_decode`),
    each group represented by the mean of its appends at or above the bypass, ``tokens``
    (:meth:`~pdplan.serving.ppd.AppendGroups.above`: the part of the group the rule decides), with PD's TTFT from the
    plain model and PPD's on decode at x = 1 (``x1``: :func:`_all_on_decode`, the mean wait for the step in flight
    there, then the append's steps)."""
    from pdplan.serving.ppd import routes_to_decode  # lazy: start-up (issue #27)

    res = model.res
    spec = res.cache.spec.turn_placement
    (at1, wait1_s), n, g = x1, hist.size, tokens.size
    work, steps = append_work_s(res.hardware.decode, x0.batch, np.tile(tokens, n), np.repeat(hist, g), res.chunk_tokens)
    pd_ttft = _pd_ttft_s(model, rate_rps, hist[:, None] + tokens[None, :], x0)
    ppd_ttft = wait1_s + (work + steps * at1.tau_s).reshape(n, g)
    out = np.zeros((n, g))
    for t in range(1, n):
        for j in range(g):
            figures = (float(pd_ttft[t, j]), float(ppd_ttft[t, j]), x0.tau_s, at1.tau_s)
            weights = (spec.ttft_weight, spec.tpot_weight)
            out[t, j] = routes_to_decode(t + 1, float(tokens[j]), spec.append_threshold_tokens, figures, weights)
    return out


@dataclass(frozen=True, slots=True)
class _Setting:
    """What :func:`_plan` reads before it places anything: the decode at the hit rates' rate with nothing appended
    (``x0``), the turns' shares, P(held) and histories, the append law in its groups and, under ``score``, the rule's
    decision per (turn, group) (:func:`_decisions`; None for the other policies)."""

    rate_rps: float
    x0: DecodeAt
    turns: FloatArray
    share: FloatArray
    think: ThinkTime
    held: FloatArray
    free_tokens: float
    hist: FloatArray
    values: FloatArray
    prob: FloatArray
    groups: AppendGroups
    decisions: FloatArray | None


def _setting(model: Any) -> _Setting:
    """:class:`_Setting` of the plain model ``model`` (module docstring)."""
    from pdplan.serving.cache_domain import cache_rate  # lazy: start-up (issue #27)
    from pdplan.serving.ppd import AppendGroups, decode_session_workload, held_probability, turns_pmf  # lazy (#27)
    from pdplan.serving.ppd_decode import decode_at  # lazy: start-up (issue #27)
    from pdplan.serving.prefix_cache import think_law  # lazy: start-up (issue #27)

    res = model.res
    setup, hw = res.cache, res.hardware.decode
    spec, sessions = setup.spec.turn_placement, setup.reuse.sessions
    rate, y = cache_rate(res), model.y
    x0 = decode_at(model, rate, model.decode.step)
    turns = turns_pmf(sessions)
    reach = np.cumsum(turns[::-1])[::-1]
    share = reach / reach.sum()
    think = think_law(sessions.think_time)
    workload = decode_session_workload(sessions, rate, turns)
    held, free = held_probability(workload, x0.free_tokens, y * hw.dp, setup.spec.routing == "affinity")
    hist = np.r_[workload.system_tokens, workload.history_tokens[:-1]]  # H_{k−1} before turn k's append
    law = length_pmf(sessions.new_tokens)
    values = np.asarray(law.values, dtype=np.float64)
    groups = AppendGroups.of(values, law.prob)
    decisions = None
    if spec.policy == "score":  # on the law's figures, not the line priced (_law_at)
        _, above = groups.above(values, law.prob, float(spec.append_threshold_tokens))
        law0 = x0 if len(model.decode.law_lines) == 1 else _law_at(model, rate, 0.0)
        x1 = _all_on_decode(model, law0, hist, groups, share, held, think)
        decisions = _decisions(model, rate, hist, above, law0, x1)
    return _Setting(rate, x0, turns, share, think, held, free, hist, values, law.prob, groups, decisions)


def _plan(model: Any) -> _Plan:
    """Where the turns go at the hit rates' rate, the appends' load and the decode rows' offsets (module docstring)."""
    from pdplan.serving.ppd import append_load  # lazy: start-up (issue #27)
    from pdplan.serving.ppd_decode import AppendNoise  # lazy: start-up (issue #27)
    from pdplan.serving.ppd_ranks import RankWork  # lazy: start-up (issue #27)

    res = model.res
    setup, hw = res.cache, res.hardware.decode
    spec = setup.spec.turn_placement
    y = model.y
    s = _setting(model)
    rate, x0, share, held, hist, groups, decisions = s.rate_rps, s.x0, s.share, s.held, s.hist, s.groups, s.decisions
    n = s.turns.size
    pi, m_bar, appends, chosen = _placed(spec, s.values, s.prob, groups, decisions, share * held)
    placed = held * pi
    on_decode = float(share @ placed)
    mean_m = float(share @ (placed * m_bar)) / on_decode if on_decode > 0 else 0.0
    w_turn, _ = append_work_s(
        hw, x0.batch, np.tile(appends.tokens, n), np.repeat(hist, appends.tokens.size), res.chunk_tokens
    )
    weight = (share * placed)[:, None] * appends.prob[None, :]  # P(turn t, group g) among the placed, × on_decode
    work_law = _work_law(w_turn, weight.ravel())
    ranks = None
    if hw.dp > 1:  # the ranks' own parts run side by side in a step (pdplan.serving.ppd_ranks)
        experts = np.tile(append_expert_s(hw, x0.batch, appends.tokens, res.chunk_tokens), n)
        ranks = RankWork.of(hw.dp, w_turn, experts, weight)
    w_sq_turn = (w_turn**2).reshape(n, -1) @ appends.prob
    w_turn = w_turn.reshape(n, -1) @ appends.prob
    work_s = float(share @ (placed * w_turn)) / on_decode if on_decode > 0 else 0.0
    work_sq_s2 = float(share @ (placed * w_sq_turn)) / on_decode if on_decode > 0 else 0.0
    rho, (step, side, x) = _stretched(
        model, rate, append_load(rate * on_decode / y, work_s), rate * on_decode / y, ranks
    )
    as_ppd = _as_ppd(spec, s.values, groups, decisions)
    fact = (rate, x0, x, held, placed, share, on_decode, mean_m, work_s, rho, s.free_tokens, s.think, appends, chosen)
    facts = _Facts(*fact, as_ppd, m_bar, work_law)
    noise = AppendNoise(on_decode / y, work_sq_s2, rho) if on_decode > 0 else None
    return dataclasses.replace(_finish(model, facts, step, side), noise=noise)


def _stretched(model: Any, rate_rps: float, rho_sum: float, append_rate_per_s: float, ranks: RankWork | None
               ) -> tuple[float, tuple[LinearStepTime, tuple[DecodePerf, DecodeCapacity], DecodeAt]]:  # fmt: skip
    """``(ρ_a, (step, side, x))``: the decode on the step stretched by the appends' load, its capacity and fixed point
    at the rate. ρ_a is the sum's ``λ_a·E[w]`` on one rank; on D > 1 ranks the appends of different ranks in one step
    run side by side and ρ_a depends on the mean step, settled with it (:mod:`pdplan.serving.ppd_ranks`)."""
    from pdplan.serving.ppd_decode import decode_at, decode_side, scaled  # lazy: start-up (issue #27)
    from pdplan.serving.ppd_ranks import settle  # lazy: start-up (issue #27)

    def at(rho: float) -> tuple[LinearStepTime, tuple[DecodePerf, DecodeCapacity], DecodeAt]:
        step = scaled(model.decode.step, rho)
        side = decode_side(model, step)
        return step, side, decode_at(model, rate_rps, step, side[1])

    if ranks is None:
        return rho_sum, at(rho_sum)
    return settle(rho_sum, at, lambda point: point[2].tau_s, lambda tau: ranks.load(append_rate_per_s, tau))


def _work_law(work_s: FloatArray, weight: FloatArray) -> AppendWork | None:
    """The law of a placed append's work ``w(m_g, H_{t−1})`` over turns t and append groups g (``weight``: P(turn t,
    group g) among the placed, up to a factor; :func:`_placed`): its mean is the ``work_s`` that prices ρ_a, its
    spread the mixed steps' and the other appends' (:mod:`pdplan.serving.ppd_boundary`). None where nothing is
    placed."""
    from pdplan.serving.ppd_boundary import AppendWork  # lazy: start-up (issue #27)

    keep = weight > 0
    if not np.any(keep):
        return None
    return AppendWork(np.asarray(work_s[keep], dtype=np.float64), np.asarray(weight[keep], dtype=np.float64))


def _as_ppd(spec: Any, values: FloatArray, groups: AppendGroups, decisions: FloatArray | None) -> bool:
    """Whether the placement is ``ppd``'s by the same expressions (:attr:`TurnPlacement.as_ppd`): the policy ``ppd``,
    or ``score`` placing every append of every Turn 2+ (``decisions[t]``, as :func:`_placed` reads them)."""
    from pdplan.serving.ppd import places_every_append  # lazy: start-up (issue #27)

    if spec.policy == "ppd":
        return True
    return decisions is not None and all(
        places_every_append(spec, values, groups, decisions[t]) for t in range(1, decisions.shape[0])
    )


def _placed(spec: Any, values: FloatArray, prob: FloatArray, groups: AppendGroups, decisions: FloatArray | None,
            weight: FloatArray) -> tuple[FloatArray, FloatArray, AppendGroups, FloatArray]:  # fmt: skip
    """Per turn the share π_t of held turns placed and their mean append; the law of the appends placed on decode
    over every turn (``weight``: each turn's share of requests times P(held)) in equal-mass groups: its E[w] prices
    ρ_a, not w at the mean append (w is not linear in m: the GEMM ridge), and its spread the decode rows' TTFT; and
    ``[T, C]`` whether the policy places each append class of :mod:`pdplan.serving.ppd_bins` in each turn. A turn
    places as the policy decides on its append alone: turns with the same decisions (every turn but under ``score``)
    place alike, worked out once."""
    from pdplan.serving.ppd import AppendGroups, decode_share, placed_law  # lazy: start-up (issue #27)
    from pdplan.serving.ppd_bins import append_classes  # lazy: start-up (issue #27)

    n = weight.size
    classes = append_classes(values, groups, float(spec.append_threshold_tokens))
    chosen = np.zeros((n, int(classes.max()) + 1))
    pi, m_bar, mix = np.zeros(n), np.zeros(n), np.zeros(values.size)
    alike: dict[bytes, tuple[float, float, FloatArray, FloatArray]] = {}
    for t in range(1, n):
        decided = None if decisions is None else decisions[t]
        key = b"" if decided is None else decided.tobytes()
        if key not in alike:
            row = np.zeros(chosen.shape[1])
            law = placed_law(spec, values, prob, groups, decided)
            np.maximum.at(row, classes, (law > 0).astype(np.float64))
            alike[key] = (*decode_share(spec, values, prob, groups, decided), law, row)
        pi[t], m_bar[t], law, chosen[t] = alike[key]
        mix += weight[t] * law
    total = float(mix.sum())
    if total <= 0:
        return pi, m_bar, AppendGroups(np.ones(1), np.ones(1), np.zeros(values.size, dtype=np.intp)), chosen
    return pi, m_bar, AppendGroups.of(values, mix / total), chosen


@dataclass(frozen=True, slots=True)
class _Facts:
    rate_rps: float
    x0: DecodeAt
    x: DecodeAt
    held: FloatArray
    placed: FloatArray
    turn_share: FloatArray
    on_decode: float
    append_tokens: float
    work_s: float
    rho: float
    free_tokens: float
    think: ThinkTime
    appends: AppendGroups
    """The law of the appends placed on decode, in groups (:func:`_placed`)."""
    chosen: FloatArray
    """``[T, C]`` whether the policy places each append class in each turn (:mod:`pdplan.serving.ppd_bins`)."""
    as_ppd: bool
    """:attr:`~pdplan.serving.ppd_pool.TurnPlacement.as_ppd`."""
    placed_append: FloatArray
    """``[N]`` m̄_t: the mean append of turn t's turns placed on decode (:func:`_placed`)."""
    work_law: AppendWork | None
    """The law of a placed append's work over every turn and group (:func:`_work_law`; None: nothing placed)."""


def _finish(model: Any, f: _Facts, step: LinearStepTime, side: tuple[DecodePerf, DecodeCapacity]) -> _Plan:
    """The per-bin shares, bytes saved and the decode rows' offsets of the placement ``f``."""
    from pdplan.serving.ppd import turns_pmf  # lazy: start-up (issue #27)
    from pdplan.serving.ppd_boundary import StepBoundary  # lazy: start-up (issue #27)
    from pdplan.serving.ppd_hits import (  # lazy: start-up (issue #27)
        bin_hit_scale,
        left_bin_hits,
        prefill_view,
        remaining_share,
    )
    from pdplan.serving.ppd_miss import miss_of  # lazy: start-up (issue #27)
    from pdplan.serving.ppd_pool import TurnPlacement  # lazy: start-up (issue #27)
    from pdplan.serving.prefix_cache import bin_edges, turn_bins  # lazy: start-up (issue #27)

    res = model.res
    setup, hw = res.cache, res.hardware.decode
    k = res.lengths.input_tokens.size
    edges = bin_edges(res.lengths.input_tokens)
    per_turn = turn_bins(setup.reuse.sessions, f.placed.size, edges)
    decode_bins = _decode_bins(setup, f, edges)
    bin_mass = model.bin_prob.reshape(k, -1).sum(axis=1)
    per_bin_bytes = np.asarray(model.transfer_bytes).reshape(k, -1)[:, 0]
    latency, excess = _append_offsets(model, f)
    miss = miss_of(res, f.rate_rps, f.free_tokens, model.y * hw.dp, f.held, f.placed)  # the gaps given the misses
    view = prefill_view(res, turns_pmf(setup.reuse.sessions), f.x0.tau_s)
    found = view.prefill_hits(f.placed, f.placed_append, miss)
    hits, plain_hits = found.tokens, found.plain_tokens
    lam = f.rate_rps * f.on_decode / model.y
    boundary = StepBoundary.of(f.x.tau_s, f.rho, lam, f.x.busy, f.think, f.work_law, ranks=hw.dp)
    shift = 0.0  # what the prefill-side rows' offsets give up for their arrival law (ppd_boundary)
    # a decode row's first step is τ_p plus its append; the other appends in it are in its wait (StepBoundary.carried)
    if model.convention == "B":  # token 1 of a decode row comes from the decode step, as under convention A
        latency = latency + boundary.plain_s
    elif math.isfinite(f.x.tau_s):  # the step in flight is the row's wait (PpdPool.wait), not the model's τ̄·busy/2
        latency = latency - step_boundary_s(f.x.busy, f.x.tau_s) - boundary.excess_s
        shift = step_boundary_s(f.x.busy, f.x.tau_s) + boundary.excess_s if f.on_decode > 0 else 0.0
    rows = np.zeros((k, model.cache.classes + 1))
    rows[:, -1] = 1.0
    placement = TurnPlacement(
        policy=setup.spec.turn_placement.policy,
        affine=setup.spec.routing == "affinity",
        domains=model.y * hw.dp,
        rate_rps=f.rate_rps,
        free_tokens=f.free_tokens,
        held=f.held,
        placed=f.placed,
        turn_share=f.turn_share,
        share_on_decode=float(bin_mass @ decode_bins),
        append_tokens=f.append_tokens,
        work_s=f.work_s,
        rho_append=f.rho,
        steps_with_append=float(-math.expm1(-f.rate_rps * f.on_decode / model.y * f.x.tau_s)),
        tpot_factor=_stretch(f),
        bytes_per_request=float(bin_mass @ per_bin_bytes),
        bytes_saved_per_request=float((bin_mass * decode_bins) @ per_bin_bytes),
        turn1_bins=np.asarray(per_turn[0], dtype=np.float64),
        decode_by_bin=np.asarray(decode_bins, dtype=np.float64),
        decode_rows=rows.ravel(),
        boundary=boundary.carried(),
        append_prob=_bin_appends(setup, f, edges),
        append_excess_s=excess,
        arrival=boundary.arrival_law() if model.convention == "A" and f.on_decode > 0 else None,
        as_ppd=f.as_ppd,
        prefill_hit_scale=bin_hit_scale(f.turn_share, f.placed, per_turn, hits, plain_hits),
        prefill_hits=left_bin_hits(_left_by_bin(setup, f, edges), found),
        prefill_hit_share=remaining_share(f.turn_share, f.placed, hits, plain_hits),
    )
    return _Plan(placement, step, np.asarray(latency, dtype=np.float64), shift, *side)


def _left_by_bin(setup: Any, f: _Facts, edges: FloatArray) -> FloatArray:
    """``[N, K]`` L_{t,k} = P(turn t)·Σ_c (1 − held_t·chosen[t, c])·P(bin k, class c | t): the requests of turn t
    with prompts in bin k that the placement leaves on the prefill pool, on :func:`_decode_bins`' token grid (a
    threshold leaves the long appends, whose prompts are longer)."""
    from pdplan.serving.ppd_bins import class_bins  # lazy: start-up (issue #27)

    spec = setup.spec.turn_placement
    joint = class_bins(setup.reuse.sessions, f.placed.size, edges, float(spec.append_threshold_tokens))
    stay = 1.0 - f.held[:, None] * f.chosen
    return np.asarray(f.turn_share[:, None] * np.einsum("tc,ctk->tk", stay, joint), dtype=np.float64)


def _decode_bins(setup: Any, f: _Facts, edges: FloatArray) -> FloatArray:
    """``[K]`` d_k: the share of bin k's requests placed on decode,

        d_k = Σ_t P(turn t)·f_t·Σ_c chosen[t, c]·P(bin k, class c | t) / Σ_t P(turn t)·Σ_c P(bin k, class c | t),

    over the classes the policy places in turn t (:mod:`pdplan.serving.ppd_bins`). Numerator and denominator are read
    off the same law (``class_bins``' token grid): a bin's share is a ratio of masses, and a turn must fall in the
    same bin in both. The denominator once came from :func:`pdplan.serving.prefix_cache.turn_bins`, whose grid rounds
    the parts differently (agent-dualpath-64k: 253 + 176 tokens a turn is 252 + 176 on its step-2 grid, 255 + 175 on
    ``class_bins``' step-5 one, so turn t's prompt drifts by −t and +t tokens): a turn near a bin edge counted in the
    denominator's bin but the numerator's neighbour, and d_k = 7/8 in two bins whose every turn is placed. The
    remaining 1/8 of each stayed on the prefill pool as misses of 49K and 64K tokens (~1.4 and ~2 s prefills each),
    1.2 % of requests that took the pool to 0.24 utilisation and the Turn-1 TTFT P90, which waits behind them, to
    1.44 s (the simulator: 0.25 s, the pool serving Turn 1 alone)."""
    from pdplan.serving.ppd_bins import class_bins  # lazy: start-up (issue #27)

    spec = setup.spec.turn_placement
    joint = class_bins(setup.reuse.sessions, f.placed.size, edges, float(spec.append_threshold_tokens))
    mass = np.einsum("t,tc,ctk->k", f.turn_share * f.held, f.chosen, joint)
    marginal = np.einsum("t,ctk->k", f.turn_share, joint)
    return np.asarray(np.clip(np.where(marginal > 0, mass / np.maximum(marginal, 1e-300), 0.0), 0.0, 1.0))


def _bin_appends(setup: Any, f: _Facts, edges: FloatArray) -> FloatArray:
    """``[K, G]`` per prompt bin, the law of its placed appends over the placed law's groups (``f.appends``): a long
    prompt more often ends in a long append (issue #24 item 6: ``ppd-geo-think``'s decode turns of 3,000+ prompt
    tokens computed 649 tokens on average in the simulator, those under 1,000 tokens 214), so a decode row mixes its
    own bin's groups, not the placed law. With the append classes c of :mod:`pdplan.serving.ppd_bins` (P(bin k, class
    c | turn t), the policy's choice per turn and class, as :func:`_decode_bins`),

        P(g | k) ∝ Σ_c [Σ_t P(turn t)·f_t·chosen[t, c]·P(bin k, class c | t)]·P(g | c),

    P(g | c) the share of class c's appends in group g (a class is one sixteenth of the append law or less, taken to
    fall in bins alike within it). A bin with no placed append keeps the placed law."""
    from pdplan.serving.ppd import AppendGroups  # lazy: start-up (issue #27)
    from pdplan.serving.ppd_bins import append_classes, class_bins  # lazy: start-up (issue #27)

    spec, law = setup.spec.turn_placement, length_pmf(setup.reuse.sessions.new_tokens)
    values, prob = np.asarray(law.values, dtype=np.float64), np.asarray(law.prob, dtype=np.float64)
    threshold = float(spec.append_threshold_tokens)
    classes = append_classes(values, AppendGroups.of(values, prob), threshold)
    joint = class_bins(setup.reuse.sessions, f.placed.size, edges, threshold)  # [C, T, K]
    mass = np.einsum("t,tc,ctk->kc", f.turn_share * f.held, f.chosen, joint)  # [K, C] placed per bin and class
    size = (joint.shape[0], f.appends.prob.size)
    in_class = np.zeros(size)
    np.add.at(in_class, (classes, f.appends.member), prob)
    in_class /= np.maximum(in_class.sum(axis=1, keepdims=True), 1e-300)  # P(g | c)
    per_bin = mass @ in_class
    total = per_bin.sum(axis=1, keepdims=True)
    return np.asarray(np.where(total > 0, per_bin / np.maximum(total, 1e-300), f.appends.prob[None, :]), np.float64)


def _append_offsets(model: Any, f: _Facts) -> tuple[FloatArray, FloatArray]:
    """``(latency [K, J], excess [K, G])``: a decode row's own time on decode from the step after the one in flight,
    ``w(m, h) + (⌈m/C⌉ − 1)·τ'`` with h the point's prompt less the append, at the shortest placed append group
    (per quadrature point), and each group's excess over it (the bin's mean over its points): the row's TTFT law
    mixes the groups (:meth:`pdplan.serving.ppd_boundary.BoundaryLaw.shifted_on_lattice`)."""

    res = model.res
    points = res.input_points
    tokens = np.maximum(f.appends.tokens, 1.0)
    g = tokens.size
    m = np.tile(tokens, points.size)
    work, steps = append_work_s(
        res.hardware.decode, f.x0.batch, m, np.maximum(np.repeat(points.ravel(), g) - m, 0.0), res.chunk_tokens
    )
    more = np.where(steps > 1.0, (steps - 1.0) * f.x.tau_s, 0.0)
    full = (work + more).reshape(*points.shape, g)
    latency = full.min(axis=2)
    with np.errstate(invalid="ignore"):  # unbounded steps (past the decode's stable range): an unbounded excess
        excess = (full - latency[..., None]).mean(axis=1)
    return latency, np.asarray(np.where(np.isnan(excess), np.inf, excess), dtype=np.float64)


def _stretch(f: _Facts) -> float:
    """The mean token interval with the appends over without (the fixed points'; past the decode pool's stable range,
    the step's own stretch 1/(1 − ρ_a))."""
    if math.isfinite(f.x.tau_s) and math.isfinite(f.x0.tau_s) and f.x0.tau_s > 0:
        return f.x.tau_s / f.x0.tau_s
    return 1.0 / (1.0 - min(f.rho, DECODE_U_MAX))


def _column(values: FloatArray, k: int, fill: FloatArray | float) -> FloatArray:
    """Rows ``[K·H, ...]`` with the decode class appended to each bin: ``[K·(H+1), ...]``."""
    arr = np.asarray(values, dtype=np.float64)
    per_bin = arr.reshape(k, -1, *arr.shape[1:])
    extra = np.broadcast_to(np.asarray(fill, dtype=np.float64), (k, 1, *arr.shape[1:]))
    return np.concatenate((per_bin, extra), axis=1).reshape(-1, *arr.shape[1:])


def _rows(model: Any, decode_by_bin: FloatArray, placement: TurnPlacement) -> FloatArray:
    """``[K, H+1]`` P(bin, class): each bin's decode share taken out of its hit classes in proportion (the rest, if
    any, out of its misses; module docstring); then the bin's prefill-side mass R_b split into hits, ``R_b·fraction_b``
    (:func:`pdplan.serving.ppd_hits.left_bin_hits`: how often the turns the placement leaves in bin b hit), shared
    among the hit classes as what is left of plain disaggregation's (as plain disaggregation's before the removal
    where nothing is left, the fastest tier where it had none), and misses. Plain less placed is not the left turns'
    hits: with every held history placed a bin keeps no hit mass, while the turns whose history their decode
    instance no longer held find their session's earlier prompt in the prefill cache, which under the placement sees
    few inserts (ppd-geo-think: 0 against the simulator's 0.0056 of the tokens). Without ``prefill_hits`` the hit
    mass left scales by :attr:`~pdplan.serving.ppd_pool.TurnPlacement.prefill_hit_scale` ρ_b instead."""
    k = model.res.lengths.input_tokens.size
    before = np.array(model.bin_prob, dtype=np.float64).reshape(k, -1)
    p = before.copy()
    moved = p.sum(axis=1) * decode_by_bin
    hit = p[:, 1:].sum(axis=1)
    from_hits = np.minimum(moved, hit)
    p[:, 1:] *= np.where(hit > 0, 1.0 - from_hits / np.maximum(hit, 1e-300), 1.0)[:, None]
    p[:, 0] = np.maximum(p[:, 0] - (moved - from_hits), 0.0)
    left = placement.prefill_hits
    if left is None:
        _scale_hits(p, np.ones(k) if placement.prefill_hit_scale is None else placement.prefill_hit_scale)
        return np.concatenate((p, moved[:, None]), axis=1)
    side, on = p.sum(axis=1), left.modelled > 0
    split = _hit_split(p[:, 1:], before[:, 1:])
    p[on, 1:] = (side * left.fraction)[on, None] * split[on]
    p[on, 0] = (side * (1.0 - left.fraction))[on]
    return np.concatenate((p, moved[:, None]), axis=1)


def _hit_split(left: FloatArray, plain: FloatArray) -> FloatArray:
    """``[K, H−1]`` each bin's hit mass shared among its hit classes: as ``left``'s (the plain hit mass left after the
    decode share), else as ``plain``'s, else all in the first (fastest) tier."""
    out = np.zeros_like(left)
    out[:, 0] = 1.0
    for mass in (plain, left):  # the later wins where it has mass
        total = mass.sum(axis=1, keepdims=True)
        has = total[:, 0] > 0
        out[has] = mass[has] / total[has]
    return out


def _placed_hit_tokens(model: Any, rows: FloatArray, p: TurnPlacement) -> FloatArray:
    """``[K, H]`` the hit tokens of the prefill side's classes under the placement (:mod:`pdplan.serving.ppd_hits`,
    In the serving model): each bin's hit classes' tokens scaled by what a turn-k hit holds under the placement over
    plain disaggregation, mixed over the turns left in the bin (``token_scale`` of
    :func:`~pdplan.serving.ppd_hits.left_bin_hits`: the prompt of the session's last prefill-pool turn, often older
    and shorter than plain disaggregation's previous prompt; a hit's mean tokens turn by turn where plain
    disaggregation has none in the bin), then by one factor over the bins so that the hit tokens per request of
    ``rows`` ``[K, H+1]`` are ``prefill_hit_share`` of plain disaggregation's
    (:func:`pdplan.serving.ppd_hits.remaining_share`, per turn; the per-bin figures mix turns at their means). Without
    ``prefill_hits`` the tokens keep plain disaggregation's and :func:`_rows` scaled the mass by ρ_b."""
    k = rows.shape[0]
    before = model.bin_prob.reshape(k, -1)
    h = before.shape[1]
    tokens = np.array(model.cache.hit_tokens, dtype=np.float64)
    left = p.prefill_hits
    if left is not None:
        placed = np.where(tokens[:, 1:] > 0, tokens[:, 1:] * left.token_scale[:, None], left.mean_tokens[:, None])
        tokens[:, 1:] = np.where(left.modelled[:, None] > 0, placed, tokens[:, 1:])
    if p.prefill_hit_share is not None:
        old = float((before[:, 1:] * model.cache.hit_tokens[:, 1:]).sum())
        now = float((rows[:, 1:h] * tokens[:, 1:]).sum())
        if now > RESIDUE * old:  # else what is left is the decode share's rounding: no hit to scale
            tokens[:, 1:] *= p.prefill_hit_share * old / now
    return tokens


def _scale_hits(p: FloatArray, hit_scale: FloatArray) -> None:
    """Scale each bin's hit mass ``p[:, 1:]`` by ρ_b in place, taking the difference from (ρ_b > 1: at most all
    of) or giving it to the bin's misses ``p[:, 0]``."""
    hit = p[:, 1:].sum(axis=1)
    delta = np.clip(hit * (hit_scale - 1.0), -hit, p[:, 0])
    p[:, 1:] *= np.where(hit > 0, 1.0 + delta / np.maximum(hit, 1e-300), 1.0)[:, None]
    p[:, 0] -= np.where(hit > 0, delta, 0.0)


def _classes(classes: CacheClasses, before: FloatArray, rows: FloatArray, hit_tokens: FloatArray,
             decode_hits: FloatArray) -> CacheClasses:  # fmt: skip
    """The prefix cache's classes with the prefill side's placed ``hit_tokens`` ``[K, H]`` (:func:`_placed_hit_tokens`)
    and the decode class appended (its hit tokens: the history it appends to), and their hit ratios those of the
    prefill side that is left (:func:`_prefill_tiers`)."""
    mass = rows.sum(axis=1, keepdims=True)
    weights = np.where(mass > 0, rows / np.maximum(mass, 1e-300), 0.0)
    weights[mass[:, 0] <= 0, 0] = 1.0
    k, h = classes.weights.shape
    share = np.zeros((k, h + 1, h + 1))
    share[:, :h, :h] = classes.tier_share
    return dataclasses.replace(
        classes,
        names=(*classes.names, DECODE_CLASS),
        weights=weights,
        hit_tokens=np.concatenate((hit_tokens, decode_hits[:, None]), axis=1),
        load_from=(*classes.load_from, None),
        tier_share=share,
        joint=None if classes.joint is None else rows / max(float(rows.sum()), 1e-300),
        **_prefill_tiers(classes, before, rows, hit_tokens),
    )


def _prefill_tiers(classes: CacheClasses, before: FloatArray, rows: FloatArray, hit_tokens: FloatArray
                   ) -> dict[str, Any]:  # fmt: skip
    """The prefill caches' token hit ratios (all tiers and each), read bytes and read-path utilisations with the
    turns placed on decode taken out of their hit classes (:func:`_rows`) and the placed ``hit_tokens``
    (:func:`_placed_hit_tokens`): each class's hit tokens scale by ``Σ_k P'(k, h)·hit'[k, h] / Σ_k P(k, h)·hit[k,
    h]`` (over the same prompt tokens, every turn's, as the simulator counts them; a session's class h is tier h's,
    :attr:`~pdplan.serving.prefix_cache.CacheClasses.tier_share` the identity)."""
    h = classes.weights.shape[1]
    old = (before[:, 1:h] * classes.hit_tokens[:, 1:]).sum(axis=0)
    new = (rows[:, 1:h] * hit_tokens[:, 1:]).sum(axis=0)
    scale = np.where(old > 0, new / np.maximum(old, 1e-300), 1.0)
    tiers = tuple(
        dataclasses.replace(
            t,
            token_hit_ratio=t.token_hit_ratio * f,
            read_bytes_per_s=t.read_bytes_per_s * f,
            path_utilisation={name: u * f for name, u in t.path_utilisation.items()},
        )
        for t, f in zip(classes.tiers, scale.tolist(), strict=True)
    )
    total = float(old.sum())
    ratio = classes.token_hit_ratio * float(new.sum()) / total if total > 0 else classes.token_hit_ratio
    return {"tiers": tiers, "token_hit_ratio": ratio}


def place_turns(built: M, transfer: TransferConfig | None = None) -> M:
    """``model`` (a :class:`~pdplan.serving.disaggregated.DisaggregatedModel` of plain disaggregation; typed Any: the
    module it is built in imports this one) with the policy's turns on decode (module docstring); unchanged where PPD
    does not apply (:func:`~pdplan.serving.cache_mechanisms.ppd_applies`). ``transfer``: the scenario's KV-transfer
    configuration the model was built with (:func:`pdplan.serving.disaggregated.transfer_config`), which the prefill
    rows are priced again with (:mod:`pdplan.serving.ppd_prices`); required where PPD applies."""
    model: Any = built
    if not ppd_applies(model.res) or model.cache is None:
        return built
    from pdplan.serving.dual_path_setup import placed_read_stage  # lazy: PPD only (start-up, issue #27)
    from pdplan.serving.ppd_decode import kv_admission
    from pdplan.serving.ppd_pool import PpdPool
    from pdplan.serving.ppd_prices import placed_prices

    if model.pool.batched is not None:
        raise SpecError("PPD placement with batched prefill is not modelled", field="cache.turn_placement")
    plan = _plan(model)
    p = plan.placement
    k = model.res.lengths.input_tokens.size
    rows = _rows(model, p.decode_by_bin, p)
    hit_tokens = _placed_hit_tokens(model, rows, p)
    if transfer is None:
        raise SpecError("PPD placement needs the model's KV-transfer configuration", field="cache.turn_placement")
    prices = placed_prices(model, hit_tokens, transfer)
    pool_rows = rows.copy()
    pool_rows[:, -1] = 0.0
    prefill_share = float(pool_rows.sum())
    pool = model.pool
    ppd_pool = PpdPool(
        pool.routing,
        pool.instances,
        (pool_rows / max(prefill_share, 1e-300)).ravel(),
        _column(prices.point_latency_s - plan.prefill_shift_s, k, plan.decode_latency_s[:, None, :]),
        _column(prices.point_service_s, k, 0.0),
        None,
        pool.arrival_ca2,
        prefill_share,
        p.decode_rows,
        p,
    )
    decode_hits = np.maximum(model.res.lengths.input_tokens - p.append_tokens, 0.0)
    decode, capacity = plan.decode, plan.capacity
    classes = _classes(model.cache, model.bin_prob.reshape(k, -1), rows, hit_tokens, decode_hits)
    placed: M = dataclasses.replace(
        model,
        pool=ppd_pool,
        exposed_s=_column(prices.exposed_s, k, 0.0),
        point_exposed_s=_column(prices.point_exposed_s, k, 0.0),
        transfer_bytes=_column(model.transfer_bytes, k, 0.0),
        decode=decode,
        capacity=capacity,
        link_service_s=_column(model.link_service_s, k, 0.0),
        link_slack_s=_column(prices.link_slack_s, k, math.inf),
        tandem=None,  # the link's wait as the M/G/1 on its busy times (module docstring)
        far_service_s=None,
        bin_prob=rows.ravel(),
        cache=classes,
        admission=kv_admission(model, decode, capacity, p.rho_append),  # priced here only (unplaced_disaggregated)
        storage_read=placed_read_stage(model.res, prices.storage_read, classes, rows.ravel()),
        append_noise=plan.noise,
    )
    return placed


def places_as_ppd(built: Any) -> bool:
    """Whether the policy places the turns of the plain model ``built`` (what :func:`place_turns` is given) as ``ppd``
    does (:attr:`~pdplan.serving.ppd_pool.TurnPlacement.as_ppd`: the policy ``ppd``, or ``score`` where its rule
    sends every append of every Turn 2+ to decode), read from the rule's decisions alone (:func:`_setting`), without
    placing anything: a ``score`` setting's decisions cost about a fifth of its placement (examples/chat-ppd.yaml:
    3 ms against 16 ms). False where PPD does not apply or :func:`place_turns` refuses (batched prefill)."""
    model: Any = built
    if not ppd_applies(model.res) or model.cache is None or model.pool.batched is not None:
        return False
    s = _setting(model)
    return _as_ppd(model.res.cache.spec.turn_placement, s.values, s.groups, s.decisions)


def as_ppd_twin(twin: M, res: Any) -> M:
    """The model :func:`place_turns` builds on ``res``, taken from ``twin``: the model it built on ``res``'s ``ppd``
    twin (the same bound deployment, bypass threshold, cache rate and decode line, the placement's policy ``ppd``),
    where ``res``'s placement is ``ppd``'s (:func:`places_as_ppd` of its plain model). Only the policy's name and the
    score rule's weights differ between the two settings, and the placement reads them only through the rule's
    decisions, which then place every append as ``ppd`` does (:func:`pdplan.serving.ppd.places_every_append`:
    :func:`~pdplan.serving.ppd.placed_law` is the law times one and :func:`~pdplan.serving.ppd.decode_share`
    ``ppd``'s expressions), so every other field is the twin's, bit for bit: ``res`` and the placement's ``policy``
    are ``res``'s (tests/unit/test_ppd_score.py, field for field against a fresh build)."""
    model: Any = twin
    pool = model.pool
    policy = res.cache.spec.turn_placement.policy
    placement = dataclasses.replace(pool.placement, policy=policy)
    renamed: M = dataclasses.replace(model, res=res, pool=dataclasses.replace(pool, placement=placement))
    return renamed
