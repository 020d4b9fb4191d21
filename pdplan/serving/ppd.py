"""PPD turn placement in the closed form: where a session's Turn 2+ prefill runs in an xPyD deployment (arXiv
2603.13358, "Not All Prefills Are Equal"; repository ``freelulul/vllm-ppd``; docs/prefix_cache.md §11).

**Placement.** Turn 1, and any Turn 2+ whose history its decode instance no longer holds, prefills on the prefill
pool as in plain disaggregation. A Turn 2+ whose previous turn ended on the same decode instance, with that turn's
history ``H_{k−1} = system + (k − 1)·(append + output)`` still in the instance's free HBM, may instead run as an
*append-prefill* inside that instance's decode steps: only its m new tokens are computed, over the h = H_{k−1}
cached ones, and no KV crosses the P→D link.

**Whether the decode instance still holds the history** (:func:`held_probability`). An engine frees a finished
request's blocks into its prefix cache (vLLM's free-block queue, SGLang's radix tree), and the running sequences' KV
is pinned: the histories live in the decode instance's *free* KV, ``C_free = M_kv − K̄ − s·N̄`` (M_kv the
instance's KV capacity in tokens, K̄ and N̄ the mean context tokens and sequences in flight from the decode fixed
point, s the fixed state per sequence), kept under LRU. We reuse the characteristic-time form of
:func:`pdplan.cache.lru_closed_form.session_cache` on it, with the whole history (outputs included: the decode
instance computed them) as the item and the think time as the gap (the decode instance touches the history as the
turn ends). *Approximation*: the free KV is taken at its mean (the running sequences' KV fluctuates around K̄), and
only the previous turn's history counts (``partial_hits=False``: an older, shorter history on the instance would need
the missing turns appended too, which PPD's router does not do).

**Routing.** PPD needs session-affine decode routing: the turn must land on the instance that decoded the previous
one. Under ``cache: routing: affinity`` the router keeps a session on one decode instance (q = 1); under
``load-balance`` the decode instance is picked by load and is the previous turn's with probability ``q = 1/D`` only
(D the decode pool's cache domains: instances × attention-DP ranks), so ``f_k = q · P(G < T_C)``: the reports say so.

**Policy** (:func:`decode_share`). Of the turns whose history is held, the share placed on decode: ``pd`` 0, ``ppd``
1, ``threshold`` ``P(m < append_threshold_tokens)``, ``score`` the repository's decision engine
(:func:`routes_to_decode`, exact logic): Turn 1 → prefill; ``m < PPD_BYPASS_THRESHOLD`` (the threshold, 512 by
default) → decode ("short input bypass"); else decode iff the PD benchmark of that class failed or
``score = w_ttft·(pd_ttft − ppd_ttft)/pd_ttft − w_tpot·(ppd_tpot − pd_tpot)/pd_tpot > 0``. The repository reads the
four figures from its measured PD (x = 0) and PPD (x = 1) configurations per (context class, workload type, QPS);
here they come from this model per (turn index, append-length group) at the rate: PD's TTFT of that turn on the
prefill pool, PPD's on decode, and the decode TPOT without appends (x = 0) and with every held Turn 2+ appended on
decode (x = 1), each on the decode step law (a concave MoE law's least mean step over its lines, whichever line the
model is priced on: :func:`pdplan.serving.ppd_model._law_at`). The rule decides per group only the group's appends
at or above the bypass (those below it go to decode by length), represented by their own mean
(:meth:`AppendGroups.above`); where it places every append, its placement is ``ppd``'s, by the same expressions
(:func:`places_every_append`).

**Mixed-batch pricing** (:func:`~pdplan.serving.append_price.append_work_s`). A decode step runs the GEMMs of its B̄
sequences' rows and their
decode attention; an append of m ≤ C tokens (C the engine's step token budget) adds m GEMM rows and its own causal
attention, m queries over h + m keys. On the roofline split of :func:`pdplan.serving.roles.prefill_split_s` (G the
pass without causal attention, A the causal-attention kernels) the step grows by

    w(m, h) = G(B̄ + m) − G(B̄) + A(√(m(2h + m)))

(the attention equivalence of :func:`pdplan.serving.roles.cached_prefill_perf`: m(2h + m)/2 query-key pairs are
those of a from-scratch prompt of √(m(2h + m)) tokens). A longer append runs as ⌈m/C⌉ − 1 full chunks of C tokens and
a last one, each chunk j attending over h + jC cached keys, one per step. Below the GEMM ridge the extra rows ride on
the weight read the step pays anyway (G(B̄ + m) ≈ G(B̄)); above it they cost their FLOPs.

**Attention data parallelism** (:func:`~pdplan.serving.append_price.rank_gemm_s`; a decode instance of D > 1
attention-DP ranks, e.g. DeepSeek-V3
on DP8/EP8). A session's history lives in one rank's KV (the cache domains above are ranks), so its append's
prefill runs in that rank's step alone: the rank's own budget C, its own B̄ = N̄/D decoding sequences, its dense
layers, all-to-all share and causal attention over its own m tokens, and the routed experts over the instance's
D·B̄ tokens plus those m. The engines synchronise every MoE layer across the ranks (SGLang ``--enable-dp-attention``
with DeepEP: each rank's dispatch and combine wait for every rank's, a rank with nothing to run an idle batch, the
scheduler's ``prepare_mlp_sync_batch`` gathering every rank's token count, sgl-project/sglang; vLLM's
data-parallel MoE engines step in lockstep, ``vllm/v1/engine/core.py`` ``DPEngineCoreProc`` running a dummy batch
on an idle rank), so the rank carrying the append holds every rank's step by its work: the whole instance's step,
hence every co-running sequence on every rank, stretches by ``w``. The pass
:func:`~pdplan.serving.roles.prefill_split_s` prices puts one prompt on *every* rank (``batch = D``): its ``G(B̄ +
m) − G(B̄)`` sends D·m tokens through the experts, as if each rank carried an append (until 2026-12-07: a
1,000-token append over 64 sequences a rank of the agent example's DP8/EP8 B200 instance cost its experts 17.5 ms
where the m tokens over the instance's 512 cost 0.70 ms). The others admitted with an append in its step are those
of its own rank (:class:`~pdplan.serving.ppd_boundary.StepBoundary`, ``ranks``). The appends of different ranks in
one step run side by side: the step lasts the slowest rank's own parts plus every append's experts, so ρ_a is not
``λ_a·E[w]`` (the sum, an upper bound) but the balls-in-bins expectation of :mod:`pdplan.serving.ppd_ranks`, settled
with the mean step it depends on (until 2026-12-07 the sum: ρ_a 0.299 against the simulator's 0.274 on the agent
example). The simulator runs the ranks (:mod:`pdplan.sim.append_ranks`). A session's history lives in its rank's KV
pool (SGLang's ``--enable-dp-attention`` runs one scheduler, with its own KV pool and radix cache, per rank and
dispatches each request to one, ``DataParallelController`` in
``python/sglang/srt/managers/data_parallel_controller.py``; vLLM's DP ranks are engine cores each with its own
scheduler and ``KVCacheManager``): :func:`held_probability` takes each rank as a cache domain holding the instance's
free KV over D (:func:`pdplan.serving.ppd_decode.decode_at`).

**Interference** (:func:`append_load`). Appends arrive at a decode instance at ``λ_a = λ·s_D / D`` (s_D the share
of all requests placed on decode) and each adds ``E[w]`` to the step that carries it. Appends that arrive during a
step join the next one, so a step of mean length τ' carries ``λ_a·τ'`` of them on average (Little's law) and
``τ' = τ(B, K) + λ_a·τ'·E[w]``: every step, hence every co-running sequence's TPOT, stretches by
``1/(1 − ρ_a)`` with ``ρ_a = λ_a·E[w]``, the share of the instance's time the appends take. For the linear step
``τ = t0 + t1·B + t2·K`` that is the step ``(t0, t1, t2)/(1 − ρ_a)`` fed to the decode fixed point, TPOT law and
capacity as before. The share of steps that carry an append is ``1 − e^{−λ_a τ'}`` (Poisson arrivals in one step).
A Turn 2+ placed on decode waits for the step in flight R (:mod:`pdplan.serving.ppd_boundary`: its previous turn
ended at a boundary of this instance, a think time earlier; with zero think time R is a whole step), then its
append's steps: ``TTFT = R + w(m, h) + ⌈m/C⌉·τ'`` (the last step's token is its first token).

The decode pool's KV occupancy rises by the histories held between turns: they fill the free KV (``min(C_free,
W(∞))``), but as freed, evictable blocks they do not take seats from admission (an engine evicts them for a new
sequence); the reports show it. Not modelled: the prefill cache losing the refreshes of the turns placed on decode
(its hit rates stay those of plain disaggregation), an append queued behind another in the same step's budget.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from pdplan.cache.lru_closed_form import SessionWorkload, session_cache
from pdplan.serving.prefix_cache import session_workload
from pdplan.specs.cache import TurnPlacementSpec
from pdplan.specs.reuse import SessionsSpec
from pdplan.specs.session_laws import GeometricTurns
from pdplan.types import FloatArray, IntArray

MIN_REACH = 1e-6
"""Turn indices reached by fewer sessions than this are folded into the last one (as the prefix-cache model does)."""
APPEND_GROUPS = 16
"""The append-length law is priced at this many equal-mass groups (their conditional means) for the score rule."""


def turns_pmf(spec: SessionsSpec) -> FloatArray:
    """P(T = n), n = 1..N: a geometric law (q = 1 − 1/mean) up to the turn reached by fewer than :data:`MIN_REACH` of
    the sessions, its tail folded into that turn; a histogram law as given."""
    if isinstance(spec.turns, GeometricTurns):
        q = spec.turns.ratio
        n = 1 if q <= 0 else max(1, math.ceil(math.log(MIN_REACH) / math.log(q)))
        pmf = (1.0 - q) * q ** np.arange(n)
        pmf[-1] += q**n
        return np.asarray(pmf, dtype=np.float64)
    counts, prob = spec.turns.pmf()
    out = np.zeros(int(counts[-1]))
    out[np.asarray(counts, dtype=np.int64) - 1] = prob
    return out


def held_probability(
    workload: SessionWorkload, free_tokens: float, domains: int, affine: bool
) -> tuple[FloatArray, float]:
    """``(f_k, held tokens)``: per turn k = 1..N the probability that its decode instance still holds the previous
    turn's whole history (f_1 = 0), and the KV tokens the histories take on one instance (module docstring).

    ``workload`` is the whole deployment's sessions with the decode side's view (outputs cached, no turn duration:
    the history is touched as the turn ends); ``free_tokens`` one domain's free KV; ``affine``: session-affine decode
    routing (else the previous turn's instance with probability 1/domains)."""
    result = session_cache(
        workload,
        max(free_tokens, 0.0),
        instances=domains,
        routing="session-affine" if affine else "random",
        partial_hits=False,
    )
    # W(∞) is unbounded (a session's last history stays until evicted), so the LRU fills the free KV: T_C is finite
    return np.asarray(result.history_hit_probability, dtype=np.float64), max(free_tokens, 0.0)


def routes_to_decode(
    turn: int,
    new_tokens: float,
    bypass_tokens: int,
    scores: tuple[float, float, float, float] | None,
    weights: tuple[float, float] = (1.0, 1.0),
) -> bool:
    """The PPD repository's decision (``ppd/optimizer/ppd_decision_engine.py``, ``should_use_ppd`` with its lookup
    table's entry), exactly: Turn 1 → prefill; ``new_tokens < bypass_tokens`` → decode; else, with the class's
    ``scores = (pd_ttft, ppd_ttft, pd_tpot, ppd_tpot)``: decode when PD failed (both PD figures 0, or an infinite
    PD TTFT: no success at that point), else when :func:`score` > 0. ``scores`` None: no data, the engine's
    ``default_use_ppd`` (True)."""
    if turn == 1:
        return False
    if new_tokens < bypass_tokens:
        return True
    if scores is None:
        return True
    pd_ttft, ppd_ttft, pd_tpot, ppd_tpot = scores
    if (pd_ttft == 0 and pd_tpot == 0) or math.isinf(pd_ttft):
        return True
    return score(pd_ttft, ppd_ttft, pd_tpot, ppd_tpot, *weights) > 0


def score(pd_ttft: float, ppd_ttft: float, pd_tpot: float, ppd_tpot: float, w_ttft: float, w_tpot: float) -> float:
    """``w_ttft·(pd_ttft − ppd_ttft)/pd_ttft − w_tpot·(ppd_tpot − pd_tpot)/pd_tpot`` (each term 0 where its PD
    figure is not positive), the repository's ``_calculate_score``."""
    ttft_improvement = (pd_ttft - ppd_ttft) / pd_ttft if pd_ttft > 0 else 0.0
    tpot_degradation = (ppd_tpot - pd_tpot) / pd_tpot if pd_tpot > 0 else 0.0
    return w_ttft * ttft_improvement - w_tpot * tpot_degradation


@dataclass(frozen=True, slots=True)
class AppendGroups:
    """The append-length law in equal-mass groups: each group's probability and conditional mean tokens."""

    prob: FloatArray
    tokens: FloatArray
    member: IntArray
    """Per value of the law, the index of its group."""

    @classmethod
    def of(cls, values: FloatArray, prob: FloatArray, groups: int = APPEND_GROUPS) -> AppendGroups:
        """Split the law (``values`` increasing) by the mass below each value: value i joins group
        ``⌊groups·P(N < v_i)⌋`` (a point mass is one group; groups left empty are dropped)."""
        before = np.cumsum(prob) - prob
        idx = np.minimum(np.floor(groups * before + 1e-12), groups - 1).astype(np.intp)
        mass = np.asarray(np.bincount(idx, weights=prob, minlength=groups), dtype=np.float64)
        tok = np.asarray(np.bincount(idx, weights=prob * values, minlength=groups), dtype=np.float64)
        keep = mass > 0
        kept = np.cumsum(keep) - 1
        return cls(mass[keep], tok[keep] / mass[keep], np.asarray(kept[idx], dtype=np.intp))

    def above(self, values: FloatArray, prob: FloatArray, threshold: float) -> tuple[FloatArray, FloatArray]:
        """``(mass, tokens)`` per group: the probability of its appends of at least ``threshold`` tokens and their
        conditional mean (the group's mean, at least ``threshold``, where it has none). The part of a group the
        ``score`` rule decides: a group that straddles the bypass sends its appends below it to decode by length,
        so its decided part is not its mean but the mean of what lies above (:func:`decode_share`)."""
        keep = values >= threshold
        member = self.member[keep]
        mass = np.bincount(member, weights=prob[keep], minlength=self.prob.size)
        tok = np.bincount(member, weights=prob[keep] * values[keep], minlength=self.prob.size)
        mean = np.where(mass > 0, tok / np.maximum(mass, 1e-300), np.maximum(self.tokens, threshold))
        return np.asarray(mass, dtype=np.float64), np.asarray(mean, dtype=np.float64)


def decode_share(
    spec: TurnPlacementSpec,
    values: FloatArray,
    prob: FloatArray,
    groups: AppendGroups,
    group_to_decode: FloatArray | None,
) -> tuple[float, float]:
    """``(π, E[m | on decode])``: the share of held Turn 2+ turns the policy places on decode and their mean append,
    the mass and mean of :func:`placed_law`.

    ``values``/``prob``: the append law; ``group_to_decode``: for ``score``, per append group whether the rule sends
    its appends at or above the bypass to decode (those below it go by length). A group that straddles the bypass
    adds its part above it at that part's own mean (:meth:`AppendGroups.above`), not at its whole mean (which holds
    the appends the bypass already placed). Where ``score`` places every append (:func:`places_every_append`), its
    share and mean are ``ppd``'s, by the same expressions."""
    thr = float(spec.append_threshold_tokens)
    if spec.policy == "pd":
        return 0.0, 0.0
    if spec.policy == "ppd" or places_every_append(spec, values, groups, group_to_decode):
        return 1.0, float(prob @ values)
    below = values < thr
    share, tokens = float(prob[below].sum()), float(prob[below] @ values[below])
    if spec.policy == "score" and group_to_decode is not None:  # the groups' parts above the bypass, as decided
        mass, mean = groups.above(values, prob, thr)
        share += float(mass @ group_to_decode)
        tokens += float((mass * group_to_decode) @ mean)
    return share, (tokens / share if share > 0 else 0.0)


def places_every_append(
    spec: TurnPlacementSpec, values: FloatArray, groups: AppendGroups, group_to_decode: FloatArray | None
) -> bool:
    """Whether ``score`` places every append of the law: each group with appends at or above the bypass is decided
    for decode (the ones below it go by length). Its placement is then ``ppd``'s: :func:`placed_law` is the law
    times one and :func:`decode_share` returns ``ppd``'s expressions."""
    if spec.policy != "score" or group_to_decode is None:
        return False
    decided = groups.member[values >= float(spec.append_threshold_tokens)]
    return bool(np.all(np.asarray(group_to_decode)[decided] > 0))


def placed_law(
    spec: TurnPlacementSpec,
    values: FloatArray,
    prob: FloatArray,
    groups: AppendGroups,
    group_to_decode: FloatArray | None,
) -> FloatArray:
    """``[V]`` P(the append is ``values[i]`` and the policy places it on decode | the history is held): the law
    :func:`decode_share` sums (``score``: below the threshold by token, above it each value as its group is
    decided; where it places every append, :func:`places_every_append`, ``ppd``'s law)."""
    if spec.policy == "pd":
        return np.zeros(values.shape)
    if spec.policy == "ppd" or places_every_append(spec, values, groups, group_to_decode):
        return np.asarray(prob, dtype=np.float64)
    placed = (values < float(spec.append_threshold_tokens)).astype(np.float64)
    if spec.policy == "score" and group_to_decode is not None:
        placed = np.maximum(placed, np.asarray(group_to_decode, dtype=np.float64)[groups.member])
    return np.asarray(prob * placed, dtype=np.float64)


def append_load(rate_per_instance: float, work_s: float) -> float:
    """ρ_a = λ_a·E[w]: the share of a decode instance's time its appends take (module docstring)."""
    return max(rate_per_instance, 0.0) * max(work_s, 0.0)


def decode_session_workload(spec: SessionsSpec, rate_rps: float, turns: FloatArray) -> SessionWorkload:
    """The sessions as a decode instance sees them: the whole history (outputs included) is its item, touched as
    the turn ends (no turn duration), no shared system prompt apart from the history (it is part of each)."""
    prompts = session_workload(spec, turns, rate_rps, 0.0, outputs_cached=True)
    return dataclasses.replace(prompts, system_prompts=0)
