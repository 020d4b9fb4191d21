"""Multi-turn sessions as simulator requests: an open stream of sessions, each a closed loop of turns (seeded).

**Stream.** Sessions start at ``λ/E[T]`` a second (λ the request rate, E[T] the mean turns) with the workload's
arrival process (Poisson, constant or gamma gaps). Turn 1 arrives at its session's start; turn k + 1 is released
when turn k's last token is out, plus a think time drawn from the workload's law. Turn k's prompt is the history
(the system prompt, then every earlier turn's new tokens and output) and its new tokens U_k; it answers O_k tokens
(docs/reuse_workloads.md §1). Turn counts, token counts and think times are drawn from the workload's laws (token
counts with :func:`pdplan.workload.bins.sample`, think times by their quantile function).

**Blocks** (:mod:`pdplan.sim.reuse_requests`). System prompt d's ``⌊S/B⌋`` whole blocks carry ids shared by the
sessions that use it (session s uses d = s mod D: sessions spread evenly over the D prompts); the rest of a session's
token stream (the block holding the end of the system prompt and the start of turn 1 onward) carries ids of its own.
Turn k's prompt is the first ``⌊P_k/B⌋`` blocks of that stream, so it starts with every earlier turn's blocks.

**Stationary start.** A stream that starts empty needs a whole session lifetime to reach its steady load, which for
long sessions outlasts any affordable run. The run therefore starts with the sessions that would be in progress at
t = 0 had the stream always run, in the zero-latency approximation (turns take no time, so a session's turns are
separated by its think times only). By Little's law their number is Poisson of mean ``λ_s·E[T − 1]·E[Z]``; each sits
in the gap after its j-th turn with T drawn ∝ ``(t − 1)·P(T = t)`` (a t-turn session spends t − 1 think times in
gaps), j uniform on 1..T − 1, that gap Z length-biased (density ``z·f(z)/E[Z]``) and its remaining time uniform on
(0, Z) (the residual of a renewal interval). Turns 1..j are not simulated: their history is touched into the caches
before t = 0, oldest first (``warm_*``), each on the instance its session routes to. Sessions finished just before 0
hold no cache room (their last histories hold a steady cache's room until evicted); the warm-up fraction absorbs that
when it outlasts the caches' characteristic time T_C, not otherwise: PPD's decode ranks at 60 s think times have
T_C ≈ 60 s, and 3,000 requests of 4-turn sessions at 30 requests/s (a 21 s warm-up) found 0.74 of the Turn 2+
histories held where 12,000 (81 s) find 0.64, the closed form 0.63 (``benchmarks/ppd_cache_pressure.py``). Real turns
also take their latency D, so more sessions are in
progress than this says: the run lacks the turns that those latencies push past ``t_end``, about
``λ_s·D·E[T(T − 1)]/2`` of them, and offers its counted requests at a rate below the nominal one by that many (2.9 %
at 17 requests/s of 3.1-turn sessions with 60 s think times, D ≈ 6.1 s). The missing turns are late ones (a session
started before 0 supplies the turns a fresh one cannot have reached yet), so the counted turns' mix leans to the
early, short-history turns as D grows: colocated spread sessions at 22.5 requests/s nominal (D ≈ 12 s) counted a mean
turn index of 2.85 where the law's stationary stream has 3.1 (the drawn fresh sessions' own 3.09), prompts of 2,172
tokens against 2,385, 8.6 % less prefill per request. With ``turn_latency_s`` = D > 0 the start places its sessions
in turn cycles of D + Z: Poisson of mean ``λ_s·E[T − 1]·(D + E[Z])`` of them (Little's law over the cycle), the
cycle length-biased (Z's density ``(D + z)·f(z)/(D + E[Z])``), the next turn after a residual uniform on (0, D + Z)
(a session still in its turn's latency is started at its next turn, its turn's load left to the warm-up). D is
the run's own mean turn latency, found by runs from D = 0 to its fixed point (:func:`pdplan.sim.reuse.
simulate_reuse`, ``turn_latency_s=None``). The rate a run offered is :attr:`pdplan.sim.reuse.ReuseResult.offered_rps`.

**Horizon.** Fresh sessions start until ``t_end = N/λ`` (N the requests asked for); requests arriving later (the
later turns of sessions still in progress) are simulated but not counted (``count_until_s``), so the counted
requests see a stationary load. A session ends before its first turn whose prompt and output exceed the context
window (``truncated_sessions``).

**Common random numbers.** The fresh sessions (how many start before ``t_end`` in units of mean gaps, their turns,
tokens and think times) do not depend on the rate; the in-progress ones are drawn one generator per session, so a
higher rate adds sessions without changing the others: every rate of a goodput search sees the same sessions. The
turns a run counts are a compound-Poisson sample: their number, and so the offered rate, has a relative standard
deviation of about ``sqrt(E[T²]/(N·E[T]))`` over seeds (2.5 % for N = 8,000 geometric turns of mean 3.1; seed 0 draws
2,466 fresh sessions of mean 3.05 turns where 2,581 of 3.1 are expected, 6.6 % fewer turns).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pdplan.sim.reuse_requests import DEFAULT_BLOCK_TOKENS, ReuseRequests, check_block_tokens, csr, unit_gaps
from pdplan.specs.reuse import SessionsSpec
from pdplan.specs.session_laws import ExponentialTime, FixedTime, GeometricTurns, LognormalTime, TimeLaw, UniformTime
from pdplan.specs.workload import WorkloadSpec
from pdplan.types import FloatArray, Int64Array
from pdplan.workload.bins import sample


@dataclass(frozen=True, slots=True)
class _Session:
    """One session's draws: new, output and think per turn; its first simulated turn (1-based) and arrival."""

    new: Int64Array
    output: Int64Array
    think_s: FloatArray
    first_turn: int
    first_arrival_s: float


def session_requests(
    spec: SessionsSpec,
    arrival_process: object,
    rate_rps: float,
    n_requests: int,
    *,
    block_tokens: int = DEFAULT_BLOCK_TOKENS,
    seed: int = 0,
    context_window: int | None = None,
    stationary_start: bool = True,
    turn_latency_s: float = 0.0,
) -> ReuseRequests:
    """About ``n_requests`` counted session turns at ``rate_rps`` requests/s (module docstring); ``turn_latency_s``:
    the mean turn latency D the stationary start places its sessions with (0: the zero-latency approximation)."""
    check_block_tokens(block_tokens)
    if not (math.isfinite(turn_latency_s) and turn_latency_s >= 0.0):
        raise ValueError(f"turn latency must be finite and >= 0, got {turn_latency_s}")
    sessions_per_s = spec.sessions_per_s(rate_rps)
    warm = _in_progress(spec, sessions_per_s, seed, turn_latency_s) if stationary_start else []
    fresh = _fresh(spec, arrival_process, sessions_per_s, n_requests / spec.mean_turns(), seed)
    return _assemble(spec, warm + fresh, len(warm), block_tokens, context_window, n_requests / rate_rps)


def _lengths(spec: SessionsSpec) -> WorkloadSpec:
    """The (new tokens, output tokens) pair as a workload, for the workload sampler."""
    return WorkloadSpec.model_validate({"input_tokens": spec.new_tokens, "output_tokens": spec.output_tokens})


def _turns(spec: SessionsSpec, size: int, rng: np.random.Generator) -> Int64Array:
    """``size`` turn counts of the workload's law."""
    law = spec.turns
    if isinstance(law, GeometricTurns):
        return np.asarray(rng.geometric(1.0 / law.mean, size), dtype=np.int64)
    counts, prob = law.pmf()
    return np.asarray(rng.choice(counts, size, p=prob), dtype=np.int64)


def _fresh(
    spec: SessionsSpec, arrival_process: object, sessions_per_s: float, mean_gaps: float, seed: int
) -> list[_Session]:
    """Sessions starting before ``mean_gaps`` mean gaps (t_end), with their turns drawn at once."""
    gaps_rng = np.random.default_rng([seed, 30])
    gaps = unit_gaps(arrival_process, max(16, math.ceil(1.2 * mean_gaps)), gaps_rng)
    while gaps.sum() < mean_gaps:
        gaps = np.concatenate((gaps, unit_gaps(arrival_process, gaps.size, gaps_rng)))
    starts = np.cumsum(gaps)
    starts = starts[starts < mean_gaps] / sessions_per_s
    turns = _turns(spec, starts.size, np.random.default_rng([seed, 31]))
    new, out = sample(_lengths(spec), int(turns.sum()), np.random.default_rng([seed, 32]))
    think = spec.think_time.ppf(np.random.default_rng([seed, 33]).random(int(turns.sum())))
    cuts = np.cumsum(turns)[:-1]
    return [
        _Session(u, o, z, 1, float(t))
        for u, o, z, t in zip(np.split(new, cuts), np.split(out, cuts), np.split(think, cuts), starts, strict=True)
    ]


def _in_progress(spec: SessionsSpec, sessions_per_s: float, seed: int, latency_s: float) -> list[_Session]:
    """Sessions in a turn cycle (latency D, then think) at t = 0 (module docstring, Stationary start), one generator
    each; D = 0 draws exactly what the zero-latency start did."""
    mean_in_gap = sessions_per_s * (spec.mean_turns() - 1.0) * (spec.think_time.mean_s() + latency_s)
    if not mean_in_gap > 0.0:
        return []
    count_rng = np.random.default_rng([seed, 40])
    total, found = 0.0, 0
    while True:
        total += float(count_rng.exponential())
        if total >= mean_in_gap:
            break
        found += 1
    lengths = _lengths(spec)
    out: list[_Session] = []
    for i in range(found):
        rng = np.random.default_rng([seed, 41, i])
        turns = _turns_in_gap(spec, rng)
        gap_turn = int(rng.integers(1, turns))  # j: the gap after turn j
        new, output = sample(lengths, turns, rng)
        think = spec.think_time.ppf(rng.random(turns))
        gap = _cycle_think(spec.think_time, latency_s, rng)
        think[gap_turn - 1] = gap
        out.append(_Session(new, output, think, gap_turn + 1, float(rng.random()) * (gap + latency_s)))
    return out


def _turns_in_gap(spec: SessionsSpec, rng: np.random.Generator) -> int:
    """T of a session found in a think gap: P ∝ (t − 1)·P(T = t). Geometric (p = 1/mean): 2 + NegBin(2, p), whose
    pmf (k + 1)p²(1 − p)^k at k = t − 2 is that weight normalised."""
    law = spec.turns
    if isinstance(law, GeometricTurns):
        return 2 + int(rng.negative_binomial(2, 1.0 / law.mean))
    counts, prob = law.pmf()
    weight = prob * (counts - 1)
    return int(rng.choice(counts, p=weight / weight.sum()))


def _cycle_think(law: TimeLaw, latency_s: float, rng: np.random.Generator) -> float:
    """The think time Z of the turn cycle D + Z found at t = 0: the cycle length-biased, density
    ``(D + z)·f(z)/(D + E[Z])``, i.e. Z length-biased with probability ``E[Z]/(D + E[Z])`` and drawn from f otherwise
    (the mixture's two terms, z·f(z) and D·f(z), normalised). D = 0: :func:`_length_biased` alone, no extra draw."""
    if latency_s == 0.0:
        return _length_biased(law, rng)
    mean_s = law.mean_s()
    if float(rng.random()) * (latency_s + mean_s) < mean_s:
        return _length_biased(law, rng)
    return float(law.ppf(np.array([rng.random()]))[0])


def _length_biased(law: TimeLaw, rng: np.random.Generator) -> float:
    """One think time drawn with density z·f(z)/E[Z]: exponential → gamma of shape 2; lognormal (μ, σ) → lognormal
    (μ + σ², σ); uniform (a, b) → √(a² + U·(b² − a²)); fixed → itself."""
    if isinstance(law, ExponentialTime):
        return float(rng.gamma(2.0, law.mean))
    if isinstance(law, LognormalTime):
        mu = math.log(law.mean) - 0.5 * law.sigma**2
        return float(rng.lognormal(mu + law.sigma**2, law.sigma))
    if isinstance(law, UniformTime):
        return math.sqrt(law.min**2 + float(rng.random()) * (law.max**2 - law.min**2))
    assert isinstance(law, FixedTime)
    return float(law.value)


def _assemble(
    spec: SessionsSpec, sessions: list[_Session], n_warm: int, block_tokens: int, window: int | None, until_s: float
) -> ReuseRequests:
    """The requests of ``sessions`` (session-major ids), their blocks, candidates and warm touches."""
    system = spec.system_prompt_tokens
    n_sys = system // block_tokens
    cols: dict[str, list[FloatArray]] = {k: [] for k in ("P", "O", "U", "arr", "think", "turn", "sess")}
    runs: list[tuple[int, int, int, int]] = []  # per request: system start, system blocks, own start, own blocks
    cands: list[Int64Array] = []
    warm: list[tuple[float, int, int]] = []  # (age, request, blocks)
    next_own, truncated, first_id = spec.distinct_system_prompts * n_sys, 0, 0
    for s, ses in enumerate(sessions):
        prompt = system + np.concatenate(([0], np.cumsum(ses.new + ses.output)[:-1])) + ses.new
        seq = prompt + ses.output
        last = int(np.searchsorted(seq, window, side="right")) if window is not None else seq.size
        truncated += int(last < seq.size)
        if last < ses.first_turn:
            continue
        lookup, pblocks, sblocks = (prompt - 1) // block_tokens, prompt // block_tokens, seq // block_tokens
        ends = np.stack([lookup, pblocks, sblocks], axis=1).ravel()
        sys_start = (s % spec.distinct_system_prompts) * n_sys
        for k in range(ses.first_turn, last + 1):
            runs.append((sys_start, min(n_sys, int(sblocks[k - 1])), next_own, int(sblocks[k - 1]) - n_sys))
            head = np.array([0, min(n_sys, int(lookup[k - 1]))], dtype=np.int64)
            cands.append(np.concatenate((head, ends[: 3 * (k - 1)], lookup[k - 1 : k])))
        take = slice(ses.first_turn - 1, last)
        count = last - ses.first_turn + 1
        arrival = np.full(count, np.nan)
        arrival[0] = ses.first_arrival_s
        for key, values in (("P", prompt[take]), ("O", ses.output[take]), ("U", ses.new[take]), ("arr", arrival)):
            cols[key].append(np.asarray(values, dtype=np.float64))
        cols["think"].append(np.where(np.arange(count) < count - 1, ses.think_s[take], 0.0))
        cols["turn"].append(np.arange(ses.first_turn, last + 1, dtype=np.float64))
        cols["sess"].append(np.full(count, float(s)))
        if s < n_warm:
            age = float(ses.think_s[ses.first_turn - 2]) - ses.first_arrival_s
            warm.append((age, first_id, int(sblocks[ses.first_turn - 2])))
        next_own += int(sblocks[last - 1]) - n_sys
        first_id += count
    return _requests(cols, runs, cands, sorted(warm, reverse=True), block_tokens, until_s, truncated)


def _requests(
    cols: dict[str, list[FloatArray]],
    runs: list[tuple[int, int, int, int]],
    cands: list[Int64Array],
    warm: list[tuple[float, int, int]],
    block_tokens: int,
    until_s: float,
    truncated: int,
) -> ReuseRequests:
    """The :class:`ReuseRequests` of the assembled columns."""
    col = {k: np.concatenate(v) if v else np.zeros(0) for k, v in cols.items()}
    prompt, output = col["P"].astype(np.int64), col["O"].astype(np.int64)
    session, turn = col["sess"].astype(np.int64), col["turn"].astype(np.int64)
    n = prompt.size
    following = np.append(session[1:] == session[:-1], False)
    table = np.asarray(runs, dtype=np.int64).reshape(-1, 4)
    starts, lengths = table[:, [0, 2]], table[:, [1, 3]]
    keep = lengths > 0
    seg_offsets = np.concatenate(([0], np.cumsum(keep.sum(axis=1)))).astype(np.int64)
    cand_offsets, cand_blocks = csr(cands)
    return ReuseRequests(
        block_tokens=block_tokens, input_tokens=prompt, output_tokens=output, arrival_s=col["arr"],
        next_request=np.where(following, np.arange(n) + 1, -1).astype(np.int64), think_s=col["think"],
        count_until_s=until_s, affinity_key=session, session=session, turn=turn,
        lookup_blocks=(prompt - 1) // block_tokens, prompt_blocks=prompt // block_tokens,
        sequence_blocks=(prompt + output) // block_tokens, seg_offsets=seg_offsets,
        seg_start=starts[keep].astype(np.int64), seg_len=lengths[keep].astype(np.int64),
        candidate_offsets=cand_offsets, candidate_blocks=cand_blocks,
        warm_request=np.array([w[1] for w in warm], dtype=np.int64),
        warm_blocks=np.array([w[2] for w in warm], dtype=np.int64), truncated_sessions=truncated,
        new_tokens=col["U"].astype(np.int64),
    )  # fmt: skip
